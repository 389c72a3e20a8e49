//! Where each message sits in a rendered conversation, for any chat template.
//!
//! The full conversation is rendered and tokenized once. Every position below is a byte offset
//! in that one text; extra renders of parts of the conversation are only compared with it.
//! Those renders are defined on prefixes of the conversation (below) but computed from short
//! windows of it wherever a window proves to render like the prefix (see `Windows`), so that
//! locating is linear in the length of the conversation, not quadratic.
//!
//! For message `i`:
//! - **header end** `h`: for an assistant, the longest common prefix of the full text and
//!   `messages[..i]` rendered with the generation prompt (what the model is prompted with); for
//!   any other role, of the full text and `messages[..=i]` rendered with message `i`'s content
//!   emptied. Either is moved back to the start of the token it falls in, so that a content
//!   starting like the text after the header (`<` after `<|im_start|>assistant\n`) cannot pull
//!   the header into the content. A token that joins the header's last characters with the
//!   content's first (`\n\n` from `assistant\n` and a content starting with `\n`) is therefore
//!   part of the body, not a straddling token.
//! - **content**: the message content as the template prints it, searched from
//!   `max(h, end of the previous content)`. The forms tried are the content itself, the content
//!   trimmed (Llama, Gemma), and for an assistant without `reasoning_content` the part after the
//!   last `</think>` with leading newlines removed (Qwen3). A form found at the search start
//!   wins (the longest one); otherwise the earliest match starting before the next end-of-turn
//!   token, then the longest.
//! - **turn end**: the template's end-of-turn token, learned once per template from the first
//!   added token after the assistant content in a two-message probe render (`<|im_end|>`,
//!   `<|eot_id|>`, `<end_of_turn>`, `<｜end▁of▁sentence｜>`). Its first occurrence after the
//!   content and before the next message's header end closes the turn.
//! - **body** (assistants): from the search start to the turn end; without a turn end, to the end
//!   of `messages[..=i]` rendered alone when that render is a prefix of the full text
//!   (DeepSeek V3's single tool call has no closing token), else to the end of the content. The
//!   body holds reasoning and tool calls as well as the content.
//! - **reasoning** (assistants): from the first `<think>` (or the body start) to the last
//!   `</think>` before the content end, and the newlines after it.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::Value as Json;

use super::text_search;
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::json_value;
use crate::render::RenderOptions;
use crate::tokenize::encoded::EncodedText;
use crate::tokenize::{common_prefix_len, ChatTokenizer};
use contents::{content_forms, locate, locate_once};

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// A template's end-of-turn token: its text and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    pub text: String,
    pub id: u32,
}

/// Learns the end-of-turn token from `[user "x", assistant "y"]`: the first added token after
/// `y`. `None` when the template cannot render the probe or closes turns with plain text.
pub fn discover_turn_end(tokenizer: &ChatTokenizer, opts: &RenderOptions) -> Option<TurnEnd> {
    let probe = [
        serde_json::json!({"role": "user", "content": "x"}),
        serde_json::json!({"role": "assistant", "content": "y"}),
    ];
    let opts = RenderOptions {
        plain_errors: true,
        ..*opts
    };
    let text = tokenizer.render(&probe, &opts).ok()?;
    let tail = &text[text.rfind('y')? + 1..];
    let encoded = tokenizer.encode_with_offsets(tail).ok()?;
    encoded
        .ids
        .iter()
        .zip(&encoded.offsets)
        .find(|(id, _)| tokenizer.is_added_token(**id))
        .map(|(&id, &(start, end))| TurnEnd {
            text: tail[start..end].to_string(),
            id,
        })
}

/// One message located in the full text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageLayout {
    pub role: String,
    /// The content as printed, when one of its forms was found; `None` for a message whose
    /// content is empty or not text.
    pub content: Option<Range<usize>>,
    /// The content has text but none of its forms was found: nothing of it can be trained.
    pub content_missing: bool,
    /// Assistants: what the model generates (reasoning, content, tool calls). Other roles: the
    /// content.
    pub body: Range<usize>,
    pub turn_end: Option<Range<usize>>,
    pub reasoning: Option<Range<usize>>,
    /// Assistants: the generation prompt is not a prefix of the full text (the template renders
    /// earlier turns differently once a later message exists).
    pub prefix_mismatch: bool,
}

