//! `text.format(*args, **kwargs)` and `text.format_map(mapping)` as transformers renders them:
//! jinja2's sandbox runs both through its `SandboxedFormatter`, Python's `string.Formatter`
//! with the sandbox's own attribute and item lookups. So a field's `.name` and `[key]` are
//! jinja2's lookups (a dict's method names first, a missing one undefined), a missing argument
//! is `IndexError: tuple index out of range` or `KeyError`, and both ways of mixing automatic
//! and manual numbering give the same `ValueError`. The format string is parsed by CPython's
//! own parser (its errors), one field at a time, so an earlier field's error comes first.
//!
//! A Markup string formats as markupsafe's `EscapeFormatter`: a Markup argument is written
//! as it is (and refuses any spec), every other field is formatted and then escaped, and the
//! result is Markup.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_format::ascii;
use super::python_format_spec::{decimal_value, format_value, read_integer};
use super::python_markup::{escape, is_markup, markup};
use super::python_semantics::{python_type_name, type_error};
use super::python_undefined::{self as undef, is_undefined};
use super::python_value::{py_repr, py_str};

/// How deep replacement fields may nest in a spec (`string.Formatter`'s recursion depth).
const MAX_DEPTH: i32 = 2;

/// `value.method(*args)` where `value` is a string and the method `format` or `format_map`;
/// `None` otherwise.
pub fn call(value: &Value, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    if value.kind() != ValueKind::String || !matches!(method, "format" | "format_map") {
        return None;
    }
    let (positional, kwargs) = match args.split_last() {
        Some((last, rest)) if last.is_kwargs() => (rest, Some(last)),
        _ => (args, None),
    };
    let (positional, names) = if method == "format_map" {
        if kwargs.is_some_and(|k| k.len().unwrap_or(0) > 0) {
            return Some(Err(type_error(
                "format_map() takes no keyword arguments".into(),
            )));
        }
        let [mapping] = positional else {
            return Some(Err(type_error(format!(
                "format_map() takes exactly one argument ({} given)",
                positional.len()
            ))));
        };
        (&[][..], Names::Mapping(mapping))
    } else {
        (positional, Names::Keywords(kwargs))
    };
    let formatter = Formatter {
        args: positional,
        names,
        escaping: is_markup(value),
    };
    let text = value.as_str().unwrap_or_default();
    Some(
        formatter
            .format(text, MAX_DEPTH, Numbering::Auto(0))
            .map(|(text, _)| {
                if formatter.escaping {
                    markup(text)
                } else {
                    Value::from(text)
                }
            }),
    )
}

/// Where a named field finds its value: the keyword arguments of `format`, or the mapping of
/// `format_map` (subscripted as Python subscripts it).
enum Names<'a> {
    Keywords(Option<&'a Value>),
    Mapping(&'a Value),
}

/// `string.Formatter`'s automatic numbering: the next index, or manual numbering chosen.
#[derive(Clone, Copy)]
enum Numbering {
    Auto(usize),
    Manual,
}

struct Formatter<'a> {
    args: &'a [Value],
    names: Names<'a>,
    escaping: bool,
}

fn value_error(message: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.to_string())
}

fn switching() -> Error {
    value_error("cannot switch from manual field specification to automatic field numbering")
}

