//! `SFTDataset.report()`: what each row holds after masking and truncation, and the totals.

use crate::mask::trained_count;
use crate::mask::truncation::{kept_window, Truncation};
use crate::rows::{DropReason, RowView};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExampleReport {
    /// Tokens of the whole example.
    pub tokens: u32,
    /// Tokens a batch holds of it (after truncation); 0 when dropped.
    pub kept_tokens: u32,
    /// Trained tokens among the kept ones; 0 when dropped.
    pub trained_tokens: u32,
    /// Trained tokens of the whole row, before truncation cuts it.
    pub untruncated_trained_tokens: u32,
    pub truncated: bool,
    pub dropped: Option<DropReason>,
    pub messages_dropped: u32,
    pub prefix_mismatches: u32,
    pub content_mismatches: Vec<u32>,
    pub straddling_tokens: u32,
    /// Kept trained tokens that are the template's end-of-turn token.
    pub turn_end_tokens_trained: u32,
    /// Kept end-of-turn tokens, trained or not.
    pub turn_end_tokens: u32,
    /// Leading tokens equal to the BOS token (more than one: the text and the tokenizer both
    /// added it).
    pub bos_tokens: u32,
    /// Silent-loss classes found in the example (`silent_loss::LossKind` bits).
    pub losses: u8,
    /// Why the template (or the tokenizer) failed on the example, when it did.
    pub render_error: Option<String>,
}

impl ExampleReport {
    /// An example whose row failed to build: nothing in batches (dropped with
    /// `dropUnrenderable`; otherwise its batch fails).
    pub fn unrenderable(error: &crate::error::SftError, dropped: bool) -> Self {
        ExampleReport {
            dropped: dropped.then_some(DropReason::Unrenderable),
            render_error: Some(error.message.clone()),
            ..Default::default()
        }
    }
}

pub fn example_report(
    row: RowView,
    max_seq_length: usize,
    truncation: Truncation,
    turn_end_id: Option<u32>,
    bos_id: Option<u32>,
) -> ExampleReport {
    let stats = row.stats();
    let window = if stats.dropped.is_some() {
        0..0
    } else {
        kept_window(row.ids.len(), max_seq_length, truncation)
    };
    let (mut turn_ends, mut turn_ends_trained) = (0, 0);
    if let Some(end_id) = turn_end_id {
        for pos in window.clone().filter(|&p| row.ids[p] == end_id) {
            turn_ends += 1;
            if row.spans.iter().any(|s| s.contains(&(pos as u32))) {
                turn_ends_trained += 1;
            }
        }
    }
    ExampleReport {
        tokens: row.ids.len() as u32 + stats.tokens_cut,
        kept_tokens: window.len() as u32,
        trained_tokens: trained_count(row.spans, window.clone()) as u32,
        untruncated_trained_tokens: trained_count(row.spans, 0..row.ids.len()) as u32,
        truncated: stats.messages_dropped > 0 || row.ids.len() > max_seq_length,
        dropped: stats.dropped,
        messages_dropped: stats.messages_dropped,
        prefix_mismatches: stats.prefix_mismatches,
        content_mismatches: stats.content_mismatches.clone(),
        straddling_tokens: stats.straddling,
        turn_end_tokens_trained: turn_ends_trained,
        turn_end_tokens: turn_ends,
        bos_tokens: bos_id.map_or(0, |b| row.ids.iter().take_while(|&&id| id == b).count()) as u32,
        losses: stats.losses,
        render_error: None,
    }
}

/// Sums over all examples (of a `split` part: over its own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportTotals {
    pub examples: u32,
    pub tokens: u64,
    pub kept_tokens: u64,
    pub trained_tokens: u64,
    pub truncated: u32,
    pub dropped_too_long: u32,
    pub dropped_untrainable: u32,
    /// Examples the template fails on (left out with `dropUnrenderable`).
    pub unrenderable: u32,
    /// Copies of earlier examples left out (`dropDuplicates`).
    pub dropped_duplicates: u32,
    pub prefix_mismatches: u32,
    /// Examples with at least one content mismatch.
    pub content_mismatch_examples: u32,
    pub straddling_tokens: u64,
    pub turn_end_tokens_trained: u64,
    pub turn_end_tokens: u64,
    /// Examples that start with more than one BOS token.
    pub multiple_bos: u32,
    /// Examples with each silent-loss class, indexed as `silent_loss::LossKind::ALL`.
    pub losses: [u32; crate::mask::silent_loss::LossKind::ALL.len()],
}

#[derive(Debug, Clone, PartialEq)]
pub struct DatasetReport {
    pub examples: Vec<ExampleReport>,
    pub totals: ReportTotals,
    /// The end-of-turn token learned from the chat template, if any.
    pub turn_end_token: Option<String>,
    /// For a mix of several files: each source's counts (empty otherwise).
    pub sources: Vec<crate::dataset::mixture::SourceReport>,
}

impl DatasetReport {
    pub fn new(examples: Vec<ExampleReport>, turn_end_token: Option<String>) -> Self {
        let mut t = ReportTotals::default();
        for e in examples
            .iter()
            .filter(|e| e.dropped != Some(DropReason::OtherPart))
        {
            t.examples += 1;
            t.tokens += e.tokens as u64;
            t.kept_tokens += e.kept_tokens as u64;
            t.trained_tokens += e.trained_tokens as u64;
            t.truncated += e.truncated as u32;
            t.dropped_too_long += (e.dropped == Some(DropReason::TooLong)) as u32;
            t.dropped_untrainable += (e.dropped == Some(DropReason::Untrainable)) as u32;
            t.unrenderable += e.render_error.is_some() as u32;
            t.dropped_duplicates += (e.dropped == Some(DropReason::Duplicate)) as u32;
            t.prefix_mismatches += e.prefix_mismatches;
            t.content_mismatch_examples += !e.content_mismatches.is_empty() as u32;
            t.straddling_tokens += e.straddling_tokens as u64;
            t.turn_end_tokens_trained += e.turn_end_tokens_trained as u64;
            t.turn_end_tokens += e.turn_end_tokens as u64;
            t.multiple_bos += (e.bos_tokens > 1) as u32;
            for (k, kind) in crate::mask::silent_loss::LossKind::ALL.iter().enumerate() {
                t.losses[k] += (e.losses & kind.bit() != 0) as u32;
            }
        }
        DatasetReport {
            examples,
            totals: t,
            turn_end_token,
            sources: Vec::new(),
        }
    }
}
