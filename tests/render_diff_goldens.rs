//! The transformers 5.x differential goldens (`scripts/gen_render_diff_goldens.py`) replayed in
//! Rust, through the same preparation of messages as every API (`message::prepare_chat`: null
//! keys dropped). Read as data files are read (`json_text`: floats correctly rounded) so that the
//! template-golden scenarios with floats such as `1.0`, which the vitest replay must leave out,
//! are checked too. `{"$bigint": "<digits>"}` (how the fixture spells integers beyond JS's safe
//! range) becomes the integer a JS BigInt becomes.

mod common;

use std::path::Path;

use serde_json::{Map, Value};
use sft_dataset::example::json_value::from_digits;
use sft_dataset::example::message::prepare_chat;
use sft_dataset::input::json_text;
use sft_dataset::render::RenderOptions;
use sft_dataset::tokenize::ChatTokenizer;

fn revive(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(revive).collect()),
        Value::Object(map) => {
            if let (1, Some(Value::String(digits))) = (map.len(), map.get("$bigint")) {
                return from_digits(digits).expect("fixture integers fit 128 bits");
            }
            Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k, revive(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        other => other,
    }
}

fn check_with(family: &str, tokenizer: &ChatTokenizer, combo: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let golden_path = root.join(format!("__test__/fixtures/render_diff/{family}.json"));
    let golden = json_text::parse(&std::fs::read_to_string(golden_path).unwrap()).unwrap();
    let dir = root.join(golden["tokenizerDir"].as_str().unwrap());
    assert!(dir.exists(), "{}: run npm install", dir.display());
    let cases = golden["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    let mut integral_floats = 0;
    let mut checked = 0;
    for case in cases {
        checked += 1;
        let case = revive(case.clone());
        let name = case["name"].as_str().unwrap();
        integral_floats += usize::from(case["integralFloat"] == true);
        let messages = case["messages"].as_array().unwrap().clone();
        let tools = case["tools"].as_array().cloned();
        let rendered = prepare_chat(messages, tools).and_then(|(messages, tools)| {
            let opts = RenderOptions {
                tools: tools.as_ref(),
                add_generation_prompt: case["addGenerationPrompt"].as_bool().unwrap(),
                enable_thinking: case["enableThinking"].as_bool(),
                continue_final_message: false,
                template_kwargs: case.get("templateKwargs").and_then(Value::as_object),
                reasoning_effort: None,
                render_as: None,
                plain_errors: false,
            };
            tokenizer.render(&messages, &opts)
        });
        match (case.get("error"), rendered) {
            (None, Ok(text)) => {
                let want: Vec<u32> = case["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect();
                if text != case["text"].as_str().unwrap() {
                    failures.push(format!(
                        "{name}: text differs\n  want {:?}\n  got  {text:?}",
                        case["text"].as_str().unwrap()
                    ));
                } else if tokenizer.encode(&text, false).unwrap() != want {
                    failures.push(format!("{name}: ids differ"));
                }
            }
            (None, Err(e)) => failures.push(format!("{name}: unexpected error {e}")),
            (Some(want), Ok(text)) => {
                failures.push(format!("{name}: Python raised {want}, rendered {text:?}"))
            }
            (Some(_), Err(_)) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{family} ({combo}): {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(checked >= 30, "{family}: only {checked} cases checked");
    if family == "qwen3" {
        assert!(integral_floats > 0, "no scenario with an integral float");
    }
}

/// `check_with` under every engine and renderer.
fn check_family(family: &str) {
    common::check_every_combo(family, |tokenizer, combo| {
        check_with(family, tokenizer, combo)
    });
}

#[test]
fn qwen3_renders_match_transformers_5() {
    check_family("qwen3");
}

#[test]
fn llama3_1_renders_match_transformers_5() {
    check_family("llama3_1");
}

#[test]
fn gemma3_renders_match_transformers_5() {
    check_family("gemma3");
}

#[test]
fn deepseek_v3_renders_match_transformers_5() {
    check_family("deepseek_v3");
}
