//! Python's `str()` and `repr()` of the values a chat template holds.
//!
//! jinja2 prints a value with Python's `str`: `1e-07` for a float minijinja writes `0.0000001`,
//! `[1.5, 'a', None]` for a list minijinja writes `[1.5, "a", none]`, `{'k': True}` for a map.
//! Templates print tool-call arguments this way (`{{ value }}`, `value | string`), so the
//! template engine's formatter and its `string` filter go through [`py_str`].

use std::sync::OnceLock;

use minijinja::value::{Tuple, Value, ValueKind};

use crate::render::json_dumps::python_float_repr;
use crate::render::python_generators::is_generator;
use crate::render::python_range::as_range;
use crate::render::python_semantics::{
    as_dict_view, is_loop, is_macro, is_namespace, python_type_name,
};

/// Deeper structures are printed by minijinja rather than risking the stack.
const MAX_DEPTH: usize = 256;

/// Whether `value` is one group of `groupby` (see `python_order`).
fn is_group(value: &Value) -> bool {
    value
        .downcast_object_ref::<crate::render::python_order::Group>()
        .is_some()
}

/// A namespace's fields as a plain map.
fn fields_of(value: &Value) -> Value {
    let pairs = value
        .try_iter()
        .map(|keys| {
            keys.map(|k| {
                let v = value.get_item(&k).unwrap_or_default();
                (k, v)
            })
            .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    Value::from_pairs(pairs)
}

/// `str(value)` as Python writes it.
pub fn py_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        _ => {
            let mut out = String::new();
            write_repr(&mut out, value, 0);
            out
        }
    }
}

/// `repr(value)` as Python writes it.
pub fn py_repr(value: &Value) -> String {
    if value.is_undefined() {
        return "Undefined".to_string();
    }
    let mut out = String::new();
    write_repr(&mut out, value, 0);
    out
}

/// jinja2's `pprint`: Python's `pprint.pformat`, which is `repr` with every dict's keys in order
/// (of dicts whose keys are all strings, the ones a template meets) where the text fits 80
/// columns. A longer text stays on one line here, where `pformat` breaks it into lines.
pub fn pprint_filter(value: Value) -> String {
    py_repr(&keys_in_order(&value))
}

/// `value` with the keys of each dict in it (through lists) in order, as `pformat` prints them.
fn keys_in_order(value: &Value) -> Value {
    match python_type_name(value) {
        "dict" => {
            let Ok(keys) = value.try_iter() else {
                return value.clone();
            };
            let mut pairs: Vec<(Value, Value)> = keys
                .map(|k| {
                    let v = value.get_item(&k).unwrap_or_default();
                    (k, keys_in_order(&v))
                })
                .collect();
            if !pairs.iter().all(|(k, _)| k.kind() == ValueKind::String) {
                return value.clone();
            }
            pairs.sort_by(|(a, _), (b, _)| a.as_str().cmp(&b.as_str()));
            Value::from_pairs(pairs)
        }
        "list" if value.kind() == ValueKind::Seq => match value.try_iter() {
            Ok(items) => items.map(|item| keys_in_order(&item)).collect(),
            Err(_) => value.clone(),
        },
        _ => value.clone(),
    }
}

/// Whether printing `value` in Python differs from minijinja's own spelling: floats, and lists
/// or maps (whose items Python shows by `repr`), slices of lists included.
pub fn needs_python_spelling(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Number => !value.is_integer(),
        ValueKind::Seq | ValueKind::Map => true,
        // minijinja's lazy lists (what slicing a list gives), which Python holds as lists; not
        // a generator (printing it must not consume it).
        ValueKind::Iterable => !is_generator(value),
        _ => false,
    }
}

/// Python's spelling of a float: `repr`, with `inf` and `nan` (JSON's `Infinity`/`NaN` are
/// `json.dumps` spellings).
pub fn py_float(f: f64) -> String {
    if f.is_nan() {
        "nan".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        python_float_repr(f)
    }
}

