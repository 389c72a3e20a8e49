//! `loadSFTDataset`'s file pass: stream the records (`input`), parse and validate every one, and
//! build every row on all cores while the next records are read. Nothing but the rows is kept, in
//! memory up to the load's budget and in a mapped file beyond it (`row_sink`), so memory stays
//! flat whatever the file size.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rayon::Yield;
use rustc_hash::FxHashMap;

use crate::dataset::row_sink::{LoadMemory, RowSink, DEFAULT_MEMORY_BUDGET};
use crate::error::Location;
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::train_flags::first_flagged;
use crate::example::{validate_record, Format, SftExample};
use crate::input::dataset_format::{Converter, DatasetFormat};
use crate::input::{RawRecord, RecordReader};
use crate::mask::silent_loss::{duplicate_key, ExampleKey, LossKind, LossSummary};
use crate::rows::packed_rows::{BlockBound, PackedRows};
use crate::rows::{build_row, check_flags_supported, RowSettings, TokenizedRow};
use crate::store::token_cache::{PendingEntry, SpillTarget};
use crate::tokenize::ChatTokenizer;

/// Records are read in pieces of a few records; each piece is parsed, validated and built as one
/// job on the rayon pool while the reading goes on. The pool takes the pieces in the order they
/// were read, so the cores start after the first few records and stay busy to the last piece,
/// with no barrier between chunks. The job that ends the next piece in file order merges it into
/// the rows (and every piece after it that is ready), so the merge follows the cores closely and
/// no thread wakes up only to merge. At most `READ_AHEAD_RECORDS` records and `READ_AHEAD_BYTES`
/// bytes are read ahead of the merge, which keeps memory flat however large the file; a small
/// memory budget reads less ahead (a quarter of it, at least `MIN_READ_AHEAD_BYTES`).
const READ_AHEAD_RECORDS: usize = 4096;
const READ_AHEAD_BYTES: usize = 32 << 20;
const MIN_READ_AHEAD_BYTES: usize = 1 << 20;
/// Records per unit of parallel work: a piece holds at least this many. Small enough that no core
/// waits long on the other's last piece, large enough that a piece costs what its records cost.
pub const PARALLEL_GRAIN: usize = 4;
/// A piece of short records holds more of them, up to about this many bytes.
const PIECE_BYTES: usize = 8 << 10;
/// Merged rows are packed into blocks of at most 32,768 token ids (128 KiB: the allocator serves
/// it without rounding it up, where a slightly larger size would waste up to a fifth) or 4,096
/// rows. A block is packed once the rows merged fill it; the last one, packed after every piece
/// is built, stays short.
const PACK: BlockBound = BlockBound {
    ids: 1 << 15,
    rows: 4096,
};

/// Progress of a load, reported as rows are packed.
#[derive(Debug, Clone, Copy)]
pub struct LoadProgress {
    pub records: usize,
    pub bytes: u64,
    /// Another process builds the same token cache entry: the load waits for it, then maps it.
    pub waiting: bool,
}

/// Called as a load goes.
pub type ProgressHook = Box<dyn Fn(LoadProgress) + Send + Sync>;

#[derive(Default)]
pub struct LoadOptions {
    /// Read at most this many records (the reference's `limit`; `None` reads all).
    pub limit: Option<usize>,
    /// Bytes of packed rows the load keeps in memory; beyond it, every row goes to a file that
    /// is mapped (`memoryBudget`; `None`: `DEFAULT_MEMORY_BUDGET`).
    pub memory_budget: Option<usize>,
    pub on_progress: Option<ProgressHook>,
}

/// What one line turned into.
// Nearly every line is valid: boxing its example would cost an allocation a record to save a
// few bytes on the rare invalid one.
#[allow(clippy::large_enum_variant)]
enum LineOutcome {
    /// Parsed but not a valid example.
    Invalid(SftError),
    /// A valid example, still to be turned into its row.
    Valid {
        format: Format,
        read_as: DatasetFormat,
        key: ExampleKey,
        /// Whether the example carries distillation targets.
        distilled: bool,
        /// Taken when its row is built.
        example: Option<SftExample>,
        at: Location,
    },
}

