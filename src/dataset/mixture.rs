//! Several data files as one dataset, each with a weight: how many times its examples appear in
//! an epoch. The integer part of a weight repeats every example of the source; the fraction
//! draws that share of them anew each epoch, from the seed and the epoch alone, so two processes
//! (or machines) see the same examples in the same order. The epoch's shuffle covers the whole
//! mix.
//!
//! Every source is loaded as a dataset of its own (its own format, limit and token cache entry);
//! `Dataset::mix` then puts their rows end to end, so that the examples of source `s` are the
//! indices `start..start + count`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::batch::shuffle::SplitMix64;
use crate::dataset::report::ExampleReport;
use crate::dataset::split::{lowest_ranked, seed_key, TestSize};
use crate::dataset::LoadMemory;
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::example::Format;
use crate::input::dataset_format::FormatOptions;
use crate::rows::packed_rows::PackedRows;
use crate::rows::row_cache::RowCache;

use super::{Dataset, Epoch};

/// One source of a mix.
#[derive(Debug, Clone)]
pub struct MixSource {
    pub path: PathBuf,
    /// Appearances of each example per epoch, on average.
    pub weight: f64,
    /// How its records are read (`format`, `columns`, `roles`), for what reads them again.
    pub input: FormatOptions,
    /// What its records hold.
    pub format: Format,
    /// Its examples are `start..start + count` of the mix.
    pub start: u32,
    pub count: u32,
}

impl MixSource {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.count) as usize
    }
}

/// The sources of a mixed dataset, in the order given.
#[derive(Debug, Clone)]
pub struct Mixture {
    pub sources: Vec<MixSource>,
}

/// A weight as users give it: a finite number above 0.
pub fn check_weight(weight: f64, source: usize, path: &str) -> SftResult<f64> {
    if weight.is_finite() && weight > 0.0 {
        Ok(weight)
    } else {
        Err(SftError::invalid_argument(format!(
            "loadSFTDataset: sources[{source}] ({path}): weight must be a finite number above 0, got {}",
            js_number(weight)
        )))
    }
}

/// Examples of a source drawn for the fraction of its weight: this many of `n`.
fn drawn_count(weight: f64, n: usize) -> usize {
    (weight.fract() * n as f64).round() as usize
}

/// The key that ranks a source's examples for an epoch's draw: from the seed, the epoch and the
/// source, through fixed 64-bit mixes, never the process's random state.
fn draw_key(seed: f64, epoch: f64, source: usize) -> u64 {
    let mut key = SplitMix64::new(seed_key(seed) ^ 0x6d69_7874_7572_6521);
    let epoch = SplitMix64::new((epoch + 0.0).to_bits()).next_u64();
    SplitMix64::new(key.next_u64() ^ epoch ^ source as u64).next_u64()
}

impl Mixture {
    /// The source example `example` belongs to.
    pub fn source_of(&self, example: u32) -> usize {
        self.sources
            .partition_point(|s| s.start + s.count <= example)
            .min(self.sources.len() - 1)
    }

