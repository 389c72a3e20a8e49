//! What names an entry: the blake3 key of everything that changes a row (the data's content,
//! the tokenizer, the chat template, the row settings, the library and row-format versions).

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;
use std::time::SystemTime;

use serde_json::{json, Value as Json};

use crate::dataset::DatasetConfig;
use crate::render::RenderAs;
use crate::tokenize::ChatTokenizer;

use super::entry::ENTRY_EXTENSION;
use super::ROW_FORMAT_VERSION;
/// The key of an entry: blake3 of `parts`, which spells out every input of a row.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheKey {
    pub digest: [u8; 32],
    pub parts: Json,
}

impl CacheKey {
    pub fn hex(&self) -> String {
        hex(&self.digest)
    }

    pub fn file_name(&self) -> String {
        format!("{}.{ENTRY_EXTENSION}", self.hex())
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A data file's content hash and the length and modification time it was taken at.
pub struct DataStamp {
    pub digest: [u8; 32],
    pub len: u64,
    modified: Option<SystemTime>,
}

impl DataStamp {
    pub fn of(path: &Path) -> io::Result<Self> {
        let mut file = File::open(path)?;
        let meta = file.metadata()?;
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok(DataStamp {
            digest: *hasher.finalize().as_bytes(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }

    /// Whether the file still has the length and time it had when hashed.
    pub(super) fn unchanged(&self, path: &Path) -> bool {
        fs::metadata(path).is_ok_and(|m| m.len() == self.len && m.modified().ok() == self.modified)
    }
}

/// Every input of a row: the data's content, the tokenizer's vocabulary and rules, the chat
/// template and the named special tokens it sees, the row-changing settings, `limit`, the
/// row-format version and the library version. Options added later that change rows go into
/// `DatasetConfig::row_settings_json` (the one place that lists them).
pub fn cache_key(
    data: &DataStamp,
    tokenizer: &ChatTokenizer,
    config: &DatasetConfig,
    limit: Option<usize>,
) -> CacheKey {
    let c = tokenizer.config();
    let mut parts = json!({
        "rowFormat": ROW_FORMAT_VERSION,
        "library": env!("CARGO_PKG_VERSION"),
        "data": hex(&data.digest),
        "tokenizer": hex(tokenizer.json_digest()),
        "chatTemplate": c.chat_template.as_ref().map(|t| blake3::hash(t.as_bytes()).to_hex().to_string()),
        "toolUseTemplate": c.tool_use_template.as_ref().map(|t| blake3::hash(t.as_bytes()).to_hex().to_string()),
        "specialTokens": {
            "bos": c.bos_token,
            "eos": c.eos_token,
            "pad": c.pad_token,
            "unk": c.unk_token,
            "additional": c.additional_special_tokens,
            "sep": c.sep_token,
            "cls": c.cls_token,
            "mask": c.mask_token,
            "model": c.model_tokens,
        },
        "settings": config.row_settings_json(),
        "limit": limit,
    });
    // What sanitizing treats as a control token also comes from `tokenizer_config.json` fields
    // the key does not hold otherwise (`chat_control_tokens`, `mask_token`, the class).
    if config.sanitize_control_tokens {
        parts["controlTokens"] = json!(tokenizer.control_tokens());
    }
    // The rendering in effect, the tokenizer's own when the config names none; written only
    // when it is not transformers', so that keys made before the setting still match.
    let render_as = config.render_as.unwrap_or(tokenizer.render_as());
    if render_as != RenderAs::Transformers {
        parts["renderAs"] = json!(render_as.name());
    }
    let digest = *blake3::hash(parts.to_string().as_bytes()).as_bytes();
    CacheKey { digest, parts }
}