/// In the loader's map of keys: the first row with this key is not to be copied.
const NO_SOURCE: u32 = u32::MAX;
/// In the loader's map of keys: no row with this key has been merged whole yet.
const UNMERGED: u32 = u32::MAX - 1;
/// In the loader's map of keys: no record has claimed the key (the first row had distillation
/// targets, or its record was not built).
const NO_CLAIM: u32 = u32::MAX;

/// What the loader knows of a duplicate key: the first record (by index) that took it on to build
/// its row, and the record whose row its repeats copy, once that row is merged whole
/// (`NO_SOURCE` if it has distillation targets). 24 bytes an entry with its key.
#[derive(Clone, Copy)]
struct KeyState {
    claim: u32,
    source: u32,
}

/// A key neither claimed nor merged yet.
const UNSEEN: KeyState = KeyState {
    claim: NO_CLAIM,
    source: UNMERGED,
};

type Keys = Mutex<FxHashMap<ExampleKey, KeyState>>;

/// How a valid line gets its row.
#[derive(Clone, Copy)]
enum Source {
    /// Built from its example.
    Build,
    /// A copy of the row of an earlier record with the same key: both lack distillation
    /// targets, so the same messages, tools and format make the same row.
    Copy(usize),
}

/// A placeholder for rows skipped because the load fails anyway; never reaches a caller.
fn not_built() -> SftError {
    SftError::new(ErrorCode::Internal, "row not built: the load failed")
}

pub struct LoadedRows {
    /// Every row, packed as the merge goes: in memory, or mapped from the file they went to
    /// beyond the memory budget.
    pub rows: PackedRows,
    /// The token cache entry the rows went to, to publish.
    pub entry: Option<PendingEntry>,
    pub memory: LoadMemory,
    pub format: Format,
    /// The first record whose format differs from record 0's: its index, format and line or
    /// row.
    pub first_inconsistent: Option<(usize, Format, Location)>,
    /// The silent losses found, by class.
    pub losses: LossSummary,
}

/// Reads, parses and validates the whole file, in the reference's order of errors: a parse error
/// anywhere wins over a validation error, and the first of each kind is reported. Rows are built
/// only while no error has been seen and `settings` is given. A record that repeats an earlier one
/// (same duplicate key, neither with distillation targets) is not rendered or tokenized again
/// (two jobs racing for a key may both build it, rarely): its row is a copy of the earlier row.
/// Rows beyond the memory budget go to a file at `spill`.
pub fn load_rows(
    path: &Path,
    tokenizer: &ChatTokenizer,
    settings: Option<&RowSettings>,
    converter: &Converter,
    options: &LoadOptions,
    spill: &SpillTarget,
) -> SftResult<LoadedRows> {
    let mut reader = RecordReader::open(path, &converter.top_level_keys())?;
    let shown = reader.path().to_string();
    let context = PieceContext {
        tokenizer,
        settings,
        converter,
        shown: &shown,
        container: reader.kind().container,
        keys: Mutex::new(FxHashMap::default()),
        stop: AtomicBool::new(false),
    };
    let limit = options.limit.unwrap_or(usize::MAX);
    let budget = options.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET);
    let board = Board::new(&context, options, RowSink::new(budget, spill));

    let read = rayon::in_place_scope_fifo(|scope| {
        let (mut launched, mut taken, mut read_bytes) = (0usize, 0usize, 0usize);
        loop {
            // Read no further ahead of the merge than the bounds, nor past a failed merge.
            if !board.wait_for_room(taken, read_bytes) {
                return Ok(());
            }
            let (piece, bytes, at_end, failed) = read_piece(&mut reader, limit - taken);
            if !piece.is_empty() {
                let (base, seq) = (taken, launched);
                taken += piece.len();
                read_bytes += bytes;
                launched += 1;
                // A file with an invalid record fails: its rows need not be built.
                let building = settings.is_some() && !board.invalid.load(Ordering::Relaxed);
                let progress = reader.bytes_read();
                let board = &board;
                scope.spawn_fifo(move |_| {
                    let built = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        board.context.build(piece, base, building)
                    }));
                    board.post(
                        seq,
                        Posted {
                            built,
                            bytes,
                            progress,
                        },
                    );
                });
            }
            if let Some(e) = failed {
                return Err(e);
            }
            if at_end {
                return Ok(());
            }
        }
    });
    // The scope has waited for every job, so every piece is merged unless the merge failed; a
    // failure there (a parse error, in file order) wins over a read error after those pieces.
    let mut merge = board.finish()?;
    read?;
    merge.pack(options, reader.bytes_read(), true)?;
    if let Some(e) = merge.first_invalid {
        return Err(e);
    }
    let format = merge.format.unwrap_or(Format::Conversation);
    let sunk = merge.rows.finish(format)?;
    Ok(LoadedRows {
        rows: sunk.rows,
        entry: sunk.entry,
        memory: sunk.memory,
        format,
        first_inconsistent: merge.first_inconsistent,
        losses: merge.losses,
    })
}

