//! A cache directory as a whole: its entries listed with their descriptions, and pruned by age
//! and size (with damaged and leftover files).

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};

use super::entry::{parse_header, ENTRY_EXTENSION, HEADER_LEN, TEMP_EXTENSION};
/// Temporary files of writers that died are removed by `prune` once this old.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// One file of a cache directory, as `sft-dataset cache ls` shows it.
#[derive(Debug, Clone)]
pub struct ListedEntry {
    pub file: PathBuf,
    pub bytes: u64,
    /// Last written or used.
    pub used: SystemTime,
    /// The description of an entry whose header reads well.
    pub description: Option<Json>,
    /// Why the file is not an entry (a bad header, or a writer's temporary file).
    pub problem: Option<String>,
}

/// The entries and stray files of `dir`, least recently used first. Only headers are read; a
/// load checks the whole entry.
pub fn list(dir: &Path) -> io::Result<Vec<ListedEntry>> {
    let mut listed = Vec::new();
    for item in fs::read_dir(dir)? {
        let item = item?;
        let path = item.path();
        let name = item.file_name().to_string_lossy().to_string();
        let is_entry = name.ends_with(&format!(".{ENTRY_EXTENSION}"));
        let is_temp = name.starts_with('.') && name.ends_with(&format!(".{TEMP_EXTENSION}"));
        if !(is_entry || is_temp) {
            continue;
        }
        let Ok(meta) = item.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let (description, problem) = if is_temp {
            (None, Some("an unfinished write".to_string()))
        } else {
            match read_description(&path) {
                Ok(d) => (Some(d), None),
                Err(e) => (None, Some(e)),
            }
        };
        listed.push(ListedEntry {
            file: path,
            bytes: meta.len(),
            used: meta.modified().unwrap_or(UNIX_EPOCH),
            description,
            problem,
        });
    }
    listed.sort_by_key(|e| e.used);
    Ok(listed)
}

fn read_description(path: &Path) -> Result<Json, String> {
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let mut head = vec![0u8; HEADER_LEN.min(len as usize)];
    file.read_exact(&mut head).map_err(|e| e.to_string())?;
    let header = parse_header(&head)?;
    let r = header.description;
    if header.len != len || r.end > len || r.start < HEADER_LEN as u64 || r.end < r.start {
        return Err(format!(
            "truncated: {len} bytes, the header says {}",
            header.len
        ));
    }
    let mut text = vec![0u8; (r.end - r.start) as usize];
    file.seek(SeekFrom::Start(r.start))
        .and_then(|_| file.read_exact(&mut text))
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&text).map_err(|e| format!("description: {e}"))
}

/// What `prune` removes: entries unused for longer than `max_age`, then the least recently used
/// ones until the directory holds at most `max_bytes`. Files that are not entries and
/// writers' temporary files older than an hour always go.
#[derive(Debug, Clone, Default)]
pub struct PruneLimits {
    pub max_age: Option<Duration>,
    pub max_bytes: Option<u64>,
}

/// Removes what `limits` allow; returns the removed files. A file another process removed first
/// is skipped.
pub fn prune(dir: &Path, limits: &PruneLimits, now: SystemTime) -> SftResult<Vec<ListedEntry>> {
    let listed = list(dir).map_err(|e| {
        SftError::new(
            ErrorCode::FileRead,
            format!("cannot list the token cache {}: {e}", dir.display()),
        )
    })?;
    let age = |e: &ListedEntry| now.duration_since(e.used).unwrap_or_default();
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for e in listed {
        let stray = match &e.problem {
            Some(_) if e.file.extension().is_some_and(|x| x == TEMP_EXTENSION) => {
                age(&e) > STALE_TEMP
            }
            Some(_) => true,
            None => false,
        };
        let old = limits.max_age.is_some_and(|max| age(&e) > max);
        if stray || (old && e.problem.is_none()) {
            removed.push(e);
        } else {
            kept.push(e);
        }
    }
    if let Some(max) = limits.max_bytes {
        let mut total: u64 = kept.iter().map(|e| e.bytes).sum();
        // Least recently used first; unfinished writes are someone's current work.
        let mut k = 0;
        while total > max && k < kept.len() {
            if kept[k].problem.is_none() {
                total -= kept[k].bytes;
                removed.push(kept.remove(k));
            } else {
                k += 1;
            }
        }
    }
    let mut done = Vec::new();
    for e in removed {
        match fs::remove_file(&e.file) {
            Ok(()) => done.push(e),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => {
                return Err(SftError::new(
                    ErrorCode::FileRead,
                    format!("cannot remove {}: {err}", e.file.display()),
                ))
            }
        }
    }
    Ok(done)
}
