//! Typed arrays handed to JS in memory that V8 owns.
//!
//! napi's `Int32Array::new(vec)` lends the vector to JS as an external buffer that a finalizer
//! frees after a garbage collection. A batch is read by the trainer and dropped at once, so in an
//! epoch of cached rows those finalizers, and the pages freed and faulted in again behind them,
//! cost more than the copy itself. `Owned*` copies the vector into a plain `ArrayBuffer` instead:
//! one `memcpy`, no finalizer, memory that V8 recycles like any other.

use std::{mem, ptr};

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
        let bytes = mem::size_of_val(val.0.as_slice());
        let mut data = ptr::null_mut();
        let mut node_buffer = ptr::null_mut();
        let mut buffer = ptr::null_mut();
        let mut offset = 0;
        // SAFETY: `env` is the live environment of the current call. A Node `Buffer` of `bytes`
        // bytes is created uninitialized (no zero fill, unlike `napi_create_arraybuffer`) and
        // is overwritten whole here before JS can see it; its `ArrayBuffer` then backs the
        // typed array.
        unsafe {
            check(
                sys::napi_create_buffer(env, bytes, &mut data, &mut node_buffer),
                "napi_create_buffer",
            )?;
            if bytes > 0 {
                ptr::copy_nonoverlapping(val.0.as_ptr().cast::<u8>(), data.cast::<u8>(), bytes);
            }
            check(
                sys::napi_get_typedarray_info(
                    env,
                    node_buffer,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                    &mut buffer,
                    &mut offset,
                ),
                "napi_get_typedarray_info",
            )?;
            if offset % mem::align_of::<T>() != 0 {
                return Err(napi::Error::new(
                    napi::Status::GenericFailure,
                    "a new Buffer is not aligned for its elements",
                ));
            }
            let mut array = ptr::null_mut();
            check(
                sys::napi_create_typedarray(env, T::KIND, val.0.len(), buffer, offset, &mut array),
                "napi_create_typedarray",
            )?;
            Ok(array)
        }
    }
}
