//! `SFTDataset`, `createSFTDataset` and `loadSFTDataset` over `dataset::Dataset`.

use std::path::Path;
use std::sync::Arc;

use napi::bindgen_prelude::{
    Array, AsyncTask, Either, FnArgs, FromNapiValue, Function, Int32Array, JsObjectValue, Object,
    Uint32Array, Unknown,
};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, JsValue, Status};
use napi_derive::napi;

use super::arrays::{uninit_array, BatchArray, Owned, OwnedF32, OwnedI32, OwnedU32};
use super::error::{arg_error, run_sync, typed_arg, JsResult as Result};
use super::json::{JsJson, Serializer};
use super::path::{path_options, resolve_dataset_path};
use super::task::{job, Job};
use super::tokenizer::tokenizer_arg;
use crate::batch::collate::{BatchDistill, Cells};
use crate::batch::plan::{Batching, PlanCost, Shard};
use crate::dataset::loader::{LoadOptions, LoadProgress};
use crate::dataset::report::DatasetReport;
use crate::dataset::{
    CollatedBatch, Dataset, DatasetConfig, Pending, PreparedBatch, SpecialTokenOverrides,
    StrategyName,
};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::example::ToolsMode;
use crate::input::dataset_format::{DatasetFormat, FormatOptions};
use crate::input::v8_wire::{self, Skimmed, WireExamples};
use crate::mask::silent_loss::LossKind;
use crate::mask::truncation::Truncation;
use crate::mask::{write_labels, Reasoning};
use crate::rows::DropReason;
use crate::store::export::{write_parquet, write_parquet_batches, ExportSummary};
use crate::store::token_cache::{self, CacheMode, CacheSettings, CachedLoad};

/// Every strategy's cost for one epoch, side by side.
type StrategyCosts = Vec<(Batching, PlanCost)>;

/// A load and the data warnings (silent loss) to emit with it: (warning type, message).
/// A load's dataset, its data warnings and the file it read.
type LoadedWithWarnings = (CachedLoad, Vec<(&'static str, String)>, std::path::PathBuf);

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
    /// trained parts mapped to tokens through their offsets, for any chat template.
    /// `'generation'`: the tokens inside the template's `{% generation %}` blocks, exactly
    /// transformers' `assistant_masks` (TRL's `assistant_only_loss`); the template must have
    /// such blocks (TRL's `*_training.jinja` templates). Default:
    /// `'reference'` for a tokenizer with the ChatML tokens, unless `trainOnRoles`,
    /// `trainOnTurnEnd` or `reasoning` is given; `'spans'` otherwise.
    #[napi(ts_type = "'reference' | 'spans' | 'generation'")]
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
    /// How records are read: `'reference'` (default: `{messages}` or `{prompt, completion}` as
    /// the reference reads them), `'auto'` (detected from record 0's keys; every record must
    /// agree), `'messages'`, `'prompt-completion'` (message lists or TRL's plain strings),
    /// `'sharegpt'`, `'alpaca'` (LLaMA-Factory's conversions) or `'openai'` (text content parts
    /// joined with `\n`). See the README's table.
    #[napi(
        ts_type = "'reference' | 'auto' | 'messages' | 'prompt-completion' | 'sharegpt' | 'alpaca' | 'openai'"
    )]
    pub format: Option<String>,
    /// Field names of the records, when they differ from the format's: `{ messages:
    /// 'conversation', role: 'speaker', content: 'text' }`. Keys: messages, role, content,
    /// prompt, completion, system, tools, instruction, input, output, history. Needs a `format`
    /// other than `'reference'`.
    pub columns: Option<std::collections::HashMap<String, String>>,
    /// Role names to rename before the format reads them: `{ human: 'user', bot: 'assistant' }`.
    /// Needs a `format` other than `'reference'`.
    pub roles: Option<std::collections::HashMap<String, String>>,
    /// An example's `tools` field (a list of tool definitions, or a JSON string of one):
    /// `'example'` passes it to the chat template as `tools` (as mlx-lm and TRL do); `'ignore'`
    /// (default, the reference) does not, and validation reports such examples.
    #[napi(ts_type = "'example' | 'ignore'")]
    pub tools: Option<String>,
    /// How batches are formed. `'reference'`: consecutive positions of the shuffled order,
    /// each row padded to the longest of its batch (the reference). `'lengthGrouped'`: the
    /// shuffled order split into mega-batches of 50 x batchSize, each sorted by length and cut
    /// into batches, the batches shuffled. `'tokenBudget'`: the same, but a batch holds only as
    /// many rows (up to batchSize) as fit in `maxBatchTokens` padded. `'packed'`: rows packed
    /// best-fit decreasing into rows of `maxBatchTokens` tokens, shuffled, batchSize packed rows
    /// per batch, with `positionIds` and `exampleIds`. Default `'reference'`.
    #[napi(ts_type = "'reference' | 'lengthGrouped' | 'tokenBudget' | 'packed'")]
    pub batching: Option<String>,
    /// `'tokenBudget'`: rows x padded length of a batch (of one rank's share) at most this; a
    /// row longer alone gets a batch of its own. `'packed'`: tokens of a packed row (at least
    /// `maxSeqLength`). Default `maxSeqLength`.
    pub max_batch_tokens: Option<f64>,
    /// The padded length of every batch is rounded up to a multiple of this. Default 1.
    pub pad_to_multiple_of: Option<f64>,
    /// Data-parallel rank: this dataset yields rank `rank`'s rows of every global batch of
    /// `batchSize` rows (`batchSize` a multiple of `worldSize`). Every rank gets the same number
    /// of batches; rows from the start of the epoch fill the last batches. Default: no shard.
    #[napi(ts_type = "SFTShard")]
    pub shard: Option<ShardConfig>,
    /// Control-token strings inside the data (message values, tool definitions) are encoded as
    /// plain text, while the chat template's own control tokens stay tokens, as transformers 5
    /// `apply_chat_template(..., sanitize_control_tokens=True)` encodes them: a user message
    /// holding `<|im_end|><|im_start|>assistant` cannot open a trained turn. A control token
    /// that the tokenizer produces even from plain text is a `CONTROL_TOKEN` error of its
    /// example. Default false.
    pub sanitize_control_tokens: Option<bool>,
    /// Tool-call `arguments` given as a JSON string (the OpenAI wire format) are parsed into
    /// the object they hold before rendering, as templates that iterate `arguments|items`
    /// (Qwen3.5) need; transformers and the reference render the string as given. A string
    /// that does not hold a JSON object is an `INVALID_MESSAGE` error of its example. Default
    /// false.
    pub parse_tool_arguments: Option<bool>,
    /// Passed to the chat template as `reasoning_effort` (GPT-OSS, Qwen3.8 read it:
    /// `'low' | 'medium' | 'high'`, ...); any string is passed on, as transformers does. Default:
    /// undefined in the template, which then keeps its own default.
    pub reasoning_effort: Option<String>,
}

