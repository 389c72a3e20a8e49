//! An entry's file: its header, description, row blocks and block table (the layout the module
//! docs describe), written whole under a temporary name and checked whole before it is mapped.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;
use serde_json::Value as Json;

use crate::example::Format;
use crate::rows::packed_rows::{MappedBlock, PackedRows, Plain, Slab};

use super::ROW_FORMAT_VERSION;
/// File name extension of an entry.
pub const ENTRY_EXTENSION: &str = "sftrows";

pub(super) const TEMP_EXTENSION: &str = "tmp";

pub(super) const MAGIC: &[u8; 8] = b"SFTROWS\0";

pub(super) const HEADER_LEN: usize = 128;

/// Bytes of the header the checksum covers (all but the checksum and the padding).
pub(super) const HEADER_CHECKED: usize = 80;

pub(super) const BYTE_ORDER_MARK: u32 = 0x0102_0304;

/// u64 fields of one block table entry.
pub(super) const TABLE_FIELDS: usize = 10;

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
pub(super) struct Header {
    pub(super) key: [u8; 32],
    pub(super) len: u64,
    pub(super) table: u64,
    pub(super) description: Range<u64>,
    pub(super) checksum: [u8; 32],
}

pub(super) fn parse_header(bytes: &[u8]) -> Result<Header, String> {
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

/// One block's entry of the block table: offset and count of its ids, id ends, trained ranges,
/// range ends and rare-row bytes.
pub(super) type TableEntry = [u64; TABLE_FIELDS];

/// The rows of the blocks `table` lists, read in place from `map`.
pub(super) fn mapped_rows(map: &Arc<Mmap>, table: &[TableEntry]) -> Result<PackedRows, String> {
    let mut blocks = Vec::with_capacity(table.len());
    for (b, at) in table.iter().enumerate() {
        let bad = || format!("block {b} lies outside the file");
        blocks.push(MappedBlock {
            ids: slab(map, at[0], at[1]).ok_or_else(bad)?,
            id_ends: slab(map, at[2], at[3]).ok_or_else(bad)?,
            spans: slab(map, at[4], at[5]).ok_or_else(bad)?,
            span_ends: slab(map, at[6], at[7]).ok_or_else(bad)?,
            rare: slab(map, at[8], at[9]).ok_or_else(bad)?,
        });
    }
    PackedRows::from_mapped(blocks)
}

fn slab<T: Plain>(map: &Arc<Mmap>, offset: u64, len: u64) -> Option<Slab<T>> {
    Slab::mapped(
        map,
        usize::try_from(offset).ok()?,
        usize::try_from(len).ok()?,
    )
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
    let entries: Vec<TableEntry> = (0..count)
        .map(|b| {
            std::array::from_fn(|f| u64_at(bytes, table.start + 8 + (b * TABLE_FIELDS + f) * 8))
        })
        .collect();
    let rows = mapped_rows(&map, &entries)?;
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
