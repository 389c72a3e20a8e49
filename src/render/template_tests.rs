//! Rendering through `ChatTemplate`: transformers' whitespace and variables, Python's semantics
//! where a template can observe them, `strftime_now`, and the errors renders raise.

use super::*;
use serde_json::json;

/// The text `strftime_now` should give now, formatted afresh.
fn strftime_afresh(format: &str) -> String {
    let fixed = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0));
    match fixed {
        Some(time) => time.naive_utc().format(format).to_string(),
        None => chrono::Local::now().format(format).to_string(),
    }
}

#[test]
fn strftime_now_reuses_a_text_only_within_its_second_and_format() {
    for format in ["%Y-%m-%d", "%d %b %Y %H:%M:%S", "%A"] {
        let before = strftime_afresh(format);
        let first = strftime_now(format.to_string()).unwrap().to_string();
        let second = strftime_now(format.to_string()).unwrap().to_string();
        let after = strftime_afresh(format);
        assert!(first == before || first == after, "{format}: {first}");
        assert!(second == first || second == after, "{format}: {second}");
    }
    // Another format in the same second is formatted, not taken from the last one.
    let date = strftime_now("%Y".to_string()).unwrap().to_string();
    let weekday = strftime_now("%a".to_string()).unwrap().to_string();
    assert_eq!(date.len(), 4);
    assert_ne!(date, weekday);
}

#[test]
fn a_pinned_clock_gives_every_render_inside_one_second() {
    let unpinned = || PINNED_CLOCK.with(Cell::get).0 == UNPINNED;
    assert!(unpinned());
    // Nothing is read until a render asks for the time.
    assert_eq!(
        with_pinned_clock(|| PINNED_CLOCK.with(Cell::get).0),
        PIN_ASKED
    );
    let (outer, inner, text, again) = with_pinned_clock(|| {
        let outer = strftime_second();
        // A nested pin keeps the outer second.
        let inner = with_pinned_clock(strftime_second);
        let text = strftime_now("%Y-%m-%d %H:%M:%S".to_string())
            .unwrap()
            .to_string();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let again = strftime_now("%Y-%m-%d %H:%M:%S".to_string())
            .unwrap()
            .to_string();
        (outer, inner, text, again)
    });
    assert_eq!(outer, inner);
    // More than a second later, the pinned second still prints.
    assert_eq!(text, again);
    let expected = match outer {
        (true, secs) => chrono::DateTime::from_timestamp(secs, 0)
            .unwrap()
            .naive_utc()
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        (false, secs) => chrono::TimeZone::timestamp_opt(&chrono::Local, secs, 0)
            .unwrap()
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
    };
    assert_eq!(text, expected);
    assert!(unpinned());
    // Unpinned again where the closure unwinds.
    let unwound = std::panic::catch_unwind(|| with_pinned_clock(|| panic!("inside")));
    assert!(unwound.is_err());
    assert!(unpinned());
}

fn render(source: &str, messages: serde_json::Value, gen: bool) -> SftResult<String> {
    let t = ChatTemplate::compile(source, vec![("eos_token".into(), Value::from("</s>"))])?;
    let msgs = messages.as_array().cloned().unwrap_or_default();
    t.render(
        &msgs,
        &RenderOptions {
            add_generation_prompt: gen,
            ..Default::default()
        },
    )
}

/// `source` rendered without messages fails, with `message` in its error.
fn assert_raises(source: &str, message: &str) {
    let err = render(source, json!([]), false).unwrap_err();
    assert!(err.message.contains(message), "{source}: {}", err.message);
}

