//! The dataset options as JS gives them (`SFTDatasetConfig`, `LoadSFTDatasetOptions`, the token
//! cache's and the progress callback), checked and turned into `dataset::DatasetConfig`.

use napi::bindgen_prelude::{Either, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

use crate::batch::plan::{Batching, Shard};
use crate::dataset::loader::LoadProgress;
use crate::dataset::{DatasetConfig, SpecialTokenOverrides, StrategyName};
use crate::error::{js_number, SftError, SftResult};
use crate::example::ToolsMode;
use crate::input::dataset_format::{DatasetFormat, FormatOptions};
use crate::mask::truncation::Truncation;
use crate::mask::Reasoning;
use crate::store::token_cache::{CacheMode, CacheSettings};

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

/// Declares an options object that carries the dataset settings (one definition for
/// `SFTDatasetConfig` and `LoadSFTDatasetOptions`), with the fields only it takes, and
/// `settings()`, which takes the dataset settings out for `core_config`.
macro_rules! with_dataset_settings {
    (
        $(#[$($attr:tt)*])*
        pub struct $name:ident { $($only:tt)* }
    ) => {
        // Docs of the invocation are written as `#[doc = "..."]`: napi prints the raw string
        // a `///` comment becomes there. The fields only this object has pass as tokens, so
        // that napi sees their `Option`s.
        $(#[$($attr)*])*
        pub struct $name {
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
            /// `loadSFTDataset` renders every example: an example the chat template (or the
            /// tokenizer) fails on fails the load, naming the first ones and the count. `true`
            /// leaves such examples out instead (counted in a warning, `report()` and
            /// `summary()`). Default false.
            pub drop_unrenderable: Option<bool>,
            /// Leave out exact copies of an earlier example (what `DUPLICATE_EXAMPLE` reports: the
            /// same messages, tools and shape); the first stays. Counted in a warning
            /// (`DROPPED_DUPLICATES`) and in `report()` (`dropped: 'duplicate'`). Default false.
            pub drop_duplicates: Option<bool>,
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
            /// `'transformers'` (as `transformers.apply_chat_template`) or `'mlx-node'` (as MLX
            /// Node's own tokenizer: every assistant turn keeps its reasoning, messages sanitised;
            /// see docs/mlx-node.md). Part of the token cache key. Default: the tokenizer's own
            /// (`fromPretrained`'s `renderAs`, `'transformers'` unless set there).
            #[napi(ts_type = "'transformers' | 'mlx-node'")]
            pub render_as: Option<String>,
            $($only)*
        }

        impl $name {
            /// The dataset settings, taken out (the other fields stay).
            pub(crate) fn settings(&mut self) -> Fields {
                Fields {
                    max_seq_length: self.max_seq_length.take(),
                    completion_only: self.completion_only.take(),
                    enable_thinking: self.enable_thinking.take(),
                    seed: self.seed.take(),
                    special_token_ids: self.special_token_ids.take(),
                    masking_strategy: self.masking_strategy.take(),
                    train_on_roles: self.train_on_roles.take(),
                    train_on_turn_end: self.train_on_turn_end.take(),
                    reasoning: self.reasoning.take(),
                    truncation: self.truncation.take(),
                    drop_untrainable: self.drop_untrainable.take(),
                    drop_unrenderable: self.drop_unrenderable.take(),
                    drop_duplicates: self.drop_duplicates.take(),
                    format: self.format.take(),
                    columns: self.columns.take(),
                    roles: self.roles.take(),
                    tools: self.tools.take(),
                    batching: self.batching.take(),
                    max_batch_tokens: self.max_batch_tokens.take(),
                    pad_to_multiple_of: self.pad_to_multiple_of.take(),
                    shard: self.shard.take(),
                    sanitize_control_tokens: self.sanitize_control_tokens.take(),
                    parse_tool_arguments: self.parse_tool_arguments.take(),
                    reasoning_effort: self.reasoning_effort.take(),
                    render_as: self.render_as.take(),
                }
            }
        }
    };
}

with_dataset_settings! {
    #[napi(object, js_name = "SFTDatasetConfig")]
    pub struct SftDatasetConfig {}
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
    /// Another process is building the same token cache entry (same data, tokenizer and
    /// settings, same cache directory): this load waits for it and maps its rows.
    pub waiting: bool,
}

/// A JS function the loader's threads call through the event loop; weak, so that it never
/// keeps a process alive by itself.
pub type ProgressCallback =
    ThreadsafeFunction<LoadProgressJs, Unknown<'static>, LoadProgressJs, Status, false, true>;

/// The loader's progress hook that queues a call of `callback`.
pub(crate) fn progress_hook(callback: ProgressCallback) -> Box<dyn Fn(LoadProgress) + Send + Sync> {
    Box::new(move |p: LoadProgress| {
        callback.call(
            LoadProgressJs {
                records: p.records as f64,
                bytes: p.bytes as f64,
                waiting: p.waiting,
            },
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    })
}

with_dataset_settings! {
    #[doc = "`loadSFTDataset`'s options: the dataset settings, `limit`, progress, path validation and"]
    #[doc = "the token cache."]
    #[napi(object, js_name = "LoadSFTDatasetOptions", object_to_js = false)]
    pub struct LoadSftDatasetOptions {
        #[doc = "Read at most this many records; absent, 0 or negative reads all."]
        pub limit: Option<f64>,
        #[doc = "*(addition)* Bytes of token rows a load keeps in the process's memory. Rows that"]
        #[doc = "would exceed it are all written to a file as they are built (the token cache entry"]
        #[doc = "with `cache`, else a file of the OS's temporary directory that is gone with the dataset"]
        #[doc = "and the process) and mapped: same batches, a load's memory bounded whatever the data"]
        #[doc = "size. `0` always maps. Not part of the cache key. Default 1 GiB (1073741824)."]
        pub memory_budget: Option<f64>,
        #[doc = "*(addition)* Called on the JS thread while the file streams by, with the records read"]
        #[doc = "and rows built so far and the bytes read (of the file as stored, compressed or not)."]
        #[doc = "Calls are queued and never block the load; the last one may arrive after the Promise"]
        #[doc = "settles. Not called when the token cache has the rows."]
        #[napi(ts_type = "(progress: LoadProgress) => void")]
        pub on_progress: Option<ProgressCallback>,
        #[doc = "Root the path must stay within. Default: `MLX_NODE_DATA_ROOT`, else the current"]
        #[doc = "directory."]
        pub allowed_root: Option<String>,
        #[doc = "`false` also rejects a path whose real location (symlinks resolved) is outside the root."]
        #[doc = "Default: symlinks are not examined, as in the reference."]
        pub follow_symlinks: Option<bool>,
        #[doc = "*(addition)* Token cache directory (created if missing), or `{dir, mode}`. A later load"]
        #[doc = "of the same file content, tokenizer, chat template and row-changing settings maps the"]
        #[doc = "rows from the cache instead of rendering and tokenizing them: same batches, warnings and"]
        #[doc = "`report()`. A damaged entry is rebuilt and a cache that cannot be written leaves an"]
        #[doc = "uncached load, both with a `console.warn`. Default: no cache."]
        #[napi(ts_type = "string | TokenCacheOptions")]
        pub cache: Option<Either<String, TokenCacheOptions>>,
    }
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

pub(crate) fn cache_settings(cache: Either<String, TokenCacheOptions>) -> SftResult<CacheSettings> {
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

/// The dataset settings both config objects share.
pub(crate) struct Fields {
    pub(crate) max_seq_length: Option<f64>,
    pub(crate) completion_only: Option<Either<bool, String>>,
    pub(crate) enable_thinking: Option<bool>,
    pub(crate) seed: Option<f64>,
    pub(crate) special_token_ids: Option<SpecialTokenIds>,
    pub(crate) masking_strategy: Option<String>,
    pub(crate) train_on_roles: Option<Vec<String>>,
    pub(crate) train_on_turn_end: Option<bool>,
    pub(crate) reasoning: Option<String>,
    pub(crate) truncation: Option<String>,
    pub(crate) drop_untrainable: Option<bool>,
    pub(crate) drop_unrenderable: Option<bool>,
    pub(crate) drop_duplicates: Option<bool>,
    pub(crate) batching: Option<String>,
    pub(crate) max_batch_tokens: Option<f64>,
    pub(crate) pad_to_multiple_of: Option<f64>,
    pub(crate) shard: Option<ShardConfig>,
    pub(crate) format: Option<String>,
    pub(crate) columns: Option<std::collections::HashMap<String, String>>,
    pub(crate) roles: Option<std::collections::HashMap<String, String>>,
    pub(crate) tools: Option<String>,
    pub(crate) sanitize_control_tokens: Option<bool>,
    pub(crate) parse_tool_arguments: Option<bool>,
    pub(crate) reasoning_effort: Option<String>,
    pub(crate) render_as: Option<String>,
}

/// `memoryBudget`: a whole number of bytes.
pub(crate) fn memory_budget(value: f64) -> SftResult<usize> {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= MAX {
        Ok(value as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "memoryBudget must be an integer number of bytes from 0 to {}, got {}",
            MAX as u64,
            js_number(value)
        )))
    }
}

/// A positive integer setting.
pub(crate) fn positive_int(name: &str, value: f64) -> SftResult<usize> {
    if value.is_finite() && value >= 1.0 && value.fract() == 0.0 && value <= u32::MAX as f64 {
        Ok(value as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "{name} must be an integer from 1 to {}, got {}",
            u32::MAX,
            js_number(value)
        )))
    }
}

pub(crate) fn shard_of(shard: Option<ShardConfig>) -> SftResult<Option<Shard>> {
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

/// `format`, `columns` and `roles`.
pub(crate) fn format_options(
    format: Option<String>,
    columns: Option<std::collections::HashMap<String, String>>,
    roles: Option<std::collections::HashMap<String, String>>,
) -> SftResult<FormatOptions> {
    let pairs = |m: Option<std::collections::HashMap<String, String>>| {
        let mut v: Vec<(String, String)> = m.unwrap_or_default().into_iter().collect();
        v.sort();
        v
    };
    Ok(FormatOptions {
        format: match format {
            Some(name) => DatasetFormat::parse(&name)?,
            None => DatasetFormat::Reference,
        },
        columns: pairs(columns),
        roles: pairs(roles),
    })
}

pub(crate) fn choice<T: Copy>(
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

pub(crate) fn core_config(f: Fields) -> SftResult<DatasetConfig> {
    let defaults = DatasetConfig::default();
    let max_seq_length = match f.max_seq_length {
        None => defaults.max_seq_length,
        Some(v) if v.is_finite() && v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64 => {
            v as usize
        }
        Some(v) => {
            return Err(SftError::invalid_argument(format!(
                "maxSeqLength must be an integer from 1 to {}, got {}",
                u32::MAX,
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
    let special = f
        .special_token_ids
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
        drop_unrenderable: f.drop_unrenderable.unwrap_or(defaults.drop_unrenderable),
        drop_duplicates: f.drop_duplicates.unwrap_or(defaults.drop_duplicates),
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
        input: format_options(f.format, f.columns, f.roles)?,
        tools: choice(
            "tools",
            f.tools,
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
        render_as: super::tokenizer::render_as_arg(f.render_as.as_deref(), "renderAs")?,
    })
}

pub fn core_config_of(config: Option<SftDatasetConfig>) -> SftResult<DatasetConfig> {
    match config {
        None => Ok(DatasetConfig::default()),
        Some(mut c) => core_config(c.settings()),
    }
}
