//! Python's format-spec mini-language: what `format(value, spec)` writes for the values a
//! template holds (`str`, `int`, `bool`, `float`; `None`, lists, dicts and every other object
//! take only the empty spec), with CPython's errors for a spec a type refuses. The fields of
//! `str.format` are formatted here (see `python_str_format`).
//!
//! `[[fill]align][sign][z][#][0][width][,|_][.precision][type]`, read as CPython 3.11 reads it:
//! a number is laid out as padding, sign, `0x`-style prefix, padding for `=`, its digits
//! grouped by `,` or `_` (zero padding grouped too), decimal point, fraction and exponent.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};
use unicode_categories::UnicodeCategories;

use super::python_format::{float_text, strip_zeros, MAX_WIDTH};
use super::python_semantics::{python_type_name, type_error};
use super::python_undefined::is_undefined;
use super::python_value::{py_float, py_str};

fn value_error(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// The value of `c` as a decimal digit, in any script (Python's `Py_UNICODE_TODECIMAL`).
pub(super) fn decimal_value(c: char) -> Option<u32> {
    if c.is_ascii() {
        return c.to_digit(10);
    }
    if !c.is_number_decimal_digit() {
        return None;
    }
    // Unicode lays out each script's decimal digits as runs of ten starting at zero.
    let mut zero = c as u32;
    while char::from_u32(zero - 1).is_some_and(|p| p.is_number_decimal_digit()) {
        zero -= 1;
    }
    Some((c as u32 - zero) % 10)
}

/// The number the decimal digits of `chars` from `*at` spell (advancing past them), and how
/// many there were; Python's error where it outgrows `Py_ssize_t`.
pub(super) fn read_integer(chars: &[char], at: &mut usize) -> Result<(usize, usize), Error> {
    let (mut value, mut count): (u64, usize) = (0, 0);
    while let Some(digit) = chars.get(*at).and_then(|&c| decimal_value(c)) {
        value = match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(digit.into()))
        {
            Some(v) if v <= i64::MAX as u64 => v,
            _ => {
                return Err(value_error(
                    "Too many decimal digits in format string".into(),
                ))
            }
        };
        *at += 1;
        count += 1;
    }
    Ok((usize::try_from(value).unwrap_or(usize::MAX), count))
}

/// One parsed spec.
struct Spec {
    fill: char,
    align: char,
    sign: Option<char>,
    no_neg_0: bool,
    alternate: bool,
    width: Option<usize>,
    grouping: Option<char>,
    precision: Option<usize>,
    kind: char,
}

