//! One example rendered, tokenized and masked: the row the dataset caches and every epoch reuses.

use std::ops::Range;

use serde_json::Value as Json;

use crate::chat_template::RenderOptions;
use crate::error::SftResult;
use crate::example::SftExample;
use crate::masking::{chatml_assistant_spans, common_prefix_len, spans_from, ChatMlMarkers};
use crate::message::{normalize_message, normalize_messages};
use crate::tokenizer::ChatTokenizer;

/// 4 bytes a token plus a small record: no labels are stored, only the trained ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenizedRow {
    pub ids: Box<[u32]>,
    pub spans: Box<[Range<u32>]>,
    /// The reference's prefix-mismatch warning for this example, if it applies.
    pub warning: Option<Box<str>>,
}

/// The settings that decide how a row is built.
pub struct RowSettings<'a> {
    pub completion_only: bool,
    pub enable_thinking: bool,
    pub markers: &'a ChatMlMarkers,
}

pub fn build_row(
    tokenizer: &ChatTokenizer,
    settings: &RowSettings,
    example: SftExample,
) -> SftResult<TokenizedRow> {
    match example {
        SftExample::PromptCompletion { prompt, completion } => {
            prompt_completion_row(tokenizer, settings, prompt, completion)
        }
        SftExample::Conversation { messages } => conversation_row(tokenizer, settings, messages),
    }
}

fn render_options(settings: &RowSettings, add_generation_prompt: bool) -> RenderOptions<'static> {
    RenderOptions {
        add_generation_prompt,
        enable_thinking: Some(settings.enable_thinking),
        ..Default::default()
    }
}

/// The label boundary is the common token prefix of the prompt rendered with a generation
/// prompt and the full conversation rendered without one. The full text is tokenized once; the
/// prompt's ids reuse its tokens up to the last added token both texts share.
fn prompt_completion_row(
    tokenizer: &ChatTokenizer,
    settings: &RowSettings,
    mut prompt: Vec<Json>,
    mut completion: Json,
) -> SftResult<TokenizedRow> {
    normalize_messages(&mut prompt)?;
    normalize_message(prompt.len(), &mut completion)?;
    let prompt_text = tokenizer.render(&prompt, &render_options(settings, true))?;
    prompt.push(completion);
    let full_text = tokenizer.render(&prompt, &render_options(settings, false))?;
    let full = tokenizer.encode_with_offsets(&full_text)?;
    let prompt_ids = tokenizer.encode_sharing_prefix(&prompt_text, &full_text, &full)?;
    let prompt_len = common_prefix_len(&prompt_ids, &full.ids);
    let warning = (prompt_len != prompt_ids.len()).then(|| {
        format!(
            "[SFT Dataset] Prompt tokens differ from prefix of full sequence ({} vs {prompt_len}). Using common prefix for masking.",
            prompt_ids.len()
        )
        .into_boxed_str()
    });
    let trained_from = if settings.completion_only {
        prompt_len
    } else {
        0
    };
    Ok(TokenizedRow {
        spans: spans_from(trained_from, full.ids.len()).into(),
        ids: full.ids.into(),
        warning,
    })
}

fn conversation_row(
    tokenizer: &ChatTokenizer,
    settings: &RowSettings,
    mut messages: Vec<Json>,
) -> SftResult<TokenizedRow> {
    normalize_messages(&mut messages)?;
    let text = tokenizer.render(&messages, &render_options(settings, false))?;
    let ids = tokenizer.encode(&text, false)?;
    let spans = if settings.completion_only {
        chatml_assistant_spans(&ids, settings.markers)
    } else {
        spans_from(0, ids.len())
    };
    Ok(TokenizedRow {
        ids: ids.into(),
        spans: spans.into(),
        warning: None,
    })
}
