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

/// Appends the UTF-8 of `value` to `bytes`; `None` when `value` is not a string (or V8 wrote
/// nothing usable), `bytes` unchanged.
///
/// # Safety
/// `env` and `value` must be live for the current call.
unsafe fn append_utf8(
    env: sys::napi_env,
    value: sys::napi_value,
    bytes: &mut Vec<u8>,
) -> Option<()> {
    let mut units = 0usize;
    // SAFETY: a null buffer asks for the length in UTF-16 units only.
    let status =
        unsafe { sys::napi_get_value_string_utf16(env, value, ptr::null_mut(), 0, &mut units) };
    if status != sys::Status::napi_ok {
        return None;
    }
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
        match unsafe { append_utf8(env, value, &mut bytes) } {
            // SAFETY: `append_utf8` wrote UTF-8 only.
            Some(()) => Ok(Text(unsafe { String::from_utf8_unchecked(bytes) })),
            // Not a string: napi's own conversion fails with its own error.
            None => unsafe { String::from_napi_value(env, value) }.map(Text),
        }
    }
}

/// An array of strings as UTF-8, one after another in one buffer: no allocation per string,
/// and spare room only after the last.
pub struct Texts {
    text: String,
    /// Where each string ends in `text`.
    ends: Vec<usize>,
}

impl Texts {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `k`-th string.
    pub fn get(&self, k: usize) -> &str {
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.text[start..self.ends[k]]
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
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(len as usize);
        for k in 0..len {
            let mut element = ptr::null_mut();
            if unsafe { sys::napi_get_element(env, value, k, &mut element) } != sys::Status::napi_ok
                || unsafe { append_utf8(env, element, &mut bytes) }.is_none()
            {
                // An element that is not a string: napi's conversion names it in its error.
                return fallback();
            }
            ends.push(bytes.len());
        }
        // SAFETY: `append_utf8` wrote UTF-8 only, each string whole.
        let text = unsafe { String::from_utf8_unchecked(bytes) };
        Ok(Texts { text, ends })
    }
}

impl From<Vec<String>> for Texts {
    fn from(strings: Vec<String>) -> Self {
        let mut text = String::with_capacity(strings.iter().map(String::len).sum());
        let ends = strings
            .iter()
            .map(|s| {
                text.push_str(s);
                text.len()
            })
            .collect();
        Texts { text, ends }
    }
}
