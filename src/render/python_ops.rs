//! Python's arithmetic operators where minijinja's accept what Python refuses or refuse with
//! other words: every `+`, `-`, `*`, `/`, `//`, `%` and `**` of a template passes through
//! [`ARITH_FILTER`] (a source rewrite, see `python_semantics`), which raises Python's
//! `TypeError` or `ZeroDivisionError` where Python would and otherwise computes what minijinja
//! computes; a unary `-` becomes [`NEG_FILTER`], Python's negation of any number.
//!
//! An undefined operand is left to minijinja, which raises as jinja2 does (without jinja2's
//! words: the name of what was undefined is not known here).

use std::sync::OnceLock;

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Expression};

use super::python_format::{percent_format, Operand};
use super::python_markup::type_name;
use super::python_semantics::{python_int, python_type_name, GROUP_TUPLE};

/// The filter a binary arithmetic operation becomes: `a + b` is `((a)|filter('+', b))`.
pub const ARITH_FILTER: &str = "__sft_py_arith";
/// The filter a unary `-` becomes: `-x` is `((x)|filter)`.
pub const NEG_FILTER: &str = "__sft_py_neg";
/// The filter a constant that jinja2 computes as it compiles passes through (see
/// `python_rewrite`): `(('nan')|float)|__sft_py_folded`.
pub const FOLDED_FILTER: &str = "__sft_py_folded";

/// The operators [`ARITH_FILTER`] takes, longest spelling first (as the rewrite finds them).
pub const OPERATORS: [&str; 7] = ["**", "//", "+", "-", "*", "/", "%"];

/// [`ARITH_FILTER`]: `left op right` as minijinja computes it, or Python's error where Python
/// refuses the operands.
pub fn arith_filter(left: Value, op: &str, right: Value) -> Result<Value, Error> {
    if let Some(markup) = super::python_markup::arith(&left, op, &right) {
        return markup;
    }
    if let Some(complex) = super::python_complex::arith(&left, op, &right) {
        return complex;
    }
    if let Some(big) = super::python_bigint::arith(&left, op, &right, false) {
        return big;
    }
    if op == "%" && left.kind() == ValueKind::String && !left.is_safe() {
        return string_formatting(&left, &right);
    }
    if let Some(message) = refusal(&left, op, &right) {
        return Err(Error::new(ErrorKind::InvalidOperation, message));
    }
    let integers = python_int(&left).zip(python_int(&right));
    if let (Some((a, b)), "/") = (integers, op) {
        if b != 0 {
            return Ok(Value::from(int_true_div(a, b)));
        }
    }
    let finite = |v: &Value| f64::try_from(v.clone()).is_ok_and(f64::is_finite);
    let float_power = op == "**"
        && (!left.is_integer() || !right.is_integer())
        && finite(&left)
        && finite(&right);
    let result = match (compute(left, op, right), integers) {
        // minijinja refuses an integer result beyond 128 bits, which Python's integers hold.
        (Err(refused), Some((a, b))) => {
            match super::python_bigint::arith(&Value::from(a), op, &Value::from(b), true) {
                Some(big) => big?,
                None => return Err(refused),
            }
        }
        (result, _) => result?,
    };
    // Python's float power raises where the result leaves the floats (its operands finite).
    if float_power && f64::try_from(result.clone()).is_ok_and(f64::is_infinite) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "(34, 'Numerical result out of range')",
        ));
    }
    Ok(result)
}

/// Python's `text % right`, printf-style formatting: a tuple's items are the arguments, a dict
/// (or a list, which Python also indexes) is one argument that named conversions look into,
/// anything else is the one argument.
fn string_formatting(text: &Value, right: &Value) -> Result<Value, Error> {
    let template = text.as_str().unwrap_or_default();
    let operand = match python_type_name(right) {
        "tuple" | GROUP_TUPLE => Operand::Tuple(right.try_iter()?.collect()),
        "dict" | "list" => Operand::Map(right.clone()),
        _ => Operand::Tuple(vec![right.clone()]),
    };
    percent_format(template, &operand).map(Value::from)
}

