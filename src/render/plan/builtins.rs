//! Operators, filters, tests, methods and global functions of a render plan, each as the
//! interpreter computes it for the values it handles, and [`Bail`] for the rest.

use std::rc::Rc;

use super::ir::{AttrName, BinOp, Filter, MapFilter, Method, Test};
use super::trace::{self, Side, Test as TraceTest};
use super::value::{contains, equals, Bail, Res, Sym, V};
use super::Plan;
use crate::render::json_dumps::{dumps, dumps_json, DumpOptions};
use crate::render::python_semantics::DICT_METHODS;
use crate::render::python_str::{python_lstrip, python_rstrip, python_strip};

/// The longest list `range` makes before the interpreter takes over.
const MAX_RANGE: i64 = 100_000;

pub fn binop<'a>(op: BinOp, l: &V<'a>, r: &V<'a>) -> Res<V<'a>> {
    if matches!(l, V::Sym(_)) || matches!(r, V::Sym(_)) {
        let string = |v: &V<'a>| matches!(v, V::Sym(_)) || v.as_str().is_some();
        return match op {
            BinOp::Concat => trace::concat(l, r),
            BinOp::Add if string(l) && string(r) => trace::concat(l, r),
            _ => Err(Bail),
        };
    }
    if op == BinOp::Concat {
        // Python's `str()` of each side, as the interpreter's rewrite of `~` (python_semantics).
        let (l, r) = (l.py_string()?, r.py_string()?);
        let mut out = String::with_capacity(l.len() + r.len());
        out.push_str(&l);
        out.push_str(&r);
        return Ok(V::Owned(Rc::from(out)));
    }
    if let (Some(a), Some(b)) = (l.as_str(), r.as_str()) {
        if op == BinOp::Add {
            let mut out = String::with_capacity(a.len() + b.len());
            out.push_str(a);
            out.push_str(b);
            return Ok(V::Owned(Rc::from(out)));
        }
        return Err(Bail);
    }
    match (l, r) {
        (V::Int(a), V::Int(b)) => {
            let (a, b) = (*a, *b);
            let int = match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Div if b != 0 => {
                    let q = crate::render::python_ops::int_true_div(a.into(), b.into());
                    return Ok(V::Float(q));
                }
                BinOp::FloorDiv if a >= 0 && b > 0 => Some(a / b),
                BinOp::Rem if a >= 0 && b > 0 => Some(a % b),
                _ => None,
            };
            int.map(V::Int).ok_or(Bail)
        }
        (V::Int(_) | V::Float(_), V::Int(_) | V::Float(_)) => {
            let f = |v: &V| match v {
                V::Int(i) => *i as f64,
                V::Float(f) => *f,
                _ => f64::NAN,
            };
            let (a, b) = (f(l), f(r));
            Ok(V::Float(match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div if b != 0.0 => a / b,
                _ => return Err(Bail),
            }))
        }
        // minijinja adds no tuple to anything (Python adds a tuple to a tuple only); Python
        // adds no range to anything.
        (V::Tuple(_), _) | (_, V::Tuple(_)) | (V::Range(_), _) | (_, V::Range(_)) => Err(Bail),
        _ if op == BinOp::Add => match (l.seq_items(), r.seq_items()) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Ok(V::List(Rc::new(a)))
            }
            _ => Err(Bail),
        },
        _ => Err(Bail),
    }
}

/// The items a `for` loop walks: a sequence's items, a map's keys, nothing for undefined.
pub fn iterate<'a>(value: &V<'a>) -> Res<Rc<Vec<V<'a>>>> {
    if let V::List(items) | V::Slice(items) | V::Tuple(items) | V::Iter(items) | V::Range(items) =
        value
    {
        return Ok(items.clone());
    }
    if let Some(items) = value.take_generator() {
        return Ok(Rc::new(items));
    }
    if let Some(items) = value.seq_items() {
        return Ok(Rc::new(items));
    }
    Ok(Rc::new(match value {
        V::Undef => Vec::new(),
        // A string iterates by characters.
        V::Str(s) => {
            let s: &'a str = s;
            s.char_indices()
                .map(|(i, c)| V::Str(&s[i..i + c.len_utf8()]))
                .collect()
        }
        V::Owned(s) => s
            .chars()
            .map(|c| V::Owned(Rc::from(c.encode_utf8(&mut [0; 4]) as &str)))
            .collect(),
        V::Json(serde_json::Value::Object(m)) => m.keys().map(|k| V::Str(k)).collect(),
        V::Map(m) => m.iter().map(|(k, _)| V::Owned(k.clone())).collect(),
        _ => return Err(Bail),
    }))
}

