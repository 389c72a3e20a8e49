//! jinja2's `wordwrap(width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True)`:
//! each line of the text (Python's `str.splitlines()`) wrapped by Python's `textwrap` with tabs
//! and whitespace kept as they are, the wrapped lines and the paragraphs joined by `wrapstring`
//! (the environment's newline, `\n`, by default).
//!
//! A line is cut into chunks: runs of ASCII whitespace and words. With `break_on_hyphens` exactly
//! `True`, a word also ends after a hyphen between letters (`long-winded` is `long-` and
//! `winded`, not `a-b` nor `x-1`) and before a run of two or more hyphens between word characters
//! (an em-dash, its own chunk). Chunks fill each line up to `width` characters; a whitespace chunk
//! is dropped at the end of a line and at the start of every line but the first. A chunk longer
//! than a line is broken at the room left (after its last hyphen that fits, when breaking on
//! hyphens) where `break_long_words`, or else put alone on its own line. A Markup `wrapstring`
//! escapes the lines it joins and gives Markup.

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind};
use unicode_categories::UnicodeCategories;

use super::python_markup::{escape, is_markup, markup, type_name};
use super::python_semantics::type_error;
use super::python_signature::Signature;
use super::python_str::{is_word_char as is_word, python_splitlines, python_strip};
use super::python_undefined::refuse_undefined;
use super::python_value::py_repr;

const SIGNATURE: Signature = Signature {
    function: "do_wordwrap",
    params: &[
        "environment",
        "s",
        "width",
        "break_long_words",
        "wrapstring",
        "break_on_hyphens",
    ],
    passed: 1,
    required: 2,
};

/// The filter.
pub fn wordwrap_filter(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut bound = SIGNATURE.bind(value, &args, &kwargs)?.into_iter();
    let mut next = || bound.next().flatten();
    let (text, width, break_long, joiner, hyphens) = (next(), next(), next(), next(), next());
    let text = text.unwrap_or_default();
    // Python looks up `wrapstring.join` before it reads the text's lines.
    let joiner = match joiner.filter(|j| !j.is_none()) {
        None => Value::from("\n"),
        Some(j) => {
            refuse_undefined(&j)?;
            if j.kind() != ValueKind::String {
                return Err(attribute_error(&j, "join"));
            }
            j
        }
    };
    refuse_undefined(&text)?;
    let Some(text) = text.as_str().filter(|_| text.kind() == ValueKind::String) else {
        return Err(attribute_error(&text, "splitlines"));
    };
    let wrap = Wrap {
        break_long_words: break_long.is_none_or(|b| b.is_true()),
        split_on_hyphens: hyphens
            .as_ref()
            .is_none_or(|b| b.kind() == ValueKind::Bool && b.is_true()),
        break_on_hyphens: hyphens.is_none_or(|b| b.is_true()),
    };
    let separator = joiner.as_str().unwrap_or_default();
    let escaping = is_markup(&joiner);
    // Python's `str.splitlines()`: no empty line after a final line break, none in an empty text.
    let mut lines = python_splitlines(text);
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let width = match lines.is_empty() {
        true => Width::Int(79),
        false => Width::of(width.as_ref())?,
    };
    let mut paragraphs = Vec::with_capacity(lines.len());
    for line in lines {
        let wrapped = wrap.wrap(line, width)?;
        let wrapped: Vec<String> = match escaping {
            true => wrapped.iter().map(|l| escape(l)).collect(),
            false => wrapped,
        };
        paragraphs.push(wrapped.join(separator));
    }
    let joined = paragraphs.join(separator);
    Ok(if escaping {
        markup(joined)
    } else {
        Value::from(joined)
    })
}

fn attribute_error(value: &Value, attribute: &str) -> Error {
    type_error(format!(
        "'{}' object has no attribute '{attribute}'",
        type_name(value)
    ))
}

/// `textwrap`'s width: Python compares an integer or a float with the chunks' lengths.
#[derive(Clone, Copy)]
enum Width {
    Int(i64),
    Float(f64),
}

