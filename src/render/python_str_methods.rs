//! The methods of Python's `str` (and `dict.copy`) that minijinja-contrib lacks or takes fewer
//! arguments of, as jinja2 runs them for transformers: `center`, `ljust`, `rjust`, `index`,
//! `rindex`, `partition`, `rpartition`, `rsplit`, `removeprefix`, `removesuffix`, `expandtabs`,
//! `istitle`, `isdecimal`, `isidentifier`, and `find`, `rfind`, `count`, `startswith`,
//! `endswith` with `start` and `end`.
//!
//! Positions are in characters (code points), as Python counts them, and `start`/`end` follow
//! Python's slice rules (negative from the end, clamped, `None` for the default). Errors carry
//! Python's messages.

use minijinja::value::{Tuple, Value, ValueKind};
use minijinja::{Error, ErrorKind};
use unicode_categories::UnicodeCategories;

use super::python_semantics::{python_type_name, type_error};
use super::python_slice::{from_end, slice_bound};
use super::python_str::{is_cased, is_python_space, python_rstrip};

/// `value.method(*args)` where it is one of this module's methods, `None` otherwise (the caller
/// goes on with minijinja-contrib's).
pub fn call(value: &Value, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    if value.kind() == ValueKind::Map && method == "copy" && args.is_empty() {
        return Some(Ok(value.clone()));
    }
    let s = value
        .as_str()
        .filter(|_| value.kind() == ValueKind::String)?;
    // Keyword arguments are left to minijinja-contrib (which refuses them as Python would not).
    if args.iter().any(|a| a.is_kwargs()) {
        return None;
    }
    Some(match (method, args) {
        ("center" | "ljust" | "rjust", [width, fill @ ..]) if fill.len() <= 1 => {
            justify(s, method, width, fill.first())
        }
        ("index" | "rindex", [sub, range @ ..]) if range.len() <= 2 => {
            search(s, sub, range, method == "rindex").and_then(|at| match at {
                Some(at) => Ok(Value::from(at)),
                None => Err(value_error("substring not found")),
            })
        }
        ("find" | "rfind", [sub, range @ ..]) if !range.is_empty() && range.len() <= 2 => {
            search(s, sub, range, method == "rfind")
                .map(|at| Value::from(at.map_or(-1, |at| at as i64)))
        }
        ("count", [sub, range @ ..]) if !range.is_empty() && range.len() <= 2 => {
            count(s, sub, range).map(Value::from)
        }
        ("startswith" | "endswith", [affix, range @ ..])
            if !range.is_empty() && range.len() <= 2 =>
        {
            has_affix(s, method, affix, range).map(Value::from)
        }
        ("partition" | "rpartition", [sep]) => partition(s, sep, method == "rpartition"),
        ("rsplit", _) if args.len() <= 2 => rsplit(s, args),
        ("removeprefix", [prefix]) => {
            named_str_arg(method, prefix).map(|p| Value::from(s.strip_prefix(p).unwrap_or(s)))
        }
        ("removesuffix", [suffix]) => {
            named_str_arg(method, suffix).map(|p| Value::from(s.strip_suffix(p).unwrap_or(s)))
        }
        ("expandtabs", []) => Ok(Value::from(expand_tabs(s, 8))),
        ("expandtabs", [size]) => int_arg(size).map(|n| Value::from(expand_tabs(s, n))),
        ("istitle", []) => Ok(Value::from(is_title(s))),
        ("isdecimal", []) => Ok(Value::from(
            !s.is_empty() && s.chars().all(|c| c.is_number_decimal_digit()),
        )),
        ("isidentifier", []) => Ok(Value::from(is_identifier(s))),
        _ => return None,
    })
}

fn value_error(msg: &str) -> Error {
    type_error(msg.to_string())
}

fn str_arg(v: &Value) -> Result<&str, Error> {
    match v.as_str() {
        Some(s) if v.kind() == ValueKind::String => Ok(s),
        _ => Err(type_error(format!(
            "must be str, not {}",
            python_type_name(v)
        ))),
    }
}

/// A string argument of `method`, refused in the words of the methods that name themselves.
fn named_str_arg<'v>(method: &str, v: &'v Value) -> Result<&'v str, Error> {
    str_arg(v).map_err(|_| {
        type_error(format!(
            "{method}() argument must be str, not {}",
            python_type_name(v)
        ))
    })
}

