//! The merge loop of rank-ordered BPE, in two strategies that give the same result: a scan of the
//! pair ranks for the short pre-tokens that make up almost all text, a heap for long ones.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{BpeModel, Scratch, NO_MERGE, SCAN_SLOTS};

impl BpeModel {
    /// `bytes` are the chunk's bytes, which for a byte-level model are its first symbols.
    ///
    /// The pairs' ranks sit in a fixed array by the position of their left symbol, a merged-away
    /// symbol's rank set to `NO_MERGE` rather than removed: finding the lowest rank is then a
    /// branch-free pass the compiler vectorizes, the leftmost on a tie is the first position
    /// holding it, and no merge moves memory.
    pub(super) fn merge_by_scan(&self, bytes: &[u8], scratch: &mut Scratch) {
        let symbols = &mut scratch.symbols;
        let n = symbols.len();
        debug_assert!((2..=SCAN_SLOTS).contains(&n));
        let mut ranks = [NO_MERGE; SCAN_SLOTS];
        // The neighbours of each live symbol; `n` past the last one.
        let mut next = [0u8; SCAN_SLOTS];
        let mut prev = [0u8; SCAN_SLOTS];
        if !self.byte_pairs.is_empty() && bytes.len() == n {
            for (i, w) in bytes.windows(2).enumerate() {
                ranks[i] = self.byte_pairs[(usize::from(w[0]) << 8) | usize::from(w[1])];
            }
        } else {
            for (i, w) in symbols.windows(2).enumerate() {
                ranks[i] = self.rank_of(w[0].id, w[1].id);
            }
        }
        for i in 0..n {
            next[i] = (i + 1) as u8;
            prev[i] = i.wrapping_sub(1) as u8;
        }
        loop {
            let best = ranks[..n].iter().fold(NO_MERGE, |low, &r| low.min(r));
            if best == NO_MERGE {
                break;
            }
            let Some(at) = ranks[..n].iter().position(|&r| r == best) else {
                break;
            };
            let right = usize::from(next[at]);
            let id = self.merges.merged(best);
            symbols[at].id = id;
            symbols[at].len += symbols[right].len;
            symbols[right].len = 0;
            ranks[right] = NO_MERGE;
            let after = usize::from(next[right]);
            next[at] = after as u8;
            if after < n {
                prev[after] = at as u8;
                ranks[at] = self.rank_of(id, symbols[after].id);
            } else {
                ranks[at] = NO_MERGE;
            }
            if at > 0 {
                let before = usize::from(prev[at]);
                ranks[before] = self.rank_of(symbols[before].id, id);
            }
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