fn char_floor(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn common_prefix(a: &str, b: &str) -> usize {
    char_floor(a, common_prefix_len(a.as_bytes(), b.as_bytes()))
}

/// The start of the token that byte `at` falls in (`at` itself at the end of the text).
fn token_floor(encoded: &EncodedText, text_len: usize, at: usize) -> usize {
    if at >= text_len {
        return text_len;
    }
    let k = encoded.offsets.partition_point(|&(start, _)| start <= at);
    if k == 0 {
        0
    } else {
        encoded.offsets[k - 1].0
    }
}

fn role_of(message: &Json) -> &str {
    json_value::str_field(message, "role").unwrap_or_default()
}

fn with_empty_content(message: &Json) -> Json {
    let Json::Object(map) = message else {
        return message.clone();
    };
    // Every other field copied in its place; the content (often the longest) is not copied.
    let mut emptied = serde_json::Map::with_capacity(map.len() + 1);
    for (key, value) in map {
        let value = match key.as_str() {
            "content" => Json::String(String::new()),
            _ => value.clone(),
        };
        emptied.insert(key.clone(), value);
    }
    if !emptied.contains_key("content") {
        emptied.insert("content".to_string(), Json::String(String::new()));
    }
    Json::Object(emptied)
}

/// What rendering part of the conversation gives, compared with the full text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    /// The longest common prefix with the full text, at a character boundary of the part.
    shared: usize,
    /// The length of the part's render.
    len: usize,
    /// `(at, text)`: the render from byte `at` (at most `shared`) to its end.
    tail: (usize, String),
}

/// The parts of the conversation the locator compares with the full text, for message `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// `messages[..i]` with the generation prompt (an assistant's header).
    Prompt,
    /// `messages[..i]` and message `i` with its content emptied (any other role's header).
    Emptied,
    /// `messages[..=i]` (where an assistant's turn ends without an end-of-turn token).
    Through,
}

/// Where the locator gets its prefix renders from.
trait Prober {
    /// The render of `part` for message `i` compared with the full text; `None` when the
    /// template cannot render it.
    fn probe(&mut self, i: usize, part: Part) -> SftResult<Option<Probe>>;
    /// Message `i` was located: its content is at `content` in the full text.
    fn located(&mut self, _i: usize, _content: Option<&Range<usize>>) {}
}

/// Every part rendered as it is: the definition of the spans, quadratic in the number of
/// messages.
struct PrefixRenders<'a> {
    tokenizer: &'a ChatTokenizer,
    messages: &'a [Json],
    /// The caller's options; a render that fails is only compared, so its error keeps
    /// minijinja's words (`plain_errors`).
    opts: RenderOptions<'a>,
    with_prompt: RenderOptions<'a>,
    full: &'a str,
    /// Messages rendered so far, for the render budget.
    rendered: u64,
    /// A copy of the messages up to the last one emptied so far: message `i` is emptied in
    /// place for its render and given its content back after, so that no prefix is copied.
    scratch: Option<Vec<Json>>,
}

impl<'a> PrefixRenders<'a> {
    fn new(
        tokenizer: &'a ChatTokenizer,
        messages: &'a [Json],
        opts: &'a RenderOptions<'a>,
        full: &'a str,
    ) -> Self {
        PrefixRenders {
            tokenizer,
            messages,
            opts: RenderOptions {
                plain_errors: true,
                ..*opts
            },
            // The caller's tools and template arguments, as the full render has them.
            with_prompt: RenderOptions {
                add_generation_prompt: true,
                continue_final_message: false,
                plain_errors: true,
                ..*opts
            },
            full,
            rendered: 0,
            scratch: None,
        }
    }

    /// Renders `list`, the part of message `i` given by `part` (whole or windowed).
    fn render(&mut self, list: &[Json], part: Part) -> Option<String> {
        self.rendered += list.len() as u64;
        let opts = if part == Part::Prompt {
            &self.with_prompt
        } else {
            &self.opts
        };
        // The first message emptied (for most datasets the same list in every example) is
        // rendered once and reused.
        if part == Part::Emptied && list.len() == 1 {
            return self.tokenizer.render_reusing(list, opts).ok();
        }
        self.tokenizer.render(list, opts).ok()
    }

    /// `messages[from..end]` after the leading `head` messages, then message `i` emptied for
    /// `Part::Emptied`: borrowed where that is one run of the conversation.
    fn list(&self, head: usize, from: usize, i: usize, part: Part) -> Cow<'a, [Json]> {
        let end = if part == Part::Through { i + 1 } else { i };
        if part != Part::Emptied && head == from {
            return Cow::Borrowed(&self.messages[..end]);
        }
        let mut list = Vec::with_capacity(head + end - from + 1);
        list.extend_from_slice(&self.messages[..head]);
        list.extend_from_slice(&self.messages[from..end]);
        if part == Part::Emptied {
            list.push(with_empty_content(&self.messages[i]));
        }
        Cow::Owned(list)
    }
}

