//! The settings of a dataset (`DatasetConfig`) and what they resolve to against a tokenizer:
//! the masking, the end-of-turn token, the reference's markers and a row's settings.

use serde_json::Value as Json;

use crate::batch::collate::Padding;
use crate::batch::plan::{Batching, Shard};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::ToolsMode;
use crate::input::dataset_format::FormatOptions;
use crate::mask::spans::{discover_turn_end, TurnEnd};
use crate::mask::truncation::Truncation;
use crate::mask::{ChatMlMarkers, Reasoning, SpanPolicy};
use crate::render::{RenderAs, RenderOptions};
use crate::rows::{Masking, RowSettings};
use crate::tokenize::{ChatTokenizer, IM_END, IM_START};

/// Overrides for the ids the reference masking keys on (`specialTokenIds`).
#[derive(Debug, Clone, Default)]
pub struct SpecialTokenOverrides {
    pub im_start: Option<u32>,
    pub im_end: Option<u32>,
    pub newline_tokens: Option<Vec<u32>>,
}

/// `maskingStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyName {
    Reference,
    Spans,
    /// The chat template's `{% generation %}` blocks (transformers' assistant mask).
    Generation,
}

impl StrategyName {
    /// The option's value as users write it.
    pub fn name(self) -> &'static str {
        match self {
            StrategyName::Reference => "reference",
            StrategyName::Spans => "spans",
            StrategyName::Generation => "generation",
        }
    }
}

#[derive(Debug, Clone)]
pub struct DatasetConfig {
    pub max_seq_length: usize,
    pub completion_only: bool,
    pub enable_thinking: bool,
    pub seed: f64,
    pub special_token_ids: SpecialTokenOverrides,
    /// `None`: reference for ChatML tokenizers unless a spans-only setting is given.
    pub masking_strategy: Option<StrategyName>,
    pub train_on_roles: Option<Vec<String>>,
    pub train_on_turn_end: Option<bool>,
    pub reasoning: Option<Reasoning>,
    pub truncation: Truncation,
    pub drop_untrainable: bool,
    pub batching: Batching,
    /// `None`: `max_seq_length`.
    pub max_batch_tokens: Option<usize>,
    pub pad_to_multiple_of: usize,
    pub shard: Option<Shard>,
    /// `format`, `columns`, `roles`: how records are read (see `dataset_format`).
    pub input: FormatOptions,
    /// `tools`: whether each example's `tools` field reaches the template.
    pub tools: ToolsMode,
    /// `sanitizeControlTokens`: control-token strings in the data are encoded as text.
    pub sanitize_control_tokens: bool,
    /// `parseToolArguments`: tool-call arguments given as JSON strings are parsed first.
    pub parse_tool_arguments: bool,
    /// `reasoningEffort`: the template's `reasoning_effort`; `None` leaves it undefined.
    pub reasoning_effort: Option<String>,
    /// `renderAs`: whose rendering rows follow; `None`: the tokenizer's own setting.
    pub render_as: Option<RenderAs>,
    /// `dropUnrenderable`: a load leaves out the examples the template fails on, instead of
    /// failing.
    pub drop_unrenderable: bool,
    /// `dropDuplicates`: exact copies of an earlier example (what `DUPLICATE_EXAMPLE` reports)
    /// leave training; the first stays.
    pub drop_duplicates: bool,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            max_seq_length: 2048,
            completion_only: false,
            enable_thinking: false,
            seed: 42.0,
            special_token_ids: SpecialTokenOverrides::default(),
            masking_strategy: None,
            train_on_roles: None,
            train_on_turn_end: None,
            reasoning: None,
            truncation: Truncation::KeepEnd,
            drop_untrainable: false,
            batching: Batching::Reference,
            max_batch_tokens: None,
            pad_to_multiple_of: 1,
            shard: None,
            input: FormatOptions::default(),
            tools: ToolsMode::Ignore,
            sanitize_control_tokens: false,
            parse_tool_arguments: false,
            reasoning_effort: None,
            render_as: None,
            drop_unrenderable: false,
            drop_duplicates: false,
        }
    }
}

