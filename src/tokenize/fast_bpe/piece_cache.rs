//! What merging turned a pre-token into, kept per thread: chat data repeats its words, so most
//! pre-tokens that need merges have been merged before. The cache belongs to the thread (a
//! `thread_local` in `mod.rs` holds it with the other encode buffers), so lookups take no lock;
//! it is bounded, and cleared whole when full (the common words come back at once).
//!
//! An entry is a function of the pre-token's bytes alone for one model: a cache met by another
//! model (two tokenizers on one thread) is cleared first.

use rustc_hash::FxHashMap;

/// Pre-tokens longer than this are merged every time: they are rare, and would crowd the cache.
pub(super) const WORD_LIMIT: usize = 64;
/// Entries before the cache is cleared.
const CAPACITY: usize = 1 << 16;

/// One merged pre-token: `(id, byte length)` of each token, in order.
type Tokens = Box<[(u32, u32)]>;

#[derive(Default)]
pub(super) struct PieceCache {
    /// The model the entries were made by (`BpeModel::serial`); 0: none yet.
    model: u64,
    map: FxHashMap<Box<[u8]>, Tokens>,
}

impl PieceCache {
    /// The tokens of `bytes` merged by `model`, if they are cached.
    pub(super) fn get(&mut self, model: u64, bytes: &[u8]) -> Option<&[(u32, u32)]> {
        if self.model != model {
            self.map.clear();
            self.model = model;
            return None;
        }
        self.map.get(bytes).map(|t| &**t)
    }

    /// Keeps what merging `bytes` gave.
    pub(super) fn put(&mut self, bytes: &[u8], tokens: impl Iterator<Item = (u32, u32)>) {
        if self.map.len() >= CAPACITY {
            self.map.clear();
        }
        self.map.insert(bytes.into(), tokens.collect());
    }
}