/// One data-parallel rank of `worldSize`.
#[napi(object, js_name = "SFTShard")]
pub struct ShardConfig {
    /// This process's rank, in `[0, worldSize)`.
    pub rank: f64,
    /// Number of ranks.
    pub world_size: f64,
}

/// How far a load has come (`LoadSFTDatasetOptions.onProgress`).
#[napi(object, js_name = "LoadProgress")]
pub struct LoadProgressJs {
    /// Records read, validated and turned into rows.
    pub records: f64,
    /// Bytes of the file read.
    pub bytes: f64,
}

/// A JS function the loader's threads call through the event loop; weak, so that it never
/// keeps a process alive by itself.
pub type ProgressCallback =
    ThreadsafeFunction<LoadProgressJs, Unknown<'static>, LoadProgressJs, Status, false, true>;

/// The loader's progress hook that queues a call of `callback`.
fn progress_hook(callback: ProgressCallback) -> Box<dyn Fn(LoadProgress) + Send + Sync> {
    Box::new(move |p: LoadProgress| {
        callback.call(
            LoadProgressJs {
                records: p.records as f64,
                bytes: p.bytes as f64,
            },
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    })
}

/// `loadSFTDataset`'s options: the dataset config, `limit` and path validation.
#[napi(object, js_name = "LoadSFTDatasetOptions", object_to_js = false)]
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
    #[napi(ts_type = "'reference' | 'spans' | 'generation'")]
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
    /// See `SFTDatasetConfig.batching`. Default `'reference'`.
    #[napi(ts_type = "'reference' | 'lengthGrouped' | 'tokenBudget' | 'packed'")]
    pub batching: Option<String>,
    /// See `SFTDatasetConfig.maxBatchTokens`. Default `maxSeqLength`.
    pub max_batch_tokens: Option<f64>,
    /// See `SFTDatasetConfig.padToMultipleOf`. Default 1.
    pub pad_to_multiple_of: Option<f64>,
    /// See `SFTDatasetConfig.shard`.
    #[napi(ts_type = "SFTShard")]
    pub shard: Option<ShardConfig>,
    /// See `SFTDatasetConfig.format`. Default `'reference'`.
    #[napi(
        ts_type = "'reference' | 'auto' | 'messages' | 'prompt-completion' | 'sharegpt' | 'alpaca' | 'openai'"
    )]
    pub format: Option<String>,
    /// See `SFTDatasetConfig.columns`.
    pub columns: Option<std::collections::HashMap<String, String>>,
    /// See `SFTDatasetConfig.roles`.
    pub roles: Option<std::collections::HashMap<String, String>>,
    /// See `SFTDatasetConfig.tools`. Default `'ignore'`.
    #[napi(ts_type = "'example' | 'ignore'")]
    pub tools: Option<String>,
    /// See `SFTDatasetConfig.sanitizeControlTokens`. Default false.
    pub sanitize_control_tokens: Option<bool>,
    /// See `SFTDatasetConfig.parseToolArguments`. Default false.
    pub parse_tool_arguments: Option<bool>,
    /// See `SFTDatasetConfig.reasoningEffort`.
    pub reasoning_effort: Option<String>,
    /// Read at most this many records; absent, 0 or negative reads all.
    pub limit: Option<f64>,
    /// *(addition)* Called on the JS thread while the file streams by, with the records read
    /// and rows built so far and the bytes read (of the file as stored, compressed or not).
    /// Calls are queued and never block the load; the last one may arrive after the Promise
    /// settles. Not called when the token cache has the rows.
    #[napi(ts_type = "(progress: LoadProgress) => void")]
    pub on_progress: Option<ProgressCallback>,
    /// Root the path must stay within. Default: `MLX_NODE_DATA_ROOT`, else the current
    /// directory.
    pub allowed_root: Option<String>,
    /// `false` also rejects a path whose real location (symlinks resolved) is outside the root.
    /// Default: symlinks are not examined, as in the reference.
    pub follow_symlinks: Option<bool>,
    /// *(addition)* Token cache directory (created if missing), or `{dir, mode}`. A later load
    /// of the same file content, tokenizer, chat template and row-changing settings maps the
    /// rows from the cache instead of rendering and tokenizing them: same batches, warnings and
    /// `report()`. A damaged entry is rebuilt and a cache that cannot be written leaves an
    /// uncached load, both with a `console.warn`. Default: no cache.
    #[napi(ts_type = "string | TokenCacheOptions")]
    pub cache: Option<Either<String, TokenCacheOptions>>,
}