impl Prober for PrefixRenders<'_> {
    fn probe(&mut self, i: usize, part: Part) -> SftResult<Option<Probe>> {
        let text = if part == Part::Emptied && i > 0 {
            self.render_emptied(i)
        } else {
            let list = self.list(0, 0, i, part);
            self.render(&list, part)
        };
        Ok(text.map(|text| Probe {
            shared: common_prefix(&text, self.full),
            len: text.len(),
            tail: (0, text),
        }))
    }
}

impl PrefixRenders<'_> {
    /// The render of `messages[..i]` and message `i` emptied (`with_empty_content`): the same
    /// list as [`PrefixRenders::list`]'s, made by swapping message `i` of the scratch copy for
    /// the render.
    fn render_emptied(&mut self, i: usize) -> Option<String> {
        let mut scratch = self.scratch.take().unwrap_or_default();
        // Only the messages up to `i` are copied: the later ones (a prompt-completion's
        // completion, often the longest) are never rendered emptied.
        if scratch.len() <= i {
            scratch.extend_from_slice(&self.messages[scratch.len()..=i]);
        }
        let text = match &mut scratch[i] {
            // The content swapped for an empty string in its place (or added last where the
            // message has none) and put back after: nothing else of the message is copied.
            Json::Object(map) => {
                let had = map
                    .get_mut("content")
                    .map(|c| std::mem::replace(c, Json::String(String::new())));
                if had.is_none() {
                    map.insert("content".to_string(), Json::String(String::new()));
                }
                let text = self.render(&scratch[..=i], Part::Emptied);
                if let Json::Object(map) = &mut scratch[i] {
                    match had {
                        Some(content) => {
                            if let Some(slot) = map.get_mut("content") {
                                *slot = content;
                            }
                        }
                        None => {
                            map.shift_remove("content");
                        }
                    }
                }
                text
            }
            _ => {
                let emptied = with_empty_content(&scratch[i]);
                let message = std::mem::replace(&mut scratch[i], emptied);
                let text = self.render(&scratch[..=i], Part::Emptied);
                scratch[i] = message;
                text
            }
        };
        self.scratch = Some(scratch);
        text
    }
}

/// Messages a conversation may render in total while its spans are located, beyond
/// `RENDER_BUDGET_PER_MESSAGE` a message: about ten seconds of rendering on one core. Only a
/// template whose renders of earlier turns change as the conversation grows gets near it.
pub const RENDER_BUDGET_BASE: u64 = 2_000_000;
pub const RENDER_BUDGET_PER_MESSAGE: u64 = 64;

/// Prefix renders computed from short windows of the conversation: linear in its length.
///
/// A window for message `i` is the leading system messages, then the messages from an anchor
/// `s` to `i` (then the part's own ending). Anchors are user messages whose content was found
/// in the full text; the first anchor must be the first message after the system messages.
/// With `t` the last anchor before `i` and `s` an earlier one (not the first: that window would
/// be the whole prefix) such that the warm-up `s..t` holds every kind of message (`Shape`) of
/// `t..=i`, the nearest within `WARM_UP_ANCHORS` user turns, the render of the part is
/// taken to be the full text up to `s`'s content, then the window's render from `s`'s content
/// on. That is trusted only when the window proves itself on the turns it shares with the full
/// text:
/// - the window's render up to `s`'s content is exactly the full text up to the first
///   anchor's content (same system prompt, same preamble, same user header: nothing before
///   the window depends on what follows it, as DeepSeek's collected system prompts would);
/// - from `s`'s content, the window's render agrees with the full text at least up to `t`'s
///   content: the whole warm-up turn `s..t` renders the same with the conversation cut after
///   `i` as in the full text, at a different position and index. A template that renders a
///   turn differently once later turns exist (Qwen3 drops reasoning before the last query,
///   numbered turns, length-dependent text) or that needs more history than one turn fails
///   here.
///
/// Whatever the window does after `t`'s content (`loop.last`, look-ahead to the next message,
/// the generation prompt, Qwen3's reasoning kept after the last query) is the render's own: it
/// is compared with the full text byte by byte, as the prefix render would be. Where a window
/// cannot be built or fails a check, the part is rendered whole, and every render counts
/// against the example's render budget.
struct Windows<'a> {
    whole: PrefixRenders<'a>,
    /// The leading system messages.
    head: usize,
    /// User messages located in the full text, in order: index and content.
    anchors: Vec<(usize, Range<usize>)>,
    budget: u64,
}

