//! Rows a load writes to disk as it packs them, once they outgrow its memory budget, in the
//! entry layout: to the token cache entry the load builds (under a temporary name, renamed when
//! the load succeeds), or else to a file of the OS's temporary directory that no name points to
//! once it is open, so that it goes with the dataset and with the process however it ends.
//! Either way the finished file is mapped, as a cache hit maps an entry.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde_json::{json, Value as Json};

use crate::error::SftResult;
use crate::example::Format;
use crate::rows::packed_rows::PackedRows;
use crate::rows::TokenizedRow;

use super::key::CacheKey;
use super::writer::{publish, temp_name, EntryWriter, TEMP_COUNTER};

/// Where a load's rows go beyond its memory budget.
pub enum SpillTarget {
    /// A file in this directory (the OS's temporary one), unnamed once open.
    Temp(PathBuf),
    /// The entry of `key` in the cache directory `dir`; `description` lacks the format and the
    /// row count, known at the end.
    Entry {
        dir: PathBuf,
        key: CacheKey,
        description: Json,
    },
}

impl SpillTarget {
    /// A file of the OS's temporary directory (`TMPDIR` on Unix).
    pub fn temp() -> Self {
        SpillTarget::Temp(std::env::temp_dir())
    }

    /// Where the rows are written, for messages.
    pub fn dir(&self) -> &Path {
        match self {
            SpillTarget::Temp(dir) | SpillTarget::Entry { dir, .. } => dir,
        }
    }

    /// Creates the file the rows go to.
    pub fn open(&self) -> io::Result<SpillFile> {
        let (file, name) = match self {
            SpillTarget::Temp(dir) => (unnamed_file(dir)?, TempName(None)),
            SpillTarget::Entry { dir, key, .. } => {
                fs::create_dir_all(dir)?;
                let path = temp_name(dir, key);
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)?;
                (file, TempName(Some(path)))
            }
        };
        Ok(SpillFile {
            writer: EntryWriter::new(file)?,
            temp: name,
        })
    }
}

