//! Python's printf-style formatting, with Python's spelling of each value (`str`, `repr`,
//! `ascii`, its number formats) and Python's errors: jinja2's `format` filter as transformers
//! renders it (`value % args`, `value % kwargs` with keyword arguments), and a template's own
//! `text % args` (see `python_ops`).

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value};

use super::python_semantics::{python_type_name, type_error};
use super::python_value::{py_repr, py_str};

/// `value|format(*args)` or `value|format(**kwargs)`.
pub fn format_filter(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let named = kwargs.args().next().is_some();
    if !args.is_empty() && named {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "can't handle positional and keyword arguments at the same time",
        ));
    }
    let operand = if named {
        // The keyword arguments as one map, in the order of the call (Python's dict).
        Operand::Map(Value::from(kwargs))
    } else {
        Operand::Tuple(args.to_vec())
    };
    percent_format(&py_str(&value), &operand).map(Value::from)
}

/// What `%` formats: a tuple of positional arguments, or a mapping (keyword arguments, or the
/// dict or list a template gives `%`).
pub enum Operand {
    Tuple(Vec<Value>),
    Map(Value),
}

impl Operand {
    fn whole(&self) -> Value {
        match self {
            Operand::Tuple(items) => Value::from(items.clone()),
            Operand::Map(map) => map.clone(),
        }
    }
}

/// One conversion's flags, width and precision.
#[derive(Default)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alternate: bool,
    width: usize,
    precision: Option<usize>,
}

/// The widest field a conversion may ask for (a render of that size is already far beyond any
/// chat template's).
pub(super) const MAX_WIDTH: usize = 1 << 24;

/// Python's `template % operand`.
pub fn percent_format(template: &str, operand: &Operand) -> Result<String, Error> {
    format_with(template, operand, false)
}

/// `Markup(template) % operand`: each argument escaped where it prints as text (`%s`, `%r`,
/// `%a`; a Markup argument as it is), numbers as they are (markupsafe's escape helper).
pub fn markup_percent_format(template: &str, operand: &Operand) -> Result<String, Error> {
    format_with(template, operand, true)
}

fn format_with(template: &str, operand: &Operand, escape: bool) -> Result<String, Error> {
    let chars: Vec<char> = template.chars().collect();
    // Python's argument cursor: a mapping is one argument to unnamed conversions.
    let (items, is_map): (&[Value], bool) = match operand {
        Operand::Tuple(items) => (items, false),
        Operand::Map(_) => (&[], true),
    };
    let (arglen, mut argidx): (isize, isize) = if is_map {
        (-1, -2)
    } else {
        (items.len() as isize, 0)
    };
    let next_arg = |argidx: &mut isize| -> Result<Value, Error> {
        if *argidx < arglen {
            *argidx += 1;
            return Ok(if arglen < 0 {
                operand.whole()
            } else {
                items[(*argidx - 1) as usize].clone()
            });
        }
        Err(type_error("not enough arguments for format string".into()))
    };
    let mut out = String::with_capacity(template.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        i += 1;
        let incomplete = || Error::new(ErrorKind::InvalidOperation, "incomplete format");
        let mut keyed: Option<Value> = None;
        if chars.get(i) == Some(&'(') {
            let Operand::Map(map) = operand else {
                return Err(type_error("format requires a mapping".into()));
            };
            let mut depth = 1;
            let start = i + 1;
            i += 1;
            while i < chars.len() && depth > 0 {
                match chars[i] {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                i += 1;
            }
            if depth > 0 {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "incomplete format key",
                ));
            }
            let key: String = chars[start..i - 1].iter().collect();
            if python_type_name(map) == "list" {
                return Err(type_error(
                    "list indices must be integers or slices, not str".into(),
                ));
            }
            // A key whose value is undefined is there (`%(b)r` of it is `Undefined`).
            let found = map
                .as_object()
                .and_then(|o| o.get_value(&Value::from(key.as_str())));
            // Python's `KeyError`, whose text is the key's `repr`.
            keyed = Some(found.ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    py_repr(&Value::from(key.as_str())),
                )
            })?);
            // Python then reads the mapping afresh: an unnamed conversion after a named one
            // takes the whole mapping.
            argidx = -2;
        }
        let mut spec = Spec::default();
        while let Some(&c) = chars.get(i) {
            match c {
                '-' => spec.left = true,
                '0' => spec.zero = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alternate = true,
                _ => break,
            }
            i += 1;
        }
        if chars.get(i) == Some(&'*') {
            i += 1;
            let width = star_arg(next_arg(&mut argidx)?)?;
            if width < 0 {
                spec.left = true;
            }
            spec.width = width.unsigned_abs() as usize;
        } else {
            spec.width = digits(&chars, &mut i);
        }
        if chars.get(i) == Some(&'.') {
            i += 1;
            spec.precision = Some(if chars.get(i) == Some(&'*') {
                i += 1;
                star_arg(next_arg(&mut argidx)?)?.max(0) as usize
            } else {
                digits(&chars, &mut i)
            });
        }
        // A width or precision no render could hold is refused rather than allocated.
        if spec.width > MAX_WIDTH || spec.precision.is_some_and(|p| p > MAX_WIDTH) {
            return Err(Error::new(ErrorKind::InvalidOperation, "width too big"));
        }
        while matches!(chars.get(i), Some('h' | 'l' | 'L')) {
            i += 1;
        }
        let Some(&conversion) = chars.get(i) else {
            return Err(incomplete());
        };
        let at = i;
        i += 1;
        if conversion == '%' {
            out.push('%');
            continue;
        }
        let arg = match keyed.take() {
            Some(v) => v,
            None => next_arg(&mut argidx)?,
        };
        let text = convert(conversion, &arg, &spec, at, escape)?;
        pad(&mut out, &text, &spec, conversion);
    }
    if argidx < arglen && !is_map {
        return Err(type_error(
            "not all arguments converted during string formatting".into(),
        ));
    }
    Ok(out)
}

