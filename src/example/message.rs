//! Chat messages and tool definitions as the chat template receives them.
//!
//! Messages reach the template as given (content of any type included: templates decide what
//! they accept), with the changes transformers 5 makes before every render and two of MLX Node:
//! - a message's keys whose value is null are dropped (an OpenAI `content: null` beside
//!   `tool_calls` would otherwise print `None`);
//! - the camelCase keys of MLX Node code (`toolCalls`, `toolCallId`, `reasoningContent`) are
//!   renamed to the snake_case keys templates read;
//! - a message's reasoning, the first of `reasoning_content`, `thinking` and `reasoning` it has,
//!   fills `reasoning_content` and, unless the message has its own, `thinking` (GPT-OSS reads
//!   that one), with the key order of transformers' `{"thinking": r, **message,
//!   "reasoning_content": r}`;
//! - a tool's `parameters.properties` given as a JSON string (the MLX Node form) is parsed into
//!   an object.

use serde_json::{Map, Value as Json};

use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::json_value;

const CAMEL_TO_SNAKE: [(&str, &str); 3] = [
    ("toolCalls", "tool_calls"),
    ("toolCallId", "tool_call_id"),
    ("reasoningContent", "reasoning_content"),
];

/// The names a message's reasoning comes under, the one templates read first.
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// transformers 5's reasoning aliases (`_alias_reasoning_fields`), in its key order: `thinking`
/// first (keeping its own value where the message has one), `reasoning_content` where the
/// message had it or last.
fn alias_reasoning(map: &mut Map<String, Json>) {
    let Some(reasoning) = REASONING_FIELDS
        .iter()
        .find_map(|key| json_value::get(map, key))
        .cloned()
    else {
        return;
    };
    let old = std::mem::take(map);
    map.insert("thinking".to_string(), reasoning.clone());
    map.extend(old);
    map.insert("reasoning_content".to_string(), reasoning);
}

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
    let (mut nulls, mut camel, mut reasoning) = (false, false, false);
    for (key, value) in map.iter() {
        nulls |= value.is_null();
        camel |= CAMEL_TO_SNAKE.iter().any(|(c, _)| c == key);
        reasoning |= REASONING_FIELDS.contains(&key.as_str());
    }
    // transformers 5 (`_normalize_chat_messages`) drops the message's own null-valued keys, not
    // those nested inside its values: a null tool-call argument still prints `null`. Dropped
    // before the renaming, so that `toolCalls: [...]` is not hidden by `tool_calls: null`.
    if nulls {
        map.retain(|_, value| !value.is_null());
    }
    if camel {
        rename_camel_keys(map);
        reasoning |= map.contains_key("reasoning_content");
    }
    if reasoning {
        alias_reasoning(map);
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

/// `parseToolArguments`: the tool calls' `arguments` given as a JSON string (the OpenAI wire
/// format) become the object the string holds, as templates that iterate `arguments|items`
/// need. A string that does not hold a JSON object is an error naming the message and call.
pub fn parse_tool_arguments(index: usize, message: &mut Json) -> SftResult<()> {
    let Some(calls) = message.get_mut("tool_calls").and_then(Json::as_array_mut) else {
        return Ok(());
    };
    for (j, call) in calls.iter_mut().enumerate() {
        let (holder, place) = if call.get("function").is_some_and(Json::is_object) {
            (&mut call["function"], "function.arguments")
        } else {
            (call, "arguments")
        };
        let Some(slot) = holder.get_mut("arguments") else {
            continue;
        };
        let Json::String(text) = slot else {
            continue;
        };
        let parsed = crate::input::json_text::parse(text).map_err(|e| {
            invalid(
                index,
                format!("tool_calls[{j}].{place} is a string but not JSON: {e}"),
            )
        })?;
        if !parsed.is_object() {
            return Err(invalid(
                index,
                format!("tool_calls[{j}].{place} is a string that does not hold a JSON object"),
            ));
        }
        *slot = parsed;
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
            let parsed = crate::input::json_text::parse(text).map_err(|e| {
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
            r#"{"thinking":"r","role":"assistant","tool_calls":[],"content":"x","reasoning_content":"r"}"#
        );
    }

    #[test]
    fn reasoning_is_aliased_as_transformers_5_does() {
        let order = |m: serde_json::Value| {
            let mut m = m;
            normalize_message(0, &mut m).unwrap();
            serde_json::to_string(&m).unwrap()
        };
        assert_eq!(
            order(json!({"role": "assistant", "reasoning": "r", "content": "x"})),
            r#"{"thinking":"r","role":"assistant","reasoning":"r","content":"x","reasoning_content":"r"}"#
        );
        // The first present name wins; a message's own `thinking` keeps its value and place.
        assert_eq!(
            order(
                json!({"role": "assistant", "content": "x", "thinking": "t", "reasoning_content": "c"})
            ),
            r#"{"thinking":"t","role":"assistant","content":"x","reasoning_content":"c"}"#
        );
        assert_eq!(
            order(json!({"role": "assistant", "thinking": null, "reasoning": {"a": 1}})),
            r#"{"thinking":{"a":1},"role":"assistant","reasoning":{"a":1},"reasoning_content":{"a":1}}"#
        );
        assert_eq!(
            order(json!({"role": "user", "content": "x"})),
            r#"{"role":"user","content":"x"}"#
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
    fn string_tool_arguments_are_parsed_when_asked() {
        let mut m = json!({"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": "{\"x\": 1.5, \"y\": [1]}"}},
            {"name": "g", "arguments": "{}"},
            {"name": "h", "arguments": {"kept": true}}
        ]});
        parse_tool_arguments(0, &mut m).unwrap();
        assert_eq!(
            m["tool_calls"][0]["function"]["arguments"],
            json!({"x": 1.5, "y": [1]})
        );
        assert_eq!(m["tool_calls"][1]["arguments"], json!({}));
        assert_eq!(m["tool_calls"][2]["arguments"], json!({"kept": true}));
        let mut m = json!({"role": "assistant", "tool_calls": [
            {"function": {"name": "f", "arguments": "[1, 2]"}}]});
        let err = parse_tool_arguments(4, &mut m).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidMessage);
        assert_eq!(
            err.message,
            "message 4: tool_calls[0].function.arguments is a string that does not hold a JSON object"
        );
        let mut m = json!({"role": "assistant", "tool_calls": [{"name": "f", "arguments": "{x"}]});
        let err = parse_tool_arguments(1, &mut m).unwrap_err();
        assert!(
            err.message
                .starts_with("message 1: tool_calls[0].arguments is a string but not JSON"),
            "{}",
            err.message
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
