//! `json.dumps` as Python writes it, for the `tojson` filter of chat templates.
//!
//! transformers defines `tojson` as `json.dumps(x, ensure_ascii=False, indent=..., separators=...,
//! sort_keys=...)`, which differs from minijinja's own filter: no HTML escaping, `", "` and
//! `": "` separators, Python's float spelling, keys kept in insertion order. Templates print tool
//! schemas and tool-call arguments with it, so every byte counts.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// How `json.dumps` lays out its output.
pub struct DumpOptions {
    pub indent: Option<String>,
    pub item_separator: String,
    pub key_separator: String,
    pub sort_keys: bool,
    /// `ensure_ascii=True`: every character beyond ASCII as a `\uXXXX` escape.
    pub ensure_ascii: bool,
    /// The Python type name of a value `json.dumps` refuses (the template's own objects:
    /// macros, ranges, generators, bound methods), wherever it sits; `None` dumps everything
    /// (MLX Node's engine serialises such objects as data).
    pub refused: Option<fn(&Value) -> Option<&'static str>>,
}

impl DumpOptions {
    /// Python's defaults: without indent `", "`, with indent `","` (and `": "` either way).
    pub fn python_defaults(indent: Option<String>) -> Self {
        let item_separator = if indent.is_some() { "," } else { ", " };
        DumpOptions {
            indent,
            item_separator: item_separator.to_string(),
            key_separator: ": ".to_string(),
            sort_keys: false,
            ensure_ascii: false,
            refused: None,
        }
    }
}

/// Deep structures are refused rather than risking the stack.
const MAX_DEPTH: usize = 512;

pub fn dumps(value: &Value, options: &DumpOptions) -> Result<String, Error> {
    let mut out = String::new();
    write_value(&mut out, value, options, 0)?;
    Ok(out)
}

/// [`dumps`] of a JSON value as [`to_template`](crate::example::json_value::to_template) would
/// hand it over, written straight from the JSON; `None` where that needs the template value
/// (floats, wide integers, sorted keys), for the caller to take the general path.
pub fn dumps_json(value: &serde_json::Value, options: &DumpOptions) -> Option<String> {
    if options.sort_keys {
        return None;
    }
    let mut out = String::new();
    write_json(&mut out, value, options, 0)?;
    Some(out)
}

fn write_json(
    out: &mut String,
    value: &serde_json::Value,
    o: &DumpOptions,
    depth: usize,
) -> Option<()> {
    use serde_json::Value as Json;
    if depth > MAX_DEPTH {
        return None;
    }
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) if n.is_i64() || n.is_u64() => out.push_str(&n.to_string()),
        Json::Number(_) => return None,
        Json::String(s) => write_string(out, s, o),
        Json::Array(items) if items.is_empty() => out.push_str("[]"),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&o.item_separator);
                }
                newline_indent(out, o, depth + 1);
                write_json(out, item, o, depth + 1)?;
            }
            newline_indent(out, o, depth);
            out.push(']');
        }
        Json::Object(map) if crate::example::json_value::is_wide_integer(map) => return None,
        Json::Object(map) if map.is_empty() => out.push_str("{}"),
        Json::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(&o.item_separator);
                }
                newline_indent(out, o, depth + 1);
                write_string(out, key, o);
                out.push_str(&o.key_separator);
                write_json(out, item, o, depth + 1)?;
            }
            newline_indent(out, o, depth);
            out.push('}');
        }
    }
    Some(())
}

fn write_value(
    out: &mut String,
    value: &Value,
    o: &DumpOptions,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: value nested too deeply",
        ));
    }
    if let Some(name) = o.refused.and_then(|refused| refused(value)) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("Object of type {name} is not JSON serializable"),
        ));
    }
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        // jinja2's Undefined is no JSON value: `json.dumps` raises on it.
        ValueKind::Undefined => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "Object of type Undefined is not JSON serializable",
            ))
        }
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, value),
        ValueKind::String => write_string(out, value.as_str().unwrap_or_default(), o),
        ValueKind::Bytes => write_string(
            out,
            &String::from_utf8_lossy(value.as_bytes().unwrap_or_default()),
            o,
        ),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_seq(out, &items, o, depth)?;
        }
        ValueKind::Map | ValueKind::Plain => {
            let mut pairs: Vec<(Value, Value)> = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                pairs.push((key, item));
            }
            if o.sort_keys {
                // Python's sort compares an undefined key with the others, which jinja2's
                // undefined value refuses (a lone key is never compared).
                if o.refused.is_some() && pairs.len() > 1 {
                    for (key, _) in &pairs {
                        crate::render::python_undefined::refuse_undefined(key)?;
                    }
                }
                pairs.sort_by_cached_key(|pair| pair.0.to_string());
            }
            write_map(out, &pairs, o, depth)?;
        }
        ValueKind::Invalid => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: value cannot be serialized",
            ))
        }
        _ => write_string(out, &value.to_string(), o),
    }
    Ok(())
}