fn digits(chars: &[char], i: &mut usize) -> usize {
    let mut n: usize = 0;
    while let Some(d) = chars.get(*i).and_then(|c| c.to_digit(10)) {
        n = n.saturating_mul(10).saturating_add(d as usize);
        *i += 1;
    }
    n
}

fn star_arg(v: Value) -> Result<i64, Error> {
    match v.kind() {
        ValueKind::Number if v.is_integer() => {
            i64::try_from(v).map_err(|_| type_error("* wants int".into()))
        }
        ValueKind::Bool => Ok(i64::from(v.is_true())),
        _ => Err(type_error("* wants int".into())),
    }
}

/// The text of one conversion, before padding to the width.
fn convert(
    conversion: char,
    arg: &Value,
    spec: &Spec,
    at: usize,
    escape: bool,
) -> Result<String, Error> {
    let cut = |text: String| match spec.precision {
        Some(p) => text.chars().take(p).collect(),
        None => text,
    };
    let escaped = |text: String| {
        if escape {
            super::python_markup::escape(&text)
        } else {
            text
        }
    };
    Ok(match conversion {
        's' if escape && super::python_markup::is_markup(arg) => cut(py_str(arg)),
        's' => cut(escaped(py_str(arg))),
        'r' => cut(escaped(py_repr(arg))),
        'a' => cut(ascii(&escaped(py_repr(arg)))),
        'd' | 'i' | 'u' => {
            let (negative, digits) = integer(arg, conversion, false)?;
            signed(negative, digits, "", spec, true)
        }
        'o' | 'x' | 'X' => {
            let (negative, digits) = integer(arg, conversion, true)?;
            let value = digits.parse::<u128>().unwrap_or(0);
            let (body, prefix) = match conversion {
                'o' => (format!("{value:o}"), "0o"),
                'x' => (format!("{value:x}"), "0x"),
                _ => (format!("{value:X}"), "0X"),
            };
            signed(
                negative,
                body,
                if spec.alternate { prefix } else { "" },
                spec,
                true,
            )
        }
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' => {
            let f = real(arg)?;
            let body = float_text(f.abs(), conversion, spec.precision, spec.alternate);
            signed(f.is_sign_negative() && !f.is_nan(), body, "", spec, false)
        }
        'c' => match arg.kind() {
            ValueKind::String if arg.as_str().is_some_and(|s| s.chars().count() == 1) => {
                arg.as_str().unwrap_or_default().to_string()
            }
            ValueKind::Number | ValueKind::Bool
                if arg.is_integer() || arg.kind() == ValueKind::Bool =>
            {
                let code = i64::try_from(arg.clone()).unwrap_or(-1);
                match u32::try_from(code).ok().and_then(char::from_u32) {
                    Some(c) => c.to_string(),
                    None => {
                        return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            "%c arg not in range(0x110000)",
                        ))
                    }
                }
            }
            _ => return Err(type_error("%c requires int or char".into())),
        },
        other => {
            let shown = if other.is_ascii_graphic() || other == ' ' {
                other.to_string()
            } else {
                format!("\\x{:x}", other as u32)
            };
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "unsupported format character '{shown}' (0x{:x}) at index {at}",
                    other as u32
                ),
            ));
        }
    })
}

