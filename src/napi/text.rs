//! A JS string argument read into UTF-8 in one pass.
//!
//! napi's `String` argument asks V8 for the UTF-8 length (a pass over the string), zero-fills a
//! buffer of that size, then has V8 write the UTF-8 (a second pass). On a tokenizer call per
//! text those passes are a visible share of the call. `Text` sizes its buffer from the string's
//! UTF-16 length, which V8 knows without a pass (three bytes per unit at most: a surrogate pair
//! is two units and four bytes; a lone surrogate becomes U+FFFD, three bytes, as with
//! `String`), and has V8 write into it once. The text, and the error for a value that is not a
//! string, are the same as `String` gives. The buffer keeps its spare capacity: `Text` is for
//! one string that lives for one call, not for arrays of them.

use std::ptr;

use napi::bindgen_prelude::{FromNapiValue, TypeName, ValueType};
use napi::sys;

/// A string argument as UTF-8.
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
        let mut units = 0usize;
        // SAFETY: a null buffer asks for the length in UTF-16 units only.
        let status =
            unsafe { sys::napi_get_value_string_utf16(env, value, ptr::null_mut(), 0, &mut units) };
        if status != sys::Status::napi_ok {
            // Not a string: napi's own conversion fails with its own error.
            return unsafe { String::from_napi_value(env, value) }.map(Text);
        }
        let capacity = units * 3 + 1;
        let mut bytes: Vec<u8> = Vec::with_capacity(capacity);
        let mut written = 0usize;
        // SAFETY: V8 writes at most `capacity` bytes (the UTF-8 and a NUL) into the vector's
        // spare capacity and says how many bytes of UTF-8 it wrote.
        let status = unsafe {
            sys::napi_get_value_string_utf8(
                env,
                value,
                bytes.as_mut_ptr().cast(),
                capacity,
                &mut written,
            )
        };
        if status != sys::Status::napi_ok || written >= capacity {
            return unsafe { String::from_napi_value(env, value) }.map(Text);
        }
        // SAFETY: V8 initialized the first `written` bytes, which are UTF-8 (lone surrogates
        // replaced).
        unsafe {
            bytes.set_len(written);
            Ok(Text(String::from_utf8_unchecked(bytes)))
        }
    }
}
