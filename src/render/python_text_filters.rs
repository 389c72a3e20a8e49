//! jinja2's filters that write a value for a web page or for a reader, as jinja2 writes them for
//! transformers (no auto-escaping): `forceescape`, `xmlattr`, `urlencode`, `filesizeformat` and
//! `striptags` (`wordwrap` and `urlize` have their own modules). minijinja has none of them (or,
//! for `urlencode`, only behind a feature with its own quoting).

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::html_unescape::html_unescape;
use super::python_filters::as_float;
use super::python_markup::{escape, escape_into, is_markup, markup};
use super::python_semantics::{self, python_type_name, type_error};
use super::python_signature::Signature;
use super::python_str::python_split_whitespace;
use super::python_undefined::is_undefined;
use super::python_value::{py_float, py_repr, py_str};

/// `forceescape`: markupsafe's `escape` of `str(value)`, a Markup string (see `python_markup`).
pub fn forceescape_filter(value: Value) -> Result<Value, Error> {
    Ok(markup(escape(&py_str(&value))))
}

/// `escape` (`e`): markupsafe's `escape`, a Markup string unchanged and anything else
/// `str(value)` escaped (minijinja's also escapes `/` and writes `'` otherwise).
pub fn escape_filter(value: Value) -> Result<Value, Error> {
    if is_markup(&value) {
        return Ok(value);
    }
    Ok(markup(escape(&py_str(&value))))
}

/// `xmlattr(autospace=True)`: `key="value"` for each item of a dict whose value is neither
/// `None` nor undefined, both escaped, joined by spaces (with one before where `autospace`).
pub fn xmlattr_filter(value: Value, autospace: Option<bool>) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    if value.kind() != ValueKind::Map {
        return Err(type_error(format!(
            "'{}' object has no attribute 'items'",
            python_type_name(&value)
        )));
    }
    let mut out = String::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        if item.is_none() || item.is_undefined() {
            continue;
        }
        let Some(name) = key.as_str().filter(|_| key.kind() == ValueKind::String) else {
            return Err(type_error(format!(
                "expected string or bytes-like object, got '{}'",
                python_type_name(&key)
            )));
        };
        // Python's `[\s/>=]` in ASCII mode.
        if name.bytes().any(|b| {
            matches!(
                b,
                b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' | b'/' | b'>' | b'='
            )
        }) {
            return Err(type_error(format!(
                "Invalid character in attribute name: {}",
                py_repr(&key)
            )));
        }
        if !out.is_empty() || autospace.unwrap_or(true) {
            out.push(' ');
        }
        escape_into(&mut out, name);
        out.push_str("=\"");
        escape_into(&mut out, &py_str(&item));
        out.push('"');
    }
    Ok(Value::from(out))
}

/// Python's `quote_from_bytes` of the UTF-8 of `text`: letters, digits and `_.-~` (and `/`
/// where `slash_safe`) as they are, every other byte as `%XX`; in a query string (`for_qs`) a
/// space is `+`.
fn url_quote_into(out: &mut String, text: &str, slash_safe: bool, for_qs: bool) {
    for &b in text.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(char::from(b))
            }
            b'/' if slash_safe => out.push('/'),
            b' ' if for_qs => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
}

/// `urlencode`: a string (or any value that does not iterate) quoted for a URL path, `/` kept;
/// a dict's items, or an iterable's pairs, as a query string `k=v&k=v`.
pub fn urlencode_filter(value: Value) -> Result<Value, Error> {
    let mut out = String::new();
    let iterable = matches!(
        value.kind(),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
    );
    if value.is_undefined() {
        // jinja2's undefined value iterates as empty.
        return Ok(Value::from(""));
    }
    if value.kind() == ValueKind::String || !iterable {
        url_quote_into(&mut out, &py_str(&value), true, false);
        return Ok(Value::from(out));
    }
    let pair = |item: Value| -> Result<(Value, Value), Error> {
        if value.kind() == ValueKind::Map {
            let v = value.get_item(&item)?;
            return Ok((item, v));
        }
        // Python unpacks anything iterable: a dict gives its keys, a string its characters.
        let dict = item.kind() == ValueKind::Map && python_semantics::is_dict(&item);
        if !dict
            && !matches!(
                item.kind(),
                ValueKind::Seq | ValueKind::Iterable | ValueKind::String
            )
        {
            return Err(type_error(format!(
                "cannot unpack non-iterable {} object",
                python_type_name(&item)
            )));
        }
        let parts: Vec<Value> = item.try_iter()?.collect();
        match parts.as_slice() {
            [k, v] => Ok((k.clone(), v.clone())),
            [_, _, ..] => Err(type_error(
                "too many values to unpack (expected 2)".to_string(),
            )),
            _ => Err(type_error(format!(
                "not enough values to unpack (expected 2, got {})",
                parts.len()
            ))),
        }
    };
    for (i, item) in value.try_iter()?.enumerate() {
        let (k, v) = pair(item)?;
        if i > 0 {
            out.push('&');
        }
        url_quote_into(&mut out, &py_str(&k), false, true);
        out.push('=');
        url_quote_into(&mut out, &py_str(&v), false, true);
    }
    Ok(Value::from(out))
}

