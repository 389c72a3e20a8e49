//! Render plans against the interpreter on generated templates: small random templates over the
//! grammar chat templates use (output, `if`, `for` with `loop` and filters, `set`, namespaces,
//! macros with defaults, `break`/`continue`, whitespace control; filters, tests, methods,
//! operators, slices, literals) and random messages (strings, numbers, floats, wide integers,
//! null, nested lists and maps, keys named like methods). Wherever the plan renders, the
//! interpreter renders the same bytes; wherever the interpreter fails, the plan hands over.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value as Json};
use sft_dataset::render::{ChatTemplate, RenderOptions};

const NAMES: [&str; 8] = ["x", "y", "m", "item", "content", "ns", "loop", "messages"];
const KEYS: [&str; 10] = [
    "role",
    "content",
    "items",
    "get",
    "name",
    "type",
    "tool_calls",
    "a",
    "b",
    "values",
];
const STRINGS: [&str; 10] = [
    "",
    "a",
    "user",
    "assistant",
    " pad ",
    "<think>",
    "</think>",
    "x,y",
    "é🙂",
    "\n",
];
const FILTERS: [&str; 22] = [
    "trim",
    "length",
    "tojson",
    "string",
    "items",
    "join",
    "safe",
    "first",
    "last",
    "lower",
    "upper",
    "list",
    "reverse",
    "capitalize",
    "dictsort",
    "count",
    "d('z')",
    "default('', true)",
    "join(', ')",
    "replace('a', 'b')",
    "map('upper')",
    "selectattr('role', 'equalto', 'user')",
];
const TESTS: [&str; 14] = [
    "defined",
    "undefined",
    "none",
    "string",
    "number",
    "integer",
    "float",
    "boolean",
    "mapping",
    "sequence",
    "iterable",
    "true",
    "false",
    "eq 'user'",
];
const METHODS: [&str; 12] = [
    "strip()",
    "lstrip('a')",
    "rstrip()",
    "split(',')",
    "split()",
    "startswith('a')",
    "endswith('>')",
    "upper()",
    "lower()",
    "items()",
    "keys()",
    "get('role')",
];
const OPS: [&str; 14] = [
    "+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "and", "or",
];

fn pick<'a>(u: &mut Unstructured, items: &[&'a str]) -> Result<&'a str> {
    Ok(*u.choose(items)?)
}

fn expr(u: &mut Unstructured, depth: u32, out: &mut String) -> Result<()> {
    let leaf = depth > 3 || u.ratio(1, 3)?;
    if leaf {
        match u.int_in_range(0..=6)? {
            0 => out.push_str(pick(u, &NAMES)?),
            1 => out.push_str(&format!("{:?}", pick(u, &STRINGS)?)),
            2 => out.push_str(&u.int_in_range(-3i64..=12)?.to_string()),
            3 => out.push_str(pick(
                u,
                &["none", "true", "false", "1.5", "[]", "{}", "[1, 'a']"],
            )?),
            4 => {
                out.push_str("messages[");
                out.push_str(&u.int_in_range(-2i64..=3)?.to_string());
                out.push(']');
            }
            5 => out.push_str(pick(
                u,
                &[
                    "loop.index0",
                    "loop.first",
                    "loop.last",
                    "loop.length",
                    "loop.previtem",
                    "ns.a",
                ],
            )?),
            _ => out.push_str(pick(
                u,
                &[
                    "m.role",
                    "m.content",
                    "m['items']",
                    "m.get",
                    "item.name",
                    "m.tool_calls",
                ],
            )?),
        }
        return Ok(());
    }
    match u.int_in_range(0..=9)? {
        0 => {
            expr(u, depth + 1, out)?;
            out.push_str(&format!(" {} ", pick(u, &OPS)?));
            expr(u, depth + 1, out)?;
        }
        1 => {
            out.push('(');
            expr(u, depth + 1, out)?;
            out.push_str(&format!(")|{}", pick(u, &FILTERS)?));
        }
        2 => {
            out.push('(');
            expr(u, depth + 1, out)?;
            let not = if u.arbitrary()? { "not " } else { "" };
            out.push_str(&format!(") is {not}{}", pick(u, &TESTS)?));
        }
        3 => {
            out.push('(');
            expr(u, depth + 1, out)?;
            out.push_str(&format!(").{}", pick(u, &METHODS)?));
        }
        4 => {
            out.push('(');
            expr(u, depth + 1, out)?;
            out.push_str(&format!(").{}", pick(u, &KEYS)?));
        }
        5 => {
            out.push('(');
            expr(u, depth + 1, out)?;
            out.push_str(pick(
                u,
                &[")[0]", ")[-1]", ")[1:]", ")[::-1]", ")['role']", ")[:2]"],
            )?);
        }
        6 => {
            out.push_str("not ");
            expr(u, depth + 1, out)?;
        }
        7 => {
            expr(u, depth + 1, out)?;
            out.push_str(" if ");
            expr(u, depth + 1, out)?;
            if u.arbitrary()? {
                out.push_str(" else ");
                expr(u, depth + 1, out)?;
            }
        }
        8 => {
            out.push_str(pick(u, &["f(", "namespace(a=", "range(", "[", "{'k': "])?);
            expr(u, depth + 1, out)?;
            out.push_str(if out.ends_with('[') { "]" } else { ")" });
            let open = out.rfind(['(', '[', '{']).map(|i| &out[i..=i]);
            if open == Some("{") {
                out.push('}');
            }
        }
        _ => {
            expr(u, depth + 1, out)?;
            out.push_str(" ~ ");
            expr(u, depth + 1, out)?;
        }
    }
    Ok(())
}

