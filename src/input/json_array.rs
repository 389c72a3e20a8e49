//! A JSON array of records, streamed: each element's text is cut out by a scanner that only
//! tracks strings and bracket depth, then parsed on its own, so a file of any size needs memory
//! for one record at a time and an array that never closes is an error at the end of the file.

use std::io::BufRead;

use super::{io_error, parse_error, Container, RawRecord, RecordData};
use crate::error::Location;
use crate::error::SftResult;

enum State {
    /// Before the opening `[`.
    Start,
    /// Inside the array; `first` until an element has been read.
    Elements {
        first: bool,
    },
    Done,
}

pub struct JsonArrayReader<R> {
    reader: R,
    path: String,
    /// 1-based line of the next byte.
    line: usize,
    /// The last byte consumed was a newline (so the file's last line is `line - 1`).
    after_newline: bool,
    opened_at: usize,
    records: usize,
    state: State,
}

impl<R: BufRead> JsonArrayReader<R> {
    pub fn new(reader: R, path: String) -> Self {
        JsonArrayReader {
            reader,
            path,
            line: 1,
            after_newline: false,
            opened_at: 1,
            records: 0,
            state: State::Start,
        }
    }

    /// The line the reader stands on.
    pub fn line(&self) -> usize {
        self.line
    }

    fn error(&self, message: impl std::fmt::Display) -> crate::error::SftError {
        let line = if self.after_newline && self.line > 1 {
            self.line - 1
        } else {
            self.line
        };
        parse_error(&self.path, Container::JsonArray, line, message)
    }

    fn never_closed(&self) -> crate::error::SftError {
        self.error(format_args!(
            "the array opened at line {} is never closed (end of file after {} records)",
            self.opened_at, self.records
        ))
    }

    fn consume(&mut self, n: usize) {
        self.reader.consume(n);
    }

    /// Skips whitespace (and a leading BOM); returns the next byte without consuming it.
    fn peek_non_blank(&mut self) -> SftResult<Option<u8>> {
        loop {
            let buf = self
                .reader
                .fill_buf()
                .map_err(|e| io_error(&self.path, &e))?;
            if buf.is_empty() {
                return Ok(None);
            }
            let mut skipped = 0;
            let mut newlines = 0;
            let mut last_newline = None;
            for &b in buf {
                match b {
                    b'\n' => {
                        newlines += 1;
                        last_newline = Some(true);
                    }
                    b' ' | b'\t' | b'\r' => last_newline = Some(false),
                    _ => break,
                }
                skipped += 1;
            }
            let next = buf.get(skipped).copied();
            self.line += newlines;
            if let Some(n) = last_newline {
                self.after_newline = n;
            }
            self.consume(skipped);
            if let Some(b) = next {
                self.after_newline = false;
                return Ok(Some(b));
            }
        }
    }