/// Where and how `loadSFTDataset` caches rows.
#[napi(object)]
pub struct TokenCacheOptions {
    /// The cache directory (created if missing).
    pub dir: String,
    /// `'readwrite'` (default): map the entry if there is one, else build the rows and write it.
    /// `'read'`: never write. `'refresh'`: build the rows and replace the entry.
    #[napi(ts_type = "'readwrite' | 'read' | 'refresh'")]
    pub mode: Option<String>,
}

/// How a dataset loaded with `cache` got its rows.
#[napi(object)]
#[derive(Clone)]
pub struct TokenCacheUse {
    /// `'hit'`: mapped from an entry; `'stored'`: built and written; `'built'`: built, not
    /// written (mode `'read'`, or the cache could not be written: see the warning).
    #[napi(ts_type = "'hit' | 'stored' | 'built'")]
    pub status: String,
    /// The entry's file (absent when the data file could not be hashed).
    pub file: Option<String>,
    /// The entry's key: blake3 of every input of a row, hex.
    pub key: Option<String>,
}

fn cache_settings(cache: Either<String, TokenCacheOptions>) -> SftResult<CacheSettings> {
    let (dir, mode) = match cache {
        Either::A(dir) => (dir, None),
        Either::B(o) => (o.dir, o.mode),
    };
    if dir.is_empty() {
        return Err(SftError::invalid_argument(
            "cache: the directory must be a non-empty string",
        ));
    }
    let mode = choice(
        "cache.mode",
        mode,
        &[
            ("readwrite", CacheMode::ReadWrite),
            ("read", CacheMode::Read),
            ("refresh", CacheMode::Refresh),
        ],
    )?
    .unwrap_or(CacheMode::ReadWrite);
    Ok(CacheSettings {
        dir: dir.into(),
        mode,
    })
}

#[napi(object, js_name = "SFTBatch", object_from_js = false)]
pub struct SftBatch {
    /// Token ids, row-major `[batch, seqLen]`, right-padded with the pad id.
    #[napi(ts_type = "Int32Array")]
    pub input_ids: BatchArray<i32>,
    /// Labels, `-100` where no loss is taken.
    #[napi(ts_type = "Int32Array")]
    pub labels: BatchArray<i32>,
    #[napi(ts_type = "[number, number]")]
    pub shape: Vec<u32>,
    /// Distillation target ids `[batch, seqLen, k]`, truncated and padded like `inputIds`
    /// (-1 where there is no target). Present when any example of the batch has `distill`.
    #[napi(ts_type = "Int32Array")]
    pub distill_token_ids: Option<OwnedI32>,
    /// Distillation logprobs, same shape (`-Infinity` where there is no target).
    #[napi(ts_type = "Float32Array")]
    pub distill_logprobs: Option<OwnedF32>,
    /// `[batch, seqLen, k]` of the distillation tensors.
    #[napi(ts_type = "[number, number, number]")]
    pub distill_shape: Option<Vec<u32>>,
    /// Every batching but `'reference'` (and any sharded dataset): the example index of each
    /// row; of a packed row, its first example.
    #[napi(ts_type = "Uint32Array")]
    pub indices: Option<OwnedU32>,
    /// `'packed'`: each token's position within its own example, restarting at 0 for every
    /// example (0 on padding), `[batch, seqLen]`.
    #[napi(ts_type = "Int32Array")]
    pub position_ids: Option<BatchArray<i32>>,
    /// `'packed'`: the example index of each token, -1 on padding, `[batch, seqLen]`.
    #[napi(ts_type = "Int32Array")]
    pub example_ids: Option<BatchArray<i32>>,
}

/// What one epoch costs the trainer under one batching strategy.
#[napi(object, js_name = "BatchingStats")]
pub struct BatchingStatsJs {
    #[napi(ts_type = "'reference' | 'lengthGrouped' | 'tokenBudget' | 'packed'")]
    pub batching: String,
    /// Batches per epoch (all ranks together).
    pub batches: u32,
    /// Rows of all batches (packed rows under `'packed'`).
    pub rows: u32,
    /// Tokens of the examples after truncation.
    pub tokens: f64,
    /// Tokens the trainer computes on: rows x padded length, summed over batches.
    pub computed_tokens: f64,
    /// `(computedTokens - tokens) / computedTokens`.
    pub padding_share: f64,
}

/// Options of `exportParquet`.
#[napi(object, js_name = "ExportOptions")]
pub struct ExportOptions {
    /// Write the current epoch's batches of this many rows instead of one record per example.
    pub batch_size: Option<f64>,
}

/// Overrides for `batchingStats`; absent fields take the dataset's settings.
#[napi(object, js_name = "BatchingStatsOptions")]
pub struct BatchingStatsOptions {
    pub max_batch_tokens: Option<f64>,
    pub pad_to_multiple_of: Option<f64>,
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
    batching: Option<String>,
    max_batch_tokens: Option<f64>,
    pad_to_multiple_of: Option<f64>,
    shard: Option<ShardConfig>,
    input: InputFields,
    sanitize_control_tokens: Option<bool>,
    parse_tool_arguments: Option<bool>,
    reasoning_effort: Option<String>,
}

/// A positive integer setting.
pub(crate) fn positive_int(name: &str, value: f64) -> SftResult<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 && value <= u32::MAX as f64 {
        Ok(value as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "{name} must be a positive integer, got {}",
            js_number(value)
        )))
    }
}

