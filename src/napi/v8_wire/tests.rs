//! The reader on bytes written as V8's serializer writes them (a small writer here), against the
//! values the napi walk gives.

use super::*;
use serde_json::json;

/// A tiny writer of the format, to build inputs by hand.
#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn header() -> W {
        W(vec![0xFF, 15])
    }
    fn b(mut self, bytes: &[u8]) -> W {
        self.0.extend_from_slice(bytes);
        self
    }
    fn varint(mut self, mut v: u64) -> W {
        loop {
            let low = (v & 0x7F) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(low);
                return self;
            }
            self.0.push(low | 0x80);
        }
    }
    fn int(self, n: i32) -> W {
        self.b(b"I").varint(((n << 1) ^ (n >> 31)) as u32 as u64)
    }
    fn double(self, n: f64) -> W {
        self.b(b"N").b(&n.to_le_bytes())
    }
    fn s(self, text: &str) -> W {
        if text.chars().all(|c| (c as u32) < 256) {
            let bytes: Vec<u8> = text.chars().map(|c| c as u8).collect();
            self.b(b"\"").varint(bytes.len() as u64).b(&bytes)
        } else {
            let units: Vec<u16> = text.encode_utf16().collect();
            self.utf16(&units)
        }
    }
    fn utf16(self, units: &[u16]) -> W {
        let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
        self.b(b"c").varint(bytes.len() as u64).b(&bytes)
    }
    fn dense(self, len: u64) -> W {
        self.b(b"A").varint(len)
    }
    fn end_dense(self, props: u64, len: u64) -> W {
        self.b(b"$").varint(props).varint(len)
    }
}

#[derive(Debug, PartialEq)]
enum Element {
    Json(Json),
    Walk,
}

/// Each element as the skim and then the decoder read it; `None` past the last one read.
fn elements(bytes: &[u8]) -> Vec<Option<Element>> {
    let skim = skim(bytes).expect("an array");
    let mut out: Vec<Option<Element>> = skim
        .elements
        .iter()
        .map(|e| {
            Some(match e {
                Skimmed::Wire(w) => {
                    Element::Json(skim.examples.decode(w).expect("decodes as skimmed"))
                }
                Skimmed::Walk => Element::Walk,
            })
        })
        .collect();
    out.resize_with(skim.len as usize + 1, || None);
    out
}

fn one(bytes: W) -> Option<Element> {
    let bytes = bytes.end_dense(0, 1);
    let mut out = elements(&bytes.0);
    assert_eq!(out.pop(), Some(None), "one element, then nothing");
    out.pop().unwrap()
}

#[test]
fn reads_objects_arrays_and_scalars() {
    // [{"role": "user", "n": 1, "x": [true, false, null, 1.5, -3], "u": undefined}]
    let w = W::header()
        .dense(1)
        .b(b"o")
        .s("role")
        .s("user")
        .s("n")
        .int(1)
        .s("x")
        .dense(5)
        .b(b"TF0")
        .double(1.5)
        .int(-3)
        .end_dense(0, 5)
        .s("u")
        .b(b"_")
        .b(b"{")
        .varint(4);
    assert_eq!(
        one(w),
        Some(Element::Json(
            json!({"role": "user", "n": 1, "x": [true, false, null, 1.5, -3]})
        ))
    );
}

