//! `loadSFTDataset`'s file pass: stream the records (`input`), parse and validate every one, and
//! build every row on all cores while the next records are read. Nothing but the rows is kept, so peak
//! memory stays near the token cache whatever the file size.

use std::path::Path;
use std::sync::mpsc::sync_channel;

use rayon::prelude::*;

use crate::dataset_format::{Converter, DatasetFormat};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::{validate_record, Format};
use crate::input::{Location, RawRecord, RecordReader};
use crate::packed_rows::PackedRows;
use crate::row::{build_row, RowSettings, TokenizedRow};
use crate::silent_loss::{duplicate_key, LossKind, LossSummary};
use crate::tokenizer::ChatTokenizer;

/// A chunk of lines is parsed and tokenized in parallel while the next one is read. Large chunks
/// keep both cores busy to the end of each chunk; the byte bound keeps memory flat on files with
/// huge lines. The first chunk is small, so that the cores start while the rest is read, and each
/// next one doubles up to the full size.
const CHUNK_LINES: usize = 4096;
const FIRST_CHUNK_LINES: usize = 128;
const CHUNK_BYTES: usize = 8 << 20;
/// Records per unit of work stealing. rayon splits a chunk in halves only as deep as its thread
/// count asks, so a core that finishes early could wait on the other's last half-chunk; pieces
/// this small keep the end of every chunk balanced.
pub const PARALLEL_GRAIN: usize = 4;

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
        read_as: DatasetFormat,
        key: u64,
        row: SftResult<TokenizedRow>,
        at: Location,
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
    /// The first record whose format differs from record 0's: its index, format and line or
    /// row.
    pub first_inconsistent: Option<(usize, Format, Location)>,
    /// The silent losses found, by class.
    pub losses: LossSummary,
}

/// Reads, parses and validates the whole file, in the reference's order of errors: a parse error
/// anywhere wins over a validation error, and the first of each kind is reported. Rows are built
/// only while no error has been seen and `settings` is given.
pub fn load_rows(
    path: &Path,
    tokenizer: &ChatTokenizer,
    settings: Option<&RowSettings>,
    converter: &Converter,
    options: &LoadOptions,
) -> SftResult<LoadedRows> {
    let mut reader = RecordReader::open(path, &converter.top_level_keys())?;
    let shown = reader.path().to_string();
    let container = reader.kind().container;
    let limit = options.limit.unwrap_or(usize::MAX);
    let (sender, receiver) = sync_channel::<SftResult<(Vec<RawRecord>, u64)>>(4);

    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut taken = 0usize;
            let mut ended = false;
            let mut lines = FIRST_CHUNK_LINES;
            while taken < limit && !ended {
                let mut chunk = Vec::new();
                let mut chunk_bytes = 0;
                let mut failed = None;
                while chunk.len() < lines && chunk_bytes < CHUNK_BYTES && taken < limit {
                    match reader.next_record() {
                        Ok(Some(record)) => {
                            chunk_bytes += record.size_hint();
                            taken += 1;
                            chunk.push(record);
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
                lines = (lines * 2).min(CHUNK_LINES);
                let bytes = reader.bytes_read();
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
        let mut read_as_first: Option<DatasetFormat> = None;
        let mut seen = rustc_hash::FxHashSet::<u64>::default();
        let mut losses = LossSummary::default();
        for message in receiver {
            let (chunk, bytes) = message?;
            let base = rows.len();
            let mut built = Vec::with_capacity(chunk.len());
            let building = first_invalid.is_none();
            let outcomes: Vec<SftResult<LineOutcome>> = chunk
                .into_par_iter()
                .with_max_len(PARALLEL_GRAIN)
                .enumerate()
                .map(|(k, raw)| {
                    let at = raw.at;
                    let record = raw.parse(&shown, container)?;
                    let converted =
                        converter
                            .convert(record, base + k)
                            .and_then(|(record, read_as)| {
                                Ok((validate_record(record, base + k)?, read_as))
                            });
                    let (example, read_as) = match converted {
                        Ok(example) => example,
                        Err(e) => return Ok(LineOutcome::Invalid(e.at(&shown, at))),
                    };
                    let format = example.format();
                    let key = duplicate_key(&example);
                    // Template and message errors say which example they are about: the
                    // record's index alongside the file and line.
                    let row = match (building, settings) {
                        (true, Some(s)) => build_row(tokenizer, s, example).map_err(|e| {
                            e.context(format_args!("SFT example {}", base + k))
                                .at(&shown, at)
                        }),
                        _ => Err(not_built()),
                    };
                    Ok(LineOutcome::Valid {
                        format,
                        read_as,
                        key,
                        row,
                        at,
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
                        read_as,
                        key,
                        mut row,
                        at,
                    } => {
                        let index = base + built.len();
                        match read_as_first {
                            None => read_as_first = Some(read_as),
                            Some(first)
                                if !Converter::compatible(first, read_as) && format == Some(f) =>
                            {
                                first_invalid.get_or_insert(
                                    mixed_formats(first, index, read_as).at(&shown, at),
                                );
                            }
                            _ => {}
                        }
                        match format {
                            None => format = Some(f),
                            Some(first) if first != f && first_inconsistent.is_none() => {
                                first_inconsistent = Some((index, f, at))
                            }
                            _ => {}
                        }
                        if let Ok(row) = &mut row {
                            if !seen.insert(key) {
                                row.mark_loss(LossKind::DuplicateExample);
                            }
                            losses.add(index, row.stats().losses);
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
            losses,
        })
    })
}

/// `format: 'auto'`: a record in another dataset format than record 0.
pub fn mixed_formats(first: DatasetFormat, index: usize, other: DatasetFormat) -> SftError {
    SftError::new(
        ErrorCode::InvalidExample,
        format!(
            "Inconsistent dataset format: example 0 is {}, example {index} is {} (format 'auto' reads a file in one format)",
            first.name(),
            other.name()
        ),
    )
}