/// A piece as its job leaves it: its build (or the panic that ended it), the bytes of its
/// records, and how far the file was read when it was.
struct Posted {
    built: std::thread::Result<SftResult<PieceBuild>>,
    bytes: usize,
    progress: u64,
}

/// Why the merge stopped early.
enum Failure {
    Error(SftError),
    Panic(Box<dyn std::any::Any + Send>),
}

/// Where the jobs leave their pieces, and the merge, which runs on whichever job's thread finds
/// the next piece in file order ready and nobody merging: no thread wakes up only to merge.
struct Board<'a> {
    context: &'a PieceContext<'a>,
    options: &'a LoadOptions,
    /// Bytes of records read ahead of the merge at most.
    read_ahead: usize,
    state: Mutex<BoardState>,
    /// Touched only by the one thread merging at a time (`BoardState::merging`).
    merge: Mutex<Merge<'a>>,
    /// The merge moved on or stopped; the reader waits for it when it is far enough ahead.
    moved: Condvar,
    /// Some record merged so far is invalid: the pieces read from now on are not built.
    invalid: AtomicBool,
}

#[derive(Default)]
struct BoardState {
    /// Pieces posted and not merged yet, by sequence number.
    done: BTreeMap<usize, Posted>,
    /// Pieces, records and bytes merged so far.
    next: usize,
    merged_records: usize,
    merged_bytes: usize,
    merging: bool,
    failure: Option<Failure>,
    /// The reader waits on `moved`.
    waiting: bool,
}