impl<'a> Windows<'a> {
    fn new(
        tokenizer: &'a ChatTokenizer,
        messages: &'a [Json],
        opts: &'a RenderOptions<'a>,
        full: &'a str,
    ) -> Self {
        let head = messages
            .iter()
            .position(|m| role_of(m) != "system")
            .unwrap_or(messages.len());
        Windows {
            whole: PrefixRenders::new(tokenizer, messages, opts, full),
            head,
            anchors: Vec::new(),
            budget: RENDER_BUDGET_BASE + RENDER_BUDGET_PER_MESSAGE * messages.len() as u64,
        }
    }

    fn messages(&self) -> &'a [Json] {
        self.whole.messages
    }

    fn windowed(&mut self, i: usize, part: Part) -> Option<Probe> {
        let k = self.anchors.partition_point(|(a, _)| *a < i);
        // With `s` the first anchor the window is the whole prefix.
        if k < 3 {
            return None;
        }
        let first = self.anchors[0].1.start;
        let (t, t_content) = (self.anchors[k - 1].0, self.anchors[k - 1].1.start);
        let end = if part == Part::Through { i + 1 } else { i };
        let later: Vec<Shape> = self.messages()[t..end].iter().map(shape).collect();
        // The warm-up must hold every kind of message the rest of the window holds, so that a
        // template keeping state about the first of a kind (DeepSeek's first tool call) shows
        // it there; up to `WARM_UP_ANCHORS` user turns back.
        let (s, s_content) = (1..=k - 2)
            .rev()
            .take(WARM_UP_ANCHORS)
            .map(|j| self.anchors[j].clone())
            .find(|(s, _)| {
                let warm: Vec<Shape> = self.messages()[*s..t].iter().map(shape).collect();
                later.iter().all(|kind| warm.contains(kind))
            })?;
        let list = self.whole.list(self.head, s, i, part);
        let window = self.whole.render(&list, part)?;
        let (w, f) = (window.as_bytes(), self.whole.full.as_bytes());
        let printed = &f[s_content.clone()];
        if w.len() < first || w[..first] != f[..first] || !w[first..].starts_with(printed) {
            return None;
        }
        let agreed = common_prefix_len(&w[first..], &f[s_content.start..]);
        if agreed < t_content - s_content.start {
            return None;
        }
        let cut = char_floor(&window, first + agreed);
        Some(Probe {
            shared: s_content.start + cut - first,
            len: s_content.start + window.len() - first,
            tail: (s_content.start, window[first..].to_string()),
        })
    }
}

/// How many user turns back a window may start.
const WARM_UP_ANCHORS: usize = 4;

/// The kind of a message as a template may tell it apart: role, tool calls, what the content is
/// (missing or null, empty, text, other) and whether it has reasoning.
type Shape = (String, bool, u8, bool);

fn shape(message: &Json) -> Shape {
    let calls = json_value::field(message, "tool_calls")
        .and_then(Json::as_array)
        .is_some_and(|c| !c.is_empty());
    let content = match json_value::field(message, "content") {
        None | Some(Json::Null) => 0,
        Some(Json::String(s)) if s.is_empty() => 1,
        Some(Json::String(_)) => 2,
        Some(_) => 3,
    };
    let reasoning = json_value::field(message, "reasoning_content").is_some_and(|r| !r.is_null());
    (role_of(message).to_string(), calls, content, reasoning)
}

impl Prober for Windows<'_> {
    fn probe(&mut self, i: usize, part: Part) -> SftResult<Option<Probe>> {
        let probe = match self.windowed(i, part) {
            Some(p) => Some(p),
            None => self.whole.probe(i, part)?,
        };
        if self.whole.rendered > self.budget {
            return Err(SftError::new(
                ErrorCode::TemplateRender,
                format!(
                    "locating the spans of {} messages exceeded the render budget of {} message renders (the chat template renders earlier turns differently as the conversation grows, so turns need whole prefix renders); shorten the conversation or use completionOnly: false",
                    self.whole.messages.len(),
                    self.budget
                ),
            ));
        }
        Ok(probe)
    }

    fn located(&mut self, i: usize, content: Option<&Range<usize>>) {
        // Contents follow each other in the full text. An anchor whose content ends after the
        // start of a later message's was found in the wrong place (a user text repeated later
        // in the conversation, control tokens inside contents): a window from it could prove
        // itself on the repeat instead of the turn. It is dropped, and with the first anchor
        // gone no window is built.
        if let Some(c) = content {
            while self.anchors.last().is_some_and(|(_, a)| a.end > c.start) {
                self.anchors.pop();
            }
        }
        let first_or_next = if self.anchors.is_empty() {
            i == self.head
        } else {
            i > self.head
        };
        if let Some(c) = content.filter(|_| first_or_next) {
            if role_of(&self.whole.messages[i]) == "user" {
                self.anchors.push((i, c.clone()));
            }
        }
    }
}

