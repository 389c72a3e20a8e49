//! The interpreter and the render plan against Python's jinja2 (3.1, as transformers sets it
//! up) on the semantics both follow: `for ... else`, `dictsort`, slices, generators and reverse
//! iterators, dict views, `dict()`, complex numbers, tests given arguments, string literals,
//! a recursive loop's filter, a filter block's scope, integers beyond 128 bits, `pprint`,
//! `varargs`, loop controls inside `with` blocks.
//! Each expected text is what Python printed for the same template and variables.

use super::*;
use serde_json::json;

/// The interpreter's render, and the plan's where it renders (it must agree).
fn render(source: &str, variables: serde_json::Value) -> Result<String, String> {
    let t = ChatTemplate::compile(source, Vec::new()).map_err(|e| e.message)?;
    let kwargs = variables.as_object().cloned().unwrap_or_default();
    let messages = [
        json!({"role": "user", "content": "Hi"}),
        json!({"role": "assistant", "content": "Yo"}),
    ];
    let opts = RenderOptions {
        template_kwargs: Some(&kwargs),
        ..Default::default()
    };
    let interpreted = t
        .render_interpreted(&messages, &opts)
        .map_err(|e| e.message);
    if let Some(planned) = t.render_planned(&messages, &opts) {
        assert_eq!(planned.map_err(|e| e.message), interpreted, "{source}");
    }
    interpreted
}

fn ok(source: &str, variables: serde_json::Value) -> String {
    render(source, variables).unwrap_or_else(|e| panic!("{source}: {e}"))
}

fn fails(source: &str, variables: serde_json::Value) -> String {
    render(source, variables).expect_err(source)
}

#[test]
fn for_else_runs_where_no_iteration_reached_the_end_of_the_body() {
    assert_eq!(
        ok("{% for x in [1, 2] %}{% if x %}{% continue %}{% endif %}{{ x }}{% else %}E{% endfor %}|{% for x in [1, 2] %}{{ x }}{% break %}{% else %}E{% endfor %}|{% for x in [1, 2] %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% else %}E{% endfor %}|{% for x in [] %}{% else %}{% set y = 1 %}{% endfor %}{{ y }}", json!({})),
        "E|1E|2|"
    );
    // Whitespace control of the tags rewritten is kept; the plan agrees.
    assert_eq!(
        ok("{% for m in messages %}\n  {% if m.role == 'user' %}{% continue %}{% endif %}\n  {{ m.content }}\n  {% else %}\n  none\n  {% endfor %}\n", json!({})),
        "  Yo\n"
    );
    assert_eq!(
        ok("{%- for m in messages -%}\n  {%- continue -%}\n  {%- else -%}\n  E{{ m }}\n  {%- endfor %}", json!({})),
        "E"
    );
}

#[test]
fn dictsort_sorts_as_python_and_refuses_what_python_cannot_order() {
    assert_eq!(
        ok("{% for k, v in d|dictsort %}{{ k }}{% endfor %}|{{ {'a': 1, 'b': 'x'}|dictsort(by='key', reverse=true) }}", json!({"d": {"b": 1, "A": 2, "a": 3, "ß": 0, "st": 1}})),
        "Aabstß|[('b', 'x'), ('a', 1)]"
    );
    assert!(
        fails("{{ {'a': 1, 'b': 'x'}|dictsort(by='value') }}", json!({}))
            .contains("'<' not supported between instances of 'str' and 'int'")
    );
    assert!(fails("{{ {'k': 1, z: 1}|dictsort }}", json!({})).contains("'z' is undefined"));
}

#[test]
fn slices_are_pythons() {
    assert_eq!(
        ok("{{ (1, 2, 3)[1:] }}|{{ range(5)[1:4] }}|{{ range(1, 5)[::-1] }}|{{ [1, 2][true:] }}|{{ 'abcdef'[1:5:2] }}|{{ [1, 2, 3][1:] is sequence }}|{{ messages[1:][0].content }}", json!({})),
        "(2, 3)|range(1, 4)|range(4, 0, -1)|[2]|bd|True|Yo"
    );
    assert!(fails("{{ [1] + range(3)[1:] }}", json!({}))
        .contains("can only concatenate list (not \"range\") to list"));
    assert!(fails("{{ [1, 2][::0] }}", json!({})).contains("slice step cannot be zero"));
    assert!(fails("{{ x[1:] }}", json!({"x": 5})).contains("'int' object is not subscriptable"));
    // A constant slice printed by itself is computed by jinja2's constant folding, whose
    // `getitem` gives an undefined value where Python raises.
    assert_eq!(
        ok("[{{ ({'a': 1})[1:] }}][{{ 5[1:] }}][{{ none[::-1] }}][{{ ('ab')['x':] }}][{{ [1, 2][1:] }}]", json!({})),
        "[][][][][[2]]"
    );
    assert!(
        fails("{% set d = {'a': 1} %}{{ d[1:] }}", json!({})).contains("unhashable type: 'slice'")
    );
    assert!(fails("{{ ('ab')[::0] }}", json!({})).contains("slice step cannot be zero"));
}