/// The sign and decimal digits of an integer conversion's argument: Python's `int()` of a
/// number (a float truncated), refused for anything else; `%o`/`%x` take only integers.
fn integer(arg: &Value, conversion: char, exact: bool) -> Result<(bool, String), Error> {
    let wrong = |what: &str| {
        type_error(format!(
            "%{conversion} format: {what} is required, not {}",
            python_type_name(arg)
        ))
    };
    match arg.kind() {
        ValueKind::Bool => Ok((false, u8::from(arg.is_true()).to_string())),
        ValueKind::Number if arg.is_integer() => {
            let text = arg.to_string();
            Ok(match text.strip_prefix('-') {
                Some(rest) => (true, rest.to_string()),
                None => (false, text),
            })
        }
        ValueKind::Number if exact => Err(wrong("an integer")),
        ValueKind::Number => {
            let f = f64::try_from(arg.clone()).unwrap_or(f64::NAN);
            if f.is_nan() {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "cannot convert float NaN to integer",
                ));
            }
            if f.is_infinite() {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "cannot convert float infinity to integer",
                ));
            }
            let t = f.trunc();
            Ok((t < 0.0, format!("{:.0}", t.abs())))
        }
        _ if exact => Err(wrong("an integer")),
        _ => Err(wrong("a real number")),
    }
}

/// Python's `float()` of a number argument of `%e`, `%f`, `%g`.
fn real(arg: &Value) -> Result<f64, Error> {
    match arg.kind() {
        ValueKind::Bool => Ok(f64::from(u8::from(arg.is_true()))),
        ValueKind::Number => f64::try_from(arg.clone()).map_err(|_| {
            Error::new(
                ErrorKind::InvalidOperation,
                "int too large to convert to float",
            )
        }),
        _ => Err(type_error(format!(
            "must be real number, not {}",
            python_type_name(arg)
        ))),
    }
}

/// `%e`, `%f`, `%g` (`E`, `F`, `G` in upper case) of a non-negative float as C's printf writes
/// them, `precision` decimals (6 where `None`), `alternate` for `#`: also what Python's
/// `format(x, spec)` writes for those types.
pub(super) fn float_text(
    f: f64,
    conversion: char,
    precision: Option<usize>,
    alternate: bool,
) -> String {
    let upper = conversion.is_ascii_uppercase();
    if !f.is_finite() {
        let text = if f.is_nan() { "nan" } else { "inf" };
        return if upper {
            text.to_uppercase()
        } else {
            text.into()
        };
    }
    let precision = precision.unwrap_or(6);
    let text = match conversion.to_ascii_lowercase() {
        'f' => {
            let t = format!("{f:.precision$}");
            if alternate && precision == 0 {
                format!("{t}.")
            } else {
                t
            }
        }
        'e' => exponent_form(f, precision, alternate),
        _ => {
            let p = precision.max(1);
            let exponent = exponent_of(f, p - 1);
            let mut t = if exponent < -4 || exponent >= p as i32 {
                exponent_form(f, p - 1, alternate)
            } else {
                let decimals = (p as i32 - 1 - exponent).max(0) as usize;
                let t = format!("{f:.decimals$}");
                if alternate && decimals == 0 {
                    format!("{t}.")
                } else {
                    t
                }
            };
            if !alternate {
                t = strip_zeros(&t);
            }
            t
        }
    };
    if upper {
        text.to_uppercase()
    } else {
        text
    }
}

