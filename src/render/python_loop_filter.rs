//! A recursive loop's filter (`{% for x in items if x.shown recursive %}`) at every level of the
//! recursion, as jinja2 applies it: to the outermost items and to what each `loop(children)`
//! call iterates. minijinja filters the outermost items only (its recursion jumps in after the
//! filter), so the source rewrite (`python_rewrite`) passes the argument of each `loop(...)` of
//! such a loop through [`KEEP_FILTER`], with the loop's names and its condition's text.

use minijinja::value::Value;
use minijinja::{Error, State};

use super::python_unpack;

/// `loop(children)` of a filtered recursive loop becomes
/// `loop(children|__sft_py_loop_keep('x', 'x.shown'))`.
pub const KEEP_FILTER: &str = "__sft_py_loop_keep";

/// [`KEEP_FILTER`]: the items of `items` for which `condition` (the loop's filter, as the
/// rewrite left it) is true with the loop's `target` names bound to the item, and every other
/// name the condition reads bound as it is where `loop(...)` is called.
pub fn keep_filter(
    state: &State,
    items: Value,
    target: &str,
    condition: &str,
) -> Result<Value, Error> {
    let expression = state.env().compile_expression(condition)?;
    let names: Vec<&str> = target.split(',').map(str::trim).collect();
    let mut bound: Vec<(String, Value)> = expression
        .undeclared_variables(false)
        .into_iter()
        .filter(|name| !names.contains(&name.as_str()))
        .filter_map(|name| state.lookup(&name).map(|value| (name, value)))
        .collect();
    let outer = bound.len();
    let mut kept = Vec::new();
    for item in items.try_iter()? {
        bound.truncate(outer);
        if let [name] = names.as_slice() {
            bound.push((name.to_string(), item.clone()));
        } else {
            let parts = python_unpack::unpack_filter(item.clone(), names.len())?;
            for (name, part) in names.iter().zip(parts.try_iter()?) {
                bound.push((name.to_string(), part));
            }
        }
        let context = Value::from_pairs(bound.iter().cloned());
        if expression.eval(context)?.is_true() {
            kept.push(item);
        }
    }
    Ok(Value::from(kept))
}

/// The names a loop's target binds, as [`keep_filter`] reads them (`x`, `k, v`), or `None`
/// where it nests (`(a, b), c`), which the filter does not unpack.
pub fn target_names(target: &str) -> Option<String> {
    let names: Vec<&str> = target.split(',').map(str::trim).collect();
    let plain = names
        .iter()
        .all(|n| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_'));
    plain.then(|| names.join(", "))
}

/// A condition's text as a template string literal.
pub fn quoted(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('\'', "\\'")
        .replace('\n', "\\n")
        .replace('\r', "\\r");
    format!("'{escaped}'")
}