#[test]
fn python_spellings_of_round_join_case_and_split() {
    let out = |src: &str| render(src, json!([]), false).map_err(|e| e.message);
    // Python's round: ties to even on the exact value, integers stay integers; floor and
    // ceil give floats.
    assert_eq!(
        out("{{ 2.5|round }} {{ 2.675|round(2) }} {{ 14|round }} {{ 14|round(2, 'floor') }} {{ 1250|round(-2) }} {{ 1350|round(-2) }} {{ 3.14159|round(2, 'ceil') }} {{ 0.125|round(2) }} {{ -0.5|round }}"),
        Ok("2.0 2.67 14 14.0 1200 1400 3.15 0.12 -0.0".to_string())
    );
    // floor and ceil go through Python's integers, which have no negative zero.
    assert_eq!(
        out("{{ (-0.0)|round(1, 'ceil') }} {{ (-0.04)|round(1, 'ceil') }} {{ (-0.0)|round(0, 'floor') }}"),
        Ok("0.0 0.0 0.0".to_string())
    );
    assert!(out("{{ 'x'|round }}")
        .unwrap_err()
        .contains("type str doesn't define __round__ method"));
    assert!(out("{{ 1|round(method='up') }}")
        .unwrap_err()
        .contains("method must be common, ceil or floor"));
    // Items of join, and upper/lower of a non-string, as Python's str() writes them.
    assert_eq!(
        out("{{ [1e-07, 1e16, [1.5, none]]|join('|') }}"),
        Ok("1e-07|1e+16|[1.5, None]".to_string())
    );
    assert_eq!(
        out("{{ 1e-07|upper }} {{ [none]|lower }}"),
        Ok("1E-07 [none]".to_string())
    );
    assert_eq!(
        out("{{ [none, true, 1, 'a']|join(',') }}"),
        Ok("None,True,1,a".to_string())
    );
    // split() on Python's whitespace; a loop over a string knows its length.
    assert_eq!(
        out("{{ 'a\u{1f}b c'.split() }}"),
        Ok("['a', 'b', 'c']".to_string())
    );
    assert_eq!(
        out("{% for c in 'ab' %}{{ loop.last }}{{ loop.length }}{% endfor %}"),
        Ok("False2True2".to_string())
    );
    // Macros and undefined values inside containers print as Python's repr.
    assert_eq!(
        out("{% macro f(a) %}{% endmacro %}{{ f }} {{ [f, x] }}"),
        Ok("<Macro 'f'> [<Macro 'f'>, Undefined]".to_string())
    );
}

#[test]
fn trims_blocks_like_transformers() {
    let src = "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content | trim }}]\n  {% endif %}\n{% endfor %}{% if add_generation_prompt %}>{% endif %}{{ eos_token }}\n";
    let out = render(src, json!([{"role": "user", "content": " hi "}]), true).unwrap();
    assert_eq!(out, "[hi]\n></s>");
}

#[test]
fn raise_exception_message_reaches_the_caller_verbatim() {
    let err = render(
        "{{ raise_exception('roles must alternate') }}",
        json!([]),
        false,
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::TemplateRender);
    assert_eq!(err.message, "roles must alternate");
}

#[test]
fn generation_tags_are_transparent() {
    let src =
        "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}\n{% endfor %}";
    let out = render(src, json!([{"role": "assistant", "content": "a"}]), false).unwrap();
    assert_eq!(out, "a");
}

#[test]
fn tojson_is_python_json_dumps() {
    let src = "{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=2) }}";
    let out = render(src, json!([{"role": "tool", "content": "<&>"}]), false).unwrap();
    assert_eq!(
        out,
        "{\"role\": \"tool\", \"content\": \"<&>\"}|{\n  \"role\": \"tool\",\n  \"content\": \"<&>\"\n}"
    );
}

#[test]
fn floats_print_as_python_prints_them() {
    let src = "{% for m in messages %}{{ m.content }} {% endfor %}";
    let out = render(
        src,
        json!([{"role": "a", "content": 2.5}, {"role": "a", "content": 1e-7},
               {"role": "a", "content": 1e21}, {"role": "a", "content": 1.0},
               {"role": "a", "content": 4294967296u64}, {"role": "a", "content": null},
               {"role": "a", "content": true}]),
        false,
    )
    .unwrap();
    assert_eq!(out, "2.5 1e-07 1e+21 1.0 4294967296 None True ");
}

#[test]
fn syntax_errors_have_their_own_code() {
    let err = ChatTemplate::compile("{% if %}", vec![]).err().unwrap();
    assert_eq!(err.code, ErrorCode::TemplateSyntax);
}

#[test]
fn endless_templates_are_stopped() {
    let src = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
    let err = render(src, json!([]), false).unwrap_err();
    assert_eq!(err.code, ErrorCode::TemplateRender);
    assert_eq!(
        err.message,
        "chat template exceeded the render limit of 10000000 steps (does it loop for ever?) (line 1)"
    );
}

