//! Numbers from JS as Python would hold them, and JSON values as the chat template sees them.
//!
//! A chat template prints tool-call arguments with `tojson`, so an id or a timestamp that arrives
//! as a float is spelled `1700000000000.0` where Python writes `1700000000000`. JS has one number
//! type, so the rule is the one `Number.isSafeInteger` draws: a safe integer is an integer, every
//! other finite number a float, and a `BigInt` an integer of its exact value.
//!
//! serde_json (without `arbitrary_precision`, which would change how the tokenizer files parse)
//! holds integers up to 64 bits. A `BigInt` beyond that, up to 128 bits, travels as a *wide
//! integer*: a one-key object `{WIDE_INT_KEY: "<decimal digits>"}` that [`to_template`] turns
//! into minijinja's 128-bit integer. Wider `BigInt`s are refused ([`from_js_bigint`] says so).
//!
//! Also the key lookup every stage does on messages ([`get`], [`field`]): a chat message has a
//! handful of keys, and comparing them costs less than hashing the key looked for.

use minijinja::value::Value;
use serde_json::{Map, Number, Value as Json};

/// The key of a wide integer's carrier object. The NUL makes it a key no real data uses; an
/// object that has it but does not hold valid digits stays an ordinary object.
pub const WIDE_INT_KEY: &str = "\u{0}sft-dataset:int";

/// Largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A JS number as JSON: an integer when `Number.isSafeInteger` says so, a float otherwise.
/// `None` for NaN and the infinities, which JSON cannot hold.
pub fn from_js_number(n: f64) -> Option<Json> {
    if !n.is_finite() {
        return None;
    }
    if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER {
        // `-0` is a safe integer too, and `0` as an integer.
        return Some(Json::Number(Number::from(n as i64)));
    }
    Number::from_f64(n).map(Json::Number)
}

/// A JS `BigInt` (sign and little-endian 64-bit words, as napi reads it) as JSON: a plain integer
/// within 64 bits, a wide integer within 128 bits, `None` beyond.
pub fn from_js_bigint(negative: bool, words: &[u64]) -> Option<Json> {
    let significant = words.iter().rposition(|&w| w != 0).map_or(0, |i| i + 1);
    if significant > 2 {
        return None;
    }
    let low = words.first().copied().unwrap_or(0) as u128;
    let high = if significant == 2 {
        words[1] as u128
    } else {
        0
    };
    let magnitude = (high << 64) | low;
    if !negative {
        return Some(unsigned(magnitude));
    }
    // -2^127 is the most negative i128; its magnitude does not fit i128 itself.
    let value = match magnitude {
        m if m == 1u128 << 127 => i128::MIN,
        m => -(i128::try_from(m).ok()?),
    };
    Some(signed(value))
}

/// An integer written in decimal, as [`from_js_bigint`] holds it; `None` beyond 128 bits.
pub fn from_digits(digits: &str) -> Option<Json> {
    match digits.parse::<u128>() {
        Ok(v) => Some(unsigned(v)),
        Err(_) => digits.parse::<i128>().ok().map(signed),
    }
}

fn unsigned(value: u128) -> Json {
    match u64::try_from(value) {
        Ok(v) => Json::Number(Number::from(v)),
        Err(_) => wide_integer(value.to_string()),
    }
}

fn signed(value: i128) -> Json {
    match i64::try_from(value) {
        Ok(v) => Json::Number(Number::from(v)),
        Err(_) => wide_integer(value.to_string()),
    }
}

fn wide_integer(digits: String) -> Json {
    let mut map = Map::with_capacity(1);
    map.insert(WIDE_INT_KEY.to_string(), Json::String(digits));
    Json::Object(map)
}

/// Whether `map` is a wide-integer carrier (see [`WIDE_INT_KEY`]).
pub fn is_wide_integer(map: &Map<String, Json>) -> bool {
    wide_integer_value(map).is_some()
}

/// The 128-bit integer a wide-integer carrier holds, or `None` for any other value.
fn wide_integer_value(map: &Map<String, Json>) -> Option<Value> {
    if map.len() != 1 {
        return None;
    }
    let Some(Json::String(digits)) = map.get(WIDE_INT_KEY) else {
        return None;
    };
    if digits.starts_with('-') {
        digits.parse::<i128>().ok().map(Value::from)
    } else {
        digits.parse::<u128>().ok().map(Value::from)
    }
}

