//! `loadSFTDataset`'s file pass: stream the records (`input`), parse and validate every one, and
//! build every row on all cores while the next records are read. Nothing but the rows is kept, so peak
//! memory stays near the token cache whatever the file size.

use std::path::Path;
use std::sync::mpsc::sync_channel;

use rayon::prelude::*;

use crate::dataset_format::{Converter, DatasetFormat};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::{validate_record, Format, SftExample};
use crate::input::{Location, RawRecord, RecordReader};
use crate::packed_rows::PackedRows;
use crate::row::{build_row, RowSettings, TokenizedRow};
use crate::silent_loss::{duplicate_key, ExampleKey, LossKind, LossSummary};
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
// Nearly every line is valid: boxing its example would cost an allocation a record to save a
// few bytes on the rare invalid one.
#[allow(clippy::large_enum_variant)]
enum LineOutcome {
    /// Parsed but not a valid example.
    Invalid(SftError),
    /// A valid example, still to be turned into its row.
    Valid {
        format: Format,
        read_as: DatasetFormat,
        key: ExampleKey,
        /// Whether the example carries distillation targets.
        distilled: bool,
        /// Taken when its row is built.
        example: Option<SftExample>,
        at: Location,
    },
}

/// In the loader's map of keys: the first row with this key is not to be copied.
const NO_SOURCE: u32 = u32::MAX;

