//! Whole-file validation for `sft-dataset validate`: every problem of every line, not just the
//! first, each with its physical line number. Optionally renders and tokenizes every example so
//! template errors show up too.

use std::path::Path;

use rayon::prelude::*;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::{validate_record, Format};
use crate::jsonl::{parse_line, JsonlReader};
use crate::row::{build_row, RowSettings};
use crate::tokenizer::ChatTokenizer;

#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub line: usize,
    /// The record index (non-blank lines counted from 0) the problem belongs to.
    pub example: usize,
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct ValidationReport {
    pub examples: usize,
    pub format: Option<Format>,
    pub problems: Vec<Problem>,
}

const CHUNK: usize = 512;

pub fn validate_file(
    path: &Path,
    tokenizer: Option<(&ChatTokenizer, &RowSettings)>,
) -> SftResult<ValidationReport> {
    let mut reader = JsonlReader::open(path)?;
    let shown = reader.path().to_string();
    let mut report = ValidationReport::default();
    loop {
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut done = false;
        while chunk.len() < CHUNK {
            match reader.next_line() {
                Ok(Some(line)) => chunk.push(Ok(line)),
                Ok(None) => {
                    done = true;
                    break;
                }
                // An undecodable line is a problem of that line; the reader moves on.
                Err(e) if e.code == ErrorCode::JsonlParse => chunk.push(Err((reader.line(), e))),
                Err(e) => return Err(e),
            }
        }
        let base = report.examples;
        let results: Vec<(usize, SftResult<Format>)> = chunk
            .into_par_iter()
            .enumerate()
            .map(|(k, line)| {
                let line = match line {
                    Ok(line) => line,
                    Err((number, e)) => return (number, Err(e)),
                };
                let outcome = parse_line(&shown, &line)
                    .and_then(|record| validate_record(record, base + k))
                    .and_then(|example| {
                        let format = example.format();
                        if let Some((t, settings)) = tokenizer {
                            build_row(t, settings, example)?;
                        }
                        Ok(format)
                    });
                (line.line, outcome)
            })
            .collect();
        for (line, outcome) in results {
            let index = report.examples;
            report.examples += 1;
            let problem = match outcome {
                Ok(format) => match report.format {
                    None => {
                        report.format = Some(format);
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
                },
                Err(e) => Some(e),
            };
            if let Some(e) = problem {
                report.problems.push(Problem {
                    line,
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
        let report = validate_file(&file, None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(report.examples, 4);
        assert_eq!(report.format, Some(Format::Conversation));
        let lines: Vec<(usize, ErrorCode)> =
            report.problems.iter().map(|p| (p.line, p.code)).collect();
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
