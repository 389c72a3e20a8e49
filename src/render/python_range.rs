//! `range` as jinja2's sandbox has it: integer arguments of any size (minijinja's own overflows
//! on bounds near the ends of 64 bits), Python's errors for a zero step or a non-integer, and the
//! sandbox's for a range of more than [`MAX_RANGE`] items.
//!
//! Rendered as transformers, the result is Python's `range` object ([`PyRange`]): a sequence
//! (length, index, iteration, `in`) that prints as `range(0, 3)`, that `+` and `tojson` refuse
//! and that orders with nothing. MLX Node's engine gives a list.

use std::fmt;
use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_semantics::python_type;

/// The most items `range` gives, as jinja2's sandbox allows (`MAX_RANGE`).
const MAX_RANGE: i128 = 100_000;

/// Python's `range` object.
#[derive(Debug)]
pub struct PyRange {
    start: i128,
    stop: i128,
    step: i128,
    len: usize,
}

impl PyRange {
    fn item(&self, i: usize) -> Value {
        Value::from(self.start + i as i128 * self.step)
    }

    /// Python's `repr`: `range(0, 3)`, the step shown where it is not 1.
    pub fn repr(&self) -> String {
        match self.step {
            1 => format!("range({}, {})", self.start, self.stop),
            step => format!("range({}, {}, {step})", self.start, self.stop),
        }
    }
}

impl Object for PyRange {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let i = i128::try_from(key.clone()).ok()?;
        let i = if i < 0 { i + self.len as i128 } else { i };
        (0..self.len as i128)
            .contains(&i)
            .then(|| self.item(i as usize))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.len)
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&PyRange::repr(self))
    }
}

impl PyRange {
    /// `self[slice]`, given the slice's indices as `slice.indices(len)` resolves them (the
    /// first index, the end, the step): Python's range of those items.
    pub fn sliced(&self, from: i128, to: i128, step: i128) -> Value {
        let (start, stop, step) = (
            self.start + from * self.step,
            self.start + to * self.step,
            self.step * step,
        );
        let count = if step > 0 {
            (stop - start + step - 1).max(0) / step
        } else {
            (start - stop - step - 1).max(0) / -step
        };
        Value::from_object(PyRange {
            start,
            stop,
            step,
            len: count as usize,
        })
    }

    /// How many items the range has.
    pub fn count(&self) -> usize {
        self.len
    }
}

/// The range object of `value`, if it is one.
pub fn as_range(value: &Value) -> Option<&PyRange> {
    value.downcast_object_ref::<PyRange>()
}

fn bounds(args: &[Value]) -> Result<PyRange, Error> {
    let mut ints = Vec::with_capacity(args.len());
    for arg in args {
        let int = match arg.kind() {
            ValueKind::Number | ValueKind::Bool if !arg.is_number() || arg.is_integer() => {
                i128::try_from(arg.clone()).ok()
            }
            _ => None,
        };
        ints.push(int.ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "'{}' object cannot be interpreted as an integer",
                    python_type(arg)
                ),
            )
        })?);
    }
    let (start, stop, step) = match ints[..] {
        [stop] => (0, stop, 1),
        [start, stop] => (start, stop, 1),
        [start, stop, step] => (start, stop, step),
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("range expected at most 3 arguments, got {}", ints.len()),
            ))
        }
    };
    if step == 0 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "range() arg 3 must not be zero",
        ));
    }
    let count = if step > 0 {
        (stop - start + step - 1).max(0) / step
    } else {
        (start - stop - step - 1).max(0) / -step
    };
    if count > MAX_RANGE {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "Range too big. The sandbox blocks ranges larger than MAX_RANGE ({MAX_RANGE})."
            ),
        ));
    }
    Ok(PyRange {
        start,
        stop,
        step,
        len: count as usize,
    })
}

/// `range(...)` rendered as transformers: Python's range object.
pub fn range(args: Rest<Value>) -> Result<Value, Error> {
    Ok(Value::from_object(bounds(&args)?))
}

/// `range(...)` rendered as MLX Node: the list of its items.
pub fn range_list(args: Rest<Value>) -> Result<Value, Error> {
    let r = bounds(&args)?;
    Ok(Value::from(
        (0..r.len).map(|i| r.item(i)).collect::<Vec<_>>(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_a_sequence_that_prints_as_python_does() {
        let r = range(Rest(vec![Value::from(1), Value::from(10), Value::from(3)])).unwrap();
        assert_eq!(r.len(), Some(3));
        let items: Vec<i64> = r
            .try_iter()
            .unwrap()
            .map(|v| i64::try_from(v).unwrap())
            .collect();
        assert_eq!(items, [1, 4, 7]);
        assert_eq!(r.get_item(&Value::from(-1)).unwrap(), Value::from(7));
        assert!(r.get_item(&Value::from(3)).unwrap().is_undefined());
        assert_eq!(r.to_string(), "range(1, 10, 3)");
        assert_eq!(
            range(Rest(vec![Value::from(3)])).unwrap().to_string(),
            "range(0, 3)"
        );
        let empty = range(Rest(vec![Value::from(5), Value::from(1)])).unwrap();
        assert_eq!(empty.len(), Some(0));
        let big = Value::from(i128::from(i64::MAX) + 2);
        let edge = range(Rest(vec![Value::from(i64::MAX), big])).unwrap();
        assert_eq!(edge.len(), Some(2));
        assert!(range(Rest(vec![Value::from(1), Value::from(2), Value::from(0)])).is_err());
        assert!(range(Rest(vec![Value::from(1_000_000)])).is_err());
        assert_eq!(
            range_list(Rest(vec![Value::from(3)])).unwrap(),
            Value::from(vec![0, 1, 2])
        );
    }
}