#[test]
fn generators_iterators_and_views_are_pythons() {
    assert_eq!(
        ok("{{ [1, 2]|batch(1)|list }}|{{ [1, 2, 3, 4, 5]|slice(3, 'x')|list }}|{{ [1, 1.0, true, 'A', 'a']|unique|list }}|{{ [1, 2]|reverse|list }}|{{ ([1, 2]|map('string'))[0] is defined }}", json!({})),
        "[[1], [2]]|[[1, 2], [3, 4], [5, 'x']]|[1, 'A']|[2, 1]|False"
    );
    assert_eq!(
        ok("{{ [1, 2]|reverse }}|{{ {'a': 1, 'b': [2]}.items() }}|{{ {'a': 1}.keys()|length }}|{% set v = {'a': 1}.items() %}{% for k, x in v %}{{ k }}{% endfor %}{% for k, x in v %}{{ k }}{% endfor %}", json!({})),
        "<list_reverseiterator object at 0x7f0000000000>|dict_items([('a', 1), ('b', [2])])|1|aa"
    );
    assert!(fails("{{ [[1]]|unique|list }}", json!({})).contains("unhashable type: 'list'"));
    assert!(fails("{{ {'a': 1}.items()|tojson }}", json!({}))
        .contains("Object of type dict_items is not JSON serializable"));
    assert!(
        fails("{{ none|batch(2)|list }}", json!({})).contains("'NoneType' object is not iterable")
    );
    assert_eq!(ok("{{ none|select|list }}", json!({})), "[]");
}

#[test]
fn dict_complex_and_tests_are_pythons() {
    assert_eq!(
        ok("{{ dict([('a', 1), 'bc'], z=3) }}|{{ (-3) ** 0.5 }}|{{ ((-3) ** 0.5) ** -1 }}|{{ {} is sequence }}|{{ 'x\\'y\"z'.title() }}|{{ -(true) }}", json!({})),
        "{'a': 1, 'b': 'c', 'z': 3}|(1.0605752387249068e-16+1.7320508075688772j)|(3.53525079574969e-17-0.5773502691896258j)|True|X'Y\"Z|-1"
    );
    assert_eq!(
        ok("{{ namespace() is sequence }}|{% for x in [1] %}{{ loop is sequence }}{% endfor %}|{{ {} is sequence }}|{{ range(2) is sequence }}", json!({})),
        "False|False|True|True"
    );
    assert!(fails("{{ dict(none) }}", json!({})).contains("'NoneType' object is not iterable"));
    assert!(fails("{{ dict([(1, 2, 3)]) }}", json!({}))
        .contains("dictionary update sequence element #0 has length 3; 2 is required"));
    // A test followed by arithmetic binds to its operand, as in jinja2.
    assert_eq!(
        ok(
            "{{ 1 is number + 1 }}|{{ x is not divisibleby(3) * 2 }}",
            json!({"x": 4})
        ),
        "2|2"
    );
    assert!(fails("{{ x is string 1 }}", json!({"x": "a"}))
        .contains("test_string() takes 1 positional argument but 2 were given"));
}

#[test]
fn chained_comparisons_answer_pair_by_pair() {
    let x = json!({"x": {"a": 2, "b": 1}, "y": {}});
    assert_eq!(
        ok("{{ 1 < x.a < 3 }}|{{ 1 < x.a > x.b }}|{{ 5 < x.a < y.z }}|{% for m in messages %}{% if 0 < loop.index < 2 %}{{ m.content }}{% endif %}{% endfor %}", x.clone()),
        "True|True|False|Hi"
    );
    assert!(fails("{{ x.a != x >= x['b'] }}", x.clone())
        .contains("'>=' not supported between instances of 'dict' and 'int'"));
    assert!(fails("{{ 1 < x.a in 'abc' }}", x)
        .contains("'in <string>' requires string as left operand, not int"));
    // Middle operands that call a method, list and dict literals.
    assert!(
        fails("{{ 1 < [1, 2, 3] < 5 == 'a'.split(',') }}", json!({}))
            .contains("'<' not supported between instances of 'int' and 'list'")
    );
    assert!(fails("{{ 0 < {'items': 1} < 'b' is defined }}", json!({}))
        .contains("'<' not supported between instances of 'int' and 'dict'"));
    assert!(fails("{{ 2 > 'a'|forceescape }}", json!({}))
        .contains("'>' not supported between instances of 'int' and 'Markup'"));
    assert_eq!(
        ok("{{ 'a' < 'a,b'.split(',')|first == 'b' }}{{ 'a' < 'b,a'.split(',')|first == 'b' }}{{ 0 < range(3)|length > 1 }}{{ 1 > 2 < [1] }}", json!({})),
        "FalseTrueTrueFalse"
    );
    // A loop filter's target is not bound in the `else` block.
    assert_eq!(
        ok(
            "{% for k in [1, 2] if k > 5 %}{% else %}[{{ k }}]{% endfor %}",
            json!({})
        ),
        "[]"
    );
}

