//! Label masks for RL (GRPO) trainers: `-100` where no loss is taken, the token id where it is.
//!
//! The semantics are those of the reference's tokenization utilities run with a Python
//! `transformers` tokenizer, fallbacks and quirks included: a prompt/completion split taken from
//! the length of the prompt rendered with a generation prompt, a per-message conversation split
//! taken from the lengths of prefix renders, the validity checks with their exact issue strings,
//! and the repair of historical masks. The labels themselves are written by `masking`.
//!
//! Two corrections are opt-in, the defaults being the reference's behaviour:
//! - `ConversationOptions::mask_assistant_headers` (see there);
//! - `strict` legacy detection in `validate_masks` and `fix_historical_masks` (see
//!   `looks_legacy`).

use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::mask::spans::prefix_token_counts;
use crate::mask::{spans_from, write_labels, IGNORE_INDEX};
use crate::render::RenderOptions;
use crate::tokenize::ChatTokenizer;

/// What the mask utilities need from a tokenizer: the reference's `ChatTokenizer` protocol.
pub trait TrainerTokenizer {
    /// `apply_chat_template(messages, add_generation_prompt=...)` as token ids.
    fn chat_ids(&self, messages: &[Json], add_generation_prompt: bool) -> SftResult<Vec<u32>>;
    /// `encode(text, add_special_tokens=False)`.
    fn encode_text(&self, text: &str) -> SftResult<Vec<u32>>;
    /// The prefix render lengths of `messages` (see `PrefixCounts`) computed without rendering
    /// every prefix, where the tokenizer can; `None` leaves them to `chat_ids`.
    fn prefix_counts(&self, _messages: &[Json]) -> SftResult<Option<PrefixCounts>> {
        Ok(None)
    }
}

/// The token counts a conversation split is made of: the full render's `tokens`, and for every
/// message `i` the length of `messages[..=i]` rendered (`through[i]`) and, for assistants after
/// the first message, of `messages[..i]` rendered with the generation prompt (`prompt[i]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixCounts {
    pub tokens: Vec<u32>,
    pub through: Vec<usize>,
    pub prompt: Vec<Option<usize>>,
}

/// A `ChatTokenizer` with the template arguments every render of one call shares.
pub struct TemplateTokenizer<'a> {
    pub tokenizer: &'a ChatTokenizer,
    /// Normalized tool definitions (`message::normalize_tools`).
    pub tools: Option<&'a Json>,
    /// `None` leaves `enable_thinking` undefined in the template.
    pub enable_thinking: Option<bool>,
}

impl TrainerTokenizer for TemplateTokenizer<'_> {
    fn chat_ids(&self, messages: &[Json], add_generation_prompt: bool) -> SftResult<Vec<u32>> {
        // transformers indexes the first message before rendering and raises IndexError on an
        // empty conversation; the reference reaches this when the first message is its last
        // assistant turn.
        if messages.is_empty() {
            return Err(SftError::new(
                ErrorCode::InvalidArgument,
                "cannot render an empty conversation (the prompt before the last assistant message is empty)",
            ));
        }
        self.tokenizer.apply_chat_template(
            messages,
            &RenderOptions {
                tools: self.tools,
                add_generation_prompt,
                enable_thinking: self.enable_thinking,
                ..Default::default()
            },
        )
    }

    fn encode_text(&self, text: &str) -> SftResult<Vec<u32>> {
        self.tokenizer.encode(text, false)
    }

    fn prefix_counts(&self, messages: &[Json]) -> SftResult<Option<PrefixCounts>> {
        if messages.is_empty() {
            return Ok(None);
        }
        let opts = RenderOptions {
            tools: self.tools,
            enable_thinking: self.enable_thinking,
            ..Default::default()
        };
        let full = self.tokenizer.render(messages, &opts)?;
        let encoded = self.tokenizer.encode_with_offsets(&full)?;
        let counts = prefix_token_counts(self.tokenizer, messages, &opts, &full, &encoded, |i| {
            i > 0 && is_assistant(&messages[i])
        })?;
        let (through, prompt) = counts.into_iter().unzip();
        Ok(Some(PrefixCounts {
            tokens: encoded.ids,
            through,
            prompt,
        }))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenizationResult {
    pub tokens: Vec<u32>,
    pub masks: Vec<i32>,
    /// Negative when the reference's fallback finds the completion longer than the sequence.
    pub prompt_length: i64,
    pub completion_length: i64,
    pub total_length: usize,
}

/// Options of `tokenize_conversation_for_trainer`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConversationOptions {
    /// The reference takes an assistant message's tokens as everything its prefix render adds,
    /// rendered without a generation prompt, so the role header (`<|im_start|>assistant\n`) is
    /// trained. With this set, the part of the message that the prefix rendered *with* a
    /// generation prompt already holds is masked, as a model sees it at inference. An assistant
    /// message that opens the conversation has no prefix to render and stays fully trained.
    pub mask_assistant_headers: bool,
}

