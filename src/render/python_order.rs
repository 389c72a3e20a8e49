//! Python's ordering of template values, for jinja2's `min`, `max` and `sort` filters: what
//! Python can order (numbers with numbers, strings with strings, lists with lists and tuples
//! with tuples, item by item) in Python's order, and Python's `TypeError` for the rest, raised at
//! the comparison CPython makes first (`min` and `max` walk the items; `sort` runs CPython's
//! `list.sort`, whose comparisons this module replays for lists of up to 63 items).

use std::cmp::Ordering;

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::python_semantics::python_type_name;

/// Which of Python's rich comparisons is asked for (its symbol names it in the error).
#[derive(Clone, Copy)]
enum Op {
    Lt,
    Gt,
}

/// How Python orders a value: with the values of its own class only.
#[derive(PartialEq)]
enum Class {
    Number,
    Str,
    List,
    Tuple,
    Undefined,
    Unordered,
}

fn class(v: &Value) -> Class {
    match v.kind() {
        ValueKind::Number | ValueKind::Bool => Class::Number,
        ValueKind::String => Class::Str,
        ValueKind::Undefined => Class::Undefined,
        ValueKind::Seq | ValueKind::Iterable => match python_type_name(v) {
            "tuple" => Class::Tuple,
            "list" => Class::List,
            _ => Class::Unordered,
        },
        _ => Class::Unordered,
    }
}

/// `a < b` or `a > b` of two numbers: exact for integers, as floats otherwise.
fn compare_numbers(a: &Value, b: &Value) -> Ordering {
    let int = |v: &Value| match v.kind() {
        ValueKind::Bool => Some(i128::from(v.is_true())),
        _ if v.is_integer() => i128::try_from(v.clone()).ok(),
        _ => None,
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        return x.cmp(&y);
    }
    let float = |v: &Value| match v.kind() {
        ValueKind::Bool => f64::from(u8::from(v.is_true())),
        _ => f64::try_from(v.clone()).unwrap_or(f64::NAN),
    };
    // NaN is neither less nor greater: Python's comparisons with it are false.
    float(a).partial_cmp(&float(b)).unwrap_or(Ordering::Equal)
}

/// Python's `a == b` (never raises).
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (class(a), class(b)) {
        (Class::Number, Class::Number) => {
            compare_numbers(a, b) == Ordering::Equal && !(is_nan(a) || is_nan(b))
        }
        (Class::Str, Class::Str) => a.as_str() == b.as_str(),
        (Class::List, Class::List) | (Class::Tuple, Class::Tuple) => {
            let (x, y) = (items(a), items(b));
            x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| py_eq(p, q))
        }
        (Class::Undefined, Class::Undefined) => true,
        _ => match (a.kind(), b.kind()) {
            (ValueKind::None, ValueKind::None) => true,
            (ValueKind::Map, ValueKind::Map) => maps_equal(a, b),
            _ => false,
        },
    }
}

fn is_nan(v: &Value) -> bool {
    v.kind() == ValueKind::Number
        && !v.is_integer()
        && f64::try_from(v.clone()).is_ok_and(f64::is_nan)
}

fn maps_equal(a: &Value, b: &Value) -> bool {
    let keys: Vec<Value> = a.try_iter().map(Iterator::collect).unwrap_or_default();
    if Some(keys.len()) != b.len() {
        return false;
    }
    keys.iter().all(|k| match (a.get_item(k), b.get_item(k)) {
        (Ok(x), Ok(y)) if !y.is_undefined() => py_eq(&x, &y),
        _ => false,
    })
}

fn items(v: &Value) -> Vec<Value> {
    v.try_iter().map(Iterator::collect).unwrap_or_default()
}

/// `a < b` (`Op::Lt`) or `a > b` (`Op::Gt`) as Python answers it, or its `TypeError`.
fn compare(a: &Value, b: &Value, op: Op) -> Result<bool, Error> {
    let wanted = match op {
        Op::Lt => Ordering::Less,
        Op::Gt => Ordering::Greater,
    };
    match (class(a), class(b)) {
        (Class::Number, Class::Number) => {
            Ok(compare_numbers(a, b) == wanted && !(is_nan(a) || is_nan(b)))
        }
        (Class::Str, Class::Str) => Ok(a.as_str().cmp(&b.as_str()) == wanted),
        (Class::List, Class::List) | (Class::Tuple, Class::Tuple) => {
            compare_sequences(&items(a), &items(b), op)
        }
        (Class::Undefined, _) | (_, Class::Undefined) => {
            Err(Error::from(ErrorKind::UndefinedError))
        }
        _ => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "'{}' not supported between instances of '{}' and '{}'",
                match op {
                    Op::Lt => "<",
                    Op::Gt => ">",
                },
                python_type_name(a),
                python_type_name(b)
            ),
        )),
    }
}

/// Sequences: the first items that differ (by `==`) decide, else the lengths.
fn compare_sequences(a: &[Value], b: &[Value], op: Op) -> Result<bool, Error> {
    for (x, y) in a.iter().zip(b) {
        if !py_eq(x, y) {
            return compare(x, y, op);
        }
    }
    Ok(match op {
        Op::Lt => a.len() < b.len(),
        Op::Gt => a.len() > b.len(),
    })
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
fn key_of(item: &Value, path: Option<&str>, case_sensitive: bool) -> Value {
    let mut key = item.clone();
    if let Some(path) = path {
        for part in path.split('.') {
            key = match part.parse::<i64>() {
                Ok(index) => key.get_item(&Value::from(index)).unwrap_or_default(),
                Err(_) => key.get_attr(part).unwrap_or_default(),
            };
        }
    }
    match key.as_str() {
        Some(s) if !case_sensitive => Value::from(s.to_lowercase()),
        _ => key,
    }
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

fn min_or_max(value: Value, op: Op, kwargs: Kwargs) -> Result<Value, Error> {
    let items = walk(&value)?;
    let case_sensitive: Option<bool> = kwargs.get("case_sensitive")?;
    let attribute: Option<String> = kwargs.get("attribute")?;
    kwargs.assert_all_used()?;
    let key = |v: &Value| key_of(v, attribute.as_deref(), case_sensitive.unwrap_or(false));
    let mut items = items.into_iter();
    let Some(mut best) = items.next() else {
        return Ok(Value::UNDEFINED);
    };
    let mut best_key = key(&best);
    for item in items {
        let k = key(&item);
        if compare(&k, &best_key, op)? {
            best = item;
            best_key = k;
        }
    }
    Ok(best)
}

/// jinja2's `min(value, case_sensitive=False, attribute=None)`.
pub fn min_filter(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    min_or_max(value, Op::Lt, kwargs)
}

/// jinja2's `max(value, case_sensitive=False, attribute=None)`.
pub fn max_filter(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    min_or_max(value, Op::Gt, kwargs)
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
    let mut keyed: Vec<(Vec<Value>, Value)> = items
        .into_iter()
        .map(|item| {
            let key = paths
                .iter()
                .map(|p| key_of(&item, *p, o.case_sensitive))
                .collect();
            (key, item)
        })
        .collect();
    let less =
        |a: &(Vec<Value>, Value), b: &(Vec<Value>, Value)| compare_sequences(&a.0, &b.0, Op::Lt);
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

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::Environment;

    fn render(source: &str) -> Result<String, String> {
        let mut env = Environment::new();
        env.add_filter("min", min_filter);
        env.add_filter("max", max_filter);
        env.add_filter("sort", sort_filter);
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
    }
}