/// A JSON value as the template sees it: what minijinja's serde conversion gives (maps keep their
/// order), except that wide integers become 128-bit integers.
pub fn to_template(value: &Json) -> Value {
    match value {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                Value::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => Value::from(items.iter().map(to_template).collect::<Vec<_>>()),
        Json::Object(map) => wide_integer_value(map).unwrap_or_else(|| {
            Value::from_pairs(
                map.iter()
                    .map(|(k, v)| (Value::from(k.as_str()), to_template(v))),
            )
        }),
    }
}

/// [`to_template`] of a list, without first wrapping it in a JSON array.
pub fn list_to_template(values: &[Json]) -> Value {
    Value::from(values.iter().map(to_template).collect::<Vec<_>>())
}

/// Objects of at most this many keys are searched by a scan of their keys.
const SCAN_KEYS: usize = 8;

/// `map.get(key)`: a scan of a small object's keys, the map's hash lookup beyond.
pub fn get<'a>(map: &'a Map<String, Json>, key: &str) -> Option<&'a Json> {
    if map.len() <= SCAN_KEYS {
        map.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        map.get(key)
    }
}

/// `value.get(key)` of an object (`None` for any other value), by [`get`].
pub fn field<'a>(value: &'a Json, key: &str) -> Option<&'a Json> {
    value.as_object().and_then(|map| get(map, key))
}

/// The string at `key` of an object, if it is one.
pub fn str_field<'a>(value: &'a Json, key: &str) -> Option<&'a str> {
    field(value, key).and_then(Json::as_str)
}

/// Writes `value` unambiguously, for keys that compare or hash JSON: a tagged tree with
/// length-prefixed strings (no escaping). Two values write the same bytes exactly when they are
/// the same JSON, object keys in the same order; integers and floats stay apart (`1`, `1.0`).
pub fn write_tagged(value: &Json, out: &mut Vec<u8>) {
    match value {
        Json::Null => out.push(b'n'),
        Json::Bool(b) => out.push(if *b { b't' } else { b'f' }),
        Json::Number(n) => {
            // serde_json keeps an integer as u64 or i64 and anything else as f64: three tags.
            let (tag, bits) = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => (b'u', u),
                (None, Some(i)) => (b'i', i as u64),
                _ => (b'd', n.as_f64().unwrap_or(f64::NAN).to_bits()),
            };
            out.push(tag);
            out.extend_from_slice(&bits.to_le_bytes());
        }
        Json::String(text) => {
            out.push(b's');
            write_str(text, out);
        }
        Json::Array(items) => {
            out.push(b'[');
            write_len(items.len(), out);
            items.iter().for_each(|v| write_tagged(v, out));
        }
        Json::Object(map) => {
            out.push(b'{');
            write_len(map.len(), out);
            for (key, v) in map {
                write_str(key, out);
                write_tagged(v, out);
            }
        }
    }
}