#[test]
fn string_literals_hold_what_python_reads_from_them() {
    // A backslash before a line break joins the lines (Mistral Small 3.1's system prompt).
    assert_eq!(
        ok("{% set s = \"one \\\ntwo\" %}{{ s }}|{{ \"\\a\\v\" | length }}|{{ \"\\U0001F600\\101\\/\" }}|{{ \"\\é\" }}|{{ s ~ \"\\u00e9\" if \"x\\\n\" == \"x\" }}", json!({})),
        "one two|2|😀A\\/|\\xe9|one twoé"
    );
}

#[test]
fn strings_iterate_by_characters_and_undefined_holds_nothing() {
    assert_eq!(
        ok("{% for c in s %}{{ c }}{{ loop.length }}{{ loop.last }}{% endfor %}|{{ 'a' in u }}|{{ 'a' not in u }}|{{ x == true }}|{{ true == 1 }}|{{ 1.0 == true }}|{{ x == none }}", json!({"s": "aé", "x": {"k": 1}})),
        "a2Falseé2True|False|True|False|True|True|False"
    );
}

#[test]
fn a_recursive_loops_filter_applies_at_every_level() {
    let tree = json!([{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}, {"name": "d"}]}, {"name": "d"}]}]);
    assert_eq!(
        ok("{% set skip = 'd' %}{% for it in tree if it.name != skip recursive %}{{ loop.depth0 }}{{ it.name }}{{ loop.length }}{% if it.children %}({{ loop(it.children) }}){% endif %}{% endfor %}|{% for k, v in [('a', [('b', []), ('d', [])])] if k != 'd' recursive %}{{ k }}{{ loop(v) }}{% endfor %}", json!({"tree": tree})),
        "0a1(1b1(2c1))|ab"
    );
}

#[test]
fn what_a_filter_block_sets_stays_inside_it() {
    assert_eq!(
        ok("{% set x = 'a' %}{% filter upper %}{% set x = 'b' %}{% set y = 'c' %}{{ x }}{{ y }}{% endfilter %}{{ x }}{{ y is defined }}|{% set ns = namespace(n=0) %}{% filter upper -%} {% set ns.n = 2 %}x {%- endfilter %}{{ ns.n }}", json!({})),
        "BCaFalse|X2"
    );
}

#[test]
fn dict_get_hashes_its_key() {
    assert!(fails("{{ {'a': 1}.get([1], 2) }}", json!({})).contains("unhashable type: 'list'"));
    assert!(fails("{{ d.get(d) }}", json!({"d": {"a": 1}})).contains("unhashable type: 'dict'"));
    assert_eq!(
        ok("{{ d.get('a') }}{{ d.get('b', 3) }}{{ d.get(none) }}[{{ d.get('b', z) }}]{{ d.get('a', z) }}{{ {1: 2}.get(1, 0) }}", json!({"d": {"a": 1}})),
        "13None[]12"
    );
}

#[test]
fn a_dict_literal_hashes_its_keys_once_all_are_evaluated() {
    assert!(fails("{{ {[1]: 1, {}: 1 % 0} }}", json!({})).contains("integer modulo by zero"));
    assert!(fails("{{ {x: 1, [x]: 2} }}", json!({"x": "k"})).contains("unhashable type: 'list'"));
    assert_eq!(
        ok("{{ {x: 1}.get(x) }}{{ {x: 1}['k'] }}{{ {x: 1}|length }}{{ {x: 1}.items()|list }}{{ {x: 1} is mapping }}{% for k in {x: 2} %}{{ k }}{% endfor %}", json!({"x": "k"})),
        "111[('k', 1)]Truek"
    );
}

