//! Input readers: the stage before `example`. A data file becomes a stream of records, whatever
//! it is stored as. The kind is read from the content, never from the extension alone:
//!
//! - Apache Parquet (`PAR1` magic): one record a row, read one row group at a time;
//! - gzip (`1f 8b`) or zstd (`28 b5 2f fd`) streams, decompressed as they are read, holding JSONL
//!   or JSON;
//! - JSON: a file whose first non-blank character is `[` is one array of records, streamed
//!   element by element (unless its first line is a whole JSON value followed by more lines:
//!   then it is JSONL whose records happen to be arrays);
//! - JSONL otherwise.
//!
//! Records keep where they come from: a physical line for JSON and JSONL, a row (from 0) for
//! Parquet. Text records are parsed by the caller, so the loader can parse them on all cores.

pub mod dataset_format;
pub mod json_text;
pub mod jsonl;
pub mod path_security;

mod json_array;
mod json_plain;
mod parquet;

use std::fs::File;
use std::io::{BufReader, Cursor, ErrorKind, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::error::Location;
use crate::error::{ErrorCode, SftError, SftResult};
use crate::input::jsonl::{io_error, read_error, JsonlReader};

pub use json_array::JsonArrayReader;
pub use parquet::ParquetRows;

/// How a file stores its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    Jsonl,
    JsonArray,
    Parquet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// A file's kind, as detected from its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    pub container: Container,
    pub compression: Compression,
}

impl FileKind {
    /// `jsonl`, `json`, `parquet`, with `+gzip` / `+zstd`.
    pub fn name(self) -> String {
        let base = match self.container {
            Container::Jsonl => "jsonl",
            Container::JsonArray => "json",
            Container::Parquet => "parquet",
        };
        match self.compression {
            Compression::None => base.to_string(),
            Compression::Gzip => format!("{base}+gzip"),
            Compression::Zstd => format!("{base}+zstd"),
        }
    }
}

/// One record before parsing.
#[derive(Debug)]
pub enum RecordData {
    /// The JSON text of a JSONL line or of one element of a JSON array.
    Text(String),
    /// A Parquet row, already converted.
    Value(Json),
}

#[derive(Debug)]
pub struct RawRecord {
    pub at: Location,
    pub data: RecordData,
}

impl RawRecord {
    /// The text's length or an estimate of the value's, for chunking.
    pub fn size_hint(&self) -> usize {
        match &self.data {
            RecordData::Text(t) => t.len(),
            RecordData::Value(_) => 256,
        }
    }

    /// Parses the record. serde_json stops at 128 levels of nesting, so a hostile record cannot
    /// exhaust the stack.
    pub fn parse(self, path: &str, container: Container) -> SftResult<Json> {
        match self.data {
            RecordData::Value(v) => Ok(v),
            RecordData::Text(text) => crate::input::json_text::parse(&text).map_err(|e| {
                let (at, what) = crate::input::jsonl::json_error_position(self.at.number(), &e);
                parse_error(path, container, at, what)
            }),
        }
    }
}

/// A JSON text that does not parse: `JSONL_PARSE` for JSONL and JSON alike.
pub fn parse_error(
    path: &str,
    container: Container,
    line: impl std::fmt::Display,
    message: impl std::fmt::Display,
) -> SftError {
    let what = if container == Container::JsonArray {
        "JSON"
    } else {
        "JSONL"
    };
    SftError::new(
        ErrorCode::JsonlParse,
        format!("Failed to parse {what} at {path}:{line} - {message}"),
    )
}

type Stream = BufReader<Box<dyn Read + Send>>;

enum Inner {
    Jsonl(JsonlReader<Stream>),
    Array(JsonArrayReader<Stream>),
    Parquet(ParquetRows),
}

