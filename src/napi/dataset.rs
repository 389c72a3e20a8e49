//! `SFTDataset`, `createSFTDataset` and `loadSFTDataset` over `dataset::Dataset`.

use std::sync::Arc;

use napi::bindgen_prelude::{
    AsyncTask, Function, Int32Array, JsObjectValue, Object, Uint32Array, Unknown,
};
use napi::Env;
use napi_derive::napi;
use serde_json::Value as Json;

use super::error::{run_sync, JsResult as Result};
use super::path::{path_options, resolve_dataset_path};
use super::task::Job;
use super::tokenizer::tokenizer_arg;
use crate::dataset::{CollatedBatch, Dataset, DatasetConfig, SpecialTokenOverrides};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::loader::LoadOptions;
use crate::masking::write_labels;
use crate::row::TokenizedRow;

/// Token ids the reference masking keys on; each one missing is derived from the tokenizer.
#[napi(object, js_name = "SpecialTokenIds")]
pub struct SpecialTokenIds {
    /// Id of `<|im_start|>`.
    pub im_start: Option<u32>,
    /// Id of `<|im_end|>`.
    pub im_end: Option<u32>,
    /// Ids that end a role header. Default: raw vocabulary lookups of `\n`, ` \n`, `\r\n`,
    /// `\n\n` (none for Qwen3, whose vocabulary spells `\n` as `Ċ`).
    pub newline_tokens: Option<Vec<u32>>,
}

#[napi(object, js_name = "SFTDatasetConfig")]
pub struct SftDatasetConfig {
    /// Longest row in tokens; longer rows keep their last tokens. Default 2048.
    pub max_seq_length: Option<f64>,
    /// Train only on the completion (prompt-completion) or on assistant turns (conversation).
    /// Default false: every token is trained.
    pub completion_only: Option<bool>,
    /// Passed to the chat template as `enable_thinking`. Default false.
    pub enable_thinking: Option<bool>,
    /// Base seed of `shuffleForEpoch` (seed + epoch). Default 42.
    pub seed: Option<f64>,
    /// Overrides for the ids the masking keys on.
    pub special_token_ids: Option<SpecialTokenIds>,
}

/// `loadSFTDataset`'s options: the dataset config, `limit` and path validation.
#[napi(object, js_name = "LoadSFTDatasetOptions")]
pub struct LoadSftDatasetOptions {
    /// See `SFTDatasetConfig.maxSeqLength`. Default 2048.
    pub max_seq_length: Option<f64>,
    /// See `SFTDatasetConfig.completionOnly`. Default false.
    pub completion_only: Option<bool>,
    /// See `SFTDatasetConfig.enableThinking`. Default false.
    pub enable_thinking: Option<bool>,
    /// See `SFTDatasetConfig.seed`. Default 42.
    pub seed: Option<f64>,
    /// See `SFTDatasetConfig.specialTokenIds`.
    pub special_token_ids: Option<SpecialTokenIds>,
    /// Read at most this many records; absent, 0 or negative reads all.
    pub limit: Option<f64>,
    /// Root the path must stay within. Default: `MLX_NODE_DATA_ROOT`, else the current
    /// directory.
    pub allowed_root: Option<String>,
    /// `false` also rejects a path whose real location (symlinks resolved) is outside the root.
    /// Default: symlinks are not examined, as in the reference.
    pub follow_symlinks: Option<bool>,
}

#[napi(object, js_name = "SFTBatch")]
pub struct SftBatch {
    /// Token ids, row-major `[batch, seqLen]`, right-padded with the pad id.
    pub input_ids: Int32Array,
    /// Labels, `-100` where no loss is taken.
    pub labels: Int32Array,
    #[napi(ts_type = "[number, number]")]
    pub shape: Vec<u32>,
}

fn invalid_arg(message: String) -> SftError {
    SftError::new(ErrorCode::InvalidArgument, message)
}

