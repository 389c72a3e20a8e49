//! NFC, with the offset bookkeeping HF's `NormalizedString::transform` does.

use std::borrow::Cow;

use std::sync::LazyLock;

use unicode_normalization_alignments::char::{
    canonical_combining_class, compose, decompose_canonical,
};
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// A normalized piece of the input. `align` is `None` when normalizing changed nothing;
/// otherwise it holds, for every byte of `text`, the original byte range (absolute) of
/// the char it came from.
pub(super) struct Normalized<'a> {
    pub(super) text: Cow<'a, str>,
    pub(super) align: Option<Vec<(usize, usize)>>,
}

/// Chars below U+10000 that the NFC quick check passes over: combining class 0 and
/// `NFC_Quick_Check=Yes`, so that the check's only step for them is to reset the last combining
/// class. One bit each, made on first use.
static INERT: LazyLock<Box<[u64]>> = LazyLock::new(|| {
    let mut bits = vec![0u64; 0x1_0000 / 64].into_boxed_slice();
    for cp in 0..0x1_0000u32 {
        let Some(c) = char::from_u32(cp) else {
            continue;
        };
        if canonical_combining_class(c) == 0
            && is_nfc_quick(std::iter::once(c)) == IsNormalized::Yes
        {
            bits[cp as usize / 64] |= 1 << (cp % 64);
        }
    }
    bits
});

/// Builds the table of `quick_check_yes` now (a few milliseconds), so that the first text
/// encoded does not pay for it.
pub(super) fn prepare_nfc() {
    LazyLock::force(&INERT);
}

/// Whether NFC leaves `text` as it is, found without normalizing it: the quick check of UAX #15,
/// with the chars of `INERT` (ASCII, and most letters of most scripts) passed over at one lookup
/// each. Where the check answers Maybe (a char that may compose with what precedes it, such as
/// Bengali's vowel sign AA after the vowel sign E), `stays_after` settles the common case
/// without normalizing; the rest is normalized. A true answer is always right; a false one
/// only costs the normalization.
fn unchanged_by_nfc(text: &str) -> bool {
    let start = ascii_prefix_len(text.as_bytes());
    if start == text.len() {
        return true;
    }
    let inert = &**INERT;
    let mut last_class = 0u8;
    let mut previous = text[..start].chars().next_back();
    for c in text[start..].chars() {
        let cp = c as u32;
        if cp < 0x1_0000 && inert[cp as usize / 64] & (1 << (cp % 64)) != 0 {
            last_class = 0;
            previous = Some(c);
            continue;
        }
        let class = canonical_combining_class(c);
        if class != 0 && last_class > class {
            return false;
        }
        match is_nfc_quick(std::iter::once(c)) {
            IsNormalized::Yes => {}
            IsNormalized::Maybe if stays_after(previous, c) => {}
            _ => return false,
        }
        last_class = class;
        previous = Some(c);
    }
    true
}

/// Whether NFC keeps `c`, a char that may be the second of a composition (quick check Maybe),
/// right after `previous` in a text that passes the quick check everywhere else. It does when
/// nothing precedes it; when it is a starter itself (combining class 0) after a mark, which
/// blocks it from every earlier starter (Bengali's vowel sign AA after a nukta); and when it
/// follows a starter that NFC leaves whole (no decomposition) and that does not compose with
/// it: that starter is the last one before `c` and blocks any earlier one. In each case what
/// stands before `c` stays: a Yes char is never composed away, and a Maybe char is checked the
/// same way in its turn. Anything else is left to the normalization.
fn stays_after(previous: Option<char>, c: char) -> bool {
    let Some(p) = previous else {
        return true;
    };
    let previous_class = canonical_combining_class(p);
    if previous_class != 0 {
        return canonical_combining_class(c) == 0;
    }
    if compose(p, c).is_some() {
        return false;
    }
    let mut whole = true;
    decompose_canonical(p, |d| whole &= d == p);
    whole
}

