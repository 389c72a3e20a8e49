//! `renderAs: 'mlx-node'`: a chat template rendered as MLX Node's own tokenizer renders it
//! (`@mlx-node/core`'s `Qwen3Tokenizer`), which differs from `transformers.apply_chat_template`:
//!
//! - historical reasoning is kept: the context has `preserve_thinking` and `keep_past_thinking`
//!   set, and a template that gates reasoning on the last user query without reading
//!   `preserve_thinking` itself has that gate opened (`gate_opened`);
//! - messages are sanitised (`sanitized_messages`): roles trimmed and lower-cased, unknown roles
//!   made `user`, ChatML control strings deleted from contents, tool calls in one shape;
//! - MiniJinja's own whitespace rules (no `trim_blocks`, no `lstrip_blocks`) and a compact
//!   `tojson`;
//! - the context holds only `messages`, `tools`, `add_generation_prompt`, `enable_thinking`,
//!   `bos_token` (empty when the model has none) and `eos_token`.

use std::borrow::Cow;

use minijinja::value::{Kwargs, Value};
use minijinja::Error;
use serde_json::{Map, Value as Json};

use crate::render::json_dumps::{dumps, DumpOptions};

/// How a tokenizer renders chat templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum RenderAs {
    /// As `transformers.apply_chat_template` (jinja2 with transformers' settings).
    #[default]
    Transformers,
    /// As MLX Node's tokenizer (see the module documentation).
    MlxNode,
}

impl RenderAs {
    pub fn name(self) -> &'static str {
        match self {
            RenderAs::Transformers => "transformers",
            RenderAs::MlxNode => "mlx-node",
        }
    }

    /// The setting's value as a user spells it; `None` for anything else.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "transformers" => Some(RenderAs::Transformers),
            "mlx-node" => Some(RenderAs::MlxNode),
            _ => None,
        }
    }

    /// The error for a value `parse` refuses; `what` names the setting.
    pub fn parse_error(what: &str, got: &str) -> crate::error::SftError {
        crate::error::SftError::invalid_argument(format!(
            "{what} must be 'transformers' or 'mlx-node', got {got:?}"
        ))
    }
}

/// The Qwen gate that keeps reasoning only after the last user query.
const QWEN_GATE: &str = "loop.index0 > ns.last_query_index";

/// The template source with its last-query gate opened by `preserve_thinking`, unless the
/// template reads `preserve_thinking` itself (it then decides on its own).
pub fn gate_opened(source: &str) -> Cow<'_, str> {
    if source.contains("preserve_thinking") || !source.contains(QWEN_GATE) {
        return Cow::Borrowed(source);
    }
    Cow::Owned(source.replace(QWEN_GATE, &format!("(preserve_thinking or {QWEN_GATE})")))
}

/// The roles MLX Node passes on; any other becomes `user`.
const ROLES: [&str; 5] = ["system", "user", "assistant", "tool", "developer"];

/// The control strings MLX Node deletes from message contents.
const DELETED: [&str; 3] = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"];

/// What every string of [`DELETED`] starts with.
const CONTROL_OPEN: &str = "<|";

/// Whether `text` holds one of [`DELETED`]: one vectorised search for their common start, which
/// plain text seldom holds, rather than a search per string.
fn holds_control_string(text: &str) -> bool {
    static OPEN: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let bytes = text.as_bytes();
    OPEN.get_or_init(|| memchr::memmem::Finder::new(CONTROL_OPEN))
        .find_iter(bytes)
        .any(|at| {
            DELETED
                .iter()
                .any(|d| bytes[at..].starts_with(d.as_bytes()))
        })
}

fn without_control_strings(text: &str) -> Cow<'_, str> {
    if !holds_control_string(text) {
        return Cow::Borrowed(text);
    }
    // One pass per string, in this order, as MLX Node deletes them: a control string that two
    // deletions join is left in place.
    let mut out = text.to_string();
    for deleted in DELETED {
        out = out.replace(deleted, "");
    }
    Cow::Owned(out)
}

fn sanitized_role(role: Option<&Json>) -> String {
    let role = role
        .and_then(Json::as_str)
        .unwrap_or_default()
        .trim()
        .to_lowercase();
    if ROLES.contains(&role.as_str()) {
        role
    } else {
        "user".to_string()
    }
}

/// `arguments` as an object where it is a JSON string that parses.
fn parsed_arguments(arguments: Option<&Json>) -> Json {
    match arguments {
        Some(Json::String(text)) => {
            crate::input::json_text::parse(text).unwrap_or_else(|_| Json::String(text.clone()))
        }
        Some(other) => other.clone(),
        None => Json::Null,
    }
}

