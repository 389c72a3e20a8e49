//! Warnings raised while a dataset is made or read: `console.warn` for the reference's, and
//! `process.emitWarning` (type `SFTDataWarning`) for silent data loss.

use napi::bindgen_prelude::{FnArgs, Function, JsObjectValue, Object};
use napi::Env;

use crate::error::{ErrorCode, SftError, SftResult};

/// Prints, through `console.warn`, the warnings of a batch's examples seen for the first time.
pub(crate) fn warn_first_sight(env: &Env, warnings: &[(u32, String)]) -> SftResult<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    warn_all(env, warnings)
        .map_err(|e| SftError::new(ErrorCode::Internal, format!("console.warn failed: {e}")))
}

/// The reference prints its prefix-mismatch warning with `console.warn`; so does the port, once
/// per example.
pub(crate) fn warn_all(env: &Env, warnings: &[(u32, String)]) -> napi::Result<()> {
    print_warnings(env, warnings.iter().map(|(_, w)| w.clone()))
}

pub(crate) fn print_warnings(
    env: &Env,
    warnings: impl Iterator<Item = String>,
) -> napi::Result<()> {
    let global = env.get_global()?;
    let console: Object = global.get_named_property("console")?;
    let warn: Function<String, ()> = console.get_named_property("warn")?;
    for message in warnings {
        warn.apply(console, message)?;
    }
    Ok(())
}

/// The loader's silent-loss warnings, once per dataset and class (a count and the first
/// example, never a line per example), as Node warnings of type `SFTDataWarning` with the
/// class's code: they print once on stderr, `process.on('warning')` sees them, and the
/// reference's `console.warn` output stays exactly as it was.
pub(crate) fn emit_data_warnings(
    env: &Env,
    warnings: Vec<(&'static str, String)>,
) -> napi::Result<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    let global = env.get_global()?;
    let process: Object = global.get_named_property("process")?;
    let emit: Function<FnArgs<(String, String, String)>, ()> =
        process.get_named_property("emitWarning")?;
    for (code, message) in warnings {
        emit.apply(
            process,
            FnArgs::from((message, "SFTDataWarning".to_string(), code.to_string())),
        )?;
    }
    Ok(())
}
