//! What a dataset says about itself, as JS objects: `report()` and `batchingStats()`.

use napi::Env;
use napi_derive::napi;

use crate::batch::plan::{Batching, PlanCost};
use crate::dataset::report::DatasetReport;
use crate::error::SftResult;
use crate::mask::silent_loss::LossKind;
use crate::rows::DropReason;

/// What one epoch costs the trainer under one batching strategy.
#[napi(object, js_name = "BatchingStats")]
pub struct BatchingStatsJs {
    #[napi(ts_type = "'reference' | 'lengthGrouped' | 'tokenBudget' | 'packed'")]
    pub batching: String,
    /// Batches per epoch (all ranks together).
    pub batches: u32,
    /// Rows of all batches (packed rows under `'packed'`).
    pub rows: u32,
    /// Tokens of the examples after truncation.
    pub tokens: f64,
    /// Tokens the trainer computes on: rows x padded length, summed over batches.
    pub computed_tokens: f64,
    /// `(computedTokens - tokens) / computedTokens`.
    pub padding_share: f64,
}

/// What `report()` says about one example.
#[napi(object)]
pub struct ExampleReport {
    /// Tokens of the whole example.
    pub tokens: u32,
    /// Tokens a batch holds of it, after truncation; 0 when dropped.
    pub kept_tokens: u32,
    /// Trained tokens among the kept ones; 0 when dropped.
    pub trained_tokens: u32,
    /// Longer than `maxSeqLength` (cut, or turns removed).
    pub truncated: bool,
    /// Why the row takes no part in training, if it does not (`'otherPart'`: the example is in
    /// the other part of a `split`).
    #[napi(
        ts_type = "'tooLong' | 'untrainable' | 'unrenderable' | 'duplicate' | 'otherPart' | null"
    )]
    pub dropped: Option<String>,
    /// Messages removed by `truncation: 'turns'`.
    pub messages_dropped: u32,
    /// Reference: 1 when the prompt's tokens are not a prefix of the full sequence. Spans:
    /// trained assistant turns whose generation prompt is not a prefix of the full render.
    pub prefix_mismatches: u32,
    /// Indices of trained messages whose content was not found in the render or whose trained
    /// tokens do not decode to it (spans only).
    pub content_mismatches: Vec<u32>,
    /// Trained tokens that also cover untrained text: a token is trained when any of its
    /// characters is.
    pub straddling_tokens: u32,
    /// Kept end-of-turn tokens (the one the template closes turns with) that are trained.
    pub turn_end_tokens_trained: u32,
    /// Kept end-of-turn tokens.
    pub turn_end_tokens: u32,
    /// BOS tokens at the start of the row (more than one: the template and the text both add it).
    pub bos_tokens: u32,
    /// Codes of the silent losses found in the example: `CONTENT_NOT_RENDERED`,
    /// `TOOLS_IGNORED`, `CONTENT_DROPPED_BY_TEMPLATE`, `DUPLICATE_EXAMPLE`,
    /// `CONTROL_TOKEN_IN_CONTENT`, `TOOL_DATA_NOT_RENDERED`.
    pub silent_losses: Vec<String>,
    /// The error of the chat template (or the tokenizer) on this example, when it fails: the
    /// example has no row (left out with `dropUnrenderable`; otherwise its batch fails).
    pub render_error: Option<String>,
}

/// `report()` summed over all examples.
#[napi(object)]
pub struct ReportTotals {
    pub examples: u32,
    pub tokens: f64,
    pub kept_tokens: f64,
    pub trained_tokens: f64,
    pub truncated: u32,
    pub dropped_too_long: u32,
    pub dropped_untrainable: u32,
    /// Examples the chat template (or the tokenizer) fails on.
    pub unrenderable: u32,
    /// Copies of earlier examples left out (`dropDuplicates`).
    pub dropped_duplicates: u32,
    pub prefix_mismatches: u32,
    /// Examples with at least one content mismatch.
    pub content_mismatch_examples: u32,
    pub straddling_tokens: f64,
    pub turn_end_tokens_trained: f64,
    pub turn_end_tokens: f64,
    /// Examples starting with more than one BOS token.
    pub multiple_bos: u32,
    /// Examples per silent-loss code (codes with none are left out).
    pub silent_losses: std::collections::HashMap<String, u32>,
}

