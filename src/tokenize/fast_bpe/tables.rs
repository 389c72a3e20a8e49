//! The model's read-only lookups, laid out for the first time a pre-token is merged: the pair
//! ranks and the vocabulary are far larger than the CPU caches, so a lookup is a trip to
//! memory, and the layout decides how many. A hash map of boxed keys takes three dependent
//! loads (control bytes, entry, key bytes); these take one: open addressing over flat slots,
//! each within one cache line, the key held in the slot (a pair with its rank as one word,
//! words of up to 16 bytes as two, longer words in a byte arena).

use super::byte_key::{self, INLINE};

/// Slots for `n` entries: a power of two, with at least a third of them empty.
fn slot_bits(n: usize) -> u32 {
    (n + n / 2).max(8).next_power_of_two().trailing_zeros()
}

/// Ranks are below `1 << RANK_BITS`, so that the merge scan holds a rank with a position in a
/// word in one `u32` (`merge_by_scan`); tokenizers have a few hundred thousand merges.
pub(super) const RANK_BITS: u32 = 23;

/// An empty pair slot: a slot's value never has its top bit set (`PairTable::new`).
const EMPTY: u64 = u64::MAX;

/// A merge's pair to its rank, and a rank to the merged id. A slot is one word, the pair packed
/// above the rank (`id_bits` for each id, `rank_bits` for the rank), so that the slots take half
/// the room a pair and two values would: the same memory holds twice the slots, and a lookup, most
/// often of a pair that does not merge, ends after fewer probes. The merged id is needed only for
/// the one pair a merge step picks, and is read from a list by rank.
pub(super) struct PairTable {
    slots: Box<[u64]>,
    bits: u32,
    id_bits: u32,
    rank_bits: u32,
    merged: Box<[u32]>,
}

impl PairTable {
    /// The table of `merges`, `(left, right, merged id)` by rank; a pair given twice keeps the
    /// later rank, as HF's map does. `top_id`: the largest id the table will be asked about (the
    /// vocabulary's), which sets the width of a packed id. `None` when a pair and its rank do
    /// not fit in 63 bits (ids of two million and more), or ranks in `RANK_BITS`.
    pub(super) fn new(merges: &[(u32, u32, u32)], top_id: u32) -> Option<Self> {
        let width = |n: u64| 64 - n.leading_zeros();
        let top_id = merges
            .iter()
            .fold(top_id, |top, &(l, r, id)| top.max(l).max(r).max(id));
        let id_bits = width(u64::from(top_id));
        let rank_bits = width(merges.len() as u64);
        if 2 * id_bits + rank_bits > 63 || rank_bits > RANK_BITS {
            return None;
        }
        // At most a third of the slots are full.
        let bits = (merges.len() * 3)
            .max(8)
            .next_power_of_two()
            .trailing_zeros();
        let mut table = Self {
            slots: vec![EMPTY; 1 << bits].into_boxed_slice(),
            bits,
            id_bits,
            rank_bits,
            merged: merges.iter().map(|&(_, _, id)| id).collect(),
        };
        let mask = table.slots.len() - 1;
        for (rank, &(left, right, _)) in merges.iter().enumerate() {
            let pair = table.pair(left, right);
            let value = (pair << rank_bits) | rank as u64;
            let mut at = table.home(pair);
            loop {
                let slot = &mut table.slots[at];
                if *slot == EMPTY || *slot >> rank_bits == pair {
                    *slot = value;
                    break;
                }
                at = (at + 1) & mask;
            }
        }
        Some(table)
    }

    #[inline(always)]
    fn pair(&self, left: u32, right: u32) -> u64 {
        (u64::from(left) << self.id_bits) | u64::from(right)
    }

    #[inline(always)]
    fn home(&self, pair: u64) -> usize {
        (byte_key::mix(pair, pair >> 29) >> (64 - self.bits)) as usize
    }

