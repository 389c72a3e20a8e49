//! Stage 4, tokenize: rendered text in (`render`), token ids and byte offsets out, from the HF
//! engine or the linear-time `fast_bpe` engine (identical ids), with control tokens told apart
//! (`control_tokens`).
//!
//! A tokenizer as a chat model sees it: `tokenizer.json` (the HF `tokenizers` crate), its chat
//! template and its named special tokens.

pub mod control_tokens;
pub mod encoded;
pub mod fast_bpe;

pub mod config;

use std::borrow::Cow;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, Input, MatchKind};
use minijinja::value::Value;
use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::render::{ChatTemplate, RenderOptions, Renderer, RendererChoice};
use crate::tokenize::control_tokens::{encode_marked, AddedToken, ControlTokens, PieceEncoder};
use crate::tokenize::encoded::EncodedText;
use crate::tokenize::fast_bpe::FastBpe;
use config::TokenizerConfig;

/// The ChatML markers the reference masking looks for.
pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";
pub const ENDOFTEXT: &str = "<|endoftext|>";

/// What makes encoding a text in two pieces, cut after an added token, exact: added tokens split
/// the text first and each piece between them is normalized and tokenized on its own, unless a
/// token strips neighbouring whitespace. The matchers replay that split: leftmost-longest, tokens
/// that skip normalization first, then (without a normalizer) the others in the gaps.
struct TailReuse {
    raw: Option<AhoCorasick>,
    normalized: Option<AhoCorasick>,
    /// The ids of the added tokens, when the model's own vocabulary has none of them: then
    /// every one of these ids in an encoding is exactly one added-token match of the text.
    added_only_ids: Option<IdSet>,
    /// The longest added token, in bytes.
    longest: usize,
}

/// A set of token ids, one bit each: read once per token of every prompt-completion example.
struct IdSet(Vec<u64>);

impl IdSet {
    fn new(ids: impl IntoIterator<Item = u32>) -> Self {
        let mut bits = Vec::new();
        for id in ids {
            let word = id as usize / 64;
            if bits.len() <= word {
                bits.resize(word + 1, 0);
            }
            bits[word] |= 1 << (id % 64);
        }
        IdSet(bits)
    }

    fn contains(&self, id: u32) -> bool {
        self.0
            .get(id as usize / 64)
            .is_some_and(|word| word & (1 << (id % 64)) != 0)
    }
}

