//! A quick reader for the JSON most records are: objects, arrays, strings, booleans and null.
//! It gives serde_json's value for such a text (keys in order, a repeated key's last value in
//! its first place) and declines (`None`) everything else: numbers, lone surrogates, control
//! characters inside strings, deep nesting and every error, which `json_text::parse` then reads
//! through serde_json, its numbers and its error messages included.
//!
//! Strings are what a record is made of (chat contents). serde_json scans them eight bytes at a
//! time for quotes, backslashes and control characters; here sixteen bytes are tested at once
//! in vector registers (`special_at`).

use serde_json::{Map, Value as Json};

/// Nesting past this is left to serde_json (whose own limit is 128).
const MAX_DEPTH: u32 = 100;

/// serde_json's value of `text`, where `text` is one JSON value without numbers; `None`
/// otherwise.
pub fn parse(text: &str) -> Option<Json> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let value = reader.value()?;
    reader.skip_space();
    (reader.at == reader.bytes.len()).then_some(value)
}

/// The first quote, backslash or control character of `s` (its length where it has none): a
/// chunk at a time, each chunk tested whole (which compiles to a few vector instructions)
/// before its bytes are.
fn special_at(s: &[u8]) -> usize {
    const CHUNK: usize = 16;
    let special = |b: u8| u8::from(b == b'"') | u8::from(b == b'\\') | u8::from(b < 0x20);
    let mut at = 0;
    for chunk in s.chunks_exact(CHUNK) {
        if chunk.iter().fold(0, |seen, &b| seen | special(b)) != 0 {
            break;
        }
        at += CHUNK;
    }
    at + s[at..]
        .iter()
        .position(|&b| special(b) != 0)
        .unwrap_or(s.len() - at)
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    depth: u32,
}

