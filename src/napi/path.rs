//! Path containment for dataset paths. The JS layer turns a failed check into the reference's
//! `PathTraversalError` class.

use std::path::{Path, PathBuf};

use napi_derive::napi;

use super::error::{run_sync, JsResult as Result};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::input::path_security::{
    allowed_root, resolve_and_validate, validate_containment, PathError, PathOptions, DATA_ROOT_ENV,
};

/// Where dataset files may be read from.
#[napi(object)]
pub struct PathValidationOptions {
    /// Root directory dataset paths must stay within. Default: `MLX_NODE_DATA_ROOT`, else the
    /// current directory.
    pub allowed_root: Option<String>,
    /// `false` also rejects paths whose real location (symlinks resolved) is outside the real
    /// root. Default: symlinks are not examined, as in the reference.
    pub follow_symlinks: Option<bool>,
}

/// The outcome of a containment check: the resolved path, or the traversal message.
#[napi(object)]
pub struct PathCheck {
    pub resolved_path: String,
    pub error: Option<String>,
}

pub fn path_options(allowed: Option<String>, follow_symlinks: Option<bool>) -> PathOptions {
    PathOptions {
        allowed_root: allowed,
        follow_symlinks,
    }
}

fn cwd() -> SftResult<PathBuf> {
    std::env::current_dir().map_err(|e| {
        SftError::new(
            ErrorCode::FileRead,
            format!("cannot read the current directory: {e}"),
        )
    })
}

pub fn root_for(opts: &PathOptions) -> SftResult<PathBuf> {
    let env_value = std::env::var(DATA_ROOT_ENV).ok();
    Ok(allowed_root(opts, env_value.as_deref(), &cwd()?))
}

fn outcome(resolved: String, result: std::result::Result<(), PathError>) -> PathCheck {
    PathCheck {
        resolved_path: resolved,
        error: result.err().map(|e| e.message),
    }
}

/// Resolves `path` against the allowed root and checks containment, for `loadSFTDataset`.
pub fn resolve_dataset_path(path: &str, opts: &PathOptions) -> SftResult<PathBuf> {
    let root = root_for(opts)?;
    resolve_and_validate(path, &root, &cwd()?, opts)
        .map_err(|e| SftError::new(ErrorCode::PathTraversal, e.message))
}

#[napi(js_name = "getAllowedRoot")]
pub fn get_allowed_root(options: Option<PathValidationOptions>) -> Result<String> {
    run_sync(|| {
        let o = options.map_or_else(PathOptions::default, |o| {
            path_options(o.allowed_root, o.follow_symlinks)
        });
        Ok(root_for(&o)?.display().to_string())
    })
}

/// The check behind `validatePathContainment`.
#[napi]
pub fn check_path_containment(
    resolved_path: String,
    allowed_root: String,
    follow_symlinks: Option<bool>,
) -> Result<PathCheck> {
    run_sync(|| {
        let opts = path_options(None, follow_symlinks);
        let result = validate_containment(
            Path::new(&resolved_path),
            Path::new(&allowed_root),
            &cwd()?,
            &opts,
        );
        Ok(outcome(resolved_path, result))
    })
}

/// The check behind `resolveAndValidatePath`.
#[napi]
pub fn check_resolved_path(
    user_path: String,
    allowed_root: String,
    follow_symlinks: Option<bool>,
) -> Result<PathCheck> {
    run_sync(|| {
        let opts = path_options(None, follow_symlinks);
        let root = Path::new(&allowed_root);
        match resolve_and_validate(&user_path, root, &cwd()?, &opts) {
            Ok(p) => Ok(outcome(p.display().to_string(), Ok(()))),
            Err(e) => Ok(PathCheck {
                resolved_path: e.resolved_path.display().to_string(),
                error: Some(e.message),
            }),
        }
    })
}
