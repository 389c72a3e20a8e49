//! Stage 8, the dataset: examples in (from JS or a file, `loader`), rows built on all cores,
//! batches out in epoch order; `report` and `validate` say what a file's rows hold and lack.
//!
//! The SFT dataset: examples, their cached rows, the epoch order and batch collation.
//!
//! Each example is rendered and tokenized at most once per dataset. Rows live in `OnceLock`s, so
//! a background prefetch and a `collateBatch` that needs the same example never both compute it:
//! the second waits for the first.

pub mod loader;
pub mod report;
pub mod summary;
pub mod validate;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::batch::collate::{Batch, Layout, Padding};
use crate::batch::plan::{
    plan, plan_cost, plan_key, Batching, Plan, PlanCost, PlanSettings, Shard,
};
use crate::batch::shuffle::epoch_order;
use crate::dataset::loader::{load_rows, LoadOptions, PARALLEL_GRAIN};
use crate::dataset::report::{example_report, DatasetReport};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::example::ToolsMode;
use crate::example::{detect_format, format_from_keys, from_created, Format};
use crate::input::dataset_format::{Converter, FormatOptions};
use crate::input::v8_wire::{WireExample, WireExamples};
use crate::mask::silent_loss::{duplicate_key, ExampleKey, LossChecker, LossKind, LossSummary};
use crate::mask::spans::{discover_turn_end, TurnEnd};
use crate::mask::truncation::{kept_window, Truncation};
use crate::mask::{ChatMlMarkers, Reasoning, SpanPolicy};
use crate::render::RenderOptions;
use crate::rows::packed_rows::PackedRows;
use crate::rows::repeats::Repeats;
use crate::rows::row_cache::RowCache;
use crate::rows::{build_row, Masking, RowSettings, RowView, TokenizedRow};
use crate::tokenize::{ChatTokenizer, IM_END, IM_START};

const PREFETCH_CHUNK: usize = 64;

/// Overrides for the ids the reference masking keys on (`specialTokenIds`).
#[derive(Debug, Clone, Default)]
pub struct SpecialTokenOverrides {
    pub im_start: Option<u32>,
    pub im_end: Option<u32>,
    pub newline_tokens: Option<Vec<u32>>,
}

/// `maskingStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyName {
    Reference,
    Spans,
    /// The chat template's `{% generation %}` blocks (transformers' assistant mask).
    Generation,
}

impl StrategyName {
    /// The option's value as users write it.
    pub fn name(self) -> &'static str {
        match self {
            StrategyName::Reference => "reference",
            StrategyName::Spans => "spans",
            StrategyName::Generation => "generation",
        }
    }
}

#[derive(Debug, Clone)]
pub struct DatasetConfig {
    pub max_seq_length: usize,
    pub completion_only: bool,
    pub enable_thinking: bool,
    pub seed: f64,
    pub special_token_ids: SpecialTokenOverrides,
    /// `None`: reference for ChatML tokenizers unless a spans-only setting is given.
    pub masking_strategy: Option<StrategyName>,
    pub train_on_roles: Option<Vec<String>>,
    pub train_on_turn_end: Option<bool>,
    pub reasoning: Option<Reasoning>,
    pub truncation: Truncation,
    pub drop_untrainable: bool,
    pub batching: Batching,
    /// `None`: `max_seq_length`.
    pub max_batch_tokens: Option<usize>,
    pub pad_to_multiple_of: usize,
    pub shard: Option<Shard>,
    /// `format`, `columns`, `roles`: how records are read (see `dataset_format`).
    pub input: FormatOptions,
    /// `tools`: whether each example's `tools` field reaches the template.
    pub tools: ToolsMode,
    /// `sanitizeControlTokens`: control-token strings in the data are encoded as text.
    pub sanitize_control_tokens: bool,
    /// `parseToolArguments`: tool-call arguments given as JSON strings are parsed first.
    pub parse_tool_arguments: bool,
    /// `reasoningEffort`: the template's `reasoning_effort`; `None` leaves it undefined.
    pub reasoning_effort: Option<String>,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            max_seq_length: 2048,
            completion_only: false,
            enable_thinking: false,
            seed: 42.0,
            special_token_ids: SpecialTokenOverrides::default(),
            masking_strategy: None,
            train_on_roles: None,
            train_on_turn_end: None,
            reasoning: None,
            truncation: Truncation::KeepEnd,
            drop_untrainable: false,
            batching: Batching::Reference,
            max_batch_tokens: None,
            pad_to_multiple_of: 1,
            shard: None,
            input: FormatOptions::default(),
            tools: ToolsMode::Ignore,
            sanitize_control_tokens: false,
            parse_tool_arguments: false,
            reasoning_effort: None,
        }
    }
}