fn newline_indent(out: &mut String, o: &DumpOptions, depth: usize) {
    if let Some(indent) = &o.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
}

fn write_seq(
    out: &mut String,
    items: &[Value],
    o: &DumpOptions,
    depth: usize,
) -> Result<(), Error> {
    if items.is_empty() {
        out.push_str("[]");
        return Ok(());
    }
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&o.item_separator);
        }
        newline_indent(out, o, depth + 1);
        write_value(out, item, o, depth + 1)?;
    }
    newline_indent(out, o, depth);
    out.push(']');
    Ok(())
}

fn write_map(
    out: &mut String,
    pairs: &[(Value, Value)],
    o: &DumpOptions,
    depth: usize,
) -> Result<(), Error> {
    if pairs.is_empty() {
        out.push_str("{}");
        return Ok(());
    }
    out.push('{');
    for (i, (key, item)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push_str(&o.item_separator);
        }
        newline_indent(out, o, depth + 1);
        write_key(out, key, o)?;
        out.push_str(&o.key_separator);
        write_value(out, item, o, depth + 1)?;
    }
    newline_indent(out, o, depth);
    out.push('}');
    Ok(())
}

/// Python turns non-string keys into strings: `True` -> "true", `None` -> "null", numbers as
/// their JSON spelling. Where Python's rules hold (`refused` is set), any other key (an
/// undefined value, a tuple) is Python's `TypeError`.
fn write_key(out: &mut String, key: &Value, o: &DumpOptions) -> Result<(), Error> {
    let scalar = matches!(
        key.kind(),
        ValueKind::String | ValueKind::None | ValueKind::Bool | ValueKind::Number
    );
    if o.refused.is_some() && !scalar {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "keys must be str, int, float, bool or None, not {}",
                crate::render::python_semantics::python_type_name(key)
            ),
        ));
    }
    match key.kind() {
        ValueKind::String => write_string(out, key.as_str().unwrap_or_default(), o),
        ValueKind::None | ValueKind::Undefined => out.push_str("\"null\""),
        ValueKind::Bool => out.push_str(if key.is_true() {
            "\"true\""
        } else {
            "\"false\""
        }),
        ValueKind::Number => {
            let mut spelled = String::new();
            write_number(&mut spelled, key);
            write_string(out, &spelled, o);
        }
        _ => write_string(out, &key.to_string(), o),
    }
    Ok(())
}

fn write_number(out: &mut String, value: &Value) {
    if value.is_integer() {
        out.push_str(&value.to_string());
        return;
    }
    match f64::try_from(value.clone()) {
        Ok(f) => out.push_str(&python_float_repr(f)),
        Err(_) => out.push_str(&value.to_string()),
    }
}

/// `repr(float)`: the shortest digits that round-trip, in fixed notation when the decimal
/// exponent is in [-4, 16) and in scientific notation (two-digit exponent at least) otherwise.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let (digits, exponent) = shortest_digits(f.abs());
    let sign = if f < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (int_part, frac_part) = digits.split_at(point as usize);
            format!("{int_part}.{frac_part}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exponent.abs())
    }
}

