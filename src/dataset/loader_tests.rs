//! The loader's tests: every row of a file of repeats, failures and silent losses is the row its
//! record's own build gives, on any number of threads, in memory or written to disk.

use serde_json::{json, Value as Json};

use crate::dataset::loader::{load_rows, LoadOptions, LoadedRows};
use crate::dataset::{resolve_masking, row_settings, turn_end_of, DatasetConfig};
use crate::example::validate_record;
use crate::input::dataset_format::Converter;
use crate::mask::silent_loss::{duplicate_key, LossChecker, LossKind};
use crate::rows::{build_row, RowSettings};
use crate::store::token_cache::SpillTarget;
use crate::tokenize::ChatTokenizer;

/// Records cycling over a few conversations and prompt-completion pairs, so that repeats fall
/// inside one piece and across pieces (every eleventh record repeats the one before it); some
/// carry distillation targets that do not fit
/// their rows (their rows fail), one conversation's row fails whatever its targets, and some
/// carry tools (ignored, a silent loss).
fn records() -> Vec<Json> {
    // More than a block of packed rows: repeats also copy rows packed already.
    (0..4500)
        .map(|i| {
            let v = if i % 11 == 10 { (i - 1) * 7 } else { i * 7 } % 23;
            let mut record = if v % 3 == 0 {
                json!({"prompt": [{"role": "user", "content": format!("question {v}")}],
                       "completion": {"role": "assistant", "content": format!("answer {v}")}})
            } else {
                json!({"messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": format!("hello {v}")},
                    {"role": "assistant", "content": format!("hi {v}")}]})
            };
            if v == 5 {
                record["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
            }
            if v == 7 && i % 2 == 0 {
                record["distill"] = json!({"tokenIds": [[1]], "logprobs": [[0.0]]});
            }
            // Valid as a record, but its row fails: no source for its repeats.
            if v == 13 {
                record["messages"][2]["tool_calls"] = json!("not a list");
            }
            record
        })
        .collect()
}

#[test]
fn a_repeated_record_gets_the_row_its_own_build_would_give() {
    let tokenizer = crate::test_support::load_family("qwen3");
    let records = records();
    let dir = std::env::temp_dir().join(format!("sft-loader-dup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("repeats.jsonl");
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();

    let config = DatasetConfig {
        completion_only: true,
        ..Default::default()
    };
    let converter = Converter::new(config.input.clone()).unwrap();
    let masking = resolve_masking(&tokenizer, &config).unwrap();
    let turn_end = turn_end_of(&tokenizer, &config);
    let checker = LossChecker::new(&tokenizer, config.tools, false);
    let settings = RowSettings {
        loss: Some(&checker),
        ..row_settings(&config, &masking, turn_end.as_ref())
    };
    let spill = SpillTarget::Temp(dir.clone());
    let load = |budget: Option<usize>| {
        let options = LoadOptions {
            memory_budget: budget,
            ..Default::default()
        };
        load_rows(
            &path,
            &tokenizer,
            Some(&settings),
            &converter,
            &options,
            &spill,
        )
    };
    // Which record of a key is built first depends on the threads' timing: any number of
    // threads, run after run, gives the rows of the file's order. Rows beyond a memory
    // budget go to a file as they are packed (all of them, or from some point on), and a
    // repeat copies its row from there.
    let mut runs = Vec::new();
    for (threads, budget) in [(1, None), (2, None), (8, Some(0)), (2, Some(300_000))] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let loaded = pool.install(|| load(budget)).unwrap();
        let bytes = loaded.rows.bytes();
        assert_eq!(loaded.memory.spilled, budget.is_some());
        assert_eq!(bytes.mapped > 0, budget.is_some(), "{bytes:?}");
        assert!(loaded.memory.peak <= budget.unwrap_or(usize::MAX));
        if budget == Some(300_000) {
            assert!(loaded.memory.peak > 0);
        }
        runs.push(loaded);
    }
    // As `loadSFTDataset` runs it: from a thread outside any pool, on the global one.
    let outside = std::thread::scope(|scope| scope.spawn(|| load(Some(0))).join());
    runs.push(outside.unwrap().unwrap());
    // The files the rows went to had no name once open.
    let mut left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, vec![std::ffi::OsString::from("repeats.jsonl")]);
    std::fs::remove_dir_all(&dir).unwrap();

    for loaded in &runs {
        check_rows(loaded, &records, &tokenizer, &converter, &settings);
    }
}

/// Compares every row of `loaded` with its record's own build, a repeat marked as one.
fn check_rows(
    loaded: &LoadedRows,
    records: &[Json],
    tokenizer: &ChatTokenizer,
    converter: &Converter,
    settings: &RowSettings,
) {
    assert_eq!(loaded.rows.len(), records.len());
    // Each record built on its own; a duplicate is one whose key an earlier whole row had.
    let mut seen = std::collections::HashSet::new();
    let (mut copies, mut failed) = (0, 0);
    for (i, record) in records.iter().cloned().enumerate() {
        let (record, _) = converter.convert(record, i).unwrap();
        let example = validate_record(record, i).unwrap();
        let key = duplicate_key(&example);
        let expected = build_row(tokenizer, settings, example);
        match (loaded.rows.get(i), expected) {
            (Ok(got), Ok(mut want)) => {
                if !seen.insert(key) {
                    want.mark_loss(LossKind::DuplicateExample);
                    copies += 1;
                }
                assert_eq!(got.to_row(), want, "record {i}");
            }
            (Err(got), Err(want)) => {
                assert!(
                    got.to_string().contains(&format!("SFT example {i}")),
                    "{got}"
                );
                assert!(
                    got.to_string().contains(&want.to_string()),
                    "{got} / {want}"
                );
                failed += 1;
            }
            (got, want) => panic!("record {i}: {:?} / {:?}", got.err(), want.err()),
        }
    }
    assert!(copies > 300, "{copies} repeats");
    assert!(failed > 5, "{failed} failed rows");
    let classes: Vec<_> = loaded.losses.classes.iter().map(|c| (c.0, c.1)).collect();
    assert!(
        classes.contains(&(LossKind::DuplicateExample, copies)),
        "{classes:?}"
    );
}