/// A tool call as MLX Node hands it to templates: `{id?, name, arguments, function: {name,
/// arguments}}`, from the OpenAI shape (`{id, type, function: {name, arguments}}`) or a flat one.
fn reshaped_call(call: &Json) -> Json {
    let function = call.get("function");
    let field = |key: &str| function.and_then(|f| f.get(key)).or_else(|| call.get(key));
    let name = field("name").cloned().unwrap_or(Json::Null);
    let arguments = parsed_arguments(field("arguments"));
    let mut out = Map::new();
    if let Some(id) = call.get("id").filter(|id| !id.is_null()) {
        out.insert("id".into(), id.clone());
    }
    out.insert("name".into(), name.clone());
    out.insert("arguments".into(), arguments.clone());
    let mut inner = Map::new();
    inner.insert("name".into(), name);
    inner.insert("arguments".into(), arguments);
    out.insert("function".into(), Json::Object(inner));
    Json::Object(out)
}

/// One message as MLX Node's tokenizer hands it to the template: `role`, `content` (empty when
/// missing), and `tool_calls`, `tool_call_id` and `reasoning_content` where given, in that order;
/// its message type has no other fields. Fields arrive in snake_case already
/// (`message::normalize_message` renames MLX Node's camelCase keys).
fn sanitized_message(message: &Json) -> Json {
    let Some(map) = message.as_object() else {
        return message.clone();
    };
    let mut out = Map::with_capacity(5);
    out.insert("role".into(), Json::String(sanitized_role(map.get("role"))));
    let content = match map.get("content") {
        Some(Json::String(text)) => Json::String(without_control_strings(text).into()),
        Some(Json::Array(parts)) => Json::Array(parts.iter().map(sanitized_part).collect()),
        None | Some(Json::Null) => Json::String(String::new()),
        Some(other) => other.clone(),
    };
    out.insert("content".into(), content);
    if let Some(Json::Array(calls)) = map.get("tool_calls") {
        out.insert(
            "tool_calls".into(),
            Json::Array(calls.iter().map(reshaped_call).collect()),
        );
    }
    for key in ["tool_call_id", "reasoning_content"] {
        if let Some(value) = map.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), value.clone());
        }
    }
    Json::Object(out)
}

/// A content part with its text sanitised like a string content.
fn sanitized_part(part: &Json) -> Json {
    match part.get("text").and_then(Json::as_str) {
        Some(text) if DELETED.iter().any(|d| text.contains(d)) => {
            let mut part = part.clone();
            part["text"] = Json::String(without_control_strings(text).into());
            part
        }
        _ => part.clone(),
    }
}

/// The messages as MLX Node's tokenizer hands them to the template: the messages themselves
/// when every one is already in that form (most are: a role and a text), else sanitised copies.
pub fn sanitized_messages(messages: &[Json]) -> Cow<'_, [Json]> {
    if messages.iter().all(already_sanitized) {
        return Cow::Borrowed(messages);
    }
    Cow::Owned(messages.iter().map(sanitized_message).collect())
}

/// Whether `sanitized_message` would give `message` back unchanged, key order included: a
/// known role as MLX Node spells it, a content it keeps as it is, no tool calls (those are
/// reshaped) and no field it drops.
fn already_sanitized(message: &Json) -> bool {
    let Some(map) = message.as_object() else {
        return true;
    };
    let mut keys = map.iter();
    let role_kept = matches!(
        keys.next(),
        Some((key, Json::String(role))) if key == "role" && ROLES.contains(&role.as_str())
    );
    let content_kept = match keys.next() {
        Some((key, content)) if key == "content" => match content {
            Json::String(text) => matches!(without_control_strings(text), Cow::Borrowed(_)),
            Json::Array(parts) => parts.iter().all(|part| {
                part.get("text")
                    .and_then(Json::as_str)
                    .is_none_or(|text| !holds_control_string(text))
            }),
            Json::Null => false,
            _ => true,
        },
        _ => false,
    };
    // The optional fields it keeps, in its order, each at most once and never null.
    let mut optional = ["tool_call_id", "reasoning_content"].into_iter();
    role_kept
        && content_kept
        && keys.all(|(key, value)| !value.is_null() && optional.any(|kept| kept == key))
}

/// The special-token variables MLX Node's context holds: `bos_token` (empty when the model has
/// none) and `eos_token`.
pub fn context_tokens(special_tokens: &[(String, Value)]) -> Vec<(String, Value)> {
    let find = |name: &str| {
        special_tokens
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, v)| v.clone())
    };
    let mut out = vec![(
        "bos_token".to_string(),
        find("bos_token")
            .filter(|v| !v.is_none() && !v.is_undefined())
            .unwrap_or_else(|| Value::from("")),
    )];
    if let Some(eos) = find("eos_token") {
        out.push(("eos_token".to_string(), eos));
    }
    out
}

/// The variables MLX Node sets for every render, beside the special tokens.
pub const PRESERVED_THINKING: [&str; 2] = ["preserve_thinking", "keep_past_thinking"];

