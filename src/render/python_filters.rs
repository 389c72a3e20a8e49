//! jinja2's filters and tests and Python's string methods that minijinja lacks or spells
//! differently, with Python's results: `int` and `float` (Python's number parsing, the filter's
//! default where Python's conversion fails), `center`, `truncate`, `wordcount`, the `callable`
//! test, and the `swapcase` and `zfill` methods; and minijinja's `first`, `last`, `length`,
//! `list`, `items` and `sum` with Python's errors where a value is not a container.

use std::sync::OnceLock;

use minijinja::value::{Kwargs, Rest, StringInput, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

use super::python_generators;
use super::python_semantics::{self, python_type_name};
use super::python_str::{self, python_strip};
use super::python_value::{needs_python_spelling, py_str};

/// jinja2's `truncate.leeway` policy: a string at most this much longer than the length asked
/// for is left whole.
const TRUNCATE_LEEWAY: i64 = 5;

/// jinja2's `int(default=0, base=10)`: `int(value, base)` of a string, `int(value)` of anything
/// else; where that fails, `int(float(value))`; where that fails too, `default`.
pub fn int_filter(
    value: Value,
    default: Option<Value>,
    base: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let default = pick(default, &kwargs, "default")?.unwrap_or(Value::from(0));
    let base = pick(base, &kwargs, "base")?;
    kwargs.assert_all_used()?;
    refuse_undefined(&value)?;
    if let Some(text) = value.as_str() {
        let base = match &base {
            None => Some(10),
            Some(b) if b.is_integer() => i64::try_from(b.clone()).ok(),
            Some(_) => None,
        };
        if let Some(int) = base.and_then(|base| parse_int(text, base)) {
            return Ok(Value::from(int));
        }
    }
    Ok(match value.kind() {
        ValueKind::Bool => Value::from(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => value,
        _ => match as_float(&value) {
            Some(f) if f.is_infinite() && !value.is_number() => default,
            Some(f) if f.is_infinite() => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "cannot convert float infinity to integer",
                ))
            }
            // `i128` holds every float below 2**127 whole; larger ones are Python integers
            // minijinja has no type for.
            Some(f) if f.abs() < 1.7e38 => Value::from(f.trunc() as i128),
            Some(f) if !f.is_nan() => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "integer too large for the template engine",
                ))
            }
            _ => default,
        },
    })
}

/// jinja2's `float(default=0.0)`: Python's `float(value)`, or `default` where it fails.
pub fn float_filter(value: Value, default: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = pick(default, &kwargs, "default")?.unwrap_or(Value::from(0.0));
    kwargs.assert_all_used()?;
    refuse_undefined(&value)?;
    if let Some(big) = super::python_bigint::as_float(&value) {
        return big.map(Value::from);
    }
    Ok(as_float(&value).map_or(default, Value::from))
}

/// jinja2's `center(width=80)`: Python's `str.center` of `str(value)`.
pub fn center_filter(value: Value, width: Option<Value>) -> Result<Value, Error> {
    let width = int_arg(width, 80, "center")?;
    Ok(Value::from(super::python_str_methods::padded(
        &py_str(&value),
        width,
        ' ',
        "center",
    )))
}

