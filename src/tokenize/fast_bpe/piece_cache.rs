//! What merging turned a pre-token into, kept per thread: chat data repeats its words, so most
//! pre-tokens that need merges have been merged before. The cache belongs to the thread (a
//! `thread_local` in `mod.rs` holds it with the other encode buffers), so lookups take no lock;
//! it is bounded, and cleared whole when full (the common words come back at once).
//!
//! An entry is a function of the pre-token's bytes alone for one model: a cache met by another
//! model (two tokenizers on one thread) is cleared first.
//!
//! A lookup is the hot path of a warm encode, so the table is laid out for it: open addressing
//! over flat slots, a pre-token of up to 16 bytes held in its slot as two words (compared
//! without a call), a longer one in a byte arena; a pre-token that is one token (most are)
//! keeps its id in the slot, the others point into a token arena. Nothing is allocated per
//! entry.

use super::byte_key::{self, INLINE};

/// Pre-tokens longer than this are merged every time: they are rare, and would crowd the cache.
pub(super) const WORD_LIMIT: usize = 64;
/// Entries before the cache is cleared.
const CAPACITY: usize = 1 << 16;
/// Slots: twice the entries, so that probes stay short.
const SLOT_BITS: u32 = 17;

#[derive(Clone, Copy, Default)]
struct Slot {
    /// Up to 16 bytes: the pre-token, zero-padded. Longer: its hash and its offset in `long_keys`.
    key: [u64; 2],
    /// The pre-token's length; 0: an empty slot.
    len: u8,
    /// 0: one token covering the whole pre-token, its id in `data`; otherwise how many tokens
    /// it merged into, from offset `data` in `tokens`.
    count: u8,
    data: u32,
}

#[derive(Default)]
pub(super) struct PieceCache {
    /// The model the entries were made by (`BpeModel::serial`); 0: none yet.
    model: u64,
    slots: Vec<Slot>,
    entries: usize,
    long_keys: Vec<u8>,
    /// `(id, byte length)` of the tokens of pre-tokens that merged into more than one.
    tokens: Vec<(u32, u32)>,
}

/// What a cached pre-token merged into.
pub(super) enum Cached<'a> {
    /// One token covering the whole pre-token.
    One(u32),
    /// `(id, byte length)` of each token, in order.
    Many(&'a [(u32, u32)]),
}