/// An integer argument (a bool counts, as in Python).
fn int_arg(v: &Value) -> Result<i64, Error> {
    match v.kind() {
        ValueKind::Bool => Ok(i64::from(v.is_true())),
        ValueKind::Number if v.is_integer() => i64::try_from(v.clone()).map_err(|_| {
            Error::new(
                ErrorKind::InvalidOperation,
                "Python int too large to convert to C ssize_t",
            )
        }),
        _ => Err(type_error(format!(
            "'{}' object cannot be interpreted as an integer",
            python_type_name(v)
        ))),
    }
}

/// `center`, `ljust`, `rjust`: padded with `fill` (one character, a space by default) to
/// `width` characters.
fn justify(s: &str, method: &str, width: &Value, fill: Option<&Value>) -> Result<Value, Error> {
    let width = int_arg(width)?;
    let fill = match fill {
        None => ' ',
        Some(f) => {
            let text = f
                .as_str()
                .filter(|_| f.kind() == ValueKind::String)
                .ok_or_else(|| {
                    type_error(format!(
                        "{method}() argument 2 must be str, not {}",
                        python_type_name(f)
                    ))
                })?;
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => c,
                _ => {
                    return Err(type_error(
                        "The fill character must be exactly one character long".into(),
                    ))
                }
            }
        }
    };
    Ok(Value::from(padded(s, width, fill, method)))
}

/// `s` padded with `fill` to `width` characters as `str.center` (`how` anything else),
/// `str.ljust` or `str.rjust` pads it; whole where it is that long already.
pub(super) fn padded(s: &str, width: i64, fill: char, how: &str) -> String {
    let margin = width - s.chars().count() as i64;
    if margin <= 0 {
        return s.to_string();
    }
    let (left, right) = match how {
        "ljust" => (0, margin),
        "rjust" => (margin, 0),
        // CPython's split of an odd margin: the extra character goes left when the width is odd.
        _ => {
            let left = margin / 2 + (margin & width & 1);
            (left, margin - left)
        }
    };
    let pad = |n: i64| fill.to_string().repeat(n as usize);
    format!("{}{s}{}", pad(left), pad(right))
}

/// Python's `start`/`end` of a search, in characters: `(start, end)` after its slice rules,
/// `end` no further than `len` (`start` may be past it: nothing is found there).
fn bounds(len: usize, range: &[Value]) -> Result<(i128, i128), Error> {
    let start = slice_bound(range.first(), true)?.map_or(0, |i| from_end(i, len));
    let end = slice_bound(range.get(1), true)?
        .map_or(len as i128, |i| from_end(i, len))
        .min(len as i128);
    Ok((start, end))
}

/// The byte offset of character `n` of `s` (`n` at most its length).
fn byte_at(s: &str, n: i128) -> usize {
    s.char_indices().nth(n as usize).map_or(s.len(), |(b, _)| b)
}

/// `find`/`rfind` of `sub` within `s[start:end]`: the character position, or `None`.
fn search(s: &str, sub: &Value, range: &[Value], last: bool) -> Result<Option<usize>, Error> {
    let sub = str_arg(sub)?;
    let len = s.chars().count();
    let (start, end) = bounds(len, range)?;
    if end - start < sub.chars().count() as i128 {
        return Ok(None);
    }
    let (from, to) = (byte_at(s, start), byte_at(s, end));
    let window = &s[from..to];
    let found = if last {
        window.rfind(sub)
    } else {
        window.find(sub)
    };
    Ok(found.map(|b| start as usize + window[..b].chars().count()))
}

/// `count` of `sub` within `s[start:end]`, occurrences not overlapping.
fn count(s: &str, sub: &Value, range: &[Value]) -> Result<usize, Error> {
    let sub = str_arg(sub)?;
    let len = s.chars().count();
    let (start, end) = bounds(len, range)?;
    if end - start < sub.chars().count() as i128 {
        return Ok(0);
    }
    let window = &s[byte_at(s, start)..byte_at(s, end)];
    Ok(if sub.is_empty() {
        window.chars().count() + 1
    } else {
        window.matches(sub).count()
    })
}

