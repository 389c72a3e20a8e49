//! Padded batches: rows truncated to `maxSeqLength` (keeping their end, as the reference does, or
//! their start), laid out one row per batch row or several packed into one, padded on the right
//! with the pad id and `-100` to the longest row, rounded up to `padToMultipleOf`.

use std::mem::MaybeUninit;
use std::ops::Range;

use crate::mask::truncation::{kept_window, Truncation};
use crate::mask::{overlay_trained, IGNORE_INDEX};
use crate::rows::RowView;
use crate::tools::distill::{MISSING_ID, MISSING_LOGPROB};

pub struct Batch {
    pub input_ids: Vec<i32>,
    pub labels: Vec<i32>,
    pub rows: usize,
    pub seq_len: usize,
    /// Present when any row carries distillation targets.
    pub distill: Option<BatchDistill>,
    /// Present when several examples share a row (`batching: 'packed'`).
    pub packing: Option<Packing>,
}

/// Distillation targets of a batch, `[rows, seq_len, k]`, truncated and padded like `input_ids`;
/// padding, and rows without targets, hold `MISSING_ID` / `MISSING_LOGPROB`.
pub struct BatchDistill {
    pub k: usize,
    pub ids: Vec<i32>,
    pub logprobs: Vec<f32>,
}

/// Where each example of a packed batch lies, `[rows, seq_len]` like `input_ids`.
pub struct Packing {
    /// Position of each token within its own example (restarting at 0); 0 on padding.
    pub position_ids: Vec<i32>,
    /// The example index of each token; -1 on padding.
    pub example_ids: Vec<i32>,
}

/// How rows are cut and padded.
#[derive(Debug, Clone, Copy)]
pub struct Padding {
    pub max_seq_len: usize,
    /// The padded length is rounded up to a multiple of this (at least 1).
    pub multiple: usize,
    pub pad_id: u32,
    pub truncation: Truncation,
}

/// The padded length of a batch whose longest row holds `longest` tokens.
pub fn padded_width(longest: usize, multiple: usize) -> usize {
    longest.div_ceil(multiple.max(1)) * multiple.max(1)
}

/// The part of one example that goes into a batch row.
struct Piece<'a> {
    row: RowView<'a>,
    window: Range<usize>,
    example: u32,
}

/// Where every example of a batch goes: the pieces of each batch row and the padded width,
/// decided before any cell is written, so that the cells can be written straight into memory
/// allocated elsewhere (a JS engine's buffers) as well as into vectors.
pub struct Layout<'a> {
    pieces: Vec<Piece<'a>>,
    /// Batch row `b` holds `pieces[ends[b - 1]..ends[b]]` (from 0 for the first).
    ends: Vec<usize>,
    seq_len: usize,
    pad_id: i32,
    packed: bool,
}

/// Cells of one array, written or not yet.
pub type CellsOf<'o> = &'o mut [MaybeUninit<i32>];

/// The arrays a batch is written into, `rows * seq_len` cells each; `Layout::write` writes
/// every cell exactly once, so they may start uninitialized.
pub struct Cells<'o> {
    pub input_ids: CellsOf<'o>,
    pub labels: CellsOf<'o>,
    /// `position_ids` and `example_ids`, for a packed layout only.
    pub packing: Option<(CellsOf<'o>, CellsOf<'o>)>,
}