fn ws(u: &mut Unstructured) -> Result<&'static str> {
    Ok(*u.choose(&["", "-"])?)
}

fn block(u: &mut Unstructured, depth: u32, in_loop: bool, out: &mut String) -> Result<()> {
    for _ in 0..u.int_in_range(1..=4)? {
        match u.int_in_range(0..=8)? {
            0 => out.push_str(pick(u, &["text", "\n", "  ", "<|im_start|>", " | "])?),
            1 | 2 => {
                out.push_str(&format!("{{{{{} ", ws(u)?));
                expr(u, depth, out)?;
                out.push_str(" }}");
            }
            3 if depth < 3 => {
                out.push_str(&format!("{{%{} if ", ws(u)?));
                expr(u, depth, out)?;
                out.push_str(" %}");
                block(u, depth + 1, in_loop, out)?;
                if u.arbitrary()? {
                    out.push_str("{% elif ");
                    expr(u, depth, out)?;
                    out.push_str(" %}");
                    block(u, depth + 1, in_loop, out)?;
                }
                if u.arbitrary()? {
                    out.push_str("{% else %}");
                    block(u, depth + 1, in_loop, out)?;
                }
                out.push_str(&format!("{{%{} endif %}}", ws(u)?));
            }
            4 if depth < 3 => {
                let target = pick(u, &["m", "item", "x", "k, v"])?;
                out.push_str(&format!("{{%{} for {target} in ", ws(u)?));
                expr(u, depth, out)?;
                if u.ratio(1, 4)? {
                    out.push_str(" if ");
                    expr(u, depth + 1, out)?;
                }
                out.push_str(" %}");
                block(u, depth + 1, true, out)?;
                if u.ratio(1, 4)? {
                    out.push_str("{% else %}");
                    block(u, depth + 1, in_loop, out)?;
                }
                out.push_str("{% endfor %}");
            }
            5 => {
                let target = pick(u, &["x", "y", "content", "ns.a"])?;
                out.push_str(&format!("{{% set {target} = "));
                expr(u, depth, out)?;
                out.push_str(" %}");
            }
            6 if in_loop => out.push_str(pick(u, &["{% break %}", "{% continue %}"])?),
            7 => out.push_str(pick(
                u,
                &[
                    "{{ f(m) }}",
                    "{{ f(x, b=y) }}",
                    "{{ f() | trim }}",
                    "{% set ns = namespace(a=1) %}",
                ],
            )?),
            _ => out.push_str("{% set y %}block{{ x }}{% endset %}"),
        }
    }
    Ok(())
}

fn value(u: &mut Unstructured, depth: u32) -> Result<Json> {
    Ok(match u.int_in_range(0..=if depth > 2 { 5 } else { 7 })? {
        0 => Json::Null,
        1 => json!(u.arbitrary::<bool>()?),
        2 => json!(u.int_in_range(-5i64..=5)?),
        3 => u
            .choose(&[
                json!(1.5),
                json!(0.1),
                json!(1e21),
                json!(18446744073709551615u64),
            ])?
            .clone(),
        4 | 5 => json!(pick(u, &STRINGS)?),
        6 => Json::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| value(u, depth + 1))
                .collect::<Result<_>>()?,
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..u.int_in_range(0..=3)? {
                map.insert(pick(u, &KEYS)?.to_string(), value(u, depth + 1)?);
            }
            Json::Object(map)
        }
    })
}

fn message(u: &mut Unstructured) -> Result<Json> {
    let mut map = Map::new();
    map.insert(
        "role".into(),
        json!(pick(u, &["user", "assistant", "system", "tool"])?),
    );
    map.insert("content".into(), value(u, 1)?);
    for _ in 0..u.int_in_range(0..=2)? {
        map.insert(pick(u, &KEYS)?.to_string(), value(u, 1)?);
    }
    Ok(Json::Object(map))
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut source = String::new();
    if u.arbitrary()? {
        source.push_str("{% macro f(a, b='B') %}[{{ a }}|{{ b }}]{% endmacro %}");
    }
    if u.arbitrary()? {
        source.push_str("{% set ns = namespace(a=0) %}");
    }
    block(u, 0, false, &mut source)?;
    let messages = (0..u.int_in_range(0..=3)?)
        .map(|_| message(u))
        .collect::<Result<Vec<_>>>()?;
    let Ok(template) = ChatTemplate::compile(&source, vec![("eos_token".into(), "</s>".into())])
    else {
        return Ok(());
    };
    let opts = RenderOptions {
        add_generation_prompt: u.arbitrary()?,
        ..Default::default()
    };
    if let Some(planned) = template.render_planned(&messages, &opts) {
        let planned = planned.map_err(|e| e.message);
        let interpreted = template
            .render_interpreted(&messages, &opts)
            .map_err(|e| e.message);
        assert_eq!(
            planned, interpreted,
            "template {source:?} messages {messages:?}"
        );
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
