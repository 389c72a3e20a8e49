//! `SFTDataset`, `createSFTDataset` and `loadSFTDataset` over `dataset::Dataset`.

use std::sync::Arc;

use napi::bindgen_prelude::{
    AsyncTask, Either, Float32Array, Function, Int32Array, JsObjectValue, Object, Uint32Array,
    Unknown,
};
use napi::Env;
use napi_derive::napi;

use super::error::{run_sync, typed_arg, JsResult as Result};
use super::json::JsJson;
use super::path::{path_options, resolve_dataset_path};
use super::task::Job;
use super::tokenizer::tokenizer_arg;
use crate::collate::Truncation;
use crate::dataset::{CollatedBatch, Dataset, DatasetConfig, SpecialTokenOverrides, StrategyName};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::loader::LoadOptions;
use crate::masking::{write_labels, Reasoning};
use crate::report::DatasetReport;
use crate::row::DropReason;

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
    /// Train only on the completion (prompt-completion) or on assistant turns (conversation;
    /// under `'spans'`, the turns of `trainOnRoles`). `'auto'` is the same as true in both
    /// formats (TRL's defaults). Default false: every token is trained.
    #[napi(ts_type = "boolean | 'auto'")]
    pub completion_only: Option<Either<bool, String>>,
    /// Passed to the chat template as `enable_thinking`. Default false.
    pub enable_thinking: Option<bool>,
    /// Base seed of `shuffleForEpoch` (seed + epoch). Default 42.
    pub seed: Option<f64>,
    /// Overrides for the ids the masking keys on.
    pub special_token_ids: Option<SpecialTokenIds>,
    /// How labels are chosen. `'reference'`: the reference's ChatML scan (needs `<|im_start|>`
    /// and `<|im_end|>`). `'spans'`: every message is located in the rendered text and its
    /// trained parts mapped to tokens through their offsets, for any chat template. Default:
    /// `'reference'` for a tokenizer with the ChatML tokens, unless `trainOnRoles`,
    /// `trainOnTurnEnd` or `reasoning` is given; `'spans'` otherwise.
    #[napi(ts_type = "'reference' | 'spans'")]
    pub masking_strategy: Option<String>,
    /// Roles whose turns are trained under `'spans'` when `completionOnly` is on. Default
    /// `['assistant']`. An assistant turn trains what the model generates (reasoning, content,
    /// tool calls), not its header; other roles train their content.
    pub train_on_roles: Option<Vec<String>>,
    /// Under `'spans'`: also train the token that closes each trained turn (`<|im_end|>`,
    /// `<|eot_id|>`, `<end_of_turn>`, `<｜end▁of▁sentence｜>`), learned from the chat template,
    /// not from `eos_token`. Default true.
    pub train_on_turn_end: Option<bool>,
    /// Under `'spans'`: `<think>` blocks (inline or from `reasoning_content`) are trained
    /// (`'train'`), untrained (`'mask'`), or trained in the last assistant message only
    /// (`'lastTurnOnly'`). Default `'train'`.
    #[napi(ts_type = "'train' | 'mask' | 'lastTurnOnly'")]
    pub reasoning: Option<String>,
    /// Rows longer than `maxSeqLength`: keep the last tokens (`'keepEnd'`, the reference), the
    /// first ones (`'keepStart'`, TRL), or drop whole oldest turns (`'turns'`: the leading system
    /// messages and the turn of the last trained message are kept, turns start at user messages,
    /// and the shortened conversation is rendered and tokenized again; a row that still does not
    /// fit is dropped and reported). Default `'keepEnd'`.
    #[napi(ts_type = "'keepEnd' | 'keepStart' | 'turns'")]
    pub truncation: Option<String>,
    /// Skip rows with no trained token after truncation. Default false. With this or
    /// `truncation: 'turns'`, every row is built when the dataset is created, and dropped rows
    /// leave the dataset: `length`, `numBatches`, positions and `order()` count only kept
    /// examples (`order()` lists their original indices); `report()` shows every example.
    pub drop_untrainable: Option<bool>,
}

