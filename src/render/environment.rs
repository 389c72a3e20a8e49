//! The minijinja environment a chat template is interpreted in: Python's filters, tests,
//! functions, methods and spellings for transformers' rendering (see `python_semantics`), or
//! minijinja's own with MLX Node's `tojson` and `range` for MLX Node's.

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Rest, StringInput, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior};

use super::json_dumps::{dumps, DumpOptions};
use super::{
    generation, mlx_node, python_complex, python_filters, python_format, python_generators,
    python_iterables, python_loop_filter, python_macros, python_markup, python_namespace,
    python_ops, python_order, python_range, python_semantics, python_slice, python_str,
    python_str_format, python_str_methods, python_tests_syntax, python_text_filters,
    python_text_wrap, python_unpack, python_urlize, python_value, strftime_now,
};

/// The environment of a template with `syntax`, by MLX Node's engine rules where `mlx`.
pub(super) fn environment(mlx: bool, syntax: SyntaxConfig) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(syntax.clone());
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    // Error messages are the same in every build (minijinja adds debug details by default
    // only where debug assertions are on).
    env.set_debug(false);
    env.set_fuel(Some(super::RENDER_FUEL));
    if mlx {
        env.set_unknown_method_callback(python_method);
    } else {
        env.set_unknown_method_callback(|state, value, method, args| {
            let called = match python_markup::method(value, method, args, |plain, args| {
                jinja2_method(state, plain, method, args)
            }) {
                Some(result) => result,
                None => jinja2_method(state, value, method, args),
            };
            // What a defined value lacks is jinja2's undefined attribute, which refuses a call
            // with its own text (an undefined receiver is named by the diagnostic render).
            called.map_err(|e| {
                if e.kind() != ErrorKind::UnknownMethod
                    || super::python_undefined::is_undefined(value)
                {
                    return e;
                }
                let owner = super::python_undefined::object_type_repr(value);
                Error::new(
                    ErrorKind::UndefinedError,
                    format!("'{owner}' has no attribute '{method}'"),
                )
            })
        });
    }
    env.set_formatter(python_formatter);
    if mlx {
        env.add_filter("tojson", mlx_node::compact_tojson);
    } else {
        env.add_filter("tojson", tojson_filter);
    }
    env.add_filter("trim", trim_filter);
    if !mlx {
        env.add_filter("pprint", python_value::pprint_filter);
    }
    env.add_filter("string", string_filter);
    env.add_filter(generation::MARK_FILTER, generation::mark_filter);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_function(
        super::python_undefined::NOT_CALL_FUNCTION,
        super::python_undefined::not_call,
    );
    if mlx {
        env.add_function("range", python_range::range_list);
        env.add_filter(
            python_namespace::FIELD_FILTER,
            python_namespace::mlx_field_filter,
        );
        env.add_function("namespace", python_namespace::mlx_namespace_function);
    } else {
        env.add_function("range", python_range::range);
    }
    env.add_test("iterable", is_iterable);
    if !mlx {
        env.add_filter(
            python_semantics::ITERABLE_FILTER,
            python_semantics::iterable_filter,
        );
        env.add_filter(
            python_semantics::GETATTR_FILTER,
            python_semantics::getattr_filter,
        );
        env.add_filter(
            python_semantics::GETITEM_FILTER,
            python_semantics::getitem_filter,
        );
        env.add_filter(
            python_semantics::COMPARE_FILTER,
            python_semantics::compare_filter,
        );
        env.add_filter(python_slice::SLICE_FILTER, python_slice::slice_filter);
        env.add_filter(python_semantics::STR_FILTER, string_filter);
        env.add_filter(
            python_semantics::CHAIN_FILTER,
            python_semantics::chain_filter,
        );
        env.add_filter(
            python_semantics::HASHABLE_FILTER,
            python_semantics::hashable_filter,
        );
        env.add_filter(python_ops::ARITH_FILTER, python_ops::arith_filter);
        env.add_filter(python_macros::PASSED_FILTER, python_macros::passed_filter);
        env.add_function(python_macros::REFUSE_FUNCTION, python_macros::refuse);
        env.add_function(python_macros::CALL_FUNCTION, python_macros::call_function);
        env.add_filter(
            python_semantics::BLOCK_TEXT_FILTER,
            python_semantics::block_text_filter,
        );
        env.add_function(
            python_semantics::CYCLE_FUNCTION,
            python_semantics::cycle_function,
        );
        env.add_filter(python_unpack::UNPACK_FILTER, python_unpack::unpack_filter);
        env.add_filter(
            python_loop_filter::KEEP_FILTER,
            python_loop_filter::keep_filter,
        );
        env.add_filter(
            python_unpack::UNPACK_EACH_FILTER,
            python_unpack::unpack_each_filter,
        );
        env.add_filter(python_macros::UNPASS_FILTER, python_macros::unpass_filter);
        env.add_filter(python_ops::NEG_FILTER, python_ops::neg_filter);
        env.add_filter(python_ops::FOLDED_FILTER, python_ops::folded_filter);
        env.add_filter("map", python_generators::map_filter);
        env.add_filter("select", python_generators::select_filter);
        env.add_filter("reject", python_generators::reject_filter);
        env.add_filter("selectattr", python_generators::selectattr_filter);
        env.add_filter("rejectattr", python_generators::rejectattr_filter);
        env.add_filter("int", python_filters::int_filter);
        env.add_filter("float", python_filters::float_filter);
        env.add_filter("center", python_filters::center_filter);
        env.add_filter("truncate", python_filters::truncate_filter);
        env.add_filter("wordcount", python_filters::wordcount_filter);
        env.add_filter("first", python_filters::first_filter);
        env.add_filter("last", python_filters::last_filter);
        env.add_filter("length", python_filters::length_filter);
        env.add_filter("count", python_filters::length_filter);
        env.add_filter("list", python_filters::list_filter);
        env.add_filter("items", python_filters::items_filter);
        env.add_filter("sum", python_filters::sum_filter);
        env.add_filter("dictsort", python_order::dictsort_filter);
        env.add_filter("join", python_filters::join_filter);
        env.add_filter("round", python_filters::round_filter);
        env.add_filter("batch", python_iterables::batch_filter);
        env.add_filter("slice", python_iterables::slice_filter);
        env.add_filter("unique", python_iterables::unique_filter);
        env.add_filter("groupby", python_order::groupby_filter);
        env.add_filter(
            python_namespace::FIELD_FILTER,
            python_namespace::field_filter,
        );
        env.add_function("namespace", python_namespace::namespace_function);
        env.add_filter("attr", python_semantics::attr_filter);
        env.add_filter("forceescape", python_text_filters::forceescape_filter);
        env.add_filter("escape", python_text_filters::escape_filter);
        env.add_filter("default", python_filters::default_filter);
        env.add_filter("d", python_filters::default_filter);
        env.add_filter("e", python_text_filters::escape_filter);
        env.add_filter("xmlattr", python_text_filters::xmlattr_filter);
        env.add_filter("urlencode", python_text_filters::urlencode_filter);
        env.add_filter("filesizeformat", python_text_filters::filesizeformat_filter);
        env.add_filter("striptags", python_text_filters::striptags_filter);
        env.add_filter("wordwrap", python_text_wrap::wordwrap_filter);
        env.add_filter("urlize", python_urlize::urlize_filter);
        env.add_filter("reverse", python_iterables::reverse_filter);
        env.add_global("dict", python_iterables::TemplateDict::global());
        env.add_filter(
            python_tests_syntax::IS_FILTER,
            python_tests_syntax::is_filter,
        );
        env.add_filter("min", python_order::min_filter);
        env.add_filter("max", python_order::max_filter);
        env.add_filter("sort", python_order::sort_filter);
        for (name, test) in [
            (
                "lt",
                python_order::lt_test as fn(&Value, &Value) -> Result<bool, Error>,
            ),
            ("lessthan", python_order::lt_test),
            ("<", python_order::lt_test),
            ("le", python_order::le_test),
            ("<=", python_order::le_test),
            ("gt", python_order::gt_test),
            ("greaterthan", python_order::gt_test),
            (">", python_order::gt_test),
            ("ge", python_order::ge_test),
            (">=", python_order::ge_test),
        ] {
            env.add_test(name, test);
        }
        env.add_filter("upper", python_filters::upper_filter);
        env.add_filter("indent", python_filters::indent_filter);
        env.add_filter("abs", python_filters::abs_filter);
        env.add_filter("format", python_format::format_filter);
        env.add_filter("lower", python_filters::lower_filter);
        env.add_test("callable", python_filters::is_callable);
        env.add_test("in", |value: Value, seq: Value| {
            python_semantics::compare_filter(value, "in", seq).map(|v| v.is_true())
        });
        add_one_argument_tests(&mut env);
        env.add_test("divisibleby", python_ops::divisibleby_test);
        // jinja2's `filter` and `test`: `name in environment.filters`, which refuses a list or
        // a dict (`unhashable type: 'dict'`) and is false for any other value that is not a
        // string; the engine's own filters are not the template's.
        for (name, filters) in [("filter", true), ("test", false)] {
            env.add_test(name, move |state: &State, value: Value| {
                let Some(name) = value.as_str().filter(|_| value.kind() == ValueKind::String)
                else {
                    return python_semantics::hashable(&value).map(|_| false);
                };
                Ok::<_, Error>(
                    !name.starts_with("__sft_py")
                        && match filters {
                            true => minijinja::tests::is_filter(state, name),
                            false => minijinja::tests::is_test(state, name),
                        },
                )
            });
        }
        add_markup_keeping_filters(&mut env);
    } else {
        // MLX Node's engine has no Markup: what `safe` and `escape` give is a plain string.
        env.add_filter("safe", |v: String| Value::from(v));
        for name in ["escape", "e"] {
            env.add_filter(name, |state: &mut State, v: Value| {
                minijinja::filters::escape(state, &v).map(plain_string)
            });
        }
    }
    env
}