#[test]
fn comparisons_refuse_what_python_refuses() {
    let out = render(
        "{{ true < 2 }}{{ [1] < [1, 0] }}{{ 1 in [1.0] }}{{ 'k' not in {'k': 1} }}{{ x < 1 }}",
        json!([]),
        false,
    );
    assert!(out.is_err());
    let out = render(
        "{{ true < 2 }}{{ [1] < [1, 0] }}{{ 1 in [1.0] }}{{ 'k' not in {'k': 1} }}",
        json!([]),
        false,
    );
    assert_eq!(out.unwrap(), "TrueTrueTrueFalse");
    for (source, message) in [
        (
            "{{ 'a' < 1 }}",
            "'<' not supported between instances of 'str' and 'int'",
        ),
        (
            "{{ [1] >= ['a'] }}",
            "'>=' not supported between instances of 'int' and 'str'",
        ),
        (
            "{{ 1 in 'abc' }}",
            "'in <string>' requires string as left operand, not int",
        ),
        ("{{ [1] in {} }}", "unhashable type: 'list'"),
        (
            "{{ 1 not in none }}",
            "argument of type 'NoneType' is not iterable",
        ),
    ] {
        assert_raises(source, message);
    }
}

#[test]
fn arithmetic_refuses_what_python_refuses() {
    let out = render(
        "{{ 'a' + 'b' }}{{ [1] + [2] }}{{ 'ab' * 2 }}{{ true + 1 }}{{ 7 // 2 }}{{ -(3) }}",
        json!([]),
        false,
    );
    assert_eq!(out.unwrap(), "ab[1, 2]abab23-3");
    for (source, message) in [
        (
            "{{ 'a' + 1 }}",
            "can only concatenate str (not \"int\") to str",
        ),
        (
            "{{ 1 + 'a' }}",
            "unsupported operand type(s) for +: 'int' and 'str'",
        ),
        (
            "{{ [1] * 2.5 }}",
            "can't multiply sequence by non-int of type 'float'",
        ),
        (
            "{{ {} ** 2 }}",
            "unsupported operand type(s) for ** or pow(): 'dict' and 'int'",
        ),
        (
            "{{ 'ab' * 10 ** 30 }}",
            "cannot fit 'int' into an index-sized integer",
        ),
        (
            "{{ -10 ** 30 * [1] }}",
            "cannot fit 'int' into an index-sized integer",
        ),
        ("{{ 1 / 0 }}", "division by zero"),
        ("{{ nowhere(1) }}", "'nowhere' is undefined"),
        ("{{ 1.5 // 0 }}", "float floor division by zero"),
        ("{{ 0 ** -1 }}", "0.0 cannot be raised to a negative power"),
        ("{{ -'a' }}", "bad operand type for unary -: 'str'"),
        ("{{ 3|first }}", "'int' object is not iterable"),
        (
            "{{ none|length }}",
            "object of type 'NoneType' has no len()",
        ),
        (
            "{% for x in 2.5 %}{% endfor %}",
            "'float' object is not iterable",
        ),
    ] {
        assert_raises(source, message);
    }
}

#[test]
fn python_string_methods_work() {
    let src = "{{ messages[0].content.split('</think>')[-1].lstrip('\\n') }}";
    let out = render(
        src,
        json!([{"role": "a", "content": "<think>x</think>\n\nyes"}]),
        false,
    )
    .unwrap();
    assert_eq!(out, "yes");
}

#[test]
fn an_undefined_argument_passed_to_a_macro_is_bound_not_defaulted() {
    let source = "{% macro f(a, b='B') -%}\n[{{ a }}|{{ b }}|{{ b is defined }}]\n{%- endmacro %}\
                  {{ f(1) }}{{ f(2, messages[0].missing) }}{{ f(3, b=x if false) }}\
                  {{ f(4, b=messages[0].role) }}{{ 'x' ~ (f(5) if true) }}";
    let messages = json!([{"role": "user", "content": "hi"}]);
    let want = "[1|B|True][2||False][3||False][4|user|True]x[5|B|True]";
    let t = ChatTemplate::compile(source, Vec::new()).unwrap();
    let msgs = messages.as_array().unwrap();
    let opts = RenderOptions::default();
    assert_eq!(t.render_interpreted(msgs, &opts).unwrap(), want);
    assert_eq!(
        t.render_planned(msgs, &opts).expect("a plan").unwrap(),
        want
    );
}

#[test]
fn casefold_folds_as_python_does() {
    let src = "{{ messages[0].content.casefold() }}";
    let out = render(
        src,
        json!([{"role": "a", "content": "Straße İ ΣΑΣ ﬁ"}]),
        false,
    )
    .unwrap();
    assert_eq!(out, "strasse i\u{307} σασ fi");
}

