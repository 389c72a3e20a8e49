//! Padded batches: rows truncated to `maxSeqLength` (keeping their end, as the reference does, or
//! their start), padded on the right to the longest row with the pad id and `-100`.

use crate::distill::{MISSING_ID, MISSING_LOGPROB};
use crate::masking::{write_labels, IGNORE_INDEX};
use crate::row::RowView;

pub struct Batch {
    pub input_ids: Vec<i32>,
    pub labels: Vec<i32>,
    pub rows: usize,
    pub seq_len: usize,
    /// Present when any row carries distillation targets.
    pub distill: Option<BatchDistill>,
}

/// Distillation targets of a batch, `[rows, seq_len, k]`, truncated and padded like `input_ids`;
/// padding, and rows without targets, hold `MISSING_ID` / `MISSING_LOGPROB`.
pub struct BatchDistill {
    pub k: usize,
    pub ids: Vec<i32>,
    pub logprobs: Vec<f32>,
}

fn collate_distill(rows: &[RowView], seq_len: usize, mode: Truncation) -> Option<BatchDistill> {
    let k = rows.iter().filter_map(|r| r.distill()).map(|d| d.k).max()?;
    let mut ids = vec![MISSING_ID; rows.len() * seq_len * k];
    let mut logprobs = vec![MISSING_LOGPROB; rows.len() * seq_len * k];
    for (b, row) in rows.iter().enumerate() {
        let Some(d) = row.distill() else { continue };
        let window = kept_window(row.ids.len(), seq_len, mode);
        for (slot, pos) in window.enumerate() {
            let src = pos * d.k..(pos + 1) * d.k;
            let dst = (b * seq_len + slot) * k;
            ids[dst..dst + d.k].copy_from_slice(&d.ids[src.clone()]);
            logprobs[dst..dst + d.k].copy_from_slice(&d.logprobs[src]);
        }
    }
    Some(BatchDistill { k, ids, logprobs })
}

/// How a row longer than `maxSeqLength` is shortened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Truncation {
    /// Keep the last tokens (the reference).
    #[default]
    KeepEnd,
    /// Keep the first tokens (TRL).
    KeepStart,
    /// Drop whole oldest turns before tokenizing (see `row`); a row that still does not fit is
    /// dropped, so collation never cuts one.
    Turns,
}

/// The part of a row of `len` tokens that survives truncation to `max_len`.
pub fn kept_window(len: usize, max_len: usize, mode: Truncation) -> std::ops::Range<usize> {
    match mode {
        Truncation::KeepStart => 0..len.min(max_len),
        Truncation::KeepEnd | Truncation::Turns => len.saturating_sub(max_len)..len,
    }
}

pub fn collate(rows: &[RowView], max_seq_len: usize, pad_id: u32, mode: Truncation) -> Batch {
    let longest = rows.iter().map(|r| r.ids.len()).max().unwrap_or(0);
    let seq_len = longest.min(max_seq_len);
    let mut input_ids = vec![pad_id as i32; rows.len() * seq_len];
    let mut labels = vec![IGNORE_INDEX; rows.len() * seq_len];
    for (b, row) in rows.iter().enumerate() {
        let window = kept_window(row.ids.len(), seq_len, mode);
        let kept = window.len();
        let out = b * seq_len..b * seq_len + kept;
        for (dst, &id) in input_ids[out.clone()]
            .iter_mut()
            .zip(&row.ids[window.clone()])
        {
            *dst = id as i32;
        }
        write_labels(row.ids, row.spans, window, &mut labels[out]);
    }
    Batch {
        input_ids,
        labels,
        rows: rows.len(),
        seq_len,
        distill: collate_distill(rows, seq_len, mode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::masking::spans_from;
    use crate::row::{RowExtra, TokenizedRow};

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
        let batch = collate(&[a.view(), b.view()], 2, 0, Truncation::KeepEnd);
        let d = batch.distill.unwrap();
        assert_eq!(d.k, 1);
        assert_eq!(d.ids, vec![20, 30, -1, -1]);
        assert_eq!(
            d.logprobs,
            vec![-2.0, -3.0, f32::NEG_INFINITY, f32::NEG_INFINITY]
        );
        assert!(collate(&[b.view()], 2, 0, Truncation::KeepEnd)
            .distill
            .is_none());
    }

    #[test]
    fn pads_right_and_truncates_left() {
        let a = row(&[1, 2, 3, 4, 5], 3);
        let b = row(&[7, 8], 0);
        let batch = collate(&[a.view(), b.view()], 4, 0, Truncation::KeepEnd);
        assert_eq!((batch.rows, batch.seq_len), (2, 4));
        assert_eq!(batch.input_ids, vec![2, 3, 4, 5, 7, 8, 0, 0]);
        assert_eq!(batch.labels, vec![-100, -100, 4, 5, 7, 8, -100, -100]);
    }

    #[test]
    fn keep_start_cuts_the_end() {
        let a = row(&[1, 2, 3, 4, 5], 3);
        let batch = collate(&[a.view()], 4, 0, Truncation::KeepStart);
        assert_eq!(batch.input_ids, vec![1, 2, 3, 4]);
        assert_eq!(batch.labels, vec![-100, -100, -100, 4]);
    }

    #[test]
    fn seq_len_is_the_longest_row_when_it_fits() {
        let a = row(&[1, 2], 0);
        let batch = collate(&[a.view()], 2048, 9, Truncation::KeepEnd);
        assert_eq!(batch.seq_len, 2);
        assert_eq!(batch.labels, vec![1, 2]);
    }
}
