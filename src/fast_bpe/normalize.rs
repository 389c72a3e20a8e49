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

/// One step of a SentencePiece-style normalizer (`Replace` with a string pattern, `Prepend`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Edit {
    Replace { pattern: String, content: String },
    Prepend(String),
}

/// Per byte of a text, the absolute byte range of the input char it stands for, when nothing
/// rewrote it yet: every byte of a char points at the whole char.
pub(super) fn identity_align(text: &str, base: usize) -> Vec<(usize, usize)> {
    let mut align = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        let range = (base + i, base + i + c.len_utf8());
        align.extend(std::iter::repeat_n(range, c.len_utf8()));
    }
    align
}

/// Applies `edits` in order. With `align` (one entry per byte of `text`), keeps it in step the
/// way HF's `NormalizedString` does: a replacement's chars all take the alignment of the last
/// byte of what they replace, and prepended chars take the first char's.
pub(super) fn apply_edits<'a>(
    text: &'a str,
    mut align: Option<Vec<(usize, usize)>>,
    edits: &[Edit],
) -> (Cow<'a, str>, Option<Vec<(usize, usize)>>) {
    let mut out = Cow::Borrowed(text);
    for edit in edits {
        match edit {
            Edit::Replace { pattern, content } => {
                if !out.contains(pattern.as_str()) {
                    continue;
                }
                if let Some(old) = &align {
                    let mut new_align = Vec::with_capacity(old.len() + content.len());
                    let mut last = 0;
                    for (at, m) in out.match_indices(pattern.as_str()) {
                        new_align.extend_from_slice(&old[last..at]);
                        let range = old[at + m.len() - 1];
                        new_align.extend(std::iter::repeat_n(range, content.len()));
                        last = at + m.len();
                    }
                    new_align.extend_from_slice(&old[last..]);
                    align = Some(new_align);
                }
                out = Cow::Owned(out.replace(pattern.as_str(), content));
            }
            Edit::Prepend(prefix) => {
                if out.is_empty() {
                    continue;
                }
                if let Some(old) = &mut align {
                    let first = old[0];
                    old.splice(0..0, std::iter::repeat_n(first, prefix.len()));
                }
                out = Cow::Owned(format!("{prefix}{out}"));
            }
        }
    }
    (out, align)
}
