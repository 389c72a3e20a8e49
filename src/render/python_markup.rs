//! jinja2's `Markup` strings (markupsafe), as transformers renders them: what `safe`, `escape`
//! and `forceescape` give. They print as the text they hold, but a plain string meeting one is
//! escaped (`&`, `<`, `>`, `"`, `'`): `Markup + str` and `str + Markup` escape the plain side,
//! `Markup % args` escapes the arguments that print as text, and the `str` methods markupsafe
//! wraps escape their string arguments and give Markup back. A container shows one as
//! `Markup('...')`, and the filters that keep a string's class (`upper`, `trim`, `center`, ...)
//! keep it Markup. minijinja's safe strings hold them; MLX Node's engine has none (see
//! `environment`).

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_format::{markup_percent_format, Operand};
use super::python_semantics::{python_type_name, GROUP_TUPLE};

/// markupsafe's `escape` of a text: `& < > " '` as entities.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

/// [`escape`], appended to `out`.
pub fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Whether `value` is a Markup string.
pub fn is_markup(value: &Value) -> bool {
    value.kind() == ValueKind::String && value.is_safe()
}

/// A Markup string of `text`.
pub fn markup(text: String) -> Value {
    Value::from_safe_string(text)
}

/// Python's type name of `value`, `Markup` for a Markup string.
pub fn type_name(value: &Value) -> &'static str {
    if is_markup(value) {
        "Markup"
    } else {
        python_type_name(value)
    }
}

/// `escape(value)` of a string: a Markup string as it is, a plain one escaped.
fn escaped(value: &Value) -> String {
    let text = value.as_str().unwrap_or_default();
    if is_markup(value) {
        text.to_string()
    } else {
        escape(text)
    }
}

/// `result` as Markup where `input` is Markup and `result` a string: what the filters that
/// keep a string's class give.
pub fn keep(input: &Value, result: Value) -> Value {
    if is_markup(input) && result.kind() == ValueKind::String && !result.is_safe() {
        return markup(result.as_str().unwrap_or_default().to_string());
    }
    result
}

/// `left op right` where a Markup string takes part in `+`, `*` or `%`; `None` where none does
/// (Python's `str` rules then apply).
pub fn arith(left: &Value, op: &str, right: &Value) -> Option<Result<Value, Error>> {
    let (l, r) = (is_markup(left), is_markup(right));
    if !l && !r {
        return None;
    }
    let is_str = |v: &Value| v.kind() == ValueKind::String;
    let is_int = |v: &Value| v.kind() == ValueKind::Bool || v.is_integer();
    Some(match op {
        "+" if is_str(left) && is_str(right) => Ok(markup(escaped(left) + &escaped(right))),
        // Markup's own `+` gives way, and the other operand has none for it; a list or a
        // tuple on the left refuses it in its own words (the caller's).
        "+" if matches!(python_type_name(left), "list" | "tuple" | GROUP_TUPLE) => return None,
        "+" => Err(unsupported(op, left, right)),
        "*" if l && is_int(right) || r && is_int(left) => {
            let (text, count) = if l { (left, right) } else { (right, left) };
            let count = if count.kind() == ValueKind::Bool {
                i64::from(count.is_true())
            } else {
                match i64::try_from(count.clone()) {
                    Ok(n) => n,
                    Err(_) => return None,
                }
            };
            let text = text.as_str().unwrap_or_default();
            let count = usize::try_from(count).unwrap_or(0);
            if text.len().saturating_mul(count) > super::python_format::MAX_WIDTH {
                return Some(Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "the repeated string is too long to render",
                )));
            }
            Ok(markup(text.repeat(count)))
        }
        "%" if l => {
            let operand = match python_type_name(right) {
                "tuple" | GROUP_TUPLE => match right.try_iter() {
                    Ok(items) => Operand::Tuple(items.collect()),
                    Err(e) => return Some(Err(e)),
                },
                "dict" | "list" => Operand::Map(right.clone()),
                _ => Operand::Tuple(vec![right.clone()]),
            };
            markup_percent_format(left.as_str().unwrap_or_default(), &operand).map(markup)
        }
        // Markup's `*` takes only an integer (`__index__`).
        "*" => Err(super::python_semantics::type_error(format!(
            "'{}' object cannot be interpreted as an integer",
            type_name(if l { right } else { left })
        ))),
        _ => return None,
    })
}

fn unsupported(op: &str, left: &Value, right: &Value) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "unsupported operand type(s) for {op}: '{}' and '{}'",
            type_name(left),
            type_name(right)
        ),
    )
}

/// The `str` methods markupsafe wraps to give Markup, each with the position of the argument
/// it escapes (`replace`'s new text, the fill char of `ljust`, `rjust`, `center`).
const WRAPPED: [(&str, Option<usize>); 18] = [
    ("capitalize", None),
    ("title", None),
    ("lower", None),
    ("upper", None),
    ("replace", Some(1)),
    ("ljust", Some(1)),
    ("rjust", Some(1)),
    ("center", Some(1)),
    ("lstrip", None),
    ("rstrip", None),
    ("strip", None),
    ("expandtabs", None),
    ("swapcase", None),
    ("zfill", None),
    ("casefold", None),
    ("removeprefix", None),
    ("removesuffix", None),
    ("join", None),
];

/// `value.method(*args)` for a Markup `value`, by markupsafe's rules around `call`, which
/// runs the plain `str` method; `None` where `value` is not Markup or the method is not one
/// markupsafe wraps.
pub fn method(
    value: &Value,
    method: &str,
    args: &[Value],
    call: impl FnOnce(&Value, &[Value]) -> Result<Value, Error>,
) -> Option<Result<Value, Error>> {
    if !is_markup(value) {
        return None;
    }
    let plain = Value::from(value.as_str().unwrap_or_default());
    let to_markup = |v: Value| {
        if v.kind() == ValueKind::String {
            markup(v.as_str().unwrap_or_default().to_string())
        } else {
            v
        }
    };
    let parts =
        |v: Value| -> Result<Vec<Value>, Error> { Ok(v.try_iter()?.map(to_markup).collect()) };
    Some(match method {
        // Each item escaped, as `escape` takes it (a number as its text).
        "join" => match args {
            [items] => items.try_iter().and_then(|items| {
                let items: Vec<Value> = items
                    .map(|item| {
                        if is_markup(&item) {
                            item
                        } else {
                            Value::from(escape(&super::python_value::py_str(&item)))
                        }
                    })
                    .collect();
                call(&plain, &[Value::from(items)]).map(to_markup)
            }),
            _ => call(&plain, args),
        },
        m => match WRAPPED.iter().find(|(name, _)| *name == m) {
            Some((_, escaped_at)) => {
                let mut args = args.to_vec();
                if let Some(arg) = escaped_at.and_then(|at| args.get_mut(at)) {
                    if arg.kind() == ValueKind::String && !arg.is_safe() {
                        *arg = Value::from(escape(arg.as_str().unwrap_or_default()));
                    }
                }
                call(&plain, &args).map(to_markup)
            }
            // Each part Markup.
            None if matches!(m, "split" | "rsplit" | "splitlines") => {
                call(&plain, args).and_then(parts).map(Value::from)
            }
            None if matches!(m, "partition" | "rpartition") => call(&plain, args)
                .and_then(parts)
                .map(|p| Value::from_object(minijinja::value::Tuple::new(p))),
            None => return None,
        },
    })
}
