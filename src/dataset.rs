//! The SFT dataset: examples, their cached rows, the epoch order and batch collation.
//!
//! Each example is rendered and tokenized at most once per dataset. Rows live in `OnceLock`s, so
//! a background prefetch and a `collateBatch` that needs the same example never both compute it:
//! the second waits for the first.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::chat_template::RenderOptions;
use crate::collate::{collate, Batch, Truncation};
use crate::dataset_format::{Converter, FormatOptions};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::example::{detect_format, from_created, Format};
use crate::loader::{load_rows, LoadOptions};
use crate::masking::{ChatMlMarkers, Reasoning, SpanPolicy};
use crate::report::{example_report, DatasetReport};
use crate::row::{build_row, Masking, RowSettings, RowView, TokenizedRow, ToolsMode};
use crate::row_cache::RowCache;
use crate::shuffle::epoch_order;
use crate::silent_loss::{LossChecker, LossSummary};
use crate::spans::{discover_turn_end, TurnEnd};
use crate::tokenizer::{ChatTokenizer, IM_END, IM_START};

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
    /// `format`, `columns`, `roles`: how records are read (see `dataset_format`).
    pub input: FormatOptions,
    /// `tools`: whether each example's `tools` field reaches the template.
    pub tools: ToolsMode,
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
            input: FormatOptions::default(),
            tools: ToolsMode::Ignore,
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

    /// Rows can leave the dataset, so all of them are built before `length` is known.
    fn may_drop(&self) -> bool {
        self.drop_untrainable || self.truncation == Truncation::Turns
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
        StrategyName::Reference => {
            if let Some(name) = config.spans_only_setting() {
                return Err(SftError::new(
                    ErrorCode::InvalidArgument,
                    format!("{name} needs maskingStrategy 'spans'"),
                ));
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
}

pub struct Dataset {
    tokenizer: Arc<ChatTokenizer>,
    config: DatasetConfig,
    format: Format,
    masking: Masking,
    turn_end: Option<TurnEnd>,
    /// Example indices that take part in training, when some rows were dropped.
    kept: Option<Vec<u32>>,
    /// The examples as given to the constructor; empty for a loaded dataset, whose rows were all
    /// built while the file streamed by.
    examples: Vec<Json>,
    rows: RowCache,
    warned: Vec<AtomicBool>,
    order: RwLock<Arc<Vec<u32>>>,
    prefetch_started: AtomicBool,
    cancelled: AtomicBool,
    loss: LossChecker,
    /// The silent losses a load found (empty for datasets built from JS examples).
    losses: LossSummary,
}

impl Dataset {
    /// `new SFTDataset(examples, tokenizer, config)`: the reference's checks, in its order.
    pub fn from_examples(
        examples: Vec<Json>,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
    ) -> SftResult<Self> {
        if examples.is_empty() {
            return Err(SftError::new(
                ErrorCode::InvalidExample,
                "SFT dataset must contain at least one example",
            ));
        }
        let masking = resolve_masking(&tokenizer, &config)?;
        let format = detect_format(&examples[0])?;
        for (i, example) in examples.iter().enumerate().skip(1) {
            let other = detect_format(example)?;
            if other != format {
                return Err(inconsistent(format, i, other));
            }
        }
        let rows = RowCache::lazy(examples.len());
        let turn_end = turn_end_of(&tokenizer, &config);
        let mut dataset =
            Self::assemble(tokenizer, config, format, masking, turn_end, examples, rows);
        if dataset.config.may_drop() {
            (0..dataset.rows.len()).into_par_iter().for_each(|i| {
                let _ = dataset.row(i);
            });
            dataset.apply_drops();
        }
        Ok(dataset)
    }

    /// `loadSFTDataset`: streams the file, validating every record and building every row.
    pub fn load(
        path: &Path,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        options: &LoadOptions,
    ) -> SftResult<Self> {
        let converter = Converter::new(config.input.clone())?;
        let masking = resolve_masking(&tokenizer, &config);
        let turn_end = turn_end_of(&tokenizer, &config);
        let checker = LossChecker::new(&tokenizer, config.tools);
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

    fn assemble(
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        format: Format,
        masking: Masking,
        turn_end: Option<TurnEnd>,
        examples: Vec<Json>,
        rows: RowCache,
    ) -> Self {
        let len = rows.len();
        let loss = LossChecker::new(&tokenizer, config.tools);
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
            order: RwLock::new(Arc::new((0..len as u32).collect())),
            prefetch_started: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            loss,
            losses: LossSummary::default(),
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
            self.order = RwLock::new(Arc::new(kept.clone()));
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
        match self.order.write() {
            Ok(mut guard) => *guard = order,
            Err(poisoned) => *poisoned.into_inner() = order,
        }
    }

    /// The current epoch order (positions -> example indices).
    pub fn order(&self) -> Arc<Vec<u32>> {
        match self.order.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
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

    fn build(&self, index: usize) -> SftResult<TokenizedRow> {
        let example = from_created(&self.examples[index], index, self.format)?;
        let settings = RowSettings {
            loss: Some(&self.loss),
            ..row_settings(&self.config, &self.masking, self.turn_end.as_ref())
        };
        // A render error deep in a batch must say which example it comes from.
        build_row(&self.tokenizer, &settings, example)
            .map_err(|e| e.context(format_args!("SFT example {index}")))
    }

    /// Collates the rows of `examples` (example indices, in batch order). The first failing
    /// example, in batch order, rejects the batch as in the reference. Rows not built yet are
    /// built on this thread while the prefetch, walking the same order, builds the others.
    pub fn collate_examples(&self, examples: &[u32]) -> SftResult<CollatedBatch> {
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
        let batch = collate(
            &rows,
            self.config.max_seq_length,
            self.tokenizer.pad_token_id(),
            self.config.truncation,
        );
        Ok(CollatedBatch { batch, warnings })
    }

    /// Builds, on other threads, every row not built yet, in the current epoch order, so that
    /// the batches a trainer asks for next are ready. Runs once per dataset.
    pub fn start_prefetch(self: &Arc<Self>) {
        if self.rows.is_complete() || self.prefetch_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let order = self.order();
        // Chunks keep the walk close to epoch order and let other rayon work in between.
        rayon::spawn(move || {
            for chunk in order.chunks(PREFETCH_CHUNK) {
                let Some(dataset) = weak.upgrade() else {
                    return;
                };
                if dataset.cancelled.load(Ordering::Relaxed) {
                    return;
                }
                chunk.par_iter().for_each(|&i| {
                    let _ = dataset.row(i as usize);
                });
            }
        });
    }

    /// Stops a running prefetch (the JS object is being collected).
    pub fn cancel_prefetch(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub fn num_batches(&self, batch_size: usize) -> usize {
        self.len().div_ceil(batch_size)
    }

    /// What every row holds and what happened to it; builds the rows not built yet, on all
    /// cores. The first row that fails to build fails the report.
    pub fn report(&self) -> SftResult<DatasetReport> {
        let examples = (0..self.rows.len())
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
        Ok(DatasetReport::new(
            examples,
            self.turn_end.as_ref().map(|t| t.text.clone()),
        ))
    }
}

pub fn row_settings<'a>(
    config: &DatasetConfig,
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