/// A file in `dir` that no name points to: removed right after it is created on Unix, created
/// to be deleted when closed on Windows (the mapping keeps it open while the rows are used).
fn unnamed_file(dir: &Path) -> io::Result<File> {
    let path = dir.join(format!(
        "sft-dataset-rows-{}-{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        const FILE_SHARE_ALL: u32 = 0x7;
        const FILE_FLAG_DELETE_ON_CLOSE: u32 = 0x0400_0000;
        options
            .share_mode(FILE_SHARE_ALL)
            .custom_flags(FILE_FLAG_DELETE_ON_CLOSE);
    }
    let file = options.open(&path)?;
    #[cfg(not(windows))]
    fs::remove_file(&path)?;
    Ok(file)
}

/// A temporary name in a cache directory, removed when dropped unless taken.
struct TempName(Option<PathBuf>);

impl Drop for TempName {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// The file a load writes its rows to, block by block.
pub struct SpillFile {
    writer: EntryWriter,
    temp: TempName,
}

impl SpillFile {
    /// Appends every block of `rows` (the next rows in example order).
    pub fn push(&mut self, rows: &PackedRows) -> io::Result<()> {
        self.writer.push(rows)
    }

    pub fn rows(&self) -> usize {
        self.writer.rows()
    }

    /// Row `index` of those written, read back.
    pub fn read_row(&mut self, index: usize) -> io::Result<SftResult<TokenizedRow>> {
        self.writer.read_row(index)
    }

    /// Completes the file (rows of `format`) and maps it; for a cache entry, also the entry to
    /// publish once the load has succeeded.
    pub fn finish(
        mut self,
        target: &SpillTarget,
        format: Format,
    ) -> io::Result<(PackedRows, Option<PendingEntry>)> {
        let rows = self.writer.rows();
        let (key, description) = match target {
            SpillTarget::Temp(_) => ([0u8; 32], json!({})),
            SpillTarget::Entry {
                key, description, ..
            } => (key.digest, description.clone()),
        };
        let mut description = description;
        description["format"] = Json::from(format.name());
        description["rows"] = Json::from(rows);
        let written = self.writer.finish(&key, &description)?;
        let mapped = written.map()?;
        let pending = match (target, self.temp.0.take()) {
            (SpillTarget::Entry { dir, key, .. }, Some(temp)) => Some(PendingEntry {
                file: written.file,
                temp: TempName(Some(temp)),
                name: dir.join(key.file_name()),
            }),
            _ => None,
        };
        Ok((mapped, pending))
    }
}

/// A complete cache entry written under a temporary name: `publish` gives it its name; dropped
/// unpublished (the load failed, or its data changed meanwhile), it is removed.
pub struct PendingEntry {
    file: File,
    temp: TempName,
    name: PathBuf,
}

impl PendingEntry {
    /// Syncs the entry and renames it to the entry's name.
    pub fn publish(mut self) -> io::Result<()> {
        let Some(temp) = self.temp.0.take() else {
            return Err(io::Error::other("entry published twice"));
        };
        let published = publish(&self.file, &temp, &self.name);
        if published.is_err() {
            let _ = fs::remove_file(&temp);
        }
        published
    }
}

#[cfg(test)]
mod tests {
    use super::super::{list, load, CacheMode, CacheSettings, CacheStatus};
    use crate::dataset::loader::LoadOptions;
    use crate::dataset::{Dataset, DatasetConfig};
    use std::fs;
    use std::path::PathBuf;
    use std::sync::Arc;

    fn edge(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("__test__/fixtures/parity/edge/{name}.jsonl"))
    }

    #[test]
    fn a_load_beyond_its_budget_writes_the_entry_as_it_builds_and_maps_it() {
        let tok = Arc::new(crate::test_support::load_family("qwen3"));
        let dir = std::env::temp_dir().join(format!("sft-spill-entry-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = CacheSettings {
            dir: dir.join("cache"),
            mode: CacheMode::ReadWrite,
        };
        let config = DatasetConfig {
            completion_only: true,
            ..Default::default()
        };
        let spilled = LoadOptions {
            memory_budget: Some(0),
            ..Default::default()
        };
        let data = edge("conv_edge");
        let cold = Dataset::load(&data, tok.clone(), config.clone(), &LoadOptions::default());
        let cold = cold.unwrap();
        assert_eq!(cold.row_memory().0.mapped, 0);
        let first = load(&data, tok.clone(), config.clone(), &spilled, &cache).unwrap();
        assert_eq!(first.status, Some(CacheStatus::Stored));
        let (bytes, memory) = first.dataset.row_memory();
        assert!(bytes.mapped > 0 && memory.is_some_and(|m| m.spilled && m.peak == 0));
        let hit = load(&data, tok.clone(), config.clone(), &spilled, &cache).unwrap();
        assert_eq!(hit.status, Some(CacheStatus::Hit));
        for dataset in [&first.dataset, &hit.dataset] {
            assert_eq!(dataset.example_count(), cold.example_count());
            for i in 0..cold.example_count() {
                assert_eq!(
                    dataset.row(i).unwrap().to_row(),
                    cold.row(i).unwrap().to_row()
                );
            }
            assert_eq!(dataset.report().unwrap(), cold.report().unwrap());
        }
        // The entry, its lock, and no temporary file.
        let listed = list(&cache.dir).unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].problem.is_none());
        // A load that fails after its rows went to the cache leaves no file behind.
        let bad = dir.join("bad.jsonl");
        let mut text = fs::read_to_string(&data).unwrap();
        text.push_str("{\"messages\": []}\n");
        fs::write(&bad, text).unwrap();
        assert!(load(&bad, tok.clone(), config, &spilled, &cache).is_err());
        let listed = list(&cache.dir).unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