fn is_assistant(message: &Json) -> bool {
    message.get("role").and_then(Json::as_str) == Some("assistant")
}

/// Appends the labels of `ids[start..end]`, the token ids when `trained`, with Python slice
/// semantics: a range past the end of `ids` is cut, an inverted one is empty.
fn push_chunk(out: &mut Vec<i32>, ids: &[u32], start: usize, end: usize, trained: bool) {
    let (start, end) = if trained {
        (start.min(ids.len()), end.min(ids.len()))
    } else {
        (start, end)
    };
    if start >= end {
        return;
    }
    let at = out.len();
    out.resize(at + (end - start), 0);
    let spans = if trained {
        spans_from(start, end)
    } else {
        Vec::new()
    };
    write_labels(ids, &spans, start..end, &mut out[at..]);
}

/// `[-100] * prompt_length + full[prompt_length:]`, then the reference's length repair (append
/// the missing tail of `full`, or cut). A negative `prompt_length` is a Python slice from the end.
fn split_labels(full: &[u32], prompt_length: i64) -> Vec<i32> {
    let len = full.len();
    let mut masks = Vec::with_capacity(len);
    if prompt_length >= 0 {
        let p = prompt_length as usize;
        push_chunk(&mut masks, full, 0, p, false);
        push_chunk(&mut masks, full, p, len, true);
    } else {
        let from_end = prompt_length.unsigned_abs().min(len as u64) as usize;
        push_chunk(&mut masks, full, len - from_end, len, true);
    }
    if masks.len() < len {
        let have = masks.len();
        push_chunk(&mut masks, full, have, len, true);
    }
    masks.truncate(len);
    masks
}

/// The text the reference encodes on its own when the split comes out negative.
fn completion_text(message: &Json) -> SftResult<&str> {
    match message.get("content") {
        None => Ok(""),
        Some(Json::String(s)) => Ok(s),
        Some(_) => Err(SftError::new(
            ErrorCode::InvalidMessage,
            "the last assistant message must have string content to be encoded on its own",
        )),
    }
}

/// The last assistant message is the completion, everything before it the prompt. The split is
/// the length of the prompt rendered with a generation prompt. Without an assistant message
/// everything is prompt, rendered with `add_generation_prompt`.
pub fn tokenize_for_trainer(
    tok: &impl TrainerTokenizer,
    messages: &[Json],
    add_generation_prompt: bool,
) -> SftResult<TokenizationResult> {
    if messages.is_empty() {
        return Ok(TokenizationResult::default());
    }
    let Some(last) = messages.iter().rposition(is_assistant) else {
        let tokens = tok.chat_ids(messages, add_generation_prompt)?;
        let len = tokens.len();
        return Ok(TokenizationResult {
            masks: split_labels(&tokens, len as i64),
            prompt_length: len as i64,
            completion_length: 0,
            total_length: len,
            tokens,
        });
    };
    let prompt = tok.chat_ids(&messages[..last], true)?;
    let tokens = tok.chat_ids(messages, false)?;
    let mut prompt_length = prompt.len() as i64;
    let mut completion_length = tokens.len() as i64 - prompt_length;
    if completion_length < 0 {
        // The prompt rendered with a generation prompt is longer than the whole conversation
        // (a template that renders earlier turns differently once they are not last): the
        // reference then counts the completion as its content encoded alone.
        let content = completion_text(&messages[last])?;
        completion_length = tok.encode_text(content)?.len() as i64;
        prompt_length = tokens.len() as i64 - completion_length;
    }
    Ok(TokenizationResult {
        masks: split_labels(&tokens, prompt_length),
        prompt_length,
        completion_length,
        total_length: tokens.len(),
        tokens,
    })
}

