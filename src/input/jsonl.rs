//! Streaming JSONL: one record a line, read without holding the file in memory.
//!
//! Blank and whitespace-only lines are skipped as the reference does, but line numbers in errors
//! count physical lines (the reference counts only non-blank ones). `\r\n` endings and a UTF-8 BOM
//! are accepted.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};

/// One non-blank line: its 1-based physical line number and its text.
pub struct JsonlLine {
    pub line: usize,
    pub text: String,
}

pub struct JsonlReader<R> {
    reader: R,
    path: String,
    line: usize,
    buf: Vec<u8>,
}

/// Node's wording for the usual read failures, so messages read as the reference's do.
fn describe_io(e: &std::io::Error, path: &str) -> String {
    match e.kind() {
        ErrorKind::NotFound => format!("ENOENT: no such file or directory, open '{path}'"),
        ErrorKind::PermissionDenied => format!("EACCES: permission denied, open '{path}'"),
        ErrorKind::IsADirectory => "EISDIR: illegal operation on a directory, read".to_string(),
        _ => e.to_string(),
    }
}

pub fn read_error(path: &str, e: &std::io::Error) -> SftError {
    SftError::new(
        ErrorCode::FileRead,
        format!(
            "Failed to read SFT dataset at {path}: {}",
            describe_io(e, path)
        ),
    )
}

pub fn parse_error(path: &str, line: usize, message: impl std::fmt::Display) -> SftError {
    SftError::new(
        ErrorCode::JsonlParse,
        format!("Failed to parse JSONL at {path}:{line} - {message}"),
    )
}

/// Where a serde_json syntax error is in the file, as `line:column` (or `line` when serde gives
/// no column), and what it is without serde's own position: `first_line` is the file's physical
/// line on which the parsed text starts, and serde's "at line L column C" counts inside the text.
pub fn json_error_position(first_line: usize, e: &serde_json::Error) -> (String, String) {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let what = text.strip_suffix(&position).unwrap_or(&text).to_string();
    let line = first_line + e.line().saturating_sub(1);
    let at = match e.column() {
        0 => line.to_string(),
        column => format!("{line}:{column}"),
    };
    (at, what)
}

/// A JSON syntax error as `Failed to parse JSONL at path:line:column - what`.
pub fn json_error(path: &str, first_line: usize, e: &serde_json::Error) -> SftError {
    let (at, what) = json_error_position(first_line, e);
    SftError::new(
        ErrorCode::JsonlParse,
        format!("Failed to parse JSONL at {path}:{at} - {what}"),
    )
}

impl JsonlReader<BufReader<File>> {
    pub fn open(path: &Path) -> SftResult<Self> {
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|e| read_error(&shown, &e))?;
        let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
        if is_dir {
            let e = std::io::Error::from(ErrorKind::IsADirectory);
            return Err(read_error(&shown, &e));
        }
        Ok(JsonlReader::new(
            BufReader::with_capacity(1 << 20, file),
            shown,
        ))
    }
}

impl<R: BufRead> JsonlReader<R> {
    pub fn new(reader: R, path: String) -> Self {
        JsonlReader {
            reader,
            path,
            line: 0,
            buf: Vec::new(),
        }
    }