    /// The rank of the pair `left`, `right`, if it merges. Both ids are at most `top_id`.
    #[inline(always)]
    pub(super) fn rank(&self, left: u32, right: u32) -> Option<u32> {
        debug_assert!((left | right) >> self.id_bits == 0);
        let pair = self.pair(left, right);
        let mask = self.slots.len() - 1;
        let mut at = self.home(pair);
        loop {
            let slot = self.slots[at];
            if slot == EMPTY {
                return None;
            }
            if slot >> self.rank_bits == pair {
                return Some((slot & ((1 << self.rank_bits) - 1)) as u32);
            }
            at = (at + 1) & mask;
        }
    }

    /// The id a merge of `rank` makes.
    #[inline(always)]
    pub(super) fn merged(&self, rank: u32) -> u32 {
        self.merged[rank as usize]
    }

    /// `(rank, merged id)` of the pair `left`, `right`.
    #[inline(always)]
    pub(super) fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        self.rank(left, right).map(|rank| (rank, self.merged(rank)))
    }
}

/// A set of pairs of values below `u32::MAX`, laid out as `PairTable`: one word a slot, the
/// pair itself.
pub(super) struct PairSet {
    slots: Box<[u64]>,
    bits: u32,
}

impl PairSet {
    pub(super) fn new(pairs: &[(u32, u32)]) -> Self {
        let bits = (pairs.len() * 3)
            .max(8)
            .next_power_of_two()
            .trailing_zeros();
        let mut set = Self {
            slots: vec![EMPTY; 1 << bits].into_boxed_slice(),
            bits,
        };
        let mask = set.slots.len() - 1;
        for &(left, right) in pairs {
            debug_assert!(left != u32::MAX && right != u32::MAX);
            let key = (u64::from(left) << 32) | u64::from(right);
            let mut at = set.home(key);
            while set.slots[at] != EMPTY && set.slots[at] != key {
                at = (at + 1) & mask;
            }
            set.slots[at] = key;
        }
        set
    }