/// `value` as a plain string where it is a safe one.
fn plain_string(value: Value) -> Value {
    if value.kind() == ValueKind::String && value.is_safe() {
        return Value::from(value.as_str().unwrap_or_default());
    }
    value
}

/// The filters that keep a Markup string Markup in jinja2 (they call its `str` methods, which
/// markupsafe wraps), over what they do to a plain string.
fn add_markup_keeping_filters(env: &mut Environment<'static>) {
    use python_markup::keep;
    env.add_filter("upper", |state: &State, v: Value| {
        python_filters::upper_filter(state, v.clone()).map(|r| keep(&v, r))
    });
    env.add_filter("lower", |state: &State, v: Value| {
        python_filters::lower_filter(state, v.clone()).map(|r| keep(&v, r))
    });
    env.add_filter("trim", |v: Value, chars: Option<String>| {
        trim_filter(&v, chars).map(|r| keep(&v, r))
    });
    env.add_filter("center", |v: Value, width: Option<Value>| {
        python_filters::center_filter(v.clone(), width).map(|r| keep(&v, r))
    });
    env.add_filter("capitalize", |state: &State, v: Value| {
        let text = minijinja::filters::capitalize(StringInput::new(state, &v)?);
        Ok::<_, Error>(keep(&v, text))
    });
    env.add_filter(
        "indent",
        |v: Value,
         width: Option<Value>,
         first: Option<bool>,
         blank: Option<bool>,
         kwargs: Kwargs| {
            python_filters::indent_filter(v.clone(), width, first, blank, kwargs)
                .map(|r| keep(&v, r))
        },
    );
    // What is cut is Markup, and the `end` added to it is escaped.
    env.add_filter("truncate", |v: Value, args: Rest<Value>, kwargs: Kwargs| {
        let end = match (args.get(2), kwargs.peek::<Option<Value>>("end")) {
            (Some(end), _) => end.clone(),
            (None, Ok(Some(end))) => end,
            _ => Value::from("..."),
        };
        let cut = python_filters::truncate_filter(v.clone(), args, kwargs)?;
        if !python_markup::is_markup(&v) || cut == v {
            return Ok(cut);
        }
        let (text, end) = (
            cut.as_str().unwrap_or_default(),
            end.as_str().unwrap_or_default(),
        );
        let kept = text.strip_suffix(end).unwrap_or(text);
        Ok(python_markup::markup(format!(
            "{kept}{}",
            python_markup::escape(end)
        )))
    });
    env.add_filter("reverse", |v: Value| {
        python_iterables::reverse_filter(v.clone()).map(|r| keep(&v, r))
    });
    env.add_filter("format", |v: Value, args: Rest<Value>, kwargs: Kwargs| {
        if python_markup::is_markup(&v) && kwargs.args().next().is_none() {
            let arg = Value::from_object(minijinja::value::Tuple::new(args.to_vec()));
            return python_ops::arith_filter(v, "%", arg);
        }
        python_format::format_filter(v, args, kwargs)
    });
}