/// `loadSFTDataset`'s options: the dataset config, `limit` and path validation.
#[napi(object, js_name = "LoadSFTDatasetOptions")]
pub struct LoadSftDatasetOptions {
    /// See `SFTDatasetConfig.maxSeqLength`. Default 2048.
    pub max_seq_length: Option<f64>,
    /// See `SFTDatasetConfig.completionOnly`. Default false.
    #[napi(ts_type = "boolean | 'auto'")]
    pub completion_only: Option<Either<bool, String>>,
    /// See `SFTDatasetConfig.enableThinking`. Default false.
    pub enable_thinking: Option<bool>,
    /// See `SFTDatasetConfig.seed`. Default 42.
    pub seed: Option<f64>,
    /// See `SFTDatasetConfig.specialTokenIds`.
    pub special_token_ids: Option<SpecialTokenIds>,
    /// See `SFTDatasetConfig.maskingStrategy`.
    #[napi(ts_type = "'reference' | 'spans'")]
    pub masking_strategy: Option<String>,
    /// See `SFTDatasetConfig.trainOnRoles`. Default `['assistant']`.
    pub train_on_roles: Option<Vec<String>>,
    /// See `SFTDatasetConfig.trainOnTurnEnd`. Default true.
    pub train_on_turn_end: Option<bool>,
    /// See `SFTDatasetConfig.reasoning`. Default `'train'`.
    #[napi(ts_type = "'train' | 'mask' | 'lastTurnOnly'")]
    pub reasoning: Option<String>,
    /// See `SFTDatasetConfig.truncation`. Default `'keepEnd'`.
    #[napi(ts_type = "'keepEnd' | 'keepStart' | 'turns'")]
    pub truncation: Option<String>,
    /// See `SFTDatasetConfig.dropUntrainable`. Default false.
    pub drop_untrainable: Option<bool>,
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
    /// Distillation target ids `[batch, seqLen, k]`, truncated and padded like `inputIds`
    /// (-1 where there is no target). Present when any example of the batch has `distill`.
    pub distill_token_ids: Option<Int32Array>,
    /// Distillation logprobs, same shape (`-Infinity` where there is no target).
    pub distill_logprobs: Option<Float32Array>,
    /// `[batch, seqLen, k]` of the distillation tensors.
    #[napi(ts_type = "[number, number, number]")]
    pub distill_shape: Option<Vec<u32>>,
}

/// The dataset settings both config objects share.
struct Fields {
    max_seq_length: Option<f64>,
    completion_only: Option<Either<bool, String>>,
    enable_thinking: Option<bool>,
    seed: Option<f64>,
    special: Option<SpecialTokenIds>,
    masking_strategy: Option<String>,
    train_on_roles: Option<Vec<String>>,
    train_on_turn_end: Option<bool>,
    reasoning: Option<String>,
    truncation: Option<String>,
    drop_untrainable: Option<bool>,
}

