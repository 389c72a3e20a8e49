//! `SFTDataset`, `createSFTDataset` and `loadSFTDataset` over `dataset::Dataset`.

use std::path::Path;
use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Int32Array, Uint32Array, Unknown};
use napi::Env;
use napi_derive::napi;

use super::batches::{finish_batch, position, write_batch, SftBatch};
use super::config::{core_config_of, positive_int, SftDatasetConfig, TokenCacheUse};
use super::create::ExampleSlices;
use super::error::{run_sync, typed_arg, JsResult as Result};
use super::mix::{source_infos, SourceInfo};
use super::report::{report_to_js, stats_to_js, BatchingStatsJs, DatasetReportJs};
use super::task::{job, Job};
use super::tokenizer::tokenizer_arg;
use crate::batch::plan::{Batching, PlanCost};
use crate::dataset::report::DatasetReport;
use crate::dataset::split::TestSize;
use crate::dataset::{CollatedBatch, Dataset};
use crate::error::{js_number, SftError, SftResult};
use crate::mask::write_labels;
use crate::store::export::{write_parquet, write_parquet_batches, ExportSummary};
/// Every strategy's cost for one epoch, side by side.
type StrategyCosts = Vec<(Batching, PlanCost)>;

/// Options of `exportParquet`.
#[napi(object, js_name = "ExportOptions")]
pub struct ExportOptions {
    /// Write the current epoch's batches of this many rows instead of one record per example.
    pub batch_size: Option<f64>,
}

/// Options of `split`.
#[napi(object, js_name = "SplitOptions")]
pub struct SplitOptions {
    /// The test part: a fraction in (0, 1) of the examples that take part in training (rounded
    /// to the nearest count), or a positive integer count. Each part keeps at least one.
    pub test: f64,
    /// Which examples are held out, with the same data giving the same parts in every process.
    /// Default: the dataset's `seed`.
    pub seed: Option<f64>,
}

/// Overrides for `batchingStats`; absent fields take the dataset's settings.
#[napi(object, js_name = "BatchingStatsOptions")]
pub struct BatchingStatsOptions {
    pub max_batch_tokens: Option<f64>,
    pub pad_to_multiple_of: Option<f64>,
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

pub(crate) fn batch_index(value: f64) -> SftResult<usize> {
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

/// What `exportParquet` wrote.
#[napi(object)]
pub struct ParquetExport {
    pub file: String,
    /// Records written: the examples that take part in training.
    pub rows: f64,
    pub tokens: f64,
    pub trained_tokens: f64,
}

/// Where a dataset's token rows live (`SFTDataset.memory`).
#[napi(object)]
pub struct RowMemory {
    /// `'mapped'`: read in place from a mapped file (a token cache entry, or the rows of a load
    /// beyond its `memoryBudget`), paged in as batches read them and shared with other processes
    /// mapping the same entry. `'memory'`: in the process's own memory.
    #[napi(ts_type = "'memory' | 'mapped'")]
    pub rows: String,
    /// Bytes of rows (token ids, trained ranges, their offsets, rare rows) in the process's own
    /// memory: those built so far for a dataset made from examples.
    pub resident_bytes: f64,
    /// Bytes of rows in the mapped file.
    pub mapped_bytes: f64,
    /// The `memoryBudget` of the load; absent for a dataset made from examples.
    pub budget: Option<f64>,
    /// The most bytes of rows the load held in memory at once (0 for a token cache hit, which
    /// builds none); absent for a dataset made from examples.
    pub peak_bytes: Option<f64>,
}

#[napi(js_name = "SFTDataset")]
pub struct JsSftDataset {
    pub(crate) inner: Arc<Dataset>,
    pub(crate) cache: Option<TokenCacheUse>,
    /// The data file of a loaded dataset (`summary()` reads it back).
    pub(crate) source: Option<std::path::PathBuf>,
    /// How the token cache served each source of a mix (empty for other datasets).
    pub(crate) source_caches: Vec<Option<TokenCacheUse>>,
}

impl JsSftDataset {
    /// A dataset made here or over another library's tokenizer: no file, no token cache.
    pub(crate) fn of(inner: Arc<Dataset>) -> Self {
        JsSftDataset {
            inner,
            cache: None,
            source: None,
            source_caches: Vec::new(),
        }
    }
}

impl Drop for JsSftDataset {
    fn drop(&mut self) {
        self.inner.cancel_prefetch();
    }
}

#[napi]
impl JsSftDataset {
    /// Validates the format of every example (all must share the first one's) and derives the
    /// special token ids. Rows start building on the other cores while the examples are
    /// converted; a row that fails to build rejects the batch that holds it.
    #[napi(
        constructor,
        ts_args_type = "examples: SFTExample[], tokenizer: Tokenizer | ChatTemplateTokenizer, config?: SFTDatasetConfig | null"
    )]
    pub fn new(examples: Unknown, tokenizer: Unknown, config: Option<Unknown>) -> Result<Self> {
        Self::create("new SFTDataset", examples, tokenizer, config)
    }

