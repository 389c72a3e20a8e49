//! Stage 4, tokenize: rendered text in (`render`), token ids and byte offsets out, from the HF
//! engine or the linear-time `fast_bpe` engine (identical ids), with control tokens told apart
//! (`control_tokens`).
//!
//! A tokenizer as a chat model sees it: `tokenizer.json` (the HF `tokenizers` crate), its chat
//! template and its named special tokens.

mod chat;
pub mod config;
pub mod control_tokens;
pub mod encoded;
pub mod fast_bpe;
pub mod foreign;
mod prefix;

pub use prefix::common_prefix_len;
use prefix::TailReuse;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::render::{ChatTemplate, RenderAs, RendererChoice};
use crate::tokenize::control_tokens::{encode_marked, AddedToken, ControlTokens, PieceEncoder};
use crate::tokenize::encoded::EncodedText;
use crate::tokenize::fast_bpe::FastBpe;
use config::TokenizerConfig;

/// The ChatML markers the reference masking looks for.
pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";
pub const ENDOFTEXT: &str = "<|endoftext|>";

/// Which encoder turns text into ids. Both give identical ids; `Fast` is the linear-time
/// byte-level BPE of `fast_bpe`, available when it supports every component of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Hf,
    Fast,
}

/// The engine a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineChoice {
    /// `Fast` when the file is fully supported, `Hf` otherwise.
    #[default]
    Auto,
    Hf,
    Fast,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Hf => "hf",
            Engine::Fast => "fast",
        }
    }
}

pub struct ChatTokenizer {
    hf: tokenizers::Tokenizer,
    /// The fast encoder, when active. The HF tokenizer stays loaded for decoding and lookups.
    fast: Option<FastBpe>,
    source: PathBuf,
    config: TokenizerConfig,
    template: Option<SftResult<ChatTemplate>>,
    /// The model's `tool_use` template, which renders with tools passed.
    tool_use: Option<SftResult<ChatTemplate>>,
    tail_reuse: Option<TailReuse>,
    /// blake3 of the `tokenizer.json` text: part of a token cache key.
    json_digest: [u8; 32],
    /// What `sanitizeControlTokens` needs, built on first use.
    sanitize: OnceLock<Sanitize>,
    /// How renders that do not say otherwise follow (`fromPretrained`'s `renderAs`).
    render_as: RenderAs,
    /// The chat template compiled with MLX Node's rules, on first use.
    mlx_template: OnceLock<Option<SftResult<ChatTemplate>>>,
    /// The renderer chosen at load (`fromPretrained`'s `renderer`), for templates compiled later.
    renderer_choice: RendererChoice,
}

/// The control tokens of the chat template, and every added token by content.
struct Sanitize {
    control: ControlTokens,
    added_ids: HashMap<String, u32>,
}

fn load_error(message: String) -> SftError {
    SftError::new(ErrorCode::TokenizerLoad, message)
}

impl ChatTokenizer {
    /// Loads `path`: a `tokenizer.json` file or a directory holding one. The chat template and
    /// special tokens come from the files beside it.
    pub fn load(path: &Path) -> SftResult<Self> {
        Self::load_with_engine(path, EngineChoice::Auto)
    }

