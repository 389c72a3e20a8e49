//! The values a render plan works with: borrowed views of the example's JSON and of the plan's
//! own constants, so that a render copies no message before it prints it.
//!
//! Every operation follows what the interpreter (minijinja with this crate's filters and Python
//! methods) does for the same values. Where that is not certain, or the interpreter would fail,
//! the operation gives up ([`Bail`]) and the interpreter renders the example instead.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use minijinja::value::Tuple;
use minijinja::Value;
use serde_json::Value as Json;

use crate::example::json_value::{self, to_template};
use crate::render::python_value::{needs_python_spelling, py_str};

use super::trace::{self, SymStr, Test as TraceTest};

/// "The interpreter renders this one": the plan does not know the answer for sure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bail;

pub type Res<T> = Result<T, Bail>;

/// An interned name: a variable, an attribute or a keyword argument.
pub type Sym = u32;

/// A value during a render. `'a` is the shorter of the example's and the plan's lifetimes.
#[derive(Clone)]
#[repr(u8)]
pub enum V<'a> {
    Undef,
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    Owned(Rc<str>),
    /// A JSON array or object of the example (never a scalar: those are lifted).
    Json(&'a Json),
    List(Rc<Vec<V<'a>>>),
    /// A slice of a sequence as MLX Node renders it: a list in every way but one, `is sequence`
    /// is false (minijinja slices lazily into an iterable of known length).
    Slice(Rc<Vec<V<'a>>>),
    /// A map's `(key, value)` pair (what `items` and `dictsort` give): a list in every way but
    /// one, it prints as Python's tuple.
    Tuple(Rc<Vec<V<'a>>>),
    /// What `items` gives: iterable, but not a sequence (no length, no index).
    Iter(Rc<Vec<V<'a>>>),
    /// What `range` gives as transformers renders: Python's range, a list in every way but
    /// these, which the interpreter answers: it prints as `range(0, 3)`, and `+`, `tojson`,
    /// slicing and ordering treat it as a range.
    Range(Rc<Vec<V<'a>>>),
    /// What `map`, `select`, `reject`, `selectattr` and `rejectattr` give: a one-shot generator
    /// (true, no length, no index; the first walk takes its items, a second sees none).
    Gen(Rc<GenState<'a>>),
    /// A map literal of the template, keys in order.
    Map(Rc<Vec<(Rc<str>, V<'a>)>>),
    Ns(Rc<RefCell<Vec<(Sym, V<'a>)>>>),
    Loop(Rc<LoopState<'a>>),
    Macro(usize),
    /// A global function of the environment (`range`, `strftime_now`, ...), read as a value.
    Function,
    /// Anything else the interpreter would see: printed and dumped as it would be, nothing more.
    Other(Value),
    /// A string made from the messages' contents, while a trace is recorded (see `trace`).
    Sym(Rc<SymStr>),
}

pub struct GenState<'a> {
    pub items: std::cell::RefCell<Option<Vec<V<'a>>>>,
}

impl<'a> V<'a> {
    pub fn generator(items: Vec<V<'a>>) -> V<'a> {
        V::Gen(Rc::new(GenState {
            items: std::cell::RefCell::new(Some(items)),
        }))
    }

    /// The items of a generator, taken (a second call gives none).
    pub fn take_generator(&self) -> Option<Vec<V<'a>>> {
        match self {
            V::Gen(state) => Some(state.items.borrow_mut().take().unwrap_or_default()),
            _ => None,
        }
    }
}

/// A `for` loop's `loop` variable.
pub struct LoopState<'a> {
    pub items: Rc<Vec<V<'a>>>,
    pub index: Cell<usize>,
    /// Whether the loop walks a sequence (its length known up front) rather than an iterable.
    pub sized: bool,
    /// Whether `loop.last` is known (MLX Node's engine does not know it over a string).
    pub last_known: bool,
}

impl<'a> V<'a> {
    /// An example value as the template sees it.
    pub fn lift(json: &'a Json) -> V<'a> {
        match json {
            Json::Null => V::None,
            Json::Bool(b) => V::Bool(*b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    V::Int(i)
                } else if n.is_u64() {
                    V::Other(to_template(json))
                } else {
                    V::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Json::String(s) => match trace::lifted(json) {
                Some(symbolic) => symbolic,
                None => V::Str(s),
            },
            Json::Object(map) if json_value::is_wide_integer(map) => V::Other(to_template(json)),
            _ => V::Json(json),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            V::Str(s) => Some(s),
            V::Owned(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_undef(&self) -> bool {
        matches!(self, V::Undef)
    }

    /// Python's truth, as minijinja's `is_true` decides it.
    pub fn truthy(&self) -> Res<bool> {
        Ok(match self {
            V::Undef | V::None => false,
            V::Bool(b) => *b,
            V::Int(i) => *i != 0,
            V::Float(f) => *f != 0.0,
            V::Str(s) => !s.is_empty(),
            V::Owned(s) => !s.is_empty(),
            V::Json(Json::Array(a)) => !a.is_empty(),
            V::Json(Json::Object(m)) => !m.is_empty(),
            V::List(l) | V::Slice(l) | V::Tuple(l) | V::Range(l) => !l.is_empty(),
            V::Map(m) => !m.is_empty(),
            V::Macro(_) | V::Function | V::Gen(_) => true,
            V::Sym(s) => trace::test(s, TraceTest::NonEmpty)?,
            _ => return Err(Bail),
        })
    }

    /// The items of a sequence (a JSON array or a list), `None` for anything else.
    pub fn seq_items(&self) -> Option<Vec<V<'a>>> {
        match self {
            V::Json(Json::Array(a)) => Some(a.iter().map(V::lift).collect()),
            V::List(l) | V::Slice(l) | V::Tuple(l) | V::Range(l) => Some(l.as_ref().clone()),
            _ => None,
        }
    }

    pub fn seq_len(&self) -> Option<usize> {
        match self {
            V::Json(Json::Array(a)) => Some(a.len()),
            V::List(l) | V::Slice(l) | V::Tuple(l) | V::Range(l) => Some(l.len()),
            _ => None,
        }
    }

    /// Item `i` of a sequence, negative from the end; `Undef` past either end.
    pub fn seq_index(&self, i: i64) -> Option<V<'a>> {
        let len = self.seq_len()? as i64;
        let i = if i < 0 { i + len } else { i };
        if i < 0 || i >= len {
            return Some(V::Undef);
        }
        Some(match self {
            V::Json(Json::Array(a)) => V::lift(&a[i as usize]),
            V::List(l) | V::Slice(l) | V::Tuple(l) | V::Range(l) => l[i as usize].clone(),
            _ => return None,
        })
    }

    /// `map[key]` of a JSON object or a map literal: `Undef` when missing, `None` when this is
    /// not a map.
    pub fn map_get(&self, key: &str) -> Option<V<'a>> {
        match self {
            V::Json(Json::Object(m)) => {
                Some(json_value::get(m, key).map(V::lift).unwrap_or(V::Undef))
            }
            V::Map(m) => Some(
                m.iter()
                    .find(|(k, _)| k.as_ref() == key)
                    .map(|(_, v)| v.clone())
                    .unwrap_or(V::Undef),
            ),
            _ => None,
        }
    }

    pub fn is_map(&self) -> bool {
        matches!(self, V::Json(Json::Object(_)) | V::Map(_))
    }

    /// `(key, value)` pairs of a map, in order.
    pub fn map_pairs(&self) -> Option<Vec<V<'a>>> {
        let pair = |k: V<'a>, v: V<'a>| V::Tuple(Rc::new(vec![k, v]));
        match self {
            V::Json(Json::Object(m)) => {
                Some(m.iter().map(|(k, v)| pair(V::Str(k), V::lift(v))).collect())
            }
            V::Map(m) => Some(
                m.iter()
                    .map(|(k, v)| pair(V::Owned(k.clone()), v.clone()))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The value as the interpreter holds it, for printing and dumping.
    pub fn to_value(&self) -> Res<Value> {
        Ok(match self {
            V::Undef => Value::UNDEFINED,
            V::None => Value::from(()),
            V::Bool(b) => Value::from(*b),
            V::Int(i) => Value::from(*i),
            V::Float(f) => Value::from(*f),
            V::Str(s) => Value::from(*s),
            V::Owned(s) => Value::from(s.as_ref()),
            // A message read whole reads its content, which a trace's recording cannot follow.
            V::Json(j) if trace::holds_content(j) => return Err(Bail),
            V::Json(j) => to_template(j),
            V::List(l) | V::Slice(l) => {
                Value::from(l.iter().map(V::to_value).collect::<Res<Vec<_>>>()?)
            }
            V::Tuple(l) => Value::from_object(Tuple::from(
                l.iter().map(V::to_value).collect::<Res<Vec<_>>>()?,
            )),
            V::Other(v) => v.clone(),
            _ => return Err(Bail),
        })
    }

    /// `{{ value }}`: the interpreter's formatter (Python's spelling of floats, lists and maps,
    /// minijinja's of the rest, nothing for undefined).
    pub fn print(&self, out: &mut String) -> Res<()> {
        if let V::Str(_) | V::Owned(_) | V::Int(_) | V::Undef = self {
            return self.display(out);
        }
        let value = self.to_value()?;
        if needs_python_spelling(&value) {
            out.push_str(&py_str(&value));
            return Ok(());
        }
        self.display(out)
    }

    /// minijinja's `Display` of the value (what `~` joins).
    pub fn display(&self, out: &mut String) -> Res<()> {
        match self {
            V::Str(s) => out.push_str(s),
            V::Owned(s) => out.push_str(s),
            V::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
            V::Undef => {}
            _ => {
                use std::fmt::Write;
                let value = self.to_value()?;
                write!(out, "{value}").map_err(|_| Bail)?;
            }
        }
        Ok(())
    }

    /// `str(value)` as the `string` and `trim` filters take it.
    pub fn py_string(&self) -> Res<Rc<str>> {
        match self {
            V::Str(s) => Ok(Rc::from(*s)),
            V::Owned(s) => Ok(s.clone()),
            _ => Ok(Rc::from(py_str(&self.to_value()?))),
        }
    }
}

/// `a == b` as the interpreter decides it, for the kinds where that is plain.
pub fn equals<'a>(a: &V<'a>, b: &V<'a>) -> Res<bool> {
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        return Ok(x == y);
    }
    if let (V::Sym(s), other) | (other, V::Sym(s)) = (a, b) {
        return match other.as_str() {
            Some(text) => trace::test(s, TraceTest::Equals(std::sync::Arc::from(text))),
            // A string is never equal to a number, none, a list or a map.
            None if matches!(
                other,
                V::Int(_) | V::Float(_) | V::None | V::Json(_) | V::List(_) | V::Map(_)
            ) =>
            {
                Ok(false)
            }
            None => Err(Bail),
        };
    }
    Ok(match (a, b) {
        (V::Int(x), V::Int(y)) => x == y,
        (V::Int(x), V::Float(y)) | (V::Float(y), V::Int(x)) => (*x as f64) == *y,
        (V::Float(x), V::Float(y)) => x == y,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::None, V::None) => true,
        (V::Undef, V::Undef) => true,
        // A string against a number, none, a list or a map: never equal.
        (s, other) | (other, s)
            if s.as_str().is_some()
                && matches!(
                    other,
                    V::Int(_) | V::Float(_) | V::None | V::Json(_) | V::List(_) | V::Map(_)
                ) =>
        {
            false
        }
        (V::Int(_) | V::Float(_), V::None) | (V::None, V::Int(_) | V::Float(_)) => false,
        // A bool is the number 0 or 1.
        (V::Bool(x), V::Int(y)) | (V::Int(y), V::Bool(x)) => i64::from(*x) == *y,
        (V::Bool(x), V::Float(y)) | (V::Float(y), V::Bool(x)) => f64::from(u8::from(*x)) == *y,
        // An undefined value equals only an undefined value.
        (V::Undef, other) | (other, V::Undef) if is_plain(other) => false,
        // A container against a scalar: never equal; an object against itself: equal.
        (c, other) | (other, c)
            if matches!(c, V::Json(_) | V::List(_) | V::Map(_))
                && matches!(other, V::Bool(_) | V::Int(_) | V::Float(_) | V::None) =>
        {
            false
        }
        (V::Json(x), V::Json(y)) if std::ptr::eq(*x, *y) => true,
        _ => return Err(Bail),
    })
}

/// A value whose equality with an undefined value is plain (false): not one the interpreter
/// holds in its own kinds.
fn is_plain(v: &V<'_>) -> bool {
    matches!(
        v,
        V::None
            | V::Bool(_)
            | V::Int(_)
            | V::Float(_)
            | V::Str(_)
            | V::Owned(_)
            | V::Json(_)
            | V::List(_)
            | V::Map(_)
    )
}

/// `a < b` (and friends, through the ordering) for numbers and for strings.
pub fn compare<'a>(a: &V<'a>, b: &V<'a>) -> Res<std::cmp::Ordering> {
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        return Ok(x.cmp(y));
    }
    match (a, b) {
        (V::Int(x), V::Int(y)) => Ok(x.cmp(y)),
        (V::Int(_) | V::Float(_), V::Int(_) | V::Float(_)) => {
            let f = |v: &V| match v {
                V::Int(i) => *i as f64,
                V::Float(f) => *f,
                _ => f64::NAN,
            };
            f(a).partial_cmp(&f(b)).ok_or(Bail)
        }
        _ => Err(Bail),
    }
}

/// `needle in haystack`.
pub fn contains<'a>(haystack: &V<'a>, needle: &V<'a>) -> Res<bool> {
    if let V::Sym(s) = haystack {
        let needle = needle.as_str().ok_or(Bail)?;
        return trace::test(s, TraceTest::Contains(std::sync::Arc::from(needle)));
    }
    if let Some(text) = haystack.as_str() {
        return needle.as_str().map(|n| text.contains(n)).ok_or(Bail);
    }
    if haystack.is_map() {
        let key = needle.as_str().ok_or(Bail)?;
        return Ok(!haystack.map_get(key).ok_or(Bail)?.is_undef());
    }
    if let Some(items) = haystack.seq_items() {
        for item in &items {
            if equals(item, needle)? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    match haystack {
        // An undefined value iterates as empty.
        V::Undef => Ok(false),
        _ => Err(Bail),
    }
}

/// The positions `[start:stop:step]` picks from a sequence of `len` items, in order, by
/// Python's slice rules (negative from the end, clamped). `step` is not zero.
fn positions(
    len: usize,
    [start, stop]: [Option<i64>; 2],
    step: i64,
) -> impl Iterator<Item = usize> {
    let len = len as i128;
    let step = i128::from(step);
    let clamp = |i: i64, lo: i128, hi: i128| {
        let i = i128::from(i);
        (if i < 0 { i + len } else { i }).clamp(lo, hi)
    };
    let (first, end) = if step > 0 {
        (
            start.map_or(0, |s| clamp(s, 0, len)),
            stop.map_or(len, |s| clamp(s, 0, len)),
        )
    } else {
        (
            start.map_or(len - 1, |s| clamp(s, -1, len - 1)),
            stop.map_or(-1, |s| clamp(s, -1, len - 1)),
        )
    };
    let span = if step > 0 { end - first } else { first - end };
    let count = if span <= 0 {
        0
    } else {
        (span - 1) / step.abs() + 1
    };
    (0..count).map(move |k| (first + k * step) as usize)
}

/// Python's slice `[start:stop:step]` of a sequence or a string (by characters).
/// `value[start:stop:step]`: Python's slice (`python`: as transformers renders, a list or a
/// tuple of the items) or minijinja's (a lazy slice).
pub fn slice<'a>(value: &V<'a>, [start, stop, step]: [Option<i64>; 3], python: bool) -> Res<V<'a>> {
    let step = step.unwrap_or(1);
    if step == 0 || matches!(value, V::Range(_)) {
        return Err(Bail);
    }
    let bounds = [start, stop];
    if let Some(text) = value.as_str() {
        let chars: Vec<char> = text.chars().collect();
        let picked: String = positions(chars.len(), bounds, step)
            .map(|i| chars[i])
            .collect();
        return Ok(V::Owned(Rc::from(picked)));
    }
    // minijinja slices a sequence lazily: the result is iterable, not a sequence (no length,
    // no index), and slicing none or undefined gives an empty list. The items are read in place.
    let picked: Vec<V<'a>> = match value {
        // jinja2 raises for an undefined value and for `None` (the interpreter's).
        V::None | V::Undef => return Err(Bail),
        // Python cannot slice `dict_items` or a generator.
        V::Iter(_) | V::Gen(_) if python => return Err(Bail),
        V::Json(Json::Array(a)) => positions(a.len(), bounds, step)
            .map(|i| V::lift(&a[i]))
            .collect(),
        V::Iter(l) | V::List(l) | V::Slice(l) | V::Tuple(l) => positions(l.len(), bounds, step)
            .map(|i| l[i].clone())
            .collect(),
        _ => return Err(Bail),
    };
    let picked = Rc::new(picked);
    Ok(match value {
        V::Tuple(_) if python => V::Tuple(picked),
        _ if python => V::List(picked),
        _ => V::Slice(picked),
    })
}

#[cfg(test)]
mod tests {
    use super::positions;

    /// Python's `list(range(len))[start:stop:step]`, walked one index at a time.
    fn walked(len: i64, start: Option<i64>, stop: Option<i64>, step: i64) -> Vec<usize> {
        let clamp = |i: i64, lo: i64, hi: i64| (if i < 0 { i + len } else { i }).clamp(lo, hi);
        let mut out = Vec::new();
        if step > 0 {
            let mut i = clamp(start.unwrap_or(0), 0, len);
            let end = clamp(stop.unwrap_or(len), 0, len);
            while i < end {
                out.push(i as usize);
                i += step;
            }
        } else {
            let mut i = start.map_or(len - 1, |s| clamp(s, -1, len - 1));
            let end = stop.map_or(-1, |s| clamp(s, -1, len - 1));
            while i > end {
                out.push(i as usize);
                i += step;
            }
        }
        out
    }

    #[test]
    fn slice_positions_follow_python() {
        let bounds = [
            None,
            Some(-10),
            Some(-3),
            Some(-1),
            Some(0),
            Some(1),
            Some(2),
            Some(5),
            Some(10),
        ];
        for len in 0..7 {
            for start in bounds {
                for stop in bounds {
                    for step in [-4, -3, -2, -1, 1, 2, 3, 5] {
                        assert_eq!(
                            positions(len as usize, [start, stop], step).collect::<Vec<_>>(),
                            walked(len, start, stop, step),
                            "len {len} [{start:?}:{stop:?}:{step}]"
                        );
                    }
                }
            }
        }
        // Steps and bounds at the ends of i64 neither overflow nor loop.
        let far = [Some(i64::MIN), Some(i64::MAX)];
        assert_eq!(
            positions(3, [None, None], i64::MAX).collect::<Vec<_>>(),
            [0]
        );
        assert_eq!(
            positions(3, [None, None], i64::MIN).collect::<Vec<_>>(),
            [2]
        );
        assert_eq!(positions(3, far, 1).count(), 3);
        assert_eq!(positions(3, [far[1], far[0]], -1).count(), 3);
    }
}
