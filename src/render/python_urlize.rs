//! jinja2's `urlize(trim_url_limit=None, nofollow=False, target=None, rel=None,
//! extra_schemes=None)` with the default policies transformers keeps (`rel="noopener"` on every
//! link, no target, no extra schemes): the text escaped, then each run of non-whitespace that
//! is a web address or an email address made a link. Leading `(`, `<` and trailing `)`, `>`,
//! `.`, `,` stay outside the link, but closing brackets move back in where the address opens
//! more than it closes. An address is `http(s)://` or `www.` and a host with a letter top-level
//! domain (or `xn--`), a domain ending in `.com`, `.net`, `.int`, `.edu`, `.gov`, `.org`,
//! `.info` or `.mil`, or `http(s)://` and an IPv4 or bracketed IPv6 address; then an optional
//! port and path. Letters match in either case, as Python's case-insensitive matching lets
//! them (`K` the Kelvin sign is a `k`). The result is a plain string: transformers renders
//! without auto-escaping.

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind};
use unicode_categories::UnicodeCategories;

use super::python_markup::{escape, is_markup, type_name};
use super::python_semantics::type_error;
use super::python_signature::Signature;
use super::python_str::{is_python_space, is_word_char, python_split_whitespace};
use super::python_undefined::{is_undefined, refuse_undefined};
use super::python_value::{py_repr, py_str};

const SIGNATURE: Signature = Signature {
    function: "do_urlize",
    params: &[
        "eval_ctx",
        "value",
        "trim_url_limit",
        "nofollow",
        "target",
        "rel",
        "extra_schemes",
    ],
    passed: 1,
    required: 2,
};

/// The filter.
pub fn urlize_filter(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut bound = SIGNATURE.bind(value, &args, &kwargs)?.into_iter();
    let text = bound.next().flatten().unwrap_or_default();
    // Each option's `None` is its default.
    let mut next = || bound.next().flatten().filter(|v| !v.is_none());
    let (limit, nofollow, target, rel, schemes) = (next(), next(), next(), next(), next());
    let mut rel_parts = match rel.filter(Value::is_true) {
        None => Vec::new(),
        Some(rel) if rel.kind() == ValueKind::String => {
            python_split_whitespace(rel.as_str().unwrap_or_default())
        }
        Some(rel) => {
            return Err(type_error(format!(
                "'{}' object has no attribute 'split'",
                type_name(&rel)
            )))
        }
    };
    if nofollow.is_some_and(|n| n.is_true()) {
        rel_parts.push("nofollow".to_string());
    }
    rel_parts.push("noopener".to_string());
    rel_parts.sort();
    rel_parts.dedup();
    let mut attrs = format!(" rel=\"{}\"", escape(&rel_parts.join(" ")));
    if let Some(target) = target.filter(Value::is_true) {
        attrs.push_str(&format!(" target=\"{}\"", escaped(&target)));
    }
    let schemes = match schemes {
        None => Vec::new(),
        Some(schemes) => extra_schemes(&schemes)?,
    };
    let text = if is_undefined(&text) {
        String::new()
    } else {
        escaped(&text)
    };
    let links = Links {
        attrs,
        limit,
        schemes,
    };
    let mut out = String::with_capacity(text.len());
    let mut word_start = 0;
    let mut in_space = false;
    for (at, c) in text.char_indices() {
        let space = is_python_space(c);
        if space != in_space {
            if !in_space {
                links.word(&text[word_start..at], &mut out)?;
            } else {
                out.push_str(&text[word_start..at]);
            }
            word_start = at;
            in_space = space;
        }
    }
    if in_space {
        out.push_str(&text[word_start..]);
    } else {
        links.word(&text[word_start..], &mut out)?;
    }
    Ok(Value::from(out))
}

/// markupsafe's `escape(value)` as text: a Markup string as it is, anything else's `str()`
/// escaped.
fn escaped(value: &Value) -> String {
    if is_markup(value) {
        return value.as_str().unwrap_or_default().to_string();
    }
    escape(&py_str(value))
}