impl DatasetConfig {
    /// Settings that only the spans strategy understands.
    fn spans_only_setting(&self) -> Option<&'static str> {
        if self.train_on_roles.is_some() {
            Some("trainOnRoles")
        } else if self.train_on_turn_end.is_some() {
            Some("trainOnTurnEnd")
        } else if self.reasoning.is_some() {
            Some("reasoning")
        } else {
            None
        }
    }

    /// Every setting that changes a row, as JSON: the dataset's part of a token cache key (and
    /// what `sft-dataset cache ls` shows). Destructured in full, so that a field added to the
    /// config must be placed here or on the list of those that leave rows alone. A setting
    /// that changes rows only in some modes is written only then, so that sweeping it elsewhere
    /// reuses the cached rows.
    pub fn row_settings_json(&self) -> Json {
        let DatasetConfig {
            max_seq_length,
            completion_only,
            enable_thinking,
            // Order only.
            seed: _,
            special_token_ids,
            masking_strategy,
            train_on_roles,
            train_on_turn_end,
            reasoning,
            truncation,
            drop_untrainable,
            // Which rows go together, never what a row holds.
            batching: _,
            max_batch_tokens: _,
            pad_to_multiple_of: _,
            shard: _,
            input,
            tools,
            sanitize_control_tokens,
            parse_tool_arguments,
            reasoning_effort,
        } = self;
        let mut settings = serde_json::json!({
            "format": input.format.name(),
            "columns": input.columns,
            "roles": input.roles,
            "tools": tools.name(),
            "completionOnly": completion_only,
            "enableThinking": enable_thinking,
            "specialTokenIds": {
                "imStart": special_token_ids.im_start,
                "imEnd": special_token_ids.im_end,
                "newlineTokens": special_token_ids.newline_tokens,
            },
            "maskingStrategy": masking_strategy.map(StrategyName::name),
            "trainOnRoles": train_on_roles,
            "trainOnTurnEnd": train_on_turn_end,
            "reasoning": reasoning.map(Reasoning::name),
            "truncation": truncation.name(),
            "dropUntrainable": drop_untrainable,
        });
        // Written only when on, so that the keys of caches made before the option still match.
        if *sanitize_control_tokens {
            settings["sanitizeControlTokens"] = Json::from(true);
        }
        if *parse_tool_arguments {
            settings["parseToolArguments"] = Json::from(true);
        }
        if let Some(effort) = reasoning_effort {
            settings["reasoningEffort"] = Json::from(effort.as_str());
        }
        // Rows are cut to `maxSeqLength` only when collated, except for these two.
        if *truncation == Truncation::Turns || *drop_untrainable {
            settings["maxSeqLength"] = Json::from(*max_seq_length);
        }
        settings
    }

    /// Rows can leave the dataset, so all of them are built before `length` is known.
    fn may_drop(&self) -> bool {
        self.drop_untrainable || self.truncation == Truncation::Turns
    }

    /// Batches come from a plan rather than from consecutive positions.
    pub fn uses_plan(&self) -> bool {
        self.batching != Batching::Reference || self.shard.is_some()
    }

    pub fn max_batch_tokens(&self) -> usize {
        self.max_batch_tokens.unwrap_or(self.max_seq_length)
    }

    /// The batching settings that only make sense together.
    pub fn check_batching(&self) -> SftResult<()> {
        if let Some(shard) = self.shard {
            if shard.world_size == 0 || shard.rank >= shard.world_size {
                return Err(SftError::invalid_argument(format!(
                    "shard.rank must be an integer in [0, worldSize), got rank {} of worldSize {}",
                    shard.rank, shard.world_size
                )));
            }
        }
        if self.batching == Batching::Packed && self.max_batch_tokens() < self.max_seq_length {
            return Err(SftError::invalid_argument(format!(
                "maxBatchTokens ({}) must be at least maxSeqLength ({}) with batching 'packed': every truncated row must fit in a packed row",
                self.max_batch_tokens(),
                self.max_seq_length
            )));
        }
        Ok(())
    }

    fn padding(&self, pad_id: u32) -> Padding {
        Padding {
            max_seq_len: self.max_seq_length,
            multiple: self.pad_to_multiple_of,
            pad_id,
            truncation: self.truncation,
        }
    }
}

/// The masking a dataset uses. Without `maskingStrategy`: the reference for a tokenizer with
/// the ChatML tokens, unless a spans-only setting is given; spans otherwise (where the reference
/// would fail). An explicit `'reference'` keeps the reference's error for other tokenizers and
/// rejects spans-only settings rather than ignore them.
pub fn resolve_masking(tokenizer: &ChatTokenizer, config: &DatasetConfig) -> SftResult<Masking> {
    let chatml =
        tokenizer.token_to_id(IM_START).is_some() && tokenizer.token_to_id(IM_END).is_some();
    let strategy =
        config
            .masking_strategy
            .unwrap_or(if chatml && config.spans_only_setting().is_none() {
                StrategyName::Reference
            } else {
                StrategyName::Spans
            });
    match strategy {
        StrategyName::Reference | StrategyName::Generation => {
            if let Some(name) = config.spans_only_setting() {
                return Err(SftError::new(
                    ErrorCode::InvalidArgument,
                    format!("{name} needs maskingStrategy 'spans'"),
                ));
            }
            if strategy == StrategyName::Generation {
                return Ok(Masking::Generation);
            }
            Ok(Masking::Reference(reference_markers(
                tokenizer,
                &config.special_token_ids,
            )?))
        }
        StrategyName::Spans => Ok(Masking::Spans(SpanPolicy {
            roles: config
                .train_on_roles
                .clone()
                .unwrap_or_else(|| vec!["assistant".to_string()]),
            only_last: false,
            turn_end: config.train_on_turn_end.unwrap_or(true),
            reasoning: config.reasoning.unwrap_or(Reasoning::Train),
        })),
    }
}

/// The template's end-of-turn token under the dataset's thinking setting.
pub fn turn_end_of(tokenizer: &ChatTokenizer, config: &DatasetConfig) -> Option<TurnEnd> {
    discover_turn_end(
        tokenizer,
        &RenderOptions {
            enable_thinking: Some(config.enable_thinking),
            ..Default::default()
        },
    )
}

/// The reference's special-token discovery: ChatML markers from the vocabulary (an error when
/// they are missing, overrides or not), newline ids by raw lookup, then the overrides.
pub fn reference_markers(
    tokenizer: &ChatTokenizer,
    overrides: &SpecialTokenOverrides,
) -> SftResult<ChatMlMarkers> {
    let im_start = tokenizer.token_to_id(IM_START);
    let im_end = tokenizer.token_to_id(IM_END);
    let (Some(im_start), Some(im_end)) = (im_start, im_end) else {
        let show = |id: Option<u32>| id.map_or("null".to_string(), |v| v.to_string());
        return Err(SftError::new(
            ErrorCode::UnsupportedTokenizer,
            format!(
                "Tokenizer does not have required special tokens for ChatML format. Got im_start={}, im_end={}. This tokenizer may not be compatible with ChatML format.",
                show(im_start),
                show(im_end)
            ),
        ));
    };
    let mut newlines = Vec::new();
    for candidate in ["\n", " \n", "\r\n", "\n\n"] {
        if let Some(id) = tokenizer.token_to_id(candidate) {
            if !newlines.contains(&id) {
                newlines.push(id);
            }
        }
    }
    Ok(ChatMlMarkers {
        im_start: overrides.im_start.unwrap_or(im_start),
        im_end: overrides.im_end.unwrap_or(im_end),
        assistant: tokenizer.token_to_id("assistant"),
        newlines: overrides.newline_tokens.clone().unwrap_or(newlines),
    })
}