#[test]
fn numbers_follow_the_walk() {
    let read = |w: W| match one(W::header().dense(1).b(&w.0)) {
        Some(Element::Json(j)) => j,
        other => panic!("{other:?}"),
    };
    assert_eq!(read(W::default().double(-0.0)), json!(0));
    assert_eq!(
        read(W::default().double(2f64.powi(40))),
        json!(1_099_511_627_776i64)
    );
    assert_eq!(
        read(W::default().double(2f64.powi(60))),
        json!(1_152_921_504_606_846_976f64)
    );
    assert_eq!(read(W::default().int(i32::MIN)), json!(i32::MIN));
    assert_eq!(read(W::default().int(i32::MAX)), json!(i32::MAX));
    // -5n and 2n ** 70n
    assert_eq!(
        read(W::default().b(b"Z").varint(17).b(&5u64.to_le_bytes())),
        json!(-5)
    );
    let words = [0u64, 64];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(
        read(W::default().b(b"Z").varint(32).b(&bytes)),
        crate::example::json_value::from_digits("1180591620717411303424").unwrap()
    );
    for walked in [
        W::header().dense(1).double(f64::NAN),
        W::header().dense(1).double(f64::INFINITY),
        // 2n ** 128n: three words.
        W::header()
            .dense(1)
            .b(b"Z")
            .varint(48)
            .b(&[0u8; 16])
            .b(&1u64.to_le_bytes()),
        W::header().dense(1).b(b"_"),
        W::header().dense(1).dense(1).b(b"_").end_dense(0, 1),
        W::header().dense(1).dense(1).b(b"-").end_dense(0, 1),
    ] {
        assert_eq!(one(walked), Some(Element::Walk));
    }
}