impl Formatter<'_> {
    /// `template` with its fields replaced, and the numbering its fields leave.
    fn format(
        &self,
        template: &str,
        depth: i32,
        mut numbering: Numbering,
    ) -> Result<(String, Numbering), Error> {
        if depth < 0 {
            return Err(value_error("Max string recursion exceeded"));
        }
        let mut out = String::with_capacity(template.len());
        let mut parser = Parser {
            chars: template.chars().collect(),
            at: 0,
        };
        while let Some((literal, field)) = parser.next_item()? {
            out.push_str(&literal);
            let Some(field) = field else { continue };
            let mut name = field.name;
            if name.is_empty() {
                let Numbering::Auto(next) = numbering else {
                    return Err(switching());
                };
                name = next.to_string();
                numbering = Numbering::Auto(next + 1);
            } else if name.chars().all(is_python_digit) {
                if matches!(numbering, Numbering::Auto(next) if next > 0) {
                    return Err(switching());
                }
                numbering = Numbering::Manual;
            }
            let found = self.field(&name)?;
            let converted = match field.conversion {
                None => found,
                Some('s') => Value::from(text_of(&found)),
                Some('r') => Value::from(repr_of(&found)),
                Some('a') => Value::from(ascii(&repr_of(&found))),
                Some(other) => {
                    return Err(value_error(&format!(
                        "Unknown conversion specifier {other}"
                    )))
                }
            };
            let (spec, after) = self.format(&field.spec, depth - 1, numbering)?;
            numbering = after;
            out.push_str(&self.format_field(&converted, &spec)?);
        }
        Ok((out, numbering))
    }

    /// `format(value, spec)`, or markupsafe's escaping version of it.
    fn format_field(&self, value: &Value, spec: &str) -> Result<String, Error> {
        if !self.escaping {
            return format_value(value, spec, &string_type(value));
        }
        if is_markup(value) {
            if !spec.is_empty() {
                return Err(value_error("Unsupported format specification for Markup."));
            }
            return Ok(value.as_str().unwrap_or_default().to_string());
        }
        format_value(value, spec, &string_type(value)).map(|text| escape(&text))
    }

    /// The value a field names: its argument (by position or name), then each `.attr` and
    /// `[key]` looked up as jinja2's sandbox looks them up.
    fn field(&self, name: &str) -> Result<Value, Error> {
        let chars: Vec<char> = name.chars().collect();
        let first_end = chars
            .iter()
            .position(|&c| c == '.' || c == '[')
            .unwrap_or(chars.len());
        let first = &chars[..first_end];
        let mut value = match index_of(first)? {
            Some(i) => self.args.get(i).cloned().ok_or_else(|| {
                Error::new(ErrorKind::InvalidOperation, "tuple index out of range")
            })?,
            None => self.named(&first.iter().collect::<String>())?,
        };
        let mut at = first_end;
        while at < chars.len() {
            let is_attr = match chars[at] {
                '.' => true,
                '[' => false,
                _ => {
                    return Err(value_error(
                        "Only '.' or '[' may follow ']' in format field specifier",
                    ))
                }
            };
            at += 1;
            let start = at;
            let part = if is_attr {
                while at < chars.len() && chars[at] != '.' && chars[at] != '[' {
                    at += 1;
                }
                &chars[start..at]
            } else {
                while at < chars.len() && chars[at] != ']' {
                    at += 1;
                }
                if at == chars.len() {
                    return Err(value_error("Missing ']' in format string"));
                }
                at += 1;
                &chars[start..at - 1]
            };
            if part.is_empty() {
                return Err(value_error("Empty attribute in format string"));
            }
            let key: String = part.iter().collect();
            // Looking into an undefined value is jinja2's `UndefinedError` (the diagnostic
            // render names it).
            if value.is_undefined() {
                return Err(Error::new(ErrorKind::UndefinedError, "undefined value"));
            }
            value = if is_attr {
                undef::attr_filter(value, &key)?
            } else {
                match index_of(part)? {
                    Some(i) => undef::item_filter(value, Value::from(i))?,
                    None => undef::item_filter(value, Value::from(key))?,
                }
            };
        }
        Ok(value)
    }

    /// `kwargs[name]`, or `mapping[name]` with Python's errors for what is not a dict.
    fn named(&self, name: &str) -> Result<Value, Error> {
        let key = Value::from(name);
        let missing = || Error::new(ErrorKind::InvalidOperation, py_repr(&key));
        let map = match self.names {
            Names::Keywords(None) => return Err(missing()),
            Names::Keywords(Some(map)) => map,
            Names::Mapping(map) => {
                undef::refuse_hinted(map)?;
                let refused = match python_type_name(map) {
                    "dict" => None,
                    "str" => Some("string indices must be integers, not 'str'".to_string()),
                    kind @ ("list" | "tuple" | "range") => Some(format!(
                        "{kind} indices must be integers or slices, not str"
                    )),
                    "Undefined" => {
                        return Err(Error::new(ErrorKind::UndefinedError, "undefined value"))
                    }
                    kind => Some(format!("'{kind}' object is not subscriptable")),
                };
                if let Some(message) = refused {
                    return Err(type_error(message));
                }
                map
            }
        };
        map.get_item(&key)
            .ok()
            .filter(|v| !v.is_undefined())
            .ok_or_else(missing)
    }
}

