//! `sanitizeControlTokens`: control-token strings in the data are encoded as plain text, while the
//! chat template's own control tokens stay control tokens, as transformers 5 does with
//! `apply_chat_template(..., tokenize=True, sanitize_control_tokens=True)`.
//!
//! The data flow has three steps. Before rendering, every string the template gets from the
//! data (message values, tools, template variables) has each control-token occurrence wrapped in
//! two private-use markers. The template renders as usual and copies the markers along with the
//! data. Encoding then cuts the render at the markers: a wrapped token is encoded without added
//! tokens (as text), everything else normally, and the markers themselves produce no token. The
//! token offsets point into the marked render, so label masking finds every message where the
//! render put it.

use std::collections::HashMap;
use std::ops::Range;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::tokenize::encoded::EncodedText;

/// Opens a control token that came from the data (U+F0000, a plane-15 private-use character).
pub const MARK_START: char = '\u{F0000}';
/// Closes it (U+F0001).
pub const MARK_END: char = '\u{F0001}';

/// The control tokens of one tokenizer and chat template, with a matcher that finds them.
pub struct ControlTokens {
    tokens: Vec<String>,
    matcher: Option<AhoCorasick>,
}

/// An added token as the control-token choice sees it.
pub struct AddedToken<'a> {
    pub content: &'a str,
    pub special: bool,
}

impl ControlTokens {
    /// transformers' choice: every special added token, plus either the added tokens that
    /// `tokenizer_config.json` lists in `chat_control_tokens` or, without that list, the other
    /// added tokens that occur inside one literal of the template (see `template_literals`),
    /// except whitespace tokens such as Gemma's `"\n"`, which templates write as plain text.
    pub fn choose<'a>(
        added: impl IntoIterator<Item = AddedToken<'a>>,
        listed: Option<&[String]>,
        template: &str,
    ) -> Self {
        let literals = match listed {
            Some(_) => Vec::new(),
            None => template_literals(template),
        };
        let in_template = |content: &str| match listed {
            Some(list) => list.iter().any(|t| t == content),
            None => {
                !content.chars().all(char::is_whitespace)
                    && literals.iter().any(|l| l.contains(content))
            }
        };
        let tokens = added
            .into_iter()
            .filter(|t| t.special || in_template(t.content))
            .map(|t| t.content.to_string())
            .collect();
        Self::new(tokens)
    }

    pub fn new(mut tokens: Vec<String>) -> Self {
        tokens.retain(|t| !t.is_empty());
        // Longest first, as transformers lists them (in chars); matching is leftmost-longest
        // whatever the order.
        tokens.sort_by_cached_key(|t| (std::cmp::Reverse(t.chars().count()), t.clone()));
        tokens.dedup();
        // Leftmost-longest is what a regex of the tokens ordered longest first finds.
        let matcher = (!tokens.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&tokens)
                    .ok()
            })
            .flatten();
        ControlTokens { tokens, matcher }
    }

    /// The tokens, longest first.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The leftmost-longest matcher of `tokens()` (pattern `k` is `tokens()[k]`); `None` when
    /// there are no tokens.
    pub fn matcher(&self) -> Option<&AhoCorasick> {
        self.matcher.as_ref()
    }

    /// Whether `text` holds a control token.
    pub fn occurs_in(&self, text: &str) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(text))
    }

    /// `text` without markers, with every control token wrapped in `MARK_START`/`MARK_END`.
    /// Markers already in the text are removed first, so the data cannot forge a wrapped token.
    pub fn mark_str(&self, text: &str) -> String {
        let clean: String = text
            .chars()
            .filter(|&c| c != MARK_START && c != MARK_END)
            .collect();
        let Some(matcher) = &self.matcher else {
            return clean;
        };
        let mut out = String::with_capacity(clean.len() + 16);
        let mut at = 0;
        for m in matcher.find_iter(&clean) {
            out.push_str(&clean[at..m.start()]);
            out.push(MARK_START);
            out.push_str(&clean[m.start()..m.end()]);
            out.push(MARK_END);
            at = m.end();
        }
        out.push_str(&clean[at..]);
        out
    }

    /// Marks every string inside `value` (object values, not keys), in place.
    pub fn mark_json(&self, value: &mut Json) {
        match value {
            Json::String(s) if s.contains([MARK_START, MARK_END]) || self.occurs_in(s) => {
                *s = self.mark_str(s);
            }
            Json::Array(items) => items.iter_mut().for_each(|v| self.mark_json(v)),
            Json::Object(map) => map.values_mut().for_each(|v| self.mark_json(v)),
            _ => {}
        }
    }
}

