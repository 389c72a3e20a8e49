//! SftError -> JS Error with a `code` property, and the panic guard every entry point uses.

use std::panic::{catch_unwind, AssertUnwindSafe};

use napi::bindgen_prelude::{FromNapiValue, ToNapiValue, Unknown};
use napi::{Env, JsValue};

use crate::error::{ErrorCode, SftError, SftResult};

/// The error type of synchronous exports: napi turns it into a JS `Error` whose `code` is the
/// string status.
pub type JsError = napi::Error<String>;
pub type JsResult<T> = Result<T, JsError>;

pub fn to_js(e: SftError) -> JsError {
    napi::Error::new(e.code.as_str().to_string(), e.message)
}

/// Runs `f`, turning a panic (a bug, never bad input) into an `INTERNAL` error so that nothing
/// unwinds into Node.
pub fn guard<T>(f: impl FnOnce() -> SftResult<T>) -> SftResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(SftError::new(
                ErrorCode::Internal,
                format!("internal error (please report): {what}"),
            ))
        }
    }
}

/// Converts a JS argument taken as `Unknown` to `T`, with this library's error code when its
/// type is wrong; `what` names the argument, `expected` what it should be.
pub fn typed_arg<T: FromNapiValue>(value: &Unknown, what: &str, expected: &str) -> SftResult<T> {
    let raw = value.value();
    // SAFETY: `raw` is a live value of the current call, and `from_napi_value` checks its type
    // before it reads it.
    unsafe { T::from_napi_value(raw.env, raw.value) }.map_err(|e| arg_error(what, expected, &e))
}

/// The error of an argument that does not convert: `{what} is not {expected}: {why}`.
pub fn arg_error(what: &str, expected: &str, e: &napi::Error) -> SftError {
    SftError::new(
        ErrorCode::InvalidArgument,
        format!("{what} is not {expected}: {}", e.reason),
    )
}

/// `guard` for synchronous exports.
pub fn run_sync<T>(f: impl FnOnce() -> SftResult<T>) -> JsResult<T> {
    guard(f).map_err(to_js)
}

/// A rejection value for async work: a JS `Error` with `code`, thrown as that value so the code
/// survives (napi's own `Status` errors would replace it).
pub fn rejection(env: &Env, e: SftError) -> napi::Error {
    let js = to_js(e);
    // SAFETY: `env` is the live environment of the current callback.
    match unsafe { JsError::to_napi_value(env.raw(), js) } {
        Ok(raw) => match unsafe { Unknown::from_napi_value(env.raw(), raw) } {
            Ok(value) => napi::Error::from(value),
            Err(e) => e,
        },
        Err(e) => napi::Error::new(napi::Status::GenericFailure, e.reason),
    }
}
