//! A hand-written matcher for the GPT-4-style split regex used by Qwen2/3 (`\p{N}`), Llama 3
//! (`\p{N}{1,3}`) and Qwen3.5 (marks join letters):
//!
//! ```text
//! (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,K}
//! | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! Qwen3.5 spells the letter run `[\p{L}\p{M}]+` and the symbol run `[^\s\p{L}\p{M}\p{N}]+`:
//! the same pattern with marks counted as letters (a mark may also be the optional char before
//! a run, which ends where the run from the mark itself ends).
//!
//! Every char starts a match of some alternative, so the pieces tile the text and only
//! the end of each match has to be found. Oniguruma takes the first alternative that
//! matches; `next_end` tries them in the same order. ASCII is classed byte by byte; other
//! chars through `char_class`. The tests compare every code point's class and the splits of
//! every code point in context, the corpora and random strings with the regex.

use super::char_class::{
    ascii_letters_end, category, decode_multibyte, non_ascii, Category, COUNT,
};

pub(super) const QWEN_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
pub(super) const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
pub(super) const QWEN35_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Class {
    Other,
    Letter,
    Number,
    Space,
}

/// Each category's class, with marks in `marks`.
const fn classes(marks: Class) -> [Class; COUNT] {
    let mut out = [Class::Other; COUNT];
    let mut i = 0;
    while i < COUNT {
        let category = Category::ALL[i];
        out[i] = match category {
            Category::Upper | Category::Lower | Category::OtherLetter => Class::Letter,
            Category::Mark => marks,
            Category::Number => Class::Number,
            Category::Space => Class::Space,
            Category::Other | Category::PunctOrSymbol => Class::Other,
        };
        i += 1;
    }
    out
}

/// ASCII has no marks, so its classes are the same for every pattern.
const ASCII_CLASS: [Class; 128] = {
    let by_category = classes(Class::Other);
    let mut table = [Class::Other; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = by_category[super::char_class::ASCII[b] as usize];
        b += 1;
    }
    table
};

pub(super) struct Gpt4Split {
    max_digits: usize,
    /// Each category's class under this pattern.
    classes: [Class; COUNT],
}

impl Gpt4Split {
    /// The splitter for `pattern` when it is one of the known spellings.
    pub(super) fn for_pattern(pattern: &str) -> Option<Self> {
        let (max_digits, marks) = match pattern {
            QWEN_PATTERN => (1, Class::Other),
            LLAMA3_PATTERN => (3, Class::Other),
            QWEN35_PATTERN => (1, Class::Letter),
            _ => return None,
        };
        Some(Self {
            max_digits,
            classes: classes(marks),
        })
    }

    /// A char's class under this pattern.
    pub(super) fn class_of(&self, c: char) -> Class {
        self.classes[category(c) as usize]
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

    // Inlined into the scans: left out of line by the compiler (as it once was), the calls
    // cost a glaive load 4.6M more instructions (callgrind), 6 % of the load.
    #[inline(always)]
    fn char_at(&self, text: &str, at: usize) -> Option<(char, Class)> {
        let b = *text.as_bytes().get(at)?;
        if b < 0x80 {
            return Some((char::from(b), ASCII_CLASS[usize::from(b)]));
        }
        let c = text[at..].chars().next()?;
        Some((c, self.classes[non_ascii(c as u32) as usize]))
    }

    /// The end of the run of `class` chars from `at`; ASCII bytes are stepped over without
    /// decoding, and a stretch of other chars (a clause of Chinese or Thai) is decoded in place.
    #[inline(always)]
    fn run_end(&self, text: &str, mut at: usize, class: Class) -> usize {
        let bytes = text.as_bytes();
        loop {
            if class == Class::Letter {
                at = ascii_letters_end(bytes, at);
            }
            while let Some(&b) = bytes.get(at) {
                if b >= 0x80 || ASCII_CLASS[usize::from(b)] != class {
                    break;
                }
                at += 1;
            }
            // Stopped at the end, or at an ASCII byte of another class, or at other chars.
            if bytes.get(at).is_none_or(|&b| b < 0x80) {
                return at;
            }
            while let Some(&b) = bytes.get(at) {
                if b < 0x80 {
                    break;
                }
                let (cp, len) = decode_multibyte(bytes, at);
                if self.classes[non_ascii(cp) as usize] != class {
                    return at;
                }
                at += len;
            }
            if at == bytes.len() {
                return at;
            }
        }
    }

    fn next_end(&self, text: &str, start: usize) -> usize {
        let Some((c, class)) = self.char_at(text, start) else {
            return text.len();
        };
        let after = start + c.len_utf8();
        if c == '\'' {
            if let Some(len) = contraction_len(&text[after..]) {
                return after + len;
            }
        }
        match class {
            Class::Letter => return self.run_end(text, after, Class::Letter),
            Class::Number => {
                let mut end = after;
                for _ in 1..self.max_digits {
                    match self.char_at(text, end) {
                        Some((d, Class::Number)) => end += d.len_utf8(),
                        _ => break,
                    }
                }
                return end;
            }
            _ => {}
        }
        let next = self.char_at(text, after);
        if c != '\r' && c != '\n' && matches!(next, Some((_, Class::Letter))) {
            return self.run_end(text, after, Class::Letter);
        }
        if class == Class::Other {
            return newline_run_end(text, self.run_end(text, after, Class::Other));
        }
        if c == ' ' && matches!(next, Some((_, Class::Other))) {
            let symbols_end = self.run_end(text, after, Class::Other);
            return newline_run_end(text, symbols_end);
        }
        space_run_end(text, start, |c| self.class_of(c) == Class::Space)
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

/// `at` past any `[\r\n]*` that follows it.
pub(super) fn newline_run_end(text: &str, at: usize) -> usize {
    at + text.as_bytes()[at..]
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count()
}

/// Length of the contraction suffix after an apostrophe, matched case-insensitively
/// with Unicode folding (so `ſ`, U+017F, counts as `s`).
pub(super) fn contraction_len(rest: &str) -> Option<usize> {
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

/// DeepSeek V3's first stage, isolating up to three digits.
pub(super) const DIGITS_PATTERN: &str = r"\p{N}{1,3}";

/// DeepSeek V3's stage isolating CJK ideographs and kana.
pub(super) const CJK_KANA_PATTERN: &str = "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+";

fn is_number(c: char) -> bool {
    category(c) == Category::Number
}

pub(super) fn is_cjk_or_kana(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fa5}' | '\u{3040}'..='\u{309f}' | '\u{30a0}'..='\u{30ff}')
}

impl RunSplit {
    pub(super) fn for_pattern(pattern: &str) -> Option<Self> {
        match pattern {
            DIGITS_PATTERN => Some(Self {
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
