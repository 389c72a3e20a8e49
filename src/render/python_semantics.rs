//! Where jinja2 in Python and minijinja disagree on what a template observes, the interpreter
//! follows Python:
//!
//! - iterating `None` raises `TypeError` (minijinja iterates it as empty): every `for` loop's
//!   iterable passes through [`ITERABLE_FILTER`]; a slice is Python's (`python_slice`);
//! - `dict.items` (and the other dict methods) named as an attribute is the method, not the
//!   dict's key of that name (jinja2's `getattr` tries the attribute first): attribute lookups
//!   with those names go through [`GETATTR_FILTER`]; `dict['items']` is the key, or the method
//!   where the dict has no such key ([`GETITEM_FILTER`]);
//! - a list or a dict as the key of a dict literal (or of `dict.get`) raises `unhashable type`
//!   ([`HASHABLE_FILTER`]);
//! - `~` joins Python's `str()` of its operands (`1e-07`, `True`, `('a', 1)`), where
//!   minijinja's would join its own spellings: every operand passes through [`STR_FILTER`];
//! - what a `{% set x %}` block's or a `{% filter %}` block's body sets stays inside it: the
//!   body is wrapped in `{% with %}`;
//! - arithmetic refuses what Python refuses, with Python's words (see `python_ops`);
//! - an argument passed to a macro keeps an undefined value instead of taking the parameter's
//!   default (see `python_macros`);
//! - `map`, `select`, `reject`, `selectattr`, `rejectattr` and `items` give one-shot generators
//!   (see `python_generators`): always true, no length, nothing to index, `tojson` refuses them,
//!   a second loop sees nothing.
//!
//! All but the last are source rewrites (`python_rewrite`) made from minijinja's own syntax
//! tree, so they touch exactly the loops, lookups, joins, calls and set blocks the template has.

use std::sync::Arc;

use minijinja::value::{Object, ObjectRepr, Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// The filter every loop's iterable passes through.
pub const ITERABLE_FILTER: &str = "__sft_py_iterable";
/// The filter a filter block's filter ends with: `{% filter f|__sft_py_block_text(place) %}`.
pub const BLOCK_TEXT_FILTER: &str = "__sft_py_block_text";
/// The function `loop.cycle(...)` becomes: `__sft_py_cycle(loop, items...)`.
pub const CYCLE_FUNCTION: &str = "__sft_py_cycle";
/// The filter that looks up a dict method's name as Python does.
pub const GETATTR_FILTER: &str = "__sft_py_getattr";
/// The filter that orders (`<`, `<=`, `>`, `>=`) and tests membership (`in`, `not in`) as
/// Python does.
pub const COMPARE_FILTER: &str = "__sft_py_compare";
/// The filter that looks up a dict method's name in brackets as Python does.
pub const GETITEM_FILTER: &str = "__sft_py_getitem";
/// The filter every operand of `~` passes through: Python's `str()` (the `string` filter).
pub const STR_FILTER: &str = "__sft_py_str";
/// The filter a chained comparison (`a < b == c`) becomes.
pub const CHAIN_FILTER: &str = "__sft_py_chain";
/// The filter a dict literal with a computed key passes through: Python refuses a list or a
/// dict as a key, once every key and value is evaluated.
pub const HASHABLE_FILTER: &str = "__sft_py_hashable";

/// The methods of a Python `dict`, which jinja2 finds before the dict's keys.
pub const DICT_METHODS: [&str; 11] = [
    "items",
    "keys",
    "values",
    "get",
    "pop",
    "popitem",
    "copy",
    "clear",
    "update",
    "setdefault",
    "fromkeys",
];

/// [`ITERABLE_FILTER`]: the value unchanged, or Python's `TypeError` for `None` (which
/// minijinja iterates as empty) and for the values neither iterates (numbers, bools, bound
/// methods).
pub fn iterable_filter(value: Value) -> Result<Value, Error> {
    if let Some(refused) = super::python_generators::generator_refusal(&value) {
        return Err(refused);
    }
    match value.kind() {
        ValueKind::None | ValueKind::Number | ValueKind::Bool | ValueKind::Plain => {
            Err(super::python_filters::not_iterable(&value))
        }
        ValueKind::Map if is_macro(&value) => Err(super::python_filters::not_iterable(&value)),
        // Its characters as a list: Python's loop over a string knows its length
        // (`loop.last`, `loop.length`, `loop.revindex`), minijinja's does not.
        ValueKind::String => Ok(Value::from(characters(&value))),
        _ => Ok(value),
    }
}

/// A string's characters, each a string, as Python iterates it.
pub(crate) fn characters(value: &Value) -> Vec<Value> {
    value
        .as_str()
        .unwrap_or_default()
        .chars()
        .map(|c| Value::from(c.to_string()))
        .collect()
}

/// [`BLOCK_TEXT_FILTER`]: the text a filter block writes. jinja2 writes what the filter gives
/// as an item of the output, which Python joins: a value that is not a string (`{% filter
/// length %}`) raises there, naming the item's `place` where the rewrite knows it (`none`
/// where not).
pub fn block_text_filter(value: Value, place: Option<usize>) -> Result<Value, Error> {
    if value.kind() == ValueKind::String {
        return Ok(value);
    }
    let place = place.map_or(String::new(), |n| format!("sequence item {n}: "));
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "{place}expected str instance, {} found",
            python_type_name(&value)
        ),
    ))
}

