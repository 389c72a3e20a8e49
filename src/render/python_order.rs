//! jinja2's `min`, `max`, `sort` and `dictsort` filters and its ordering tests (`lt`, `le`, `gt`, `ge` and
//! their aliases) over Python's ordering of values (`python_semantics::order`): Python's order
//! where it can order, and its `TypeError` at the comparison CPython makes first where it cannot
//! (`min` and `max` walk the items; `sort` replays CPython's `list.sort` on up to 63 items).
//! jinja2's `groupby` too, which sorts the items by their key before grouping them.

use std::sync::Arc;

use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_filters::pick;
use super::python_semantics::{order, python_type_name, type_error};
use super::python_undefined::{item_filter, refuse_hinted};

/// Sequences compared as Python compares lists: the first items that differ decide, else the
/// lengths.
fn sequence_less(a: &[Value], b: &[Value]) -> Result<bool, Error> {
    match a.iter().zip(b).find(|(x, y)| x != y) {
        Some((x, y)) => order(x, "<", y),
        None => Ok(a.len() < b.len()),
    }
}

/// The items a filter walks: Python's `TypeError` for what it cannot iterate, nothing for an
/// undefined value (jinja2's `Undefined` iterates as empty).
fn walk(value: &Value) -> Result<Vec<Value>, Error> {
    match value.kind() {
        ValueKind::Undefined => Ok(Vec::new()),
        ValueKind::None | ValueKind::Number | ValueKind::Bool | ValueKind::Plain => {
            Err(super::python_filters::not_iterable(value))
        }
        _ => Ok(value.try_iter()?.collect()),
    }
}

/// jinja2's key: the item, or the attribute path given (`a.b`, `0`), strings lower-cased unless
/// the comparison is case sensitive.
fn key_of(item: &Value, path: Option<&str>, case_sensitive: bool) -> Result<Value, Error> {
    let key = match path {
        Some(path) => attribute_of(item, path)?,
        None => item.clone(),
    };
    Ok(folded(key, case_sensitive))
}

/// A string key lower-cased unless the comparison is case sensitive; any other key as it is.
fn folded(key: Value, case_sensitive: bool) -> Value {
    match key.as_str() {
        Some(s) if !case_sensitive && key.kind() == ValueKind::String => {
            Value::from(s.to_lowercase())
        }
        _ => key,
    }
}

/// jinja2's `make_attrgetter`: `item.a.b.0` looked up part by part with `environment.getitem`,
/// a part of digits as an index; what it does not find is an undefined value naming it, which
/// a comparison or a hash refuses.
pub(super) fn attribute_of(item: &Value, path: &str) -> Result<Value, Error> {
    let mut value = item.clone();
    for part in path.split('.') {
        let part = match part.bytes().all(|b| b.is_ascii_digit()) {
            true => part.parse::<i64>().map_or(Value::from(part), Value::from),
            false => Value::from(part),
        };
        value = item_filter(value, part)?;
    }
    Ok(value)
}

struct Options {
    case_sensitive: bool,
    attribute: Option<String>,
    reverse: bool,
}

fn options(kwargs: &Kwargs, positional: &[Option<Value>]) -> Result<Options, Error> {
    let flag = |v: Option<Value>| v.is_some_and(|v| v.is_true());
    let get = |name: &str, at: usize| -> Result<Option<Value>, Error> {
        match positional.get(at).cloned().flatten() {
            Some(v) => Ok(Some(v)),
            None => kwargs.get::<Option<Value>>(name),
        }
    };
    let attribute = get("attribute", 2)?;
    let options = Options {
        reverse: flag(get("reverse", 0)?),
        case_sensitive: flag(get("case_sensitive", 1)?),
        attribute: match attribute {
            None => None,
            Some(a) if a.is_none() => None,
            Some(a) => Some(a.to_string()),
        },
    };
    kwargs.assert_all_used()?;
    Ok(options)
}

