//! `loadSFTDataset`'s file pass: stream the JSONL, parse and validate every record, and build
//! every row on all cores while the next lines are read. Nothing but the rows is kept, so peak
//! memory stays near the token cache whatever the file size.

use std::path::Path;
use std::sync::mpsc::sync_channel;

use rayon::prelude::*;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::{validate_record, Format};
use crate::jsonl::{parse_line, JsonlLine, JsonlReader};
use crate::packed_rows::PackedRows;
use crate::row::{build_row, RowSettings, TokenizedRow};
use crate::tokenizer::ChatTokenizer;

/// A chunk of lines is parsed and tokenized in parallel while the next one is read. Large chunks
/// keep both cores busy to the end of each chunk; the byte bound keeps memory flat on files with
/// huge lines.
const CHUNK_LINES: usize = 4096;
const CHUNK_BYTES: usize = 8 << 20;

/// Progress of a load, reported after each chunk.
#[derive(Debug, Clone, Copy)]
pub struct LoadProgress {
    pub records: usize,
    pub bytes: u64,
}

#[derive(Default)]
pub struct LoadOptions {
    /// Read at most this many records (the reference's `limit`; `None` reads all).
    pub limit: Option<usize>,
    pub on_progress: Option<Box<dyn Fn(LoadProgress) + Send + Sync>>,
}

/// What one line turned into.
enum LineOutcome {
    /// Parsed but not a valid example.
    Invalid(SftError),
    /// A valid example and its row (not built once the load is known to fail).
    Valid {
        format: Format,
        row: SftResult<TokenizedRow>,
        line: usize,
    },
}

/// A placeholder for rows skipped because the load fails anyway; never reaches a caller.
fn not_built() -> SftError {
    SftError::new(ErrorCode::Internal, "row not built: the load failed")
}

pub struct LoadedRows {
    /// Every row, packed as each chunk is built.
    pub rows: PackedRows,
    pub format: Format,
    /// The first record whose format differs from record 0's: its index, format and physical
    /// line.
    pub first_inconsistent: Option<(usize, Format, usize)>,
}

/// Reads, parses and validates the whole file, in the reference's order of errors: a parse error
/// anywhere wins over a validation error, and the first of each kind is reported. Rows are built
/// only while no error has been seen and `settings` is given.
pub fn load_rows(
    path: &Path,
    tokenizer: &ChatTokenizer,
    settings: Option<&RowSettings>,
    options: &LoadOptions,
) -> SftResult<LoadedRows> {
    let mut reader = JsonlReader::open(path)?;
    let shown = reader.path().to_string();
    let limit = options.limit.unwrap_or(usize::MAX);
    let (sender, receiver) = sync_channel::<SftResult<(Vec<JsonlLine>, u64)>>(4);

    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut taken = 0usize;
            let mut bytes = 0u64;
            let mut ended = false;
            while taken < limit && !ended {
                let mut chunk = Vec::new();
                let mut chunk_bytes = 0;
                let mut failed = None;
                while chunk.len() < CHUNK_LINES && chunk_bytes < CHUNK_BYTES && taken < limit {
                    match reader.next_line() {
                        Ok(Some(line)) => {
                            bytes += line.text.len() as u64 + 1;
                            chunk_bytes += line.text.len();
                            taken += 1;
                            chunk.push(line);
                        }
                        Ok(None) => {
                            ended = true;
                            break;
                        }
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                if !chunk.is_empty() && sender.send(Ok((chunk, bytes))).is_err() {
                    return;
                }
                if let Some(e) = failed {
                    let _ = sender.send(Err(e));
                    return;
                }
            }
        });

        let mut rows = PackedRows::default();
        let mut first_invalid: Option<SftError> = None;
        let mut format: Option<Format> = None;
        let mut first_inconsistent = None;
        for message in receiver {
            let (chunk, bytes) = message?;
            let base = rows.len();
            let mut built = Vec::with_capacity(chunk.len());
            let building = first_invalid.is_none();
            let outcomes: Vec<SftResult<LineOutcome>> = chunk
                .par_iter()
                .enumerate()
                .map(|(k, line)| {
                    let record = parse_line(&shown, line)?;
                    let example = match validate_record(record, base + k) {
                        Ok(example) => example,
                        Err(e) => return Ok(LineOutcome::Invalid(e.at_line(&shown, line.line))),
                    };
                    let format = example.format();
                    // Template and message errors say which example they are about: the
                    // record's index alongside the file and line.
                    let row = match (building, settings) {
                        (true, Some(s)) => build_row(tokenizer, s, example).map_err(|e| {
                            e.context(format_args!("SFT example {}", base + k))
                                .at_line(&shown, line.line)
                        }),
                        _ => Err(not_built()),
                    };
                    Ok(LineOutcome::Valid {
                        format,
                        row,
                        line: line.line,
                    })
                })
                .collect();
            for outcome in outcomes {
                match outcome? {
                    LineOutcome::Invalid(e) => {
                        first_invalid.get_or_insert(e);
                        built.push(Err(not_built()));
                    }
                    LineOutcome::Valid {
                        format: f,
                        row,
                        line,
                    } => {
                        match format {
                            None => format = Some(f),
                            Some(first) if first != f && first_inconsistent.is_none() => {
                                first_inconsistent = Some((base + built.len(), f, line))
                            }
                            _ => {}
                        }
                        built.push(row);
                    }
                }
            }
            rows.push_rows(built);
            if let Some(report) = &options.on_progress {
                report(LoadProgress {
                    records: rows.len(),
                    bytes,
                });
            }
        }
        if let Some(e) = first_invalid {
            return Err(e);
        }
        Ok(LoadedRows {
            rows,
            format: format.unwrap_or(Format::Conversation),
            first_inconsistent,
        })
    })
}
