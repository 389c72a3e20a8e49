//! Render plans against the interpreter: each case renders with both and must give the same
//! bytes, and the plan must render it itself (or hand it over, where the case says so).

use minijinja::Value;
use serde_json::{json, Value as Json};

use super::{ChatTemplate, RenderOptions};

fn template(source: &str) -> ChatTemplate {
    ChatTemplate::compile(
        source,
        vec![
            ("bos_token".into(), Value::from("<s>")),
            ("eos_token".into(), Value::from("</s>")),
        ],
    )
    .unwrap_or_else(|e| panic!("{source}: {}", e.message))
}

/// The plan's render, checked against the interpreter's; `None` when the plan handed it over.
fn planned(source: &str, messages: Json, opts: &RenderOptions) -> Option<String> {
    let t = template(source);
    let messages = messages.as_array().cloned().unwrap();
    let interpreted = t.render_interpreted(&messages, opts);
    let planned = t.render_planned(&messages, opts)?;
    match (planned, interpreted) {
        (Ok(p), Ok(i)) => {
            assert_eq!(p, i, "{source}");
            Some(p)
        }
        (p, i) => panic!("{source}: plan {p:?}, interpreter {i:?}"),
    }
}

fn render(source: &str, messages: Json) -> String {
    planned(source, messages, &RenderOptions::default())
        .unwrap_or_else(|| panic!("the plan handed {source} to the interpreter"))
}

fn convo() -> Json {
    json!([
        {"role": "system", "content": "  be brief  "},
        {"role": "user", "content": "hi <think>x</think>"},
        {"role": "assistant", "content": "<think>\nr\n</think>\n\nyes", "tool_calls": [
            {"function": {"name": "f", "arguments": {"b": 2, "a": [1, "x"], "C": null}}}
        ]},
        {"role": "tool", "content": "42"}
    ])
}

#[test]
fn every_template_of_the_known_families_gets_a_plan() {
    let t = template("{{ messages[0].content }}");
    assert_eq!(t.renderer(), super::Renderer::Plan);
    assert_eq!(t.plan_declined(), Some(0));
}

#[test]
fn a_markup_string_prints_on_the_plan_and_anything_else_is_the_interpreter_s() {
    // Qwen3.5's way with tool arguments: `tojson | safe`, then printed.
    let src = "{% for k, v in messages[2].tool_calls[0].function.arguments|items %}{% set v = v|tojson|safe if v is mapping or v is sequence else v|string %}<{{ k }}>{{ v }}{% endfor %}";
    assert_eq!(render(src, convo()), "<b>2<a>[1, \"x\"]<C>None");
    for src in [
        "{{ ('<'|safe) + '<' }}",
        "{{ 'a' ~ (('<'|safe) + '<') }}",
        "{{ ('<'|safe)|trim }}",
        "{{ ('<'|safe) is string }}",
    ] {
        assert_eq!(
            planned(src, convo(), &RenderOptions::default()),
            None,
            "{src}"
        );
    }
}

#[test]
fn loops_and_their_loop_variable() {
    let out = render(
        "{% for m in messages %}{{ loop.index0 }}/{{ loop.index }}/{{ loop.revindex }}/{{ loop.length }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}:{{ m.role }}:{{ loop.previtem.role if loop.previtem }}>{{ loop.nextitem.role if loop.nextitem }}|{% endfor %}",
        convo(),
    );
    assert!(out.starts_with("0/1/4/4F:system:>user|"), "{out}");
    render("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}{% else %}none{% endfor %}", convo());
    render("{% for m in messages %}{% if loop.index0 == 2 %}{% break %}{% endif %}{% if m.role == 'system' %}{% continue %}{% endif %}{{ m.role }}{% endfor %}", convo());
    render(
        "{% for m in [] %}x{% else %}empty{% endfor %}{% for x in undefined_thing %}y{% endfor %}",
        convo(),
    );
    render(
        "{% for k in messages[2].tool_calls[0].function.arguments %}{{ k }},{% endfor %}",
        convo(),
    );
    render("{% for k, v in messages[2].tool_calls[0].function.arguments.items() %}{{ k }}={{ v }};{% endfor %}", convo());
    render("{% for k, v in messages[2].tool_calls[0].function.arguments|items %}{{ k }}={{ v|tojson }};{% endfor %}", convo());
    render("{% for k, v in messages[2].tool_calls[0].function.arguments|dictsort %}{{ k }};{% endfor %}", convo());
}

