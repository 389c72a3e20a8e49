//! The batch plan of an epoch: which examples form each batch, and for packed batches which
//! examples share each row. It runs between the epoch order (`shuffle`) and collation
//! (`collate`), on the rows' truncated lengths only, so it costs a sort and a few passes.
//!
//! - `Reference`: the order cut into batches of `batch_size`.
//! - `LengthGrouped`: the order split into mega-batches of `MEGA_BATCH x batch_size`, each sorted
//!   by length (stable), cut into batches of `batch_size`; the batches are then shuffled.
//! - `TokenBudget`: the same grouping, but a batch closes when one more row would make
//!   rows x padded length exceed the budget (or pass `batch_size` rows).
//! - `Packed`: best-fit decreasing packing of the rows into rows of `max_batch_tokens` tokens,
//!   the packed rows shuffled, then `batch_size` packed rows per batch; the final batch (the
//!   remainder) takes the least-filled packed rows, so that their padding is not to a full row.
//!
//! With a shard of `W` ranks, `batch_size` counts the rows of a global batch, rank `r` takes
//! rows `r, r + W, ...` of each, and the epoch's rows are first padded to a multiple of `W` with
//! rows from its start, so every global batch splits evenly and every rank gets as many batches.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::batch::collate::padded_width;
use crate::batch::shuffle::SplitMix64;

/// Mega-batches hold this many batches (as in mlx-lm's length-sorted iteration).
pub const MEGA_BATCH: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Batching {
    #[default]
    Reference,
    LengthGrouped,
    TokenBudget,
    Packed,
}

impl Batching {
    pub const ALL: [Batching; 4] = [
        Batching::Reference,
        Batching::LengthGrouped,
        Batching::TokenBudget,
        Batching::Packed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Batching::Reference => "reference",
            Batching::LengthGrouped => "lengthGrouped",
            Batching::TokenBudget => "tokenBudget",
            Batching::Packed => "packed",
        }
    }

    /// Whether the plan reads row lengths (every row must be built first).
    pub fn needs_lengths(self) -> bool {
        self != Batching::Reference
    }
}

/// One data-parallel rank of `world_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub rank: usize,
    pub world_size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanSettings {
    pub batching: Batching,
    /// Rows of a global batch (packed rows under `Packed`).
    pub batch_size: usize,
    /// `TokenBudget`: rows x padded length of one rank's batch at most this (unless one row
    /// alone passes it). `Packed`: tokens of a packed row.
    pub max_batch_tokens: usize,
    pub pad_to_multiple_of: usize,
    pub shard: Option<Shard>,
}

impl PlanSettings {
    fn world_size(&self) -> usize {
        self.shard.map_or(1, |s| s.world_size)
    }
}

/// The batches of one rank for one epoch. Batch `b` holds rows `batch_ends[b - 1]..batch_ends[b]`,
/// row `r` the examples `row_ends[r - 1]..row_ends[r]` of `examples` (example indices).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    examples: Vec<u32>,
    row_ends: Vec<usize>,
    batch_ends: Vec<usize>,
}

impl Plan {
    pub fn num_batches(&self) -> usize {
        self.batch_ends.len()
    }

    /// The rows of batch `b` (below `num_batches()`), each a list of example indices.
    pub fn batch(&self, b: usize) -> impl ExactSizeIterator<Item = &[u32]> + '_ {
        let first = if b == 0 { 0 } else { self.batch_ends[b - 1] };
        (first..self.batch_ends[b]).map(move |r| {
            let start = if r == 0 { 0 } else { self.row_ends[r - 1] };
            &self.examples[start..self.row_ends[r]]
        })
    }

    fn push_row(&mut self, examples: &[u32]) {
        self.examples.extend_from_slice(examples);
        self.row_ends.push(self.examples.len());
    }

    fn close_batch(&mut self) {
        self.batch_ends.push(self.row_ends.len());
    }
}

/// The key of the plan's own shuffles: the dataset seed and the epoch (`None`: no
/// `shuffleForEpoch` call yet), so that one config gives one plan in every process.
pub fn plan_key(seed: f64, epoch: Option<f64>) -> u64 {
    let mut rng = SplitMix64::new(seed.to_bits());
    let mixed_seed = rng.next_u64();
    let mut rng = SplitMix64::new(mixed_seed ^ epoch.map_or(u64::MAX, f64::to_bits));
    rng.next_u64()
}