/// `text` read as a spec for a value of `type_name` whose type letter defaults to
/// `default_kind` (`'\0'` for a float's none) and alignment to `default_align`.
fn parse(
    text: &str,
    type_name: &str,
    default_kind: char,
    default_align: char,
) -> Result<Spec, Error> {
    let chars: Vec<char> = text.chars().collect();
    let is_align = |c: Option<&char>| matches!(c, Some('<' | '>' | '=' | '^'));
    let mut spec = Spec {
        fill: ' ',
        align: default_align,
        sign: None,
        no_neg_0: false,
        alternate: false,
        width: None,
        grouping: None,
        precision: None,
        kind: default_kind,
    };
    let mut at = 0;
    let (mut fill_given, mut align_given) = (false, false);
    if is_align(chars.get(1)) {
        (spec.fill, spec.align) = (chars[0], chars[1]);
        (fill_given, align_given) = (true, true);
        at = 2;
    } else if is_align(chars.first()) {
        spec.align = chars[0];
        align_given = true;
        at = 1;
    }
    if let Some(&c @ ('+' | '-' | ' ')) = chars.get(at) {
        spec.sign = Some(c);
        at += 1;
    }
    if chars.get(at) == Some(&'z') {
        spec.no_neg_0 = true;
        at += 1;
    }
    if chars.get(at) == Some(&'#') {
        spec.alternate = true;
        at += 1;
    }
    if !fill_given && chars.get(at) == Some(&'0') {
        spec.fill = '0';
        if !align_given && default_align == '>' {
            spec.align = '=';
        }
        at += 1;
    }
    let (width, digits) = read_integer(&chars, &mut at)?;
    spec.width = (digits > 0).then_some(width);
    let both = || value_error("Cannot specify both ',' and '_'.".into());
    if chars.get(at) == Some(&',') {
        spec.grouping = Some(',');
        at += 1;
    }
    if chars.get(at) == Some(&'_') {
        if spec.grouping.is_some() {
            return Err(both());
        }
        spec.grouping = Some('_');
        at += 1;
    }
    if chars.get(at) == Some(&',') && spec.grouping == Some('_') {
        return Err(both());
    }
    if chars.get(at) == Some(&'.') {
        at += 1;
        let (precision, digits) = read_integer(&chars, &mut at)?;
        if digits == 0 {
            return Err(value_error("Format specifier missing precision".into()));
        }
        spec.precision = Some(precision);
    }
    match chars.len() - at {
        0 => {}
        1 => spec.kind = chars[at],
        _ => {
            return Err(value_error(format!(
                "Invalid format specifier '{text}' for object of type '{type_name}'"
            )))
        }
    }
    if let Some(separator) = spec.grouping {
        let allowed = match spec.kind {
            'd' | 'e' | 'f' | 'g' | 'E' | 'G' | '%' | 'F' | '\0' => true,
            'b' | 'o' | 'x' | 'X' => separator == '_',
            _ => false,
        };
        if !allowed {
            return Err(value_error(format!(
                "Cannot specify '{separator}' with {}.",
                shown_code(spec.kind)
            )));
        }
    }
    // A field no render could hold is refused rather than allocated.
    if spec.width.is_some_and(|w| w > MAX_WIDTH) || spec.precision.is_some_and(|p| p > MAX_WIDTH) {
        return Err(value_error("width too big".into()));
    }
    Ok(spec)
}

/// A type letter as CPython's messages quote it: `'x'`, or `'\x..'` outside printable ASCII.
fn shown_code(c: char) -> String {
    if (c as u32) > 32 && (c as u32) < 128 {
        format!("'{c}'")
    } else {
        format!("'\\x{:x}'", c as u32)
    }
}

fn unknown_code(kind: char, type_name: &str) -> Error {
    value_error(format!(
        "Unknown format code {} for object of type '{type_name}'",
        shown_code(kind)
    ))
}

/// Python's `format(value, spec)`; `type_name` names a string's type (`str`, or `Markup`).
pub fn format_value(value: &Value, spec: &str, type_name: &str) -> Result<String, Error> {
    match value.kind() {
        ValueKind::String if spec.is_empty() => Ok(value.as_str().unwrap_or_default().into()),
        ValueKind::String => format_str(value.as_str().unwrap_or_default(), spec, type_name),
        ValueKind::Bool if spec.is_empty() => Ok(py_str(value)),
        ValueKind::Bool => format_int(false, u128::from(value.is_true()), spec, "bool"),
        ValueKind::Number if value.is_integer() => {
            let text = value.to_string();
            if spec.is_empty() {
                return Ok(text);
            }
            let (negative, digits) = match text.strip_prefix('-') {
                Some(digits) => (true, digits),
                None => (false, text.as_str()),
            };
            format_int(negative, digits.parse().unwrap_or(0), spec, "int")
        }
        ValueKind::Number => {
            let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
            if spec.is_empty() {
                return Ok(py_float(f));
            }
            format_float(f, &parse(spec, "float", '\0', '>')?, "float")
        }
        _ if spec.is_empty() && is_undefined(value) => Ok(String::new()),
        _ if spec.is_empty() => Ok(py_str(value)),
        // `object.__format__`, which takes only the empty spec.
        _ => Err(type_error(format!(
            "unsupported format string passed to {}.__format__",
            python_type_name(value)
        ))),
    }
}