/// Locates every message of `messages` in `full`, the render of all of them without a
/// generation prompt, whose tokens are `encoded`. The prefix renders the layout is defined by
/// come from short windows of the conversation where those prove exact (see `Windows`): time
/// linear in the conversation for the templates in use. Fails with `TEMPLATE_RENDER` when a
/// template forces more whole renders than the render budget allows.
pub fn locate_messages(
    tokenizer: &ChatTokenizer,
    messages: &[Json],
    opts: &RenderOptions,
    full: &str,
    encoded: &EncodedText,
    turn_end: Option<&TurnEnd>,
) -> SftResult<Vec<MessageLayout>> {
    let mut prober = Windows::new(tokenizer, messages, opts, full);
    locate_with(&mut prober, messages, full, encoded, turn_end)
}

/// What the GRPO conversation split (`grpo::tokenize_conversation_for_trainer`) is defined by,
/// for every message `i`: the number of tokens of `messages[..=i]` rendered without a
/// generation prompt, and where `prompt_for(i)`, of `messages[..i]` rendered with it; each
/// exactly what encoding that render gives. A render that the windows (see `Windows`) prove to
/// be a prefix of `full` (whose tokens are `encoded`) is counted from `encoded` and a short tail
/// (`ChatTokenizer::prefix_token_count`); any other is rendered and encoded whole. Linear in
/// the conversation where the windows hold, as for `locate_messages`.
pub fn prefix_token_counts(
    tokenizer: &ChatTokenizer,
    messages: &[Json],
    opts: &RenderOptions,
    full: &str,
    encoded: &EncodedText,
    prompt_for: impl Fn(usize) -> bool,
) -> SftResult<Vec<(usize, Option<usize>)>> {
    let turn_end = discover_turn_end(tokenizer, opts);
    let mut windows = Windows::new(tokenizer, messages, opts, full);
    // Locating the messages finds the anchors the windows start from.
    locate_with(&mut windows, messages, full, encoded, turn_end.as_ref())?;
    let cuts = tokenizer.added_token_cuts(full);
    let mut count = |i: usize, part: Part| -> SftResult<usize> {
        if let (Some(cuts), Some(p)) = (&cuts, windows.probe(i, part)?) {
            if p.shared == p.len {
                return tokenizer.prefix_token_count(full, encoded, cuts, p.len);
            }
            // A render that differs from the full one (Qwen3's empty reasoning block on the
            // last assistant turn of a prefix) is counted from where they last split alike.
            let (at, tail) = &p.tail;
            let diverging = (*at, tail.as_str());
            if let Some(n) =
                tokenizer.diverging_prefix_token_count(full, encoded, cuts, p.shared, diverging)?
            {
                return Ok(n);
            }
        }
        let end = if part == Part::Through { i + 1 } else { i };
        let render = RenderOptions {
            add_generation_prompt: part == Part::Prompt,
            continue_final_message: false,
            ..*opts
        };
        Ok(tokenizer
            .apply_chat_template(&messages[..end], &render)?
            .len())
    };
    let mut out = Vec::with_capacity(messages.len());
    for i in 0..messages.len() {
        let through = count(i, Part::Through)?;
        let prompt = if prompt_for(i) {
            Some(count(i, Part::Prompt)?)
        } else {
            None
        };
        out.push((through, prompt));
    }
    Ok(out)
}

/// `locate_messages` by its definition: every prefix rendered whole. Quadratic in the number of
/// messages; the differential tests and the fuzz target compare the two.
#[doc(hidden)]
pub fn locate_messages_by_prefix_renders(
    tokenizer: &ChatTokenizer,
    messages: &[Json],
    opts: &RenderOptions,
    full: &str,
    encoded: &EncodedText,
    turn_end: Option<&TurnEnd>,
) -> Vec<MessageLayout> {
    let mut prober = PrefixRenders::new(tokenizer, messages, opts, full);
    // Whole renders never exceed a budget.
    locate_with(&mut prober, messages, full, encoded, turn_end).unwrap_or_default()
}

