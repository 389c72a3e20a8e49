//! JSONL reading, record parsing and example validation over arbitrary bytes: never a panic; the
//! reader gives exactly the non-blank physical lines, numbered, and fails exactly at the first
//! line that is not UTF-8; every error is coded and its message located as the library words it.
#![no_main]

use std::io::BufReader;

use libfuzzer_sys::fuzz_target;
use sft_dataset::error::ErrorCode;
use sft_dataset::example::message::normalize_messages;
use sft_dataset::example::{detect_format, from_created, validate_record, SftExample};
use sft_dataset::input::jsonl::{parse_line, JsonlLine, JsonlReader};

const PATH: &str = "fuzz.jsonl";

/// The physical lines as the reader sees them, numbered from 1: without their `\n`, the `\r`
/// before it and, on the first line, a UTF-8 byte order mark. Text after the last `\n` is a line
/// when it is not empty.
fn physical_lines(data: &[u8]) -> Vec<(usize, &[u8])> {
    let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|last| last.is_empty()) {
        lines.pop();
    }
    let mut numbered = Vec::new();
    for (i, mut line) in lines.into_iter().enumerate() {
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        if i == 0 {
            if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
                line = rest;
            }
        }
        numbered.push((i + 1, line));
    }
    numbered
}

/// A JSON syntax error of one line reads `Failed to parse JSONL at fuzz.jsonl:<line>:<column> -
/// <what>` (only `<line>` where serde_json gives no column), the column inside the line and
/// serde_json's own "at line L column C" left out of `<what>`.
fn check_json_error(message: &str, line: &JsonlLine) {
    let at = format!("Failed to parse JSONL at {PATH}:{}", line.line);
    let rest = message
        .strip_prefix(&at)
        .unwrap_or_else(|| panic!("{message:?} does not start with {at:?}"));
    let (column, what) = rest
        .split_once(" - ")
        .unwrap_or_else(|| panic!("no \" - \" after the position in {message:?}"));
    if !column.is_empty() {
        let column: usize = column
            .strip_prefix(':')
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no :<column> after the line in {message:?}"));
        assert!(
            (1..=line.text.len()).contains(&column),
            "column {column} outside the line's {} bytes: {message:?}",
            line.text.len()
        );
    }
    assert!(
        !what.is_empty(),
        "nothing said after the position: {message:?}"
    );
    assert!(
        !what.contains(" at line "),
        "serde_json's position left in: {message:?}"
    );
}

/// `SFT example <index> must be an object` or `SFT example <index>: <what>`.
fn check_example_error(message: &str, index: usize) {
    let named = format!("SFT example {index}");
    let rest = message
        .strip_prefix(&named)
        .unwrap_or_else(|| panic!("{message:?} does not start with {named:?}"));
    assert!(
        rest == " must be an object" || rest.strip_prefix(": ").is_some_and(|w| !w.is_empty()),
        "{message:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut reader = JsonlReader::new(BufReader::new(data), PATH.to_string());
    let mut index = 0;
    for (number, bytes) in physical_lines(data) {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(utf8) => {
                let e = match reader.next_line() {
                    Err(e) => e,
                    Ok(line) => panic!(
                        "line {number} is not UTF-8, the reader gave {:?}",
                        line.map(|l| (l.line, l.text))
                    ),
                };
                assert_eq!(e.code, ErrorCode::JsonlParse);
                assert_eq!(
                    e.message,
                    format!(
                        "Failed to parse JSONL at {PATH}:{number} - invalid UTF-8 at byte {} of the line",
                        utf8.valid_up_to()
                    )
                );
                assert_eq!(reader.line(), number);
                return;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let line = match reader.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => panic!("the reader ended before line {number}"),
            Err(e) => panic!("line {number}: {e:?}"),
        };
        assert_eq!((line.line, line.text.as_str()), (number, text));
        assert_eq!(reader.line(), number);
        let record = match parse_line(PATH, &line) {
            Ok(record) => record,
            Err(e) => {
                assert_eq!(e.code, ErrorCode::JsonlParse);
                check_json_error(&e.message, &line);
                index += 1;
                continue;
            }
        };
        let detected = detect_format(&record).ok();
        if let Some(format) = detected {
            match from_created(record.clone(), index, format) {
                Ok(example) => assert_eq!(example.format(), format),
                Err(e) => {
                    assert_eq!(e.code, ErrorCode::InvalidExample);
                    check_example_error(&e.message, index);
                }
            }
        }
        match validate_record(record, index) {
            Ok(example) => {
                assert_eq!(Some(example.format()), detected);
                let mut messages = match example {
                    SftExample::Conversation { messages, .. } => messages,
                    SftExample::PromptCompletion {
                        mut prompt,
                        completion,
                        ..
                    } => {
                        prompt.push(completion);
                        prompt
                    }
                };
                if let Err(e) = normalize_messages(&mut messages) {
                    assert_eq!(e.code, ErrorCode::InvalidMessage);
                    let (which, what) = e
                        .message
                        .strip_prefix("message ")
                        .and_then(|m| m.split_once(": "))
                        .unwrap_or_else(|| panic!("{:?}", e.message));
                    assert!(
                        which.parse::<usize>().is_ok_and(|i| i < messages.len()),
                        "{:?} names no message of {}",
                        e.message,
                        messages.len()
                    );
                    assert!(!what.is_empty(), "{:?}", e.message);
                }
            }
            Err(e) => {
                assert_eq!(e.code, ErrorCode::InvalidExample);
                check_example_error(&e.message, index);
            }
        }
        index += 1;
    }
    assert!(
        matches!(reader.next_line(), Ok(None)),
        "the reader gave more than the file's lines"
    );
});