/// `d.ddde±XX` with `precision` decimals.
fn exponent_form(f: f64, precision: usize, alternate: bool) -> String {
    let t = format!("{f:.precision$e}");
    let (mantissa, exponent) = t.split_once('e').unwrap_or((&t, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let point = if alternate && precision == 0 { "." } else { "" };
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}{point}e{sign}{:02}", exponent.abs())
}

/// The decimal exponent of `f` once rounded to `precision` decimals in exponent form.
fn exponent_of(f: f64, precision: usize) -> i32 {
    if f == 0.0 {
        return 0;
    }
    let t = format!("{f:.precision$e}");
    t.split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

/// `%g` without `#`: trailing zeros of the fraction and a bare point dropped.
pub(super) fn strip_zeros(t: &str) -> String {
    let (mantissa, exponent) = match t.find('e') {
        Some(at) => t.split_at(at),
        None => (t, ""),
    };
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    format!("{mantissa}{exponent}")
}

/// A number's text with its sign (`+`/space flags), prefix and, for an integer, the zeros
/// that bring its digits to the precision.
fn signed(negative: bool, digits: String, prefix: &str, spec: &Spec, integer: bool) -> String {
    let digits = match spec.precision {
        Some(p) if integer && digits.len() < p => {
            format!("{}{digits}", "0".repeat(p - digits.len()))
        }
        _ => digits,
    };
    let sign = if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    format!("{sign}{prefix}{digits}")
}

/// `text` padded to the width: left-justified with `-`, zeros after the sign and prefix with
/// `0` (numbers only), spaces otherwise.
fn pad(out: &mut String, text: &str, spec: &Spec, conversion: char) {
    let len = text.chars().count();
    if len >= spec.width {
        out.push_str(text);
        return;
    }
    let fill = spec.width - len;
    let numeric = !matches!(conversion, 's' | 'r' | 'a' | 'c');
    let finite = !["inf", "nan", "INF", "NAN"]
        .iter()
        .any(|w| text.contains(w));
    if spec.left {
        out.push_str(text);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero && numeric && finite {
        let head = prefix_end(text);
        out.push_str(&text[..head]);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(&text[head..]);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(text);
    }
}

/// Where the sign and the `0x`/`0X`/`0o` prefix of a number's text end.
fn prefix_end(text: &str) -> usize {
    let signless = text.trim_start_matches(['-', '+', ' ']);
    let sign = text.len() - signless.len();
    match ["0x", "0X", "0o"].iter().any(|p| signless.starts_with(p)) {
        true => sign + 2,
        false => sign,
    }
}

/// Python's `ascii()` of a `repr`: every non-ASCII character escaped.
pub(super) fn ascii(repr: &str) -> String {
    let mut out = String::with_capacity(repr.len());
    for c in repr.chars() {
        match c as u32 {
            0..=0x7f => out.push(c),
            code @ 0x80..=0xff => out.push_str(&format!("\\x{code:02x}")),
            code @ 0x100..=0xffff => out.push_str(&format!("\\u{code:04x}")),
            code => out.push_str(&format!("\\U{code:08x}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(template: &str, args: Vec<Value>) -> Result<String, String> {
        percent_format(template, &Operand::Tuple(args))
            .map_err(|e| e.detail().unwrap_or_default().to_string())
    }

    #[test]
    fn conversions_write_as_python() {
        let cases: Vec<(&str, Vec<Value>, &str)> = vec![
            (
                "%s-%s",
                vec![Value::from(1e16), Value::from("x")],
                "1e+16-x",
            ),
            (
                "%s",
                vec![Value::from(vec![Value::UNDEFINED, Value::from(1e-7)])],
                "[Undefined, 1e-07]",
            ),
            (
                "%s|%r",
                vec![Value::from("a'b"), Value::from("a'b")],
                "a'b|\"a'b\"",
            ),
            (
                "%5s|%-5s|%.2s",
                vec![Value::from("ab"), Value::from("ab"), Value::from("abc")],
                "   ab|ab   |ab",
            ),
            (
                "%d %i %u",
                vec![Value::from(2.9), Value::from(-2.9), Value::from(true)],
                "2 -2 1",
            ),
            (
                "%05d|%+d|% d|%.3d",
                vec![
                    Value::from(-42),
                    Value::from(5),
                    Value::from(5),
                    Value::from(7),
                ],
                "-0042|+5| 5|007",
            ),
            (
                "%x %X %o %#x %#o",
                vec![
                    Value::from(255),
                    Value::from(255),
                    Value::from(8),
                    Value::from(255),
                    Value::from(8),
                ],
                "ff FF 10 0xff 0o10",
            ),
            (
                "%f %.2f %e %E",
                vec![
                    Value::from(1.5),
                    Value::from(2.675),
                    Value::from(12345.678),
                    Value::from(0.00012),
                ],
                "1.500000 2.67 1.234568e+04 1.200000E-04",
            ),
            (
                "%g %g %g %g %#g",
                vec![
                    Value::from(0.0001),
                    Value::from(1e-5),
                    Value::from(123456789.0),
                    Value::from(100.0),
                    Value::from(1.0),
                ],
                "0.0001 1e-05 1.23457e+08 100 1.00000",
            ),
            (
                "%08.3f|%-8.1f|",
                vec![Value::from(-3.25159), Value::from(2.0)],
                "-003.252|2.0     |",
            ),
            ("%c%c", vec![Value::from(65), Value::from("z")], "Az"),
            ("100%% %s", vec![Value::from(1)], "100% 1"),
            ("%a", vec![Value::from("é")], "'\\xe9'"),
            (
                "%*d|%-*d|",
                vec![
                    Value::from(4),
                    Value::from(7),
                    Value::from(3),
                    Value::from(1),
                ],
                "   7|1  |",
            ),
        ];
        for (template, args, want) in cases {
            assert_eq!(fmt(template, args).as_deref(), Ok(want), "{template}");
        }
    }

    #[test]
    fn errors_read_as_python() {
        let cases: Vec<(&str, Vec<Value>, &str)> = vec![
            (
                "%s-%s",
                vec![Value::from(1)],
                "not enough arguments for format string",
            ),
            (
                "%s",
                vec![Value::from(1), Value::from(2)],
                "not all arguments converted during string formatting",
            ),
            (
                "%d",
                vec![Value::from("x")],
                "%d format: a real number is required, not str",
            ),
            (
                "%x",
                vec![Value::from(1.5)],
                "%x format: an integer is required, not float",
            ),
            ("%f", vec![Value::from("x")], "must be real number, not str"),
            (
                "%y",
                vec![Value::from(1)],
                "unsupported format character 'y' (0x79) at index 1",
            ),
            ("abc %", vec![], "incomplete format"),
            ("%(a)s", vec![Value::from(1)], "format requires a mapping"),
            ("%c", vec![Value::from("ab")], "%c requires int or char"),
        ];
        for (template, args, want) in cases {
            let got = fmt(template, args).unwrap_err();
            assert!(got.contains(want), "{template}: {got}");
        }
    }

    #[test]
    fn a_mapping_is_one_argument_and_names_its_keys() {
        let map = Operand::Map(crate::example::json_value::to_template(
            &serde_json::json!({"a": 1, "b": "x"}),
        ));
        assert_eq!(percent_format("%(a)03d %(b)s", &map).unwrap(), "001 x");
        assert_eq!(percent_format("%s", &map).unwrap(), "{'a': 1, 'b': 'x'}");
        assert_eq!(
            percent_format("no conversion", &map).unwrap(),
            "no conversion"
        );
        assert!(percent_format("%(c)s", &map).is_err());
        // After a named conversion an unnamed one takes the whole mapping again.
        assert_eq!(
            percent_format("%(a)s %s", &map).unwrap(),
            "1 {'a': 1, 'b': 'x'}"
        );
        let tuple = Operand::Tuple(vec![Value::from(1)]);
        assert!(percent_format("%999999999d", &tuple).is_err());
    }
}