impl DatasetConfig {
    /// Settings that only the spans strategy understands.
    pub(super) fn spans_only_setting(&self) -> Option<&'static str> {
        if self.train_on_roles.is_some() {
            Some("trainOnRoles")
        } else if self.train_on_turn_end.is_some() {
            Some("trainOnTurnEnd")
        } else if self.reasoning.is_some() {
            Some("reasoning")
        } else {
            None
        }
    }

    /// Every setting that changes a row, as JSON: the dataset's part of a token cache key (and
    /// what `sft-dataset cache ls` shows). Destructured in full, so that a field added to the
    /// config must be placed here or on the list of those that leave rows alone. A setting
    /// that changes rows only in some modes is written only then, so that sweeping it elsewhere
    /// reuses the cached rows.
    pub fn row_settings_json(&self) -> Json {
        let DatasetConfig {
            max_seq_length,
            completion_only,
            enable_thinking,
            // Order only.
            seed: _,
            special_token_ids,
            masking_strategy,
            train_on_roles,
            train_on_turn_end,
            reasoning,
            truncation,
            drop_untrainable,
            // Which rows go together, never what a row holds.
            batching: _,
            max_batch_tokens: _,
            pad_to_multiple_of: _,
            shard: _,
            input,
            tools,
            sanitize_control_tokens,
            parse_tool_arguments,
            reasoning_effort,
            // The rendering in effect also depends on the tokenizer: the cache key adds it
            // (`token_cache::key`), so that the two ways of asking for one rendering share rows.
            render_as: _,
            // Which rows take part, never what a row holds.
            drop_unrenderable: _,
            drop_duplicates: _,
        } = self;
        let mut settings = serde_json::json!({
            "format": input.format.name(),
            "columns": input.columns,
            "roles": input.roles,
            "tools": tools.name(),
            "completionOnly": completion_only,
            "enableThinking": enable_thinking,
            "specialTokenIds": {
                "imStart": special_token_ids.im_start,
                "imEnd": special_token_ids.im_end,
                "newlineTokens": special_token_ids.newline_tokens,
            },
            "maskingStrategy": masking_strategy.map(StrategyName::name),
            "trainOnRoles": train_on_roles,
            "trainOnTurnEnd": train_on_turn_end,
            "reasoning": reasoning.map(Reasoning::name),
            "truncation": truncation.name(),
            "dropUntrainable": drop_untrainable,
        });
        // Written only when on, so that the keys of caches made before the option still match.
        if *sanitize_control_tokens {
            settings["sanitizeControlTokens"] = Json::from(true);
        }
        if *parse_tool_arguments {
            settings["parseToolArguments"] = Json::from(true);
        }
        if let Some(effort) = reasoning_effort {
            settings["reasoningEffort"] = Json::from(effort.as_str());
        }
        // Rows are cut to `maxSeqLength` only when collated, except for these two.
        if *truncation == Truncation::Turns || *drop_untrainable {
            settings["maxSeqLength"] = Json::from(*max_seq_length);
        }
        settings
    }

    /// Rows can leave the dataset, so all of them are built before `length` is known.
    pub(super) fn may_drop(&self) -> bool {
        self.drop_untrainable || self.truncation == Truncation::Turns || self.drop_duplicates
    }

    /// Batches come from a plan rather than from consecutive positions.
    pub fn uses_plan(&self) -> bool {
        self.batching != Batching::Reference || self.shard.is_some()
    }

    pub fn max_batch_tokens(&self) -> usize {
        self.max_batch_tokens.unwrap_or(self.max_seq_length)
    }

    /// The batching settings that only make sense together.
    pub fn check_batching(&self) -> SftResult<()> {
        if let Some(shard) = self.shard {
            if shard.world_size == 0 || shard.rank >= shard.world_size {
                return Err(SftError::invalid_argument(format!(
                    "shard.rank must be an integer in [0, worldSize), got rank {} of worldSize {}",
                    shard.rank, shard.world_size
                )));
            }
        }
        if self.batching == Batching::Packed && self.max_batch_tokens() < self.max_seq_length {
            return Err(SftError::invalid_argument(format!(
                "maxBatchTokens ({}) must be at least maxSeqLength ({}) with batching 'packed': every truncated row must fit in a packed row",
                self.max_batch_tokens(),
                self.max_seq_length
            )));
        }
        Ok(())
    }

    pub(super) fn padding(&self, pad_id: u32) -> Padding {
        Padding {
            max_seq_len: self.max_seq_length,
            multiple: self.pad_to_multiple_of,
            pad_id,
            truncation: self.truncation,
        }
    }
}