/// [`CYCLE_FUNCTION`]: jinja2's `loop.cycle(...)`, the item at the loop's index modulo their
/// count; with none, Python's `TypeError` (minijinja divides by zero).
pub fn cycle_function(lp: Value, items: Rest<Value>) -> Result<Value, Error> {
    if lp.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    if items.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "no items for cycling given",
        ));
    }
    let index = lp.get_attr("index0")?.as_usize().unwrap_or(0);
    Ok(items[index % items.len()].clone())
}

/// The fields of a jinja2 macro that minijinja's lacks or spells otherwise.
pub const MACRO_FIELDS: [&str; 3] = ["arguments", "catch_kwargs", "catch_varargs"];

/// A field of [`MACRO_FIELDS`] of `macro`: its parameters as a tuple (without the `varargs` and
/// `kwargs` that `python_macros` gives a macro catching arguments), or whether it catches them.
fn macro_field(macro_value: &Value, name: &str) -> Value {
    let declared: Vec<Value> = macro_value
        .get_attr("arguments")
        .ok()
        .and_then(|a| a.try_iter().ok())
        .map(|names| names.collect())
        .unwrap_or_default();
    let catches = |n: &str| declared.iter().any(|d| d.as_str() == Some(n));
    match name {
        "catch_kwargs" => Value::from(catches("kwargs")),
        "catch_varargs" => Value::from(catches("varargs")),
        _ => Value::from_object(minijinja::value::Tuple::from(
            declared
                .into_iter()
                .filter(|d| !matches!(d.as_str(), Some("varargs" | "kwargs")))
                .collect::<Vec<_>>(),
        )),
    }
}

/// [`GETATTR_FILTER`]: `value.name` as jinja2 looks it up: on a dict, a dict method's name is
/// the method; on anything else, minijinja's own lookup.
pub fn getattr_filter(value: Value, name: &str) -> Result<Value, Error> {
    if MACRO_FIELDS.contains(&name) && is_macro(&value) {
        return Ok(macro_field(&value, name));
    }
    if is_dict(&value) && DICT_METHODS.contains(&name) {
        return Ok(Value::from_object(DictMethod {
            name: name.to_string(),
            owner: value,
        }));
    }
    value.get_attr(name)
}

/// jinja2's `attr` filter: Python's `getattr` alone, never an item. Of a dict that is one of its
/// methods, or an undefined value for any other name (`{'a': 1}|attr('a')` is undefined); of a
/// namespace or of the `loop` variable, its field; of anything else, minijinja's lookup.
pub fn attr_filter(value: Value, name: &str) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    if is_dict(&value) {
        return Ok(if DICT_METHODS.contains(&name) {
            getattr_filter(value, name)?
        } else {
            Value::UNDEFINED
        });
    }
    value.get_item(&Value::from(name))
}

/// Whether `attr_filter` finds nothing for `name` on `value` because `value` is a dict and
/// `name` is none of its methods (for the diagnostic render's words).
pub fn is_dict_without_attr(value: &Value, name: &str) -> bool {
    is_dict(value) && !DICT_METHODS.contains(&name)
}

/// [`GETITEM_FILTER`]: `value['name']` as jinja2 looks it up: the item, or where a dict has no
/// such key, the dict method of that name (jinja2 tries the attribute when the item fails).
pub fn getitem_filter(value: Value, name: &str) -> Result<Value, Error> {
    let item = value.get_item(&Value::from(name))?;
    if item.is_undefined() && is_dict(&value) {
        return Ok(Value::from_object(DictMethod {
            name: name.to_string(),
            owner: value,
        }));
    }
    Ok(item)
}