#[test]
fn strings_as_napi_writes_them() {
    let read = |w: W| match one(W::header().dense(1).b(&w.0)) {
        Some(Element::Json(Json::String(s))) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(read(W::default().s("")), "");
    assert_eq!(read(W::default().s("caf\u{e9} \u{ff}")), "café ÿ");
    assert_eq!(read(W::default().s("€ and 😀")), "€ and 😀");
    // Padding before a two-byte string, as the serializer aligns it.
    assert_eq!(read(W::default().b(&[0, 0]).s("€")), "€");
    // Lone surrogates become U+FFFD, a pair stays one character.
    assert_eq!(
        read(W::default().utf16(&[0xD800, 0x61, 0xDC00, 0xD83D, 0xDE00, 0xD800])),
        "\u{FFFD}a\u{FFFD}😀\u{FFFD}"
    );
}

#[test]
fn keys_numbers_and_named_array_properties() {
    // {0: "a", 4294967294: "b", "k": "c"} and [1] with a named property "x"
    let w = W::header()
        .dense(2)
        .b(b"o")
        .int(0)
        .s("a")
        .double(4_294_967_294.0)
        .s("b")
        .s("k")
        .s("c")
        .b(b"{")
        .varint(3)
        .dense(1)
        .int(1)
        .s("x")
        .double(f64::NAN)
        .end_dense(1, 1)
        .end_dense(0, 2);
    let out = elements(&w.0);
    assert_eq!(
        out[0],
        Some(Element::Json(
            json!({"0": "a", "4294967294": "b", "k": "c"})
        ))
    );
    // A named property is not read by the walk: its NaN does not matter.
    assert_eq!(out[1], Some(Element::Json(json!([1]))));
    assert_eq!(out[2], None);
}

#[test]
fn sparse_arrays_whole_or_walked() {
    // A holey array with every index set, then one with a hole.
    let w = W::header()
        .dense(2)
        .b(b"a")
        .varint(2)
        .int(0)
        .s("x")
        .int(1)
        .s("y")
        .s("name")
        .int(7)
        .b(b"@")
        .varint(3)
        .varint(2)
        .b(b"a")
        .varint(2)
        .int(1)
        .s("y")
        .b(b"@")
        .varint(1)
        .varint(2)
        .end_dense(0, 2);
    let out = elements(&w.0);
    assert_eq!(out[0], Some(Element::Json(json!(["x", "y"]))));
    assert_eq!(out[1], Some(Element::Walk));
}

#[test]
fn shared_objects_are_read_again_and_cycles_walked() {
    // tools = [{"name": "f"}]; [{"t": tools}, {"t": tools, "u": tools}]; ids: array 0,
    // element 1, tools 2, its object 3, element 4.
    let w = W::header()
        .dense(2)
        .b(b"o")
        .s("t")
        .dense(1)
        .b(b"o")
        .s("name")
        .s("f")
        .b(b"{")
        .varint(1)
        .end_dense(0, 1)
        .b(b"{")
        .varint(1)
        .b(b"o")
        .s("t")
        .b(b"^")
        .varint(2)
        .s("u")
        .b(b"^")
        .varint(3)
        .b(b"{")
        .varint(2)
        .end_dense(0, 2);
    let out = elements(&w.0);
    assert_eq!(out[0], Some(Element::Json(json!({"t": [{"name": "f"}]}))));
    assert_eq!(
        out[1],
        Some(Element::Json(
            json!({"t": [{"name": "f"}], "u": {"name": "f"}})
        ))
    );
    // a = {"self": a}: a cycle; then b = {"a": a}, which shares the cyclic object.
    let w = W::header()
        .dense(2)
        .b(b"o")
        .s("self")
        .b(b"^")
        .varint(1)
        .b(b"{")
        .varint(1)
        .b(b"o")
        .s("a")
        .b(b"^")
        .varint(1)
        .b(b"{")
        .varint(1)
        .end_dense(0, 2);
    let out = elements(&w.0);
    assert_eq!(out[0], Some(Element::Walk));
    assert_eq!(out[1], Some(Element::Walk));
    assert_eq!(out[2], None);
}

#[test]
fn node_budget_as_the_walk_counts_it() {
    // An element of `levels` arrays, each holding the one before it twice (ids: the outer
    // array 0, the element 1, the first pair 2), the first a pair of nulls.
    let doubling = |levels: u64| {
        let mut w = W::header()
            .dense(1)
            .dense(levels)
            .dense(2)
            .b(b"00")
            .end_dense(0, 2);
        for level in 0..levels - 1 {
            w = w
                .dense(2)
                .b(b"^")
                .varint(level + 2)
                .b(b"^")
                .varint(level + 2)
                .end_dense(0, 2);
        }
        w.end_dense(0, levels)
    };
    // 2^22 nulls at the last of 22 levels, past the budget, in a few hundred bytes.
    assert_eq!(one(doubling(22)), Some(Element::Walk));
    // Within the budget, the same sharing is expanded in full.
    let Some(Element::Json(Json::Array(levels))) = one(doubling(4)) else {
        panic!("an array")
    };
    assert_eq!(
        levels[3],
        json!([
            [[[null, null], [null, null]], [[null, null], [null, null]]],
            [[[null, null], [null, null]], [[null, null], [null, null]]]
        ])
    );
}

#[test]
fn depth_limit_stops_the_reader() {
    let nested = |depth: usize| {
        let mut w = W::header().dense(2);
        for _ in 0..depth {
            w = w.dense(1);
        }
        w = w.b(b"0");
        for _ in 0..depth {
            w = w.end_dense(0, 1);
        }
        w.b(b"0").end_dense(0, 2)
    };
    // An element at depth 0 holding 128 arrays: the innermost is at depth 127.
    let out = elements(&nested(128).0);
    assert!(matches!(out[0], Some(Element::Json(_))));
    assert_eq!(out[1], Some(Element::Json(Json::Null)));
    let out = elements(&nested(129).0);
    assert_eq!(out[0], None);
    assert_eq!(out[1], None);
}

#[test]
fn unknown_values_stop_the_reader() {
    // [{"d": new Date(0)}, "after"]
    let w = W::header()
        .dense(2)
        .b(b"o")
        .s("d")
        .b(b"D")
        .double(0.0)
        .b(b"{")
        .varint(1)
        .s("after")
        .end_dense(0, 2);
    assert_eq!(elements(&w.0), vec![None, None, None]);
    // Truncated bytes and a wrong property count stop it too.
    let w = W::header().dense(1).b(b"o").s("k");
    assert_eq!(elements(&w.0), vec![None, None]);
    let w = W::header()
        .dense(1)
        .b(b"o")
        .b(b"{")
        .varint(1)
        .end_dense(0, 1);
    assert_eq!(elements(&w.0), vec![None, None]);
    // Another version, or not an array, is not read at all.
    assert!(skim(&[0xFF, 14, b'A', 0]).is_none());
    assert!(skim(&W::header().b(b"o").b(b"{").varint(0).0).is_none());
}

#[test]
fn strings_convert_as_char_by_char_decoding_does() {
    // A small xorshift: every byte value and every UTF-16 unit class, including surrogates
    // paired, lone, reversed and at either end.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..3000 {
        let len = (next() % 40) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| match next() % 4 {
                0 => (next() % 0x80) as u8,
                _ => next() as u8,
            })
            .collect();
        let expected: String = bytes.iter().map(|&b| char::from(b)).collect();
        assert_eq!(latin1_text(&bytes), Some(expected), "round {round}");
        let units: Vec<u16> = (0..len)
            .map(|_| match next() % 6 {
                0 | 1 => (next() % 0x80) as u16,
                2 => 0xD800 + (next() % 0x400) as u16,
                3 => 0xDC00 + (next() % 0x400) as u16,
                4 => 0x80 + (next() % 0x780) as u16,
                _ => next() as u16,
            })
            .collect();
        let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
        let expected: String = char::decode_utf16(units.iter().copied())
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect();
        assert_eq!(utf16_text(&bytes), Some(expected), "round {round}");
    }
}