/// A collated batch and the warnings to print for examples seen for the first time.
pub struct CollatedBatch {
    pub batch: Batch,
    pub warnings: Vec<(u32, String)>,
    /// Planned batches: the example index of each row (of a packed row, its first example).
    pub indices: Option<Vec<u32>>,
}

/// A batch whose rows are all built, laid out but not written yet: the caller writes its cells
/// wherever it wants them (`Layout::write`), or collates it into vectors.
pub struct PreparedBatch<'a> {
    pub layout: Layout<'a>,
    pub warnings: Vec<(u32, String)>,
    /// As in `CollatedBatch`.
    pub indices: Option<Vec<u32>>,
}

impl PreparedBatch<'_> {
    pub fn collate(self) -> CollatedBatch {
        CollatedBatch {
            batch: self.layout.collate(),
            warnings: self.warnings,
            indices: self.indices,
        }
    }
}

/// The order of the current epoch and what it was made from.
struct Epoch {
    order: Arc<Vec<u32>>,
    /// `None` until `shuffleForEpoch` is called.
    epoch: Option<f64>,
}

/// The last plan made: for this epoch and batch size.
struct CachedPlan {
    epoch: Arc<Epoch>,
    batch_size: usize,
    plan: Arc<Plan>,
}

/// The rows of some examples, and the build errors of those that failed (example, message).
type RowsOf<'a> = (Vec<RowView<'a>>, Vec<(u32, String)>);

pub struct Dataset {
    tokenizer: Arc<ChatTokenizer>,
    config: DatasetConfig,
    format: Format,
    masking: Masking,
    turn_end: Option<TurnEnd>,
    /// Example indices that take part in training, when some rows were dropped.
    kept: Option<Vec<u32>>,
    /// The examples as given to the constructor, each taken when its row is built; empty for a
    /// loaded dataset, whose rows were all built while the file streamed by.
    examples: Vec<Mutex<Option<Pending>>>,
    rows: RowCache,
    warned: Vec<AtomicBool>,
    epoch: RwLock<Arc<Epoch>>,
    /// Length of every example's row after truncation (0 for dropped rows and rows that fail to
    /// build), made once for the plans.
    lengths: OnceLock<Vec<u32>>,
    plan: Mutex<Option<CachedPlan>>,
    prefetch_started: AtomicBool,
    cancelled: AtomicBool,
    loss: LossChecker,
    /// The silent losses a load found (empty for datasets built from JS examples).
    losses: LossSummary,
    /// For a dataset built from JS examples: their keys, for `report()`'s repeats, and the rows
    /// repeats copy. `None` for a loaded dataset, whose loader did both.
    repeats: Option<Repeats>,
}

impl Dataset {
    /// `new SFTDataset(examples, tokenizer, config)`: the reference's checks, in its order.
    pub fn from_examples(
        examples: Vec<Json>,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
    ) -> SftResult<Self> {
        let count = examples.len();
        let mut examples = examples.into_iter();
        let mut creation = Self::begin_creation(
            examples.next().map(Pending::Json),
            count,
            tokenizer,
            config,
            false,
        )?;
        creation.add(examples.map(Pending::Json).collect())?;
        let dataset = creation.finish()?;
        Arc::try_unwrap(dataset)
            .map_err(|_| SftError::new(ErrorCode::Internal, "a dataset being created is shared"))
    }

    /// The first step of `new SFTDataset` for examples that arrive in slices (converted from JS
    /// while the first rows build): the reference's checks that need only the count, the
    /// tokenizer, the config and example 0, in its order. With `build_early`, the rows of each
    /// slice start building on other threads as it is added, unless the config needs every row
    /// before the dataset exists (plans that read lengths, dropped rows).
    pub fn begin_creation(
        first: Option<Pending>,
        count: usize,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        build_early: bool,
    ) -> SftResult<Creation> {
        let Some(first) = first else {
            return Err(SftError::new(
                ErrorCode::InvalidExample,
                "SFT dataset must contain at least one example",
            ));
        };
        config.check_batching()?;
        let masking = resolve_masking(&tokenizer, &config)?;
        let format = first.format()?;
        let rows = RowCache::lazy(count);
        let turn_end = turn_end_of(&tokenizer, &config);
        let examples = (0..count).map(|_| Mutex::new(None)).collect();
        let mut dataset =
            Self::assemble(tokenizer, config, format, masking, turn_end, examples, rows);
        dataset.repeats = Some(Repeats::new(count));
        // Plans other than the reference's read every row's length.
        let build_all = dataset.config.may_drop() || dataset.config.batching.needs_lengths();
        let mut creation = Creation {
            dataset: Arc::new(dataset),
            added: 0,
            build_early: build_early && !build_all,
            build_all,
        };
        creation.put(0, first);
        creation.added = 1;
        Ok(creation)
    }