/// Whether `value` is a plain map (a Python dict), not an object that looks like one.
pub(crate) fn is_dict(value: &Value) -> bool {
    value.kind() == ValueKind::Map
        && value
            .as_object()
            .is_none_or(|o| o.repr() == ObjectRepr::Map)
        && !is_object_with_fields(value)
}

/// Whether a map-like `value` is an object whose names are fields rather than keys: a namespace,
/// or the `loop` variable (minijinja lists their names itself).
fn is_object_with_fields(value: &Value) -> bool {
    value.as_object().is_some_and(|o| {
        matches!(
            o.enumerate(),
            minijinja::value::Enumerator::Values(_) | minijinja::value::Enumerator::Str(_)
        )
    })
}

/// Whether `value` is what `namespace()` gives: a map to minijinja, but to jinja2 an object
/// whose attributes are its fields (`ns.items` is the field, not a dict method). Ours (see
/// `python_namespace`), or minijinja's where the template keeps minijinja's rules (its type is
/// private; of the maps a template holds, it is the one that lists its keys as values, as ours
/// does; minijinja's other such map, of a serialized struct, never reaches a template's values).
pub fn is_namespace(value: &Value) -> bool {
    value.kind() == ValueKind::Map
        && (value
            .downcast_object_ref::<super::python_namespace::Namespace>()
            .is_some()
            || value
                .as_object()
                .is_some_and(|o| matches!(o.enumerate(), minijinja::value::Enumerator::Values(_))))
}

/// The address printed for a Python object (a generator, a bound method): CPython prints the
/// object's, which changes from run to run; renders here stay the same from run to run, so
/// every object prints one address of CPython's form on 64-bit Linux.
pub const OBJECT_ADDRESS: &str = "0x7f0000000000";

/// A dict's bound method, as a template sees it when it names one without calling it: true,
/// no attributes, not iterable, printed as Python prints it (at [`OBJECT_ADDRESS`]).
#[derive(Debug)]
struct DictMethod {
    name: String,
    /// The dict it is bound to: two bound methods are equal where they are the same method of
    /// the same dict (compared here by value, as the dict's identity is not at hand).
    owner: Value,
}

impl Object for DictMethod {
    fn custom_cmp(
        self: &Arc<Self>,
        other: &minijinja::value::DynObject,
    ) -> Option<std::cmp::Ordering> {
        let other = other.downcast_ref::<Self>()?;
        if self.name == other.name && self.owner == other.owner {
            return Some(std::cmp::Ordering::Equal);
        }
        // Unequal: an order for the engine's sake (Python refuses to order bound methods).
        Some(self.name.cmp(&other.name).then(std::cmp::Ordering::Less))
    }

    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, _key: &Value) -> Option<Value> {
        None
    }

    fn is_true(self: &Arc<Self>) -> bool {
        true
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "<built-in method {} of dict object at {OBJECT_ADDRESS}>",
            self.name
        )
    }
}

/// What `dict.items()`, `dict.keys()` and `dict.values()` give in Python: a view of the dict,
/// iterable as often as asked, with a length, not subscriptable (jinja2 then gives an undefined
/// value), printed `dict_items([('a', 1)])`, refused by `tojson`.
#[derive(Debug)]
pub struct DictView {
    /// `dict_items`, `dict_keys` or `dict_values`.
    pub type_name: &'static str,
    items: Vec<Value>,
}

impl DictView {
    /// `dict.<method>()` of `map`, where `method` is `items`, `keys` or `values`.
    pub fn of(map: &Value, method: &str) -> Result<Option<Value>, Error> {
        let type_name = match method {
            "items" => "dict_items",
            "keys" => "dict_keys",
            "values" => "dict_values",
            _ => return Ok(None),
        };
        let mut items = Vec::new();
        for key in map.try_iter()? {
            let item = map.get_item(&key).unwrap_or_default();
            items.push(match method {
                "items" => Value::from((key, item)),
                "keys" => key,
                _ => item,
            });
        }
        Ok(Some(Value::from_object(DictView { type_name, items })))
    }

    /// The view as Python's `repr` writes it, given the `repr` of its items as a list.
    pub fn spelled(&self, list: &str) -> String {
        format!("{}({list})", self.type_name)
    }
}

impl Object for DictView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Iterable
    }

    fn get_value(self: &Arc<Self>, _key: &Value) -> Option<Value> {
        Some(Value::UNDEFINED)
    }

    fn enumerate(self: &Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Iter(Box::new(self.items.clone().into_iter()))
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.items.len())
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = super::python_value::py_repr(&Value::from(self.items.clone()));
        f.write_str(&self.spelled(&list))
    }
}

