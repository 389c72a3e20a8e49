//! Where a load's packed rows go: into memory while they fit its budget (`memoryBudget`), then,
//! all of them, to a file written as they come (`token_cache::spill`) and mapped at the end, so
//! that the rows never take more of the process's own memory than the budget.

use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::Format;
use crate::rows::packed_rows::{BlockBound, PackedRows};
use crate::rows::TokenizedRow;
use crate::store::token_cache::{PendingEntry, SpillFile, SpillTarget};

/// The default `memoryBudget`: 1 GiB of rows stay in memory.
pub const DEFAULT_MEMORY_BUDGET: usize = 1 << 30;

/// How a load held its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadMemory {
    pub budget: usize,
    /// The most bytes of packed rows the load held in memory at once.
    pub peak: usize,
    /// Whether the rows went to a file.
    pub spilled: bool,
}

pub struct RowSink<'a> {
    budget: usize,
    target: &'a SpillTarget,
    /// The rows kept in memory, while they fit.
    memory: PackedRows,
    /// Bytes `memory` holds.
    resident: usize,
    peak: usize,
    /// Every row packed so far, once they outgrew the budget.
    spill: Option<SpillFile>,
}

/// A load's rows once every one is packed.
pub struct SunkRows {
    /// In memory, or mapped from the file they were written to.
    pub rows: PackedRows,
    /// The cache entry the rows were written to, to publish.
    pub entry: Option<PendingEntry>,
    pub memory: LoadMemory,
}

impl<'a> RowSink<'a> {
    pub fn new(budget: usize, target: &'a SpillTarget) -> Self {
        RowSink {
            budget,
            target,
            memory: PackedRows::default(),
            resident: 0,
            peak: 0,
            spill: None,
        }
    }

    pub fn len(&self) -> usize {
        match &self.spill {
            Some(spill) => spill.rows(),
            None => self.memory.len(),
        }
    }

    fn write_error(&self, e: std::io::Error) -> SftError {
        SftError::new(
            ErrorCode::FileRead,
            format!(
                "cannot write the rows beyond memoryBudget ({} bytes) to {}: {e}",
                self.budget,
                self.target.dir().display()
            ),
        )
    }

    /// Packs the leading rows of `pending` into blocks within `bound` (all of them when `all`,
    /// see `PackedRows::push_blocks`) and keeps them: in memory if every row packed so far fits
    /// the budget, else in the file, where the rows held in memory go first.
    pub fn push_blocks(
        &mut self,
        pending: &mut Vec<SftResult<TokenizedRow>>,
        bound: BlockBound,
        all: bool,
    ) -> SftResult<()> {
        let mut fresh = PackedRows::default();
        fresh.push_blocks(pending, bound, all);
        if fresh.is_empty() {
            return Ok(());
        }
        if self.spill.is_none() {
            let resident = self.resident + fresh.bytes().resident;
            if resident <= self.budget {
                self.memory.append(fresh);
                self.resident = resident;
                self.peak = self.peak.max(resident);
                return Ok(());
            }
            let mut spill = self.target.open().map_err(|e| self.write_error(e))?;
            spill.push(&self.memory).map_err(|e| self.write_error(e))?;
            self.memory = PackedRows::default();
            self.resident = 0;
            self.spill = Some(spill);
        }
        let written = match &mut self.spill {
            Some(spill) => spill.push(&fresh),
            None => Ok(()),
        };
        written.map_err(|e| self.write_error(e))
    }

    /// A copy of packed row `index` (below `len()`) when it came out whole.
    pub fn row(&mut self, index: usize) -> SftResult<Option<TokenizedRow>> {
        let read = match &mut self.spill {
            Some(spill) => spill.read_row(index),
            None => return Ok(self.memory.get(index).ok().map(|row| row.to_row())),
        };
        match read {
            Ok(row) => Ok(row.ok()),
            Err(e) => Err(SftError::new(
                ErrorCode::FileRead,
                format!(
                    "cannot read row {index} back from the rows written to {}: {e}",
                    self.target.dir().display()
                ),
            )),
        }
    }

    /// The rows, every one packed, of `format`.
    pub fn finish(self, format: Format) -> SftResult<SunkRows> {
        let memory = LoadMemory {
            budget: self.budget,
            peak: self.peak,
            spilled: self.spill.is_some(),
        };
        let Some(spill) = self.spill else {
            return Ok(SunkRows {
                rows: self.memory,
                entry: None,
                memory,
            });
        };
        let (rows, entry) = spill.finish(self.target, format).map_err(|e| {
            SftError::new(
                ErrorCode::FileRead,
                format!(
                    "cannot complete the rows written to {}: {e}",
                    self.target.dir().display()
                ),
            )
        })?;
        Ok(SunkRows {
            rows,
            entry,
            memory,
        })
    }
}