fn locate_with(
    prober: &mut impl Prober,
    messages: &[Json],
    full: &str,
    encoded: &EncodedText,
    turn_end: Option<&TurnEnd>,
) -> SftResult<Vec<MessageLayout>> {
    struct Found {
        start: usize,
        content: Option<Range<usize>>,
        missing: bool,
        mismatch: bool,
    }
    let mut found: Vec<Found> = Vec::with_capacity(messages.len());
    let turn_ends = TurnEnds::of(full, turn_end.map_or("", |t| &t.text));
    let mut cursor = 0;
    for (i, message) in messages.iter().enumerate() {
        let assistant = role_of(message) == "assistant";
        let part = if assistant {
            Part::Prompt
        } else {
            Part::Emptied
        };
        let probe = prober.probe(i, part)?;
        let (mut rendered, mismatch) = match &probe {
            // A template that cannot prompt here (no messages yet) gives no header either.
            None if assistant => (cursor, true),
            // A template that rejects empty content gives no header: search from the cursor.
            None => (cursor, false),
            Some(p) => (p.shared, assistant && p.shared < p.len),
        };
        // A template that renders earlier turns differently once later ones exist (Qwen3.5
        // and Qwen3.6 keep an assistant's thinking block only after the last user query) makes
        // the part's render leave the full text before this message begins. The header is then
        // read after the turn that precedes the message, found by counting end-of-turn tokens,
        // where both texts continue alike.
        // A part whose render is all in the full text needs none: the turn it finds starts
        // within that render, never after it.
        if let (Some(p), Some(t)) = (probe.as_ref().filter(|p| p.shared < p.len), turn_end) {
            if let Some((turn_start, aligned)) =
                align_on_turn_ends(full, &turn_ends.ends, &p.tail, &t.text, part)
            {
                if rendered < turn_start {
                    rendered = aligned;
                }
            }
        }
        let start = token_floor(encoded, full.len(), rendered).max(cursor);
        let (forms, may_vanish) = content_forms(message);
        let limit = match turn_end {
            Some(t) => first_turn_end(full, &turn_ends, &t.text, start, full.len())
                .map_or(full.len(), |r| r.start),
            // Without an end-of-turn token the turn ends where `messages[..=i]` rendered alone
            // ends, when that render is a prefix of the full text: a content the template does
            // not print is not taken from a later message that says the same.
            None => prober
                .probe(i, Part::Through)?
                .filter(|p| p.shared == p.len && p.len >= start)
                .map_or(full.len(), |p| p.len),
        };
        let mut content = locate(full, start, limit, &forms);
        if let Some(c) = &content {
            cursor = c.end;
        } else {
            cursor = start;
            // A template may print a message before the one it follows (Gemma 4 writes a tool's
            // result into the calling turn, ahead of that turn's text). Such a content is
            // placed where it is printed once since the last assistant turn began, so that it
            // stays untrained; the search for later messages goes on from the cursor.
            if !assistant {
                let since = (0..i)
                    .rev()
                    .find(|&j| role_of(&messages[j]) == "assistant")
                    .map_or(0, |j| found[j].start);
                content = locate_once(full, since, &forms);
            }
        }
        prober.located(i, content.as_ref());
        found.push(Found {
            start,
            missing: content.is_none() && !forms.is_empty() && !may_vanish,
            content,
            mismatch,
        });
    }

    let mut layouts = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        let f = &found[i];
        let content_end = f.content.as_ref().map_or(f.start, |c| c.end);
        let bound = found
            .get(i + 1)
            .map_or(full.len(), |next| next.start.max(content_end));
        let turn_end =
            turn_end.and_then(|t| first_turn_end(full, &turn_ends, &t.text, content_end, bound));
        let role = role_of(message).to_string();
        let assistant = role == "assistant";
        let body = if !assistant {
            f.content.clone().unwrap_or(f.start..f.start)
        } else if let Some(t) = &turn_end {
            f.start..t.start
        } else {
            // Rendered alone, the turn is a prefix of the full text exactly when all of it is
            // shared.
            let end = prober
                .probe(i, Part::Through)?
                .filter(|p| p.shared == p.len)
                .map_or(content_end, |p| p.len.clamp(content_end, bound));
            f.start..end
        };
        let reasoning = if assistant {
            reasoning_range(full, &body, content_end)
        } else {
            None
        };
        layouts.push(MessageLayout {
            role,
            content: f.content.clone(),
            content_missing: f.missing,
            body,
            turn_end,
            reasoning,
            prefix_mismatch: f.mismatch,
        });
    }
    Ok(layouts)
}