fn min_or_max(value: Value, op: &str, kwargs: Kwargs) -> Result<Value, Error> {
    let items = walk(&value)?;
    let case_sensitive: Option<bool> = kwargs.get("case_sensitive")?;
    let attribute: Option<String> = kwargs.get("attribute")?;
    kwargs.assert_all_used()?;
    let key = |v: &Value| key_of(v, attribute.as_deref(), case_sensitive.unwrap_or(false));
    let mut items = items.into_iter();
    let Some(mut best) = items.next() else {
        return Ok(Value::UNDEFINED);
    };
    let mut best_key = key(&best)?;
    for item in items {
        let k = key(&item)?;
        if order(&k, op, &best_key)? {
            best = item;
            best_key = k;
        }
    }
    Ok(best)
}

/// jinja2's `min(value, case_sensitive=False, attribute=None)`.
pub fn min_filter(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    min_or_max(value, "<", kwargs)
}

/// jinja2's `max(value, case_sensitive=False, attribute=None)`.
pub fn max_filter(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    min_or_max(value, ">", kwargs)
}

/// jinja2's `sort(value, reverse=False, case_sensitive=False, attribute=None)`: Python's
/// stable `sorted`, whose keys are one-item lists (or one item per comma-separated attribute).
pub fn sort_filter(
    value: Value,
    reverse: Option<Value>,
    case_sensitive: Option<Value>,
    attribute: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let o = options(&kwargs, &[reverse, case_sensitive, attribute])?;
    let items = walk(&value)?;
    let paths: Vec<Option<&str>> = match &o.attribute {
        None => vec![None],
        Some(a) => a.split(',').map(Some).collect(),
    };
    let mut keyed: Vec<(Vec<Value>, Value)> = Vec::with_capacity(items.len());
    for item in items {
        let key = paths
            .iter()
            .map(|p| key_of(&item, *p, o.case_sensitive))
            .collect::<Result<_, _>>()?;
        keyed.push((key, item));
    }
    let less = |a: &(Vec<Value>, Value), b: &(Vec<Value>, Value)| sequence_less(&a.0, &b.0);
    // `list.sort(reverse=True)` reverses, sorts stably, and reverses back.
    if o.reverse {
        keyed.reverse();
    }
    python_list_sort(&mut keyed, &less)?;
    if o.reverse {
        keyed.reverse();
    }
    Ok(Value::from(
        keyed.into_iter().map(|(_, item)| item).collect::<Vec<_>>(),
    ))
}

/// jinja2's `dictsort(value, case_sensitive=False, by='key', reverse=False)`: Python's stable
/// `sorted` of `value.items()` by the key or the value (a string lower-cased unless the sort
/// is case sensitive), Python's `TypeError` where two of them do not compare, jinja2's
/// `UndefinedError` where one is undefined.
pub fn dictsort_filter(
    value: Value,
    case_sensitive: Option<Value>,
    by: Option<Value>,
    reverse: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let pick = |positional, name| pick(positional, &kwargs, name);
    let case_sensitive = pick(case_sensitive, "case_sensitive")?.is_some_and(|v| v.is_true());
    let reverse = pick(reverse, "reverse")?.is_some_and(|v| v.is_true());
    let position = match pick(by, "by")? {
        None => 0,
        Some(by) if by.as_str() == Some("key") => 0,
        Some(by) if by.as_str() == Some("value") => 1,
        Some(_) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "You can only sort by either \"key\" or \"value\"",
            ))
        }
    };
    kwargs.assert_all_used()?;
    refuse_hinted(&value)?;
    match value.kind() {
        ValueKind::Map => {}
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        _ => {
            return Err(type_error(format!(
                "'{}' object has no attribute 'items'",
                python_type_name(&value)
            )))
        }
    }
    let mut keyed = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key).unwrap_or_default();
        let sort_key = if position == 0 { &key } else { &item };
        let sort_key = match sort_key.as_str() {
            Some(s) if !case_sensitive && sort_key.kind() == ValueKind::String => {
                Value::from(s.to_lowercase())
            }
            _ => sort_key.clone(),
        };
        keyed.push((sort_key, Value::from((key, item))));
    }
    let less = |a: &(Value, Value), b: &(Value, Value)| order(&a.0, "<", &b.0);
    // `sorted(..., reverse=True)` reverses, sorts stably, and reverses back.
    if reverse {
        keyed.reverse();
    }
    python_list_sort(&mut keyed, &less)?;
    if reverse {
        keyed.reverse();
    }
    Ok(Value::from(
        keyed.into_iter().map(|(_, pair)| pair).collect::<Vec<_>>(),
    ))
}