/// The environment of the diagnostic render (see `python_undefined`): transformers' rules,
/// with lookups that give named undefined values and the operations Python refuses on them
/// recording the first.
pub(super) fn diagnostic_environment(syntax: SyntaxConfig) -> Environment<'static> {
    use super::python_undefined::{self as undef, refuse_hinted};
    let mut env = environment(false, syntax);
    env.add_filter(undef::VAR_FILTER, undef::var_filter);
    env.add_function(undef::CALLEE_FUNCTION, undef::callee_function);
    env.add_filter(undef::PARAM_FILTER, undef::param_filter);
    env.add_filter(undef::CALLER_FILTER, undef::caller_filter);
    env.add_filter(undef::ATTR_FILTER, undef::attr_filter);
    env.add_filter(undef::ITEM_FILTER, undef::item_filter);
    env.add_function(undef::NO_ELSE_FUNCTION, undef::no_else);
    env.add_function(undef::NOT_CALL_FUNCTION, undef::not_call);
    env.add_test("defined", undef::defined_test);
    env.add_test("undefined", undef::undefined_test);
    env.add_filter("default", undef::default_filter);
    env.add_filter("d", undef::default_filter);
    env.add_filter("map", python_generators::hinted_map_filter);
    env.add_filter("first", |v: Value| {
        python_filters::first_filter(v).map(|r| undef::empty_hinted(r, "first"))
    });
    env.add_filter("last", |v: Value| {
        python_filters::last_filter(v).map(|r| undef::empty_hinted(r, "last"))
    });
    env.add_filter("min", |v: Value, kwargs: Kwargs| {
        python_order::min_filter(v, kwargs).map(|r| undef::empty_hinted(r, "aggregated"))
    });
    env.add_filter("max", |v: Value, kwargs: Kwargs| {
        python_order::max_filter(v, kwargs).map(|r| undef::empty_hinted(r, "aggregated"))
    });
    env.add_filter(python_ops::ARITH_FILTER, |l: Value, op: &str, r: Value| {
        refuse_hinted(&l)?;
        refuse_hinted(&r)?;
        python_ops::arith_filter(l, op, r)
    });
    env.add_filter(python_ops::NEG_FILTER, |v: Value| {
        refuse_hinted(&v)?;
        python_ops::neg_filter(v)
    });
    env.add_filter(
        python_semantics::COMPARE_FILTER,
        |l: Value, op: &str, r: Value| {
            if op.ends_with("in") {
                if undef::is_undefined(&r) {
                    return Ok(Value::from(op == "not in"));
                }
            } else {
                refuse_hinted(&l)?;
                refuse_hinted(&r)?;
            }
            python_semantics::compare_filter(l, op, r)
        },
    );
    let string = |v: Value| match undef::hint_of(&v) {
        Some(_) => Value::from(""),
        None => string_filter(v),
    };
    env.add_filter(python_semantics::STR_FILTER, string);
    env.add_filter("string", string);
    env.add_filter("xmlattr", |v: Value, autospace: Option<bool>| {
        refuse_hinted(&v)?;
        python_text_filters::xmlattr_filter(v, autospace)
    });
    env.add_filter("filesizeformat", |v: Value, binary: Option<Value>| {
        refuse_hinted(&v)?;
        python_text_filters::filesizeformat_filter(v, binary)
    });
    env.add_filter(
        "int",
        |v: Value, default: Option<Value>, base: Option<Value>, kwargs: Kwargs| {
            refuse_hinted(&v)?;
            python_filters::int_filter(v, default, base, kwargs)
        },
    );
    env.add_filter(
        "float",
        |v: Value, default: Option<Value>, kwargs: Kwargs| {
            refuse_hinted(&v)?;
            python_filters::float_filter(v, default, kwargs)
        },
    );
    env.add_filter(
        "indent",
        |v: Value, width: Option<Value>, first: Option<bool>, blank: Option<bool>, kw: Kwargs| {
            refuse_hinted(&v)?;
            python_filters::indent_filter(v, width, first, blank, kw)
        },
    );
    env.add_filter("attr", |v: Value, name: &str| {
        if python_semantics::is_dict_without_attr(&v, name) {
            return Ok(undef::HintedUndefined::value(format!(
                "'dict object' has no attribute '{name}'"
            )));
        }
        undef::attr_filter(v, name)
    });
    env.set_unknown_method_callback(|state, value, method, args| {
        refuse_hinted(value)?;
        jinja2_method(state, value, method, args).map_err(|e| {
            if e.kind() != ErrorKind::UnknownMethod {
                return e;
            }
            let owner = undef::object_type_repr(value);
            undef::refuse(&format!("'{owner}' has no attribute '{method}'"))
        })
    });
    env
}