/// Where each end-of-turn token of a full text ends, not overlapping, found once for every
/// message of the example.
struct TurnEnds {
    ends: Vec<usize>,
    /// No two occurrences of the token can overlap (no prefix of it is also its suffix, as with
    /// every special token's `<|...|>` spelling): `ends` then holds every occurrence.
    complete: bool,
}

impl TurnEnds {
    fn of(full: &str, turn_end: &str) -> TurnEnds {
        let t = turn_end.as_bytes();
        let len = t.len();
        TurnEnds {
            ends: text_search::ends_of(full, turn_end),
            complete: len > 0 && !(1..len).any(|b| t[..b] == t[len - b..]),
        }
    }
}

/// The first end-of-turn token of `full[from..bound]`: read from `found` where it holds every
/// occurrence, searched otherwise.
fn first_turn_end(
    full: &str,
    found: &TurnEnds,
    turn_end: &str,
    from: usize,
    bound: usize,
) -> Option<Range<usize>> {
    let len = turn_end.len();
    if !found.complete {
        return text_search::find(&full[from..bound], turn_end).map(|p| from + p..from + p + len);
    }
    let k = found.ends.partition_point(|&e| e < from + len);
    found
        .ends
        .get(k)
        .filter(|&&e| e <= bound)
        .map(|&e| e - len..e)
}

/// Where message `i`'s turn starts in the full text, the end of the turn before it, and where a
/// part's render leaves the full text when both are read from there on. That turn end is the
/// last end-of-turn token of `messages[..i]` in the render (the last one of a prompt render; the
/// one before the emptied message's own closing token), and the same occurrence, by count, in
/// the full text, whose token ends are `full_ends`. `tail` is the render from a byte it shares
/// with the full text (see `Probe`).
/// `None` when the full text has too few.
fn align_on_turn_ends(
    full: &str,
    full_ends: &[usize],
    tail: &(usize, String),
    turn_end: &str,
    part: Part,
) -> Option<(usize, usize)> {
    let (at, text) = (tail.0, tail.1.as_str());
    let before = full_ends.partition_point(|&end| end <= at);
    let ends = text_search::ends_of(text, turn_end);
    let closes_itself = part == Part::Emptied
        && ends
            .last()
            .is_some_and(|&end| text[end..].trim().is_empty());
    let n = before + ends.len() - usize::from(closes_itself);
    let in_full = match n {
        0 => 0,
        n => *full_ends.get(n - 1)?,
    };
    // A turn end in the part both texts share compares them from the shared byte on.
    let aligned = if n > before {
        let in_render = ends[n - before - 1];
        in_full + common_prefix(&full[in_full..], &text[in_render..])
    } else {
        at + common_prefix(&full[at..], text)
    };
    Some((in_full, aligned))
}

fn think_close_finder() -> &'static memchr::memmem::Finder<'static> {
    static FINDER: std::sync::OnceLock<memchr::memmem::Finder<'static>> =
        std::sync::OnceLock::new();
    FINDER.get_or_init(|| memchr::memmem::Finder::new(THINK_CLOSE))
}

fn reasoning_range(full: &str, body: &Range<usize>, content_end: usize) -> Option<Range<usize>> {
    let searched = &full[body.start..content_end.max(body.start)];
    // `</think>` cannot overlap itself: its last match is the last of the forward search, which
    // reads the text far faster than a backward one when it holds none (most renders).
    let close = think_close_finder().find_iter(searched.as_bytes()).last()?;
    let start = searched[..close]
        .find(THINK_OPEN)
        .map_or(body.start, |p| body.start + p);
    let mut end = body.start + close + THINK_CLOSE.len();
    while end < body.end && full.as_bytes()[end] == b'\n' {
        end += 1;
    }
    Some(start..end)
}

mod contents;
#[cfg(test)]
mod differential;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn turn_ends_read_from_the_list_are_the_search_s() {
        // Random texts over a few bytes, end-of-turn spellings that cannot overlap themselves
        // and ones that can (searched instead): the same first match in every window.
        let mut rng = crate::test_support::Rng(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: usize| rng.below(n);
        for turn_end in ["<|e|>", "e>", "aa", "a<a", "<|e|><|e|"] {
            for _ in 0..300 {
                let len = next(60);
                let full: String = (0..len)
                    .map(|_| ['a', '<', '|', 'e', '>'][next(5)])
                    .collect();
                let ends = TurnEnds::of(&full, turn_end);
                let from = next(len + 1);
                let bound = from + next(len + 1 - from);
                let searched = full[from..bound]
                    .find(turn_end)
                    .map(|p| from + p..from + p + turn_end.len());
                assert_eq!(
                    first_turn_end(&full, &ends, turn_end, from, bound),
                    searched,
                    "{full:?} {turn_end:?} {from}..{bound}"
                );
            }
        }
    }