#[test]
fn items_is_a_generator_as_in_jinja2() {
    let t = ChatTemplate::compile(
        "{% set g = messages[0]|items %}{% for k, v in g %}{{ k }}={{ v }};{% endfor %}\
         {% for k, v in g %}again{% endfor %}{{ (messages[0].content|items) is defined }}\
         {% for p in undefined_thing|items %}never{% endfor %}",
        Vec::new(),
    )
    .unwrap();
    let messages = [json!({"role": "user", "content": "hi"})];
    let opts = RenderOptions::default();
    let want = "role=user;content=hi;True";
    assert_eq!(t.render_interpreted(&messages, &opts).unwrap(), want);
    // Iterating `items` of a string raises only then, with jinja2's message.
    let t = ChatTemplate::compile(
        "{% set g = messages[0].content|items %}ok{% for k, v in g %}{% endfor %}",
        Vec::new(),
    )
    .unwrap();
    let err = t.render_interpreted(&messages, &opts).unwrap_err();
    assert!(
        err.message
            .contains("Can only get item pairs from a mapping."),
        "{}",
        err.message
    );
    // Printed as Python prints a generator.
    let t = ChatTemplate::compile("{{ messages[0]|items }}", Vec::new()).unwrap();
    let text = t.render_interpreted(&messages, &opts).unwrap();
    assert!(
        text.starts_with("<generator object do_items at 0x"),
        "{text}"
    );
}

#[test]
fn odd_even_and_divisibleby_take_python_remainders() {
    let t = |source: &str| ChatTemplate::compile(source, Vec::new()).unwrap();
    let messages = [json!({"role": "user", "content": "hi"})];
    let opts = RenderOptions::default();
    let out = t("{{ 3 is odd }}{{ 3.0 is odd }}{{ true is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ '%s' is odd }}")
        .render_interpreted(&messages, &opts)
        .unwrap();
    assert_eq!(out, "TrueTrueTrueTrueTrueFalse");
    for (source, message) in [
        (
            "{{ 'abc' is odd }}",
            "not all arguments converted during string formatting",
        ),
        (
            "{{ '%s %s' is even }}",
            "not enough arguments for format string",
        ),
        (
            "{{ 'a%q' is odd }}",
            "unsupported format character 'q' (0x71) at index 2",
        ),
        (
            "{{ none is odd }}",
            "unsupported operand type(s) for %: 'NoneType' and 'int'",
        ),
        (
            "{{ [1] is even }}",
            "unsupported operand type(s) for %: 'list' and 'int'",
        ),
        ("{{ {'k': 1, messages: 2} }}", "unhashable type: 'list'"),
        ("{{ {messages[0]: 2} }}", "unhashable type: 'dict'"),
    ] {
        let err = t(source).render_interpreted(&messages, &opts).unwrap_err();
        assert!(err.message.contains(message), "{source}: {}", err.message);
    }
    // Keys Python can hash stay allowed.
    let out = t("{{ {messages[0].role: 1, (1, 2)|join: 2} }}")
        .render_interpreted(&messages, &opts)
        .unwrap();
    assert_eq!(out, "{'user': 1, '12': 2}");
}

#[test]
fn indent_is_jinja2s() {
    let t = |source: &str| ChatTemplate::compile(source, Vec::new()).unwrap();
    let messages = [json!({"role": "user", "content": "a\nb\n\nc\u{2028}d"})];
    let opts = RenderOptions::default();
    let out = t("{{ messages[0].content|indent }}|{{ messages[0].content|indent(2, true, true) }}|{{ 'x\ny'|indent('> ') }}")
        .render_interpreted(&messages, &opts)
        .unwrap();
    assert_eq!(
        out,
        "a\n    b\n\n    c\n    d|  a\n  b\n  \n  c\n  d|x\n> y"
    );
    for (source, message) in [
        (
            "{{ none|indent }}",
            "unsupported operand type(s) for +=: 'NoneType' and 'str'",
        ),
        (
            "{{ [1]|indent }}",
            "'list' object has no attribute 'splitlines'",
        ),
        ("{{ nothing|indent }}", "'nothing' is undefined"),
        (
            "{{ messages[0].get.items() }}",
            "'builtin_function_or_method object' has no attribute 'items'",
        ),
    ] {
        let err = t(source).render_interpreted(&messages, &opts).unwrap_err();
        assert!(err.message.contains(message), "{source}: {}", err.message);
    }
}

