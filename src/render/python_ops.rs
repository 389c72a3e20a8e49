//! Python's arithmetic operators where minijinja's accept what Python refuses or refuse with
//! other words: every `+`, `-`, `*`, `/`, `//`, `%` and `**` of a template passes through
//! [`ARITH_FILTER`] (a source rewrite, see `python_semantics`), which raises Python's
//! `TypeError` or `ZeroDivisionError` where Python would and otherwise computes what minijinja
//! computes; every operand of a unary `-` passes through [`NEGATABLE_FILTER`].
//!
//! An undefined operand is left to minijinja, which raises as jinja2 does (without jinja2's
//! words: the name of what was undefined is not known here).

use std::sync::OnceLock;

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Expression};

use super::python_semantics::python_type_name;

/// The filter a binary arithmetic operation becomes: `a + b` is `((a)|filter('+', b))`.
pub const ARITH_FILTER: &str = "__sft_py_arith";
/// The filter every operand of a unary `-` passes through.
pub const NEGATABLE_FILTER: &str = "__sft_py_negatable";

/// The operators [`ARITH_FILTER`] takes, longest spelling first (as the rewrite finds them).
pub const OPERATORS: [&str; 7] = ["**", "//", "+", "-", "*", "/", "%"];

/// [`ARITH_FILTER`]: `left op right` as minijinja computes it, or Python's error where Python
/// refuses the operands.
pub fn arith_filter(left: Value, op: &str, right: Value) -> Result<Value, Error> {
    if let Some(message) = refusal(&left, op, &right) {
        return Err(Error::new(ErrorKind::InvalidOperation, message));
    }
    compute(left, op, right)
}

/// [`NEGATABLE_FILTER`]: the value unchanged, or Python's `TypeError` for what has no `-`.
pub fn negatable_filter(value: Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Number | ValueKind::Bool | ValueKind::Undefined => Ok(value),
        _ => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "bad operand type for unary -: '{}'",
                python_type_name(&value)
            ),
        )),
    }
}

/// Python's message where it refuses `left op right`, `None` where it computes it (or where an
/// operand is undefined).
fn refusal(left: &Value, op: &str, right: &Value) -> Option<String> {
    if left.is_undefined() || right.is_undefined() {
        return None;
    }
    let (l, r) = (python_type_name(left), python_type_name(right));
    let numeric = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    let integral = |v: &Value| v.kind() == ValueKind::Bool || v.is_integer();
    let sequence = |t: &str| matches!(t, "str" | "list" | "tuple");
    if numeric(left) && numeric(right) {
        return zero_division(left, op, right, integral(left) && integral(right));
    }
    match op {
        "+" if l == r && sequence(l) => None,
        "+" if sequence(l) => Some(format!("can only concatenate {l} (not \"{r}\") to {l}")),
        "*" if sequence(l) && integral(right) || sequence(r) && integral(left) => None,
        "*" if sequence(l) => Some(format!("can't multiply sequence by non-int of type '{r}'")),
        "*" if sequence(r) => Some(format!("can't multiply sequence by non-int of type '{l}'")),
        // `str % args` is string formatting, left to minijinja.
        "%" if l == "str" => None,
        "**" => Some(format!(
            "unsupported operand type(s) for ** or pow(): '{l}' and '{r}'"
        )),
        _ => Some(format!(
            "unsupported operand type(s) for {op}: '{l}' and '{r}'"
        )),
    }
}

/// Python's `ZeroDivisionError` of numbers, `None` where there is none.
fn zero_division(left: &Value, op: &str, right: &Value, ints: bool) -> Option<String> {
    let zero = |v: &Value| !v.is_true();
    let negative = |v: &Value| f64::try_from(v.clone()).is_ok_and(|f| f < 0.0);
    let message = match op {
        "**" if zero(left) && negative(right) => "0.0 cannot be raised to a negative power",
        "/" if zero(right) && ints => "division by zero",
        "/" if zero(right) => "float division by zero",
        "//" if zero(right) && ints => "integer division or modulo by zero",
        "//" if zero(right) => "float floor division by zero",
        "%" if zero(right) && ints => "integer modulo by zero",
        "%" if zero(right) => "float modulo",
        _ => return None,
    };
    Some(message.to_string())
}

/// `left op right` evaluated by minijinja itself (its operators are not public): one compiled
/// expression per operator, in an environment of its own.
fn compute(left: Value, op: &str, right: Value) -> Result<Value, Error> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    static EXPRESSIONS: OnceLock<Vec<Expression<'static, 'static>>> = OnceLock::new();
    let expressions = EXPRESSIONS.get_or_init(|| {
        let env = ENV.get_or_init(Environment::new);
        [
            "a ** b", "a // b", "a + b", "a - b", "a * b", "a / b", "a % b",
        ]
        .into_iter()
        .filter_map(|source| env.compile_expression(source).ok())
        .collect()
    });
    let expression = OPERATORS
        .iter()
        .position(|o| *o == op)
        .and_then(|at| expressions.get(at))
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidOperation,
                format!("unknown operator {op}"),
            )
        })?;
    expression
        .eval(minijinja::context! { a => left, b => right })
        // The expression's own line is not the template's: the template's is added where the
        // error leaves the filter.
        .map_err(|e| match e.detail() {
            Some(detail) => Error::new(e.kind(), detail.to_string()),
            None => Error::from(e.kind()),
        })
}