/// `object.name`.
pub fn attr<'a>(object: &V<'a>, attr: &AttrName) -> Res<V<'a>> {
    let (sym, name) = (attr.sym, &*attr.text);
    // On a dict, jinja2 finds a dict method's name before the key (the interpreter follows).
    if attr.dict_method && object.is_map() {
        return Err(Bail);
    }
    if let Some(v) = object.map_get(name) {
        return Ok(v);
    }
    match object {
        V::Ns(fields) => Ok(fields
            .borrow()
            .iter()
            .find(|(s, _)| *s == sym)
            .map(|(_, v)| v.clone())
            .unwrap_or(V::Undef)),
        V::Loop(state) => {
            let i = state.index.get();
            let len = state.items.len();
            if !state.sized && matches!(name, "length" | "revindex" | "revindex0") {
                return Err(Bail);
            }
            if !state.last_known && name == "last" {
                return Err(Bail);
            }
            Ok(match name {
                "index0" => V::Int(i as i64),
                "index" => V::Int(i as i64 + 1),
                "revindex" => V::Int((len - i) as i64),
                "revindex0" => V::Int((len - i - 1) as i64),
                "first" => V::Bool(i == 0),
                "last" => V::Bool(i + 1 == len),
                "length" => V::Int(len as i64),
                "depth" => V::Int(1),
                "depth0" => V::Int(0),
                "previtem" if i > 0 => state.items[i - 1].clone(),
                "nextitem" if i + 1 < len => state.items[i + 1].clone(),
                "previtem" | "nextitem" => V::Undef,
                _ => return Err(Bail),
            })
        }
        _ => Err(Bail),
    }
}

/// `object[key]`.
pub fn item<'a>(object: &V<'a>, key: &V<'a>) -> Res<V<'a>> {
    if let Some(k) = key.as_str() {
        return match object.map_get(k) {
            // A dict without the key gives jinja2's attribute of that name: a dict method's
            // name is the method (the interpreter's).
            Some(V::Undef) if DICT_METHODS.contains(&k) => Err(Bail),
            found => found.ok_or(Bail),
        };
    }
    match (key, object.as_str()) {
        // A string's item is its character at that index (counted from the end when negative).
        (V::Int(i), Some(text)) => {
            let count = text.chars().count() as i64;
            let i = if *i < 0 { i + count } else { *i };
            Ok(match (0..count).contains(&i) {
                true => text
                    .char_indices()
                    .nth(i as usize)
                    .map(|(at, c)| V::Owned(Rc::from(&text[at..at + c.len_utf8()])))
                    .ok_or(Bail)?,
                false => V::Undef,
            })
        }
        (V::Int(i), None) => object.seq_index(*i).ok_or(Bail),
        _ => Err(Bail),
    }
}

