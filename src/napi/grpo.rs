//! The GRPO label-mask toolkit (`grpo`) for JS: `tokenizeForTrainer` and friends.

use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Int32Array};
use napi_derive::napi;
use rayon::prelude::*;
use serde_json::Value;

use super::error::{run_sync, JsResult as Result};
use super::ids::{mask_values, token_ids, IdsInput};
use super::json::JsJson;
use super::task::Job;
use super::tokenizer::JsTokenizer;
use crate::error::SftResult;
use crate::example::message::{normalize_messages, prepare_chat};
use crate::tokenize::ChatTokenizer;
use crate::tools::grpo::{self, ConversationOptions, TemplateTokenizer, TokenizationResult};

/// Options of `tokenizeForTrainer` and `tokenizeForTrainerBatch`.
#[napi(object)]
#[derive(Default)]
pub struct TrainerTokenizeOptions {
    /// Render a conversation without assistant message with the generation prompt. Default
    /// false. (The prompt before the last assistant message always gets one: that is the split.)
    pub add_generation_prompt: Option<bool>,
    /// Sets `enable_thinking`; left undefined in the template when not given (Qwen3: thinking
    /// on).
    pub enable_thinking: Option<bool>,
    /// OpenAI-style tool definitions passed to every render.
    #[napi(ts_type = "Array<any>")]
    pub tools: Option<Vec<JsJson>>,
}

/// Options of `tokenizeConversationForTrainer`.
#[napi(object)]
#[derive(Default)]
pub struct ConversationTokenizeOptions {
    /// Sets `enable_thinking`; left undefined in the template when not given.
    pub enable_thinking: Option<bool>,
    /// OpenAI-style tool definitions passed to every render.
    #[napi(ts_type = "Array<any>")]
    pub tools: Option<Vec<JsJson>>,
    /// Default false, the reference's behaviour: an assistant message is everything its prefix
    /// render adds, role header (`<|im_start|>assistant\n`) included, so the header is trained.
    /// True masks the part of the message that the conversation before it, rendered with a
    /// generation prompt, already contains: only what the model writes is trained.
    pub mask_assistant_headers: Option<bool>,
}

/// Options of `validateMasks` and `fixHistoricalMasks`.
#[napi(object)]
#[derive(Default)]
pub struct MaskCheckOptions {
    /// Default false, the reference's behaviour: masks made only of 0 and 1 are legacy flags,
    /// even when they are the labels of a sequence of token ids 0 and 1. True does not call
    /// them legacy when every mask equals its token.
    pub strict_legacy_detection: Option<bool>,
    /// For `fixHistoricalMasks`' re-tokenization; see `TrainerTokenizeOptions.enableThinking`.
    pub enable_thinking: Option<bool>,
    /// For `fixHistoricalMasks`' re-tokenization: tool definitions passed to every render.
    #[napi(ts_type = "Array<any>")]
    pub tools: Option<Vec<JsJson>>,
}

/// Token ids and labels of one conversation: `masks` holds -100 where no loss is taken and the
/// token id where it is.
#[napi(object, js_name = "TokenizationResult")]
pub struct TrainerTokenization {
    pub tokens: Int32Array,
    pub masks: Int32Array,
    /// Tokens before the completion. Negative in one fallback of the reference (the
    /// completion's content, encoded alone, longer than the sequence).
    pub prompt_length: i64,
    pub completion_length: i64,
    pub total_length: u32,
}

fn template<'a>(
    tokenizer: &'a ChatTokenizer,
    tools: &'a Option<Value>,
    enable_thinking: Option<bool>,
) -> TemplateTokenizer<'a> {
    TemplateTokenizer {
        tokenizer,
        tools: tools.as_ref(),
        enable_thinking,
    }
}

fn to_js(_: &napi::Env, r: TokenizationResult) -> SftResult<TrainerTokenization> {
    Ok(convert(r))
}

fn convert(r: TokenizationResult) -> TrainerTokenization {
    TrainerTokenization {
        tokens: Int32Array::new(r.tokens.iter().map(|&t| t as i32).collect()),
        masks: Int32Array::new(r.masks),
        prompt_length: r.prompt_length,
        completion_length: r.completion_length,
        total_length: r.total_length as u32,
    }
}