/// jinja2's tests of the value alone, each refusing an argument with Python's `TypeError` for
/// its function (`test_string() takes 1 positional argument but 2 were given`).
fn add_one_argument_tests(env: &mut Environment<'static>) {
    use minijinja::tests as t;
    type Test = fn(&Value) -> Result<bool, Error>;
    let tests: [(&'static str, &'static str, Test); 17] = [
        ("odd", "test_odd", python_ops::odd_test),
        ("even", "test_even", python_ops::even_test),
        ("iterable", "test_iterable", |v| Ok(is_iterable(v))),
        ("string", "test_string", |v| Ok(t::is_string(v))),
        ("mapping", "test_mapping", |v| Ok(t::is_mapping(v))),
        ("number", "test_number", |v| {
            Ok(t::is_number(v) || python_complex::is_complex(v))
        }),
        ("sequence", "test_sequence", |v| Ok(is_python_sequence(v))),
        ("integer", "test_integer", |v| Ok(t::is_integer(v))),
        ("float", "test_float", |v| Ok(t::is_float(v))),
        ("boolean", "test_boolean", |v| Ok(t::is_boolean(v))),
        ("none", "test_none", |v| Ok(t::is_none(v))),
        ("true", "test_true", |v| Ok(t::is_true(v))),
        ("false", "test_false", |v| Ok(t::is_false(v))),
        // jinja2's `str(value).islower()`: of any value, as Python prints it.
        ("lower", "test_lower", |v| {
            Ok(t::is_lower(&as_python_str(v)))
        }),
        ("upper", "test_upper", |v| {
            Ok(t::is_upper(&as_python_str(v)))
        }),
        ("escaped", "test_escaped", |v| Ok(t::is_safe(v))),
        ("defined", "test_defined", |v| Ok(t::is_defined(v))),
    ];
    for (name, function, test) in tests {
        env.add_test(name, move |value: &Value, extra: Rest<Value>| {
            if !extra.is_empty() {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "{function}() takes 1 positional argument but {} were given",
                        extra.len() + 1
                    ),
                ));
            }
            test(value)
        });
    }
}