fn shard_of(shard: Option<ShardConfig>) -> SftResult<Option<Shard>> {
    let Some(s) = shard else { return Ok(None) };
    let world_size = positive_int("shard.worldSize", s.world_size)?;
    if !(s.rank.is_finite() && s.rank >= 0.0 && s.rank.fract() == 0.0 && s.rank < s.world_size) {
        return Err(SftError::invalid_argument(format!(
            "shard.rank must be an integer in [0, {world_size}), got {}",
            js_number(s.rank)
        )));
    }
    Ok(Some(Shard {
        rank: s.rank as usize,
        world_size,
    }))
}

/// `format`, `columns`, `roles`, `tools`.
struct InputFields(
    Option<String>,
    Option<std::collections::HashMap<String, String>>,
    Option<std::collections::HashMap<String, String>>,
    Option<String>,
);

fn format_options(f: &mut InputFields) -> SftResult<FormatOptions> {
    let pairs = |m: Option<std::collections::HashMap<String, String>>| {
        let mut v: Vec<(String, String)> = m.unwrap_or_default().into_iter().collect();
        v.sort();
        v
    };
    Ok(FormatOptions {
        format: match f.0.take() {
            Some(name) => DatasetFormat::parse(&name)?,
            None => DatasetFormat::Reference,
        },
        columns: pairs(f.1.take()),
        roles: pairs(f.2.take()),
    })
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

fn core_config(mut f: Fields) -> SftResult<DatasetConfig> {
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
                ("generation", StrategyName::Generation),
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
        batching: choice(
            "batching",
            f.batching,
            &Batching::ALL.map(|b| (b.name(), b)),
        )?
        .unwrap_or(defaults.batching),
        max_batch_tokens: f
            .max_batch_tokens
            .map(|v| positive_int("maxBatchTokens", v))
            .transpose()?,
        pad_to_multiple_of: f
            .pad_to_multiple_of
            .map(|v| positive_int("padToMultipleOf", v))
            .transpose()?
            .unwrap_or(defaults.pad_to_multiple_of),
        shard: shard_of(f.shard)?,
        input: format_options(&mut f.input)?,
        tools: choice(
            "tools",
            f.input.3,
            &[
                ("ignore", ToolsMode::Ignore),
                ("example", ToolsMode::Example),
            ],
        )?
        .unwrap_or_default(),
        sanitize_control_tokens: f
            .sanitize_control_tokens
            .unwrap_or(defaults.sanitize_control_tokens),
        parse_tool_arguments: f
            .parse_tool_arguments
            .unwrap_or(defaults.parse_tool_arguments),
        reasoning_effort: f.reasoning_effort,
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
            batching: c.batching,
            max_batch_tokens: c.max_batch_tokens,
            pad_to_multiple_of: c.pad_to_multiple_of,
            shard: c.shard,
            input: InputFields(c.format, c.columns, c.roles, c.tools),
            sanitize_control_tokens: c.sanitize_control_tokens,
            parse_tool_arguments: c.parse_tool_arguments,
            reasoning_effort: c.reasoning_effort,
        }),
    }
}

/// A batch size must be a positive integer (the reference silently misbehaves otherwise).
pub(crate) fn batch_size(value: f64) -> SftResult<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 {
        Ok(value as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "batchSize must be a positive integer, got {}",
            js_number(value)
        )))
    }
}

fn batch_index(value: f64) -> SftResult<usize> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 {
        Ok(value as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "batch index must be a non-negative integer, got {}",
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
    /// Codes of the silent losses found in the example: `CONTENT_NOT_RENDERED`,
    /// `TOOLS_IGNORED`, `CONTENT_DROPPED_BY_TEMPLATE`, `DUPLICATE_EXAMPLE`,
    /// `CONTROL_TOKEN_IN_CONTENT`.
    pub silent_losses: Vec<String>,
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
    /// Examples per silent-loss code (codes with none are left out).
    pub silent_losses: std::collections::HashMap<String, u32>,
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
                silent_losses: LossKind::of_bits(e.losses)
                    .map(|k| k.code().to_string())
                    .collect(),
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
            silent_losses: LossKind::ALL
                .iter()
                .zip(t.losses)
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (k.code().to_string(), n))
                .collect(),
        },
        turn_end_token: r.turn_end_token,
    })
}

/// What `exportParquet` wrote.
#[napi(object)]
pub struct ParquetExport {
    pub file: String,
    /// Records written: the examples that take part in training.
    pub rows: f64,
    pub tokens: f64,
    pub trained_tokens: f64,
}

#[napi(js_name = "SFTDataset")]
pub struct JsSftDataset {
    pub(crate) inner: Arc<Dataset>,
    cache: Option<TokenCacheUse>,
    /// The data file of a loaded dataset (`summary()` reads it back).
    pub(crate) source: Option<std::path::PathBuf>,
}

impl Drop for JsSftDataset {
    fn drop(&mut self) {
        self.inner.cancel_prefetch();
    }
}

/// A position in the epoch order, as the JS generator passes it.
fn position(v: f64) -> SftResult<usize> {
    if v.fract() == 0.0 && v >= 0.0 && v <= u32::MAX as f64 {
        Ok(v as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "{} is not a position",
            js_number(v)
        )))
    }
}

fn finish_batch(env: &Env, collated: CollatedBatch) -> SftResult<SftBatch> {
    warn_first_sight(env, &collated.warnings)?;
    let b = collated.batch;
    let packing = b
        .packing
        .map(|p| (p.position_ids.into(), p.example_ids.into()));
    Ok(sft_batch(
        (b.input_ids.into(), b.labels.into(), packing),
        (b.rows, b.seq_len),
        b.distill,
        collated.indices,
    ))
}

