//! Rank-ordered BPE, over raw bytes (byte-level BPE) or over chars with byte fallback
//! (SentencePiece-style BPE, see `chars`).
//!
//! HF applies, at each step, the lowest-ranked merge among the adjacent pairs, the
//! leftmost one on a tie (its heap orders by rank, then position, and discards stale
//! entries by their result id; a stale entry can never pass that check because every
//! merge makes its pair's string longer). Both strategies of `merge` follow that order.

use std::cmp::Reverse;

use rustc_hash::FxHashMap;

use super::boundaries::Boundaries;
use super::chars::{CharSymbols, Initials};
use super::piece_cache::{Cached, PieceCache, WORD_LIMIT};
use super::tables::{PairTable, WordTable};
use super::whole_chars::{
    WholeChars, AFTER_ASCII, AFTER_MULTIBYTE, BEFORE_ASCII, BEFORE_MULTIBYTE,
};

#[path = "merge.rs"]
mod merge;
#[cfg(test)]
#[path = "merge_tests.rs"]
mod merge_tests;

/// Gives every model its own serial number, which keys the per-thread piece caches.
static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Words of up to this many symbols are merged by rescanning the pair ranks, which beats a
/// heap on the short pre-tokens that make up almost all text, in arrays of this size.
const SCAN: usize = 16;
/// Longer words of up to `merge::BLOCKED_SLOTS` symbols keep their pair ranks in blocks, each
/// with its lowest rank beside it (`merge_by_blocks`), in the smallest of these arrays that holds
/// them. A clause of a script written without spaces (Chinese, Japanese, Thai) is such a word;
/// for them one pass over the blocks' lows costs less than a pass over every rank or the heap's
/// pops and pushes (measured in instructions on Chinese, Japanese and Thai text).
const BLOCKED: [usize; 4] = [32, 64, 128, merge::BLOCKED_SLOTS];

/// Words of at least this many bytes are cut into parts (`boundaries`): those the piece cache
/// does not hold. A shorter word is merged whole once and then found in the cache; cutting it
/// as well costs more than it saves on most vocabularies (measured in instructions).
const CUT_FROM: usize = WORD_LIMIT + 1;

const NO_MERGE: u32 = u32::MAX;

/// What a word's symbols start as.
pub(super) enum Alphabet {
    /// One symbol per byte, by its id.
    Bytes(Box<[u32; 256]>),
    Chars(Box<CharSymbols>),
}

pub(super) struct BpeModel {
    alphabet: Alphabet,
    /// Pair to `(rank, merged id)`.
    merges: PairTable,
    /// Words (or chunks, see `chars`) that come out as one token, looked up before merging:
    /// the vocabulary entries that merging their own symbols turns back into themselves (most
    /// of the common words).
    whole_words: WordTable,
    /// With `ignore_merges`, every vocabulary entry: HF looks the whole word up first.
    exact_words: Option<WordTable>,
    /// This model's key in the per-thread piece caches.
    serial: u64,
    /// Byte-level models: `rank_of` of every pair of bytes, indexed by `(left << 8) | right`.
    /// A word's first ranks are all byte pairs; this table is small enough to stay in cache,
    /// where the merges map is not.
    byte_pairs: Box<[u32]>,
    /// Byte-level models: the multi-byte chars a word may start as one token (`whole_chars`).
    whole_chars: WholeChars,
    /// Byte-level models: where a word's parts may be encoded alone (`boundaries`).
    boundaries: Boundaries,
}

/// A symbol of a word being merged: its id and the bytes it covers.
#[derive(Clone, Copy)]
pub(super) struct Symbol {
    pub(super) id: u32,
    pub(super) start: u32,
    pub(super) len: u32,
}

/// Buffers reused across the words of one encode call.
#[derive(Default)]
pub(super) struct Scratch {
    symbols: Vec<Symbol>,
    prev: Vec<usize>,
    next: Vec<usize>,
    heap: Vec<Reverse<u64>>,
    initials: Initials,
    cuts: Vec<(usize, usize)>,
    pieces: PieceCache,
    /// The spans of the word being encoded, and the tokens the piece cache is given for it.
    word_spans: Vec<(usize, usize)>,
    word_tokens: Vec<(u32, u32)>,
    /// A word cut into parts: its first symbols, and the spans of the part being encoded.
    word_symbols: Vec<Symbol>,
    part_spans: Vec<(usize, usize)>,
    /// A chunk of `encode_spaced` as the vocabulary spells it.
    spelled: Vec<u8>,
}

