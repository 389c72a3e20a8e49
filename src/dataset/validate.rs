//! Whole-file validation for `sft-dataset validate`: every problem of every record, not just the
//! first, each with its physical line (JSON, JSONL) or row (Parquet). Optionally renders and tokenizes every example so
//! template errors show up too.

use std::path::Path;

use rayon::prelude::*;

use crate::dataset::loader::mixed_formats;
use crate::error::Location;
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::train_flags::first_flagged;
use crate::example::ToolsMode;
use crate::example::{validate_record, Format};
use crate::input::dataset_format::{Converter, DatasetFormat};
use crate::input::{FileKind, RecordReader};
use crate::mask::silent_loss::{
    duplicate_key, tools_finding, ExampleKey, Finding, LossChecker, LossKind,
};
use crate::rows::{build_row_checked, RowSettings};
use crate::tokenize::ChatTokenizer;
use rustc_hash::FxHashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub at: Location,
    /// The record index (non-blank lines counted from 0) the problem belongs to.
    pub example: usize,
    pub code: ErrorCode,
    pub message: String,
}

/// A silent loss in an example that is otherwise valid (see `silent_loss`).
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub at: Location,
    pub example: usize,
    pub kind: LossKind,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct ValidationReport {
    /// Silent losses, in file order: classes 1, 3 and 5 need a tokenizer.
    pub warnings: Vec<Warning>,
    pub examples: usize,
    pub format: Option<Format>,
    /// The dataset format records were read as (`format: 'auto'` names the detected one).
    pub dataset_format: Option<DatasetFormat>,
    pub file_kind: Option<FileKind>,
    pub problems: Vec<Problem>,
}

const CHUNK: usize = 512;

pub fn validate_file(
    path: &Path,
    converter: &Converter,
    tools: ToolsMode,
    tokenizer: Option<(&ChatTokenizer, &RowSettings)>,
) -> SftResult<ValidationReport> {
    let checker = tokenizer.map(|(t, s)| LossChecker::new(t, tools, s.sanitize));
    let settings = tokenizer.map(|(t, s)| {
        (
            t,
            RowSettings {
                loss: checker.as_ref(),
                tools,
                ..*s
            },
        )
    });
    let mut seen: FxHashMap<ExampleKey, usize> = FxHashMap::default();
    let mut reader = RecordReader::open(path, &converter.top_level_keys())?;
    let shown = reader.path().to_string();
    let container = reader.kind().container;
    let mut report = ValidationReport {
        file_kind: Some(reader.kind()),
        ..Default::default()
    };
    loop {
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut done = false;
        while chunk.len() < CHUNK {
            match reader.next_record() {
                Ok(Some(record)) => chunk.push(Ok(record)),
                Ok(None) => {
                    done = true;
                    break;
                }
                // An undecodable line is a problem of that line; the reader moves on.
                Err(e)
                    if e.code == ErrorCode::JsonlParse
                        && reader.kind().container == crate::input::Container::Jsonl =>
                {
                    chunk.push(Err((reader.location(), e)))
                }
                Err(e) => return Err(e),
            }
        }
        let base = report.examples;
        type Outcome = (Format, DatasetFormat, ExampleKey, Vec<Finding>);
        let results: Vec<(Location, SftResult<Outcome>)> = chunk
            .into_par_iter()
            .enumerate()
            .map(|(k, record)| {
                let record = match record {
                    Ok(record) => record,
                    Err((at, e)) => return (at, Err(e)),
                };
                let at = record.at;
                let outcome = record
                    .parse(&shown, container)
                    .and_then(|record| converter.convert(record, base + k))
                    .and_then(|(record, read_as)| {
                        let example = validate_record(record, base + k)?;
                        first_flagged(&example)
                            .map_err(|e| e.context(format_args!("SFT example {}", base + k)))?;
                        let format = example.format();
                        let key = duplicate_key(&example);
                        let findings = match &settings {
                            Some((t, settings)) => build_row_checked(t, settings, example)?.1,
                            None => tools_finding(&example, tools).into_iter().collect(),
                        };
                        Ok((format, read_as, key, findings))
                    });
                (at, outcome)
            })
            .collect();
        for (at, outcome) in results {
            let index = report.examples;
            report.examples += 1;
            let problem = match outcome {
                Ok((format, read_as, _, _))
                    if report.format == Some(format)
                        && report
                            .dataset_format
                            .is_some_and(|first| !Converter::compatible(first, read_as)) =>
                {
                    report
                        .dataset_format
                        .map(|first| mixed_formats(first, index, read_as))
                }
                Ok((format, read_as, key, findings)) => {
                    let mut findings = findings;
                    match seen.entry(key) {
                        std::collections::hash_map::Entry::Occupied(first) => {
                            findings.push(Finding {
                                kind: LossKind::DuplicateExample,
                                message: format!("an exact copy of example {}", first.get()),
                            })
                        }
                        std::collections::hash_map::Entry::Vacant(slot) => {
                            slot.insert(index);
                        }
                    }
                    report
                        .warnings
                        .extend(findings.into_iter().map(|f| Warning {
                            at,
                            example: index,
                            kind: f.kind,
                            message: f.message,
                        }));
                    match report.format {
                        None => {
                            report.format = Some(format);
                            report.dataset_format = Some(read_as);
                            None
                        }
                        Some(first) if first != format => Some(SftError::new(
                            ErrorCode::InvalidExample,
                            format!(
                            "Inconsistent SFT data format: example 0 is {}, example {index} is {}",
                            first.name(),
                            format.name()
                        ),
                        )),
                        _ => None,
                    }
                }
                Err(e) => Some(e),
            };
            if let Some(e) = problem {
                report.problems.push(Problem {
                    at,
                    example: index,
                    code: e.code,
                    message: e.message,
                });
            }
        }
        if done {
            return Ok(report);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_every_problem_with_its_line() {
        let dir = std::env::temp_dir().join(format!("sft-validate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("d.jsonl");
        std::fs::write(
            &file,
            "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}]}\n\n{bad\n[1]\n{\"prompt\": [], \"completion\": {\"role\": \"assistant\", \"content\": \"x\"}}\n",
        )
        .unwrap();
        let converter = Converter::new(Default::default()).unwrap();
        let report = validate_file(&file, &converter, ToolsMode::Ignore, None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(report.examples, 4);
        assert_eq!(report.format, Some(Format::Conversation));
        let lines: Vec<(usize, ErrorCode)> = report
            .problems
            .iter()
            .map(|p| (p.at.number(), p.code))
            .collect();
        assert_eq!(
            lines,
            vec![
                (3, ErrorCode::JsonlParse),
                (4, ErrorCode::InvalidExample),
                (5, ErrorCode::InvalidExample)
            ]
        );
        assert_eq!(
            report.problems[2].message,
            "Inconsistent SFT data format: example 0 is conversation, example 3 is prompt-completion"
        );
    }
}