#[cfg(test)]
// One trained range per row is the common case, not a mistaken `Vec` of a range.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::rows::RowStats;
    use crate::store::token_cache::{cache_key, open_entry, DataStamp};
    use std::path::{Path, PathBuf};

    const BOUND: BlockBound = BlockBound { ids: 64, rows: 8 };

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sft-row-sink-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Rows of 0 to 40 ids, some with a warning or loss bits, some failed.
    fn rows() -> Vec<SftResult<TokenizedRow>> {
        (0..300u32)
            .map(|i| {
                if i % 37 == 5 {
                    return Err(SftError::new(ErrorCode::TemplateRender, format!("row {i}")));
                }
                let n = (i * 7) % 41;
                let ids: Vec<u32> = (0..n).map(|k| i * 1000 + k).collect();
                let spans = if n > 2 { vec![1..n - 1] } else { Vec::new() };
                let warning = (i % 11 == 3).then(|| format!("warning {i}").into_boxed_str());
                let stats = RowStats {
                    losses: (i % 13 == 4) as u8 * 8,
                    ..RowStats::NONE
                };
                Ok(TokenizedRow::new(ids.into(), spans.into(), warning, stats))
            })
            .collect()
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        names
    }

    /// Feeds `rows` through a sink a few at a time, reading every packed row back as it goes,
    /// and checks the finished rows.
    fn sink_all(budget: usize, target: &SpillTarget) -> SunkRows {
        let all = rows();
        let mut sink = RowSink::new(budget, target);
        let mut pending = Vec::new();
        for (k, row) in all.iter().enumerate() {
            pending.push(row.clone());
            if k % 5 == 4 {
                sink.push_blocks(&mut pending, BOUND, false).unwrap();
            }
            // Copies read packed rows back, from memory or from the file.
            if sink.len() > 0 {
                let i = (k * 31) % sink.len();
                assert_eq!(sink.row(i).unwrap(), all[i].clone().ok(), "row {i} at {k}");
            }
        }
        sink.push_blocks(&mut pending, BOUND, true).unwrap();
        assert_eq!(sink.len(), all.len());
        let sunk = sink.finish(Format::Conversation).unwrap();
        assert_eq!(sunk.rows.len(), all.len());
        for (i, expected) in all.iter().enumerate() {
            match (sunk.rows.get(i), expected) {
                (Ok(view), Ok(row)) => assert_eq!(view.to_row(), *row, "row {i}"),
                (Err(e), Err(x)) => assert_eq!(e, x, "row {i}"),
                (got, _) => panic!("row {i}: {got:?}"),
            }
        }
        sunk
    }

    #[test]
    fn rows_stay_in_memory_within_the_budget_and_are_mapped_beyond_it() {
        let dir = scratch("temp");
        let target = SpillTarget::Temp(dir.clone());
        let unbounded = sink_all(usize::MAX, &target);
        let total = unbounded.rows.bytes();
        assert_eq!(total.mapped, 0);
        assert_eq!(unbounded.memory.peak, total.resident);
        assert!(!unbounded.memory.spilled);
        for budget in [0, 4096, total.resident / 2] {
            let sunk = sink_all(budget, &target);
            assert!(sunk.memory.spilled, "budget {budget}");
            assert!(
                sunk.memory.peak <= budget,
                "budget {budget}: {:?}",
                sunk.memory
            );
            let bytes = sunk.rows.bytes();
            assert!(bytes.mapped > total.resident / 2, "{bytes:?} {total:?}");
            assert!(sunk.entry.is_none());
        }
        // The file had no name once open: nothing is left to clean up.
        assert_eq!(files_in(&dir), Vec::<String>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rows_written_to_a_cache_entry_become_the_entry_only_when_published() {
        let dir = scratch("entry");
        let data = dir.join("data.jsonl");
        std::fs::write(&data, "{}\n").unwrap();
        let tok = crate::test_support::load_family("qwen3");
        let key = cache_key(
            &DataStamp::of(&data).unwrap(),
            &tok,
            &Default::default(),
            None,
        );
        let cache = dir.join("cache");
        let target = SpillTarget::Entry {
            dir: cache.clone(),
            key: key.clone(),
            description: serde_json::json!({"data": "test"}),
        };
        // Dropped unpublished (a failed load): the temporary file goes with it.
        let sunk = sink_all(0, &target);
        let names = files_in(&cache);
        assert_eq!(names.len(), 1);
        assert!(
            names[0].starts_with(&format!(".{}.", key.hex())),
            "{names:?}"
        );
        assert!(names[0].ends_with(".tmp"), "{names:?}");
        drop(sunk);
        assert_eq!(files_in(&cache), Vec::<String>::new());
        // A failed load drops the sink before its file is complete.
        let mut sink = RowSink::new(0, &target);
        sink.push_blocks(&mut rows(), BOUND, true).unwrap();
        assert_eq!(files_in(&cache).len(), 1);
        drop(sink);
        assert_eq!(files_in(&cache), Vec::<String>::new());
        // Published, it is an entry that a later load opens and maps.
        let sunk = sink_all(0, &target);
        sunk.entry.unwrap().publish().unwrap();
        assert_eq!(files_in(&cache), vec![key.file_name()]);
        let entry = open_entry(&cache.join(key.file_name()), &key.digest)
            .unwrap()
            .unwrap();
        assert_eq!(entry.description["rows"], 300);
        assert_eq!(entry.description["format"], "conversation");
        assert_eq!(entry.description["data"], "test");
        for i in 0..300 {
            match (entry.rows.get(i), sunk.rows.get(i)) {
                (Ok(a), Ok(b)) => assert_eq!(a.to_row(), b.to_row(), "row {i}"),
                (Err(a), Err(b)) => assert_eq!(a, b, "row {i}"),
                (a, b) => panic!("row {i}: {a:?} / {b:?}"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_that_cannot_be_written_fails_the_load_naming_the_budget() {
        let dir = scratch("unwritable");
        let blocker = dir.join("a-file");
        std::fs::write(&blocker, "not a directory").unwrap();
        let target = SpillTarget::Temp(blocker.clone());
        let mut sink = RowSink::new(100, &target);
        let e = sink.push_blocks(&mut rows(), BOUND, true).unwrap_err();
        assert_eq!(e.code, ErrorCode::FileRead);
        assert!(
            e.message.starts_with(&format!(
                "cannot write the rows beyond memoryBudget (100 bytes) to {}: ",
                blocker.display()
            )),
            "{}",
            e.message
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
