//! `validateSFTFile`: every problem of a JSONL file, for the CLI's `validate`.

use std::path::PathBuf;

use napi::bindgen_prelude::{AsyncTask, Unknown};
use napi_derive::napi;

use super::dataset::{core_config_of, SftDatasetConfig};
use super::task::Job;
use super::tokenizer::tokenizer_arg;
use crate::dataset::{resolve_masking, row_settings, turn_end_of};
use crate::validate::{validate_file, ValidationReport};

#[napi(object)]
pub struct FileProblem {
    /// Physical line number (1-based).
    pub line: u32,
    /// Index of the record (non-blank line) from 0.
    pub example: u32,
    pub code: String,
    pub message: String,
}

#[napi(object)]
pub struct FileValidation {
    /// Records read (non-blank lines).
    pub examples: u32,
    /// `'prompt-completion'`, `'conversation'`, or null when no record is valid.
    pub format: Option<String>,
    pub problems: Vec<FileProblem>,
}

fn to_js(report: ValidationReport) -> FileValidation {
    FileValidation {
        examples: report.examples as u32,
        format: report.format.map(|f| f.name().to_string()),
        problems: report
            .problems
            .into_iter()
            .map(|p| FileProblem {
                line: p.line as u32,
                example: p.example as u32,
                code: p.code.as_str().to_string(),
                message: p.message,
            })
            .collect(),
    }
}

/// Checks every line of a JSONL file and reports every problem, not just the first. With a
/// tokenizer, every example is also rendered and tokenized with `config`, so template errors
/// are found too.
#[napi(
    js_name = "validateSFTFile",
    ts_args_type = "path: string, tokenizer?: Tokenizer | undefined | null, config?: SFTDatasetConfig | undefined | null",
    ts_return_type = "Promise<FileValidation>"
)]
pub fn validate_sft_file(
    path: String,
    tokenizer: Option<Unknown>,
    config: Option<SftDatasetConfig>,
) -> AsyncTask<Job<ValidationReport, FileValidation>> {
    // Checked now, reported by the Promise: an async entry point never throws.
    let tokenizer = tokenizer.as_ref().map(tokenizer_arg).transpose();
    AsyncTask::new(Job::new(
        move || {
            let file = PathBuf::from(path);
            let Some(tokenizer) = tokenizer? else {
                return validate_file(&file, None);
            };
            let config = core_config_of(config)?;
            let masking = resolve_masking(&tokenizer, &config)?;
            let turn_end = turn_end_of(&tokenizer, &config);
            let settings = row_settings(&config, &masking, turn_end.as_ref());
            validate_file(&file, Some((&tokenizer, &settings)))
        },
        |_, report| Ok(to_js(report)),
    ))
}