    /// A multiplicative hash: the set is asked once per char of a SentencePiece-style word,
    /// and its keys (two code points) carry no pattern a multiply's top bits keep.
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    #[inline(always)]
    pub(super) fn contains(&self, left: u32, right: u32) -> bool {
        let key = (u64::from(left) << 32) | u64::from(right);
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        loop {
            match self.slots[at] {
                EMPTY => return false,
                slot if slot == key => return true,
                _ => at = (at + 1) & mask,
            }
        }
    }
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct WordSlot {
    /// As `byte_key::key` gives it; past `INLINE` bytes, the second word is the word's offset
    /// in `long`.
    key: [u64; 2],
    /// The word's length; 0: an empty slot.
    len: u32,
    id: u32,
}

/// Byte strings (vocabulary entries) to ids.
pub(super) struct WordTable {
    slots: Box<[WordSlot]>,
    bits: u32,
    long: Vec<u8>,
}

impl WordTable {
    /// The table of `words`; a word given twice keeps the later id, and the empty word is
    /// left out (no pre-token is empty).
    pub(super) fn new<'a>(words: impl ExactSizeIterator<Item = (&'a [u8], u32)>) -> Self {
        let bits = slot_bits(words.len());
        let mut table = Self {
            slots: vec![WordSlot::default(); 1 << bits].into_boxed_slice(),
            bits,
            long: Vec::new(),
        };
        for (word, id) in words {
            if word.is_empty() || u32::try_from(word.len()).is_err() {
                continue;
            }
            match table.find(word) {
                (Ok(at), _) => table.slots[at].id = id,
                (Err(at), mut key) => {
                    if word.len() > INLINE {
                        key[1] = table.long.len() as u64;
                        table.long.extend_from_slice(word);
                    }
                    table.slots[at] = WordSlot {
                        key,
                        len: word.len() as u32,
                        id,
                    };
                }
            }
        }
        table
    }

    /// Where `word` is (`Ok`) or would go (`Err`), and its slot key.
    #[inline(always)]
    fn find(&self, word: &[u8]) -> (Result<usize, usize>, [u64; 2]) {
        let (key, hash) = byte_key::key(word);
        let mask = self.slots.len() - 1;
        let mut at = (hash >> (64 - self.bits)) as usize;
        loop {
            let slot = &self.slots[at];
            if slot.len == 0 {
                return (Err(at), key);
            }
            if slot.len as usize == word.len() && slot.key[0] == key[0] {
                if word.len() <= INLINE {
                    if slot.key[1] == key[1] {
                        return (Ok(at), key);
                    }
                } else {
                    let from = slot.key[1] as usize;
                    if self.long.get(from..from + word.len()) == Some(word) {
                        return (Ok(at), key);
                    }
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// The id of `word`.
    #[inline(always)]
    pub(super) fn get(&self, word: &[u8]) -> Option<u32> {
        match self.find(word) {
            (Ok(at), _) => Some(self.slots[at].id),
            (Err(_), _) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_found_by_rank_with_their_merged_ids() {
        let mut merges: Vec<(u32, u32, u32)> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 14, i % 97, i + 7))
            .collect();
        // A pair given again keeps the later rank.
        merges.push((merges[3].0, merges[3].1, 99_999));
        let top = merges.iter().map(|m| m.0).max().unwrap();
        let table = PairTable::new(&merges, top + 1).unwrap();
        for (rank, &(l, r, id)) in merges.iter().enumerate() {
            let want = if rank == 3 {
                (5000, 99_999)
            } else {
                (rank as u32, id)
            };
            assert_eq!(table.get(l, r), Some(want), "pair {rank}");
        }
        assert_eq!(table.get(top + 1, 5), None);
        assert_eq!(table.get(merges[1].1, merges[1].0), None);
        // Ids too wide to pack with the ranks are refused.
        assert!(PairTable::new(&[(1 << 31, 1, 2)], 0).is_none());
        assert!(PairTable::new(&[], 1 << 31).is_none());
        assert!(PairTable::new(&[], 0).is_some_and(|t| t.get(0, 0).is_none()));
    }

    #[test]
    fn pair_sets_hold_their_pairs_only() {
        let pairs: Vec<(u32, u32)> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11, i % 89))
            .collect();
        let set = PairSet::new(&pairs);
        for &(l, r) in &pairs {
            assert!(set.contains(l, r), "({l}, {r})");
            assert!(!set.contains(r + (1 << 22), l), "({r}, {l})");
        }
        assert!(!PairSet::new(&[]).contains(0, 0));
    }

    #[test]
    fn words_of_every_length_are_told_apart() {
        let words: Vec<Vec<u8>> = (1..=40)
            .flat_map(|n| {
                [
                    vec![b'a'; n],
                    (0..n).map(|i| i as u8).collect(),
                    (0..n).map(|i| if i + 1 == n { 0xFF } else { 0 }).collect(),
                ]
            })
            .collect();
        let mut entries: Vec<(&[u8], u32)> = words
            .iter()
            .enumerate()
            .map(|(k, w)| (&w[..], k as u32))
            .collect();
        // A word given twice keeps the later id; the empty word is left out.
        entries.push((&words[5][..], 1000));
        entries.push((b"", 1001));
        let table = WordTable::new(entries.into_iter());
        for (k, w) in words.iter().enumerate() {
            let want = if k == 5 { 1000 } else { k as u32 };
            assert_eq!(table.get(w), Some(want), "word {w:?}");
        }
        assert_eq!(table.get(b""), None);
        // A zero-padded key is not its shorter twin, nor a longer word its prefix's.
        assert_eq!(table.get(&[0; 9]), None);
        assert_eq!(table.get(&[b'a'; 41]), None);
        let mut longer = words[100].clone();
        longer.push(1);
        assert_eq!(table.get(&longer), None);
    }
}
