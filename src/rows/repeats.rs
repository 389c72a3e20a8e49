//! Repeated examples of a dataset created from JS examples, whose rows are built on demand in
//! any order: each example's duplicate key, noted when its row is built, for the
//! `DUPLICATE_EXAMPLE` class of `report()`; and which built row each key's repeats may copy
//! instead of rendering and tokenizing the same example again. (`loadSFTDataset` finds its
//! repeats in file order while it streams: `loader`.)

use std::sync::{Mutex, OnceLock};

use rustc_hash::FxHashMap;

use crate::mask::silent_loss::ExampleKey;

pub struct Repeats {
    /// Each example's key, once its row is being built.
    keys: Vec<OnceLock<ExampleKey>>,
    /// For each key, an example whose row came out whole and carries no distillation targets.
    sources: Mutex<FxHashMap<ExampleKey, u32>>,
}

impl Repeats {
    pub fn new(count: usize) -> Self {
        Repeats {
            keys: (0..count).map(|_| OnceLock::new()).collect(),
            sources: Mutex::default(),
        }
    }

    /// Notes example `index`'s key.
    pub fn note(&self, index: usize, key: ExampleKey) {
        if let Some(cell) = self.keys.get(index) {
            let _ = cell.set(key);
        }
    }

    /// An example with `key` whose row came out whole (and has no distillation targets), if one
    /// did: a row without distillation targets may be copied from it.
    pub fn source(&self, key: &ExampleKey) -> Option<usize> {
        self.lock().get(key).map(|&index| index as usize)
    }

    /// Example `index`'s row (key `key`, no distillation targets) came out whole.
    pub fn built(&self, index: usize, key: ExampleKey) {
        if let Ok(index) = u32::try_from(index) {
            self.lock().entry(key).or_insert(index);
        }
    }

    /// For each example, whether an earlier one has its key (false for examples whose row was
    /// never built): the loader's rule, for a dataset whose rows all came out whole.
    pub fn repeated(&self) -> Vec<bool> {
        let mut first = FxHashMap::<ExampleKey, usize>::default();
        self.keys
            .iter()
            .enumerate()
            .map(|(index, key)| match key.get() {
                Some(key) => *first.entry(*key).or_insert(index) != index,
                None => false,
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<ExampleKey, u32>> {
        self.sources
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_repeats_when_a_lower_index_has_its_key_whatever_the_build_order() {
        let repeats = Repeats::new(6);
        let (a, b) = ([1, 2], [3, 4]);
        // Built out of order; example 4 never built.
        for (index, key) in [(3, a), (5, b), (0, b), (1, a), (2, a)] {
            repeats.note(index, key);
        }
        assert_eq!(repeats.repeated(), [false, false, true, true, false, true]);
        assert_eq!(repeats.source(&a), None);
        repeats.built(3, a);
        repeats.built(1, a);
        assert_eq!(repeats.source(&a), Some(3));
        assert_eq!(repeats.source(&b), None);
    }
}