/// `startswith`/`endswith` of `s[start:end]`: `affix` a string, or a tuple of strings tried in
/// turn (an item that is not a string is refused when reached).
fn has_affix(s: &str, method: &str, affix: &Value, range: &[Value]) -> Result<bool, Error> {
    let (start, end) = bounds(s.chars().count(), range)?;
    let matches = |sub: &str| {
        if end - start < sub.chars().count() as i128 {
            return false;
        }
        let window = &s[byte_at(s, start)..byte_at(s, end)];
        if method == "startswith" {
            window.starts_with(sub)
        } else {
            window.ends_with(sub)
        }
    };
    let as_str = |v: &Value| {
        v.as_str()
            .filter(|_| v.kind() == ValueKind::String)
            .map(str::to_owned)
    };
    if let Some(sub) = as_str(affix) {
        return Ok(matches(&sub));
    }
    if affix.kind() != ValueKind::Seq || !affix.is_tuple() {
        return Err(type_error(format!(
            "{method} first arg must be str or a tuple of str, not {}",
            python_type_name(affix)
        )));
    }
    for item in affix.try_iter()? {
        let Some(sub) = as_str(&item) else {
            return Err(type_error(format!(
                "tuple for {method} must only contain str, not {}",
                python_type_name(&item)
            )));
        };
        if matches(&sub) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `partition`/`rpartition`: a 3-tuple around the first (last) `sep`.
fn partition(s: &str, sep: &Value, last: bool) -> Result<Value, Error> {
    let sep = str_arg(sep)?;
    if sep.is_empty() {
        return Err(value_error("empty separator"));
    }
    let found = if last { s.rfind(sep) } else { s.find(sep) };
    let parts: [&str; 3] = match found {
        Some(at) => [&s[..at], sep, &s[at + sep.len()..]],
        None if last => ["", "", s],
        None => [s, "", ""],
    };
    Ok(Value::from_object(Tuple::new(
        parts.iter().map(|p| Value::from(*p)).collect(),
    )))
}

/// `rsplit(sep=None, maxsplit=-1)`: split from the right, at most `maxsplit` times.
fn rsplit(s: &str, args: &[Value]) -> Result<Value, Error> {
    let sep = match args.first() {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(str_arg(v)?),
    };
    let max = match args.get(1) {
        None => -1,
        Some(v) => int_arg(v)?,
    };
    let mut parts: Vec<String> = match sep {
        Some("") => return Err(value_error("empty separator")),
        Some(sep) if max < 0 => s.rsplit(sep).map(str::to_string).collect(),
        Some(sep) => s
            .rsplitn(max as usize + 1, sep)
            .map(str::to_string)
            .collect(),
        None => whitespace_rsplit(s, max),
    };
    parts.reverse();
    Ok(Value::from(parts))
}

/// Python's `rsplit()` on whitespace: words from the right, last first; past `max` splits the
/// rest keeps its leading whitespace.
fn whitespace_rsplit(s: &str, max: i64) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = python_rstrip(s);
    while !rest.is_empty() {
        if max >= 0 && parts.len() as i64 == max {
            parts.push(rest.to_string());
            break;
        }
        let cut = rest
            .char_indices()
            .rev()
            .find(|&(_, c)| is_python_space(c))
            .map(|(b, c)| (b, b + c.len_utf8()));
        match cut {
            Some((space, word)) => {
                parts.push(rest[word..].to_string());
                rest = python_rstrip(&rest[..space]);
            }
            None => {
                parts.push(rest.to_string());
                break;
            }
        }
    }
    parts
}

/// `expandtabs(size)`: each tab to spaces up to the next multiple of `size` columns, counted
/// from the last line break.
fn expand_tabs(s: &str, size: i64) -> String {
    let mut out = String::with_capacity(s.len());
    let mut column: i64 = 0;
    for c in s.chars() {
        match c {
            '\t' => {
                if size > 0 {
                    let n = size - column % size;
                    out.extend(std::iter::repeat_n(' ', n as usize));
                    column += n;
                }
            }
            '\n' | '\r' => {
                out.push(c);
                column = 0;
            }
            _ => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

/// `istitle`: an upper-case or title-case character only after an uncased one, a lower-case
/// one only after a cased one, and at least one cased character.
fn is_title(s: &str) -> bool {
    let (mut cased, mut previous_cased) = (false, false);
    for c in s.chars() {
        let upper_or_title = c.is_uppercase() || (is_cased(c) && !c.is_lowercase());
        if upper_or_title {
            if previous_cased {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else if c.is_lowercase() {
            if !previous_cased {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else {
            previous_cased = false;
        }
    }
    cased
}

/// `isidentifier`: a letter or `_` (Unicode's XID_Start), then XID_Continue characters.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c == '_' || unicode_ident::is_xid_start(c) => {
            chars.all(unicode_ident::is_xid_continue)
        }
        _ => false,
    }
}
