//! A second encoder for BPE tokenizers described by a HF `tokenizer.json`, producing the
//! same ids, offsets and decoded text as the `tokenizers` crate, several times faster. Two
//! families share one pipeline (added tokens, normalizer, pre-tokenizer, BPE, template):
//!
//! - byte-level BPE (Qwen3, Llama 3.x, DeepSeek V3): NFC, regex splits (`pretokenize`),
//!   merges over raw bytes, the byte-level decoder;
//! - SentencePiece-style BPE (Gemma 3, Llama 2, Mistral): `Replace`/`Prepend` normalizers
//!   (`normalize::Edit`), `Split` on a string or `Metaspace` (`sp_pretokenize`), merges over
//!   chars with `<0xNN>` byte fallback and unknown-token fusing (`chars`), and a chain of
//!   string decoders (`decode`).
//!
//! `model::BpeModel` runs both, differing only in its `Alphabet` (the initial symbols); the
//! merge loop (`merge`: a scan, blocks or a heap) and its tie-breaking are shared. `config`
//! decides the family and refuses, with the component at fault, anything it does not reproduce
//! exactly.
//!
//! Speed comes from skipping what HF needs for generality: no `NormalizedString`
//! alignment tables unless offsets are asked for (or NFC actually changes the text), whole
//! words looked up before merging, pair ranks and words in flat tables of one memory access a
//! lookup (`tables`), long words cut where no merge can cross into parts encoded alone
//! (`boundaries` for byte-level BPE, `chars` for SentencePiece-style BPE), and no allocation
//! per pre-token.
//!
//! Offsets are byte offsets into the input. A token that covers only some bytes of a
//! multi-byte char (byte-level BPE splits rare chars; byte fallback spells one as `<0xNN>`
//! tokens) gets the whole char's range, as HF does; tokens of the same char share one range.
//! A char the normalizer rewrote (a space become "▁") maps back to the char it replaced, and a
//! prepended "▁" to the first char of its piece.

mod added;
mod boundaries;
mod byte_key;
mod bytes;
mod char_class;
mod chars;
mod config;
#[cfg(test)]
mod cut_tests;
mod decode;
mod gpt4_split;
mod model;
mod normalize;
mod o200k_split;
mod piece_cache;
mod pretokenize;
mod sp_pretokenize;
#[cfg(test)]
mod sp_tests;
#[cfg(test)]
mod split_tests;
mod tables;
#[cfg(test)]
mod tests;
mod unicode_classes;
mod whole_chars;
mod word_split;

use std::borrow::Cow;

use rustc_hash::{FxHashMap, FxHashSet};

use added::{AddedMatcher, Piece};
use bytes::ByteAlphabet;
use chars::CharSymbols;
pub use config::Unsupported;
use config::{DecoderSpec, NormalizerSpec, PreTokenizerSpec};
use model::{Alphabet, BpeModel, Scratch};
use normalize::{apply_edits, identity_align, Edit};
use pretokenize::PreTokenizer;
use sp_pretokenize::CharPreTokenizer;
use tables::PairTable;

/// How the text between added tokens is split into words.
enum Words {
    ByteLevel(PreTokenizer),
    Chars(CharPreTokenizer),
}

/// An added token matched on the raw text (see `FastBpe::encode_noting_added`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddedAt {
    /// Its position in the ids.
    pub index: usize,
    /// The bytes of the text it covers.
    pub start: usize,
    pub end: usize,
}

pub struct FastBpe {
    raw_added: AddedMatcher,
    normalized_added: AddedMatcher,
    normalizer: NormalizerSpec,
    words: Words,
    model: BpeModel,
    /// A SentencePiece-style model whose normalizer only replaces each space by this char, and
    /// whose pre-tokenizer then leaves the text whole: the model reads the spaces as that char
    /// while it encodes (`BpeModel::encode_spaced`), with no rewritten copy of the text.
    spaces_as: Option<char>,
    prefix_ids: Vec<u32>,
    suffix_ids: Vec<u32>,
    token_ids: FxHashMap<String, u32>,
    /// Indexed by id: the token string, the bytes it decodes to, and whether it is a
    /// special token (dropped by `decode(.., true)`).
    tokens: Vec<Option<TokenEntry>>,
    vocab_size: usize,
    decoder: DecoderSpec,
}

