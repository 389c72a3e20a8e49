//! Apache Parquet input: one record a row, read one row group at a time (and, inside a row
//! group, page by page), so memory holds one batch of rows however large the file is.
//!
//! Columns become record keys. Nested columns become JSON: lists become arrays, structs and maps
//! become objects. A null value of a struct field or top-level column means the key is absent, as
//! in a JSONL record that does not write it: a Parquet schema gives every message every field
//! that any message has (`tool_calls` on user messages, say), and templates must not see those.

use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{ArrowError, DataType};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::errors::ParquetError;
use serde_json::{Map, Number, Value as Json};

use super::{RawRecord, RecordData};
use crate::error::Location;
use crate::error::{ErrorCode, SftError, SftResult};

/// Rows a decoded batch holds: small enough that a batch of long conversations stays small.
const BATCH_ROWS: usize = 256;

fn parquet_error(path: &str, e: impl std::fmt::Display) -> SftError {
    SftError::new(
        ErrorCode::ParquetRead,
        format!("Failed to read Parquet file {path}: {e}"),
    )
}

pub struct ParquetRows {
    path: String,
    file: File,
    metadata: ArrowReaderMetadata,
    projection: Option<ProjectionMask>,
    next_group: usize,
    batches: Option<ParquetRecordBatchReader>,
    batch: Option<(RecordBatch, usize)>,
    row: usize,
    bytes: Arc<AtomicU64>,
}

impl ParquetRows {
    pub fn open(file: File, path: &str) -> SftResult<Self> {
        let metadata = catch_unwind(AssertUnwindSafe(|| {
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
        }))
        .map_err(|p| parquet_error(path, format_args!("corrupt metadata ({})", panic_text(&p))))?
        .map_err(|e| parquet_error(path, e))?;
        Ok(ParquetRows {
            path: path.to_string(),
            file,
            metadata,
            projection: None,
            next_group: 0,
            batches: None,
            batch: None,
            row: 0,
            bytes: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Reads only the top-level columns named in `columns` (those that exist; all of them when
    /// `columns` is empty): a dataset's other columns (images, metadata) are never decoded.
    pub fn project(&mut self, columns: &[String]) {
        if columns.is_empty() {
            return;
        }
        let schema = self.metadata.schema();
        let roots: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| columns.contains(f.name()))
            .map(|(i, _)| i)
            .collect();
        let descr = self.metadata.metadata().file_metadata().schema_descr();
        self.projection = Some(ProjectionMask::roots(descr, roots));
    }

    pub fn bytes_counter(&self) -> Arc<AtomicU64> {
        self.bytes.clone()
    }

    /// The row the next record will be.
    pub fn next_row(&self) -> usize {
        self.row
    }

    fn next_batch(&mut self) -> SftResult<Option<RecordBatch>> {
        loop {
            if let Some(batches) = &mut self.batches {
                // A decoder that panics on corrupt data must not take the process down.
                let next = catch_unwind(AssertUnwindSafe(|| batches.next())).unwrap_or_else(|p| {
                    Some(Err(ArrowError::ComputeError(format!(
                        "corrupt data ({})",
                        panic_text(&p)
                    ))))
                });
                match next {
                    Some(Ok(batch)) => return Ok(Some(batch)),
                    Some(Err(e)) => {
                        return Err(parquet_error(
                            &self.path,
                            format_args!("row group {}: {e}", self.next_group - 1),
                        ))
                    }
                    None => self.batches = None,
                }
            }
            let groups = self.metadata.metadata().num_row_groups();
            if self.next_group >= groups {
                return Ok(None);
            }
            let group = self.next_group;
            self.next_group += 1;
            let file = self
                .file
                .try_clone()
                .map_err(|e| parquet_error(&self.path, e))?;
            let mut builder =
                ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.metadata.clone())
                    .with_row_groups(vec![group])
                    .with_batch_size(BATCH_ROWS);
            if let Some(mask) = &self.projection {
                builder = builder.with_projection(mask.clone());
            }
            let reader = catch_unwind(AssertUnwindSafe(|| builder.build()))
                .unwrap_or_else(|p| {
                    Err(ParquetError::General(format!(
                        "corrupt data ({})",
                        panic_text(&p)
                    )))
                })
                .map_err(|e| parquet_error(&self.path, format_args!("row group {group}: {e}")))?;
            let size = self.metadata.metadata().row_group(group).compressed_size();
            self.bytes.fetch_add(size.max(0) as u64, Ordering::Relaxed);
            self.batches = Some(reader);
        }
    }

    pub fn next_row_record(&mut self) -> SftResult<Option<RawRecord>> {
        loop {
            if let Some((batch, pos)) = &mut self.batch {
                if *pos < batch.num_rows() {
                    let i = *pos;
                    *pos += 1;
                    let row = self.row;
                    self.row += 1;
                    let value = row_value(batch, i)
                        .map_err(|e| parquet_error(&self.path, format_args!("row {row}: {e}")))?;
                    return Ok(Some(RawRecord {
                        at: Location::Row(row),
                        data: RecordData::Value(value),
                    }));
                }
                self.batch = None;
            }
            match self.next_batch()? {
                Some(batch) => self.batch = Some((batch, 0)),
                None => return Ok(None),
            }
        }
    }
}

fn panic_text(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "the decoder failed".to_string())
}

fn row_value(batch: &RecordBatch, i: usize) -> Result<Json, String> {
    let mut object = Map::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if let Some(v) =
            value_at(column.as_ref(), i).map_err(|e| format!("column {}: {e}", field.name()))?
        {
            object.insert(field.name().clone(), v);
        }
    }
    Ok(Json::Object(object))
}