/// Every assistant message is trained, every other message masked. A message's tokens are what
/// the render of the conversation up to it adds to the render up to the message before; the
/// pieces are concatenated as they come (the reference does not re-align them), and when their
/// total length differs from the full render the result is `tokenize_for_trainer`'s.
pub fn tokenize_conversation_for_trainer(
    tok: &impl TrainerTokenizer,
    messages: &[Json],
    options: ConversationOptions,
) -> SftResult<TokenizationResult> {
    if messages.is_empty() {
        return Ok(TokenizationResult::default());
    }
    // The opt-in header masking takes its prefix lengths from one render where the tokenizer
    // can (linear); the reference semantics keep the reference's prefix renders.
    let counts = if options.mask_assistant_headers {
        tok.prefix_counts(messages)?
    } else {
        None
    };
    let tokens = match &counts {
        Some(c) => c.tokens.clone(),
        None => tok.chat_ids(messages, false)?,
    };
    let mut masks = Vec::with_capacity(tokens.len());
    let mut current = 0usize;
    for (i, message) in messages.iter().enumerate() {
        let end = match &counts {
            Some(c) => c.through[i],
            None => tok.chat_ids(&messages[..=i], false)?.len(),
        };
        if is_assistant(message) {
            let mut body_start = current;
            if options.mask_assistant_headers && i > 0 {
                let header_end = match counts.as_ref().and_then(|c| c.prompt[i]) {
                    Some(n) => n,
                    None => tok.chat_ids(&messages[..i], true)?.len(),
                };
                push_chunk(&mut masks, &tokens, current, header_end, false);
                body_start = body_start.max(header_end);
            }
            push_chunk(&mut masks, &tokens, body_start, end, true);
        } else {
            push_chunk(&mut masks, &tokens, current, end, false);
        }
        current = end;
    }
    if masks.len() != tokens.len() {
        return tokenize_for_trainer(tok, messages, false);
    }
    let prompt_length = masks.iter().filter(|&&m| m == IGNORE_INDEX).count();
    Ok(TokenizationResult {
        prompt_length: prompt_length as i64,
        completion_length: (masks.len() - prompt_length) as i64,
        total_length: tokens.len(),
        tokens,
        masks,
    })
}

/// The reference's legacy test: every mask is 0 or 1 (and there is at least one). `strict` does
/// not call masks legacy when they are valid labels that happen to be token ids 0 and 1 (every
/// mask equal to its token), which the reference cannot tell from 0/1 flags.
fn looks_legacy(tokens: &[u32], masks: &[i32], strict: bool) -> bool {
    let flags = !masks.is_empty() && masks.iter().all(|&m| m == 0 || m == 1);
    flags && !(strict && masks_equal_tokens(tokens, masks))
}

fn masks_equal_tokens(tokens: &[u32], masks: &[i32]) -> bool {
    tokens.len() == masks.len()
        && tokens
            .iter()
            .zip(masks)
            .all(|(&t, &m)| i64::from(m) == i64::from(t))
}

