//! Macro arguments as jinja2 binds them: an argument that is passed keeps its value even when
//! that value is undefined (`f(b=d.missing)` gives `b` an undefined value), where minijinja
//! gives a parameter its default whenever the value it receives is undefined.
//!
//! The interpreter's source rewrite (`python_semantics`) keeps the passed undefined value
//! through minijinja's default check: at a call of a macro the template defines, every argument
//! bound to a parameter with a default passes through [`PASSED_FILTER`], which turns an
//! undefined value into a [`PassedUndefined`] marker; the macro's body starts by turning the
//! marker back into an undefined value ([`UNPASS_FILTER`]).
//!
//! A macro whose body names `varargs` or `kwargs` catches what its parameters leave over, which
//! minijinja's macros do not: its definition gains `varargs=()` and `kwargs={}` as parameters,
//! and its calls (with those of `caller` and any call with a splat) go through
//! [`CALL_FUNCTION`], which binds the arguments as jinja2 does and fills them.

use std::collections::HashMap;
use std::sync::Arc;

use minijinja::machinery::ast;
use minijinja::value::{Kwargs, Object, ObjectRepr, Rest, Tuple, Value, ValueKind, ValueOrKwargs};
use minijinja::{Error, ErrorKind, State};

/// The filter an argument bound to a parameter with a default passes through.
pub const PASSED_FILTER: &str = "__sft_py_passed";
/// The filter a macro's body starts with, for each parameter with a default.
pub const UNPASS_FILTER: &str = "__sft_py_unpass";

/// An undefined value passed as a macro argument, on its way to the macro's body.
#[derive(Debug)]
pub struct PassedUndefined;

impl Object for PassedUndefined {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }
}

/// [`PASSED_FILTER`]: an undefined value becomes the marker; anything else passes unchanged.
pub fn passed_filter(value: Value) -> Value {
    if value.is_undefined() {
        Value::from_object(PassedUndefined)
    } else {
        value
    }
}

/// [`UNPASS_FILTER`]: the marker becomes an undefined value again.
pub fn unpass_filter(value: Value) -> Value {
    if value.downcast_object_ref::<PassedUndefined>().is_some() {
        Value::UNDEFINED
    } else {
        value
    }
}

/// A macro's parameters, and the index of the first one with a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature<'a> {
    pub params: Vec<&'a str>,
    pub first_default: usize,
    /// Whether the body names `caller`, `varargs` and `kwargs`.
    uses: [bool; 3],
}

impl<'a> Signature<'a> {
    fn of(source: &str, m: &ast::Spanned<ast::Macro<'a>>) -> Option<Self> {
        // What the body names, read from its text: a word in a string or in the template's
        // text counts too, which only leaves a call unchecked.
        let body = opening_tag_end(source, m)
            .and_then(|(at, _)| source.get(at..m.span().end_offset as usize))
            .unwrap_or(source);
        Self::with_body(m, body)
    }

    /// The signature of a call block's own macro (its `caller`).
    pub fn of_call_block(source: &str, c: &ast::CallBlock<'a>) -> Option<Self> {
        let body = source
            .get(c.call.span().end_offset as usize..c.macro_decl.span().end_offset as usize)?;
        Self::with_body(&c.macro_decl, body)
    }