impl PieceCache {
    /// Where `bytes` is (`Ok`) or would go (`Err`), and its slot key.
    #[inline(always)]
    fn find(&self, bytes: &[u8]) -> (Result<usize, usize>, [u64; 2]) {
        let len = bytes.len();
        let (key, hash) = byte_key::key(bytes);
        let mask = (1usize << SLOT_BITS) - 1;
        let mut at = (hash >> (64 - SLOT_BITS)) as usize;
        loop {
            let slot = &self.slots[at];
            if slot.len == 0 {
                return (Err(at), key);
            }
            if usize::from(slot.len) == len && slot.key[0] == key[0] {
                if len <= INLINE {
                    if slot.key[1] == key[1] {
                        return (Ok(at), key);
                    }
                } else {
                    let from = slot.key[1] as usize;
                    if self.long_keys.get(from..from + len) == Some(bytes) {
                        return (Ok(at), key);
                    }
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// The tokens of `bytes` merged by `model`, if they are cached.
    #[inline]
    pub(super) fn get(&mut self, model: u64, bytes: &[u8]) -> Option<Cached<'_>> {
        if self.model != model {
            self.reset(model);
            return None;
        }
        if bytes.is_empty() || bytes.len() > WORD_LIMIT {
            return None;
        }
        let (Ok(at), _) = self.find(bytes) else {
            return None;
        };
        let slot = self.slots[at];
        Some(if slot.count == 0 {
            Cached::One(slot.data)
        } else {
            let from = slot.data as usize;
            Cached::Many(&self.tokens[from..from + usize::from(slot.count)])
        })
    }

    /// Keeps what merging `bytes` gave: `(id, byte length)` of each token.
    pub(super) fn put(&mut self, bytes: &[u8], tokens: &[(u32, u32)]) {
        if bytes.is_empty()
            || bytes.len() > WORD_LIMIT
            || tokens.is_empty()
            || self.slots.is_empty()
        {
            return;
        }
        if self.entries >= CAPACITY {
            let model = self.model;
            self.reset(model);
        }
        let (Err(at), mut key) = self.find(bytes) else {
            return;
        };
        if bytes.len() > INLINE {
            key[1] = self.long_keys.len() as u64;
            self.long_keys.extend_from_slice(bytes);
        }
        // A token may cover less than the whole pre-token (chars dropped for want of an unknown
        // token): only a whole one is kept in the slot.
        let (count, data) = match tokens {
            [(id, n)] if *n as usize == bytes.len() => (0, *id),
            _ => {
                let from = self.tokens.len() as u32;
                self.tokens.extend_from_slice(tokens);
                (tokens.len() as u8, from)
            }
        };
        self.slots[at] = Slot {
            key,
            len: bytes.len() as u8,
            count,
            data,
        };
        self.entries += 1;
    }

    /// Empties the cache for `model`'s entries.
    fn reset(&mut self, model: u64) {
        self.model = model;
        self.entries = 0;
        self.long_keys.clear();
        self.tokens.clear();
        self.slots.clear();
        self.slots.resize(1 << SLOT_BITS, Slot::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_every_length_are_told_apart() {
        let mut cache = PieceCache::default();
        assert!(cache.get(7, b"x").is_none());
        let texts: Vec<Vec<u8>> = (1..=WORD_LIMIT)
            .flat_map(|n| {
                [
                    vec![b'a'; n],
                    (0..n).map(|i| i as u8).collect(),
                    (0..n).map(|i| if i + 1 == n { 0xFF } else { 0 }).collect(),
                ]
            })
            .collect();
        for (k, text) in texts.iter().enumerate() {
            let id = k as u32;
            match k % 3 {
                0 => cache.put(text, &[(id, text.len() as u32)]),
                1 => cache.put(text, &[(id, 1), (id + 1, text.len() as u32 - 1)]),
                // One token short of the whole: kept as a list.
                _ => cache.put(text, &[(id, text.len() as u32 - 1)]),
            }
        }
        for (k, text) in texts.iter().enumerate() {
            let id = k as u32;
            let n = text.len() as u32;
            match (k % 3, cache.get(7, text)) {
                (0, Some(Cached::One(got))) => assert_eq!(got, id),
                (1, Some(Cached::Many(got))) => assert_eq!(got, &[(id, 1), (id + 1, n - 1)]),
                (2, Some(Cached::Many(got))) => assert_eq!(got, &[(id, n - 1)]),
                _ => panic!("{text:?} was not cached as put"),
            }
        }
        // A zero-padded key is not its shorter twin, and a longer text is not found.
        assert!(cache.get(7, &[0, 0, 0, 0, 0, 0, 0, 0, 0]).is_none());
        assert!(cache.get(7, &[b'a'; WORD_LIMIT + 1]).is_none());
        // Another model empties it.
        assert!(cache.get(8, b"a").is_none());
        assert!(cache.get(8, b"a").is_none());
    }

    #[test]
    fn a_full_cache_starts_again() {
        let mut cache = PieceCache::default();
        assert!(cache.get(1, b"").is_none());
        for n in 0..CAPACITY as u32 + 10 {
            cache.put(&n.to_le_bytes(), &[(n, 4)]);
        }
        assert_eq!(cache.entries, 10);
        let last = CAPACITY as u32 + 9;
        assert!(matches!(cache.get(1, &last.to_le_bytes()), Some(Cached::One(id)) if id == last));
        assert!(cache.get(1, &0u32.to_le_bytes()).is_none());
    }
}
