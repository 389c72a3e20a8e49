//! What several fuzz targets share.

use libfuzzer_sys::arbitrary::{Result, Unstructured};

/// Text made of up to six parts, each one of `pieces` (what the code under test treats
/// specially, so random input hits it often) or arbitrary text.
pub fn text(u: &mut Unstructured, pieces: &[&str]) -> Result<String> {
    let mut s = String::new();
    for _ in 0..u.int_in_range(0..=6)? {
        if u.ratio(1, 2)? {
            s.push_str(u.choose(pieces)?);
        } else {
            let piece: String = u.arbitrary()?;
            s.push_str(&piece);
        }
    }
    Ok(s)
}

/// A built row's trained spans lie inside it and are not empty; a failed build has one of
/// `codes`.
// render_compiled builds no rows.
#[allow(dead_code)]
pub fn check_row(
    built: sft_dataset::error::SftResult<sft_dataset::rows::TokenizedRow>,
    codes: &[sft_dataset::error::ErrorCode],
) {
    match built {
        Ok(row) => {
            for s in row.spans.iter() {
                assert!(s.start < s.end && s.end as usize <= row.ids.len());
            }
        }
        Err(e) => assert!(codes.contains(&e.code), "{e:?}"),
    }
}