    pub fn load_with_engine(path: &Path, engine: EngineChoice) -> SftResult<Self> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file)
            .map_err(|e| load_error(format!("cannot read {}: {e}", file.display())))?;
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let config = TokenizerConfig::load(&dir)?;
        Self::from_parts(&text, config, file, engine)
    }

    /// Builds a tokenizer from the text of a `tokenizer.json` and an already read config.
    pub fn from_parts(
        json_text: &str,
        config: TokenizerConfig,
        source: PathBuf,
        engine: EngineChoice,
    ) -> SftResult<Self> {
        if json_text.trim().is_empty() {
            return Err(load_error(format!("{} is empty", source.display())));
        }
        // The two engines are built from the file at the same time: the fast one on a thread of
        // its own (not the rayon pool, which may be busy building another dataset's rows), the
        // HF one here. The HF engine's verdict on the file still comes first, and the
        // tokenizers crate has panicked on malformed files in the past: a bad file must surface
        // as an error, not abort the process.
        let build_fast =
            || catch_unwind(AssertUnwindSafe(|| FastBpe::from_tokenizer_json(json_text)));
        let (parsed, fast) = std::thread::scope(|scope| {
            let beside = (!matches!(engine, EngineChoice::Hf)).then(|| {
                std::thread::Builder::new()
                    .name("sft-fast-engine".into())
                    .spawn_scoped(scope, build_fast)
            });
            let parsed = catch_unwind(AssertUnwindSafe(|| {
                json_text.parse::<tokenizers::Tokenizer>()
            }));
            let fast = match beside {
                None => Ok(None),
                Some(Ok(handle)) => handle.join().unwrap_or_else(Err).map(Some),
                // No thread to be had: one after the other, as before.
                Some(Err(_)) => build_fast().map(Some),
            };
            (parsed, fast)
        });
        let parsed =
            parsed.map_err(|_| load_error(format!("{} could not be parsed", source.display())))?;
        let hf = parsed.map_err(|e| {
            load_error(format!(
                "{} is not a valid tokenizer.json: {e}",
                source.display()
            ))
        })?;
        let tail_reuse = Self::tail_reuse_for(&hf);
        // A panic of the fast engine's build goes on as it would have without the HF build
        // beside it.
        let fast = fast.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let fast = match (engine, fast) {
            (EngineChoice::Hf, _) | (_, None) => None,
            (EngineChoice::Auto, Some(built)) => built.ok(),
            (EngineChoice::Fast, Some(built)) => Some(built.map_err(|e| {
                SftError::new(
                    ErrorCode::UnsupportedTokenizer,
                    format!(
                        "{}: the fast engine cannot run this tokenizer: {e}",
                        source.display()
                    ),
                )
            })?),
        };
        let mut tokenizer = ChatTokenizer {
            hf,
            fast,
            source,
            config,
            template: None,
            tool_use: None,
            tail_reuse,
            json_digest: *blake3::hash(json_text.as_bytes()).as_bytes(),
            sanitize: OnceLock::new(),
            render_as: RenderAs::default(),
            mlx_template: OnceLock::new(),
            renderer_choice: RendererChoice::Auto,
        };
        tokenizer.compile_templates();
        Ok(tokenizer)
    }

    pub fn source(&self) -> &Path {
        &self.source
    }

    /// blake3 of the `tokenizer.json` text this tokenizer was built from.
    pub fn json_digest(&self) -> &[u8; 32] {
        &self.json_digest
    }

    pub fn config(&self) -> &TokenizerConfig {
        &self.config
    }

    pub fn engine(&self) -> Engine {
        if self.fast.is_some() {
            Engine::Fast
        } else {
            Engine::Hf
        }
    }

    pub fn encode(&self, text: &str, add_special_tokens: bool) -> SftResult<Vec<u32>> {
        if let Some(fast) = &self.fast {
            return Ok(fast.encode_with(text, add_special_tokens));
        }
        let encoding = self
            .hf
            .encode_fast(text, add_special_tokens)
            .map_err(|e| SftError::new(ErrorCode::Tokenize, format!("encode failed: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// `encode`, appending to `ids` (no vector of its own with the fast engine).
    pub fn encode_append(
        &self,
        text: &str,
        add_special_tokens: bool,
        ids: &mut Vec<u32>,
    ) -> SftResult<()> {
        match &self.fast {
            Some(fast) => fast.encode_append(text, add_special_tokens, ids),
            None => ids.extend(self.encode(text, add_special_tokens)?),
        }
        Ok(())
    }

    /// Encodes without special tokens and keeps byte offsets.
    pub fn encode_with_offsets(&self, text: &str) -> SftResult<EncodedText> {
        if let Some(fast) = &self.fast {
            let (ids, offsets) = fast.encode_with_offsets(text);
            return Ok(EncodedText { ids, offsets });
        }
        let encoding = self
            .hf
            .encode(text, false)
            .map_err(|e| SftError::new(ErrorCode::Tokenize, format!("encode failed: {e}")))?;
        Ok(EncodedText {
            ids: encoding.get_ids().to_vec(),
            offsets: encoding.get_offsets().to_vec(),
        })
    }

    /// Text of `ids`, as HF's `decode` writes it (the fast engine's decoder where it is active:
    /// its decode is held to HF's by the engine's differential tests).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> SftResult<String> {
        if let Some(fast) = &self.fast {
            return Ok(fast.decode(ids, skip_special_tokens));
        }
        self.hf
            .decode(ids, skip_special_tokens)
            .map_err(|e| SftError::new(ErrorCode::Tokenize, format!("decode failed: {e}")))
    }

    /// Whether the tokens of an `encode_with_offsets` decode to exactly the text their offsets
    /// span (see `FastBpe::decodes_verbatim`); `false` where that is not known.
    pub fn decodes_verbatim(&self) -> bool {
        self.fast.as_ref().is_some_and(FastBpe::decodes_verbatim)
    }

    pub fn vocab_size(&self) -> u32 {
        self.hf.get_vocab_size(true) as u32
    }

    /// A raw vocabulary lookup: no normalization, no byte-level spelling (`"\n"` is not `"Ċ"`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.hf.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.hf.id_to_token(id)
    }

    /// `text` as the tokenizer's normalizer rewrites it before splitting (Qwen3 composes to NFC);
    /// `None` without a normalizer or when it fails.
    pub fn normalized(&self, text: &str) -> Option<String> {
        use tokenizers::Normalizer;
        let normalizer = self.hf.get_normalizer()?;
        let mut normalized = tokenizers::NormalizedString::from(text);
        normalizer.normalize(&mut normalized).ok()?;
        Some(normalized.get().to_string())
    }

    /// The control tokens of chat rendering, as transformers 5 defines them for
    /// `sanitize_control_tokens` (see `ControlTokens::choose`). Longest first.
    pub fn control_tokens(&self) -> Vec<String> {
        self.sanitize().control.tokens().to_vec()
    }

    fn sanitize(&self) -> &Sanitize {
        self.sanitize.get_or_init(|| {
            let decoder = self.hf.get_added_vocabulary().get_added_tokens_decoder();
            let named = self.config.named_special_tokens();
            let control = ControlTokens::choose(
                decoder.values().map(|t| AddedToken {
                    content: &t.content,
                    special: t.special || named.contains(&t.content.as_str()),
                }),
                self.config.chat_control_tokens.as_deref(),
                self.config.chat_template.as_deref().unwrap_or(""),
            );
            let added_ids = decoder
                .iter()
                .map(|(id, t)| (t.content.clone(), *id))
                .collect();
            Sanitize { control, added_ids }
        })
    }

    /// The matcher of the chat template's control tokens, for marking data.
    pub fn control_token_set(&self) -> &ControlTokens {
        &self.sanitize().control
    }

    /// Encodes a render of data marked by `ControlTokens::mark_json`: control tokens from the
    /// data become text, the template's stay tokens (see `control_tokens::encode_marked`).
    pub fn encode_marked(&self, text: &str) -> SftResult<EncodedText> {
        encode_marked(self, text, &self.sanitize().added_ids)
    }

    /// `text` encoded by the normalizer, pre-tokenizer and model of `tokenizer.json` alone,
    /// without its added tokens, with byte offsets.
    pub fn encode_without_added(&self, text: &str) -> SftResult<EncodedText> {
        if let Some(fast) = &self.fast {
            let (ids, offsets) = fast.encode_without_added(text);
            return Ok(EncodedText { ids, offsets });
        }
        use tokenizers::{Model, Normalizer, OffsetType, PreTokenizer};
        let failed = |e: tokenizers::Error| {
            SftError::new(ErrorCode::Tokenize, format!("encode failed: {e}"))
        };
        let mut normalized = tokenizers::NormalizedString::from(text);
        if let Some(normalizer) = self.hf.get_normalizer() {
            normalizer.normalize(&mut normalized).map_err(failed)?;
        }
        let mut pieces = tokenizers::PreTokenizedString::from(normalized);
        if let Some(pre_tokenizer) = self.hf.get_pre_tokenizer() {
            pre_tokenizer.pre_tokenize(&mut pieces).map_err(failed)?;
        }
        let model = self.hf.get_model();
        pieces
            .tokenize(|piece| model.tokenize(piece.get()))
            .map_err(failed)?;
        let encoding = pieces
            .into_encoding(None, 0, OffsetType::Byte)
            .map_err(failed)?;
        // The post-processor adds no token here, but may trim offsets as `encode` does.
        let encoding = self
            .hf
            .post_process(encoding, None, false)
            .map_err(failed)?;
        Ok(EncodedText {
            ids: encoding.get_ids().to_vec(),
            offsets: encoding.get_offsets().to_vec(),
        })
    }

    /// Whether `id` is an added token (matched in the text before the model splits it).
    pub fn is_added_token(&self, id: u32) -> bool {
        self.hf
            .get_added_vocabulary()
            .get_added_tokens_decoder()
            .contains_key(&id)
    }

    fn named_id(&self, token: &Option<String>) -> Option<u32> {
        token.as_deref().and_then(|t| self.token_to_id(t))
    }

    pub fn eos_token_id(&self) -> Option<u32> {
        self.named_id(&self.config.eos_token)
    }

    pub fn bos_token_id(&self) -> Option<u32> {
        self.named_id(&self.config.bos_token)
    }

    /// The pad token of the config; without one, the end-of-sequence token, then 0.
    pub fn pad_token_id(&self) -> u32 {
        self.named_id(&self.config.pad_token)
            .or_else(|| self.eos_token_id())
            .unwrap_or(0)
    }
}

impl PieceEncoder for ChatTokenizer {
    fn encode_piece(&self, text: &str) -> SftResult<EncodedText> {
        self.encode_with_offsets(text)
    }

    fn encode_piece_as_text(&self, text: &str) -> SftResult<EncodedText> {
        self.encode_without_added(text)
    }
}

#[cfg(test)]
mod tests {
    use super::prefix::last_shared_match;
    use super::*;
    use crate::example::message::normalize_messages;
    use crate::render::RenderOptions;
    use aho_corasick::{AhoCorasick, MatchKind};
    use serde_json::json;

    #[test]
    fn common_prefix_of_ids_and_bytes() {
        assert_eq!(common_prefix_len(&[1, 2, 3], &[1, 2, 4, 5]), 2);
        assert_eq!(common_prefix_len(b"abc", b"abd"), 2);
        // Across and at the edges of the blocks compared at once.
        let long: Vec<u8> = (0..200u8).collect();
        for cut in [0, 1, 31, 32, 33, 64, 100, 199] {
            let mut other = long.clone();
            other[cut] ^= 1;
            assert_eq!(common_prefix_len(&long, &other), cut);
            assert_eq!(common_prefix_len(&long[..cut], &long), cut);
        }
        assert_eq!(common_prefix_len(&long, &long), 200);
    }

    /// What `decodes_verbatim` promises, against decoding: for random char ranges of texts in
    /// many scripts with added tokens among them, the tokens whose offsets overlap the range
    /// decode to a text holding it, and the offsets never go back. Qwen3 composes to NFC, so it
    /// never promises.
    #[test]
    fn verbatim_decoding_holds_every_range() {
        let pieces = [
            "Hello",
            " world",
            "\n\n",
            "  ",
            "<|im_start|>",
            "<|endoftext|>",
            "<|start|>",
            "<|end|>",
            "数学题",
            "ですか",
            "ภาษาไทย",
            "Привет",
            "مرحبا",
            "e\u{301}",
            "🙂👍🏽",
            "\u{a0}",
            "x",
            "12345",
            "<think>",
            "\t",
            "Ωμέγα",
            "বাংলা",
        ];
        let mut rng = crate::test_support::Rng(0x5eed_0f0f_f5e7);
        for family in ["gptoss", "llama3_1", "deepseek_v3", "qwen3"] {
            let t = crate::test_support::load_family(family);
            assert_eq!(t.decodes_verbatim(), family != "qwen3", "{family}");
            if !t.decodes_verbatim() {
                continue;
            }
            for _ in 0..300 {
                let text: String = (0..1 + rng.below(24))
                    .map(|_| pieces[rng.below(pieces.len())])
                    .collect();
                let e = t.encode_with_offsets(&text).unwrap();
                // Offsets that never go back, which span masking takes on trust.
                assert!(e
                    .offsets
                    .windows(2)
                    .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
                let bounds: Vec<usize> = text
                    .char_indices()
                    .map(|(i, _)| i)
                    .chain([text.len()])
                    .collect();
                for _ in 0..8 {
                    let a = bounds[rng.below(bounds.len())];
                    let b = bounds[rng.below(bounds.len())];
                    let range = a.min(b)..a.max(b);
                    let first = e.offsets.partition_point(|&(_, end)| end <= range.start);
                    let last = e.offsets.partition_point(|&(start, _)| start < range.end);
                    if first >= last {
                        continue;
                    }
                    assert!(
                        e.offsets[first].0 <= range.start && e.offsets[last - 1].1 >= range.end
                    );
                    let decoded = t.decode(&e.ids[first..last], false).unwrap();
                    assert!(
                        decoded.contains(&text[range.clone()]),
                        "{family}: {text:?} {range:?} decodes to {decoded:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn qwen3_special_tokens_and_raw_lookup() {
        let t = crate::test_support::load_family("qwen3");
        assert_eq!(t.pad_token_id(), 151643);
        assert_eq!(t.eos_token_id(), Some(151645));
        assert_eq!(t.bos_token_id(), None);
        assert_eq!(t.token_to_id("\n"), None);
        assert_eq!(t.token_to_id(IM_START), Some(151644));
        assert_eq!(
            t.encode("<|im_start|>user\nhi", false).unwrap(),
            vec![151644, 872, 198, 6023]
        );
    }

    #[test]
    fn tail_reencoding_equals_full_encoding() {
        let t = crate::test_support::load_family("qwen3");
        let mut prompt = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "Say hi"}),
        ];
        normalize_messages(&mut prompt).unwrap();
        let mut full = prompt.clone();
        full.push(json!({"role": "assistant", "content": "\n  Hi there"}));
        for thinking in [Some(false), Some(true), None] {
            let p = t
                .render(
                    &prompt,
                    &RenderOptions {
                        add_generation_prompt: true,
                        enable_thinking: thinking,
                        ..Default::default()
                    },
                )
                .unwrap();
            let f = t
                .render(
                    &full,
                    &RenderOptions {
                        enable_thinking: thinking,
                        ..Default::default()
                    },
                )
                .unwrap();
            assert_eq!(
                t.encode_prompt_and_full(&p, &f).unwrap(),
                (t.encode(&p, false).unwrap(), t.encode(&f, false).unwrap())
            );
        }
    }

    #[test]
    fn last_shared_match_is_the_end_of_the_common_run_of_matches() {
        // Overlapping tokens make the leftmost-longest choice near the end of the shared prefix
        // depend on the bytes after it.
        let tokens = ["<a>", "<a>b", "<ab>", "b>", "<|x|>", "a"];
        let raw = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(tokens)
            .unwrap();
        let longest = tokens.iter().map(|t| t.len()).max().unwrap();
        let reuse = TailReuse {
            raw: Some(raw.clone()),
            normalized: None,
            added_only_ids: None,
            longest,
        };
        let pieces = [
            "<a>", "<a", "b", ">", "<ab>", "<|x|>", "<|", "a", "c", " ", "é",
        ];
        let mut rng = crate::test_support::Rng(0x5eed_1234_abcd_0001);
        let mut text = |n: usize| (0..n).map(|_| rng.pick(&pieces)).collect::<String>();
        let mut found = 0;
        for round in 0..4000 {
            let head = text(round % 9);
            let full = format!("{head}{}", text(round % 5));
            let prompt = format!("{head}{}", text(round % 4));
            let shared = common_prefix_len(prompt.as_bytes(), full.as_bytes());
            let (in_full, in_prompt) = (reuse.matches(&full), reuse.matches(&prompt));
            let expected = in_full
                .iter()
                .zip(&in_prompt)
                .take_while(|(f, p)| f == p && f.1 <= shared)
                .enumerate()
                .last()
                .map(|(nth, (f, _))| (nth, f.1));
            found += usize::from(expected.is_some());
            assert_eq!(
                last_shared_match(&raw, longest, &prompt, &full, shared),
                expected,
                "prompt {prompt:?}, full {full:?}"
            );
        }
        assert!(found > 1000, "{found}");
    }

    #[test]
    fn shared_prefix_encoding_is_exact_at_every_cut() {
        let t = crate::test_support::load_family("qwen3");
        let mut messages = vec![
            json!({"role": "system", "content": "Sé breve. <think>no</think>"}),
            json!({"role": "user", "content": "Add 2+2 <|im_end|> then\n\n  say ok"}),
            json!({"role": "assistant", "content": "<think>\nsum\n</think>\n\n4 🧑‍🚀"}),
        ];
        normalize_messages(&mut messages).unwrap();
        // Qwen3's added tokens are not in its BPE vocabulary: the one-encoding path is taken.
        assert!(t.tail_reuse.as_ref().unwrap().added_only_ids.is_some());
        let full = t.render(&messages, &RenderOptions::default()).unwrap();
        let full_ids = t.encode(&full, false).unwrap();
        for cut in (0..=full.len()).filter(|&c| full.is_char_boundary(c)) {
            let prompt = format!("{}<|im_start|>assistant\n", &full[..cut]);
            let (p, f) = t.encode_prompt_and_full(&prompt, &full).unwrap();
            assert_eq!(p, t.encode(&prompt, false).unwrap(), "cut at {cut}");
            assert_eq!(f, full_ids, "cut at {cut}");
        }
    }

    #[test]
    fn prompt_and_full_equal_whole_encodings_on_every_family() {
        // One tail after another family's tokenizer: the last tail kept per thread must not be
        // reused across tokenizers.
        for family in crate::test_support::FAMILIES {
            let t = crate::test_support::load_family(family);
            let prompt = format!("{}hello world\nassistant\n", t.control_tokens()[0]);
            let full = format!("{prompt}the answer");
            let whole = (
                t.encode(&prompt, false).unwrap(),
                t.encode(&full, false).unwrap(),
            );
            assert_eq!(
                t.encode_prompt_and_full(&prompt, &full).unwrap(),
                whole,
                "{family}"
            );
        }
        let mut rng = crate::test_support::Rng(0x5eed_7a11_0c07_0002);
        let mut covered = 0;
        for family in crate::test_support::FAMILIES {
            let t = crate::test_support::load_family(family);
            // Added tokens, their halves and text around them, so that cuts fall before, inside
            // and after tokens near the end of the shared prefix.
            let mut pieces: Vec<String> = t.control_tokens().into_iter().take(6).collect();
            let fragments = pieces
                .iter()
                .flat_map(|p| {
                    let half = p
                        .char_indices()
                        .nth(p.chars().count() / 2)
                        .map_or(0, |c| c.0);
                    [p[..half].to_string(), p[half..].to_string()]
                })
                .collect::<Vec<_>>();
            pieces.extend(fragments);
            pieces.extend(
                [
                    "\n",
                    " ",
                    "user",
                    "assistant",
                    "é",
                    "🧑‍🚀",
                    "a",
                    "<",
                    ">",
                    "|",
                    "\n\n",
                ]
                .map(String::from),
            );
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let mut text = |n: usize| (0..n).map(|_| rng.pick(&pieces)).collect::<String>();
            for round in 0..1500 {
                let head = text(round % 11);
                let prompt = format!("{head}{}", text(round % 4));
                let full = format!("{head}{}", text(round % 6));
                let got = t.encode_prompt_and_full(&prompt, &full).unwrap();
                let whole = (
                    t.encode(&prompt, false).unwrap(),
                    t.encode(&full, false).unwrap(),
                );
                assert_eq!(got, whole, "{family}: prompt {prompt:?}, full {full:?}");
            }
            covered += 1;
        }
        assert!(covered == 0 || covered == crate::test_support::FAMILIES.len());
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = ChatTokenizer::load(Path::new("/nonexistent/tok"))
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::TokenizerLoad);
        assert!(err.message.starts_with("cannot read /nonexistent/tok"));
    }
}
