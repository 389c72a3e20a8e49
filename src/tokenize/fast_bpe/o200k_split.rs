//! A hand-written matcher for GPT-OSS's split pattern (OpenAI's o200k), which tells letter
//! cases apart so that `camelCase` splits before each capital:
//!
//! ```text
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! Call the first bracket "upper" and the second "lower": `\p{Lm}`, `\p{Lo}` and marks are both.
//! Every char starts a match, so the pieces tile the text. Oniguruma tries the alternatives in
//! order, the optional char before the letters taken first, and backtracks the greedy upper run
//! of the first alternative: that run is followed by a lower char that is not upper (`\p{Ll}`,
//! then the lower run goes on), or else the match ends after the last char of the run that is
//! both (or the alternative fails when there is none). The tests compare every code point in the
//! contexts where the alternatives compete, and random strings, with the regex.

use super::char_class::{
    ascii_lowers_end, category, char_at, decode_multibyte, non_ascii, run_end, Category, ASCII,
};
use super::gpt4_split::{contraction_len, space_run_end};

/// The pattern as GPT-OSS's `tokenizer.json` spells it (JSON escapes decoded).
pub(super) const O200K_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

pub(super) struct O200kSplit;

/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`
fn upper(k: Category) -> bool {
    matches!(k, Category::Upper | Category::OtherLetter | Category::Mark)
}

/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`
fn lower(k: Category) -> bool {
    matches!(k, Category::Lower | Category::OtherLetter | Category::Mark)
}

/// `[^\s\p{L}\p{N}]`
fn symbol(k: Category) -> bool {
    !k.is_letter() && !matches!(k, Category::Space | Category::Number)
}

/// `upper* lower+` from `at`. Chars beyond ASCII are decoded in place: in scripts without
/// letter case (Bengali, Thai, Chinese) every letter and mark is on both sides, and the whole
/// word goes through this loop.
fn upper_then_lowers(text: &str, at: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut end = at;
    let mut after_last_both = None;
    while let Some(&b) = bytes.get(end) {
        let (k, len) = if b < 0x80 {
            (ASCII[usize::from(b)], 1)
        } else {
            let (cp, len) = decode_multibyte(bytes, end);
            (non_ascii(cp), len)
        };
        if !upper(k) {
            break;
        }
        end += len;
        if lower(k) {
            after_last_both = Some(end);
        }
    }
    match char_at(text, end) {
        Some((_, Category::Lower)) => Some(run_end(text, end, lower)),
        _ => after_last_both,
    }
}

/// `upper+ lower*` from `at`.
fn uppers_then_lower(text: &str, at: usize) -> Option<usize> {
    let end = run_end(text, at, upper);
    (end > at).then(|| run_end(text, end, lower))
}

impl O200kSplit {
    /// The splitter for `pattern` when it is the known spelling.
    pub(super) fn for_pattern(pattern: &str) -> Option<Self> {
        (pattern == O200K_PATTERN).then_some(O200kSplit)
    }

    /// Appends the pieces of `text` (offset by `base`) to `out`.
    pub(super) fn split(&self, text: &str, base: usize, out: &mut Vec<(usize, usize)>) {
        let mut at = 0;
        while at < text.len() {
            let end = next_end(text, at);
            out.push((base + at, base + end));
            at = end;
        }
    }
}

/// The end of the piece at `start` when it is a run of ASCII letters (with the char before it,
/// when that is the optional prefix) ended by an ASCII byte or the end of the text; `None`
/// otherwise. In ASCII no letter is both upper and lower, so the pattern's letter alternatives
/// come down to `[A-Z]*[a-z]+` or else `[A-Z]+`, and the byte after the run decides the match.
#[inline(always)]
fn ascii_letters_piece(text: &str, start: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let first = *bytes.get(start)?;
    let letters = if first.is_ascii_alphabetic() {
        start
    } else if first < 0x80
        && !matches!(first, b'\r' | b'\n')
        && !first.is_ascii_digit()
        && bytes.get(start + 1).is_some_and(u8::is_ascii_alphabetic)
    {
        start + 1
    } else {
        return None;
    };
    let uppers = letters
        + bytes[letters..]
            .iter()
            .take_while(|b| b.is_ascii_uppercase())
            .count();
    let end = ascii_lowers_end(bytes, uppers);
    match bytes.get(end) {
        Some(&b) if b >= 0x80 => None,
        _ => Some(with_contraction(text, end)),
    }
}

/// `end` past the `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` that may follow the letters ending there.
fn with_contraction(text: &str, end: usize) -> usize {
    match text.as_bytes().get(end) {
        Some(b'\'') => end + contraction_len(&text[end + 1..]).map_or(0, |n| n + 1),
        _ => end,
    }
}

fn next_end(text: &str, start: usize) -> usize {
    if let Some(end) = ascii_letters_piece(text, start) {
        return end;
    }
    let Some((c, k)) = char_at(text, start) else {
        return text.len();
    };
    let after = start + c.len_utf8();
    let prefix = c != '\r' && c != '\n' && !k.is_letter() && k != Category::Number;
    let letters = (prefix.then(|| upper_then_lowers(text, after)).flatten())
        .or_else(|| upper_then_lowers(text, start))
        .or_else(|| prefix.then(|| uppers_then_lower(text, after)).flatten())
        .or_else(|| uppers_then_lower(text, start));
    if let Some(end) = letters {
        return with_contraction(text, end);
    }
    if k == Category::Number {
        let mut end = after;
        for _ in 1..3 {
            match char_at(text, end) {
                Some((d, Category::Number)) => end += d.len_utf8(),
                _ => break,
            }
        }
        return end;
    }
    let symbols_from = match char_at(text, after) {
        Some((_, next)) if c == ' ' && symbol(next) => Some(after),
        _ if symbol(k) => Some(start),
        _ => None,
    };
    if let Some(from) = symbols_from {
        let end = run_end(text, from, symbol);
        return end
            + text.as_bytes()[end..]
                .iter()
                .take_while(|&&b| matches!(b, b'\r' | b'\n' | b'/'))
                .count();
    }
    space_run_end(text, start, |w| category(w) == Category::Space)
}