impl Width {
    /// The width a `TextWrapper` given `value` wraps at (79 where none is given), or what
    /// Python raises when it checks that it is positive.
    fn of(value: Option<&Value>) -> Result<Width, Error> {
        let Some(value) = value else {
            return Ok(Width::Int(79));
        };
        refuse_undefined(value)?;
        let width = match value.kind() {
            ValueKind::Bool => Width::Int(i64::from(value.is_true())),
            ValueKind::Number if value.is_integer() => match i64::try_from(value.clone()) {
                Ok(n) => Width::Int(n),
                // Beyond 64 bits every line fits, or the width is refused.
                Err(_) => Width::Int(if value.to_string().starts_with('-') {
                    -1
                } else {
                    i64::MAX
                }),
            },
            ValueKind::Number => Width::Float(f64::try_from(value.clone()).unwrap_or(f64::NAN)),
            _ => {
                return Err(type_error(format!(
                    "'<=' not supported between instances of '{}' and 'int'",
                    type_name(value)
                )))
            }
        };
        let positive = match width {
            Width::Int(n) => n > 0,
            Width::Float(f) if f.is_nan() => {
                // Python's `textwrap` never ends a line with a NaN width: it loops forever.
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "wordwrap: a width of nan never fits a word",
                ));
            }
            Width::Float(f) => f > 0.0,
        };
        if !positive {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("invalid width {} (must be > 0)", py_repr(value)),
            ));
        }
        Ok(width)
    }

    /// Whether `len` characters fit (`len <= width`).
    fn holds(self, len: usize) -> bool {
        match self {
            Width::Int(n) => (len as i128) <= i128::from(n),
            Width::Float(f) => (len as f64) <= f,
        }
    }
}

/// How a `TextWrapper` jinja2 makes breaks lines.
struct Wrap {
    break_long_words: bool,
    /// `break_on_hyphens is True`: chunks end after hyphens (else only at whitespace).
    split_on_hyphens: bool,
    /// Whether `break_on_hyphens` is true: a long word breaks after a hyphen.
    break_on_hyphens: bool,
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

impl Wrap {
    /// `textwrap.wrap(line)`: the wrapped lines of one paragraph.
    fn wrap<'a>(&self, line: &'a str, width: Width) -> Result<Vec<String>, Error> {
        let mut chunks = if self.split_on_hyphens {
            chunks(line)
        } else {
            whitespace_chunks(line)
        };
        chunks.reverse();
        let mut lines: Vec<String> = Vec::new();
        while !chunks.is_empty() {
            let mut cur: Vec<&'a str> = Vec::new();
            let mut cur_len = 0usize;
            if !lines.is_empty() && chunks.last().is_some_and(|c| python_strip(c).is_empty()) {
                chunks.pop();
            }
            while let Some(chunk) = chunks.last() {
                let len = char_len(chunk);
                if !width.holds(cur_len + len) {
                    break;
                }
                cur.push(chunk);
                cur_len += len;
                chunks.pop();
            }
            if chunks.last().is_some_and(|c| !width.holds(char_len(c))) {
                self.break_long_word(&mut chunks, &mut cur, cur_len, width)?;
            }
            if cur.last().is_some_and(|c| python_strip(c).is_empty()) {
                cur.pop();
            }
            if !cur.is_empty() {
                lines.push(cur.concat());
            }
        }
        Ok(lines)
    }

    /// A chunk longer than `width` at the end of a line holding `cur_len` characters: its head
    /// moved to the line where words break, else the whole chunk where the line is empty.
    fn break_long_word<'a>(
        &self,
        chunks: &mut Vec<&'a str>,
        cur: &mut Vec<&'a str>,
        cur_len: usize,
        width: Width,
    ) -> Result<(), Error> {
        // Below one character of room, one character still moves.
        let room = match width {
            Width::Int(n) if n < 1 => Width::Int(1),
            Width::Float(f) if f < 1.0 => Width::Int(1),
            Width::Int(n) => Width::Int(n - cur_len as i64),
            Width::Float(f) => Width::Float(f - cur_len as f64),
        };
        let Some(chunk) = chunks.last_mut() else {
            return Ok(());
        };
        if !self.break_long_words {
            if cur.is_empty() {
                cur.push(chunk);
                chunks.pop();
            }
            return Ok(());
        }
        let Width::Int(room) = room else {
            // Python slices the chunk at a float.
            return Err(type_error(
                "slice indices must be integers or None or have an __index__ method".to_string(),
            ));
        };
        let room = room.max(0) as usize;
        let chars: Vec<(usize, char)> = chunk.char_indices().collect();
        let mut end = room.min(chars.len());
        if self.break_on_hyphens && chars.len() > room {
            let hyphen = chars[..end].iter().rposition(|(_, c)| *c == '-');
            if let Some(h) = hyphen.filter(|&h| h > 0) {
                if chars[..h].iter().any(|(_, c)| *c != '-') {
                    end = h + 1;
                }
            }
        }
        let at = chars.get(end).map_or(chunk.len(), |(at, _)| *at);
        cur.push(&chunk[..at]);
        *chunk = &chunk[at..];
        Ok(())
    }
}