/// The literal text of a Jinja template, as transformers collects it: the template's raw text
/// between tags and every string constant in its expressions, one entry each. Comments are left
/// out, and so is whatever the template builds by concatenation. The raw text is taken before
/// whitespace control trims it, which matters only for tokens that begin or end in whitespace.
pub fn template_literals(source: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut rest = source;
    loop {
        let Some(open) = find_tag(rest) else {
            push_data(&mut literals, rest);
            return literals;
        };
        push_data(&mut literals, &rest[..open]);
        let tag = &rest[open..];
        match &tag[..2] {
            "{#" => match tag[2..].find("#}") {
                Some(end) => rest = &tag[2 + end + 2..],
                None => return literals,
            },
            kind => {
                let close = if kind == "{{" { "}}" } else { "%}" };
                let (strings, body_end) = code_strings(&tag[2..], close);
                let body = &tag[2..2 + body_end];
                literals.extend(strings);
                rest = tag.get(2 + body_end + 2..).unwrap_or("");
                if kind == "{%" && block_keyword(body) == "raw" {
                    let Some((raw, after)) = raw_block(rest) else {
                        push_data(&mut literals, rest);
                        return literals;
                    };
                    push_data(&mut literals, raw);
                    rest = after;
                }
            }
        }
    }
}

fn push_data(literals: &mut Vec<String>, data: &str) {
    if !data.is_empty() {
        literals.push(data.to_string());
    }
}

fn find_tag(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(1))
        .find(|&i| bytes[i] == b'{' && matches!(bytes[i + 1], b'{' | b'%' | b'#'))
}

/// The first word of a `{% ... %}` body, without whitespace-control signs.
fn block_keyword(body: &str) -> &str {
    let body = body.trim_start_matches(['-', '+']).trim_start();
    let end = body
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    &body[..end]
}

/// The text of a `{% raw %}` block up to its `{% endraw %}`, and what follows that tag.
fn raw_block(text: &str) -> Option<(&str, &str)> {
    let mut from = 0;
    while let Some(at) = text[from..].find("{%") {
        let start = from + at;
        let body = &text[start + 2..];
        if block_keyword(body) == "endraw" {
            let end = body.find("%}")?;
            return Some((&text[..start], &body[end + 2..]));
        }
        from = start + 2;
    }
    None
}

/// The string constants of a code body that ends at `close`, and where the body ends (the
/// length of `text` when it never closes). Adjacent literals form one constant, as in Jinja.
fn code_strings(text: &str, close: &str) -> (Vec<String>, usize) {
    let mut strings: Vec<String> = Vec::new();
    let mut joinable = false;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        let c = bytes[i];
        if text[i..].starts_with(close) {
            return (strings, i);
        }
        if c == b'\'' || c == b'"' {
            let (value, len) = string_literal(&text[i..]);
            match strings.last_mut() {
                Some(last) if joinable => last.push_str(&value),
                _ => strings.push(value),
            }
            joinable = true;
            i += len;
            continue;
        }
        if !c.is_ascii_whitespace() {
            joinable = false;
        }
        i += 1;
    }
    (strings, text.len())
}