/// A field name's first part or an item's key as an index where it is all decimal digits.
fn index_of(chars: &[char]) -> Result<Option<usize>, Error> {
    if chars.is_empty() || !chars.iter().all(|&c| decimal_value(c).is_some()) {
        return Ok(None);
    }
    let mut at = 0;
    read_integer(chars, &mut at).map(|(n, _)| Some(n))
}

/// Python's `str.isdigit` of one character: the decimal digits of every script, and the
/// superscript, subscript and circled digits.
fn is_python_digit(c: char) -> bool {
    decimal_value(c).is_some()
        || matches!(c, '¹' | '²' | '³' | '⁰' | '⁴'..='⁹' | '₀'..='₉' | '①'..='⑨' | '⓪')
}

/// The type name a string argument's errors give (`str`, or `Markup`).
fn string_type(value: &Value) -> String {
    if is_markup(value) {
        "Markup".into()
    } else {
        python_type_name(value).into()
    }
}

/// `str(value)`; jinja2's undefined value is empty.
fn text_of(value: &Value) -> String {
    if is_undefined(value) {
        String::new()
    } else {
        py_str(value)
    }
}

/// `repr(value)`; jinja2's undefined value is `Undefined`.
fn repr_of(value: &Value) -> String {
    if is_undefined(value) {
        "Undefined".into()
    } else {
        py_repr(value)
    }
}

/// One replacement field: `{name!conversion:spec}`.
struct Field {
    name: String,
    conversion: Option<char>,
    spec: String,
}