/// The schemes given, each checked to be a scheme prefix (`name:`, `name:/` or `name://`, the
/// name of two or more word characters, `.`, `+` or `-`), that jinja2 then links with.
fn extra_schemes(value: &Value) -> Result<Vec<String>, Error> {
    if is_undefined(value) {
        return Ok(Vec::new());
    }
    let iterable = matches!(
        value.kind(),
        ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
    );
    if !iterable {
        return Err(type_error(format!(
            "'{}' object is not iterable",
            type_name(value)
        )));
    }
    let mut schemes = Vec::new();
    for scheme in value.try_iter()? {
        let Some(text) = scheme
            .as_str()
            .filter(|_| scheme.kind() == ValueKind::String)
        else {
            return Err(type_error(format!(
                "expected string or bytes-like object, got '{}'",
                type_name(&scheme)
            )));
        };
        let valid = text.split_once(':').is_some_and(|(name, slashes)| {
            name.chars().count() >= 2
                && name
                    .chars()
                    .all(|c| is_word_char(c) || matches!(c, '.' | '+' | '-'))
                && matches!(slashes, "" | "/" | "//")
        });
        if !valid {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("{} is not a valid URI scheme prefix.", py_repr(&scheme)),
            ));
        }
        schemes.push(text.to_string());
    }
    // A generator or an iterator is spent by the check: jinja2 links with no extra scheme.
    if super::python_generators::generator_type(value).is_some() {
        schemes.clear();
    }
    Ok(schemes)
}

/// How the words of one text become links.
struct Links {
    /// ` rel="..."` and ` target="..."` of a web link.
    attrs: String,
    /// `trim_url_limit`, where given.
    limit: Option<Value>,
    schemes: Vec<String>,
}

impl Links {
    /// One run of non-whitespace of the escaped text, appended to `out` as jinja2 writes it.
    fn word(&self, word: &str, out: &mut String) -> Result<(), Error> {
        let head_len = token_run(word, &["(", "<", "&lt;"]);
        let (head, rest) = word.split_at(head_len);
        let tail_at = tail_start(rest);
        let (mut middle, mut tail) = (rest[..tail_at].to_string(), &rest[tail_at..]);
        for (open, close) in [("(", ")"), ("<", ">"), ("&lt;", "&gt;")] {
            let opened = middle.matches(open).count();
            if opened <= middle.matches(close).count() {
                continue;
            }
            for _ in 0..opened.min(tail.matches(close).count()) {
                let end = tail.find(close).map_or(0, |at| at + close.len());
                middle.push_str(&tail[..end]);
                tail = &tail[end..];
            }
        }
        out.push_str(head);
        let chars: Vec<char> = middle.chars().collect();
        if is_web_address(&chars) {
            let scheme = if middle.starts_with("https://") || middle.starts_with("http://") {
                ""
            } else {
                "https://"
            };
            let shown = self.trimmed(&middle)?;
            out.push_str(&format!(
                "<a href=\"{scheme}{middle}\"{}>{shown}</a>",
                self.attrs
            ));
        } else if middle.starts_with("mailto:") && is_email(&chars[7..]) {
            out.push_str(&format!("<a href=\"{middle}\">{}</a>", &middle[7..]));
        } else if middle.contains('@')
            && !middle.starts_with("www.")
            && !middle.starts_with('@')
            && !middle.contains(':')
            && is_email(&chars)
        {
            out.push_str(&format!("<a href=\"mailto:{middle}\">{middle}</a>"));
        } else if self
            .schemes
            .iter()
            .any(|s| middle != *s && middle.starts_with(s.as_str()))
        {
            out.push_str(&format!("<a href=\"{middle}\"{}>{middle}</a>", self.attrs));
        } else {
            out.push_str(&middle);
        }
        out.push_str(tail);
        Ok(())
    }

    /// The address as the link shows it: cut to `trim_url_limit` characters (Python's slice, so
    /// a negative limit counts from the end) and `...` added where longer.
    fn trimmed(&self, url: &str) -> Result<String, Error> {
        let Some(limit) = &self.limit else {
            return Ok(url.to_string());
        };
        refuse_undefined(limit)?;
        let len = url.chars().count() as i128;
        let limit = match limit.kind() {
            ValueKind::Bool => i128::from(limit.is_true()),
            ValueKind::Number if limit.is_integer() => {
                i128::try_from(limit.clone()).unwrap_or(i128::MAX)
            }
            ValueKind::Number => {
                let f = f64::try_from(limit.clone()).unwrap_or(f64::NAN);
                if (len as f64) > f {
                    return Err(type_error(
                        "slice indices must be integers or None or have an __index__ method"
                            .to_string(),
                    ));
                }
                return Ok(url.to_string());
            }
            _ => {
                return Err(type_error(format!(
                    "'>' not supported between instances of 'int' and '{}'",
                    type_name(limit)
                )))
            }
        };
        if len <= limit {
            return Ok(url.to_string());
        }
        let keep = if limit < 0 {
            (len + limit).max(0)
        } else {
            limit
        };
        let kept: String = url.chars().take(keep as usize).collect();
        Ok(format!("{kept}..."))
    }
}