/// Whether `value` is a Python list or tuple (a minijinja sequence, or the lazy sequence that
/// `+` and `*` of lists give), whose `count` and `index` methods a template may call.
fn is_python_list(value: &Value) -> bool {
    matches!(
        python_semantics::python_type_name(value),
        "list" | "tuple" | python_semantics::GROUP_TUPLE
    )
}

/// `list` or `tuple`: the type whose methods a list-like value has (a group of `groupby` is a
/// tuple).
fn sequence_type(value: &Value) -> &'static str {
    match python_semantics::python_type_name(value) {
        "list" => "list",
        _ => "tuple",
    }
}

/// Python's `list.index(needle[, start[, stop]])`: the first equal item's position within the
/// bounds (read as a slice's), or its `ValueError`.
fn list_index(value: &Value, needle: &Value, range: &[Value]) -> Result<Value, Error> {
    let items: Vec<Value> = value.try_iter()?.collect();
    let len = items.len();
    let bound = |v: Option<&Value>| -> Result<Option<usize>, Error> {
        Ok(python_slice::slice_bound(v, false)?
            .map(|i| python_slice::from_end(i, len).min(len as i128) as usize))
    };
    let start = bound(range.first())?.unwrap_or(0);
    let stop = bound(range.get(1))?.unwrap_or(len);
    let found = (start < stop)
        .then(|| items[start..stop].iter().position(|item| item == needle))
        .flatten();
    match found {
        Some(at) => Ok(Value::from(start + at)),
        None if sequence_type(value) == "list" => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("{} is not in list", python_value::py_repr(needle)),
        )),
        None => Err(Error::new(
            ErrorKind::InvalidOperation,
            "tuple.index(x): x not in tuple",
        )),
    }
}