/// `finish_batch` of a batch laid out on the JS thread: its cells are written straight into the
/// typed arrays' V8 memory, with no vector between.
fn write_batch(env: &Env, prepared: PreparedBatch) -> SftResult<SftBatch> {
    warn_first_sight(env, &prepared.warnings)?;
    let layout = &prepared.layout;
    let cells = layout.cells();
    let made = |e: napi::Error| {
        SftError::new(
            ErrorCode::Internal,
            format!("a batch array could not be made: {e}"),
        )
    };
    let raw = env.raw();
    // SAFETY: `raw` is the environment of the current call; `layout.write` writes every cell of
    // the arrays (it panics otherwise, and the arrays are then dropped unseen), and the cells
    // are not kept past this function.
    let arrays = unsafe {
        let (input_ids, input_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
        let (labels, label_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
        let packing = if layout.is_packed() {
            let (positions, position_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
            let (examples, example_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
            Some(((positions, examples), (position_cells, example_cells)))
        } else {
            None
        };
        let (packing, packing_cells) = packing.unzip();
        layout.write(Cells {
            input_ids: input_cells,
            labels: label_cells,
            packing: packing_cells,
        });
        let made = BatchArray::Made;
        (
            made(input_ids),
            made(labels),
            packing.map(|(p, e)| (made(p), made(e))),
        )
    };
    Ok(sft_batch(
        arrays,
        (layout.rows(), layout.seq_len()),
        layout.distill(),
        prepared.indices,
    ))
}

/// Prints, through `console.warn`, the warnings of a batch's examples seen for the first time.
fn warn_first_sight(env: &Env, warnings: &[(u32, String)]) -> SftResult<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    warn_all(env, warnings)
        .map_err(|e| SftError::new(ErrorCode::Internal, format!("console.warn failed: {e}")))
}

/// Input ids, labels and, for packed batches, position and example ids.
type BatchArrays = (
    BatchArray<i32>,
    BatchArray<i32>,
    Option<(BatchArray<i32>, BatchArray<i32>)>,
);

/// The `SFTBatch` of a batch's arrays, `(rows, seq_len)`, distillation targets and row indices.
fn sft_batch(
    (input_ids, labels, packing): BatchArrays,
    (rows, seq_len): (usize, usize),
    distill: Option<BatchDistill>,
    indices: Option<Vec<u32>>,
) -> SftBatch {
    let distill_shape = distill
        .as_ref()
        .map(|d| vec![rows as u32, seq_len as u32, d.k as u32]);
    let (distill_token_ids, distill_logprobs) =
        distill.map(|d| (Owned(d.ids), Owned(d.logprobs))).unzip();
    let (position_ids, example_ids) = packing.unzip();
    SftBatch {
        input_ids,
        labels,
        shape: vec![rows as u32, seq_len as u32],
        distill_token_ids,
        distill_logprobs,
        distill_shape,
        indices: indices.map(Owned),
        position_ids,
        example_ids,
    }
}

fn stats_to_js(costs: Vec<(Batching, PlanCost)>) -> Vec<BatchingStatsJs> {
    costs
        .into_iter()
        .map(|(batching, c)| BatchingStatsJs {
            batching: batching.name().to_string(),
            batches: c.batches as u32,
            rows: c.rows as u32,
            tokens: c.tokens as f64,
            computed_tokens: c.computed_tokens as f64,
            padding_share: c.padding_share(),
        })
        .collect()
}

/// The reference prints its prefix-mismatch warning with `console.warn`; so does the port, once
/// per example.
fn warn_all(env: &Env, warnings: &[(u32, String)]) -> napi::Result<()> {
    print_warnings(env, warnings.iter().map(|(_, w)| w.clone()))
}

fn print_warnings(env: &Env, warnings: impl Iterator<Item = String>) -> napi::Result<()> {
    let global = env.get_global()?;
    let console: Object = global.get_named_property("console")?;
    let warn: Function<String, ()> = console.get_named_property("warn")?;
    for message in warnings {
        warn.apply(console, message)?;
    }
    Ok(())
}

/// The loader's silent-loss warnings, once per dataset and class (a count and the first
/// example, never a line per example), as Node warnings of type `SFTDataWarning` with the
/// class's code: they print once on stderr, `process.on('warning')` sees them, and the
/// reference's `console.warn` output stays exactly as it was.
fn emit_data_warnings(env: &Env, warnings: Vec<(&'static str, String)>) -> napi::Result<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    let global = env.get_global()?;
    let process: Object = global.get_named_property("process")?;
    let emit: Function<FnArgs<(String, String, String)>, ()> =
        process.get_named_property("emitWarning")?;
    for (code, message) in warnings {
        emit.apply(
            process,
            FnArgs::from((message, "SFTDataWarning".to_string(), code.to_string())),
        )?;
    }
    Ok(())
}

#[napi]
impl JsSftDataset {
    /// Validates the format of every example (all must share the first one's) and derives the
    /// special token ids. Rows start building on the other cores while the examples are
    /// converted; a row that fails to build rejects the batch that holds it.
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
            // The examples are converted a slice at a time, and the rows of each slice start
            // building on other threads while the next one is converted. Errors keep the order
            // of a whole conversion first: any example's conversion error comes before an error
            // of the tokenizer, the config or an example's format.
            let mut slices = ExampleSlices::new(&examples, what("examples"))?;
            let first = slices.next()?.into_iter().next();
            let setup = (|| {
                let tokenizer = tokenizer_arg(&tokenizer)?;
                let config: Option<SftDatasetConfig> = match config {
                    Some(c) => typed_arg(&c, &what("config"), "a valid SFTDatasetConfig")?,
                    None => None,
                };
                let config = core_config_of(config)?;
                Dataset::begin_creation(first, slices.len(), tokenizer, config, true)
            })();
            let mut creation = match setup {
                Ok(creation) => creation,
                Err(e) => return Err(slices.convert_rest().err().unwrap_or(e)),
            };
            while !slices.is_done() {
                let slice = slices.next()?;
                if let Err(e) = creation.add(slice) {
                    return Err(slices.convert_rest().err().unwrap_or(e));
                }
            }
            let inner = creation.finish()?;
            inner.start_prefetch();
            Ok(JsSftDataset {
                inner,
                cache: None,
                source: None,
            })
        })
    }

    /// *(addition)* The format every example shares, as detected from the first one.
    #[napi(getter, ts_return_type = "'prompt-completion' | 'conversation'")]
    pub fn format(&self) -> &'static str {
        self.inner.format().name()
    }

    /// *(addition)* How a dataset loaded with `cache` got its rows; null without a cache.
    #[napi(getter)]
    pub fn cache(&self) -> Option<TokenCacheUse> {
        self.cache.clone()
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

    /// Exactly the number of batches `batches(batchSize)` yields this epoch: `ceil(length /
    /// batchSize)` under `'reference'` batching without a shard, the plan's count otherwise.
    #[napi]
    pub fn num_batches(&self, batch_size: f64) -> Result<u32> {
        run_sync(|| Ok(self.inner.num_batches(self::batch_size(batch_size)?)? as u32))
    }

    /// *(addition)* Tokens computed per epoch and padding share of every batching strategy,
    /// side by side, over the current order (all ranks together), with the dataset's
    /// `maxBatchTokens` and `padToMultipleOf` unless `options` overrides them. `'packed'` is
    /// left out when `maxBatchTokens` is below `maxSeqLength`. Builds every row not built yet.
    #[napi(ts_return_type = "Promise<BatchingStats[]>")]
    pub fn batching_stats(
        &self,
        batch_size: f64,
        options: Option<BatchingStatsOptions>,
    ) -> AsyncTask<Job<StrategyCosts, Vec<BatchingStatsJs>>> {
        let dataset = self.inner.clone();
        AsyncTask::new(Job::new(
            move || {
                let batch_size = self::batch_size(batch_size)?;
                let (tokens, multiple) = match options {
                    None => (None, None),
                    Some(o) => (
                        o.max_batch_tokens
                            .map(|v| positive_int("maxBatchTokens", v))
                            .transpose()?,
                        o.pad_to_multiple_of
                            .map(|v| positive_int("padToMultipleOf", v))
                            .transpose()?,
                    ),
                };
                Ok(dataset.batching_costs(batch_size, tokens, multiple))
            },
            |_, costs| Ok(stats_to_js(costs)),
        ))
    }

    /// `collateBatch(indices)` done on the JS thread when every row is built (a copy costs less
    /// than a trip to the thread pool), else `null`; used by the JS generator.
    #[napi(js_name = "_collateBuilt")]
    pub fn collate_built(&self, env: Env, indices: Vec<f64>) -> Result<Option<SftBatch>> {
        run_sync(|| {
            let examples = self.inner.resolve_positions(&indices)?;
            match self.inner.prepare_examples_if_built(&examples)? {
                Some(prepared) => write_batch(&env, prepared).map(Some),
                None => Ok(None),
            }
        })
    }

    /// Resolves once the rows at positions `start..end` of the current order are built (or
    /// failed to build), building them off the JS thread; used by the JS generator.
    #[napi(js_name = "_awaitRows", ts_return_type = "Promise<void>")]
    pub fn await_rows(&self, start: f64, end: f64) -> AsyncTask<Job<(), ()>> {
        self.inner.start_prefetch();
        let dataset = self.inner.clone();
        AsyncTask::new(job(move || {
            dataset.await_rows(position(start)?, position(end)?)
        }))
    }

    /// `_collateBuilt` of the positions `start..end` of the current order; used by the JS
    /// generator, which would otherwise build an array of positions per batch.
    #[napi(js_name = "_collateRangeBuilt")]
    pub fn collate_range_built(&self, env: Env, start: f64, end: f64) -> Result<Option<SftBatch>> {
        run_sync(|| {
            match self
                .inner
                .prepare_range_if_built(position(start)?, position(end)?)?
            {
                Some(prepared) => write_batch(&env, prepared).map(Some),
                None => Ok(None),
            }
        })
    }

    /// `_plannedBatch` done on the JS thread when the plan's rows are built, else `null`.
    #[napi(js_name = "_plannedBatchBuilt")]
    pub fn planned_batch_built(
        &self,
        env: Env,
        batch_size: f64,
        index: f64,
    ) -> Result<Option<SftBatch>> {
        run_sync(|| {
            let batch_size = self::batch_size(batch_size)?;
            let index = batch_index(index)?;
            match self.inner.prepare_planned_if_built(batch_size, index)? {
                Some(prepared) => write_batch(&env, prepared).map(Some),
                None => Ok(None),
            }
        })
    }

    /// Whether `batches()` follows a plan (any batching but `'reference'`, or a shard); used by
    /// the JS generator.
    #[napi(js_name = "_usesPlan")]
    pub fn uses_plan(&self) -> bool {
        self.inner.config().uses_plan()
    }

    /// Batch `index` of the current epoch's plan for `batchSize`; used by the JS generator.
    #[napi(js_name = "_plannedBatch", ts_return_type = "Promise<SFTBatch>")]
    pub fn planned_batch(
        &self,
        batch_size: f64,
        index: f64,
    ) -> AsyncTask<Job<CollatedBatch, SftBatch>> {
        self.inner.start_prefetch();
        let dataset = self.inner.clone();
        AsyncTask::new(Job::new(
            move || {
                let batch_size = self::batch_size(batch_size)?;
                dataset.collate_planned(batch_size, batch_index(index)?)
            },
            finish_batch,
        ))
    }

    /// Per example and in total: tokens, trained tokens, truncation, drops, prefix and content
    /// mismatches, straddling tokens, trained end-of-turn tokens and leading BOS tokens. Builds
    /// every row not built yet (off the JS thread, on all cores).
    #[napi(ts_return_type = "Promise<DatasetReport>")]
    pub fn report(&self) -> AsyncTask<Job<DatasetReport, DatasetReportJs>> {
        let dataset = self.inner.clone();
        AsyncTask::new(Job::new(move || dataset.report(), report_to_js))
    }

    /// *(addition)* Writes the rows that take part in training as Apache Parquet (columns
    /// `example_index`, `input_ids`, `labels` with -100 where no loss is taken, `num_tokens`,
    /// `num_trained_tokens`), untruncated and in example order, exactly as `tokenizeExample`
    /// gives them. With `options.batchSize`, writes instead every batch of the current epoch
    /// exactly as `batches(batchSize)` yields them (batching strategy, shard, truncation,
    /// packing and padding included), one record per batch row: `batch_index`, `input_ids`,
    /// `labels`, `position_ids`, `example_ids` (-1 on padding), `num_tokens` (not padding),
    /// `num_trained_tokens`. Written to a temporary file beside `outPath`, then renamed.
    #[napi(ts_return_type = "Promise<ParquetExport>")]
    pub fn export_parquet(
        &self,
        out_path: String,
        options: Option<ExportOptions>,
    ) -> AsyncTask<Job<ExportSummary, ParquetExport>> {
        let dataset = self.inner.clone();
        let batch = options.and_then(|o| o.batch_size);
        AsyncTask::new(Job::new(
            move || match batch {
                None => write_parquet(&dataset, Path::new(&out_path)),
                Some(size) => {
                    write_parquet_batches(&dataset, Path::new(&out_path), self::batch_size(size)?)
                }
            },
            |_, s| {
                Ok(ParquetExport {
                    file: s.file.display().to_string(),
                    rows: s.rows as f64,
                    tokens: s.tokens as f64,
                    trained_tokens: s.trained_tokens as f64,
                })
            },
        ))
    }

    /// Checks a `batches()` batch size; used by the JS generator before it starts.
    #[napi(js_name = "_checkBatchSize")]
    pub fn check_batch_size(&self, batch_size: f64) -> Result<()> {
        run_sync(|| self::batch_size(batch_size).map(|_| ()))
    }
}

/// Examples converted per slice by `createSFTDataset`: about a millisecond of conversion, and a
/// chunk of rows for the cores.
const CREATE_SLICE: u32 = 64;

/// The first slice after example 0 is smaller, so that the other cores start sooner; the next
/// ones double up to `CREATE_SLICE`.
const FIRST_CREATE_SLICE: u32 = 8;

/// The `examples` argument of `createSFTDataset`, converted from JS a slice at a time (example 0
/// alone, then `FIRST_CREATE_SLICE` examples, doubling up to `CREATE_SLICE`), with the errors a
/// whole conversion (`Vec<JsJson>`) gives.
struct ExampleSlices<'env> {
    array: Array<'env>,
    raw: napi::sys::napi_value,
    /// V8's serializer, which writes each slice for `v8_wire::skim`: an example found readable
    /// there needs no napi walk, and is decoded where its row is built. `None`: the walk reads
    /// every example.
    serializer: Option<Serializer>,
    /// What the skim of the current slice found, element by element in step with `next`, and
    /// the bytes to decode them from.
    wire: Option<(std::vec::IntoIter<Skimmed>, Arc<WireExamples>)>,
    next: u32,
    size: u32,
    what: String,
}