pub fn filter<'a>(plan: &Plan, filter: Filter, value: V<'a>, args: &[V<'a>]) -> Res<V<'a>> {
    // A Markup string (see `Filter::Safe`) keeps its class through some filters: left to the
    // interpreter.
    if matches!(&value, V::Other(v) if v.is_safe()) {
        return Err(Bail);
    }
    if let V::Sym(s) = &value {
        return match filter {
            Filter::Trim => trace::strip(s, Side::Both, None),
            Filter::String => Ok(value),
            Filter::Default => match args.get(1) {
                None => Ok(value),
                Some(V::Bool(true)) if !value.truthy()? => args.first().cloned().ok_or(Bail),
                Some(V::Bool(_)) => Ok(value),
                Some(_) => Err(Bail),
            },
            _ => Err(Bail),
        };
    }
    let owned = |s: String| V::Owned(Rc::from(s));
    Ok(match filter {
        Filter::Trim => match value {
            V::Str(s) => V::Str(python_strip(s)),
            other => {
                let text = other.py_string()?;
                owned(python_strip(&text).to_string())
            }
        },
        Filter::Length => V::Int(match &value {
            V::Undef => 0,
            V::Json(serde_json::Value::Object(m)) => m.len(),
            V::Map(m) => m.len(),
            other => match other.as_str() {
                Some(s) => s.chars().count(),
                None => other.seq_len().ok_or(Bail)?,
            },
        } as i64),
        Filter::ToJson {
            indent,
            ensure_ascii,
            sort_keys,
        } => {
            let options = if plan.compact_json {
                DumpOptions {
                    item_separator: ",".into(),
                    key_separator: ":".into(),
                    ..DumpOptions::python_defaults(None)
                }
            } else {
                let mut options =
                    DumpOptions::python_defaults(indent.map(|n| " ".repeat(n as usize)));
                options.ensure_ascii = ensure_ascii;
                options.sort_keys = sort_keys;
                options
            };
            let direct = match &value {
                V::Json(json) if trace::holds_content(json) => return Err(Bail),
                V::Json(json) => dumps_json(json, &options),
                _ => None,
            };
            match direct {
                Some(text) => owned(text),
                None => owned(dumps(&value.to_value()?, &options).map_err(|_| Bail)?),
            }
        }
        Filter::DictSort => {
            let mut pairs = value.map_pairs().ok_or(Bail)?;
            let key = |p: &V<'a>| match p {
                V::Tuple(kv) => kv.first().and_then(|k| k.as_str().map(str::to_string)),
                _ => None,
            };
            let mut keyed = Vec::with_capacity(pairs.len());
            for pair in pairs.drain(..) {
                keyed.push((key(&pair).ok_or(Bail)?, pair));
            }
            if plan.mlx {
                // minijinja's order: case-insensitive (Unicode case folding), stable.
                keyed.sort_by(|a, b| unicase::UniCase::new(&a.0).cmp(&unicase::UniCase::new(&b.0)));
            } else {
                // jinja2's: Python's `sorted` by `key.lower()`, code point by code point.
                keyed.sort_by_cached_key(|(key, _)| key.to_lowercase());
            }
            V::List(Rc::new(keyed.into_iter().map(|(_, p)| p).collect()))
        }
        Filter::Capitalize => capitalize(&value)?,
        Filter::Select {
            by_attr,
            invert,
            test: which,
        } => {
            let (attr_name, test_args) = if by_attr {
                let name = args.first().and_then(V::as_str).ok_or(Bail)?;
                if name.contains('.') {
                    return Err(Bail);
                }
                (Some(name), &args[1..])
            } else {
                (None, args)
            };
            let items = match &value {
                V::Undef => Vec::new(),
                V::Gen(_) => value.take_generator().unwrap_or_default(),
                other => other.seq_items().ok_or(Bail)?,
            };
            let mut kept = Vec::new();
            for item in items {
                let tested = match attr_name {
                    Some(name) => item.map_get(name).ok_or(Bail)?,
                    None => item.clone(),
                };
                let passed = match which {
                    Some(t) => test(t, &tested, test_args, !plan.mlx)?,
                    None => tested.truthy()?,
                };
                if passed != invert {
                    kept.push(item);
                }
            }
            V::generator(kept)
        }
        Filter::MapAttr => {
            let name = args.first().and_then(V::as_str).ok_or(Bail)?;
            if name.contains('.') {
                return Err(Bail);
            }
            let items = match &value {
                V::Undef => Vec::new(),
                V::Gen(_) => value.take_generator().unwrap_or_default(),
                other => other.seq_items().ok_or(Bail)?,
            };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(item.map_get(name).ok_or(Bail)?);
            }
            V::generator(out)
        }
        Filter::MapFilter(inner) => {
            let items = match &value {
                V::Undef => Vec::new(),
                V::Gen(_) => value.take_generator().unwrap_or_default(),
                other => other.seq_items().ok_or(Bail)?,
            };
            let one = match inner {
                MapFilter::Upper => Filter::Upper,
                MapFilter::Lower => Filter::Lower,
                MapFilter::Trim => Filter::Trim,
                MapFilter::String => Filter::String,
                MapFilter::Length => Filter::Length,
            };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(self::filter(plan, one, item, &[])?);
            }
            V::generator(out)
        }
        Filter::String => match value {
            V::Str(_) | V::Owned(_) => value,
            other => V::Owned(other.py_string()?),
        },
        // A generator, as jinja2's `items` is.
        Filter::Items => match value {
            V::Undef => V::generator(Vec::new()),
            other => V::generator(other.map_pairs().ok_or(Bail)?),
        },
        Filter::Join => {
            let joiner = match args.first() {
                None => "",
                Some(j) => j.as_str().ok_or(Bail)?,
            };
            let items = match &value {
                V::Iter(items) => items.as_ref().clone(),
                V::Gen(_) => value.take_generator().unwrap_or_default(),
                other => other.seq_items().ok_or(Bail)?,
            };
            let mut out = String::new();
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(joiner);
                }
                match item {
                    V::Str(_) | V::Owned(_) | V::Int(_) => item.display(&mut out)?,
                    _ => return Err(Bail),
                }
            }
            owned(out)
        }
        // transformers' `safe` gives a Markup string, which the interpreter's `+`, `%` and
        // methods treat apart: here it only prints (any other use gives up). MLX Node's engine
        // has no Markup.
        Filter::Safe => match value {
            V::Str(_) | V::Owned(_) if plan.mlx => value,
            V::Str(s) => V::Other(crate::render::python_markup::markup(s.to_string())),
            V::Owned(s) => V::Other(crate::render::python_markup::markup(s.to_string())),
            _ => return Err(Bail),
        },
        Filter::First | Filter::Last => {
            let len = value.seq_len().ok_or(Bail)?;
            if len == 0 {
                V::Undef
            } else {
                let i = if filter == Filter::First { 0 } else { -1 };
                value.seq_index(i).ok_or(Bail)?
            }
        }
        Filter::Lower => owned(value.as_str().ok_or(Bail)?.to_lowercase()),
        Filter::Upper => owned(value.as_str().ok_or(Bail)?.to_uppercase()),
        Filter::Default => {
            let lax = match args.get(1) {
                None => false,
                Some(V::Bool(b)) => *b,
                Some(_) => return Err(Bail),
            };
            let missing = if lax {
                !value.truthy()?
            } else {
                value.is_undef()
            };
            if missing {
                args.first().cloned().ok_or(Bail)?
            } else {
                value
            }
        }
        Filter::List => match value.take_generator() {
            Some(items) => V::List(Rc::new(items)),
            None => V::List(Rc::new(value.seq_items().ok_or(Bail)?)),
        },
        Filter::Reverse if plan.mlx => {
            let mut items = value.seq_items().ok_or(Bail)?;
            items.reverse();
            V::List(Rc::new(items))
        }
        // jinja2's: a generator reversed into a list; a sequence, a map or an undefined
        // value into Python's one-shot reverse iterator (see `python_iterables`).
        Filter::Reverse => match value.take_generator() {
            Some(mut items) => {
                items.reverse();
                V::List(Rc::new(items))
            }
            None => {
                let mut items = match &value {
                    V::Str(_) | V::Owned(_) => return Err(Bail),
                    _ => iterate(&value)?.as_ref().clone(),
                };
                items.reverse();
                V::generator(items)
            }
        },
        Filter::Replace => {
            let text = value.as_str().ok_or(Bail)?;
            let (old, new) = match args {
                [old, new] => (old.as_str().ok_or(Bail)?, new.as_str().ok_or(Bail)?),
                _ => return Err(Bail),
            };
            owned(text.replace(old, new))
        }
    })
}

