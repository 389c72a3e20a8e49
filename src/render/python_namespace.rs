//! jinja2's `namespace()` for the interpreter: an object whose fields a template sets with
//! `{% set ns.name = value %}`, kept in the order they were first set (Python prints
//! `<Namespace {'b': 1, 'a': 2}>` as assigned, where minijinja's own namespace keeps key order).
//!
//! A namespace can hold itself (`{% set ns.me = ns %}`, or through a list or the `loop`
//! variable), a cycle of reference counts that nothing would free. Every namespace made during a
//! render is recorded, and the render empties them all when it ends ([`RenderNamespaces`]).
//!
//! minijinja assigns fields only to its own namespace type, so the source rewrite turns every
//! namespace assignment into a filter call: `{% set ns.name = value %}` becomes
//! `{% set __sft_py_set = (value)|__sft_py_namespace_field((ns), 'name') %}`
//! ([`FIELD_FILTER`], [`DISCARDED`]). Templates that keep minijinja's rules (MLX Node's
//! rendering, a template whose rewrite to Python's semantics failed) get that one rewrite too
//! (`python_rewrite::namespace_assignments`), so that their namespaces are freed the same way;
//! under MLX Node's rules a namespace is minijinja's in all else ([`mlx_namespace_function`],
//! [`mlx_field_filter`]): fields listed in key order, any name accepted.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Weak};

use minijinja::value::{Enumerator, Object, ObjectRepr, Value, ValueOrKwargs};
use minijinja::{Error, ErrorKind};

/// The filter a namespace assignment's value passes through (see [`field_filter`]).
pub const FIELD_FILTER: &str = "__sft_py_namespace_field";
/// The variable a rewritten namespace assignment sets instead (its value is never read).
pub const DISCARDED: &str = "__sft_py_set";

/// A namespace's fields, in the order each was first set, or in key order (minijinja's).
#[derive(Debug, Default)]
pub struct Namespace {
    fields: Mutex<Vec<(Arc<str>, Value)>>,
    key_order: bool,
}

impl Namespace {
    fn set(&self, name: &str, value: Value) {
        let mut fields = self.fields.lock().unwrap_or_else(|e| e.into_inner());
        if self.key_order {
            match fields.binary_search_by(|(n, _)| (**n).cmp(name)) {
                Ok(at) => fields[at].1 = value,
                Err(at) => fields.insert(at, (name.into(), value)),
            }
            return;
        }
        match fields.iter_mut().find(|(n, _)| &**n == name) {
            Some(slot) => slot.1 = value,
            None => fields.push((name.into(), value)),
        }
    }

    /// Drops every field: what the namespace held no longer holds it back.
    fn empty(&self) {
        let fields = std::mem::take(&mut *self.fields.lock().unwrap_or_else(|e| e.into_inner()));
        drop(fields);
    }
}

impl Object for Namespace {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let name = key.as_str()?;
        let fields = self.fields.lock().unwrap_or_else(|e| e.into_inner());
        fields
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v.clone())
    }

    // The names as values, as minijinja's namespace lists them: what tells a namespace (an
    // object of fields) from a dict (see `python_semantics::is_namespace`).
    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let fields = self.fields.lock().unwrap_or_else(|e| e.into_inner());
        Enumerator::Values(fields.iter().map(|(n, _)| Value::from(n.clone())).collect())
    }
}

thread_local! {
    /// The namespaces made by the renders running on this thread, `None` outside a render.
    static MADE: RefCell<Option<Vec<Weak<Namespace>>>> = const { RefCell::new(None) };
}

/// The namespaces of one render: each made while it lives is emptied when it is dropped, so
/// that a namespace holding itself is freed with the render. A render inside another (the
/// diagnostic render) empties only its own.
pub struct RenderNamespaces {
    /// How many namespaces the enclosing renders had made when this one started.
    from: usize,
    outermost: bool,
}

impl RenderNamespaces {
    pub fn start() -> Self {
        MADE.with(|made| {
            let mut made = made.borrow_mut();
            let outermost = made.is_none();
            let list = made.get_or_insert_with(Vec::new);
            RenderNamespaces {
                from: list.len(),
                outermost,
            }
        })
    }
}