/// `base` is where `text` starts in the caller's input.
pub(super) fn nfc(text: &str, base: usize) -> Normalized<'_> {
    if unchanged_by_nfc(text) {
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

/// How many bytes `bytes` starts with below 0x80. Blocks are tested whole (a test the
/// compiler vectorizes) before the first other byte is looked for one by one.
fn ascii_prefix_len(bytes: &[u8]) -> usize {
    const BLOCK: usize = 32;
    let mut at = 0;
    while let Some(block) = bytes.get(at..at + BLOCK) {
        if block.iter().fold(0u8, |high, &b| high | b) >= 0x80 {
            break;
        }
        at += BLOCK;
    }
    bytes[at..]
        .iter()
        .position(|&b| b >= 0x80)
        .map_or(bytes.len(), |k| at + k)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ascii_prefix_ends_at_the_first_other_byte() {
        for len in [0usize, 1, 31, 32, 33, 64, 100] {
            let ascii = "a".repeat(len);
            assert_eq!(ascii_prefix_len(ascii.as_bytes()), len);
            for at in [0, len / 2, len.saturating_sub(1)] {
                if at >= len {
                    continue;
                }
                let mut bytes = ascii.clone().into_bytes();
                bytes[at] = 0x80;
                assert_eq!(ascii_prefix_len(&bytes), at, "len {len}, at {at}");
            }
        }
    }

    #[test]
    fn nfc_equals_the_full_normalization_after_ascii_runs() {
        // ASCII runs of every length around the block size, then marks that compose with the
        // last ASCII letter, precomposed letters, Hangul jamo and a singleton (U+212B).
        let others = [
            "\u{301}",
            "\u{327}\u{301}",
            "é",
            "\u{1100}\u{1161}",
            "\u{212b}",
            "ſ",
            "\u{0f73}",
        ];
        let mut rng = crate::test_support::Rng(0xacc_e17);
        let mut changed = 0;
        for _ in 0..5_000 {
            let mut text = String::new();
            for _ in 0..1 + rng.below(4) {
                text.extend((0..rng.below(70)).map(|i| (b'a' + (i % 26) as u8) as char));
                if rng.chance(70) {
                    text.push_str(others[rng.below(others.len())]);
                }
            }
            let expected: String = text.nfc().map(|(c, _)| c).collect();
            let got = nfc(&text, 5);
            assert_eq!(got.text, expected, "{text:?}");
            assert_eq!(got.align.is_some(), expected != text, "{text:?}");
            changed += usize::from(expected != text);
        }
        assert!(changed > 1_000, "only {changed} texts changed");
    }

    #[test]
    fn chars_that_may_compose_are_normalized_exactly_where_they_do() {
        // Chars the quick check answers Maybe for (the second of a composition: Bengali and
        // Tamil length marks, Hangul vowels and finals, combining accents) next to what they
        // compose with and to what they do not: consonants, precomposed letters, syllables
        // with and without a final, marks of other classes.
        let pool = [
            "ক", "ে", "া", "ৗ", "ো", "্", "ি", "\u{9bc}", "ত", "ৌ", "க", "ெ", "ா", "ௗ", "ொ", "\u{1100}",
            "\u{1161}", "\u{11a8}", "가", "각", "a", "e", "é", "\u{301}", "\u{327}", "\u{308}",
            "\u{323}", "ü", "ω", "\u{345}", "ಕ", "ೆ", "ೕ", "ೖ", "ේ", "ා", "ෙ", " ",
        ];
        let mut rng = crate::test_support::Rng(0xb3_4ca1);
        let (mut changed, mut kept) = (0, 0);
        for _ in 0..20_000 {
            let text: String = (0..1 + rng.below(10))
                .map(|_| pool[rng.below(pool.len())])
                .collect();
            let expected: String = text.nfc().map(|(c, _)| c).collect();
            let got = nfc(&text, 0);
            assert_eq!(got.text, expected, "{text:?}");
            assert_eq!(got.align.is_some(), expected != text, "{text:?}");
            if unchanged_by_nfc(&text) {
                assert_eq!(expected, text, "{text:?}");
                kept += 1;
            } else if expected != text {
                changed += 1;
            }
        }
        assert!(
            changed > 2_000 && kept > 2_000,
            "{changed} changed, {kept} kept"
        );
    }

    #[test]
    fn the_check_agrees_with_the_crate_on_every_script() {
        // Any code point, and runs of letters and marks of many scripts (whose order of
        // combining classes the check looks at), with composing pairs among them.
        let ranges = [
            (0x80u32, 0x1_0000u32),
            (0x0300, 0x0370),
            (0x0590, 0x0700),
            (0x0900, 0x0A00),
            (0x0E00, 0x0E80),
            (0x1100, 0x1200),
            (0x3040, 0x3100),
            (0xAC00, 0xAC40),
            (0x1_0000, 0x11_0000),
        ];
        let mut rng = crate::test_support::Rng(0x9c_0ffe);
        let (mut yes, mut other) = (0, 0);
        for _ in 0..50_000 {
            let mut text = String::new();
            for _ in 0..1 + rng.below(12) {
                if rng.chance(20) {
                    text.push('a');
                }
                let (from, to) = ranges[rng.below(ranges.len())];
                text.extend(char::from_u32(
                    from + rng.below((to - from) as usize) as u32,
                ));
            }
            // Where the crate's check says Yes, so does this one; where this one says the
            // text is unchanged, NFC agrees.
            let unchanged = unchanged_by_nfc(&text);
            if is_nfc_quick(text.chars()) == IsNormalized::Yes {
                assert!(unchanged, "{text:?}");
            }
            if unchanged {
                let normalized: String = text.nfc().map(|(c, _)| c).collect();
                assert_eq!(normalized, text, "{text:?}");
                yes += 1;
            } else {
                other += 1;
            }
        }
        assert!(yes > 5_000 && other > 5_000, "{yes} yes, {other} other");
    }
}