/// `value is test(args)`; `python`: as transformers renders (jinja2's tests where they differ).
pub fn test<'a>(test: Test, value: &V<'a>, args: &[V<'a>], python: bool) -> Res<bool> {
    let opaque = |v: &V| {
        matches!(
            v,
            V::Ns(_) | V::Loop(_) | V::Macro(_) | V::Function | V::Gen(_)
        )
    };
    if opaque(value) && !matches!(test, Test::Defined | Test::Undefined | Test::None) {
        return Err(Bail);
    }
    // A symbolic string is a string to every test of its type; equality is a guard.
    if let V::Sym(s) = value {
        return match test {
            Test::Eq => equals(value, args.first().ok_or(Bail)?),
            Test::Ne => Ok(!equals(value, args.first().ok_or(Bail)?)?),
            Test::In | Test::Odd | Test::Even => Err(Bail),
            _ => self::test(test, &V::Owned(s.text.clone()), args, python),
        };
    }
    if let V::Other(v) = value {
        use minijinja::value::ValueKind;
        // A Markup string: a string to every test, which the plan leaves to the interpreter.
        if v.kind() == ValueKind::String && !matches!(test, Test::Defined | Test::Undefined) {
            return Err(Bail);
        }
        return Ok(match test {
            Test::Defined => true,
            Test::Undefined | Test::None | Test::String | Test::Boolean => false,
            Test::Number => v.kind() == ValueKind::Number,
            Test::Integer => v.is_integer(),
            Test::Iterable | Test::Mapping | Test::Sequence | Test::True | Test::False => false,
            Test::Float => v.kind() == ValueKind::Number && !v.is_integer(),
            _ => return Err(Bail),
        });
    }
    Ok(match test {
        Test::Defined => !value.is_undef(),
        Test::Undefined => value.is_undef(),
        Test::None => matches!(value, V::None),
        Test::String => value.as_str().is_some(),
        Test::Number => matches!(value, V::Int(_) | V::Float(_) | V::Bool(_)),
        Test::Integer => matches!(value, V::Int(_)),
        Test::Float => matches!(value, V::Float(_)),
        Test::Boolean => matches!(value, V::Bool(_)),
        Test::Mapping => value.is_map(),
        // jinja2's: anything with a length and items (a string and a dict too).
        Test::Sequence if python => {
            value.is_undef()
                || value.as_str().is_some()
                || value.is_map()
                || value.seq_len().is_some()
        }
        Test::Sequence => {
            value.is_undef() || (value.seq_len().is_some() && !matches!(value, V::Slice(_)))
        }
        Test::Iterable => !matches!(value, V::None | V::Bool(_) | V::Int(_) | V::Float(_)),
        Test::True => matches!(value, V::Bool(true)),
        Test::False => matches!(value, V::Bool(false)),
        Test::Eq => equals(value, args.first().ok_or(Bail)?)?,
        Test::Ne => !equals(value, args.first().ok_or(Bail)?)?,
        Test::In => contains(args.first().ok_or(Bail)?, value)?,
        Test::Odd | Test::Even => match value {
            V::Int(i) => (i % 2 != 0) == (test == Test::Odd),
            _ => return Err(Bail),
        },
    })
}

