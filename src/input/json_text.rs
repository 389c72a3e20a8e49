//! JSON text of the data read as Python's `json.loads` reads it, so that a chat template spells
//! its numbers as transformers does (`tojson`, `{{ x }}`) and its strings arrive as the
//! reference's do.
//!
//! - **Floats** are the double nearest their text: serde_json's `float_roundtrip` is on
//!   (Cargo.toml). Without it, serde_json read about one float in ten of 16 or more significant
//!   digits one ulp off (`100.00000000000001` as `100.0`, `0.9856906946328695` as
//!   `0.9856906946328696`), so a loaded file rendered otherwise than transformers and than the
//!   same records created from JS (`JSON.parse` rounds correctly too).
//! - **Integers** beyond 64 bits, which serde_json reads as floats, are exact up to 128 bits (as a
//!   JS `BigInt` is, see `json_value`), and `-0` is the integer `0` (serde_json: the float
//!   `-0.0`). A record holding such a number is read again where it does, each number from its
//!   own text; any other record is serde_json's reading as it is.
//! - **Lone surrogates**: serde_json refuses the escape of one (`"\ud800"`), which `JSON.parse`
//!   accepts and napi hands to Rust as U+FFFD, so the reference loads such a file and trains on
//!   U+FFFD; here too (as `createSFTDataset` of the same records does).
//!
//! Strings, key order, a repeated key (its last value, in its first place) and every error stay
//! serde_json's.

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Number, Value as Json};

use super::json_plain;
use crate::example::json_value;

/// Parses a JSON text of the data (a record, or a JSON string inside one).
pub fn parse(text: &str) -> serde_json::Result<Json> {
    // Records without numbers (most chat data) are read by the quick reader; it declines
    // everything else, errors included.
    if let Some(value) = json_plain::parse(text) {
        return Ok(value);
    }
    let value: Json = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => match without_lone_surrogates(text) {
            // Same length: an error left in the text keeps its line and column.
            Some(replaced) => return parse(&replaced),
            None => return Err(e),
        },
    };
    if !has_wide_number(&value) {
        return Ok(value);
    }
    let raw: &RawValue = serde_json::from_str(text)?;
    exact(value, raw)
}

/// Whether `text` is one JSON value as [`parse`] reads it, without building it.
pub fn is_json(text: &str) -> bool {
    serde_json::from_str::<IgnoredAny>(text).is_ok()
        || without_lone_surrogates(text)
            .is_some_and(|replaced| serde_json::from_str::<IgnoredAny>(&replaced).is_ok())
}

/// Whether serde_json may have read an integer of `value` as a float: an integral float of
/// 2^63 or more in magnitude (an integer text beyond 64 bits gives one), or `-0.0` (`-0` does).
fn is_wide(n: &Number) -> bool {
    n.is_f64()
        && n.as_f64().is_some_and(|f| {
            (f.fract() == 0.0 && f.abs() >= 9_223_372_036_854_775_808.0)
                || (f == 0.0 && f.is_sign_negative())
        })
}

fn has_wide_number(value: &Json) -> bool {
    match value {
        Json::Number(n) => is_wide(n),
        Json::Array(items) => items.iter().any(has_wide_number),
        Json::Object(map) => map.values().any(has_wide_number),
        Json::Null | Json::Bool(_) | Json::String(_) => false,
    }
}

/// `value` (serde_json's reading of `raw`) with each of its wide numbers read again from its
/// text: each level holding one is read again as raw texts, an object's by key (where a key
/// repeats, its last text, as serde_json and Python keep its last value). Such records are rare,
/// so reading a level twice costs nothing that shows.
fn exact(mut value: Json, raw: &RawValue) -> serde_json::Result<Json> {
    match &mut value {
        Json::Number(n) if is_wide(n) => return number(raw.get()),
        Json::Array(items) => {
            let raws: Vec<&RawValue> = serde_json::from_str(raw.get())?;
            for (item, raw) in items.iter_mut().zip(raws) {
                if has_wide_number(item) {
                    *item = exact(std::mem::take(item), raw)?;
                }
            }
        }
        Json::Object(map) => {
            let Entries(entries) = serde_json::from_str(raw.get())?;
            for (key, item) in map.iter_mut() {
                if has_wide_number(item) {
                    let raw = entries
                        .iter()
                        .rev()
                        .find(|(k, _)| k == key)
                        .map(|(_, raw)| *raw)
                        .ok_or_else(|| serde_json::Error::custom("a key read twice differs"))?;
                    *item = exact(std::mem::take(item), raw)?;
                }
            }
        }
        _ => {}
    }
    Ok(value)
}