    /// `members` (sorted example indices), cut at the sources' bounds.
    pub fn by_source<'a>(&self, members: &'a [u32]) -> Vec<&'a [u32]> {
        let mut rest = members;
        self.sources
            .iter()
            .map(|s| {
                let end = rest.partition_point(|&i| i < s.start + s.count);
                let (mine, after) = rest.split_at(end);
                rest = after;
                mine
            })
            .collect()
    }

    /// How many examples an epoch holds: every source's repeats and draws.
    pub fn epoch_len(&self, members: &[u32]) -> usize {
        self.sources
            .iter()
            .zip(self.by_source(members))
            .map(|(s, mine)| {
                mine.len() * s.weight.trunc() as usize + drawn_count(s.weight, mine.len())
            })
            .sum()
    }

    /// The examples of epoch `epoch`, before its shuffle: source by source, each of its
    /// `members` (sorted example indices) once per whole unit of its weight, then the share
    /// the fraction draws for this epoch, in example order.
    pub fn epoch_members(&self, members: &[u32], seed: f64, epoch: f64) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.epoch_len(members));
        for (s, (source, mine)) in self.sources.iter().zip(self.by_source(members)).enumerate() {
            for _ in 0..source.weight.trunc() as usize {
                out.extend_from_slice(mine);
            }
            let k = drawn_count(source.weight, mine.len());
            if k > 0 {
                out.extend(lowest_ranked(mine, k, draw_key(seed, epoch, s)));
            }
        }
        out
    }

    /// The mix the held-out part of a split takes: the same sources, each example once.
    pub fn unweighted(&self) -> Mixture {
        let mut sources = self.sources.clone();
        for s in &mut sources {
            s.weight = 1.0;
        }
        Mixture { sources }
    }

    /// The test part of a split of `members` (sorted): the count `size` asks for, shared among
    /// the sources in proportion to their members (largest remainders), each source's share
    /// drawn as an unmixed split draws it.
    pub fn test_members(&self, members: &[u32], size: TestSize, seed: f64) -> SftResult<Vec<u32>> {
        let k = size.count(members.len())?;
        let parts = self.by_source(members);
        let n = members.len();
        let mut shares: Vec<(usize, usize, usize)> = parts
            .iter()
            .enumerate()
            .map(|(s, p)| (s, k * p.len() / n, k * p.len() % n))
            .collect();
        let mut left = k - shares.iter().map(|s| s.1).sum::<usize>();
        let mut by_remainder: Vec<usize> = (0..shares.len()).collect();
        by_remainder.sort_by_key(|&s| (std::cmp::Reverse(shares[s].2), s));
        for s in by_remainder {
            if left == 0 {
                break;
            }
            if shares[s].1 < parts[s].len() {
                shares[s].1 += 1;
                left -= 1;
            }
        }
        let key = seed_key(seed);
        let mut test: Vec<u32> = shares
            .iter()
            .filter(|share| share.1 > 0)
            .flat_map(|&(s, count, _)| lowest_ranked(parts[s], count, key))
            .collect();
        test.sort_unstable();
        Ok(test)
    }
}

/// Examples so far of a mix being put together.
fn dataset_count(
    rows: &Option<PackedRows>,
    lazy: &Option<Vec<std::sync::Mutex<Option<super::Pending>>>>,
) -> u32 {
    (rows.as_ref().map_or(0, PackedRows::len) + lazy.as_ref().map_or(0, Vec::len)) as u32
}

/// A loaded source on its way into a mix.
pub struct MixPart {
    pub dataset: Dataset,
    pub path: PathBuf,
    pub weight: f64,
}

impl Dataset {
    /// The sources of a mixed dataset; `None` for a dataset of one file or of examples.
    pub fn mixture(&self) -> Option<&Mixture> {
        self.mixture.as_deref()
    }

    /// What example `index` holds: its source's format in a mix, the dataset's otherwise.
    pub fn format_of(&self, index: usize) -> Format {
        match self.mixture() {
            Some(m) => m.sources[m.source_of(index as u32)].format,
            None => self.format,
        }
    }

    /// Several loaded datasets (same tokenizer and settings but for how each reads its file) as
    /// one: their rows end to end, nothing rebuilt, each source's dropped examples still left
    /// out, and every epoch made of the sources' examples as their weights say. Datasets over a
    /// foreign tokenizer, whose rows have not arrived, give their examples instead.
    pub fn mix(parts: Vec<MixPart>) -> SftResult<Dataset> {
        let internal = |what: &str| SftError::new(ErrorCode::Internal, format!("mix: {what}"));
        let mut sources = Vec::with_capacity(parts.len());
        let mut kept = Vec::new();
        let mut rows: Option<PackedRows> = None;
        let mut memory: Option<LoadMemory> = None;
        let mut first: Option<Dataset> = None;
        // Rows packed by loads, or (over a foreign tokenizer) examples whose rows come later.
        let mut lazy: Option<Vec<std::sync::Mutex<Option<super::Pending>>>> = None;
        for part in parts {
            let mut dataset = part.dataset;
            let start = dataset_count(&rows, &lazy);
            kept.extend(dataset.kept_examples().into_iter().map(|i| start + i));
            sources.push(MixSource {
                path: part.path,
                weight: part.weight,
                input: dataset.config.input.clone(),
                format: dataset.format,
                start,
                count: dataset.example_count() as u32,
            });
            if let Some(m) = dataset.load_memory {
                let held = rows.as_ref().map_or(0, |r| r.bytes().resident);
                memory = Some(match memory {
                    None => m,
                    Some(before) => LoadMemory {
                        budget: before.budget,
                        peak: before.peak.max(held + m.peak),
                        spilled: before.spilled || m.spilled,
                    },
                });
            }
            let cache = std::mem::replace(&mut dataset.rows, Arc::new(RowCache::lazy(0)));
            match Arc::try_unwrap(cache).map_err(|_| internal("a source's rows are shared"))? {
                RowCache::Packed(packed) if lazy.is_none() => match rows.as_mut() {
                    None => rows = Some(packed),
                    Some(all) => all.append(packed),
                },
                RowCache::Lazy { cells, .. }
                    if rows.is_none() && cells.iter().all(|c| c.get().is_none()) =>
                {
                    let examples = std::mem::take(&mut dataset.examples);
                    let examples = Arc::try_unwrap(examples)
                        .map_err(|_| internal("a source's examples are shared"))?;
                    lazy.get_or_insert_with(Vec::new).extend(examples);
                }
                _ => return Err(internal("the sources' rows are of different kinds")),
            }
            first.get_or_insert(dataset);
        }
        let rows = match (rows, lazy) {
            (Some(rows), None) => Some((RowCache::Packed(rows), Vec::new())),
            (None, Some(examples)) => Some((RowCache::lazy(examples.len()), examples)),
            _ => None,
        };
        let (Some(first), Some((rows, examples))) = (first, rows) else {
            return Err(SftError::invalid_argument(
                "loadSFTDataset: a mix needs at least one source",
            ));
        };
        let mut dataset = Self::assemble(
            first.tokenizer.clone(),
            first.config.clone(),
            first.format,
            first.masking.clone(),
            first.turn_end.clone(),
            examples,
            rows,
        );
        dataset.load_memory = memory;
        dataset.mixture = Some(Arc::new(Mixture { sources }));
        dataset.kept = Some(kept);
        dataset.reset_order();
        Ok(dataset)
    }

