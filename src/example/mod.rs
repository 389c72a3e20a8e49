//! Stage 2, examples: records in (`input`), checked examples and template-shaped messages out.
//! `message` prepares messages as transformers does before a render; `json_value` holds numbers
//! from JS as Python holds them; `train_flags` reads the per-message `train`/`weight` flags.
//!
//! SFT examples: the two formats, their detection and the loader's validation.
//!
//! Messages are validated exactly as the reference loader does, with its messages word for word;
//! the loader appends the file and physical line.

pub mod json_value;
pub mod message;
pub mod train_flags;

use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};

/// `tools`: what becomes of an example's `tools` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolsMode {
    /// Not passed to the template (the reference).
    #[default]
    Ignore,
    /// Passed to the chat template as `tools`, as mlx-lm and TRL do.
    Example,
}

impl ToolsMode {
    /// The option's value as users write it.
    pub fn name(self) -> &'static str {
        match self {
            ToolsMode::Ignore => "ignore",
            ToolsMode::Example => "example",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    PromptCompletion,
    Conversation,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::PromptCompletion => "prompt-completion",
            Format::Conversation => "conversation",
        }
    }
}

/// An example ready to render. `distill` holds its distillation targets (`{tokenIds,
/// logprobs}`), aligned with the full token sequence, if it carries any.
#[derive(Debug, Clone)]
pub enum SftExample {
    PromptCompletion {
        prompt: Vec<Json>,
        completion: Json,
        distill: Option<Json>,
        tools: Option<Json>,
    },
    Conversation {
        messages: Vec<Json>,
        distill: Option<Json>,
        tools: Option<Json>,
    },
}

impl SftExample {
    pub fn format(&self) -> Format {
        match self {
            SftExample::PromptCompletion { .. } => Format::PromptCompletion,
            SftExample::Conversation { .. } => Format::Conversation,
        }
    }

    /// The example's distillation targets, if it has them.
    pub fn distill(&self) -> Option<&Json> {
        match self {
            SftExample::PromptCompletion { distill, .. }
            | SftExample::Conversation { distill, .. } => distill.as_ref(),
        }
    }

    /// Whether the example carries distillation targets.
    pub fn has_distill(&self) -> bool {
        match self {
            SftExample::PromptCompletion { distill, .. }
            | SftExample::Conversation { distill, .. } => distill.is_some(),
        }
    }

    /// The example's `tools` field as given (a list, or a JSON string of one), if not null.
    pub fn tools(&self) -> Option<&Json> {
        match self {
            SftExample::PromptCompletion { tools, .. } | SftExample::Conversation { tools, .. } => {
                tools.as_ref()
            }
        }
    }
}

/// The `tools` field of a record; null counts as absent.
fn tools_of(obj: &mut serde_json::Map<String, Json>) -> Option<Json> {
    obj.remove("tools").filter(|t| !t.is_null())
}

fn invalid(message: String) -> SftError {
    SftError::new(ErrorCode::InvalidExample, message)
}

/// The reference's format detection: by key presence, `prompt` and `completion` first.
pub fn detect_format(example: &Json) -> SftResult<Format> {
    format_from_keys(|key| example.as_object().is_some_and(|o| o.contains_key(key)))
}

/// `detect_format` of an example known by which of its keys it has (`prompt`, `completion`,
/// `messages`).
pub fn format_from_keys(has: impl Fn(&str) -> bool) -> SftResult<Format> {
    if has("prompt") && has("completion") {
        Ok(Format::PromptCompletion)
    } else if has("messages") {
        Ok(Format::Conversation)
    } else {
        Err(invalid(
            "Invalid SFT example format. Expected either {prompt, completion} or {messages}".into(),
        ))
    }
}

fn is_js_object(v: &Json) -> bool {
    // `typeof x === 'object' && x !== null`: arrays count as objects in JS.
    v.is_object() || v.is_array()
}

/// The fields of a record that make an example.
#[derive(Default)]
struct RecordFields {
    prompt: Option<Json>,
    completion: Option<Json>,
    messages: Option<Json>,
    distill: Option<Json>,
    tools: Option<Json>,
}