/// The view `value` is, if it is one.
pub fn as_dict_view(value: &Value) -> Option<&DictView> {
    value.downcast_object_ref::<DictView>()
}

/// [`CHAIN_FILTER`]: `first op1 v1 op2 v2 ...` as Python compares a chain, pair by pair,
/// false at the first false pair (later pairs are not compared), with Python's `TypeError`s.
pub fn chain_filter(first: Value, rest: Rest<Value>) -> Result<Value, Error> {
    let mut left = first;
    for pair in rest.chunks(2) {
        let [op, right] = pair else {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "an incomplete chain",
            ));
        };
        let holds = match op.as_str().unwrap_or_default() {
            "==" => left == *right,
            "!=" => left != *right,
            "in" => contains(&left, right)?,
            "not in" => !contains(&left, right)?,
            order_op => order(&left, order_op, right)?,
        };
        if !holds {
            return Ok(Value::from(false));
        }
        left = right.clone();
    }
    Ok(Value::from(true))
}

/// [`HASHABLE_FILTER`]: the dict unchanged, or Python's `TypeError` for its first key that is a
/// list or a dict.
pub fn hashable_filter(dict: Value) -> Result<Value, Error> {
    for key in dict.try_iter()? {
        hashable(&key)?;
    }
    Ok(dict)
}

/// Python's refusal to hash a list or a dict.
pub fn hashable(key: &Value) -> Result<(), Error> {
    match python_type_name(key) {
        kind @ ("list" | "dict") => Err(type_error(format!("unhashable type: '{kind}'"))),
        _ => Ok(()),
    }
}

/// The type of jinja2's `groupby` groups: a named tuple, a tuple to every operation.
pub const GROUP_TUPLE: &str = "_GroupTuple";

/// The name of `value`'s type in Python.
pub fn python_type(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::Undefined => "Undefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if value.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

/// [`COMPARE_FILTER`]: `left op right` as Python answers it, or Python's `TypeError` where it
/// refuses: ordering across types (numbers and bools are one type), of maps or of `None`;
/// `in` a string of anything but a string, `in` a map of a list or a map, `in` a value that is
/// not a container. An undefined operand of an ordering raises.
pub fn compare_filter(left: Value, op: &str, right: Value) -> Result<Value, Error> {
    let answer = match op {
        "in" => contains(&left, &right)?,
        "not in" => !contains(&left, &right)?,
        _ => order(&left, op, &right)?,
    };
    Ok(Value::from(answer))
}

/// An integer as Python reads one where it wants an index: an `int`, or a `bool` as 0 or 1.
/// `None` for anything else, and for an integer wider than `i128`.
pub(crate) fn python_int(value: &Value) -> Option<i128> {
    match value.kind() {
        ValueKind::Bool => Some(i128::from(value.is_true())),
        ValueKind::Number if value.is_integer() => i128::try_from(value.clone()).ok(),
        _ => None,
    }
}

pub(crate) fn type_error(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

fn contains(needle: &Value, haystack: &Value) -> Result<bool, Error> {
    match haystack.kind() {
        ValueKind::Undefined => Ok(false),
        ValueKind::String => {
            let text = haystack.as_str().unwrap_or_default();
            match needle.as_str() {
                Some(n) => Ok(text.contains(n)),
                None => Err(type_error(format!(
                    "'in <string>' requires string as left operand, not {}",
                    python_type_name(needle)
                ))),
            }
        }
        // A lazy sequence is a range or a generator in jinja2, both hashable.
        ValueKind::Map if is_dict(haystack) => match python_type_name(needle) {
            unhashable @ ("list" | "dict") if needle.kind() != ValueKind::Iterable => {
                Err(type_error(format!("unhashable type: '{unhashable}'")))
            }
            _ => Ok(haystack.try_iter()?.any(|key| key == *needle)),
        },
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map => {
            Ok(haystack.try_iter()?.any(|item| item == *needle))
        }
        _ => Err(type_error(format!(
            "argument of type '{}' is not iterable",
            python_type_name(haystack)
        ))),
    }
}

/// Python's `left <op> right` for `<`, `<=`, `>` and `>=`, or the `TypeError` it raises.
pub fn order(left: &Value, op: &str, right: &Value) -> Result<bool, Error> {
    use std::cmp::Ordering;
    for side in [left, right] {
        super::python_undefined::refuse_hinted(side)?;
        if side.is_undefined() {
            return Err(Error::from(ErrorKind::UndefinedError));
        }
    }
    let number = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    let ordering: Option<Ordering> = match (left.kind(), right.kind()) {
        _ if super::python_bigint::is_big(left) || super::python_bigint::is_big(right) => {
            super::python_bigint::ordering(left, right)
        }
        _ if number(left) && number(right) => {
            let as_int = python_int;
            match (as_int(left), as_int(right)) {
                (Some(a), Some(b)) => Some(a.cmp(&b)),
                _ => {
                    let as_float = |v: &Value| match as_int(v) {
                        Some(i) => i as f64,
                        None => f64::try_from(v.clone()).unwrap_or(f64::NAN),
                    };
                    as_float(left).partial_cmp(&as_float(right))
                }
            }
        }
        (ValueKind::String, ValueKind::String) => left.as_str().partial_cmp(&right.as_str()),
        _ if sequence_kind(left).is_some() && sequence_kind(left) == sequence_kind(right) => {
            let (a, b): (Vec<Value>, Vec<Value>) =
                (left.try_iter()?.collect(), right.try_iter()?.collect());
            // Python compares the first items that differ, else the lengths.
            match a.iter().zip(&b).find(|(x, y)| x != y) {
                Some((x, y)) => return order(x, op, y),
                None => Some(a.len().cmp(&b.len())),
            }
        }
        // A Markup string is named by its own type, a subclass of `str`.
        _ => {
            return Err(type_error(format!(
                "'{op}' not supported between instances of '{}' and '{}'",
                super::python_markup::type_name(left),
                super::python_markup::type_name(right)
            )))
        }
    };
    Ok(match (ordering, op) {
        (None, _) => false,
        (Some(o), "<") => o == Ordering::Less,
        (Some(o), "<=") => o != Ordering::Greater,
        (Some(o), ">") => o == Ordering::Greater,
        (Some(o), _) => o != Ordering::Less,
    })
}

/// `list` or `tuple` for the values Python orders item by item (a list made by `+` or `*`
/// included, a group of `groupby` a tuple), `None` for any other.
fn sequence_kind(value: &Value) -> Option<&'static str> {
    if !matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) {
        return None;
    }
    match python_type_name(value) {
        "list" => Some("list"),
        "tuple" | GROUP_TUPLE => Some("tuple"),
        _ => None,
    }
}