/// Counts the bytes read from the file itself (compressed bytes for a compressed file), for
/// progress reports.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A decompression failure (a truncated or corrupt stream): `DECOMPRESS`, naming the file.
fn decompress_error(path: &str, compression: Compression, e: &std::io::Error) -> SftError {
    let what = match compression {
        Compression::Gzip => "gzip",
        _ => "zstd",
    };
    let detail = if e.kind() == ErrorKind::UnexpectedEof {
        "the stream ends before its end marker (truncated file?)".to_string()
    } else {
        e.to_string()
    };
    SftError::new(
        ErrorCode::Decompress,
        format!("Failed to decompress {what} data in {path}: {detail}"),
    )
}

/// Turns read errors of a decompressing stream into `DECOMPRESS` errors.
struct Decompressing<R> {
    inner: R,
    path: String,
    compression: Compression,
}

impl<R: Read> Read for Decompressing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            let err = decompress_error(&self.path, self.compression, &e);
            std::io::Error::other(err)
        })
    }
}

/// The read buffer of a text stream (JSONL, JSON, decompressed text).
const TEXT_BUFFER: usize = 256 << 10;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
const PARQUET_MAGIC: &[u8] = b"PAR1";
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads up to `n` bytes without consuming more than that from `reader`.
fn read_prefix(reader: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut prefix = Vec::with_capacity(n);
    reader.take(n as u64).read_to_end(&mut prefix)?;
    Ok(prefix)
}

/// The records of a data file, one at a time.
pub struct RecordReader {
    path: String,
    kind: FileKind,
    inner: Inner,
    bytes: Arc<AtomicU64>,
}