#[test]
fn scopes_follow_minijinja() {
    render(
        "{% set x = 1 %}{% for m in messages %}{% set x = loop.index %}{{ x }}{% endfor %}{{ x }}",
        convo(),
    );
    render("{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }}{{ ns.s }}{{ ns.missing }}", convo());
    render(
        "{% with a = 1, b = 'z' %}{{ a }}{{ b }}{% endwith %}{{ a }}",
        convo(),
    );
    render(
        "{% set block %}x{{ messages|length }}y{% endset %}[{{ block }}]",
        convo(),
    );
    render("{% for m in messages %}{% if loop.first %}{% set seen = 1 %}{% endif %}{{ seen }}{% endfor %}", convo());
}

#[test]
fn macros_with_defaults_keywords_and_recursion() {
    render(
        "{% macro m(a, b='B', c=none) %}<{{ a }}{{ b }}{{ c }}>{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(a=3, c=4) }}{{ m(1)|trim|length }}{{ m(x, b=y) }}{{ m(1, nope) }}",
        convo(),
    );
    render(
        "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(4) }}",
        convo(),
    );
    // A macro sees the template's globals, not the caller's loop variables.
    render(
        "{% set g = 'G' %}{% macro m() %}{{ g }}{{ m2 }}{% endmacro %}{% for m2 in messages %}{{ m() }}{% endfor %}",
        convo(),
    );
    render(
        "{% macro c(x) %}{{ x }}{% endmacro %}[{{ c(messages[0].content)|trim }}]",
        convo(),
    );
}

#[test]
fn operators_and_tests() {
    render("{{ 1 + 2 }}{{ 7 // 2 }}{{ 7 % 3 }}{{ 1 / 4 }}{{ -3 }}{{ 2 * 3 }}{{ 'a' ~ 1 ~ none ~ true }}{{ [1] + [2] }}", convo());
    render("{{ 1 < 2 < 3 }}{{ 'a' < 'b' }}{{ 1 == 1.0 }}{{ 'x' in 'axb' }}{{ 'role' in messages[0] }}{{ 3 not in [1, 2] }}{{ none == none }}", convo());
    render("{{ messages is sequence }}{{ messages[0] is mapping }}{{ 'a' is string }}{{ 1 is number }}{{ true is number }}{{ 1.5 is float }}{{ x is undefined }}{{ x is sequence }}{{ none is iterable }}{{ 'a' is iterable }}{{ 3 is odd }}{{ true is true }}{{ 1 is eq 1 }}", convo());
    render("{{ messages[-1].content }}{{ messages[9] is defined }}{{ messages[1:3]|length }}{{ messages[::-1][0].role }}{{ 'abcdef'[1:4] }}{{ 'abc'[::-1] }}", convo());
    // A slice is a list that is not a sequence.
    render("{{ messages[1:] is sequence }}{{ messages[1:]|tojson }}{{ messages[1:] }}{% if messages[5:] %}T{% endif %}{% for m in messages[1:] %}{{ loop.length }}{{ loop.revindex }}{% endfor %}", convo());
    render("{{ {'a': 1, 'b': [2]}['b'][0] }}{{ {'a': 1}.a }}{{ (1, 2)[1] }}{{ 'y' if false }}{{ 'n' if 0 else 'e' }}{{ none or 'd' }}{{ 0 and 1 }}", convo());
}

