//! Chat messages and tool definitions as the chat template receives them.
//!
//! Messages reach the template as given (content of any type included: templates decide what
//! they accept), with three changes: a message's keys whose value is null are dropped, as
//! transformers 5 does before every render (an OpenAI `content: null` beside `tool_calls` would
//! otherwise print `None`); the camelCase keys of MLX Node code (`toolCalls`, `toolCallId`,
//! `reasoningContent`) are renamed to the snake_case keys templates read; and a tool's
//! `parameters.properties` given as a JSON string (the MLX Node form) is parsed into an object.

use serde_json::{Map, Value as Json};

use crate::error::{ErrorCode, SftError, SftResult};
use crate::json_value;

const CAMEL_TO_SNAKE: [(&str, &str); 3] = [
    ("toolCalls", "tool_calls"),
    ("toolCallId", "tool_call_id"),
    ("reasoningContent", "reasoning_content"),
];

fn invalid(index: usize, what: impl std::fmt::Display) -> SftError {
    SftError::new(
        ErrorCode::InvalidMessage,
        format!("message {index}: {what}"),
    )
}

/// Renames camelCase keys in place, keeping each key's position (templates that print a message
/// with `tojson` see the original order).
fn rename_camel_keys(map: &mut Map<String, Json>) {
    let old = std::mem::take(map);
    for (key, value) in old {
        match CAMEL_TO_SNAKE.iter().find(|(camel, _)| *camel == key) {
            Some((_, snake)) => {
                // An explicit snake_case key wins over its camelCase twin.
                map.entry(snake.to_string()).or_insert(value);
            }
            None => {
                map.insert(key, value);
            }
        }
    }
}

/// Checks one message and brings it into template shape. `index` is its position, for errors.
pub fn normalize_message(index: usize, message: &mut Json) -> SftResult<()> {
    let map = message
        .as_object_mut()
        .ok_or_else(|| invalid(index, "must be an object"))?;
    // One pass over the keys tells whether anything changes (nearly never).
    let (mut nulls, mut camel) = (false, false);
    for (key, value) in map.iter() {
        nulls |= value.is_null();
        camel |= CAMEL_TO_SNAKE.iter().any(|(c, _)| c == key);
    }
    // transformers 5 (`_normalize_chat_messages`) drops the message's own null-valued keys, not
    // those nested inside its values: a null tool-call argument still prints `null`. Dropped
    // before the renaming, so that `toolCalls: [...]` is not hidden by `tool_calls: null`.
    if nulls {
        map.retain(|_, value| !value.is_null());
    }
    if camel {
        rename_camel_keys(map);
    }
    match json_value::get(map, "role") {
        Some(Json::String(_)) => {}
        Some(_) => return Err(invalid(index, "role must be a string")),
        None => return Err(invalid(index, "role is missing")),
    }
    match json_value::get(map, "tool_calls") {
        None | Some(Json::Array(_)) => {}
        Some(_) => return Err(invalid(index, "tool_calls must be an array")),
    }
    Ok(())
}

pub fn normalize_messages(messages: &mut [Json]) -> SftResult<()> {
    for (i, m) in messages.iter_mut().enumerate() {
        normalize_message(i, m)?;
    }
    Ok(())
}

/// Parses a `parameters.properties` that arrives as a JSON string, in every tool definition
/// (OpenAI style `{type, function: {parameters}}` or flat `{name, parameters}`).
pub fn normalize_tools(tools: &mut Json) -> SftResult<()> {
    let list = match tools {
        Json::Array(list) => list,
        Json::Null => return Ok(()),
        _ => {
            return Err(SftError::new(
                ErrorCode::InvalidArgument,
                "tools must be an array of tool definitions",
            ))
        }
    };
    for (i, tool) in list.iter_mut().enumerate() {
        let function = match tool.get_mut("function") {
            Some(f) if f.is_object() => f,
            _ => tool,
        };
        let Some(props) = function
            .get_mut("parameters")
            .and_then(|p| p.get_mut("properties"))
        else {
            continue;
        };
        if let Json::String(text) = props {
            let parsed = crate::json_text::parse(text).map_err(|e| {
                SftError::new(
                    ErrorCode::InvalidArgument,
                    format!("tool {i}: parameters.properties is a string but not JSON: {e}"),
                )
            })?;
            *props = parsed;
        }
    }
    Ok(())
}

/// Messages and optional tool definitions in template shape, checked: what every render of
/// caller-supplied messages goes through.
pub fn prepare_chat(
    mut messages: Vec<Json>,
    tools: Option<Vec<Json>>,
) -> SftResult<(Vec<Json>, Option<Json>)> {
    normalize_messages(&mut messages)?;
    let tools = match tools {
        Some(list) => {
            let mut tools = Json::Array(list);
            normalize_tools(&mut tools)?;
            Some(tools)
        }
        None => None,
    };
    Ok((messages, tools))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn camel_case_keys_become_snake_case_in_place() {
        let mut m =
            json!({"role": "assistant", "toolCalls": [], "content": "x", "reasoningContent": "r"});
        normalize_message(0, &mut m).unwrap();
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"assistant","tool_calls":[],"content":"x","reasoning_content":"r"}"#
        );
    }

    #[test]
    fn null_valued_keys_are_dropped_and_nested_nulls_kept() {
        let mut m = json!({"role": "assistant", "content": null, "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {"a": null, "b": [null]}}}
        ], "name": null, "reasoning_content": null});
        normalize_message(0, &mut m).unwrap();
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":{"a":null,"b":[null]}}}]}"#
        );
    }

    #[test]
    fn a_null_snake_case_key_does_not_hide_its_camel_case_twin() {
        let mut m =
            json!({"role": "assistant", "tool_calls": null, "toolCalls": [], "content": "x"});
        normalize_message(0, &mut m).unwrap();
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"assistant","tool_calls":[],"content":"x"}"#
        );
        let mut m = json!({"role": null, "content": "x"});
        assert_eq!(
            normalize_message(2, &mut m).unwrap_err().message,
            "message 2: role is missing"
        );
    }

    #[test]
    fn bad_messages_name_index_and_field() {
        let mut m = json!({"content": "x"});
        assert_eq!(
            normalize_message(3, &mut m).unwrap_err().message,
            "message 3: role is missing"
        );
        let mut m = json!({"role": 5, "content": "x"});
        assert_eq!(
            normalize_message(1, &mut m).unwrap_err().message,
            "message 1: role must be a string"
        );
        let mut m = json!("hi");
        assert_eq!(
            normalize_message(0, &mut m).unwrap_err().code,
            ErrorCode::InvalidMessage
        );
    }

    #[test]
    fn string_properties_are_parsed() {
        let mut tools = json!([{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": "{\"a\": {\"type\": \"string\"}}"}}}]);
        normalize_tools(&mut tools).unwrap();
        assert_eq!(
            tools[0]["function"]["parameters"]["properties"],
            json!({"a": {"type": "string"}})
        );
    }
}