/// `filesizeformat(binary=False)`: `float(value)` bytes in decimal (`kB`, `MB`, ...) or binary
/// (`KiB`, `MiB`, ...) units, one decimal; `1 Byte`, and whole `Bytes` below one unit.
pub fn filesizeformat_filter(value: Value, binary: Option<Value>) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    let bytes = as_float(&value).ok_or_else(|| match value.kind() {
        ValueKind::String => type_error(format!(
            "could not convert string to float: {}",
            py_repr(&value)
        )),
        _ => type_error(format!(
            "float() argument must be a string or a real number, not '{}'",
            python_type_name(&value)
        )),
    })?;
    let binary = binary.is_some_and(|b| b.is_true());
    let base: f64 = if binary { 1024.0 } else { 1000.0 };
    const DECIMAL: [&str; 8] = ["kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"];
    const BINARY: [&str; 8] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];
    if bytes == 1.0 {
        return Ok(Value::from("1 Byte"));
    }
    if bytes < base {
        // Python's `int()` of the float: toward zero, exact, and refused for infinity.
        let whole = bytes.trunc();
        if whole.is_infinite() {
            return Err(type_error(
                "cannot convert float infinity to integer".to_string(),
            ));
        }
        let whole = if whole == 0.0 {
            "0".to_string()
        } else {
            format!("{whole:.0}")
        };
        return Ok(Value::from(format!("{whole} Bytes")));
    }
    let prefixes = if binary { BINARY } else { DECIMAL };
    // Python compares the float with the integer unit exactly: `1e24` is below `1000 ** 8`.
    let below =
        |unit: u128| bytes < 0.0 || (bytes < 2f64.powi(127) && (bytes.floor() as u128) < unit);
    let int_base: u128 = if binary { 1024 } else { 1000 };
    let mut unit = int_base;
    let mut prefix = prefixes[0];
    for p in prefixes {
        unit *= int_base;
        prefix = p;
        if below(unit) {
            break;
        }
    }
    let scaled = base * bytes / unit as f64;
    let number = if scaled.is_finite() {
        format!("{scaled:.1}")
    } else {
        py_float(scaled)
    };
    Ok(Value::from(format!("{number} {prefix}")))
}

/// `striptags`: markupsafe's `Markup(str(value)).striptags()` (a Markup value's own text, an
/// undefined one empty): comments and tags cut out, runs of whitespace one space, the ends
/// stripped, then character references replaced (Python's `html.unescape`). A plain string.
pub fn striptags_filter(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    const SIGNATURE: Signature = Signature {
        function: "do_striptags",
        params: &["value"],
        passed: 0,
        required: 1,
    };
    SIGNATURE.bind(value.clone(), &args, &kwargs)?;
    let text = if is_undefined(&value) {
        String::new()
    } else {
        py_str(&value)
    };
    let words = python_split_whitespace(&without_tags(&text)).join(" ");
    Ok(Value::from(html_unescape(&words).into_owned()))
}

/// `text` less each closed comment (`<!--` to the next `-->` after it) and each closed tag (`<`
/// to the next `>`), read from the left; from an unclosed one on, the text stays.
fn without_tags(text: &str) -> std::borrow::Cow<'_, str> {
    let mut kept = String::new();
    let mut pos = 0;
    while let Some(start) = text[pos..].find('<').map(|at| pos + at) {
        let end = if text[start..].starts_with("<!--") {
            text[start + 4..].find("-->").map(|at| start + 4 + at + 3)
        } else {
            text[start..].find('>').map(|at| start + at + 1)
        };
        let Some(end) = end else { break };
        kept.push_str(&text[pos..start]);
        pos = end;
    }
    if pos == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    kept.push_str(&text[pos..]);
    std::borrow::Cow::Owned(kept)
}