#[test]
fn filters_and_methods() {
    let src = "{{ messages[0].content|trim }}|{{ messages|length }}|{{ messages[0]|tojson }}|{{ messages[2].tool_calls|tojson(indent=2) }}|{{ 3|string }}|{{ ['a', 'b']|join(', ') }}|{{ messages|first|tojson }}|{{ (messages|last).role|upper }}|{{ x|default('d') }}|{{ ''|default('e', true) }}|{{ messages|reverse|map(attribute='role')|join }}|{{ 'a-b'|replace('-', '+') }}|{{ 'hELLO'|capitalize }}|{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list }}|{{ ['a', 'B']|map('upper')|join }}";
    render(src, convo());
    let methods = "{{ messages[1].content.split('<think>')[-1].split('</think>')[0] }}|{{ messages[2].content.split('</think>')[-1].lstrip('\\n') }}|{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a b  c'.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'ab'.startswith('a') }}{{ 'ab'.endswith('c') }}|{{ 'Ab'.lower() }}{{ 'ab'.upper() }}|{{ 'aXa'.replace('a', 'b') }}|{{ messages[0].get('role') }}{{ messages[0].get('nope') }}{{ messages[0].get('nope', 'dflt') }}|{% for k in messages[0].keys() %}{{ k }}{% endfor %}|{% for v in messages[0].values() %}{{ v }}{% endfor %}";
    render(methods, convo());
}

#[test]
fn python_semantics_where_minijinja_differs() {
    // Iterating None raises, as in Python; the plan hands it over.
    let t = template("{% for t in tools %}{{ t }}{% endfor %}");
    let err = t.render(&[], &RenderOptions::default()).unwrap_err();
    assert!(
        err.message.contains("'NoneType' object is not iterable"),
        "{}",
        err.message
    );
    // map/select give one-shot generators: no length, refused by tojson, a second loop sees
    // nothing, always true.
    let messages = convo().as_array().cloned().unwrap();
    let opts = RenderOptions::default();
    for source in [
        "{{ messages|map(attribute='role')|tojson }}",
        "{{ messages|selectattr('role')|length }}",
    ] {
        assert!(
            template(source).render(&messages, &opts).is_err(),
            "{source}"
        );
    }
    let out = render(
        "{% set g = messages|map(attribute='role') %}{% for r in g %}{{ r }},{% endfor %}|{% for r in g %}{{ r }}{% endfor %}|{{ g|list }}|{% if messages|selectattr('role', 'equalto', 'nobody') %}T{% endif %}",
        convo(),
    );
    assert_eq!(out, "system,user,assistant,tool,||[]|T");
    // A dict method's name is the method, not the key of that name.
    let messages = vec![json!({"role": "user", "content": "x", "items": {"type": "str"}})];
    let t = template("{{ messages[0].items.type is defined }}|{{ messages[0]['items'].type }}|{% if messages[0].get %}G{% endif %}");
    assert_eq!(t.render(&messages, &opts).unwrap(), "False|str|G");
    // Also where the receiver or the lookup is in parentheses.
    let t =
        template("{{ ((messages[0]).get)|string }}|{{ ((messages[0]).keys).items is defined }}");
    assert_eq!(
        t.render(&messages, &opts).unwrap(),
        "<built-in method get of dict object at 0x7f0000000000>|False"
    );
}

#[test]
fn printing_follows_the_python_formatter() {
    let out = render(
        "{{ 2.5 }} {{ 1e-7 }} {{ none }} {{ true }} {{ [1, 'a', none] }} {{ messages[2].tool_calls[0].function.arguments }} {{ 4294967296 }}",
        convo(),
    );
    assert!(out.starts_with("2.5 1e-07 None"), "{out}");
}

#[test]
fn globals_and_context() {
    std::env::set_var("SOURCE_DATE_EPOCH", "1721995200");
    render("{% if strftime_now is defined %}{{ strftime_now('%Y-%m-%d') }}{% endif %}{{ range(3)|join(',') }}{{ range(1, 7, 2)|list }}{{ bos_token }}{{ eos_token }}", convo());
    let kwargs = json!({"custom": [1, 2], "reasoning_effort": "ignored"});
    let opts = RenderOptions {
        add_generation_prompt: true,
        enable_thinking: Some(false),
        tools: Some(&json!([{"type": "function", "function": {"name": "f"}}])),
        template_kwargs: kwargs.as_object(),
        reasoning_effort: Some("high"),
        ..Default::default()
    };
    let out = planned(
        "{{ add_generation_prompt }}{{ enable_thinking }}{{ tools|tojson }}{{ custom }}{{ reasoning_effort }}{{ documents }}",
        convo(),
        &opts,
    );
    assert_eq!(
        out.as_deref(),
        Some("TrueFalse[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}][1, 2]highNone")
    );
}