    fn with_body(m: &ast::Macro<'a>, body: &str) -> Option<Self> {
        let params = m
            .args
            .iter()
            .map(|a| match a {
                ast::Expr::Var(v) => Some(v.id),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        let names = |word: &str| {
            body.match_indices(word).any(|(at, _)| {
                let before = body[..at].chars().next_back();
                let after = body[at + word.len()..].chars().next();
                let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !ident(before) && !ident(after)
            })
        };
        Some(Signature {
            first_default: params.len() - m.defaults.len().min(params.len()),
            uses: [names("caller"), names("varargs"), names("kwargs")],
            params,
        })
    }

    /// jinja2's `TypeError` for a call of this macro with `positional` arguments and the
    /// keyword arguments `keywords` (a call block passes `caller` too), `None` where jinja2
    /// accepts the call.
    pub fn call_error(
        &self,
        name: &str,
        positional: usize,
        keywords: &[&str],
        call_block: bool,
    ) -> Option<String> {
        let [caller, varargs, kwargs] = self.uses;
        let mut left: Vec<&str> = keywords.to_vec();
        if call_block {
            left.push("caller");
        }
        let bound = positional.min(self.params.len());
        let found_caller = if bound != self.params.len() {
            let rest = &self.params[bound..];
            left.retain(|k| !rest.contains(k));
            rest.contains(&"caller")
        } else {
            self.params.contains(&"caller")
        };
        if caller && !found_caller {
            if let Some(at) = left.iter().position(|k| *k == "caller") {
                left.remove(at);
            }
        }
        if !kwargs && !left.is_empty() {
            if left.contains(&"caller") {
                return Some(format!(
                    "macro '{name}' was invoked with two values for the special caller argument. This is most likely a bug."
                ));
            }
            return Some(format!(
                "macro '{name}' takes no keyword argument '{}'",
                left[0]
            ));
        }
        if !varargs && positional > self.params.len() {
            return Some(format!(
                "macro '{name}' takes not more than {} argument(s)",
                self.params.len()
            ));
        }
        None
    }

    /// Whether the body names `varargs` or `kwargs`: calls then go through [`CALL_FUNCTION`].
    pub fn packs(&self) -> bool {
        self.uses[1] || self.uses[2]
    }

    /// The parameters the macro's definition gains for the arguments [`CALL_FUNCTION`] packs,
    /// with the values jinja2 gives them when nothing is left over.
    pub fn packed_params(&self) -> Vec<&'static str> {
        let mut params = Vec::new();
        if self.uses[1] {
            params.push("varargs=()");
        }
        if self.uses[2] {
            params.push("kwargs={}");
        }
        params
    }

    /// The parameters with a default.
    pub fn defaulted(&self) -> &[&'a str] {
        &self.params[self.first_default..]
    }

    /// Whether the argument at `position`, or named `name`, binds a parameter with a default.
    pub fn binds_default(&self, position: Option<usize>, name: Option<&str>) -> bool {
        match (position, name) {
            (Some(i), _) => i >= self.first_default && i < self.params.len(),
            (None, Some(name)) => self.defaulted().contains(&name),
            _ => false,
        }
    }
}

/// The macros `tree` (parsed from `source`) defines, by name. A name defined twice with
/// different parameters is left out: which definition a call reaches is not known ahead.
pub fn signatures<'a>(source: &str, tree: &ast::Stmt<'a>) -> HashMap<&'a str, Signature<'a>> {
    let mut found: HashMap<&'a str, Option<Signature<'a>>> = HashMap::new();
    collect(source, tree, &mut found);
    found
        .into_iter()
        .filter_map(|(name, sig)| Some((name, sig?)))
        .collect()
}

fn collect<'a>(
    source: &str,
    stmt: &ast::Stmt<'a>,
    found: &mut HashMap<&'a str, Option<Signature<'a>>>,
) {
    let all = |stmts: &[ast::Stmt<'a>], found: &mut HashMap<_, _>| {
        stmts.iter().for_each(|s| collect(source, s, found));
    };
    match stmt {
        ast::Stmt::Template(t) => all(&t.children, found),
        ast::Stmt::ForLoop(f) => {
            all(&f.body, found);
            all(&f.else_body, found);
        }
        ast::Stmt::IfCond(c) => {
            all(&c.true_body, found);
            all(&c.false_body, found);
        }
        ast::Stmt::WithBlock(w) => all(&w.body, found),
        ast::Stmt::SetBlock(s) => all(&s.body, found),
        ast::Stmt::AutoEscape(a) => all(&a.body, found),
        ast::Stmt::FilterBlock(f) => all(&f.body, found),
        ast::Stmt::Block(b) => all(&b.body, found),
        ast::Stmt::Macro(m) => {
            let sig = Signature::of(source, m);
            found
                .entry(m.name)
                .and_modify(|known| {
                    if *known != sig {
                        *known = None;
                    }
                })
                .or_insert(sig);
            all(&m.body, found);
        }
        ast::Stmt::CallBlock(c) => all(&c.macro_decl.body, found),
        _ => {}
    }
}

/// The function a call of a macro goes through where minijinja's binding of the arguments would
/// differ from jinja2's (see `python_rewrite`): `__sft_py_call(f, args...)`.
pub const CALL_FUNCTION: &str = "__sft_py_call";