/// jinja2's `truncate(length=255, killwords=False, end='...', leeway=5)` of a string: whole
/// where it is at most `length + leeway` characters long; else cut to `length - len(end)`
/// characters (back to the last space unless `killwords`) and `end` appended.
pub fn truncate_filter(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    if args.len() > 4 {
        return Err(Error::from(ErrorKind::TooManyArguments));
    }
    let arg = |i: usize| args.get(i).cloned();
    let length = int_arg(pick(arg(0), &kwargs, "length")?, 255, "truncate")?;
    let killwords = pick(arg(1), &kwargs, "killwords")?.is_some_and(|v| v.is_true());
    let end = match pick(arg(2), &kwargs, "end")? {
        None => "...".to_string(),
        Some(end) => end.as_str().map(str::to_string).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidOperation,
                "truncate: end must be a string",
            )
        })?,
    };
    let leeway = match pick(arg(3), &kwargs, "leeway")? {
        Some(v) if v.is_none() => TRUNCATE_LEEWAY,
        other => int_arg(other, TRUNCATE_LEEWAY, "truncate")?,
    };
    kwargs.assert_all_used()?;
    let end_len = end.chars().count() as i64;
    if length < end_len {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("expected length >= {end_len}, got {length}"),
        ));
    }
    if leeway < 0 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("expected leeway >= 0, got {leeway}"),
        ));
    }
    // jinja2 gives an undefined value back (its length, 0, is within any limit), hint and all.
    if super::python_undefined::is_undefined(&value) {
        return Ok(value);
    }
    let Some(text) = value.as_str().filter(|_| value.kind() == ValueKind::String) else {
        return truncate_other(value, length + leeway, killwords);
    };
    if text.chars().count() as i64 <= length + leeway {
        return Ok(value);
    }
    let keep: String = text.chars().take((length - end_len) as usize).collect();
    let kept = match (killwords, keep.rfind(' ')) {
        (false, Some(space)) => &keep[..space],
        _ => keep.as_str(),
    };
    Ok(Value::from(format!("{kept}{end}")))
}

/// `truncate` of what is not a string, as jinja2's code meets it: `len(s)` refuses what has no
/// length; a container within the limit comes back; a longer one fails at the slice or at the
/// string methods it lacks.
fn truncate_other(value: Value, limit: i64, killwords: bool) -> Result<Value, Error> {
    let kind = python_type_name(&value);
    let len = match value.kind() {
        ValueKind::Seq | ValueKind::Map if !python_semantics::is_macro(&value) => value.len(),
        _ => None,
    };
    let Some(len) = len else {
        return Err(type_error(format!("object of type '{kind}' has no len()")));
    };
    if len as i64 <= limit {
        return Ok(value);
    }
    Err(type_error(match kind {
        "dict" => "unhashable type: 'slice'".to_string(),
        _ if killwords => format!("can only concatenate {kind} (not \"str\") to {kind}"),
        _ => format!("'{kind}' object has no attribute 'rsplit'"),
    }))
}

/// jinja2's `wordcount`: the matches of Python's `\w+` in `str(value)` (runs of letters, digits,
/// numerals and `_`).
pub fn wordcount_filter(value: Value) -> Value {
    static WORD: OnceLock<Option<onig::Regex>> = OnceLock::new();
    let text = py_str(&value);
    let count = match WORD.get_or_init(|| onig::Regex::new(r"[\p{L}\p{N}_]+").ok()) {
        Some(word) => word.find_iter(&text).count(),
        None => 0,
    };
    Value::from(count)
}

/// jinja2's `callable` test: functions, macros, bound methods and `loop` are; so is an undefined
/// value (jinja2's `Undefined` defines `__call__`, to raise).
pub fn is_callable(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Undefined | ValueKind::Plain => true,
        // Macros and `loop` are minijinja objects that look like maps.
        ValueKind::Map if value.as_object().is_some() => {
            let shown = value.to_string();
            shown.starts_with("<macro ") || shown.starts_with("<loop ")
        }
        _ => false,
    }
}

