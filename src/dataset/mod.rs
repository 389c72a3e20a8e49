//! Stage 8, the dataset: examples in (from JS or a file, `loader`), rows built on all cores,
//! batches out in epoch order; `report` and `validate` say what a file's rows hold and lack.
//!
//! The SFT dataset: examples, their cached rows, the epoch order and batch collation.
//!
//! Each example is rendered and tokenized at most once per dataset. Rows live in `OnceLock`s, so
//! a background prefetch and a `collateBatch` that needs the same example never both compute it:
//! the second waits for the first.

mod batches;
mod config;
mod creation;
pub mod foreign;
pub mod loader;
#[cfg(test)]
mod loader_tests;
pub mod mixture;
mod read_back;
pub mod report;
mod row_sink;
pub mod split;
pub mod summary;
pub mod validate;

use batches::CachedPlan;
pub use batches::{CollatedBatch, PreparedBatch};
pub use config::{
    reference_markers, resolve_masking, row_settings, turn_end_of, DatasetConfig,
    SpecialTokenOverrides, StrategyName,
};
pub use creation::{Creation, DeferredExample, Pending};
pub use row_sink::{LoadMemory, DEFAULT_MEMORY_BUDGET};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use rayon::prelude::*;

use crate::batch::shuffle::epoch_order;
use crate::dataset::report::{example_report, DatasetReport, ExampleReport};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::example::{from_created, Format};
use crate::mask::silent_loss::{duplicate_key, ExampleKey, LossChecker, LossKind, LossSummary};
use crate::mask::spans::TurnEnd;
use crate::rows::packed_rows::{PackedRows, RowBytes};
use crate::rows::repeats::Repeats;
use crate::rows::row_cache::RowCache;
use crate::rows::{build_row, DropReason, Masking, RowSettings, RowView, TokenizedRow};
use crate::tokenize::foreign::RowTokenizer;
use crate::tokenize::ChatTokenizer;

const PREFETCH_CHUNK: usize = 64;

/// The order of the current epoch and what it was made from.
struct Epoch {
    order: Arc<Vec<u32>>,
    /// `None` until `shuffleForEpoch` is called.
    epoch: Option<f64>,
}

pub struct Dataset {
    tokenizer: RowTokenizer,
    config: DatasetConfig,
    format: Format,
    masking: Masking,
    turn_end: Option<TurnEnd>,
    /// Example indices that take part in training, when some rows were dropped (or the dataset
    /// is one part of a `split`).
    kept: Option<Vec<u32>>,
    /// For one part of a `split`: the examples it holds, in example order; the others are
    /// reported as left out. The rows, examples and keys below are shared with the other part.
    part: Option<Arc<Vec<u32>>>,
    /// The examples as given to the constructor, each taken when its row is built; empty for a
    /// loaded dataset, whose rows were all built while the file streamed by.
    examples: Arc<Vec<Mutex<Option<Pending>>>>,
    rows: Arc<RowCache>,
    warned: Arc<Vec<AtomicBool>>,
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
    repeats: Option<Arc<Repeats>>,
    /// How a load held its rows; `None` for a dataset made from examples.
    load_memory: Option<LoadMemory>,
    /// For a dataset of several files: the sources and their weights, which make each epoch's
    /// examples.
    mixture: Option<Arc<mixture::Mixture>>,
}

impl Dataset {
    /// The rows of a loaded dataset (all built while the file streamed by).
    pub fn packed_rows(&self) -> Option<&PackedRows> {
        match &*self.rows {
            RowCache::Packed(rows) => Some(rows),
            RowCache::Lazy { .. } => None,
        }
    }

    /// What the rows take, in memory and mapped, and how the load that built them held them.
    pub fn row_memory(&self) -> (RowBytes, Option<LoadMemory>) {
        (self.rows.bytes(), self.load_memory)
    }

    /// Records how the rows were held: a dataset over rows a token cache entry holds gets the
    /// budget of the load that mapped them, no rows having been built.
    pub fn set_load_memory(&mut self, memory: LoadMemory) {
        self.load_memory = Some(memory);
    }

    /// The example indices that take part in training, in example order.
    pub fn kept_examples(&self) -> Vec<u32> {
        match &self.kept {
            Some(kept) => kept.clone(),
            None => (0..self.rows.len() as u32).collect(),
        }
    }