#[test]
fn integers_grow_beyond_128_bits() {
    assert_eq!(
        ok("{{ (10 ** 30) ** 2 }}|{{ ((10 ** 30) ** 2)|float }}|{{ 2 / (10 ** 30) ** 2 }}|{{ (10 ** 30) * (10 ** 30) - 1 }}|{{ ((10 ** 30) ** 2) // 7 }}|{{ (10 ** 30) ** 2 > 5 }}|{{ ((10 ** 30) ** 2) ~ 'x' }}|{{ ((10 ** 30) ** 2)|string|length }}|{{ (10 ** 30) ** 2 - (10 ** 30) ** 2 }}|{{ (2 ** 70) * 2 ** 70 }}|{{ ((2 ** 100) ** 2) * 0.5 }}", json!({})),
        "1000000000000000000000000000000000000000000000000000000000000|1e+60|2e-60|999999999999999999999999999999999999999999999999999999999999|142857142857142857142857142857142857142857142857142857142857|True|1000000000000000000000000000000000000000000000000000000000000x|61|0|1393796574908163946345982392040522594123776|8.034690221294951e+59"
    );
    assert!(fails("{{ (10 ** 30) ** 2 + 'a' }}", json!({}))
        .contains("unsupported operand type(s) for +: 'int' and 'str'"));
}

#[test]
fn unary_minus_negates_any_number() {
    assert_eq!(
        ok("{{ -((10 ** 20) ** 2) }}|{{ -(2 ** 127) }}|{{ -(-(2 ** 127)) }}|{{ -(2 ** 128 - 1) }}|{{ -((-3) ** 0.5) }}|{{ -true }}|{{ -(0.0) }}|{{ -x }}|{{ - x * 2 }}", json!({"x": 3})),
        "-10000000000000000000000000000000000000000|-170141183460469231731687303715884105728|170141183460469231731687303715884105728|-340282366920938463463374607431768211455|(-1.0605752387249068e-16-1.7320508075688772j)|-1|-0.0|-3|-6"
    );
}

#[test]
fn pprint_is_pythons_pformat() {
    assert_eq!(
        ok("{{ z|pprint }}|{{ ['x', 'y']|pprint }}|{{ {'b': 1, 'a': [{'d': 1, 'c': (1, 'a')}]}|pprint }}|{{ 'x'|pprint }}|{{ 1.0|pprint }}|{{ none|pprint }}|{{ (1,)|pprint }}", json!({})),
        "Undefined|['x', 'y']|{'a': [{'c': (1, 'a'), 'd': 1}], 'b': 1}|'x'|1.0|None|(1,)"
    );
}

#[test]
fn an_undefined_last_argument_is_one_of_varargs() {
    assert_eq!(
        ok("{% macro v() %}{{ varargs|length }}{{ varargs }}{% endmacro %}{{ v(1, z) }}|{{ v(z, 1) }}|{% macro each(xs) %}{{ caller(xs) }}|{{ caller() }}{% endmacro %}{% call() each(z) %}{{ varargs }}{% endcall %}", json!({})),
        "2(1, Undefined)|2(Undefined, 1)|(Undefined,)|()"
    );
}

#[test]
fn a_with_block_evaluates_every_value_before_binding_any() {
    assert_eq!(
        ok("{% set a = 'out' %}{% with a = 1, b = a ~ '!', c = [a, b] -%} {{ a }} {{ b }} {{ c }} {%- endwith %}|{{ a }}|{% with x = 2, y = 'a' ~ 'x', z = x %}{{ y }}{{ z is defined }}{% endwith %}{{ x is defined }}", json!({"b": 7})),
        "1 out! ['out', 7]|out|axFalseFalse"
    );
    assert_eq!(
        ok("{% set a = 'o' %}{% for i in [1, 2] %}\n  {%- with a = i, b = a -%}\n  [{{ a }}{{ b }}]\n  {%- endwith %}\n{% endfor %}{% macro m(a) %}{% with a = a * 2, c = a %}{{ a }}/{{ c }}{% endwith %}{% endmacro %}{{ m(3) }}", json!({})),
        "[1o][2o]6/3"
    );
}

#[test]
fn a_with_block_may_hold_a_loop_control() {
    assert_eq!(
        ok("{% set v = 'out' %}{% for i in [1, 2, 3] %}{% with v = i, w = v %}{% if i == 2 %}{% continue %}{% endif %}[{{ v }}{{ w }}]{% endwith %}{{ v }}{% endfor %}|{% for i in [1, 2] -%} {%- with -%} {% if i == 1 %}{% break %}{% endif %}x{%- endwith %}{% endfor %}|{% for i in [1, 2] %}{% with a = (i * 2) %}{% if i == 1 %}{% continue %}{% endif %}{{ a }}{% endwith %}{{ a is defined }}{% endfor %}", json!({})),
        "[1out]out[3out]out||4False"
    );
}