/// [`CALL_FUNCTION`]: calls `callee` as jinja2 calls a macro. The positional arguments beyond
/// its parameters go to its `varargs` parameter as a tuple, the keyword arguments that name none
/// of the parameters left after them to its `kwargs` parameter as a dict, in call order (a call
/// block's `caller` among them where the body never calls it). Where the macro does not catch
/// them, jinja2's `TypeError`, keyword arguments checked first.
pub fn call_function(state: &mut State, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    let mut args = args.0.into_iter().map(ValueOrKwargs::into_value);
    let callee = args.next().unwrap_or_default();
    let mut positional: Vec<Value> = args.collect();
    // minijinja reads an undefined value as empty keyword arguments: a last positional argument
    // that is undefined stays one.
    let last_keywords = positional.last().filter(|v| !v.is_undefined());
    let keywords = match last_keywords.map(|v| Kwargs::try_from(v.clone())) {
        Some(Ok(kwargs)) => {
            positional.pop();
            Some(kwargs)
        }
        _ => None,
    };
    if let Some(hint) = super::python_undefined::hint_of(&callee) {
        return Err(super::python_undefined::refuse(hint));
    }
    if !super::python_semantics::is_macro(&callee) {
        // Not a macro after all (a name set to something else, a `caller` outside a call
        // block): Python's `TypeError` for data, the engine's own call for anything else.
        if matches!(
            callee.kind(),
            ValueKind::None
                | ValueKind::Bool
                | ValueKind::Number
                | ValueKind::String
                | ValueKind::Seq
                | ValueKind::Map
        ) {
            let kind = super::python_semantics::python_type_name(&callee);
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("'{kind}' object is not callable"),
            ));
        }
        positional.extend(keywords.map(Value::from));
        return callee.call(state, &positional);
    }
    let declared: Vec<String> = callee
        .get_attr("arguments")
        .ok()
        .and_then(|a| a.try_iter().ok())
        .map(|names| {
            names
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let catches = |name: &str| declared.iter().any(|n| n == name);
    let (varargs, kwargs) = (catches("varargs"), catches("kwargs"));
    let params: Vec<&str> = declared
        .iter()
        .map(String::as_str)
        .filter(|n| *n != "varargs" && *n != "kwargs")
        .collect();
    let takes_caller = callee.get_attr("caller").is_ok_and(|c| c.is_true());
    // A call block's own macro is anonymous in jinja2: `macro None takes ...`.
    let name = match callee.get_attr("name").ok().filter(|n| !n.is_undefined()) {
        Some(n) if n.as_str() != Some("caller") => format!("'{n}'"),
        _ => "None".to_string(),
    };
    let type_error = |message: String| Err(Error::new(ErrorKind::InvalidOperation, message));
    let unbound = &params[positional.len().min(params.len())..];
    let mut passed: Vec<(String, Value)> = Vec::new();
    let mut caught: Vec<(Value, Value)> = Vec::new();
    for key in keywords.iter().flat_map(|k| k.args()) {
        let value: Value = keywords
            .as_ref()
            .map_or(Ok(Value::UNDEFINED), |k| k.peek(key))?;
        if unbound.contains(&key) || (key == "caller" && takes_caller) {
            passed.push((key.to_string(), value));
        } else {
            caught.push((Value::from(key), value));
        }
    }
    if !kwargs {
        if caught.iter().any(|(k, _)| k.as_str() == Some("caller")) {
            return type_error(format!(
                "macro {name} was invoked with two values for the special caller argument. This is most likely a bug."
            ));
        }
        if let Some((key, _)) = caught.first() {
            return type_error(format!("macro {name} takes no keyword argument '{key}'"));
        }
    }
    let extra = positional.split_off(positional.len().min(params.len()));
    if !extra.is_empty() && !varargs {
        return type_error(format!(
            "macro {name} takes not more than {} argument(s)",
            params.len()
        ));
    }
    if varargs {
        passed.push(("varargs".into(), Value::from_object(Tuple::from(extra))));
    }
    if kwargs {
        passed.push(("kwargs".into(), Value::from_pairs(caught)));
    }
    positional.push(Value::from(Kwargs::from_iter(passed)));
    callee.call(state, &positional)
}

/// The `raise` a call jinja2 refuses gets as its last keyword argument, so that it raises
/// after the call's arguments are evaluated, as jinja2 does: `__sft_py_refused=raise('...')`.
pub const REFUSED_CALL_ARGUMENT: &str = "__sft_py_refused";
/// The function that raises a refused call's `TypeError`.
pub const REFUSE_FUNCTION: &str = "__sft_py_refuse";

/// [`REFUSE_FUNCTION`]: Python's `TypeError` with `message`.
pub fn refuse(message: String) -> Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(
        minijinja::ErrorKind::InvalidOperation,
        message,
    ))
}