#[test]
fn holey_arrays_are_read_index_by_index() {
    let sparse = |len: u64| W::header().b(b"a").varint(len);
    let end_sparse = |w: W, props: u64, len: u64| w.b(b"@").varint(props).varint(len);
    // [{"role": "user"}, "x"], holey but full.
    let w = sparse(2)
        .int(0)
        .b(b"o")
        .s("role")
        .s("user")
        .b(b"{")
        .varint(1)
        .int(1)
        .s("x");
    let w = end_sparse(w, 2, 2);
    assert_eq!(
        elements(&w.0),
        vec![
            Some(Element::Json(json!({"role": "user"}))),
            Some(Element::Json(json!("x"))),
            None
        ]
    );
    // ["a", <hole>, "c"]: the skim stops at the hole.
    let w = end_sparse(sparse(3).int(0).s("a").int(2).s("c"), 2, 3);
    assert_eq!(
        elements(&w.0),
        vec![Some(Element::Json(json!("a"))), None, None, None]
    );
    // A named property where element 0 should be.
    let w = end_sparse(sparse(1).s("k").s("v").int(0).s("a"), 2, 1);
    assert_eq!(elements(&w.0), vec![None, None]);
}

#[test]
fn the_skim_notes_the_format_keys() {
    // [{"messages": [], "prompt": undefined}, {"prompt": [], "completion": {}}, "text"]
    let w = W::header()
        .dense(3)
        .b(b"o")
        .s("messages")
        .dense(0)
        .end_dense(0, 0)
        .s("prompt")
        .b(b"_")
        .b(b"{")
        .varint(2)
        .b(b"o")
        .utf16(&"prompt".encode_utf16().collect::<Vec<_>>())
        .dense(0)
        .end_dense(0, 0)
        .s("completion")
        .b(b"o{")
        .varint(0)
        .b(b"{")
        .varint(2)
        .s("text")
        .end_dense(0, 3);
    let skim = skim(&w.0).unwrap();
    let keys: Vec<Vec<&str>> = skim
        .elements
        .iter()
        .map(|e| match e {
            Skimmed::Wire(w) => FORMAT_KEYS.into_iter().filter(|k| w.has_key(k)).collect(),
            Skimmed::Walk => panic!("read from the wire"),
        })
        .collect();
    assert_eq!(
        keys,
        [vec!["messages"], vec!["prompt", "completion"], vec![]]
    );
}