    /// Cuts out the next element's text, up to (not including) the `,`, `]` or blank that ends
    /// it at depth 0.
    fn element_text(&mut self) -> SftResult<Vec<u8>> {
        let mut text = Vec::new();
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        loop {
            let buf = self
                .reader
                .fill_buf()
                .map_err(|e| io_error(&self.path, &e))?;
            if buf.is_empty() {
                if depth == 0 && !in_string && !text.is_empty() {
                    // A whole record runs to the end of the file; the missing `]` is reported
                    // after it.
                    return Ok(text);
                }
                return Err(self.never_closed());
            }
            let mut end = None;
            let mut newlines = 0;
            for (i, &b) in buf.iter().enumerate() {
                if b == b'\n' {
                    newlines += 1;
                }
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                    }
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => depth -= 1,
                    b']' | b',' | b' ' | b'\t' | b'\r' | b'\n' if depth == 0 => {
                        if b == b'\n' {
                            newlines -= 1;
                        }
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let taken = end.unwrap_or(buf.len());
            text.extend_from_slice(&buf[..taken]);
            self.line += newlines;
            if taken > 0 {
                self.after_newline = buf[taken - 1] == b'\n';
            }
            self.consume(taken);
            if end.is_some() {
                return Ok(text);
            }
        }
    }

    /// The next element's text, `None` after the closing `]`.
    pub fn next_element(&mut self) -> SftResult<Option<RawRecord>> {
        loop {
            match self.state {
                State::Done => return Ok(None),
                State::Start => {
                    let buf = self
                        .reader
                        .fill_buf()
                        .map_err(|e| io_error(&self.path, &e))?;
                    if buf.starts_with(b"\xEF\xBB\xBF") {
                        self.consume(3);
                    }
                    if self.peek_non_blank()? != Some(b'[') {
                        return Err(self.error("a JSON data file must be an array of records"));
                    }
                    self.consume(1);
                    self.opened_at = self.line;
                    self.state = State::Elements { first: true };
                }
                State::Elements { first } => {
                    let Some(mut next) = self.peek_non_blank()? else {
                        return Err(self.never_closed());
                    };
                    if next == b']' {
                        self.consume(1);
                        self.state = State::Done;
                        if let Some(b) = self.peek_non_blank()? {
                            return Err(self.error(format_args!(
                                "unexpected {:?} after the end of the array",
                                b as char
                            )));
                        }
                        return Ok(None);
                    }
                    if !first {
                        if next != b',' {
                            return Err(self.error(format_args!(
                                "expected ',' or ']' after record {}, found {:?}",
                                self.records - 1,
                                next as char
                            )));
                        }
                        self.consume(1);
                        next = match self.peek_non_blank()? {
                            Some(b']') => {
                                return Err(self.error("a ',' is followed by ']' (trailing comma)"))
                            }
                            Some(b) => b,
                            None => return Err(self.never_closed()),
                        };
                    }
                    let _ = next;
                    let at = Location::Line(self.line);
                    let text = self.element_text()?;
                    let text = String::from_utf8(text).map_err(|e| {
                        parse_error(
                            &self.path,
                            Container::JsonArray,
                            at.number(),
                            format_args!(
                                "invalid UTF-8 at byte {} of the record",
                                e.utf8_error().valid_up_to()
                            ),
                        )
                    })?;
                    self.records += 1;
                    self.state = State::Elements { first: false };
                    return Ok(Some(RawRecord {
                        at,
                        data: RecordData::Text(text),
                    }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn all(text: &str) -> SftResult<Vec<(usize, String)>> {
        let mut r = JsonArrayReader::new(
            std::io::BufReader::with_capacity(7, text.as_bytes()),
            "a.json".into(),
        );
        let mut out = Vec::new();
        while let Some(rec) = r.next_element()? {
            let RecordData::Text(t) = rec.data else {
                unreachable!()
            };
            out.push((rec.at.number(), t));
        }
        Ok(out)
    }

    #[test]
    fn elements_with_their_start_lines_across_small_buffers() {
        let got = all("[\n{\"s\": \"a,]}\\\\\"}\n, 5,\n\n\"x\\\"y\" ,[1,[2]],{}]\n").unwrap();
        assert_eq!(
            got,
            vec![
                (2, "{\"s\": \"a,]}\\\\\"}".to_string()),
                (3, "5".to_string()),
                (5, "\"x\\\"y\"".to_string()),
                (5, "[1,[2]]".to_string()),
                (5, "{}".to_string()),
            ]
        );
    }

    #[test]
    fn malformed_arrays_are_parse_errors_with_a_line() {
        let msg = |t: &str| {
            let e = all(t).unwrap_err();
            assert_eq!(e.code, ErrorCode::JsonlParse);
            e.message
        };
        assert_eq!(
            msg("[{}\n{}]"),
            "Failed to parse JSON at a.json:2 - expected ',' or ']' after record 0, found '{'"
        );
        assert_eq!(
            msg("[{},\n]"),
            "Failed to parse JSON at a.json:2 - a ',' is followed by ']' (trailing comma)"
        );
        assert_eq!(
            msg("[{}]\n{}"),
            "Failed to parse JSON at a.json:2 - unexpected '{' after the end of the array"
        );
        assert_eq!(
            msg("[{\"a\": \"never closed\n"),
            "Failed to parse JSON at a.json:1 - the array opened at line 1 is never closed (end of file after 0 records)"
        );
    }
}
