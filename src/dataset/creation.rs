//! How a dataset comes to be: from JS examples (`new SFTDataset`, a slice at a time), from a
//! file (`loadSFTDataset`), or from rows a token cache entry holds.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::dataset::loader::{load_rows, LoadOptions};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::{detect_format, format_from_keys, Format};
use crate::input::dataset_format::Converter;
use crate::mask::silent_loss::{LossChecker, LossKind, LossSummary};
use crate::mask::spans::TurnEnd;
use crate::rows::packed_rows::PackedRows;
use crate::rows::repeats::Repeats;
use crate::rows::row_cache::RowCache;
use crate::rows::{Masking, RowSettings};
use crate::store::token_cache::{PendingEntry, SpillTarget};
use crate::tokenize::foreign::RowTokenizer;
use crate::tokenize::ChatTokenizer;

use super::{resolve_masking, row_settings, turn_end_of, Dataset, DatasetConfig, Epoch};

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
        let mut dataset = Self::assemble(
            RowTokenizer::Ours(tokenizer),
            config,
            format,
            masking,
            turn_end,
            examples,
            rows,
        );
        dataset.repeats = Some(Arc::new(Repeats::new(count)));
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

    /// `loadSFTDataset`: streams the file, validating every record and building every row; rows
    /// beyond the memory budget go to a file of the OS's temporary directory.
    pub fn load(
        path: &Path,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        options: &LoadOptions,
    ) -> SftResult<Self> {
        Self::load_to(path, tokenizer, config, options, &SpillTarget::temp()).map(|(d, _)| d)
    }

    /// `load`, with rows beyond the memory budget written to `spill`; when that is a token cache
    /// entry, the entry to publish.
    pub fn load_to(
        path: &Path,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        options: &LoadOptions,
        spill: &SpillTarget,
    ) -> SftResult<(Self, Option<PendingEntry>)> {
        config.check_batching()?;
        let converter = Converter::new(config.input.clone())?;
        let masking = resolve_masking(&tokenizer, &config);
        let turn_end = turn_end_of(&tokenizer, &config);
        let checker = LossChecker::new(&tokenizer, config.tools, config.sanitize_control_tokens);
        let settings = masking.as_ref().ok().map(|m| RowSettings {
            loss: Some(&checker),
            ..row_settings(&config, m, turn_end.as_ref())
        });
        let loaded = load_rows(
            path,
            &tokenizer,
            settings.as_ref(),
            &converter,
            options,
            spill,
        )?;
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
            RowTokenizer::Ours(tokenizer),
            config,
            loaded.format,
            masking,
            turn_end,
            Vec::new(),
            RowCache::Packed(loaded.rows),
        );
        dataset.losses = loaded.losses;
        dataset.load_memory = Some(loaded.memory);
        dataset.check_renders(&path.display().to_string())?;
        dataset.apply_drops();
        Ok((dataset, loaded.entry))
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
            RowTokenizer::Ours(tokenizer),
            config,
            format,
            masking,
            turn_end,
            Vec::new(),
            RowCache::Packed(rows),
        );
        dataset.check_renders("the data")?;
        dataset.apply_drops();
        Ok(dataset)
    }

    /// With `dropDuplicates`, which examples are copies of an earlier one (empty without it).
    pub(super) fn duplicates(&self) -> Vec<bool> {
        if !self.config.drop_duplicates {
            return Vec::new();
        }
        let bit = LossKind::DuplicateExample.bit();
        match &self.repeats {
            Some(repeats) => repeats.repeated(),
            None => (0..self.rows.len())
                .map(|i| {
                    matches!(self.rows.built_stats(i), Some(Ok(stats)) if stats.losses & bit != 0)
                })
                .collect(),
        }
    }

    /// The examples whose row failed to build, with their errors.
    pub fn unrenderable(&self) -> Vec<(usize, &SftError)> {
        (0..self.rows.len())
            .filter_map(|i| match self.rows.built_stats(i) {
                Some(Err(e)) => Some((i, e)),
                _ => None,
            })
            .collect()
    }

    /// A load renders every example, so that a file the template cannot render fails now, not
    /// at the batch that holds the example: the error names the first failures and the count.
    /// With `dropUnrenderable`, they leave the dataset instead (`apply_drops`).
    fn check_renders(&self, file: &str) -> SftResult<()> {
        if self.config.drop_unrenderable {
            return Ok(());
        }
        let failed = self.unrenderable();
        let Some(&(_, first)) = failed.first() else {
            return Ok(());
        };
        // Nothing renders without a template, or with one that does not compile: its own error
        // says why.
        if matches!(
            first.code,
            ErrorCode::ChatTemplateMissing | ErrorCode::TemplateSyntax
        ) {
            return Err(first.clone());
        }
        const SHOWN: usize = 3;
        let listed: Vec<&str> = failed
            .iter()
            .take(SHOWN)
            .map(|(_, e)| e.message.as_str())
            .collect();
        let message = if failed.len() == 1 {
            format!(
                "{} (the only example of {file} that fails to render; dropUnrenderable: true leaves such examples out)",
                first.message
            )
        } else {
            format!(
                "{} of {} examples of {file} fail to render (dropUnrenderable: true leaves them out){}: {}",
                failed.len(),
                self.rows.len(),
                if failed.len() > SHOWN { ", the first ones" } else { "" },
                listed.join("; ")
            )
        };
        Err(SftError::new(first.code, message))
    }

    pub(super) fn assemble(
        tokenizer: RowTokenizer,
        config: DatasetConfig,
        format: Format,
        masking: Masking,
        turn_end: Option<TurnEnd>,
        examples: Vec<Mutex<Option<Pending>>>,
        rows: RowCache,
    ) -> Self {
        let len = rows.len();
        let loss = match tokenizer.ours() {
            Some(t) => LossChecker::new(t, config.tools, config.sanitize_control_tokens),
            None => LossChecker::without_render(config.tools),
        };
        Dataset {
            tokenizer,
            config,
            format,
            masking,
            turn_end,
            kept: None,
            part: None,
            examples: Arc::new(examples),
            warned: Arc::new((0..len).map(|_| AtomicBool::new(false)).collect()),
            rows: Arc::new(rows),
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
            load_memory: None,
            mixture: None,
        }
    }

    /// Dropped rows (`dropUntrainable`, `truncation: 'turns'`) leave the dataset: `length`,
    /// `numBatches`, positions and orders count only the kept examples, and orders list their
    /// original indices. A row that fails to build stays, so that its error surfaces where the
    /// reference's would.
    pub(super) fn apply_drops(&mut self) {
        let rows = &self.rows;
        let unrenderable = self.config.drop_unrenderable;
        let duplicates = self.duplicates();
        let dropped = |i: usize| {
            duplicates.get(i).copied().unwrap_or(false)
                || match rows.built_stats(i) {
                    Some(Ok(stats)) => stats.dropped.is_some(),
                    Some(Err(_)) => unrenderable,
                    None => false,
                }
        };
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
}

/// An example whose JSON is made only when its row is built, on the thread that builds it (the
/// JS binding decodes its examples from V8's serialization so).
pub trait DeferredExample: Send {
    /// Whether the example is an object with this top-level key (its format is told from them).
    fn has_key(&self, key: &str) -> bool;
    /// The example's JSON; `None` when it cannot be made, which is a bug of the binding.
    fn decode(&self) -> Option<Json>;
}

/// An example of a dataset being created, until its row is built.
pub enum Pending {
    Json(Json),
    Deferred(Box<dyn DeferredExample>),
}

impl Pending {
    fn format(&self) -> SftResult<Format> {
        match self {
            Pending::Json(json) => detect_format(json),
            Pending::Deferred(example) => format_from_keys(|key| example.has_key(key)),
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

pub(super) fn inconsistent(format: Format, index: usize, other: Format) -> SftError {
    SftError::new(
        ErrorCode::InvalidExample,
        format!(
            "Inconsistent SFT data format: example 0 is {}, example {index} is {}",
            format.name(),
            other.name()
        ),
    )
}