fn write_repr(out: &mut String, value: &Value, depth: usize) {
    if depth > MAX_DEPTH {
        out.push_str(&value.to_string());
        return;
    }
    match value.kind() {
        // `str()` of an undefined value is empty; inside a container it shows by `repr`.
        ValueKind::Undefined if depth > 0 => out.push_str("Undefined"),
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
            Ok(f) => out.push_str(&py_float(f)),
            Err(_) => out.push_str(&value.to_string()),
        },
        // jinja2's Markup (see `python_markup`).
        ValueKind::String if value.is_safe() => {
            out.push_str("Markup(");
            write_str_repr(out, value.as_str().unwrap_or_default());
            out.push(')');
        }
        ValueKind::String => write_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq if as_range(value).is_some() => {
            out.push_str(&as_range(value).map(|r| r.repr()).unwrap_or_default())
        }
        ValueKind::Iterable if as_dict_view(value).is_some() => {
            let list = Value::from(
                value
                    .try_iter()
                    .map(|i| i.collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
            let mut items = String::new();
            write_repr(&mut items, &list, depth + 1);
            out.push_str(
                &as_dict_view(value)
                    .map(|v| v.spelled(&items))
                    .unwrap_or_default(),
            );
        }
        ValueKind::Seq | ValueKind::Iterable if !is_generator(value) => {
            // A `(key, value)` pair of `items` or `dictsort`, and a group of `groupby` (jinja2's
            // named tuple of `grouper` and `list`), are tuples in Python.
            let tuple = value
                .downcast_object_ref::<Tuple>()
                .map(|t| t.len())
                .or_else(|| is_group(value).then_some(2));
            out.push(if tuple.is_some() { '(' } else { '[' });
            if let Ok(items) = value.try_iter() {
                for (i, item) in items.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &item, depth + 1);
                }
            }
            out.push_str(match tuple {
                Some(1) => ",)",
                Some(_) => ")",
                None => "]",
            });
        }
        ValueKind::Map if is_macro(value) => {
            // jinja2's `repr` of a macro (and of `caller`).
            out.push_str("<Macro ");
            match value
                .get_attr("name")
                .ok()
                .filter(|n| n.kind() == ValueKind::String)
            {
                // A call block's macro, minijinja's `caller`, is anonymous in jinja2.
                Some(name) if name.as_str() != Some("caller") => {
                    write_str_repr(out, name.as_str().unwrap_or_default())
                }
                _ => out.push_str("anonymous"),
            }
            out.push('>');
        }
        // jinja2's `repr` of the `loop` variable.
        ValueKind::Map if is_loop(value) => {
            let field = |name: &str| value.get_attr(name).unwrap_or_default().to_string();
            out.push_str(&format!(
                "<LoopContext {}/{}>",
                field("index"),
                field("length")
            ));
        }
        // jinja2's namespace prints its fields in the order they were first set.
        ValueKind::Map if is_namespace(value) => {
            out.push_str("<Namespace ");
            write_repr(out, &fields_of(value), depth);
            out.push('>');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(keys) = value.try_iter() {
                for (i, key) in keys.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &key, depth + 1);
                    out.push_str(": ");
                    let item = value.get_item(&key).unwrap_or_default();
                    write_repr(out, &item, depth + 1);
                }
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
}

/// The Python type name of a template object that `json.dumps` refuses (a macro, a range, a
/// generator, a bound method), `None` for data.
pub fn template_object_name(value: &Value) -> Option<&'static str> {
    match value.kind() {
        ValueKind::Map if is_macro(value) => Some("Macro"),
        ValueKind::Map if is_namespace(value) => Some("TemplateNamespace"),
        ValueKind::Seq if as_range(value).is_some() => Some("range"),
        ValueKind::Iterable if is_generator(value) => Some(python_type_name(value)),
        ValueKind::Iterable if as_dict_view(value).is_some() => Some(python_type_name(value)),
        // The diagnostic render's undefined value, which `json.dumps` refuses as the plain one.
        ValueKind::Iterable if python_type_name(value) == "Undefined" => Some("Undefined"),
        ValueKind::Plain => match python_type_name(value) {
            "builtin_function_or_method" => Some("builtin_function_or_method"),
            "complex" => Some("complex"),
            _ => None,
        },
        _ => None,
    }
}

/// `repr(str)`: single quotes unless the text holds a single quote and no double quote; escapes
/// for the backslash, the quote, `\t`, `\n`, `\r` and every character Python does not call
/// printable.
pub fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c if !c.is_ascii() && is_printable(c) => out.push(c),
            c => {
                let code = c as u32;
                if code <= 0xff {
                    out.push_str(&format!("\\x{code:02x}"));
                } else if code <= 0xffff {
                    out.push_str(&format!("\\u{code:04x}"));
                } else {
                    out.push_str(&format!("\\U{code:08x}"));
                }
            }
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable` of one non-ASCII character: not in Unicode's categories Other
/// (Cc, Cf, Cs, Co, Cn) or Separator (Zl, Zp, Zs).
fn is_printable(c: char) -> bool {
    static NOT_PRINTABLE: OnceLock<Option<onig::Regex>> = OnceLock::new();
    let Some(regex) = NOT_PRINTABLE.get_or_init(|| {
        onig::Regex::new(r"\A[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zs}\p{Zl}\p{Zp}]\z").ok()
    }) else {
        return true;
    };
    let mut buffer = [0u8; 4];
    !regex.is_match(c.encode_utf8(&mut buffer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn value(json: serde_json::Value) -> Value {
        crate::example::json_value::to_template(&json)
    }

    #[test]
    fn floats_lists_and_maps_print_as_python_str() {
        assert_eq!(py_str(&value(json!(1e-7))), "1e-07");
        assert_eq!(py_str(&value(json!(1e21))), "1e+21");
        assert_eq!(py_str(&value(json!(2.0))), "2.0");
        assert_eq!(py_str(&value(json!("a'b"))), "a'b");
        assert_eq!(
            py_str(&value(
                json!([1e21, 1e-7, "x", null, true, {"k": [1, "it's"]}])
            )),
            "[1e+21, 1e-07, 'x', None, True, {'k': [1, \"it's\"]}]"
        );
        assert_eq!(py_str(&value(json!({}))), "{}");
        assert_eq!(py_str(&Value::from(f64::INFINITY)), "inf");
    }

    #[test]
    fn string_repr_escapes_what_python_escapes() {
        let mut out = String::new();
        write_str_repr(
            &mut out,
            "a\\b\n\t\r\u{7}\u{7f}\u{a0}é\u{200b}\u{2028}😀\u{e000}'\"",
        );
        assert_eq!(
            out,
            "'a\\\\b\\n\\t\\r\\x07\\x7f\\xa0é\\u200b\\u2028😀\\ue000\\'\"'"
        );
        let mut out = String::new();
        write_str_repr(&mut out, "it's");
        assert_eq!(out, "\"it's\"");
        let mut out = String::new();
        write_str_repr(&mut out, "\u{10ffff}");
        assert_eq!(out, "'\\U0010ffff'");
    }
}