pub fn method<'a>(method: Method, object: &V<'a>, args: &[V<'a>]) -> Res<V<'a>> {
    if let V::Sym(s) = object {
        let literal = |i: usize| args.get(i).and_then(V::as_str).ok_or(Bail);
        let side = match method {
            Method::Strip => Side::Both,
            Method::LStrip => Side::Left,
            Method::RStrip => Side::Right,
            Method::StartsWith | Method::EndsWith if args.len() == 1 => {
                let affix = std::sync::Arc::from(literal(0)?);
                return Ok(V::Bool(trace::test(
                    s,
                    if method == Method::StartsWith {
                        TraceTest::StartsWith(affix)
                    } else {
                        TraceTest::EndsWith(affix)
                    },
                )?));
            }
            Method::Split if args.len() == 1 => {
                let sep = literal(0)?;
                if sep.is_empty() {
                    return Err(Bail);
                }
                return trace::split(s, sep);
            }
            _ => return Err(Bail),
        };
        return match args {
            [] | [V::None | V::Undef] => trace::strip(s, side, None),
            [_] => trace::strip(s, side, Some(literal(0)?)),
            _ => Err(Bail),
        };
    }
    let owned = |s: String| V::Owned(Rc::from(s));
    if let Some(s) = object.as_str() {
        let arg = |i: usize| args.get(i).and_then(V::as_str).ok_or(Bail);
        let no_chars = match args {
            [] => true,
            [a] => matches!(a, V::None | V::Undef),
            _ => false,
        };
        return Ok(match method {
            Method::StartsWith | Method::EndsWith if args.len() == 1 => {
                let affix = arg(0)?;
                V::Bool(if method == Method::StartsWith {
                    s.starts_with(affix)
                } else {
                    s.ends_with(affix)
                })
            }
            Method::Strip | Method::LStrip | Method::RStrip if no_chars => {
                let cut = match method {
                    Method::Strip => python_strip(s),
                    Method::LStrip => python_lstrip(s),
                    _ => python_rstrip(s),
                };
                substring(object, cut)
            }
            Method::Strip | Method::LStrip | Method::RStrip if args.len() == 1 => {
                let set: Vec<char> = arg(0)?.chars().collect();
                let cut = match method {
                    Method::Strip => s.trim_matches(&set[..]),
                    Method::LStrip => s.trim_start_matches(&set[..]),
                    _ => s.trim_end_matches(&set[..]),
                };
                substring(object, cut)
            }
            Method::Split => {
                let parts: Vec<String> = match args {
                    // The renderings split on different whitespace where these occur.
                    [] if s.contains(|c| ('\u{1c}'..='\u{1f}').contains(&c)) => return Err(Bail),
                    [] => s.split_whitespace().map(str::to_string).collect(),
                    [sep] => {
                        let sep = sep.as_str().filter(|p| !p.is_empty()).ok_or(Bail)?;
                        s.split(sep).map(str::to_string).collect()
                    }
                    [sep, V::Int(n)] if *n >= 0 => {
                        let sep = sep.as_str().filter(|p| !p.is_empty()).ok_or(Bail)?;
                        s.splitn(*n as usize + 1, sep).map(str::to_string).collect()
                    }
                    _ => return Err(Bail),
                };
                V::List(Rc::new(parts.into_iter().map(owned).collect()))
            }
            Method::Upper if args.is_empty() => owned(s.to_uppercase()),
            Method::Capitalize if args.is_empty() => capitalize(object)?,
            Method::Lower if args.is_empty() => owned(s.to_lowercase()),
            Method::Replace if args.len() == 2 => owned(s.replace(arg(0)?, arg(1)?)),
            _ => return Err(Bail),
        });
    }
    if object.is_map() {
        let pairs = object.map_pairs().ok_or(Bail)?;
        let part = |k: usize| -> Vec<V<'a>> {
            pairs.iter().filter_map(|p| p.seq_index(k as i64)).collect()
        };
        return Ok(match (method, args) {
            (Method::Items, []) => V::Iter(Rc::new(pairs.clone())),
            (Method::Keys, []) => V::Iter(Rc::new(part(0))),
            (Method::Values, []) => V::Iter(Rc::new(part(1))),
            (Method::Get, [key]) | (Method::Get, [key, _]) => {
                let found = object.map_get(key.as_str().ok_or(Bail)?).ok_or(Bail)?;
                match found {
                    V::Undef => args.get(1).cloned().unwrap_or(V::None),
                    v => v,
                }
            }
            _ => return Err(Bail),
        });
    }
    Err(Bail)
}