/// `s.swapcase()`: upper case letters to lower case (a capital sigma as `lower()` writes it in
/// its place: final `ς` at a word's end), lower case letters to upper case, the rest as is.
pub fn swapcase(s: &str) -> String {
    let mut lowered: Option<String> = None;
    let mut out = String::with_capacity(s.len());
    for (at, c) in s.char_indices() {
        if c == 'Σ' {
            out.push_str(python_str::lowered_sigma(s, at, &mut lowered));
        } else if c.is_uppercase() {
            out.extend(c.to_lowercase());
        } else if c.is_lowercase() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `s.zfill(width)`: zeros on the left up to `width` characters, after a leading sign.
pub fn zfill(s: &str, width: i64) -> String {
    let fill = width - s.chars().count() as i64;
    if fill <= 0 {
        return s.to_string();
    }
    let zeros = "0".repeat(fill as usize);
    match s.strip_prefix(['+', '-']) {
        Some(rest) => format!("{}{zeros}{rest}", &s[..1]),
        None => format!("{zeros}{s}"),
    }
}

/// A filter argument given by position or by name (not both).
pub(super) fn pick(
    positional: Option<Value>,
    kwargs: &Kwargs,
    name: &str,
) -> Result<Option<Value>, Error> {
    let named: Option<Value> = kwargs.get(name)?;
    match (positional, named) {
        (Some(_), Some(_)) => Err(Error::new(
            ErrorKind::TooManyArguments,
            format!("got multiple values for argument '{name}'"),
        )),
        (positional, named) => Ok(positional.or(named)),
    }
}

/// An integer argument (`True` is 1), or `default` where it is not given.
fn int_arg(value: Option<Value>, default: i64, filter: &str) -> Result<i64, Error> {
    match value {
        None => Ok(default),
        Some(v) if v.kind() == ValueKind::Bool => Ok(i64::from(v.is_true())),
        Some(v) if v.is_integer() => i64::try_from(v).map_err(|_| {
            Error::new(
                ErrorKind::InvalidOperation,
                format!("{filter}: integer too large"),
            )
        }),
        Some(v) => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "'{}' object cannot be interpreted as an integer",
                super::python_semantics::python_type(&v)
            ),
        )),
    }
}

/// jinja2's `int` and `float` of an undefined value raise, as every use of one but printing does.
fn refuse_undefined(value: &Value) -> Result<(), Error> {
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    Ok(())
}

/// Python's `float(value)`: of a number, a bool or a string Python can read; `None` for anything
/// Python refuses.
pub(super) fn as_float(value: &Value) -> Option<f64> {
    match value.kind() {
        ValueKind::Bool => Some(f64::from(u8::from(value.is_true()))),
        ValueKind::Number => f64::try_from(value.clone()).ok(),
        ValueKind::String => parse_float(value.as_str()?),
        _ => None,
    }
}

