//! transformers' `{% generation %}` ... `{% endgeneration %}` blocks.
//!
//! The blocks render their body unchanged; with `return_assistant_tokens_mask` transformers
//! records the character range of each body in the rendered text and trains the tokens that
//! overlap one (`assistant_masks`, what TRL's `assistant_only_loss` trains on). minijinja has no
//! such tag, so the source is rewritten before it compiles: for a plain render into an
//! `{% if true %}` block, which keeps the tags' whitespace handling (`trim_blocks`,
//! `lstrip_blocks`, `-` markers) exactly; for a render that needs the ranges into a
//! `{% filter %}` block, a block tag too, whose filter wraps the body in two noncharacters that
//! [`split_marks`] then takes out again, noting where they stood.

use minijinja::{Error, ErrorKind};

/// Opens a generation body in a marked render.
const START: char = '\u{FDD0}';
/// Closes a generation body in a marked render.
const END: char = '\u{FDD1}';

/// The name of the filter that marks a body.
pub const MARK_FILTER: &str = "__sft_generation";

/// How the tags are rewritten.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    /// Bodies render as they are.
    Transparent,
    /// Bodies are wrapped in the marks [`split_marks`] reads.
    Marked,
}

/// The tag's word (`generation`, `endgeneration`, ...) with its whitespace markers.
fn tag_parts(whole: &str) -> (&str, &str, &str) {
    let inner = &whole[2..whole.len() - 2];
    let lead = if inner.starts_with(['-', '+']) {
        &inner[..1]
    } else {
        ""
    };
    let trail = if inner.ends_with(['-', '+']) && inner.len() > lead.len() {
        &inner[inner.len() - 1..]
    } else {
        ""
    };
    (
        lead,
        inner[lead.len()..inner.len() - trail.len()].trim(),
        trail,
    )
}

/// Whether `source` has a `{% generation %}` tag.
pub fn has_generation_tags(source: &str) -> bool {
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            return false;
        };
        if tag_parts(&tag[..end + 2]).1 == "generation" {
            return true;
        }
        rest = &tag[end + 2..];
    }
    false
}

/// `source` with its generation tags rewritten as `how` says.
pub fn rewrite_generation_tags(source: &str, how: Rewrite) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            rest = "";
            break;
        };
        let whole = &tag[..end + 2];
        let (lead, word, trail) = tag_parts(whole);
        match (word, how) {
            ("generation", Rewrite::Transparent) => {
                out.push_str(&format!("{{%{lead} if true {trail}%}}"))
            }
            ("endgeneration", Rewrite::Transparent) => {
                out.push_str(&format!("{{%{lead} endif {trail}%}}"))
            }
            ("generation", Rewrite::Marked) => {
                out.push_str(&format!("{{%{lead} filter {MARK_FILTER} {trail}%}}"))
            }
            ("endgeneration", Rewrite::Marked) => {
                out.push_str(&format!("{{%{lead} endfilter {trail}%}}"))
            }
            _ => out.push_str(whole),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The filter of a marked render's generation blocks.
pub fn mark_filter(body: String) -> String {
    let mut out = String::with_capacity(body.len() + 2 * START.len_utf8());
    out.push(START);
    out.push_str(&body);
    out.push(END);
    out
}

/// Whether a text holds one of the marks, which a marked render could not tell from its own.
pub fn holds_marks(text: &str) -> bool {
    text.contains([START, END])
}

/// The text of a marked render without its marks, and the byte range of each generation body
/// in it, in the order the bodies were closed (transformers records a body when it has rendered,
/// so a nested body comes before the one around it).
pub fn split_marks(marked: &str) -> Result<(String, Vec<(usize, usize)>), Error> {
    let mut text = String::with_capacity(marked.len());
    let mut open = Vec::new();
    let mut ranges = Vec::new();
    for c in marked.chars() {
        match c {
            START => open.push(text.len()),
            END => {
                let start = open.pop().ok_or_else(unbalanced)?;
                ranges.push((start, text.len()));
            }
            c => text.push(c),
        }
    }
    if !open.is_empty() {
        return Err(unbalanced());
    }
    Ok((text, ranges))
}

fn unbalanced() -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        "a generation block's output was cut apart by the template (by a string method or filter applied to text around it)",
    )
}

/// transformers' assistant mask: a token is trained when its offsets overlap a body's range.
/// `ranges` in the order [`split_marks`] gives them; the walk over both lists is transformers'
/// own (one pass, each range left behind once a token starts at or after its end).
pub fn trained_tokens(offsets: &[(usize, usize)], ranges: &[(usize, usize)]) -> Vec<bool> {
    let mut trained = vec![false; offsets.len()];
    let mut range = 0;
    for (i, &(start, end)) in offsets.iter().enumerate() {
        while range < ranges.len() && start >= ranges[range].1 {
            range += 1;
        }
        if range == ranges.len() {
            break;
        }
        if end > ranges[range].0 {
            trained[i] = true;
        }
    }
    trained
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_found_and_rewritten_with_their_whitespace_markers() {
        let src = "a{%- generation %}b{% endgeneration -%}c{% if x %}{% endif %}";
        assert!(has_generation_tags(src));
        assert!(!has_generation_tags("{% if generation %}{% endif %}"));
        assert_eq!(
            rewrite_generation_tags(src, Rewrite::Transparent),
            "a{%- if true %}b{% endif -%}c{% if x %}{% endif %}"
        );
        assert_eq!(
            rewrite_generation_tags(src, Rewrite::Marked),
            "a{%- filter __sft_generation %}b{% endfilter -%}c{% if x %}{% endif %}"
        );
    }

    #[test]
    fn marks_become_byte_ranges_inner_first() {
        let marked = format!("ü{START}ab{START}c{END}{END}d{START}{END}");
        let (text, ranges) = split_marks(&marked).unwrap();
        assert_eq!(text, "üabcd");
        assert_eq!(ranges, vec![(4, 5), (2, 5), (6, 6)]);
        assert!(split_marks(&format!("{START}a")).is_err());
        assert!(split_marks(&format!("a{END}")).is_err());
    }

    #[test]
    fn tokens_overlapping_a_range_are_trained() {
        let offsets = [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)];
        assert_eq!(
            trained_tokens(&offsets, &[(3, 5), (8, 9)]),
            vec![false, true, true, false, true]
        );
        assert_eq!(trained_tokens(&offsets, &[]), vec![false; 5]);
        // An empty body trains nothing.
        assert_eq!(trained_tokens(&offsets, &[(4, 4)]), vec![false; 5]);
    }
}