impl<'a> Board<'a> {
    fn new(context: &'a PieceContext<'a>, options: &'a LoadOptions, rows: RowSink<'a>) -> Self {
        let budget = options.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET);
        Board {
            context,
            options,
            read_ahead: (budget / 4).clamp(MIN_READ_AHEAD_BYTES, READ_AHEAD_BYTES),
            state: Mutex::default(),
            merge: Mutex::new(Merge::new(rows)),
            moved: Condvar::new(),
            invalid: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BoardState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Leaves piece `seq`; merges it, and every piece after it that is ready, when it is the next
    /// in file order and no other thread is merging.
    fn post(&self, seq: usize, posted: Posted) {
        let mut state = self.lock();
        state.done.insert(seq, posted);
        if state.merging || state.failure.is_some() {
            return;
        }
        state.merging = true;
        loop {
            let mut ready = Vec::new();
            loop {
                let seq = state.next + ready.len();
                match state.done.remove(&seq) {
                    Some(posted) => ready.push(posted),
                    None => break,
                }
            }
            if ready.is_empty() {
                break;
            }
            drop(state);
            let pieces = ready.len();
            let merged = std::panic::catch_unwind(AssertUnwindSafe(|| self.merge_ready(ready)));
            state = self.lock();
            match merged {
                Ok(Ok((records, bytes))) => {
                    state.next += pieces;
                    state.merged_records += records;
                    state.merged_bytes += bytes;
                }
                Ok(Err(e)) => state.failure = Some(Failure::Error(e)),
                Err(panic) => state.failure = Some(Failure::Panic(panic)),
            }
            if state.failure.is_some() {
                // The first failure in the file's order: the jobs still queued stop.
                self.context.stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        state.merging = false;
        let wake = state.waiting;
        drop(state);
        if wake {
            self.moved.notify_all();
        }
    }

    /// Merges pieces in order; the records and bytes merged.
    fn merge_ready(&self, ready: Vec<Posted>) -> SftResult<(usize, usize)> {
        let mut merge = self
            .merge
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (mut records, mut bytes) = (0, 0);
        for posted in ready {
            let build = match posted.built {
                Ok(built) => built?,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            records += build.outcomes.len();
            bytes += posted.bytes;
            merge.piece(self.context, build)?;
            if merge.first_invalid.is_some() {
                self.invalid.store(true, Ordering::Relaxed);
            }
            if merge.pending_ids >= PACK.ids || merge.pending.len() >= PACK.rows {
                merge.pack(self.options, posted.progress, false)?;
            }
        }
        Ok((records, bytes))
    }

    /// Waits until fewer than `READ_AHEAD_RECORDS` records and `read_ahead` bytes of the
    /// `taken` records (`read_bytes` bytes) read are not merged yet; false once the merge has
    /// failed. On a thread of a rayon pool (a load run inside `install`), queued jobs, this
    /// load's among them, run here while it waits: blocking would take a thread from the pool
    /// its own jobs need.
    fn wait_for_room(&self, taken: usize, read_bytes: usize) -> bool {
        let in_pool = rayon::current_thread_index().is_some();
        let mut state = self.lock();
        loop {
            if state.failure.is_some() {
                return false;
            }
            if taken - state.merged_records < READ_AHEAD_RECORDS
                && read_bytes - state.merged_bytes < self.read_ahead
            {
                state.waiting = false;
                return true;
            }
            state.waiting = true;
            if in_pool {
                drop(state);
                let idle = rayon::yield_now() != Some(Yield::Executed);
                state = self.lock();
                if idle {
                    state = self
                        .moved
                        .wait_timeout(state, Duration::from_micros(100))
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0;
                }
            } else {
                state = self
                    .moved
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
    }

    /// The merge, once every job has ended; the failure that stopped it, if one did.
    fn finish(self) -> SftResult<Merge<'a>> {
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match state.failure {
            Some(Failure::Error(e)) => Err(e),
            Some(Failure::Panic(panic)) => std::panic::resume_unwind(panic),
            None if state.done.is_empty() => Ok(self
                .merge
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner())),
            // Every posted piece is merged unless the merge stopped.
            None => Err(SftError::new(
                ErrorCode::Internal,
                "pieces left unmerged after the load",
            )),
        }
    }
}

/// The next piece: `PARALLEL_GRAIN` records or more, up to `PIECE_BYTES` of them (fewer at the
/// end of the file or at `left`); its size; whether the file ended; and the read error that ended
/// the piece early, if one did.
fn read_piece(
    reader: &mut RecordReader,
    left: usize,
) -> (Vec<RawRecord>, usize, bool, Option<SftError>) {
    let mut piece = Vec::with_capacity(PARALLEL_GRAIN);
    let mut bytes = 0;
    while piece.len() < left && (piece.len() < PARALLEL_GRAIN || bytes < PIECE_BYTES) {
        match reader.next_record() {
            Ok(Some(record)) => {
                bytes += record.size_hint();
                piece.push(record);
            }
            Ok(None) => return (piece, bytes, true, None),
            Err(e) => return (piece, bytes, false, Some(e)),
        }
    }
    let ended = piece.len() == left;
    (piece, bytes, ended, None)
}

/// What the jobs of a load share.
struct PieceContext<'a> {
    tokenizer: &'a ChatTokenizer,
    settings: Option<&'a RowSettings<'a>>,
    converter: &'a Converter,
    shown: &'a str,
    container: crate::input::Container,
    /// Every key seen: a record whose key an earlier record claimed leaves its row to the merge,
    /// which copies that record's row (or builds this one if that row failed).
    keys: Keys,
    /// Set when the load fails: the jobs still queued skip their work.
    stop: AtomicBool,
}

/// A piece's records as its job left them, in file order.
struct PieceBuild {
    base: usize,
    building: bool,
    outcomes: Vec<LineOutcome>,
    rows: Vec<Option<SftResult<TokenizedRow>>>,
}

impl PieceContext<'_> {
    /// Parses, keys and builds a piece's records (the first at `base`), all on one thread, so
    /// that a piece's values are still in cache when they are rendered and are freed by the
    /// thread that made them. The piece's keys are claimed under one lock of the map. The first
    /// parse error in the piece fails it.
    fn build(&self, piece: Vec<RawRecord>, base: usize, building: bool) -> SftResult<PieceBuild> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(not_built());
        }
        let mut outcomes = Vec::with_capacity(piece.len());
        for (k, raw) in piece.into_iter().enumerate() {
            outcomes.push(self.outcome(raw, base + k)?);
        }
        let building = building && !self.stop.load(Ordering::Relaxed);
        let claims = if building {
            claim_piece(&self.keys, &outcomes, base)
        } else {
            Vec::new()
        };
        let rows = outcomes
            .iter_mut()
            .enumerate()
            .map(|(k, outcome)| {
                let LineOutcome::Valid { example, at, .. } = outcome else {
                    return None;
                };
                match claims.get(k) {
                    Some(Claim::Build) => {
                        let example = example.take()?;
                        Some(build_one(
                            self.tokenizer,
                            self.settings,
                            example,
                            base + k,
                            self.shown,
                            *at,
                        ))
                    }
                    // The merge copies a row merged whole: the example is not needed.
                    Some(Claim::Merged) => {
                        *example = None;
                        None
                    }
                    // Kept for the merge, which copies an earlier row or builds it.
                    Some(Claim::Held) | None => None,
                }
            })
            .collect();
        Ok(PieceBuild {
            base,
            building,
            outcomes,
            rows,
        })
    }