/// CPython's `list.sort` comparisons for a list of up to 63 items (one run, then a binary
/// insertion sort); a plain stable merge sort for longer lists, whose result is the same and
/// whose first refused comparison may differ.
fn python_list_sort<T: Clone>(
    items: &mut Vec<T>,
    less: &dyn Fn(&T, &T) -> Result<bool, Error>,
) -> Result<(), Error> {
    let n = items.len();
    if n < 2 {
        return Ok(());
    }
    if n >= 64 {
        return merge_sort(items, less);
    }
    // count_run: the longest run at the start, strictly descending or non-descending.
    let mut run = 2;
    if less(&items[1], &items[0])? {
        while run < n && less(&items[run], &items[run - 1])? {
            run += 1;
        }
        items[..run].reverse();
    } else {
        while run < n && !less(&items[run], &items[run - 1])? {
            run += 1;
        }
    }
    // binarysort: each later item inserted after the equal ones before it.
    for start in run..n {
        let pivot = items[start].clone();
        let (mut lo, mut hi) = (0, start);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if less(&pivot, &items[mid])? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        items[lo..=start].rotate_right(1);
    }
    Ok(())
}

fn merge_sort<T: Clone>(
    items: &mut Vec<T>,
    less: &dyn Fn(&T, &T) -> Result<bool, Error>,
) -> Result<(), Error> {
    if items.len() < 2 {
        return Ok(());
    }
    let mut right = items.split_off(items.len() / 2);
    merge_sort(items, less)?;
    merge_sort(&mut right, less)?;
    let left = std::mem::take(items);
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        if less(&right[j], &left[i])? {
            items.push(right[j].clone());
            j += 1;
        } else {
            items.push(left[i].clone());
            i += 1;
        }
    }
    items.extend_from_slice(&left[i..]);
    items.extend_from_slice(&right[j..]);
    Ok(())
}

/// Whether `value` is a group of `groupby`.
pub fn is_group(value: &Value) -> bool {
    value.downcast_object_ref::<Group>().is_some()
}

/// One group of `groupby`: jinja2's named tuple `(grouper, list)`, read by position or by name.
#[derive(Debug)]
pub struct Group {
    grouper: Value,
    list: Value,
}

impl Object for Group {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match (key.as_i64(), key.as_str()) {
            (Some(0 | -2), _) | (None, Some("grouper")) => Some(self.grouper.clone()),
            (Some(1 | -1), _) | (None, Some("list")) => Some(self.list.clone()),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(2)
    }
}

/// jinja2's `groupby(attribute, default=None, case_sensitive=False)`: the items sorted by the
/// attribute (CPython's sort, strings without case unless `case_sensitive`; an item without
/// it takes `default`, or its undefined key raises once compared), then each run of equal keys
/// as a group, named by the first item's own attribute. The items are read once, so a
/// generator groups as a list does.
pub fn groupby_filter(
    value: Value,
    attribute: Option<Value>,
    default: Option<Value>,
    case_sensitive: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let attribute = pick(attribute, &kwargs, "attribute")?;
    let default = pick(default, &kwargs, "default")?;
    let case_sensitive =
        pick(case_sensitive, &kwargs, "case_sensitive")?.is_some_and(|v| v.is_true());
    kwargs.assert_all_used()?;
    let path = match &attribute {
        Some(a) if a.is_integer() => a.to_string(),
        Some(a) if a.kind() == ValueKind::String => a.as_str().unwrap_or_default().to_string(),
        Some(_) => return Err(type_error("attribute name must be a string".into())),
        None => {
            return Err(type_error(
                "sync_do_groupby() missing 1 required positional argument: 'attribute'".into(),
            ))
        }
    };
    let items = super::python_iterables::python_items(&value)?.map_err(type_error)?;
    // What an item lacks is undefined: `default` where given; in a group's name, an undefined
    // value that prints as Python's `Undefined`.
    let lookup = |item: &Value| -> Result<Value, Error> {
        let found = attribute_of(item, &path)?;
        let missing = found.is_undefined() || super::python_undefined::hint_of(&found).is_some();
        Ok(match &default {
            Some(d) if missing => d.clone(),
            _ => found,
        })
    };
    let plain = |v: Value| {
        if super::python_undefined::hint_of(&v).is_some() {
            Value::UNDEFINED
        } else {
            v
        }
    };
    let mut keyed: Vec<(Value, Value)> = Vec::with_capacity(items.len());
    for item in items {
        keyed.push((folded(lookup(&item)?, case_sensitive), item));
    }
    let less = |a: &(Value, Value), b: &(Value, Value)| order(&a.0, "<", &b.0);
    python_list_sort(&mut keyed, &less)?;
    let mut groups: Vec<Value> = Vec::new();
    let mut at = 0;
    while at < keyed.len() {
        let mut end = at + 1;
        while end < keyed.len() && keyed[end].0 == keyed[at].0 {
            end += 1;
        }
        let members: Vec<Value> = keyed[at..end]
            .iter()
            .map(|(_, item)| item.clone())
            .collect();
        let grouper = plain(if case_sensitive {
            keyed[at].0.clone()
        } else {
            lookup(&members[0])?
        });
        groups.push(Value::from_object(Group {
            grouper,
            list: Value::from(members),
        }));
        at = end;
    }
    Ok(Value::from(groups))
}

