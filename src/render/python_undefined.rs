//! jinja2's undefined values name what was undefined: `'x' is undefined`, `'dict object' has
//! no attribute 'name'`, `list object has no element 0`, `No first item, sequence was empty.`;
//! an operation Python refuses on one raises `UndefinedError` with that text. minijinja's
//! undefined value records nothing.
//!
//! Renders are not slowed for it. Where an interpreted render fails, the template is rendered
//! once more in a diagnostic environment: its source rewritten so that every variable, attribute
//! and item lookup that finds nothing gives a [`HintedUndefined`] carrying jinja2's text, and
//! the operations Python refuses on an undefined value record the first one they meet
//! ([`take_first_refusal`]). That text is Python's message for the failure. Only the message
//! of a failed render changes: what renders, and how, stays the interpreter's.

use std::cell::RefCell;
use std::sync::Arc;

use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

use super::python_semantics::{self, python_type_name, DICT_METHODS};

/// The filter a variable's value passes through: `__sft_py_var('name')`.
pub const VAR_FILTER: &str = "__sft_py_var";
/// The filter an attribute lookup becomes: `x|__sft_py_attr('name')`.
pub const ATTR_FILTER: &str = "__sft_py_attr";
/// The filter an item lookup becomes: `x|__sft_py_item(key)`.
pub const ITEM_FILTER: &str = "__sft_py_item";
/// The filter a macro's parameter without a default passes through at the body's start:
/// `__sft_py_param('name')`.
pub const PARAM_FILTER: &str = "__sft_py_param";
/// The filter `caller` passes through where a macro calls it: `caller|__sft_py_caller`.
pub const CALLER_FILTER: &str = "__sft_py_caller";
/// The function a called name passes through: `__sft_py_callee(name, 'name')(args)`.
pub const CALLEE_FUNCTION: &str = "__sft_py_callee";
/// The function a `not` that jinja2 reads as a variable becomes: `__sft_py_not(x)`.
pub const NOT_CALL_FUNCTION: &str = "__sft_py_not";
/// The function an inline `if` without `else` gives when false: `__sft_py_noelse(line)`.
pub const NO_ELSE_FUNCTION: &str = "__sft_py_noelse";

thread_local! {
    /// The text of the first undefined value an operation refused, in the diagnostic render
    /// running on this thread.
    static FIRST_REFUSAL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Forgets what an earlier diagnostic render recorded.
pub fn clear_refusals() {
    FIRST_REFUSAL.with(|f| f.borrow_mut().take());
}

/// The text of the first undefined value an operation refused since [`clear_refusals`].
pub fn take_first_refusal() -> Option<String> {
    FIRST_REFUSAL.with(|f| f.borrow_mut().take())
}

/// jinja2's `UndefinedError` for `hint`, recorded if it is the render's first.
pub fn refuse(hint: &str) -> Error {
    FIRST_REFUSAL.with(|f| {
        f.borrow_mut().get_or_insert_with(|| hint.to_string());
    });
    Error::new(ErrorKind::UndefinedError, hint.to_string())
}

/// An undefined value of the diagnostic render, with jinja2's text for it. Like jinja2's
/// `Undefined`, it is false, prints nothing, iterates as nothing and has length 0; looking into
/// it or calling it refuses.
#[derive(Debug)]
pub struct HintedUndefined {
    hint: String,
}

impl HintedUndefined {
    pub fn value(hint: String) -> Value {
        Value::from_object(HintedUndefined { hint })
    }
}

impl Object for HintedUndefined {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Iterable
    }

    fn get_value(self: &Arc<Self>, _key: &Value) -> Option<Value> {
        refuse(&self.hint);
        None
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Empty
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(0)
    }

    fn is_true(self: &Arc<Self>) -> bool {
        false
    }

    fn call(self: &Arc<Self>, _: &mut State<'_, '_>, _: &[Value]) -> Result<Value, Error> {
        Err(refuse(&self.hint))
    }

    fn call_method(
        self: &Arc<Self>,
        _: &mut State<'_, '_>,
        _: &str,
        _: &[Value],
    ) -> Result<Value, Error> {
        Err(refuse(&self.hint))
    }

    fn render(self: &Arc<Self>, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Ok(())
    }
}

/// The hint of `value` where it is a [`HintedUndefined`].
pub fn hint_of(value: &Value) -> Option<&str> {
    value
        .downcast_object_ref::<HintedUndefined>()
        .map(|u| u.hint.as_str())
}

/// Whether `value` is undefined, plain or hinted.
pub fn is_undefined(value: &Value) -> bool {
    value.is_undefined() || hint_of(value).is_some()
}

/// Refuses where `value` is a hinted undefined value (an operation Python refuses on it).
pub fn refuse_hinted(value: &Value) -> Result<(), Error> {
    match hint_of(value) {
        Some(hint) => Err(refuse(hint)),
        None => Ok(()),
    }
}

/// Refuses an undefined value, plain (jinja2's `UndefinedError`, named by the diagnostic render)
/// or hinted: what Python's use of one raises.
pub fn refuse_undefined(value: &Value) -> Result<(), Error> {
    refuse_hinted(value)?;
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    Ok(())
}

/// jinja2's `object_type_repr`: `None`, or the type's name and ` object` (with its module
/// outside Python's builtins).
pub fn object_type_repr(value: &Value) -> String {
    match python_type_name(value) {
        "NoneType" => "None".to_string(),
        "Macro" => "jinja2.runtime.Macro object".to_string(),
        "Undefined" => "jinja2.runtime.Undefined object".to_string(),
        python_semantics::GROUP_TUPLE => "jinja2.filters._GroupTuple object".to_string(),
        name => format!("{name} object"),
    }
}

