//! Dataset formats: the shapes people store chat data in, turned into the reference's two shapes
//! (`{messages}` or `{prompt, completion}`) before `example` validates them.
//!
//! - `reference`: the records as they are (the default: the reference's behaviour);
//! - `auto`: each record's format is detected from its keys and every record must agree with
//!   record 0;
//! - `messages`: `{messages: [{role, content, ...}]}`;
//! - `prompt-completion`: `{prompt, completion}` as message lists / a message, or as TRL's plain
//!   strings (one user and one assistant message);
//! - `sharegpt`: `{conversations: [{from, value, weight?}], system?, tools?}` as LLaMA-Factory
//!   reads it, with axolotl's per-turn `weight` (or `train`) kept for `train_flags`;
//! - `alpaca`: `{instruction, input?, output, system?, history?}` as LLaMA-Factory converts it;
//! - `openai`: `messages` whose `content` may be a list of `{type: 'text', text}` parts.
//!
//! `columns` renames the fields a format reads, `roles` renames role values.

use serde_json::{Map, Value as Json};

use crate::error::{ErrorCode, SftError, SftResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DatasetFormat {
    #[default]
    Reference,
    Auto,
    Messages,
    PromptCompletion,
    ShareGpt,
    Alpaca,
    OpenAi,
}

const NAMES: [(&str, DatasetFormat); 7] = [
    ("reference", DatasetFormat::Reference),
    ("auto", DatasetFormat::Auto),
    ("messages", DatasetFormat::Messages),
    ("prompt-completion", DatasetFormat::PromptCompletion),
    ("sharegpt", DatasetFormat::ShareGpt),
    ("alpaca", DatasetFormat::Alpaca),
    ("openai", DatasetFormat::OpenAi),
];

impl DatasetFormat {
    pub fn parse(name: &str) -> SftResult<Self> {
        NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                SftError::invalid_argument(format!(
                    "format must be one of {}, got '{name}'",
                    NAMES
                        .iter()
                        .map(|(n, _)| format!("'{n}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("", |(n, _)| n)
    }
}

/// The fields `columns` can rename, with their defaults (ShareGPT's differ, see `field`).
const FIELDS: [&str; 14] = [
    "messages",
    "role",
    "content",
    "prompt",
    "completion",
    "system",
    "tools",
    "instruction",
    "input",
    "output",
    "history",
    // ShareGPT spellings of messages / role / content, accepted as aliases.
    "conversations",
    "from",
    "value",
];

/// The options of the conversion.
#[derive(Debug, Clone, Default)]
pub struct FormatOptions {
    pub format: DatasetFormat,
    /// Field renames: logical name (`messages`, `role`, `content`, `prompt`, `completion`,
    /// `system`, `tools`, `instruction`, `input`, `output`, `history`) -> the record's key.
    pub columns: Vec<(String, String)>,
    /// Role renames, applied before the format's own (ShareGPT's `human` -> `user` ...).
    pub roles: Vec<(String, String)>,
}

fn invalid(index: usize, what: impl std::fmt::Display) -> SftError {
    SftError::new(
        ErrorCode::InvalidExample,
        format!("SFT example {index}: {what}"),
    )
}

/// Converts records of one dataset format into the reference's shapes.
#[derive(Debug, Clone)]
pub struct Converter {
    options: FormatOptions,
}

impl Converter {
    pub fn new(options: FormatOptions) -> SftResult<Self> {
        for (logical, _) in &options.columns {
            if !FIELDS.contains(&logical.as_str()) {
                return Err(SftError::invalid_argument(format!(
                    "columns: unknown field '{logical}' (known: {})",
                    FIELDS[..11].join(", ")
                )));
            }
        }
        if options.format == DatasetFormat::Reference
            && !(options.columns.is_empty() && options.roles.is_empty())
        {
            return Err(SftError::invalid_argument(
                "columns and roles need a format other than 'reference' (e.g. 'auto')",
            ));
        }
        Ok(Converter { options })
    }

    pub fn format(&self) -> DatasetFormat {
        self.options.format
    }

    /// The record key of a logical field under `format`.
    fn field<'a>(&'a self, logical: &'a str, format: DatasetFormat) -> &'a str {
        let aliases: &[&str] = match logical {
            "messages" => &["messages", "conversations"],
            "role" => &["role", "from"],
            "content" => &["content", "value"],
            other => return self.renamed(&[other]).unwrap_or(other),
        };
        if let Some(key) = self.renamed(aliases) {
            return key;
        }
        match (logical, format) {
            ("messages", DatasetFormat::ShareGpt) => "conversations",
            ("role", DatasetFormat::ShareGpt) => "from",
            ("content", DatasetFormat::ShareGpt) => "value",
            _ => aliases[0],
        }
    }

    fn renamed(&self, logical: &[&str]) -> Option<&str> {
        self.options
            .columns
            .iter()
            .find(|(l, _)| logical.contains(&l.as_str()))
            .map(|(_, key)| key.as_str())
    }

    /// Top-level record keys any format may read: a Parquet file's other columns are skipped.
    pub fn top_level_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = [
            "messages",
            "conversations",
            "prompt",
            "completion",
            "system",
            "tools",
            "instruction",
            "input",
            "output",
            "history",
            "distill",
        ]
        .iter()
        .map(|k| k.to_string())
        .collect();
        keys.extend(self.options.columns.iter().map(|(_, v)| v.clone()));
        keys
    }

    fn role_name<'a>(&'a self, role: &'a str) -> &'a str {
        self.options
            .roles
            .iter()
            .find(|(from, _)| from == role)
            .map_or(role, |(_, to)| to.as_str())
    }

    /// The format a record is in, from its keys (`auto`); `None` when no format fits, and the
    /// record then reaches `example` unchanged for the reference's error.
    pub fn detect(&self, record: &Json) -> Option<DatasetFormat> {
        let obj = record.as_object()?;
        let has =
            |logical: &str, format: DatasetFormat| obj.contains_key(self.field(logical, format));
        use DatasetFormat::*;
        if has("prompt", PromptCompletion) && has("completion", PromptCompletion) {
            return Some(PromptCompletion);
        }
        // A message list under `messages` (or its rename) reads as messages, under
        // `conversations` as ShareGPT, unless the first message's keys say otherwise.
        let list = if has("messages", OpenAi) {
            Some((self.field("messages", OpenAi), Messages))
        } else if has("messages", ShareGpt) {
            Some((self.field("messages", ShareGpt), ShareGpt))
        } else {
            None
        };
        if let Some((key, by_name)) = list {
            let first = obj[key].as_array().and_then(|m| m.first());
            let key_of =
                |format| first.is_some_and(|m| m.get(self.field("role", format)).is_some());
            let shape = if self.field("role", OpenAi) == self.field("role", ShareGpt) {
                by_name
            } else if key_of(ShareGpt) && !key_of(OpenAi) {
                ShareGpt
            } else if key_of(OpenAi) && !key_of(ShareGpt) {
                Messages
            } else {
                by_name
            };
            if shape == ShareGpt {
                return Some(ShareGpt);
            }
            let content = self.field("content", OpenAi);
            let parts = first.is_some_and(|m| m.get(content).is_some_and(Json::is_array));
            // Or a turn in OpenAI's wire shape: tool calls with a null content.
            let calls_only = obj[key].as_array().is_some_and(|list| {
                list.iter().any(|m| {
                    m.get(content).is_some_and(Json::is_null)
                        && m.get("tool_calls").is_some_and(Json::is_array)
                })
            });
            return Some(if parts || calls_only {
                OpenAi
            } else {
                Messages
            });
        }
        if has("instruction", Alpaca) && has("output", Alpaca) {
            return Some(Alpaca);
        }
        None
    }

    /// The record in a reference shape, and the format it was read as.
    pub fn convert(&self, record: Json, index: usize) -> SftResult<(Json, DatasetFormat)> {
        let (format, read_as) = match self.options.format {
            DatasetFormat::Reference => return Ok((record, DatasetFormat::Reference)),
            DatasetFormat::Auto => match self.detect(&record) {
                // Plain messages and OpenAI messages read alike: parts, if any, are joined.
                Some(DatasetFormat::Messages) => (DatasetFormat::OpenAi, DatasetFormat::Messages),
                Some(f) => (f, f),
                None => return Ok((record, DatasetFormat::Reference)),
            },
            f => (f, f),
        };
        let Json::Object(mut obj) = record else {
            return Err(invalid(index, "must be an object"));
        };
        let mut out = Map::new();
        match format {
            DatasetFormat::Messages | DatasetFormat::OpenAi => {
                let messages = self.message_list(&mut obj, format, index)?;
                out.insert("messages".into(), Json::Array(messages));
            }
            DatasetFormat::ShareGpt => {
                let messages = self.sharegpt(&mut obj, index)?;
                out.insert("messages".into(), Json::Array(messages));
            }
            DatasetFormat::PromptCompletion => self.prompt_completion(&mut obj, &mut out, index)?,
            DatasetFormat::Alpaca => self.alpaca(&mut obj, &mut out, index)?,
            DatasetFormat::Reference | DatasetFormat::Auto => unreachable_format()?,
        }
        if let Some(tools) = obj.remove(self.field("tools", format)) {
            if !tools.is_null() {
                out.insert("tools".into(), tools);
            }
        }
        if let Some(distill) = obj.remove("distill") {
            out.insert("distill".into(), distill);
        }
        Ok((Json::Object(out), read_as))
    }

    /// Whether records read as `a` and as `b` may share a file under `auto`: plain and OpenAI
    /// messages may; an undetected record is reported by `example` anyway.
    pub fn compatible(a: DatasetFormat, b: DatasetFormat) -> bool {
        use DatasetFormat::*;
        let family = |f| if f == OpenAi { Messages } else { f };
        a == Reference || b == Reference || family(a) == family(b)
    }

    /// One message in template shape: renamed role and content keys, roles mapped, text parts
    /// joined (`openai`).
    fn message(
        &self,
        message: Json,
        format: DatasetFormat,
        index: usize,
        at: &str,
    ) -> SftResult<Json> {
        let Json::Object(m) = message else {
            return Err(invalid(index, format_args!("{at} must be an object")));
        };
        let (role_key, content_key) = (self.field("role", format), self.field("content", format));
        // OpenAI's assistant turn that only calls tools has `content: null`: read as "".
        let calls_only = format == DatasetFormat::OpenAi
            && m.get("tool_calls")
                .is_some_and(|c| c.as_array().is_some_and(|c| !c.is_empty()));
        let mut out = Map::with_capacity(m.len());
        for (key, value) in m {
            if key == role_key {
                let value = match value {
                    Json::String(r) => Json::String(self.role_name(&r).to_string()),
                    other => other,
                };
                out.insert("role".into(), value);
            } else if key == content_key {
                let value = if calls_only && value.is_null() {
                    Json::String(String::new())
                } else if format == DatasetFormat::OpenAi {
                    joined_parts(value, index, at)?
                } else {
                    value
                };
                out.insert("content".into(), value);
            } else if key != "role" && key != "content" {
                out.insert(key, value);
            }
        }
        Ok(Json::Object(out))
    }

    fn message_list(
        &self,
        obj: &mut Map<String, Json>,
        format: DatasetFormat,
        index: usize,
    ) -> SftResult<Vec<Json>> {
        let key = self.field("messages", format);
        let list = match obj.remove(key) {
            Some(Json::Array(list)) => list,
            Some(_) => return Err(invalid(index, format_args!("{key} must be an array"))),
            None => return Err(invalid(index, format_args!("{key} is missing"))),
        };
        list.into_iter()
            .enumerate()
            .map(|(k, m)| self.message(m, format, index, &format!("{key}[{k}]")))
            .collect()
    }

    fn sharegpt(&self, obj: &mut Map<String, Json>, index: usize) -> SftResult<Vec<Json>> {
        let format = DatasetFormat::ShareGpt;
        let key = self.field("messages", format).to_string();
        let turns = match obj.remove(&key) {
            Some(Json::Array(list)) => list,
            Some(_) => return Err(invalid(index, format_args!("{key} must be an array"))),
            None => return Err(invalid(index, format_args!("{key} is missing"))),
        };
        let (from_key, value_key) = (self.field("role", format), self.field("content", format));
        let mut messages = Vec::with_capacity(turns.len() + 1);
        if let Some(system) = obj.remove(self.field("system", format)) {
            match system {
                Json::String(s) if !s.is_empty() => messages.push(text_message("system", s)),
                Json::String(_) | Json::Null => {}
                _ => return Err(invalid(index, "system must be a string")),
            }
        }
        for (k, turn) in turns.into_iter().enumerate() {
            let at = format!("{key}[{k}]");
            let Json::Object(mut turn) = turn else {
                return Err(invalid(index, format_args!("{at} must be an object")));
            };
            let from = match turn.remove(from_key) {
                Some(Json::String(f)) => f,
                _ => {
                    return Err(invalid(
                        index,
                        format_args!("{at}.{from_key} must be a string"),
                    ))
                }
            };
            let value = match turn.remove(value_key) {
                Some(Json::String(v)) => v,
                _ => {
                    return Err(invalid(
                        index,
                        format_args!("{at}.{value_key} must be a string"),
                    ))
                }
            };
            let role = match self.role_name(&from) {
                "human" | "user" => "user",
                "gpt" | "assistant" => "assistant",
                "system" => "system",
                "observation" | "tool" => "tool",
                "function_call" => {
                    messages.push(with_flags(function_call(&value, index, &at)?, &mut turn));
                    continue;
                }
                other => {
                    return Err(invalid(
                        index,
                        format_args!(
                            "{at}.{from_key} is '{other}', not one of human, gpt, system, observation, function_call (map other names with `roles`)"
                        ),
                    ))
                }
            };
            messages.push(with_flags(text_message(role, value), &mut turn));
        }
        Ok(messages)
    }

    fn prompt_completion(
        &self,
        obj: &mut Map<String, Json>,
        out: &mut Map<String, Json>,
        index: usize,
    ) -> SftResult<()> {
        let format = DatasetFormat::PromptCompletion;
        let (pk, ck) = (
            self.field("prompt", format),
            self.field("completion", format),
        );
        let prompt = match obj.remove(pk) {
            Some(Json::String(p)) => vec![text_message("user", p)],
            Some(Json::Array(list)) => list
                .into_iter()
                .enumerate()
                .map(|(k, m)| self.message(m, format, index, &format!("{pk}[{k}]")))
                .collect::<SftResult<_>>()?,
            Some(_) => {
                return Err(invalid(
                    index,
                    format_args!("{pk} must be a string or an array of messages"),
                ))
            }
            None => return Err(invalid(index, format_args!("{pk} is missing"))),
        };
        let completion = match obj.remove(ck) {
            Some(Json::String(c)) => text_message("assistant", c),
            // TRL's conversational form: a list holding the assistant message.
            Some(Json::Array(mut list)) if list.len() == 1 => {
                self.message(list.remove(0), format, index, &format!("{ck}[0]"))?
            }
            Some(m @ Json::Object(_)) => self.message(m, format, index, ck)?,
            Some(_) => {
                return Err(invalid(
                    index,
                    format_args!("{ck} must be a string, a message, or a list of one message"),
                ))
            }
            None => return Err(invalid(index, format_args!("{ck} is missing"))),
        };
        out.insert("prompt".into(), Json::Array(prompt));
        out.insert("completion".into(), completion);
        Ok(())
    }

    fn alpaca(
        &self,
        obj: &mut Map<String, Json>,
        out: &mut Map<String, Json>,
        index: usize,
    ) -> SftResult<()> {
        let format = DatasetFormat::Alpaca;
        let mut text = |logical: &str, required: bool| -> SftResult<String> {
            let key = self.field(logical, format);
            match obj.remove(key) {
                Some(Json::String(s)) => Ok(s),
                None | Some(Json::Null) if !required => Ok(String::new()),
                None => Err(invalid(index, format_args!("{key} is missing"))),
                Some(_) => Err(invalid(index, format_args!("{key} must be a string"))),
            }
        };
        let instruction = text("instruction", true)?;
        let input = text("input", false)?;
        let output = text("output", true)?;
        let system = text("system", false)?;
        let history_key = self.field("history", format);
        let history = match obj.remove(history_key) {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(h)) => h,
            Some(_) => {
                return Err(invalid(
                    index,
                    format_args!("{history_key} must be an array of [user, assistant] pairs"),
                ))
            }
        };
        let mut prompt = Vec::with_capacity(2 * history.len() + 2);
        if !system.is_empty() {
            prompt.push(text_message("system", system));
        }
        for (k, pair) in history.into_iter().enumerate() {
            match pair {
                Json::Array(p) if p.len() == 2 && p.iter().all(Json::is_string) => {
                    let mut p = p.into_iter().map(|v| match v {
                        Json::String(s) => s,
                        _ => String::new(),
                    });
                    prompt.push(text_message("user", p.next().unwrap_or_default()));
                    prompt.push(text_message("assistant", p.next().unwrap_or_default()));
                }
                _ => {
                    return Err(invalid(
                        index,
                        format_args!(
                            "{history_key}[{k}] must be a [user, assistant] pair of strings"
                        ),
                    ))
                }
            }
        }
        let user: Vec<String> = [instruction, input]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        prompt.push(text_message("user", user.join("\n")));
        out.insert("prompt".into(), Json::Array(prompt));
        out.insert("completion".into(), text_message("assistant", output));
        Ok(())
    }
}

fn unreachable_format() -> SftResult<()> {
    Err(SftError::new(
        ErrorCode::Internal,
        "dataset format not resolved before conversion",
    ))
}

/// A ShareGPT turn's per-message training flags (axolotl's `weight`, or `train`) carried onto
/// the message it becomes; `train_flags` reads them there. The turn's other keys are not read.
fn with_flags(mut message: Json, turn: &mut Map<String, Json>) -> Json {
    if let Some(m) = message.as_object_mut() {
        for key in ["train", "weight"] {
            if let Some(flag) = turn.remove(key) {
                m.insert(key.into(), flag);
            }
        }
    }
    message
}

fn text_message(role: &str, content: String) -> Json {
    let mut m = Map::with_capacity(2);
    m.insert("role".into(), Json::String(role.to_string()));
    m.insert("content".into(), Json::String(content));
    Json::Object(m)
}

/// ShareGPT's `function_call` turn: a JSON `{name, arguments}` (or a list of them) that becomes
/// an assistant message with those tool calls and empty content.
fn function_call(value: &str, index: usize, at: &str) -> SftResult<Json> {
    let parsed = crate::input::json_text::parse(value).map_err(|e| {
        invalid(
            index,
            format_args!("{at} is a function_call whose value is not JSON: {e}"),
        )
    })?;
    let calls = match parsed {
        Json::Array(list) => list,
        one => vec![one],
    };
    for (k, call) in calls.iter().enumerate() {
        if !call.get("name").is_some_and(Json::is_string) {
            return Err(invalid(
                index,
                format_args!("{at} function call {k} needs a string `name`"),
            ));
        }
    }
    let mut m = Map::with_capacity(3);
    m.insert("role".into(), Json::String("assistant".into()));
    m.insert("content".into(), Json::String(String::new()));
    m.insert("tool_calls".into(), Json::Array(calls));
    Ok(Json::Object(m))
}

/// OpenAI content parts: text parts joined with `\n` (as vLLM joins them); any other part is an
/// error naming it. Strings and nulls pass through.
fn joined_parts(content: Json, index: usize, at: &str) -> SftResult<Json> {
    let Json::Array(parts) = content else {
        return Ok(content);
    };
    let mut texts = Vec::with_capacity(parts.len());
    for (k, part) in parts.into_iter().enumerate() {
        let kind = part.get("type").and_then(Json::as_str).unwrap_or("");
        match (kind, part.get("text")) {
            ("text", Some(Json::String(t))) => texts.push(t.clone()),
            ("text", _) => {
                return Err(invalid(
                    index,
                    format_args!("{at}.content[{k}] is a text part without a string `text`"),
                ))
            }
            _ => {
                return Err(invalid(
                    index,
                    format_args!(
                        "{at}.content[{k}] is a part of type '{kind}'; only 'text' parts can be trained on"
                    ),
                ))
            }
        }
    }
    Ok(Json::String(texts.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn converter(format: DatasetFormat) -> Converter {
        Converter::new(FormatOptions {
            format,
            ..Default::default()
        })
        .unwrap()
    }

    fn convert(format: DatasetFormat, record: Json) -> SftResult<(Json, DatasetFormat)> {
        converter(format).convert(record, 3)
    }

    fn err(format: DatasetFormat, record: Json) -> String {
        convert(format, record).unwrap_err().message
    }

    #[test]
    fn sharegpt_as_llama_factory_reads_it() {
        let record = json!({
            "conversations": [
                {"from": "human", "value": "Weather?"},
                {"from": "function_call", "value": "{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}"},
                {"from": "observation", "value": "{\"t\": 20}"},
                {"from": "gpt", "value": "20 degrees"}
            ],
            "system": "Be brief",
            "tools": "[{\"name\": \"weather\"}]",
            "id": 17
        });
        let (out, read_as) = convert(DatasetFormat::Auto, record).unwrap();
        assert_eq!(read_as, DatasetFormat::ShareGpt);
        assert_eq!(
            out,
            json!({"messages": [
                {"role": "system", "content": "Be brief"},
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": "", "tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"role": "tool", "content": "{\"t\": 20}"},
                {"role": "assistant", "content": "20 degrees"}
            ], "tools": "[{\"name\": \"weather\"}]"})
        );
        assert_eq!(
            err(DatasetFormat::ShareGpt, json!({"conversations": [{"from": "bot", "value": "x"}]})),
            "SFT example 3: conversations[0].from is 'bot', not one of human, gpt, system, observation, function_call (map other names with `roles`)"
        );
        assert_eq!(
            err(DatasetFormat::ShareGpt, json!({"conversations": [{"from": "function_call", "value": "nope"}]})),
            "SFT example 3: conversations[0] is a function_call whose value is not JSON: expected ident at line 1 column 2"
        );
    }

    #[test]
    fn training_flags_reach_the_messages_of_every_message_format() {
        let record = json!({"conversations": [
            {"from": "human", "value": "q", "train": true, "id": 1},
            {"from": "gpt", "value": "a", "weight": 0}
        ]});
        let (out, _) = convert(DatasetFormat::ShareGpt, record).unwrap();
        assert_eq!(
            out["messages"],
            json!([{"role": "user", "content": "q", "train": true},
                   {"role": "assistant", "content": "a", "weight": 0}])
        );
        let record = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": "a", "weight": 1}
        ]});
        let (out, _) = convert(DatasetFormat::OpenAi, record).unwrap();
        assert_eq!(
            out["messages"][1],
            json!({"role": "assistant", "content": "a", "weight": 1})
        );
    }

    #[test]
    fn alpaca_as_llama_factory_converts_it() {
        let record = json!({"instruction": "Translate", "input": "bonjour", "output": "hello",
                            "system": "You translate.", "history": [["Hi", "Hello"]]});
        let (out, read_as) = convert(DatasetFormat::Auto, record).unwrap();
        assert_eq!(read_as, DatasetFormat::Alpaca);
        assert_eq!(
            out,
            json!({"prompt": [
                {"role": "system", "content": "You translate."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Translate\nbonjour"}
            ], "completion": {"role": "assistant", "content": "hello"}})
        );
        let (out, _) = convert(
            DatasetFormat::Alpaca,
            json!({"instruction": "", "input": "only input", "output": "o", "system": ""}),
        )
        .unwrap();
        assert_eq!(
            out["prompt"],
            json!([{"role": "user", "content": "only input"}])
        );
        assert_eq!(
            err(DatasetFormat::Alpaca, json!({"instruction": "x"})),
            "SFT example 3: output is missing"
        );
    }

    #[test]
    fn trl_prompt_completion_forms() {
        let (out, read_as) = convert(
            DatasetFormat::Auto,
            json!({"prompt": "2+2?", "completion": "4"}),
        )
        .unwrap();
        assert_eq!(read_as, DatasetFormat::PromptCompletion);
        assert_eq!(
            out,
            json!({"prompt": [{"role": "user", "content": "2+2?"}],
                   "completion": {"role": "assistant", "content": "4"}})
        );
        let (out, _) = convert(
            DatasetFormat::PromptCompletion,
            json!({"prompt": [{"role": "user", "content": "q"}],
                   "completion": [{"role": "assistant", "content": "a"}]}),
        )
        .unwrap();
        assert_eq!(
            out["completion"],
            json!({"role": "assistant", "content": "a"})
        );
        assert_eq!(
            err(
                DatasetFormat::PromptCompletion,
                json!({"prompt": 1, "completion": "a"})
            ),
            "SFT example 3: prompt must be a string or an array of messages"
        );
    }

    #[test]
    fn openai_parts_are_joined_and_other_parts_rejected() {
        let record = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null, "tool_calls": []}
        ]});
        let (out, read_as) = convert(DatasetFormat::Auto, record).unwrap();
        assert_eq!(read_as, DatasetFormat::OpenAi);
        assert_eq!(out["messages"][0]["content"], "a\nb");
        assert_eq!(
            out["messages"][1],
            json!({"role": "assistant", "content": null, "tool_calls": []})
        );
        assert_eq!(
            err(
                DatasetFormat::OpenAi,
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})
            ),
            "SFT example 3: messages[0].content[0] is a part of type 'image_url'; only 'text' parts can be trained on"
        );
    }

    #[test]
    fn an_openai_tool_call_turn_with_a_null_content_reads_as_empty() {
        let call =
            json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
        let record = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "content": "ok", "tool_call_id": "c1"}
        ]});
        // Detected as OpenAI's by that turn alone, and read so by the explicit format too.
        for format in [DatasetFormat::Auto, DatasetFormat::OpenAi] {
            let (out, read_as) = convert(format, record.clone()).unwrap();
            assert_eq!(read_as, DatasetFormat::OpenAi);
            assert_eq!(
                out["messages"][1],
                json!({"role": "assistant", "content": "", "tool_calls": [call]})
            );
        }
        // Other formats leave it null (transformers drops the key; templates see undefined).
        let (out, _) = convert(DatasetFormat::Messages, record).unwrap();
        assert_eq!(out["messages"][1]["content"], Json::Null);
    }

    #[test]
    fn columns_and_roles_rename_fields_and_roles() {
        let c = Converter::new(FormatOptions {
            format: DatasetFormat::Auto,
            columns: vec![
                ("messages".into(), "conversation".into()),
                ("role".into(), "speaker".into()),
                ("content".into(), "text".into()),
            ],
            roles: vec![("bot".into(), "assistant".into())],
        })
        .unwrap();
        let (out, read_as) = c
            .convert(
                json!({"conversation": [{"speaker": "user", "text": "hi"}, {"speaker": "bot", "text": "yo", "weight": 1}]}),
                0,
            )
            .unwrap();
        assert_eq!(read_as, DatasetFormat::Messages);
        assert_eq!(
            out,
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "weight": 1}]})
        );
        let e = Converter::new(FormatOptions {
            format: DatasetFormat::Reference,
            roles: vec![("bot".into(), "assistant".into())],
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        let e = Converter::new(FormatOptions {
            format: DatasetFormat::Auto,
            columns: vec![("speaker".into(), "x".into())],
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            e.message.starts_with("columns: unknown field 'speaker'"),
            "{}",
            e.message
        );
        assert_eq!(
            DatasetFormat::parse("csv").unwrap_err().message,
            "format must be one of 'reference', 'auto', 'messages', 'prompt-completion', 'sharegpt', 'alpaca', 'openai', got 'csv'"
        );
    }

    #[test]
    fn auto_leaves_unknown_shapes_to_the_reference_errors() {
        let (out, read_as) = convert(DatasetFormat::Auto, json!([1, 2])).unwrap();
        assert_eq!((out, read_as), (json!([1, 2]), DatasetFormat::Reference));
        assert!(Converter::compatible(
            DatasetFormat::Messages,
            DatasetFormat::OpenAi
        ));
        assert!(!Converter::compatible(
            DatasetFormat::ShareGpt,
            DatasetFormat::Messages
        ));
    }
}