/// The reference's checks, with its issue strings; empty means valid.
pub fn validate_masks(tokens: &[u32], masks: &[i32], strict: bool) -> Vec<String> {
    let mut issues = Vec::new();
    if tokens.len() != masks.len() {
        issues.push(format!(
            "Length mismatch: {} tokens vs {} masks",
            tokens.len(),
            masks.len()
        ));
    }
    if !masks.contains(&IGNORE_INDEX) {
        issues.push("No masked tokens (no prompt) - should have -100 values".to_string());
    }
    if !masks.iter().any(|&m| m != IGNORE_INDEX) {
        issues.push("No unmasked tokens (no completion) - should have token ID values".to_string());
    }
    let first_wrong = tokens
        .iter()
        .zip(masks)
        .enumerate()
        .find(|&(_, (&t, &m))| m != IGNORE_INDEX && i64::from(m) != i64::from(t));
    if let Some((i, (t, m))) = first_wrong {
        issues.push(format!(
            "Mask mismatch at position {i}: mask={m} but token={t}. Trainable tokens should have mask=token_id."
        ));
    }
    if looks_legacy(tokens, masks, strict) {
        issues.push(
            "LEGACY MASK FORMAT DETECTED: Using 0/1 instead of -100/token_id. This will train on ALL tokens incorrectly!"
                .to_string(),
        );
    }
    issues
}

/// `-100` before `response_start` (clamped to the sequence), the token ids from it on.
pub fn create_masks_from_response_start(tokens: &[u32], response_start: i64) -> Vec<i32> {
    let start = response_start.clamp(0, tokens.len() as i64) as usize;
    let mut masks = vec![0; tokens.len()];
    write_labels(
        tokens,
        &spans_from(start, tokens.len()),
        0..tokens.len(),
        &mut masks,
    );
    masks
}

/// Turn markers the reference looks for, last occurrence first, when re-tokenizing the messages
/// does not reproduce the stored sequence.
const ASSISTANT_MARKERS: [&str; 3] = ["assistant", "<|assistant|>", "<start_of_turn>model"];