    /// `loadSFTDataset`: streams the file, validating every record and building every row.
    pub fn load(
        path: &Path,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        options: &LoadOptions,
    ) -> SftResult<Self> {
        config.check_batching()?;
        let converter = Converter::new(config.input.clone())?;
        let masking = resolve_masking(&tokenizer, &config);
        let turn_end = turn_end_of(&tokenizer, &config);
        let checker = LossChecker::new(&tokenizer, config.tools, config.sanitize_control_tokens);
        let settings = masking.as_ref().ok().map(|m| RowSettings {
            loss: Some(&checker),
            ..row_settings(&config, m, turn_end.as_ref())
        });
        let loaded = load_rows(path, &tokenizer, settings.as_ref(), &converter, options)?;
        if loaded.rows.is_empty() {
            return Err(SftError::new(
                ErrorCode::InvalidExample,
                format!(
                    "SFT dataset must contain at least one example ({} has no records)",
                    path.display()
                ),
            ));
        }
        let masking = masking?;
        if let Some((index, other, at)) = loaded.first_inconsistent {
            return Err(
                inconsistent(loaded.format, index, other).at(&path.display().to_string(), at)
            );
        }
        let mut dataset = Self::assemble(
            tokenizer,
            config,
            loaded.format,
            masking,
            turn_end,
            Vec::new(),
            RowCache::Packed(loaded.rows),
        );
        dataset.losses = loaded.losses;
        dataset.apply_drops();
        Ok(dataset)
    }

    /// A dataset over rows a successful `load` built before (a token cache entry): nothing is
    /// read, rendered or tokenized.
    pub fn from_packed(
        rows: PackedRows,
        format: Format,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
    ) -> SftResult<Self> {
        let masking = resolve_masking(&tokenizer, &config)?;
        let turn_end = turn_end_of(&tokenizer, &config);
        let mut dataset = Self::assemble(
            tokenizer,
            config,
            format,
            masking,
            turn_end,
            Vec::new(),
            RowCache::Packed(rows),
        );
        dataset.apply_drops();
        Ok(dataset)
    }

    /// The rows of a loaded dataset (all built while the file streamed by).
    pub fn packed_rows(&self) -> Option<&PackedRows> {
        match &self.rows {
            RowCache::Packed(rows) => Some(rows),
            RowCache::Lazy { .. } => None,
        }
    }

    /// The example indices that take part in training, in example order.
    pub fn kept_examples(&self) -> Vec<u32> {
        match &self.kept {
            Some(kept) => kept.clone(),
            None => (0..self.rows.len() as u32).collect(),
        }
    }

    fn assemble(
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        format: Format,
        masking: Masking,
        turn_end: Option<TurnEnd>,
        examples: Vec<Mutex<Option<Pending>>>,
        rows: RowCache,
    ) -> Self {
        let len = rows.len();
        let loss = LossChecker::new(&tokenizer, config.tools, config.sanitize_control_tokens);
        Dataset {
            tokenizer,
            config,
            format,
            masking,
            turn_end,
            kept: None,
            examples,
            warned: (0..len).map(|_| AtomicBool::new(false)).collect(),
            rows,
            epoch: RwLock::new(Arc::new(Epoch {
                order: Arc::new((0..len as u32).collect()),
                epoch: None,
            })),
            lengths: OnceLock::new(),
            plan: Mutex::new(None),
            prefetch_started: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            loss,
            losses: LossSummary::default(),
            repeats: None,
        }
    }

    /// Dropped rows (`dropUntrainable`, `truncation: 'turns'`) leave the dataset: `length`,
    /// `numBatches`, positions and orders count only the kept examples, and orders list their
    /// original indices. A row that fails to build stays, so that its error surfaces where the
    /// reference's would.
    fn apply_drops(&mut self) {
        let rows = &self.rows;
        let dropped =
            |i: usize| matches!(rows.built(i), Some(Ok(row)) if row.stats().dropped.is_some());
        if (0..rows.len()).any(dropped) {
            let kept: Vec<u32> = (0..rows.len() as u32)
                .filter(|&i| !dropped(i as usize))
                .collect();
            self.epoch = RwLock::new(Arc::new(Epoch {
                order: Arc::new(kept.clone()),
                epoch: None,
            }));
            self.kept = Some(kept);
        }
    }

    pub fn len(&self) -> usize {
        self.kept.as_ref().map_or(self.rows.len(), Vec::len)
    }

    /// Examples given, dropped ones included.
    pub fn example_count(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn config(&self) -> &DatasetConfig {
        &self.config
    }

    /// The loader's warnings about silent losses: one line per class, with a count and the
    /// first example.
    pub fn loss_warnings(&self, file: &str) -> Vec<(&'static str, String)> {
        self.losses.warnings(file)
    }

    pub fn tokenizer(&self) -> &Arc<ChatTokenizer> {
        &self.tokenizer
    }

    pub fn shuffle_for_epoch(&self, epoch: f64) {
        let positions = epoch_order(self.len(), self.config.seed, epoch);
        let order = Arc::new(match &self.kept {
            Some(kept) => positions.iter().map(|&p| kept[p as usize]).collect(),
            None => positions,
        });
        let next = Arc::new(Epoch {
            order,
            epoch: Some(epoch),
        });
        match self.epoch.write() {
            Ok(mut guard) => *guard = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }

    fn current_epoch(&self) -> Arc<Epoch> {
        match self.epoch.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The current epoch order (positions -> example indices).
    pub fn order(&self) -> Arc<Vec<u32>> {
        self.current_epoch().order.clone()
    }

    /// Maps `collateBatch` positions to example indices under the current order; every position
    /// must be an integer in range.
    pub fn resolve_positions(&self, positions: &[f64]) -> SftResult<Vec<u32>> {
        if positions.is_empty() {
            return Err(SftError::new(
                ErrorCode::InvalidArgument,
                "collateBatch: indices must not be empty",
            ));
        }
        let order = self.order();
        positions
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                if p.fract() != 0.0 || !p.is_finite() || p < 0.0 || p >= order.len() as f64 {
                    Err(SftError::new(
                        ErrorCode::InvalidArgument,
                        format!(
                            "collateBatch: indices[{k}] = {} is not an integer in [0, {})",
                            js_number(p),
                            order.len()
                        ),
                    ))
                } else {
                    Ok(order[p as usize])
                }
            })
            .collect()
    }

    /// The row of example `index`, built now if no one has built it yet.
    pub fn row(&self, index: usize) -> Result<RowView<'_>, &SftError> {
        self.rows.get_or_build(index, || self.build(index))
    }