    /// The order before any `shuffleForEpoch`: the kept examples in example order, or for a mix
    /// epoch 0's examples unshuffled.
    pub(super) fn reset_order(&mut self) {
        let kept = self.kept_examples();
        let order = match &self.mixture {
            Some(mixture) => mixture.epoch_members(&kept, self.config.seed, 0.0),
            None => kept,
        };
        self.epoch = std::sync::RwLock::new(Arc::new(Epoch {
            order: Arc::new(order),
            epoch: None,
        }));
    }
}

/// What one source holds of a dataset, and what it takes of an epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceCounts {
    /// Examples loaded from the file.
    pub examples: u32,
    /// Examples of it that take part in training (of this part, for a split's part).
    pub rows: u32,
    /// Appearances of its examples in one epoch.
    pub per_epoch: usize,
    /// Kept and trained tokens of its rows, each counted once; 0 without a report.
    pub kept_tokens: u64,
    pub trained_tokens: u64,
}

/// A source of a mix in a report: which file, its weight and format, and its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceReport {
    pub path: String,
    pub weight: f64,
    pub format: Format,
    /// Its first example's index in the mix.
    pub start: u32,
    pub counts: SourceCounts,
}

impl Dataset {
    /// The sources of a mix with their counts and tokens, from the dataset's report of
    /// `examples`; empty for a dataset of one file or of examples.
    pub fn source_reports(&self, examples: &[ExampleReport]) -> Vec<SourceReport> {
        let (Some(mixture), Some(counts)) = (self.mixture(), self.source_counts(Some(examples)))
        else {
            return Vec::new();
        };
        mixture
            .sources
            .iter()
            .zip(counts)
            .map(|(s, counts)| SourceReport {
                path: s.path.display().to_string(),
                weight: s.weight,
                format: s.format,
                start: s.start,
                counts,
            })
            .collect()
    }