/// Plans the epoch `order` (example indices) for the rank of `settings.shard`. `lengths[i]` is
/// example `i`'s length after truncation; `Reference` does not read it (it may be empty).
pub fn plan(order: &[u32], lengths: &[u32], key: u64, settings: &PlanSettings) -> Plan {
    let world = settings.world_size();
    let mut rng = SplitMix64::new(key);
    // Global batches of rows, each row a list of examples.
    let global: Vec<Vec<Vec<u32>>> = match settings.batching {
        Batching::Packed => {
            let mut rows = pack(order, lengths, settings.max_batch_tokens);
            rng.shuffle(&mut rows);
            let rows = emptiest_last(rows, lengths, settings.batch_size.max(1));
            let rows = fill_to_multiple(rows, world);
            rows.chunks(settings.batch_size.max(1))
                .map(<[Vec<u32>]>::to_vec)
                .collect()
        }
        batching => {
            let order = fill_to_multiple(order.to_vec(), world);
            let mut batches = match batching {
                Batching::Reference => order
                    .chunks(settings.batch_size.max(1))
                    .map(<[u32]>::to_vec)
                    .collect(),
                _ => grouped(&order, lengths, settings),
            };
            if batching != Batching::Reference {
                rng.shuffle(&mut batches);
            }
            batches
                .into_iter()
                .map(|b| b.into_iter().map(|e| vec![e]).collect())
                .collect()
        }
    };
    let rank = settings.shard.map_or(0, |s| s.rank);
    let mut plan = Plan::default();
    for batch in &global {
        for row in batch.iter().skip(rank).step_by(world) {
            plan.push_row(row);
        }
        plan.close_batch();
    }
    plan
}

/// `items` followed by copies of its first items, cycling, up to a multiple of `world`.
fn fill_to_multiple<T: Clone>(mut items: Vec<T>, world: usize) -> Vec<T> {
    let len = items.len();
    if len == 0 {
        return items;
    }
    let missing = len.next_multiple_of(world) - len;
    for k in 0..missing {
        items.push(items[k % len].clone());
    }
    items
}

/// `LengthGrouped` and `TokenBudget`: mega-batches sorted by length, then cut. Under a shard the
/// cut moves in steps of `world` rows so that every batch splits evenly.
fn grouped(order: &[u32], lengths: &[u32], settings: &PlanSettings) -> Vec<Vec<u32>> {
    let world = settings.world_size();
    let batch_size = settings.batch_size.max(1);
    let len_of = |e: u32| lengths.get(e as usize).copied().unwrap_or(0) as usize;
    let mut batches = Vec::with_capacity(order.len().div_ceil(batch_size));
    for mega in order.chunks(MEGA_BATCH * batch_size) {
        let mut sorted = mega.to_vec();
        sorted.sort_by_key(|&e| len_of(e));
        if settings.batching != Batching::TokenBudget {
            batches.extend(sorted.chunks(batch_size).map(<[u32]>::to_vec));
            continue;
        }
        let mut current: Vec<u32> = Vec::with_capacity(batch_size);
        let mut longest = 0;
        for unit in sorted.chunks(world) {
            let unit_longest = unit.iter().map(|&e| len_of(e)).max().unwrap_or(0);
            let rows = current.len() + unit.len();
            let width = padded_width(longest.max(unit_longest), settings.pad_to_multiple_of);
            let cost = rows.div_ceil(world) * width;
            if !current.is_empty() && (rows > batch_size || cost > settings.max_batch_tokens) {
                batches.push(std::mem::take(&mut current));
                longest = 0;
            }
            current.extend_from_slice(unit);
            longest = longest.max(unit_longest);
        }
        if !current.is_empty() {
            batches.push(current);
        }
    }
    batches
}

/// Best-fit decreasing: rows by decreasing length (ties in epoch order), each into the open
/// packed row with the least room that still fits it (ties: the row opened first), or a new one.
/// A row longer than `capacity` gets a packed row of its own.
fn pack(order: &[u32], lengths: &[u32], capacity: usize) -> Vec<Vec<u32>> {
    let len_of = |e: u32| lengths.get(e as usize).copied().unwrap_or(0) as usize;
    let mut sorted = order.to_vec();
    sorted.sort_by_key(|&e| Reverse(len_of(e)));
    let mut bins: Vec<Vec<u32>> = Vec::new();
    // Open packed rows by the room they have left, lowest row number first within one room.
    let mut by_room: BTreeMap<usize, BinaryHeap<Reverse<u32>>> = BTreeMap::new();
    for e in sorted {
        let len = len_of(e);
        let best = by_room
            .range_mut(len..)
            .next()
            .and_then(|(&room, open)| open.pop().map(|Reverse(bin)| (room, bin, open.is_empty())));
        let (room, bin) = match best {
            Some((room, bin, emptied)) => {
                if emptied {
                    by_room.remove(&room);
                }
                bins[bin as usize].push(e);
                (room - len, bin)
            }
            None => {
                bins.push(vec![e]);
                (capacity.saturating_sub(len), (bins.len() - 1) as u32)
            }
        };
        by_room.entry(room).or_default().push(Reverse(bin));
    }
    bins
}