/// One source of a dataset loaded from several files, in `report()`.
#[napi(object, js_name = "SFTSourceReport")]
pub struct SourceReportJs {
    pub path: String,
    pub weight: f64,
    #[napi(ts_type = "'prompt-completion' | 'conversation'")]
    pub format: String,
    /// Examples loaded from the file; in `examples`, they are `start` to `start + examples - 1`.
    pub examples: u32,
    pub start: u32,
    /// Its examples that take part in training (in this part, for a part of `split`).
    pub rows: u32,
    /// Appearances of its examples in one epoch.
    pub per_epoch: u32,
    /// Kept and trained tokens of its rows, each row counted once.
    pub kept_tokens: f64,
    pub trained_tokens: f64,
}

#[napi(object, js_name = "DatasetReport")]
pub struct DatasetReportJs {
    /// One entry per example given, dropped ones included, in input order.
    pub examples: Vec<ExampleReport>,
    pub totals: ReportTotals,
    /// The end-of-turn token learned from the chat template, if any.
    pub turn_end_token: Option<String>,
    /// *(addition)* For a dataset loaded from several files: each source's counts, in the
    /// order given.
    pub sources: Option<Vec<SourceReportJs>>,
}

pub(crate) fn report_to_js(_: &Env, r: DatasetReport) -> SftResult<DatasetReportJs> {
    let t = r.totals;
    Ok(DatasetReportJs {
        examples: r
            .examples
            .into_iter()
            .map(|e| ExampleReport {
                tokens: e.tokens,
                kept_tokens: e.kept_tokens,
                trained_tokens: e.trained_tokens,
                truncated: e.truncated,
                dropped: e.dropped.map(|d| {
                    match d {
                        DropReason::TooLong => "tooLong",
                        DropReason::Untrainable => "untrainable",
                        DropReason::Unrenderable => "unrenderable",
                        DropReason::Duplicate => "duplicate",
                        DropReason::OtherPart => "otherPart",
                    }
                    .to_string()
                }),
                messages_dropped: e.messages_dropped,
                prefix_mismatches: e.prefix_mismatches,
                content_mismatches: e.content_mismatches,
                straddling_tokens: e.straddling_tokens,
                turn_end_tokens_trained: e.turn_end_tokens_trained,
                turn_end_tokens: e.turn_end_tokens,
                bos_tokens: e.bos_tokens,
                silent_losses: LossKind::of_bits(e.losses)
                    .map(|k| k.code().to_string())
                    .collect(),
                render_error: e.render_error,
            })
            .collect(),
        totals: ReportTotals {
            examples: t.examples,
            tokens: t.tokens as f64,
            kept_tokens: t.kept_tokens as f64,
            trained_tokens: t.trained_tokens as f64,
            truncated: t.truncated,
            dropped_too_long: t.dropped_too_long,
            dropped_untrainable: t.dropped_untrainable,
            unrenderable: t.unrenderable,
            dropped_duplicates: t.dropped_duplicates,
            prefix_mismatches: t.prefix_mismatches,
            content_mismatch_examples: t.content_mismatch_examples,
            straddling_tokens: t.straddling_tokens as f64,
            turn_end_tokens_trained: t.turn_end_tokens_trained as f64,
            turn_end_tokens: t.turn_end_tokens as f64,
            multiple_bos: t.multiple_bos,
            silent_losses: LossKind::ALL
                .iter()
                .zip(t.losses)
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (k.code().to_string(), n))
                .collect(),
        },
        turn_end_token: r.turn_end_token,
        sources: (!r.sources.is_empty()).then(|| {
            r.sources
                .into_iter()
                .map(|s| SourceReportJs {
                    path: s.path,
                    weight: s.weight,
                    format: s.format.name().to_string(),
                    examples: s.counts.examples,
                    start: s.start,
                    rows: s.counts.rows,
                    per_epoch: s.counts.per_epoch as u32,
                    kept_tokens: s.counts.kept_tokens as f64,
                    trained_tokens: s.counts.trained_tokens as f64,
                })
                .collect()
        }),
    })
}

pub(crate) fn stats_to_js(costs: Vec<(Batching, PlanCost)>) -> Vec<BatchingStatsJs> {
    costs
        .into_iter()
        .map(|(batching, c)| BatchingStatsJs {
            batching: batching.name().to_string(),
            batches: c.batches as u32,
            rows: c.rows as u32,
            tokens: c.tokens as f64,
            computed_tokens: c.computed_tokens as f64,
            padding_share: c.padding_share(),
        })
        .collect()
}
