//! Where each token of a row comes from: a system prompt, a user turn, an assistant's answer, its
//! reasoning or tool calls, a tool result, another role, or the template's own markup (role
//! headers, control tokens, tool definitions). The data report's breakdown of trained tokens by
//! kind is built from this.
//!
//! An example is prepared and rendered as its row was, and every message is located in the
//! render (`mask::spans::locate_messages`); a token takes the kind of the byte it starts at.

use std::ops::Range;

use serde_json::Value as Json;

use crate::error::SftResult;
use crate::example::{json_value, SftExample};
use crate::mask::spans::{locate_messages, MessageLayout};
use crate::rows::{prepare, Prepared, RowSettings};
use crate::tokenize::ChatTokenizer;

/// What a token of a rendered conversation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartKind {
    System,
    User,
    /// An assistant message's content.
    Assistant,
    Reasoning,
    /// What an assistant message prints beside its content and reasoning: its tool calls.
    ToolCalls,
    ToolResults,
    /// Messages of any other role.
    OtherRoles,
    /// Everything the template adds: role headers, control tokens, tool definitions, and the
    /// parts of an assistant turn that are neither content, reasoning nor tool calls.
    Markup,
}

impl PartKind {
    pub const ALL: [PartKind; 8] = [
        PartKind::System,
        PartKind::User,
        PartKind::Assistant,
        PartKind::Reasoning,
        PartKind::ToolCalls,
        PartKind::ToolResults,
        PartKind::OtherRoles,
        PartKind::Markup,
    ];

    /// The name the report uses.
    pub fn name(self) -> &'static str {
        match self {
            PartKind::System => "system",
            PartKind::User => "user",
            PartKind::Assistant => "assistant",
            PartKind::Reasoning => "reasoning",
            PartKind::ToolCalls => "toolCalls",
            PartKind::ToolResults => "toolResults",
            PartKind::OtherRoles => "otherRoles",
            PartKind::Markup => "markup",
        }
    }

    /// The kind of a message's content, by its role.
    fn of_role(role: &str) -> PartKind {
        match role {
            "system" | "developer" => PartKind::System,
            "user" => PartKind::User,
            "assistant" | "model" => PartKind::Assistant,
            "tool" | "ipython" | "function" | "tool_response" => PartKind::ToolResults,
            _ => PartKind::OtherRoles,
        }
    }
}

/// The ids of an example's full render and the kind of each token.
pub struct Attributed {
    pub ids: Vec<u32>,
    pub kinds: Vec<PartKind>,
}

/// Renders and tokenizes `example` as its row was (without truncation), and gives each token its
/// kind. The ids equal the row's unless the row was shortened by `truncation: 'turns'`; the
/// caller compares them.
pub fn attribute(
    tokenizer: &ChatTokenizer,
    settings: &RowSettings,
    example: SftExample,
) -> SftResult<Attributed> {
    let Prepared { messages, .. } = prepare(tokenizer, settings, example)?;
    let opts = settings.render_options(false, &messages);
    let text = tokenizer.render(&messages.list, &opts)?;
    let encoded = if settings.sanitize {
        tokenizer.encode_marked(&text)?
    } else {
        tokenizer.encode_with_offsets(&text)?
    };
    let layouts = locate_messages(
        tokenizer,
        &messages.list,
        &opts,
        &text,
        &encoded,
        settings.turn_end,
    )?;
    let by_byte = byte_kinds(&text, &messages.list, &layouts);
    let kinds = encoded
        .offsets
        .iter()
        .map(|&(start, _)| by_byte.get(start).copied().unwrap_or(PartKind::Markup))
        .collect();
    Ok(Attributed {
        ids: encoded.ids,
        kinds,
    })
}

