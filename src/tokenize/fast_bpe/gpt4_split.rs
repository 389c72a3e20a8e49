//! A hand-written matcher for the GPT-4-style split regex used by Qwen2/3 (`\p{N}`) and
//! Llama 3 (`\p{N}{1,3}`):
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,K}
//! | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! Every char starts a match of some alternative, so the pieces tile the text and only
//! the end of each match has to be found. Oniguruma takes the first alternative that
//! matches; `next_end` tries them in the same order. Char classes come from tables
//! generated from Oniguruma itself; the tests compare every code point's class and the
//! splits of the corpora and random strings with the regex.

use super::unicode_classes::RANGES;

pub(super) const QWEN_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
pub(super) const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Class {
    Other,
    Letter,
    Number,
    Space,
}

const fn ascii_class(b: u8) -> Class {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' => Class::Letter,
        b'0'..=b'9' => Class::Number,
        b'\t'..=b'\r' | b' ' => Class::Space,
        _ => Class::Other,
    }
}

const ASCII: [Class; 128] = {
    let mut table = [Class::Other; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = ascii_class(b as u8);
        b += 1;
    }
    table
};

#[inline]
pub(super) fn class_of(c: char) -> Class {
    let cp = c as u32;
    if cp < 128 {
        return ASCII[cp as usize];
    }
    let i = RANGES.partition_point(|&(_, hi, _)| hi < cp);
    match RANGES.get(i) {
        Some(&(lo, _, class)) if lo <= cp => match class {
            1 => Class::Letter,
            2 => Class::Number,
            3 => Class::Space,
            _ => Class::Other,
        },
        _ => Class::Other,
    }
}

pub(super) struct Gpt4Split {
    max_digits: usize,
}

impl Gpt4Split {
    /// The splitter for `pattern` when it is one of the two known spellings.
    pub(super) fn for_pattern(pattern: &str) -> Option<Self> {
        match pattern {
            QWEN_PATTERN => Some(Self { max_digits: 1 }),
            LLAMA3_PATTERN => Some(Self { max_digits: 3 }),
            _ => None,
        }
    }

    /// Appends the pieces of `text` (offset by `base`) to `out`.
    pub(super) fn split(&self, text: &str, base: usize, out: &mut Vec<(usize, usize)>) {
        let mut at = 0;
        while at < text.len() {
            let end = self.next_end(text, at);
            out.push((base + at, base + end));
            at = end;
        }
    }

    fn next_end(&self, text: &str, start: usize) -> usize {
        let Some((c, class)) = char_at(text, start) else {
            return text.len();
        };
        let after = start + c.len_utf8();
        if c == '\'' {
            if let Some(len) = contraction_len(&text[after..]) {
                return after + len;
            }
        }
        match class {
            Class::Letter => return run_end(text, after, |k| k == Class::Letter),
            Class::Number => {
                let mut end = after;
                for _ in 1..self.max_digits {
                    match char_at(text, end) {
                        Some((d, Class::Number)) => end += d.len_utf8(),
                        _ => break,
                    }
                }
                return end;
            }
            _ => {}
        }
        let next = char_at(text, after);
        if c != '\r' && c != '\n' && matches!(next, Some((_, Class::Letter))) {
            return run_end(text, after, |k| k == Class::Letter);
        }
        if class == Class::Other {
            return newline_run_end(text, run_end(text, after, |k| k == Class::Other));
        }
        if c == ' ' && matches!(next, Some((_, Class::Other))) {
            let symbols_end = run_end(text, after, |k| k == Class::Other);
            return newline_run_end(text, symbols_end);
        }
        space_run_end(text, start, |c| class_of(c) == Class::Space)
    }
}