    /// A record's `train`/`weight` flags are checked with the record, so that a bad flag fails
    /// the load naming its line whatever `dropUnrenderable` says (the row build checks them
    /// again, for the datasets that build rows without a load).
    fn check_flags(&self, example: &SftExample) -> SftResult<()> {
        let Some(first) = first_flagged(example)? else {
            return Ok(());
        };
        match self.settings {
            Some(settings) => {
                check_flags_supported(first, settings.masking, settings.completion_only)
            }
            None => Ok(()),
        }
    }

    /// One record parsed, converted and validated, its example kept.
    fn outcome(&self, raw: RawRecord, index: usize) -> SftResult<LineOutcome> {
        let at = raw.at;
        let record = raw.parse(self.shown, self.container)?;
        let converted = self
            .converter
            .convert(record, index)
            .and_then(|(record, read_as)| Ok((validate_record(record, index)?, read_as)))
            .and_then(|(example, read_as)| {
                self.check_flags(&example)
                    .map_err(|e| e.context(format_args!("SFT example {index}")))?;
                Ok((example, read_as))
            });
        let (example, read_as) = match converted {
            Ok(valid) => valid,
            Err(e) => return Ok(LineOutcome::Invalid(e.at(self.shown, at))),
        };
        Ok(LineOutcome::Valid {
            format: example.format(),
            read_as,
            key: duplicate_key(&example),
            distilled: example.has_distill(),
            example: Some(example),
            at,
        })
    }
}

/// The rows merged so far, in file order, and what the merge has learned about the file.
struct Merge<'a> {
    /// The rows packed so far, then the merged rows not packed yet.
    rows: RowSink<'a>,
    pending: Vec<SftResult<TokenizedRow>>,
    /// The token ids of the pending rows.
    pending_ids: usize,
    first_invalid: Option<SftError>,
    format: Option<Format>,
    first_inconsistent: Option<(usize, Format, Location)>,
    read_as_first: Option<DatasetFormat>,
    losses: LossSummary,
}

impl<'a> Merge<'a> {
    fn new(rows: RowSink<'a>) -> Self {
        Merge {
            rows,
            pending: Vec::new(),
            pending_ids: 0,
            first_invalid: None,
            format: None,
            first_inconsistent: None,
            read_as_first: None,
            losses: LossSummary::default(),
        }
    }