fn format_str(text: &str, spec: &str, type_name: &str) -> Result<String, Error> {
    let spec = parse(spec, type_name, 's', '<')?;
    if spec.kind != 's' {
        return Err(unknown_code(spec.kind, type_name));
    }
    let refused = match spec.sign {
        Some(' ') => Some("Space not allowed in string format specifier"),
        Some(_) => Some("Sign not allowed in string format specifier"),
        None if spec.no_neg_0 => {
            Some("Negative zero coercion (z) not allowed in string format specifier")
        }
        None if spec.alternate => Some("Alternate form (#) not allowed in string format specifier"),
        None if spec.align == '=' => Some("'=' alignment not allowed in string format specifier"),
        None => None,
    };
    if let Some(message) = refused {
        return Err(value_error(message.into()));
    }
    let cut: String = match spec.precision {
        Some(p) => text.chars().take(p).collect(),
        None => text.to_string(),
    };
    let len = cut.chars().count();
    let padding = spec.width.unwrap_or(0).saturating_sub(len);
    let left = match spec.align {
        '>' => padding,
        '^' => padding / 2,
        _ => 0,
    };
    let mut out = String::with_capacity(cut.len() + padding);
    out.extend(std::iter::repeat_n(spec.fill, left));
    out.push_str(&cut);
    out.extend(std::iter::repeat_n(spec.fill, padding - left));
    Ok(out)
}

/// `format(int, spec)` of the integer `-magnitude` or `magnitude`.
fn format_int(
    negative: bool,
    magnitude: u128,
    spec: &str,
    type_name: &str,
) -> Result<String, Error> {
    let spec = parse(spec, type_name, 'd', '>')?;
    let (base, prefix) = match spec.kind {
        'b' => (2, "0b"),
        'o' => (8, "0o"),
        'x' => (16, "0x"),
        'X' => (16, "0X"),
        'd' | 'n' | 'c' => (10, ""),
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' | '%' => {
            let f = magnitude as f64;
            return format_float(if negative { -f } else { f }, &spec, type_name);
        }
        other => return Err(unknown_code(other, type_name)),
    };
    if spec.precision.is_some() {
        return Err(value_error(
            "Precision not allowed in integer format specifier".into(),
        ));
    }
    if spec.no_neg_0 {
        return Err(value_error(
            "Negative zero coercion (z) not allowed in integer format specifier".into(),
        ));
    }
    if spec.kind == 'c' {
        if spec.sign.is_some() {
            return Err(value_error(
                "Sign not allowed with integer format specifier 'c'".into(),
            ));
        }
        if spec.alternate {
            return Err(value_error(
                "Alternate form (#) not allowed with integer format specifier 'c'".into(),
            ));
        }
        let c = (!negative)
            .then(|| u32::try_from(magnitude).ok().and_then(char::from_u32))
            .flatten()
            .ok_or_else(|| value_error("%c arg not in range(0x110000)".into()))?;
        // The character is laid out as what follows a number's digits: never grouped.
        return Ok(layout(false, "", "", &c.to_string(), &spec, None));
    }
    let digits = match base {
        2 => format!("{magnitude:b}"),
        8 => format!("{magnitude:o}"),
        16 if spec.kind == 'X' => format!("{magnitude:X}"),
        16 => format!("{magnitude:x}"),
        _ => magnitude.to_string(),
    };
    let group = match spec.grouping {
        Some(separator) if base == 10 => Some((3, separator)),
        Some(separator) => Some((4, separator)),
        None => None,
    };
    let prefix = if spec.alternate { prefix } else { "" };
    Ok(layout(negative, prefix, &digits, "", &spec, group))
}

