//! Where a dataset keeps its rows: cells filled on first use for a dataset created from
//! examples, or the rows a load packed while the file streamed by.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::error::{SftError, SftResult};
use crate::rows::packed_rows::{PackedRows, RowBytes};
use crate::rows::{RowStats, RowView, TokenizedRow};

pub enum RowCache {
    /// One cell per example, built on first use by whichever thread needs it first, and
    /// whether a thread has set out to build it.
    Lazy {
        cells: Vec<OnceLock<SftResult<TokenizedRow>>>,
        claimed: Vec<AtomicBool>,
    },
    /// Every row built up front, packed.
    Packed(PackedRows),
}

impl RowCache {
    /// Empty cells for `count` examples.
    pub fn lazy(count: usize) -> Self {
        RowCache::Lazy {
            cells: (0..count).map(|_| OnceLock::new()).collect(),
            claimed: (0..count).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            RowCache::Lazy { cells, .. } => cells.len(),
            RowCache::Packed(rows) => rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `index` (below `len()`), built with `build` if it is not there yet.
    pub fn get_or_build(
        &self,
        index: usize,
        build: impl FnOnce() -> SftResult<TokenizedRow>,
    ) -> Result<RowView<'_>, &SftError> {
        match self {
            RowCache::Lazy { cells, claimed } => {
                claimed[index].store(true, Ordering::Relaxed);
                match cells[index].get_or_init(build) {
                    Ok(row) => Ok(row.view()),
                    Err(e) => Err(e),
                }
            }
            RowCache::Packed(rows) => rows.get(index),
        }
    }

    /// Builds row `index` (below `len()`) with `build` unless a thread set out to build it
    /// already: a prefetch goes on to the next row rather than wait for a row that a batch is
    /// building (the thread that claimed a row is in `get_or_build`, and builds it or waits for
    /// it).
    pub fn build_unclaimed(&self, index: usize, build: impl FnOnce() -> SftResult<TokenizedRow>) {
        if let RowCache::Lazy { cells, claimed } = self {
            if !claimed[index].swap(true, Ordering::AcqRel) {
                let _ = cells[index].get_or_init(build);
            }
        }
    }

    /// Row `index` if it was built, without building it.
    pub fn built(&self, index: usize) -> Option<Result<RowView<'_>, &SftError>> {
        match self {
            RowCache::Lazy { cells, .. } => {
                cells[index].get().map(|r| r.as_ref().map(|r| r.view()))
            }
            RowCache::Packed(rows) => Some(rows.get(index)),
        }
    }

    /// The statistics of row `index` if it was built, or why it failed, without reading its ids
    /// (a pass over every row of mapped rows reads only the blocks with rare rows).
    pub fn built_stats(&self, index: usize) -> Option<Result<&RowStats, &SftError>> {
        match self {
            RowCache::Lazy { .. } => self.built(index).map(|row| row.map(|row| row.stats())),
            RowCache::Packed(rows) => Some(rows.outcome(index).map(RowStats::of)),
        }
    }

    /// What the rows built so far take, in memory and mapped.
    pub fn bytes(&self) -> RowBytes {
        match self {
            RowCache::Lazy { cells, .. } => RowBytes {
                resident: cells
                    .iter()
                    .filter_map(|cell| cell.get()?.as_ref().ok())
                    .map(|row| {
                        std::mem::size_of_val::<[u32]>(&row.ids)
                            + std::mem::size_of_val::<[std::ops::Range<u32>]>(&row.spans)
                    })
                    .sum(),
                mapped: 0,
            },
            RowCache::Packed(rows) => rows.bytes(),
        }
    }

    /// Whether every row is built already (nothing to prefetch).
    pub fn is_complete(&self) -> bool {
        matches!(self, RowCache::Packed(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::RowStats;

    fn row(id: u32) -> SftResult<TokenizedRow> {
        Ok(TokenizedRow::new(
            vec![id].into(),
            Vec::new().into(),
            None,
            RowStats::default(),
        ))
    }

    #[test]
    fn a_prefetch_builds_only_rows_no_thread_set_out_to_build() {
        let cache = RowCache::lazy(3);
        cache.build_unclaimed(0, || row(10));
        // A second prefetch of the same row, or of a row a batch is building, leaves it.
        cache.build_unclaimed(0, || panic!("built twice"));
        let ids = |i: usize| cache.built(i).map(|r| r.map(|r| r.ids.to_vec()).ok());
        assert_eq!(ids(0), Some(Some(vec![10])));
        let seen = cache.get_or_build(1, || {
            // While row 1 is being built, a prefetch of it goes on without it.
            cache.build_unclaimed(1, || panic!("built by a prefetch while a batch builds it"));
            row(11)
        });
        assert_eq!(seen.ok().map(|r| r.ids.to_vec()), Some(vec![11]));
        // A row no one built yet is built by whoever needs it.
        assert_eq!(ids(2), None);
        let needed = cache.get_or_build(2, || row(12));
        assert_eq!(needed.ok().map(|r| r.ids.to_vec()), Some(vec![12]));
        assert_eq!(
            cache
                .get_or_build(0, || row(99))
                .ok()
                .map(|r| r.ids.to_vec()),
            Some(vec![10])
        );
    }
}