/// A number from its JSON text: an integer when it is written as one (`-0` is `0`, as in
/// Python; beyond 64 bits a wide integer, beyond 128 bits a float), else the nearest float.
fn number(text: &str) -> serde_json::Result<Json> {
    if !text.contains(['.', 'e', 'E']) {
        if let Some(integer) = json_value::from_digits(text) {
            return Ok(integer);
        }
    }
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Json::Number)
        .ok_or_else(|| serde_json::Error::custom(format_args!("number out of range: {text}")))
}

/// `text` with each escape of a lone surrogate inside a string (a high one not followed by the
/// escape of a low one, or a low one alone) written `\ufffd`, the same length; `None` when it has
/// none.
fn without_lone_surrogates(text: &str) -> Option<String> {
    let hex = |at: usize| -> Option<u32> {
        let digits = text.get(at..at + 4)?;
        if digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            u32::from_str_radix(digits, 16).ok()
        } else {
            None
        }
    };
    let escaped_unit = |at: usize| -> Option<u32> {
        (text.as_bytes().get(at..at + 2) == Some(b"\\u")).then(|| hex(at + 2))?
    };
    let bytes = text.as_bytes();
    let mut lone = Vec::new();
    let (mut at, mut in_string) = (0, false);
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                in_string = !in_string;
                at += 1;
            }
            b'\\' if in_string => match escaped_unit(at) {
                Some(0xD800..=0xDBFF) if matches!(escaped_unit(at + 6), Some(0xDC00..=0xDFFF)) => {
                    at += 12
                }
                Some(0xD800..=0xDFFF) => {
                    lone.push(at);
                    at += 6;
                }
                // Any other escape: its next character is never a quote that ends the string.
                _ => at += 2,
            },
            _ => at += 1,
        }
    }
    if lone.is_empty() {
        return None;
    }
    let mut replaced = text.as_bytes().to_vec();
    for at in lone {
        replaced[at..at + 6].copy_from_slice(b"\\ufffd");
    }
    String::from_utf8(replaced).ok()
}