/// `value`, or for anything but a string, Python's `str()` of it as a string.
fn as_python_str(value: &Value) -> Value {
    if value.kind() == ValueKind::String {
        value.clone()
    } else {
        Value::from(python_value::py_str(value))
    }
}

/// jinja2's `trim`: Python's `str.strip` of `str(value)`, whose whitespace includes
/// U+001C..U+001F.
fn trim_filter(value: &Value, chars: Option<String>) -> Result<Value, Error> {
    let text = match value.as_str() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(python_value::py_str(value)),
    };
    Ok(Value::from(match chars {
        Some(chars) => {
            let set: Vec<char> = chars.chars().collect();
            text.trim_matches(&set[..]).to_string()
        }
        None => python_str::python_strip(&text).to_string(),
    }))
}

/// Python's string and dict methods (minijinja-contrib's pycompat), with `strip`, `lstrip` and
/// `rstrip` without arguments stripping Python's whitespace.
fn python_method(
    state: &mut minijinja::State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let no_chars = match args {
        [] => true,
        [arg] => arg.is_none() || arg.is_undefined(),
        _ => false,
    };
    if let (Some(s), true) = (value.as_str(), no_chars) {
        match method {
            "strip" => return Ok(Value::from(python_str::python_strip(s))),
            "lstrip" => return Ok(Value::from(python_str::python_lstrip(s))),
            "rstrip" => return Ok(Value::from(python_str::python_rstrip(s))),
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// [`python_method`] and the string methods of Python's that minijinja-contrib lacks or
/// writes by other rules (`format` and `format_map` are the sandbox's, see `python_str_format`).
fn jinja2_method(
    state: &mut minijinja::State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    // A macro is minijinja's map of its name and arguments; Python's has no dict methods.
    if python_semantics::is_macro(value) {
        return Err(Error::new(
            ErrorKind::UnknownMethod,
            format!("macro has no method named {method}"),
        ));
    }
    if value.kind() == ValueKind::Map && args.is_empty() {
        if let Some(view) = python_semantics::DictView::of(value, method)? {
            return Ok(view);
        }
    }
    if let Some(result) = python_str_format::call(value, method, args) {
        return result;
    }
    if let Some(result) = python_str_methods::call(value, method, args) {
        return result;
    }
    match (value.as_str(), method, args) {
        (Some(s), "swapcase", []) => Ok(Value::from(python_filters::swapcase(s))),
        (Some(s), "title", []) => Ok(Value::from(python_str::title(s))),
        (None, "count", [needle]) if is_python_list(value) => Ok(Value::from(
            value.try_iter()?.filter(|item| item == needle).count(),
        )),
        (None, "copy", []) if sequence_type(value) == "list" && is_python_list(value) => {
            Ok(Value::from(value.try_iter()?.collect::<Vec<_>>()))
        }
        (None, "count", _) if is_python_list(value) => Err(python_semantics::type_error(format!(
            "{}.count() takes exactly one argument ({} given)",
            sequence_type(value),
            args.len()
        ))),
        (None, "index", [needle, range @ ..]) if is_python_list(value) && range.len() <= 2 => {
            list_index(value, needle, range)
        }
        (None, "index", _) if is_python_list(value) => {
            Err(python_semantics::type_error(if args.is_empty() {
                "index expected at least 1 argument, got 0".to_string()
            } else {
                format!("index expected at most 3 arguments, got {}", args.len())
            }))
        }
        // Python hashes the key of `dict.get` and refuses a list or a dict (minijinja looks it
        // up and finds nothing).
        (None, "get", [key, ..]) if python_semantics::python_type_name(value) == "dict" => {
            python_semantics::hashable(key)?;
            match args {
                // The default as it is, an undefined one too (minijinja's gives `None` for it).
                [key, default] => {
                    let found = value.get_item(key)?;
                    let held = !found.is_undefined() || value.try_iter()?.any(|k| &k == key);
                    Ok(if held { found } else { default.clone() })
                }
                _ => python_method(state, value, method, args),
            }
        }
        // Unicode's full case folding, as Python's (`'ß'.casefold()` is `'ss'`).
        (Some(s), "casefold", []) => Ok(Value::from(caseless::default_case_fold_str(s))),
        // Split on runs of Python's whitespace (the information separators too).
        (Some(s), "split", []) => Ok(Value::from(python_str::python_split_whitespace(s))),
        (Some(s), "split", [sep]) if sep.is_none() => {
            Ok(Value::from(python_str::python_split_whitespace(s)))
        }
        (Some(s), "zfill", [width]) if width.is_integer() || width.kind() == ValueKind::Bool => {
            let width = i64::try_from(width.clone()).unwrap_or(i64::from(width.is_true()));
            Ok(Value::from(python_filters::zfill(s, width)))
        }
        _ => python_method(state, value, method, args),
    }
}

/// `{{ x }}` as Python's `str(x)`: minijinja writes floats in Rust's spelling (`0.0000001`,
/// `1000000000000000000000.0`) where Python writes `1e-07` and `1e+21`, and lists and maps with
/// its own quoting (see `python_value`). Everything else is minijinja's own output (with no
/// auto-escaping, as transformers has none).
fn python_formatter(
    out: &mut minijinja::Output,
    state: &mut minijinja::State,
    value: &Value,
) -> Result<(), Error> {
    if python_value::needs_python_spelling(value) {
        return out
            .write_str(&python_value::py_str(value))
            .map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write output"));
    }
    minijinja::escape_formatter(out, state, value)
}

/// jinja2's `string` filter: Python's `str(x)`; a string stays as it is.
fn string_filter(value: Value) -> Value {
    if value.kind() == ValueKind::String {
        return value;
    }
    Value::from(python_value::py_str(&value))
}

fn tojson_filter(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() || v.is_undefined() => None,
        Some(v) => match v.as_i64() {
            Some(n) => Some(" ".repeat(n.clamp(0, 64) as usize)),
            None => Some(v.as_str().unwrap_or_default().to_string()),
        },
    };
    let mut options = DumpOptions::python_defaults(indent);
    options.refused = Some(python_value::template_object_name);
    let separators: Option<Value> = kwargs.get("separators")?;
    if let Some(seps) = separators.filter(|v| !v.is_none()) {
        let parts: Vec<Value> = seps.try_iter()?.collect();
        if let [item, key] = parts.as_slice() {
            options.item_separator = item.as_str().unwrap_or(",").to_string();
            options.key_separator = key.as_str().unwrap_or(":").to_string();
        }
    }
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    options.sort_keys = sort_keys.unwrap_or(false);
    let ensure_ascii: Option<Value> = kwargs.get("ensure_ascii")?;
    options.ensure_ascii = ensure_ascii.is_some_and(|v| v.is_true());
    kwargs.assert_all_used()?;
    Ok(Value::from(dumps(&value, &options)?))
}

/// jinja2's `sequence` test: whether Python finds a length and `__getitem__` (a string, a list,
/// a tuple, a range, a dict, an undefined value), not a generator, a view or a macro.
fn is_python_sequence(value: &Value) -> bool {
    match value.kind() {
        ValueKind::String | ValueKind::Seq | ValueKind::Undefined => true,
        // A dict; a macro, a namespace or `loop` has no `__getitem__`.
        ValueKind::Map => {
            !python_semantics::is_macro(value)
                && !python_semantics::is_namespace(value)
                && !python_semantics::is_loop(value)
        }
        // The diagnostic render's undefined value is one as the plain one is.
        ValueKind::Iterable => matches!(
            python_semantics::python_type_name(value),
            "list" | "Undefined"
        ),
        _ => false,
    }
}

/// jinja2's `iterable` test: true for anything Python can iterate, including jinja2's
/// `Undefined`, and false for `None` (minijinja's own test says true for none).
fn is_iterable(value: &Value) -> bool {
    match value.kind() {
        ValueKind::String
        | ValueKind::Bytes
        | ValueKind::Seq
        | ValueKind::Iterable
        | ValueKind::Undefined => true,
        // A macro is not iterable in Python.
        ValueKind::Map => !python_semantics::is_macro(value),
        // Of the other objects (functions, methods, namespaces, loops) only a loop iterates.
        ValueKind::Plain => ["index0", "depth0"]
            .iter()
            .all(|name| value.get_attr(name).is_ok_and(|v| !v.is_undefined())),
        _ => false,
    }
}

fn raise_exception(message: String) -> Result<Value, Error> {
    super::RAISED.with(|r| *r.borrow_mut() = Some(message.clone()));
    Err(Error::new(ErrorKind::InvalidOperation, message))
}