/// Python's `float(text)`: around Python's whitespace, a sign and a decimal number (single
/// underscores between digits allowed), or `inf`, `infinity`, `nan` in any case.
fn parse_float(text: &str) -> Option<f64> {
    let text = python_strip(text);
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let word = unsigned.to_ascii_lowercase();
    if matches!(word.as_str(), "inf" | "infinity" | "nan") {
        return text.parse().ok();
    }
    let mut digits = String::with_capacity(text.len());
    let mut previous = None;
    for c in text.chars() {
        match c {
            '_' if previous.is_some_and(|p: char| p.is_ascii_digit()) => {}
            '_' => return None,
            c if previous == Some('_') && !c.is_ascii_digit() => return None,
            '0'..='9' | '.' | 'e' | 'E' | '+' | '-' => digits.push(c),
            _ => return None,
        }
        previous = Some(c);
    }
    if previous == Some('_') || !digits.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Python's `int(text, base)`: around Python's whitespace, a sign, the base's prefix where the
/// base is 2, 8 or 16 (any of them for base 0, which refuses leading zeros), and digits with
/// single underscores between them (and after a prefix). `None` where Python raises.
fn parse_int(text: &str, base: i64) -> Option<i128> {
    if base != 0 && !(2..=36).contains(&base) {
        return None;
    }
    let auto = base == 0;
    let text = python_strip(text);
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let prefix = |p: &str| {
        unsigned
            .get(..2)
            .filter(|head| head.eq_ignore_ascii_case(p))
            .map(|_| &unsigned[2..])
    };
    let (base, body, prefixed) = match base {
        0 => match (prefix("0x"), prefix("0o"), prefix("0b")) {
            (Some(rest), _, _) => (16, rest, true),
            (_, Some(rest), _) => (8, rest, true),
            (_, _, Some(rest)) => (2, rest, true),
            _ => (10, unsigned, false),
        },
        16 | 8 | 2 => {
            let name = match base {
                16 => "0x",
                8 => "0o",
                _ => "0b",
            };
            match prefix(name) {
                Some(rest) => (base, rest, true),
                None => (base, unsigned, false),
            }
        }
        base => (base, unsigned, false),
    };
    let body = if prefixed {
        body.strip_prefix('_').unwrap_or(body)
    } else {
        body
    };
    if body.is_empty() || body.starts_with('_') || body.ends_with('_') || body.contains("__") {
        return None;
    }
    let mut value: i128 = 0;
    let mut all_zero = true;
    for c in body.chars().filter(|&c| c != '_') {
        let digit = c.to_digit(base as u32)?;
        all_zero &= digit == 0;
        value = value
            .checked_mul(base as i128)?
            .checked_add(digit as i128)?;
    }
    // Base 0 reads `010` as an error, not as octal or ten (`000` is zero).
    if auto && !prefixed && body.starts_with('0') && !all_zero {
        return None;
    }
    Some(if negative { -value } else { value })
}

/// jinja2's `first`: `next(iter(value))`, Python's error where the value is not iterable.
pub fn first_filter(value: Value) -> Result<Value, Error> {
    refuse_not_iterable(&value)?;
    minijinja::filters::first(&value).map_err(|_| not_iterable(&value))
}

/// jinja2's `last`: `next(iter(reversed(value)))`, Python's error where the value is not
/// reversible.
pub fn last_filter(value: Value) -> Result<Value, Error> {
    let reversible =
        !python_generators::is_generator(&value) && !python_semantics::is_macro(&value);
    reversible
        .then_some(())
        .ok_or(Error::from(ErrorKind::InvalidOperation))
        .and_then(|_| minijinja::filters::last(value.clone()))
        .map_err(|_| {
            type_error(format!(
                "'{}' object is not reversible",
                python_type_name(&value)
            ))
        })
}

/// jinja2's `length` and `count`: `len(value)` (0 for an undefined value), Python's error where
/// the value has no length.
pub fn length_filter(value: Value) -> Result<Value, Error> {
    // minijinja's macro is a map of its name and arguments; Python's has no length.
    if python_semantics::is_macro(&value) {
        return Err(type_error(
            "object of type 'Macro' has no len()".to_string(),
        ));
    }
    minijinja::filters::length(&value)
        .map(Value::from)
        .map_err(|_| {
            type_error(format!(
                "object of type '{}' has no len()",
                python_type_name(&value)
            ))
        })
}

/// jinja2's `list`: `list(value)`, Python's error where the value is not iterable.
pub fn list_filter(state: &State, value: Value) -> Result<Value, Error> {
    refuse_not_iterable(&value)?;
    minijinja::filters::list(state, value.clone()).map_err(|_| not_iterable(&value))
}

/// Python's `TypeError` for what it cannot iterate (minijinja iterates `None` as nothing).
fn refuse_not_iterable(value: &Value) -> Result<(), Error> {
    match super::python_iterables::not_iterable_message(value)? {
        Some(message) => Err(type_error(message)),
        None => Ok(()),
    }
}

/// jinja2's `abs`: Python's `abs` of a number or a bool, its `TypeError` for anything else.
pub fn abs_filter(value: Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Bool => Ok(Value::from(i64::from(value.is_true()))),
        ValueKind::Number => minijinja::filters::abs(value),
        _ if super::python_complex::is_complex(&value) => {
            Ok(super::python_complex::magnitude(&value).unwrap_or_default())
        }
        _ => Err(type_error(format!(
            "bad operand type for abs(): '{}'",
            python_type_name(&value)
        ))),
    }
}