/// The value of the quoted literal at the start of `text` and its length in bytes (to the end
/// of `text` when it never closes), with Python's escapes resolved.
fn string_literal(text: &str) -> (String, usize) {
    let quote = text.as_bytes()[0] as char;
    let mut value = String::new();
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((at, c)) = chars.next() {
        if c == quote {
            return (value, at + 1);
        }
        if c != '\\' {
            value.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else { break };
        let mut hex = |n: usize| -> Option<char> {
            let digits: String = (0..n)
                .filter_map(|_| chars.next().map(|(_, d)| d))
                .collect();
            u32::from_str_radix(&digits, 16)
                .ok()
                .and_then(char::from_u32)
        };
        match e {
            'n' => value.push('\n'),
            't' => value.push('\t'),
            'r' => value.push('\r'),
            'b' => value.push('\u{8}'),
            'f' => value.push('\u{c}'),
            'v' => value.push('\u{b}'),
            'a' => value.push('\u{7}'),
            '0'..='7' => {
                let mut code = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek() {
                        Some(&(_, d)) if d.is_digit(8) => {
                            code = code * 8 + d.to_digit(8).unwrap_or(0);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                value.extend(char::from_u32(code));
            }
            'x' => value.extend(hex(2)),
            'u' => value.extend(hex(4)),
            'U' => value.extend(hex(8)),
            '\n' => {}
            '\\' | '\'' | '"' => value.push(e),
            other => {
                value.push('\\');
                value.push(other);
            }
        }
    }
    (value, text.len())
}

/// One stretch of a marked render to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Byte range in the render.
    pub range: Range<usize>,
    /// A control token from the data: encoded without added tokens.
    pub as_text: bool,
}

/// Cuts a marked render into the pieces transformers encodes one by one: text between markers,
/// and each control token found between a `MARK_START` and a `MARK_END` (`is_added` tells
/// which strings are added tokens; anything else between markers is text). A marker that does
/// not close such a pair is dropped but still cuts the text. The first piece is always there
/// (it may be empty); the others are never empty.
pub fn split_marked(text: &str, is_added: impl Fn(&str) -> bool) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text_start = 0;
    let mut first = true;
    let mut push_text = |pieces: &mut Vec<Piece>, range: Range<usize>| {
        if first || !range.is_empty() {
            pieces.push(Piece {
                range,
                as_text: false,
            });
        }
        first = false;
    };
    let mut at = 0;
    while let Some(found) = text[at..].find([MARK_START, MARK_END]) {
        let marker = at + found;
        push_text(&mut pieces, text_start..marker);
        let inner = marker + MARK_START.len_utf8();
        let token_end = text[marker..]
            .starts_with(MARK_START)
            .then(|| {
                text[inner..]
                    .find([MARK_START, MARK_END])
                    .map(|k| inner + k)
            })
            .flatten()
            .filter(|&end| text[end..].starts_with(MARK_END) && is_added(&text[inner..end]));
        match token_end {
            Some(end) => {
                if end > inner {
                    pieces.push(Piece {
                        range: inner..end,
                        as_text: true,
                    });
                }
                at = end + MARK_END.len_utf8();
            }
            None => at = inner,
        }
        text_start = at;
    }
    push_text(&mut pieces, text_start..text.len());
    pieces
}

/// What encoding a marked render needs from an engine.
pub trait PieceEncoder {
    /// Ids and byte offsets of `text`, added tokens included, no special tokens added.
    fn encode_piece(&self, text: &str) -> SftResult<EncodedText>;
    /// The same without matching any added token, special or not: the engine's normalizer,
    /// pre-tokenizer and model only.
    fn encode_piece_as_text(&self, text: &str) -> SftResult<EncodedText>;
}

/// Encodes a render of marked data (see `split_marked`). Every piece after the first is encoded
/// behind a newline whose ids are then dropped, so that a tokenizer that treats the start of a
/// text specially (SentencePiece's prefix space) treats the piece as the middle of a text; when
/// the newline does not come out as its own ids, the piece is encoded alone. Offsets are byte
/// ranges of the marked render. A control token that its tokenizer produces even from plain text
/// cannot be sanitized and is an error.
pub fn encode_marked(
    encoder: &impl PieceEncoder,
    text: &str,
    added_ids: &HashMap<String, u32>,
) -> SftResult<EncodedText> {
    let pieces = split_marked(text, |s| added_ids.contains_key(s));
    let mut out = EncodedText {
        ids: Vec::with_capacity(text.len() / 3 + 1),
        offsets: Vec::with_capacity(text.len() / 3 + 1),
    };
    let mut newline: Option<Vec<u32>> = None;
    for (k, piece) in pieces.iter().enumerate() {
        let piece_text = &text[piece.range.clone()];
        let encode = |s: &str| match piece.as_text {
            true => encoder.encode_piece_as_text(s),
            false => encoder.encode_piece(s),
        };
        let base = piece.range.start;
        let (encoded, skip, shift) = if k == 0 {
            (encode(piece_text)?, 0, 0)
        } else {
            if newline.is_none() {
                newline = Some(encoder.encode_piece("\n")?.ids);
            }
            let newline = newline.as_deref().unwrap_or_default();
            let behind = encode(&format!("\n{piece_text}"))?;
            if behind.ids.starts_with(newline) {
                (behind, newline.len(), 1)
            } else {
                (encode(piece_text)?, 0, 0)
            }
        };
        if piece.as_text {
            let own = added_ids.get(piece_text);
            if own.is_some_and(|id| encoded.ids[skip..].contains(id)) {
                return Err(SftError::new(
                    ErrorCode::ControlToken,
                    format!(
                        "cannot sanitize the control token {piece_text:?}: the tokenizer produces it from plain text"
                    ),
                ));
            }
        }
        out.ids.extend_from_slice(&encoded.ids[skip..]);
        out.offsets
            .extend(encoded.offsets[skip..].iter().map(|&(s, e)| {
                (
                    base + s.saturating_sub(shift),
                    base + e.saturating_sub(shift),
                )
            }));
    }
    Ok(out)
}

/// `text` without the markers, as the model reads it.
pub fn unmarked(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([MARK_START, MARK_END]) {
        text.chars()
            .filter(|&c| c != MARK_START && c != MARK_END)
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokens(list: &[&str]) -> ControlTokens {
        ControlTokens::new(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn literals_are_raw_text_and_string_constants() {
        let t = "A<x>{# <c> #}B{{ '<s>' + \"y\" 'z' }}{% if a == 'q\\n' %}C{% endif %}\
                 {%- raw %}{{ '<r>' }}{% endraw %}D";
        assert_eq!(
            template_literals(t),
            vec!["A<x>", "B", "<s>", "yz", "q\n", "C", "{{ '<r>' }}", "D"]
        );
        // A literal never closed runs to the end; a tag never closed ends the template.
        assert_eq!(template_literals("a{{ 'b"), vec!["a", "b"]);
        assert_eq!(template_literals("a{# b"), vec!["a"]);
    }

    #[test]
    fn escapes_resolve_as_in_python() {
        assert_eq!(
            string_literal(r"'a\'b\\c\x41\u00e9\101\q'").0,
            "a'b\\cAéA\\q"
        );
        assert_eq!(string_literal("\"it's\" rest").1, 6);
    }

    #[test]
    fn choice_takes_specials_and_template_tokens() {
        let added = [
            ("<|im_end|>", true),
            ("<think>", false),
            ("<tool_call>", false),
            ("\n\n", false),
            ("<only-in-comment>", false),
            ("<built>", false),
        ];
        let template = "{# <only-in-comment> #}<think>\n\n{{ '<' + 'built>' }}";
        let chosen = ControlTokens::choose(
            added
                .iter()
                .map(|&(content, special)| AddedToken { content, special }),
            None,
            template,
        );
        assert_eq!(chosen.tokens(), ["<|im_end|>", "<think>"]);
        let listed = ["<tool_call>".to_string()];
        let chosen = ControlTokens::choose(
            added
                .iter()
                .map(|&(content, special)| AddedToken { content, special }),
            Some(&listed),
            template,
        );
        assert_eq!(chosen.tokens(), ["<tool_call>", "<|im_end|>"]);
    }

    #[test]
    fn marking_wraps_longest_tokens_and_drops_old_markers() {
        let t = tokens(&["<a>", "<a><b>", "<b>"]);
        assert_eq!(
            t.mark_str("x<a><b>y<b>\u{F0000}<a>\u{F0001}"),
            "x\u{F0000}<a><b>\u{F0001}y\u{F0000}<b>\u{F0001}\u{F0000}<a>\u{F0001}"
        );
        let mut v = json!({"<a>": ["<a>", 1, null, {"k": "<b>z"}]});
        t.mark_json(&mut v);
        assert_eq!(
            v,
            json!({"<a>": ["\u{F0000}<a>\u{F0001}", 1, null, {"k": "\u{F0000}<b>\u{F0001}z"}]})
        );
    }

    #[test]
    fn split_keeps_the_first_piece_and_drops_lone_markers() {
        let added = |s: &str| s == "<a>";
        let text = "\u{F0000}<a>\u{F0001}x\u{F0001}y\u{F0000}<z>\u{F0001}\u{F0000}";
        let got: Vec<(&str, bool)> = split_marked(text, added)
            .into_iter()
            .map(|p| (&text[p.range], p.as_text))
            .collect();
        assert_eq!(
            got,
            vec![
                ("", false),
                ("<a>", true),
                ("x", false),
                ("y", false),
                ("<z>", false)
            ]
        );
        assert_eq!(
            split_marked("plain", added),
            vec![Piece {
                range: 0..5,
                as_text: false
            }]
        );
    }

    /// Bytes as ids: added token `<a>` is id 1000, as text it is its three bytes; a newline
    /// glued to a following `!` becomes id 2000, so `"\n!"` has no newline id of its own.
    struct Bytes;
    impl Bytes {
        fn run(text: &str, added: bool) -> EncodedText {
            let mut out = EncodedText {
                ids: Vec::new(),
                offsets: Vec::new(),
            };
            let mut i = 0;
            while i < text.len() {
                if added && text[i..].starts_with("<a>") {
                    out.ids.push(1000);
                    out.offsets.push((i, i + 3));
                    i += 3;
                } else if text[i..].starts_with("\n!") {
                    out.ids.push(2000);
                    out.offsets.push((i, i + 2));
                    i += 2;
                } else {
                    out.ids.push(text.as_bytes()[i] as u32);
                    out.offsets.push((i, i + 1));
                    i += 1;
                }
            }
            out
        }
    }
    impl PieceEncoder for Bytes {
        fn encode_piece(&self, text: &str) -> SftResult<EncodedText> {
            Ok(Bytes::run(text, true))
        }
        fn encode_piece_as_text(&self, text: &str) -> SftResult<EncodedText> {
            Ok(Bytes::run(text, false))
        }
    }

    #[test]
    fn marked_tokens_become_text_with_offsets_into_the_render() {
        let added: HashMap<String, u32> = [("<a>".to_string(), 1000)].into();
        let text = "<a>x\u{F0000}<a>\u{F0001}!<a>";
        let got = encode_marked(&Bytes, text, &added).unwrap();
        let m = MARK_START.len_utf8();
        assert_eq!(got.ids, vec![1000, 120, 60, 97, 62, 33, 1000]);
        assert_eq!(
            got.offsets,
            vec![
                (0, 3),
                (3, 4),
                (4 + m, 5 + m),
                (5 + m, 6 + m),
                (6 + m, 7 + m),
                (7 + 2 * m, 8 + 2 * m),
                (8 + 2 * m, 11 + 2 * m)
            ]
        );
    }

    #[test]
    fn unmarked_drops_only_the_markers() {
        assert_eq!(unmarked("a\u{F0000}<b>\u{F0001}c"), "a<b>c");
        assert!(matches!(
            unmarked("plain"),
            std::borrow::Cow::Borrowed("plain")
        ));
    }

    #[test]
    fn a_token_the_model_makes_from_text_cannot_be_sanitized() {
        let added: HashMap<String, u32> = [("a".to_string(), 97)].into();
        let err = encode_marked(&Bytes, "x\u{F0000}a\u{F0001}", &added)
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::ControlToken);
        assert_eq!(
            err.message,
            "cannot sanitize the control token \"a\": the tokenizer produces it from plain text"
        );
    }
}
