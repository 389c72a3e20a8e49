//! Places inside a byte-level word where no merge can ever join the symbols on either side, so
//! that the word's parts can be encoded one by one (each through the vocabulary, the piece cache
//! and the merge loop) with the same ids and offsets as the word merged whole. Scripts written
//! without spaces make a clause one pre-token, often longer than the piece cache holds and then
//! merged every time it is met; cut at such places, its parts are short and many are cached.
//! `model` cuts only the words the piece cache cannot hold.
//!
//! Why it is exact. Take two neighbouring chars `a` and `b` of a word, the boundary between them
//! at byte `p`, each of which starts as one symbol: an ASCII char (always one byte symbol) or a
//! char that `whole_chars` lets start whole next to the neighbours it has in this word. Every
//! symbol the merge loop makes is a run of first symbols, so no symbol ever holds part of `a` or
//! part of `b`: until a merge crosses `p`, the symbol that ends at `p` ends with all of `a`'s
//! bytes, and the symbol that starts there starts with all of `b`'s. A merge's result is the
//! vocabulary entry spelt as its two parts joined, so the first merge to cross `p`, if any, is a
//! merge `(L, R)` of the model where `L` is spelt ending with the char `a` and `R` starting with
//! the char `b`. When the model loads, the pair (last char of `L`, first char of `R`) is recorded
//! for every merge whose left part ends with a complete char and whose right part starts with
//! one. If `(a, b)` is not among them, no pair across `p` can ever merge.
//!
//! The merge loop takes the lowest-ranked pair, the leftmost on a tie. With no pair across `p`
//! mergeable at any step, each step merges a pair on one side, and it is the lowest-ranked,
//! leftmost pair of that side; that side's state changes only by its own merges. So the merges
//! on each side are, in order, those of the side merged alone, and the word's tokens are the
//! left part's followed by the right part's. Merged alone, a part starts from the same symbols as
//! it does in the word: a char inside the part has the same neighbours, and `a` (or `b`), at the
//! part's edge, has no neighbour there, which `whole_chars` allows for every char it holds; both
//! start whole in the word, so both start whole alone. A part is then what the engine gives for
//! it as a word of its own, with one exception: with `ignore_merges` (Llama 3, GPT-OSS) a word
//! found in the vocabulary is taken as it is, before any merge, which holds for the whole word
//! only. A part that is a vocabulary entry is therefore merged, and neither looked up in nor
//! added to the piece cache, whose entries are what the engine gives for a word; any other part
//! gets from the engine exactly its merges.
//!
//! The recorded pairs are held as a filter of bits, one per hash of a pair: a pair that shares
//! its bit with a recorded one is taken as crossable, which only leaves that boundary uncut. A
//! merge part whose byte string is not UTF-8 at its edge (a piece of a char) records nothing:
//! such a symbol never ends at a boundary between two whole chars. Ids given to two tokens would
//! make a symbol's spelling unknown from its id; a model that has any cuts no word.

/// Bits in the filter per recorded pair, before rounding up to a power of two: at most about
/// one boundary in thirty that no merge crosses is left uncut.
const BITS_PER_PAIR: usize = 32;

/// Which boundaries between two chars a byte-level model's merges may cross.
#[derive(Default)]
pub(super) struct Boundaries {
    /// A bit for each hash of a pair of chars; set for every (last char of the left part, first
    /// char of the right part) over the merges. Empty: every boundary may be crossed.
    bits: Box<[u64]>,
    /// How far a pair's 64-bit hash is shifted to index `bits`.
    shift: u32,
}

/// The char `bytes` start with, when they start with a complete one.
fn first_char(bytes: &[u8]) -> Option<char> {
    let len = match *bytes.first()? {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    std::str::from_utf8(bytes.get(..len)?).ok()?.chars().next()
}

/// The char `bytes` end with, when they end with a complete one.
fn last_char(bytes: &[u8]) -> Option<char> {
    let start = bytes.iter().rposition(|&b| b & 0xC0 != 0x80)?;
    std::str::from_utf8(&bytes[start..]).ok()?.chars().next()
}

impl Boundaries {
    /// `merges`: every merge of the model as the byte strings of its two parts (a merge whose
    /// parts are not byte-level tokens may be left out: it never applies to a word).
    /// `distinct_ids`: whether every id of the vocabulary names one token.
    pub(super) fn new<'a>(
        merges: impl Iterator<Item = (&'a [u8], &'a [u8])>,
        distinct_ids: bool,
    ) -> Self {
        if !distinct_ids {
            return Self::default();
        }
        let mut pairs: Vec<(char, char)> = merges
            .filter_map(|(left, right)| Some((last_char(left)?, first_char(right)?)))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        let size = (pairs.len() * BITS_PER_PAIR)
            .next_power_of_two()
            .max(1 << 12);
        let mut boundaries = Self {
            bits: vec![0; size / 64].into_boxed_slice(),
            shift: 64 - size.trailing_zeros(),
        };
        for (a, b) in pairs {
            let bit = boundaries.bit(a, b);
            boundaries.bits[bit / 64] |= 1 << (bit % 64);
        }
        boundaries
    }

    /// Whether no word is ever cut.
    pub(super) fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    #[inline(always)]
    fn bit(&self, a: char, b: char) -> usize {
        // Code points fit in 21 bits: the key is one number per pair, spread by a multiply.
        let key = (u64::from(a) << 21) | u64::from(b);
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Whether a merge may join a symbol that ends with the whole char `a` to one that starts
    /// with the whole char `b` (always, for a model whose words are never cut).
    #[inline(always)]
    pub(super) fn crossable(&self, a: char, b: char) -> bool {
        let bit = self.bit(a, b);
        self.bits
            .get(bit / 64)
            .is_none_or(|word| word & (1 << (bit % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chars_are_read_only_when_complete() {
        assert_eq!(first_char("中文".as_bytes()), Some('中'));
        assert_eq!(last_char("中文".as_bytes()), Some('文'));
        assert_eq!(first_char(b"ab"), Some('a'));
        assert_eq!(last_char(b"ab"), Some('b'));
        let zhong = "中".as_bytes();
        assert_eq!(first_char(&zhong[..2]), None);
        assert_eq!(first_char(&zhong[1..]), None);
        assert_eq!(last_char(&zhong[..2]), None);
        assert_eq!(last_char(&[b'a', zhong[2]]), None);
        assert_eq!(first_char(b""), None);
        assert_eq!(last_char(b""), None);
    }

    #[test]
    fn the_chars_merges_meet_across_are_crossable() {
        let merges: [(&[u8], &[u8]); 4] = [
            ("中".as_bytes(), "文".as_bytes()),
            (b"ab", b"c"),
            (b"x", "中国".as_bytes()),
            // Pieces of a char record nothing.
            (&"字".as_bytes()[..2], &"字".as_bytes()[2..]),
        ];
        let boundaries = Boundaries::new(merges.into_iter(), true);
        for (a, b) in [('中', '文'), ('b', 'c'), ('x', '中')] {
            assert!(boundaries.crossable(a, b), "{a}{b}");
        }
        for (a, b) in [
            ('文', '中'),
            ('a', 'b'),
            ('a', 'c'),
            ('中', '国'),
            ('字', '字'),
        ] {
            assert!(!boundaries.crossable(a, b), "{a}{b}");
        }
        // Without distinct ids every boundary is crossable; without merges none is.
        let unknown = Boundaries::new(merges.into_iter(), false);
        assert!(unknown.is_empty() && unknown.crossable('文', '中'));
        assert!(!Boundaries::new(std::iter::empty(), true).crossable('文', '中'));
    }
}