/// The packed rows in their shuffled order, except that the rows of the final batch (the last
/// `len % batch_size` rows, or a whole batch) are the least-filled ones, kept in shuffled order
/// (ties: the earlier row). Best-fit decreasing fills all but a few rows to the brim; padded to
/// its longest row, the final batch then costs the tokens of its rows instead of full rows.
fn emptiest_last(rows: Vec<Vec<u32>>, lengths: &[u32], batch_size: usize) -> Vec<Vec<u32>> {
    let n = rows.len();
    if n <= batch_size {
        return rows;
    }
    let tail = n - batch_size * ((n - 1) / batch_size);
    let load = |row: &[u32]| -> u64 {
        row.iter()
            .map(|&e| u64::from(lengths.get(e as usize).copied().unwrap_or(0)))
            .sum()
    };
    let mut by_load: Vec<(u64, usize)> =
        rows.iter().enumerate().map(|(i, r)| (load(r), i)).collect();
    by_load.select_nth_unstable(tail - 1);
    let mut last = vec![false; n];
    for &(_, i) in &by_load[..tail] {
        last[i] = true;
    }
    let (mut front, mut back) = (Vec::with_capacity(n), Vec::with_capacity(tail));
    for (row, is_last) in rows.into_iter().zip(last) {
        if is_last {
            back.push(row)
        } else {
            front.push(row)
        }
    }
    front.extend(back);
    front
}

/// What an epoch under a plan costs the trainer: tokens computed (rows x padded length, summed
/// over batches and ranks) against the tokens of the examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanCost {
    pub batches: usize,
    pub rows: usize,
    pub tokens: u64,
    pub computed_tokens: u64,
}

impl PlanCost {
    pub fn padding_share(&self) -> f64 {
        if self.computed_tokens == 0 {
            0.0
        } else {
            (self.computed_tokens - self.tokens) as f64 / self.computed_tokens as f64
        }
    }
}

