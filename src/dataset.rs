//! The SFT dataset: examples, their cached rows, the epoch order and batch collation.
//!
//! Each example is rendered and tokenized at most once per dataset. Rows live in `OnceLock`s, so
//! a background prefetch and a `collateBatch` that needs the same example never both compute it:
//! the second waits for the first.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::collate::{collate, Batch};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::example::{detect_format, from_created, Format};
use crate::loader::{load_rows, LoadOptions};
use crate::masking::ChatMlMarkers;
use crate::row::{build_row, RowSettings, TokenizedRow};
use crate::shuffle::epoch_order;
use crate::tokenizer::{ChatTokenizer, IM_END, IM_START};

const PREFETCH_CHUNK: usize = 64;

/// Overrides for the ids the reference masking keys on (`specialTokenIds`).
#[derive(Debug, Clone, Default)]
pub struct SpecialTokenOverrides {
    pub im_start: Option<u32>,
    pub im_end: Option<u32>,
    pub newline_tokens: Option<Vec<u32>>,
}

#[derive(Debug, Clone)]
pub struct DatasetConfig {
    pub max_seq_length: usize,
    pub completion_only: bool,
    pub enable_thinking: bool,
    pub seed: f64,
    pub special_token_ids: SpecialTokenOverrides,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            max_seq_length: 2048,
            completion_only: false,
            enable_thinking: false,
            seed: 42.0,
            special_token_ids: SpecialTokenOverrides::default(),
        }
    }
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
    markers: ChatMlMarkers,
    /// The examples as given to the constructor; empty for a loaded dataset, whose rows were all
    /// built while the file streamed by.
    examples: Vec<Json>,
    rows: Vec<OnceLock<SftResult<TokenizedRow>>>,
    warned: Vec<AtomicBool>,
    order: RwLock<Arc<Vec<u32>>>,
    prefetch_started: AtomicBool,
    cancelled: AtomicBool,
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
        let markers = reference_markers(&tokenizer, &config.special_token_ids)?;
        let format = detect_format(&examples[0])?;
        for (i, example) in examples.iter().enumerate().skip(1) {
            let other = detect_format(example)?;
            if other != format {
                return Err(inconsistent(format, i, other));
            }
        }
        let rows = (0..examples.len()).map(|_| OnceLock::new()).collect();
        Ok(Self::assemble(
            tokenizer, config, format, markers, examples, rows,
        ))
    }

    /// `loadSFTDataset`: streams the file, validating every record and building every row.
    pub fn load(
        path: &Path,
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        options: &LoadOptions,
    ) -> SftResult<Self> {
        let markers = reference_markers(&tokenizer, &config.special_token_ids);
        let settings = markers.as_ref().ok().map(|m| RowSettings {
            completion_only: config.completion_only,
            enable_thinking: config.enable_thinking,
            markers: m,
        });
        let loaded = load_rows(path, &tokenizer, settings.as_ref(), options)?;
        if loaded.rows.is_empty() {
            return Err(SftError::new(
                ErrorCode::InvalidExample,
                format!(
                    "SFT dataset must contain at least one example ({} has no records)",
                    path.display()
                ),
            ));
        }
        let markers = markers?;
        if let Some((index, other, line)) = loaded.first_inconsistent {
            return Err(inconsistent(loaded.format, index, other)
                .at_line(&path.display().to_string(), line));
        }
        let rows = loaded
            .rows
            .into_iter()
            .map(|row| {
                let cell = OnceLock::new();
                let _ = cell.set(row);
                cell
            })
            .collect();
        Ok(Self::assemble(
            tokenizer,
            config,
            loaded.format,
            markers,
            Vec::new(),
            rows,
        ))
    }

    fn assemble(
        tokenizer: Arc<ChatTokenizer>,
        config: DatasetConfig,
        format: Format,
        markers: ChatMlMarkers,
        examples: Vec<Json>,
        rows: Vec<OnceLock<SftResult<TokenizedRow>>>,
    ) -> Self {
        let len = rows.len();
        Dataset {
            tokenizer,
            config,
            format,
            markers,
            examples,
            warned: (0..len).map(|_| AtomicBool::new(false)).collect(),
            rows,
            order: RwLock::new(Arc::new((0..len as u32).collect())),
            prefetch_started: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn config(&self) -> &DatasetConfig {
        &self.config
    }

    pub fn tokenizer(&self) -> &Arc<ChatTokenizer> {
        &self.tokenizer
    }

    pub fn shuffle_for_epoch(&self, epoch: f64) {
        let order = Arc::new(epoch_order(self.len(), self.config.seed, epoch));
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
    pub fn row(&self, index: usize) -> &SftResult<TokenizedRow> {
        self.rows[index].get_or_init(|| self.build(index))
    }

    fn build(&self, index: usize) -> SftResult<TokenizedRow> {
        let example = from_created(&self.examples[index], index, self.format)?;
        let settings = RowSettings {
            completion_only: self.config.completion_only,
            enable_thinking: self.config.enable_thinking,
            markers: &self.markers,
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
            if let Some(w) = &row.warning {
                if !self.warned[i as usize].swap(true, Ordering::Relaxed) {
                    warnings.push((i, w.to_string()));
                }
            }
        }
        let batch = collate(
            &rows,
            self.config.max_seq_length,
            self.tokenizer.pad_token_id(),
        );
        Ok(CollatedBatch { batch, warnings })
    }

    /// Builds, on other threads, every row not built yet, in the current epoch order, so that
    /// the batches a trainer asks for next are ready. Runs once per dataset.
    pub fn start_prefetch(self: &Arc<Self>) {
        if self.examples.is_empty() || self.prefetch_started.swap(true, Ordering::AcqRel) {
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
                    dataset.row(i as usize);
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
