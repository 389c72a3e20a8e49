//! Rows packed into blocks: the cache of a loaded dataset. A block holds the token ids of a few
//! thousand rows in one allocation, their trained ranges in another and, apart, the rare rows
//! that carry more (warnings, statistics, distillation targets) or failed to build. A row costs
//! its ids, 8 bytes of offsets and 8 bytes a trained range, and no allocation of its own, which
//! keeps files of millions of tiny examples close to the size of their tokens.

use std::ops::Range;

use crate::error::{SftError, SftResult};
use crate::row::{RowExtra, RowView, TokenizedRow};

/// Offsets inside a block are `u32`: a block closes before its ids would overflow them.
const BLOCK_LIMIT: usize = u32::MAX as usize;

struct RowBlock {
    /// Index of the block's first row in the dataset.
    first: usize,
    ids: Box<[u32]>,
    /// End of row k's ids in `ids` (its start is the previous end).
    id_ends: Box<[u32]>,
    spans: Box<[Range<u32>]>,
    span_ends: Box<[u32]>,
    /// Local row index and its extra part, sorted by index.
    extras: Box<[(u32, RowExtra)]>,
    /// Local row index and why it could not be built, sorted by index.
    failures: Box<[(u32, SftError)]>,
}

impl RowBlock {
    fn rows(&self) -> usize {
        self.id_ends.len()
    }

    fn get(&self, local: usize) -> Result<RowView<'_>, &SftError> {
        let key = local as u32;
        if let Ok(k) = self.failures.binary_search_by_key(&key, |(i, _)| *i) {
            return Err(&self.failures[k].1);
        }
        let range = |ends: &[u32]| {
            let start = if local == 0 { 0 } else { ends[local - 1] };
            start as usize..ends[local] as usize
        };
        let extra = self
            .extras
            .binary_search_by_key(&key, |(i, _)| *i)
            .ok()
            .map(|k| &self.extras[k].1);
        Ok(RowView {
            ids: &self.ids[range(&self.id_ends)],
            spans: &self.spans[range(&self.span_ends)],
            extra,
        })
    }
}

/// Every row of a dataset, in example order, packed.
#[derive(Default)]
pub struct PackedRows {
    blocks: Vec<RowBlock>,
    len: usize,
}

impl PackedRows {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends rows (the next ones in example order) as one or more new blocks; each row's own
    /// allocations are freed as it is copied in.
    pub fn push_rows(&mut self, rows: Vec<SftResult<TokenizedRow>>) {
        let mut rest = rows.into_iter().peekable();
        while rest.peek().is_some() {
            let mut taken = Vec::new();
            let (mut ids, mut spans) = (0usize, 0usize);
            while let Some(next) = rest.peek() {
                let (i, s) = next
                    .as_ref()
                    .map_or((0, 0), |r| (r.ids.len(), r.spans.len()));
                if !taken.is_empty() && (ids + i > BLOCK_LIMIT || spans + s > BLOCK_LIMIT) {
                    break;
                }
                ids += i;
                spans += s;
                taken.extend(rest.next());
            }
            self.push_block(taken, ids, spans);
        }
    }

    fn push_block(
        &mut self,
        rows: Vec<SftResult<TokenizedRow>>,
        id_count: usize,
        span_count: usize,
    ) {
        let mut block_ids = Vec::with_capacity(id_count);
        let mut block_spans = Vec::with_capacity(span_count);
        let mut id_ends = Vec::with_capacity(rows.len());
        let mut span_ends = Vec::with_capacity(rows.len());
        let mut extras = Vec::new();
        let mut failures = Vec::new();
        for (local, row) in rows.into_iter().enumerate() {
            match row {
                Ok(row) => {
                    block_ids.extend_from_slice(&row.ids);
                    block_spans.extend_from_slice(&row.spans);
                    if let Some(extra) = row.extra {
                        extras.push((local as u32, *extra));
                    }
                }
                Err(e) => failures.push((local as u32, e)),
            }
            // Both counts stay within BLOCK_LIMIT, checked by `push_rows`.
            id_ends.push(block_ids.len() as u32);
            span_ends.push(block_spans.len() as u32);
        }
        let block = RowBlock {
            first: self.len,
            ids: block_ids.into(),
            id_ends: id_ends.into(),
            spans: block_spans.into(),
            span_ends: span_ends.into(),
            extras: extras.into(),
            failures: failures.into(),
        };
        self.len += block.rows();
        self.blocks.push(block);
    }

    /// Row `index`; `index` must be below `len()`.
    pub fn get(&self, index: usize) -> Result<RowView<'_>, &SftError> {
        let b = self.blocks.partition_point(|b| b.first <= index) - 1;
        let block = &self.blocks[b];
        block.get(index - block.first)
    }
}

#[cfg(test)]
// One trained range per row is the common case, not a mistaken `Vec` of a range.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::row::RowStats;

    fn row(ids: &[u32], spans: &[Range<u32>], warning: Option<&str>) -> TokenizedRow {
        TokenizedRow::new(
            ids.into(),
            spans.into(),
            warning.map(Into::into),
            RowStats::default(),
        )
    }

    #[test]
    fn rows_come_back_as_built_across_blocks() {
        let built = [
            Ok(row(&[1, 2, 3], &[1..3], None)),
            Ok(row(&[], &[], None)),
            Err(SftError::new(ErrorCode::TemplateRender, "boom")),
            Ok(row(&[7, 8], &[0..1, 1..2], Some("careful"))),
        ];
        let mut packed = PackedRows::default();
        packed.push_rows(built[..2].to_vec());
        packed.push_rows(built[2..].to_vec());
        assert_eq!(packed.len(), 4);
        assert_eq!(packed.blocks.len(), 2);
        for (i, expected) in built.iter().enumerate() {
            match (packed.get(i), expected) {
                (Ok(view), Ok(row)) => assert_eq!(view.to_row(), *row, "row {i}"),
                (Err(e), Err(x)) => assert_eq!(e, x),
                (got, _) => panic!("row {i}: {got:?}"),
            }
        }
        let view = packed.get(3).unwrap();
        assert_eq!(view.warning(), Some("careful"));
        assert_eq!(view.stats(), &RowStats::NONE);
        assert_eq!(packed.get(0).unwrap().extra, None);
    }

    #[test]
    fn plain_rows_allocate_no_extra_part() {
        let plain = row(&[1], &[0..1], None);
        assert!(plain.extra.is_none());
        assert!(row(&[1], &[0..1], Some("w")).extra.is_some());
    }
}