/// `format(float, spec)` of `f`, for a float or an integer given a float's type.
fn format_float(f: f64, spec: &Spec, type_name: &str) -> Result<String, Error> {
    let negative = f.is_sign_negative() && !f.is_nan();
    let magnitude = f.abs();
    let mut text = match spec.kind {
        '\0' => shortest_or_general(magnitude, spec.precision, spec.alternate),
        'n' => float_text(magnitude, 'g', spec.precision, spec.alternate),
        '%' => float_text(magnitude * 100.0, 'f', spec.precision, spec.alternate) + "%",
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' => {
            float_text(magnitude, spec.kind, spec.precision, spec.alternate)
        }
        other => return Err(unknown_code(other, type_name)),
    };
    // `z`: a negative number that rounds to zero is written as zero.
    let rounds_to_zero = || {
        text.split(['e', 'E'])
            .next()
            .is_some_and(|m| m.chars().all(|c| matches!(c, '0' | '.' | '%')))
    };
    let negative = negative && !(spec.no_neg_0 && magnitude.is_finite() && rounds_to_zero());
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let rest = text.split_off(digits_end);
    let group = spec.grouping.map(|separator| (3, separator));
    Ok(layout(negative, "", &text, &rest, spec, group))
}

/// A float without a type letter: its `repr` (with `#`, a point even before an exponent), or
/// with a precision `g`'s digits, in exponent form from one digit before the precision on and
/// with a `.0` where fixed form has no point.
fn shortest_or_general(f: f64, precision: Option<usize>, alternate: bool) -> String {
    let Some(precision) = precision else {
        let text = py_float(f);
        return match text.split_once('e') {
            Some((mantissa, exponent)) if alternate && !mantissa.contains('.') => {
                format!("{mantissa}.e{exponent}")
            }
            _ => text,
        };
    };
    if !f.is_finite() {
        return py_float(f);
    }
    let precision = precision.max(1);
    let exponent: i32 = format!("{f:.0$e}", precision - 1)
        .split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    if exponent < -4 || exponent >= precision as i32 - 1 {
        let text = float_text(f, 'e', Some(precision - 1), alternate);
        return if alternate { text } else { strip_zeros(&text) };
    }
    let text = float_text(f, 'g', Some(precision), alternate);
    if text.contains('.') {
        text
    } else {
        text + ".0"
    }
}

/// A number laid out to the spec's width: padding, sign, prefix, padding for `=`, `digits`
/// grouped by `group` (its size and separator), then `rest` (a decimal point, fraction,
/// exponent, `%`, or the character of `c`).
fn layout(
    negative: bool,
    prefix: &str,
    digits: &str,
    rest: &str,
    spec: &Spec,
    group: Option<(usize, char)>,
) -> String {
    let sign = match (negative, spec.sign) {
        (true, _) => Some('-'),
        (false, Some('+')) => Some('+'),
        (false, Some(' ')) => Some(' '),
        _ => None,
    };
    let width = spec.width.map_or(-1, |w| w as isize);
    let others = usize::from(sign.is_some()) + prefix.chars().count() + rest.chars().count();
    let min_width = if spec.fill == '0' && spec.align == '=' {
        width - others as isize
    } else {
        0
    };
    let grouped = if digits.is_empty() {
        String::new()
    } else {
        grouped(digits, min_width, group)
    };
    let padding = (width - (others + grouped.chars().count()) as isize).max(0) as usize;
    let (left, middle, right) = match spec.align {
        '<' => (0, 0, padding),
        '^' => (padding / 2, 0, padding - padding / 2),
        '=' => (0, padding, 0),
        _ => (padding, 0, 0),
    };
    let mut out = String::with_capacity(padding + others + grouped.len());
    out.extend(std::iter::repeat_n(spec.fill, left));
    out.extend(sign);
    out.push_str(prefix);
    out.extend(std::iter::repeat_n(spec.fill, middle));
    out.push_str(&grouped);
    out.push_str(rest);
    out.extend(std::iter::repeat_n(spec.fill, right));
    out
}