#[test]
fn abs_truncate_and_attr_of_undefined_values_as_jinja2() {
    let t = |source: &str| ChatTemplate::compile(source, Vec::new()).unwrap();
    let opts = RenderOptions::default();
    let out = t("{{ -3|abs }}{{ true|abs }}{{ (-2.5)|abs }}|{{ u|truncate(3) }}|")
        .render_interpreted(&[], &opts)
        .unwrap();
    assert_eq!(out, "312.5||");
    for (source, message) in [
        ("{{ u|abs }}", "bad operand type for abs(): 'Undefined'"),
        ("{{ 'x'|abs }}", "bad operand type for abs(): 'str'"),
        ("{{ u|attr('x') }}", "'u' is undefined"),
    ] {
        let err = t(source).render_interpreted(&[], &opts).unwrap_err();
        assert!(err.message.contains(message), "{source}: {}", err.message);
    }
}

#[test]
fn plain_errors_skip_the_diagnostic_render() {
    let t = ChatTemplate::compile("{{ nothing.attr }}", Vec::new()).unwrap();
    let named = t
        .render_interpreted(&[], &RenderOptions::default())
        .unwrap_err();
    assert!(
        named.message.contains("'nothing' is undefined"),
        "{}",
        named.message
    );
    let opts = RenderOptions {
        plain_errors: true,
        ..Default::default()
    };
    let plain = t.render_interpreted(&[], &opts).unwrap_err();
    assert!(!plain.message.contains("'nothing'"), "{}", plain.message);
    assert_eq!(plain.code, named.code);
}

#[test]
fn chained_comparisons_compare_pair_by_pair_as_python() {
    let t = |source: &str| ChatTemplate::compile(source, Vec::new()).unwrap();
    let opts = RenderOptions::default();
    let out = t("{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 3 < 1 < 'x' }}{{ 'a' in 'abc' == true }}{{ (1) <= (1) != 2 }}{{ 1 is in [1] }}")
        .render_interpreted(&[], &opts)
        .unwrap();
    // `3 < 1` is false, so `1 < 'x'` is never compared; `'a' in 'abc' == true` is
    // `'a' in 'abc' and 'abc' == true`.
    assert_eq!(out, "TrueFalseFalseFalseTrueTrue");
    for (source, message) in [
        (
            "{{ 1 < 2 < 'x' }}",
            "'<' not supported between instances of 'int' and 'str'",
        ),
        (
            "{{ [] <= 1 == 1 }}",
            "'<=' not supported between instances of 'list' and 'int'",
        ),
        (
            "{{ 1 is in 'abc' }}",
            "'in <string>' requires string as left operand, not int",
        ),
        (
            "{% macro f() %}{% endmacro %}{{ f|length }}",
            "object of type 'Macro' has no len()",
        ),
        // A middle operand in parentheses is written again with them.
        (
            "{{ -3 < (none)|float in ('x')|trim }}",
            "'in <string>' requires string as left operand, not float",
        ),
        (
            "{{ -3 < ((')(')|trim) in ('x')|trim }}",
            "'<' not supported between instances of 'int' and 'str'",
        ),
    ] {
        let err = t(source).render_interpreted(&[], &opts).unwrap_err();
        assert!(err.message.contains(message), "{source}: {}", err.message);
    }
}

#[test]
fn a_reused_render_is_the_render() {
    let t = ChatTemplate::compile(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ strftime_now('%%') }}",
        vec![],
    )
    .unwrap();
    let opts = RenderOptions::default();
    let one = [json!({"role": "user", "content": ""})];
    let first = t.render_reusing(&one, &opts).unwrap();
    assert_eq!(first, "<user>%");
    assert_eq!(t.render_reusing(&one, &opts).unwrap(), first);
    // Another message, or the same with other options, is rendered.
    let other = [json!({"role": "system", "content": ""})];
    assert_eq!(t.render_reusing(&other, &opts).unwrap(), "<system>%");
    let prompt = RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    };
    assert_eq!(
        t.render_reusing(&one, &prompt).unwrap(),
        t.render(&one, &prompt).unwrap()
    );
    // Longer lists are never kept.
    let two = [one[0].clone(), json!({"role": "assistant", "content": "y"})];
    assert_eq!(
        t.render_reusing(&two, &opts).unwrap(),
        "<user><assistant>y%"
    );
}

