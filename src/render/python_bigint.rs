//! Python's integers beyond 128 bits. minijinja's integers stop at 128 bits and refuse an
//! operation whose result leaves them (`(10 ** 30) ** 2`); Python's grow without bound. An
//! integer operation of `python_ops` that minijinja refuses for that reason is computed here,
//! and its result, where it leaves the 128 bits, is a [`PyBigInt`]: it prints its digits,
//! computes `+`, `-`, `*`, `//`, `%`, `**` and `/` with integers, floats and itself, orders
//! against numbers, converts to a float (`float` filter) and is named `int` in Python's
//! messages, and negates (`python_ops`). Every result that fits 128 bits again is minijinja's own
//! integer, so the common path never meets this type.

use std::sync::Arc;

use minijinja::value::{Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind};
use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

use super::python_semantics::python_int;

/// An integer beyond 128 bits (never zero, so always true).
#[derive(Debug)]
pub struct PyBigInt(BigInt);

impl Object for PyBigInt {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The most bits a result of `**` may have: Python computes any power, slowly; a template that
/// asks for more than this is refused rather than left to run.
const MOST_BITS: u64 = 1 << 20;

/// Whether `value` is an integer beyond 128 bits.
pub fn is_big(value: &Value) -> bool {
    value.downcast_object_ref::<PyBigInt>().is_some()
}

/// `value` as a float where it is an integer beyond 128 bits: Python's `float(n)`, which refuses
/// one beyond the floats.
pub fn as_float(value: &Value) -> Option<Result<f64, Error>> {
    let big = value.downcast_object_ref::<PyBigInt>()?;
    Some(to_float(&big.0))
}

fn to_float(n: &BigInt) -> Result<f64, Error> {
    n.to_f64().filter(|f| f.is_finite()).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            "int too large to convert to float",
        )
    })
}

/// An integer operand (a bool, an integer, a big one) as a big integer.
fn operand(value: &Value) -> Option<BigInt> {
    match value.downcast_object_ref::<PyBigInt>() {
        Some(big) => Some(big.0.clone()),
        None => python_int(value).map(BigInt::from),
    }
}

/// A result as the template holds it: minijinja's integer where it fits 128 bits.
fn value_of(n: BigInt) -> Value {
    match n.to_i128() {
        Some(small) => Value::from(small),
        None => Value::from_object(PyBigInt(n)),
    }
}

/// Python's `-value` of an integer (a bool, an integer, one beyond 128 bits), `None` for
/// anything else.
pub fn negated(value: &Value) -> Option<Value> {
    if let Some(small) = python_int(value).and_then(i128::checked_neg) {
        return Some(Value::from(small));
    }
    let n = match value.downcast_object_ref::<PyBigInt>() {
        Some(big) => big.0.clone(),
        None if value.is_integer() => match python_int(value) {
            Some(small) => BigInt::from(small),
            None => BigInt::from(u128::try_from(value.clone()).ok()?),
        },
        None => return None,
    };
    Some(value_of(-n))
}

/// `left op right` where an operand is an integer beyond 128 bits, or where both are integers
/// and `retry` (minijinja refused the operation, its result beyond 128 bits); `None` where
/// neither holds, or where the other operand is no number (the caller refuses it).
pub fn arith(left: &Value, op: &str, right: &Value, retry: bool) -> Option<Result<Value, Error>> {
    if !retry && !is_big(left) && !is_big(right) {
        return None;
    }
    // With a float, Python converts the integer to a float first.
    let float = |v: &Value| v.kind() == ValueKind::Number && !v.is_integer();
    if float(left) || float(right) {
        let as_f64 = |v: &Value| match as_float(v) {
            Some(converted) => converted,
            None => f64::try_from(v.clone()),
        };
        return Some((|| {
            let (a, b) = (as_f64(left)?, as_f64(right)?);
            super::python_ops::arith_filter(Value::from(a), op, Value::from(b))
        })());
    }
    let (a, b) = (operand(left)?, operand(right)?);
    Some(integer_arith(a, op, b))
}

fn integer_arith(a: BigInt, op: &str, b: BigInt) -> Result<Value, Error> {
    let refused = |message: &str| Err(Error::new(ErrorKind::InvalidOperation, message.to_string()));
    Ok(match op {
        "+" => value_of(a + b),
        "-" => value_of(a - b),
        "*" => value_of(a * b),
        "//" | "%" => {
            if b.is_zero() {
                return refused(if op == "%" {
                    "integer modulo by zero"
                } else {
                    "integer division or modulo by zero"
                });
            }
            // Python's division floors, and its remainder takes the divisor's sign.
            let (mut q, mut r) = (&a / &b, &a % &b);
            if !r.is_zero() && r.is_negative() != b.is_negative() {
                q -= 1;
                r += &b;
            }
            value_of(if op == "%" { r } else { q })
        }
        "/" => {
            if b.is_zero() {
                return refused("division by zero");
            }
            Value::from(true_div(&a, &b)?)
        }
        "**" => {
            if b.is_negative() {
                return Ok(Value::from(to_float(&a)?.powf(to_float(&b)?)));
            }
            match b.to_u32().filter(|e| u64::from(*e) * a.bits() <= MOST_BITS) {
                Some(e) => value_of(a.pow(e)),
                // Python would compute it, for minutes and gigabytes.
                None => return refused("the power is too large to compute"),
            }
        }
        _ => return refused("unsupported operand"),
    })
}

