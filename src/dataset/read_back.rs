//! What `summary()` reads again from the data file (each file, for a mix): the line or row of
//! the examples its findings list, and the examples of its sample, parsed and converted as the
//! load did.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::dataset::summary::SourceFile;
use crate::dataset::Dataset;
use crate::error::{Location, SftResult};
use crate::example::{validate_record, SftExample};
use crate::input::dataset_format::{Converter, FormatOptions};
use crate::input::RecordReader;

pub struct ReadBack {
    /// The files read, in source order.
    pub files: Vec<SourceFile>,
    /// Example index (of the dataset) -> the file (index into `files`) and where in it.
    pub locations: BTreeMap<usize, (usize, Location)>,
    /// The sampled examples, by dataset index, in order.
    pub sampled: Vec<(usize, SftExample)>,
}

/// Reads back `listed` and `sampled` (dataset indices, both in order) from the file a loaded
/// dataset came from (`source`), or from every source of a mix; `None` for a dataset made from
/// examples.
pub fn read_back(
    dataset: &Dataset,
    source: Option<&Path>,
    listed: &BTreeSet<usize>,
    sampled: &[usize],
) -> SftResult<Option<ReadBack>> {
    let mut back = ReadBack {
        files: Vec::new(),
        locations: BTreeMap::new(),
        sampled: Vec::with_capacity(sampled.len()),
    };
    match dataset.mixture() {
        Some(mixture) => {
            for (k, s) in mixture.sources.iter().enumerate() {
                let range = s.range();
                let mine: BTreeSet<usize> = listed
                    .range(range.clone())
                    .map(|i| i - range.start)
                    .collect();
                let samples: Vec<usize> = sampled
                    .iter()
                    .filter(|i| range.contains(i))
                    .map(|i| i - range.start)
                    .collect();
                read_file(
                    &s.path,
                    &s.input,
                    &mine,
                    &samples,
                    k,
                    range.start,
                    &mut back,
                )?;
            }
        }
        None => {
            let Some(path) = source else {
                return Ok(None);
            };
            let input = &dataset.config().input;
            read_file(path, input, listed, sampled, 0, 0, &mut back)?;
        }
    }
    Ok(Some(back))
}

/// Reads the records of `path` up to the last one needed: the location of each of `listed`, and
/// the examples of `sampled` (indices in the file), filed under `start +` their index.
fn read_file(
    path: &Path,
    input: &FormatOptions,
    listed: &BTreeSet<usize>,
    sampled: &[usize],
    file: usize,
    start: usize,
    back: &mut ReadBack,
) -> SftResult<()> {
    let converter = Converter::new(input.clone())?;
    let mut reader = RecordReader::open(path, &converter.top_level_keys())?;
    let kind = reader.kind();
    back.files.push(source_file(path, kind.name())?);
    let shown = path.display().to_string();
    let last = listed
        .last()
        .copied()
        .into_iter()
        .chain(sampled.last().copied())
        .max();
    let Some(last) = last else {
        return Ok(());
    };
    let mut next_sample = sampled.iter().copied().peekable();
    let mut index = 0;
    while index <= last {
        let Some(record) = reader.next_record()? else {
            break;
        };
        if listed.contains(&index) {
            back.locations.insert(start + index, (file, record.at));
        }
        if next_sample.next_if_eq(&index).is_some() {
            let json = record.parse(&shown, kind.container)?;
            let (json, _) = converter.convert(json, index)?;
            back.sampled
                .push((start + index, validate_record(json, index)?));
        }
        index += 1;
    }
    Ok(())
}

fn source_file(path: &Path, file_format: String) -> SftResult<SourceFile> {
    let stamp = crate::store::token_cache::DataStamp::of(path)
        .map_err(|e| crate::input::jsonl::io_error(&path.display().to_string(), &e))?;
    Ok(SourceFile {
        path: path.display().to_string(),
        bytes: stamp.len,
        blake3: crate::store::token_cache::hex(&stamp.digest),
        file_format,
    })
}