/// The loader's validation of one parsed JSONL record (`index` counts records from 0).
pub fn validate_record(record: Json, index: usize) -> SftResult<SftExample> {
    if !is_js_object(&record) {
        return Err(invalid(format!("SFT example {index} must be an object")));
    }
    let Json::Object(obj) = record else {
        return Err(invalid(format!(
            "SFT example {index}: must have either {{prompt, completion}} or {{messages}}"
        )));
    };
    // The fields are moved out in one pass over the record, with no key hashed: the record is
    // dropped with the rest of its fields right after.
    let mut fields = RecordFields::default();
    for (key, value) in obj {
        let slot = match key.as_str() {
            "prompt" => &mut fields.prompt,
            "completion" => &mut fields.completion,
            "messages" => &mut fields.messages,
            "distill" => &mut fields.distill,
            "tools" => &mut fields.tools,
            _ => continue,
        };
        *slot = Some(value);
    }
    let RecordFields {
        prompt,
        completion,
        messages,
        distill,
        tools,
    } = fields;
    let tools = tools.filter(|t| !t.is_null());
    if let (Some(prompt), Some(completion)) = (prompt, completion) {
        let prompt = match prompt {
            Json::Array(p) => p,
            _ => {
                return Err(invalid(format!(
                    "SFT example {index}: prompt must be an array of messages"
                )))
            }
        };
        if !is_js_object(&completion) {
            return Err(invalid(format!(
                "SFT example {index}: completion must be a message object"
            )));
        }
        if json_value::str_field(&completion, "role") != Some("assistant") {
            return Err(invalid(format!(
                "SFT example {index}: completion.role must be 'assistant'"
            )));
        }
        if !json_value::field(&completion, "content").is_some_and(Json::is_string) {
            return Err(invalid(format!(
                "SFT example {index}: completion.content must be a string"
            )));
        }
        return Ok(SftExample::PromptCompletion {
            prompt,
            completion,
            distill,
            tools,
        });
    }
    if let Some(messages) = messages {
        let messages = match messages {
            Json::Array(m) => m,
            _ => {
                return Err(invalid(format!(
                    "SFT example {index}: messages must be an array"
                )))
            }
        };
        if messages.is_empty() {
            return Err(invalid(format!(
                "SFT example {index}: messages cannot be empty"
            )));
        }
        let has_assistant = messages
            .iter()
            .any(|m| json_value::str_field(m, "role") == Some("assistant"));
        if !has_assistant {
            return Err(invalid(format!(
                "SFT example {index}: messages must contain at least one assistant message"
            )));
        }
        return Ok(SftExample::Conversation {
            messages,
            distill,
            tools,
        });
    }
    Err(invalid(format!(
        "SFT example {index}: must have either {{prompt, completion}} or {{messages}}"
    )))
}

/// An example handed over by `createSFTDataset` / `new SFTDataset`: the reference does not
/// validate these, and fails only when it renders them. The same happens here, with a clear
/// message instead of a JS TypeError.
pub fn from_created(example: Json, index: usize, format: Format) -> SftResult<SftExample> {
    // Fields are moved out of the example, which is not needed once its row is built.
    let mut obj = match example {
        Json::Object(obj) => obj,
        _ => serde_json::Map::new(),
    };
    let distill = obj.remove("distill");
    let tools = tools_of(&mut obj);
    match format {
        Format::PromptCompletion => {
            let prompt = match obj.remove("prompt") {
                Some(Json::Array(p)) => p,
                _ => {
                    return Err(invalid(format!(
                        "SFT example {index}: prompt must be an array of messages"
                    )))
                }
            };
            let completion = obj.remove("completion").unwrap_or(Json::Null);
            if !completion.is_object() {
                return Err(invalid(format!(
                    "SFT example {index}: completion must be a message object"
                )));
            }
            Ok(SftExample::PromptCompletion {
                prompt,
                completion,
                distill,
                tools,
            })
        }
        Format::Conversation => match obj.remove("messages") {
            Some(Json::Array(messages)) => Ok(SftExample::Conversation {
                messages,
                distill,
                tools,
            }),
            _ => Err(invalid(format!(
                "SFT example {index}: messages must be an array"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Json) -> String {
        validate_record(v, 4).unwrap_err().message
    }

    #[test]
    fn reference_messages_word_for_word() {
        assert_eq!(err(json!(3)), "SFT example 4 must be an object");
        assert_eq!(err(json!(null)), "SFT example 4 must be an object");
        assert_eq!(
            err(json!([1])),
            "SFT example 4: must have either {prompt, completion} or {messages}"
        );
        assert_eq!(
            err(json!({"prompt": "x", "completion": {}})),
            "SFT example 4: prompt must be an array of messages"
        );
        assert_eq!(
            err(json!({"prompt": [], "completion": "x"})),
            "SFT example 4: completion must be a message object"
        );
        assert_eq!(
            err(json!({"prompt": [], "completion": {"role": "user", "content": "x"}})),
            "SFT example 4: completion.role must be 'assistant'"
        );
        assert_eq!(
            err(json!({"prompt": [], "completion": {"role": "assistant", "content": null}})),
            "SFT example 4: completion.content must be a string"
        );
        assert_eq!(
            err(json!({"messages": {}})),
            "SFT example 4: messages must be an array"
        );
        assert_eq!(
            err(json!({"messages": []})),
            "SFT example 4: messages cannot be empty"
        );
        assert_eq!(
            err(json!({"messages": [{"role": "user", "content": "x"}]})),
            "SFT example 4: messages must contain at least one assistant message"
        );
    }

    #[test]
    fn prompt_completion_wins_when_both_shapes_are_present() {
        let v = json!({"messages": [], "prompt": [], "completion": {"role": "assistant", "content": ""}});
        assert_eq!(detect_format(&v).unwrap(), Format::PromptCompletion);
        assert_eq!(
            validate_record(v, 0).unwrap().format(),
            Format::PromptCompletion
        );
    }
}
