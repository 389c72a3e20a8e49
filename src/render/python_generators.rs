//! jinja2's generators: what `map`, `select`, `reject`, `selectattr`, `rejectattr` and
//! `items` give in Python, one-shot iterables a template can only loop over once (see
//! `python_semantics`).

use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectRepr, Rest, Value};
use minijinja::{Error, ErrorKind, State};

use super::python_semantics::{type_error, OBJECT_ADDRESS};
use super::python_undefined;

/// A one-shot generator (what jinja2's `map`, `select`, `items`, ... give): true, no length,
/// iterable once (a second loop sees nothing), refused by `tojson`, printed with the name of
/// the function that made it and [`OBJECT_ADDRESS`]. `items` of a value that is not a map
/// gives one that raises when iterated, as the Python generator does.
#[derive(Debug)]
pub struct Generator {
    items: Mutex<Option<Vec<Value>>>,
    /// The Python function that made it (`sync_do_map`, `select_or_reject`, `do_items`).
    made_by: &'static str,
    /// Its Python type: `generator`, or an iterator's (`list_reverseiterator`, ...).
    type_name: &'static str,
    /// The `TypeError` iterating it raises.
    refusal: Option<String>,
}

impl Generator {
    pub fn wrap(made_by: &'static str, items: Vec<Value>) -> Value {
        Value::from_object(Generator {
            items: Mutex::new(Some(items)),
            made_by,
            type_name: "generator",
            refusal: None,
        })
    }

    /// A generator that raises `TypeError: message` when iterated.
    pub fn refusing(made_by: &'static str, message: impl Into<String>) -> Value {
        Value::from_object(Generator {
            items: Mutex::new(None),
            made_by,
            type_name: "generator",
            refusal: Some(message.into()),
        })
    }

    /// A one-shot iterator of Python's type `type_name` (`reversed`, `list_reverseiterator`,
    /// ...) over `items`.
    pub fn iterator(type_name: &'static str, items: Vec<Value>) -> Value {
        Value::from_object(Generator {
            items: Mutex::new(Some(items)),
            made_by: "",
            type_name,
            refusal: None,
        })
    }
}

impl Object for Generator {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Iterable
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        if self.refusal.is_some() {
            return Enumerator::NonEnumerable;
        }
        let taken = self
            .items
            .lock()
            .map(|mut items| items.take())
            .unwrap_or_default();
        match taken {
            Some(items) => Enumerator::Iter(Box::new(items.into_iter())),
            None => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        None
    }

    /// Python cannot index a generator or an iterator: jinja2 gives an undefined value (and
    /// the items stay to be iterated).
    fn get_value(self: &Arc<Self>, _key: &Value) -> Option<Value> {
        Some(Value::UNDEFINED)
    }

    fn is_true(self: &Arc<Self>) -> bool {
        true
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.type_name {
            "generator" => write!(f, "<generator object {} at {OBJECT_ADDRESS}>", self.made_by),
            other => write!(f, "<{other} object at {OBJECT_ADDRESS}>"),
        }
    }
}

/// The `TypeError` iterating `value` raises, where it is a generator that refuses iteration.
pub fn generator_refusal(value: &Value) -> Option<Error> {
    let refusal = value.downcast_object_ref::<Generator>()?.refusal.as_ref()?;
    Some(type_error(refusal.clone()))
}

/// Whether `value` is a [`Generator`] (which `tojson` refuses, as `json.dumps` does).
pub fn is_generator(value: &Value) -> bool {
    value.downcast_object_ref::<Generator>().is_some()
}

/// The Python type of a [`Generator`] (`generator`, `list_reverseiterator`, ...).
pub fn generator_type(value: &Value) -> Option<&'static str> {
    value
        .downcast_object_ref::<Generator>()
        .map(|g| g.type_name)
}

pub fn map_filter(
    state: &mut State,
    value: Value,
    args: Rest<ValueOrKwargsArg>,
) -> Result<Value, Error> {
    const MADE_BY: &str = "sync_do_map";
    if let Some(early) = python_lazy_start(MADE_BY, &value)? {
        return Ok(early);
    }
    minijinja::filters::map(state, value, args).map(|items| Generator::wrap(MADE_BY, items))
}

/// The diagnostic render's `map` (see `python_undefined`): `map(attribute=...)` looks each
/// item up as jinja2 does (a dotted name part by part, a part of digits as an index), an item
/// that lacks it giving a hinted undefined value, or `default`. Every other `map` is
/// [`map_filter`].
pub fn hinted_map_filter(
    state: &mut State,
    value: Value,
    args: Rest<ValueOrKwargsArg>,
) -> Result<Value, Error> {
    const MADE_BY: &str = "sync_do_map";
    let by_attribute = match args.0.as_slice() {
        [only] if only.is_kwargs() => {
            let names: Vec<Value> = only.try_iter()?.collect();
            let known = names
                .iter()
                .all(|k| matches!(k.as_str(), Some("attribute" | "default")));
            let attribute = only.get_attr("attribute")?;
            let default = only.get_attr("default")?;
            attribute
                .as_str()
                .filter(|_| known)
                .map(|a| (a.to_string(), default))
        }
        _ => None,
    };
    let Some((attribute, default)) = by_attribute else {
        return map_filter(state, value, args);
    };
    if let Some(early) = python_lazy_start(MADE_BY, &value)? {
        return Ok(early);
    }
    let mut items = Vec::new();
    for item in value.try_iter()? {
        let mut found = item;
        for part in attribute.split('.') {
            let key = match part.parse::<i64>() {
                Ok(index) if part.bytes().all(|b| b.is_ascii_digit()) => Value::from(index),
                _ => Value::from(part),
            };
            found = python_undefined::item_filter(found, key)?;
        }
        if python_undefined::is_undefined(&found) && !default.is_undefined() {
            found = default.clone();
        }
        items.push(found);
    }
    Ok(Generator::wrap(MADE_BY, items))
}