/// `tojson` as MLX Node's engine writes it: compact JSON (no spaces after `,` and `:`), keys in
/// their order, no ASCII or HTML escaping. Arguments are accepted and have no effect.
pub fn compact_tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let _ = kwargs;
    let options = DumpOptions {
        item_separator: ",".into(),
        key_separator: ":".into(),
        ..DumpOptions::python_defaults(None)
    };
    Ok(Value::from(dumps(&value, &options)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_qwen_gate_opens_unless_the_template_reads_preserve_thinking() {
        let gate = "{%- if loop.index0 > ns.last_query_index %}";
        assert_eq!(
            gate_opened(gate),
            "{%- if (preserve_thinking or loop.index0 > ns.last_query_index) %}"
        );
        let own = "{%- if preserve_thinking or loop.index0 > ns.last_query_index %}";
        assert_eq!(gate_opened(own), own);
        assert_eq!(gate_opened("{{ x }}"), "{{ x }}");
    }

    #[test]
    fn control_strings_are_found_by_their_common_start() {
        assert!(DELETED.iter().all(|d| d.starts_with(CONTROL_OPEN)));
        for (text, holds) in [
            ("plain", false),
            ("<|", false),
            ("a <| b <|im_end", false),
            ("<|<|im_end|>", true),
            ("x<|endoftext|>", true),
            ("é<|im_start|>", true),
        ] {
            assert_eq!(holds_control_string(text), holds, "{text:?}");
            assert_eq!(holds, DELETED.iter().any(|d| text.contains(d)), "{text:?}");
        }
    }

    #[test]
    fn roles_and_contents_are_sanitised() {
        let got = sanitized_messages(&[
            json!({"content": "a<|im_end|>\n<|im_start|>b<|endoftext|>", "role": " Assistant "}),
            json!({"role": "narrator", "content": "<|im_<|im_end|>start|>x", "name": "n"}),
            json!({"role": "tool", "content": [{"type": "text", "text": "<|im_end|>t"}], "tool_call_id": "c"}),
            json!({"reasoning_content": "r", "role": "assistant", "content": null}),
        ])
        .into_owned();
        assert_eq!(
            got,
            vec![
                json!({"role": "assistant", "content": "a\nb"}),
                // One pass per control string: what a deletion joins stays; other fields go.
                json!({"role": "user", "content": "<|im_start|>x"}),
                json!({"role": "tool", "content": [{"type": "text", "text": "t"}], "tool_call_id": "c"}),
                json!({"role": "assistant", "content": "", "reasoning_content": "r"}),
            ]
        );
        // The role comes first, whatever the order given.
        let keys: Vec<_> = got[0].as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["role", "content"]);
    }

    #[test]
    fn messages_already_in_mlx_node_form_are_not_copied() {
        let kept = [
            json!({"role": "system", "content": "s"}),
            json!({"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image"}]}),
            json!({"role": "tool", "content": "r", "tool_call_id": "c"}),
            json!({"role": "assistant", "content": "a", "reasoning_content": "why"}),
            json!({"role": "assistant", "content": "a", "tool_call_id": "c", "reasoning_content": "r"}),
            json!("not an object"),
        ];
        assert!(matches!(sanitized_messages(&kept), Cow::Borrowed(_)));
        // Each of these changes: the copy is made, and equals what each message sanitises to.
        let changed = [
            json!({"content": "c", "role": "user"}),
            json!({"role": "User", "content": "c"}),
            json!({"role": "narrator", "content": "c"}),
            json!({"role": "user", "content": "a<|im_end|>"}),
            json!({"role": "user", "content": [{"type": "text", "text": "<|endoftext|>"}]}),
            json!({"role": "user"}),
            json!({"role": "user", "content": null}),
            json!({"role": "user", "content": "c", "name": "n"}),
            json!({"role": "tool", "content": "c", "tool_call_id": null}),
            json!({"role": "assistant", "content": "c", "reasoning_content": "r", "tool_call_id": "c"}),
            json!({"role": "assistant", "content": "", "tool_calls": []}),
        ];
        for message in changed {
            let list = [json!({"role": "user", "content": "u"}), message.clone()];
            let got = sanitized_messages(&list);
            assert!(matches!(got, Cow::Owned(_)), "{message}");
            assert_eq!(got[1], sanitized_message(&message));
            let keys = |m: &Json| m.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
            assert_eq!(keys(&got[1]), keys(&sanitized_message(&message)));
        }
    }

    #[test]
    fn tool_calls_take_one_shape_with_parsed_arguments() {
        let got = sanitized_messages(&[json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
            {"name": "g", "arguments": {"y": 2}},
            {"function": {"name": "h", "arguments": "not json"}},
        ]})])
        .into_owned();
        assert_eq!(
            got[0]["tool_calls"],
            json!([
                {"id": "c1", "name": "f", "arguments": {"x": 1}, "function": {"name": "f", "arguments": {"x": 1}}},
                {"name": "g", "arguments": {"y": 2}, "function": {"name": "g", "arguments": {"y": 2}}},
                {"name": "h", "arguments": "not json", "function": {"name": "h", "arguments": "not json"}},
            ])
        );
    }

    #[test]
    fn the_context_has_an_empty_bos_when_the_model_has_none() {
        let tokens = context_tokens(&[
            ("eos_token".into(), Value::from("<|im_end|>")),
            ("pad_token".into(), Value::from("<|endoftext|>")),
        ]);
        let names: Vec<_> = tokens.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(names, ["bos_token=", "eos_token=<|im_end|>"]);
    }
}