struct TokenEntry {
    text: String,
    /// The bytes a byte-level token decodes to (empty for SentencePiece-style tokens, which
    /// the decoder chain reads from `text`).
    decoded: Box<[u8]>,
    special: bool,
}

thread_local! {
    /// This thread's encode buffers, its piece cache among them, kept from call to call. Boxed:
    /// a thread-local of a module loaded at run time takes static TLS space, of which glibc
    /// keeps little for all such modules together.
    static WORK: std::cell::RefCell<Box<Work>> = std::cell::RefCell::new(Box::default());
}

/// Runs `f` with this thread's buffers (fresh ones if they are in use further up the stack).
fn with_work<R>(f: impl FnOnce(&mut Work) -> R) -> R {
    WORK.with(|cell| match cell.try_borrow_mut() {
        Ok(mut work) => f(&mut work),
        Err(_) => f(&mut Work::default()),
    })
}

/// Buffers reused while encoding.
#[derive(Default)]
struct Work {
    pieces: Vec<(usize, usize)>,
    tmp: Vec<(usize, usize)>,
    bpe: Scratch,
}

impl FastBpe {
    pub fn from_tokenizer_json(json: &str) -> Result<Self, Unsupported> {
        let spec = config::parse(json)?;
        if matches!(spec.normalizer, NormalizerSpec::Nfc) {
            normalize::prepare_nfc();
        }
        let alphabet = ByteAlphabet::new();
        let byte_level = matches!(spec.decoder, DecoderSpec::ByteLevel);

        let model_vocab: FxHashMap<&str, u32> =
            spec.vocab.iter().map(|(t, id)| (t.as_str(), *id)).collect();
        let mut triples = Vec::with_capacity(spec.merges.len());
        let mut pairs = Vec::with_capacity(spec.merges.len());
        let mut joined = String::new();
        for (a, b) in &spec.merges {
            let lookup = |t: &str| {
                model_vocab.get(t).copied().ok_or_else(|| {
                    Unsupported::new("model", format!("merge part {t:?} is not in the vocab"))
                })
            };
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let merged = lookup(&joined)?;
            // Later duplicates overwrite earlier ones, as in HF's map.
            let pair = (lookup(a)?, lookup(b)?);
            triples.push((pair.0, pair.1, merged));
            pairs.push(pair);
        }
        // Every symbol a word starts as is an entry of the vocabulary.
        let top_id = spec.vocab.iter().map(|&(_, id)| id).max().unwrap_or(0);
        let merges = PairTable::new(&triples, top_id).ok_or_else(|| {
            Unsupported::new(
                "model",
                "token ids too large to pack with the merge ranks, or too many merges",
            )
        })?;
        let model = if byte_level {
            let mut byte_ids = [0u32; 256];
            for (b, slot) in byte_ids.iter_mut().enumerate() {
                let symbol = alphabet.char_of(b as u8).to_string();
                *slot = *model_vocab.get(symbol.as_str()).ok_or_else(|| {
                    Unsupported::new(
                        "model",
                        format!(
                            "vocab lacks the byte-level symbol {symbol:?} (not a byte-level BPE)"
                        ),
                    )
                })?;
            }
            let byte_vocab: Vec<(Vec<u8>, u32)> = spec
                .vocab
                .iter()
                .filter_map(|(t, id)| Some((alphabet.decode_token(t)?, *id)))
                .collect();
            BpeModel::new(
                Alphabet::Bytes(Box::new(byte_ids)),
                merges,
                &byte_vocab,
                spec.ignore_merges,
            )
            .with_whole_chars(&pairs, &byte_vocab, distinct_ids(&spec.vocab))
        } else {
            // A merged symbol is known by its id alone: two spellings of one id would make the
            // chunking of `chars` (which reasons on spellings) unsound.
            if model_vocab.len() != spec.vocab.len() {
                return Err(Unsupported::new("model", "the vocab has duplicate tokens"));
            }
            let mut seen = FxHashSet::default();
            if let Some((t, id)) = spec.vocab.iter().find(|(_, id)| !seen.insert(*id)) {
                return Err(Unsupported::new(
                    "model",
                    format!("id {id} is given to two tokens (one is {t:?})"),
                ));
            }
            let m = &spec.char_model;
            let unk = match &m.unk_token {
                None => None,
                Some(unk) => Some(*model_vocab.get(unk.as_str()).ok_or_else(|| {
                    Unsupported::new("model", format!("unk_token {unk:?} is not in the vocab"))
                })?),
            };
            let symbols = CharSymbols::new(
                spec.vocab.iter().map(|(t, id)| (t.as_str(), *id)),
                m.byte_fallback,
                unk,
                m.fuse_unk,
            );
            let text_vocab: Vec<(Vec<u8>, u32)> = spec
                .vocab
                .iter()
                .map(|(t, id)| (t.as_bytes().to_vec(), *id))
                .collect();
            BpeModel::new(
                Alphabet::Chars(Box::new(symbols)),
                merges,
                &text_vocab,
                spec.ignore_merges,
            )
        };

        // HF ignores the ids written next to added tokens: a token already known keeps
        // its id, a new one gets the next id after the model's vocab size.
        let mut next_id = spec.vocab.len() as u32;
        let mut added_ids: FxHashMap<String, u32> = FxHashMap::default();
        let mut special_set: FxHashSet<String> = FxHashSet::default();
        let mut specials = Vec::new();
        let mut others = Vec::new();
        for t in spec.added.iter().filter(|t| !t.content.is_empty()) {
            if added_ids.contains_key(&t.content) {
                continue;
            }
            let id = match model_vocab.get(t.content.as_str()) {
                Some(id) => *id,
                None => {
                    next_id += 1;
                    next_id - 1
                }
            };
            added_ids.insert(t.content.clone(), id);
            if t.special {
                special_set.insert(t.content.clone());
                specials.push(t);
            } else {
                others.push(t);
            }
        }
        let (mut raw_patterns, mut normalized_patterns) = (Vec::new(), Vec::new());
        for t in specials.iter().chain(&others) {
            let id = added_ids.get(&t.content).copied().unwrap_or_default();
            if t.normalized {
                // HF matches these on normalized text, so it normalizes them too.
                let pattern = match &spec.normalizer {
                    NormalizerSpec::None => t.content.clone(),
                    NormalizerSpec::Nfc => normalize::nfc(&t.content, 0).text.into_owned(),
                    NormalizerSpec::Edits(edits) => {
                        apply_edits(&t.content, None, edits).0.into_owned()
                    }
                };
                if pattern.is_empty() {
                    continue;
                }
                normalized_patterns.push((pattern, id));
            } else {
                raw_patterns.push((t.content.clone(), id));
            }
        }
        let raw_added =
            AddedMatcher::new(raw_patterns).map_err(|e| Unsupported::new("added_tokens", e))?;
        let normalized_added = AddedMatcher::new(normalized_patterns)
            .map_err(|e| Unsupported::new("added_tokens", e))?;

        let mut token_ids: FxHashMap<String, u32> =
            spec.vocab.iter().map(|(t, id)| (t.clone(), *id)).collect();
        let mut tokens: Vec<Option<TokenEntry>> = Vec::new();
        let mut put = |text: &str, id: u32| {
            let index = id as usize;
            if tokens.len() <= index {
                tokens.resize_with(index + 1, || None);
            }
            let decoded = if byte_level {
                alphabet
                    .decode_token(text)
                    .unwrap_or_else(|| text.as_bytes().to_vec())
            } else {
                Vec::new()
            };
            tokens[index] = Some(TokenEntry {
                text: text.to_owned(),
                decoded: decoded.into_boxed_slice(),
                special: special_set.contains(text),
            });
        };
        for (t, id) in &spec.vocab {
            put(t, *id);
        }
        for (t, id) in &added_ids {
            put(t, *id);
        }
        let vocab_size = {
            let mut names: FxHashSet<&str> = model_vocab.keys().copied().collect();
            names.extend(added_ids.keys().map(String::as_str));
            names.len()
        };
        token_ids.extend(added_ids);

        let template_id_list = |names: &[String]| -> Vec<u32> {
            names
                .iter()
                .flat_map(|n| {
                    spec.template_ids
                        .iter()
                        .filter(move |(name, _)| name == n)
                        .flat_map(|(_, ids)| ids.iter().copied())
                })
                .collect()
        };
        let (prefix_ids, suffix_ids) = match &spec.template {
            Some((prefix, suffix)) => (template_id_list(prefix), template_id_list(suffix)),
            None => (Vec::new(), Vec::new()),
        };

        let words = match spec.pre_tokenizer {
            PreTokenizerSpec::ByteLevel(patterns) => Words::ByteLevel(
                PreTokenizer::new(&patterns).map_err(|e| Unsupported::new("pre_tokenizer", e))?,
            ),
            PreTokenizerSpec::Chars(pre) => Words::Chars(pre),
        };

        let spaces_as = match (&spec.normalizer, &words) {
            (NormalizerSpec::Edits(edits), Words::Chars(pre)) => match edits.as_slice() {
                [Edit::Replace { pattern, content }] if pattern == " " => {
                    let mut chars = content.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None)
                            if pre.keeps_whole_without(' ')
                                && normalized_added.is_empty()
                                && model.can_encode_spaced(c) =>
                        {
                            Some(c)
                        }
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };

        Ok(Self {
            raw_added,
            normalized_added,
            normalizer: spec.normalizer,
            words,
            model,
            spaces_as,
            prefix_ids,
            suffix_ids,
            token_ids,
            tokens,
            vocab_size,
            decoder: spec.decoder,
        })
    }

    /// Ids of `text` without the post-processor's special tokens, like HF
    /// `encode(text, false)`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, &mut ids, None, None);
        ids
    }