#[test]
fn what_the_plan_does_not_know_goes_to_the_interpreter() {
    let opts = RenderOptions::default();
    // Errors read as the interpreter writes them.
    assert_eq!(planned("{{ raise_exception('no') }}", convo(), &opts), None);
    let t = template("{{ raise_exception('no') }}");
    let err = t.render(&[], &opts).unwrap_err();
    assert_eq!(err.message, "no");
    // Operations whose result is not certain: attribute of undefined, adding a string to a
    // number, a float in an integer division.
    for source in [
        "{{ x.y }}",
        "{{ 'a' + 1 }}",
        "{{ 7.5 // 2 }}",
        "{{ messages[0].content.title() }}",
    ] {
        let t = template(source);
        let messages = convo().as_array().cloned().unwrap();
        assert!(t.render_planned(&messages, &opts).is_none(), "{source}");
        let ours = t.render(&messages, &opts);
        let theirs = t.render_interpreted(&messages, &opts);
        assert_eq!(
            ours.map_err(|e| e.message),
            theirs.map_err(|e| e.message),
            "{source}"
        );
    }
    // A construct plans do not implement hands over the renders that reach it, and only those.
    let source = "{% macro m() %}{{ caller() }}{% endmacro %}{% if messages|length > 1 %}{% call m() %}x{% endcall %}{{ [1].append(2) }}{% endif %}{{ messages|length }}";
    let t = template(source);
    assert_eq!(t.renderer(), super::Renderer::Plan);
    let one = [json!({"role": "user", "content": "a"})];
    assert_eq!(t.render_planned(&one, &opts).unwrap().unwrap(), "1");
    let two = [one[0].clone(), json!({"role": "assistant", "content": "b"})];
    assert!(t.render_planned(&two, &opts).is_none(), "{source}");
    assert_eq!(
        t.render(&two, &opts).map_err(|e| e.message),
        t.render_interpreted(&two, &opts).map_err(|e| e.message)
    );
}

#[test]
fn mlx_node_rendering_has_a_plan_too() {
    let t = ChatTemplate::compile_as(
        "{% for m in messages %}{{ m.role }}:{{ m.content }}{{ m|tojson }}\n{% endfor %}",
        vec![("eos_token".into(), Value::from("</s>"))],
        super::RenderAs::MlxNode,
    )
    .unwrap();
    let messages = vec![json!({"role": " User ", "content": "a<|im_end|>b", "extra": 1})];
    let opts = RenderOptions::default();
    let planned = t.render_planned(&messages, &opts).unwrap().unwrap();
    assert_eq!(planned, t.render_interpreted(&messages, &opts).unwrap());
    assert_eq!(planned, "user:ab{\"role\":\"user\",\"content\":\"ab\"}\n");
}

#[test]
fn joins_and_pairs_print_as_python() {
    let out = render(
        "{{ 1e-7 ~ '|' ~ true ~ none ~ [1.5] }}|{{ (messages[2].tool_calls[0].function.arguments|dictsort)[0] }}|{{ ('x',) }}|{% for p in messages[0]|items %}{{ p ~ '' }}{% endfor %}",
        convo(),
    );
    assert_eq!(
        out,
        "1e-07|TrueNone[1.5]|('a', [1, 'x'])|('x',)|('role', 'system')('content', '  be brief  ')"
    );
}

#[test]
fn ranges_over_any_64_bit_bounds() {
    let kwargs = json!({"low": i64::MIN, "high": i64::MAX});
    let opts = RenderOptions {
        template_kwargs: kwargs.as_object(),
        ..Default::default()
    };
    for source in [
        "{{ range(1, low)|list }}",
        "{{ range(high, low, -1)|length }}",
        "{{ range(low, 2, high)|list }}",
    ] {
        planned(source, json!([]), &opts);
    }
}