/// Gives the piece cache `bytes`' tokens: `ids`, each as long as its span in `found`.
fn remember(scratch: &mut Scratch, bytes: &[u8], ids: &[u32], found: &[(usize, usize)]) {
    let mut tokens = std::mem::take(&mut scratch.word_tokens);
    tokens.clear();
    tokens.extend(
        ids.iter()
            .zip(found)
            .map(|(&id, &(start, end))| (id, (end - start) as u32)),
    );
    scratch.pieces.put(bytes, &tokens);
    scratch.word_tokens = tokens;
}

impl BpeModel {
    /// `vocab` holds the entries as the symbols spell them: raw bytes for `Alphabet::Bytes`
    /// (only the entries made of byte-level symbols), UTF-8 text for `Alphabet::Chars`.
    pub(super) fn new(
        alphabet: Alphabet,
        merges: PairTable,
        vocab: &[(Vec<u8>, u32)],
        ignore_merges: bool,
    ) -> Self {
        let mut model = Self {
            alphabet,
            merges,
            whole_words: WordTable::new(std::iter::empty()),
            exact_words: None,
            serial: SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            byte_pairs: Box::default(),
            whole_chars: WholeChars::default(),
            boundaries: Boundaries::default(),
        };
        if let Alphabet::Bytes(byte_ids) = &model.alphabet {
            model.byte_pairs = (0..1usize << 16)
                .map(|pair| model.rank_of(byte_ids[pair >> 8], byte_ids[pair & 0xFF]))
                .collect();
        }
        let mut scratch = Scratch::default();
        let mut ids = Vec::new();
        let whole_words: Vec<(&[u8], u32)> = vocab
            .iter()
            .filter(|(bytes, id)| {
                ids.clear();
                model.encode_entry(bytes, &mut scratch, &mut ids);
                ids == [*id]
            })
            .map(|(bytes, id)| (&bytes[..], *id))
            .collect();
        model.whole_words = WordTable::new(whole_words.into_iter());
        if ignore_merges {
            model.exact_words = Some(WordTable::new(
                vocab.iter().map(|(bytes, id)| (&bytes[..], *id)),
            ));
        }
        model
    }

    /// A byte-level model that starts the chars `WholeChars` allows as one token, and cuts long
    /// words where `Boundaries` finds no merge can cross. `pairs`: the merges as `new` got them
    /// (left and right ids, in rank order), `vocab` its entries, `distinct_ids` whether every id
    /// of the whole vocabulary names one token.
    pub(super) fn with_whole_chars(
        mut self,
        pairs: &[(u32, u32)],
        vocab: &[(Vec<u8>, u32)],
        distinct_ids: bool,
    ) -> Self {
        let Alphabet::Bytes(byte_ids) = &self.alphabet else {
            return self;
        };
        let spelling: FxHashMap<u32, &[u8]> =
            vocab.iter().map(|(bytes, id)| (*id, &bytes[..])).collect();
        let whole = WholeChars::new(
            pairs.iter().map(|&(l, r)| (l, r, self.merge_of(l, r).0)),
            |id| spelling.get(&id).copied(),
            vocab.iter().map(|(bytes, id)| (&bytes[..], *id)),
            |l, r| self.merge_of(l, r),
            byte_ids,
        );
        self.whole_chars = whole;
        self.boundaries = Boundaries::new(
            pairs
                .iter()
                .filter_map(|(l, r)| Some((*spelling.get(l)?, *spelling.get(r)?))),
            distinct_ids,
        );
        self
    }

    fn merge_of(&self, left: u32, right: u32) -> (u32, u32) {
        self.merges.get(left, right).unwrap_or((NO_MERGE, 0))
    }

    #[inline(always)]
    fn rank_of(&self, left: u32, right: u32) -> u32 {
        self.merges.rank(left, right).unwrap_or(NO_MERGE)
    }