/// The masking a dataset uses. Without `maskingStrategy`: the reference for a tokenizer with
/// the ChatML tokens, unless a spans-only setting is given; spans otherwise (where the reference
/// would fail). An explicit `'reference'` keeps the reference's error for other tokenizers and
/// rejects spans-only settings rather than ignore them.
pub fn resolve_masking(tokenizer: &ChatTokenizer, config: &DatasetConfig) -> SftResult<Masking> {
    let chatml =
        tokenizer.token_to_id(IM_START).is_some() && tokenizer.token_to_id(IM_END).is_some();
    let strategy =
        config
            .masking_strategy
            .unwrap_or(if chatml && config.spans_only_setting().is_none() {
                StrategyName::Reference
            } else {
                StrategyName::Spans
            });
    match strategy {
        StrategyName::Reference | StrategyName::Generation => {
            if let Some(name) = config.spans_only_setting() {
                return Err(SftError::new(
                    ErrorCode::InvalidArgument,
                    format!("{name} needs maskingStrategy 'spans'"),
                ));
            }
            if strategy == StrategyName::Generation {
                return Ok(Masking::Generation);
            }
            Ok(Masking::Reference(reference_markers(
                tokenizer,
                &config.special_token_ids,
            )?))
        }
        StrategyName::Spans => Ok(Masking::Spans(SpanPolicy {
            roles: config
                .train_on_roles
                .clone()
                .unwrap_or_else(|| vec!["assistant".to_string()]),
            only_last: false,
            turn_end: config.train_on_turn_end.unwrap_or(true),
            reasoning: config.reasoning.unwrap_or(Reasoning::Train),
            overrides: Vec::new(),
        })),
    }
}

/// The template's end-of-turn token under the dataset's thinking setting.
pub fn turn_end_of(tokenizer: &ChatTokenizer, config: &DatasetConfig) -> Option<TurnEnd> {
    discover_turn_end(
        tokenizer,
        &RenderOptions {
            enable_thinking: Some(config.enable_thinking),
            render_as: config.render_as,
            ..Default::default()
        },
    )
}

/// The reference's special-token discovery: ChatML markers from the vocabulary (an error when
/// they are missing, overrides or not), newline ids by raw lookup, then the overrides.
pub fn reference_markers(
    tokenizer: &ChatTokenizer,
    overrides: &SpecialTokenOverrides,
) -> SftResult<ChatMlMarkers> {
    markers_by_lookup(
        |token| tokenizer.token_to_id(token),
        IM_START,
        IM_END,
        overrides,
    )
}

/// `reference_markers` over any raw vocabulary lookup, with the ChatML tokens the tokenizer
/// names (`getImStartToken`, `getImEndToken`).
pub fn markers_by_lookup(
    lookup: impl Fn(&str) -> Option<u32>,
    im_start_token: &str,
    im_end_token: &str,
    overrides: &SpecialTokenOverrides,
) -> SftResult<ChatMlMarkers> {
    let im_start = lookup(im_start_token);
    let im_end = lookup(im_end_token);
    let (Some(im_start), Some(im_end)) = (im_start, im_end) else {
        let show = |id: Option<u32>| id.map_or("null".to_string(), |v| v.to_string());
        return Err(SftError::new(
            ErrorCode::UnsupportedTokenizer,
            format!(
                "Tokenizer does not have required special tokens for ChatML format. Got im_start={}, im_end={}. This tokenizer may not be compatible with ChatML format.",
                show(im_start),
                show(im_end)
            ),
        ));
    };
    let mut newlines = Vec::new();
    for candidate in NEWLINE_CANDIDATES {
        if let Some(id) = lookup(candidate) {
            if !newlines.contains(&id) {
                newlines.push(id);
            }
        }
    }
    Ok(ChatMlMarkers {
        im_start: overrides.im_start.unwrap_or(im_start),
        im_end: overrides.im_end.unwrap_or(im_end),
        assistant: lookup(ASSISTANT),
        newlines: overrides.newline_tokens.clone().unwrap_or(newlines),
    })
}

/// The strings the reference looks up as newline tokens, in its order.
pub const NEWLINE_CANDIDATES: [&str; 4] = ["\n", " \n", "\r\n", "\n\n"];

/// The token the reference's conversation scan expects after `<|im_start|>`.
pub const ASSISTANT: &str = "assistant";

pub fn row_settings<'a>(
    config: &'a DatasetConfig,
    masking: &'a Masking,
    turn_end: Option<&'a TurnEnd>,
) -> RowSettings<'a> {
    RowSettings {
        completion_only: config.completion_only,
        enable_thinking: config.enable_thinking,
        masking,
        turn_end,
        max_seq_length: config.max_seq_length,
        truncation: config.truncation,
        drop_untrainable: config.drop_untrainable,
        tools: config.tools,
        sanitize: config.sanitize_control_tokens,
        parse_tool_arguments: config.parse_tool_arguments,
        reasoning_effort: config.reasoning_effort.as_deref(),
        render_as: config.render_as,
        loss: None,
    }
}