/// jinja2's `indent`: a newline added to the string, its lines (Python's `splitlines`) after
/// the first indented (blank ones only with `blank`), the first too with `first`. `width` is a
/// number of spaces or the indentation itself. Python's errors for what is not a string: an
/// undefined value refuses `+`, a list has no `splitlines`, anything else refuses `+= str`.
pub fn indent_filter(
    value: Value,
    width: Option<Value>,
    first: Option<bool>,
    blank: Option<bool>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let width = pick(width, &kwargs, "width")?;
    let first = first.or(kwargs.get("first")?).unwrap_or(false);
    let blank = blank.or(kwargs.get("blank")?).unwrap_or(false);
    kwargs.assert_all_used()?;
    let text = match value.kind() {
        ValueKind::String => value.as_str().unwrap_or_default(),
        ValueKind::Undefined => {
            return Err(Error::new(ErrorKind::UndefinedError, "undefined value"))
        }
        _ if python_type_name(&value) == "list" => {
            return Err(type_error(
                "'list' object has no attribute 'splitlines'".to_string(),
            ))
        }
        _ => {
            return Err(type_error(format!(
                "unsupported operand type(s) for +=: '{}' and 'str'",
                python_type_name(&value)
            )))
        }
    };
    let indention = match &width {
        Some(w) if w.kind() == ValueKind::String => w.as_str().unwrap_or_default().to_string(),
        Some(w) => " ".repeat(usize::try_from(w.clone()).unwrap_or(0).min(1 << 16)),
        None => "    ".to_string(),
    };
    // jinja2 appends a newline before it splits: the lines of that text, but for the empty one
    // after its end (a text ending in `\r` then ends in one `\r\n` break).
    let closed = format!("{text}\n");
    let mut split = python_str::python_splitlines(&closed);
    split.pop();
    let mut lines = split.into_iter();
    let mut out = String::with_capacity(text.len() + 16);
    if let Some(head) = lines.next() {
        out.push_str(head);
    }
    for line in lines {
        out.push('\n');
        if blank || !line.is_empty() {
            out.push_str(&indention);
        }
        out.push_str(line);
    }
    if first {
        out.insert_str(0, &indention);
    }
    Ok(Value::from(out))
}

/// jinja2's `items`, a generator: of a mapping's pairs, of nothing for an undefined value, and
/// for anything else one that raises jinja2's error when iterated.
pub fn items_filter(value: Value) -> Result<Value, Error> {
    const MADE_BY: &str = "do_items";
    // The diagnostic render's undefined value too: jinja2's `items` gives nothing for one.
    if super::python_undefined::is_undefined(&value) {
        return Ok(python_generators::Generator::wrap(MADE_BY, Vec::new()));
    }
    match minijinja::filters::items(&value) {
        Ok(pairs) => Ok(python_generators::Generator::wrap(
            MADE_BY,
            pairs.try_iter()?.collect(),
        )),
        Err(_) => Ok(python_generators::Generator::refusing(
            MADE_BY,
            "Can only get item pairs from a mapping.",
        )),
    }
}

/// jinja2's `sum`: Python's `sum`, whose `TypeError` names the running total's type and the
/// item's where an item is not a number.
pub fn sum_filter(
    state: &State,
    value: Value,
    attribute: Option<&str>,
    start: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    refuse_not_iterable(&value)?;
    // A generator is walked once: its items are taken here and summed.
    let value = match python_generators::is_generator(&value) {
        true => Value::from(value.try_iter()?.collect::<Vec<_>>()),
        false => value,
    };
    // Python adds an undefined item (or attribute) and fails there: jinja2's `Undefined`
    // refuses `+`.
    let path = match attribute {
        Some(path) => Some(path.to_string()),
        None => kwargs.peek::<Option<String>>("attribute")?,
    };
    for item in value.try_iter()? {
        let added = match path.as_deref() {
            Some(path) => super::python_order::attribute_of(&item, path)?,
            None => item,
        };
        super::python_undefined::refuse_hinted(&added)?;
        if added.is_undefined() {
            return Err(Error::from(ErrorKind::UndefinedError));
        }
    }
    let first = match &start {
        Some(start) => Some(start.clone()),
        None => kwargs.peek::<Option<Value>>("start")?,
    };
    let summed = minijinja::filters::sum(state, value.clone(), attribute, start, kwargs);
    match summed {
        // Python's words for the first item it cannot add to the running total.
        Err(e) if e.kind() == ErrorKind::InvalidOperation => {
            let mut total = match first {
                None => "int",
                Some(s) if s.kind() == ValueKind::Number && !s.is_integer() => "float",
                Some(s) if matches!(s.kind(), ValueKind::Number | ValueKind::Bool) => "int",
                Some(_) => return Err(e),
            };
            for item in value.try_iter()? {
                let added = match path.as_deref() {
                    Some(path) => super::python_order::attribute_of(&item, path)?,
                    None => item,
                };
                match added.kind() {
                    ValueKind::Number if !added.is_integer() => total = "float",
                    ValueKind::Number | ValueKind::Bool | ValueKind::Undefined => {}
                    _ => {
                        return Err(type_error(format!(
                            "unsupported operand type(s) for +: '{total}' and '{}'",
                            python_type_name(&added)
                        )))
                    }
                }
            }
            Err(e)
        }
        summed => summed,
    }
}