impl Reader<'_> {
    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Option<Json> {
        self.skip_space();
        match *self.bytes.get(self.at)? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string().map(Json::String),
            b't' => self.word("true", Json::Bool(true)),
            b'f' => self.word("false", Json::Bool(false)),
            b'n' => self.word("null", Json::Null),
            _ => None,
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Option<Json> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Some(value)
        } else {
            None
        }
    }

    /// The next byte after white space, taken when it is `byte`.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_space();
        if self.bytes.get(self.at) == Some(&byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn nest(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn object(&mut self) -> Option<Json> {
        self.nest()?;
        self.at += 1;
        let mut map = Map::new();
        if !self.eat(b'}') {
            loop {
                self.skip_space();
                if self.bytes.get(self.at) != Some(&b'"') {
                    return None;
                }
                let key = self.string()?;
                if !self.eat(b':') {
                    return None;
                }
                let value = self.value()?;
                // A repeated key keeps its first place and takes the last value, as serde_json's.
                map.insert(key, value);
                if self.eat(b'}') {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }
        self.depth -= 1;
        Some(Json::Object(map))
    }

    fn array(&mut self) -> Option<Json> {
        self.nest()?;
        self.at += 1;
        let mut items = Vec::new();
        if !self.eat(b']') {
            loop {
                items.push(self.value()?);
                if self.eat(b']') {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }
        self.depth -= 1;
        Some(Json::Array(items))
    }

    /// The string whose opening quote is at `self.at`.
    fn string(&mut self) -> Option<String> {
        self.at += 1;
        let mut out: Option<String> = None;
        loop {
            let start = self.at;
            let stop = start + special_at(&self.bytes[start..]);
            if self.bytes.get(stop).is_none_or(|&b| b < 0x20) {
                return None;
            }
            // Both stops are ASCII: the span ends on a character boundary.
            let span = &self.text[start..stop];
            self.at = stop + 1;
            if self.bytes[stop] == b'"' {
                return Some(match out {
                    Some(mut s) => {
                        s.push_str(span);
                        s
                    }
                    None => span.to_string(),
                });
            }
            let s = out.get_or_insert_with(|| String::with_capacity(span.len() + 16));
            s.push_str(span);
            self.escape(s)?;
        }
    }

    /// The escape after a backslash, appended to `out`.
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let c = match *self.bytes.get(self.at)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex_unit(self.at + 1)?;
                self.at += 4;
                match unit {
                    // A high surrogate must be the escape of a pair with a low one; a lone
                    // surrogate is left to `json_text`.
                    0xD800..=0xDBFF => {
                        if self.bytes.get(self.at + 1..self.at + 3) != Some(b"\\u") {
                            return None;
                        }
                        let low = self.hex_unit(self.at + 3)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        self.at += 6;
                        char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => char::from_u32(unit)?,
                }
            }
            _ => return None,
        };
        out.push(c);
        self.at += 1;
        Some(())
    }

    /// The four hex digits at `at`.
    fn hex_unit(&self, at: usize) -> Option<u32> {
        let digits = self.bytes.get(at..at + 4)?;
        digits.iter().try_fold(0u32, |unit, &d| {
            Some(unit * 16 + char::from(d).to_digit(16)?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde_json's reading, written back (key order and all).
    fn serde(text: &str) -> Option<String> {
        serde_json::from_str::<Json>(text)
            .ok()
            .map(|v| serde_json::to_string(&v).unwrap())
    }

    fn check(text: &str) {
        if let Some(value) = parse(text) {
            assert_eq!(
                Some(serde_json::to_string(&value).unwrap()),
                serde(text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_chunked_search_finds_the_first_special_byte() {
        let mut rng = crate::test_support::Rng(3);
        for len in 0..80 {
            for _ in 0..50 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| match rng.next() % 40 {
                        0 => b'"',
                        1 => b'\\',
                        2 => (rng.next() % 0x20) as u8,
                        3..=9 => 0x80 + (rng.next() % 0x80) as u8,
                        10 => 0x20 + (rng.next() % 0x60) as u8,
                        _ => b'a' + (rng.next() % 26) as u8,
                    })
                    .collect();
                let plain = bytes
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                    .unwrap_or(len);
                assert_eq!(special_at(&bytes), plain, "{bytes:?}");
            }
        }
    }

    #[test]
    fn records_read_as_serde_json_reads_them() {
        for text in [
            r#"{"messages": [{"role": "user", "content": "hi\nthere \"x\" \\ \/ \b\f\r\t"}]}"#,
            r#"{"a": "\u00e9\u4e2d\ud83d\ude00", "b": [true, false, null, [], {}], "c": "é中😀"}"#,
            r#"  {"k": "1", "k": "2", "j": {"k": [ "x" , "y" ]} }  "#,
            r#"[]"#,
            r#""plain""#,
            r#"{"":""}"#,
        ] {
            assert!(parse(text).is_some(), "{text}");
            check(text);
        }
        // The first place and the last value of a repeated key.
        assert_eq!(
            serde_json::to_string(&parse(r#"{"k": "1", "j": "x", "k": "2"}"#).unwrap()).unwrap(),
            r#"{"k":"2","j":"x"}"#
        );
    }

    #[test]
    fn what_it_does_not_read_is_left_to_serde_json() {
        for text in [
            r#"{"n": 1}"#,
            r#"{"n": -0.5e3}"#,
            r#"{"s": "\ud800"}"#,
            r#"{"s": "\udc00\ud800"}"#,
            r#"{"s": "\ud800\u0041"}"#,
            "{\"s\": \"a\u{1}b\"}",
            r#"{"s": "\x"}"#,
            r#"{"s": "\u12g4"}"#,
            r#"{"a": 1,}"#,
            r#"{"a": "b",}"#,
            r#"["a",]"#,
            r#"{"a" "b"}"#,
            r#"{"a": tru}"#,
            r#"{"a": "b"} x"#,
            r#"{"a": "b""#,
            r#"{'a': "b"}"#,
            "",
            "  ",
            &format!(
                "{}{}",
                "[".repeat(MAX_DEPTH as usize + 1),
                "]".repeat(MAX_DEPTH as usize + 1)
            ),
        ] {
            assert!(parse(text).is_none(), "{text}");
        }
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_DEPTH as usize),
            "]".repeat(MAX_DEPTH as usize)
        );
        check(&deep);
        assert!(parse(&deep).is_some());
    }

    #[test]
    fn random_texts_read_as_serde_json_reads_them_or_are_declined() {
        let mut rng = crate::test_support::Rng(5);
        let mut next = move |n: u64| rng.next() % n;
        let pieces = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            " ",
            "\n",
            "\"",
            "\"k\"",
            "\"v\"",
            "true",
            "null",
            "1",
            "\\",
            "\\n",
            "\\u00e9",
            "\\ud83d",
            "\\ude00",
            "é",
            "\u{1}",
            "\"a\\\"b\"",
            "false",
        ];
        let mut read = 0;
        for _ in 0..30_000 {
            // Well-formed values, some of them cut or spliced with a random piece.
            let mut text = random_value(&mut next, 0);
            if next(3) == 0 {
                let at = text
                    .char_indices()
                    .map(|(i, _)| i)
                    .nth(next(text.chars().count() as u64 + 1) as usize)
                    .unwrap_or(text.len());
                text.insert_str(at, pieces[next(pieces.len() as u64) as usize]);
            }
            check(&text);
            read += usize::from(parse(&text).is_some());
        }
        assert!(read > 10_000, "{read}");
    }

    fn random_value(next: &mut impl FnMut(u64) -> u64, depth: u32) -> String {
        let space =
            |next: &mut dyn FnMut(u64) -> u64| [" ", "", "\n", "\t", "\r\n "][next(5) as usize];
        match next(if depth > 3 { 3 } else { 6 }) {
            0 => ["true", "false", "null"][next(3) as usize].to_string(),
            1 | 2 => random_string(next),
            3 | 4 => {
                let n = next(4);
                let fields: Vec<String> = (0..n)
                    .map(|_| {
                        format!(
                            "{}{}:{}{}",
                            random_string(next),
                            space(next),
                            space(next),
                            random_value(next, depth + 1)
                        )
                    })
                    .collect();
                format!("{{{}}}", fields.join(","))
            }
            _ => {
                let n = next(4);
                let items: Vec<String> = (0..n).map(|_| random_value(next, depth + 1)).collect();
                format!("[{}{}]", space(next), items.join(", "))
            }
        }
    }

    fn random_string(next: &mut impl FnMut(u64) -> u64) -> String {
        let parts = [
            "a",
            "role",
            "content",
            " ",
            "é",
            "中",
            "😀",
            "\\n",
            "\\\"",
            "\\\\",
            "\\/",
            "\\t",
            "\\u0041",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\\ud800",
            "\\udfff",
            "\\u0000",
            "\u{7f}",
        ];
        let n = next(6);
        let body: String = (0..n)
            .map(|_| parts[next(parts.len() as u64) as usize])
            .collect();
        format!("\"{body}\"")
    }
}