fn core_config(
    max_seq_length: Option<f64>,
    completion_only: Option<bool>,
    enable_thinking: Option<bool>,
    seed: Option<f64>,
    special: Option<SpecialTokenIds>,
) -> SftResult<DatasetConfig> {
    let defaults = DatasetConfig::default();
    let max_seq_length = match max_seq_length {
        None => defaults.max_seq_length,
        Some(v) if v.is_finite() && v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64 => {
            v as usize
        }
        Some(v) => {
            return Err(invalid_arg(format!(
                "maxSeqLength must be a positive integer, got {}",
                js_number(v)
            )))
        }
    };
    let seed = match seed {
        None => defaults.seed,
        Some(v) if v.is_finite() => v,
        Some(v) => {
            return Err(invalid_arg(format!(
                "seed must be a finite number, got {}",
                js_number(v)
            )))
        }
    };
    let special = special.map_or_else(SpecialTokenOverrides::default, |s| SpecialTokenOverrides {
        im_start: s.im_start,
        im_end: s.im_end,
        newline_tokens: s.newline_tokens,
    });
    Ok(DatasetConfig {
        max_seq_length,
        completion_only: completion_only.unwrap_or(defaults.completion_only),
        enable_thinking: enable_thinking.unwrap_or(defaults.enable_thinking),
        seed,
        special_token_ids: special,
    })
}

pub fn core_config_of(config: Option<SftDatasetConfig>) -> SftResult<DatasetConfig> {
    match config {
        None => Ok(DatasetConfig::default()),
        Some(c) => core_config(
            c.max_seq_length,
            c.completion_only,
            c.enable_thinking,
            c.seed,
            c.special_token_ids,
        ),
    }
}

/// A batch size must be a positive integer (the reference silently misbehaves otherwise).
fn batch_size(value: f64) -> SftResult<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 {
        Ok(value as usize)
    } else {
        Err(invalid_arg(format!(
            "batchSize must be a positive integer, got {}",
            js_number(value)
        )))
    }
}

/// One example as the trainer sees it before truncation and padding.
#[napi(object)]
pub struct TokenizedExample {
    pub input_ids: Int32Array,
    /// `-100` where no loss is taken.
    pub labels: Int32Array,
    /// The reference's prefix-mismatch warning, when it applies to this example.
    pub warning: Option<String>,
}

#[napi(js_name = "SFTDataset")]
pub struct JsSftDataset {
    inner: Arc<Dataset>,
}

impl Drop for JsSftDataset {
    fn drop(&mut self) {
        self.inner.cancel_prefetch();
    }
}

fn finish_batch(env: &Env, collated: CollatedBatch) -> SftResult<SftBatch> {
    if !collated.warnings.is_empty() {
        warn_all(env, &collated.warnings)
            .map_err(|e| SftError::new(ErrorCode::Internal, format!("console.warn failed: {e}")))?;
    }
    let b = collated.batch;
    Ok(SftBatch {
        input_ids: Int32Array::new(b.input_ids),
        labels: Int32Array::new(b.labels),
        shape: vec![b.rows as u32, b.seq_len as u32],
    })
}

/// The reference prints its prefix-mismatch warning with `console.warn`; so does the port, once
/// per example.
fn warn_all(env: &Env, warnings: &[(u32, String)]) -> napi::Result<()> {
    let global = env.get_global()?;
    let console: Object = global.get_named_property("console")?;
    let warn: Function<String, ()> = console.get_named_property("warn")?;
    for (_, message) in warnings {
        warn.apply(console, message.clone())?;
    }
    Ok(())
}