    #[test]
    fn an_emptied_message_keeps_its_fields_in_order() {
        let cases = [
            json!({"role": "user", "content": "long text", "name": "x"}),
            json!({"role": "assistant", "tool_calls": [{"name": "f"}]}),
            json!({"content": [{"type": "text", "text": "a"}], "role": "user"}),
        ];
        for message in cases {
            let mut expected = message.clone();
            expected
                .as_object_mut()
                .unwrap()
                .insert("content".into(), json!(""));
            let emptied = with_empty_content(&message);
            assert_eq!(emptied, expected);
            let keys = |v: &Json| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(&emptied), keys(&expected));
        }
    }

    /// The text of every part of every message, as located.
    fn parts(family: &str, messages: &[Json], thinking: bool) -> Vec<[String; 4]> {
        let t = crate::test_support::load_family(family);
        let opts = RenderOptions {
            enable_thinking: Some(thinking),
            ..Default::default()
        };
        let text = t.render(messages, &opts).unwrap();
        let encoded = t.encode_with_offsets(&text).unwrap();
        let end = discover_turn_end(&t, &opts);
        let slice =
            |r: &Option<Range<usize>>| r.clone().map_or("-".into(), |r| text[r].to_string());
        locate_messages(&t, messages, &opts, &text, &encoded, end.as_ref())
            .unwrap()
            .iter()
            .map(|l| {
                [
                    slice(&l.content),
                    text[l.body.clone()].to_string(),
                    slice(&l.turn_end),
                    slice(&l.reasoning),
                ]
            })
            .collect()
    }

    fn row(parts: [&str; 4]) -> [String; 4] {
        parts.map(String::from)
    }

    #[test]
    fn llama_trims_content_and_closes_with_eot() {
        let messages = [
            json!({"role": "system", "content": "S"}),
            json!({"role": "user", "content": " hi "}),
            json!({"role": "assistant", "content": "yo\n"}),
        ];
        let got = parts("llama3_1", &messages, false);
        assert_eq!(
            got,
            vec![
                row(["S", "S", "<|eot_id|>", "-"]),
                row(["hi", "hi", "<|eot_id|>", "-"]),
                row(["yo", "yo", "<|eot_id|>", "-"]),
            ]
        );
    }

    #[test]
    fn an_assistant_header_is_found_with_tools_in_the_render() {
        // The generation-prompt render carries the tools too: without them it shares nothing
        // past the tool preamble, and the header would end up in the trained body.
        let t = crate::test_support::load_family("qwen3");
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {}}}]);
        let opts = RenderOptions {
            tools: Some(&tools),
            ..Default::default()
        };
        let messages = [
            json!({"role": "user", "content": "q"}),
            json!({"role": "assistant", "content": "A"}),
        ];
        let text = t.render(&messages, &opts).unwrap();
        let encoded = t.encode_with_offsets(&text).unwrap();
        let end = discover_turn_end(&t, &opts);
        let layouts = locate_messages(&t, &messages, &opts, &text, &encoded, end.as_ref()).unwrap();
        assert!(text.contains("<tools>"));
        assert_eq!(&text[layouts[1].body.clone()], "<think>\n\n</think>\n\nA");
        assert!(!layouts[1].prefix_mismatch);
    }

    #[test]
    fn qwen3_reasoning_is_part_of_the_body() {
        let messages = [
            json!({"role": "user", "content": "q"}),
            json!({"role": "assistant", "content": "<think>\nr\n</think>\n\nA"}),
        ];
        let got = parts("qwen3", &messages, true);
        assert_eq!(
            got,
            vec![
                row(["q", "q", "<|im_end|>", "-"]),
                row([
                    "<think>\nr\n</think>\n\nA",
                    "<think>\nr\n</think>\n\nA",
                    "<|im_end|>",
                    "<think>\nr\n</think>\n\n"
                ]),
            ]
        );
    }

    #[test]
    fn gemma_system_prompt_sits_inside_the_first_user_turn() {
        let messages = [
            json!({"role": "system", "content": "S"}),
            json!({"role": "user", "content": "u"}),
            json!({"role": "assistant", "content": "a"}),
        ];
        let got = parts("gemma3", &messages, false);
        assert_eq!(
            got,
            vec![
                row(["S", "S", "-", "-"]),
                row(["u", "u", "<end_of_turn>", "-"]),
                row(["a", "a", "<end_of_turn>", "-"]),
            ]
        );
    }
}