/// `digits` grouped from the right by `group`, led by zeros up to `min_width` characters (the
/// zeros grouped as digits), as CPython groups them.
fn grouped(digits: &str, min_width: isize, group: Option<(usize, char)>) -> String {
    let digits: Vec<char> = digits.chars().collect();
    let mut remaining = digits.len() as isize;
    let mut min_width = min_width.max(0);
    // Pieces from the right; each is `zeros` zeros and the `take` digits before `end`.
    let mut pieces: Vec<String> = Vec::new();
    let mut end = digits.len();
    let mut piece = |len: isize, remaining: isize, pieces: &mut Vec<String>| {
        let zeros = (len - remaining).max(0) as usize;
        let take = remaining.min(len).max(0) as usize;
        let mut text = "0".repeat(zeros);
        text.extend(&digits[end - take..end]);
        end -= take;
        pieces.push(text);
        take as isize
    };
    let mut done = false;
    if let Some((size, _)) = group {
        loop {
            let len = (size as isize).min(remaining.max(min_width).max(1));
            remaining -= piece(len, remaining, &mut pieces);
            min_width -= len;
            if remaining <= 0 && min_width <= 0 {
                done = true;
                break;
            }
            min_width -= 1;
        }
    }
    if !done {
        let len = remaining.max(min_width).max(1);
        piece(len, remaining, &mut pieces);
    }
    pieces.reverse();
    let separator = group.map(|(_, s)| s.to_string()).unwrap_or_default();
    pieces.join(&separator)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(value: Value, spec: &str) -> Result<String, String> {
        format_value(&value, spec, "str").map_err(|e| e.detail().unwrap_or_default().to_string())
    }

    #[test]
    fn numbers_are_laid_out_as_python() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (Value::from(1234), "010,", "00,001,234"),
            (Value::from(123456), "_x", "1_e240"),
            (Value::from(37), "#_b", "0b10_0101"),
            (Value::from(1234567.891), ",.2f", "1,234,567.89"),
            (Value::from(0.5), "08.3%", "050.000%"),
            (Value::from(-1234.5), "010,.1f", "-001,234.5"),
            (Value::from(255), "x^+#012_x", "xxx+0xffxxxx"),
            (Value::from(65), "05c", "0000A"),
            (Value::from(-42), "0=10", "-000000042"),
            (Value::from(7), "@=+8", "+@@@@@@7"),
            (Value::from(-255), "#x", "-0xff"),
            (Value::from(255), "#X", "0XFF"),
            (Value::from(100.0), ".0", "1e+02"),
            (Value::from(1.0), ".3", "1.0"),
            (Value::from(1234.0), ".5", "1234.0"),
            (Value::from(-0.01), "z.1f", "0.0"),
            (Value::from(-0.0), "", "-0.0"),
            (Value::from(1e16), "", "1e+16"),
            (Value::from(f64::INFINITY), "010", "0000000inf"),
            (Value::from(true), "", "True"),
            (Value::from(true), ">6", "     1"),
            (Value::from("ab"), "05", "ab000"),
            (Value::from("xyz"), "^7.2", "  xy   "),
        ];
        for (value, spec, want) in cases {
            assert_eq!(
                fmt(value.clone(), spec).as_deref(),
                Ok(want),
                "{value:?} {spec}"
            );
        }
    }

    #[test]
    fn refused_specs_read_as_python() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (
                Value::from("x"),
                "d",
                "Unknown format code 'd' for object of type 'str'",
            ),
            (
                Value::from("x"),
                "=5",
                "'=' alignment not allowed in string format specifier",
            ),
            (Value::from("x"), ",", "Cannot specify ',' with 's'."),
            (
                Value::from(1),
                "abc",
                "Invalid format specifier 'abc' for object of type 'int'",
            ),
            (Value::from(1), ".", "Format specifier missing precision"),
            (Value::from(1), ",_", "Cannot specify both ',' and '_'."),
            (Value::from(1), "_n", "Cannot specify '_' with 'n'."),
            (
                Value::from(1),
                ".2d",
                "Precision not allowed in integer format specifier",
            ),
            (
                Value::from(1),
                "é",
                "Unknown format code '\\xe9' for object of type 'int'",
            ),
            (Value::from(1114112), "c", "%c arg not in range(0x110000)"),
            (
                Value::from(()),
                "s",
                "unsupported format string passed to NoneType.__format__",
            ),
        ];
        for (value, spec, want) in cases {
            assert_eq!(
                fmt(value.clone(), spec).unwrap_err(),
                want,
                "{value:?} {spec}"
            );
        }
    }
}