/// minijinja's `capitalize` (title case first, lower case after), for ASCII text: beyond it,
/// title case and Unicode lower casing have cases the plan leaves to the interpreter.
fn capitalize<'a>(value: &V<'a>) -> Res<V<'a>> {
    let s = value.as_str().ok_or(Bail)?;
    if !s.is_ascii() {
        return Err(Bail);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    if let Some(first) = chars.next() {
        out.push(first.to_ascii_uppercase());
        out.extend(chars.map(|c| c.to_ascii_lowercase()));
    }
    Ok(V::Owned(Rc::from(out)))
}

/// A part of a string value, borrowed where the value is.
fn substring<'a>(object: &V<'a>, cut: &str) -> V<'a> {
    match object {
        V::Str(s) => {
            let start = cut.as_ptr() as usize - s.as_ptr() as usize;
            V::Str(&s[start..start + cut.len()])
        }
        _ => V::Owned(Rc::from(cut)),
    }
}

/// The global functions `range` and `strftime_now` (`namespace` is the evaluator's, which keeps
/// every namespace of a render; `raise_exception` and the rest are left to the interpreter).
/// `python_range` says whether `range` gives Python's range (transformers) or a list (MLX
/// Node's engine).
pub fn function<'a>(name: &str, args: Vec<(Option<Sym>, V<'a>)>, python_range: bool) -> Res<V<'a>> {
    match name {
        "range" => {
            let mut ints = Vec::new();
            for (name, value) in &args {
                match (name, value) {
                    (None, V::Int(i)) => ints.push(*i),
                    _ => return Err(Bail),
                }
            }
            let (start, stop, step) = match ints[..] {
                [stop] => (0, stop, 1),
                [start, stop] => (start, stop, 1),
                [start, stop, step] if step != 0 => (start, stop, step),
                _ => return Err(Bail),
            };
            // In 128 bits: the bounds may be any 64-bit integers.
            let (start, stop, step) = (start as i128, stop as i128, step as i128);
            let count = if step > 0 {
                (stop - start + step - 1).max(0) / step
            } else {
                (start - stop - step - 1).max(0) / -step
            };
            if count > MAX_RANGE as i128 {
                return Err(Bail);
            }
            let items = Rc::new(
                (0..count)
                    .map(|k| V::Int((start + k * step) as i64))
                    .collect(),
            );
            Ok(if python_range {
                V::Range(items)
            } else {
                V::List(items)
            })
        }
        "strftime_now" => match &args[..] {
            [(None, format)] => {
                let format = format.as_str().ok_or(Bail)?.to_string();
                let text = crate::render::strftime_now(format).map_err(|_| Bail)?;
                Ok(V::Owned(Rc::from(text.as_str().ok_or(Bail)?)))
            }
            _ => Err(Bail),
        },
        _ => Err(Bail),
    }
}