/// A macro of the template (minijinja's macro object: a map of `name`, `arguments` and `caller`
/// that prints as `<macro name>`), which Python prints as `<Macro 'name'>`.
pub fn is_macro(value: &Value) -> bool {
    value.len() == Some(3)
        && value
            .get_attr("caller")
            .is_ok_and(|c| c.kind() == ValueKind::Bool)
        && value
            .get_attr("arguments")
            .is_ok_and(|a| a.kind() == ValueKind::Seq)
        && value.to_string().starts_with("<macro ")
}

/// The `loop` variable of a loop (minijinja's loop object: a map of its eleven fields that
/// prints as `<loop 1/3>`). A map of another length is told apart by its length alone.
pub fn is_loop(value: &Value) -> bool {
    value.len() == Some(11)
        && value
            .get_attr("depth0")
            .is_ok_and(|d| d.kind() == ValueKind::Number)
        && value.to_string().starts_with("<loop ")
}

/// [`python_type`], with the names of the objects a template can hold that are not data.
pub fn python_type_name(value: &Value) -> &'static str {
    if value.is_tuple() {
        return "tuple";
    }
    if let Some(name) = super::python_generators::generator_type(value) {
        return name;
    }
    if value.downcast_object_ref::<DictMethod>().is_some() {
        return "builtin_function_or_method";
    }
    if super::python_range::as_range(value).is_some() {
        return "range";
    }
    if super::python_undefined::hint_of(value).is_some() {
        return "Undefined";
    }
    if let Some(view) = as_dict_view(value) {
        return view.type_name;
    }
    if super::python_complex::is_complex(value) {
        return "complex";
    }
    if super::python_bigint::is_big(value) {
        return "int";
    }
    if value.kind() == ValueKind::Map && is_macro(value) {
        return "Macro";
    }
    if is_namespace(value) {
        return "TemplateNamespace";
    }
    if super::python_order::is_group(value) {
        return GROUP_TUPLE;
    }
    // minijinja's lazy sequences (a slice, a reversed list) stand for jinja2's lists.
    if value.kind() == ValueKind::Iterable {
        return "list";
    }
    python_type(value)
}