    /// The physical line number of the last line read.
    pub fn line(&self) -> usize {
        self.line
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The next non-blank line, `None` at the end of the file.
    pub fn next_line(&mut self) -> SftResult<Option<JsonlLine>> {
        loop {
            let mut line = std::mem::take(&mut self.buf);
            line.clear();
            if !self.read_line_into(&mut line)? {
                self.buf = line;
                return Ok(None);
            }
            self.line += 1;
            if line.ends_with(b"\n") {
                line.pop();
            }
            // A last line without a newline loses its `\r` too.
            if line.ends_with(b"\r") {
                line.pop();
            }
            if self.line == 1 && line.starts_with(b"\xEF\xBB\xBF") {
                line.drain(..3);
            }
            // The line's bytes become its text without a copy; a blank line gives its buffer
            // back for the next one.
            let text = String::from_utf8(line).map_err(|e| {
                parse_error(
                    &self.path,
                    self.line,
                    format!(
                        "invalid UTF-8 at byte {} of the line",
                        e.utf8_error().valid_up_to()
                    ),
                )
            })?;
            if text.trim().is_empty() {
                self.buf = text.into_bytes();
                continue;
            }
            return Ok(Some(JsonlLine {
                line: self.line,
                text,
            }));
        }
    }

    /// Appends the next line, its `\n` included, to `line`: false at the end of the file. The
    /// newline is found by memchr's vector search in the reader's buffer, and each buffered
    /// byte is copied once, straight into the line.
    fn read_line_into(&mut self, line: &mut Vec<u8>) -> SftResult<bool> {
        loop {
            let available = match self.reader.fill_buf() {
                Ok(available) => available,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(&self.path, &e)),
            };
            if available.is_empty() {
                return Ok(!line.is_empty());
            }
            let (taken, ended) = match memchr::memchr(b'\n', available) {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            line.extend_from_slice(&available[..taken]);
            self.reader.consume(taken);
            if ended {
                return Ok(true);
            }
        }
    }
}

/// Parses one line. serde_json stops at 128 levels of nesting, so a hostile line cannot exhaust
/// the stack.
pub fn parse_line(path: &str, line: &JsonlLine) -> SftResult<Json> {
    crate::input::json_text::parse(&line.text).map_err(|e| json_error(path, line.line, &e))
}

/// Reads every record of a small in-memory JSONL text (tests, the CLI's validate).
pub fn read_all<R: Read>(reader: R, path: &str) -> SftResult<Vec<(usize, Json)>> {
    let mut r = JsonlReader::new(BufReader::new(reader), path.to_string());
    let mut out = Vec::new();
    while let Some(line) = r.next_line()? {
        out.push((line.line, parse_line(path, &line)?));
    }
    Ok(out)
}

/// Unwraps an error made by `Decompressing`, or names the file for any other read error.
pub(crate) fn io_error(path: &str, e: &std::io::Error) -> SftError {
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<SftError>()) {
        return inner.clone();
    }
    read_error(path, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_physical_lines_and_skips_blank_ones() {
        let text = "\u{feff}{\"a\":1}\r\n\n   \n{\"a\":2}\n";
        let rows = read_all(text.as_bytes(), "d.jsonl").unwrap();
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 4]);
        assert_eq!(rows[1].1["a"], 2);
    }

    #[test]
    fn one_newline_and_one_carriage_return_end_a_line() {
        // The last line loses a `\r` even without a newline; a second `\r` stays in the text.
        let text = "a\r\r\nb\r\nc\r\r";
        let mut reader = JsonlReader::new(BufReader::with_capacity(2, text.as_bytes()), "d".into());
        let mut lines = Vec::new();
        while let Some(line) = reader.next_line().unwrap() {
            lines.push((line.line, line.text));
        }
        assert_eq!(
            lines,
            [(1, "a\r".to_string()), (2, "b".into()), (3, "c\r".into())]
        );
    }

    #[test]
    fn errors_name_file_and_physical_line() {
        let err = read_all("{}\n\n{\"a\":\n".as_bytes(), "d.jsonl").unwrap_err();
        assert_eq!(err.code, ErrorCode::JsonlParse);
        assert_eq!(
            err.message,
            "Failed to parse JSONL at d.jsonl:3:5 - EOF while parsing a value"
        );
        let err = read_all(&b"{}\n{\"a\": \"\xff\"}\n"[..], "d.jsonl").unwrap_err();
        assert_eq!(
            err.message,
            "Failed to parse JSONL at d.jsonl:2 - invalid UTF-8 at byte 7 of the line"
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let err = read_all(text.as_bytes(), "d.jsonl").unwrap_err();
        assert!(
            err.message.contains("recursion limit exceeded"),
            "{}",
            err.message
        );
    }

    #[test]
    fn an_error_on_the_last_of_a_million_lines_has_its_physical_number() {
        let mut text = String::new();
        let mut physical = 0;
        for i in 0..1_000_000 {
            text.push_str(if i % 3 == 0 {
                "{\"a\":1}\r\n"
            } else {
                "{\"a\":1}\n"
            });
            physical += 1;
            if i % 997 == 0 {
                text.push_str("  \n");
                physical += 1;
            }
        }
        text.push_str("{\"a\":");
        physical += 1;
        let mut reader = JsonlReader::new(BufReader::new(text.as_bytes()), "big.jsonl".into());
        let mut records = 0;
        let last = loop {
            let line = reader.next_line().unwrap().unwrap();
            match parse_line("big.jsonl", &line) {
                Ok(_) => records += 1,
                Err(e) => break e,
            }
        };
        assert_eq!((records, physical), (1_000_000, 1_001_005));
        assert_eq!(
            last.message,
            "Failed to parse JSONL at big.jsonl:1001005:5 - EOF while parsing a value"
        );
    }

    #[test]
    fn missing_file_reads_like_node() {
        let err = JsonlReader::open(Path::new("/no/such.jsonl"))
            .err()
            .unwrap();
        assert_eq!(
            err.message,
            "Failed to read SFT dataset at /no/such.jsonl: ENOENT: no such file or directory, open '/no/such.jsonl'"
        );
    }
}
