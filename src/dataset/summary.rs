//! `SFTDataset.summary()`: the whole dataset in figures, for the data report (`sft-dataset
//! report`) and for CI checks of a data file against thresholds. Everything is derived from
//! what the library already says (`report()`, `batchingStats()`, the silent-loss classes), plus
//! a breakdown of tokens by what they belong to (system, user, assistant, reasoning, tool
//! calls, tool results, markup), measured on a sample of examples rendered again, and the line
//! or row of the examples the findings list, read back from the data file.

use std::collections::BTreeSet;
use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value as Json;

use crate::dataset::read_back::read_back;
use crate::dataset::report::ExampleReport;
use crate::dataset::{row_settings, Dataset};
use crate::error::{Location, SftError, SftResult};
use crate::example::{Format, SftExample};
use crate::mask::silent_loss::LossKind;
use crate::mask::truncation::kept_window;
use crate::render::RenderAs;
use crate::rows::attribution::{attribute, PartKind};
use crate::rows::DropReason;

/// What to summarize.
#[derive(Debug, Clone)]
pub struct SummaryOptions {
    /// Rows per batch for the batching figures.
    pub batch_size: usize,
    /// Examples rendered again for the breakdown by kind, evenly spaced; 0: all of them.
    pub sample: usize,
    /// Examples listed per finding.
    pub examples_per_finding: usize,
    /// Bins of the length histogram.
    pub length_bins: usize,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions {
            batch_size: 8,
            sample: 10_000,
            examples_per_finding: 5,
            length_bins: 24,
        }
    }
}

/// The data file a loaded dataset was read from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceFile {
    pub path: String,
    pub bytes: u64,
    /// blake3 of the file's bytes, hex.
    pub blake3: String,
    /// How the file stores its records: `jsonl`, `json`, `parquet`, with `+gzip` / `+zstd`.
    pub file_format: String,
}

/// One source of a dataset loaded from several files.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceFigures {
    #[serde(flatten)]
    pub file: SourceFile,
    pub weight: f64,
    pub format: &'static str,
    /// Examples read from the file.
    pub examples: u32,
    /// Its examples that take part in training.
    pub rows: u32,
    /// Appearances of its examples in one epoch.
    pub per_epoch: usize,
    /// Kept and trained tokens of its rows, each row counted once.
    pub kept_tokens: u64,
    pub trained_tokens: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    /// The first 16 hex digits of the blake3 of the chat template in use.
    pub fingerprint: String,
    /// The known template family it is (`qwen3`, `llama3`, ...), if any.
    pub family: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenFigures {
    /// Tokens of the whole examples, before truncation.
    pub total: u64,
    /// Tokens the batches hold, after truncation and drops.
    pub kept: u64,
    /// Trained tokens among the kept ones.
    pub trained: u64,
    pub min: u32,
    pub median: u32,
    pub p95: u32,
    pub max: u32,
    pub mean: f64,
}

