//! The native half of datasets over a foreign tokenizer (`dataset::foreign`); lib/foreign.js
//! makes the tokenizer's calls and hands their answers here.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, Either, Uint32Array, Unknown};
use napi_derive::napi;
use serde_json::Value as Json;

use super::config::{core_config, LoadSftDatasetOptions};
use super::dataset::JsSftDataset;
use super::error::{run_sync, typed_arg, JsResult as Result};
use super::json::JsJson;
use super::mix::MixSourceNative;
use super::path::{path_options, resolve_dataset_path};
use super::task::Job;
use crate::dataset::foreign::{read_examples, ForeignRender};
use crate::dataset::mixture::{check_weight, MixPart};
use crate::dataset::{Dataset, DatasetConfig};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::input::dataset_format::Converter;
use crate::tokenize::foreign::ForeignTokenizer;

/// The dataset settings of a config (`SFTDatasetConfig` or `LoadSFTDatasetOptions`).
fn settings_of(config: Option<LoadSftDatasetOptions>) -> SftResult<DatasetConfig> {
    match config {
        None => Ok(DatasetConfig::default()),
        Some(mut c) => core_config(c.settings()),
    }
}

/// The answers lib/foreign.js collected: `{ padTokenId, imStartToken, imEndToken, lookups:
/// [[token, id | null], ...] }`.
fn answers_of(answers: Json) -> SftResult<ForeignTokenizer> {
    let bad = |what: &str| {
        SftError::new(
            ErrorCode::Internal,
            format!("the foreign tokenizer's answers lack {what}"),
        )
    };
    let text = |key: &str| {
        answers[key]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| bad(key))
    };
    let lookups = answers["lookups"]
        .as_array()
        .ok_or_else(|| bad("lookups"))?
        .iter()
        .map(|pair| {
            let token = pair[0].as_str().ok_or_else(|| bad("a lookup's token"))?;
            let id = pair[1].as_u64().and_then(|id| u32::try_from(id).ok());
            Ok((token.to_string(), id))
        })
        .collect::<SftResult<Vec<_>>>()?;
    Ok(ForeignTokenizer {
        pad_token_id: answers["padTokenId"]
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| bad("padTokenId"))?,
        im_start_token: text("imStartToken")?,
        im_end_token: text("imEndToken")?,
        lookups,
    })
}

/// Records read by `_foreignExamples`, kept here until `_forForeignRead` takes them, so that they
/// cross from JS to Rust no second time.
static READ: Mutex<Vec<(u32, Vec<Json>)>> = Mutex::new(Vec::new());
static NEXT_READ: AtomicU32 = AtomicU32::new(1);

/// `_foreignExamples`' answer: the records as JS values, and the number `_forForeignRead` takes
/// them by.
#[napi(object, object_from_js = false)]
pub struct ForeignRead {
    #[napi(ts_type = "any[]")]
    pub examples: Vec<JsJson>,
    pub handle: u32,
}

/// The records of a data file in the reference's shape, validated, for a foreign tokenizer to
/// render (`loadSFTDataset` with such a tokenizer): `format`, `columns`, `roles` and `limit`
/// apply; errors name the file and line.
#[napi(
    js_name = "_foreignExamples",
    ts_args_type = "path: string, config?: LoadSFTDatasetOptions | undefined | null",
    ts_return_type = "Promise<ForeignRead>"
)]
pub fn foreign_examples(
    path: String,
    config: Option<LoadSftDatasetOptions>,
) -> AsyncTask<Job<Vec<Json>, ForeignRead>> {
    AsyncTask::new(Job::new(
        move || {
            let (config, limit, opts) = match config {
                None => (DatasetConfig::default(), None, path_options(None, None)),
                Some(mut c) => (
                    core_config(c.settings())?,
                    c.limit.filter(|l| *l > 0.0).map(|l| l.ceil() as usize),
                    path_options(c.allowed_root.take(), c.follow_symlinks),
                ),
            };
            let file = resolve_dataset_path(&path, &opts)?;
            let converter = Converter::new(config.input.clone())?;
            read_examples(&file, &converter, limit)
        },
        |_, examples| {
            let handle = NEXT_READ.fetch_add(1, Ordering::Relaxed);
            let js = examples.iter().cloned().map(JsJson).collect();
            READ.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push((handle, examples));
            Ok(ForeignRead {
                examples: js,
                handle,
            })
        },
    ))
}