/// What jinja2's `map` and `select` family give before reading their arguments: nothing for a
/// false value (they loop only `if value`), a generator that raises Python's `TypeError` for a
/// value that does not iterate.
fn python_lazy_start(made_by: &'static str, value: &Value) -> Result<Option<Value>, Error> {
    if !value.is_true() {
        return Ok(Some(Generator::wrap(made_by, Vec::new())));
    }
    Ok(super::python_iterables::not_iterable_message(value)?
        .map(|message| Generator::refusing(made_by, message)))
}

pub fn select_filter(s: &mut State, v: Value, a: Rest<ValueOrKwargsArg>) -> Result<Value, Error> {
    selected(s, v, a, false, false)
}

pub fn reject_filter(s: &mut State, v: Value, a: Rest<ValueOrKwargsArg>) -> Result<Value, Error> {
    selected(s, v, a, false, true)
}

pub fn selectattr_filter(
    s: &mut State,
    v: Value,
    a: Rest<ValueOrKwargsArg>,
) -> Result<Value, Error> {
    selected(s, v, a, true, false)
}

pub fn rejectattr_filter(
    s: &mut State,
    v: Value,
    a: Rest<ValueOrKwargsArg>,
) -> Result<Value, Error> {
    selected(s, v, a, true, true)
}

/// minijinja's `select`/`reject` (`by_attr`: `selectattr`/`rejectattr`, whose first argument
/// names the attribute tested), as a generator.
fn selected(
    state: &mut State,
    value: Value,
    args: Rest<ValueOrKwargsArg>,
    by_attr: bool,
    invert: bool,
) -> Result<Value, Error> {
    use minijinja::filters;
    if let Some(early) = python_lazy_start("select_or_reject", &value)? {
        return Ok(early);
    }
    let (attr, rest) = if by_attr {
        let (attr, rest) = split_name(args)?;
        let attr = attr
            .ok_or_else(|| Error::new(ErrorKind::MissingArgument, "an attribute name is needed"))?;
        (Some(attr), rest)
    } else {
        (None, args)
    };
    let (test, rest) = split_name(rest)?;
    let given = (value.clone(), rest.0.clone());
    let items = match (attr.clone(), invert) {
        (Some(attr), false) => filters::selectattr(state, value, attr, test.clone(), rest),
        (Some(attr), true) => filters::rejectattr(state, value, attr, test.clone(), rest),
        (None, false) => filters::select(state, value, test.clone(), rest),
        (None, true) => filters::reject(state, value, test.clone(), rest),
    };
    if let (Err(_), Some(attr), Some(test)) = (&items, &attr, &test) {
        name_missing_attribute(state, &given.0, attr, test, given.1);
    }
    Ok(Generator::wrap("select_or_reject", items?))
}

/// Where `selectattr` or `rejectattr` failed: records the text jinja2 gives the failure (see
/// `python_undefined`) where it is the test refusing an item's missing attribute (`'str object'
/// has no attribute 'a'` for `selectattr('a', 'gt', 0)` of a string), the first item the test
/// refuses being the one Python stops at.
fn name_missing_attribute(
    state: &mut State,
    items: &Value,
    attr: &str,
    test: &str,
    args: Vec<ValueOrKwargsArg>,
) {
    let Ok(items) = items.try_iter() else {
        return;
    };
    let mut tested = vec![Value::UNDEFINED];
    tested.extend(args.into_iter().map(ValueOrKwargsArg::into_value));
    for item in items {
        let Ok(found) = super::python_order::attribute_of(&item, attr) else {
            return;
        };
        let hint = python_undefined::hint_of(&found).map(str::to_string);
        tested[0] = if hint.is_some() {
            Value::UNDEFINED
        } else {
            found
        };
        if state.perform_test(test, &tested).is_err() {
            if let Some(hint) = hint {
                python_undefined::refuse(&hint);
            }
            return;
        }
    }
}

pub type ValueOrKwargsArg = minijinja::value::ValueOrKwargs;

/// The first argument as a name (a test's or an attribute's), and the rest.
fn split_name(
    args: Rest<ValueOrKwargsArg>,
) -> Result<
    (
        Option<std::borrow::Cow<'static, str>>,
        Rest<ValueOrKwargsArg>,
    ),
    Error,
> {
    let mut values = args.0;
    if values.is_empty() {
        return Ok((None, Rest(values)));
    }
    let first = values.remove(0).into_value();
    let name = first
        .as_str()
        .map(|s| std::borrow::Cow::Owned(s.to_string()))
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidOperation,
                "a test or attribute name must be a string",
            )
        })?;
    Ok((Some(name), Rest(values)))
}