    /// Builds the row of example `index` for a prefetch, unless a thread is building it already.
    fn prefetch_row(&self, index: usize) {
        self.rows.build_unclaimed(index, || self.build(index));
    }

    fn build(&self, index: usize) -> SftResult<TokenizedRow> {
        let taken = self.examples.get(index).and_then(|cell| match cell.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        });
        let internal =
            |what: &str| SftError::new(ErrorCode::Internal, format!("SFT example {index} {what}"));
        let example = match taken.ok_or_else(|| internal("was not there to build its row"))? {
            Pending::Json(json) => json,
            Pending::Wire(wire, at) => wire
                .decode(&at)
                .ok_or_else(|| internal("did not decode from V8's serialization"))?,
        };
        let example = from_created(example, index, self.format)?;
        // A repeat of an example whose row is built whole is a copy of that row when neither
        // carries distillation targets (the one part of an example its key leaves out): the
        // same messages, tools and format make the same row.
        let key = self.repeats.as_ref().map(|repeats| {
            let key = duplicate_key(&example);
            repeats.note(index, key);
            key
        });
        let reusable = key.filter(|_| !example.has_distill());
        if let Some(row) = reusable.and_then(|key| self.built_copy(&key)) {
            return Ok(row);
        }
        let settings = RowSettings {
            loss: Some(&self.loss),
            ..row_settings(&self.config, &self.masking, self.turn_end.as_ref())
        };
        // A render error deep in a batch must say which example it comes from.
        let row = build_row(&self.tokenizer, &settings, example)
            .map_err(|e| e.context(format_args!("SFT example {index}")))?;
        if let (Some(repeats), Some(key)) = (&self.repeats, reusable) {
            repeats.built(index, key);
        }
        Ok(row)
    }

    /// A copy of a row built whole from an example with `key` and no distillation targets.
    fn built_copy(&self, key: &ExampleKey) -> Option<TokenizedRow> {
        let from = self.repeats.as_ref()?.source(key)?;
        match self.rows.built(from)? {
            Ok(row) => Some(row.to_row()),
            Err(_) => None,
        }
    }

    /// Collates the rows of `examples` (example indices, in batch order). The first failing
    /// example, in batch order, rejects the batch as in the reference. Rows not built yet are
    /// built on this thread while the prefetch, walking the same order, builds the others.
    pub fn collate_examples(&self, examples: &[u32]) -> SftResult<CollatedBatch> {
        self.prepare_examples(examples).map(PreparedBatch::collate)
    }

    fn prepare_examples(&self, examples: &[u32]) -> SftResult<PreparedBatch<'_>> {
        let (rows, warnings) = self.rows_of(examples)?;
        Ok(PreparedBatch {
            layout: Layout::single(&rows, &self.padding()),
            warnings,
            indices: None,
        })
    }

    /// The rows of `examples`, in order, and the warnings of those seen for the first time.
    fn rows_of(&self, examples: &[u32]) -> SftResult<RowsOf<'_>> {
        let mut rows = Vec::with_capacity(examples.len());
        for &i in examples {
            match self.row(i as usize) {
                Ok(row) => rows.push(row),
                Err(e) => return Err(e.clone()),
            }
        }
        let mut warnings = Vec::new();
        for (&i, row) in examples.iter().zip(&rows) {
            if let Some(w) = row.warning() {
                if !self.warned[i as usize].swap(true, Ordering::Relaxed) {
                    warnings.push((i, w.to_string()));
                }
            }
        }
        Ok((rows, warnings))
    }

    fn padding(&self) -> Padding {
        self.config.padding(self.tokenizer.pad_token_id())
    }

    /// `collate_examples`, prepared, if every row is built already (the collation is then only
    /// a copy), `None` otherwise.
    pub fn prepare_examples_if_built(
        &self,
        examples: &[u32],
    ) -> SftResult<Option<PreparedBatch<'_>>> {
        if !self.all_built(examples) {
            return Ok(None);
        }
        self.prepare_examples(examples).map(Some)
    }

    /// `prepare_examples_if_built` of the examples at positions `start..end` of the current
    /// order (what `batches()` asks for, with no array of positions to convert).
    pub fn prepare_range_if_built(
        &self,
        start: usize,
        end: usize,
    ) -> SftResult<Option<PreparedBatch<'_>>> {
        let order = self.order();
        self.prepare_examples_if_built(positions(&order, start, end)?)
    }

    /// Builds (or waits for) the rows at positions `start..end` of the current order, in that
    /// order, whether they build or fail: what `batches()` awaits when it reaches a batch whose
    /// rows are not built, for that batch and a few after it, so that it crosses from the JS
    /// thread and back once for several batches (each is then copied on the JS thread, and a
    /// failed row rejects its own batch there).
    pub fn await_rows(&self, start: usize, end: usize) -> SftResult<()> {
        let order = self.order();
        for &i in positions(&order, start, end)? {
            let _ = self.row(i as usize);
        }
        Ok(())
    }

    fn all_built(&self, examples: &[u32]) -> bool {
        self.rows.is_complete()
            || examples
                .iter()
                .all(|&i| self.rows.built(i as usize).is_some())
    }

    /// Batch `index` of what `batches(batch_size)` yields this epoch, with the example index of
    /// every row (of a packed row, its first example).
    pub fn epoch_batch(&self, batch_size: usize, index: usize) -> SftResult<CollatedBatch> {
        if self.config.uses_plan() {
            return self.collate_planned(batch_size, index);
        }
        let order = self.order();
        let start = (index * batch_size).min(order.len());
        let examples = &order[start..(start + batch_size).min(order.len())];
        let mut collated = self.collate_examples(examples)?;
        collated.indices = Some(examples.to_vec());
        Ok(collated)
    }

    /// Batch `index` of the current epoch's plan for `batch_size`.
    pub fn collate_planned(&self, batch_size: usize, index: usize) -> SftResult<CollatedBatch> {
        let plan = self.plan_for(batch_size)?;
        self.prepare_from_plan(&plan, batch_size, index)
            .map(PreparedBatch::collate)
    }

    /// `collate_planned`, prepared, if the plan is made and every row of the batch is built
    /// already, `None` otherwise.
    pub fn prepare_planned_if_built(
        &self,
        batch_size: usize,
        index: usize,
    ) -> SftResult<Option<PreparedBatch<'_>>> {
        if self.config.batching.needs_lengths() && self.lengths.get().is_none() {
            return Ok(None);
        }
        let plan = self.plan_for(batch_size)?;
        if index < plan.num_batches() {
            let examples: Vec<u32> = plan.batch(index).flatten().copied().collect();
            if !self.all_built(&examples) {
                return Ok(None);
            }
        }
        self.prepare_from_plan(&plan, batch_size, index).map(Some)
    }

    fn prepare_from_plan(
        &self,
        plan: &Plan,
        batch_size: usize,
        index: usize,
    ) -> SftResult<PreparedBatch<'_>> {
        if index >= plan.num_batches() {
            return Err(SftError::invalid_argument(format!(
                "batch {index} is out of range: the epoch has {} batches of {batch_size}",
                plan.num_batches()
            )));
        }
        let rows: Vec<&[u32]> = plan.batch(index).collect();
        let indices = rows.iter().map(|r| r[0]).collect();
        let examples: Vec<u32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        let (views, warnings) = self.rows_of(&examples)?;
        let layout = if self.config.batching == Batching::Packed {
            let mut views = examples.iter().copied().zip(views);
            let packed: Vec<Vec<_>> = rows
                .iter()
                .map(|r| views.by_ref().take(r.len()).collect())
                .collect();
            Layout::packed(&packed, &self.padding())
        } else {
            Layout::single(&views, &self.padding())
        };
        Ok(PreparedBatch {
            layout,
            warnings,
            indices: Some(indices),
        })
    }

    /// The length of every example's row after truncation, building the rows not built yet.
    /// Length of every example's row after truncation (0 for dropped rows and rows that fail
    /// to build); builds every row the first time.
    pub fn lengths(&self) -> &[u32] {
        self.lengths.get_or_init(|| {
            (0..self.rows.len())
                .into_par_iter()
                .map(|i| match self.row(i) {
                    Ok(row) if row.stats().dropped.is_none() => kept_window(
                        row.ids.len(),
                        self.config.max_seq_length,
                        self.config.truncation,
                    )
                    .len() as u32,
                    _ => 0,
                })
                .collect()
        })
    }

    fn plan_settings(&self, batching: Batching, batch_size: usize) -> SftResult<PlanSettings> {
        if let Some(shard) = self.config.shard {
            if !batch_size.is_multiple_of(shard.world_size) {
                return Err(SftError::invalid_argument(format!(
                    "batchSize ({batch_size}) must be a multiple of shard.worldSize ({})",
                    shard.world_size
                )));
            }
        }
        Ok(PlanSettings {
            batching,
            batch_size,
            max_batch_tokens: self.config.max_batch_tokens(),
            pad_to_multiple_of: self.config.pad_to_multiple_of,
            shard: self.config.shard,
        })
    }

    /// The plan of the current epoch for `batch_size`, made once per epoch and batch size.
    pub fn plan_for(&self, batch_size: usize) -> SftResult<Arc<Plan>> {
        let settings = self.plan_settings(self.config.batching, batch_size)?;
        let epoch = self.current_epoch();
        let mut cached = match self.plan.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(c) = cached.as_ref() {
            if Arc::ptr_eq(&c.epoch, &epoch) && c.batch_size == batch_size {
                return Ok(c.plan.clone());
            }
        }
        let lengths = if settings.batching.needs_lengths() {
            self.lengths()
        } else {
            &[]
        };
        let made = Arc::new(plan(
            &epoch.order,
            lengths,
            plan_key(self.config.seed, epoch.epoch),
            &settings,
        ));
        *cached = Some(CachedPlan {
            epoch,
            batch_size,
            plan: made.clone(),
        });
        Ok(made)
    }

    /// What one epoch (the current order, all ranks together) costs under every strategy, with
    /// this dataset's settings or the given `max_batch_tokens` / `pad_to_multiple_of`. A
    /// strategy those settings do not allow (packing rows into fewer tokens than
    /// `maxSeqLength`) is left out.
    pub fn batching_costs(
        &self,
        batch_size: usize,
        max_batch_tokens: Option<usize>,
        pad_to_multiple_of: Option<usize>,
    ) -> Vec<(Batching, PlanCost)> {
        let base = DatasetConfig {
            max_batch_tokens: max_batch_tokens.or(self.config.max_batch_tokens),
            pad_to_multiple_of: pad_to_multiple_of.unwrap_or(self.config.pad_to_multiple_of),
            shard: None,
            ..self.config.clone()
        };
        let lengths = self.lengths();
        let epoch = self.current_epoch();
        let key = plan_key(base.seed, epoch.epoch);
        Batching::ALL
            .into_iter()
            .filter_map(|batching| {
                let config = DatasetConfig {
                    batching,
                    ..base.clone()
                };
                config.check_batching().ok()?;
                let settings = PlanSettings {
                    batching,
                    batch_size,
                    max_batch_tokens: config.max_batch_tokens(),
                    pad_to_multiple_of: config.pad_to_multiple_of,
                    shard: None,
                };
                let made = plan(&epoch.order, lengths, key, &settings);
                Some((
                    batching,
                    plan_cost(&made, lengths, config.pad_to_multiple_of),
                ))
            })
            .collect()
    }

    /// Builds, on other threads, every row not built yet, in the current epoch order, so that
    /// the batches a trainer asks for next are ready. Runs once per dataset.
    pub fn start_prefetch(self: &Arc<Self>) {
        if self.rows.is_complete() || self.prefetch_started.swap(true, Ordering::AcqRel) {
            return;
        }
        self.spawn_rows(self.order().to_vec());
    }

    /// Stops a running prefetch (the JS object is being collected).
    pub fn cancel_prefetch(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Builds the rows of `indices` on other threads, in that order, a chunk at a time; chunks
    /// keep the walk close to that order and let other rayon work in between.
    fn spawn_rows(self: &Arc<Self>, indices: Vec<u32>) {
        let weak = Arc::downgrade(self);
        rayon::spawn(move || {
            for chunk in indices.chunks(PREFETCH_CHUNK) {
                let Some(dataset) = weak.upgrade() else {
                    return;
                };
                if dataset.cancelled.load(Ordering::Relaxed) {
                    return;
                }
                chunk
                    .par_iter()
                    .with_max_len(PARALLEL_GRAIN)
                    .for_each(|&i| dataset.prefetch_row(i as usize));
            }
        });
    }

    /// Exactly how many batches `batches(batch_size)` yields this epoch (on this rank).
    pub fn num_batches(&self, batch_size: usize) -> SftResult<usize> {
        if self.config.uses_plan() {
            Ok(self.plan_for(batch_size)?.num_batches())
        } else {
            Ok(self.len().div_ceil(batch_size))
        }
    }

    /// What every row holds and what happened to it; builds the rows not built yet, on all
    /// cores. The first row that fails to build fails the report.
    pub fn report(&self) -> SftResult<DatasetReport> {
        let mut examples = (0..self.rows.len())
            .into_par_iter()
            .map(|i| {
                self.row(i).map_err(Clone::clone).map(|row| {
                    example_report(
                        row,
                        self.config.max_seq_length,
                        self.config.truncation,
                        self.turn_end.as_ref().map(|t| t.id),
                        self.tokenizer.bos_token_id(),
                    )
                })
            })
            .collect::<SftResult<Vec<_>>>()?;
        if let Some(repeats) = &self.repeats {
            for (example, repeated) in examples.iter_mut().zip(repeats.repeated()) {
                if repeated {
                    example.losses |= LossKind::DuplicateExample.bit();
                }
            }
        }
        Ok(DatasetReport::new(
            examples,
            self.turn_end.as_ref().map(|t| t.text.clone()),
        ))
    }
}

