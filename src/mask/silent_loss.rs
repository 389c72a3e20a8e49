//! Data that a load would lose without a word, found per example and always reported (by
//! `validateSFTFile`, the CLI's `validate` and `stats`, and once per dataset by the loader):
//!
//! 1. `CONTENT_NOT_RENDERED`: a message whose content is not in the rendered text (a role the
//!    template does not know, a field it skips);
//! 2. `TOOLS_IGNORED`: an example with `tools` while `tools` is `'ignore'`;
//! 3. `CONTENT_DROPPED_BY_TEMPLATE`: content the template drops by design (the reasoning of
//!    earlier assistant turns);
//! 4. `DUPLICATE_EXAMPLE`: an exact copy of an earlier example;
//! 5. `CONTROL_TOKEN_IN_CONTENT`: a control-token string inside a message, which is encoded as
//!    that token unless `sanitizeControlTokens` is on;
//! 6. `TOOL_DATA_NOT_RENDERED`: a tool call, a tool definition passed to the template
//!    (`tools: 'example'`) or a tool result that the template does not print.

use aho_corasick::AhoCorasick;
use serde_json::Value as Json;

use super::text_search;
use crate::example::json_value;
use crate::example::SftExample;
use crate::example::ToolsMode;
use crate::tokenize::ChatTokenizer;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LossKind {
    ContentNotRendered,
    ToolsIgnored,
    ContentDroppedByTemplate,
    DuplicateExample,
    ControlTokenInContent,
    ToolDataNotRendered,
}

impl LossKind {
    pub const ALL: [LossKind; 6] = [
        LossKind::ContentNotRendered,
        LossKind::ToolsIgnored,
        LossKind::ContentDroppedByTemplate,
        LossKind::DuplicateExample,
        LossKind::ControlTokenInContent,
        LossKind::ToolDataNotRendered,
    ];