/// How a valid line gets its row.
#[derive(Clone, Copy)]
enum Source {
    /// Built from its example.
    Build,
    /// A copy of the row of an earlier record with the same key: both lack distillation
    /// targets, so the same messages, tools and format make the same row.
    Copy(usize),
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
/// only while no error has been seen and `settings` is given. A record that repeats an earlier one
/// (same duplicate key, neither with distillation targets) is not rendered or tokenized again
/// (inside a chunk, two tasks racing for a key may both build it, rarely): its row is a copy of
/// the earlier row.
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
        // Per key of an example whose row came out whole: the record to copy that row from
        // (`NO_SOURCE` if it has distillation targets). 24 bytes an entry.
        let mut seen = rustc_hash::FxHashMap::<ExampleKey, u32>::default();
        let mut losses = LossSummary::default();
        for message in receiver {
            let (chunk, bytes) = message?;
            seen.reserve(chunk.len());
            let base = rows.len();
            let building = first_invalid.is_none() && settings.is_some();
            // Each record is parsed, keyed and, unless it repeats an earlier one, built in one
            // task, so that its values are still in cache when they are rendered and are freed
            // by the thread that made them. Which record of a key is the first in this chunk is
            // settled as the tasks run: a record builds when no record before it has claimed
            // its key yet (a later one may have built too; the merge below copies the first).
            let claims = std::sync::Mutex::new(
                rustc_hash::FxHashMap::<ExampleKey, usize>::with_capacity_and_hasher(
                    chunk.len(),
                    Default::default(),
                ),
            );
            let (outcomes, mut fresh): (Vec<LineOutcome>, Vec<Option<SftResult<TokenizedRow>>>) =
                chunk
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
                            Ok(valid) => valid,
                            Err(e) => return Ok((LineOutcome::Invalid(e.at(&shown, at)), None)),
                        };
                        let key = duplicate_key(&example);
                        let distilled = example.has_distill();
                        // The row to copy came out whole in an earlier chunk: the example is dropped
                        // here, on the thread that made it, as a built one is.
                        let copies_earlier_chunk = building
                            && !distilled
                            && matches!(seen.get(&key), Some(&from) if from != NO_SOURCE);
                        let builds = building
                            && !copies_earlier_chunk
                            && (distilled || claim(&claims, key, base + k));
                        let format = example.format();
                        let (example, row) = if builds {
                            let row = build_one(tokenizer, settings, example, base + k, &shown, at);
                            (None, Some(row))
                        } else if copies_earlier_chunk {
                            (None, None)
                        } else {
                            // Kept for the merge, which builds it if its source's row fails.
                            (Some(example), None)
                        };
                        Ok((
                            LineOutcome::Valid {
                                format,
                                read_as,
                                key,
                                distilled,
                                example,
                                at,
                            },
                            row,
                        ))
                    })
                    .collect::<Vec<SftResult<(LineOutcome, Option<SftResult<TokenizedRow>>)>>>()
                    .into_iter()
                    // The first parse error in the file's order.
                    .collect::<SftResult<Vec<_>>>()?
                    .into_iter()
                    .unzip();
            let sources = if building {
                row_sources(&outcomes, base, &seen)
            } else {
                Vec::new()
            };
            let mut built: Vec<SftResult<TokenizedRow>> = Vec::with_capacity(outcomes.len());
            for (k, outcome) in outcomes.into_iter().enumerate() {
                match outcome {
                    LineOutcome::Invalid(e) => {
                        first_invalid.get_or_insert(e);
                        built.push(Err(not_built()));
                    }
                    LineOutcome::Valid {
                        format: f,
                        read_as,
                        key,
                        distilled,
                        example,
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
                        let copied = match sources.get(k) {
                            Some(&Source::Copy(from)) => {
                                let earlier = if from >= base {
                                    built[from - base].as_ref().ok().cloned()
                                } else {
                                    rows.get(from).ok().map(|row| row.to_row())
                                };
                                // A source whose row failed is no source: this example is built
                                // here, and fails with its own index (or was built already, by a
                                // task that claimed the key before its source did).
                                match (earlier, example) {
                                    (Some(row), _) => Some(Ok(row)),
                                    (None, Some(example)) => Some(build_one(
                                        tokenizer, settings, example, index, &shown, at,
                                    )),
                                    (None, None) => None,
                                }
                            }
                            _ => None,
                        };
                        let mut row = copied
                            .or_else(|| fresh[k].take())
                            .unwrap_or_else(|| Err(not_built()));
                        if let Ok(row) = &mut row {
                            let reusable = match u32::try_from(index) {
                                Ok(index) if !distilled && index != NO_SOURCE => index,
                                _ => NO_SOURCE,
                            };
                            match seen.entry(key) {
                                std::collections::hash_map::Entry::Vacant(v) => {
                                    v.insert(reusable);
                                }
                                std::collections::hash_map::Entry::Occupied(_) => {
                                    row.mark_loss(LossKind::DuplicateExample)
                                }
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

/// Which valid records of a chunk (the first at `base`) are built and which copy an earlier row:
/// a record copies the first one with its key, in an earlier chunk (`seen`) or in this one, when
/// neither carries distillation targets (the only part of an example its key leaves out).
fn row_sources(
    outcomes: &[LineOutcome],
    base: usize,
    seen: &rustc_hash::FxHashMap<ExampleKey, u32>,
) -> Vec<Source> {
    let mut first_here = rustc_hash::FxHashMap::<ExampleKey, usize>::with_capacity_and_hasher(
        outcomes.len(),
        Default::default(),
    );
    outcomes
        .iter()
        .enumerate()
        .map(|(k, outcome)| match outcome {
            LineOutcome::Valid {
                key,
                distilled: false,
                ..
            } => {
                match seen.get(key) {
                    Some(&from) if from != NO_SOURCE => return Source::Copy(from as usize),
                    _ => {}
                }
                match first_here.entry(*key) {
                    std::collections::hash_map::Entry::Occupied(e) => Source::Copy(*e.get()),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(base + k);
                        Source::Build
                    }
                }
            }
            _ => Source::Build,
        })
        .collect()
}

/// Claims `key` for the record at `index` of the current chunk: true when no record before it
/// holds the key (it then holds it), false when one does (that one is built, this one copies it).
fn claim(
    claims: &std::sync::Mutex<rustc_hash::FxHashMap<ExampleKey, usize>>,
    key: ExampleKey,
    index: usize,
) -> bool {
    let mut claims = claims
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match claims.entry(key) {
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(index);
            true
        }
        std::collections::hash_map::Entry::Occupied(mut e) => {
            if index < *e.get() {
                e.insert(index);
                true
            } else {
                false
            }
        }
    }
}

/// Builds one record's row; template and message errors say which example they are about: the
/// record's index alongside the file and line.
fn build_one(
    tokenizer: &ChatTokenizer,
    settings: Option<&RowSettings>,
    example: SftExample,
    index: usize,
    shown: &str,
    at: Location,
) -> SftResult<TokenizedRow> {
    let Some(settings) = settings else {
        return Err(not_built());
    };
    build_row(tokenizer, settings, example)
        .map_err(|e| e.context(format_args!("SFT example {index}")).at(shown, at))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{resolve_masking, row_settings, turn_end_of, DatasetConfig};
    use crate::silent_loss::LossChecker;
    use serde_json::{json, Value as Json};

    /// Records cycling over a few conversations and prompt-completion pairs, so that repeats fall
    /// inside the first chunk and across chunks; some carry distillation targets that do not fit
    /// their rows (their rows fail), one conversation's row fails whatever its targets, and some
    /// carry tools (ignored, a silent loss).
    fn records() -> Vec<Json> {
        (0..400)
            .map(|i| {
                let v = (i * 7) % 23;
                let mut record = if v % 3 == 0 {
                    json!({"prompt": [{"role": "user", "content": format!("question {v}")}],
                           "completion": {"role": "assistant", "content": format!("answer {v}")}})
                } else {
                    json!({"messages": [
                        {"role": "system", "content": "be brief"},
                        {"role": "user", "content": format!("hello {v}")},
                        {"role": "assistant", "content": format!("hi {v}")}]})
                };
                if v == 5 {
                    record["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
                }
                if v == 7 && i % 2 == 0 {
                    record["distill"] = json!({"tokenIds": [[1]], "logprobs": [[0.0]]});
                }
                // Valid as a record, but its row fails: no source for its repeats.
                if v == 13 {
                    record["messages"][2]["tool_calls"] = json!("not a list");
                }
                record
            })
            .collect()
    }

    #[test]
    fn a_repeated_record_gets_the_row_its_own_build_would_give() {
        let Some(tokenizer) = crate::test_support::load_family("qwen3") else {
            return;
        };
        let records = records();
        let dir = std::env::temp_dir().join(format!("sft-loader-dup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("repeats.jsonl");
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, text).unwrap();

        let config = DatasetConfig {
            completion_only: true,
            ..Default::default()
        };
        let converter = Converter::new(config.input.clone()).unwrap();
        let masking = resolve_masking(&tokenizer, &config).unwrap();
        let turn_end = turn_end_of(&tokenizer, &config);
        let checker = LossChecker::new(&tokenizer, config.tools, false);
        let settings = RowSettings {
            loss: Some(&checker),
            ..row_settings(&config, &masking, turn_end.as_ref())
        };
        // Which record of a key is built first depends on the threads' timing: any number of
        // threads, run after run, gives the rows of the file's order.
        let mut runs = Vec::new();
        for threads in [1, 2, 8, 8, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let loaded = pool
                .install(|| {
                    load_rows(
                        &path,
                        &tokenizer,
                        Some(&settings),
                        &converter,
                        &LoadOptions::default(),
                    )
                })
                .unwrap();
            runs.push(loaded);
        }
        std::fs::remove_dir_all(&dir).unwrap();

        for loaded in &runs {
            check_rows(loaded, &records, &tokenizer, &converter, &settings);
        }
    }

    /// Compares every row of `loaded` with its record's own build, a repeat marked as one.
    fn check_rows(
        loaded: &LoadedRows,
        records: &[Json],
        tokenizer: &ChatTokenizer,
        converter: &Converter,
        settings: &RowSettings,
    ) {
        assert_eq!(loaded.rows.len(), records.len());
        // Each record built on its own; a duplicate is one whose key an earlier whole row had.
        let mut seen = std::collections::HashSet::new();
        let (mut copies, mut failed) = (0, 0);
        for (i, record) in records.iter().cloned().enumerate() {
            let (record, _) = converter.convert(record, i).unwrap();
            let example = validate_record(record, i).unwrap();
            let key = duplicate_key(&example);
            let expected = build_row(tokenizer, settings, example);
            match (loaded.rows.get(i), expected) {
                (Ok(got), Ok(mut want)) => {
                    if !seen.insert(key) {
                        want.mark_loss(LossKind::DuplicateExample);
                        copies += 1;
                    }
                    assert_eq!(got.to_row(), want, "record {i}");
                }
                (Err(got), Err(want)) => {
                    assert!(
                        got.to_string().contains(&format!("SFT example {i}")),
                        "{got}"
                    );
                    assert!(
                        got.to_string().contains(&want.to_string()),
                        "{got} / {want}"
                    );
                    failed += 1;
                }
                (got, want) => panic!("record {i}: {:?} / {:?}", got.err(), want.err()),
            }
        }
        assert!(copies > 300, "{copies} repeats");
        assert!(failed > 5, "{failed} failed rows");
        let classes: Vec<_> = loaded.losses.classes.iter().map(|c| (c.0, c.1)).collect();
        assert!(
            classes.contains(&(LossKind::DuplicateExample, copies)),
            "{classes:?}"
        );
    }
}