    /// Appends the ids of `word` and, when asked, each token's byte span inside `word`.
    pub(super) fn encode_word(
        &self,
        word: &str,
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        spans: Option<&mut Vec<(usize, usize)>>,
    ) {
        let bytes = word.as_bytes();
        if bytes.len() > WORD_LIMIT {
            return self.encode_uncached(word, scratch, ids, spans);
        }
        // The thread's cache is small and hot: it is asked before anything else.
        if let Some(cached) = scratch.pieces.get(self.serial, bytes) {
            return push_cached(cached, 0, bytes.len(), ids, spans);
        }
        let first = ids.len();
        let mut found = std::mem::take(&mut scratch.word_spans);
        found.clear();
        self.encode_uncached(word, scratch, ids, Some(&mut found));
        remember(scratch, bytes, &ids[first..], &found);
        if let Some(spans) = spans {
            spans.extend_from_slice(&found);
        }
        scratch.word_spans = found;
    }

    fn encode_uncached(
        &self,
        word: &str,
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        spans: Option<&mut Vec<(usize, usize)>>,
    ) {
        match &self.alphabet {
            Alphabet::Bytes(_) => {
                self.encode_bytes(word.as_bytes(), Some(word), scratch, ids, spans)
            }
            Alphabet::Chars(chars) => {
                let whole = word.len() <= WORD_LIMIT;
                self.encode_chars(chars, word, ' ', !whole, scratch, ids, spans)
            }
        }
    }

    /// `encode_word` on a vocabulary entry as `new` holds it (bytes, or UTF-8 text).
    fn encode_entry(&self, entry: &[u8], scratch: &mut Scratch, ids: &mut Vec<u32>) {
        match &self.alphabet {
            Alphabet::Bytes(_) => self.encode_bytes(entry, None, scratch, ids, None),
            Alphabet::Chars(chars) => {
                if let Ok(text) = std::str::from_utf8(entry) {
                    self.encode_chars(chars, text, ' ', false, scratch, ids, None);
                }
            }
        }
    }

    fn exact_word(
        &self,
        word: &[u8],
        ids: &mut Vec<u32>,
        spans: Option<&mut Vec<(usize, usize)>>,
    ) -> bool {
        let Some(id) = self.exact_words.as_ref().and_then(|w| w.get(word)) else {
            return false;
        };
        ids.push(id);
        if let Some(spans) = spans {
            spans.push((0, word.len()));
        }
        true
    }

    /// `text`: `word` as text, when the caller has it (its chars may then start whole).
    fn encode_bytes(
        &self,
        word: &[u8],
        text: Option<&str>,
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        mut spans: Option<&mut Vec<(usize, usize)>>,
    ) {
        let Alphabet::Bytes(byte_ids) = &self.alphabet else {
            return;
        };
        if word.is_empty() || self.exact_word(word, ids, spans.as_deref_mut()) {
            return;
        }
        scratch.symbols.clear();
        match text {
            Some(text) if !self.whole_chars.is_empty() && !word.is_ascii() => {
                if word.len() >= CUT_FROM && !self.boundaries.is_empty() {
                    let (symbols, cuts) = (&mut scratch.symbols, &mut scratch.cuts);
                    self.char_symbols::<true>(text, byte_ids, symbols, cuts);
                    if cuts.len() > 2 {
                        return self.encode_parts(word, scratch, ids, spans);
                    }
                } else {
                    let (symbols, cuts) = (&mut scratch.symbols, &mut scratch.cuts);
                    self.char_symbols::<false>(text, byte_ids, symbols, cuts);
                }
            }
            _ => scratch
                .symbols
                .extend(word.iter().enumerate().map(|(i, &b)| Symbol {
                    id: byte_ids[usize::from(b)],
                    start: i as u32,
                    len: 1,
                })),
        }
        // With `ignore_merges`, `exact_word` has looked the word up in the whole vocabulary.
        let look_up = self.exact_words.is_none();
        self.merge_chunk(word, 0, word.len() as u32, look_up, scratch, ids, spans);
    }