/// Repairs masks of historical data. Legacy 0/1 masks (and masks that are all one value) are
/// replaced by `tokenize_for_trainer`'s, whatever their length; valid masks are kept; otherwise
/// the recomputed masks are used when their length fits, else the response is taken to start
/// after the last assistant marker, else the masks come back unchanged.
pub fn fix_historical_masks(
    tok: &impl TrainerTokenizer,
    tokens: &[u32],
    masks: &[i32],
    messages: &[Json],
    strict: bool,
) -> SftResult<Vec<i32>> {
    // An empty mask list counts as "all the same" for the reference, so `looks_legacy` needing
    // at least one mask changes nothing here.
    let all_same = masks.iter().all(|&m| Some(&m) == masks.first());
    if looks_legacy(tokens, masks, strict) || all_same {
        return Ok(tokenize_for_trainer(tok, messages, false)?.masks);
    }
    if validate_masks(tokens, masks, strict).is_empty() {
        return Ok(masks.to_vec());
    }
    let recomputed = tokenize_for_trainer(tok, messages, false)?;
    if recomputed.masks.len() == tokens.len() {
        return Ok(recomputed.masks);
    }
    for marker in ASSISTANT_MARKERS {
        let marker = tok.encode_text(marker)?;
        if marker.is_empty() || marker.len() > tokens.len() {
            continue;
        }
        if let Some(at) = tokens.windows(marker.len()).rposition(|w| w == marker) {
            return Ok(create_masks_from_response_start(
                tokens,
                (at + marker.len()) as i64,
            ));
        }
    }
    Ok(masks.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example::message::normalize_messages;
    use serde_json::json;
    use std::cell::RefCell;

    const H: i32 = IGNORE_INDEX;

    /// A tokenizer whose renders are scripted: every call returns the next ids of `renders` and
    /// records whether it asked for a generation prompt; `encode_text` returns `encoded`.
    struct Scripted {
        renders: RefCell<Vec<Vec<u32>>>,
        encoded: Vec<u32>,
        calls: RefCell<Vec<(usize, bool)>>,
    }

    impl Scripted {
        fn new(renders: Vec<Vec<u32>>, encoded: Vec<u32>) -> Self {
            Scripted {
                renders: RefCell::new(renders.into_iter().rev().collect()),
                encoded,
                calls: RefCell::new(Vec::new()),
            }
        }
    }

    impl TrainerTokenizer for Scripted {
        fn chat_ids(&self, messages: &[Json], gen: bool) -> SftResult<Vec<u32>> {
            self.calls.borrow_mut().push((messages.len(), gen));
            self.renders
                .borrow_mut()
                .pop()
                .ok_or_else(|| SftError::new(ErrorCode::Internal, "script ran out"))
        }
        fn encode_text(&self, _: &str) -> SftResult<Vec<u32>> {
            Ok(self.encoded.clone())
        }
    }

    fn msgs(roles: &[&str]) -> Vec<Json> {
        roles
            .iter()
            .map(|r| json!({"role": r, "content": "c"}))
            .collect()
    }

    #[test]
    fn split_at_the_prompt_with_generation_prompt() {
        let tok = Scripted::new(vec![vec![1, 2, 3], vec![1, 2, 3, 4, 5]], vec![]);
        let r = tokenize_for_trainer(&tok, &msgs(&["user", "assistant"]), false).unwrap();
        assert_eq!(r.masks, vec![H, H, H, 4, 5]);
        assert_eq!(
            (r.prompt_length, r.completion_length, r.total_length),
            (3, 2, 5)
        );
        assert_eq!(*tok.calls.borrow(), vec![(1, true), (2, false)]);
    }

    #[test]
    fn no_assistant_is_all_prompt_with_the_callers_generation_prompt() {
        let tok = Scripted::new(vec![vec![7, 8]], vec![]);
        let r = tokenize_for_trainer(&tok, &msgs(&["system", "user"]), true).unwrap();
        assert_eq!(r.masks, vec![H, H]);
        assert_eq!((r.prompt_length, r.completion_length), (2, 0));
        assert_eq!(*tok.calls.borrow(), vec![(2, true)]);
    }

    #[test]
    fn negative_completion_counts_the_content_alone() {
        let tok = Scripted::new(vec![vec![1, 2, 3, 4, 5, 6], vec![1, 2, 3, 9, 9]], vec![9]);
        let r = tokenize_for_trainer(&tok, &msgs(&["user", "assistant"]), false).unwrap();
        assert_eq!(r.masks, vec![H, H, H, H, 9]);
        assert_eq!((r.prompt_length, r.completion_length), (4, 1));
    }

    #[test]
    fn content_longer_than_the_sequence_slices_from_the_end_then_repairs() {
        // prompt_length = 3 - 5 = -2: Python's full[-2:] is [12, 13], then the length repair
        // appends full[2:].
        let tok = Scripted::new(vec![vec![1, 2, 3, 4], vec![11, 12, 13]], vec![0; 5]);
        let r = tokenize_for_trainer(&tok, &msgs(&["user", "assistant"]), false).unwrap();
        assert_eq!(r.masks, vec![12, 13, 13]);
        assert_eq!((r.prompt_length, r.completion_length), (-2, 5));
        assert_eq!(split_labels(&[11, 12, 13], -7), vec![11, 12, 13]);
    }

    #[test]
    fn non_string_content_cannot_take_the_fallback() {
        let tok = Scripted::new(vec![vec![1, 2, 3], vec![1]], vec![]);
        let messages = vec![
            json!({"role": "user"}),
            json!({"role": "assistant", "content": null}),
        ];
        let err = tokenize_for_trainer(&tok, &messages, false).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidMessage);
    }

    #[test]
    fn conversation_concatenates_prefix_differences() {
        let tok = Scripted::new(
            vec![
                vec![1, 2, 3, 4, 5, 6, 7],
                vec![1, 2],
                vec![1, 2, 3, 4],
                vec![1, 2, 3, 4, 5],
                vec![1, 2, 3, 4, 5, 6, 7],
            ],
            vec![],
        );
        let r = tokenize_conversation_for_trainer(
            &tok,
            &msgs(&["user", "assistant", "user", "assistant"]),
            ConversationOptions::default(),
        )
        .unwrap();
        assert_eq!(r.masks, vec![H, H, 3, 4, H, 6, 7]);
        assert_eq!((r.prompt_length, r.completion_length), (3, 4));
    }

    #[test]
    fn conversation_falls_back_when_the_pieces_do_not_add_up() {
        // The second prefix is shorter than the first (a turn rendered differently once it is
        // no longer last): the pieces overlap, their total exceeds the sequence, and the result
        // is the prompt/completion split.
        let tok = Scripted::new(
            vec![
                vec![1, 2, 3, 4, 5, 6],
                vec![1, 2, 3, 4],
                vec![1, 2],
                vec![1, 2, 3, 4, 5, 6],
                vec![1, 2, 3],
                vec![1, 2, 3, 4, 5, 6],
            ],
            vec![],
        );
        let r = tokenize_conversation_for_trainer(
            &tok,
            &msgs(&["assistant", "user", "assistant"]),
            ConversationOptions::default(),
        )
        .unwrap();
        assert_eq!(r.masks, vec![H, H, H, 4, 5, 6]);
        assert_eq!((r.prompt_length, r.completion_length), (3, 3));
        assert_eq!(tok.calls.borrow()[4], (2, true));
    }

    #[test]
    fn assistant_headers_are_masked_on_request() {
        let renders = || {
            vec![
                vec![1, 2, 3, 4, 5, 6, 7],
                vec![1, 2],
                vec![1, 2, 3, 4, 5, 6, 7],
            ]
        };
        let messages = msgs(&["user", "assistant"]);
        let plain = Scripted::new(renders(), vec![]);
        let r =
            tokenize_conversation_for_trainer(&plain, &messages, ConversationOptions::default())
                .unwrap();
        assert_eq!(r.masks, vec![H, H, 3, 4, 5, 6, 7]);

        let mut scripted = renders();
        scripted.push(vec![1, 2, 3, 4]);
        let corrected = Scripted::new(scripted, vec![]);
        let options = ConversationOptions {
            mask_assistant_headers: true,
        };
        let r = tokenize_conversation_for_trainer(&corrected, &messages, options).unwrap();
        assert_eq!(r.masks, vec![H, H, H, H, 5, 6, 7]);
        assert_eq!((r.prompt_length, r.completion_length), (4, 3));
        assert_eq!(corrected.calls.borrow()[3], (1, true));
    }

    #[test]
    fn validate_reports_every_issue_in_the_reference_wording() {
        assert!(validate_masks(&[5, 6, 7], &[H, 6, 7], false).is_empty());
        assert_eq!(
            validate_masks(&[5, 6, 7], &[H, 9, 8, 1], false),
            vec![
                "Length mismatch: 3 tokens vs 4 masks".to_string(),
                "Mask mismatch at position 1: mask=9 but token=6. Trainable tokens should have mask=token_id.".to_string(),
            ]
        );
        assert_eq!(
            validate_masks(&[5, 6], &[1, 1], false),
            vec![
                "No masked tokens (no prompt) - should have -100 values".to_string(),
                "Mask mismatch at position 0: mask=1 but token=5. Trainable tokens should have mask=token_id.".to_string(),
                "LEGACY MASK FORMAT DETECTED: Using 0/1 instead of -100/token_id. This will train on ALL tokens incorrectly!".to_string(),
            ]
        );
        assert_eq!(
            validate_masks(&[], &[], false),
            vec![
                "No masked tokens (no prompt) - should have -100 values".to_string(),
                "No unmasked tokens (no completion) - should have token ID values".to_string(),
            ]
        );
    }

    #[test]
    fn strict_legacy_detection_spares_real_ids_0_and_1() {
        let tokens = [0, 1, 1, 0];
        let masks = [0, 1, 1, 0];
        let legacy = "LEGACY MASK FORMAT DETECTED: Using 0/1 instead of -100/token_id. This will train on ALL tokens incorrectly!";
        assert_eq!(
            validate_masks(&tokens, &masks, false).last().unwrap(),
            legacy
        );
        assert_eq!(
            validate_masks(&tokens, &masks, true),
            vec!["No masked tokens (no prompt) - should have -100 values".to_string()]
        );
        // Flags that are not the tokens stay legacy in strict mode.
        assert_eq!(
            validate_masks(&[0, 1], &[1, 1], true).last().unwrap(),
            legacy
        );
    }

    #[test]
    fn response_start_is_clamped() {
        assert_eq!(
            create_masks_from_response_start(&[5, 6, 7], 1),
            vec![H, 6, 7]
        );
        assert_eq!(
            create_masks_from_response_start(&[5, 6, 7], -4),
            vec![5, 6, 7]
        );
        assert_eq!(
            create_masks_from_response_start(&[5, 6, 7], 9),
            vec![H, H, H]
        );
    }

    #[test]
    fn fix_paths() {
        // Legacy flags: recomputed whatever the length.
        let tok = Scripted::new(vec![vec![1], vec![1, 2, 3]], vec![]);
        let fixed =
            fix_historical_masks(&tok, &[1, 2], &[1, 1], &msgs(&["user", "assistant"]), false);
        assert_eq!(fixed.unwrap(), vec![H, 2, 3]);
        // Valid masks are kept without rendering anything.
        let tok = Scripted::new(vec![], vec![]);
        let fixed = fix_historical_masks(&tok, &[4, 5, 6], &[H, 5, 6], &[], false);
        assert_eq!(fixed.unwrap(), vec![H, 5, 6]);
        // Invalid, recomputed length differs, marker found: masks start after its last match.
        let tok = Scripted::new(vec![vec![1], vec![1, 2]], vec![8, 9]);
        let fixed = fix_historical_masks(
            &tok,
            &[8, 9, 3, 8, 9, 4, 5],
            &[H, 7, 7, 7, 7, 7, H],
            &msgs(&["user", "assistant"]),
            false,
        );
        assert_eq!(fixed.unwrap(), vec![H, H, H, H, H, 4, 5]);
        // No marker anywhere: the masks come back as given.
        let tok = Scripted::new(vec![vec![1], vec![1, 2]], vec![42]);
        let fixed = fix_historical_masks(
            &tok,
            &[3, 4, 5],
            &[H, 9, 5],
            &msgs(&["user", "assistant"]),
            false,
        );
        assert_eq!(fixed.unwrap(), vec![H, 9, 5]);
    }

    #[test]
    fn qwen3_split_and_conversation() {
        let t = crate::test_support::load_family("qwen3");
        let mut messages = vec![
            json!({"role": "user", "content": "x"}),
            json!({"role": "assistant", "content": "y"}),
        ];
        normalize_messages(&mut messages).unwrap();
        let tok = TemplateTokenizer {
            tokenizer: &t,
            tools: None,
            enable_thinking: Some(false),
        };
        let r = tokenize_for_trainer(&tok, &messages, false).unwrap();
        assert_eq!(
            r.tokens,
            vec![
                151644, 872, 198, 87, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271,
                88, 151645, 198
            ]
        );
        assert_eq!(
            r.masks,
            vec![H, H, H, H, H, H, H, H, H, H, H, H, H, 88, 151645, 198]
        );
        let c = tokenize_conversation_for_trainer(&tok, &messages, ConversationOptions::default())
            .unwrap();
        assert_eq!(
            c.masks,
            vec![H, H, H, H, H, H, 151644, 77091, 198, 151667, 271, 151668, 271, 88, 151645, 198]
        );
        let c = tokenize_conversation_for_trainer(
            &tok,
            &messages,
            ConversationOptions {
                mask_assistant_headers: true,
            },
        )
        .unwrap();
        assert_eq!(c.masks, r.masks);
        assert_eq!(
            tokenize_for_trainer(&tok, &messages[1..], false)
                .unwrap_err()
                .code,
            ErrorCode::InvalidArgument
        );
    }
}
