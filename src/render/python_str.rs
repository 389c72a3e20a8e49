//! Python's `str.strip` family, for templates and the direct renderers alike.
//!
//! jinja2's `trim` filter and the `strip`/`lstrip`/`rstrip` methods without arguments strip
//! what Python calls whitespace. That set is Unicode's White_Space (what Rust's `trim` strips)
//! plus the four information separators U+001C to U+001F, so a content that ends in one of those
//! renders differently in Rust's trim and in transformers.

/// Python's `str.isspace` for one character.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
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
}
