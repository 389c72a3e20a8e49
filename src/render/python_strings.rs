//! String literals as jinja2 reads them.
//!
//! jinja2 decodes a literal's text with Python's `unicode-escape` codec (after writing each
//! non-ASCII character as a backslash escape). minijinja has an unescaper of its own, which reads
//! most escapes the same way and these otherwise:
//! - a backslash before a line break joins the lines (Python drops both characters);
//! - `\a` and `\v` are BEL and VT, `\U0001F600` is one character of eight hex digits, and an
//!   octal escape reaches `\777`;
//! - `\/` keeps its backslash (it is not a Python escape);
//! - a backslash before a non-ASCII character keeps the backslash and then that character's own
//!   escape text (`\é` reads as `\xe9`), a quirk of the ASCII step.
//!
//! [`pythonized`] rewrites each literal whose value would differ into one that minijinja reads
//! as jinja2 does, so that the interpreter and the render plan, which both parse with
//! minijinja, see Python's string. A `\N{NAME}` escape is the named character, as Python's
//! `unicodedata.lookup` finds it (the table is unicode_names2's).

use minijinja::machinery::{tokenize, Token};
use minijinja::syntax::SyntaxConfig;

/// `source` with every string literal that jinja2 reads otherwise than minijinja rewritten to
/// jinja2's value, or `None` where there is none (or the source does not tokenize).
pub fn pythonized(source: &str, syntax: &SyntaxConfig) -> Option<String> {
    if !source.contains('\\') {
        return None;
    }
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for token in tokenize(source, false, syntax.clone()) {
        let (token, span) = token.ok()?;
        let Token::String(ours) = token else {
            continue;
        };
        let (start, end) = (span.start_offset as usize, span.end_offset as usize);
        let raw = source.get(start..end)?;
        if raw.len() < 2 {
            continue;
        }
        let Some(python) = python_unescape(&raw[1..raw.len() - 1]) else {
            continue;
        };
        if python != *ours {
            // The line breaks the literal loses follow it as whitespace, so that every later
            // line keeps its number.
            let lost = raw
                .matches('\n')
                .count()
                .saturating_sub(python.matches('\n').count());
            edits.push((start, end, literal(&python) + &"\n".repeat(lost)));
        }
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = source.to_string();
    for (start, end, text) in edits.into_iter().rev() {
        out.replace_range(start..end, &text);
    }
    Some(out)
}

/// A minijinja string literal whose value is `value`.
fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The text of a literal (between its quotes) as jinja2 reads it: Python's
/// `text.encode("ascii", "backslashreplace").decode("unicode-escape")`. `None` where Python
/// raises or where the value holds a lone surrogate.
pub fn python_unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let next = chars.next()?;
        match next {
            '\n' => {}
            '\\' | '\'' | '"' => out.push(next),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            '0'..='7' => {
                let mut value = next.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value)?);
            }
            'x' | 'u' | 'U' => {
                let digits = match next {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut value: u32 = 0;
                for _ in 0..digits {
                    value = value.checked_mul(16)? + chars.next()?.to_digit(16)?;
                }
                out.push(char::from_u32(value)?);
            }
            'N' => out.push(named_char(&mut chars)?),
            // The ASCII step wrote a non-ASCII character as an escape of its own: the backslash
            // before it escapes that escape's backslash.
            c if !c.is_ascii() => {
                out.push('\\');
                let code = u32::from(c);
                match code {
                    0..=0xff => out.push_str(&format!("x{code:02x}")),
                    0x100..=0xffff => out.push_str(&format!("u{code:04x}")),
                    _ => out.push_str(&format!("U{code:08x}")),
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    Some(out)
}

/// The character of a `\N{NAME}` escape, the name read after the `N`: Python's lookup, which
/// takes a name or an alias in any case (`\N{bullet}`), the algorithmic names of CJK ideographs
/// and Hangul syllables included, and nothing looser (no underscores for spaces). `None` for
/// anything else, where Python raises.
fn named_char(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<char> {
    if chars.next()? != '{' {
        return None;
    }
    let mut name = String::new();
    loop {
        match chars.next()? {
            '}' => break,
            c => name.push(c),
        }
    }
    let upper = name.to_ascii_uppercase();
    // unicode_names2 matches loosely (UAX44-LM2: case, spaces, underscores and medial hyphens
    // ignored); Python only ignores case. A strict spelling is all capitals, digits, single
    // spaces and hyphens, as every name and alias is spelled.
    let strict = !upper.is_empty()
        && upper
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ' || b == b'-')
        && !upper.contains("  ")
        && !upper.starts_with(' ')
        && !upper.ends_with(' ');
    let c = unicode_names2::character(&upper)?;
    let canonical = unicode_names2::name(c).map(|n| n.to_string());
    (strict || canonical.as_deref() == Some(upper.as_str())).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syntax() -> SyntaxConfig {
        SyntaxConfig::default()
    }

    #[test]
    fn escapes_decode_as_python_decodes_them() {
        // Each expected value is what Python 3.11 gives for the same text.
        for (text, python) in [
            ("a\\\nb", "ab"),
            ("\\a\\v\\b\\f", "\x07\x0b\x08\x0c"),
            ("\\x41\\101\\0", "A\x41\0"),
            ("\\777", "\u{1ff}"),
            ("\\U0001F600|\\u00e9", "\u{1F600}|\u{e9}"),
            ("\\/\\d\\w", "\\/\\d\\w"),
            ("\\é", "\\xe9"),
            ("\\中", "\\u4e2d"),
            ("\\😀", "\\U0001f600"),
            ("it\\'s \\\"q\\\"", "it's \"q\""),
            ("plain ünïcode", "plain ünïcode"),
            // Names in any case, an alias, algorithmic names.
            ("\\N{BULLET}\\N{bullet} x", "\u{2022}\u{2022} x"),
            ("\\N{LATIN CAPITAL LETTER GHA}", "\u{1a2}"),
            (
                "\\N{CJK UNIFIED IDEOGRAPH-4E00}\\N{HANGUL SYLLABLE GAG}",
                "\u{4e00}\u{ac01}",
            ),
        ] {
            assert_eq!(python_unescape(text).as_deref(), Some(python), "{text:?}");
        }
        for refused in [
            "\\x4",
            "\\",
            "\\N{NO SUCH NAME}",
            "\\N{latin_small_letter_a}",
            "\\N{BULLET",
            "\\NBULLET",
            "\\ud800",
            "\\U00110000",
        ] {
            assert_eq!(python_unescape(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn literals_are_rewritten_only_where_the_readings_differ() {
        let source = "{% set a = \"one \\\ntwo\" %}{{ a ~ 'x\\ty' ~ \"\\a\" }}\n{{ b }}";
        let out = pythonized(source, &syntax()).expect("rewritten");
        assert_eq!(
            out,
            "{% set a = \"one two\"\n %}{{ a ~ 'x\\ty' ~ \"\u{7}\" }}\n{{ b }}"
        );
        // Every line keeps its number.
        assert_eq!(out.lines().count(), source.lines().count());
        assert_eq!(pythonized("{{ 'a\\nb' ~ \"\\\"\" }}", &syntax()), None);
        assert_eq!(pythonized("{{ 'no escapes' }}", &syntax()), None);
    }
}
