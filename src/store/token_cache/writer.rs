//! An entry's file as it is written: block by block while a load packs its rows (the rows beyond
//! its memory budget), or all at once from rows in memory (`write_entry`); then the description,
//! the block table and the header, which holds the checksum of everything after it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::Mmap;
use serde_json::Value as Json;

use crate::dataset::Dataset;
use crate::error::SftResult;
use crate::rows::packed_rows::{PackedRows, Plain};
use crate::rows::rare_rows::{decode_rare, RareRows};
use crate::rows::TokenizedRow;

use super::entry::{
    mapped_rows, TableEntry, BYTE_ORDER_MARK, HEADER_CHECKED, HEADER_LEN, MAGIC, TEMP_EXTENSION,
};
use super::key::CacheKey;
use super::ROW_FORMAT_VERSION;

pub(super) static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name in `dir` for the entry of `key` while it is written: hidden, with the writer's process
/// id, ending in `.tmp` (never read as an entry; `prune` removes it once stale).
pub(super) fn temp_name(dir: &Path, key: &CacheKey) -> PathBuf {
    dir.join(format!(
        ".{}.{}.{}.{TEMP_EXTENSION}",
        key.hex(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Writes an entry's file front to back, counting and hashing what it writes, and reads rows
/// back from the blocks written so far.
pub struct EntryWriter {
    out: BufWriter<File>,
    /// Where the next byte goes.
    pos: u64,
    hasher: blake3::Hasher,
    table: Vec<TableEntry>,
    /// The first row of each block written.
    firsts: Vec<usize>,
    rows: usize,
    /// The last block a row was read back from, and its rare rows.
    last_rare: Option<(usize, RareRows)>,
}

impl EntryWriter {
    /// Starts an entry in `file` (empty, opened for reading and writing): the header's place.
    pub fn new(file: File) -> io::Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        // The header's bytes are hashed separately, at the end.
        out.write_all(&[0u8; HEADER_LEN])?;
        Ok(EntryWriter {
            out,
            pos: HEADER_LEN as u64,
            hasher: blake3::Hasher::new(),
            table: Vec::new(),
            firsts: Vec::new(),
            rows: 0,
            last_rare: None,
        })
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

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
        // packed_rows): plain data without padding. Entries are only used on little-endian
        // targets, so the in-memory bytes are the file's little-endian encoding.
        let bytes = unsafe {
            std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), std::mem::size_of_val(items))
        };
        self.put(bytes)?;
        Ok([at, items.len() as u64])
    }

    /// Appends every block of `rows` (the next rows in example order).
    pub fn push(&mut self, rows: &PackedRows) -> io::Result<()> {
        for parts in rows.block_parts() {
            let parts = parts.map_err(|e| io::Error::other(e.message))?;
            let mut entry = [0u64; 10];
            entry[0..2].copy_from_slice(&self.array(parts.ids)?);
            entry[2..4].copy_from_slice(&self.array(parts.id_ends)?);
            entry[4..6].copy_from_slice(&self.array(parts.spans)?);
            entry[6..8].copy_from_slice(&self.array(parts.span_ends)?);
            entry[8..10].copy_from_slice(&self.array(&parts.rare[..])?);
            self.table.push(entry);
            self.firsts.push(self.rows);
            self.rows += parts.id_ends.len();
        }
        Ok(())
    }

    /// `len` bytes at `offset` of what was written, read back from the file.
    fn read_at(&mut self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        self.out.flush()?;
        let len = usize::try_from(len).map_err(io::Error::other)?;
        let mut bytes = vec![0u8; len];
        let file = self.out.get_mut();
        file.seek(SeekFrom::Start(offset))?;
        let read = file.read_exact(&mut bytes);
        // Writing goes on where it stopped, whether the read worked or not.
        file.seek(SeekFrom::Start(self.pos))?;
        read.map(|()| bytes)
    }

    /// Element `k` of the u32 array at `offset`.
    fn u32_at(&mut self, offset: u64, k: usize) -> io::Result<u32> {
        let b = self.read_at(offset + 4 * k as u64, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The range of row `local`'s items, from the ends array at `offset`.
    fn range_of(&mut self, ends: u64, local: usize) -> io::Result<Range<u64>> {
        let start = match local {
            0 => 0,
            _ => self.u32_at(ends, local - 1)?,
        };
        Ok(start as u64..self.u32_at(ends, local)? as u64)
    }

    /// Row `index` of those written (below `rows()`), read back from the file: a copy, as
    /// `PackedRows::get(index).to_row()` would give.
    pub fn read_row(&mut self, index: usize) -> io::Result<SftResult<TokenizedRow>> {
        let b = self.firsts.partition_point(|&first| first <= index) - 1;
        let local = index - self.firsts[b];
        let at = self.table[b];
        let ids = self.range_of(at[2], local)?;
        let spans = self.range_of(at[6], local)?;
        let id_bytes = self.read_at(at[0] + 4 * ids.start, 4 * (ids.end - ids.start))?;
        let span_bytes = self.read_at(at[4] + 8 * spans.start, 8 * (spans.end - spans.start))?;
        let words = |bytes: &[u8]| -> Vec<u32> {
            bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect()
        };
        let ids: Box<[u32]> = words(&id_bytes).into();
        let spans: Box<[Range<u32>]> = words(&span_bytes)
            .chunks_exact(2)
            .map(|pair| pair[0]..pair[1])
            .collect();
        if self.last_rare.as_ref().map(|(block, _)| *block) != Some(b) {
            let bytes = self.read_at(at[8], at[9])?;
            let rare = decode_rare(&bytes).map_err(io::Error::other)?;
            self.last_rare = Some((b, rare));
        }
        let Some((_, rare)) = &self.last_rare else {
            return Err(io::Error::other("rare rows not read"));
        };
        Ok(rare.row(local as u32, ids, spans))
    }

    /// Writes the description, the block table and the header (with `key` and the checksum),
    /// and returns the file, complete but not synced.
    pub fn finish(mut self, key: &[u8; 32], description: &Json) -> io::Result<WrittenEntry> {
        let text = description.to_string();
        let description_at = self.pos;
        self.put(text.as_bytes())?;
        self.align()?;
        let table_at = self.pos;
        self.put(&(self.table.len() as u64).to_le_bytes())?;
        for v in self.table.clone().iter().flatten() {
            self.put(&v.to_le_bytes())?;
        }
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&ROW_FORMAT_VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&BYTE_ORDER_MARK.to_le_bytes());
        header[16..48].copy_from_slice(key);
        header[48..56].copy_from_slice(&self.pos.to_le_bytes());
        header[56..64].copy_from_slice(&table_at.to_le_bytes());
        header[64..72].copy_from_slice(&description_at.to_le_bytes());
        header[72..80].copy_from_slice(&(text.len() as u64).to_le_bytes());
        self.hasher.update(&header[..HEADER_CHECKED]);
        header[HEADER_CHECKED..HEADER_CHECKED + 32]
            .copy_from_slice(self.hasher.finalize().as_bytes());
        let mut file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header)?;
        Ok(WrittenEntry {
            file,
            table: self.table,
        })
    }
}

/// A complete entry's file and its block table.
pub struct WrittenEntry {
    pub file: File,
    table: Vec<TableEntry>,
}

impl WrittenEntry {
    /// The rows, read in place from a mapping of the file.
    pub fn map(&self) -> io::Result<PackedRows> {
        // SAFETY: the file is complete and no one writes it again: a temporary file of the
        // load's own, or an entry's, which is only ever replaced by renaming another file over
        // its name (see `open_entry`).
        let map = Arc::new(unsafe { Mmap::map(&self.file) }?);
        mapped_rows(&map, &self.table).map_err(io::Error::other)
    }
}

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
    let temp = temp_name(dir, key);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&temp)?;
    let written = EntryWriter::new(file)
        .and_then(|mut writer| {
            writer.push(rows)?;
            writer.finish(&key.digest, description)
        })
        .and_then(|entry| publish(&entry.file, &temp, &dir.join(key.file_name())));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Syncs a complete entry's `file`, written at `temp`, and renames it to `name`; the rename