    /// The stable code.
    pub fn code(self) -> &'static str {
        match self {
            LossKind::ContentNotRendered => "CONTENT_NOT_RENDERED",
            LossKind::ToolsIgnored => "TOOLS_IGNORED",
            LossKind::ContentDroppedByTemplate => "CONTENT_DROPPED_BY_TEMPLATE",
            LossKind::DuplicateExample => "DUPLICATE_EXAMPLE",
            LossKind::ControlTokenInContent => "CONTROL_TOKEN_IN_CONTENT",
            LossKind::ToolDataNotRendered => "TOOL_DATA_NOT_RENDERED",
        }
    }

    /// Whether `validate --strict` fails on it: data that trains something else than written.
    pub fn strict(self) -> bool {
        matches!(
            self,
            LossKind::ContentNotRendered | LossKind::ToolsIgnored | LossKind::ToolDataNotRendered
        )
    }

    /// What the class means, for the loader's warning about `count` examples.
    pub fn summary(self, count: usize) -> &'static str {
        if count == 1 {
            return match self {
                LossKind::ContentNotRendered => {
                    "has message content the chat template does not render"
                }
                LossKind::ToolsIgnored => {
                    "has tools that are not passed to the template (tools: 'ignore')"
                }
                LossKind::ContentDroppedByTemplate => "has reasoning the template drops by design",
                LossKind::DuplicateExample => "is an exact copy of an earlier example",
                LossKind::ControlTokenInContent => "has control-token strings inside its contents",
                LossKind::ToolDataNotRendered => {
                    "has tool calls, tool definitions or tool results the chat template does not render"
                }
            };
        }
        match self {
            LossKind::ContentNotRendered => {
                "have message content the chat template does not render"
            }
            LossKind::ToolsIgnored => {
                "have tools that are not passed to the template (tools: 'ignore')"
            }
            LossKind::ContentDroppedByTemplate => "have reasoning the template drops by design",
            LossKind::DuplicateExample => "are exact copies of earlier examples",
            LossKind::ControlTokenInContent => "have control-token strings inside their contents",
            LossKind::ToolDataNotRendered => {
                "have tool calls, tool definitions or tool results the chat template does not render"
            }
        }
    }

    /// Its bit in `RowStats::losses`.
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The kinds whose bits are set in `bits`.
    pub fn of_bits(bits: u8) -> impl Iterator<Item = LossKind> {
        LossKind::ALL
            .into_iter()
            .filter(move |k| bits & k.bit() != 0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: LossKind,
    pub message: String,
}

/// What a check keeps of each loss it finds: the class and a sentence (`validate`), or the class
/// alone (a row keeps only the bits of its classes, so a load writes no sentence).
pub trait Findings {
    fn found(&mut self, kind: LossKind, words: impl FnOnce() -> String);
    /// The bits (`LossKind::bit`) of the classes found.
    fn bits(&self) -> u8;
}

impl Findings for Vec<Finding> {
    fn found(&mut self, kind: LossKind, words: impl FnOnce() -> String) {
        self.push(Finding {
            kind,
            message: words(),
        });
    }

    fn bits(&self) -> u8 {
        self.iter().fold(0, |bits, f| bits | f.kind.bit())
    }
}

/// The classes found, without sentences.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Kinds(pub u8);

impl Findings for Kinds {
    fn found(&mut self, kind: LossKind, _: impl FnOnce() -> String) {
        self.0 |= kind.bit();
    }

    fn bits(&self) -> u8 {
        self.0
    }
}

fn preview(text: &str) -> String {
    let short: String = text.chars().take(40).collect();
    if short.len() < text.len() {
        format!("{short:?}…")
    } else {
        format!("{short:?}")
    }
}

/// Whether `tools_count(tools) > 0`, without parsing a JSON string of definitions: such a
/// string counts 0 only when it parses as an empty list, that is `[` and `]` with nothing but
/// JSON whitespace around and between them.
fn has_tools(tools: &Json) -> bool {
    match tools {
        Json::Array(list) => !list.is_empty(),
        Json::String(text) => {
            let inner = text
                .trim_matches(JSON_WHITESPACE)
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'));
            !inner.is_some_and(|t| t.trim_matches(JSON_WHITESPACE).is_empty())
        }
        _ => true,
    }
}

const JSON_WHITESPACE: [char; 4] = [' ', '\t', '\n', '\r'];

fn tools_count(tools: &Json) -> usize {
    match tools {
        Json::Array(list) => list.len(),
        // Counted without building the definitions: a JSON list's items, skipped unread.
        Json::String(text) => {
            serde_json::from_str::<Vec<serde::de::IgnoredAny>>(text).map_or(1, |items| items.len())
        }
        _ => 1,
    }
}

/// Finds the silent losses of single examples (classes 1, 2, 3 and 5; 4 needs the whole file,
/// see `Duplicates`).
pub struct LossChecker {
    control: Option<(AhoCorasick, Vec<String>)>,
    tools: ToolsMode,
}

impl LossChecker {
    /// With `sanitize` (`sanitizeControlTokens`), control-token strings in contents are encoded
    /// as text and lose nothing: class 5 is not looked for.
    pub fn new(tokenizer: &ChatTokenizer, tools: ToolsMode, sanitize: bool) -> Self {
        // The tokenizer's own matcher, built once per tokenizer rather than once per load.
        let set = tokenizer.control_token_set();
        let control = set
            .matcher()
            .filter(|_| !sanitize)
            .map(|ac| (ac.clone(), set.tokens().to_vec()));
        LossChecker { control, tools }
    }

    /// A checker for rows whose render this crate never sees (a foreign tokenizer's): it finds
    /// no control tokens.
    pub fn without_render(tools: ToolsMode) -> Self {
        LossChecker {
            control: None,
            tools,
        }
    }

    /// Checks one example: `messages` as normalized for the template, `tools` the example's
    /// field as given, `rendered` the template's text of the whole example.
    pub fn check(&self, messages: &[Json], tools: Option<&Json>, rendered: &str) -> Vec<Finding> {
        let mut found = Vec::new();
        self.check_into(messages, tools, rendered, &mut found);
        found
    }

    /// `check`, keeping of each loss what `found` keeps.
    pub fn check_into(
        &self,
        messages: &[Json],
        tools: Option<&Json>,
        rendered: &str,
        found: &mut impl Findings,
    ) {
        let mut within = Within::new(rendered);
        for (i, m) in messages.iter().enumerate() {
            let role = || role_of(m);
            if let Some(content) = json_value::str_field(m, "content") {
                let text = content.trim();
                let missing = !text.is_empty() && !within.contains(text);
                if missing && role() == "tool" {
                    found.found(LossKind::ToolDataNotRendered, || {
                        format!(
                            "message {i} ({}): its tool result {} is not in the rendered text (the template does not print tool results)",
                            role(),
                            preview(text)
                        )
                    });
                } else if missing {
                    let answer = text.rsplit_once("</think>").map(|(_, a)| a.trim());
                    match answer {
                        Some(a) if a.is_empty() || within.contains(a) => found.found(
                            LossKind::ContentDroppedByTemplate,
                            || format!(
                                "message {i} ({}): the template drops its <think> reasoning (by design: the reasoning of earlier turns is not shown)",
                                role()
                            ),
                        ),
                        _ => found.found(LossKind::ContentNotRendered, || {
                            format!(
                                "message {i} ({}): its content {} is not in the rendered text (a role or field the template does not render?)",
                                role(),
                                preview(text)
                            )
                        }),
                    }
                }
            }
            if let Some(reasoning) = json_value::str_field(m, "reasoning_content") {
                let text = reasoning.trim();
                if !text.is_empty() && !within.contains(text) {
                    found.found(LossKind::ContentDroppedByTemplate, || {
                        format!(
                            "message {i} ({}): the template drops its reasoning_content (by design: the reasoning of earlier turns is not shown)",
                            role()
                        )
                    });
                }
            }
        }
        for (i, m) in messages.iter().enumerate() {
            for name in tool_call_names(m) {
                if !within.contains(name) {
                    found.found(LossKind::ToolDataNotRendered, || {
                        format!(
                            "message {i} ({}): its tool call {name:?} is not in the rendered text (the template does not print tool calls)",
                            role_of(m)
                        )
                    });
                }
            }
        }
        if self.tools == ToolsMode::Example {
            let parsed;
            let tools = match tools {
                Some(Json::String(text)) => {
                    parsed = crate::input::json_text::parse(text).ok();
                    parsed.as_ref()
                }
                other => other,
            };
            for name in tools.into_iter().flat_map(tool_definition_names) {
                if !within.contains(name) {
                    found.found(LossKind::ToolDataNotRendered, || {
                        format!(
                            "its tool definition {name:?} is not in the rendered text (the template does not print tools)"
                        )
                    });
                }
            }
        }
        ignored_tools_into(tools, self.tools, found);
        if let Some((ac, tokens)) = &self.control {
            for (i, m) in messages.iter().enumerate() {
                for key in ["content", "reasoning_content"] {
                    let Some(text) = json_value::str_field(m, key) else {
                        continue;
                    };
                    if let Some(hit) = ac.find(text) {
                        found.found(LossKind::ControlTokenInContent, || {
                            format!(
                                "message {i} ({}): its {key} holds the control token {:?}, which is encoded as that token, not as text",
                                role_of(m),
                                tokens[hit.pattern().as_usize()]
                            )
                        });
                    }
                }
            }
        }
    }
}

/// Substring tests against one render, in time linear in the render for contents that appear
/// in message order (as templates write them): each search starts where the previous find
/// ended, and only a miss searches the whole text.
struct Within<'a> {
    text: &'a str,
    from: usize,
}