    /// Per source of a mix, in source order: examples, rows, appearances per epoch and, given
    /// the dataset's report, tokens. `None` for a dataset of one file or of examples.
    pub fn source_counts(&self, report: Option<&[ExampleReport]>) -> Option<Vec<SourceCounts>> {
        let mixture = self.mixture.as_ref()?;
        let members = self.kept_examples();
        let parts = mixture.by_source(&members);
        Some(
            mixture
                .sources
                .iter()
                .zip(parts)
                .map(|(source, mine)| {
                    let examples = report.map(|r| &r[source.range()]).unwrap_or_default();
                    SourceCounts {
                        examples: source.count,
                        rows: mine.len() as u32,
                        per_epoch: mine.len() * source.weight.trunc() as usize
                            + drawn_count(source.weight, mine.len()),
                        kept_tokens: examples.iter().map(|e| u64::from(e.kept_tokens)).sum(),
                        trained_tokens: examples.iter().map(|e| u64::from(e.trained_tokens)).sum(),
                    }
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mixture(sizes_and_weights: &[(u32, f64)]) -> Mixture {
        let mut start = 0;
        let sources = sizes_and_weights
            .iter()
            .map(|&(count, weight)| {
                let s = MixSource {
                    path: PathBuf::from(format!("s{start}.jsonl")),
                    weight,
                    input: FormatOptions::default(),
                    format: Format::Conversation,
                    start,
                    count,
                };
                start += count;
                s
            })
            .collect();
        Mixture { sources }
    }

    fn count_of(members: &[u32], range: std::ops::Range<u32>) -> usize {
        members.iter().filter(|i| range.contains(i)).count()
    }

    #[test]
    fn whole_weights_repeat_every_example_and_fractions_draw_their_share() {
        let m = mixture(&[(10, 2.0), (100, 0.25), (7, 1.5)]);
        let all: Vec<u32> = (0..117).collect();
        assert_eq!(m.epoch_len(&all), 20 + 25 + 7 + 4);
        let e0 = m.epoch_members(&all, 42.0, 0.0);
        assert_eq!(e0.len(), 56);
        for i in 0..10 {
            assert_eq!(e0.iter().filter(|&&x| x == i).count(), 2);
        }
        assert_eq!(count_of(&e0, 10..110), 25);
        assert_eq!(count_of(&e0, 110..117), 11);
        // The draw is new each epoch, fixed by seed and epoch.
        let e1 = m.epoch_members(&all, 42.0, 1.0);
        assert_ne!(e0[20..45], e1[20..45]);
        assert_eq!(m.epoch_members(&all, 42.0, 1.0), e1);
        assert_ne!(m.epoch_members(&all, 7.0, 1.0), e1);
        // A drawn example appears once in its epoch.
        let mut drawn = e1[20..45].to_vec();
        drawn.dedup();
        assert_eq!(drawn.len(), 25);
        // Over many epochs every example of a fractional source is drawn about as often.
        let mut seen = vec![0u32; 100];
        for epoch in 0..400 {
            for &i in &m.epoch_members(&all, 42.0, epoch as f64)[20..45] {
                seen[i as usize - 10] += 1;
            }
        }
        assert!(seen.iter().all(|&c| (60..=140).contains(&c)), "{seen:?}");
    }

    #[test]
    fn draws_are_the_values_every_machine_computes() {
        let m = mixture(&[(20, 0.5)]);
        let all: Vec<u32> = (0..20).collect();
        assert_eq!(
            m.epoch_members(&all, 42.0, 0.0),
            [0, 3, 4, 5, 7, 9, 12, 15, 18, 19]
        );
    }

    #[test]
    fn members_are_cut_at_source_bounds_and_dropped_examples_stay_out() {
        let m = mixture(&[(3, 1.0), (4, 2.0)]);
        let members = [0, 2, 3, 6];
        assert_eq!(m.by_source(&members), vec![&[0, 2][..], &[3, 6][..]]);
        assert_eq!(m.epoch_members(&members, 42.0, 0.0), [0, 2, 3, 6, 3, 6]);
        assert_eq!(m.source_of(2), 0);
        assert_eq!(m.source_of(3), 1);
        assert_eq!(m.source_of(6), 1);
    }

    #[test]
    fn a_split_holds_out_each_source_in_proportion() {
        let m = mixture(&[(300, 1.0), (100, 3.0)]);
        let all: Vec<u32> = (0..400).collect();
        let test = m.test_members(&all, TestSize::Fraction(0.1), 42.0).unwrap();
        assert_eq!(test.len(), 40);
        assert_eq!(count_of(&test, 0..300), 30);
        assert_eq!(count_of(&test, 300..400), 10);
        assert_eq!(
            m.test_members(&all, TestSize::Fraction(0.1), 42.0).unwrap(),
            test
        );
        // Largest remainders: 7 of 400 is 5.25 and 1.75, so 5 and 2.
        let test = m.test_members(&all, TestSize::Count(7), 42.0).unwrap();
        assert_eq!((count_of(&test, 0..300), count_of(&test, 300..400)), (5, 2));
    }

    #[test]
    fn weights_must_be_positive_and_finite() {
        assert_eq!(check_weight(0.5, 0, "a.jsonl").unwrap(), 0.5);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = check_weight(bad, 1, "b.jsonl").unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument);
            assert!(e
                .message
                .starts_with("loadSFTDataset: sources[1] (b.jsonl): weight"));
        }
    }
}
