//! The merge loop of rank-ordered BPE, in three strategies that give the same result: a scan of
//! the pair ranks for the short pre-tokens that make up almost all text, the same ranks in blocks
//! for longer ones, a heap for the longest.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::super::tables::RANK_BITS;
use super::{BpeModel, Scratch, Symbol, NO_MERGE};

/// Keys a block of `merge_by_blocks` holds: two vectors of the baseline x86-64 instructions.
const BLOCK: usize = 8;
/// The most symbols `merge_by_blocks` takes.
pub(super) const BLOCKED_SLOTS: usize = 256;

impl BpeModel {
    /// The key of each adjacent pair of `symbols`, written to `keys` from the start: from the byte
    /// pair table where every symbol is still one byte, else from the ranks.
    #[inline(always)]
    fn first_keys(
        &self,
        bytes: &[u8],
        symbols: &[Symbol],
        key: impl Fn(u32, usize) -> i32,
        keys: &mut [i32],
    ) {
        if !self.byte_pairs.is_empty() && bytes.len() == symbols.len() {
            for (i, w) in bytes.windows(2).enumerate() {
                keys[i] = key(
                    self.byte_pairs[(usize::from(w[0]) << 8) | usize::from(w[1])],
                    i,
                );
            }
        } else {
            for (i, w) in symbols.windows(2).enumerate() {
                keys[i] = key(self.rank_of(w[0].id, w[1].id), i);
            }
        }
    }

    /// `bytes` are the chunk's bytes, which for a byte-level model are its first symbols; at
    /// most `SLOTS` symbols (a power of two up to 256).
    ///
    /// The pairs' ranks sit in a fixed array by the position of their left symbol, a merged-away
    /// symbol's key set to the highest rather than removed, and each rank is held with its
    /// position below it: the lowest key is then the lowest rank, the leftmost on a tie, found by
    /// one branch-free pass the compiler vectorizes, and no merge moves memory. Ranks fit above
    /// the position: the pair table has fewer than `1 << RANK_BITS`.
    #[inline(always)]
    pub(super) fn merge_by_scan<const SLOTS: usize>(&self, bytes: &[u8], scratch: &mut Scratch) {
        let shift = SLOTS.trailing_zeros();
        const { assert!(SLOTS.is_power_of_two() && SLOTS <= 256 && RANK_BITS + 8 < 32) };
        // Keys are signed, of which the compiler finds the lowest without unsigned compares
        // (which the baseline x86-64 vector instructions lack). A pair that does not merge keys
        // at `none` or above.
        let none_rank = i32::MAX as u32 >> shift;
        let none = (none_rank << shift) as i32;
        let key = |rank: u32, at: usize| ((rank.min(none_rank) << shift) | at as u32) as i32;
        let symbols = &mut scratch.symbols;
        let n = symbols.len();
        debug_assert!((2..=SLOTS).contains(&n));
        let mut keys = [i32::MAX; SLOTS];
        // The neighbours of each live symbol; `n` past the last one.
        let mut next = [0u8; SLOTS];
        let mut prev = [0u8; SLOTS];
        self.first_keys(bytes, symbols, key, &mut keys);
        for i in 0..n {
            next[i] = (i + 1) as u8;
            prev[i] = i.wrapping_sub(1) as u8;
        }
        // Keys past the last pair stay at `i32::MAX`: the pass covers whole vectors of them.
        let span = n.next_multiple_of(8).min(SLOTS);
        let position = (1u32 << shift) - 1;
        loop {
            let best = keys[..span].iter().fold(i32::MAX, |low, &k| low.min(k));
            if best >= none {
                break;
            }
            let best = best as u32;
            let at = (best & position) as usize;
            let right = usize::from(next[at]);
            let id = self.merges.merged(best >> shift);
            symbols[at].id = id;
            symbols[at].len += symbols[right].len;
            symbols[right].len = 0;
            keys[right] = i32::MAX;
            let after = usize::from(next[right]);
            next[at] = after as u8;
            if after < n {
                prev[after] = at as u8;
                keys[at] = key(self.rank_of(id, symbols[after].id), at);
            } else {
                keys[at] = i32::MAX;
            }
            if at > 0 {
                let before = usize::from(prev[at]);
                keys[before] = key(self.rank_of(symbols[before].id, id), before);
            }
        }
        symbols.retain(|s| s.len > 0);
    }