/// Python's `a / b` of two integers (`b` not 0): the float nearest the exact quotient, ties to
/// even, where dividing the two as floats would round each first (beyond 2^53).
pub fn int_true_div(a: i128, b: i128) -> f64 {
    const EXACT: u128 = 1 << 53;
    let negative = (a < 0) != (b < 0);
    let (n, d) = (a.unsigned_abs(), b.unsigned_abs());
    let magnitude = if n == 0 {
        0.0
    } else if n <= EXACT && d <= EXACT {
        n as f64 / d as f64
    } else {
        let (mut q, mut r) = (n / d, n % d);
        // Quotient bits past the point until there are 55 (a guard bit beyond the 53 kept and
        // one more), `r` staying below `d` (at most 2^127), so doubling it fits.
        let mut scale = 0i32;
        while q >> 54 == 0 {
            r <<= 1;
            q <<= 1;
            if r >= d {
                r -= d;
                q |= 1;
            }
            scale += 1;
        }
        let shift = 128 - q.leading_zeros() - 53;
        let mut kept = q >> shift;
        let dropped = q & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        if dropped > half || (dropped == half && (r != 0 || kept & 1 == 1)) {
            kept += 1;
        }
        kept as f64 * 2f64.powi(shift as i32 - scale)
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// [`FOLDED_FILTER`]: the value, or the `NameError` Python raises where jinja2 writes it into
/// the code it generates with a non-finite float in it (its `repr`, `nan` or `inf`, is a name).
pub fn folded_filter(value: Value) -> Result<Value, Error> {
    match non_finite(&value, 0) {
        Some(name) => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("name '{name}' is not defined"),
        )),
        None => Ok(value),
    }
}

/// The name Python reads in the `repr` of `value`'s first non-finite float, where it holds one.
fn non_finite(value: &Value, depth: usize) -> Option<&'static str> {
    match value.kind() {
        ValueKind::Number => match f64::try_from(value.clone()) {
            Ok(f) if f.is_nan() && !value.is_integer() => Some("nan"),
            Ok(f) if f.is_infinite() && !value.is_integer() => Some("inf"),
            _ => None,
        },
        ValueKind::Seq if depth < 64 => value
            .try_iter()
            .ok()?
            .find_map(|item| non_finite(&item, depth + 1)),
        ValueKind::Map if depth < 64 && super::python_semantics::is_dict(value) => {
            value.try_iter().ok()?.find_map(|key| {
                let item = value.get_item(&key).unwrap_or_default();
                non_finite(&key, depth + 1).or_else(|| non_finite(&item, depth + 1))
            })
        }
        _ => None,
    }
}