    /// Encodes a word `char_symbols` cut, `scratch.symbols` its first symbols and `scratch.cuts`
    /// where its parts start, part after part: a part of one or two symbols at once (its one
    /// possible merge costs less than a lookup), a longer one from the piece cache or the merge
    /// loop.
    fn encode_parts(
        &self,
        word: &[u8],
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        mut spans: Option<&mut Vec<(usize, usize)>>,
    ) {
        let mut symbols = std::mem::take(&mut scratch.word_symbols);
        std::mem::swap(&mut symbols, &mut scratch.symbols);
        let cuts = std::mem::take(&mut scratch.cuts);
        let mut found = std::mem::take(&mut scratch.part_spans);
        for part in cuts.windows(2) {
            let ((from, start), (to, end)) = (part[0], part[1]);
            let bytes = &word[start..end];
            match &symbols[from..to] {
                [one] => {
                    ids.push(one.id);
                    if let Some(spans) = spans.as_deref_mut() {
                        spans.push((start, end));
                    }
                    continue;
                }
                [left, right] => {
                    match self.merge_of(left.id, right.id) {
                        (NO_MERGE, _) => {
                            push_symbols(&symbols[from..to], ids, spans.as_deref_mut())
                        }
                        (_, id) => {
                            ids.push(id);
                            if let Some(spans) = spans.as_deref_mut() {
                                spans.push((start, end));
                            }
                        }
                    }
                    continue;
                }
                _ => {}
            }
            // The cache holds what the engine gives for a word, which for a vocabulary entry
            // under `ignore_merges` is that entry, not its merges.
            let cached = self
                .exact_words
                .as_ref()
                .is_none_or(|exact| exact.get(bytes).is_none());
            if cached {
                if let Some(hit) = scratch.pieces.get(self.serial, bytes) {
                    push_cached(hit, start, bytes.len(), ids, spans.as_deref_mut());
                    continue;
                }
            }
            scratch.symbols.clear();
            scratch
                .symbols
                .extend(symbols[from..to].iter().map(|s| Symbol {
                    start: s.start - start as u32,
                    ..*s
                }));
            let first = ids.len();
            found.clear();
            self.merge_chunk(
                bytes,
                0,
                bytes.len() as u32,
                true,
                scratch,
                ids,
                Some(&mut found),
            );
            if cached {
                remember(scratch, bytes, &ids[first..], &found);
            }
            if let Some(spans) = spans.as_deref_mut() {
                spans.extend(found.iter().map(|&(s, e)| (start + s, start + e)));
            }
        }
        scratch.word_symbols = symbols;
        scratch.cuts = cuts;
        scratch.part_spans = found;
    }

    /// The first symbols of `text`: a byte each, but one token for each char `whole_chars`
    /// allows next to its neighbours (the bytes before and after it). With `CUT`, `cuts` gets
    /// where the parts of `text` start, as (symbol index, byte position), from `(0, 0)` to
    /// `(symbols.len(), text.len())`: at each boundary between two chars that start as one
    /// symbol each (ASCII chars always do) which `boundaries` finds no merge can cross.
    fn char_symbols<const CUT: bool>(
        &self,
        text: &str,
        byte_ids: &[u32; 256],
        symbols: &mut Vec<Symbol>,
        cuts: &mut Vec<(usize, usize)>,
    ) {
        let bytes = text.as_bytes();
        if CUT {
            cuts.clear();
            cuts.push((0, 0));
        }
        // The previous char, when it started as one symbol.
        let mut previous = None;
        for (i, c) in text.char_indices() {
            let len = c.len_utf8();
            let whole =
                (len > 1)
                    .then(|| self.whole_chars.get(c))
                    .flatten()
                    .filter(|&(_, flags)| {
                        let before = match i.checked_sub(1).map(|k| bytes[k]) {
                            None => true,
                            Some(b) if b < 0x80 => flags & AFTER_ASCII != 0,
                            Some(_) => flags & AFTER_MULTIBYTE != 0,
                        };
                        let after = match bytes.get(i + len) {
                            None => true,
                            Some(&b) if b < 0x80 => flags & BEFORE_ASCII != 0,
                            Some(_) => flags & BEFORE_MULTIBYTE != 0,
                        };
                        before && after
                    });
            if CUT {
                let single = len == 1 || whole.is_some();
                if single && previous.is_some_and(|p| !self.boundaries.crossable(p, c)) {
                    cuts.push((symbols.len(), i));
                }
                previous = single.then_some(c);
            }
            match whole {
                Some((id, _)) => symbols.push(Symbol {
                    id,
                    start: i as u32,
                    len: len as u32,
                }),
                None => {
                    symbols.extend(bytes[i..i + len].iter().enumerate().map(|(k, &b)| Symbol {
                        id: byte_ids[usize::from(b)],
                        start: (i + k) as u32,
                        len: 1,
                    }))
                }
            }
        }
        if CUT {
            cuts.push((symbols.len(), bytes.len()));
        }
    }