/// jinja2's ordering tests (`x is lt y`, `x is le y`, ...): Python's operator.
pub fn lt_test(value: &Value, other: &Value) -> Result<bool, Error> {
    order(value, "<", other)
}

pub fn le_test(value: &Value, other: &Value) -> Result<bool, Error> {
    order(value, "<=", other)
}

pub fn gt_test(value: &Value, other: &Value) -> Result<bool, Error> {
    order(value, ">", other)
}

pub fn ge_test(value: &Value, other: &Value) -> Result<bool, Error> {
    order(value, ">=", other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::Environment;

    fn render(source: &str) -> Result<String, String> {
        let mut env = Environment::new();
        env.add_filter("min", min_filter);
        env.add_filter("max", max_filter);
        env.add_filter("sort", sort_filter);
        env.add_test("le", le_test);
        env.render_str(source, ())
            .map_err(|e| e.detail().unwrap_or_default().to_string())
    }

    #[test]
    fn orders_as_python_and_refuses_what_python_refuses() {
        assert_eq!(
            render(
                "{{ [3, 1.5, true, 2]|min }} {{ ['b', 'A', 'c']|max }} {{ [[1, 'a'], [1]]|min }}"
            ),
            Ok("True c [1]".to_string())
        );
        assert_eq!(
            render("{{ [3, 1.5, 2, 1]|sort }} {{ ['b', 'A', 'c']|sort(reverse=true) }}"),
            Ok("[1, 1.5, 2, 3] ['c', 'b', 'A']".to_string())
        );
        assert_eq!(
            render("{{ [1, 'a']|min }}"),
            Err("'<' not supported between instances of 'str' and 'int'".to_string())
        );
        assert_eq!(
            render("{{ [1, 'a']|max }}"),
            Err("'>' not supported between instances of 'str' and 'int'".to_string())
        );
        // CPython's first comparison in list.sort is items[1] < items[0].
        assert_eq!(
            render("{{ [{'a': 1}, {'b': 2}]|sort }}"),
            Err("'<' not supported between instances of 'dict' and 'dict'".to_string())
        );
        // Equal keys are never ordered: two equal dicts sort.
        assert_eq!(
            render("{{ [{'a': 1}, {'a': 1}]|sort|length }}"),
            Ok("2".to_string())
        );
        assert_eq!(
            render("{{ none|sort }}"),
            Err("'NoneType' object is not iterable".to_string())
        );
        assert_eq!(render("{{ []|min is undefined }}"), Ok("True".to_string()));
        assert_eq!(render("{{ 1 is le 2 }}"), Ok("True".to_string()));
        assert_eq!(
            render("{{ 'a' is le 2 }}"),
            Err("'<=' not supported between instances of 'str' and 'int'".to_string())
        );
    }
}
