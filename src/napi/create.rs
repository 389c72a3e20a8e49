//! `createSFTDataset`, `new SFTDataset` and `loadSFTDataset`: examples read from JS a slice at a
//! time, or a file streamed in Rust.

use std::sync::Arc;

use napi::bindgen_prelude::{Array, AsyncTask, FromNapiValue, Unknown};
use napi::{Env, JsValue};
use napi_derive::napi;

use super::config::{
    cache_settings, core_config, memory_budget, progress_hook, LoadSftDatasetOptions, TokenCacheUse,
};
use super::dataset::JsSftDataset;
use super::error::{arg_error, run_sync, JsResult as Result};
use super::json::{JsJson, Serializer};
use super::path::{path_options, resolve_dataset_path};
use super::task::Job;
use super::tokenizer::tokenizer_arg;
use super::v8_wire::{self, Skimmed, WireExample, WireExamples};
use super::warnings::{emit_data_warnings, print_warnings};
use crate::dataset::loader::{LoadOptions, ProgressHook};
use crate::dataset::{Dataset, DatasetConfig, DeferredExample, Pending};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::store::token_cache::{self, CachedLoad};
use crate::tokenize::ChatTokenizer;

/// A load and the data warnings (silent loss) to emit with it: (warning type, message).
/// A load's dataset, its data warnings and the file it read.
pub(crate) type LoadedWithWarnings = (CachedLoad, Vec<(&'static str, String)>, std::path::PathBuf);

/// An example the skim found readable: decoded from its slice's serialization by the thread that
/// builds its row.
struct WireElement(Arc<WireExamples>, WireExample);

impl DeferredExample for WireElement {
    fn has_key(&self, key: &str) -> bool {
        self.1.has_key(key)
    }

    fn decode(&self) -> Option<serde_json::Value> {
        self.0.decode(&self.1)
    }
}

/// Examples converted per slice by `createSFTDataset`: about a millisecond of conversion, and a
/// chunk of rows for the cores.
pub(crate) const CREATE_SLICE: u32 = 64;

/// The first slice after example 0 is smaller, so that the other cores start sooner; the next
/// ones double up to `CREATE_SLICE`.
pub(crate) const FIRST_CREATE_SLICE: u32 = 8;

/// The `examples` argument of `createSFTDataset`, converted from JS a slice at a time (example 0
/// alone, then `FIRST_CREATE_SLICE` examples, doubling up to `CREATE_SLICE`), with the errors a
/// whole conversion (`Vec<JsJson>`) gives.
pub(crate) struct ExampleSlices<'env> {
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
    pub(crate) fn new(examples: &Unknown<'env>, what: String) -> SftResult<Self> {
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

    pub(crate) fn len(&self) -> usize {
        self.array.len() as usize
    }

    pub(crate) fn is_done(&self) -> bool {
        self.next >= self.array.len()
    }

    /// Where the next slice ends; the skim of its serialization is ready for `take`.
    pub(crate) fn begin_slice(&mut self) -> u32 {
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
    pub(crate) fn take(&mut self) -> Option<Pending> {
        self.next += 1;
        let (elements, examples) = self.wire.as_mut()?;
        match elements.next()? {
            Skimmed::Wire(at) => Some(Pending::Deferred(Box::new(WireElement(
                examples.clone(),
                at,
            )))),
            Skimmed::Walk => None,
        }
    }

    /// Example `index` read by the walk.
    pub(crate) fn walk(&self, index: u32) -> napi::Result<serde_json::Value> {
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
    pub(crate) fn next(&mut self) -> SftResult<Vec<Pending>> {
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
    pub(crate) fn convert_rest(&mut self) -> SftResult<()> {
        while !self.is_done() {
            self.next()?;
        }
        Ok(())
    }
}

pub(crate) const EXAMPLES: &str = "an array of examples";

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
                if let Some(Pending::Deferred(example)) = slices.take() {
                    let json = example.decode().ok_or_else(|| {
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
    ts_args_type = "examples: SFTExample[], tokenizer: Tokenizer | ChatTemplateTokenizer, config?: SFTDatasetConfig | null",
    ts_return_type = "SFTDataset"
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
    ts_args_type = "path: string, tokenizer: Tokenizer | ChatTemplateTokenizer, config?: LoadSFTDatasetOptions | undefined | null",
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
            let mut config = config;
            let on_progress = config
                .as_mut()
                .and_then(|c| c.on_progress.take())
                .map(progress_hook);
            load_file(&path, tokenizer?, config, on_progress, None)
        },
        finish_load,
    ))
}

/// One file's load, off the JS thread: through the token cache when `config` names one.
/// `budget` overrides `config`'s `memoryBudget` (what a mix's earlier sources left of it).
pub(crate) fn load_file(
    path: &str,
    tokenizer: Arc<ChatTokenizer>,
    config: Option<LoadSftDatasetOptions>,
    on_progress: Option<ProgressHook>,
    budget: Option<usize>,
) -> SftResult<LoadedWithWarnings> {
    let (config, limit, memory_budget, opts, cache) = match config {
        None => (
            DatasetConfig::default(),
            None,
            None,
            path_options(None, None),
            None,
        ),
        Some(mut c) => (
            core_config(c.settings())?,
            c.limit.filter(|l| *l > 0.0).map(|l| l.ceil() as usize),
            c.memory_budget.map(memory_budget).transpose()?,
            path_options(c.allowed_root, c.follow_symlinks),
            c.cache.map(cache_settings).transpose()?,
        ),
    };
    let file = resolve_dataset_path(path, &opts)?;
    let options = LoadOptions {
        limit,
        memory_budget: budget.or(memory_budget),
        on_progress,
    };
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
}

/// Emits the data warnings (silent loss) and prints the cache's, then wraps the dataset;
/// `cache` stays null for an uncached load.
pub(crate) fn finish_load(
    env: &Env,
    (loaded, data_warnings, file): LoadedWithWarnings,
) -> SftResult<JsSftDataset> {
    let cache = cache_use(&loaded);
    load_warnings(env, data_warnings, loaded.warnings)?;
    Ok(JsSftDataset {
        inner: Arc::new(loaded.dataset),
        cache,
        source: Some(file),
        source_caches: Vec::new(),
    })
}

/// How the token cache served a load; `None` without a cache.
pub(crate) fn cache_use(loaded: &CachedLoad) -> Option<TokenCacheUse> {
    loaded.status.map(|status| TokenCacheUse {
        status: status.name().to_string(),
        file: loaded.entry.as_ref().map(|p| p.display().to_string()),
        key: loaded.key.clone(),
    })
}

/// A load's data warnings (silent loss) as Node warnings, and the token cache's printed.
pub(crate) fn load_warnings(
    env: &Env,
    data: Vec<(&'static str, String)>,
    cache: Vec<String>,
) -> SftResult<()> {
    emit_data_warnings(env, data).map_err(|e| {
        SftError::new(
            ErrorCode::Internal,
            format!("process.emitWarning failed: {e}"),
        )
    })?;
    print_warnings(env, cache.into_iter())
        .map_err(|e| SftError::new(ErrorCode::Internal, format!("console.warn failed: {e}")))
}
