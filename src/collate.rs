//! Padded batches: rows truncated to `maxSeqLength` (keeping their end, as the reference does, or
//! their start), laid out one row per batch row or several packed into one, padded on the right
//! with the pad id and `-100` to the longest row, rounded up to `padToMultipleOf`.

use std::ops::Range;

use crate::distill::{MISSING_ID, MISSING_LOGPROB};
use crate::masking::{overlay_trained, IGNORE_INDEX};
use crate::row::RowView;
use crate::truncation::{kept_window, Truncation};

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

/// One example per batch row: the reference's collation (with `multiple` 1).
pub fn collate(rows: &[RowView], padding: &Padding) -> Batch {
    let pieces: Vec<Piece> = rows
        .iter()
        .map(|row| Piece {
            row: *row,
            window: kept_window(row.ids.len(), padding.max_seq_len, padding.truncation),
            example: 0,
        })
        .collect();
    let layout: Vec<&[Piece]> = pieces.chunks(1).collect();
    lay_out(&layout, padding, false)
}

/// Several examples per batch row, each truncated on its own: `rows[b]` lists the examples
/// (index and row) packed into batch row `b`, in order. The first token of every example is
/// untrained, so that a shifted loss never predicts an example from the one before it.
pub fn collate_packed(rows: &[Vec<(u32, RowView)>], padding: &Padding) -> Batch {
    let pieces: Vec<Vec<Piece>> = rows
        .iter()
        .map(|examples| {
            examples
                .iter()
                .map(|&(example, row)| Piece {
                    row,
                    window: kept_window(row.ids.len(), padding.max_seq_len, padding.truncation),
                    example,
                })
                .collect()
        })
        .collect();
    let layout: Vec<&[Piece]> = pieces.iter().map(Vec::as_slice).collect();
    lay_out(&layout, padding, true)
}

fn lay_out(rows: &[&[Piece]], padding: &Padding, packed: bool) -> Batch {
    let longest = rows
        .iter()
        .map(|pieces| pieces.iter().map(|p| p.window.len()).sum::<usize>())
        .max()
        .unwrap_or(0);
    let seq_len = padded_width(longest, padding.multiple);
    let cells = rows.len() * seq_len;
    // Every cell is written once: each piece's tokens, then the row's padding.
    let mut input_ids = Vec::with_capacity(cells);
    let mut labels = Vec::with_capacity(cells);
    let mut packing = packed.then(|| Packing {
        position_ids: Vec::with_capacity(cells),
        example_ids: Vec::with_capacity(cells),
    });
    for (b, pieces) in rows.iter().enumerate() {
        for piece in pieces.iter() {
            let start = input_ids.len();
            let tokens = &piece.row.ids[piece.window.clone()];
            input_ids.extend(tokens.iter().map(|&id| id as i32));
            labels.resize(input_ids.len(), IGNORE_INDEX);
            overlay_trained(
                piece.row.ids,
                piece.row.spans,
                piece.window.clone(),
                &mut labels[start..],
            );
            if let Some(p) = packing.as_mut() {
                if !tokens.is_empty() {
                    labels[start] = IGNORE_INDEX;
                }
                p.position_ids.extend(0..tokens.len() as i32);
                p.example_ids.resize(input_ids.len(), piece.example as i32);
            }
        }
        let row_end = (b + 1) * seq_len;
        input_ids.resize(row_end, padding.pad_id as i32);
        labels.resize(row_end, IGNORE_INDEX);
        if let Some(p) = packing.as_mut() {
            p.position_ids.resize(row_end, 0);
            p.example_ids.resize(row_end, -1);
        }
    }
    Batch {
        input_ids,
        labels,
        rows: rows.len(),
        seq_len,
        distill: collate_distill(rows, seq_len),
        packing,
    }
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
    use crate::masking::spans_from;
    use crate::row::{RowExtra, TokenizedRow};

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
        use crate::distill::RowDistill;
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
        use crate::distill::RowDistill;
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
}
