//! Byte-level BPE starts every multi-byte char as two to four byte symbols, and in text outside
//! the Latin scripts (Chinese, Japanese, Thai, Arabic, ...) most of its merges only put chars
//! back together. For a char whose bytes merge into one token, starting from that token instead
//! gives the same result, provided no merge across the char's edge can run before the char is
//! whole. This module decides, when the model loads, for which chars and which neighbours that
//! holds, so that the merge loop starts from fewer symbols with the same outcome.
//!
//! Why it is exact. Take char `c` of a word, its bytes merged alone (in rank order, leftmost on a
//! tie, as the merge loop does) through states `s_0 .. s_n`, `s_n` being one token. In the whole
//! word, a merge touching `c`'s symbols before `c` is whole is either one of those merges or a
//! merge across one of `c`'s edges: (X, first symbol of `c`) or (last symbol of `c`, Y). While
//! `c` is in state `s_i`, its next merge (rank `r_i`) is available, so a merge across an edge
//! can only run first if its rank is below `r_i`. When every such merge, for every X and Y the
//! neighbours can hold, ranks above `r_i` in every state, `c` becomes whole exactly as it does
//! alone, and merges elsewhere in the word commute with its own (they touch other symbols). What
//! the neighbours can hold is told by one byte each: the symbol X before `c` ends with the byte
//! before `c` (an ASCII byte, or the continuation byte that ends a multi-byte char), and the
//! symbol Y after `c` starts with the byte after it. The checks are made for each class of
//! neighbour, against every merge of the model whose left part ends (or right part starts) with
//! a byte of that class; at the edge of a word there is no neighbour.

use rustc_hash::FxHashMap;

/// The neighbour classes a char's entry is checked against: bit set when merging the char whole
/// first is exact next to such a neighbour.
pub(super) const AFTER_ASCII: u8 = 1;
pub(super) const AFTER_MULTIBYTE: u8 = 2;
pub(super) const BEFORE_ASCII: u8 = 4;
pub(super) const BEFORE_MULTIBYTE: u8 = 8;

/// Marks an absent entry of the table of the Basic Multilingual Plane.
const NONE: u32 = u32::MAX;
/// Ids are stored above the four flag bits.
const FLAG_BITS: u32 = 4;

/// Chars that merge into one token, with the neighbours next to which they may start whole.
#[derive(Default)]
pub(super) struct WholeChars {
    /// By code point, below U+10000: `id << FLAG_BITS | flags`, or `NONE`.
    bmp: Vec<u32>,
    /// The other planes (emoji and rare ideographs).
    astral: FxHashMap<u32, (u32, u8)>,
}

/// The lowest rank of a merge whose left part ends with (or whose right part starts with) a byte
/// of each class, by the id of the part on the other side.
#[derive(Default)]
struct EdgeRanks {
    /// (X, P) by P: X ends with an ASCII byte / with a continuation byte.
    after_ascii: FxHashMap<u32, u32>,
    after_multibyte: FxHashMap<u32, u32>,
    /// (Q, Y) by Q: Y starts with an ASCII byte / with the lead byte of a multi-byte char.
    before_ascii: FxHashMap<u32, u32>,
    before_multibyte: FxHashMap<u32, u32>,
}

fn lower(map: &mut FxHashMap<u32, u32>, key: u32, rank: u32) {
    let slot = map.entry(key).or_insert(u32::MAX);
    *slot = (*slot).min(rank);
}

fn min_of(map: &FxHashMap<u32, u32>, key: u32) -> u32 {
    map.get(&key).copied().unwrap_or(u32::MAX)
}