/// Python's ASCII whitespace, which alone separates `textwrap`'s chunks.
fn is_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ')
}

/// A letter as `textwrap` reads one (`\w` but not a decimal digit; `_` is one).
fn is_letter(c: char) -> bool {
    is_word(c) && !c.is_number_decimal_digit()
}

/// A character an em-dash may follow: a word character or `!"'&.,?`.
fn is_word_punct(c: char) -> bool {
    is_word(c) || matches!(c, '!' | '"' | '\'' | '&' | '.' | ',' | '?')
}

/// Runs of whitespace and runs of anything else (`break_on_hyphens` not exactly `True`).
fn whitespace_chunks(line: &str) -> Vec<&str> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut space = None;
    for (at, c) in line.char_indices() {
        if space.is_some_and(|s| s != is_space(c)) {
            chunks.push(&line[start..at]);
            start = at;
        }
        space = Some(is_space(c));
    }
    if start < line.len() {
        chunks.push(&line[start..]);
    }
    chunks
}

/// The chunks of `line` with words also ending at hyphens and em-dashes.
fn chunks(line: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let text: Vec<char> = chars.iter().map(|(_, c)| *c).collect();
    let byte = |i: usize| chars.get(i).map_or(line.len(), |(at, _)| *at);
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let end = chunk_end(&text, start);
        out.push(&line[byte(start)..byte(end)]);
        start = end;
    }
    out
}

/// Where the chunk starting at `p` ends: a whitespace run; an em-dash after a word character or
/// punctuation; or the shortest word reaching a hyphen it may break after, whitespace or the end,
/// or an em-dash.
fn chunk_end(text: &[char], p: usize) -> usize {
    let at = |i: usize| text.get(i).copied();
    let letter = |i: usize| at(i).is_some_and(is_letter);
    // The end of two or more hyphens from `i` followed by a word character.
    let dashes = |i: usize| {
        let n = text[i..].iter().take_while(|c| **c == '-').count();
        (n >= 2 && at(i + n).is_some_and(is_word)).then_some(i + n)
    };
    if is_space(text[p]) {
        return p + text[p..].iter().take_while(|c| is_space(**c)).count();
    }
    if p > 0 && is_word_punct(text[p - 1]) {
        if let Some(end) = dashes(p) {
            return end;
        }
    }
    let mut j = p + 1;
    loop {
        if at(j) == Some('-') {
            let after_letters = j >= 2 && letter(j - 2) && letter(j - 1);
            let after_hyphenated =
                j >= 3 && letter(j - 3) && at(j - 2) == Some('-') && letter(j - 1);
            let before_letters =
                letter(j + 1) && (letter(j + 2) || (at(j + 2) == Some('-') && letter(j + 3)));
            if (after_letters || after_hyphenated) && before_letters {
                return j + 1;
            }
        }
        if at(j).is_none_or(is_space) {
            return j;
        }
        if is_word_punct(text[j - 1]) && dashes(j).is_some() {
            return j;
        }
        j += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::{chunks, Width, Wrap};

    #[test]
    fn lines_split_and_fill_as_textwrap() {
        assert_eq!(
            chunks("Hello there -- you goof-ball, use the -b option!"),
            [
                "Hello", " ", "there", " ", "--", " ", "you", " ", "goof-", "ball,", " ", "use",
                " ", "the", " ", "-b", " ", "option!"
            ]
        );
        assert_eq!(
            chunks("a--b long-winded x-1 ab-c-d"),
            ["a", "--", "b", " ", "long-", "winded", " ", "x-1", " ", "ab-", "c-d"]
        );
        let wrap = Wrap {
            break_long_words: true,
            split_on_hyphens: true,
            break_on_hyphens: true,
        };
        assert_eq!(
            wrap.wrap("abc defghijk", Width::Int(4)).unwrap(),
            ["abc ", "defg", "hijk"]
        );
    }
}
