//! jinja2's filters that walk a value, and Python's `dict()`, as transformers renders them:
//! `batch`, `slice` and `unique` give one-shot generators, `reverse` Python's reverse
//! iterators, and each raises Python's error where Python cannot iterate, hash or pair what it
//! is given (minijinja iterates `None` as nothing, hashes lists and gives lists).

use std::sync::Arc;

use minijinja::value::{Kwargs, Object, ObjectRepr, Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{Error, ErrorKind, State};

use super::python_filters::pick;
use super::python_generators::{generator_refusal, is_generator, Generator};
use super::python_order::attribute_of;
use super::python_semantics::{is_macro, python_type_name, type_error, GROUP_TUPLE};
use super::python_undefined::{hint_of, is_undefined, item_filter, refuse_hinted};

/// The items of `value` as Python's `for item in value` walks them (`Ok(Err(message))`: the
/// `TypeError` that walk raises; an undefined value walks as nothing).
pub(super) fn python_items(value: &Value) -> Result<Result<Vec<Value>, String>, Error> {
    if let Err(message) = python_items_checked(value)? {
        return Ok(Err(message));
    }
    if is_undefined(value) {
        return Ok(Ok(Vec::new()));
    }
    match value.kind() {
        ValueKind::String => Ok(Ok(value
            .as_str()
            .unwrap_or_default()
            .chars()
            .map(|c| Value::from(c.to_string()))
            .collect())),
        _ => Ok(Ok(value.try_iter()?.collect())),
    }
}

/// The `TypeError` Python's `for item in value` raises, where it raises one.
pub fn not_iterable_message(value: &Value) -> Result<Option<String>, Error> {
    Ok(python_items_checked(value)?.err())
}

/// [`python_items`] without collecting the items of what does iterate.
fn python_items_checked(value: &Value) -> Result<Result<(), String>, Error> {
    if let Some(refused) = generator_refusal(value) {
        return Ok(Err(refused.detail().unwrap_or_default().to_string()));
    }
    if is_undefined(value) {
        return Ok(Ok(()));
    }
    Ok(match value.kind() {
        ValueKind::None | ValueKind::Number | ValueKind::Bool | ValueKind::Plain => Err(format!(
            "'{}' object is not iterable",
            python_type_name(value)
        )),
        ValueKind::Map if is_macro(value) => Err("'Macro' object is not iterable".into()),
        _ => Ok(()),
    })
}

/// A positive count argument (`batch`'s line count, `slice`'s number of slices).
fn count(value: &Value, filter: &str) -> Result<i64, Error> {
    match value.kind() {
        ValueKind::Bool => Ok(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => i64::try_from(value.clone()),
        _ => Err(type_error(format!(
            "{filter}: '{}' object cannot be interpreted as an integer",
            python_type_name(value)
        ))),
    }
}

/// jinja2's `batch(value, linecount, fill_with=None)`: a generator of lists of `linecount`
/// items, the last one filled up with `fill_with` where one is given.
pub fn batch_filter(
    value: Value,
    linecount: Value,
    fill_with: Option<Value>,
) -> Result<Value, Error> {
    const MADE_BY: &str = "do_batch";
    let items = match python_items(&value)? {
        Ok(items) => items,
        Err(message) => return Ok(Generator::refusing(MADE_BY, message)),
    };
    let per = count(&linecount, "batch")?;
    let mut batches = Vec::new();
    let mut current: Vec<Value> = Vec::new();
    for item in items {
        if current.len() as i64 == per {
            batches.push(Value::from(std::mem::take(&mut current)));
        }
        current.push(item);
    }
    if !current.is_empty() {
        if let Some(fill) = fill_with.filter(|f| !f.is_none()) {
            while (current.len() as i64) < per {
                current.push(fill.clone());
            }
        }
        batches.push(Value::from(current));
    }
    Ok(Generator::wrap(MADE_BY, batches))
}

/// jinja2's `slice(value, slices, fill_with=None)`: a generator of `slices` lists, the first
/// ones one item longer where the items do not divide evenly (the others then filled with
/// `fill_with` where one is given).
pub fn slice_filter(value: Value, slices: Value, fill_with: Option<Value>) -> Result<Value, Error> {
    const MADE_BY: &str = "sync_do_slice";
    let items = match python_items(&value)? {
        Ok(items) => items,
        Err(message) => return Ok(Generator::refusing(MADE_BY, message)),
    };
    let slices = count(&slices, "slice")?;
    if slices == 0 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "integer division or modulo by zero",
        ));
    }
    let length = items.len() as i64;
    let per = length.div_euclid(slices);
    let with_extra = length.rem_euclid(slices);
    let fill = fill_with.filter(|f| !f.is_none());
    let mut offset = 0;
    let mut out = Vec::new();
    for number in 0..slices.max(0) {
        let start = offset + number * per;
        if number < with_extra {
            offset += 1;
        }
        let end = offset + (number + 1) * per;
        let clamp = |i: i64| i.clamp(0, length) as usize;
        let mut part: Vec<Value> = items[clamp(start)..clamp(end).max(clamp(start))].to_vec();
        if let Some(fill) = &fill {
            if number >= with_extra {
                part.push(fill.clone());
            }
        }
        out.push(Value::from(part));
    }
    Ok(Generator::wrap(MADE_BY, out))
}

