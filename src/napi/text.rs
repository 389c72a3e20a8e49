//! JS string arguments read into UTF-8 in one pass.
//!
//! napi's `String` argument asks V8 for the UTF-8 length (a pass over the string), zero-fills a
//! buffer of that size, then has V8 write the UTF-8 (a second pass). On a tokenizer call per
//! text those passes are a visible share of the call. These types size their buffer from the
//! string's UTF-16 length, which V8 knows without a pass (three bytes per unit at most: a
//! surrogate pair is two units and four bytes; a lone surrogate becomes U+FFFD, three bytes, as
//! with `String`), and have V8 write into it once. The text, and the error for a value that is
//! not a string (or an array of them), are the same as `String` (`Vec<String>`) gives.

use std::ptr;

use napi::bindgen_prelude::{FromNapiValue, TypeName, ValueType};
use napi::sys;

/// The length of `value` in UTF-16 units, which V8 knows without a pass; `None` when `value` is
/// not a string.
///
/// # Safety
/// `env` and `value` must be live for the current call.
unsafe fn utf16_len(env: sys::napi_env, value: sys::napi_value) -> Option<usize> {
    let mut units = 0usize;
    // SAFETY: a null buffer asks for the length in UTF-16 units only.
    let status =
        unsafe { sys::napi_get_value_string_utf16(env, value, ptr::null_mut(), 0, &mut units) };
    (status == sys::Status::napi_ok).then_some(units)
}

/// Appends the UTF-8 of `value`, a string of `units` UTF-16 units, to `bytes`; `None` when V8
/// wrote nothing usable, `bytes` unchanged.
///
/// # Safety
/// `env` and `value` must be live for the current call, and `units` must be `utf16_len(value)`.
unsafe fn append_utf8(
    env: sys::napi_env,
    value: sys::napi_value,
    units: usize,
    bytes: &mut Vec<u8>,
) -> Option<()> {
    let room = units * 3 + 1;
    bytes.reserve(room);
    let at = bytes.len();
    let mut written = 0usize;
    // SAFETY: V8 writes at most `room` bytes (the UTF-8 and a NUL) into the vector's spare
    // capacity, which `reserve` made at least that large, and says how many bytes of UTF-8 it
    // wrote.
    let status = unsafe {
        sys::napi_get_value_string_utf8(
            env,
            value,
            bytes.as_mut_ptr().add(at).cast(),
            room,
            &mut written,
        )
    };
    if status != sys::Status::napi_ok || written >= room {
        return None;
    }
    // SAFETY: V8 initialized the `written` bytes after `at`, UTF-8 (lone surrogates replaced)
    // that ends on a char boundary.
    unsafe { bytes.set_len(at + written) };
    Some(())
}

/// A string argument as UTF-8. The buffer keeps its spare capacity: `Text` is for one string
/// that lives for one call.
pub struct Text(pub String);

impl TypeName for Text {
    fn type_name() -> &'static str {
        "string"
    }

    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl FromNapiValue for Text {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        let mut bytes = Vec::new();
        let read = unsafe { utf16_len(env, value) }
            .and_then(|units| unsafe { append_utf8(env, value, units, &mut bytes) });
        match read {
            // SAFETY: `append_utf8` wrote UTF-8 only.
            Some(()) => Ok(Text(unsafe { String::from_utf8_unchecked(bytes) })),
            // Not a string: napi's own conversion fails with its own error.
            None => unsafe { String::from_napi_value(env, value) }.map(Text),
        }
    }
}

/// An array of strings as UTF-8, one after another in blocks of about a megabyte: no allocation
/// per string, and no block is moved or copied as the array is read (a single buffer grown by
/// doubling copies what it holds each time, on the JS thread).
pub struct Texts {
    blocks: Vec<Vec<u8>>,
    /// Each string's block and byte range in it.
    spans: Vec<(usize, usize, usize)>,
}

/// Bytes a new block has room for, unless one string needs more: the first block of a call
/// holds `FIRST_BLOCK`, each next one twice its predecessor, up to `BLOCK`, so that a call of a
/// few short texts takes a few pages, not a megabyte.
const FIRST_BLOCK: usize = 16 << 10;
const BLOCK: usize = 1 << 20;

impl Texts {
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The `k`-th string.
    pub fn get(&self, k: usize) -> &str {
        let (block, start, end) = self.spans[k];
        // SAFETY: every block holds whole strings' UTF-8 only (`append_utf8` and `From` write
        // nothing else), and each span is one of them.
        unsafe { std::str::from_utf8_unchecked(&self.blocks[block][start..end]) }
    }
}

impl TypeName for Texts {
    fn type_name() -> &'static str {
        "Array<string>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl FromNapiValue for Texts {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        // SAFETY (every call below): `env` and `value` are live for the current call, and the
        // out-pointers are locals.
        let fallback = || unsafe { Vec::<String>::from_napi_value(env, value) }.map(Texts::from);
        let mut is_array = false;
        let mut len = 0u32;
        if unsafe { sys::napi_is_array(env, value, &mut is_array) } != sys::Status::napi_ok
            || !is_array
            || unsafe { sys::napi_get_array_length(env, value, &mut len) } != sys::Status::napi_ok
        {
            return fallback();
        }
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut spans = Vec::with_capacity(len as usize);
        for k in 0..len {
            let mut element = ptr::null_mut();
            if unsafe { sys::napi_get_element(env, value, k, &mut element) } != sys::Status::napi_ok
            {
                return fallback();
            }
            // An element that is not a string: napi's conversion names it in its error.
            let Some(units) = (unsafe { utf16_len(env, element) }) else {
                return fallback();
            };
            let room = units * 3 + 1;
            if blocks.last().is_none_or(|b| b.capacity() - b.len() < room) {
                let size = blocks
                    .last()
                    .map_or(FIRST_BLOCK, |b| (b.capacity() * 2).min(BLOCK));
                blocks.push(Vec::with_capacity(room.max(size)));
            }
            let current = blocks.len() - 1;
            let bytes = &mut blocks[current];
            let start = bytes.len();
            if unsafe { append_utf8(env, element, units, bytes) }.is_none() {
                return fallback();
            }
            spans.push((current, start, bytes.len()));
        }
        Ok(Texts { blocks, spans })
    }
}

impl From<Vec<String>> for Texts {
    fn from(strings: Vec<String>) -> Self {
        let mut text = Vec::with_capacity(strings.iter().map(String::len).sum());
        let spans = strings
            .iter()
            .map(|s| {
                let start = text.len();
                text.extend_from_slice(s.as_bytes());
                (0, start, text.len())
            })
            .collect();
        Texts {
            blocks: vec![text],
            spans,
        }
    }
}