    /// Appends a piece's rows: the first invalid record and the first of another format are
    /// noted, a repeat gets a copy of its source's row (built here if that row failed), and
    /// every row's silent losses are counted.
    fn piece(&mut self, context: &PieceContext, build: PieceBuild) -> SftResult<()> {
        let PieceBuild {
            base,
            building,
            outcomes,
            rows: mut fresh,
        } = build;
        let sources = if building {
            row_sources(&outcomes, base, &lock_keys(&context.keys))
        } else {
            Vec::new()
        };
        // Where each whole row sits in `pending`, its key, and the record its repeats copy.
        let mut merged = Vec::with_capacity(outcomes.len());
        for (k, outcome) in outcomes.into_iter().enumerate() {
            let index = base + k;
            let (f, read_as, key, distilled, example, at) = match outcome {
                LineOutcome::Invalid(e) => {
                    self.first_invalid.get_or_insert(e);
                    self.pending.push(Err(not_built()));
                    continue;
                }
                LineOutcome::Valid {
                    format,
                    read_as,
                    key,
                    distilled,
                    example,
                    at,
                } => (format, read_as, key, distilled, example, at),
            };
            match self.read_as_first {
                None => self.read_as_first = Some(read_as),
                Some(first) if !Converter::compatible(first, read_as) && self.format == Some(f) => {
                    self.first_invalid
                        .get_or_insert(mixed_formats(first, index, read_as).at(context.shown, at));
                }
                _ => {}
            }
            match self.format {
                None => self.format = Some(f),
                Some(first) if first != f && self.first_inconsistent.is_none() => {
                    self.first_inconsistent = Some((index, f, at))
                }
                _ => {}
            }
            // A source whose row failed is no source: this example is built here, and fails
            // with its own index (unless its job built it already, having claimed the key before
            // its source did).
            let copied = match sources.get(k) {
                Some(&Source::Copy(from)) => self.row(from)?,
                _ => None,
            };
            let row = match (copied, fresh[k].take(), example) {
                (Some(row), _, _) => Ok(row),
                (None, Some(row), _) => row,
                (None, None, Some(example)) if building => build_one(
                    context.tokenizer,
                    context.settings,
                    example,
                    index,
                    context.shown,
                    at,
                ),
                (None, None, _) => Err(not_built()),
            };
            if row.is_ok() {
                let reusable = match u32::try_from(index) {
                    Ok(index) if !distilled && index < UNMERGED => index,
                    _ => NO_SOURCE,
                };
                merged.push((self.pending.len(), key, reusable));
            }
            self.pending_ids += row.as_ref().map_or(0, |row| row.ids.len());
            self.pending.push(row);
        }
        // The piece's whole rows, in order, under one lock of the map: the first row with a
        // key becomes the one its repeats copy; a later one is marked as a repeat.
        if !merged.is_empty() {
            let mut keys = lock_keys(&context.keys);
            let first = self.rows.len();
            for (at, key, reusable) in merged {
                let state = keys.entry(key).or_insert(UNSEEN);
                let repeat = state.source != UNMERGED;
                if !repeat {
                    state.source = reusable;
                }
                if let Ok(row) = &mut self.pending[at] {
                    if repeat {
                        row.mark_loss(LossKind::DuplicateExample)
                    }
                    self.losses.add(first + at, row.stats().losses);
                }
            }
        }
        Ok(())
    }

    /// A copy of merged row `index` when it came out whole.
    fn row(&mut self, index: usize) -> SftResult<Option<TokenizedRow>> {
        match index.checked_sub(self.rows.len()) {
            Some(k) => Ok(self
                .pending
                .get(k)
                .and_then(|row| row.as_ref().ok().cloned())),
            None => self.rows.row(index),
        }
    }