/// An object's entries in their order, repeats included, each value still as its text.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;

        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }

        deserializer.deserialize_map(EntriesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// xorshift64: the tests' random numbers, the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A float as JS and Python print one (shortest round trip), of any magnitude.
        fn float(&mut self) -> f64 {
            let x = self.next();
            match x % 3 {
                0 => f64::from_bits(x >> 2 | 0x3000_0000_0000_0000),
                1 => (x >> 11) as f64 / (1u64 << 53) as f64 * 360.0 - 180.0,
                _ => (x >> 11) as f64 / (1u64 << 53) as f64,
            }
        }
    }

    fn bits(v: &Json) -> u64 {
        v.as_f64().expect("a number").to_bits()
    }

    #[test]
    fn floats_are_the_nearest_double_to_their_text_wherever_they_sit() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let f: Vec<f64> = (0..4).map(|_| rng.float()).collect();
            let texts: Vec<String> = f.iter().map(|x| format!("{x:?}")).collect();
            let record = format!(
                r#"{{"messages": [{{"role": "assistant", "content": "{}", "tool_calls": [{{"function": {{"name": "f", "arguments": {{"a": {}, "b": [{}, "x", {{"c": {}}}]}}}}}}]}}], "n": {}}}"#,
                texts[0], texts[0], texts[1], texts[2], texts[3]
            );
            let value = parse(&record).unwrap();
            let args = &value["messages"][0]["tool_calls"][0]["function"]["arguments"];
            assert_eq!(bits(&args["a"]), f[0].to_bits(), "{record}");
            assert_eq!(bits(&args["b"][0]), f[1].to_bits(), "{record}");
            assert_eq!(bits(&args["b"][2]["c"]), f[2].to_bits(), "{record}");
            assert_eq!(bits(&value["n"]), f[3].to_bits(), "{record}");
            assert_eq!(value["messages"][0]["content"], json!(texts[0]));
        }
    }

    #[test]
    fn long_and_halfway_decimals_round_to_the_nearest_double_ties_to_even() {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        for _ in 0..20_000 {
            let digits: String = (0..rng.next() % 40 + 1)
                .map(|_| char::from(b'0' + (rng.next() % 10) as u8))
                .collect();
            let sign = if rng.next().is_multiple_of(2) {
                "-"
            } else {
                ""
            };
            let exponent = (rng.next() % 120) as i64 - 60;
            let text = format!("{sign}{}.{digits}e{exponent}", rng.next() % 10);
            let value = parse(&format!("[{text}]")).unwrap();
            assert_eq!(
                bits(&value[0]),
                text.parse::<f64>().unwrap().to_bits(),
                "{text}"
            );
        }
        // Exactly halfway between two doubles: to the even one.
        for (text, expected) in [
            ("9007199254740993.0", 9_007_199_254_740_992.0),
            ("9007199254740995.0", 9_007_199_254_740_996.0),
            (
                "0.1000000000000000055511151231257827021181583404541015625",
                0.1,
            ),
            ("2.2250738585072011e-308", 2.225_073_858_507_201e-308),
        ] {
            let value = parse(&format!("[{text}]")).unwrap();
            assert_eq!(bits(&value[0]), f64::to_bits(expected), "{text}");
        }
    }

    #[test]
    fn known_misreadings_are_read_as_python_reads_them() {
        for (text, expected) in [
            ("100.00000000000001", 100.00000000000001),
            ("-122.41941550000001", -122.41941550000001),
            ("0.9856906946328695", 0.9856906946328695),
            ("1.1362275116276523e-8", 1.1362275116276523e-8),
            ("-0.0", -0.0),
        ] {
            let value = parse(&format!("[{text}]")).unwrap();
            assert_eq!(bits(&value[0]), f64::to_bits(expected), "{text}");
            assert_eq!(format!("{:?}", value[0].as_f64().unwrap()), text);
        }
    }

    #[test]
    fn integers_are_exact_up_to_128_bits_and_minus_zero_is_zero() {
        let value = parse(
            r#"{"small": 7, "minus_zero": -0, "wide": 18446744073709551616, "negative": -170141183460469231731687303715884105728, "wider": 340282366920938463463374607431768211456, "f": 1.5}"#,
        )
        .unwrap();
        assert_eq!(value["small"], json!(7));
        assert_eq!(value["minus_zero"], json!(0));
        assert_eq!(
            value["wide"],
            json_value::from_digits("18446744073709551616").unwrap()
        );
        assert_eq!(
            value["negative"],
            json_value::from_digits("-170141183460469231731687303715884105728").unwrap()
        );
        assert_eq!(bits(&value["wider"]), 3.402823669209385e38_f64.to_bits());
        assert_eq!(value["f"], json!(1.5));
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_in_its_first_place() {
        let text = r#"{"x": "first", "y": 18446744073709551616, "x": -0, "z": [{"w": 1.5, "w": -36893488147419103232}]}"#;
        let value = parse(text).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["x", "y", "z"]);
        assert_eq!(value["x"], json!(0));
        assert_eq!(
            value["y"],
            json_value::from_digits("18446744073709551616").unwrap()
        );
        assert_eq!(
            value["z"][0]["w"],
            json_value::from_digits("-36893488147419103232").unwrap()
        );
        assert_eq!(value["z"][0].as_object().unwrap().len(), 1);
    }

    #[test]
    fn lone_surrogate_escapes_read_as_u_fffd_and_pairs_stay_whole() {
        let value = parse(
            r#"{"a": "x\ud800y", "b": "\udc00", "c": "\ud83d\ude00", "d": "\\ud800", "e": "\ud800\u0041", "\ud800": 1.5}"#,
        )
        .unwrap();
        assert_eq!(value["a"], json!("x\u{FFFD}y"));
        assert_eq!(value["b"], json!("\u{FFFD}"));
        assert_eq!(value["c"], json!("\u{1F600}"));
        assert_eq!(value["d"], json!("\\ud800"));
        assert_eq!(value["e"], json!("\u{FFFD}A"));
        assert_eq!(value["\u{FFFD}"], json!(1.5));
        // An error after a lone surrogate is reported where serde_json reports it.
        let text = "{\"a\": \"\\ud800\",\n \"b\": tru}";
        let ours = parse(text).unwrap_err();
        let theirs = serde_json::from_str::<Json>(&text.replace("\\ud800", "x")).unwrap_err();
        assert_eq!(
            (ours.line(), ours.column()),
            (theirs.line(), theirs.column())
        );
        assert_eq!(ours.to_string(), theirs.to_string());
        assert_eq!(
            without_lone_surrogates(r#"{"a": "\ud83d\ude00 \\ud800"}"#),
            None
        );
    }

    #[test]
    fn texts_without_floats_and_errors_are_serde_json_s() {
        for text in [
            r#"{"messages": [{"role": "user", "content": "a\"b\\u00e9\n"}], "n": [1, -2, 18446744073709551615, -9223372036854775808, true, null]}"#,
            r#"[]"#,
            r#""x""#,
        ] {
            assert_eq!(
                parse(text).unwrap(),
                serde_json::from_str::<Json>(text).unwrap()
            );
        }
        for text in [
            r#"{"a": 1.5,"#,
            r#"{"a": 1e400}"#,
            r#"[1.5] x"#,
            "",
            r#"{"a": 01}"#,
        ] {
            let ours = parse(text).unwrap_err().to_string();
            let theirs = serde_json::from_str::<Json>(text).unwrap_err().to_string();
            assert_eq!(ours, theirs, "{text}");
        }
    }
}