impl Drop for RenderNamespaces {
    fn drop(&mut self) {
        let ours: Vec<Weak<Namespace>> = MADE.with(|made| {
            let mut made = made.borrow_mut();
            let ours = match made.as_mut() {
                Some(list) => list.split_off(self.from.min(list.len())),
                None => Vec::new(),
            };
            if self.outermost {
                *made = None;
            }
            ours
        });
        // Emptied outside the borrow: dropping a field may drop another namespace.
        for ns in ours.iter().filter_map(Weak::upgrade) {
            ns.empty();
        }
    }
}

fn made(ns: &Arc<Namespace>) {
    MADE.with(|made| {
        if let Some(list) = made.borrow_mut().as_mut() {
            list.push(Arc::downgrade(ns));
        }
    });
}

/// transformers' `namespace(...)`: its fields from a dict or keyword arguments, in their order;
/// a field named with a leading `_` is refused.
pub fn namespace_function(defaults: Option<ValueOrKwargs>) -> Result<Value, Error> {
    made_namespace(defaults, false)
}

/// minijinja's `namespace(...)`, for MLX Node's rendering: its fields listed in key order, any
/// name accepted.
pub fn mlx_namespace_function(defaults: Option<ValueOrKwargs>) -> Result<Value, Error> {
    made_namespace(defaults, true)
}

fn made_namespace(defaults: Option<ValueOrKwargs>, mlx: bool) -> Result<Value, Error> {
    let ns = Arc::new(Namespace {
        fields: Mutex::default(),
        key_order: mlx,
    });
    if let Some(defaults) = defaults.map(ValueOrKwargs::into_value) {
        let pairs = defaults
            .as_object()
            .filter(|o| o.repr() == ObjectRepr::Map)
            .and_then(|o| o.try_iter_pairs())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "expected object or keyword arguments, got {}",
                        defaults.kind()
                    ),
                )
            })?;
        for (key, value) in pairs {
            if let Some(name) = key.as_str() {
                if name.starts_with('_') && !mlx {
                    return Err(private_field_error(&key));
                }
                ns.set(name, value);
            }
        }
    }
    made(&ns);
    Ok(Value::from_dyn_object(ns))
}

/// `namespace(...)` where a template's namespace assignments stay minijinja's (their rewrite
/// failed): minijinja's, which `{% set ns.name = ... %}` assigns to, after transformers' refusal
/// of a field named with a leading `_`. A namespace that holds itself there is not freed.
pub fn kept_namespace_function(defaults: Option<ValueOrKwargs>) -> Result<Value, Error> {
    let defaults = defaults.map(ValueOrKwargs::into_value);
    if let Some(keys) = defaults.as_ref().and_then(|d| d.try_iter().ok()) {
        for key in keys {
            if key.as_str().is_some_and(|k| k.starts_with('_')) {
                return Err(private_field_error(&key));
            }
        }
    }
    minijinja::functions::namespace(defaults.map(ValueOrKwargs::from))
}

/// [`FIELD_FILTER`]: `{% set target.name = value %}`, refused as jinja2 refuses it where
/// `target` is no namespace, and as transformers does for a name with a leading `_`.
pub fn field_filter(value: Value, target: Value, name: &str) -> Result<Value, Error> {
    let Some(ns) = target.downcast_object_ref::<Namespace>() else {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "cannot assign attribute on non-namespace object",
        ));
    };
    if name.starts_with('_') {
        return Err(private_field_error(&Value::from(name)));
    }
    ns.set(name, value);
    Ok(Value::from(()))
}

/// [`FIELD_FILTER`] under MLX Node's rules: minijinja's assignment, refused with its words where
/// `target` is no namespace.
pub fn mlx_field_filter(value: Value, target: Value, name: &str) -> Result<Value, Error> {
    let Some(ns) = target.downcast_object_ref::<Namespace>() else {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("can only assign to namespaces, not {}", target.kind()),
        ));
    };
    ns.set(name, value);
    Ok(Value::from(()))
}

