//! `listTokenCache` and `pruneTokenCache` over `token_cache`.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use napi_derive::napi;
use serde_json::Value;

use super::error::{run_sync, JsResult as Result};
use crate::error::{js_number, ErrorCode, SftError, SftResult};
use crate::store::token_cache::{list, prune, ListedEntry, PruneLimits};

/// A file of a token cache directory.
#[napi(object)]
pub struct TokenCacheEntry {
    pub file: String,
    pub bytes: f64,
    /// When the entry was last written or loaded, in ms since the epoch.
    pub last_used: f64,
    /// What the entry holds: data file, tokenizer, settings, rows, format, key parts.
    pub description: Option<Value>,
    /// Why the file is not a usable entry (checked from its header only).
    pub problem: Option<String>,
}

/// What `pruneTokenCache` removes.
#[napi(object)]
pub struct PruneTokenCacheOptions {
    /// Remove entries not loaded or written for longer than this many seconds.
    pub max_age_seconds: Option<f64>,
    /// Then remove the least recently used entries until the directory holds at most this many
    /// bytes.
    pub max_bytes: Option<f64>,
}

fn to_js(e: ListedEntry) -> TokenCacheEntry {
    TokenCacheEntry {
        file: e.file.display().to_string(),
        bytes: e.bytes as f64,
        last_used: e
            .used
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_millis() as f64),
        description: e.description,
        problem: e.problem,
    }
}

fn non_negative(name: &str, v: Option<f64>) -> SftResult<Option<f64>> {
    match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(SftError::invalid_argument(format!(
            "{name} must be a finite number >= 0, got {}",
            js_number(x)
        ))),
        other => Ok(other),
    }
}

/// *(addition)* The entries of a token cache directory, least recently used first.
#[napi]
pub fn list_token_cache(dir: String) -> Result<Vec<TokenCacheEntry>> {
    run_sync(|| {
        let listed = list(Path::new(&dir)).map_err(|e| {
            SftError::new(
                ErrorCode::FileRead,
                format!("cannot list the token cache {dir}: {e}"),
            )
        })?;
        Ok(listed.into_iter().map(to_js).collect())
    })
}

/// *(addition)* Removes entries older than `maxAgeSeconds`, then the least recently used ones
/// beyond `maxBytes`, plus files that are not entries and writers' leftovers older than an hour.
/// Returns what it removed.
#[napi]
pub fn prune_token_cache(
    dir: String,
    options: Option<PruneTokenCacheOptions>,
) -> Result<Vec<TokenCacheEntry>> {
    run_sync(|| {
        let (age, bytes) = options.map_or((None, None), |o| (o.max_age_seconds, o.max_bytes));
        let limits = PruneLimits {
            max_age: non_negative("maxAgeSeconds", age)?.map(Duration::from_secs_f64),
            max_bytes: non_negative("maxBytes", bytes)?.map(|b| b as u64),
        };
        let removed = prune(Path::new(&dir), &limits, SystemTime::now())?;
        Ok(removed.into_iter().map(to_js).collect())
    })
}