impl RecordReader {
    /// Opens a data file. `columns` lists the record keys the caller reads: a Parquet file's
    /// other columns are not decoded.
    pub fn open(path: &Path, columns: &[String]) -> SftResult<Self> {
        let shown = path.display().to_string();
        let mut file = File::open(path).map_err(|e| read_error(&shown, &e))?;
        if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            let e = std::io::Error::from(ErrorKind::IsADirectory);
            return Err(read_error(&shown, &e));
        }
        let magic = read_prefix(&mut file, 4).map_err(|e| read_error(&shown, &e))?;
        if magic == PARQUET_MAGIC {
            let mut rows = ParquetRows::open(file, &shown)?;
            rows.project(columns);
            let bytes = rows.bytes_counter();
            return Ok(RecordReader {
                path: shown,
                kind: FileKind {
                    container: Container::Parquet,
                    compression: Compression::None,
                },
                inner: Inner::Parquet(rows),
                bytes,
            });
        }
        let bytes = Arc::new(AtomicU64::new(0));
        let raw = Counting {
            inner: Cursor::new(magic.clone()).chain(file),
            count: bytes.clone(),
        };
        let (compression, stream): (Compression, Box<dyn Read + Send>) =
            if magic.starts_with(GZIP_MAGIC) {
                let decoder = flate2::read::MultiGzDecoder::new(BufReader::new(raw));
                (Compression::Gzip, Box::new(decoder))
            } else if magic == ZSTD_MAGIC {
                let decoder = zstd::stream::read::Decoder::new(raw)
                    .map_err(|e| decompress_error(&shown, Compression::Zstd, &e))?;
                (Compression::Zstd, Box::new(decoder))
            } else {
                (Compression::None, Box::new(raw))
            };
        let stream: Box<dyn Read + Send> = if compression == Compression::None {
            stream
        } else {
            Box::new(Decompressing {
                inner: stream,
                path: shown.clone(),
                compression,
            })
        };
        Self::from_text_stream(stream, shown, compression, bytes)
    }

    /// Sniffs JSON against JSONL on the (decompressed) text and builds the reader.
    fn from_text_stream(
        mut stream: Box<dyn Read + Send>,
        path: String,
        compression: Compression,
        bytes: Arc<AtomicU64>,
    ) -> SftResult<Self> {
        // Look ahead to the first non-blank byte, and on to the end of that line when it is a
        // `[`, keeping what was read so the reader sees the whole text.
        let mut seen = Vec::new();
        let mut chunk = [0u8; 8192];
        let mut first: Option<usize> = None;
        let mut is_array = false;
        loop {
            let n = stream.read(&mut chunk).map_err(|e| io_error(&path, &e))?;
            seen.extend_from_slice(&chunk[..n]);
            if first.is_none() {
                let body = seen.strip_prefix(BOM).unwrap_or(&seen);
                let offset = seen.len() - body.len();
                first = body
                    .iter()
                    .position(|b| !b.is_ascii_whitespace())
                    .map(|p| p + offset);
            }
            match first {
                Some(p) if seen[p] != b'[' => break,
                Some(p) => {
                    // JSONL of arrays: a first line that is a whole value, then more records.
                    // Anything else starting with `[` is one JSON array.
                    let newline = seen[p..].iter().position(|&b| b == b'\n').map(|k| p + k);
                    match newline {
                        Some(nl) if !first_line_is_a_record(&seen[p..nl]) => {
                            is_array = true;
                            break;
                        }
                        Some(nl) if seen[nl..].iter().any(|b| !b.is_ascii_whitespace()) => break,
                        _ if n == 0 => {
                            is_array = true;
                            break;
                        }
                        _ => {}
                    }
                }
                None if n == 0 => break,
                None => {}
            }
        }
        let text: Box<dyn Read + Send> = Box::new(Cursor::new(seen).chain(stream));
        // std zeroes the buffer before its first fill (the counting reader under the chain
        // implements only `read`): once per load, so 256 KiB, not more. A longer line is still
        // read whole.
        let reader = BufReader::with_capacity(TEXT_BUFFER, text);
        let (container, inner) = if is_array {
            (
                Container::JsonArray,
                Inner::Array(JsonArrayReader::new(reader, path.clone())),
            )
        } else {
            (
                Container::Jsonl,
                Inner::Jsonl(JsonlReader::new(reader, path.clone())),
            )
        };
        Ok(RecordReader {
            path,
            kind: FileKind {
                container,
                compression,
            },
            inner,
            bytes,
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// Bytes read from the file so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Where the reader stands: the last line read, or the next row.
    pub fn location(&self) -> Location {
        match &self.inner {
            Inner::Jsonl(r) => Location::Line(r.line()),
            Inner::Array(r) => Location::Line(r.line()),
            Inner::Parquet(r) => Location::Row(r.next_row()),
        }
    }

    /// The next record, `None` at the end of the file. After an error that is not about one
    /// record (`JSONL_PARSE` of a JSONL line is), stop reading.
    pub fn next_record(&mut self) -> SftResult<Option<RawRecord>> {
        match &mut self.inner {
            Inner::Jsonl(r) => Ok(r.next_line()?.map(|l| RawRecord {
                at: Location::Line(l.line),
                data: RecordData::Text(l.text),
            })),
            Inner::Array(r) => r.next_element(),
            Inner::Parquet(r) => r.next_row_record(),
        }
    }
}

/// Whether the first line, starting with `[`, is a whole JSON value (JSONL of arrays) rather
/// than the start of an array spread over several lines; read as its records are (a lone
/// surrogate's escape included).
fn first_line_is_a_record(line: &[u8]) -> bool {
    std::str::from_utf8(line).is_ok_and(crate::input::json_text::is_json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sft-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        file
    }

    fn records(path: &Path) -> SftResult<(FileKind, Vec<(Location, Json)>)> {
        let mut r = RecordReader::open(path, &[])?;
        let kind = r.kind();
        let mut out = Vec::new();
        while let Some(rec) = r.next_record()? {
            let at = rec.at;
            out.push((at, rec.parse(&path.display().to_string(), kind.container)?));
        }
        Ok((kind, out))
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    const JSONL: &str = "{\"a\":1}\n\n{\"a\":[2,\n3]}\n";

    #[test]
    fn jsonl_json_and_compressed_files_give_the_same_records() {
        let array = "\u{feff}  [\n {\"a\": 1},\n\n {\"a\": \"x]\\\"[\"} ,{\"a\":\n[3]}\n]\n";
        let want_array = vec![
            (Location::Line(2), serde_json::json!({"a": 1})),
            (Location::Line(4), serde_json::json!({"a": "x]\"["})),
            (Location::Line(4), serde_json::json!({"a": [3]})),
        ];
        for (name, bytes, container) in [
            ("a.json", array.as_bytes().to_vec(), Container::JsonArray),
            ("a.json.gz", gzip(array.as_bytes()), Container::JsonArray),
            (
                "a.zst",
                zstd::encode_all(array.as_bytes(), 3).unwrap(),
                Container::JsonArray,
            ),
        ] {
            let (kind, got) = records(&temp(name, &bytes)).unwrap();
            assert_eq!(kind.container, container, "{name}");
            assert_eq!(got, want_array, "{name}");
        }
        let (kind, got) = records(&temp("b.jsonl.gz", &gzip(b"{\"a\":1}\n{\"b\":2}\n"))).unwrap();
        assert_eq!(kind.name(), "jsonl+gzip");
        assert_eq!(
            got.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![Location::Line(1), Location::Line(2)]
        );
        // A multi-line value in JSONL is a parse error of its line, as before.
        let err = records(&temp("c.jsonl", JSONL.as_bytes())).unwrap_err();
        assert_eq!(err.code, ErrorCode::JsonlParse);
        assert!(err.message.contains("c.jsonl:3:8 - EOF"), "{}", err.message);
    }

    #[test]
    fn jsonl_of_arrays_stays_jsonl_and_a_one_line_array_is_json() {
        let (kind, got) = records(&temp("d.jsonl", b"[1]\n[2]\n")).unwrap();
        assert_eq!(kind.container, Container::Jsonl);
        assert_eq!(got.len(), 2);
        let (kind, got) = records(&temp("e.json", b"[{\"a\":1},{\"a\":2}]")).unwrap();
        assert_eq!(kind.container, Container::JsonArray);
        assert_eq!(got[1], (Location::Line(1), serde_json::json!({"a": 2})));
        let (kind, got) = records(&temp("f.json", b"[]\n")).unwrap();
        assert_eq!((kind.container, got.len()), (Container::JsonArray, 0));
        let (kind, got) = records(&temp("g.jsonl", b"")).unwrap();
        assert_eq!((kind.container, got.len()), (Container::Jsonl, 0));
        // A lone surrogate's escape on the first line does not make it the start of an array.
        let (kind, got) = records(&temp("h.jsonl", b"[\"\\ud800\"]\n[2]\n")).unwrap();
        assert_eq!(kind.container, Container::Jsonl);
        assert_eq!(got[0].1, serde_json::json!(["\u{FFFD}"]));
    }

    #[test]
    fn broken_files_give_coded_errors_naming_the_file() {
        let valid = "{\"a\": [1, 2, 3], \"b\": \"text\"}\n".repeat(5000);
        let whole = gzip(valid.as_bytes());
        let path = temp("t.jsonl.gz", &whole[..whole.len() / 2]);
        let err = records(&path).unwrap_err();
        assert_eq!(err.code, ErrorCode::Decompress, "{}", err.message);
        assert_eq!(
            err.message,
            format!(
                "Failed to decompress gzip data in {}: the stream ends before its end marker (truncated file?)",
                path.display()
            )
        );
        let whole = zstd::encode_all(valid.as_bytes(), 3).unwrap();
        let path = temp("t.jsonl.zst", &whole[..whole.len() / 2]);
        let err = records(&path).unwrap_err();
        assert_eq!(err.code, ErrorCode::Decompress);
        assert!(err.message.contains(&path.display().to_string()));

        let path = temp("open.json", b"[{\"a\": 1},\n{\"a\": 2}\n");
        let err = records(&path).unwrap_err();
        assert_eq!(err.code, ErrorCode::JsonlParse);
        assert_eq!(
            err.message,
            format!(
                "Failed to parse JSON at {}:2 - the array opened at line 1 is never closed (end of file after 2 records)",
                path.display()
            )
        );
    }
}
