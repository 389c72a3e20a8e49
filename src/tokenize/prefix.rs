//! Prefix reuse: the ids of a prompt and of the full conversation from one encoding of the
//! full text, and the token count of a prefix of it, exact because both texts split alike up
//! to the last added token they share.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, Input, MatchKind};

use crate::error::SftResult;
use crate::tokenize::encoded::EncodedText;
use crate::tokenize::fast_bpe::FastBpe;

use super::ChatTokenizer;
impl ChatTokenizer {
    pub(super) fn tail_reuse_for(hf: &tokenizers::Tokenizer) -> Option<TailReuse> {
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

/// What makes encoding a text in two pieces, cut after an added token, exact: added tokens split
/// the text first and each piece between them is normalized and tokenized on its own, unless a
/// token strips neighbouring whitespace. The matchers replay that split: leftmost-longest, tokens
/// that skip normalization first, then (without a normalizer) the others in the gaps.
pub(super) struct TailReuse {
    pub(super) raw: Option<AhoCorasick>,
    pub(super) normalized: Option<AhoCorasick>,
    /// The ids of the added tokens, when the model's own vocabulary has none of them: then
    /// every one of these ids in an encoding is exactly one added-token match of the text.
    pub(super) added_only_ids: Option<IdSet>,
    /// The longest added token, in bytes.
    pub(super) longest: usize,
}

impl TailReuse {
    /// Byte ranges of the added tokens the tokenizer will find in `text`, in order.
    pub(super) fn matches(&self, text: &str) -> Vec<(usize, usize)> {
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

/// A set of token ids, one bit each: read once per token of every prompt-completion example.
pub(super) struct IdSet(Vec<u64>);

impl IdSet {
    pub(super) fn new(ids: impl IntoIterator<Item = u32>) -> Self {
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

    pub(super) fn contains(&self, id: u32) -> bool {
        self.0
            .get(id as usize / 64)
            .is_some_and(|word| word & (1 << (id % 64)) != 0)
    }
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
                    let (by, text, tail_ids) = &mut **last
                        .get_or_insert_with(|| Box::new(([0; 32], String::new(), Vec::new())));
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
pub(super) fn last_shared_match(
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
    // Whole blocks compared at once (a memory comparison for bytes), then the first block
    // that differs item by item.
    const BLOCK: usize = 32;
    let len = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= len && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..len]
        .iter()
        .zip(&b[at..len])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The digest of the `tokenizer.json` that encoded a prompt tail, the tail, its ids.
type LastTail = ([u8; 32], String, Vec<u32>);

thread_local! {
    /// The last prompt tail `fast_prompt_and_full` encoded on this thread, its ids, and the
    /// digest of the `tokenizer.json` that encoded it. The tail is the generation prompt, the same
    /// text for nearly every example of a dataset. Boxed, to keep the static TLS space this
    /// module takes small (see `fast_bpe`'s `WORK`).
    static LAST_TAIL: std::cell::RefCell<Option<Box<LastTail>>> =
        const { std::cell::RefCell::new(None) };
}
