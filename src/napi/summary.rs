//! `SFTDataset.summary()`: the dataset's figures (`dataset::summary`) as a plain object, the
//! same JSON that `sft-dataset report --json` prints.

use napi_derive::napi;
use serde_json::Value as Json;

use crate::dataset::summary::SummaryOptions as Settings;
use crate::error::{ErrorCode, SftError, SftResult};
use crate::napi::dataset::{batch_size, JsSftDataset};
use crate::napi::json::JsJson;
use crate::napi::task::Job;
use napi::bindgen_prelude::AsyncTask;

/// Options of `SFTDataset.summary()`.
#[napi(object)]
pub struct SummaryOptions {
    /// Rows per batch for the batching figures. Default 8.
    pub batch_size: Option<f64>,
    /// Examples rendered again for the breakdown by kind, evenly spaced over the dataset; 0
    /// renders all of them. Default 10000.
    pub sample: Option<f64>,
    /// Examples listed per finding. Default 5.
    pub examples_per_finding: Option<f64>,
}

fn count(name: &str, value: f64) -> SftResult<usize> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= u32::MAX as f64 {
        Ok(value as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "{name} must be a non-negative integer, got {}",
            crate::error::js_number(value)
        )))
    }
}

fn summary_options(given: Option<SummaryOptions>) -> SftResult<Settings> {
    let mut opts = Settings::default();
    if let Some(o) = given {
        if let Some(b) = o.batch_size {
            opts.batch_size = batch_size(b)?;
        }
        if let Some(n) = o.sample {
            opts.sample = count("sample", n)?;
        }
        if let Some(n) = o.examples_per_finding {
            opts.examples_per_finding = count("examplesPerFinding", n)?;
        }
    }
    Ok(opts)
}

#[napi]
impl JsSftDataset {
    /// *(addition)* The whole dataset in figures (see `DatasetSummary` and docs/report.md):
    /// lengths against `maxSeqLength`, what truncation cuts, the trained share per example and
    /// per kind of message part, every batching strategy's cost at `batchSize`, and the
    /// findings with the line or row of their first examples. A loaded dataset also names its
    /// file (size, blake3) and reads it back for the lines and for the breakdown by kind, which
    /// renders a sample of examples again. Builds every row not built yet (off the JS thread).
    #[napi(ts_return_type = "Promise<DatasetSummary>")]
    pub fn summary(&self, options: Option<SummaryOptions>) -> AsyncTask<Job<Json, JsJson>> {
        let dataset = self.inner.clone();
        let source = self.source.clone();
        AsyncTask::new(Job::new(
            move || {
                let opts = summary_options(options)?;
                let summary = dataset.summary(source.as_deref(), &opts)?;
                serde_json::to_value(summary).map_err(|e| {
                    SftError::new(ErrorCode::Internal, format!("summary as JSON: {e}"))
                })
            },
            |_, json| Ok(JsJson(json)),
        ))
    }
}