/// Where the opening tag of macro `m` ends in `source` (just after its `%}`), and the
/// whitespace mark before that `%}` (`-`, `+` or none).
pub fn opening_tag_end<'s>(
    source: &'s str,
    m: &ast::Spanned<ast::Macro>,
) -> Option<(usize, &'s str)> {
    let close = params_close(source, m)?;
    let tail = source[close + 1..].trim_start();
    let (mark, tail) = match tail.strip_prefix(['-', '+']) {
        Some(t) => (&tail[..1], t),
        None => ("", tail),
    };
    tail.starts_with("%}")
        .then(|| (source.len() - tail.len() + 2, mark))
}

/// Where the `)` that closes the parameters of macro `m` is in `source`.
pub fn params_close(source: &str, m: &ast::Spanned<ast::Macro>) -> Option<usize> {
    let after_params = match m
        .args
        .iter()
        .chain(&m.defaults)
        .map(|e| e.span().end_offset as usize)
        .max()
    {
        Some(end) => end,
        None => {
            // No parameters: the `(` after `macro` and the name.
            let start = m.span().start_offset as usize;
            let tag = source.get(start..)?;
            let named = tag.find("macro")? + "macro".len();
            let name = named + tag[named..].find(m.name)? + m.name.len();
            start + name + tag[name..].find('(')? + 1
        }
    };
    Some(after_params + source.get(after_params..)?.find(')')?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_round_trips_to_an_undefined_value() {
        let marked = passed_filter(Value::UNDEFINED);
        assert!(!marked.is_undefined());
        assert!(unpass_filter(marked).is_undefined());
        assert_eq!(passed_filter(Value::from(3)), Value::from(3));
        assert_eq!(unpass_filter(Value::from("x")), Value::from("x"));
    }

    #[test]
    fn calls_jinja2_refuses_are_named_as_jinja2_names_them() {
        let source =
            "{% macro f(a, b=1) %}{% endmacro %}{% macro w() %}{{ caller() }}{% endmacro %}\
                      {% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}";
        let tree = minijinja::machinery::parse(source, "t", Default::default()).unwrap();
        let found = signatures(source, &tree);
        let (f, w, v) = (&found["f"], &found["w"], &found["v"]);
        // jinja2 binds `b` by position, and the keyword is one it does not take.
        assert_eq!(
            f.call_error("f", 2, &["b"], false).as_deref(),
            Some("macro 'f' takes no keyword argument 'b'")
        );
        assert_eq!(f.call_error("f", 1, &["b"], false), None);
        assert_eq!(
            f.call_error("f", 1, &["c"], false).as_deref(),
            Some("macro 'f' takes no keyword argument 'c'")
        );
        assert_eq!(
            f.call_error("f", 3, &[], false).as_deref(),
            Some("macro 'f' takes not more than 2 argument(s)")
        );
        assert_eq!(
            f.call_error("f", 0, &[], true).as_deref(),
            Some("macro 'f' was invoked with two values for the special caller argument. This is most likely a bug.")
        );
        assert_eq!(w.call_error("w", 0, &[], true), None);
        assert_eq!(v.call_error("v", 5, &["x"], false), None);
    }

    #[test]
    fn signatures_know_the_parameters_with_defaults() {
        let source = "{% macro f(a, b='B', c=1) %}{% endmacro %}{% macro g(a) %}{% endmacro %}\
                      {% macro h(a=1) %}{% endmacro %}{% macro h(b=1) %}{% endmacro %}";
        let tree = minijinja::machinery::parse(source, "t", Default::default()).expect("it parses");
        let found = signatures(source, &tree);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found["g"].defaulted().is_empty());
        let f = &found["f"];
        assert_eq!(f.defaulted(), ["b", "c"]);
        assert!(!f.binds_default(Some(0), None));
        assert!(f.binds_default(Some(1), None));
        assert!(!f.binds_default(Some(3), None));
        assert!(f.binds_default(None, Some("c")));
        assert!(!f.binds_default(None, Some("a")));
    }
}