impl<'a> Within<'a> {
    fn new(text: &'a str) -> Self {
        Within { text, from: 0 }
    }

    fn contains(&mut self, needle: &str) -> bool {
        let hay = self.text.as_bytes();
        let needle = needle.as_bytes();
        if let Some(at) = text_search::find_from(hay, self.from, needle) {
            self.from = at + needle.len();
            return true;
        }
        // A match that starts before `from` ends before `from + needle.len()`.
        let end = (self.from + needle.len()).min(hay.len());
        text_search::find_bytes(&hay[..end], needle).is_some()
    }
}

/// Class 2 alone: an example's tools that the template never gets.
pub fn tools_finding(example: &SftExample, mode: ToolsMode) -> Option<Finding> {
    ignored_tools(example.tools(), mode)
}

fn ignored_tools(tools: Option<&Json>, mode: ToolsMode) -> Option<Finding> {
    let mut found = Vec::new();
    ignored_tools_into(tools, mode, &mut found);
    found.pop()
}

fn ignored_tools_into(tools: Option<&Json>, mode: ToolsMode, found: &mut impl Findings) {
    let Some(tools) = tools.filter(|t| mode == ToolsMode::Ignore && has_tools(t)) else {
        return;
    };
    found.found(LossKind::ToolsIgnored, || {
        let n = tools_count(tools);
        format!(
            "its {n} tool definition{} never reach the template (tools: 'example' passes them)",
            if n == 1 { "" } else { "s" }
        )
    });
}

fn role_of(m: &Json) -> &str {
    json_value::str_field(m, "role").unwrap_or("?")
}

/// A tool's name in a call or a definition: OpenAI's `function.name`, or a flat `name`.
fn tool_name(item: &Json) -> Option<&str> {
    json_value::field(item, "function")
        .and_then(|f| json_value::str_field(f, "name"))
        .or_else(|| json_value::str_field(item, "name"))
        .filter(|name| !name.trim().is_empty())
}

/// The names of the tools a message calls.
fn tool_call_names(m: &Json) -> impl Iterator<Item = &str> {
    json_value::field(m, "tool_calls")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(tool_name)
}

/// The names of the tools a list of definitions defines.
fn tool_definition_names(tools: &Json) -> impl Iterator<Item = &str> {
    tools.as_array().into_iter().flatten().filter_map(tool_name)
}