/// Python's `a / b` of two integers (`b` not 0): the float nearest the exact quotient, ties to
/// even (dividing the two as floats would round each first), refused beyond the floats.
fn true_div(a: &BigInt, b: &BigInt) -> Result<f64, Error> {
    let (n, d) = (a.magnitude(), b.magnitude());
    if n.is_zero() {
        return Ok(if a.is_negative() != b.is_negative() {
            -0.0
        } else {
            0.0
        });
    }
    // A quotient of at least 55 bits: 53 kept, a guard bit, one more; the remainder says
    // whether anything lies past them.
    let shift = 55 + d.bits() as i64 - n.bits() as i64;
    let (q, r) = if shift >= 0 {
        let scaled = n << shift as u64;
        (&scaled / d, &scaled % d)
    } else {
        let scaled = d << (-shift) as u64;
        (n / &scaled, n % &scaled)
    };
    let extra = q.bits() - 53;
    let mut kept = (&q >> extra).to_u64().unwrap_or(0);
    let dropped = &q - (num_bigint::BigUint::from(kept) << extra);
    let half = num_bigint::BigUint::from(1u32) << (extra - 1);
    if dropped > half || (dropped == half && (!r.is_zero() || kept & 1 == 1)) {
        kept += 1;
    }
    let exponent = extra as i64 - shift;
    let magnitude = kept as f64 * 2f64.powi(exponent.clamp(-1100, 1100) as i32);
    if !magnitude.is_finite() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "integer division result too large for a float",
        ));
    }
    Ok(if a.is_negative() != b.is_negative() {
        -magnitude
    } else {
        magnitude
    })
}

/// Python's `a < b` (and the other orderings, by the sign of the result) where an operand is
/// an integer beyond 128 bits and the other a number; `None` otherwise.
pub fn ordering(left: &Value, right: &Value) -> Option<std::cmp::Ordering> {
    if !is_big(left) && !is_big(right) {
        return None;
    }
    if let (Some(a), Some(b)) = (operand(left), operand(right)) {
        return Some(a.cmp(&b));
    }
    let as_f64 = |v: &Value| match v.downcast_object_ref::<PyBigInt>() {
        Some(big) => big.0.to_f64(),
        None if v.kind() == ValueKind::Number => f64::try_from(v.clone()).ok(),
        None => None,
    };
    as_f64(left)?.partial_cmp(&as_f64(right)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calc(a: Value, op: &str, b: Value) -> String {
        arith(&a, op, &b, true).unwrap().unwrap().to_string()
    }

    #[test]
    fn computes_beyond_128_bits_as_python() {
        let big = Value::from(10i128.pow(30));
        let square = arith(&big, "**", &Value::from(2), true).unwrap().unwrap();
        assert_eq!(square.to_string(), format!("1{}", "0".repeat(60)));
        // Python: -(10**60) // 7, -(10**60) % 7, 10**60 - 10**60 + 1, 2 / 10**60
        let negative = arith(&Value::from(0), "-", &square, false)
            .unwrap()
            .unwrap();
        assert_eq!(
            calc(negative.clone(), "//", Value::from(7)),
            "-142857142857142857142857142857142857142857142857142857142858"
        );
        assert_eq!(calc(negative, "%", Value::from(7)), "6");
        let one = arith(&square, "-", &square, false).unwrap().unwrap();
        assert_eq!(calc(one, "+", Value::from(1)), "1");
        let float = |v: Value| f64::try_from(v).unwrap();
        let half = arith(&square, "*", &Value::from(0.5), false).unwrap();
        assert_eq!(float(half.unwrap()), 5e59);
        let tiny = arith(&Value::from(2), "/", &square, false).unwrap();
        assert_eq!(float(tiny.unwrap()), 2e-60);
        // Python: 10**60 // 3 / 7, (2**200 + 1) / 3, -(10**40) / 3**90, 7 / 10**45.
        let divided = |a: Value, b: Value| float(arith(&a, "/", &b, true).unwrap().unwrap());
        let third = value_of(BigInt::from(10).pow(60) / BigInt::from(3));
        assert_eq!(divided(third, Value::from(7)), 4.761904761904762e+58);
        let two_200 = BigInt::from(2).pow(200) + 1;
        assert_eq!(
            divided(value_of(two_200), Value::from(3)),
            5.356460147529967e+59
        );
        let ten_40 = -BigInt::from(10).pow(40);
        let three_90 = BigInt::from(3).pow(90);
        assert_eq!(
            divided(value_of(ten_40), value_of(three_90)),
            -0.0011457426376713198
        );
        let ten_45 = BigInt::from(10).pow(45);
        assert_eq!(divided(Value::from(7), value_of(ten_45)), 7e-45);
        assert_eq!(
            ordering(&square, &Value::from(1.5)),
            Some(std::cmp::Ordering::Greater)
        );
        assert!(arith(&Value::from(1), "+", &Value::from(2), false).is_none());
    }
}