/// The end of the match of `\s*[\r\n]+|\s+(?!\S)|\s+` at `start`, a whitespace char (`is_space`
/// is `\s`): the run ends after its last line break; without one, `\s+(?!\S)` leaves the last
/// space to what follows, unless the run is a single char or ends the text, where `\s+` takes it
/// all. The GPT-4-style and DeepSeek V3 patterns end with these three alternatives.
#[inline(always)]
pub(super) fn space_run_end(text: &str, start: usize, is_space: impl Fn(char) -> bool) -> usize {
    let mut end = start;
    let mut last_break = None;
    let mut last_start = start;
    while let Some(w) = text.get(end..).and_then(|rest| rest.chars().next()) {
        if !is_space(w) {
            break;
        }
        last_start = end;
        end += w.len_utf8();
        if w == '\r' || w == '\n' {
            last_break = Some(end);
        }
    }
    if let Some(b) = last_break {
        return b;
    }
    if end == text.len() || last_start == start {
        return end;
    }
    last_start
}

// Inlined into the scans: left out of line by the compiler (as it once was), the calls cost a
// glaive load 4.6M more instructions (callgrind), 6 % of the load.
#[inline(always)]
fn char_at(text: &str, at: usize) -> Option<(char, Class)> {
    let c = text.get(at..)?.chars().next()?;
    Some((c, class_of(c)))
}

fn run_end(text: &str, mut at: usize, keep: impl Fn(Class) -> bool) -> usize {
    while let Some((c, class)) = char_at(text, at) {
        if !keep(class) {
            break;
        }
        at += c.len_utf8();
    }
    at
}

/// `at` past any `[\r\n]*` that follows it.
pub(super) fn newline_run_end(text: &str, at: usize) -> usize {
    at + text.as_bytes()[at..]
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count()
}

/// Length of the contraction suffix after an apostrophe, matched case-insensitively
/// with Unicode folding (so `ſ`, U+017F, counts as `s`).
fn contraction_len(rest: &str) -> Option<usize> {
    let mut chars = rest.chars();
    let first = chars.next()?;
    let fold = |c: char| c.to_ascii_lowercase();
    match fold(first) {
        's' | 't' | 'm' | 'd' => Some(1),
        'ſ' => Some('ſ'.len_utf8()),
        'r' | 'v' if chars.next().map(fold) == Some('e') => Some(2),
        'l' if chars.next().map(fold) == Some('l') => Some(2),
        _ => None,
    }
}

/// Splits for patterns that match runs of one char class, `X{1,k}` or `X+`, as DeepSeek
/// V3's first two stages do.
pub(super) struct RunSplit {
    member: fn(char) -> bool,
    max_chars: usize,
}

/// DeepSeek V3's stage isolating CJK ideographs and kana.
const CJK_KANA_PATTERN: &str = "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+";

fn is_number(c: char) -> bool {
    class_of(c) == Class::Number
}

fn is_cjk_or_kana(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fa5}' | '\u{3040}'..='\u{309f}' | '\u{30a0}'..='\u{30ff}')
}

impl RunSplit {
    pub(super) fn for_pattern(pattern: &str) -> Option<Self> {
        match pattern {
            r"\p{N}{1,3}" => Some(Self {
                member: is_number,
                max_chars: 3,
            }),
            CJK_KANA_PATTERN => Some(Self {
                member: is_cjk_or_kana,
                max_chars: usize::MAX,
            }),
            _ => None,
        }
    }

    /// Appends the matches of `text` and the stretches between them (offset by
    /// `base`) to `out`.
    pub(super) fn split(&self, text: &str, base: usize, out: &mut Vec<(usize, usize)>) {
        let mut gap_start = 0;
        let mut run_start = 0;
        let mut run_len = 0;
        for (i, c) in text.char_indices() {
            if (self.member)(c) {
                if run_len == 0 {
                    if gap_start < i {
                        out.push((base + gap_start, base + i));
                    }
                    run_start = i;
                } else if run_len == self.max_chars {
                    out.push((base + run_start, base + i));
                    run_start = i;
                    run_len = 0;
                }
                run_len += 1;
            } else if run_len > 0 {
                out.push((base + run_start, base + i));
                run_len = 0;
                gap_start = i;
            }
        }
        let end = text.len();
        if run_len > 0 {
            out.push((base + run_start, base + end));
        } else if gap_start < end {
            out.push((base + gap_start, base + end));
        }
    }
}