impl<'env> ExampleSlices<'env> {
    fn new(examples: &Unknown<'env>, what: String) -> SftResult<Self> {
        let raw = examples.value();
        // SAFETY: `raw` is a live value of the current call; `Array::from_napi_value` checks that
        // it is an array before it reads it.
        let array = unsafe { Array::from_napi_value(raw.env, raw.value) }
            .map_err(|e| arg_error(&what, EXAMPLES, &e))?;
        Ok(ExampleSlices {
            array,
            raw: raw.value,
            // SAFETY: the env of the current call, which the slices do not outlive.
            serializer: unsafe { Serializer::find(raw.env) },
            wire: None,
            next: 0,
            size: 1,
            what,
        })
    }

    fn len(&self) -> usize {
        self.array.len() as usize
    }

    fn is_done(&self) -> bool {
        self.next >= self.array.len()
    }

    /// Where the next slice ends; the skim of its serialization is ready for `take`.
    fn begin_slice(&mut self) -> u32 {
        let end = self.array.len().min(self.next.saturating_add(self.size));
        self.size = if self.size == 1 {
            FIRST_CREATE_SLICE
        } else {
            (self.size * 2).min(CREATE_SLICE)
        };
        let (from, array) = (self.next, self.raw);
        self.wire = self.serializer.as_ref().and_then(|serializer| {
            // SAFETY: `array` is the live argument of the current call; the skim copies what it
            // keeps of the bytes.
            let skim = unsafe { serializer.elements(array, from, end, v8_wire::skim) }?;
            (skim.len == end - from).then(|| (skim.elements.into_iter(), Arc::new(skim.examples)))
        });
        end
    }