/// A length in [`write_tagged`]'s bytes: LEB128, seven bits a byte, the last byte's top bit
/// clear.
pub fn write_len(len: usize, out: &mut Vec<u8>) {
    let mut rest = len as u64;
    while rest >= 0x80 {
        out.push((rest as u8) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// A string in [`write_tagged`]'s bytes: its length, then its bytes.
pub fn write_str(text: &str, out: &mut Vec<u8>) {
    write_len(text.len(), out);
    out.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::value::Serde;
    use serde_json::json;

    #[test]
    fn lookups_agree_with_the_map_on_small_and_large_objects() {
        for keys in [0usize, 1, 2, SCAN_KEYS, SCAN_KEYS + 1, 40] {
            let mut map = Map::new();
            for k in 0..keys {
                map.insert(format!("k{k}"), json!(k));
            }
            let value = Json::Object(map.clone());
            for probe in ["k0", "k1", "k7", "k8", "k39", "k40", "", "k"] {
                assert_eq!(get(&map, probe), map.get(probe), "{keys} keys, {probe:?}");
                assert_eq!(
                    field(&value, probe),
                    value.get(probe),
                    "{keys} keys, {probe:?}"
                );
            }
        }
        let message = json!({"role": "user", "content": 3});
        assert_eq!(str_field(&message, "role"), Some("user"));
        assert_eq!(str_field(&message, "content"), None);
        assert_eq!(field(&json!(["role"]), "role"), None);
        assert_eq!(field(&json!("role"), "role"), None);
    }

    fn number(n: f64) -> String {
        from_js_number(n).map(|j| j.to_string()).unwrap_or_default()
    }

    #[test]
    fn safe_integers_are_integers_and_the_rest_floats() {
        assert_eq!(number(2147483648.0), "2147483648");
        assert_eq!(number(4294967296.0), "4294967296");
        assert_eq!(number(1700000000000.0), "1700000000000");
        assert_eq!(number(9007199254740991.0), "9007199254740991");
        assert_eq!(number(-9007199254740991.0), "-9007199254740991");
        assert_eq!(number(-3000000000.0), "-3000000000");
        assert_eq!(number(-0.0), "0");
        assert!(from_js_number(-0.0).unwrap().is_i64());
        // Beyond the safe range a JS number may already be rounded: it stays a float.
        assert!(from_js_number(9007199254740992.0).unwrap().is_f64());
        assert!(from_js_number(1e21).unwrap().is_f64());
        assert!(from_js_number(2.5).unwrap().is_f64());
        assert_eq!(from_js_number(f64::NAN), None);
        assert_eq!(from_js_number(f64::INFINITY), None);
        assert_eq!(from_js_number(f64::NEG_INFINITY), None);
    }

    fn bigint(negative: bool, words: &[u64]) -> Option<Json> {
        from_js_bigint(negative, words)
    }

    #[test]
    fn bigints_within_64_bits_are_plain_integers() {
        assert_eq!(bigint(false, &[]), Some(json!(0)));
        assert_eq!(bigint(false, &[u64::MAX]), Some(json!(u64::MAX)));
        assert_eq!(bigint(true, &[1 << 63]), Some(json!(i64::MIN)));
        assert_eq!(bigint(false, &[5, 0, 0]), Some(json!(5)));
        assert_eq!(
            bigint(true, &[9007199254740993]),
            Some(json!(-9007199254740993i64))
        );
    }

    #[test]
    fn bigints_within_128_bits_are_wide_integers_and_wider_ones_refused() {
        let wide = |digits: &str| Some(wide_integer(digits.to_string()));
        assert_eq!(bigint(false, &[0, 1]), wide("18446744073709551616"));
        assert_eq!(bigint(true, &[(1 << 63) + 1]), wide("-9223372036854775809"));
        assert_eq!(
            bigint(false, &[u64::MAX, u64::MAX]),
            wide(&u128::MAX.to_string())
        );
        assert_eq!(bigint(true, &[0, 1 << 63]), wide(&i128::MIN.to_string()));
        assert_eq!(bigint(true, &[1, 1 << 63]), None);
        assert_eq!(bigint(false, &[0, 0, 1]), None);
    }

    #[test]
    fn digits_give_the_same_integers_as_bigints() {
        assert_eq!(from_digits("42"), Some(json!(42)));
        assert_eq!(from_digits("-9223372036854775808"), Some(json!(i64::MIN)));
        assert_eq!(from_digits("18446744073709551616"), bigint(false, &[0, 1]));
        assert_eq!(
            from_digits("-170141183460469231731687303715884105728"),
            bigint(true, &[0, 1 << 63])
        );
        assert_eq!(from_digits("340282366920938463463374607431768211456"), None);
        assert_eq!(from_digits("1.5"), None);
    }

    #[test]
    fn template_values_are_those_of_the_serde_conversion() {
        let v = json!({"b": [1, -2, 2.5, null, true, "s"], "a": {"z": 1, "y": {}}, "n": u64::MAX});
        let direct = to_template(&v);
        let serde = Value::from(Serde(&v));
        assert_eq!(direct, serde);
        assert_eq!(direct.to_string(), serde.to_string());
        let keys: Vec<String> = direct.try_iter().unwrap().map(|k| k.to_string()).collect();
        assert_eq!(keys, ["b", "a", "n"]);
    }

    #[test]
    fn wide_integers_reach_the_template_as_integers() {
        let v = json!({"id": bigint(false, &[0, 1]).unwrap(), "neg": bigint(true, &[0, 1 << 63]).unwrap()});
        let t = to_template(&v);
        let id = t.get_attr("id").unwrap();
        assert!(id.is_integer());
        assert_eq!(id.to_string(), "18446744073709551616");
        assert_eq!(
            t.get_attr("neg").unwrap().to_string(),
            "-170141183460469231731687303715884105728"
        );
        // Anything else under the key stays what it is.
        let forged = json!({WIDE_INT_KEY: "12a"});
        assert_eq!(
            to_template(&forged).kind(),
            minijinja::value::ValueKind::Map
        );
        let two_keys = json!({WIDE_INT_KEY: "12", "x": 1});
        assert_eq!(
            to_template(&two_keys).kind(),
            minijinja::value::ValueKind::Map
        );
    }
}