/// The examples at positions `start..end` of `order`, a non-empty range of it.
fn positions(order: &[u32], start: usize, end: usize) -> SftResult<&[u32]> {
    if start >= end || end > order.len() {
        return Err(SftError::new(
            ErrorCode::InvalidArgument,
            format!(
                "positions {start}..{end} are not a non-empty range of [0, {})",
                order.len()
            ),
        ));
    }
    Ok(&order[start..end])
}

/// An example of a dataset being created, until its row is built: JSON, or where to decode it
/// from in V8's serialization of its slice of the examples (`input::v8_wire`), on the thread
/// that builds it.
pub enum Pending {
    Json(Json),
    Wire(Arc<WireExamples>, WireExample),
}

impl Pending {
    fn format(&self) -> SftResult<Format> {
        match self {
            Pending::Json(json) => detect_format(json),
            Pending::Wire(_, at) => format_from_keys(|key| at.has_key(key)),
        }
    }
}

/// A dataset whose examples are still arriving (`Dataset::begin_creation`). Dropped before
/// `finish`, it stops building the rows it started.
pub struct Creation {
    dataset: Arc<Dataset>,
    added: usize,
    build_early: bool,
    /// Every row is built before the dataset exists (dropped rows, plans by length).
    build_all: bool,
}

impl Creation {
    fn put(&mut self, index: usize, example: Pending) {
        if let Some(cell) = self.dataset.examples.get(index) {
            match cell.lock() {
                Ok(mut guard) => *guard = Some(example),
                Err(poisoned) => *poisoned.into_inner() = Some(example),
            }
        }
    }