/// The length of the longest prefix of `text` made of `tokens`.
fn token_run(text: &str, tokens: &[&str]) -> usize {
    let mut at = 0;
    while let Some(token) = tokens.iter().find(|t| text[at..].starts_with(**t)) {
        at += token.len();
    }
    at
}

/// Where the trailing punctuation of `text` starts: the first position from which the rest is
/// all `)`, `>`, `.`, `,`, newlines and `&gt;` (the length where there is none).
fn tail_start(text: &str) -> usize {
    const TOKENS: [&str; 6] = [")", ">", ".", ",", "\n", "&gt;"];
    let bytes = text.as_bytes();
    // `rest[i]`: whether the text from byte `i` on is made of the tokens.
    let mut rest = vec![false; bytes.len() + 1];
    rest[bytes.len()] = true;
    for i in (0..bytes.len()).rev() {
        rest[i] = TOKENS
            .iter()
            .any(|t| text.as_bytes()[i..].starts_with(t.as_bytes()) && rest[i + t.len()]);
    }
    (0..bytes.len()).find(|&i| rest[i]).unwrap_or(bytes.len())
}

/// Python's case-insensitive match of an ASCII lower-case letter (`ſ` is an `s`, `İ` and `ı`
/// are an `i`).
fn letter_is(c: char, lower: char) -> bool {
    c.to_ascii_lowercase() == lower
        || (lower == 's' && c == '\u{17f}')
        || (lower == 'i' && matches!(c, '\u{130}' | '\u{131}'))
}

/// Whether `text` starts with `word` (ASCII lower case, `:/.` and `-` as they are), letters in
/// either case.
fn starts_with_ci(text: &[char], word: &str) -> bool {
    text.len() >= word.len()
        && word.chars().zip(text).all(|(w, &c)| {
            if w.is_ascii_lowercase() {
                letter_is(c, w)
            } else {
                c == w
            }
        })
}

/// Python's case-insensitive `[a-z]`: an ASCII letter, or one whose case mapping is one.
fn is_az(c: char) -> bool {
    c.is_ascii_alphabetic() || matches!(c, '\u{130}' | '\u{131}' | '\u{17f}' | '\u{212a}')
}

fn is_digit(c: char) -> bool {
    c.is_number_decimal_digit()
}

fn is_host_char(c: char) -> bool {
    is_word_char(c) || c == '%' || c == '-'
}

fn run(text: &[char], from: usize, class: impl Fn(char) -> bool) -> usize {
    text.get(from..)
        .map_or(0, |t| t.iter().take_while(|c| class(**c)).count())
}

/// The length of `http://` or `https://` at the start of `text`.
fn scheme_len(text: &[char]) -> Option<usize> {
    if !starts_with_ci(text, "http") {
        return None;
    }
    let s = usize::from(text.get(4).is_some_and(|c| letter_is(*c, 's')));
    starts_with_ci(&text[4 + s..], "://").then_some(7 + s)
}

/// Whether `text` is a web address `urlize` links.
fn is_web_address(text: &[char]) -> bool {
    let mut ends = Vec::new();
    let scheme = scheme_len(text);
    let www = starts_with_ci(text, "www.").then_some(4);
    // A scheme or `www.`, subdomains, a letter or `xn--` top-level domain.
    if let Some(start) = scheme.or(www) {
        let mut label = start;
        loop {
            let letters = run(text, label, is_az).min(63);
            ends.extend((2..=letters).map(|n| label + n));
            if starts_with_ci(&text[label..], "xn--") {
                let rest = run(text, label + 4, |c| is_word_char(c) || c == '%').min(59);
                ends.extend((2..=rest).map(|n| label + 4 + n));
            }
            let n = run(text, label, is_host_char);
            if n == 0 || text.get(label + n) != Some(&'.') {
                break;
            }
            label += n + 1;
        }
    }
    // Domains of 2 to 63 characters each and a known top-level domain.
    let mut label = 0;
    loop {
        let n = run(text, label, is_host_char);
        if !(2..=63).contains(&n) || text.get(label + n) != Some(&'.') {
            break;
        }
        label += n + 1;
        for tld in ["com", "net", "int", "edu", "gov", "org", "info", "mil"] {
            if starts_with_ci(&text[label..], tld) {
                ends.push(label + tld.len());
            }
        }
    }
    // A scheme and an IP address.
    if let Some(start) = scheme {
        ends.extend(ipv4_ends(text, start));
        ends.extend(ipv6_end(text, start));
    }
    ends.into_iter().any(|end| is_port_and_path(&text[end..]))
}

