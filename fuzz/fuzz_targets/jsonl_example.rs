//! JSONL reading, record parsing and example validation over arbitrary bytes: never a panic,
//! every error coded and located, physical line numbers strictly increasing and in range.
#![no_main]

use std::io::BufReader;

use libfuzzer_sys::fuzz_target;
use sft_dataset::error::ErrorCode;
use sft_dataset::example::{detect_format, from_created, validate_record, SftExample};
use sft_dataset::input::jsonl::{parse_line, JsonlReader};
use sft_dataset::example::message::normalize_messages;

const PATH: &str = "fuzz.jsonl";

fuzz_target!(|data: &[u8]| {
    let mut reader = JsonlReader::new(BufReader::new(data), PATH.to_string());
    let physical_lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    let mut index = 0;
    let mut last_line = 0;
    loop {
        let line = match reader.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                assert_eq!(e.code, ErrorCode::JsonlParse);
                assert!(e.message.starts_with(&format!(
                    "Failed to parse JSONL at {PATH}:{} - ",
                    reader.line()
                )));
                break;
            }
        };
        assert!(line.line > last_line && line.line <= physical_lines);
        last_line = line.line;
        let record = match parse_line(PATH, &line) {
            Ok(record) => record,
            Err(e) => {
                assert_eq!(e.code, ErrorCode::JsonlParse);
                assert!(e
                    .message
                    .starts_with(&format!("Failed to parse JSONL at {PATH}:{} - ", line.line)));
                index += 1;
                continue;
            }
        };
        let detected = detect_format(&record).ok();
        if let Some(format) = detected {
            if let Ok(example) = from_created(record.clone(), index, format) {
                assert_eq!(example.format(), format);
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
                    assert!(e.message.starts_with("message "));
                }
            }
            Err(e) => {
                assert_eq!(e.code, ErrorCode::InvalidExample);
                assert!(e.message.starts_with(&format!("SFT example {index}")));
            }
        }
        index += 1;
    }
});