    /// Packs the pending rows that fill a block (all of them when `all`) and reports the
    /// progress.
    fn pack(&mut self, options: &LoadOptions, bytes: u64, all: bool) -> SftResult<()> {
        let before = self.rows.len();
        self.rows.push_blocks(&mut self.pending, PACK, all)?;
        if self.rows.len() == before {
            return Ok(());
        }
        self.pending_ids = self
            .pending
            .iter()
            .map(|row| row.as_ref().map_or(0, |row| row.ids.len()))
            .sum();
        if let Some(report) = &options.on_progress {
            report(LoadProgress {
                waiting: false,
                records: self.rows.len(),
                bytes,
            });
        }
        Ok(())
    }
}

/// Which valid records of a piece (the first at `base`) are built and which copy an earlier row:
/// a record copies the first one with its key, in an earlier piece (merged whole: its `source` in
/// `keys`) or in this one, when neither carries distillation targets (the only part of an example
/// its key leaves out).
fn row_sources(
    outcomes: &[LineOutcome],
    base: usize,
    keys: &FxHashMap<ExampleKey, KeyState>,
) -> Vec<Source> {
    let mut first_here = rustc_hash::FxHashMap::<ExampleKey, usize>::with_capacity_and_hasher(
        outcomes.len(),
        Default::default(),
    );
    outcomes
        .iter()
        .enumerate()
        .map(|(k, outcome)| match outcome {
            LineOutcome::Valid {
                key,
                distilled: false,
                ..
            } => {
                match keys.get(key) {
                    Some(state) if state.source < UNMERGED => {
                        return Source::Copy(state.source as usize)
                    }
                    _ => {}
                }
                match first_here.entry(*key) {
                    std::collections::hash_map::Entry::Occupied(e) => Source::Copy(*e.get()),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(base + k);
                        Source::Build
                    }
                }
            }
            _ => Source::Build,
        })
        .collect()
}

/// What a record's job does with its example.
enum Claim {
    /// Builds its row: the record claimed its key first, or carries distillation targets.
    Build,
    /// Drops it: a row with its key is merged whole, and the merge copies that row.
    Merged,
    /// Keeps it for the merge: an earlier record claimed the key and its row is not merged yet
    /// (the merge copies that row or, if it failed, builds this one).
    Held,
}

/// Claims the keys of a piece's records (the first at `base`) under one lock of the map: a
/// record builds when no record before it holds its key (it then holds it).
fn claim_piece(keys: &Keys, outcomes: &[LineOutcome], base: usize) -> Vec<Claim> {
    let mut keys = lock_keys(keys);
    outcomes
        .iter()
        .enumerate()
        .map(|(k, outcome)| {
            let LineOutcome::Valid {
                key,
                distilled: false,
                ..
            } = outcome
            else {
                // Distilled: always built. Invalid: nothing to build.
                return Claim::Build;
            };
            let index = match u32::try_from(base + k) {
                Ok(index) if index < UNMERGED => index,
                // Past what the map holds: built, never copied.
                _ => return Claim::Build,
            };
            let state = keys.entry(*key).or_insert(UNSEEN);
            if state.source < UNMERGED {
                Claim::Merged
            } else if index < state.claim {
                state.claim = index;
                Claim::Build
            } else {
                Claim::Held
            }
        })
        .collect()
}

fn lock_keys(keys: &Keys) -> MutexGuard<'_, FxHashMap<ExampleKey, KeyState>> {
    keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Builds one record's row; template and message errors say which example they are about: the
/// record's index alongside the file and line.
fn build_one(
    tokenizer: &ChatTokenizer,
    settings: Option<&RowSettings>,
    example: SftExample,
    index: usize,
    shown: &str,
    at: Location,
) -> SftResult<TokenizedRow> {
    let Some(settings) = settings else {
        return Err(not_built());
    };
    build_row(tokenizer, settings, example)
        .map_err(|e| e.context(format_args!("SFT example {index}")).at(shown, at))
}

/// `format: 'auto'`: a record in another dataset format than record 0.
pub fn mixed_formats(first: DatasetFormat, index: usize, other: DatasetFormat) -> SftError {
    SftError::new(
        ErrorCode::InvalidExample,
        format!(
            "Inconsistent dataset format: example 0 is {}, example {index} is {} (format 'auto' reads a file in one format)",
            first.name(),
            other.name()
        ),
    )
}
