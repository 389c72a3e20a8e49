//! Datasets over a foreign tokenizer (see `tokenize::foreign`): the JS binding renders every
//! example through the tokenizer's own `applyChatTemplate`, with the reference's arguments, and
//! hands the ids here; masking, truncation, batching, shuffling, shards and reports then work as
//! for rows rendered here. What needs this crate's renderer is refused when the dataset is made.

use std::path::Path;

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::train_flags::{first_flagged, first_flagged_json, unsupported_by_reference};
use crate::example::{detect_format, from_created, validate_record, Format};
use crate::input::dataset_format::Converter;
use crate::input::RecordReader;
use crate::mask::spans::TurnEnd;
use crate::mask::trained_count;
use crate::mask::truncation::{kept_window, Truncation};
use crate::rows::row_cache::RowCache;
use crate::rows::{conversation_row, prompt_completion_row, DropReason, Masking, TokenizedRow};
use crate::tokenize::foreign::{ForeignTokenizer, RowTokenizer};
use crate::tools::distill::targets_for_row;

use super::config::{markers_by_lookup, StrategyName};
use super::creation::{inconsistent, Pending};
use super::{Dataset, DatasetConfig};

/// What the foreign tokenizer gave for one example: the ids of its renders (the prompt's only
/// for prompt-completion data), or the message of the error it raised.
pub enum ForeignRender {
    Ids {
        prompt: Option<Vec<u32>>,
        full: Vec<u32>,
    },
    Failed(String),
}

/// The settings that need this crate's renderer or tokenizer, by name, with what to use
/// instead; `None` when the config has none of them.
fn needs_our_renderer(config: &DatasetConfig) -> Option<String> {
    let instead = "use a Tokenizer of sft-dataset (Tokenizer.fromPretrained, with renderAs: 'mlx-node' to render as MLX Node does)";
    let setting = match config.masking_strategy {
        Some(StrategyName::Spans) => Some("maskingStrategy 'spans'"),
        Some(StrategyName::Generation) => Some("maskingStrategy 'generation'"),
        _ if config.sanitize_control_tokens => Some("sanitizeControlTokens"),
        _ if config.truncation == Truncation::Turns => Some("truncation 'turns'"),
        _ if config.render_as.is_some() => Some("renderAs"),
        _ => config.spans_only_setting(),
    }?;
    Some(format!(
        "{setting} needs the chat template rendered by sft-dataset, and this tokenizer renders its own; {instead}"
    ))
}

impl Dataset {
    /// A dataset over `examples` whose rows `supply_foreign` brings: the reference's checks (at
    /// least one example, one format, the ChatML tokens), and a refusal of every setting that
    /// needs this crate's renderer.
    pub fn for_foreign(
        examples: Vec<Json>,
        foreign: ForeignTokenizer,
        config: DatasetConfig,
    ) -> SftResult<Self> {
        let Some(first) = examples.first() else {
            return Err(SftError::new(
                ErrorCode::InvalidExample,
                "SFT dataset must contain at least one example",
            ));
        };
        if let Some(message) = needs_our_renderer(&config) {
            return Err(SftError::invalid_argument(message));
        }
        config.check_batching()?;
        let markers = markers_by_lookup(
            |token| foreign.token_to_id(token),
            &foreign.im_start_token,
            &foreign.im_end_token,
            &config.special_token_ids,
        )?;
        let format = detect_format(first)?;
        // The rows of a foreign tokenizer are masked by the reference's scan.
        for (index, example) in examples.iter().enumerate() {
            let context = |e: SftError| e.context(format_args!("SFT example {index}"));
            if let Some(message) = first_flagged_json(example).map_err(context)? {
                return Err(context(unsupported_by_reference(message)));
            }
        }
        for (index, example) in examples.iter().enumerate().skip(1) {
            let other = detect_format(example)?;
            if other != format {
                return Err(inconsistent(format, index, other));
            }
        }
        // The reference's ChatML scan ends a turn at `<|im_end|>`: the report counts it.
        let turn_end = Some(TurnEnd {
            text: foreign.im_end_token.clone(),
            id: markers.im_end,
        });
        let rows = RowCache::lazy(examples.len());
        let pending = examples
            .into_iter()
            .map(|e| std::sync::Mutex::new(Some(Pending::Json(e))))
            .collect();
        Ok(Self::assemble(
            RowTokenizer::Foreign(foreign),
            config,
            format,
            Masking::Reference(markers),
            turn_end,
            pending,
            rows,
        ))
    }

    /// Whether the rows come from a foreign tokenizer and have not arrived yet.
    pub fn awaits_foreign_rows(&self) -> bool {
        // `supply_foreign` fills every cell at once.
        matches!(self.tokenizer, RowTokenizer::Foreign(_)) && self.rows.built(0).is_none()
    }

