//! Python's `html.unescape`, which markupsafe's `striptags` ends with: each character reference
//! (`&name;`, `&#nnn;`, `&#xhh;`, the `;` optional) replaced by its text, by the HTML5 rules
//! Python follows. A name is read up to 32 characters; where the whole is not a reference, its
//! longest known prefix of at least two characters is replaced and the rest kept (`&ampx` is
//! `&x`). A numeric reference outside Unicode or to a surrogate gives U+FFFD; a few give
//! another character (the Windows-1252 ones) or nothing (see `html_entities`).

use std::borrow::Cow;

use super::html_entities::{DROPPED, NAMED, REPLACED};

/// The longest name Python reads after `&`, in characters.
const MAX_NAME: usize = 32;

/// `text` with its character references replaced.
pub fn html_unescape(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let used = match after.strip_prefix('#') {
            Some(number) => numeric(number, &mut out).map(|n| n + 1),
            None => named(after, &mut out),
        };
        match used {
            Some(used) => rest = &after[used..],
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// A numeric reference's text pushed to `out` (`number` follows `&#`), and the bytes it used;
/// `None` where no digits follow.
fn numeric(number: &str, out: &mut String) -> Option<usize> {
    let bytes = number.as_bytes();
    let (radix, skip) = match bytes.first() {
        Some(b'0'..=b'9') => (10, 0),
        Some(b'x' | b'X') if bytes.get(1).is_some_and(u8::is_ascii_hexdigit) => (16, 1),
        _ => return None,
    };
    let digits = bytes[skip..]
        .iter()
        .take_while(|b| char::from(**b).is_digit(radix))
        .count();
    // Past Unicode every value reads the same, so the digits saturate.
    let code = bytes[skip..skip + digits].iter().fold(0u32, |acc, b| {
        acc.saturating_mul(radix)
            .saturating_add((*b as char).to_digit(radix).unwrap_or(0))
    });
    let mut used = skip + digits;
    if bytes.get(used) == Some(&b';') {
        used += 1;
    }
    if let Some((_, c)) = REPLACED.iter().find(|(n, _)| *n == code) {
        out.push(*c);
    } else if DROPPED.binary_search(&code).is_err() {
        out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
    }
    Some(used)
}

/// A named reference's text pushed to `out` (`name` follows `&`), and the bytes it used; `None`
/// where no name follows.
fn named(name: &str, out: &mut String) -> Option<usize> {
    let mut len = 0;
    for (count, (at, c)) in name.char_indices().enumerate() {
        if count == MAX_NAME || matches!(c, '\t' | '\n' | '\x0c' | ' ' | '<' | '&' | '#' | ';') {
            break;
        }
        len = at + c.len_utf8();
    }
    if len == 0 {
        return None;
    }
    if name[len..].starts_with(';') {
        len += 1;
    }
    let read = &name[..len];
    if let Some(text) = lookup(read) {
        out.push_str(text);
        return Some(len);
    }
    // The longest prefix of at least two characters, shorter than the whole.
    let ends: Vec<usize> = read.char_indices().map(|(at, _)| at).skip(2).collect();
    for &end in ends.iter().rev() {
        if let Some(text) = lookup(&read[..end]) {
            out.push_str(text);
            out.push_str(&read[end..]);
            return Some(len);
        }
    }
    out.push('&');
    out.push_str(read);
    Some(len)
}

fn lookup(name: &str) -> Option<&'static str> {
    NAMED
        .binary_search_by(|(known, _)| known.as_bytes().cmp(name.as_bytes()))
        .ok()
        .map(|at| NAMED[at].1)
}

#[cfg(test)]
mod tests {
    use super::html_unescape;

    #[test]
    fn references_read_as_python_reads_them() {
        for (text, want) in [
            ("a &amp; b", "a & b"),
            ("&ampx &amp", "&x &"),
            ("&notit; &notin;", "\u{ac}it; \u{2209}"),
            ("&#65;&#x42;&#X43 &#x;&#;", "ABC &#x;&#;"),
            (
                "&#128;&#0;&#1;&#xD800;&#99999999999;",
                "\u{20ac}\u{fffd}\u{fffd}\u{fffd}",
            ),
            ("&unknown; & &;", "&unknown; & &;"),
            ("&Afr;&nbsp", "\u{1d504}\u{a0}"),
        ] {
            assert_eq!(html_unescape(text), want, "{text}");
        }
    }
}
