//! `split`: a held-out part of a dataset. The two parts share the rows, the examples still to
//! build and their keys (nothing is rendered or tokenized again); each has its own order,
//! plans and prefetch, so that it batches, shuffles, reports and exports like any dataset.
//!
//! Which examples are held out depends only on each example's index and the seed, through a
//! fixed 64-bit mix (not the process's random keys): the same data and seed give the same parts
//! in every process, on every machine.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::batch::shuffle::SplitMix64;
use crate::dataset::report::ExampleReport;
use crate::error::{js_number, SftError, SftResult};
use crate::mask::silent_loss::LossChecker;
use crate::rows::DropReason;

use super::mixture::Mixture;
use super::{Dataset, Epoch};

/// How many examples the test part holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TestSize {
    /// A share of the examples in (0, 1), rounded to the nearest count.
    Fraction(f64),
    Count(usize),
}

impl TestSize {
    /// `test` as users give it: a fraction in (0, 1) or a positive integer.
    pub fn parse(test: f64) -> SftResult<Self> {
        if test > 0.0 && test < 1.0 {
            Ok(TestSize::Fraction(test))
        } else if test >= 1.0 && test.fract() == 0.0 && test <= u32::MAX as f64 {
            Ok(TestSize::Count(test as usize))
        } else {
            Err(SftError::invalid_argument(format!(
                "split: test must be a fraction in (0, 1) or a positive integer count, got {}",
                js_number(test)
            )))
        }
    }

    /// The count among `n` examples; each part must keep at least one.
    pub(crate) fn count(self, n: usize) -> SftResult<usize> {
        let k = match self {
            TestSize::Fraction(f) => (f * n as f64).round() as usize,
            TestSize::Count(k) => k,
        };
        if k == 0 || k >= n {
            return Err(SftError::invalid_argument(format!(
                "split: a test part of {k} of {n} examples leaves a part empty (test {})",
                match self {
                    TestSize::Fraction(f) => js_number(f),
                    TestSize::Count(c) => c.to_string(),
                }
            )));
        }
        Ok(k)
    }
}

/// A fixed bijection of 64-bit values whose outputs look random: the first draw of the batch
/// plan's SplitMix64 seeded with `z`.
fn mix(z: u64) -> u64 {
    SplitMix64::new(z).next_u64()
}

/// The key a seed ranks examples by: `+ 0.0` makes -0 and 0 the same seed.
pub(crate) fn seed_key(seed: f64) -> u64 {
    mix((seed + 0.0).to_bits())
}

/// The `k` examples of `examples` (indices) whose index mixed with `key` ranks lowest, in
/// example order.
pub(crate) fn lowest_ranked(examples: &[u32], k: usize, key: u64) -> Vec<u32> {
    if k == 0 {
        return Vec::new();
    }
    let mut ranked: Vec<(u64, u32)> = examples
        .iter()
        .map(|&i| (mix(key ^ mix(u64::from(i))), i))
        .collect();
    ranked.select_nth_unstable(k - 1);
    let mut chosen: Vec<u32> = ranked[..k].iter().map(|&(_, i)| i).collect();
    chosen.sort_unstable();
    chosen
}

/// The examples of `examples` (indices) that go to the test part, in example order: the `k`
/// whose mixed index and seed rank lowest.
pub fn test_members(examples: &[u32], size: TestSize, seed: f64) -> SftResult<Vec<u32>> {
    let k = size.count(examples.len())?;
    Ok(lowest_ranked(examples, k, seed_key(seed)))
}

/// Marks the examples outside `part` (sorted) as left out of a part's report.
pub(super) fn mark_other_part(examples: &mut [ExampleReport], part: &[u32]) {
    for (i, example) in examples.iter_mut().enumerate() {
        if part.binary_search(&(i as u32)).is_err() {
            example.dropped = Some(DropReason::OtherPart);
            example.kept_tokens = 0;
            example.trained_tokens = 0;
        }
    }
}