#[test]
fn list_methods_and_groups_as_python_has_them() {
    let ok = |source: &str| render(source, json!([]), false).unwrap();
    assert_eq!(ok("{{ [1, 2, 1].index(1, 1) }}"), "2");
    assert_eq!(ok("{{ [1, 2, 1].index(1, -1) }}"), "2");
    assert_eq!(ok("{{ [1, 2, 1].index(2, 0, 9) }}"), "1");
    // A dict unpacks into its keys, as `for k, v in` does in jinja2's urlencode.
    assert_eq!(ok("{{ [{'a': 1, 'b': 2}]|urlencode }}"), "a=b");
    // A group of `groupby` is a tuple holding a list.
    assert_eq!(ok("{{ ([{'r': 1}]|groupby('r')|first).count(1) }}"), "1");
    for (source, message) in [
        (
            "{{ [1, 2].count(1, 2) }}",
            "list.count() takes exactly one argument (2 given)",
        ),
        ("{{ [1, 2].index(1, 1) }}", "1 is not in list"),
        (
            "{{ [1].index() }}",
            "index expected at least 1 argument, got 0",
        ),
        (
            "{{ [1].index(1, 0, 1, 2) }}",
            "index expected at most 3 arguments, got 4",
        ),
        (
            "{{ [1].index(1, 'a') }}",
            "slice indices must be integers or have an __index__ method",
        ),
        (
            "{{ ([{'r': 1}]|groupby('r')|first) + [1] }}",
            "can only concatenate tuple (not \"list\") to tuple",
        ),
        (
            "{{ {} + ([{'r': 1}]|groupby('r')|first) }}",
            "unsupported operand type(s) for +: 'dict' and '_GroupTuple'",
        ),
        (
            "{{ dict.fromkeys([{'r': 1}]|groupby('r')|list, 0) }}",
            "unhashable type: 'list'",
        ),
        (
            "{{ [{'a': 1}]|urlencode }}",
            "not enough values to unpack (expected 2, got 1)",
        ),
    ] {
        assert_raises(source, message);
    }
}

#[test]
fn lists_order_copy_and_sum_as_python_does() {
    let ok = |source: &str| render(source, json!([]), false).unwrap();
    assert_eq!(ok("{{ [1, 2].copy() }}"), "[1, 2]");
    assert_eq!(ok("{{ ([1] + [2]).copy() }}"), "[1, 2]");
    assert_eq!(ok("{{ ([1] + [2]) < [3] }}"), "True");
    assert_eq!(ok("{{ [1, 2] < [1, 2, 0] }}"), "True");
    assert_eq!(ok("{{ (1, 2) < (1, 3) }}"), "True");
    assert_eq!(ok("{{ (1e308) ** 0.5 }}"), "1e+154");
    for (source, message) in [
        (
            "{{ [1] < (1,) }}",
            "'<' not supported between instances of 'list' and 'tuple'",
        ),
        ("{{ [1, x]|sum }}", "'x' is undefined"),
        (
            "{{ [{'a': 1}, {}]|sum(attribute='a') }}",
            "'dict object' has no attribute 'a'",
        ),
        ("{{ 1e200 ** 2 }}", "(34, 'Numerical result out of range')"),
        (
            "{{ true.items() }}",
            "'bool object' has no attribute 'items'",
        ),
        ("{{ none.get('a') }}", "'None' has no attribute 'get'"),
        (
            "{{ ([{'r': 1}]|groupby('r')|first).get('a') }}",
            "'jinja2.filters._GroupTuple object' has no attribute 'get'",
        ),
        ("{{ 2 ** 1e10 }}", "(34, 'Numerical result out of range')"),
    ] {
        assert_raises(source, message);
    }
}