fn choice<T: Copy>(
    name: &str,
    value: Option<String>,
    allowed: &[(&str, T)],
) -> SftResult<Option<T>> {
    let Some(value) = value else { return Ok(None) };
    match allowed.iter().find(|(n, _)| *n == value) {
        Some((_, v)) => Ok(Some(*v)),
        None => Err(SftError::invalid_argument(format!(
            "{name} must be one of {}, got '{value}'",
            allowed
                .iter()
                .map(|(n, _)| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn core_config(f: Fields) -> SftResult<DatasetConfig> {
    let defaults = DatasetConfig::default();
    let max_seq_length = match f.max_seq_length {
        None => defaults.max_seq_length,
        Some(v) if v.is_finite() && v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64 => {
            v as usize
        }
        Some(v) => {
            return Err(SftError::invalid_argument(format!(
                "maxSeqLength must be a positive integer, got {}",
                js_number(v)
            )))
        }
    };
    let seed = match f.seed {
        None => defaults.seed,
        Some(v) if v.is_finite() => v,
        Some(v) => {
            return Err(SftError::invalid_argument(format!(
                "seed must be a finite number, got {}",
                js_number(v)
            )))
        }
    };
    let completion_only = match f.completion_only {
        None => defaults.completion_only,
        Some(Either::A(b)) => b,
        Some(Either::B(s)) if s == "auto" => true,
        Some(Either::B(s)) => {
            return Err(SftError::invalid_argument(format!(
                "completionOnly must be true, false or 'auto', got '{s}'"
            )))
        }
    };
    let special =
        f.special
            .map_or_else(SpecialTokenOverrides::default, |s| SpecialTokenOverrides {
                im_start: s.im_start,
                im_end: s.im_end,
                newline_tokens: s.newline_tokens,
            });
    Ok(DatasetConfig {
        max_seq_length,
        completion_only,
        enable_thinking: f.enable_thinking.unwrap_or(defaults.enable_thinking),
        seed,
        special_token_ids: special,
        masking_strategy: choice(
            "maskingStrategy",
            f.masking_strategy,
            &[
                ("reference", StrategyName::Reference),
                ("spans", StrategyName::Spans),
            ],
        )?,
        train_on_roles: f.train_on_roles,
        train_on_turn_end: f.train_on_turn_end,
        reasoning: choice(
            "reasoning",
            f.reasoning,
            &[
                ("train", Reasoning::Train),
                ("mask", Reasoning::Mask),
                ("lastTurnOnly", Reasoning::LastTurnOnly),
            ],
        )?,
        truncation: choice(
            "truncation",
            f.truncation,
            &[
                ("keepEnd", Truncation::KeepEnd),
                ("keepStart", Truncation::KeepStart),
                ("turns", Truncation::Turns),
            ],
        )?
        .unwrap_or(defaults.truncation),
        drop_untrainable: f.drop_untrainable.unwrap_or(defaults.drop_untrainable),
    })
}

pub fn core_config_of(config: Option<SftDatasetConfig>) -> SftResult<DatasetConfig> {
    match config {
        None => Ok(DatasetConfig::default()),
        Some(c) => core_config(Fields {
            max_seq_length: c.max_seq_length,
            completion_only: c.completion_only,
            enable_thinking: c.enable_thinking,
            seed: c.seed,
            special: c.special_token_ids,
            masking_strategy: c.masking_strategy,
            train_on_roles: c.train_on_roles,
            train_on_turn_end: c.train_on_turn_end,
            reasoning: c.reasoning,
            truncation: c.truncation,
            drop_untrainable: c.drop_untrainable,
        }),
    }
}

/// A batch size must be a positive integer (the reference silently misbehaves otherwise).
fn batch_size(value: f64) -> SftResult<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 {
        Ok(value as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "batchSize must be a positive integer, got {}",
            js_number(value)
        )))
    }
}

/// `TokenizedExample`'s contents, made off the JS thread.
pub struct ExampleArrays {
    input_ids: Vec<i32>,
    labels: Vec<i32>,
    warning: Option<String>,
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

/// What `report()` says about one example.
#[napi(object)]
pub struct ExampleReport {
    /// Tokens of the whole example.
    pub tokens: u32,
    /// Tokens a batch holds of it, after truncation; 0 when dropped.
    pub kept_tokens: u32,
    /// Trained tokens among the kept ones; 0 when dropped.
    pub trained_tokens: u32,
    /// Longer than `maxSeqLength` (cut, or turns removed).
    pub truncated: bool,
    /// Why the row takes no part in training, if it does not.
    #[napi(ts_type = "'tooLong' | 'untrainable' | null")]
    pub dropped: Option<String>,
    /// Messages removed by `truncation: 'turns'`.
    pub messages_dropped: u32,
    /// Reference: 1 when the prompt's tokens are not a prefix of the full sequence. Spans:
    /// trained assistant turns whose generation prompt is not a prefix of the full render.
    pub prefix_mismatches: u32,
    /// Indices of trained messages whose content was not found in the render or whose trained
    /// tokens do not decode to it (spans only).
    pub content_mismatches: Vec<u32>,
    /// Trained tokens that also cover untrained text: a token is trained when any of its
    /// characters is.
    pub straddling_tokens: u32,
    /// Kept end-of-turn tokens (the one the template closes turns with) that are trained.
    pub turn_end_tokens_trained: u32,
    /// Kept end-of-turn tokens.
    pub turn_end_tokens: u32,
    /// BOS tokens at the start of the row (more than one: the template and the text both add it).
    pub bos_tokens: u32,
}

/// `report()` summed over all examples.
#[napi(object)]
pub struct ReportTotals {
    pub examples: u32,
    pub tokens: f64,
    pub kept_tokens: f64,
    pub trained_tokens: f64,
    pub truncated: u32,
    pub dropped_too_long: u32,
    pub dropped_untrainable: u32,
    pub prefix_mismatches: u32,
    /// Examples with at least one content mismatch.
    pub content_mismatch_examples: u32,
    pub straddling_tokens: f64,
    pub turn_end_tokens_trained: f64,
    pub turn_end_tokens: f64,
    /// Examples starting with more than one BOS token.
    pub multiple_bos: u32,
}

#[napi(object, js_name = "DatasetReport")]
pub struct DatasetReportJs {
    /// One entry per example given, dropped ones included, in input order.
    pub examples: Vec<ExampleReport>,
    pub totals: ReportTotals,
    /// The end-of-turn token learned from the chat template, if any.
    pub turn_end_token: Option<String>,
}

fn report_to_js(_: &Env, r: DatasetReport) -> SftResult<DatasetReportJs> {
    let t = r.totals;
    Ok(DatasetReportJs {
        examples: r
            .examples
            .into_iter()
            .map(|e| ExampleReport {
                tokens: e.tokens,
                kept_tokens: e.kept_tokens,
                trained_tokens: e.trained_tokens,
                truncated: e.truncated,
                dropped: e.dropped.map(|d| {
                    match d {
                        DropReason::TooLong => "tooLong",
                        DropReason::Untrainable => "untrainable",
                    }
                    .to_string()
                }),
                messages_dropped: e.messages_dropped,
                prefix_mismatches: e.prefix_mismatches,
                content_mismatches: e.content_mismatches,
                straddling_tokens: e.straddling_tokens,
                turn_end_tokens_trained: e.turn_end_tokens_trained,
                turn_end_tokens: e.turn_end_tokens,
                bos_tokens: e.bos_tokens,
            })
            .collect(),
        totals: ReportTotals {
            examples: t.examples,
            tokens: t.tokens as f64,
            kept_tokens: t.kept_tokens as f64,
            trained_tokens: t.trained_tokens as f64,
            truncated: t.truncated,
            dropped_too_long: t.dropped_too_long,
            dropped_untrainable: t.dropped_untrainable,
            prefix_mismatches: t.prefix_mismatches,
            content_mismatch_examples: t.content_mismatch_examples,
            straddling_tokens: t.straddling_tokens as f64,
            turn_end_tokens_trained: t.turn_end_tokens_trained as f64,
            turn_end_tokens: t.turn_end_tokens as f64,
            multiple_bos: t.multiple_bos,
        },
        turn_end_token: r.turn_end_token,
    })
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
    let distill_shape = b
        .distill
        .as_ref()
        .map(|d| vec![b.rows as u32, b.seq_len as u32, d.k as u32]);
    let (distill_token_ids, distill_logprobs) = match b.distill {
        Some(d) => (
            Some(Int32Array::new(d.ids)),
            Some(Float32Array::new(d.logprobs)),
        ),
        None => (None, None),
    };
    Ok(SftBatch {
        input_ids: Int32Array::new(b.input_ids),
        labels: Int32Array::new(b.labels),
        shape: vec![b.rows as u32, b.seq_len as u32],
        distill_token_ids,
        distill_logprobs,
        distill_shape,
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
    pub fn new(examples: Unknown, tokenizer: Unknown, config: Option<Unknown>) -> Result<Self> {
        Self::create("new SFTDataset", examples, tokenizer, config)
    }

    /// The constructor and `createSFTDataset`; `caller` names the one called in errors.
    fn create(
        caller: &str,
        examples: Unknown,
        tokenizer: Unknown,
        config: Option<Unknown>,
    ) -> Result<Self> {
        run_sync(|| {
            let what = |arg: &str| format!("{caller}: {arg}");
            let examples: Vec<JsJson> =
                typed_arg(&examples, &what("examples"), "an array of examples")?;
            let examples = JsJson::list(examples);
            let tokenizer = tokenizer_arg(&tokenizer)?;
            let config: Option<SftDatasetConfig> = match config {
                Some(c) => typed_arg(&c, &what("config"), "a valid SFTDatasetConfig")?,
                None => None,
            };
            let config = core_config_of(config)?;
            let inner = Dataset::from_examples(examples, tokenizer, config)?;
            Ok(JsSftDataset {
                inner: Arc::new(inner),
            })
        })
    }

    /// *(addition)* The format every example shares, as detected from the first one.
    #[napi(getter, ts_return_type = "'prompt-completion' | 'conversation'")]
    pub fn format(&self) -> &'static str {
        self.inner.format().name()
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
                return Err(SftError::invalid_argument(format!(
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
    pub fn tokenize_example(&self, index: f64) -> AsyncTask<Job<ExampleArrays, TokenizedExample>> {
        let dataset = self.inner.clone();
        AsyncTask::new(Job::new(
            move || {
                let count = dataset.example_count();
                if !(index.is_finite()
                    && index >= 0.0
                    && index.fract() == 0.0
                    && (index as usize) < count)
                {
                    return Err(SftError::invalid_argument(format!(
                        "tokenizeExample: index {} is not an integer in [0, {count})",
                        js_number(index)
                    )));
                }
                let row = dataset.row(index as usize).map_err(Clone::clone)?;
                let mut labels = vec![0; row.ids.len()];
                write_labels(row.ids, row.spans, 0..row.ids.len(), &mut labels);
                Ok(ExampleArrays {
                    input_ids: row.ids.iter().map(|&i| i as i32).collect(),
                    labels,
                    warning: row.warning().map(String::from),
                })
            },
            |_, arrays| {
                Ok(TokenizedExample {
                    input_ids: Int32Array::new(arrays.input_ids),
                    labels: Int32Array::new(arrays.labels),
                    warning: arrays.warning,
                })
            },
        ))
    }

    /// `ceil(length / batchSize)`.
    #[napi]
    pub fn num_batches(&self, batch_size: f64) -> Result<u32> {
        run_sync(|| Ok(self.inner.num_batches(self::batch_size(batch_size)?) as u32))
    }

    /// Per example and in total: tokens, trained tokens, truncation, drops, prefix and content
    /// mismatches, straddling tokens, trained end-of-turn tokens and leading BOS tokens. Builds
    /// every row not built yet (off the JS thread, on all cores).
    #[napi(ts_return_type = "Promise<DatasetReport>")]
    pub fn report(&self) -> AsyncTask<Job<DatasetReport, DatasetReportJs>> {
        let dataset = self.inner.clone();
        AsyncTask::new(Job::new(move || dataset.report(), report_to_js))
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
    examples: Unknown,
    tokenizer: Unknown,
    config: Option<Unknown>,
) -> Result<JsSftDataset> {
    JsSftDataset::create("createSFTDataset", examples, tokenizer, config)
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
                    core_config(Fields {
                        max_seq_length: c.max_seq_length,
                        completion_only: c.completion_only,
                        enable_thinking: c.enable_thinking,
                        seed: c.seed,
                        special: c.special_token_ids,
                        masking_strategy: c.masking_strategy,
                        train_on_roles: c.train_on_roles,
                        train_on_turn_end: c.train_on_turn_end,
                        reasoning: c.reasoning,
                        truncation: c.truncation,
                        drop_untrainable: c.drop_untrainable,
                    })?,
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