    /// Ids of `text` (as `encode`), and where each added token matched on the raw text is: its
    /// index in the ids and the byte range it covers. Pieces between those tokens are encoded
    /// each on its own, so the ids up to such a token are the ids of the text up to its end.
    pub fn encode_noting_added(&self, text: &str, added: &mut Vec<AddedAt>) -> Vec<u32> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, &mut ids, None, Some(added));
        ids
    }

    /// Like HF `encode(text, add_special_tokens)`: with `true`, the post-processor's
    /// template tokens (Llama's BOS) surround the ids.
    pub fn encode_with(&self, text: &str, add_special_tokens: bool) -> Vec<u32> {
        if !add_special_tokens {
            return self.encode(text);
        }
        let mut ids = self.prefix_ids.clone();
        self.encode_into(text, &mut ids, None, None);
        ids.extend_from_slice(&self.suffix_ids);
        ids
    }

    /// `encode_with`, appending to `ids`.
    pub fn encode_append(&self, text: &str, add_special_tokens: bool, ids: &mut Vec<u32>) {
        if add_special_tokens {
            ids.extend_from_slice(&self.prefix_ids);
        }
        self.encode_into(text, ids, None, None);
        if add_special_tokens {
            ids.extend_from_slice(&self.suffix_ids);
        }
    }

    /// Ids with the byte range each token covers in `text` (see the module docs for
    /// tokens inside a multi-byte char).
    pub fn encode_with_offsets(&self, text: &str) -> (Vec<u32>, Vec<(usize, usize)>) {
        // About one token in three bytes or fewer: most texts never grow either vector.
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        let mut offsets = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, &mut ids, Some(&mut offsets), None);
        (ids, offsets)
    }

    /// Ids and offsets of `text` as if the tokenizer had no added tokens, special or not: the
    /// normalizer, pre-tokenizer and BPE alone (what `sanitizeControlTokens` encodes a control
    /// token from the data with).
    pub fn encode_without_added(&self, text: &str) -> (Vec<u32>, Vec<(usize, usize)>) {
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        let mut offsets = Vec::with_capacity(text.len() / 3 + 1);
        if !text.is_empty() {
            with_work(|work| {
                self.encode_segment(text, 0, false, work, &mut ids, Some(&mut offsets))
            });
        }
        (ids, offsets)
    }

    /// Appends the ids of `text` and, when asked, each token's offsets and where the added
    /// tokens matched on the raw text are.
    fn encode_into(
        &self,
        text: &str,
        ids: &mut Vec<u32>,
        offsets: Option<&mut Vec<(usize, usize)>>,
        added: Option<&mut Vec<AddedAt>>,
    ) {
        with_work(|work| self.encode_with_work(text, ids, offsets, added, work));
    }

    fn encode_with_work(
        &self,
        text: &str,
        ids: &mut Vec<u32>,
        mut offsets: Option<&mut Vec<(usize, usize)>>,
        mut added: Option<&mut Vec<AddedAt>>,
        work: &mut Work,
    ) {
        self.raw_added.split(text, |piece| match piece {
            Piece::Added(id, start, end) => {
                if let Some(a) = added.as_deref_mut() {
                    a.push(AddedAt {
                        index: ids.len(),
                        start,
                        end,
                    });
                }
                ids.push(id);
                if let Some(o) = offsets.as_deref_mut() {
                    o.push((start, end));
                }
            }
            Piece::Text(start, end) => self.encode_segment(
                &text[start..end],
                start,
                true,
                work,
                ids,
                offsets.as_deref_mut(),
            ),
        });
    }

    /// Encodes a stretch of input free of raw-matched added tokens; `base` is where it
    /// starts in the input. Without `added`, the tokens matched on normalized text are not
    /// looked for either.
    fn encode_segment(
        &self,
        segment: &str,
        base: usize,
        added: bool,
        work: &mut Work,
        ids: &mut Vec<u32>,
        offsets: Option<&mut Vec<(usize, usize)>>,
    ) {
        let no_added = AddedMatcher::none();
        let matcher = if added {
            &self.normalized_added
        } else {
            &no_added
        };
        match &self.words {
            Words::ByteLevel(pre) => {
                self.encode_byte_level(pre, matcher, segment, base, work, ids, offsets)
            }
            Words::Chars(pre) => self.encode_chars(pre, matcher, segment, base, work, ids, offsets),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn encode_byte_level(
        &self,
        pre_tokenizer: &PreTokenizer,
        matcher: &AddedMatcher,
        segment: &str,
        base: usize,
        work: &mut Work,
        ids: &mut Vec<u32>,
        mut offsets: Option<&mut Vec<(usize, usize)>>,
    ) {
        let normalized = if matches!(self.normalizer, NormalizerSpec::Nfc) {
            normalize::nfc(segment, base)
        } else {
            normalize::Normalized {
                text: Cow::Borrowed(segment),
                align: None,
            }
        };
        let text: &str = &normalized.text;
        let align = normalized.align.as_deref();
        // Maps a byte range of the normalized text to the input, widening to whole chars.
        let to_input = |start: usize, end: usize| -> (usize, usize) {
            match align {
                Some(a) => (a[start].0, a[end - 1].1),
                None => (
                    base + char_start(text, start),
                    base + char_end(text, end - 1),
                ),
            }
        };
        matcher.split(text, |piece| match piece {
            Piece::Added(id, start, end) => {
                ids.push(id);
                if let Some(o) = offsets.as_deref_mut() {
                    o.push(to_input(start, end));
                }
            }
            Piece::Text(start, end) => {
                let chunk = &text[start..end];
                pre_tokenizer.split(chunk, &mut work.pieces, &mut work.tmp);
                for &(p_start, p_end) in &work.pieces {
                    let word = &chunk[p_start..p_end];
                    match offsets.as_deref_mut() {
                        None => self.model.encode_word(word, &mut work.bpe, ids, None),
                        Some(o) => {
                            // The word's spans are appended relative to it, then moved in place.
                            let first = o.len();
                            self.model.encode_word(word, &mut work.bpe, ids, Some(o));
                            let at = start + p_start;
                            for span in &mut o[first..] {
                                *span = to_input(at + span.0, at + span.1);
                            }
                        }
                    }
                }
            }
        });
    }

    /// The SentencePiece-style path. Alignments (input range per byte of the rewritten text)
    /// are kept only when offsets are asked for, or when Metaspace's `first` scheme must know
    /// whether a piece starts the input after a normalizer moved things.
    #[allow(clippy::too_many_arguments)]
    fn encode_chars(
        &self,
        pre_tokenizer: &CharPreTokenizer,
        matcher: &AddedMatcher,
        segment: &str,
        base: usize,
        work: &mut Work,
        ids: &mut Vec<u32>,
        mut offsets: Option<&mut Vec<(usize, usize)>>,
    ) {
        let edits = match &self.normalizer {
            NormalizerSpec::Edits(edits) => edits.as_slice(),
            _ => &[],
        };
        if let Some(space) = self.spaces_as {
            let first = offsets.as_deref().map_or(0, Vec::len);
            self.model
                .encode_spaced(segment, space, &mut work.bpe, ids, offsets.as_deref_mut());
            // A token of some bytes of a char spans the whole char, as in HF.
            if let Some(o) = offsets {
                for span in &mut o[first..] {
                    *span = (
                        base + char_start(segment, span.0),
                        base + char_end(segment, span.1 - 1),
                    );
                }
            }
            return;
        }
        let track = offsets.is_some() || (pre_tokenizer.needs_origin() && !edits.is_empty());
        let align = track.then(|| identity_align(segment, base));
        let (text, align) = apply_edits(segment, align, edits);
        let to_input = |a: &[(usize, usize)], start: usize, end: usize| (a[start].0, a[end - 1].1);
        matcher.split(&text, |piece| match piece {
            Piece::Added(id, start, end) => {
                ids.push(id);
                if let (Some(o), Some(a)) = (offsets.as_deref_mut(), &align) {
                    o.push(to_input(a, start, end));
                }
            }
            Piece::Text(start, end) => {
                let origin = align.as_ref().map_or(base + start, |a| a[start].0);
                let piece_align = align.as_ref().map(|a| a[start..end].to_vec());
                let (piece, piece_align) =
                    pre_tokenizer.rewrite(&text[start..end], piece_align, origin == 0);
                pre_tokenizer.split(&piece, &mut work.pieces);
                for &(p_start, p_end) in &work.pieces {
                    let word = &piece[p_start..p_end];
                    match (offsets.as_deref_mut(), &piece_align) {
                        (Some(o), Some(a)) => {
                            let first = o.len();
                            self.model.encode_word(word, &mut work.bpe, ids, Some(o));
                            for span in &mut o[first..] {
                                *span = to_input(a, p_start + span.0, p_start + span.1);
                            }
                        }
                        _ => self.model.encode_word(word, &mut work.bpe, ids, None),
                    }
                }
            }
        });
    }

    /// Like HF `decode`: unknown ids are skipped, and with `skip_special_tokens` so are
    /// tokens whose text is a special added token's.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> String {
        let kept = ids
            .iter()
            .filter_map(|&id| match self.tokens.get(id as usize) {
                Some(Some(entry)) if !(skip_special_tokens && entry.special) => Some(entry),
                _ => None,
            });
        match &self.decoder {
            DecoderSpec::ByteLevel => {
                let mut bytes = Vec::with_capacity(ids.len() * 4);
                for entry in kept {
                    bytes.extend_from_slice(&entry.decoded);
                }
                match String::from_utf8(bytes) {
                    Ok(s) => s,
                    Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                }
            }
            DecoderSpec::Chain(steps) => {
                decode::decode_chain(steps, kept.map(|e| e.text.clone()).collect())
            }
        }
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.token_ids.get(token).copied()
    }

    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        match self.tokens.get(id as usize) {
            Some(Some(entry)) => Some(&entry.text),
            _ => None,
        }
    }

    /// Whether decoding any run of this engine's tokens gives back the very bytes of the text
    /// they were encoded from (their offsets' span): a byte-level model with no normalizer. Its
    /// tokens spell raw bytes, its added tokens their own text (the engine takes no added token
    /// that strips whitespace), and its offsets tile the input in order, a char split between
    /// tokens given whole to each of them.
    pub fn decodes_verbatim(&self) -> bool {
        matches!(self.words, Words::ByteLevel(_)) && matches!(self.normalizer, NormalizerSpec::None)
    }

    /// Distinct tokens, added ones included (HF `get_vocab_size(true)`).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }
}

/// Whether every id of `vocab` names one token.
fn distinct_ids(vocab: &[(String, u32)]) -> bool {
    let mut seen = FxHashSet::default();
    vocab.iter().all(|(_, id)| seen.insert(*id))
}

fn char_start(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn char_end(text: &str, mut i: usize) -> usize {
    i += 1;
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}