/// What tells examples apart: a 128-bit SipHash-2-4 digest, as two words (a map entry of 16
/// bytes and 8-byte alignment).
pub type ExampleKey = [u64; 2];

/// The SipHash key of every duplicate key in this process: 128 bits drawn from the OS's
/// randomness (through std's `RandomState`, whose own keys come from it) the first time an
/// example is keyed. It never leaves the process.
fn siphash_key() -> (u64, u64) {
    static KEY: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        use std::hash::BuildHasher;
        let random = std::collections::hash_map::RandomState::new();
        (
            random.hash_one(0x5346_5431u64),
            random.hash_one(0x5346_5432u64),
        )
    })
}

/// A 128-bit digest of an example for the duplicate check. The loader also copies a repeated
/// example's row from its first occurrence by this key, so it must not collide. SipHash-2-4 is a
/// keyed pseudorandom function: under a secret random key its outputs for distinct inputs behave
/// as independent random 128-bit values, whatever the inputs, so neither chance nor a file crafted
/// against it makes two examples collide except at the birthday bound (among 10 million examples,
/// odds below 1 in 10^24). It hashes the serialized example about 3.5 times as fast as BLAKE3 on
/// examples of a few kilobytes, where BLAKE3's many-lane hashing has too few chunks to fill.
pub fn duplicate_key(example: &SftExample) -> ExampleKey {
    use siphasher::sip128::Hasher128;
    use std::hash::Hasher;
    thread_local! {
        /// The serialized example: one hash over a buffer beats many small hasher updates.
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let (k0, k1) = siphash_key();
    BUFFER.with(|buffer| {
        let mut bytes = buffer.borrow_mut();
        bytes.clear();
        write_example(example, &mut bytes);
        let mut hasher = siphasher::sip128::SipHasher24::new_with_keys(k0, k1);
        hasher.write(&bytes);
        let digest = hasher.finish128();
        [digest.h1, digest.h2]
    })
}

/// Writes what makes an example, unambiguously: the format tag, the messages and the tools, each
/// JSON value as a tagged tree with length-prefixed strings (no escaping, no copy of the
/// example). Two examples write the same bytes exactly when their JSON is the same, keys in the
/// same order.
fn write_example(example: &SftExample, out: &mut Vec<u8>) {
    match example {
        SftExample::Conversation { messages, .. } => {
            out.push(b'c');
            json_value::write_len(messages.len(), out);
            messages
                .iter()
                .for_each(|m| json_value::write_tagged(m, out));
        }
        SftExample::PromptCompletion {
            prompt, completion, ..
        } => {
            out.push(b'p');
            json_value::write_len(prompt.len() + 1, out);
            prompt.iter().for_each(|m| json_value::write_tagged(m, out));
            json_value::write_tagged(completion, out);
        }
    }
    match example.tools() {
        Some(tools) => {
            out.push(b'T');
            json_value::write_tagged(tools, out);
        }
        None => out.push(b'-'),
    }
}

/// What the loader says once per dataset: per class, how many examples and the first one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LossSummary {
    /// `(kind, examples, first example index)`, in class order.
    pub classes: Vec<(LossKind, usize, usize)>,
}

impl LossSummary {
    /// Counts example `index` under every class set in `bits`.
    pub fn add(&mut self, index: usize, bits: u8) {
        for kind in LossKind::of_bits(bits) {
            match self.classes.iter_mut().find(|c| c.0 == kind) {
                Some(c) => {
                    c.1 += 1;
                    c.2 = c.2.min(index);
                }
                None => {
                    self.classes.push((kind, 1, index));
                    self.classes.sort_by_key(|c| c.0);
                }
            }
        }
    }

