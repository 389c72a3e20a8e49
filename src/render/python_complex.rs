//! Python's complex numbers, as a template meets them: a negative number raised to a fraction
//! (`(-3) ** 0.5`) is complex in Python, where minijinja gives `nan`. The value prints as
//! Python's `repr` (`(1.0605752387249068e-16+1.7320508075688772j)`, `2j`), computes `+`, `-`,
//! `*`, `/` and `**` with numbers and with itself by CPython's formulas, and is refused where
//! Python refuses it (ordering, `//`, `%`, `tojson`, iteration: see `python_ops` and
//! `python_semantics`, which name its type `complex`).

use std::sync::Arc;

use minijinja::value::{Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_value::py_float;

/// A complex number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PyComplex {
    pub re: f64,
    pub im: f64,
}

impl Object for PyComplex {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn is_true(self: &Arc<Self>) -> bool {
        self.re != 0.0 || self.im != 0.0
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spelled())
    }
}

impl PyComplex {
    /// CPython's `repr`: the imaginary part alone where the real part is `+0`, else both in
    /// parentheses; each part as `repr` spells a float, without a trailing `.0`.
    pub fn spelled(&self) -> String {
        let part = |x: f64| {
            let text = py_float(x);
            match text.strip_suffix(".0") {
                Some(whole) => whole.to_string(),
                None => text,
            }
        };
        if self.re == 0.0 && self.re.is_sign_positive() {
            return format!("{}j", part(self.im));
        }
        let im = part(self.im);
        let sign = if im.starts_with('-') { "" } else { "+" };
        format!("({}{sign}{im}j)", part(self.re))
    }

    fn value(self) -> Value {
        Value::from_object(self)
    }

    fn prod(a: Self, b: Self) -> Self {
        PyComplex {
            re: a.re * b.re - a.im * b.im,
            im: a.re * b.im + a.im * b.re,
        }
    }

    /// CPython's `_Py_c_quot` (Smith's method); `None` for a zero divisor.
    fn quot(a: Self, b: Self) -> Option<Self> {
        let (abs_re, abs_im) = (b.re.abs(), b.im.abs());
        if abs_re >= abs_im {
            if abs_re == 0.0 {
                return None;
            }
            let ratio = b.im / b.re;
            let denom = b.re + b.im * ratio;
            Some(PyComplex {
                re: (a.re + a.im * ratio) / denom,
                im: (a.im - a.re * ratio) / denom,
            })
        } else if abs_im >= abs_re {
            let ratio = b.re / b.im;
            let denom = b.re * ratio + b.im;
            Some(PyComplex {
                re: (a.re * ratio + a.im) / denom,
                im: (a.im * ratio - a.re) / denom,
            })
        } else {
            Some(PyComplex {
                re: f64::NAN,
                im: f64::NAN,
            })
        }
    }

    /// CPython's `complex_pow`: repeated squaring for a whole exponent up to 100, the polar
    /// formula otherwise; `None` where Python raises (zero to a negative or complex power).
    fn pow(a: Self, b: Self) -> Option<Self> {
        const ONE: PyComplex = PyComplex { re: 1.0, im: 0.0 };
        if b.im == 0.0 && b.re == b.re.floor() && b.re.abs() <= 100.0 {
            let n = b.re as i64;
            let mut r = ONE;
            let mut p = a;
            let mut left = n.unsigned_abs();
            while left > 0 {
                if left & 1 == 1 {
                    r = Self::prod(r, p);
                }
                left >>= 1;
                if left > 0 {
                    p = Self::prod(p, p);
                }
            }
            return if n >= 0 { Some(r) } else { Self::quot(ONE, r) };
        }
        if b.re == 0.0 && b.im == 0.0 {
            return Some(ONE);
        }
        if a.re == 0.0 && a.im == 0.0 {
            return (b.im == 0.0 && b.re >= 0.0).then_some(PyComplex { re: 0.0, im: 0.0 });
        }
        let vabs = a.re.hypot(a.im);
        let mut len = vabs.powf(b.re);
        let at = a.im.atan2(a.re);
        let mut phase = at * b.re;
        if b.im != 0.0 {
            len /= (at * b.im).exp();
            phase += b.im * vabs.ln();
        }
        Some(PyComplex {
            re: len * phase.cos(),
            im: len * phase.sin(),
        })
    }
}