/// transformers' refusal of a namespace field whose name starts with `_` (its
/// `TemplateNamespace`, which keeps templates from CPython's internals).
fn private_field_error(name: &Value) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got {}. Please rename the attribute.",
            super::python_value::py_repr(name)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{ChatTemplate, RenderAs, RenderOptions};

    thread_local! {
        static KEPT: RefCell<Vec<Weak<Namespace>>> = const { RefCell::new(Vec::new()) };
    }

    /// `template` rendered by the interpreter, with `keep(ns)` recording a weak reference to
    /// `ns`: the text, and whether every kept namespace is still alive after the render.
    fn render_keeping_as(mut template: ChatTemplate) -> (String, Vec<bool>) {
        template.env.add_function("keep", |ns: Value| {
            if let Some(ns) = ns.downcast_object::<Namespace>() {
                KEPT.with(|k| k.borrow_mut().push(Arc::downgrade(&ns)));
            }
            Value::from("")
        });
        KEPT.with(|k| k.borrow_mut().clear());
        let text = template
            .render_interpreted(&[], &RenderOptions::default())
            .expect("a render");
        let alive = KEPT.with(|k| k.borrow().iter().map(|w| w.upgrade().is_some()).collect());
        (text, alive)
    }

    fn render_keeping(source: &str) -> (String, Vec<bool>) {
        render_keeping_as(ChatTemplate::compile(source, Vec::new()).expect("a template"))
    }

    fn render(source: &str) -> Result<String, String> {
        let template = ChatTemplate::compile(source, Vec::new()).map_err(|e| e.message)?;
        template
            .render_interpreted(&[], &RenderOptions::default())
            .map_err(|e| e.message)
    }

    #[test]
    fn a_namespace_that_holds_itself_is_freed_with_the_render() {
        for source in [
            "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ keep(ns) }}{{ ns.a }}",
            "{% set ns = namespace(a=1) %}{% set ns.l = [ns] %}{{ keep(ns) }}{{ ns.a }}",
            "{% set ns = namespace(a=1) %}{% set ns.d = {'k': ns} %}{{ keep(ns) }}{{ ns.a }}",
            "{% set ns = namespace(a=1) %}{% for x in [ns] %}{% set ns.l = loop %}{% endfor %}{{ keep(ns) }}{{ ns.a }}",
            "{% set ns = namespace(a=1) %}{% set other = namespace(ns=ns) %}{% set ns.o = other %}{{ keep(ns) }}{{ keep(other) }}{{ ns.a }}",
            "{% macro hold(n) %}{% set n.me = n %}{% endmacro %}{% set ns = namespace(a=1) %}{{ hold(ns) }}{{ keep(ns) }}{{ ns.a }}",
            "{% set ns = namespace(a=1) %}{% set ns.me %}x{% endset %}{% set ns.me = [ns, ns.me] %}{{ keep(ns) }}{{ ns.a }}",
        ] {
            let (text, alive) = render_keeping(source);
            assert_eq!(text, "1", "{source}");
            assert!(!alive.is_empty(), "{source}: nothing kept");
            assert!(
                alive.iter().all(|a| !a),
                "{source}: a namespace outlived the render"
            );
        }
    }

    #[test]
    fn minijinja_rules_free_a_namespace_that_holds_itself_too() {
        let held = "{% set ns = namespace(b=1) %}{% set ns.me = ns %}{% set ns.l = [ns] %}{% set ns.a %}{{ ns.b }}{% endset %}{{ keep(ns) }}{{ ns.a }}{{ ns|list }}";
        // MLX Node's rendering keeps minijinja's rules: fields listed in key order.
        let mlx = ChatTemplate::compile_as(held, Vec::new(), RenderAs::MlxNode).expect("mlx");
        let (text, alive) = render_keeping_as(mlx);
        assert_eq!(text, "1['a', 'b', 'l', 'me']");
        assert_eq!(alive, [false]);
        // A recursive loop whose body can leave it early, with an `else` block: the rewrite to
        // Python's `else` cannot be written, and the template keeps minijinja's rules.
        let failed = format!(
            "{held}{{% for x in [] recursive %}}{{% if x %}}{{% break %}}{{% endif %}}{{% else %}}e{{% endfor %}}"
        );
        assert!(matches!(
            crate::render::python_rewrite::rewrite(&failed, Default::default()),
            crate::render::python_rewrite::Rewrite::Failed
        ));
        let template = ChatTemplate::compile(&failed, Vec::new()).expect("a template");
        let (text, alive) = render_keeping_as(template);
        assert_eq!(text, "1['b', 'me', 'l', 'a']e");
        assert_eq!(alive, [false]);
    }

    #[test]
    fn minijinja_rules_keep_minijinja_words_and_names() {
        let render_mlx = |source: &str| {
            ChatTemplate::compile_as(source, Vec::new(), RenderAs::MlxNode)
                .and_then(|t| t.render_interpreted(&[], &RenderOptions::default()))
                .map_err(|e| e.message)
        };
        assert_eq!(
            render_mlx("{% set ns = namespace(_b=2, a=1) %}{% set ns._c = 3 %}{{ ns._b }}{{ ns._c }}{{ ns|list }}").as_deref(),
            Ok("23['_b', '_c', 'a']")
        );
        let err = render_mlx("{% set d = {} %}{% set d.x = 1 %}").expect_err("a dict");
        assert!(
            err.contains("can only assign to namespaces, not map"),
            "{err}"
        );
    }

    #[test]
    fn a_render_that_fails_still_frees_its_namespaces() {
        let source =
            "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ keep(ns) }}{{ raise_exception('no') }}";
        let mut template = ChatTemplate::compile(source, Vec::new()).expect("a template");
        template.env.add_function("keep", |ns: Value| {
            if let Some(ns) = ns.downcast_object::<Namespace>() {
                KEPT.with(|k| k.borrow_mut().push(Arc::downgrade(&ns)));
            }
            Value::from("")
        });
        KEPT.with(|k| k.borrow_mut().clear());
        assert!(template
            .render_interpreted(&[], &RenderOptions::default())
            .is_err());
        KEPT.with(|k| {
            let kept = k.borrow();
            assert_eq!(kept.len(), 1);
            assert!(kept[0].upgrade().is_none());
        });
    }

    #[test]
    fn fields_print_in_the_order_they_were_first_set() {
        let cases = [
            (
                "{% set ns = namespace(b=1, a=2) %}{% set ns.c = 3 %}{% set ns.a = 4 %}{{ ns }}",
                "<Namespace {'b': 1, 'a': 4, 'c': 3}>",
            ),
            (
                "{% set ns = namespace({'z': 0, 'y': 1}) %}{% for i in range(2) %}{% set ns.x = i %}{% endfor %}{{ ns }}|{{ ns|list }}",
                "<Namespace {'z': 0, 'y': 1, 'x': 1}>|['z', 'y', 'x']",
            ),
            (
                "{% set ns = namespace() %}{% set ns.items = 'field' %}{% set ns.b %}x{% endset %}{% set ns.a | upper %}y{% endset %}{{ ns.items }}{{ ns }}",
                "field<Namespace {'items': 'field', 'b': 'x', 'a': 'Y'}>",
            ),
        ];
        for (source, want) in cases {
            assert_eq!(render(source).as_deref(), Ok(want), "{source}");
        }
    }

    #[test]
    fn assignments_jinja2_and_transformers_refuse() {
        let cases = [
            (
                "{% set d = {} %}{% set d.x = 1 %}",
                "cannot assign attribute on non-namespace object",
            ),
            (
                "{% set d.x = 1 %}",
                "cannot assign attribute on non-namespace object",
            ),
            (
                "{% set ns = namespace() %}{% set ns._x = 1 %}",
                "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '_x'. Please rename the attribute.",
            ),
            (
                "{% set ns = namespace(_y=1) %}",
                "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '_y'. Please rename the attribute.",
            ),
        ];
        for (source, want) in cases {
            let err = render(source).expect_err(source);
            assert!(err.contains(want), "{source}: {err}");
        }
    }
}
