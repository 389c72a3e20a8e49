//! A hand-written matcher for DeepSeek V3's third split stage (after its digit and CJK stages):
//!
//! ```text
//! [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//! | ?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//! ```
//!
//! Unlike the GPT-4-style pattern, some chars start no match (digits, controls, format chars):
//! they are kept as the stretches between matches, as `Split(Isolated)` keeps them. Oniguruma
//! takes the first alternative that matches at the leftmost position; `match_end` tries them in
//! the same order. Char classes come from `char_class` (Oniguruma's own); the tests
//! compare every code point's class and the splits of every code point in context and of random
//! strings with the regex.

use super::char_class::{self, ascii_letters_end, ascii_non_digits_end, category, Category, COUNT};
use super::gpt4_split::{
    is_cjk_or_kana, newline_run_end, space_run_end, CJK_KANA_PATTERN, DIGITS_PATTERN,
};

/// The pattern as DeepSeek V3's `tokenizer.json` spells it (JSON escapes decoded).
pub(super) const DEEPSEEK_V3_PATTERN: &str = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum WordClass {
    Other,
    /// `[\p{L}\p{M}]`
    LetterOrMark,
    /// `[\p{P}\p{S}]`
    PunctOrSymbol,
    /// `\s`
    Space,
}

/// The class of each category, by its number: a load per char where a `match` compiles to a
/// jump through a table, which the split's loop mispredicts.
const CLASSES: [WordClass; COUNT] = {
    let mut out = [WordClass::Other; COUNT];
    let mut i = 0;
    while i < COUNT {
        out[i] = match Category::ALL[i] {
            Category::Upper | Category::Lower | Category::OtherLetter | Category::Mark => {
                WordClass::LetterOrMark
            }
            Category::PunctOrSymbol => WordClass::PunctOrSymbol,
            Category::Space => WordClass::Space,
            Category::Other | Category::Number => WordClass::Other,
        };
        i += 1;
    }
    out
};

#[inline(always)]
const fn word_class(category: Category) -> WordClass {
    CLASSES[category as usize]
}

#[inline]
pub(super) fn word_class_of(c: char) -> WordClass {
    word_class(category(c))
}

pub(super) struct WordSplit;

impl WordSplit {
    /// The splitter for `pattern` when it is the known spelling.
    pub(super) fn for_pattern(pattern: &str) -> Option<Self> {
        (pattern == DEEPSEEK_V3_PATTERN).then_some(WordSplit)
    }

    /// Appends the matches of `text` and the stretches between them (offset by `base`) to
    /// `out`.
    pub(super) fn split(&self, text: &str, base: usize, out: &mut Vec<(usize, usize)>) {
        let mut at = 0;
        let mut gap = None;
        while let Some((c, class)) = char_at(text, at) {
            match match_end(text, at, c, class) {
                Some(end) => {
                    if let Some(start) = gap.take() {
                        out.push((base + start, base + at));
                    }
                    out.push((base + at, base + end));
                    at = end;
                }
                None => {
                    gap.get_or_insert(at);
                    at += c.len_utf8();
                }
            }
        }
        if let Some(start) = gap {
            out.push((base + start, base + text.len()));
        }
    }
}

#[inline(always)]
fn char_at(text: &str, at: usize) -> Option<(char, WordClass)> {
    char_class::char_at(text, at).map(|(c, k)| (c, word_class(k)))
}

#[inline(always)]
fn run_end(text: &str, at: usize, class: WordClass) -> usize {
    let at = match class {
        WordClass::LetterOrMark => ascii_letters_end(text.as_bytes(), at),
        _ => at,
    };
    char_class::run_end(text, at, |k| word_class(k) == class)
}

/// The end of the match that starts at `start` (with char `c` of class `class`), if one does.
#[inline(always)]
fn match_end(text: &str, start: usize, c: char, class: WordClass) -> Option<usize> {
    use WordClass::*;
    let after = start + c.len_utf8();
    let next = char_at(text, after);
    // [ASCII punctuation][A-Za-z]+
    if c.is_ascii_punctuation() && matches!(next, Some((n, _)) if n.is_ascii_alphabetic()) {
        return Some(ascii_letters_end(text.as_bytes(), after));
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+: a letter or mark starts the run itself (a mark
    // may also be the optional char, which ends at the same place); any other char but line
    // breaks, punctuation and symbols may precede a run.
    let next_class = next.map(|(_, k)| k);
    if class == LetterOrMark
        || (c != '\r' && c != '\n' && class != PunctOrSymbol && next_class == Some(LetterOrMark))
    {
        return Some(run_end(text, after, LetterOrMark));
    }
    //  ?[\p{P}\p{S}]+[\r\n]*
    if class == PunctOrSymbol || (c == ' ' && next_class == Some(PunctOrSymbol)) {
        return Some(newline_run_end(text, run_end(text, after, PunctOrSymbol)));
    }
    if class != Space {
        return None;
    }
    Some(space_run_end(text, start, |w| word_class_of(w) == Space))
}

/// DeepSeek V3's three stages (digits, CJK and kana, words) in one pass: the first two cut the
/// text into runs of up to three digits, runs of CJK ideographs and kana, and the stretches
/// between (the two sets share no char, so one scan finds both), and each of those goes
/// through the word stage, as the chain of `Split`s does.
pub(super) struct DeepSeekSplit;

/// What a char is to the first two stages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Digits,
    Cjk,
    Between,
}

#[inline(always)]
fn run_kind(c: char) -> Run {
    if c.is_ascii() {
        return if c.is_ascii_digit() {
            Run::Digits
        } else {
            Run::Between
        };
    }
    if is_cjk_or_kana(c) {
        Run::Cjk
    } else if category(c) == Category::Number {
        Run::Digits
    } else {
        Run::Between
    }
}

impl DeepSeekSplit {
    /// The splitter for a chain of patterns when it is DeepSeek V3's.
    pub(super) fn for_patterns(patterns: &[String]) -> Option<Self> {
        (patterns == [DIGITS_PATTERN, CJK_KANA_PATTERN, DEEPSEEK_V3_PATTERN])
            .then_some(DeepSeekSplit)
    }

    /// Appends the pieces of `text` (offset by `base`) to `out`.
    pub(super) fn split(&self, text: &str, base: usize, out: &mut Vec<(usize, usize)>) {
        let bytes = text.as_bytes();
        let mut start = 0;
        while start < text.len() {
            let Some(first) = text[start..].chars().next() else {
                break;
            };
            let kind = run_kind(first);
            let mut end = start + first.len_utf8();
            let mut chars = 1;
            loop {
                if kind == Run::Between {
                    // Plain ASCII is the common case: step over it without decoding.
                    end = ascii_non_digits_end(bytes, end);
                }
                let Some(c) = text[end..].chars().next() else {
                    break;
                };
                if run_kind(c) != kind || (kind == Run::Digits && chars == 3) {
                    break;
                }
                end += c.len_utf8();
                chars += 1;
            }
            WordSplit.split(&text[start..end], base + start, out);
            start = end;
        }
    }
}