/// Cases where the differential fuzzer (`tests/jinja_fuzz_goldens.rs`) found the plan writing
/// other bytes than the interpreter.
#[test]
fn plan_agrees_where_the_fuzzer_found_it_did_not() {
    let opts = RenderOptions::default();
    // What a `{% set %}` block's body sets is not seen after it, whatever its whitespace
    // control.
    for source in [
        "{% set sb %}{%- set v = 'in' -%}{% endset %}{{ sb|length }}{{ v }}",
        "{% set v = 'out' %}{% set sb -%}\n {% set v = 'in' %} x {%- endset %}[{{ sb }}]{{ v }}",
        "{% set sb | upper %}\n  {% set v = 'in' %}a{{ v }}\n  {% endset %}[{{ sb }}]{{ v }}",
    ] {
        planned(source, convo(), &opts);
        let messages = convo().as_array().cloned().unwrap();
        let out = template(source).render(&messages, &opts).unwrap();
        assert!(!out.ends_with("in"), "{source}: {out:?}");
    }
    // `break` in a loop's `else` block leaves the loop around it.
    planned(
        "{% for it in [none, true, 'x'] %}{% for m in [] %}x{% else %}{% break %}{% endfor %}{{ loop.previtem }}{% endfor %}",
        convo(),
        &opts,
    );
    // A slice of a list prints its floats as Python does.
    let kwargs = json!({"l": [" pad ", 1e16, 4]});
    let opts = RenderOptions {
        template_kwargs: kwargs.as_object(),
        ..Default::default()
    };
    assert_eq!(
        planned("{{ l[:2] }}{{ l[1:2][0] }}", json!([]), &opts).as_deref(),
        Some("[' pad ', 1e+16]1e+16")
    );
}

