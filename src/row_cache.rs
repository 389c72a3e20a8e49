//! Where a dataset keeps its rows: cells filled on first use for a dataset created from
//! examples, or the rows a load packed while the file streamed by.

use std::sync::OnceLock;

use crate::error::{SftError, SftResult};
use crate::packed_rows::PackedRows;
use crate::row::{RowView, TokenizedRow};

pub enum RowCache {
    /// One cell per example, built on first use by whichever thread needs it first.
    Lazy(Vec<OnceLock<SftResult<TokenizedRow>>>),
    /// Every row built up front, packed.
    Packed(PackedRows),
}

impl RowCache {
    /// Empty cells for `count` examples.
    pub fn lazy(count: usize) -> Self {
        RowCache::Lazy((0..count).map(|_| OnceLock::new()).collect())
    }

    pub fn len(&self) -> usize {
        match self {
            RowCache::Lazy(cells) => cells.len(),
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
            RowCache::Lazy(cells) => match cells[index].get_or_init(build) {
                Ok(row) => Ok(row.view()),
                Err(e) => Err(e),
            },
            RowCache::Packed(rows) => rows.get(index),
        }
    }

    /// Row `index` if it was built, without building it.
    pub fn built(&self, index: usize) -> Option<Result<RowView<'_>, &SftError>> {
        match self {
            RowCache::Lazy(cells) => cells[index].get().map(|r| r.as_ref().map(|r| r.view())),
            RowCache::Packed(rows) => Some(rows.get(index)),
        }
    }

    /// Whether every row is built already (nothing to prefetch).
    pub fn is_complete(&self) -> bool {
        matches!(self, RowCache::Packed(_))
    }
}