    /// The next examples, in order: each must have example 0's format (the reference's check,
    /// first failure first). With early building, their rows start building now.
    pub fn add(&mut self, examples: Vec<Pending>) -> SftResult<()> {
        let start = self.added;
        let format = self.dataset.format;
        for (k, example) in examples.into_iter().enumerate() {
            let other = example.format()?;
            if other != format {
                return Err(inconsistent(format, start + k, other));
            }
            self.put(start + k, example);
            self.added += 1;
        }
        if self.build_early {
            // Example 0 waited for the second slice, to start with a chunk of work.
            let from = if start == 1 { 0 } else { start };
            self.dataset
                .spawn_rows((from as u32..self.added as u32).collect());
        }
        Ok(())
    }

    /// The dataset, once every example was added.
    pub fn finish(mut self) -> SftResult<Arc<Dataset>> {
        if self.added != self.dataset.examples.len() {
            return Err(SftError::new(
                ErrorCode::Internal,
                format!(
                    "{} of {} examples were added",
                    self.added,
                    self.dataset.examples.len()
                ),
            ));
        }
        if self.build_early {
            if self.added == 1 {
                self.dataset.spawn_rows(vec![0]);
            }
            self.dataset.prefetch_started.store(true, Ordering::Release);
        } else if self.build_all {
            let dataset = &self.dataset;
            (0..dataset.rows.len()).into_par_iter().for_each(|i| {
                let _ = dataset.row(i);
            });
            match Arc::get_mut(&mut self.dataset) {
                Some(dataset) => dataset.apply_drops(),
                None => {
                    return Err(SftError::new(
                        ErrorCode::Internal,
                        "a dataset being created is shared",
                    ))
                }
            }
        }
        let dataset = self.dataset.clone();
        self.added = usize::MAX;
        Ok(dataset)
    }
}

