//! Unpacking into several names (`{% set a, b = x %}`, `{% for k, v in items %}`) as Python
//! does it: a string unpacks into its characters, a dict into its keys, and a value of the
//! wrong length or one that does not iterate raises Python's error (`not enough values to unpack
//! (expected 2, got 1)`, `cannot unpack non-iterable NoneType object`). minijinja unpacks only
//! sequences and maps, with words of its own.
//!
//! The interpreter's source rewrite (`python_rewrite`) passes the value a `set` unpacks through
//! [`UNPACK_FILTER`], and the iterable of a loop with several names through
//! [`UNPACK_EACH_FILTER`].

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, Tuple, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_semantics::{as_dict_view, is_macro, python_type_name};

/// The filter the value of a `set` with several names passes through: `__sft_py_unpack(2)`.
pub const UNPACK_FILTER: &str = "__sft_py_unpack";
/// The filter the iterable of a loop with several names passes through:
/// `__sft_py_unpack_each(2)`.
pub const UNPACK_EACH_FILTER: &str = "__sft_py_unpack_each";

/// What minijinja can unpack into `count` names as Python would: `value` itself where
/// minijinja's unpacking gives Python's values, its characters where it is a string; Python's
/// message where Python refuses.
fn unpackable(value: &Value, count: usize) -> Result<Value, String> {
    let refused = || {
        format!(
            "cannot unpack non-iterable {} object",
            python_type_name(value)
        )
    };
    if unpacks_as_is(value, count) {
        return Ok(value.clone());
    }
    let (items, own) = match value.kind() {
        ValueKind::String => (super::python_semantics::characters(value), false),
        ValueKind::None | ValueKind::Number | ValueKind::Bool | ValueKind::Plain => {
            return Err(refused())
        }
        ValueKind::Map if is_macro(value) => return Err(refused()),
        _ => match value.try_iter() {
            Ok(items) => (items.collect(), true),
            Err(_) => return Err(refused()),
        },
    };
    match items.len() {
        n if n < count => Err(format!(
            "not enough values to unpack (expected {count}, got {n})"
        )),
        n if n > count => Err(format!("too many values to unpack (expected {count})")),
        // An undefined value iterates as empty, and only unpacks into no names.
        _ if own && value.as_object().is_some() => Ok(value.clone()),
        _ => Ok(Value::from_object(Tuple::from(items))),
    }
}

/// [`UNPACK_FILTER`]: `value` ready for minijinja to unpack into `count` names, or Python's
/// error.
pub fn unpack_filter(value: Value, count: usize) -> Result<Value, Error> {
    unpackable(&value, count).map_err(|message| Error::new(ErrorKind::InvalidOperation, message))
}

/// [`UNPACK_EACH_FILTER`]: the items of `iterable`, each ready for minijinja to unpack into
/// `count` names. An item Python would refuse becomes a [`Refused`] one, which raises when the
/// loop reaches it, not before: a loop may stop earlier. A list or a dict whose items minijinja
/// unpacks as they are (`d.items()`, pairs) is given back unchanged.
pub fn unpack_each_filter(iterable: Value, count: usize) -> Result<Value, Error> {
    let view = as_dict_view(&iterable);
    // A dict's items are pairs.
    if count == 2 && view.is_some_and(|v| v.type_name == "dict_items") {
        return Ok(iterable);
    }
    let reiterable = view.is_some() || matches!(iterable.kind(), ValueKind::Seq | ValueKind::Map);
    if reiterable && iterable.try_iter()?.all(|item| unpacks_as_is(&item, count)) {
        return Ok(iterable);
    }
    Ok(iterable
        .try_iter()?
        .map(|item| {
            unpackable(&item, count)
                .unwrap_or_else(|message| Value::from_object(Refused { message }))
        })
        .collect())
}

/// Whether minijinja unpacks `item` into `count` names as Python does, as it is: a list, a
/// tuple or a dict of that length.
fn unpacks_as_is(item: &Value, count: usize) -> bool {
    matches!(item.kind(), ValueKind::Seq | ValueKind::Map)
        && item.as_object().is_some()
        && item.len() == Some(count)
}

/// An item a loop cannot unpack, with Python's message. minijinja refuses to unpack it; the
/// diagnostic render (`python_undefined`) records Python's words as it does.
#[derive(Debug)]
pub struct Refused {
    message: String,
}

impl Object for Refused {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Iterable
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        super::python_undefined::refuse(&self.message);
        Enumerator::NonEnumerable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacks_as_python_does() {
        let chars = unpack_filter(Value::from("ab"), 2).unwrap();
        assert_eq!(
            chars.try_iter().unwrap().collect::<Vec<_>>(),
            ["a", "b"].map(Value::from)
        );
        let pair = Value::from(vec![1, 2]);
        assert_eq!(unpack_filter(pair.clone(), 2).unwrap(), pair);
        let refused = |v: Value, n: usize| {
            unpack_filter(v, n)
                .unwrap_err()
                .detail()
                .map(str::to_string)
        };
        assert_eq!(
            refused(Value::from("a"), 2).as_deref(),
            Some("not enough values to unpack (expected 2, got 1)")
        );
        assert_eq!(
            refused(Value::from(vec![1, 2, 3]), 2).as_deref(),
            Some("too many values to unpack (expected 2)")
        );
        assert_eq!(
            refused(Value::from(()), 2).as_deref(),
            Some("cannot unpack non-iterable NoneType object")
        );
    }

    #[test]
    fn a_loop_keeps_pairs_and_defers_what_it_cannot_unpack() {
        let pairs = Value::from(vec![vec![1, 2], vec![3, 4]]);
        assert_eq!(unpack_each_filter(pairs.clone(), 2).unwrap(), pairs);
        let mixed = Value::from(vec![Value::from(vec![1, 2]), Value::from(7)]);
        let items: Vec<Value> = unpack_each_filter(mixed, 2)
            .unwrap()
            .try_iter()
            .unwrap()
            .collect();
        assert_eq!(items[0], Value::from(vec![1, 2]));
        assert!(items[1].downcast_object_ref::<Refused>().is_some());
    }
}
