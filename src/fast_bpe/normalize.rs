//! NFC, with the offset bookkeeping HF's `NormalizedString::transform` does.

use std::borrow::Cow;

use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// A normalized piece of the input. `align` is `None` when normalizing changed nothing;
/// otherwise it holds, for every byte of `text`, the original byte range (absolute) of
/// the char it came from.
pub(super) struct Normalized<'a> {
    pub(super) text: Cow<'a, str>,
    pub(super) align: Option<Vec<(usize, usize)>>,
}

/// `base` is where `text` starts in the caller's input.
pub(super) fn nfc(text: &str, base: usize) -> Normalized<'_> {
    if is_nfc_quick(text.chars()) == IsNormalized::Yes {
        return Normalized {
            text: Cow::Borrowed(text),
            align: None,
        };
    }
    let originals: Vec<(usize, usize)> = text
        .char_indices()
        .map(|(i, c)| (base + i, base + i + c.len_utf8()))
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut align = Vec::with_capacity(text.len());
    let mut cursor = 0usize;
    for (c, change) in text.nfc() {
        // An inserted char borrows the range of the char consumed just before it, as HF
        // does; HF gives (0, 0) relative to the piece when nothing was consumed yet.
        let range = if change > 0 {
            cursor
                .checked_sub(1)
                .and_then(|i| originals.get(i).copied())
                .unwrap_or((base, base))
        } else {
            let r = originals.get(cursor).copied().unwrap_or((base, base));
            cursor += 1 + change.unsigned_abs();
            r
        };
        out.push(c);
        align.extend(std::iter::repeat_n(range, c.len_utf8()));
    }
    if out == text {
        return Normalized {
            text: Cow::Borrowed(text),
            align: None,
        };
    }
    Normalized {
        text: Cow::Owned(out),
        align: Some(align),
    }
}