/// A value as a key of a Python set or dict: equal keys compare equal here (`1`, `1.0` and
/// `True` are one key), or Python's `TypeError` for a list or a dict, which do not hash.
fn hash_key(value: &Value) -> Result<Value, Error> {
    match python_type_name(value) {
        kind @ ("list" | "dict" | "dict_items" | "dict_keys" | "dict_values") => {
            Err(type_error(format!("unhashable type: '{kind}'")))
        }
        "tuple" | GROUP_TUPLE => {
            let items: Result<Vec<Value>, Error> =
                value.try_iter()?.map(|v| hash_key(&v)).collect();
            Ok(Value::from(items?))
        }
        _ if is_undefined(value) => Ok(Value::UNDEFINED),
        "bool" => Ok(Value::from(i64::from(value.is_true()))),
        "float" => match f64::try_from(value.clone()) {
            Ok(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Value::from(f as i64)),
            _ => Ok(value.clone()),
        },
        _ => Ok(value.clone()),
    }
}

/// jinja2's `unique(value, case_sensitive=False, attribute=None)`: a generator of the items
/// whose key (the item or its attribute, a string lower-cased unless the filter is case
/// sensitive) was not seen before; Python's `TypeError` for a key that does not hash.
pub fn unique_filter(
    value: Value,
    case_sensitive: Option<Value>,
    attribute: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    const MADE_BY: &str = "sync_do_unique";
    let case_sensitive =
        pick(case_sensitive, &kwargs, "case_sensitive")?.is_some_and(|v| v.is_true());
    let attribute = pick(attribute, &kwargs, "attribute")?.filter(|a| !a.is_none());
    kwargs.assert_all_used()?;
    let items = match python_items(&value)? {
        Ok(items) => items,
        Err(message) => return Ok(Generator::refusing(MADE_BY, message)),
    };
    let mut seen: Vec<Value> = Vec::new();
    let mut kept = Vec::new();
    for item in items {
        let mut key = item.clone();
        if let Some(path) = &attribute {
            key = match path.as_str() {
                Some(path) => attribute_of(&key, path)?,
                None => item_filter(key, path.clone())?,
            };
        }
        if let (false, Some(s)) = (case_sensitive, key.as_str()) {
            if key.kind() == ValueKind::String {
                key = Value::from(s.to_lowercase());
            }
        }
        let key = match hash_key(&key) {
            Ok(key) => key,
            Err(e) => {
                return Ok(Generator::refusing(
                    MADE_BY,
                    e.detail().unwrap_or_default().to_string(),
                ))
            }
        };
        if !seen.contains(&key) {
            seen.push(key);
            kept.push(item);
        }
    }
    Ok(Generator::wrap(MADE_BY, kept))
}

/// jinja2's `reverse`: a string reversed; for a list, a tuple, a dict or a range, Python's
/// reverse iterator over it (one-shot, without a length); for anything else iterable (a
/// generator), a list; jinja2's `FilterArgumentError` for what does not iterate.
pub fn reverse_filter(value: Value) -> Result<Value, Error> {
    if value.kind() == ValueKind::String {
        return Ok(Value::from(
            value
                .as_str()
                .unwrap_or_default()
                .chars()
                .rev()
                .collect::<String>(),
        ));
    }
    let iterator = match python_type_name(&value) {
        "list" => Some("list_reverseiterator"),
        "dict" => Some("dict_reversekeyiterator"),
        "range" => Some("range_iterator"),
        "tuple" | "Undefined" => Some("reversed"),
        _ => None,
    };
    match python_items(&value)? {
        Ok(mut items) => {
            items.reverse();
            Ok(match iterator {
                Some(name) => Generator::iterator(name, items),
                None => Value::from(items),
            })
        }
        Err(_) => Err(Error::new(
            ErrorKind::InvalidOperation,
            "argument must be iterable",
        )),
    }
}