fn for_trainer(
    tokenizer: &ChatTokenizer,
    messages: Vec<JsJson>,
    options: TrainerTokenizeOptions,
) -> SftResult<TokenizationResult> {
    let (messages, tools) = prepare_chat(JsJson::list(messages), options.tools.map(JsJson::list))?;
    let tok = template(tokenizer, &tools, options.enable_thinking);
    grpo::tokenize_for_trainer(
        &tok,
        &messages,
        options.add_generation_prompt.unwrap_or(false),
    )
}

fn conversation_for_trainer(
    tokenizer: &ChatTokenizer,
    messages: Vec<JsJson>,
    options: ConversationTokenizeOptions,
) -> SftResult<TokenizationResult> {
    let (messages, tools) = prepare_chat(JsJson::list(messages), options.tools.map(JsJson::list))?;
    let tok = template(tokenizer, &tools, options.enable_thinking);
    let conversation = ConversationOptions {
        mask_assistant_headers: options.mask_assistant_headers.unwrap_or(false),
    };
    grpo::tokenize_conversation_for_trainer(&tok, &messages, conversation)
}

fn batch_for_trainer(
    tokenizer: &ChatTokenizer,
    conversations: Vec<Vec<JsJson>>,
    options: TrainerTokenizeOptions,
) -> SftResult<Vec<TokenizationResult>> {
    let add_generation_prompt = options.add_generation_prompt.unwrap_or(false);
    let (_, tools) = prepare_chat(Vec::new(), options.tools.map(JsJson::list))?;
    conversations
        .into_par_iter()
        .enumerate()
        .map(|(i, messages)| {
            let mut messages = JsJson::list(messages);
            normalize_messages(&mut messages)
                .map_err(|e| e.context(format!("conversation {i}")))?;
            let tok = template(tokenizer, &tools, options.enable_thinking);
            grpo::tokenize_for_trainer(&tok, &messages, add_generation_prompt)
                .map_err(|e| e.context(format!("conversation {i}")))
        })
        .collect()
}

/// Labels for the last assistant message of `messages` (the completion); everything before it
/// is prompt. See `TokenizationResult` for the layout.
#[napi(ts_return_type = "Promise<TokenizationResult>")]
pub fn tokenize_for_trainer(
    tokenizer: &JsTokenizer,
    #[napi(ts_arg_type = "ChatMessage[]")] messages: Vec<JsJson>,
    options: Option<TrainerTokenizeOptions>,
) -> AsyncTask<Job<TokenizationResult, TrainerTokenization>> {
    let t = tokenizer.inner.clone();
    AsyncTask::new(Job::new(
        move || for_trainer(&t, messages, options.unwrap_or_default()),
        to_js,
    ))
}

#[napi]
pub fn tokenize_for_trainer_sync(
    tokenizer: &JsTokenizer,
    #[napi(ts_arg_type = "ChatMessage[]")] messages: Vec<JsJson>,
    options: Option<TrainerTokenizeOptions>,
) -> Result<TrainerTokenization> {
    run_sync(|| for_trainer(&tokenizer.inner, messages, options.unwrap_or_default()).map(convert))
}

/// Labels for every assistant message of `messages`; falls back to `tokenizeForTrainer`'s split
/// when the per-message pieces do not add up to the conversation (as in the reference).
#[napi(ts_return_type = "Promise<TokenizationResult>")]
pub fn tokenize_conversation_for_trainer(
    tokenizer: &JsTokenizer,
    #[napi(ts_arg_type = "ChatMessage[]")] messages: Vec<JsJson>,
    options: Option<ConversationTokenizeOptions>,
) -> AsyncTask<Job<TokenizationResult, TrainerTokenization>> {
    let t = tokenizer.inner.clone();
    AsyncTask::new(Job::new(
        move || conversation_for_trainer(&t, messages, options.unwrap_or_default()),
        to_js,
    ))
}

#[napi]
pub fn tokenize_conversation_for_trainer_sync(
    tokenizer: &JsTokenizer,
    #[napi(ts_arg_type = "ChatMessage[]")] messages: Vec<JsJson>,
    options: Option<ConversationTokenizeOptions>,
) -> Result<TrainerTokenization> {
    run_sync(|| {
        conversation_for_trainer(&tokenizer.inner, messages, options.unwrap_or_default())
            .map(convert)
    })
}

