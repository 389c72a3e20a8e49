//! Render traces against the interpreter: every template of the public TRL collection
//! (`../shared/templates/trl`) and Qwen3.5's, in both renderings, renders each conversation of
//! the template corpus many times over with other contents of the same shape (contents that
//! hold `<think>` blocks, tool-response markers, surrounding whitespace, nothing, ...). The
//! render plan then writes most of them from its traces; every render must be the
//! interpreter's byte for byte, and no trace may be found wrong by the plan's own checks.
//!
//! The same holds for the 30,000 random templates of the jinja fuzz fixture.
//!
//! The templates are read from `../shared` at test time; a missing one fails the test.

mod common;

use std::path::Path;

use minijinja::Value as MjValue;
use serde_json::Value;
use sft_dataset::example::message::normalize_messages;
use sft_dataset::render::{ChatTemplate, RenderAs, RenderOptions};

use common::revive;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn conversations() -> Vec<Value> {
    let path = root().join("__test__/fixtures/template_corpus/conversations.json");
    let mut all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    revive(&mut all);
    all["conversations"].as_array().unwrap().clone()
}

/// The collection's templates and Qwen3.5's, by name.
fn templates() -> Vec<(String, String)> {
    let dir = root().join("../shared/templates/trl");
    assert!(dir.exists(), "{} is missing", dir.display());
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jinja"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    let qwen35 = root().join("../shared/tokenizers/qwen3.5/chat_template.jinja");
    assert!(qwen35.exists(), "{} is missing", qwen35.display());
    out.push(("qwen3.5".into(), std::fs::read_to_string(qwen35).unwrap()));
    out.sort();
    assert!(out.len() >= 70, "only {} templates", out.len());
    out
}

/// Contents of one shape: what each variant puts in place of a message's text.
fn variant(original: &str, message: usize, variant: usize) -> String {
    let pool: [&dyn Fn(&str) -> String; 10] = [
        &|s| s.to_string(),
        &|s| format!("  {s}\n\n"),
        &|s| format!("<think>\nweighing it\n</think>\n\n{s}"),
        &|s| format!("{s}</think>tail"),
        &|_| String::new(),
        &|_| "<tool_response>\n{\"ok\": true}\n</tool_response>".to_string(),
        &|s| format!("\u{1c}{s}\u{2003}"),
        &|s| format!("ünï <b>cødé</b> 😀 {s}"),
        &|_| "<think>\n</think>".to_string(),
        &|s| format!("{s} <think>a</think> <think>b</think> c"),
    ];
    pool[(message * 3 + variant) % pool.len()](original)
}

fn with_contents(messages: &[Value], v: usize) -> Vec<Value> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut m = m.clone();
            for (k, field) in ["content", "reasoning_content", "thinking"]
                .iter()
                .enumerate()
            {
                if let Some(Value::String(text)) = m.get(*field).cloned() {
                    m[*field] = Value::String(variant(&text, i + k, v));
                }
            }
            m
        })
        .collect()
}

/// How the render of `messages` with contents `variant` through the traces differs from the
/// interpreter's, if it does.
fn difference(
    template: &ChatTemplate,
    messages: &[Value],
    variant: usize,
    opts: &RenderOptions,
) -> Option<String> {
    let messages = with_contents(messages, variant);
    let traced = template.render(&messages, opts).map_err(|e| e.message);
    let interpreted = template
        .render_interpreted(&messages, opts)
        .map_err(|e| e.message);
    (traced != interpreted)
        .then(|| format!("variant {variant}: traced {traced:?}, interpreter {interpreted:?}"))
}

#[test]
fn traced_renders_are_the_interpreter_s() {
    let conversations = conversations();
    let special = || {
        vec![
            ("bos_token".to_string(), MjValue::from("<s>")),
            ("eos_token".to_string(), MjValue::from("</s>")),
        ]
    };
    let (mut replayed, mut failures) = (0u64, Vec::new());
    for (name, source) in templates() {
        for render_as in [RenderAs::Transformers, RenderAs::MlxNode] {
            let Ok(template) = ChatTemplate::compile_as(&source, special(), render_as) else {
                continue;
            };
            for conversation in &conversations {
                let mut messages = conversation["messages"].as_array().unwrap().clone();
                if normalize_messages(&mut messages).is_err() {
                    continue;
                }
                let tools = conversation.get("tools").cloned();
                for (agp, thinking, with_tools) in [
                    (false, None, false),
                    (true, Some(false), false),
                    (false, None, true),
                ] {
                    let opts = RenderOptions {
                        tools: tools.as_ref().filter(|_| with_tools),
                        add_generation_prompt: agp,
                        enable_thinking: thinking,
                        ..Default::default()
                    };
                    for v in 0..12 {
                        if let Some(diff) = difference(&template, &messages, v, &opts) {
                            failures.push(format!("{name} ({render_as:?}): {diff}"));
                        }
                    }
                }
            }
            if let Some(stats) = template.trace_stats() {
                replayed += stats.replayed;
                assert_eq!(stats.wrong, 0, "{name} ({render_as:?}): a trace was wrong");
            }
        }
    }
    failures.truncate(20);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Most renders of a shape after its first come from a trace.
    assert!(replayed > 10_000, "only {replayed} renders replayed");
}

/// The random templates of the jinja fuzz fixture (or the fixture `JINJA_FUZZ_CASES` names, as
/// for `jinja_fuzz_goldens`), each over its context's messages and then over the same messages
/// with other contents: random uses of contents (lookups, filters, methods, tests, operators)
/// under the trace recorder, every render the interpreter's.
#[test]
fn traced_renders_of_random_templates_are_the_interpreter_s() {
    let all = common::fuzz_cases();
    let contexts = all["contexts"].as_array().unwrap();
    let cases = all["cases"].as_array().unwrap();
    let (mut failures, mut replayed) = (Vec::new(), 0u64);
    for case in cases {
        let source = case["t"].as_str().unwrap();
        let context = contexts[case["c"].as_u64().unwrap() as usize]
            .as_object()
            .unwrap();
        let Ok(template) = ChatTemplate::compile(source, Vec::new()) else {
            continue;
        };
        let messages = context["messages"].as_array().unwrap();
        let kwargs = common::fuzz_kwargs(context);
        let opts = RenderOptions {
            tools: context.get("tools"),
            add_generation_prompt: case["g"].as_bool().unwrap(),
            template_kwargs: Some(&kwargs),
            ..Default::default()
        };
        for v in [0, 0, 1, 2, 0, 3, 4, 5, 6, 7] {
            if let Some(diff) = difference(&template, messages, v, &opts) {
                failures.push(format!("{source:?}: {diff}"));
            }
        }
        if let Some(stats) = template.trace_stats() {
            replayed += stats.replayed;
            if stats.wrong > 0 && failures.len() < 20 {
                failures.push(format!("{source:?}: a trace was wrong"));
            }
        }
    }
    failures.truncate(20);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(replayed > 20_000, "only {replayed} renders replayed");
}
