//! Python's slicing, `value[start:stop:step]`: what jinja2 compiles a slice to (it bypasses the
//! environment's item lookup). A string, a list, a tuple and a range each give their own kind
//! (a slice of a range is a range); a bound must be an integer, a bool or `None`; what Python
//! cannot slice raises its `TypeError` (`None`, numbers, generators, a dict, whose lookup hashes
//! the slice), an undefined value jinja2's `UndefinedError`. The rewrite turns `x[a:b:c]` into
//! `x|__sft_py_slice(a, b, c)` (see `python_rewrite`).

use minijinja::value::{Tuple, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_range::as_range;
use super::python_semantics::{is_macro, python_int, python_type_name, type_error};
use super::python_undefined::refuse_hinted;

/// The filter a slice becomes: `x|__sft_py_slice(start, stop, step)`, `none` for a bound not
/// written.
pub const SLICE_FILTER: &str = "__sft_py_slice";

/// `slice(start, stop, step).indices(len)` as a list of the indices it picks, and the
/// resolved `(start, stop, step)`.
fn indices(
    len: i128,
    start: Option<i128>,
    stop: Option<i128>,
    step: i128,
) -> (i128, i128, Vec<i128>) {
    let resolve = |bound: Option<i128>, default: i128, lo: i128, hi: i128| match bound {
        None => default,
        Some(i) if i < 0 => i.saturating_add(len).max(lo),
        Some(i) => i.min(hi),
    };
    let (from, to) = if step > 0 {
        (resolve(start, 0, 0, len), resolve(stop, len, 0, len))
    } else {
        (
            resolve(start, len - 1, -1, len - 1),
            resolve(stop, -1, -1, len - 1),
        )
    };
    let mut picked = Vec::new();
    let mut i = from;
    while (step > 0 && i < to) || (step < 0 && i > to) {
        picked.push(i);
        i = i.saturating_add(step);
    }
    (from, to, picked)
}

/// A slice bound as Python reads one (`_PyEval_SliceIndex`): an integer or a bool, an integer
/// wider than `i128` saturated; `Ok(None)` where the bound is absent, or is `None` and `none_ok`
/// (slicing and the `str` methods take `None`, `list.index` does not).
pub(crate) fn slice_bound(value: Option<&Value>, none_ok: bool) -> Result<Option<i128>, Error> {
    let Some(value) = value else {
        return Ok(None);
    };
    if none_ok && value.is_none() {
        return Ok(None);
    }
    if let Some(i) = python_int(value) {
        return Ok(Some(i));
    }
    if value.kind() == ValueKind::Number && value.is_integer() {
        // Only a `u128` fails to fit: a positive integer past every length.
        return Ok(Some(i128::MAX));
    }
    Err(type_error(format!(
        "slice indices must be integers{} or have an __index__ method",
        if none_ok { " or None" } else { "" }
    )))
}

/// A bound counted from the end when negative, then no lower than 0 (as Python's
/// `ADJUST_INDICES` does); the caller clamps what must not pass the length.
pub(crate) fn from_end(bound: i128, len: usize) -> i128 {
    if bound < 0 {
        (bound + len as i128).max(0)
    } else {
        bound
    }
}

/// [`SLICE_FILTER`]: `value[start:stop:step]` as Python slices. A `folded` slice is one that
/// jinja2 computes when it compiles the template (a constant slice printed by itself), through
/// its environment's `getitem`, which gives an undefined value where Python raises a
/// `TypeError` (a slice of a dict, of a number, bounds that are not integers).
pub fn slice_filter(
    value: Value,
    start: Value,
    stop: Value,
    step: Value,
    folded: Option<bool>,
) -> Result<Value, Error> {
    refuse_hinted(&value)?;
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    let folded = folded.unwrap_or(false);
    let subscriptable = match value.kind() {
        ValueKind::String | ValueKind::Seq => true,
        // minijinja's lazy sequences (a slice of a slice, a reversed list) are lists.
        ValueKind::Iterable => python_type_name(&value) == "list",
        ValueKind::Map if is_macro(&value) => false,
        ValueKind::Map if folded => return Ok(Value::UNDEFINED),
        ValueKind::Map => return Err(type_error("unhashable type: 'slice'".to_string())),
        _ => false,
    };
    if !subscriptable {
        if folded {
            return Ok(Value::UNDEFINED);
        }
        return Err(type_error(format!(
            "'{}' object is not subscriptable",
            python_type_name(&value)
        )));
    }
    let bounds = (
        slice_bound(Some(&start), true),
        slice_bound(Some(&stop), true),
        slice_bound(Some(&step), true),
    );
    let (start, stop, step) = match bounds {
        (Ok(start), Ok(stop), Ok(step)) => (start, stop, step.unwrap_or(1)),
        _ if folded => return Ok(Value::UNDEFINED),
        (start, stop, step) => (start?, stop?, step?.unwrap_or(1)),
    };
    if step == 0 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "slice step cannot be zero",
        ));
    }
    if let Some(range) = as_range(&value) {
        let (from, to, _) = indices(range.count() as i128, start, stop, step);
        return Ok(range.sliced(from, to, step));
    }
    if let Some(text) = value.as_str().filter(|_| value.kind() == ValueKind::String) {
        let chars: Vec<char> = text.chars().collect();
        let (_, _, picked) = indices(chars.len() as i128, start, stop, step);
        let text: String = picked.into_iter().map(|i| chars[i as usize]).collect();
        // A slice of a Markup string is Markup.
        return Ok(super::python_markup::keep(&value, Value::from(text)));
    }
    let items: Vec<Value> = value.try_iter()?.collect();
    let (_, _, picked) = indices(items.len() as i128, start, stop, step);
    let picked: Vec<Value> = picked
        .into_iter()
        .map(|i| items[i as usize].clone())
        .collect();
    Ok(if value.is_tuple() {
        Value::from_object(Tuple::new(picked))
    } else {
        Value::from(picked)
    })
}

#[cfg(test)]
mod tests {
    use super::indices;

    #[test]
    fn indices_as_python_resolves_them() {
        // [x for x in range(5)][1:4], [::-1], [-2:], [:-10], [10:], [3:0:-1]
        assert_eq!(indices(5, Some(1), Some(4), 1).2, [1, 2, 3]);
        assert_eq!(indices(5, None, None, -1).2, [4, 3, 2, 1, 0]);
        assert_eq!(indices(5, Some(-2), None, 1).2, [3, 4]);
        assert_eq!(indices(5, None, Some(-10), 1).2, Vec::<i128>::new());
        assert_eq!(indices(5, Some(10), None, 1).2, Vec::<i128>::new());
        assert_eq!(indices(5, Some(3), Some(0), -1).2, [3, 2, 1]);
        assert_eq!(indices(5, Some(-10), None, -1).2, Vec::<i128>::new());
    }
}