/// `SFT_PLAN_TEMPLATE=<chat_template.jinja> SFT_PLAN_DATA=<jsonl> cargo test --profile ci --lib --
/// --ignored --nocapture plan_tests::plan_throughput`: renders every example of the file (a
/// prompt-completion example twice: its prompt with the generation prompt, then in full) on one
/// thread, `SFT_PLAN_ROUNDS` times, with the plan, or with the renderer `SFT_PLAN_RENDERER` names
/// (`direct`, `interpreter`): a profile of one renderer. `SFT_PLAN_MODEL=<model folder>` renders
/// that model's chat template with its special tokens instead of `SFT_PLAN_TEMPLATE`.
#[test]
#[ignore]
fn plan_throughput() {
    let path = |var: &str| std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set"));
    // `SFT_PLAN_MODEL=<model folder>`: its chat template with its own special tokens instead.
    let model = std::env::var("SFT_PLAN_MODEL")
        .ok()
        .map(|dir| crate::tokenize::ChatTokenizer::load(std::path::Path::new(&dir)).unwrap());
    let compiled;
    let t = match &model {
        Some(tokenizer) => tokenizer.chat_template().unwrap(),
        None => {
            compiled = template(&std::fs::read_to_string(path("SFT_PLAN_TEMPLATE")).unwrap());
            &compiled
        }
    };
    let data = std::fs::read_to_string(path("SFT_PLAN_DATA")).unwrap();
    let rounds: usize = std::env::var("SFT_PLAN_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let renderer = std::env::var("SFT_PLAN_RENDERER").unwrap_or_else(|_| "plan".into());
    let mut renders: Vec<(Vec<Json>, bool)> = Vec::new();
    for line in data.lines().filter(|l| !l.trim().is_empty()) {
        let record: Json = serde_json::from_str(line).unwrap();
        if let Some(messages) = record["messages"].as_array() {
            renders.push((messages.clone(), false));
        } else if let Some(prompt) = record["prompt"].as_array() {
            renders.push((prompt.clone(), true));
            let mut full = prompt.clone();
            full.push(record["completion"].clone());
            renders.push((full, false));
        }
    }
    let start = std::time::Instant::now();
    let mut bytes = 0;
    for _ in 0..rounds {
        for (messages, add_generation_prompt) in &renders {
            let opts = RenderOptions {
                add_generation_prompt: *add_generation_prompt,
                ..RenderOptions::default()
            };
            let text = match renderer.as_str() {
                "plan" => t.render_planned(messages, &opts).expect("a plan"),
                // The plan run for every render, its traces left out.
                "plan-untraced" => Ok(t
                    .plan
                    .as_ref()
                    .and_then(|p| p.render_plainly(messages, &opts))
                    .expect("a plan")),
                "direct" => t.render_direct(messages, &opts).expect("a direct renderer"),
                "interpreter" => t.render_interpreted(messages, &opts),
                other => {
                    panic!("SFT_PLAN_RENDERER={other}: plan, plan-untraced, direct or interpreter")
                }
            }
            .unwrap();
            bytes += text.len();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{} renders a round, {:.1} MB/s, {:.2} us a render",
        renders.len(),
        bytes as f64 / 1e6 / secs,
        secs * 1e6 / (renders.len() * rounds) as f64
    );
    eprintln!("traces: {:?}", t.trace_stats());
}

#[test]
fn mlx_node_rendering_iterates_strings_as_its_engine_does() {
    let t = ChatTemplate::compile_as(
        "{% for c in messages[0].content %}{{ c }}{{ loop.first }}{{ loop.previtem }}{% endfor %}",
        Vec::new(),
        super::RenderAs::MlxNode,
    )
    .unwrap();
    let messages = vec![json!({"role": "user", "content": "aé"})];
    let opts = RenderOptions::default();
    let planned = t.render_planned(&messages, &opts).unwrap().unwrap();
    assert_eq!(planned, t.render_interpreted(&messages, &opts).unwrap());
    assert_eq!(planned, "aTrueéFalsea");
    // Its loop knows neither the string's length nor its last character: the interpreter
    // answers those.
    for source in [
        "{% for c in messages[0].content %}{{ loop.length }}{% endfor %}",
        "{% for c in messages[0].content %}{{ loop.last }}{% endfor %}",
    ] {
        let t = ChatTemplate::compile_as(source, Vec::new(), super::RenderAs::MlxNode).unwrap();
        assert!(t.render_planned(&messages, &opts).is_none(), "{source}");
    }
}

#[test]
fn traces_write_repeated_shapes_and_follow_every_fact_about_the_contents() {
    let src = "{% for m in messages %}{% set c = m.content|trim %}{% if '</think>' in c %}{% set c = c.split('</think>')[-1].lstrip('\\n') %}{% endif %}<{{ m.role }}>{{ c if c else '(empty)' }}{% if c.startswith('<tool') %}[tool]{% endif %}</{{ m.role }}>{% endfor %}";
    let t = template(src);
    // Each course (a `</think>` or not, empty or not, a tool marker or not) comes back.
    let contents = [
        "plain",
        "<think>r</think>\n\nanswer",
        "  padded \n",
        "<think>s</think>\n\nother",
        "",
        "again",
        "a</think>b</think>c",
        "more",
        "<tool_response>x",
        "words",
        "\n\n",
    ];
    for c in contents {
        let messages = vec![
            json!({"role": "user", "content": "question"}),
            json!({"role": "assistant", "content": c}),
        ];
        let opts = RenderOptions::default();
        assert_eq!(
            t.render(&messages, &opts).unwrap(),
            t.render_interpreted(&messages, &opts).unwrap(),
            "{c:?}"
        );
    }
    let stats = t.trace_stats().unwrap();
    assert_eq!(stats.wrong, 0);
    assert!(stats.replayed >= 4 && stats.recorded >= 2, "{stats:?}");
}

#[test]
fn a_render_that_reads_a_content_beyond_what_traces_follow_is_never_traced() {
    for src in [
        "{% for m in messages %}{{ m.content|length }}:{{ m.content }}{% endfor %}",
        "{{ messages|tojson }}",
        "{% for m in messages %}{{ m.content[0] }}{% endfor %}",
        "{% for m in messages %}{{ m.content|upper }}{% endfor %}",
    ] {
        let t = template(src);
        for c in ["a", "bb", "ccc", "dddd"] {
            let messages = vec![json!({"role": "user", "content": c})];
            let opts = RenderOptions::default();
            assert_eq!(
                t.render(&messages, &opts).unwrap(),
                t.render_interpreted(&messages, &opts).unwrap(),
                "{src}"
            );
        }
        let stats = t.trace_stats().unwrap();
        assert_eq!((stats.recorded, stats.replayed), (0, 0), "{src}");
    }
}
