//! JS values that `lib/encode.js` wrote into bytes on the JS thread, read back as JSON.
//!
//! Reading a JS value through napi costs several native calls per property; the JS side writes
//! plain values (plain objects and arrays, strings, finite numbers, booleans, null) into one
//! buffer instead, and everything else stays for napi's conversion (`napi/json.rs`). Read back,
//! a value is the JSON that conversion gives: keys in the same order, each number through
//! [`from_js_number`], strings as the same UTF-8.
//!
//! The format, little-endian: a tag byte, then
//! - `0` null, `1` false, `2` true;
//! - `3` a string: its UTF-8 length (u32) and bytes;
//! - `4` a number: its f64 bits;
//! - `5` an array: its length (u32) and that many values;
//! - `6` an object: its key count (u32), then per key its string (length and bytes, no tag) and
//!   its value.

use serde_json::{Map, Value as Json};

use crate::json_value::from_js_number;

/// Deepest nesting read back; the JS side hands deeper values to napi's conversion, which
/// refuses them at 128.
pub const MAX_DEPTH: usize = 128;

/// Why bytes are not one encoded value. Only a caller that bypasses `lib/` can get here.
#[derive(Debug, PartialEq, Eq)]
pub struct DecodeError(pub String);

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn fail(&self, what: &str) -> DecodeError {
        DecodeError(format!("{what} at byte {}", self.at))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.fail("the value ends early"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<usize, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let len = self.u32()?;
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| self.fail("a string is not UTF-8"))
    }

    /// A count of items that each take at least `min_bytes`: bounded by the bytes left, so that
    /// a forged count cannot reserve memory the input does not back.
    fn count(&mut self, min_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u32()?;
        let left = self.bytes.len() - self.at;
        if n.saturating_mul(min_bytes) > left {
            return Err(self.fail("a count is larger than the bytes left"));
        }
        Ok(n)
    }

    fn value(&mut self, depth: usize) -> Result<Json, DecodeError> {
        let tag = self.take(1)?[0];
        Ok(match tag {
            0 => Json::Null,
            1 => Json::Bool(false),
            2 => Json::Bool(true),
            3 => Json::String(self.string()?),
            4 => {
                let b = self.take(8)?;
                let bits = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                from_js_number(f64::from_bits(bits))
                    .ok_or_else(|| self.fail("a number is not finite"))?
            }
            5 | 6 if depth >= MAX_DEPTH => return Err(self.fail("nesting is too deep")),
            5 => {
                let n = self.count(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Json::Array(items)
            }
            6 => {
                let n = self.count(5)?;
                let mut map = Map::with_capacity(n);
                for _ in 0..n {
                    let key = self.string()?;
                    let value = self.value(depth + 1)?;
                    if map.insert(key, value).is_some() {
                        return Err(self.fail("an object repeats a key"));
                    }
                }
                Json::Object(map)
            }
            other => return Err(self.fail(&format!("unknown tag {other}"))),
        })
    }
}

