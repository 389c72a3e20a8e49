//! Where epoch 1 goes, stage by stage, on one thread: parse, shape, duplicate key, render (direct
//! renderer and interpreter), encode, the row's masking and checks, and the whole load plus one
//! epoch of batches. Not a test of speed (figures vary by machine); run it to see the profile:
//!
//!   cargo test --profile ci --target x86_64-unknown-linux-gnu --test epoch_stages -- --ignored --nocapture
//!
//! `SFT_STAGES_DATA` names the JSONL file (default: the real GSM8K and glaive files of
//! `../shared/parity/real/data`).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use sft_dataset::dataset::loader::LoadOptions;
use sft_dataset::dataset::{resolve_masking, row_settings, turn_end_of, Dataset, DatasetConfig};
use sft_dataset::example::message::normalize_messages;
use sft_dataset::example::{validate_record, SftExample};
use sft_dataset::mask::silent_loss::{duplicate_key, LossChecker};
use sft_dataset::render::RenderOptions;
use sft_dataset::rows::build_row_checked;
use sft_dataset::tokenize::ChatTokenizer;

/// One figure of the profile, from a file's stages.
type Figure = fn(&Stages) -> f64;

struct Stages {
    parse: Duration,
    shape: Duration,
    duplicate: Duration,
    render: Duration,
    interpret: Duration,
    encode: Duration,
    row: Duration,
    load_and_epoch: Duration,
    bytes: usize,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn timed<T>(total: &mut Duration, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    *total += t0.elapsed();
    out
}

fn stages(file: &Path, tokenizer: &Arc<ChatTokenizer>) -> Stages {
    let text = std::fs::read_to_string(file).unwrap();
    let config = DatasetConfig {
        completion_only: true,
        ..Default::default()
    };
    let masking = resolve_masking(tokenizer, &config).unwrap();
    let turn_end = turn_end_of(tokenizer, &config);
    let checker = LossChecker::new(tokenizer, config.tools, false);
    let settings = sft_dataset::rows::RowSettings {
        loss: Some(&checker),
        ..row_settings(&config, &masking, turn_end.as_ref())
    };
    let zero = Duration::ZERO;
    let mut s = Stages {
        parse: zero,
        shape: zero,
        duplicate: zero,
        render: zero,
        interpret: zero,
        encode: zero,
        row: zero,
        load_and_epoch: zero,
        bytes: 0,
    };
    let template = tokenizer.chat_template().unwrap();
    for (line, record) in text.lines().enumerate() {
        let json: Json = timed(&mut s.parse, || serde_json::from_str(record).unwrap());
        let example = timed(&mut s.shape, || validate_record(json, line).unwrap());
        timed(&mut s.duplicate, || duplicate_key(&example));
        let (mut messages, completion) = match example.clone() {
            SftExample::Conversation { messages, .. } => (messages, false),
            SftExample::PromptCompletion {
                mut prompt,
                completion,
                ..
            } => {
                prompt.push(completion);
                (prompt, true)
            }
        };
        normalize_messages(&mut messages).unwrap();
        let opts = |agp| RenderOptions {
            add_generation_prompt: agp,
            enable_thinking: Some(false),
            ..Default::default()
        };
        let prompt = &messages[..messages.len() - 1];
        let (prompt_text, full) = timed(&mut s.render, || {
            let p = completion.then(|| tokenizer.render(prompt, &opts(true)).unwrap());
            (p, tokenizer.render(&messages, &opts(false)).unwrap())
        });
        timed(&mut s.interpret, || {
            if completion {
                template.render_interpreted(prompt, &opts(true)).unwrap();
            }
            template
                .render_interpreted(&messages, &opts(false))
                .unwrap();
        });
        s.bytes += full.len();
        timed(&mut s.encode, || match &prompt_text {
            Some(p) => drop(tokenizer.encode_prompt_and_full(p, &full).unwrap()),
            None => drop(tokenizer.encode(&full, false).unwrap()),
        });
        timed(&mut s.row, || {
            build_row_checked(tokenizer, &settings, example).unwrap()
        });
    }
    let t0 = Instant::now();
    let options = LoadOptions {
        limit: None,
        memory_budget: None,
        on_progress: None,
    };
    let dataset = Dataset::load(file, tokenizer.clone(), config, &options).unwrap();
    for i in 0..dataset.num_batches(8).unwrap() {
        dataset.epoch_batch(8, i).unwrap();
    }
    s.load_and_epoch = t0.elapsed();
    s
}

#[test]
#[ignore = "a profile to read, not a check: run with --ignored --nocapture"]
fn epoch_one_by_stage() {
    // One thread, so that every stage is measured on the same single core.
    std::env::set_var("RAYON_NUM_THREADS", "1");
    let Some(dir) = common::tokenizer_dir("tokenizer-qwen3") else {
        return;
    };
    let real = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/parity/real/data");
    let files: Vec<PathBuf> = match std::env::var_os("SFT_STAGES_DATA") {
        Some(f) => vec![PathBuf::from(f)],
        None => ["pc_gsm8k_think.jsonl", "conv_glaive_toolcall_en.jsonl"]
            .iter()
            .map(|f| real.join(f))
            .filter(|f| f.exists())
            .collect(),
    };
    let tokenizer = Arc::new(ChatTokenizer::load(&dir).unwrap());
    println!(
        "\n| stage (one thread, ms) | {} |",
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!(
        "|---|{}|",
        files.iter().map(|_| "---:").collect::<Vec<_>>().join("|")
    );
    let all: Vec<Stages> = files.iter().map(|f| stages(f, &tokenizer)).collect();
    let rows: [(&str, Figure); 10] = [
        ("parse JSON", |s| ms(s.parse)),
        ("shape (validate the record)", |s| ms(s.shape)),
        ("duplicate key", |s| ms(s.duplicate)),
        ("render, auto (direct where it applies)", |s| ms(s.render)),
        ("render, interpreter", |s| ms(s.interpret)),
        ("encode (prompt reuses the full text's tokens)", |s| {
            ms(s.encode)
        }),
        (
            "row: render + encode + masking + loss checks",
            |s| ms(s.row),
        ),
        (
            "the rest: reading, row storage, collation (load - stages)",
            |s| ms(s.load_and_epoch) - ms(s.parse) - ms(s.shape) - ms(s.duplicate) - ms(s.row),
        ),
        ("loadSFTDataset + one epoch of batches(8)", |s| {
            ms(s.load_and_epoch)
        }),
        ("rendered MB", |s| s.bytes as f64 / 1e6),
    ];
    for (name, value) in rows {
        let cells: Vec<String> = all.iter().map(|s| format!("{:.1}", value(s))).collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}