/// [`NEG_FILTER`]: Python's `-value`: of an integer without bound (minijinja's stops at 128
/// bits), a float, a bool (`-True` is `-1`) or a complex number; Python's `TypeError` for what
/// has no `-`.
pub fn neg_filter(value: Value) -> Result<Value, Error> {
    if let Some(negated) = super::python_complex::negated(&value) {
        return Ok(negated);
    }
    if let Some(negated) = super::python_bigint::negated(&value) {
        return Ok(negated);
    }
    match value.kind() {
        ValueKind::Number => Ok(Value::from(-f64::try_from(value)?)),
        ValueKind::Undefined => Err(Error::from(ErrorKind::UndefinedError)),
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
    let (l, r) = (type_name(left), type_name(right));
    // A group of `groupby` is a tuple to `+` and `*`, named as its own type where Python
    // names the other operand's.
    let base = |t: &'static str| if t == GROUP_TUPLE { "tuple" } else { t };
    let numeric = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    let integral = |v: &Value| v.kind() == ValueKind::Bool || v.is_integer();
    let sequence = |t: &str| matches!(t, "str" | "list" | "tuple");
    if numeric(left) && numeric(right) {
        return zero_division(left, op, right, integral(left) && integral(right));
    }
    match op {
        "+" if base(l) == base(r) && sequence(base(l)) => None,
        "+" if sequence(base(l)) => {
            let l = base(l);
            Some(format!("can only concatenate {l} (not \"{r}\") to {l}"))
        }
        // A count beyond 64 bits fits no index, however short the sequence.
        "*" if sequence(base(l)) && integral(right) || sequence(base(r)) && integral(left) => {
            let count = if sequence(base(l)) { right } else { left };
            (count.kind() != ValueKind::Bool && i64::try_from(count.clone()).is_err())
                .then(|| "cannot fit 'int' into an index-sized integer".to_string())
        }
        "*" if sequence(base(l)) => {
            Some(format!("can't multiply sequence by non-int of type '{r}'"))
        }
        "*" if sequence(base(r)) => {
            Some(format!("can't multiply sequence by non-int of type '{l}'"))
        }
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

/// jinja2's `odd` test: `value % 2 == 1`, with Python's errors (`'abc' % 2` is string
/// formatting, which refuses an argument the string has no place for).
pub fn odd_test(value: &Value) -> Result<bool, Error> {
    Ok(remainder(value, &Value::from(2))? == Value::from(1))
}

/// jinja2's `even` test: `value % 2 == 0`.
pub fn even_test(value: &Value) -> Result<bool, Error> {
    Ok(remainder(value, &Value::from(2))? == Value::from(0))
}

/// jinja2's `divisibleby` test: `value % num == 0`.
pub fn divisibleby_test(value: &Value, num: &Value) -> Result<bool, Error> {
    Ok(remainder(value, num)? == Value::from(0))
}

/// Python's `value % arg` for a test to compare with a number: string formatting of a string
/// (whose text never equals a number), the remainder of numbers, Python's `TypeError` for the
/// rest.
fn remainder(value: &Value, arg: &Value) -> Result<Value, Error> {
    // An undefined operand refuses `%` (jinja2's `UndefinedError`).
    for side in [value, arg] {
        super::python_undefined::refuse_hinted(side)?;
        if side.is_undefined() {
            return Err(Error::from(ErrorKind::UndefinedError));
        }
    }
    match value.as_str() {
        Some(format) if value.kind() == ValueKind::String => {
            check_one_argument_format(format)?;
            Ok(Value::from(""))
        }
        _ => arith_filter(value.clone(), "%", arg.clone()),
    }
}

/// Python's errors for `format % x` with one argument `x` that is not a mapping: every
/// conversion of `format` parsed, one of them (not `%%`) to take the argument.
fn check_one_argument_format(format: &str) -> Result<(), Error> {
    let error = |message: String| Error::new(ErrorKind::InvalidOperation, message);
    let mut taken = 0;
    let mut chars = format.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            continue;
        }
        if chars.peek().is_some_and(|(_, c)| *c == '(') {
            return Err(error("format requires a mapping".to_string()));
        }
        // Flags, width, precision and length modifier; a `*` takes an argument of its own.
        while let Some(&(_, c)) = chars.peek() {
            match c {
                '#' | '0' | '-' | ' ' | '+' | '.' | 'h' | 'l' | 'L' | '1'..='9' => {}
                '*' => taken += 1,
                _ => break,
            }
            chars.next();
        }
        match chars.next() {
            None => return Err(error("incomplete format".to_string())),
            Some((_, '%')) => {}
            Some((_, 'd' | 'i' | 'o' | 'u' | 'x' | 'X' | 'e' | 'E' | 'f' | 'F' | 'g' | 'G'))
            | Some((_, 'c' | 'r' | 's' | 'a')) => taken += 1,
            Some((at, other)) => {
                let index = format[..at].chars().count();
                return Err(error(format!(
                    "unsupported format character '{other}' ({:#x}) at index {index}",
                    other as u32
                )));
            }
        }
    }
    match taken {
        0 => Err(error(
            "not all arguments converted during string formatting".to_string(),
        )),
        1 => Ok(()),
        _ => Err(error("not enough arguments for format string".to_string())),
    }
}

/// `left op right` for the operands chat templates add and subtract (64-bit integers, floats,
/// strings), computed here as minijinja computes them; `None` for the rest.
fn compute_plain(left: &Value, op: &str, right: &Value) -> Option<Value> {
    if let (Some(a), Some(b), "+") = (left.as_str(), right.as_str(), op) {
        if left.kind() == ValueKind::String && right.kind() == ValueKind::String {
            let mut joined = String::with_capacity(a.len() + b.len());
            joined.push_str(a);
            joined.push_str(b);
            return Some(Value::from(joined));
        }
    }
    if left.kind() != ValueKind::Number || right.kind() != ValueKind::Number {
        return None;
    }
    let int = |v: &Value| v.as_i64().filter(|_| v.is_integer());
    if let (Some(a), Some(b)) = (int(left), int(right)) {
        return match op {
            "+" => a.checked_add(b).map(Value::from),
            "-" => a.checked_sub(b).map(Value::from),
            "*" => a.checked_mul(b).map(Value::from),
            "/" if b != 0 => Some(Value::from(int_true_div(a.into(), b.into()))),
            _ => None,
        };
    }
    let float = |v: &Value| match int(v) {
        Some(i) => Some(i as f64),
        None if !v.is_integer() => f64::try_from(v.clone()).ok(),
        None => None,
    };
    let (a, b) = (float(left)?, float(right)?);
    match op {
        "+" => Some(Value::from(a + b)),
        "-" => Some(Value::from(a - b)),
        "*" => Some(Value::from(a * b)),
        "/" if b != 0.0 => Some(Value::from(a / b)),
        _ => None,
    }
}

/// `left op right` evaluated by minijinja itself (its operators are not public): one compiled
/// expression per operator, in an environment of its own; the plain cases without it.
fn compute(left: Value, op: &str, right: Value) -> Result<Value, Error> {
    if let Some(value) = compute_plain(&left, op, &right) {
        return Ok(value);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// minijinja's own answer, through the compiled expression.
    fn by_expression(left: Value, op: &str, right: Value) -> Result<Value, Error> {
        let env = Environment::new();
        let source = format!("a {op} b");
        let expression = env.compile_expression(&source).unwrap();
        expression.eval(minijinja::context! { a => left, b => right })
    }

    #[test]
    fn integer_true_division_is_correctly_rounded() {
        // Python's `a / b`, as the bits of the float it gives.
        let cases: [(i128, i128, u64); 40] = [
            (1, 3, 0x3fd5555555555555),
            (9007199254740993, 3, 0x4325555555555556),
            (3, 9007199254740993, 0x3cb7ffffffffffff),
            (-1180591620717411315769, 7, 0xc422492492492492),
            (
                1000000000000000000000000000007,
                -18446744073709551615,
                0xc2293e5939a08cea,
            ),
            (
                170141183460469231731687303715884105727,
                3,
                0x47c5555555555555,
            ),
            (
                -170141183460469231731687303715884105728,
                170141183460469231731687303715884105727,
                0xbff0000000000000,
            ),
            (
                1,
                -170141183460469231731687303715884105728,
                0xb800000000000000,
            ),
            (0, -5, 0x8000000000000000),
            (9007199254740993, 1, 0x4340000000000000),
            (12345678901234567891, 10, 0x43b12210f47de981),
            (
                -1180591620717411303429,
                9007199254740993,
                0xc0ffffffffffffff,
            ),
            (
                173514735781699109538348,
                158140630064346456575375826836724101,
                0x3d734d6e2774db7a,
            ),
            (
                -71470026353922314212661912215044076,
                -40196344950564939,
                0x43b8acce8282724b,
            ),
            (-46613168087032148, 17029676, 0xc1e464be37c267d1),
            (
                2047636879310349033397446,
                171609394958470759,
                0x4166c227529d2d34,
            ),
            (1136158026325863927690334252, -81, 0xc52734839afff8e6),
            (
                436391429410762107303316226807838075,
                -7471075814,
                0xc548287b98679222,
            ),
            (-40, 4092209038224945100, 0xbc6689f2a10d77f8),
            (-3651891609, -14645735254762516, 0x3e90bbc625daf507),
            (83697, -205221393752277552222228314647, 0xbadf8e0e4be97b41),
            (
                -283070097849159631125043150068300,
                -4196255212150448359244660996277917,
                0x3fb144e9e4c0e028,
            ),
            (
                -581872450008167162181216378112228076,
                -13064012638803533175017936,
                0x4224bd98079d1f1d,
            ),
            (
                505471363737574,
                -536853035243108021707396689861702,
                0xbc315e523976fd91,
            ),
            (70514228394918401747, -3057007436, 0xc2157b76c46184cb),
            (
                -1099666390739726344,
                3948434389925208300201389,
                0xbe92b0b67cf0d7a0,
            ),
            (5468918364, 170591292288988502151260, 0x3d220c21a83e523a),
            (
                -177178052490650396033520617425,
                -166423000863509,
                0x430e422a33d506b9,
            ),
            (
                50239416759382777455,
                36914216783547939726,
                0x3ff5c6904b5c461b,
            ),
            (
                -1771320642722718939364172351147423,
                13584582,
                0xc55af6e4f2ab0515,
            ),
            (
                283932647559606878890854209404766,
                -32118526,
                0xc51d3fe65f2761ff,
            ),
            (
                15904238662330228409570948371907432815,
                2495211,
                0x46541cccb9efda63,
            ),
            (186028, 3930, 0x4047aaed5eb6a705),
            (
                -963710315236,
                9554304850341560776698100019,
                0xbc9d12a4578af98c,
            ),
            (5022330908385840097, 13371686811, 0x41b6631db0b93249),
            (
                -3768211439923132934399406569789511,
                225984617481535592964,
                0xc2ae54bb9e1714fd,
            ),
            (-13300, -761367189657774527399168, 0x3bd49f8d8a84b382),
            (
                -5185710812223806522592448,
                122797472062968075172533,
                0xc0451d6996228109,
            ),
            (
                125077779005073039647111538353009802,
                7829430246082703911926098078,
                0x416e7875008d9b45,
            ),
            (
                473509079922475012104584145030787975,
                -1788300264672998545712166,
                0xc24ed31b9bef26eb,
            ),
        ];
        for (a, b, bits) in cases {
            assert_eq!(int_true_div(a, b).to_bits(), bits, "{a} / {b}");
        }
        // Zero over a divisor beyond 2^53 keeps the quotient's sign, as Python's does.
        assert_eq!(int_true_div(0, -(1 << 70)).to_bits(), (-0.0f64).to_bits());
        assert_eq!(int_true_div(0, 1 << 70).to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn plain_arithmetic_is_minijinjas() {
        let values = [
            Value::from(0),
            Value::from(7),
            Value::from(-3),
            Value::from(i64::MAX),
            Value::from(i64::MIN),
            Value::from(2.5),
            Value::from(-0.0),
            Value::from(1e300),
            Value::from(f64::NAN),
            Value::from(f64::INFINITY),
            Value::from("ab"),
            Value::from(""),
            Value::from(true),
            Value::from(i128::from(i64::MAX) + 5),
        ];
        let mut checked = 0;
        for a in &values {
            for b in &values {
                for op in ["+", "-", "*", "/"] {
                    let Some(plain) = compute_plain(a, op, b) else {
                        continue;
                    };
                    let int = |v: &Value| v.as_i64().filter(|_| v.is_integer());
                    let want = match (int(a), int(b), op) {
                        // Python divides integers exactly (`int_true_div`), not as floats.
                        (Some(x), Some(y), "/") => Value::from(int_true_div(x.into(), y.into())),
                        _ => by_expression(a.clone(), op, b.clone()).unwrap(),
                    };
                    assert_eq!(
                        (plain.kind(), plain.is_integer(), plain.to_string()),
                        (want.kind(), want.is_integer(), want.to_string()),
                        "{a} {op} {b}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }
}