impl WholeChars {
    /// `merges`: every merge as (left id, right id, rank) with the rank the model applies;
    /// `spelling(id)`: a token's bytes; `vocab`: every entry as bytes and id; `merge_of`: the
    /// model's rank and result of a pair (`u32::MAX` for none), `byte_ids` the byte symbols.
    pub(super) fn new<'a>(
        merges: impl Iterator<Item = (u32, u32, u32)>,
        spelling: impl Fn(u32) -> Option<&'a [u8]>,
        vocab: impl Iterator<Item = (&'a [u8], u32)>,
        merge_of: impl Fn(u32, u32) -> (u32, u32),
        byte_ids: &[u32; 256],
    ) -> Self {
        let mut edges = EdgeRanks::default();
        for (left, right, rank) in merges {
            let (Some(l), Some(r)) = (spelling(left), spelling(right)) else {
                continue;
            };
            let (Some(&last), Some(&first)) = (l.last(), r.first()) else {
                continue;
            };
            match last {
                0..=0x7F => lower(&mut edges.after_ascii, right, rank),
                0x80..=0xBF => lower(&mut edges.after_multibyte, right, rank),
                _ => {}
            }
            match first {
                0..=0x7F => lower(&mut edges.before_ascii, left, rank),
                0xC0..=0xFF => lower(&mut edges.before_multibyte, left, rank),
                _ => {}
            }
        }
        let mut chars = WholeChars {
            bmp: vec![NONE; 0x1_0000],
            astral: FxHashMap::default(),
        };
        let mut symbols = Vec::new();
        for (bytes, id) in vocab {
            let Ok(text) = std::str::from_utf8(bytes) else {
                continue;
            };
            let mut it = text.chars();
            let (Some(c), None) = (it.next(), it.next()) else {
                continue;
            };
            if c.is_ascii() {
                continue;
            }
            symbols.clear();
            symbols.extend(bytes.iter().map(|&b| byte_ids[usize::from(b)]));
            let flags = merge_alone(&mut symbols, &merge_of, &edges);
            if symbols[..] == [id] && flags != 0 {
                chars.insert(c, id, flags);
            }
        }
        chars
    }

    fn insert(&mut self, c: char, id: u32, flags: u8) {
        let cp = c as u32;
        if cp < 0x1_0000 && id < (NONE >> FLAG_BITS) {
            self.bmp[cp as usize] = (id << FLAG_BITS) | u32::from(flags);
        } else {
            self.astral.insert(cp, (id, flags));
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.bmp.is_empty()
    }

    /// The token `c` merges into and the neighbours next to which it may start whole.
    #[inline]
    pub(super) fn get(&self, c: char) -> Option<(u32, u8)> {
        let cp = c as u32;
        if cp < 0x1_0000 {
            let entry = *self.bmp.get(cp as usize)?;
            (entry != NONE).then_some((entry >> FLAG_BITS, (entry & 0xF) as u8))
        } else {
            self.astral.get(&cp).copied()
        }
    }
}

/// Merges a char's byte symbols alone, in the merge loop's order, and returns the neighbour
/// classes next to which no merge across its edges can run before it is whole.
fn merge_alone(
    symbols: &mut Vec<u32>,
    merge_of: &impl Fn(u32, u32) -> (u32, u32),
    edges: &EdgeRanks,
) -> u8 {
    let mut flags = AFTER_ASCII | AFTER_MULTIBYTE | BEFORE_ASCII | BEFORE_MULTIBYTE;
    while symbols.len() > 1 {
        let mut best = (u32::MAX, 0, 0);
        for (i, pair) in symbols.windows(2).enumerate() {
            let (rank, id) = merge_of(pair[0], pair[1]);
            if rank < best.0 {
                best = (rank, i, id);
            }
        }
        let (rank, at, id) = best;
        if rank == u32::MAX {
            return 0;
        }
        let (first, last) = (symbols[0], symbols[symbols.len() - 1]);
        // An edge merge of the same rank is this very pair met across the edge; the loop might
        // take it first (leftmost on a tie), so only strictly higher ranks are safe.
        if min_of(&edges.after_ascii, first) <= rank {
            flags &= !AFTER_ASCII;
        }
        if min_of(&edges.after_multibyte, first) <= rank {
            flags &= !AFTER_MULTIBYTE;
        }
        if min_of(&edges.before_ascii, last) <= rank {
            flags &= !BEFORE_ASCII;
        }
        if min_of(&edges.before_multibyte, last) <= rank {
            flags &= !BEFORE_MULTIBYTE;
        }
        symbols[at] = id;
        symbols.remove(at + 1);
    }
    flags
}