    /// The same merge order as `merge_by_scan`, for longer words: the keys are laid out the same
    /// way, in blocks of `BLOCK`, and each block's lowest key is kept beside them. A merge changes
    /// three keys, so it looks at most three blocks again and passes once over the blocks' lows,
    /// where `merge_by_scan` passes over every key.
    #[inline(always)]
    pub(super) fn merge_by_blocks<const SLOTS: usize>(&self, bytes: &[u8], scratch: &mut Scratch) {
        let shift = SLOTS.trailing_zeros();
        const {
            assert!(SLOTS.is_power_of_two() && SLOTS <= BLOCKED_SLOTS && SLOTS >= 4 * BLOCK);
            assert!(RANK_BITS + BLOCKED_SLOTS.trailing_zeros() < 32);
        };
        let none_rank = i32::MAX as u32 >> shift;
        let none = (none_rank << shift) as i32;
        let key = |rank: u32, at: usize| ((rank.min(none_rank) << shift) | at as u32) as i32;
        let symbols = &mut scratch.symbols;
        let n = symbols.len();
        debug_assert!((2..=SLOTS).contains(&n));
        let mut keys = [i32::MAX; SLOTS];
        // The neighbours of each live symbol; `n` past the last one.
        let mut next = [0u16; SLOTS];
        let mut prev = [0u16; SLOTS];
        self.first_keys(bytes, symbols, key, &mut keys);
        for i in 0..n {
            next[i] = (i + 1) as u16;
            prev[i] = i.wrapping_sub(1) as u16;
        }
        let lowest = |keys: &[i32; SLOTS], block: usize| {
            keys[block * BLOCK..][..BLOCK]
                .iter()
                .fold(i32::MAX, |low, &k| low.min(k))
        };
        let mut lows = [i32::MAX; BLOCKED_SLOTS / BLOCK];
        let span = n.div_ceil(BLOCK).next_multiple_of(4).min(SLOTS / BLOCK);
        for (block, low) in lows[..span].iter_mut().enumerate() {
            *low = lowest(&keys, block);
        }
        let position = (1u32 << shift) - 1;
        loop {
            let best = lows[..span].iter().fold(i32::MAX, |low, &k| low.min(k));
            if best >= none {
                break;
            }
            let best = best as u32;
            let at = (best & position) as usize;
            let right = usize::from(next[at]);
            let id = self.merges.merged(best >> shift);
            symbols[at].id = id;
            symbols[at].len += symbols[right].len;
            symbols[right].len = 0;
            // The block of `at` held the lowest key, which goes: it is looked at again below.
            // Another block changes its low only where its own lowest key changes.
            let block = at / BLOCK;
            let gone = std::mem::replace(&mut keys[right], i32::MAX);
            if right / BLOCK != block && lows[right / BLOCK] == gone {
                lows[right / BLOCK] = lowest(&keys, right / BLOCK);
            }
            let after = usize::from(next[right]);
            next[at] = after as u16;
            if after < n {
                prev[after] = at as u16;
                keys[at] = key(self.rank_of(id, symbols[after].id), at);
            } else {
                keys[at] = i32::MAX;
            }
            if at > 0 {
                let before = usize::from(prev[at]);
                let new = key(self.rank_of(symbols[before].id, id), before);
                let old = std::mem::replace(&mut keys[before], new);
                let other = before / BLOCK;
                if other != block {
                    lows[other] = if lows[other] == old {
                        lowest(&keys, other)
                    } else {
                        lows[other].min(new)
                    };
                }
            }
            lows[block] = lowest(&keys, block);
        }
        symbols.retain(|s| s.len > 0);
    }

    /// The same merge order as `merge_by_scan`, in O(n log n) for long pre-tokens
    /// (runs of spaces or symbols can be arbitrarily long, and words of scripts written
    /// without spaces are long). Heap entries are `rank << 32 | position`: the lowest rank
    /// first, the leftmost on a tie. An entry is stale when the pair at its position no
    /// longer has its rank (a pair with the same rank is the same pair, so merging it then is
    /// merging the pair as it stands). Removed symbols get length 0.
    pub(super) fn merge_by_heap(&self, scratch: &mut Scratch) {
        let n = scratch.symbols.len();
        let symbols = &mut scratch.symbols;
        let prev = &mut scratch.prev;
        let next = &mut scratch.next;
        prev.clear();
        next.clear();
        prev.extend((0..n).map(|i| i.wrapping_sub(1)));
        next.extend(1..=n);
        let key = |rank: u32, pos: usize| Reverse((u64::from(rank) << 32) | pos as u64);
        let mut entries = std::mem::take(&mut scratch.heap);
        entries.clear();
        for i in 0..n - 1 {
            let rank = self.rank_of(symbols[i].id, symbols[i + 1].id);
            if rank != NO_MERGE {
                entries.push(key(rank, i));
            }
        }
        let mut heap = BinaryHeap::from(entries);
        while let Some(Reverse(entry)) = heap.pop() {
            let (rank, pos) = ((entry >> 32) as u32, (entry & 0xFFFF_FFFF) as usize);
            if symbols[pos].len == 0 || next[pos] >= n {
                continue;
            }
            let right = next[pos];
            if self.rank_of(symbols[pos].id, symbols[right].id) != rank {
                continue;
            }
            let new_id = self.merges.merged(rank);
            symbols[pos].id = new_id;
            symbols[pos].len += symbols[right].len;
            symbols[right].len = 0;
            next[pos] = next[right];
            if next[pos] < n {
                prev[next[pos]] = pos;
                let rank = self.rank_of(new_id, symbols[next[pos]].id);
                if rank != NO_MERGE {
                    heap.push(key(rank, pos));
                }
            }
            if prev[pos] < n {
                let p = prev[pos];
                let rank = self.rank_of(symbols[p].id, new_id);
                if rank != NO_MERGE {
                    heap.push(key(rank, p));
                }
            }
        }
        scratch.heap = heap.into_vec();
        symbols.retain(|s| s.len > 0);
    }
}