/// itself survives a crash once the directory is synced too.
pub(super) fn publish(file: &File, temp: &Path, name: &Path) -> io::Result<()> {
    file.sync_all()?;
    fs::rename(temp, name)?;
    if let Some(dir) = name.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
// One trained range per row is the common case, not a mistaken array of a range.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::error::{ErrorCode, SftError};
    use crate::rows::packed_rows::BlockBound;
    use crate::rows::RowStats;

    fn rows() -> PackedRows {
        let mut built: Vec<SftResult<TokenizedRow>> = (0..40u32)
            .map(|i| {
                if i == 30 {
                    return Err(SftError::new(ErrorCode::TemplateRender, "row 30"));
                }
                let ids: Vec<u32> = (0..i % 7 + 1).map(|k| i * 10 + k).collect();
                let n = ids.len() as u32;
                let row = TokenizedRow::new(ids.into(), [0..n].into(), None, RowStats::NONE);
                Ok(row)
            })
            .collect();
        let mut packed = PackedRows::default();
        packed.push_blocks(&mut built, BlockBound { ids: 40, rows: 10 }, true);
        packed
    }

    #[test]
    fn a_written_block_with_bad_offsets_fails_its_own_rows_when_first_read() {
        let dir = std::env::temp_dir().join(format!("sft-writer-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rows.sftrows");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        let source = rows();
        let mut writer = EntryWriter::new(file).unwrap();
        writer.push(&source).unwrap();
        for i in [0, 9, 10, 29, 31, 39] {
            let back = writer.read_row(i).unwrap().unwrap();
            assert_eq!(back, source.get(i).unwrap().to_row(), "row {i}");
        }
        assert_eq!(writer.read_row(30).unwrap().unwrap_err().message, "row 30");
        let written = writer.finish(&[0; 32], &serde_json::json!({})).unwrap();
        // The second block's last id end, past its ids.
        let at = written.table[1][2] + 4 * (written.table[1][3] - 1);
        let mut file = &written.file;
        file.seek(SeekFrom::Start(at)).unwrap();
        file.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let mapped = written.map().unwrap();
        assert_eq!(mapped.len(), 40);
        let broken: Vec<usize> = (0..40)
            .filter(|&i| mapped.get(i).is_err_and(|e| e.code == ErrorCode::Internal))
            .collect();
        // Exactly the second block's rows, each with the block's error.
        let (first, last) = (broken[0], broken[broken.len() - 1]);
        assert!(
            first > 0 && last - first + 1 == broken.len() && last < 39,
            "{broken:?}"
        );
        let e = mapped.get(first).unwrap_err();
        assert!(e.message.ends_with("inconsistent offsets"), "{e:?}");
        for i in 0..40 {
            // Outcomes read without ids or ends: those of the broken block too.
            assert_eq!(mapped.outcome(i), source.outcome(i), "row {i}");
            if broken.contains(&i) {
                continue;
            }
            match (mapped.get(i), source.get(i)) {
                (Ok(a), Ok(b)) => assert_eq!(a.to_row(), b.to_row(), "row {i}"),
                (Err(a), Err(b)) => assert_eq!(a, b, "row {i}"),
                (a, b) => panic!("row {i}: {a:?} / {b:?}"),
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