/// The kind of every byte of a render of `messages` whose layout is `layouts`: markup unless a
/// message's body, content or reasoning covers it (the narrower ranges win).
fn byte_kinds(text: &str, messages: &[Json], layouts: &[MessageLayout]) -> Vec<PartKind> {
    let len = text.len();
    let mut kinds = vec![PartKind::Markup; len];
    let mut paint = |range: &Range<usize>, kind: PartKind| {
        let end = range.end.min(len);
        if range.start < end {
            kinds[range.start..end].fill(kind);
        }
    };
    for (message, layout) in messages.iter().zip(layouts) {
        let kind = PartKind::of_role(&layout.role);
        if kind == PartKind::Assistant {
            if has_tool_calls(message) {
                paint(&layout.body, PartKind::ToolCalls);
            }
        } else {
            paint(&layout.body, kind);
        }
        if let Some(block) = &layout.reasoning {
            // The block runs from its opening tag to its closing one: the tags are markup.
            let inner = reasoning_text(text, block, message).unwrap_or(block.clone());
            paint(block, PartKind::Markup);
            paint(&inner, PartKind::Reasoning);
        }
        if let Some(content) = &layout.content {
            paint(content, kind);
        }
    }
    kinds
}

/// Where the message's reasoning text (trimmed, as templates print it) lies in `block`.
fn reasoning_text(text: &str, block: &Range<usize>, message: &Json) -> Option<Range<usize>> {
    let reasoning = json_value::str_field(message, "reasoning_content")?.trim();
    if reasoning.is_empty() {
        return None;
    }
    let at = text.get(block.clone())?.find(reasoning)? + block.start;
    Some(at..at + reasoning.len())
}

fn has_tool_calls(message: &Json) -> bool {
    json_value::field(message, "tool_calls")
        .and_then(Json::as_array)
        .is_some_and(|calls| !calls.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{resolve_masking, row_settings, turn_end_of, DatasetConfig};
    use crate::example::validate_record;
    use serde_json::json;

    fn kinds_of(family: &str, record: Json) -> Vec<(String, PartKind)> {
        let tok = crate::test_support::load_family(family);
        let config = DatasetConfig::default();
        let masking = resolve_masking(&tok, &config).unwrap();
        let turn_end = turn_end_of(&tok, &config);
        let settings = row_settings(&config, &masking, turn_end.as_ref());
        let example = validate_record(record, 0).unwrap();
        let got = attribute(&tok, &settings, example).unwrap();
        assert_eq!(got.ids.len(), got.kinds.len());
        // Runs of one kind, as decoded text.
        let mut runs: Vec<(Vec<u32>, PartKind)> = Vec::new();
        for (&id, &kind) in got.ids.iter().zip(&got.kinds) {
            match runs.last_mut() {
                Some((ids, k)) if *k == kind => ids.push(id),
                _ => runs.push((vec![id], kind)),
            }
        }
        runs.into_iter()
            .map(|(ids, k)| (tok.decode(&ids, false).unwrap(), k))
            .collect()
    }

    #[test]
    fn qwen3_tool_conversation_parts() {
        let runs = kinds_of(
            "qwen3",
            json!({"messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
                {"role": "tool", "content": "18 C"},
                {"role": "assistant", "content": "It is 18 C."}
            ]}),
        );
        let text_of = |kind: PartKind| -> String {
            runs.iter()
                .filter(|(_, k)| *k == kind)
                .map(|(t, _)| t.as_str())
                .collect()
        };
        assert_eq!(text_of(PartKind::System), "Be brief.");
        assert_eq!(text_of(PartKind::User), "Weather in Paris?");
        assert_eq!(text_of(PartKind::ToolResults), "18 C");
        assert!(text_of(PartKind::Assistant).contains("It is 18 C."));
        let calls = text_of(PartKind::ToolCalls);
        assert!(calls.contains("\"name\": \"weather\""), "{calls}");
        assert!(calls.contains("Paris"), "{calls}");
        let markup = text_of(PartKind::Markup);
        assert!(markup.starts_with("<|im_start|>system\n"), "{markup}");
        assert!(markup.contains("<|im_start|>user\n"), "{markup}");
        assert_eq!(text_of(PartKind::Reasoning), "");
    }

    #[test]
    fn reasoning_is_its_own_kind() {
        let runs = kinds_of(
            "qwen3",
            json!({"messages": [
                {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4", "reasoning_content": "Two and two make four."}
            ]}),
        );
        let reasoning: String = runs
            .iter()
            .filter(|(_, k)| *k == PartKind::Reasoning)
            .map(|(t, _)| t.as_str())
            .collect();
        assert_eq!(reasoning.trim(), "Two and two make four.");
        assert!(runs
            .iter()
            .any(|(t, k)| *k == PartKind::Assistant && t.trim() == "4"));
    }
}
