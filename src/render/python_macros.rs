//! Macro arguments as jinja2 binds them: an argument that is passed keeps its value even when
//! that value is undefined (`f(b=d.missing)` gives `b` an undefined value), where minijinja
//! gives a parameter its default whenever the value it receives is undefined.
//!
//! The interpreter's source rewrite (`python_semantics`) keeps the passed undefined value
//! through minijinja's default check: at a call of a macro the template defines, every argument
//! bound to a parameter with a default passes through [`PASSED_FILTER`], which turns an
//! undefined value into a [`PassedUndefined`] marker; the macro's body starts by turning the
//! marker back into an undefined value ([`UNPASS_FILTER`]).

use std::collections::HashMap;
use std::sync::Arc;

use minijinja::machinery::ast;
use minijinja::value::{Object, ObjectRepr, Value};

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
        let params = m
            .args
            .iter()
            .map(|a| match a {
                ast::Expr::Var(v) => Some(v.id),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        // What the body names of `caller`, `varargs` and `kwargs`, read from its text: a word
        // in a string or in the template's text counts too, which only leaves a call unchecked.
        let body = opening_tag_end(source, m)
            .and_then(|(at, _)| source.get(at..m.span().end_offset as usize))
            .unwrap_or(source);
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
pub fn opening_tag_end<'s>(source: &'s str, m: &ast::Macro) -> Option<(usize, &'s str)> {
    let after_params = m
        .args
        .iter()
        .chain(&m.defaults)
        .map(|e| e.span().end_offset as usize)
        .max()?;
    let rest = source.get(after_params..)?;
    let close = rest.find(')')?;
    let tail = rest[close + 1..].trim_start();
    let (mark, tail) = match tail.strip_prefix(['-', '+']) {
        Some(t) => (&tail[..1], t),
        None => ("", tail),
    };
    tail.starts_with("%}")
        .then(|| (source.len() - tail.len() + 2, mark))
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