    /// The next example: where the wire has it, or `None` for the walk to read it.
    fn take(&mut self) -> Option<Pending> {
        self.next += 1;
        let (elements, examples) = self.wire.as_mut()?;
        match elements.next()? {
            Skimmed::Wire(at) => Some(Pending::Wire(examples.clone(), at)),
            Skimmed::Walk => None,
        }
    }

    /// Example `index` read by the walk.
    fn walk(&self, index: u32) -> napi::Result<serde_json::Value> {
        self.array.get::<JsJson>(index).and_then(|v| {
            v.map(|v| v.0).ok_or_else(|| {
                napi::Error::new(
                    napi::Status::InvalidArg,
                    "Found inconsistent data type in Array<T> when converting to Rust Vec<T>",
                )
            })
        })
    }

    /// The next slice.
    fn next(&mut self) -> SftResult<Vec<Pending>> {
        let end = self.begin_slice();
        let mut out = Vec::with_capacity((end - self.next) as usize);
        while self.next < end {
            let index = self.next;
            let example = match self.take() {
                Some(example) => example,
                None => Pending::Json(
                    self.walk(index)
                        .map_err(|e| arg_error(&self.what, EXAMPLES, &e))?,
                ),
            };
            out.push(example);
        }
        Ok(out)
    }