/// transformers' `dict` global (its `TemplateDict`): called, Python's `dict(...)`
/// ([`dict_function`]); `dict.fromkeys(keys, value=None)`, a dict of those keys in their order,
/// each with `value`.
///
/// Not zero-sized: minijinja holds an object by a pointer to its value inside an `Arc`, which for
/// a zero-sized value points just past the allocation. A leak checker (the fuzz targets'
/// LeakSanitizer) then finds no pointer into it and reports the global of every environment
/// alive at exit as leaked.
#[derive(Debug)]
pub struct TemplateDict {
    _not_zero_sized: u8,
}

const _: () = assert!(std::mem::size_of::<TemplateDict>() > 0);

impl TemplateDict {
    /// The value the environment binds to `dict`.
    pub fn global() -> Value {
        Value::from_object(TemplateDict { _not_zero_sized: 0 })
    }
}

impl Object for TemplateDict {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn call(self: &Arc<Self>, _state: &mut State, args: &[Value]) -> Result<Value, Error> {
        dict_function(Rest(
            args.iter().cloned().map(ValueOrKwargs::from).collect(),
        ))
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        if method != "fromkeys" {
            return Err(Error::new(
                ErrorKind::UnknownMethod,
                format!("'TemplateDict' object has no attribute '{method}'"),
            ));
        }
        if args.iter().any(Value::is_kwargs) {
            return Err(type_error(
                "dict.fromkeys() takes no keyword arguments".into(),
            ));
        }
        let (keys, value) = match args {
            [keys] => (keys, Value::from(())),
            [keys, value] => (keys, value.clone()),
            _ if args.is_empty() => {
                return Err(type_error(
                    "fromkeys expected at least 1 argument, got 0".into(),
                ))
            }
            _ => {
                return Err(type_error(format!(
                    "fromkeys expected at most 2 arguments, got {}",
                    args.len()
                )))
            }
        };
        // jinja2's undefined value iterates as empty.
        if keys.is_undefined() || hint_of(keys).is_some() {
            return Ok(Value::from_pairs(Vec::<(Value, Value)>::new()));
        }
        let keys = if keys.kind() == ValueKind::Map && !is_macro(keys) && !is_generator(keys) {
            keys.try_iter()?.collect()
        } else {
            python_items(keys)?.map_err(type_error)?
        };
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            hash_key(&key)?;
            out.push((key, value.clone()));
        }
        Ok(Value::from_pairs(out))
    }
}

/// Python's `dict(*args, **kwargs)`: a copy of a mapping, or a dict of a sequence of pairs,
/// updated with the keyword arguments; Python's errors for more than one positional argument,
/// for what does not iterate, for an element that is not a pair and for a key that does not
/// hash, jinja2's for an undefined argument.
pub fn dict_function(args: Rest<minijinja::value::ValueOrKwargs>) -> Result<Value, Error> {
    let mut positional = Vec::new();
    let mut keywords = None;
    for arg in args.0 {
        let arg = arg.into_value();
        if arg.is_kwargs() {
            keywords = Some(Kwargs::try_from(arg)?);
        } else {
            positional.push(arg);
        }
    }
    if positional.len() > 1 {
        return Err(type_error(format!(
            "dict expected at most 1 argument, got {}",
            positional.len()
        )));
    }
    // Pairs in order: a key met again keeps its place and takes the later value.
    let mut out: Vec<(Value, Value)> = Vec::new();
    if let Some(source) = positional.pop() {
        if hint_of(&source).is_some() || source.is_undefined() {
            refuse_hinted(&source)?;
            return Err(Error::from(ErrorKind::UndefinedError));
        }
        if source.kind() == ValueKind::Map && !is_macro(&source) && !is_generator(&source) {
            for key in source.try_iter()? {
                let item = source.get_item(&key).unwrap_or_default();
                out.push((key, item));
            }
        } else {
            let items = python_items(&source)?.map_err(type_error)?;
            for (n, element) in items.into_iter().enumerate() {
                let pair = match python_items(&element)? {
                    Ok(pair) => pair,
                    Err(_) => {
                        return Err(type_error(format!(
                            "cannot convert dictionary update sequence element #{n} to a sequence"
                        )))
                    }
                };
                if pair.len() != 2 {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        format!(
                            "dictionary update sequence element #{n} has length {}; 2 is required",
                            pair.len()
                        ),
                    ));
                }
                hash_key(&pair[0])?;
                out.push((pair[0].clone(), pair[1].clone()));
            }
        }
    }
    if let Some(keywords) = keywords {
        for name in keywords.args().map(str::to_string).collect::<Vec<_>>() {
            let value: Value = keywords.get(&name)?;
            out.push((Value::from(name), value));
        }
    }
    Ok(Value::from_pairs(out))
}
