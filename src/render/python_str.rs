//! Python's `str.strip` family, for templates and the direct renderers alike, and `str.title`.
//!
//! jinja2's `trim` filter and the `strip`/`lstrip`/`rstrip` methods without arguments strip
//! what Python calls whitespace. That set is Unicode's White_Space (what Rust's `trim` strips)
//! plus the four information separators U+001C to U+001F, so a content that ends in one of those
//! renders differently in Rust's trim and in transformers.

/// Python's `str.isspace` for one character.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A character of Python's `\w` in a `str` pattern: a letter, a number (`str.isalnum`) or `_`.
pub fn is_word_char(c: char) -> bool {
    use unicode_categories::UnicodeCategories;
    c == '_' || c.is_letter() || c.is_number()
}

/// `s.strip()`.
pub fn python_strip(s: &str) -> &str {
    s.trim_matches(is_python_space)
}

/// `s.lstrip()`.
pub fn python_lstrip(s: &str) -> &str {
    s.trim_start_matches(is_python_space)
}

/// `s.rstrip()`.
pub fn python_rstrip(s: &str) -> &str {
    s.trim_end_matches(is_python_space)
}

/// `s.split()`: the runs of text between runs of Python's whitespace.
pub fn python_split_whitespace(s: &str) -> Vec<String> {
    s.split(is_python_space)
        .filter(|part| !part.is_empty())
        .map(str::to_string)
        .collect()
}

/// `s.strip(c)` for a one-character argument.
pub fn strip_chars(s: &str, c: char) -> &str {
    s.trim_matches(c)
}

/// `s.lstrip(c)` for a one-character argument.
pub fn lstrip_chars(s: &str, c: char) -> &str {
    s.trim_start_matches(c)
}

/// `s.rstrip(c)` for a one-character argument.
pub fn rstrip_chars(s: &str, c: char) -> &str {
    s.trim_end_matches(c)
}

/// Python's `str.splitlines()` of `s` with a newline added (what jinja2's `indent` splits):
/// lines end at `\n`, `\r`, `\r\n`, `\x0b`, `\x0c`, `\x1c`, `\x1d`, `\x1e`, `\x85`,
/// `\u2028` and `\u2029`; the added newline ends the last line.
pub fn python_splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().is_some_and(|(_, n)| *n == '\n') => {
                chars.next();
                at + 2
            }
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => at + c.len_utf8(),
            _ => continue,
        };
        lines.push(&s[start..at]);
        start = end;
    }
    // The newline jinja2 adds ends the last line, so a text ending in a line break gives no
    // empty line after it.
    lines.push(&s[start..]);
    lines
}

/// Python's `s.title()`: each character that follows a cased one in lower case, every other
/// one in title case (`ǆ` becomes `ǅ`, `ß` becomes `Ss`), whatever separates the words.
pub fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut lowered: Option<String> = None;
    let mut previous_is_cased = false;
    for (at, c) in s.char_indices() {
        if !previous_is_cased {
            push_title(c, &mut out);
        } else if c == 'Σ' {
            out.push_str(lowered_sigma(s, at, &mut lowered));
        } else {
            out.extend(c.to_lowercase());
        }
        previous_is_cased = is_cased(c);
    }
    out
}

/// The lower case of the `Σ` at byte `at` of `s`: final (`ς`) or not, as Python (and Rust's
/// `to_lowercase`) decides from its neighbours, read from `s` lower-cased whole (made once into
/// `lowered`). Both sigmas are two bytes, as is `Σ`: the offsets of `s` and of its lower case
/// agree up to a character whose lower case has another length.
pub fn lowered_sigma<'a>(s: &str, at: usize, lowered: &'a mut Option<String>) -> &'a str {
    let lowered = lowered.get_or_insert_with(|| s.to_lowercase());
    let offset = s[..at].to_lowercase().len();
    lowered.get(offset..offset + 2).unwrap_or("σ")
}