/// `value` as a complex operand: a complex number, or a number or bool as Python converts it.
fn operand(value: &Value) -> Option<PyComplex> {
    if let Some(c) = value.downcast_object_ref::<PyComplex>() {
        return Some(*c);
    }
    let re = match value.kind() {
        ValueKind::Bool => f64::from(u8::from(value.is_true())),
        ValueKind::Number => f64::try_from(value.clone()).ok()?,
        _ => return None,
    };
    Some(PyComplex { re, im: 0.0 })
}

/// Whether `value` is a complex number.
pub fn is_complex(value: &Value) -> bool {
    value.downcast_object_ref::<PyComplex>().is_some()
}

/// `left op right` where Python's answer is complex: an operand is complex, or a negative
/// number is raised to a power that is not whole. `None` where neither is so (the caller
/// computes), `Some(Err)` where Python raises.
pub fn arith(left: &Value, op: &str, right: &Value) -> Option<Result<Value, Error>> {
    let complex = is_complex(left) || is_complex(right);
    if !complex {
        let fractional_power = op == "**"
            && operand(left).is_some_and(|l| l.re < 0.0)
            && right.kind() == ValueKind::Number
            && !right.is_integer()
            && f64::try_from(right.clone()).is_ok_and(|r| r.is_finite() && r != r.floor());
        if !fractional_power {
            return None;
        }
    }
    let (a, b) = (operand(left)?, operand(right)?);
    let zero_division =
        |message: &str| Err(Error::new(ErrorKind::InvalidOperation, message.to_string()));
    Some(match op {
        "+" => Ok(PyComplex {
            re: a.re + b.re,
            im: a.im + b.im,
        }
        .value()),
        "-" => Ok(PyComplex {
            re: a.re - b.re,
            im: a.im - b.im,
        }
        .value()),
        "*" => Ok(PyComplex::prod(a, b).value()),
        "/" => match PyComplex::quot(a, b) {
            Some(q) => Ok(q.value()),
            None => zero_division("complex division by zero"),
        },
        "**" => match PyComplex::pow(a, b) {
            Some(p) => Ok(p.value()),
            None => zero_division("0.0 to a negative or complex power"),
        },
        // `//` and `%` are refused by the caller's rules (`unsupported operand type(s)`).
        _ => return None,
    })
}

/// Python's `-value` of a complex number (each part negated), `None` for anything else.
pub fn negated(value: &Value) -> Option<Value> {
    let c = value.downcast_object_ref::<PyComplex>()?;
    Some(
        PyComplex {
            re: -c.re,
            im: -c.im,
        }
        .value(),
    )
}

/// Python's `abs` of a complex number: its magnitude.
pub fn magnitude(value: &Value) -> Option<Value> {
    let c = value.downcast_object_ref::<PyComplex>()?;
    Some(Value::from(c.re.hypot(c.im)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pow(a: f64, b: f64) -> String {
        let value = arith(&Value::from(a), "**", &Value::from(b))
            .unwrap()
            .unwrap();
        value.to_string()
    }

    #[test]
    fn spells_and_computes_as_cpython() {
        // Python 3.11: (-3) ** 0.5, (-1000) ** 0.5, (-0.1) ** 0.5, ((-3) ** 0.5) ** -1
        assert_eq!(
            pow(-3.0, 0.5),
            "(1.0605752387249068e-16+1.7320508075688772j)"
        );
        assert_eq!(
            pow(-1000.0, 0.5),
            "(1.9363366072701934e-15+31.622776601683793j)"
        );
        assert_eq!(
            pow(-0.1, 0.5),
            "(1.9363366072701937e-17+0.31622776601683794j)"
        );
        let c = arith(&Value::from(-3.0), "**", &Value::from(0.5))
            .unwrap()
            .unwrap();
        let inverse = arith(&c, "**", &Value::from(-1)).unwrap().unwrap();
        assert_eq!(
            inverse.to_string(),
            "(3.53525079574969e-17-0.5773502691896258j)"
        );
        assert_eq!(PyComplex { re: 0.0, im: 2.0 }.spelled(), "2j");
        assert_eq!(PyComplex { re: 1.0, im: -0.0 }.spelled(), "(1-0j)");
        assert!(arith(&Value::from(4), "**", &Value::from(0.5)).is_none());
    }
}