fn number(v: f64) -> Json {
    Number::from_f64(v).map_or(Json::Null, Json::Number)
}

fn text(bytes: &[u8]) -> Result<Json, String> {
    std::str::from_utf8(bytes)
        .map(|s| Json::String(s.to_string()))
        .map_err(|_| "a binary value is not UTF-8 text".to_string())
}

fn list(values: &dyn Array, range: std::ops::Range<usize>) -> Result<Json, String> {
    range
        .map(|k| value_at(values, k).map(|v| v.unwrap_or(Json::Null)))
        .collect::<Result<Vec<_>, _>>()
        .map(Json::Array)
}

/// The JSON value of element `i`; `None` when it is null.
fn value_at(array: &dyn Array, i: usize) -> Result<Option<Json>, String> {
    if array.is_null(i) {
        return Ok(None);
    }
    macro_rules! int {
        ($t:ty) => {
            Json::from(array.as_primitive::<$t>().value(i))
        };
    }
    let value = match array.data_type() {
        DataType::Null => return Ok(None),
        DataType::Boolean => Json::Bool(array.as_boolean().value(i)),
        DataType::Int8 => int!(Int8Type),
        DataType::Int16 => int!(Int16Type),
        DataType::Int32 => int!(Int32Type),
        DataType::Int64 => int!(Int64Type),
        DataType::UInt8 => int!(UInt8Type),
        DataType::UInt16 => int!(UInt16Type),
        DataType::UInt32 => int!(UInt32Type),
        DataType::UInt64 => int!(UInt64Type),
        DataType::Float16 => number(array.as_primitive::<Float16Type>().value(i).to_f64()),
        DataType::Float32 => number(array.as_primitive::<Float32Type>().value(i) as f64),
        DataType::Float64 => number(array.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => Json::String(array.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Json::String(array.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Json::String(array.as_string_view().value(i).to_string()),
        DataType::Binary => text(array.as_binary::<i32>().value(i))?,
        DataType::LargeBinary => text(array.as_binary::<i64>().value(i))?,
        DataType::BinaryView => text(array.as_binary_view().value(i))?,
        DataType::List(_) => {
            let l = array.as_list::<i32>();
            let o = l.value_offsets();
            list(l.values().as_ref(), o[i] as usize..o[i + 1] as usize)?
        }
        DataType::LargeList(_) => {
            let l = array.as_list::<i64>();
            let o = l.value_offsets();
            list(l.values().as_ref(), o[i] as usize..o[i + 1] as usize)?
        }
        DataType::FixedSizeList(_, n) => {
            let l = array.as_fixed_size_list();
            let n = *n as usize;
            list(l.values().as_ref(), i * n..(i + 1) * n)?
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            let mut object = Map::new();
            for (field, column) in fields.iter().zip(s.columns()) {
                if let Some(v) = value_at(column.as_ref(), i)? {
                    object.insert(field.name().clone(), v);
                }
            }
            Json::Object(object)
        }
        DataType::Map(_, _) => {
            let m = array.as_map();
            let o = m.value_offsets();
            let mut object = Map::new();
            for k in o[i] as usize..o[i + 1] as usize {
                let key = match value_at(m.keys().as_ref(), k)? {
                    Some(Json::String(key)) => key,
                    _ => return Err("a map key is not a string".to_string()),
                };
                object.insert(key, value_at(m.values().as_ref(), k)?.unwrap_or(Json::Null));
            }
            Json::Object(object)
        }
        DataType::Dictionary(_, _) => {
            let d = array.as_any_dictionary();
            let key = d.normalized_keys()[i];
            return value_at(d.values().as_ref(), key);
        }
        other => return Err(format!("values of type {other} cannot become JSON")),
    };
    Ok(Some(value))
}