    /// How many parts `encode_bytes` cuts `word` into (1 when it merges it whole).
    #[cfg(test)]
    pub(super) fn parts(&self, word: &str) -> usize {
        let Alphabet::Bytes(byte_ids) = &self.alphabet else {
            return 1;
        };
        if self.whole_chars.is_empty()
            || word.is_ascii()
            || word.len() < CUT_FROM
            || self.boundaries.is_empty()
        {
            return 1;
        }
        let (mut symbols, mut cuts) = (Vec::new(), Vec::new());
        self.char_symbols::<true>(word, byte_ids, &mut symbols, &mut cuts);
        cuts.len() - 1
    }

    /// Char-level BPE of `word`, chunk by chunk (see `chars`). `space`: the char a space of
    /// `word` stands for (`' '` but where `encode_spaced` rewrites it); `cache_chunks`: whether
    /// chunks go through the piece cache (for words the cache does not hold whole).
    #[allow(clippy::too_many_arguments)]
    fn encode_chars(
        &self,
        chars: &CharSymbols,
        word: &str,
        space: char,
        cache_chunks: bool,
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        mut spans: Option<&mut Vec<(usize, usize)>>,
    ) {
        if word.is_empty() || self.exact_word(word.as_bytes(), ids, spans.as_deref_mut()) {
            return;
        }
        let mut initials = std::mem::take(&mut scratch.initials);
        let mut cuts = std::mem::take(&mut scratch.cuts);
        let mut found = std::mem::take(&mut scratch.part_spans);
        let mut spelled = std::mem::take(&mut scratch.spelled);
        chars.initials(word, space, &mut initials, &mut cuts);
        cuts.push((initials.len(), word.len()));
        let mut at = 0u32;
        for chunk in cuts.windows(2) {
            let ((from, text_from), (to, text_to)) = (chunk[0], chunk[1]);
            let begin = at;
            let raw = &word.as_bytes()[text_from..text_to];
            let symbols = &initials[from..to];
            let len: u32 = symbols.iter().map(|&(_, len)| len).sum();
            at += len;
            if let [(id, _)] = symbols {
                ids.push(*id);
                if let Some(spans) = spans.as_deref_mut() {
                    spans.push((begin as usize, at as usize));
                }
                continue;
            }
            // The cache is keyed by the word's own bytes: with `space` rewritten or not, they
            // decide the chunk's symbols. It holds what the engine gives for a word, which under
            // `ignore_merges` is not what a chunk merges into when it is a vocabulary entry.
            let cached = cache_chunks && symbols.len() > 2 && self.exact_words.is_none();
            if cached {
                if let Some(hit) = scratch.pieces.get(self.serial, raw) {
                    push_cached(hit, begin as usize, len as usize, ids, spans.as_deref_mut());
                    continue;
                }
            }
            let mut start = begin;
            scratch.symbols.clear();
            scratch.symbols.extend(symbols.iter().map(|&(id, len)| {
                let s = Symbol { id, start, len };
                start += len;
                s
            }));
            // `whole_words` holds the chunk as the vocabulary spells it.
            let bytes = if space != ' ' && raw.contains(&b' ') {
                spelled.clear();
                let mut utf8 = [0u8; 4];
                let replacement = space.encode_utf8(&mut utf8).as_bytes();
                for &b in raw {
                    match b {
                        b' ' => spelled.extend_from_slice(replacement),
                        _ => spelled.push(b),
                    }
                }
                &spelled[..]
            } else {
                raw
            };
            if !cached {
                self.merge_chunk(bytes, begin, len, true, scratch, ids, spans.as_deref_mut());
                continue;
            }
            let first = ids.len();
            found.clear();
            self.merge_chunk(bytes, begin, len, true, scratch, ids, Some(&mut found));
            remember(scratch, raw, &ids[first..], &found);
            if let Some(spans) = spans.as_deref_mut() {
                spans.extend_from_slice(&found);
            }
        }
        scratch.initials = initials;
        scratch.cuts = cuts;
        scratch.part_spans = found;
        scratch.spelled = spelled;
    }