    /// One warning per class: its code and its message.
    pub fn warnings(&self, file: &str) -> Vec<(&'static str, String)> {
        self.classes
            .iter()
            .map(|(kind, count, first)| {
                let message = format!(
                    "[SFT Dataset] {}: {count} example{} of {file} {}, the first is example {first} (`sft-dataset validate` lists them)",
                    kind.code(),
                    if *count == 1 { "" } else { "s" },
                    kind.summary(*count)
                );
                (kind.code(), message)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_finds_contents_in_any_order() {
        let mut w = Within::new("<a>first</a><b>second</b><c>first again</c>");
        assert!(w.contains("second"));
        // Before the cursor, and straddling it.
        assert!(w.contains("first</a>"));
        assert!(w.contains("first again"));
        assert!(w.contains("<a>"));
        assert!(!w.contains("third"));
        assert!(!w.contains("second</b><c>first again</c>!"));
    }

    #[test]
    fn has_tools_is_a_positive_count() {
        // Every string built from a few JSON pieces, valid or not: `has_tools` says what
        // parsing and counting says.
        let pieces = [
            "[", "]", " ", "\t", "\n", "\r", "\u{a0}", "{}", ",", "1", "\"x\"", "[]", "\u{2003}",
        ];
        let mut strings = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = strings
                .iter()
                .flat_map(|s| pieces.iter().map(move |p| format!("{s}{p}")))
                .collect();
            strings.extend(longer);
        }
        assert!(strings.len() > 20_000);
        let mut empty_lists = 0;
        for text in strings {
            let tools = Json::String(text.clone());
            let count = tools_count(&tools);
            empty_lists += usize::from(count == 0);
            assert_eq!(has_tools(&tools), count > 0, "{text:?}");
        }
        assert!(empty_lists > 50);
        for tools in [
            serde_json::json!([]),
            serde_json::json!([1]),
            serde_json::json!({}),
            serde_json::json!(3),
        ] {
            assert_eq!(has_tools(&tools), tools_count(&tools) > 0, "{tools}");
        }
    }

    #[test]
    fn tools_are_counted_as_given() {
        let count = |tools: Json| tools_count(&tools);
        assert_eq!(count(serde_json::json!([{"name": "a"}, {"name": "b"}])), 2);
        assert_eq!(
            count(serde_json::json!(r#"[{"name": "a"}, {"name": "b"}, 3]"#)),
            3
        );
        assert_eq!(count(serde_json::json!("[]")), 0);
        // A string that is not a JSON list, and any other value, is one definition.
        assert_eq!(count(serde_json::json!(r#"{"name": "a"}"#)), 1);
        assert_eq!(count(serde_json::json!("[1, ")), 1);
        assert_eq!(count(serde_json::json!({"name": "a"})), 1);
    }

    #[test]
    fn duplicate_keys_tell_formats_contents_and_tools_apart() {
        let conv = |content: &str| SftExample::Conversation {
            messages: vec![serde_json::json!({"role": "user", "content": content})],
            distill: None,
            tools: None,
        };
        assert_eq!(duplicate_key(&conv("a")), duplicate_key(&conv("a")));
        // Every thread keys with the same secret: the loader keys records on all cores.
        let here = duplicate_key(&conv("a"));
        let there = std::thread::spawn(move || duplicate_key(&conv("a")))
            .join()
            .unwrap();
        assert_eq!(here, there);
        assert_ne!(duplicate_key(&conv("a")), duplicate_key(&conv("b")));
        // Lengths keep the strings apart where their concatenations agree.
        let two = |a: &str, b: &str| SftExample::Conversation {
            messages: vec![
                serde_json::json!({"role": "user", "content": a}),
                serde_json::json!({"role": "assistant", "content": b}),
            ],
            distill: None,
            tools: None,
        };
        assert_ne!(
            duplicate_key(&two("ab", "c")),
            duplicate_key(&two("a", "bc"))
        );
        // Key order and number types count, as they do in the file.
        let of = |m: serde_json::Value| SftExample::Conversation {
            messages: vec![m],
            distill: None,
            tools: None,
        };
        let key = |text: &str| duplicate_key(&of(serde_json::from_str(text).unwrap()));
        assert_ne!(key(r#"{"a":1,"b":2}"#), key(r#"{"b":2,"a":1}"#));
        assert_ne!(key(r#"{"a":1}"#), key(r#"{"a":1.0}"#));
        assert_ne!(key(r#"{"a":-1}"#), key(r#"{"a":18446744073709551615}"#));
        assert_ne!(key(r#"{"a":[]}"#), key(r#"{"a":{}}"#));
        assert_ne!(key(r#"{"a":null}"#), key(r#"{"a":false}"#));
        assert_eq!(key(r#"{"a": [1, "x"]}"#), key(r#"{"a":[1,"x"]}"#));
        // The same messages as a prompt and completion are another example.
        let pc = SftExample::PromptCompletion {
            prompt: vec![serde_json::json!({"role": "user", "content": "ab"})],
            completion: serde_json::json!({"role": "assistant", "content": "c"}),
            distill: None,
            tools: None,
        };
        assert_ne!(duplicate_key(&pc), duplicate_key(&two("ab", "c")));
        let with_tools = SftExample::Conversation {
            messages: vec![serde_json::json!({"role": "user", "content": "a"})],
            distill: None,
            tools: Some(serde_json::json!([{"name": "f"}])),
        };
        assert_ne!(duplicate_key(&conv("a")), duplicate_key(&with_tools));
    }
}