/// Python's `TypeError` for iterating `value`.
pub fn not_iterable(value: &Value) -> Error {
    type_error(format!(
        "'{}' object is not iterable",
        python_type_name(value)
    ))
}

fn type_error(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// A value as jinja2's string filters take it (`soft_str`): Python's `str()` where that differs
/// from minijinja's spelling (floats, lists, maps), the value itself otherwise.
fn python_spelled(value: Value) -> Value {
    if value.as_str().is_none() && needs_python_spelling(&value) {
        Value::from(py_str(&value))
    } else {
        value
    }
}

/// `join`: each item as Python's `str()` writes it (`1e-07`, `[1, 'a']`), then minijinja's
/// `join` (its errors, its `d` and `attribute`).
pub fn join_filter(
    state: &mut State,
    value: Value,
    joiner: Option<Value>,
    attribute: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    refuse_not_iterable(&value)?;
    let items = match value.kind() {
        ValueKind::Seq | ValueKind::Iterable if attribute.is_none() && !kwargs.has("attribute") => {
            let items = value.try_iter()?.map(python_spelled).collect::<Vec<_>>();
            Value::from(items)
        }
        _ => value,
    };
    let joiner = joiner.map(python_spelled);
    let joiner = joiner
        .as_ref()
        .map(|j| StringInput::new(state, j))
        .transpose()?;
    let attribute = match attribute {
        Some(attribute) => Some(attribute),
        None => kwargs.get::<Option<Value>>("attribute")?,
    };
    // An integer attribute is an index, as jinja2's attribute getter reads it (`attribute=0`).
    let attribute = attribute.as_ref().map(|a| match a.as_i64() {
        Some(index) if a.kind() == ValueKind::Number && a.is_integer() => Some(index.to_string()),
        _ => a.as_str().map(str::to_string),
    });
    let attribute = match attribute {
        Some(None) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "join: attribute must be a string",
            ))
        }
        Some(Some(a)) => Some(a),
        None => None,
    };
    minijinja::filters::join(state, &items, joiner, attribute.as_deref(), kwargs)
}

/// jinja2's `default(value, default_value='', boolean=False)`, its arguments given by position
/// or by keyword: `value`, or the default where `undefined` says it is (or where it is false,
/// with `boolean`); the caller says what counts as undefined.
pub fn default_of(
    value: Value,
    undefined: bool,
    default: Option<Value>,
    boolean: Option<Value>,
    kwargs: &Kwargs,
) -> Result<Value, Error> {
    let default = match kwargs.get::<Option<Value>>("default_value")? {
        Some(v) if default.is_none() => v,
        _ => default.unwrap_or_else(|| Value::from("")),
    };
    let boolean = match kwargs.get::<Option<Value>>("boolean")? {
        Some(v) if boolean.is_none() => v.is_true(),
        _ => boolean.is_some_and(|b| b.is_true()),
    };
    kwargs.assert_all_used()?;
    Ok(if undefined || (boolean && !value.is_true()) {
        default
    } else {
        value
    })
}

/// `default` (`d`): the value, or `default_value` where it is undefined (or false, with
/// `boolean`).
pub fn default_filter(
    value: Value,
    default: Option<Value>,
    boolean: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let undefined = value.is_undefined();
    default_of(value, undefined, default, boolean, &kwargs)
}

