//! A dataset's batches: rows collated in the current order or by the epoch's plan, and what
//! every batching strategy would cost.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use rayon::prelude::*;

use crate::batch::collate::{Batch, Layout, Padding};
use crate::batch::plan::{plan, plan_cost, plan_key, Batching, Plan, PlanCost, PlanSettings};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::mask::truncation::kept_window;
use crate::rows::RowView;

use super::{Dataset, DatasetConfig, Epoch};

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

/// The last plan made: for this epoch and batch size.
pub(super) struct CachedPlan {
    epoch: Arc<Epoch>,
    batch_size: usize,
    plan: Arc<Plan>,
}

/// The rows of some examples, and the build errors of those that failed (example, message).
type RowsOf<'a> = (Vec<RowView<'a>>, Vec<(u32, String)>);

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

impl Dataset {
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
        if settings.batching.needs_lengths() && self.awaits_foreign_rows() {
            return Err(SftError::invalid_argument(
                "this batching plan needs every row's length, and the dataset's tokenizer renders through its own asynchronous applyChatTemplate: await dataset.ready() first",
            ));
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

    /// Exactly how many batches `batches(batch_size)` yields this epoch (on this rank).
    pub fn num_batches(&self, batch_size: usize) -> SftResult<usize> {
        if self.config.uses_plan() {
            Ok(self.plan_for(batch_size)?.num_batches())
        } else {
            Ok(self.len().div_ceil(batch_size))
        }
    }
}