/// The ends of `d.d.d.d` at `start` (each part one to three digits).
fn ipv4_ends(text: &[char], start: usize) -> Vec<usize> {
    let mut at = start;
    for _ in 0..3 {
        let n = run(text, at, is_digit);
        if !(1..=3).contains(&n) || text.get(at + n) != Some(&'.') {
            return Vec::new();
        }
        at += n + 1;
    }
    let n = run(text, at, is_digit).min(3);
    (1..=n).map(|n| at + n).collect()
}

/// The end of a bracketed IPv6 address at `start`: two groups of up to four hex digits, each
/// followed by `:`, then hex digits and colons that make one to six more groups (a group is up
/// to four digits and an optional colon), then `]`.
fn ipv6_end(text: &[char], start: usize) -> Option<usize> {
    let is_hex = |c: char| is_digit(c) || matches!(c, 'a'..='f' | 'A'..='F');
    if text.get(start) != Some(&'[') {
        return None;
    }
    let mut at = start + 1;
    for _ in 0..2 {
        let n = run(text, at, is_hex);
        if n > 4 || text.get(at + n) != Some(&':') {
            return None;
        }
        at += n + 1;
    }
    let n = run(text, at, |c| is_hex(c) || c == ':');
    if text.get(at + n) != Some(&']') {
        return None;
    }
    let segments: Vec<&[char]> = text[at..at + n].split(|c| *c == ':').collect();
    let last = segments.len() - 1;
    let groups: usize = segments
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let groups = s.len().div_ceil(4);
            if i < last {
                groups.max(1)
            } else {
                groups
            }
        })
        .sum();
    (groups <= 6).then_some(at + n + 1)
}

/// Whether `rest` is an optional `:port` (one to five digits) and an optional path, query or
/// fragment (`/`, `?` or `#` and non-whitespace).
fn is_port_and_path(rest: &[char]) -> bool {
    let mut at = 0;
    if rest.first() == Some(&':') {
        let n = run(rest, 1, is_digit);
        if !(1..=5).contains(&n) {
            return false;
        }
        at = 1 + n;
    }
    match rest.get(at) {
        None => true,
        Some('/' | '?' | '#') => rest[at + 1..].iter().all(|c| !is_python_space(*c)),
        Some(_) => false,
    }
}

/// Whether `text` is an email address as `urlize` reads one: non-whitespace, `@`, then a word
/// character, word characters, dots and hyphens, and a last `.` followed by word characters.
fn is_email(text: &[char]) -> bool {
    let Some(at) = text.iter().rposition(|c| *c == '@') else {
        return false;
    };
    if at == 0 || text[..at].iter().any(|c| is_python_space(*c)) {
        return false;
    }
    let domain = &text[at + 1..];
    let Some(dot) = domain.iter().rposition(|c| *c == '.') else {
        return false;
    };
    domain.first().is_some_and(|c| is_word_char(*c))
        && domain
            .iter()
            .all(|c| is_word_char(*c) || matches!(c, '.' | '-'))
        && dot + 1 < domain.len()
        && domain[dot + 1..].iter().all(|c| is_word_char(*c))
}

#[cfg(test)]
mod tests {
    use super::{is_email, is_web_address, tail_start};

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn addresses_read_as_jinja2_reads_them() {
        for yes in [
            "www.example.com",
            "http://a.b.co:8080/x?y#z",
            "https://xn--bcher-kva.example",
            "example.org",
            "http://127.0.0.1:80/",
            "http://[::1]/",
            "HTTP://EXAMPLE.COM",
        ] {
            assert!(is_web_address(&chars(yes)), "{yes}");
        }
        for no in [
            "example.zz",
            "http://1.2.3.4567",
            "www.",
            "a.com:123456",
            "http://[1:2:3]x",
        ] {
            assert!(!is_web_address(&chars(no)), "{no}");
        }
        assert!(is_email(&chars("a@b.co")));
        assert!(!is_email(&chars("a@b.c-")));
        assert_eq!(tail_start("x).&gt;,"), 1);
    }
}