    /// Whether `encode_spaced` can read spaces as `space` while encoding, giving what
    /// `encode_word` gives on the text with its spaces replaced: a char model whose vocabulary
    /// has `space` as a symbol (so that a rewritten space is one symbol, whatever its length),
    /// that drops no char (so that symbol lengths, counted in the input's bytes, add up to the
    /// input's), and that does not look whole words up in the vocabulary first.
    pub(super) fn can_encode_spaced(&self, space: char) -> bool {
        match &self.alphabet {
            Alphabet::Chars(chars) => {
                space != ' '
                    && self.exact_words.is_none()
                    && chars.id_of(space).is_some()
                    && chars.drops_none()
            }
            Alphabet::Bytes(_) => false,
        }
    }

    /// Appends the ids of `text` as one word whose spaces read as `space` (see
    /// `can_encode_spaced`) and, when asked, each token's span in `text`: a token of a byte
    /// of a multi-byte char spans that byte alone.
    pub(super) fn encode_spaced(
        &self,
        text: &str,
        space: char,
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        spans: Option<&mut Vec<(usize, usize)>>,
    ) {
        if let Alphabet::Chars(chars) = &self.alphabet {
            self.encode_chars(chars, text, space, true, scratch, ids, spans);
        }
    }

    /// Merges `scratch.symbols`, the symbols of `bytes`, which span `len` bytes from `base` in
    /// the word's symbol offsets, and appends the result. `look_up`: whether to look `bytes` up
    /// in `whole_words` first.
    #[allow(clippy::too_many_arguments)]
    fn merge_chunk(
        &self,
        bytes: &[u8],
        base: u32,
        len: u32,
        look_up: bool,
        scratch: &mut Scratch,
        ids: &mut Vec<u32>,
        spans: Option<&mut Vec<(usize, usize)>>,
    ) {
        let whole = match scratch.symbols.len() {
            0 => return,
            1 => Some(scratch.symbols[0].id),
            _ if look_up => self.whole_words.get(bytes),
            _ => None,
        };
        if let Some(id) = whole {
            ids.push(id);
            if let Some(spans) = spans {
                spans.push((base as usize, (base + len) as usize));
            }
            return;
        }
        let n = scratch.symbols.len();
        if n <= SCAN {
            self.merge_by_scan::<SCAN>(bytes, scratch);
        } else if n <= BLOCKED[0] {
            self.merge_by_blocks::<{ BLOCKED[0] }>(bytes, scratch);
        } else if n <= BLOCKED[1] {
            self.merge_by_blocks::<{ BLOCKED[1] }>(bytes, scratch);
        } else if n <= BLOCKED[2] {
            self.merge_by_blocks::<{ BLOCKED[2] }>(bytes, scratch);
        } else if n <= BLOCKED[3] {
            self.merge_by_blocks::<{ BLOCKED[3] }>(bytes, scratch);
        } else {
            self.merge_by_heap(scratch);
        }
        push_symbols(&scratch.symbols, ids, spans);
    }
}

/// Appends the ids of `symbols` and, when asked, their spans.
#[inline(always)]
fn push_symbols(symbols: &[Symbol], ids: &mut Vec<u32>, spans: Option<&mut Vec<(usize, usize)>>) {
    ids.extend(symbols.iter().map(|s| s.id));
    if let Some(spans) = spans {
        spans.extend(
            symbols
                .iter()
                .map(|s| (s.start as usize, (s.start + s.len) as usize)),
        );
    }
}

/// Appends a piece the cache held, `len` bytes from `at` in the word.
#[inline(always)]
fn push_cached(
    cached: Cached<'_>,
    at: usize,
    len: usize,
    ids: &mut Vec<u32>,
    spans: Option<&mut Vec<(usize, usize)>>,
) {
    match cached {
        Cached::One(id) => {
            ids.push(id);
            if let Some(spans) = spans {
                spans.push((at, at + len));
            }
        }
        Cached::Many(tokens) => {
            ids.extend(tokens.iter().map(|&(id, _)| id));
            if let Some(spans) = spans {
                let mut at = at;
                spans.extend(tokens.iter().map(|&(_, len)| {
                    at += len as usize;
                    (at - len as usize, at)
                }));
            }
        }
    }
}
