//! `loadSFTDataset` of several files: each source loaded as a file of its own (its format,
//! limit and token cache entry), then mixed by weight (`dataset::mixture`).

use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Unknown};
use napi::Env;
use napi_derive::napi;

use super::config::{memory_budget, progress_hook, LoadSftDatasetOptions, TokenCacheUse};
use super::create::{cache_use, load_file, load_warnings, LoadedWithWarnings};
use super::dataset::JsSftDataset;
use super::task::Job;
use super::tokenizer::tokenizer_arg;
use crate::dataset::loader::{LoadProgress, ProgressHook};
use crate::dataset::mixture::{check_weight, MixPart};
use crate::dataset::{Dataset, DEFAULT_MEMORY_BUDGET};
use crate::error::{SftError, SftResult};

/// One source of a mix as `lib/index.js` hands it over: its path resolved and checked, its
/// weight, and the load's options with the source's own `format`, `columns`, `roles` and
/// `limit` in place.
#[napi(object, object_to_js = false)]
pub struct MixSourceNative {
    pub path: String,
    pub weight: f64,
    pub config: LoadSftDatasetOptions,
}

/// How one source of a mixed dataset was loaded (`SFTDataset.sources`).
#[napi(object, js_name = "SFTSourceInfo")]
pub struct SourceInfo {
    pub path: String,
    pub weight: f64,
    #[napi(ts_type = "'prompt-completion' | 'conversation'")]
    pub format: String,
    /// Examples loaded from the file; their indices in the dataset are `start` to
    /// `start + examples - 1`.
    pub examples: u32,
    pub start: u32,
    /// Its examples that take part in training (in this part, for a part of `split`).
    pub rows: u32,
    /// Appearances of its examples in one epoch: `rows` times the weight's integer part, plus
    /// the fraction's share of `rows`, rounded.
    pub per_epoch: u32,
    /// How the token cache served the source; absent without a cache.
    pub cache: Option<TokenCacheUse>,
}

/// The mixed dataset, every source's data warnings and cache use, and its cache warnings.
pub struct MixLoaded {
    dataset: Dataset,
    data_warnings: Vec<(&'static str, String)>,
    cache_warnings: Vec<String>,
    caches: Vec<Option<TokenCacheUse>>,
}

/// The progress hook of source `k`: the counts of the sources before it added, so that the
/// caller sees one load.
fn offset_hook(hook: &Arc<ProgressHook>, records: u64, bytes: u64) -> ProgressHook {
    let hook = hook.clone();
    Box::new(move |p: LoadProgress| {
        hook(LoadProgress {
            records: p.records + records as usize,
            bytes: p.bytes + bytes,
            waiting: p.waiting,
        })
    })
}

/// `loadSFTDataset` of a list of sources, without the JS wrapper's checks of the list and its
/// paths: loads the sources one after the other (each on all cores), the memory budget shared
/// among them, and mixes them.
#[napi(
    js_name = "loadSFTMixNative",
    ts_args_type = "sources: MixSourceNative[], tokenizer: Tokenizer | ChatTemplateTokenizer, config?: LoadSFTDatasetOptions | undefined | null",
    ts_return_type = "Promise<SFTDataset>"
)]
pub fn load_sft_mix_native(
    sources: Vec<MixSourceNative>,
    tokenizer: Unknown,
    config: Option<LoadSftDatasetOptions>,
) -> AsyncTask<Job<MixLoaded, JsSftDataset>> {
    let tokenizer = tokenizer_arg(&tokenizer);
    AsyncTask::new(Job::new(
        move || {
            let tokenizer = tokenizer?;
            let mut config = config;
            let hook = config
                .as_mut()
                .and_then(|c| c.on_progress.take())
                .map(|p| Arc::new(progress_hook(p)));
            let budget = match config.as_ref().and_then(|c| c.memory_budget) {
                Some(b) => memory_budget(b)?,
                None => DEFAULT_MEMORY_BUDGET,
            };
            if sources.is_empty() {
                return Err(SftError::invalid_argument(
                    "loadSFTDataset: the list of sources is empty",
                ));
            }
            let weights = sources
                .iter()
                .enumerate()
                .map(|(k, s)| check_weight(s.weight, k, &s.path))
                .collect::<SftResult<Vec<f64>>>()?;
            let (mut records, mut bytes, mut held) = (0u64, 0u64, 0usize);
            let (mut data_warnings, mut cache_warnings) = (Vec::new(), Vec::new());
            let mut caches = Vec::with_capacity(sources.len());
            let mut parts = Vec::with_capacity(sources.len());
            for (source, weight) in sources.into_iter().zip(weights) {
                let on_progress = hook.as_ref().map(|h| offset_hook(h, records, bytes));
                let (loaded, warnings, file): LoadedWithWarnings = load_file(
                    &source.path,
                    tokenizer.clone(),
                    Some(source.config),
                    on_progress,
                    Some(budget.saturating_sub(held)),
                )?;
                records += loaded.dataset.example_count() as u64;
                bytes += std::fs::metadata(&file).map_or(0, |m| m.len());
                held += loaded.dataset.row_memory().0.resident;
                data_warnings.extend(warnings);
                caches.push(cache_use(&loaded));
                cache_warnings.extend(loaded.warnings);
                parts.push(MixPart {
                    dataset: loaded.dataset,
                    path: file,
                    weight,
                });
            }
            Ok(MixLoaded {
                dataset: Dataset::mix(parts)?,
                data_warnings,
                cache_warnings,
                caches,
            })
        },
        finish_mix,
    ))
}

fn finish_mix(env: &Env, mixed: MixLoaded) -> SftResult<JsSftDataset> {
    load_warnings(env, mixed.data_warnings, mixed.cache_warnings)?;
    let inner = Arc::new(mixed.dataset);
    Ok(JsSftDataset {
        inner,
        cache: None,
        source: None,
        source_caches: mixed.caches,
    })
}

/// `SFTDataset.sources` of a mixed dataset.
pub(crate) fn source_infos(
    dataset: &Dataset,
    caches: &[Option<TokenCacheUse>],
) -> Option<Vec<SourceInfo>> {
    let mixture = dataset.mixture()?;
    let counts = dataset.source_counts(None)?;
    Some(
        mixture
            .sources
            .iter()
            .zip(counts)
            .enumerate()
            .map(|(k, (source, counts))| SourceInfo {
                path: source.path.display().to_string(),
                weight: source.weight,
                format: source.format.name().to_string(),
                examples: counts.examples,
                start: source.start,
                rows: counts.rows,
                per_epoch: counts.per_epoch as u32,
                cache: caches.get(k).cloned().flatten(),
            })
            .collect(),
    )
}