/// [`VAR_FILTER`]: the variable's value, or a hinted undefined value naming it.
pub fn var_filter(value: Value, name: &str) -> Value {
    if value.is_undefined() {
        return HintedUndefined::value(format!("'{name}' is undefined"));
    }
    value
}

/// [`CALLEE_FUNCTION`]: [`var_filter`] of a called name.
pub fn callee_function(value: Value, name: &str) -> Value {
    var_filter(value, name)
}

/// [`PARAM_FILTER`]: the argument, or where none was given, jinja2's undefined value for it.
pub fn param_filter(value: Value, name: &str) -> Value {
    if value.is_undefined() {
        return HintedUndefined::value(format!("parameter '{name}' was not provided"));
    }
    value
}

/// [`CALLER_FILTER`]: the call block's `caller`, or where the macro was called without one,
/// jinja2's undefined value for it.
pub fn caller_filter(value: Value) -> Value {
    if value.is_undefined() {
        return HintedUndefined::value("No caller defined".to_string());
    }
    value
}

/// [`ATTR_FILTER`]: `value.name` as jinja2 looks it up (dict methods first), or a hinted
/// undefined value naming the attribute.
pub fn attr_filter(value: Value, name: &str) -> Result<Value, Error> {
    refuse_hinted(&value)?;
    let found = if DICT_METHODS.contains(&name) || python_semantics::MACRO_FIELDS.contains(&name) {
        python_semantics::getattr_filter(value.clone(), name)?
    } else {
        value.get_attr(name)?
    };
    if !found.is_undefined() {
        return Ok(found);
    }
    if value.kind() == ValueKind::Plain && matches!(name, "previtem" | "nextitem") {
        let which = if name == "previtem" {
            "previous"
        } else {
            "next"
        };
        return Ok(HintedUndefined::value(format!("there is no {which} item")));
    }
    Ok(HintedUndefined::value(format!(
        "'{}' has no attribute '{name}'",
        object_type_repr(&value)
    )))
}

/// [`ITEM_FILTER`]: `value[key]` as jinja2 looks it up (the item, then for a string key the
/// attribute), or a hinted undefined value naming the element or the attribute.
pub fn item_filter(value: Value, key: Value) -> Result<Value, Error> {
    refuse_hinted(&value)?;
    let found = match key.as_str() {
        Some(name) if key.kind() == ValueKind::String && DICT_METHODS.contains(&name) => {
            python_semantics::getitem_filter(value.clone(), name)?
        }
        _ => value.get_item(&key)?,
    };
    if !found.is_undefined() {
        return Ok(found);
    }
    let hint = match key.as_str() {
        Some(name) if key.kind() == ValueKind::String => {
            format!("'{}' has no attribute '{name}'", object_type_repr(&value))
        }
        _ => format!(
            "{} has no element {}",
            object_type_repr(&value),
            super::python_value::py_repr(&key)
        ),
    };
    Ok(HintedUndefined::value(hint))
}

/// [`NOT_CALL_FUNCTION`]: jinja2's call of its undefined variable `not`.
pub fn not_call(_args: minijinja::value::Rest<Value>) -> Result<Value, Error> {
    Err(refuse("'not' is undefined"))
}

/// [`NO_ELSE_FUNCTION`]: what an inline `if` without `else` gives when its test is false.
pub fn no_else(line: u32) -> Value {
    HintedUndefined::value(format!(
        "the inline if-expression on line {line} evaluated to false and no else section was defined."
    ))
}

/// `filter`'s result, or where it gives an undefined value for an empty sequence, jinja2's
/// hinted one (`first`, `last`, `min`, `max`).
pub fn empty_hinted(result: Value, which: &str) -> Value {
    if result.is_undefined() {
        return HintedUndefined::value(format!("No {which} item, sequence was empty."));
    }
    result
}

/// jinja2's `defined` test, for hinted undefined values too.
pub fn defined_test(value: &Value) -> bool {
    !is_undefined(value)
}

/// jinja2's `undefined` test.
pub fn undefined_test(value: &Value) -> bool {
    is_undefined(value)
}

/// jinja2's `default`: `default` (or `''`) where `value` is undefined, or false with
/// `boolean`.
pub fn default_filter(
    value: Value,
    default: Option<Value>,
    boolean: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let undefined = is_undefined(&value);
    super::python_filters::default_of(value, undefined, default, boolean, &kwargs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_name_what_they_missed() {
        let dict = crate::example::json_value::to_template(&serde_json::json!({"a": 1}));
        assert_eq!(
            hint_of(&attr_filter(dict.clone(), "b").unwrap()),
            Some("'dict object' has no attribute 'b'")
        );
        assert_eq!(
            hint_of(&item_filter(Value::from(vec![1]), Value::from(3)).unwrap()),
            Some("list object has no element 3")
        );
        assert_eq!(
            hint_of(&item_filter(Value::from(()), Value::from("k")).unwrap()),
            Some("'None' has no attribute 'k'")
        );
        assert_eq!(
            hint_of(&var_filter(Value::UNDEFINED, "x")),
            Some("'x' is undefined")
        );
        assert_eq!(attr_filter(dict, "a").unwrap(), Value::from(1));
    }

    #[test]
    fn the_first_refusal_is_kept() {
        clear_refusals();
        let first = var_filter(Value::UNDEFINED, "x");
        let second = var_filter(Value::UNDEFINED, "y");
        assert!(refuse_hinted(&first).is_err());
        assert!(refuse_hinted(&second).is_err());
        assert_eq!(take_first_refusal().as_deref(), Some("'x' is undefined"));
        assert_eq!(take_first_refusal(), None);
    }
}