/// `upper`: of Python's `str()` of the value.
pub fn upper_filter(state: &State, value: Value) -> Result<Value, Error> {
    let value = python_spelled(value);
    Ok(minijinja::filters::upper(StringInput::new(state, &value)?))
}

/// `lower`: of Python's `str()` of the value.
pub fn lower_filter(state: &State, value: Value) -> Result<Value, Error> {
    let value = python_spelled(value);
    Ok(minijinja::filters::lower(StringInput::new(state, &value)?))
}

/// jinja2's `round(value, precision=0, method='common')`: `'common'` is Python's `round` (an
/// integer stays an integer; a float is rounded half to even on its exact value), `'floor'`
/// and `'ceil'` scale by `10 ** precision`, round, and divide back (a float, always).
pub fn round_filter(
    value: Value,
    precision: Option<Value>,
    method: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let precision = pick(precision, &kwargs, "precision")?;
    let method = pick(method, &kwargs, "method")?;
    kwargs.assert_all_used()?;
    let precision = match precision {
        None => 0,
        Some(p) if p.is_integer() => i64::try_from(p).map_err(|e| type_error(e.to_string()))?,
        Some(p) if p.kind() == ValueKind::Bool => i64::from(p.is_true()),
        Some(p) => {
            return Err(type_error(format!(
                "'{}' object cannot be interpreted as an integer",
                python_type_name(&p)
            )))
        }
    };
    let method = match &method {
        None => "common",
        Some(m) => m.as_str().unwrap_or("?"),
    };
    if !matches!(method, "common" | "floor" | "ceil") {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "method must be common, ceil or floor",
        ));
    }
    let number = match value.kind() {
        ValueKind::Bool => Number::Int(i128::from(value.is_true())),
        ValueKind::Number if value.is_integer() => {
            Number::Int(i128::try_from(value.clone()).map_err(|e| type_error(e.to_string()))?)
        }
        ValueKind::Number => Number::Float(f64::try_from(value.clone()).unwrap_or(f64::NAN)),
        _ if method == "common" => {
            return Err(type_error(format!(
                "type {} doesn't define __round__ method",
                python_type_name(&value)
            )))
        }
        // `value * 10 ** precision` refuses first: an undefined value as jinja2 does, a
        // sequence repeats (then `floor` refuses it), anything else has no `*`.
        _ => {
            super::python_undefined::refuse_hinted(&value)?;
            if value.is_undefined() {
                return Err(Error::from(ErrorKind::UndefinedError));
            }
            let (kind, scale) = (
                python_type_name(&value),
                if precision < 0 { "float" } else { "int" },
            );
            return Err(type_error(match kind {
                "str" | "list" | "tuple" if precision >= 0 => {
                    format!("must be real number, not {kind}")
                }
                "str" | "list" | "tuple" => {
                    format!("can't multiply sequence by non-int of type '{scale}'")
                }
                _ => format!("unsupported operand type(s) for *: '{kind}' and '{scale}'"),
            }));
        }
    };
    if method == "common" {
        return Ok(match number {
            Number::Int(i) => Value::from(round_int(i, precision)),
            Number::Float(f) => Value::from(round_float(f, precision)),
        });
    }
    // `func(value * 10 ** precision) / 10 ** precision`, as Python computes each step: an
    // integer scaled by a power of ten is whole already, and dividing it back gives the float
    // nearest the integer.
    let scale = power_of_ten(precision);
    let scaled = match number {
        Number::Int(i) if precision >= 0 => return Ok(Value::from(i as f64)),
        Number::Int(i) => i as f64 * scale,
        Number::Float(f) => f * scale,
    };
    if scaled.is_nan() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "ValueError: cannot convert float NaN to integer",
        ));
    }
    if scaled.is_infinite() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "OverflowError: cannot convert float infinity to integer",
        ));
    }
    // `math.floor` and `math.ceil` give Python integers, which have no negative zero.
    let whole = if method == "floor" {
        scaled.floor()
    } else {
        scaled.ceil()
    } + 0.0;
    Ok(Value::from(whole / scale))
}

