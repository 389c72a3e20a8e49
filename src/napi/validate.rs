//! `validateSFTFile`: every problem of a JSONL file, for the CLI's `validate`.

use std::path::PathBuf;

use napi::bindgen_prelude::{AsyncTask, Unknown};
use napi_derive::napi;

use super::config::{core_config_of, SftDatasetConfig};
use super::task::Job;
use super::tokenizer::tokenizer_arg;
use crate::dataset::validate::{validate_file, ValidationReport};
use crate::dataset::{resolve_masking, row_settings, turn_end_of};
use crate::error::Location;
use crate::input::dataset_format::Converter;

#[napi(object)]
pub struct FileProblem {
    /// Physical line number (1-based) of a JSON or JSONL record; absent for Parquet.
    pub line: Option<u32>,
    /// Row (from 0) of a Parquet record; absent for JSON and JSONL.
    pub row: Option<u32>,
    /// Index of the record (non-blank line) from 0.
    pub example: u32,
    pub code: String,
    pub message: String,
}

/// A silent loss in an example that is otherwise valid.
#[napi(object)]
pub struct FileWarning {
    /// As in `FileProblem`.
    pub line: Option<u32>,
    pub row: Option<u32>,
    pub example: u32,
    /// `CONTENT_NOT_RENDERED`, `TOOLS_IGNORED`, `CONTENT_DROPPED_BY_TEMPLATE`,
    /// `DUPLICATE_EXAMPLE`, `CONTROL_TOKEN_IN_CONTENT` or `TOOL_DATA_NOT_RENDERED`.
    pub code: String,
    /// Whether `sft-dataset validate --strict` fails on it (`CONTENT_NOT_RENDERED`,
    /// `TOOLS_IGNORED`, `TOOL_DATA_NOT_RENDERED`).
    pub strict: bool,
    pub message: String,
}

fn line_of(at: Location) -> Option<u32> {
    match at {
        Location::Line(n) => Some(n as u32),
        Location::Row(_) => None,
    }
}

fn row_of(at: Location) -> Option<u32> {
    match at {
        Location::Row(n) => Some(n as u32),
        Location::Line(_) => None,
    }
}

#[napi(object)]
pub struct FileValidation {
    /// Records read (non-blank lines).
    pub examples: u32,
    /// `'prompt-completion'`, `'conversation'`, or null when no record is valid.
    pub format: Option<String>,
    /// The dataset format records were read as (with `format: 'auto'`, the detected one).
    pub dataset_format: Option<String>,
    /// How the file stores its records, as detected from its content: `'jsonl'`, `'json'` or
    /// `'parquet'`, with `'+gzip'` or `'+zstd'` when compressed.
    pub file_format: String,
    pub problems: Vec<FileProblem>,
    /// Silent losses (see the README): classes `CONTENT_NOT_RENDERED`,
    /// `CONTENT_DROPPED_BY_TEMPLATE`, `CONTROL_TOKEN_IN_CONTENT` and `TOOL_DATA_NOT_RENDERED` need
    /// a tokenizer.
    pub warnings: Vec<FileWarning>,
}

fn to_js(report: ValidationReport) -> FileValidation {
    FileValidation {
        examples: report.examples as u32,
        format: report.format.map(|f| f.name().to_string()),
        dataset_format: report.dataset_format.map(|f| f.name().to_string()),
        file_format: report.file_kind.map_or(String::new(), |k| k.name()),
        problems: report
            .problems
            .into_iter()
            .map(|p| FileProblem {
                line: line_of(p.at),
                row: row_of(p.at),
                example: p.example as u32,
                code: p.code.as_str().to_string(),
                message: p.message,
            })
            .collect(),
        warnings: report
            .warnings
            .into_iter()
            .map(|w| FileWarning {
                line: line_of(w.at),
                row: row_of(w.at),
                example: w.example as u32,
                code: w.kind.code().to_string(),
                strict: w.kind.strict(),
                message: w.message,
            })
            .collect(),
    }
}

/// Checks every record of a data file (JSONL, JSON, Parquet, gzip or zstd; see `loadSFTDataset`) and reports every problem, not just the first. With a
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
            let config = core_config_of(config)?;
            let converter = Converter::new(config.input.clone())?;
            let Some(tokenizer) = tokenizer? else {
                return validate_file(&file, &converter, config.tools, None);
            };
            let masking = resolve_masking(&tokenizer, &config)?;
            let turn_end = turn_end_of(&tokenizer, &config);
            let settings = row_settings(&config, &masking, turn_end.as_ref());
            validate_file(
                &file,
                &converter,
                config.tools,
                Some((&tokenizer, &settings)),
            )
        },
        |_, report| Ok(to_js(report)),
    ))
}