    /// Converts the examples left, for their errors only.
    fn convert_rest(&mut self) -> SftResult<()> {
        while !self.is_done() {
            self.next()?;
        }
        Ok(())
    }
}

const EXAMPLES: &str = "an array of examples";

/// One example as `_readExamples` saw it.
#[napi(object)]
pub struct ReadExample {
    /// The example as JSON text (keys in their order), unless it was refused.
    pub json: Option<String>,
    /// Why the napi walk refused it.
    pub error: Option<String>,
    /// Read from V8's serialization of the array, not by the napi walk.
    pub wire: bool,
}

/// *(diagnostic)* How `createSFTDataset` reads `examples`, each on its own: from V8's
/// serialization of the array where it can (`wire: true`), by the napi walk otherwise or for
/// all with `wire: false`. The tests hold the two readings to the same JSON and errors.
#[napi(js_name = "_readExamples")]
pub fn read_examples(examples: Unknown, wire: bool) -> Result<Vec<ReadExample>> {
    run_sync(|| {
        let mut slices = ExampleSlices::new(&examples, "_readExamples: examples".to_string())?;
        if !wire {
            slices.serializer = None;
        }
        let mut out = Vec::with_capacity(slices.len());
        while !slices.is_done() {
            let end = slices.begin_slice();
            while slices.next < end {
                let index = slices.next;
                if let Some(Pending::Wire(examples, at)) = slices.take() {
                    let json = examples.decode(&at).ok_or_else(|| {
                        SftError::new(
                            ErrorCode::Internal,
                            format!("example {index} did not decode"),
                        )
                    })?;
                    out.push(ReadExample {
                        json: Some(json.to_string()),
                        error: None,
                        wire: true,
                    });
                    continue;
                }
                let read = slices.walk(index).map(|json| json.to_string());
                out.push(ReadExample {
                    json: read.as_ref().ok().cloned(),
                    error: read.err().map(|e| e.reason.clone()),
                    wire: false,
                });
            }
        }
        Ok(out)
    })
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
) -> AsyncTask<Job<LoadedWithWarnings, JsSftDataset>> {
    // Checked now, reported by the Promise: an async entry point never throws.
    let tokenizer = tokenizer_arg(&tokenizer);
    AsyncTask::new(Job::new(
        move || {
            let tokenizer = tokenizer?;
            let mut config = config;
            let on_progress = config
                .as_mut()
                .and_then(|c| c.on_progress.take())
                .map(progress_hook);
            let (config, limit, opts, cache) = match config {
                None => (
                    DatasetConfig::default(),
                    None,
                    path_options(None, None),
                    None,
                ),
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
                        batching: c.batching,
                        max_batch_tokens: c.max_batch_tokens,
                        pad_to_multiple_of: c.pad_to_multiple_of,
                        shard: c.shard,
                        input: InputFields(c.format, c.columns, c.roles, c.tools),
                        sanitize_control_tokens: c.sanitize_control_tokens,
                        parse_tool_arguments: c.parse_tool_arguments,
                        reasoning_effort: c.reasoning_effort,
                    })?,
                    c.limit.filter(|l| *l > 0.0).map(|l| l.ceil() as usize),
                    path_options(c.allowed_root, c.follow_symlinks),
                    c.cache.map(cache_settings).transpose()?,
                ),
            };
            let file = resolve_dataset_path(&path, &opts)?;
            let options = LoadOptions { limit, on_progress };
            let loaded = match cache {
                Some(cache) => token_cache::load(&file, tokenizer, config, &options, &cache)?,
                None => CachedLoad {
                    dataset: Dataset::load(&file, tokenizer, config, &options)?,
                    status: None,
                    entry: None,
                    key: None,
                    warnings: Vec::new(),
                },
            };
            let data_warnings = loaded.dataset.loss_warnings(&file.display().to_string());
            Ok((loaded, data_warnings, file))
        },
        finish_load,
    ))
}

/// Emits the data warnings (silent loss) and prints the cache's, then wraps the dataset;
/// `cache` stays null for an uncached load.
fn finish_load(
    env: &Env,
    (loaded, data_warnings, file): LoadedWithWarnings,
) -> SftResult<JsSftDataset> {
    emit_data_warnings(env, data_warnings).map_err(|e| {
        SftError::new(
            ErrorCode::Internal,
            format!("process.emitWarning failed: {e}"),
        )
    })?;
    print_warnings(env, loaded.warnings.into_iter())
        .map_err(|e| SftError::new(ErrorCode::Internal, format!("console.warn failed: {e}")))?;
    Ok(JsSftDataset {
        inner: Arc::new(loaded.dataset),
        cache: loaded.status.map(|status| TokenCacheUse {
            status: status.name().to_string(),
            file: loaded.entry.map(|p| p.display().to_string()),
            key: loaded.key,
        }),
        source: Some(file),
    })
}