impl<'a> Layout<'a> {
    /// One example per batch row: the reference's collation (with `multiple` 1).
    pub fn single(rows: &[RowView<'a>], padding: &Padding) -> Self {
        let pieces = rows
            .iter()
            .map(|row| piece(*row, 0, padding))
            .collect::<Vec<_>>();
        let ends = (1..=pieces.len()).collect();
        Self::new(pieces, ends, padding, false)
    }

    /// Several examples per batch row, each truncated on its own: `rows[b]` lists the examples
    /// (index and row) packed into batch row `b`, in order. The first token of every example
    /// is untrained, so that a shifted loss never predicts an example from the one before it.
    pub fn packed(rows: &[Vec<(u32, RowView<'a>)>], padding: &Padding) -> Self {
        let mut pieces = Vec::with_capacity(rows.iter().map(Vec::len).sum());
        let mut ends = Vec::with_capacity(rows.len());
        for examples in rows {
            pieces.extend(
                examples
                    .iter()
                    .map(|&(example, row)| piece(row, example, padding)),
            );
            ends.push(pieces.len());
        }
        Self::new(pieces, ends, padding, true)
    }

    fn new(pieces: Vec<Piece<'a>>, ends: Vec<usize>, padding: &Padding, packed: bool) -> Self {
        let mut layout = Layout {
            pieces,
            ends,
            seq_len: 0,
            pad_id: padding.pad_id as i32,
            packed,
        };
        let longest = layout
            .batch_rows()
            .map(|pieces| pieces.iter().map(|p| p.window.len()).sum::<usize>())
            .max()
            .unwrap_or(0);
        layout.seq_len = padded_width(longest, padding.multiple);
        layout
    }

    fn batch_rows(&self) -> impl Iterator<Item = &[Piece<'a>]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.pieces[start..end])
    }

    pub fn rows(&self) -> usize {
        self.ends.len()
    }

    pub fn seq_len(&self) -> usize {
        self.seq_len
    }

    /// Cells of each array: `rows * seq_len`.
    pub fn cells(&self) -> usize {
        self.rows() * self.seq_len
    }

    pub fn is_packed(&self) -> bool {
        self.packed
    }

    /// Writes every cell of `out`: each piece's tokens and labels, then the row's padding.
    /// Panics if an array does not hold `cells()` cells, or if `packing` is given for a layout
    /// that is not packed or missing for one that is.
    pub fn write(&self, out: Cells<'_>) {
        let cells = self.cells();
        assert_eq!(out.input_ids.len(), cells, "input_ids cells");
        assert_eq!(out.labels.len(), cells, "labels cells");
        assert_eq!(out.packing.is_some(), self.packed, "packing arrays");
        let Cells {
            input_ids,
            labels,
            mut packing,
        } = out;
        if let Some((positions, examples)) = packing.as_ref() {
            assert_eq!((positions.len(), examples.len()), (cells, cells));
        }
        for (b, pieces) in self.batch_rows().enumerate() {
            let row_end = (b + 1) * self.seq_len;
            let mut at = b * self.seq_len;
            for piece in pieces {
                let tokens = &piece.row.ids[piece.window.clone()];
                let end = at + tokens.len();
                for (cell, &id) in input_ids[at..end].iter_mut().zip(tokens) {
                    cell.write(id as i32);
                }
                let trained = fill(&mut labels[at..end], IGNORE_INDEX);
                overlay_trained(
                    piece.row.ids,
                    piece.row.spans,
                    piece.window.clone(),
                    trained,
                );
                if let Some((positions, examples)) = packing.as_mut() {
                    if let Some(first) = trained.first_mut() {
                        *first = IGNORE_INDEX;
                    }
                    for (cell, position) in positions[at..end].iter_mut().zip(0..) {
                        cell.write(position);
                    }
                    fill(&mut examples[at..end], piece.example as i32);
                }
                at = end;
            }
            fill(&mut input_ids[at..row_end], self.pad_id);
            fill(&mut labels[at..row_end], IGNORE_INDEX);
            if let Some((positions, examples)) = packing.as_mut() {
                fill(&mut positions[at..row_end], 0);
                fill(&mut examples[at..row_end], -1);
            }
        }
    }

    /// The batch in vectors.
    pub fn collate(&self) -> Batch {
        let cells = self.cells();
        let mut input_ids = Vec::with_capacity(cells);
        let mut labels = Vec::with_capacity(cells);
        let mut positions = Vec::with_capacity(if self.packed { cells } else { 0 });
        let mut examples = Vec::with_capacity(if self.packed { cells } else { 0 });
        self.write(Cells {
            input_ids: &mut input_ids.spare_capacity_mut()[..cells],
            labels: &mut labels.spare_capacity_mut()[..cells],
            packing: self.packed.then(|| {
                (
                    &mut positions.spare_capacity_mut()[..cells],
                    &mut examples.spare_capacity_mut()[..cells],
                )
            }),
        });
        // SAFETY: `write` wrote the first `cells` cells of every vector it was given (it panics
        // otherwise, before this point), and the packing vectors were given iff `packed`.
        unsafe {
            input_ids.set_len(cells);
            labels.set_len(cells);
            if self.packed {
                positions.set_len(cells);
                examples.set_len(cells);
            }
        }
        Batch {
            input_ids,
            labels,
            rows: self.rows(),
            seq_len: self.seq_len,
            distill: self.distill(),
            packing: self.packed.then_some(Packing {
                position_ids: positions,
                example_ids: examples,
            }),
        }
    }

    /// The distillation targets of the batch, if any row carries some.
    pub fn distill(&self) -> Option<BatchDistill> {
        collate_distill(&self.batch_rows().collect::<Vec<_>>(), self.seq_len)
    }
}

fn piece<'a>(row: RowView<'a>, example: u32, padding: &Padding) -> Piece<'a> {
    Piece {
        row,
        window: kept_window(row.ids.len(), padding.max_seq_len, padding.truncation),
        example,
    }
}

/// Writes `value` into every cell and gives the cells back as written.
fn fill(cells: &mut [MaybeUninit<i32>], value: i32) -> &mut [i32] {
    for cell in cells.iter_mut() {
        cell.write(value);
    }
    // SAFETY: every cell was written just above, and `MaybeUninit<i32>` has the layout of
    // `i32`.
    unsafe { &mut *(cells as *mut [MaybeUninit<i32>] as *mut [i32]) }
}

/// One example per batch row: the reference's collation (with `multiple` 1).
pub fn collate(rows: &[RowView], padding: &Padding) -> Batch {
    Layout::single(rows, padding).collate()
}

/// `Layout::packed`, collated into vectors.
pub fn collate_packed(rows: &[Vec<(u32, RowView)>], padding: &Padding) -> Batch {
    Layout::packed(rows, padding).collate()
}

fn collate_distill(rows: &[&[Piece]], seq_len: usize) -> Option<BatchDistill> {
    let k = rows
        .iter()
        .flat_map(|pieces| pieces.iter())
        .filter_map(|p| p.row.distill())
        .map(|d| d.k)
        .max()?;
    let mut ids = vec![MISSING_ID; rows.len() * seq_len * k];
    let mut logprobs = vec![MISSING_LOGPROB; rows.len() * seq_len * k];
    for (b, pieces) in rows.iter().enumerate() {
        let mut slot = b * seq_len;
        for piece in pieces.iter() {
            let start = slot;
            slot += piece.window.len();
            let Some(d) = piece.row.distill() else {
                continue;
            };
            for (offset, pos) in piece.window.clone().enumerate() {
                let src = pos * d.k..(pos + 1) * d.k;
                let dst = (start + offset) * k;
                ids[dst..dst + d.k].copy_from_slice(&d.ids[src.clone()]);
                logprobs[dst..dst + d.k].copy_from_slice(&d.logprobs[src]);
            }
        }
    }
    Some(BatchDistill { k, ids, logprobs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask::spans_from;
    use crate::rows::{RowExtra, TokenizedRow};

    fn pad(max_seq_len: usize, pad_id: u32, truncation: Truncation) -> Padding {
        Padding {
            max_seq_len,
            multiple: 1,
            pad_id,
            truncation,
        }
    }

    fn row(ids: &[u32], trained_from: usize) -> TokenizedRow {
        TokenizedRow::new(
            ids.into(),
            spans_from(trained_from, ids.len()).into(),
            None,
            Default::default(),
        )
    }

    #[test]
    fn distill_targets_follow_truncation_and_padding() {
        use crate::tools::distill::RowDistill;
        let mut a = row(&[1, 2, 3], 0);
        a.extra = Some(Box::new(RowExtra {
            distill: Some(RowDistill {
                k: 1,
                ids: vec![10, 20, 30].into(),
                logprobs: vec![-1.0, -2.0, -3.0].into(),
            }),
            ..Default::default()
        }));
        let b = row(&[7], 0);
        let batch = collate(&[a.view(), b.view()], &pad(2, 0, Truncation::KeepEnd));
        let d = batch.distill.unwrap();
        assert_eq!(d.k, 1);
        assert_eq!(d.ids, vec![20, 30, -1, -1]);
        assert_eq!(
            d.logprobs,
            vec![-2.0, -3.0, f32::NEG_INFINITY, f32::NEG_INFINITY]
        );
        assert!(collate(&[b.view()], &pad(2, 0, Truncation::KeepEnd))
            .distill
            .is_none());
    }

    #[test]
    fn pads_right_and_truncates_left() {
        let a = row(&[1, 2, 3, 4, 5], 3);
        let b = row(&[7, 8], 0);
        let batch = collate(&[a.view(), b.view()], &pad(4, 0, Truncation::KeepEnd));
        assert_eq!((batch.rows, batch.seq_len), (2, 4));
        assert_eq!(batch.input_ids, vec![2, 3, 4, 5, 7, 8, 0, 0]);
        assert_eq!(batch.labels, vec![-100, -100, 4, 5, 7, 8, -100, -100]);
    }

    #[test]
    fn keep_start_cuts_the_end() {
        let a = row(&[1, 2, 3, 4, 5], 3);
        let batch = collate(&[a.view()], &pad(4, 0, Truncation::KeepStart));
        assert_eq!(batch.input_ids, vec![1, 2, 3, 4]);
        assert_eq!(batch.labels, vec![-100, -100, -100, 4]);
    }

    #[test]
    fn seq_len_is_the_longest_row_when_it_fits() {
        let a = row(&[1, 2], 0);
        let batch = collate(&[a.view()], &pad(2048, 9, Truncation::KeepEnd));
        assert_eq!(batch.seq_len, 2);
        assert_eq!(batch.labels, vec![1, 2]);
    }

    #[test]
    fn padded_length_rounds_up_without_keeping_more_tokens() {
        let a = row(&[1, 2, 3, 4, 5], 0);
        let padding = Padding {
            multiple: 8,
            ..pad(4, 0, Truncation::KeepEnd)
        };
        let batch = collate(&[a.view()], &padding);
        assert_eq!(batch.seq_len, 8);
        assert_eq!(batch.input_ids, vec![2, 3, 4, 5, 0, 0, 0, 0]);
        assert_eq!(batch.labels, vec![2, 3, 4, 5, -100, -100, -100, -100]);
        assert!(batch.packing.is_none());
    }

    #[test]
    fn packed_rows_restart_positions_and_mask_each_first_token() {
        let a = row(&[1, 2, 3], 0);
        let b = row(&[4, 5, 6, 7, 8], 2);
        let c = row(&[9], 0);
        let rows = vec![vec![(10, a.view()), (11, b.view())], vec![(12, c.view())]];
        let batch = collate_packed(&rows, &pad(4, 0, Truncation::KeepEnd));
        assert_eq!((batch.rows, batch.seq_len), (2, 7));
        assert_eq!(
            batch.input_ids,
            vec![1, 2, 3, 5, 6, 7, 8, 9, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            batch.labels,
            vec![-100, 2, 3, -100, 6, 7, 8, -100, -100, -100, -100, -100, -100, -100]
        );
        let p = batch.packing.unwrap();
        assert_eq!(
            p.position_ids,
            vec![0, 1, 2, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            p.example_ids,
            vec![10, 10, 10, 11, 11, 11, 11, 12, -1, -1, -1, -1, -1, -1]
        );
    }

    #[test]
    fn packed_distill_targets_follow_each_example() {
        use crate::tools::distill::RowDistill;
        let mut a = row(&[1, 2], 0);
        a.extra = Some(Box::new(RowExtra {
            distill: Some(RowDistill {
                k: 1,
                ids: vec![10, 20].into(),
                logprobs: vec![-1.0, -2.0].into(),
            }),
            ..Default::default()
        }));
        let b = row(&[7], 0);
        let rows = vec![vec![(0, b.view()), (1, a.view())]];
        let d = collate_packed(&rows, &pad(8, 0, Truncation::KeepEnd))
            .distill
            .unwrap();
        assert_eq!(d.ids, vec![-1, 10, 20]);
    }

    /// The batch as the reference describes it, cell by cell, from the rows alone.
    fn expected(rows: &[Vec<(u32, TokenizedRow)>], padding: &Padding, packed: bool) -> Batch {
        let kept: Vec<Vec<(u32, &TokenizedRow, Range<usize>)>> = rows
            .iter()
            .map(|pieces| {
                pieces
                    .iter()
                    .map(|(e, r)| {
                        let w = kept_window(r.ids.len(), padding.max_seq_len, padding.truncation);
                        (*e, r, w)
                    })
                    .collect()
            })
            .collect();
        let longest = kept
            .iter()
            .map(|p| p.iter().map(|(_, _, w)| w.len()).sum::<usize>())
            .max()
            .unwrap_or(0);
        let seq_len = padded_width(longest, padding.multiple);
        let (mut ids, mut labels, mut positions, mut examples) = (vec![], vec![], vec![], vec![]);
        for pieces in &kept {
            let mut used = 0;
            for (e, r, w) in pieces {
                for (k, pos) in w.clone().enumerate() {
                    let trained = r
                        .spans
                        .iter()
                        .any(|s| (s.start as usize..s.end as usize).contains(&pos));
                    ids.push(r.ids[pos] as i32);
                    let first = packed && k == 0;
                    labels.push(if trained && !first {
                        r.ids[pos] as i32
                    } else {
                        IGNORE_INDEX
                    });
                    positions.push(k as i32);
                    examples.push(*e as i32);
                }
                used += w.len();
            }
            for _ in used..seq_len {
                ids.push(padding.pad_id as i32);
                labels.push(IGNORE_INDEX);
                positions.push(0);
                examples.push(-1);
            }
        }
        Batch {
            input_ids: ids,
            labels,
            rows: rows.len(),
            seq_len,
            distill: None,
            packing: packed.then_some(Packing {
                position_ids: positions,
                example_ids: examples,
            }),
        }
    }

    /// `Layout::write` into arrays that start as `sentinel` everywhere.
    fn written(layout: &Layout, sentinel: i32) -> [Vec<i32>; 4] {
        let cells = layout.cells();
        let mut arrays: [Vec<MaybeUninit<i32>>; 4] =
            std::array::from_fn(|_| vec![MaybeUninit::new(sentinel); cells]);
        let [a, b, c, d] = &mut arrays;
        layout.write(Cells {
            input_ids: a,
            labels: b,
            packing: layout.is_packed().then_some((&mut c[..], &mut d[..])),
        });
        // SAFETY: every cell was initialized with the sentinel before `write`.
        arrays.map(|v| v.into_iter().map(|c| unsafe { c.assume_init() }).collect())
    }

    #[test]
    fn every_cell_is_written_once_as_the_reference_lays_it_out() {
        let mut rng = crate::test_support::Rng(0xba7c_4e55);
        for case in 0..3_000 {
            let packed = case % 2 == 1;
            let padding = Padding {
                max_seq_len: 1 + rng.below(12),
                multiple: 1 + rng.below(4),
                pad_id: rng.below(50) as u32,
                truncation: if rng.chance(50) {
                    Truncation::KeepEnd
                } else {
                    Truncation::KeepStart
                },
            };
            let mut example = 0;
            let rows: Vec<Vec<(u32, TokenizedRow)>> = (0..1 + rng.below(4))
                .map(|_| {
                    (0..if packed { 1 + rng.below(3) } else { 1 })
                        .map(|_| {
                            let ids: Vec<u32> = (0..rng.below(16))
                                .map(|_| 100 + rng.below(900) as u32)
                                .collect();
                            let flags: Vec<bool> = ids.iter().map(|_| rng.chance(40)).collect();
                            example += 1;
                            let row = TokenizedRow::new(
                                ids.into(),
                                crate::mask::spans_from_flags(&flags).into(),
                                None,
                                Default::default(),
                            );
                            (example, row)
                        })
                        .collect()
                })
                .collect();
            let views: Vec<Vec<(u32, RowView)>> = rows
                .iter()
                .map(|p| p.iter().map(|(e, r)| (*e, r.view())).collect())
                .collect();
            let layout = if packed {
                Layout::packed(&views, &padding)
            } else {
                let single: Vec<RowView> = views.iter().map(|p| p[0].1).collect();
                Layout::single(&single, &padding)
            };
            let want = expected(&rows, &padding, packed);
            assert_eq!((layout.rows(), layout.seq_len()), (want.rows, want.seq_len));
            let used = if packed { 4 } else { 2 };
            let low = written(&layout, i32::MIN);
            assert_eq!(
                low[..used],
                written(&layout, i32::MAX)[..used],
                "a cell was left unwritten"
            );
            assert_eq!(low[0], want.input_ids, "case {case}");
            assert_eq!(low[1], want.labels, "case {case}");
            if let Some(p) = want.packing {
                assert_eq!(low[2], p.position_ids, "case {case}");
                assert_eq!(low[3], p.example_ids, "case {case}");
            }
            let batch = layout.collate();
            assert_eq!(batch.input_ids, low[0]);
            assert_eq!(batch.labels, low[1]);
        }
    }
}