impl TailReuse {
    /// Byte ranges of the added tokens the tokenizer will find in `text`, in order.
    fn matches(&self, text: &str) -> Vec<(usize, usize)> {
        let mut found: Vec<(usize, usize)> = match &self.raw {
            Some(m) => m.find_iter(text).map(|x| (x.start(), x.end())).collect(),
            None => Vec::new(),
        };
        if let Some(m) = &self.normalized {
            let mut gaps = Vec::with_capacity(found.len() + 1);
            let mut at = 0;
            for &(start, end) in &found {
                gaps.push((at, start));
                at = end;
            }
            gaps.push((at, text.len()));
            for (from, to) in gaps {
                found.extend(
                    m.find_iter(&text[from..to])
                        .map(|x| (from + x.start(), from + x.end())),
                );
            }
            found.sort_unstable();
        }
        found
    }
}

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
        };
        tokenizer.compile_templates();
        Ok(tokenizer)
    }

    fn compile_templates(&mut self) {
        let special = self.special_tokens_map();
        let compile = |source: &Option<String>| {
            source
                .as_deref()
                .map(|source| ChatTemplate::compile(source, special.clone()))
        };
        self.template = compile(&self.config.chat_template);
        self.tool_use = compile(&self.config.tool_use_template);
    }

    /// Replaces the model's chat templates with `source`, as transformers' `chat_template`
    /// argument does (the renderer goes back to the default choice).
    pub fn set_chat_template(&mut self, source: &str) {
        self.config.chat_template = Some(source.to_string());
        self.config.tool_use_template = None;
        self.config.template_names = Vec::new();
        self.sanitize = OnceLock::new();
        self.compile_templates();
    }

    fn tail_reuse_for(hf: &tokenizers::Tokenizer) -> Option<TailReuse> {
        // With a normalizer (Qwen's NFC), tokens that skip normalization still split the raw
        // text first and every piece is normalized on its own, so cuts after them stay exact;
        // tokens matched on normalized text are then left out of the cut points and the count.
        let has_normalizer = hf.get_normalizer().is_some();
        if hf
            .get_pre_tokenizer()
            .is_some_and(prefixes_only_the_input_start)
        {
            return None;
        }
        let mut raw = Vec::new();
        let mut normalized = Vec::new();
        let decoder = hf.get_added_vocabulary().get_added_tokens_decoder();
        let added_only_ids = decoder
            .keys()
            .all(|&id| tokenizers::Model::id_to_token(hf.get_model(), id).is_none())
            .then(|| IdSet::new(decoder.keys().copied()));
        for token in decoder.values() {
            if token.lstrip || token.rstrip || token.single_word || token.content.is_empty() {
                return None;
            }
            if token.normalized {
                normalized.push(token.content.clone());
            } else {
                raw.push(token.content.clone());
            }
        }
        let build = |patterns: Vec<String>| -> Option<Option<AhoCorasick>> {
            if patterns.is_empty() {
                return Some(None);
            }
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(patterns)
                .ok()
                .map(Some)
        };
        let normalized_after_normalizer = has_normalizer && !normalized.is_empty();
        let longest = raw
            .iter()
            .chain(&normalized)
            .map(String::len)
            .max()
            .unwrap_or(0);
        Some(TailReuse {
            longest,
            raw: build(raw)?,
            normalized: if has_normalizer {
                None
            } else {
                build(normalized)?
            },
            added_only_ids: added_only_ids.filter(|_| !normalized_after_normalizer),
        })
    }

    /// The variables transformers passes to every render from `special_tokens_map`.
    pub fn special_tokens_map(&self) -> Vec<(String, Value)> {
        self.config.special_tokens_map()
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

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> SftResult<String> {
        self.hf
            .decode(ids, skip_special_tokens)
            .map_err(|e| SftError::new(ErrorCode::Tokenize, format!("decode failed: {e}")))
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

    /// The added-token matches of `text` (start, end) at which its encoding can be cut exactly
    /// (see `TailReuse`); `None` when cuts cannot be proven exact for this tokenizer.
    pub fn added_token_cuts(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        self.tail_reuse.as_ref().map(|reuse| reuse.matches(text))
    }

    /// The number of tokens `text[..len]` encodes to, given the encoding of all of `text` and
    /// its `cuts` (`added_token_cuts`): the tokens of `text` through the last cut that ends by
    /// `len`, plus the rest up to `len` encoded on its own. Exact for the reason
    /// `encode_prompt_and_full` is: both encodings split at that added token first, and the
    /// pieces before it are the same. Without such a cut the prefix is encoded whole.
    pub fn prefix_token_count(
        &self,
        text: &str,
        encoded: &EncodedText,
        cuts: &[(usize, usize)],
        len: usize,
    ) -> SftResult<usize> {
        if len >= text.len() {
            return Ok(encoded.ids.len());
        }
        let k = cuts.partition_point(|&(_, end)| end <= len);
        if let Some(&(start, end)) = k.checked_sub(1).map(|k| &cuts[k]) {
            // The cut's own token in the full encoding: its span and an added token's id.
            let t = encoded.offsets.partition_point(|&(s, _)| s < start);
            if encoded.offsets.get(t) == Some(&(start, end)) && self.is_added_token(encoded.ids[t])
            {
                return Ok(t + 1 + self.encode(&text[end..len], false)?.len());
            }
        }
        Ok(self.encode(&text[..len], false)?.len())
    }

    /// The number of tokens of a text `P` that agrees with `text` (encoded as `encoded`, with
    /// `cuts`) on its first `shared` bytes and then differs, given `P[at..]` as `tail` (`at` at
    /// most `shared`): `text`'s tokens through the last cut that starts at least one added
    /// token's length before `shared`, plus the rest of `P` encoded on its own. Every added
    /// token that could match in `P` before that cut lies in the shared bytes, so `P` splits
    /// there as `text` does. `None` when no such cut is found.
    pub fn diverging_prefix_token_count(
        &self,
        text: &str,
        encoded: &EncodedText,
        cuts: &[(usize, usize)],
        shared: usize,
        (at, tail): (usize, &str),
    ) -> SftResult<Option<usize>> {
        let Some(reuse) = &self.tail_reuse else {
            return Ok(None);
        };
        let k = cuts.partition_point(|&(start, _)| start + reuse.longest <= shared);
        let Some(&(start, end)) = k.checked_sub(1).map(|k| &cuts[k]) else {
            return Ok(None);
        };
        if at > shared || end > shared {
            return Ok(None);
        }
        let t = encoded.offsets.partition_point(|&(s, _)| s < start);
        if encoded.offsets.get(t) != Some(&(start, end)) || !self.is_added_token(encoded.ids[t]) {
            return Ok(None);
        }
        let rest = if end >= at {
            Cow::Borrowed(&tail[end - at..])
        } else {
            Cow::Owned(format!("{}{tail}", &text[end..at]))
        };
        Ok(Some(t + 1 + self.encode(&rest, false)?.len()))
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

    /// Chooses the chat-template renderer (see `chat_template::compiled`). `Compiled` fails for a
    /// template without a direct renderer; a tokenizer without a template has nothing to choose.
    pub fn set_renderer(&mut self, choice: RendererChoice) -> SftResult<()> {
        if let Some(Ok(t)) = &mut self.tool_use {
            // A direct renderer is known for default templates only; the tool_use one keeps
            // the interpreter where it has none.
            if t.set_renderer(choice).is_err() {
                t.set_renderer(RendererChoice::Interpreter)?;
            }
        }
        match &mut self.template {
            Some(Ok(t)) => t.set_renderer(choice),
            _ if choice == RendererChoice::Compiled => Err(SftError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "renderer 'compiled': {} has no usable chat template",
                    self.source.display()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The renderer in use: `Compiled` for a known template (unless the interpreter was chosen).
    pub fn renderer(&self) -> Renderer {
        match &self.template {
            Some(Ok(t)) => t.renderer(),
            _ => Renderer::Interpreter,
        }
    }

    /// The compiled chat template.
    pub fn chat_template(&self) -> SftResult<&ChatTemplate> {
        self.template()
    }

    fn template(&self) -> SftResult<&ChatTemplate> {
        self.template_for(false)
    }

    /// The template a render uses: the `tool_use` one when tools are passed and the model has
    /// one, the default otherwise (transformers' `get_chat_template`).
    fn template_for(&self, with_tools: bool) -> SftResult<&ChatTemplate> {
        let chosen = if with_tools && self.tool_use.is_some() {
            &self.tool_use
        } else {
            &self.template
        };
        match chosen {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e.clone()),
            None => Err(match self.config.template_for(with_tools) {
                Err(several) => SftError::new(ErrorCode::ChatTemplateMissing, several),
                Ok(_) => SftError::new(
                    ErrorCode::ChatTemplateMissing,
                    format!(
                        "no chat template for {}: tokenizer_config.json has no chat_template and there is no chat_template.jinja",
                        self.source.display()
                    ),
                ),
            }),
        }
    }

    pub fn has_chat_template(&self) -> bool {
        matches!(self.template, Some(Ok(_)))
    }

    /// Renders messages that are already normalized (see `message::normalize_messages`).
    pub fn render(&self, messages: &[Json], opts: &RenderOptions) -> SftResult<String> {
        self.template_for(opts.tools.is_some())?
            .render(messages, opts)
    }

    /// The render and the byte ranges of its `{% generation %}` bodies (see
    /// `ChatTemplate::render_generation`).
    pub fn render_generation(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
    ) -> SftResult<(String, Vec<(usize, usize)>)> {
        self.template_for(opts.tools.is_some())?
            .render_generation(messages, opts)
    }

    /// `applyChatTemplate`: render, then encode without adding special tokens (the template
    /// already wrote them; special-token strings in the text map to their ids).
    pub fn apply_chat_template(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
    ) -> SftResult<Vec<u32>> {
        let text = self.render(messages, opts)?;
        self.encode(&text, false)
    }

    /// `applyChatTemplate` with `sanitizeControlTokens`: the strings of the messages, the tools
    /// and the template variables have their control tokens marked before the render, and the
    /// render is encoded with `encode_marked`.
    pub fn apply_chat_template_sanitized(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
    ) -> SftResult<Vec<u32>> {
        let text = self.render_marked(messages, opts)?;
        Ok(self.encode_marked(&text)?.ids)
    }

    /// The render of `messages`, tools and template variables with their control tokens
    /// marked (see `ControlTokens::mark_json`).
    pub fn render_marked(&self, messages: &[Json], opts: &RenderOptions) -> SftResult<String> {
        let control = self.control_token_set();
        let mut messages = Json::Array(messages.to_vec());
        control.mark_json(&mut messages);
        let mut tools = opts.tools.cloned();
        if let Some(tools) = &mut tools {
            control.mark_json(tools);
        }
        // `reasoning_effort` is one of the template variables transformers marks.
        let mut kwargs = opts.template_kwargs.cloned().map(Json::Object);
        if let Some(effort) = opts.reasoning_effort {
            if let Json::Object(map) =
                kwargs.get_or_insert_with(|| Json::Object(Default::default()))
            {
                map.insert("reasoning_effort".into(), Json::from(effort));
            }
        }
        if let Some(kwargs) = &mut kwargs {
            control.mark_json(kwargs);
        }
        let marked_opts = RenderOptions {
            tools: tools.as_ref(),
            template_kwargs: kwargs.as_ref().and_then(Json::as_object),
            reasoning_effort: None,
            ..*opts
        };
        let list = messages.as_array().map(Vec::as_slice).unwrap_or_default();
        self.render(list, &marked_opts)
    }

    /// The ids of `prompt_text` and of `full_text`, two renders that share a prefix, with the
    /// shared part encoded once: both texts are cut after the last added token they share, the
    /// head is encoded once and each tail on its own. Identical to encoding each text whole
    /// (pieces between added tokens are tokenized independently); both are encoded whole when
    /// that cannot be proven.
    pub fn encode_prompt_and_full(
        &self,
        prompt_text: &str,
        full_text: &str,
    ) -> SftResult<(Vec<u32>, Vec<u32>)> {
        let both = || {
            Ok((
                self.encode(prompt_text, false)?,
                self.encode(full_text, false)?,
            ))
        };
        let Some(reuse) = &self.tail_reuse else {
            return both();
        };
        if let (Some(fast), Some(_), None) = (&self.fast, &reuse.raw, &reuse.normalized) {
            return Ok(fast_prompt_and_full(
                fast,
                &self.json_digest,
                reuse.longest,
                prompt_text,
                full_text,
            ));
        }
        let Some((nth, end)) = shared_added_token_end(reuse, prompt_text, full_text) else {
            return both();
        };
        if let Some(ids) = &reuse.added_only_ids {
            // One encoding of the full text; its head ends right after the `nth` added token.
            let full = self.encode(full_text, false)?;
            let head = full
                .iter()
                .enumerate()
                .filter(|&(_, &id)| ids.contains(id))
                .nth(nth)
                .map(|(at, _)| at + 1);
            if let Some(head) = head {
                let mut prompt = full[..head].to_vec();
                prompt.extend(self.encode(&prompt_text[end..], false)?);
                return Ok((prompt, full));
            }
        }
        let head = self.encode(&full_text[..end], false)?;
        let mut full = head.clone();
        full.extend(self.encode(&full_text[end..], false)?);
        let mut prompt = head;
        prompt.extend(self.encode(&prompt_text[end..], false)?);
        Ok((prompt, full))
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

thread_local! {
    /// The last prompt tail `fast_prompt_and_full` encoded on this thread, its ids, and the
    /// digest of the `tokenizer.json` that encoded it. The tail is the generation prompt, the same
    /// text for nearly every example of a dataset.
    static LAST_TAIL: std::cell::RefCell<([u8; 32], String, Vec<u32>)> =
        const { std::cell::RefCell::new(([0; 32], String::new(), Vec::new())) };
}

/// `encode_prompt_and_full` on the fast engine, where the cut points are the added tokens matched
/// on the raw text: the full text is encoded once, noting where its added tokens are, and the
/// cut is after the last one that starts `longest` bytes or more before the end of the prefix
/// the two texts share. Every choice of the leftmost-longest scan up to that token (where a
/// match starts, how long it is) reads only bytes before its start plus `longest`, all shared,
/// so the scan of the prompt makes the same choices and the two texts split alike up to there.
/// The prompt's ids are the full text's ids up to that token, then the rest of the prompt
/// encoded on its own.
fn fast_prompt_and_full(
    fast: &FastBpe,
    digest: &[u8; 32],
    longest: usize,
    prompt_text: &str,
    full_text: &str,
) -> (Vec<u32>, Vec<u32>) {
    let shared = common_prefix_len(prompt_text.as_bytes(), full_text.as_bytes());
    let mut added = Vec::new();
    let full = fast.encode_noting_added(full_text, &mut added);
    let cut = added
        .iter()
        .rev()
        .find(|a| a.start.saturating_add(longest) <= shared);
    let prompt = match cut {
        Some(a) => {
            let tail = &prompt_text[a.end..];
            let mut ids = Vec::with_capacity(a.index + 1 + tail.len() / 3 + 1);
            ids.extend_from_slice(&full[..=a.index]);
            LAST_TAIL.with(|last| match last.try_borrow_mut() {
                Ok(mut last) => {
                    let (by, text, tail_ids) = &mut *last;
                    if by != digest || text != tail {
                        *tail_ids = fast.encode(tail);
                        *by = *digest;
                        text.clear();
                        text.push_str(tail);
                    }
                    ids.extend_from_slice(tail_ids);
                }
                Err(_) => ids.extend(fast.encode(tail)),
            });
            ids
        }
        None => fast.encode(prompt_text),
    };
    (prompt, full)
}

/// Metaspace with `prepend_scheme: first` prefixes "▁" only to the piece that starts the input:
/// a tail encoded on its own would get a prefix it lacks inside the whole text, so no cut after
/// an added token is exact.
fn prefixes_only_the_input_start(pre: &tokenizers::PreTokenizerWrapper) -> bool {
    use tokenizers::pre_tokenizers::metaspace::PrependScheme;
    use tokenizers::PreTokenizerWrapper as Pre;
    match pre {
        Pre::Metaspace(m) => m.get_prepend_scheme() == PrependScheme::First,
        Pre::Sequence(s) => s.as_ref().iter().any(prefixes_only_the_input_start),
        _ => false,
    }
}

/// The last added token that both texts contain at the same place within their common prefix,
/// as its index among the full text's matches and its end. The added-token split of each text is
/// the same up to there: the scan is left to right and both texts chose the same longest match
/// at that position.
fn shared_added_token_end(
    reuse: &TailReuse,
    prompt_text: &str,
    full_text: &str,
) -> Option<(usize, usize)> {
    let shared = common_prefix_len(prompt_text.as_bytes(), full_text.as_bytes());
    if reuse.normalized.is_none() {
        return reuse
            .raw
            .as_ref()
            .and_then(|raw| last_shared_match(raw, reuse.longest, prompt_text, full_text, shared));
    }
    let in_prompt = reuse.matches(prompt_text);
    reuse
        .matches(full_text)
        .into_iter()
        .enumerate()
        .rev()
        .filter(|&(_, (_, end))| end <= shared)
        .find(|(_, m)| in_prompt.binary_search(m).is_ok())
        .map(|(nth, (_, end))| (nth, end))
}

/// `shared_added_token_end` with one matcher, without scanning either text whole. Matches are
/// found one after the other, each leftmost-longest from where the last one ended; one that
/// starts `longest` bytes or more before the end of the shared prefix is decided by shared bytes
/// alone, so it is a match of both texts and only the full text is searched for those. Past
/// that point both texts are searched, and a match counts while both have it and it ends inside
/// the shared prefix. No search looks further than `longest` bytes past the shared prefix: a
/// match that starts inside it fits in that window.
fn last_shared_match(
    raw: &AhoCorasick,
    longest: usize,
    prompt_text: &str,
    full_text: &str,
    shared: usize,
) -> Option<(usize, usize)> {
    let find = |text: &str, from: usize| {
        let end = text.len().min(shared.saturating_add(longest));
        if from > end {
            return None;
        }
        raw.find(Input::new(text).span(from..end))
    };
    let mut from = 0;
    let mut count = 0;
    let mut last = None;
    while let Some(m) = find(full_text, from) {
        if m.start() + longest > shared {
            break;
        }
        last = Some((count, m.end()));
        count += 1;
        from = m.end();
    }
    while let (Some(f), Some(p)) = (find(full_text, from), find(prompt_text, from)) {
        if f.span() != p.span() || f.end() > shared {
            break;
        }
        last = Some((count, f.end()));
        count += 1;
        from = f.end();
    }
    last
}

/// The length of the longest common prefix of two sequences (token ids, bytes).
pub fn common_prefix_len<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example::message::normalize_messages;
    use serde_json::json;

    #[test]
    fn common_prefix_of_ids_and_bytes() {
        assert_eq!(common_prefix_len(&[1, 2, 3], &[1, 2, 4, 5]), 2);
        assert_eq!(common_prefix_len(b"abc", b"abd"), 2);
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