    /// Builds every row from the foreign tokenizer's renders (one per example, in example
    /// order), on all cores: the example is validated as a row built here would be (its error
    /// first), then masked as the reference masks. A failed render or an invalid example
    /// becomes that row's error, raised where the row is used.
    pub fn supply_foreign(&mut self, renders: Vec<ForeignRender>) -> SftResult<()> {
        if renders.len() != self.rows.len() {
            return Err(SftError::new(
                ErrorCode::Internal,
                format!("{} renders for {} examples", renders.len(), self.rows.len()),
            ));
        }
        let Masking::Reference(markers) = &self.masking else {
            return Err(SftError::new(
                ErrorCode::Internal,
                "a foreign tokenizer's dataset masks as the reference",
            ));
        };
        let config = &self.config;
        let this = &*self;
        let examples = &self.examples;
        let rows = &self.rows;
        renders
            .into_par_iter()
            .enumerate()
            .for_each(|(index, render)| {
                let taken = examples.get(index).and_then(|cell| {
                    cell.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .take()
                });
                let built = || {
                    let Some(Pending::Json(example)) = taken else {
                        return Err(SftError::new(
                            ErrorCode::Internal,
                            "the example was not there to build its row",
                        ));
                    };
                    let format = this.format_of(index);
                    let example = from_created(example, index, format)?;
                    let (prompt, full) = match render {
                        ForeignRender::Ids { prompt, full } => (prompt, full),
                        ForeignRender::Failed(message) => {
                            return Err(SftError::new(ErrorCode::TemplateRender, message))
                        }
                    };
                    let mut row = match (format, prompt) {
                        (Format::PromptCompletion, Some(prompt)) => {
                            prompt_completion_row(prompt, full, config.completion_only)
                        }
                        (Format::PromptCompletion, None) => {
                            return Err(SftError::new(
                                ErrorCode::Internal,
                                "a prompt-completion example came without its prompt's ids",
                            ))
                        }
                        (Format::Conversation, _) => {
                            conversation_row(full, markers, config.completion_only)
                        }
                    };
                    if let Some(targets) = example.distill() {
                        row.set_distill(targets_for_row(targets, row.ids.len())?);
                    }
                    mark_untrainable(&mut row, config);
                    Ok(row)
                };
                let built: SftResult<TokenizedRow> =
                    built().map_err(|e| e.context(format_args!("SFT example {index}")));
                let _ = rows.get_or_build(index, || built);
            });
        self.apply_drops();
        if self.mixture.is_some() {
            self.reset_order();
        }
        Ok(())
    }
}

/// `dropUntrainable`: a row with no trained token in its kept window leaves training.
fn mark_untrainable(row: &mut TokenizedRow, config: &DatasetConfig) {
    if config.drop_untrainable {
        let window = kept_window(row.ids.len(), config.max_seq_length, config.truncation);
        if trained_count(&row.spans, window) == 0 {
            row.set_dropped(DropReason::Untrainable);
        }
    }
}

/// Every record of `path` (up to `limit`), converted to the reference's shape and validated,
/// for a foreign tokenizer to render: the first parse error wins over the first invalid record,
/// which wins over a record of another format than record 0, each naming its file and line.
pub fn read_examples(
    path: &Path,
    converter: &Converter,
    limit: Option<usize>,
) -> SftResult<Vec<Json>> {
    let mut reader = RecordReader::open(path, &converter.top_level_keys())?;
    let shown = reader.path().to_string();
    let container = reader.kind().container;
    let limit = limit.unwrap_or(usize::MAX);
    let mut examples = Vec::new();
    let mut first_invalid: Option<SftError> = None;
    let mut format: Option<Format> = None;
    while examples.len() < limit {
        let Some(raw) = reader.next_record()? else {
            break;
        };
        let (index, at) = (examples.len(), raw.at);
        let record = raw.parse(&shown, container)?;
        let checked = converter.convert(record, index).and_then(|(record, _)| {
            let example = validate_record(record.clone(), index)?;
            let context = |e: SftError| e.context(format_args!("SFT example {index}"));
            if let Some(message) = first_flagged(&example).map_err(context)? {
                return Err(context(unsupported_by_reference(message)));
            }
            Ok((record, example.format()))
        });
        match checked {
            Ok((record, this)) => {
                match format {
                    None => format = Some(this),
                    Some(first) if first != this && first_invalid.is_none() => {
                        first_invalid = Some(inconsistent(first, index, this).at(&shown, at));
                    }
                    Some(_) => {}
                }
                examples.push(record);
            }
            Err(e) => {
                first_invalid.get_or_insert(e.at(&shown, at));
                examples.push(Json::Null);
            }
        }
    }
    match first_invalid {
        Some(e) => Err(e),
        None if examples.is_empty() => Err(SftError::new(
            ErrorCode::InvalidExample,
            format!("SFT dataset must contain at least one example ({shown} has no records)"),
        )),
        None => Ok(examples),
    }
}