/// The one value `bytes` hold, whole: trailing bytes are an error.
pub fn decode(bytes: &[u8]) -> Result<Json, DecodeError> {
    let mut reader = Reader { bytes, at: 0 };
    let value = reader.value(0)?;
    if reader.at != bytes.len() {
        return Err(reader.fail("bytes follow the value"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Writes values as `lib/encode.js` does, for the tests.
    fn encode(value: &Json, out: &mut Vec<u8>) {
        let string = |s: &str, out: &mut Vec<u8>| {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        };
        match value {
            Json::Null => out.push(0),
            Json::Bool(b) => out.push(if *b { 2 } else { 1 }),
            Json::String(s) => {
                out.push(3);
                string(s, out);
            }
            Json::Number(n) => {
                out.push(4);
                out.extend_from_slice(&n.as_f64().unwrap().to_le_bytes());
            }
            Json::Array(items) => {
                out.push(5);
                out.extend_from_slice(&(items.len() as u32).to_le_bytes());
                items.iter().for_each(|v| encode(v, out));
            }
            Json::Object(map) => {
                out.push(6);
                out.extend_from_slice(&(map.len() as u32).to_le_bytes());
                for (k, v) in map {
                    string(k, out);
                    encode(v, out);
                }
            }
        }
    }

    fn bytes_of(value: &Json) -> Vec<u8> {
        let mut out = Vec::new();
        encode(value, &mut out);
        out
    }

    #[test]
    fn values_read_back_with_their_key_order_and_number_kinds() {
        let value = json!({
            "z": [null, true, false, "é \u{1F600}", ""],
            "a": {"n": 3, "half": 0.5, "big": 9_007_199_254_740_991_i64, "neg": -12},
            "messages": [{"role": "user", "content": "hi"}],
            "empty": {},
            "list": []
        });
        let back = decode(&bytes_of(&value)).unwrap();
        assert_eq!(back, value);
        // Key order survives (the map keeps insertion order).
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
        let keys: Vec<&str> = back
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["z", "a", "messages", "empty", "list"]);
    }

    #[test]
    fn numbers_follow_the_safe_integer_rule() {
        let number = |n: f64| {
            let mut b = vec![4];
            b.extend_from_slice(&n.to_le_bytes());
            serde_json::to_string(&decode(&b).unwrap()).unwrap()
        };
        assert_eq!(number(3.0), "3");
        assert_eq!(number(-0.0), "0");
        assert_eq!(number(1.5), "1.5");
        assert_eq!(number(9_007_199_254_740_991.0), "9007199254740991");
        assert_eq!(number(9_007_199_254_740_992.0), "9007199254740992.0");
        assert_eq!(number(1e21), "1e+21");
        let mut nan = vec![4];
        nan.extend_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(
            decode(&nan),
            Err(DecodeError("a number is not finite at byte 9".into()))
        );
    }

    #[test]
    fn malformed_bytes_are_errors_not_panics() {
        let whole = bytes_of(&json!({"role": "user", "content": ["a", 1, {"b": null}]}));
        // Every truncation fails, and so does every extension.
        for cut in 0..whole.len() {
            assert!(decode(&whole[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(
            decode(&longer),
            Err(DecodeError(format!(
                "bytes follow the value at byte {}",
                whole.len()
            )))
        );
        assert_eq!(
            decode(&[9]),
            Err(DecodeError("unknown tag 9 at byte 1".into()))
        );
        // Not UTF-8.
        assert!(decode(&[3, 1, 0, 0, 0, 0xff]).is_err());
        // A count the bytes cannot back is refused before anything is reserved.
        assert!(decode(&[5, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode(&[6, 0xff, 0xff, 0xff, 0x7f, 0]).is_err());
        // A repeated key.
        let mut twice = vec![6, 2, 0, 0, 0];
        for _ in 0..2 {
            twice.extend_from_slice(&[1, 0, 0, 0, b'k', 0]);
        }
        assert!(decode(&twice).is_err());
        // Every byte value in every position: never a panic.
        for at in 0..whole.len() {
            for b in 0..=255u8 {
                let mut changed = whole.clone();
                changed[at] = b;
                let _ = decode(&changed);
            }
        }
    }

    #[test]
    fn nesting_stops_at_the_limit() {
        let nested = |depth: usize| {
            let mut b = Vec::new();
            for _ in 0..depth {
                b.extend_from_slice(&[5, 1, 0, 0, 0]);
            }
            b.push(0);
            b
        };
        let ok = decode(&nested(MAX_DEPTH)).unwrap();
        assert_eq!(
            serde_json::to_string(&ok).unwrap().matches('[').count(),
            MAX_DEPTH
        );
        assert!(decode(&nested(MAX_DEPTH + 1))
            .unwrap_err()
            .0
            .starts_with("nesting is too deep"));
    }
}