impl Dataset {
    /// The train and test parts of the examples that take part in training.
    pub fn split(&self, size: TestSize, seed: f64) -> SftResult<(Dataset, Dataset)> {
        let kept = self.kept_examples();
        let test = match &self.mixture {
            Some(mixture) => mixture.test_members(&kept, size, seed)?,
            None => test_members(&kept, size, seed)?,
        };
        let train: Vec<u32> = kept
            .into_iter()
            .filter(|i| test.binary_search(i).is_err())
            .collect();
        let held_out = self.mixture.as_ref().map(|m| Arc::new(m.unweighted()));
        Ok((
            self.part_of(train, self.mixture.clone()),
            self.part_of(test, held_out),
        ))
    }

    /// A dataset of the examples `members` (sorted) over this one's rows; with a mix, each
    /// source weighted as `mixture` says.
    fn part_of(&self, members: Vec<u32>, mixture: Option<Arc<Mixture>>) -> Dataset {
        let loss = match self.tokenizer.ours() {
            Some(t) => LossChecker::new(t, self.config.tools, self.config.sanitize_control_tokens),
            None => LossChecker::without_render(self.config.tools),
        };
        let mut part = Dataset {
            tokenizer: self.tokenizer.clone(),
            config: self.config.clone(),
            format: self.format,
            masking: self.masking.clone(),
            turn_end: self.turn_end.clone(),
            kept: Some(members.clone()),
            examples: self.examples.clone(),
            rows: self.rows.clone(),
            warned: self.warned.clone(),
            epoch: RwLock::new(Arc::new(Epoch {
                order: Arc::new(members.clone()),
                epoch: None,
            })),
            part: Some(Arc::new(members)),
            lengths: OnceLock::new(),
            plan: Mutex::new(None),
            prefetch_started: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            loss,
            losses: self.losses.clone(),
            repeats: self.repeats.clone(),
            // The parts share the rows, wherever the load put them.
            load_memory: self.load_memory,
            mixture,
        };
        part.reset_order();
        part
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_fractions_or_counts_that_leave_both_parts_examples() {
        assert_eq!(TestSize::parse(0.25).unwrap(), TestSize::Fraction(0.25));
        assert_eq!(TestSize::parse(3.0).unwrap(), TestSize::Count(3));
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY] {
            assert_eq!(
                TestSize::parse(bad).unwrap_err().code,
                crate::error::ErrorCode::InvalidArgument
            );
        }
        assert_eq!(TestSize::Fraction(0.25).count(10).unwrap(), 3);
        assert_eq!(TestSize::Count(9).count(10).unwrap(), 9);
        assert_eq!(
            TestSize::Count(10).count(10).unwrap_err().message,
            "split: a test part of 10 of 10 examples leaves a part empty (test 10)"
        );
        assert_eq!(
            TestSize::Fraction(0.01).count(10).unwrap_err().message,
            "split: a test part of 0 of 10 examples leaves a part empty (test 0.01)"
        );
    }

    #[test]
    fn membership_is_fixed_by_index_and_seed() {
        let all: Vec<u32> = (0..1000).collect();
        let test = test_members(&all, TestSize::Fraction(0.1), 42.0).unwrap();
        assert_eq!(test.len(), 100);
        assert!(test.windows(2).all(|w| w[0] < w[1]));
        // The values any process on any machine computes for this data and seed.
        assert_eq!(&test[..8], &[17, 64, 65, 73, 81, 87, 103, 126]);
        assert_eq!(
            test_members(&all, TestSize::Fraction(0.1), 42.0).unwrap(),
            test
        );
        let other = test_members(&all, TestSize::Fraction(0.1), 7.0).unwrap();
        assert_ne!(other, test);
        // Membership depends on the index, not the position among the candidates.
        let evens: Vec<u32> = (0..1000).step_by(2).collect();
        let test_evens = test_members(&evens, TestSize::Count(50), 42.0).unwrap();
        assert!(test_evens.iter().all(|i| i % 2 == 0));
    }
}