    /// One part of `split(options)` (`'train'` or `'test'`); `lib/index.js` makes both.
    #[napi(js_name = "_splitPart")]
    pub fn split_part(&self, options: SplitOptions, part: String) -> Result<JsSftDataset> {
        run_sync(|| {
            if self.inner.awaits_foreign_rows() {
                return Err(SftError::invalid_argument(
                    "split: the rows of this dataset have not arrived from its tokenizer; await dataset.ready() first",
                ));
            }
            let size = TestSize::parse(options.test)?;
            let seed = options.seed.unwrap_or(self.inner.config().seed);
            let (train, test) = self.inner.split(size, seed)?;
            let inner = match part.as_str() {
                "train" => train,
                "test" => test,
                other => {
                    return Err(SftError::invalid_argument(format!(
                        "split: part must be 'train' or 'test', got '{other}'"
                    )))
                }
            };
            let inner = Arc::new(inner);
            inner.start_prefetch();
            Ok(JsSftDataset {
                inner,
                cache: self.cache.clone(),
                source: self.source.clone(),
                source_caches: self.source_caches.clone(),
            })
        })
    }

    /// The constructor and `createSFTDataset`; `caller` names the one called in errors.
    pub(crate) fn create(
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
            Ok(JsSftDataset::of(inner))
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

    /// *(addition)* The sources of a dataset loaded from several files, with their weights and
    /// counts; null for a dataset of one file or of examples.
    #[napi(getter, ts_return_type = "Array<SFTSourceInfo> | null")]
    pub fn sources(&self) -> Option<Vec<SourceInfo>> {
        source_infos(&self.inner, &self.source_caches)
    }

    /// *(addition)* Where the token rows live and what they take (see docs/memory.md).
    #[napi(getter)]
    pub fn memory(&self) -> RowMemory {
        let (bytes, load) = self.inner.row_memory();
        RowMemory {
            rows: if bytes.mapped > 0 { "mapped" } else { "memory" }.to_string(),
            resident_bytes: bytes.resident as f64,
            mapped_bytes: bytes.mapped as f64,
            budget: load.map(|l| l.budget as f64),
            peak_bytes: load.map(|l| l.peak as f64),
        }
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

    /// `collateBatch` of example indices rather than positions of the epoch order: any example
    /// of the data, whether the epoch holds it or not (the command line's previews).
    #[napi(js_name = "_collateExamples", ts_return_type = "Promise<SFTBatch>")]
    pub fn collate_example_indices(
        &self,
        indices: Vec<f64>,
    ) -> AsyncTask<Job<CollatedBatch, SftBatch>> {
        let count = self.inner.example_count();
        let resolved: SftResult<Vec<u32>> = indices
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                if i.is_finite() && i >= 0.0 && i.fract() == 0.0 && (i as usize) < count {
                    Ok(i as u32)
                } else {
                    Err(SftError::invalid_argument(format!(
                        "_collateExamples: indices[{k}] = {} is not an example index in [0, {count})",
                        crate::error::js_number(i)
                    )))
                }
            })
            .collect();
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