/// CPython's parser of a format string, one literal and field at a time.
struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    /// The next literal text and the field after it, `None` at the end.
    fn next_item(&mut self) -> Result<Option<(String, Option<Field>)>, Error> {
        let chars = &self.chars;
        if self.at >= chars.len() {
            return Ok(None);
        }
        let start = self.at;
        let mut brace = None;
        while self.at < chars.len() {
            let c = chars[self.at];
            self.at += 1;
            if c == '{' || c == '}' {
                brace = Some(c);
                break;
            }
        }
        let at_end = self.at >= chars.len();
        let mut end = self.at;
        let Some(brace) = brace else {
            return Ok(Some((chars[start..end].iter().collect(), None)));
        };
        let doubled = !at_end && chars[self.at] == brace;
        if brace == '}' && !doubled {
            return Err(value_error("Single '}' encountered in format string"));
        }
        if brace == '{' && at_end {
            return Err(value_error("Single '{' encountered in format string"));
        }
        if doubled {
            // The literal keeps one brace of the two.
            self.at += 1;
            return Ok(Some((chars[start..end].iter().collect(), None)));
        }
        end -= 1;
        let literal = chars[start..end].iter().collect();
        let field = self.field()?;
        Ok(Some((literal, Some(field))))
    }

    /// The field after a `{`, up to its `}`.
    fn field(&mut self) -> Result<Field, Error> {
        let chars = &self.chars;
        let start = self.at;
        let mut last = None;
        while self.at < chars.len() {
            let c = chars[self.at];
            self.at += 1;
            match c {
                '{' => return Err(value_error("unexpected '{' in field name")),
                '[' => {
                    while self.at < chars.len() && chars[self.at] != ']' {
                        self.at += 1;
                    }
                    last = Some(c);
                    continue;
                }
                '}' | ':' | '!' => {
                    last = Some(c);
                    break;
                }
                _ => last = Some(c),
            }
        }
        let mut field = Field {
            name: chars[start..self.at.saturating_sub(1).max(start)]
                .iter()
                .collect(),
            conversion: None,
            spec: String::new(),
        };
        match last {
            Some('}') => return Ok(field),
            Some('!' | ':') => {}
            _ => return Err(value_error("expected '}' before end of string")),
        }
        if last == Some('!') {
            let Some(&conversion) = chars.get(self.at) else {
                return Err(value_error(
                    "end of string while looking for conversion specifier",
                ));
            };
            field.conversion = Some(conversion);
            self.at += 1;
            if let Some(&c) = chars.get(self.at) {
                self.at += 1;
                if c == '}' {
                    return Ok(field);
                }
                if c != ':' {
                    return Err(value_error("expected ':' after conversion specifier"));
                }
            }
        }
        let spec_start = self.at;
        let mut depth = 1;
        while self.at < chars.len() {
            let c = chars[self.at];
            self.at += 1;
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        field.spec = chars[spec_start..self.at - 1].iter().collect();
                        return Ok(field);
                    }
                }
                _ => {}
            }
        }
        Err(value_error("unmatched '{' in format spec"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(template: &str, args: Vec<Value>) -> Result<String, String> {
        let value = Value::from(template);
        match call(&value, "format", &args) {
            Some(Ok(text)) => Ok(text.as_str().unwrap_or_default().to_string()),
            Some(Err(e)) => Err(e.detail().unwrap_or_default().to_string()),
            None => Err("not a format call".into()),
        }
    }

    #[test]
    fn fields_number_and_nest_as_string_formatter() {
        let two = || vec![Value::from(1), Value::from("ab")];
        assert_eq!(format("{}-{}|{{}}", two()).as_deref(), Ok("1-ab|{}"));
        assert_eq!(format("{1!r:>6}{0:03}", two()).as_deref(), Ok("  'ab'001"));
        assert_eq!(
            format("{:{}}", vec![Value::from(7), Value::from(3)]).as_deref(),
            Ok("  7")
        );
        assert_eq!(
            format("{0[1]}{0[0]}", vec![Value::from(vec!["x", "y"])]).as_deref(),
            Ok("yx")
        );
        let switching =
            "cannot switch from manual field specification to automatic field numbering";
        assert_eq!(format("{}{0}", two()).unwrap_err(), switching);
        assert_eq!(format("{0}{}", two()).unwrap_err(), switching);
        assert_eq!(
            format("{2}", two()).unwrap_err(),
            "tuple index out of range"
        );
        assert_eq!(format("{x}", two()).unwrap_err(), "'x'");
        assert_eq!(
            format("{0:{1:{0}}}", two()).unwrap_err(),
            "Max string recursion exceeded"
        );
    }

    #[test]
    fn the_parser_refuses_as_cpython() {
        let cases = [
            ("a}", "Single '}' encountered in format string"),
            ("a{", "Single '{' encountered in format string"),
            ("{0", "expected '}' before end of string"),
            (
                "{0!",
                "end of string while looking for conversion specifier",
            ),
            ("{0!r", "unmatched '{' in format spec"),
            ("{0!rx}", "expected ':' after conversion specifier"),
            ("{0!x}", "Unknown conversion specifier x"),
            ("{a{}", "unexpected '{' in field name"),
            (
                "{0[0]x}",
                "Only '.' or '[' may follow ']' in format field specifier",
            ),
            ("{0.}", "Empty attribute in format string"),
        ];
        for (template, want) in cases {
            let got = format(template, vec![Value::from(vec![1])]).unwrap_err();
            assert_eq!(got, want, "{template}");
        }
    }

    #[test]
    fn markup_escapes_its_fields_and_stays_markup() {
        let template = Value::from_safe_string("<b>{}{}</b>".into());
        let args = [Value::from("<"), Value::from_safe_string("&amp;".into())];
        let result = call(&template, "format", &args).unwrap().unwrap();
        assert!(is_markup(&result));
        assert_eq!(result.as_str(), Some("<b>&lt;&amp;</b>"));
    }
}