/// The records `_foreignExamples` kept under `handle`, taken.
fn take_read(handle: u32) -> SftResult<Vec<Json>> {
    let mut read = READ.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let at = read.iter().position(|(h, _)| *h == handle).ok_or_else(|| {
        SftError::new(
            ErrorCode::Internal,
            format!("no records were read under {handle}"),
        )
    })?;
    Ok(read.swap_remove(at).1)
}

#[napi]
impl JsSftDataset {
    /// A dataset whose rows a foreign tokenizer renders (lib/foreign.js): the examples are
    /// checked now, the rows arrive with `_supplyForeign`.
    #[napi(
        factory,
        js_name = "_forForeign",
        ts_args_type = "examples: any[], answers: any, config: LoadSFTDatasetOptions | undefined | null, caller: string"
    )]
    pub fn for_foreign(
        examples: Vec<JsJson>,
        answers: JsJson,
        config: Option<Unknown>,
        caller: String,
    ) -> Result<Self> {
        run_sync(|| {
            let config: Option<LoadSftDatasetOptions> = match config {
                Some(c) => typed_arg(&c, &format!("{caller}: config"), "a valid SFTDatasetConfig")?,
                None => None,
            };
            let config = settings_of(config)?;
            let dataset =
                Dataset::for_foreign(JsJson::list(examples), answers_of(answers.0)?, config)?;
            Ok(JsSftDataset::of(Arc::new(dataset)))
        })
    }

    /// `_forForeign` over the records `_foreignExamples` read and kept under `handle`.
    #[napi(
        factory,
        js_name = "_forForeignRead",
        ts_args_type = "handle: number, answers: any, config: LoadSFTDatasetOptions | undefined | null"
    )]
    pub fn for_foreign_read(
        handle: u32,
        answers: JsJson,
        config: Option<LoadSftDatasetOptions>,
    ) -> Result<Self> {
        run_sync(|| {
            let examples = take_read(handle)?;
            let dataset =
                Dataset::for_foreign(examples, answers_of(answers.0)?, settings_of(config)?)?;
            Ok(JsSftDataset::of(Arc::new(dataset)))
        })
    }

    /// A mix of the records `_foreignExamples` read and kept under `handles`, one per source of
    /// `sources` (as `loadSFTMixNative` takes them).
    #[napi(
        factory,
        js_name = "_forForeignMix",
        ts_args_type = "handles: number[], sources: MixSourceNative[], answers: any"
    )]
    pub fn for_foreign_mix(
        handles: Vec<u32>,
        sources: Vec<MixSourceNative>,
        answers: JsJson,
    ) -> Result<Self> {
        run_sync(|| {
            let foreign = answers_of(answers.0)?;
            let mut parts = Vec::with_capacity(sources.len());
            for (k, (handle, source)) in handles.into_iter().zip(sources).enumerate() {
                let weight = check_weight(source.weight, k, &source.path)?;
                let examples = take_read(handle)?;
                let dataset = Dataset::for_foreign(
                    examples,
                    foreign.clone(),
                    settings_of(Some(source.config))?,
                )?;
                parts.push(MixPart {
                    dataset,
                    path: source.path.into(),
                    weight,
                });
            }
            Ok(JsSftDataset::of(Arc::new(Dataset::mix(parts)?)))
        })
    }

    /// Whether the rows come from a foreign tokenizer and have not arrived yet.
    #[napi(js_name = "_awaitsForeignRows")]
    pub fn awaits_foreign_rows(&self) -> bool {
        self.inner.awaits_foreign_rows()
    }

    /// The foreign tokenizer's renders, one per example in example order: the ids of the full
    /// render, or the message of the error it raised; for prompt-completion data the prompt's
    /// ids in `prompts`.
    #[napi(js_name = "_supplyForeign")]
    pub fn supply_foreign(
        &mut self,
        full: Vec<Either<Uint32Array, String>>,
        prompts: Option<Vec<Option<Uint32Array>>>,
    ) -> Result<()> {
        run_sync(|| {
            let mut prompts = prompts.map(Vec::into_iter);
            let renders = full
                .into_iter()
                .map(|render| {
                    let prompt = prompts
                        .as_mut()
                        .and_then(Iterator::next)
                        .flatten()
                        .map(|ids| ids.to_vec());
                    match render {
                        Either::A(ids) => ForeignRender::Ids {
                            prompt,
                            full: ids.to_vec(),
                        },
                        Either::B(message) => ForeignRender::Failed(message),
                    }
                })
                .collect();
            Arc::get_mut(&mut self.inner)
                .ok_or_else(|| {
                    SftError::new(
                        ErrorCode::Internal,
                        "the rows of a dataset in use cannot be supplied",
                    )
                })?
                .supply_foreign(renders)
        })
    }
}