/// The cost of `plan`'s batches, each padded to its longest row rounded up to `multiple`.
pub fn plan_cost(plan: &Plan, lengths: &[u32], multiple: usize) -> PlanCost {
    let mut cost = PlanCost {
        batches: plan.num_batches(),
        ..Default::default()
    };
    for b in 0..plan.num_batches() {
        let mut longest = 0;
        let mut rows = 0;
        for row in plan.batch(b) {
            let len: u64 = row.iter().map(|&e| u64::from(lengths[e as usize])).sum();
            cost.tokens += len;
            longest = longest.max(len);
            rows += 1;
        }
        cost.rows += rows;
        cost.computed_tokens += rows as u64 * padded_width(longest as usize, multiple) as u64;
    }
    cost
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::shuffle::{epoch_order, SplitMix64};

    fn settings(batching: Batching, batch_size: usize, max_batch_tokens: usize) -> PlanSettings {
        PlanSettings {
            batching,
            batch_size,
            max_batch_tokens,
            pad_to_multiple_of: 1,
            shard: None,
        }
    }

    fn random_lengths(n: usize, seed: u64, max: u32) -> Vec<u32> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| 1 + rng.below(max as usize) as u32).collect()
    }

    fn rows_of(plan: &Plan) -> Vec<Vec<Vec<u32>>> {
        (0..plan.num_batches())
            .map(|b| plan.batch(b).map(<[u32]>::to_vec).collect())
            .collect()
    }

    fn all_examples(plan: &Plan) -> Vec<u32> {
        let mut all: Vec<u32> = rows_of(plan).into_iter().flatten().flatten().collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn reference_cuts_the_order() {
        let order = [4, 2, 0, 1, 3];
        let plan = plan(&order, &[], 1, &settings(Batching::Reference, 2, 0));
        assert_eq!(
            rows_of(&plan),
            vec![
                vec![vec![4], vec![2]],
                vec![vec![0], vec![1]],
                vec![vec![3]]
            ]
        );
    }

    #[test]
    fn every_strategy_covers_every_example_once() {
        for n in [1, 7, 8, 9, 401, 1000] {
            let lengths = random_lengths(n, n as u64, 300);
            let order = epoch_order(n, 42.0, 0.0);
            for batching in Batching::ALL {
                let plan = plan(&order, &lengths, 9, &settings(batching, 8, 600));
                assert_eq!(all_examples(&plan), (0..n as u32).collect::<Vec<_>>());
                for b in 0..plan.num_batches() {
                    assert!(plan.batch(b).len() <= 8 && plan.batch(b).len() > 0);
                }
            }
        }
    }

    #[test]
    fn length_grouped_batches_are_sorted_runs_of_their_mega_batch() {
        let n = 1000;
        let lengths = random_lengths(n, 3, 2000);
        let order = epoch_order(n, 42.0, 1.0);
        let s = settings(Batching::LengthGrouped, 8, 0);
        let p = plan(&order, &lengths, 5, &s);
        assert_eq!(p.num_batches(), n.div_ceil(8));
        let mega_of = |e: u32| order.iter().position(|&o| o == e).unwrap() / (MEGA_BATCH * 8);
        for batch in rows_of(&p) {
            let examples: Vec<u32> = batch.into_iter().flatten().collect();
            assert!(examples
                .windows(2)
                .all(|w| lengths[w[0] as usize] <= lengths[w[1] as usize]));
            assert!(examples.iter().all(|&e| mega_of(e) == mega_of(examples[0])));
        }
        let cost = plan_cost(&p, &lengths, 1);
        let reference = plan_cost(
            &plan(&order, &lengths, 5, &settings(Batching::Reference, 8, 0)),
            &lengths,
            1,
        );
        assert!(cost.computed_tokens < reference.computed_tokens);
    }

    #[test]
    fn token_budget_is_respected_unless_one_row_passes_it() {
        let n = 2000;
        let lengths = random_lengths(n, 11, 900);
        let order = epoch_order(n, 1.0, 0.0);
        for multiple in [1, 64] {
            let s = PlanSettings {
                pad_to_multiple_of: multiple,
                ..settings(Batching::TokenBudget, 16, 1024)
            };
            let p = plan(&order, &lengths, 2, &s);
            for batch in rows_of(&p) {
                let longest = batch
                    .iter()
                    .map(|r| lengths[r[0] as usize] as usize)
                    .max()
                    .unwrap();
                let width = padded_width(longest, multiple);
                assert!(batch.len() <= 16);
                assert!(batch.len() * width <= 1024 || batch.len() == 1, "{batch:?}");
            }
            assert_eq!(all_examples(&p), (0..n as u32).collect::<Vec<_>>());
        }
        // A budget below one row: every row alone.
        let p = plan(&order, &lengths, 2, &settings(Batching::TokenBudget, 16, 1));
        assert_eq!(p.num_batches(), n);
    }

    #[test]
    fn packing_is_best_fit_decreasing() {
        // Lengths by example: 6, 5, 4, 3, 2 into rows of 10: 6+4, 5+3+2.
        let lengths = [6, 5, 4, 3, 2];
        assert_eq!(
            pack(&[0, 1, 2, 3, 4], &lengths, 10),
            vec![vec![0, 2], vec![1, 3, 4]]
        );
        // Equal lengths go in epoch order.
        let lengths = [3, 3, 7, 2, 5];
        assert_eq!(
            pack(&[4, 1, 0, 2, 3], &lengths, 8),
            vec![vec![2], vec![4, 1], vec![0, 3]]
        );
        // Too long for a row: a row of its own.
        assert_eq!(pack(&[0, 1], &[12, 1], 10), vec![vec![0], vec![1]]);
    }

    #[test]
    fn packed_rows_fit_and_waste_little() {
        let n = 3000;
        let lengths = random_lengths(n, 5, 1500);
        let order = epoch_order(n, 42.0, 2.0);
        let p = plan(&order, &lengths, 3, &settings(Batching::Packed, 8, 2048));
        for batch in rows_of(&p) {
            for row in batch {
                let total: u32 = row.iter().map(|&e| lengths[e as usize]).sum();
                assert!(total <= 2048);
            }
        }
        assert_eq!(all_examples(&p), (0..n as u32).collect::<Vec<_>>());
        assert!(plan_cost(&p, &lengths, 1).padding_share() < 0.03);
        // The final batch holds the least-filled packed rows.
        let loads: Vec<Vec<u32>> = rows_of(&p)
            .iter()
            .map(|b| {
                b.iter()
                    .map(|r| r.iter().map(|&e| lengths[e as usize]).sum())
                    .collect()
            })
            .collect();
        let (last, rest) = loads.split_last().unwrap();
        let fullest_last = *last.iter().max().unwrap();
        let emptiest_rest = rest.iter().flatten().min().unwrap();
        assert!(
            fullest_last <= *emptiest_rest,
            "{last:?} vs {emptiest_rest}"
        );
    }

    #[test]
    fn the_final_batch_takes_the_least_filled_packed_rows() {
        // Rows of 10: 6 rows filled to the brim and two of 3 and 1 tokens.
        let lengths = [10, 10, 10, 10, 10, 10, 3, 1];
        let rows: Vec<Vec<u32>> = [7, 0, 1, 6, 2, 3, 4, 5].iter().map(|&e| vec![e]).collect();
        let out = emptiest_last(rows.clone(), &lengths, 3);
        assert_eq!(
            out,
            [0, 1, 2, 3, 4, 5, 7, 6]
                .iter()
                .map(|&e| vec![e])
                .collect::<Vec<_>>()
        );
        // Padded to its longest row, the final batch costs 2 x 3 tokens instead of 2 x 10.
        let p = Plan {
            examples: out.concat(),
            row_ends: (1..=8).collect(),
            batch_ends: vec![3, 6, 8],
        };
        assert_eq!(plan_cost(&p, &lengths, 1).computed_tokens, 30 + 30 + 2 * 3);
        // A whole final batch: its 4 rows are the least filled (equal loads: the earlier rows),
        // in their shuffled order.
        let out = emptiest_last(rows.clone(), &lengths, 4);
        assert_eq!(out[4..], [vec![7], vec![0], vec![1], vec![6]]);
        assert_eq!(out[..4], [vec![2], vec![3], vec![4], vec![5]]);
        // One batch or less: nothing moves.
        assert_eq!(emptiest_last(rows.clone(), &lengths, 8), rows);
    }

    #[test]
    fn plans_are_deterministic_and_keyed() {
        let n = 500;
        let lengths = random_lengths(n, 8, 700);
        let order = epoch_order(n, 42.0, 0.0);
        for batching in [
            Batching::LengthGrouped,
            Batching::TokenBudget,
            Batching::Packed,
        ] {
            let s = settings(batching, 4, 2048);
            let a = plan(&order, &lengths, plan_key(42.0, Some(0.0)), &s);
            assert_eq!(a, plan(&order, &lengths, plan_key(42.0, Some(0.0)), &s));
            assert_ne!(a, plan(&order, &lengths, plan_key(42.0, Some(1.0)), &s));
        }
        assert_ne!(plan_key(42.0, None), plan_key(42.0, Some(0.0)));
        assert_ne!(plan_key(1.0, Some(2.0)), plan_key(2.0, Some(1.0)));
    }

    #[test]
    fn shards_split_every_batch_and_cover_the_epoch() {
        for n in [37, 64, 333] {
            let lengths = random_lengths(n, n as u64, 400);
            let order = epoch_order(n, 42.0, 0.0);
            for batching in Batching::ALL {
                for world in [2, 4] {
                    let mut seen = vec![0; n];
                    let mut counts = Vec::new();
                    let ranks: Vec<Plan> = (0..world)
                        .map(|rank| {
                            let s = PlanSettings {
                                shard: Some(Shard {
                                    rank,
                                    world_size: world,
                                }),
                                ..settings(batching, 8, 1024)
                            };
                            plan(&order, &lengths, 7, &s)
                        })
                        .collect();
                    for p in &ranks {
                        counts.push(p.num_batches());
                        for e in rows_of(p).into_iter().flatten().flatten() {
                            seen[e as usize] += 1;
                        }
                    }
                    assert!(
                        counts.iter().all(|&c| c == counts[0]),
                        "{batching:?} {counts:?}"
                    );
                    for b in 0..counts[0] {
                        let sizes: Vec<usize> = ranks.iter().map(|p| p.batch(b).len()).collect();
                        assert!(sizes.iter().all(|&s| s == sizes[0] && s > 0), "{sizes:?}");
                    }
                    assert!(
                        seen.iter().all(|&c| (1..=2).contains(&c)),
                        "{batching:?} {world}"
                    );
                }
            }
        }
    }

    #[test]
    fn one_rank_of_one_is_no_shard() {
        let n = 100;
        let lengths = random_lengths(n, 1, 100);
        let order = epoch_order(n, 42.0, 0.0);
        for batching in Batching::ALL {
            let s = settings(batching, 8, 256);
            let sharded = PlanSettings {
                shard: Some(Shard {
                    rank: 0,
                    world_size: 1,
                }),
                ..s
            };
            assert_eq!(
                plan(&order, &lengths, 3, &s),
                plan(&order, &lengths, 3, &sharded)
            );
        }
    }
}