#[test]
fn undefined_values_met_later_are_named_as_jinja2_names_them() {
    for (source, message) in [
        // `map(attribute=)` gives an undefined value for each item that lacks it.
        (
            "{{ [1, 2]|map(attribute='role')|list|min }}",
            "'int object' has no attribute 'role'",
        ),
        (
            "{{ [1]|map(attribute='role')|first + 1 }}",
            "'int object' has no attribute 'role'",
        ),
        (
            "{{ [{'a': 1}]|map(attribute='a.b')|first + 1 }}",
            "'int object' has no attribute 'b'",
        ),
        // `truncate` gives an undefined value back, hint and all.
        (
            "{% set d = {} %}{{ (d.name)|truncate(5) * 2 }}",
            "'dict object' has no attribute 'name'",
        ),
        (
            "{% set d = {} %}{{ ((d['a'])|truncate(5))|last|float }}",
            "No last item, sequence was empty.",
        ),
        // minijinja's `selectattr` skips an item whose lookup Python refuses.
        ("{{ [1, z]|selectattr('role')|list }}", "'z' is undefined"),
        // `items` of an undefined value gives nothing, named or not.
        (
            "{% set d = {} %}{% for p in (d.a)|items|list + (d.b).split() %}{% endfor %}",
            "'dict object' has no attribute 'b'",
        ),
        (
            "{{ (([]|last)|items|list)|max > 1 }}",
            "No aggregated item, sequence was empty.",
        ),
        // An undefined value is a sequence to jinja2, named or not.
        (
            "{% set w = w %}{% if w is sequence %}{{ w[0] }}{% endif %}",
            "'w' is undefined",
        ),
        // Sorting the keys compares an undefined one with the others.
        (
            "{{ {'k': 1, z: 2}|tojson(sort_keys=true) }}",
            "'z' is undefined",
        ),
        // A name called inside a macro, where minijinja calls the undefined value it captured.
        (
            "{% macro m() %}{{ foo(1) }}{% endmacro %}{{ m() }}",
            "'foo' is undefined",
        ),
        (
            "{% macro w() %}{{ caller() }}{% endmacro %}{% call w() %}{{ namespace(a=1).a ~ foo(1).x }}{% endcall %}",
            "'foo' is undefined",
        ),
        // `in` after a test's name, which jinja2 reads as a name called with what follows.
        (
            "{% macro m() %}{{ 'a' is string in ('b') }}{% endmacro %}{{ m() }}",
            "'in' is undefined",
        ),
    ] {
        assert_raises(source, message);
    }
    let ok = |source: &str| render(source, json!([]), false).unwrap();
    assert_eq!(
        ok("{{ [1]|map(attribute='role', default=3)|first + 1 }}"),
        "4"
    );
    // A lone key is never compared: Python's `json.dumps` refuses its type.
    assert_raises(
        "{{ {z: 2}|tojson(sort_keys=true) }}",
        "keys must be str, int, float, bool or None, not Undefined",
    );
}

#[test]
fn text_percent_args_formats_as_python() {
    let ok = |source: &str| render(source, json!([]), false).unwrap();
    assert_eq!(
        ok("{{ '%s!' % 'x' }}|{{ '%d-%s' % (1, 'a') }}|{{ '%(a)s' % {'a': 1} }}|{{ '%s' % [1, 2] }}|{{ 'x' % [] }}"),
        "x!|1-a|1|[1, 2]|x"
    );
    for (source, message) in [
        (
            "{{ 'x' % 3 }}",
            "not all arguments converted during string formatting",
        ),
        (
            "{{ '%s %s' % [1, 2] }}",
            "not enough arguments for format string",
        ),
        (
            "{{ '%(a)s' % [1] }}",
            "list indices must be integers or slices, not str",
        ),
    ] {
        assert_raises(source, message);
    }
}

#[test]
fn a_chain_the_rewrite_cannot_take_leaves_the_rest_python_s() {
    let source = "{% for m in messages if m.content not in (messages|first).role == 'x'[0] %}\
                  {% endfor %}{{ 'a' + 3 }}";
    let err = render(source, json!([{"role": "user", "content": "hi"}]), false).unwrap_err();
    assert!(
        err.message
            .contains("can only concatenate str (not \"int\") to str"),
        "{}",
        err.message
    );
}

#[test]
fn not_where_jinja2_reads_a_name_is_its_undefined_variable() {
    for source in [
        "{{ 1 ~ not (2) }}",
        "{{ - not (1) }}",
        "{{ 1 + not (2) }}",
        "{{ none == not ([1])|first }}",
    ] {
        assert_raises(source, "'not' is undefined");
    }
    // Where a condition starts, `not` is the operator.
    let ok = |source: &str| render(source, json!([]), false).unwrap();
    assert_eq!(ok("{{ 1 and not (0) }}"), "True");
    assert_eq!(ok("{{ not (1) }}"), "False");
    assert_eq!(ok("{{ [1] if not (0) else 2 }}"), "[1]");
}