/// The shortest digits that read back as `f` (positive, finite, not zero) and the decimal
/// exponent of the first one. Where two such digit strings are equally near `f` (its exact value
/// ends in a 5 one place further), the one ending in an even digit, as Python's `repr` and V8
/// choose: ryu does the same; Rust's own `{:e}` takes the upper one (`95844.26879882813` for
/// Python's `95844.26879882812`).
fn shortest_digits(f: f64) -> (String, i32) {
    let mut buffer = ryu::Buffer::new();
    // Fixed ("95844.26879882812", "0.0001") or scientific ("1e16", "1.5e-7") notation.
    let text = buffer.format_finite(f);
    let (mantissa, exponent) = text.split_once('e').unwrap_or((text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = [whole, fraction].concat();
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all[leading..].trim_end_matches('0').to_string();
    (digits, whole.len() as i32 - 1 - leading as i32 + exponent)
}

/// A JSON string as `json.dumps` writes it: quotes, backslashes and control characters escaped,
/// and with `ensure_ascii` everything beyond `~` too (UTF-16 units, surrogate pairs beyond the
/// BMP).
fn write_string(out: &mut String, s: &str, o: &DumpOptions) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if o.ensure_ascii && (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(json: &str) -> String {
        let parsed: serde_json::Value = serde_json::from_str(json).unwrap();
        dumps(
            &Value::from(minijinja::value::Serde(&parsed)),
            &DumpOptions::python_defaults(None),
        )
        .unwrap()
    }

    #[test]
    fn matches_python_separators_and_escaping() {
        assert_eq!(
            dump(r#"{"b": [1, 2.5, true, null], "a": "<&'ü°>\n"}"#),
            "{\"b\": [1, 2.5, true, null], \"a\": \"<&'ü°>\\n\"}"
        );
        assert_eq!(dump("[]"), "[]");
        assert_eq!(dump("{}"), "{}");
        assert_eq!(dump("\"\\u0001\""), "\"\\u0001\"");
    }

    #[test]
    fn floats_are_spelled_as_python_spells_them_on_its_goldens() {
        // scripts/gen_float_repr_goldens.py: random doubles, short decimals at many scales and
        // exact ties between two shortest spellings, with Python's repr of each.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/__test__/fixtures/float_repr.json"
        );
        let golden: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let pairs = golden["pairs"].as_array().unwrap();
        assert_eq!(pairs.len(), 3600);
        let wrong: Vec<String> = pairs
            .iter()
            .filter_map(|pair| {
                let bits = u64::from_str_radix(pair[0].as_str().unwrap(), 16).unwrap();
                let ours = python_float_repr(f64::from_bits(bits));
                (ours != pair[1].as_str().unwrap()).then(|| format!("{ours} for {}", pair[1]))
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{} differ: {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        );
    }

    #[test]
    // The ties below are written as their doubles' exact values, which is the point of them.
    #[allow(clippy::excessive_precision)]
    fn floats_are_spelled_like_python_repr() {
        assert_eq!(python_float_repr(1.0), "1.0");
        assert_eq!(python_float_repr(0.5), "0.5");
        assert_eq!(python_float_repr(1e20), "1e+20");
        assert_eq!(python_float_repr(1e16), "1e+16");
        assert_eq!(python_float_repr(1e15), "1000000000000000.0");
        assert_eq!(python_float_repr(0.0001), "0.0001");
        assert_eq!(python_float_repr(0.00001), "1e-05");
        assert_eq!(python_float_repr(-1.5e-7), "-1.5e-07");
        // Exact ties between two shortest spellings: the even last digit, as Python's repr.
        for (f, python) in [
            (95844.268798828125, "95844.26879882812"),
            (1848626136779785.25, "1848626136779785.2"),
            (159304380416870.125, "159304380416870.12"),
            (-147495269.775390625, "-147495269.77539062"),
            (2516583712.37890625, "2516583712.3789062"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (0.1, "0.1"),
            (100.0, "100.0"),
        ] {
            assert_eq!(python_float_repr(f), python, "{f:e}");
        }
        assert_eq!(python_float_repr(123.456), "123.456");
        assert_eq!(python_float_repr(-0.0), "-0.0");
    }

    #[test]
    fn indent_uses_comma_newline_layout() {
        let parsed: serde_json::Value = serde_json::from_str(r#"{"a": [1, {"b": 2}]}"#).unwrap();
        let out = dumps(
            &Value::from(minijinja::value::Serde(&parsed)),
            &DumpOptions::python_defaults(Some("  ".into())),
        )
        .unwrap();
        assert_eq!(
            out,
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ]\n}"
        );
    }
}
