//! Typed arrays handed to JS in memory that V8 owns.
//!
//! napi's `Int32Array::new(vec)` lends the vector to JS as an external buffer that a finalizer
//! frees after a garbage collection. A batch is read by the trainer and dropped at once, so in an
//! epoch of cached rows those finalizers, and the pages freed and faulted in again behind them,
//! cost more than the copy itself. `Owned*` copies the vector into a plain `ArrayBuffer` instead:
//! one `memcpy`, no finalizer, memory that V8 recycles like any other.

use std::mem::{self, MaybeUninit};
use std::ptr;

use napi::bindgen_prelude::{ToNapiValue, TypeName, ValueType};
use napi::sys;

/// Elements that cross as a typed array of their own kind.
pub trait Element: Copy {
    const KIND: sys::napi_typedarray_type;
}

impl Element for i32 {
    const KIND: sys::napi_typedarray_type = sys::TypedarrayType::int32_array;
}
impl Element for u32 {
    const KIND: sys::napi_typedarray_type = sys::TypedarrayType::uint32_array;
}
impl Element for f32 {
    const KIND: sys::napi_typedarray_type = sys::TypedarrayType::float32_array;
}

/// A vector that becomes a typed array (`Int32Array`, `Uint32Array`, `Float32Array`) backed by
/// a V8-allocated `ArrayBuffer`.
pub struct Owned<T: Element>(pub Vec<T>);

pub type OwnedI32 = Owned<i32>;
pub type OwnedU32 = Owned<u32>;
pub type OwnedF32 = Owned<f32>;

impl<T: Element> TypeName for Owned<T> {
    fn type_name() -> &'static str {
        "TypedArray"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            napi::Status::from(status),
            format!("{what} failed"),
        ))
    }
}

impl<T: Element> ToNapiValue for Owned<T> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        // SAFETY: `env` is the live environment of the current call (the caller's contract);
        // the cells are written whole here, before JS can see the array.
        unsafe {
            let (array, cells) = uninit_array::<T>(env, val.0.len())?;
            ptr::copy_nonoverlapping(val.0.as_ptr(), cells.as_mut_ptr().cast::<T>(), val.0.len());
            Ok(array)
        }
    }
}

/// Vectors that become one typed array, one after another: the parts are copied straight into
/// V8's memory, never joined first.
pub struct OwnedParts<T: Element>(pub Vec<Vec<T>>);

impl<T: Element> TypeName for OwnedParts<T> {
    fn type_name() -> &'static str {
        "TypedArray"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl<T: Element> ToNapiValue for OwnedParts<T> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let len = val.0.iter().map(Vec::len).sum();
        // SAFETY: `env` is the live environment of the current call (the caller's contract);
        // the parts fill the cells whole, one after another, before JS can see the array.
        unsafe {
            let (array, cells) = uninit_array::<T>(env, len)?;
            let mut at = 0;
            for part in &val.0 {
                ptr::copy_nonoverlapping(
                    part.as_ptr(),
                    cells[at..].as_mut_ptr().cast::<T>(),
                    part.len(),
                );
                at += part.len();
            }
            Ok(array)
        }
    }
}

/// A typed array of `len` elements over a new `ArrayBuffer`, and its cells to write. The
/// buffer comes zero-filled; a Node `Buffer` skips that fill but costs two more JS objects and
/// napi calls, and measured 10-20 % slower per batch of 8 (about 1 µs of 6-11 µs, alpaca and
/// glaive rows, the two builds alternating in one process).
///
/// # Safety
/// `env` must be the live environment of the current call. Every cell must be written before
/// the array reaches JS, and the cells must not be used after the call returns to JS (V8 owns
/// that memory; it does not move while the array is alive, and the handle keeps it alive until
/// then).
pub unsafe fn uninit_array<'c, T: Element>(
    env: sys::napi_env,
    len: usize,
) -> napi::Result<(sys::napi_value, &'c mut [MaybeUninit<T>])> {
    let bytes = len * mem::size_of::<T>();
    let mut data = ptr::null_mut();
    let mut buffer = ptr::null_mut();
    // SAFETY: the caller's contract gives a live `env`; the out-pointers are locals.
    unsafe {
        check(
            sys::napi_create_arraybuffer(env, bytes, &mut data, &mut buffer),
            "napi_create_arraybuffer",
        )?;
    }
    if len > 0 && !(data as usize).is_multiple_of(mem::align_of::<T>()) {
        return Err(napi::Error::new(
            napi::Status::GenericFailure,
            "a new ArrayBuffer is not aligned for its elements",
        ));
    }
    let mut array = ptr::null_mut();
    // SAFETY: as above; `buffer` is the new ArrayBuffer.
    unsafe {
        check(
            sys::napi_create_typedarray(env, T::KIND, len, buffer, 0, &mut array),
            "napi_create_typedarray",
        )?;
    }
    let cells = if len == 0 {
        &mut [][..]
    } else {
        // SAFETY: `data` points to `bytes` bytes that only this call writes until it returns
        // to JS, aligned for `T` (checked above); `MaybeUninit` makes no claim on their
        // contents.
        unsafe { std::slice::from_raw_parts_mut(data.cast::<MaybeUninit<T>>(), len) }
    };
    Ok((array, cells))
}

/// A batch array: a vector still to copy into a typed array, or a typed array already made and
/// written (`uninit_array`) during the current call.
pub enum BatchArray<T: Element> {
    Copy(Vec<T>),
    Made(sys::napi_value),
}

impl<T: Element> From<Vec<T>> for BatchArray<T> {
    fn from(v: Vec<T>) -> Self {
        BatchArray::Copy(v)
    }
}

impl<T: Element> TypeName for BatchArray<T> {
    fn type_name() -> &'static str {
        "TypedArray"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl<T: Element> ToNapiValue for BatchArray<T> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        match val {
            // SAFETY: the caller's contract (a live `env`) is passed on.
            BatchArray::Copy(v) => unsafe { Owned::to_napi_value(env, Owned(v)) },
            BatchArray::Made(array) => Ok(array),
        }
    }
}