/// `10 ** n` as the float Python uses (correctly rounded).
fn power_of_ten(n: i64) -> f64 {
    format!("1e{}", n.clamp(-400, 400))
        .parse()
        .unwrap_or(f64::NAN)
}

enum Number {
    Int(i128),
    Float(f64),
}

/// Python's `round(i, n)` of an integer: itself for `n >= 0`, else the nearest multiple of
/// `10 ** -n`, ties to the even multiple.
fn round_int(i: i128, precision: i64) -> i128 {
    if precision >= 0 {
        return i;
    }
    let Some(m) = 10i128.checked_pow(precision.unsigned_abs().min(40) as u32) else {
        return 0;
    };
    let (q, r) = (i.div_euclid(m), i.rem_euclid(m));
    let q = match (2 * r).cmp(&m) {
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal if q % 2 != 0 => q + 1,
        _ => q,
    };
    q.saturating_mul(m)
}

/// Python's `round(f, n)` of a float: the nearest value with `n` decimals, ties to even on the
/// float's exact value (what Rust's fixed-precision formatting computes).
fn round_float(f: f64, precision: i64) -> f64 {
    if !f.is_finite() || precision > 330 {
        return f;
    }
    if precision >= 0 {
        return format!("{f:.*}", precision as usize).parse().unwrap_or(f);
    }
    let m = power_of_ten(-precision);
    let rounded = (f / m).round_ties_even() * m;
    if rounded == 0.0 {
        0.0f64.copysign(f)
    } else {
        rounded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_as_python_parses_them() {
        assert_eq!(parse_int(" 1_0 ", 10), Some(10));
        assert_eq!(parse_int("1__0", 10), None);
        assert_eq!(parse_int("_10", 10), None);
        assert_eq!(parse_int("0x1A", 16), Some(26));
        assert_eq!(parse_int("0x_1f", 16), Some(31));
        assert_eq!(parse_int("0b1_1", 0), Some(3));
        assert_eq!(parse_int("012", 0), None);
        assert_eq!(parse_int("000", 0), Some(0));
        assert_eq!(parse_int("z", 36), Some(35));
        assert_eq!(parse_int("12", 37), None);
        assert_eq!(parse_int("+ 5", 10), None);
        assert_eq!(parse_int(" -7 ", 10), Some(-7));
        assert_eq!(parse_float("1_0.5"), Some(10.5));
        assert_eq!(parse_float("1e+0_5"), Some(100000.0));
        assert_eq!(parse_float("1_e5"), None);
        assert_eq!(parse_float("1."), Some(1.0));
        assert_eq!(parse_float(".5"), Some(0.5));
        assert_eq!(parse_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_float("nAn").is_some_and(f64::is_nan));
        assert_eq!(parse_float("123abc"), None);
        assert_eq!(parse_float(""), None);
    }

    #[test]
    fn string_filters_and_methods_give_pythons_text() {
        let center = |s: &str, w: i64| center_filter(Value::from(s), Some(Value::from(w)));
        assert_eq!(center("abc", 8).unwrap().as_str(), Some("  abc   "));
        assert_eq!(center("ab", 9).unwrap().as_str(), Some("    ab   "));
        assert_eq!(center("é🙂", 5).unwrap().as_str(), Some("  é🙂 "));
        assert_eq!(
            wordcount_filter(Value::from("a b, c_d é🙂 x1 ½")),
            Value::from(6)
        );
        assert_eq!(
            swapcase("Hello ὈΔΥΣΣΕΎΣ ΣΑΣ Σ ß ǅungla İstanbul ﬁne"),
            "hELLO ὀδυσσεύς σας σ SS ǅUNGLA i\u{307}STANBUL FINE"
        );
        assert_eq!(zfill("-42", 5), "-0042");
        assert_eq!(zfill("+4", 1), "+4");
        assert_eq!(zfill("-", 3), "-00");
    }
}
