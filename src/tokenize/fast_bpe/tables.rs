//! The model's read-only lookups, laid out for the first time a pre-token is merged: the pair
//! ranks and the vocabulary are far larger than the CPU caches, so a lookup is a trip to
//! memory, and the layout decides how many. A hash map of boxed keys takes three dependent
//! loads (control bytes, entry, key bytes); these take one: open addressing over flat slots,
//! each within one cache line, the key held in the slot (pairs as one word, words of up to
//! 16 bytes as two, longer words in a byte arena).

use super::byte_key::{self, INLINE};

/// Slots for `n` entries: a power of two, with at least a third of them empty.
fn slot_bits(n: usize) -> u32 {
    (n + n / 2).max(8).next_power_of_two().trailing_zeros()
}

/// No pair has this key: token ids are below `u32::MAX`.
const NO_PAIR: u64 = u64::MAX;

#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct PairSlot {
    key: u64,
    rank: u32,
    id: u32,
}

/// `(left << 32) | right` to `(rank, merged id)`.
pub(super) struct PairTable {
    slots: Box<[PairSlot]>,
    bits: u32,
    len: usize,
}

impl PairTable {
    /// Room for `n` pairs.
    pub(super) fn with_capacity(n: usize) -> Self {
        let bits = slot_bits(n);
        let empty = PairSlot {
            key: NO_PAIR,
            rank: 0,
            id: 0,
        };
        Self {
            slots: vec![empty; 1 << bits].into_boxed_slice(),
            bits,
            len: 0,
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (byte_key::mix(key, key >> 29) >> (64 - self.bits)) as usize
    }

    /// Sets the pair's value; a pair given twice keeps the later value. Past the capacity
    /// asked for, the table grows.
    pub(super) fn insert(&mut self, left: u32, right: u32, rank: u32, id: u32) {
        let key = pair_key(left, right);
        if key == NO_PAIR {
            // Not a pair of real ids (`config` refuses the id `u32::MAX`).
            return;
        }
        if slot_bits(self.len + 1) > self.bits {
            let mut bigger = Self::with_capacity(self.len + 1);
            for s in self.slots.iter().filter(|s| s.key != NO_PAIR) {
                bigger.insert((s.key >> 32) as u32, s.key as u32, s.rank, s.id);
            }
            *self = bigger;
        }
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        loop {
            let slot = &mut self.slots[at];
            if slot.key == NO_PAIR {
                *slot = PairSlot { key, rank, id };
                self.len += 1;
                return;
            }
            if slot.key == key {
                (slot.rank, slot.id) = (rank, id);
                return;
            }
            at = (at + 1) & mask;
        }
    }

    /// `(rank, merged id)` of the pair `left`, `right`.
    #[inline(always)]
    pub(super) fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let key = pair_key(left, right);
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        loop {
            let slot = &self.slots[at];
            if slot.key == NO_PAIR {
                return None;
            }
            if slot.key == key {
                return Some((slot.rank, slot.id));
            }
            at = (at + 1) & mask;
        }
    }
}

#[inline(always)]
fn pair_key(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
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
    fn pairs_are_found_as_inserted_and_grow_past_the_capacity() {
        let mut table = PairTable::with_capacity(4);
        let pairs: Vec<(u32, u32)> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 12, i % 97))
            .collect();
        for (k, &(l, r)) in pairs.iter().enumerate() {
            table.insert(l, r, k as u32, 7);
        }
        // A pair given again keeps the later value.
        table.insert(pairs[3].0, pairs[3].1, 99_999, 8);
        for (k, &(l, r)) in pairs.iter().enumerate() {
            let want = if k == 3 { (99_999, 8) } else { (k as u32, 7) };
            assert_eq!(table.get(l, r), Some(want), "pair {k}");
        }
        assert_eq!(table.len, pairs.len());
        assert_eq!(table.get(1 << 30, 5), None);
        assert_eq!(table.get(pairs[1].1, pairs[1].0), None);
        // The sentinel is neither stored nor found.
        table.insert(u32::MAX, u32::MAX, 1, 1);
        assert_eq!(table.get(u32::MAX, u32::MAX), None);
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