impl Drop for Creation {
    fn drop(&mut self) {
        if self.added != usize::MAX {
            self.dataset.cancel_prefetch();
        }
    }
}

pub fn row_settings<'a>(
    config: &'a DatasetConfig,
    masking: &'a Masking,
    turn_end: Option<&'a TurnEnd>,
) -> RowSettings<'a> {
    RowSettings {
        completion_only: config.completion_only,
        enable_thinking: config.enable_thinking,
        masking,
        turn_end,
        max_seq_length: config.max_seq_length,
        truncation: config.truncation,
        drop_untrainable: config.drop_untrainable,
        tools: config.tools,
        sanitize: config.sanitize_control_tokens,
        parse_tool_arguments: config.parse_tool_arguments,
        reasoning_effort: config.reasoning_effort.as_deref(),
        loss: None,
    }
}

fn inconsistent(format: Format, index: usize, other: Format) -> SftError {
    SftError::new(
        ErrorCode::InvalidExample,
        format!(
            "Inconsistent SFT data format: example 0 is {}, example {index} is {}",
            format.name(),
            other.name()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Conversations cycling over a few distinct ones, some with tools (ignored: a silent loss),
    /// some with distillation targets (never copied, never a source); one conversation carries
    /// the targets only in some of its repeats.
    fn examples(distilled: bool) -> Vec<Json> {
        (0..120)
            .map(|i| {
                let v = (i * 7) % 13;
                let mut example = json!({"messages": [
                    {"role": "user", "content": format!("hello {v}")},
                    {"role": "assistant", "content": format!("hi {v}")}]});
                if v == 5 {
                    example["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
                }
                // Targets that do not fit the row: its build fails (no report then).
                if distilled && v == 8 && i % 2 == 0 {
                    example["distill"] = json!({"tokenIds": [[1]], "logprobs": [[0.0]]});
                }
                example
            })
            .collect()
    }

    #[test]
    fn awaiting_rows_builds_them_in_the_epoch_order_failed_or_not() {
        let tokenizer = crate::test_support::load_family("qwen3");
        // Example 8 of these has targets that do not fit its row: its build fails.
        let examples = examples(true);
        let dataset =
            Dataset::from_examples(examples, Arc::new(tokenizer), DatasetConfig::default())
                .unwrap();
        dataset.shuffle_for_epoch(1.0);
        let order = dataset.order().to_vec();
        let built = |p: usize| dataset.rows.built(order[p] as usize).map(|r| r.is_ok());
        let fails = |p: usize| order[p].is_multiple_of(2) && (order[p] * 7) % 13 == 8;
        assert_eq!(built(0), None);
        dataset.await_rows(3, 40).unwrap();
        assert_eq!((built(2), built(40)), (None, None));
        for p in 3..40 {
            assert_eq!(built(p), Some(!fails(p)), "position {p}");
        }
        assert!((3..40).any(fails));
        // Each built row is the row a batch of that position gets.
        let batch = dataset.collate_examples(&[order[3], order[4]]).unwrap();
        assert_eq!(batch.batch.rows, 2);
        for (start, end) in [(5, 5), (40, 121), (0, 121)] {
            let e = dataset.await_rows(start, end).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument);
            assert_eq!(
                e.message,
                format!("positions {start}..{end} are not a non-empty range of [0, 120)")
            );
        }
    }

    #[test]
    fn a_created_repeat_gets_the_row_its_own_build_would_give_and_is_reported() {
        let tokenizer = crate::test_support::load_family("qwen3");
        let tokenizer = Arc::new(tokenizer);
        let config = DatasetConfig {
            completion_only: true,
            ..Default::default()
        };
        for distilled in [true, false] {
            let examples = examples(distilled);
            // Its own build, in a dataset of its own (an error then names example 0).
            let own = |i: usize| {
                let alone = vec![examples[i].clone()];
                let dataset = Dataset::from_examples(alone, tokenizer.clone(), config.clone());
                let dataset = dataset.unwrap();
                dataset.row(0).map(|row| row.to_row()).map_err(|e| e.code)
            };
            // Rows built in another order than the examples', on several threads: which
            // example of a key is built first, and so which one the others copy, changes from
            // run to run.
            for threads in [1, 2, 8] {
                let dataset =
                    Dataset::from_examples(examples.clone(), tokenizer.clone(), config.clone())
                        .unwrap();
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    (0..examples.len()).into_par_iter().rev().for_each(|i| {
                        let _ = dataset.row(i);
                    })
                });
                for i in 0..examples.len() {
                    let got = dataset.row(i).map(|row| row.to_row());
                    if let Err(e) = &got {
                        assert!(e.message.starts_with(&format!("SFT example {i}:")), "{e:?}");
                    }
                    assert_eq!(
                        got.map_err(|e| e.code),
                        own(i),
                        "example {i}, {threads} threads"
                    );
                }
                if distilled {
                    assert!(dataset.report().is_err());
                    continue;
                }
                let report = dataset.report().unwrap();
                let mut seen = std::collections::HashSet::new();
                for (i, example) in report.examples.iter().enumerate() {
                    let v = (i * 7) % 13;
                    let repeat = !seen.insert(v);
                    let bit = LossKind::DuplicateExample.bit();
                    assert_eq!(example.losses & bit != 0, repeat, "example {i}");
                    let tools = LossKind::ToolsIgnored.bit();
                    assert_eq!(example.losses & tools != 0, v == 5, "example {i}");
                }
                assert_eq!(report.totals.losses[3], 120 - 13);
            }
        }
    }
}