    /// Examples per epoch: the kept ones, or for a mix its sources' repeats and draws.
    pub fn len(&self) -> usize {
        if self.mixture.is_some() {
            return self.current_epoch().order.len();
        }
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
        let mut warnings = self.losses.warnings(file);
        let failed = if self.config.drop_unrenderable {
            self.unrenderable()
        } else {
            Vec::new()
        };
        let duplicates = self.duplicates().into_iter().filter(|d| *d).count();
        if duplicates > 0 {
            warnings.push((
                "DROPPED_DUPLICATES",
                format!(
                    "[SFT Dataset] DROPPED_DUPLICATES: {duplicates} exact cop{} of earlier examples in {file} {} left out (dropDuplicates); the first of each stays",
                    if duplicates == 1 { "y" } else { "ies" },
                    if duplicates == 1 { "is" } else { "are" },
                ),
            ));
        }
        if let Some((first, error)) = failed.first() {
            let n = failed.len();
            warnings.push((
                "DROPPED_UNRENDERABLE",
                format!(
                    "[SFT Dataset] DROPPED_UNRENDERABLE: {n} example{} of {file} fail{} to render and {} left out (dropUnrenderable), the first is example {first}: {}",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "s" } else { "" },
                    if n == 1 { "is" } else { "are" },
                    error.message
                ),
            ));
        }
        warnings
    }

    /// This crate's tokenizer; `None` when rows come from a foreign one.
    pub fn tokenizer(&self) -> Option<&Arc<ChatTokenizer>> {
        self.tokenizer.ours()
    }

    pub fn shuffle_for_epoch(&self, epoch: f64) {
        let members = self
            .mixture
            .as_ref()
            .map(|m| m.epoch_members(&self.kept_examples(), self.config.seed, epoch));
        let len = members.as_ref().map_or(self.len(), Vec::len);
        let positions = epoch_order(len, self.config.seed, epoch);
        let order = Arc::new(match members.as_ref().or(self.kept.as_ref()) {
            Some(members) => positions.iter().map(|&p| members[p as usize]).collect(),
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
        let Some(tokenizer) = self.tokenizer.ours() else {
            return Err(SftError::invalid_argument(format!(
                "SFT example {index} has no row yet: the dataset's tokenizer renders through its own asynchronous applyChatTemplate; await dataset.ready() before a synchronous call that needs the rows"
            )));
        };
        let taken = self.examples.get(index).and_then(|cell| match cell.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        });
        let internal =
            |what: &str| SftError::new(ErrorCode::Internal, format!("SFT example {index} {what}"));
        let example = match taken.ok_or_else(|| internal("was not there to build its row"))? {
            Pending::Json(json) => json,
            Pending::Deferred(example) => example
                .decode()
                .ok_or_else(|| internal("did not decode from its deferred form"))?,
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
        let row = build_row(tokenizer, &settings, example)
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

    /// Builds the rows of `indices` on other threads, in that order: one job a chunk, each
    /// building its rows one after the other. A job never waits for other jobs (no parallel
    /// loop inside), so a thread that takes one while it waits for its own work nests one job
    /// on its stack, not a chain of them: a process that makes hundreds of datasets at once
    /// overflowed the rayon threads' stacks when each chunk was a parallel loop.
    fn spawn_rows(self: &Arc<Self>, indices: Vec<u32>) {
        let indices = Arc::new(indices);
        for start in (0..indices.len()).step_by(PREFETCH_CHUNK) {
            let (weak, indices) = (Arc::downgrade(self), indices.clone());
            rayon::spawn(move || {
                let Some(dataset) = weak.upgrade() else {
                    return;
                };
                let end = (start + PREFETCH_CHUNK).min(indices.len());
                for &i in &indices[start..end] {
                    if dataset.cancelled.load(Ordering::Relaxed) {
                        return;
                    }
                    dataset.prefetch_row(i as usize);
                }
            });
        }
    }

    /// What every row holds and what happened to it; builds the rows not built yet, on all
    /// cores. A row that fails to build is listed with its error.
    pub fn report(&self) -> SftResult<DatasetReport> {
        if self.awaits_foreign_rows() {
            // The first row tells why (the renders have not arrived).
            self.row(0).map_err(Clone::clone)?;
        }
        let mut examples = (0..self.rows.len())
            .into_par_iter()
            .map(|i| match self.row(i) {
                Ok(row) => Ok(example_report(
                    row,
                    self.config.max_seq_length,
                    self.config.truncation,
                    self.turn_end.as_ref().map(|t| t.id),
                    self.tokenizer.bos_token_id(),
                )),
                Err(e) => Ok(ExampleReport::unrenderable(
                    e,
                    self.config.drop_unrenderable,
                )),
            })
            .collect::<SftResult<Vec<_>>>()?;
        if let Some(repeats) = &self.repeats {
            for (example, repeated) in examples.iter_mut().zip(repeats.repeated()) {
                if repeated {
                    example.losses |= LossKind::DuplicateExample.bit();
                }
            }
        }
        for (example, duplicate) in examples.iter_mut().zip(self.duplicates()) {
            if duplicate && example.dropped.is_none() && example.render_error.is_none() {
                example.dropped = Some(DropReason::Duplicate);
                example.kept_tokens = 0;
                example.trained_tokens = 0;
            }
        }
        if let Some(part) = &self.part {
            split::mark_other_part(&mut examples, part);
        }
        let mut report =
            DatasetReport::new(examples, self.turn_end.as_ref().map(|t| t.text.clone()));
        report.sources = self.source_reports(&report.examples);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value as Json};

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
                    // Rows that fail to build are listed with their errors.
                    let report = dataset.report().unwrap();
                    assert!(report.examples.iter().any(|e| e.render_error.is_some()));
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