/// `tokenizeForTrainer` over many conversations, on all cores. An error names the conversation.
#[napi(ts_return_type = "Promise<TokenizationResult[]>")]
pub fn tokenize_for_trainer_batch(
    tokenizer: &JsTokenizer,
    #[napi(ts_arg_type = "ChatMessage[][]")] conversations: Vec<Vec<JsJson>>,
    options: Option<TrainerTokenizeOptions>,
) -> AsyncTask<Job<Vec<TokenizationResult>, Vec<TrainerTokenization>>> {
    let t: Arc<ChatTokenizer> = tokenizer.inner.clone();
    AsyncTask::new(Job::new(
        move || batch_for_trainer(&t, conversations, options.unwrap_or_default()),
        |_, rows| Ok(rows.into_iter().map(convert).collect()),
    ))
}

#[napi]
pub fn tokenize_for_trainer_batch_sync(
    tokenizer: &JsTokenizer,
    #[napi(ts_arg_type = "ChatMessage[][]")] conversations: Vec<Vec<JsJson>>,
    options: Option<TrainerTokenizeOptions>,
) -> Result<Vec<TrainerTokenization>> {
    run_sync(|| {
        batch_for_trainer(&tokenizer.inner, conversations, options.unwrap_or_default())
            .map(|rows| rows.into_iter().map(convert).collect())
    })
}

#[napi(object)]
pub struct MaskValidation {
    pub is_valid: bool,
    /// The reference's issue strings, in its order.
    pub issues: Vec<String>,
}

/// The reference's mask checks: equal lengths, some masked and some trained tokens, trained
/// masks equal to their tokens, no legacy 0/1 flags.
#[napi]
pub fn validate_masks(
    tokens: IdsInput,
    masks: IdsInput,
    options: Option<MaskCheckOptions>,
) -> Result<MaskValidation> {
    run_sync(|| {
        let strict = options
            .and_then(|o| o.strict_legacy_detection)
            .unwrap_or(false);
        let issues = grpo::validate_masks(
            &token_ids(&tokens, "tokens")?,
            &mask_values(&masks, "masks")?,
            strict,
        );
        Ok(MaskValidation {
            is_valid: issues.is_empty(),
            issues,
        })
    })
}

/// -100 before `responseStart` (clamped to the sequence), the token ids from it on.
#[napi]
pub fn create_masks_from_response_start(
    tokens: IdsInput,
    response_start: i64,
) -> Result<Int32Array> {
    run_sync(|| {
        let tokens = token_ids(&tokens, "tokens")?;
        Ok(Int32Array::new(grpo::create_masks_from_response_start(
            &tokens,
            response_start,
        )))
    })
}

/// Repairs the masks of historical data as the reference does (see `grpo::fix_historical_masks`):
/// legacy or constant masks are recomputed from `messages`, valid ones kept, others recomputed
/// or cut after the last assistant marker, else returned unchanged.
#[napi(ts_return_type = "Promise<Int32Array>")]
pub fn fix_historical_masks(
    tokens: IdsInput,
    masks: IdsInput,
    tokenizer: &JsTokenizer,
    #[napi(ts_arg_type = "ChatMessage[]")] messages: Vec<JsJson>,
    options: Option<MaskCheckOptions>,
) -> AsyncTask<Job<Vec<i32>, Int32Array>> {
    let t = tokenizer.inner.clone();
    let inputs = token_ids(&tokens, "tokens").and_then(|t| Ok((t, mask_values(&masks, "masks")?)));
    AsyncTask::new(Job::new(
        move || {
            let (tokens, masks) = inputs?;
            let o = options.unwrap_or_default();
            let (messages, tools) =
                prepare_chat(JsJson::list(messages), o.tools.map(JsJson::list))?;
            let tok = template(&t, &tools, o.enable_thinking);
            let strict = o.strict_legacy_detection.unwrap_or(false);
            grpo::fix_historical_masks(&tok, &tokens, &masks, &messages, strict)
        },
        |_, masks| Ok(Int32Array::new(masks)),
    ))
}
