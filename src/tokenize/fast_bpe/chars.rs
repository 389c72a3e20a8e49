//! The initial symbols of SentencePiece-style BPE: one per char found in the vocabulary, its
//! UTF-8 bytes as `<0xNN>` tokens otherwise (`byte_fallback`), else the unknown token (runs of
//! them fused into one with `fuse_unk`), exactly in the order HF's `BPE::merge_word` adds them.
//!
//! HF merges the whole text between two added tokens as one word when there is no whitespace
//! pre-split (Gemma 3). Such a word is cut here into chunks that merge independently: between
//! two chars that are both plain vocabulary symbols and never adjacent inside any vocabulary
//! token. Every merged symbol spells a vocabulary token (a merge's result is looked up by the
//! concatenated text), so no merge can ever join symbols across such a cut, and the merges on
//! either side happen in the same relative order as in HF's single heap.

use rustc_hash::{FxHashMap, FxHashSet};

use super::tables::PairSet;

/// A char's entry: its vocabulary id, or how it falls back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Initial {
    Id(u32),
    Bytes,
    Unknown,
}

pub(super) struct CharSymbols {
    /// By code point, up to the highest one below U+10000 that is a symbol: its id, or `NONE`.
    /// Every char of a word is looked up, and most are in this plane.
    plane: Box<[u32]>,
    /// The symbols beyond it.
    others: FxHashMap<char, u32>,
    /// `<0xNN>` ids, when `byte_fallback` is set and all 256 are in the vocabulary; a char
    /// whose bytes are not all present falls through to the unknown token, so a partial table
    /// is kept per byte.
    byte_ids: Option<[Option<u32>; 256]>,
    unk: Option<u32>,
    fuse_unk: bool,
    /// Every pair of chars adjacent inside some vocabulary token.
    joined_pairs: PairSet,
}

/// Not a symbol, in `CharSymbols::plane`.
const NONE: u32 = u32::MAX;
/// Where `CharSymbols::plane` ends at most.
const PLANE: u32 = 0x1_0000;

/// An initial symbol: id and byte length; starts are the running sum of lengths, as HF's
/// `Word` computes offsets.
pub(super) type Initials = Vec<(u32, u32)>;

impl CharSymbols {
    pub(super) fn new<'a>(
        vocab: impl Iterator<Item = (&'a str, u32)> + Clone,
        byte_fallback: bool,
        unk: Option<u32>,
        fuse_unk: bool,
    ) -> Self {
        let mut plane = Vec::new();
        let mut others = FxHashMap::default();
        let mut joined_pairs = FxHashSet::default();
        let mut by_text: FxHashMap<&str, u32> = FxHashMap::default();
        for (token, id) in vocab {
            by_text.insert(token, id);
            let mut chars = token.chars();
            if let (Some(c), None) = (chars.next(), chars.clone().next()) {
                let cp = u32::from(c);
                if cp < PLANE {
                    let at = cp as usize;
                    if plane.len() <= at {
                        plane.resize(at + 1, NONE);
                    }
                    plane[at] = id;
                } else {
                    others.insert(c, id);
                }
            }
            let mut previous = None;
            for c in token.chars() {
                if let Some(p) = previous {
                    joined_pairs.insert((u32::from(p), u32::from(c)));
                }
                previous = Some(c);
            }
        }
        let byte_ids = byte_fallback.then(|| {
            let mut ids = [None; 256];
            for (b, slot) in ids.iter_mut().enumerate() {
                *slot = by_text.get(format!("<0x{b:02X}>").as_str()).copied();
            }
            ids
        });
        Self {
            plane: plane.into_boxed_slice(),
            others,
            byte_ids,
            unk,
            fuse_unk,
            joined_pairs: PairSet::new(&joined_pairs.into_iter().collect::<Vec<_>>()),
        }
    }

    /// Whether every char becomes some symbol (none is dropped for want of an unknown token), so
    /// that the symbols' lengths add up to the word's.
    pub(super) fn drops_none(&self) -> bool {
        self.unk.is_some()
            || self
                .byte_ids
                .is_some_and(|bytes| bytes.iter().all(Option::is_some))
    }

    pub(super) fn id_of(&self, c: char) -> Option<u32> {
        match self.plane.get(c as usize) {
            Some(&id) => (id != NONE).then_some(id),
            None if u32::from(c) < PLANE => None,
            None => self.others.get(&c).copied(),
        }
    }

    /// Most chars are found in `plane`, inline; the rest in a call.
    #[inline(always)]
    fn initial(&self, c: char, buf: &mut [u8; 4]) -> Initial {
        match self.plane.get(c as usize) {
            Some(&id) if id != NONE => Initial::Id(id),
            _ => self.rare_initial(c, buf),
        }
    }

    #[inline(never)]
    fn rare_initial(&self, c: char, buf: &mut [u8; 4]) -> Initial {
        if let Some(id) = self.id_of(c) {
            return Initial::Id(id);
        }
        if let Some(bytes) = &self.byte_ids {
            if c.encode_utf8(buf)
                .bytes()
                .all(|b| bytes[usize::from(b)].is_some())
            {
                return Initial::Bytes;
            }
        }
        Initial::Unknown
    }

    /// Fills `out` with the initial symbols of `word` and `cuts` with where independent chunks
    /// start, as (symbol index, byte position in `word`), `(0, 0)` first. A space in `word` is
    /// read as the char `space` (a normalizer's replacement for it, applied here rather than to
    /// a copy of the text) but keeps its own byte length. The two differ when
    /// HF drops a char (no vocabulary entry, no fallback, no unknown token): symbol offsets
    /// then run short of the text, as in HF. Inlined into its one caller, where the compiler
    /// otherwise decides by the size of unrelated code (Gemma 3 spent 2 % more instructions
    /// on the call).
    #[inline(always)]
    pub(super) fn initials(
        &self,
        word: &str,
        space: char,
        out: &mut Initials,
        cuts: &mut Vec<(usize, usize)>,
    ) {
        out.clear();
        cuts.clear();
        cuts.push((0, 0));
        let mut buf = [0u8; 4];
        // A pending unknown token (id, byte length): HF adds it only when the next char found
        // in the vocabulary comes, or at the end, so byte-fallback symbols may precede it.
        let mut unk: Option<(u32, u32)> = None;
        // The previous char, when it became a plain vocabulary symbol (the last one pushed).
        let mut previous: Option<char> = None;
        for (at, c) in word.char_indices() {
            let len = c.len_utf8() as u32;
            let c = if c == ' ' { space } else { c };
            match self.initial(c, &mut buf) {
                Initial::Id(id) => {
                    if previous
                        .is_some_and(|p| !self.joined_pairs.contains(u32::from(p), u32::from(c)))
                    {
                        cuts.push((out.len(), at));
                    }
                    out.extend(unk.take());
                    out.push((id, len));
                    previous = Some(c);
                }
                Initial::Bytes => {
                    if let Some(bytes) = &self.byte_ids {
                        for b in c.encode_utf8(&mut buf).bytes() {
                            out.extend(bytes[usize::from(b)].map(|id| (id, 1)));
                        }
                    }
                    previous = None;
                }
                Initial::Unknown => {
                    if let Some(unk_id) = self.unk {
                        unk = match unk {
                            Some((id, pending)) if self.fuse_unk => Some((id, pending + len)),
                            Some(pending) => {
                                out.push(pending);
                                Some((unk_id, len))
                            }
                            None => Some((unk_id, len)),
                        };
                    }
                    previous = None;
                }
            }
        }
        out.extend(unk);
    }
}