/// Unicode's Cased: upper or lower case, or a title-case letter (changed by both mappings).
pub(crate) fn is_cased(c: char) -> bool {
    c.is_lowercase()
        || c.is_uppercase()
        || (c.to_lowercase().ne(std::iter::once(c)) && c.to_uppercase().ne(std::iter::once(c)))
}

/// The title case of `c`: its upper case, but for the letters whose title case is their own
/// (the digraphs, the Greek letters with a subscript iota) or spelled otherwise (`ß`, the
/// ligatures).
fn push_title(c: char, out: &mut String) {
    let special = match c {
        '\u{1C4}'..='\u{1C6}' => "\u{1C5}",
        '\u{1C7}'..='\u{1C9}' => "\u{1C8}",
        '\u{1CA}'..='\u{1CC}' => "\u{1CB}",
        '\u{1F1}'..='\u{1F3}' => "\u{1F2}",
        'ß' => "Ss",
        'ŉ' => "ʼN",
        'ﬀ' => "Ff",
        'ﬁ' => "Fi",
        'ﬂ' => "Fl",
        'ﬃ' => "Ffi",
        'ﬄ' => "Ffl",
        'ﬅ' | 'ﬆ' => "St",
        'և' => "Եւ",
        'ﬓ' => "Մն",
        'ﬔ' => "Մե",
        'ﬕ' => "Մի",
        'ﬖ' => "Վն",
        'ﬗ' => "Մխ",
        'ᾳ' | 'ᾼ' => "ᾼ",
        'ῃ' | 'ῌ' => "ῌ",
        'ῳ' | 'ῼ' => "ῼ",
        '\u{1F80}'..='\u{1FAF}' => {
            // ᾀ..ᾇ, ᾐ..ᾗ, ᾠ..ᾧ title-case to ᾈ..ᾏ, ᾘ..ᾟ, ᾨ..ᾯ; those stay.
            let code = c as u32;
            out.push(char::from_u32(code | 8).unwrap_or(c));
            return;
        }
        _ => {
            out.extend(c.to_uppercase());
            return;
        }
    };
    out.push_str(special);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_whitespace_includes_the_information_separators() {
        assert_eq!(python_strip("\u{1c}\u{1f} a\u{a0}\u{3000}\u{1d}"), "a");
        assert_eq!(python_lstrip("\u{1e} a "), "a ");
        assert_eq!(python_rstrip(" a \u{1f}"), " a");
        // Not whitespace in Python either: the zero-width space and the BOM.
        assert_eq!(python_strip("\u{200b}a\u{feff}"), "\u{200b}a\u{feff}");
    }

    #[test]
    fn split_without_a_separator_splits_on_python_whitespace() {
        assert_eq!(
            python_split_whitespace(" a\u{1f}b\t\u{a0}c  "),
            ["a", "b", "c"]
        );
        assert!(python_split_whitespace(" \u{1c} ").is_empty());
        assert_eq!(python_split_whitespace("a\u{200b}b"), ["a\u{200b}b"]);
    }

    #[test]
    fn single_character_strips() {
        assert_eq!(strip_chars("\n\nab\n", '\n'), "ab");
        assert_eq!(lstrip_chars("\n a\n", '\n'), " a\n");
        assert_eq!(rstrip_chars("\n a\n\n", '\n'), "\n a");
    }

    #[test]
    fn title_cases_as_python() {
        // Python 3.11: 'x\'y"z'.title(), 'hello wORLD_aB 1a'.title(), ...
        assert_eq!(title("x'y\"z"), "X'Y\"Z");
        assert_eq!(title("hello wORLD_aB 1a"), "Hello World_Ab 1A");
        assert_eq!(title("ǆa ßa ﬁx"), "ǅa Ssa Fix");
        assert_eq!(title("ΣΑΣ ΣΑΣ."), "Σας Σας.");
        assert_eq!(title("%s!"), "%S!");
    }
}