/// `count` values in `from..=to`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bin<T> {
    pub from: T,
    pub to: T,
    pub count: u32,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lengths {
    pub max_seq_length: usize,
    /// Example lengths (whole, in tokens) in equal-width bins from 0.
    pub histogram: Vec<Bin<u32>>,
    /// Examples longer than `maxSeqLength` (cut, turns removed, or dropped).
    pub truncated: u32,
    pub truncated_share: f64,
    pub dropped_too_long: u32,
    /// Tokens truncation takes away (not in any batch).
    pub tokens_cut: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainedShare {
    /// Examples by the share of their kept tokens that is trained, in ten bins of 0.1 (the last
    /// one holds 1.0); dropped examples are left out.
    pub histogram: Vec<Bin<f64>>,
    /// Kept examples without a trained token.
    pub none_trained: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct PartFigures {
    pub kind: &'static str,
    /// Kept tokens of this kind.
    pub tokens: u64,
    /// Trained tokens among them.
    pub trained: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Kinds {
    /// Examples rendered again for the breakdown.
    pub sampled: u32,
    /// Sampled examples whose render gave their row's tokens (a row shortened by
    /// `truncation: 'turns'` or one that failed to locate its messages does not).
    pub attributed: u32,
    pub parts: Vec<PartFigures>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StrategyFigures {
    pub batching: &'static str,
    pub batches: usize,
    pub rows: usize,
    pub tokens: u64,
    pub computed_tokens: u64,
    pub padding_share: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchingFigures {
    pub batch_size: usize,
    pub max_batch_tokens: usize,
    pub pad_to_multiple_of: usize,
    /// The dataset's own strategy.
    pub chosen: &'static str,
    pub strategies: Vec<StrategyFigures>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// Training will not learn what the data says.
    Error,
    /// Something is lost or doubtful.
    Warning,
    /// Worth knowing.
    Info,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExampleRef {
    /// Index of the example (of its record) from 0.
    pub example: u32,
    /// Physical line (1-based) of a JSON or JSONL record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Row (from 0) of a Parquet record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row: Option<u64>,
    /// For a dataset loaded from several files: the file the line or row is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FindingFigures {
    pub code: &'static str,
    pub severity: Severity,
    /// Examples it applies to.
    pub count: u32,
    pub description: &'static str,
    /// The first few, in example order.
    pub examples: Vec<ExampleRef>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// `None` for a dataset made from examples in memory, or from several files.
    pub source: Option<SourceFile>,
    /// For a dataset loaded from several files: each source, its weight and its counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<SourceFigures>>,
    pub examples: u32,
    /// Examples that take part in training (not dropped).
    pub rows: u32,
    pub format: &'static str,
    pub template: Template,
    /// Every setting that shaped the rows and the batches, by option name.
    pub settings: Json,
    pub tokens: TokenFigures,
    pub lengths: Lengths,
    pub trained_share: TrainedShare,
    /// `None` for a dataset made from examples in memory (nothing to render again).
    pub kinds: Option<Kinds>,
    pub batching: BatchingFigures,
    pub findings: Vec<FindingFigures>,
}

/// One finding: which examples it applies to, from their reports.
struct Check {
    code: &'static str,
    severity: Severity,
    description: &'static str,
    applies: fn(&ExampleReport) -> bool,
}

const CHECKS: &[Check] = &[
    Check {
        code: "TRUNCATION_REMOVES_ALL_TRAINED",
        severity: Severity::Error,
        description: "Truncation cuts away every trained token: the example takes part in batches but carries no loss. Raise maxSeqLength, or use truncation 'turns' or 'keepStart'.",
        applies: |e| e.dropped.is_none() && e.trained_tokens == 0 && e.untruncated_trained_tokens > 0,
    },
    Check {
        code: "NO_TRAINED_TOKEN",
        severity: Severity::Warning,
        description: "The example has no trained token at all (nothing to learn from it): dropUntrainable skips such rows.",
        applies: |e| e.dropped.is_none() && e.untruncated_trained_tokens == 0,
    },
    Check {
        code: "DROPPED_TOO_LONG",
        severity: Severity::Warning,
        description: "Longer than maxSeqLength even after removing turns: left out of training.",
        applies: |e| e.dropped == Some(DropReason::TooLong),
    },
    Check {
        code: "RENDER_FAILED",
        severity: Severity::Error,
        description: "The chat template (or the tokenizer) fails on the example: it has no row. loadSFTDataset fails on it; dropUnrenderable leaves it out.",
        applies: |e| e.render_error.is_some(),
    },
    Check {
        code: "DROPPED_UNTRAINABLE",
        severity: Severity::Info,
        description: "No trained token after truncation: left out of training (dropUntrainable).",
        applies: |e| e.dropped == Some(DropReason::Untrainable),
    },
    Check {
        code: "TRUNCATED",
        severity: Severity::Info,
        description: "Longer than maxSeqLength: tokens or whole turns are cut.",
        applies: |e| e.truncated && e.dropped.is_none(),
    },
    Check {
        code: "TURN_END_NOT_TRAINED",
        severity: Severity::Warning,
        description: "The template's end-of-turn token never carries loss in this example, so the model does not learn to stop there (the reference masking's behaviour; the 'spans' masking trains it).",
        applies: |e| e.dropped.is_none() && e.turn_end_tokens > 0 && e.turn_end_tokens_trained == 0,
    },
    Check {
        code: "PREFIX_MISMATCH",
        severity: Severity::Warning,
        description: "The prompt rendered alone is not a prefix of the whole render, so the label boundary is a guess (the common prefix).",
        applies: |e| e.prefix_mismatches > 0,
    },
    Check {
        code: "CONTENT_MISMATCH",
        severity: Severity::Warning,
        description: "A trained message's content was not found in the render, or its trained tokens do not decode to it.",
        applies: |e| !e.content_mismatches.is_empty(),
    },
    Check {
        code: "MULTIPLE_BOS",
        severity: Severity::Warning,
        description: "The row starts with more than one BOS token: the text and the tokenizer both add it.",
        applies: |e| e.bos_tokens > 1,
    },
];

fn loss_check(kind: LossKind) -> (Severity, &'static str) {
    match kind {
        LossKind::ContentNotRendered => (
            Severity::Error,
            "A message's content does not appear in the render: the template drops it.",
        ),
        LossKind::ToolsIgnored => (
            Severity::Error,
            "The example has tools the template never sees (tools: 'ignore', the reference's behaviour).",
        ),
        LossKind::ContentDroppedByTemplate => (
            Severity::Warning,
            "The template leaves out part of a message (reasoning of earlier turns, or fields it does not print).",
        ),
        LossKind::DuplicateExample => (
            Severity::Info,
            "The same example appears earlier in the file.",
        ),
        LossKind::ControlTokenInContent => (
            Severity::Warning,
            "The data holds a control token's text, which is encoded as the control token (sanitizeControlTokens encodes it as text).",
        ),
        LossKind::ToolDataNotRendered => (
            Severity::Error,
            "A tool call, tool definition or tool result does not appear in the render: the template drops it, and the turn trains without it.",
        ),
    }
}

impl Dataset {
    /// The whole dataset in figures. `source` is the file a loaded dataset was read from: its
    /// records give the lines of the listed examples and the breakdown by kind.
    pub fn summary(&self, source: Option<&Path>, opts: &SummaryOptions) -> SftResult<Summary> {
        if self.part.is_some() {
            return Err(SftError::invalid_argument(
                "summary() describes a whole dataset, not one part of a split: call it on the dataset split() was called on",
            ));
        }
        let report = self.report()?;
        let examples = &report.examples;
        let mut findings = Vec::new();
        for check in CHECKS {
            findings.push(finding(
                check.code,
                check.severity,
                check.description,
                examples,
                check.applies,
                opts,
            ));
        }
        for kind in LossKind::ALL {
            let (severity, description) = loss_check(kind);
            findings.push(finding(
                kind.code(),
                severity,
                description,
                examples,
                |e| e.losses & kind.bit() != 0,
                opts,
            ));
        }
        findings.retain(|f| f.count > 0);
        findings.sort_by_key(|f| f.severity);

        let sampled = sample_indices(examples.len(), opts.sample);
        let listed: BTreeSet<usize> = findings
            .iter()
            .flat_map(|f| f.examples.iter().map(|e| e.example as usize))
            .collect();
        let (files, kinds) = match read_back(self, source, &listed, &sampled)? {
            Some(back) => {
                let mixed = self.mixture().is_some();
                for f in &mut findings {
                    for e in &mut f.examples {
                        let Some((file, at)) = back.locations.get(&(e.example as usize)) else {
                            continue;
                        };
                        match at {
                            Location::Line(l) => e.line = Some(*l as u64),
                            Location::Row(r) => e.row = Some(*r as u64),
                        }
                        if mixed {
                            e.file = Some(back.files[*file].path.clone());
                        }
                    }
                }
                (back.files, Some(self.kinds(back.sampled)))
            }
            None => (Vec::new(), None),
        };
        let sources = self.mixture().map(|_| {
            self.source_reports(examples)
                .into_iter()
                .zip(files.iter().cloned())
                .map(|(s, file)| SourceFigures {
                    file,
                    weight: s.weight,
                    format: s.format.name(),
                    examples: s.counts.examples,
                    rows: s.counts.rows,
                    per_epoch: s.counts.per_epoch,
                    kept_tokens: s.counts.kept_tokens,
                    trained_tokens: s.counts.trained_tokens,
                })
                .collect()
        });
        let source_file = match self.mixture() {
            Some(_) => None,
            None => files.into_iter().next(),
        };

        let config = &self.config;
        let batching = BatchingFigures {
            batch_size: opts.batch_size,
            max_batch_tokens: config.max_batch_tokens(),
            pad_to_multiple_of: config.pad_to_multiple_of,
            chosen: config.batching.name(),
            strategies: self
                .batching_costs(opts.batch_size, None, None)
                .into_iter()
                .map(|(b, cost)| StrategyFigures {
                    batching: b.name(),
                    batches: cost.batches,
                    rows: cost.rows,
                    tokens: cost.tokens,
                    computed_tokens: cost.computed_tokens,
                    padding_share: cost.padding_share(),
                })
                .collect(),
        };
        let t = &report.totals;
        Ok(Summary {
            source: source_file,
            sources,
            examples: t.examples,
            rows: t.examples
                - t.dropped_too_long
                - t.dropped_untrainable
                - t.unrenderable
                - t.dropped_duplicates,
            format: match self.format {
                Format::PromptCompletion => "prompt-completion",
                Format::Conversation => "conversation",
            },
            template: self.template(),
            settings: self.settings_json(),
            tokens: token_figures(examples, t.kept_tokens, t.trained_tokens),
            lengths: lengths(examples, config.max_seq_length, opts.length_bins),
            trained_share: trained_share(examples),
            kinds,
            batching,
            findings,
        })
    }

    fn template(&self) -> Template {
        // A foreign tokenizer's template is its own business: the fingerprint of no template.
        let source = self
            .tokenizer
            .ours()
            .and_then(|t| t.config().chat_template.clone())
            .unwrap_or_default();
        let digest = blake3::hash(source.as_bytes()).to_hex();
        Template {
            fingerprint: digest[..16].to_string(),
            family: crate::render::compiled::family_of(&source).map(|f| f.name().to_string()),
        }
    }

    fn settings_json(&self) -> Json {
        let c = &self.config;
        let mut settings = c.row_settings_json();
        settings["maxSeqLength"] = Json::from(c.max_seq_length);
        settings["seed"] = Json::from(c.seed);
        settings["batching"] = Json::from(c.batching.name());
        settings["maxBatchTokens"] = Json::from(c.max_batch_tokens());
        settings["padToMultipleOf"] = Json::from(c.pad_to_multiple_of);
        let render_as = c
            .render_as
            .or_else(|| self.tokenizer.ours().map(|t| t.render_as()));
        if let Some(render_as) = render_as.filter(|r| *r != RenderAs::Transformers) {
            settings["renderAs"] = Json::from(render_as.name());
        }
        settings
    }

    /// Tokens and trained tokens by kind over the kept windows of `sampled` examples whose
    /// render gives their row's tokens again.
    fn kinds(&self, sampled: Vec<(usize, SftExample)>) -> Kinds {
        let settings = row_settings(&self.config, &self.masking, self.turn_end.as_ref());
        let count = sampled.len() as u32;
        let per_example: Vec<Option<[(u64, u64); 8]>> = sampled
            .into_par_iter()
            .map(|(index, example)| {
                let row = self.row(index).ok()?;
                if row.stats().dropped.is_some() {
                    return Some([(0, 0); 8]);
                }
                let got = attribute(self.tokenizer.ours()?, &settings, example).ok()?;
                if got.ids != row.ids {
                    return None;
                }
                let window = kept_window(
                    row.ids.len(),
                    self.config.max_seq_length,
                    self.config.truncation,
                );
                let mut parts = [(0u64, 0u64); 8];
                let mut spans = row.spans.iter().peekable();
                for pos in window {
                    while spans.next_if(|s| s.end as usize <= pos).is_some() {}
                    let trained = spans.peek().is_some_and(|s| s.start as usize <= pos);
                    let slot = &mut parts[got.kinds[pos] as usize];
                    slot.0 += 1;
                    slot.1 += trained as u64;
                }
                Some(parts)
            })
            .collect();
        let mut totals = [(0u64, 0u64); 8];
        let mut attributed = 0;
        for parts in per_example.into_iter().flatten() {
            attributed += 1;
            for (total, part) in totals.iter_mut().zip(parts) {
                total.0 += part.0;
                total.1 += part.1;
            }
        }
        Kinds {
            sampled: count,
            attributed,
            parts: PartKind::ALL
                .into_iter()
                .map(|k| PartFigures {
                    kind: k.name(),
                    tokens: totals[k as usize].0,
                    trained: totals[k as usize].1,
                })
                .collect(),
        }
    }
}

fn finding(
    code: &'static str,
    severity: Severity,
    description: &'static str,
    examples: &[ExampleReport],
    applies: impl Fn(&ExampleReport) -> bool,
    opts: &SummaryOptions,
) -> FindingFigures {
    let mut count = 0;
    let mut listed = Vec::new();
    for (i, e) in examples.iter().enumerate() {
        if applies(e) {
            count += 1;
            if listed.len() < opts.examples_per_finding {
                listed.push(ExampleRef {
                    example: i as u32,
                    line: None,
                    row: None,
                    file: None,
                });
            }
        }
    }
    FindingFigures {
        code,
        severity,
        count,
        description,
        examples: listed,
    }
}

/// `n` example indices evenly spaced over `0..len` (all of them when `n` is 0 or at least
/// `len`).
fn sample_indices(len: usize, n: usize) -> Vec<usize> {
    if n == 0 || n >= len {
        return (0..len).collect();
    }
    (0..n).map(|k| k * len / n).collect()
}

fn token_figures(examples: &[ExampleReport], kept: u64, trained: u64) -> TokenFigures {
    let mut lengths: Vec<u32> = examples.iter().map(|e| e.tokens).collect();
    lengths.sort_unstable();
    let at = |q: f64| nearest_rank(&lengths, q);
    let total: u64 = lengths.iter().map(|&l| l as u64).sum();
    TokenFigures {
        total,
        kept,
        trained,
        min: lengths.first().copied().unwrap_or(0),
        median: at(0.5),
        p95: at(0.95),
        max: lengths.last().copied().unwrap_or(0),
        mean: if lengths.is_empty() {
            0.0
        } else {
            total as f64 / lengths.len() as f64
        },
    }
}

/// Equal-width bins from 0 over the lengths up to the 99th percentile or `maxSeqLength`,
/// whichever is larger, so that a few very long examples do not squeeze the rest into one bin:
/// longer ones share a last, wider bin that runs to the longest.
fn lengths(examples: &[ExampleReport], max_seq_length: usize, bins: usize) -> Lengths {
    let mut sorted: Vec<u32> = examples.iter().map(|e| e.tokens).collect();
    sorted.sort_unstable();
    let longest = sorted.last().copied().unwrap_or(0);
    let p99 = nearest_rank(&sorted, 0.99);
    let to_scale = p99.max((max_seq_length as u32).min(longest));
    let bins = bins.max(2) as u32;
    let mut width = (to_scale + 1).div_ceil(bins).max(1);
    if longest >= bins * width {
        // The last bin takes the long tail.
        width = (to_scale + 1).div_ceil(bins - 1).max(1);
    }
    let mut histogram: Vec<Bin<u32>> = (0..bins)
        .map(|k| Bin {
            from: k * width,
            to: if k + 1 == bins {
                longest.max((k + 1) * width - 1)
            } else {
                (k + 1) * width - 1
            },
            count: 0,
        })
        .take_while(|b| b.from <= longest)
        .collect();
    let last = histogram.len() - 1;
    for e in examples {
        histogram[((e.tokens / width) as usize).min(last)].count += 1;
    }
    let (mut truncated, mut dropped, mut cut) = (0, 0, 0u64);
    for e in examples {
        truncated += e.truncated as u32;
        dropped += (e.dropped == Some(DropReason::TooLong)) as u32;
        if e.dropped.is_none() {
            cut += (e.tokens - e.kept_tokens) as u64;
        }
    }
    Lengths {
        max_seq_length,
        histogram,
        truncated,
        truncated_share: share(truncated as u64, examples.len() as u64),
        dropped_too_long: dropped,
        tokens_cut: cut,
    }
}

/// The value at quantile `q` of `sorted` by nearest rank (0 when empty).
fn nearest_rank(sorted: &[u32], q: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn trained_share(examples: &[ExampleReport]) -> TrainedShare {
    let mut histogram: Vec<Bin<f64>> = (0..10)
        .map(|k| Bin {
            from: k as f64 / 10.0,
            to: (k + 1) as f64 / 10.0,
            count: 0,
        })
        .collect();
    let mut none = 0;
    for e in examples.iter().filter(|e| e.dropped.is_none()) {
        let s = share(e.trained_tokens as u64, e.kept_tokens as u64);
        histogram[((s * 10.0) as usize).min(9)].count += 1;
        none += (e.trained_tokens == 0) as u32;
    }
    TrainedShare {
        histogram,
        none_trained: none,
    }
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Kept trained tokens of a row (used by the tests to check the breakdown's totals).
#[cfg(test)]
fn kept_trained(ds: &Dataset, index: usize) -> u64 {
    use crate::mask::trained_count;
    let row = ds.row(index).unwrap();
    let window = kept_window(
        row.ids.len(),
        ds.config.max_seq_length,
        ds.config.truncation,
    );
    trained_count(row.spans, window) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::loader::LoadOptions;
    use crate::dataset::DatasetConfig;
    use std::sync::Arc;

    fn edge(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("__test__/fixtures/parity/edge/{name}.jsonl"))
    }

    #[test]
    fn figures_agree_with_the_report_and_the_batching_costs() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let path = edge("conv_edge");
        let config = DatasetConfig {
            max_seq_length: 64,
            completion_only: true,
            ..Default::default()
        };
        let ds = Dataset::load(&path, tok, config, &LoadOptions::default()).unwrap();
        let opts = SummaryOptions {
            batch_size: 4,
            sample: 0,
            ..Default::default()
        };
        let s = ds.summary(Some(&path), &opts).unwrap();
        let report = ds.report().unwrap();
        let t = &report.totals;
        assert_eq!(s.examples, t.examples);
        assert_eq!(s.tokens.total, t.tokens);
        assert_eq!(s.tokens.kept, t.kept_tokens);
        assert_eq!(s.tokens.trained, t.trained_tokens);
        assert_eq!(s.lengths.truncated, t.truncated);
        let binned: u32 = s.lengths.histogram.iter().map(|b| b.count).sum();
        assert_eq!(binned, t.examples);
        let costs = ds.batching_costs(4, None, None);
        assert_eq!(s.batching.strategies.len(), costs.len());
        for (f, (b, c)) in s.batching.strategies.iter().zip(&costs) {
            assert_eq!(f.batching, b.name());
            assert_eq!(f.computed_tokens, c.computed_tokens);
        }
        // Every example sampled and attributed: the kinds add up to the kept and trained tokens.
        let kinds = s.kinds.as_ref().unwrap();
        assert_eq!(kinds.sampled, t.examples);
        assert_eq!(kinds.attributed, t.examples);
        let tokens: u64 = kinds.parts.iter().map(|p| p.tokens).sum();
        let trained: u64 = kinds.parts.iter().map(|p| p.trained).sum();
        assert_eq!(tokens, t.kept_tokens);
        assert_eq!(trained, t.trained_tokens);
        let by_rows: u64 = (0..ds.len()).map(|i| kept_trained(&ds, i)).sum();
        assert_eq!(trained, by_rows);
        // The reference masking trains assistant turns only: no user or system token is trained.
        for p in &kinds.parts {
            if p.kind == "user" || p.kind == "system" {
                assert_eq!(p.trained, 0, "{p:?}");
            }
        }
        // Findings list their examples with the line they are on.
        let source = s.source.as_ref().unwrap();
        assert_eq!(source.file_format, "jsonl");
        assert_eq!(source.bytes, std::fs::metadata(&path).unwrap().len());
        let text = std::fs::read_to_string(&path).unwrap();
        let line_of: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, _)| n + 1)
            .collect();
        assert!(!s.findings.is_empty());
        for f in &s.findings {
            let counted = report
                .examples
                .iter()
                .filter(|e| CHECKS.iter().any(|c| c.code == f.code && (c.applies)(e)))
                .count();
            if CHECKS.iter().any(|c| c.code == f.code) {
                assert_eq!(f.count as usize, counted, "{}", f.code);
            }
            for e in &f.examples {
                assert_eq!(
                    e.line,
                    Some(line_of[e.example as usize] as u64),
                    "{}",
                    f.code
                );
            }
        }
    }

    fn example(tokens: u32) -> ExampleReport {
        ExampleReport {
            tokens,
            kept_tokens: tokens,
            ..Default::default()
        }
    }

    #[test]
    fn a_long_tail_shares_the_last_bin() {
        // 200 examples of 1..=200 tokens and one of 10,000: the bins stay narrow.
        let mut examples: Vec<_> = (1..=200).map(example).collect();
        examples.push(example(10_000));
        let l = lengths(&examples, 128, 10);
        assert_eq!(l.histogram.len(), 10);
        // 99th percentile 199: bins of 23 up to 207, the last from 207 to the longest.
        assert_eq!(
            l.histogram[0],
            Bin {
                from: 0,
                to: 22,
                count: 22
            }
        );
        let last = l.histogram.last().unwrap();
        assert_eq!((last.from, last.to, last.count), (207, 10_000, 1));
        assert_eq!(l.histogram.iter().map(|b| b.count).sum::<u32>(), 201);
        // Without a tail, equal bins that end at the longest.
        let flat: Vec<_> = (0..200).map(example).collect();
        let l = lengths(&flat, 128, 10);
        assert_eq!(
            l.histogram[0],
            Bin {
                from: 0,
                to: 19,
                count: 20
            }
        );
        assert_eq!(
            l.histogram.last().unwrap(),
            &Bin {
                from: 180,
                to: 199,
                count: 20
            }
        );
    }

    #[test]
    fn samples_are_evenly_spaced() {
        assert_eq!(sample_indices(10, 0), (0..10).collect::<Vec<_>>());
        assert_eq!(sample_indices(10, 20), (0..10).collect::<Vec<_>>());
        assert_eq!(sample_indices(10, 4), vec![0, 2, 5, 7]);
    }
}