#[napi]
impl JsSftDataset {
    /// Validates the format of every example (all must share the first one's), derives the
    /// special token ids, and renders nothing yet: rows are built on first use, on all cores.
    #[napi(
        constructor,
        ts_args_type = "examples: SFTExample[], tokenizer: Tokenizer, config?: SFTDatasetConfig | null"
    )]
    pub fn new(
        examples: Vec<Json>,
        tokenizer: Unknown,
        config: Option<SftDatasetConfig>,
    ) -> Result<Self> {
        run_sync(|| {
            let tokenizer = tokenizer_arg(&tokenizer)?;
            let config = core_config_of(config)?;
            let inner = Dataset::from_examples(examples, tokenizer, config)?;
            Ok(JsSftDataset {
                inner: Arc::new(inner),
            })
        })
    }

    /// Number of examples.
    #[napi(getter)]
    pub fn length(&self) -> u32 {
        self.inner.len() as u32
    }

    /// Shuffles for `epoch` with seed `seed + epoch`, from the identity order, exactly as the
    /// reference does.
    #[napi]
    pub fn shuffle_for_epoch(&self, epoch: f64) -> Result<()> {
        run_sync(|| {
            if !epoch.is_finite() {
                return Err(invalid_arg(format!(
                    "epoch must be a finite number, got {}",
                    js_number(epoch)
                )));
            }
            self.inner.shuffle_for_epoch(epoch);
            Ok(())
        })
    }

    /// Pads the examples at `indices` (positions in the shuffled order) into one batch.
    #[napi(ts_return_type = "Promise<SFTBatch>")]
    pub fn collate_batch(&self, indices: Vec<f64>) -> AsyncTask<Job<CollatedBatch, SftBatch>> {
        let resolved = self.inner.resolve_positions(&indices);
        self.inner.start_prefetch();
        let dataset = self.inner.clone();
        AsyncTask::new(Job::new(
            move || dataset.collate_examples(&resolved?),
            finish_batch,
        ))
    }

    /// The example indices in the current epoch order (an addition to the reference API).
    #[napi]
    pub fn order(&self) -> Uint32Array {
        Uint32Array::new(self.inner.order().to_vec())
    }

    /// The full, untruncated row of example `index` (not a position): its token ids and
    /// labels, and the prefix-mismatch warning if it has one. Distillation targets for an
    /// example are fetched for exactly this sequence.
    #[napi(ts_return_type = "Promise<TokenizedExample>")]
    pub fn tokenize_example(&self, index: f64) -> AsyncTask<Job<TokenizedRow, TokenizedExample>> {
        let dataset = self.inner.clone();
        AsyncTask::new(Job::new(
            move || {
                if !(index.is_finite()
                    && index >= 0.0
                    && index.fract() == 0.0
                    && (index as usize) < dataset.len())
                {
                    return Err(invalid_arg(format!(
                        "tokenizeExample: index {} is not an integer in [0, {})",
                        js_number(index),
                        dataset.len()
                    )));
                }
                dataset.row(index as usize).clone()
            },
            |_, row| {
                let mut labels = vec![0; row.ids.len()];
                write_labels(&row.ids, &row.spans, 0..row.ids.len(), &mut labels);
                Ok(TokenizedExample {
                    input_ids: Int32Array::new(row.ids.iter().map(|&i| i as i32).collect()),
                    labels: Int32Array::new(labels),
                    warning: row.warning.map(String::from),
                })
            },
        ))
    }

    /// `ceil(length / batchSize)`.
    #[napi]
    pub fn num_batches(&self, batch_size: f64) -> Result<u32> {
        run_sync(|| Ok(self.inner.num_batches(self::batch_size(batch_size)?) as u32))
    }

    /// Checks a `batches()` batch size; used by the JS generator before it starts.
    #[napi(js_name = "_checkBatchSize")]
    pub fn check_batch_size(&self, batch_size: f64) -> Result<()> {
        run_sync(|| self::batch_size(batch_size).map(|_| ()))
    }
}

#[napi(
    js_name = "createSFTDataset",
    ts_args_type = "examples: SFTExample[], tokenizer: Tokenizer, config?: SFTDatasetConfig | null"
)]
pub fn create_sft_dataset(
    examples: Vec<Json>,
    tokenizer: Unknown,
    config: Option<SftDatasetConfig>,
) -> Result<JsSftDataset> {
    JsSftDataset::new(examples, tokenizer, config)
}

/// `loadSFTDataset` without the JS wrapper's `PathTraversalError`: streams, validates and
/// tokenizes the file on all cores.
#[napi(
    js_name = "loadSFTDatasetNative",
    ts_args_type = "path: string, tokenizer: Tokenizer, config?: LoadSFTDatasetOptions | undefined | null",
    ts_return_type = "Promise<SFTDataset>"
)]
pub fn load_sft_dataset_native(
    path: String,
    tokenizer: Unknown,
    config: Option<LoadSftDatasetOptions>,
) -> AsyncTask<Job<Dataset, JsSftDataset>> {
    // Checked now, reported by the Promise: an async entry point never throws.
    let tokenizer = tokenizer_arg(&tokenizer);
    AsyncTask::new(Job::new(
        move || {
            let tokenizer = tokenizer?;
            let (config, limit, opts) = match config {
                None => (DatasetConfig::default(), None, path_options(None, None)),
                Some(c) => (
                    core_config(
                        c.max_seq_length,
                        c.completion_only,
                        c.enable_thinking,
                        c.seed,
                        c.special_token_ids,
                    )?,
                    c.limit.filter(|l| *l > 0.0).map(|l| l.ceil() as usize),
                    path_options(c.allowed_root, c.follow_symlinks),
                ),
            };
            let file = resolve_dataset_path(&path, &opts)?;
            Dataset::load(
                &file,
                tokenizer,
                config,
                &LoadOptions {
                    limit,
                    on_progress: None,
                },
            )
        },
        |_, dataset| {
            Ok(JsSftDataset {
                inner: Arc::new(dataset),
            })
        },
    ))
}
