//! Rows packed into blocks: the cache of a loaded dataset. A block holds the token ids of a few
//! thousand rows in one allocation, their trained ranges in another and, apart, the rare rows
//! that carry more (warnings, statistics, distillation targets) or failed to build. A row costs
//! its ids, 8 bytes of offsets and 8 bytes a trained range, and no allocation of its own, which
//! keeps files of millions of tiny examples close to the size of their tokens.
//!
//! The same blocks can live in a memory-mapped token cache entry (`token_cache`): their arrays
//! then point into the mapping, and a block's rare rows are decoded the first time one of its
//! rows is read, so memory grows only with the rows a trainer reads.

use std::marker::PhantomData;
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

use memmap2::Mmap;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::rows::{DropReason, RowExtra, RowStats, RowView, TokenizedRow};
use crate::tools::distill::RowDistill;

/// Offsets inside a block are `u32`: a block closes before its ids would overflow them.
const BLOCK_LIMIT: usize = u32::MAX as usize;

/// How large a block may grow: at most `ids` token ids (unless one row has more) and `rows`
/// rows.
#[derive(Clone, Copy)]
pub struct BlockBound {
    pub ids: usize,
    pub rows: usize,
}

impl BlockBound {
    const UNBOUNDED: BlockBound = BlockBound {
        ids: BLOCK_LIMIT,
        rows: usize::MAX,
    };
}

// Trained ranges are stored in a cache entry as (start, end) pairs of little-endian u32 and
// read in place as `Range<u32>`: that needs exactly this layout, checked when compiling.
const _: () = assert!(
    std::mem::size_of::<Range<u32>>() == 8
        && std::mem::align_of::<Range<u32>>() == 4
        && std::mem::offset_of!(Range<u32>, start) == 0
        && std::mem::offset_of!(Range<u32>, end) == 4
);

/// Element types that may be read in place from a mapping: plain data, every bit pattern valid.
pub trait Plain: 'static {}
impl Plain for u8 {}
impl Plain for u32 {}
impl Plain for Range<u32> {}

/// An array owned by the block, or a stretch of a mapped cache entry.
pub enum Slab<T: Plain> {
    Owned(Box<[T]>),
    Mapped {
        map: Arc<Mmap>,
        offset: usize,
        len: usize,
        elem: PhantomData<T>,
    },
}

impl<T: Plain> Slab<T> {
    /// `len` elements at `offset` of `map`; `None` when they do not fit or are misaligned.
    pub fn mapped(map: &Arc<Mmap>, offset: usize, len: usize) -> Option<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(bytes)?;
        let aligned = (map.as_ptr() as usize + offset).is_multiple_of(std::mem::align_of::<T>());
        (end <= map.len() && aligned).then(|| Slab::Mapped {
            map: map.clone(),
            offset,
            len,
            elem: PhantomData,
        })
    }
}

impl<T: Plain> Deref for Slab<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Slab::Owned(items) => items,
            // SAFETY: `mapped` checked bounds and alignment; `T: Plain` accepts any bits; the
            // mapping is read-only and lives as long as `map`, which `self` holds. Cache entries
            // are never written in place (writers rename new files over old names), so the
            // mapped bytes do not change under the reader.
            Slab::Mapped {
                map, offset, len, ..
            } => unsafe { std::slice::from_raw_parts(map.as_ptr().add(*offset).cast(), *len) },
        }
    }
}

/// The rows of a block that carry more than ids and ranges, or failed to build.
#[derive(Default)]
struct RareRows {
    /// Local row index and its extra part, sorted by index.
    extras: Box<[(u32, RowExtra)]>,
    /// Rows whose extra part holds nothing but silent-loss bits (a duplicate example, a control
    /// token in a content): local row index and the bits, sorted by index. A file of many copies
    /// of a few examples then costs 8 bytes a copy here instead of a whole extra part.
    losses: Box<[(u32, u8)]>,
    /// Local row index and why it could not be built, sorted by index.
    failures: Box<[(u32, SftError)]>,
}

impl RareRows {
    /// Sorts `extras` (in local order) into full extra parts and loss bits.
    fn new(extras: Vec<(u32, RowExtra)>, failures: Vec<(u32, SftError)>) -> Self {
        let (mut full, mut losses) = (Vec::new(), Vec::new());
        for (local, extra) in extras {
            match only_losses(&extra) {
                Some(bits) => losses.push((local, bits)),
                None => full.push((local, extra)),
            }
        }
        RareRows {
            extras: full.into(),
            losses: losses.into(),
            failures: failures.into(),
        }
    }

    fn extra(&self, local: u32) -> Option<&RowExtra> {
        if let Ok(k) = self.extras.binary_search_by_key(&local, |(i, _)| *i) {
            return Some(&self.extras[k].1);
        }
        self.losses
            .binary_search_by_key(&local, |(i, _)| *i)
            .ok()
            .map(|k| loss_extra(self.losses[k].1))
    }

    /// Every row's extra part, full or loss bits alone, in local order.
    fn all_extras(&self) -> impl Iterator<Item = (u32, &RowExtra)> {
        let mut full = self.extras.iter().map(|(i, e)| (*i, e)).peekable();
        let mut bits = self
            .losses
            .iter()
            .map(|&(i, b)| (i, loss_extra(b)))
            .peekable();
        std::iter::from_fn(move || match (full.peek(), bits.peek()) {
            (Some(f), Some(b)) if b.0 < f.0 => bits.next(),
            (Some(_), _) => full.next(),
            (None, _) => bits.next(),
        })
    }
}

/// The loss bits of an extra part that holds nothing else.
fn only_losses(extra: &RowExtra) -> Option<u8> {
    let bits = extra.stats.losses;
    (bits != 0 && *extra == *loss_extra(bits)).then_some(bits)
}

/// The extra part of a row with loss bits `bits` and nothing else, shared by all such rows.
fn loss_extra(bits: u8) -> &'static RowExtra {
    static TABLE: OnceLock<Vec<RowExtra>> = OnceLock::new();
    &TABLE.get_or_init(|| {
        (0..=u8::MAX)
            .map(|losses| RowExtra {
                stats: RowStats {
                    losses,
                    ..RowStats::NONE
                },
                ..RowExtra::default()
            })
            .collect()
    })[bits as usize]
}

enum Rare {
    Built(RareRows),
    /// Encoded bytes of a cache entry, decoded on the block's first read.
    Mapped {
        bytes: Slab<u8>,
        decoded: OnceLock<Result<RareRows, SftError>>,
    },
}

struct RowBlock {
    /// Index of the block's first row in the dataset.
    first: usize,
    ids: Slab<u32>,
    /// End of row k's ids in `ids` (its start is the previous end).
    id_ends: Slab<u32>,
    spans: Slab<Range<u32>>,
    span_ends: Slab<u32>,
    rare: Rare,
}

impl RowBlock {
    fn rows(&self) -> usize {
        self.id_ends.len()
    }

    fn rare(&self) -> Result<&RareRows, &SftError> {
        match &self.rare {
            Rare::Built(rare) => Ok(rare),
            Rare::Mapped { bytes, decoded } => decoded
                .get_or_init(|| {
                    decode_rare(bytes).map_err(|e| {
                        SftError::new(
                            ErrorCode::Internal,
                            format!("token cache entry: rows {}..: {e}", self.first),
                        )
                    })
                })
                .as_ref(),
        }
    }

    fn get(&self, local: usize) -> Result<RowView<'_>, &SftError> {
        let key = local as u32;
        let rare = self.rare()?;
        if let Ok(k) = rare.failures.binary_search_by_key(&key, |(i, _)| *i) {
            return Err(&rare.failures[k].1);
        }
        let range = |ends: &[u32]| {
            let start = if local == 0 { 0 } else { ends[local - 1] };
            start as usize..ends[local] as usize
        };
        let extra = rare.extra(key);
        Ok(RowView {
            ids: &self.ids[range(&self.id_ends)],
            spans: &self.spans[range(&self.span_ends)],
            extra,
        })
    }
}

/// Every row of a dataset, in example order, packed.
#[derive(Default)]
pub struct PackedRows {
    blocks: Vec<RowBlock>,
    len: usize,
}

impl PackedRows {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends rows (the next ones in example order) as one or more new blocks; each row's own
    /// allocations are freed as it is copied in.
    pub fn push_rows(&mut self, mut rows: Vec<SftResult<TokenizedRow>>) {
        self.push_blocks(&mut rows, BlockBound::UNBOUNDED, true);
    }

    /// Appends the leading rows of `rows` (the next ones in example order) as blocks within
    /// `bound`, leaving in `rows` (capacity kept) those that do not fill a block yet, or none
    /// when `all`. A row larger than the bound makes a block of its own.
    pub fn push_blocks(
        &mut self,
        rows: &mut Vec<SftResult<TokenizedRow>>,
        bound: BlockBound,
        all: bool,
    ) {
        let ids = bound.ids.min(BLOCK_LIMIT);
        // Each block's rows, ids and trained ranges.
        let mut blocks = Vec::new();
        let (mut count, mut id_count, mut span_count) = (0usize, 0usize, 0usize);
        for row in rows.iter() {
            let (i, s) = row
                .as_ref()
                .map_or((0, 0), |r| (r.ids.len(), r.spans.len()));
            if count > 0
                && (id_count + i > ids || span_count + s > BLOCK_LIMIT || count == bound.rows)
            {
                blocks.push((count, id_count, span_count));
                (count, id_count, span_count) = (0, 0, 0);
            }
            count += 1;
            id_count += i;
            span_count += s;
        }
        if all && count > 0 {
            blocks.push((count, id_count, span_count));
        }
        let taken: usize = blocks.iter().map(|&(count, _, _)| count).sum();
        let mut rest = rows.drain(..taken);
        for (count, id_count, span_count) in blocks {
            self.push_block(rest.by_ref().take(count), count, id_count, span_count);
        }
    }

    fn push_block(
        &mut self,
        rows: impl Iterator<Item = SftResult<TokenizedRow>>,
        row_count: usize,
        id_count: usize,
        span_count: usize,
    ) {
        let mut block_ids = Vec::with_capacity(id_count);
        let mut block_spans = Vec::with_capacity(span_count);
        let mut id_ends = Vec::with_capacity(row_count);
        let mut span_ends = Vec::with_capacity(row_count);
        let mut extras = Vec::new();
        let mut failures = Vec::new();
        for (local, row) in rows.enumerate() {
            match row {
                Ok(row) => {
                    block_ids.extend_from_slice(&row.ids);
                    block_spans.extend_from_slice(&row.spans);
                    if let Some(extra) = row.extra {
                        extras.push((local as u32, *extra));
                    }
                }
                Err(e) => failures.push((local as u32, e)),
            }
            // Both counts stay within BLOCK_LIMIT, checked by `push_blocks`.
            id_ends.push(block_ids.len() as u32);
            span_ends.push(block_spans.len() as u32);
        }
        let block = RowBlock {
            first: self.len,
            ids: Slab::Owned(block_ids.into()),
            id_ends: Slab::Owned(id_ends.into()),
            spans: Slab::Owned(block_spans.into()),
            span_ends: Slab::Owned(span_ends.into()),
            rare: Rare::Built(RareRows::new(extras, failures)),
        };
        self.len += block.rows();
        self.blocks.push(block);
    }

    /// Row `index`; `index` must be below `len()`.
    pub fn get(&self, index: usize) -> Result<RowView<'_>, &SftError> {
        let b = self.blocks.partition_point(|b| b.first <= index) - 1;
        let block = &self.blocks[b];
        block.get(index - block.first)
    }
}

/// A block's arrays as a cache entry stores them; `rare` is the encoded rare rows.
pub struct BlockParts<'a> {
    pub ids: &'a [u32],
    pub id_ends: &'a [u32],
    pub spans: &'a [Range<u32>],
    pub span_ends: &'a [u32],
    pub rare: Vec<u8>,
}

/// A block's arrays in a mapped cache entry.
pub struct MappedBlock {
    pub ids: Slab<u32>,
    pub id_ends: Slab<u32>,
    pub spans: Slab<Range<u32>>,
    pub span_ends: Slab<u32>,
    pub rare: Slab<u8>,
}

impl PackedRows {
    /// Each block's arrays, for writing a cache entry.
    pub fn block_parts(&self) -> impl Iterator<Item = SftResult<BlockParts<'_>>> {
        self.blocks.iter().map(|b| {
            Ok(BlockParts {
                ids: &b.ids,
                id_ends: &b.id_ends,
                spans: &b.spans,
                span_ends: &b.span_ends,
                rare: encode_rare(b.rare().map_err(Clone::clone)?),
            })
        })
    }

    /// Rows read in place from a cache entry. The ends are checked here, so that a row's ids and
    /// ranges always slice within their block (the entry's checksum vouches for the rest).
    pub fn from_mapped(blocks: Vec<MappedBlock>) -> Result<Self, String> {
        let mut rows = PackedRows::default();
        for (k, b) in blocks.into_iter().enumerate() {
            let ends_fit = |ends: &[u32], len: usize| {
                ends.windows(2).all(|w| w[0] <= w[1])
                    && ends.last().map_or(0, |&e| e as usize) == len
            };
            if b.id_ends.len() != b.span_ends.len()
                || !ends_fit(&b.id_ends, b.ids.len())
                || !ends_fit(&b.span_ends, b.spans.len())
            {
                return Err(format!("block {k} has inconsistent offsets"));
            }
            let block = RowBlock {
                first: rows.len,
                ids: b.ids,
                id_ends: b.id_ends,
                spans: b.spans,
                span_ends: b.span_ends,
                rare: Rare::Mapped {
                    bytes: b.rare,
                    decoded: OnceLock::new(),
                },
            };
            rows.len += block.rows();
            rows.blocks.push(block);
        }
        Ok(rows)
    }
}

/// Little-endian fields of the rare-row encoding.
struct Encoder(Vec<u8>);

impl Encoder {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn len(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u64).to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
}

fn encode_rare(rare: &RareRows) -> Vec<u8> {
    let mut e = Encoder(Vec::new());
    e.len(rare.extras.len() + rare.losses.len());
    for (local, extra) in rare.all_extras() {
        // Destructured in full: a field added to a row's extra part must be cached too (and
        // `token_cache::ROW_FORMAT_VERSION` bumped), or this stops compiling.
        let RowExtra {
            warning,
            stats,
            distill,
        } = extra;
        let RowStats {
            tokens_cut,
            messages_dropped,
            prefix_mismatches,
            content_mismatches,
            straddling,
            dropped,
            losses,
        } = stats;
        e.u32(local);
        match warning {
            None => e.0.push(0),
            Some(w) => {
                e.0.push(1);
                e.str(w);
            }
        }
        for v in [
            *tokens_cut,
            *messages_dropped,
            *prefix_mismatches,
            *straddling,
        ] {
            e.u32(v);
        }
        e.len(content_mismatches.len());
        content_mismatches.iter().for_each(|&m| e.u32(m));
        e.0.push(match dropped {
            None => 0,
            Some(DropReason::TooLong) => 1,
            Some(DropReason::Untrainable) => 2,
            // An unrenderable example has no row: it is stored as a failure.
            Some(DropReason::Unrenderable) => 3,
            // Duplicates are dropped by the dataset, never in a stored row.
            Some(DropReason::Duplicate) => 4,
            Some(DropReason::OtherPart) => 5,
        });
        e.0.push(*losses);
        match distill {
            None => e.0.push(0),
            Some(RowDistill { k, ids, logprobs }) => {
                e.0.push(1);
                e.len(*k);
                e.len(ids.len());
                ids.iter().for_each(|&id| e.u32(id as u32));
                e.len(logprobs.len());
                logprobs.iter().for_each(|&p| e.u32(p.to_bits()));
            }
        }
    }
    e.len(rare.failures.len());
    for (local, error) in rare.failures.iter() {
        e.u32(*local);
        e.str(error.code.as_str());
        e.str(&error.message);
    }
    e.0
}

struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err("rare rows end early".to_string());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn len(&mut self) -> Result<usize, String> {
        let b = self.take(8)?;
        let mut v = [0; 8];
        v.copy_from_slice(b);
        usize::try_from(u64::from_le_bytes(v)).map_err(|e| e.to_string())
    }
    /// A count of items of at least `size` bytes each, checked against what is left.
    fn count(&mut self, size: usize) -> Result<usize, String> {
        let n = self.len()?;
        if n.saturating_mul(size) > self.0.len() {
            return Err("rare rows count more items than they hold".to_string());
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<String, String> {
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|e| e.to_string())
    }
}

fn decode_rare(bytes: &[u8]) -> Result<RareRows, String> {
    let mut d = Decoder(bytes);
    let n = d.count(23)?;
    let mut extras = Vec::with_capacity(n);
    for _ in 0..n {
        let local = d.u32()?;
        let warning = match d.u8()? {
            0 => None,
            _ => Some(d.str()?.into_boxed_str()),
        };
        let [tokens_cut, messages_dropped, prefix_mismatches, straddling] =
            [d.u32()?, d.u32()?, d.u32()?, d.u32()?];
        let content_mismatches = (0..d.count(4)?)
            .map(|_| d.u32())
            .collect::<Result<_, _>>()?;
        let dropped = match d.u8()? {
            0 => None,
            1 => Some(DropReason::TooLong),
            2 => Some(DropReason::Untrainable),
            3 => Some(DropReason::Unrenderable),
            4 => Some(DropReason::Duplicate),
            5 => Some(DropReason::OtherPart),
            other => return Err(format!("unknown drop reason {other}")),
        };
        let losses = d.u8()?;
        let distill = match d.u8()? {
            0 => None,
            _ => {
                let k = d.len()?;
                let ids = (0..d.count(4)?)
                    .map(|_| d.u32().map(|v| v as i32))
                    .collect::<Result<_, _>>()?;
                let logprobs = (0..d.count(4)?)
                    .map(|_| d.u32().map(f32::from_bits))
                    .collect::<Result<_, _>>()?;
                Some(RowDistill { k, ids, logprobs })
            }
        };
        let stats = RowStats {
            tokens_cut,
            messages_dropped,
            prefix_mismatches,
            content_mismatches,
            straddling,
            dropped,
            losses,
        };
        extras.push((
            local,
            RowExtra {
                warning,
                stats,
                distill,
            },
        ));
    }
    let n = d.count(20)?;
    let mut failures = Vec::with_capacity(n);
    for _ in 0..n {
        let local = d.u32()?;
        let name = d.str()?;
        let code =
            ErrorCode::from_name(&name).ok_or_else(|| format!("unknown error code {name}"))?;
        failures.push((local, SftError::new(code, d.str()?)));
    }
    if !d.0.is_empty() {
        return Err("rare rows have trailing bytes".to_string());
    }
    Ok(RareRows::new(extras, failures))
}

#[cfg(test)]
// One trained range per row is the common case, not a mistaken `Vec` of a range.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::rows::RowStats;

    fn row(ids: &[u32], spans: &[Range<u32>], warning: Option<&str>) -> TokenizedRow {
        TokenizedRow::new(
            ids.into(),
            spans.into(),
            warning.map(Into::into),
            RowStats::default(),
        )
    }

    #[test]
    fn bounded_blocks_close_before_a_row_that_does_not_fit() {
        let sizes = [3usize, 4, 2, 9, 1, 1, 1, 1, 2];
        let built: Vec<SftResult<TokenizedRow>> = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                if k == 5 {
                    return Err(SftError::new(ErrorCode::TemplateRender, "row 5"));
                }
                let ids: Vec<u32> = (0..n as u32).map(|i| 100 * k as u32 + i).collect();
                Ok(row(&ids, &[0..1], None))
            })
            .collect();
        let bound = BlockBound { ids: 8, rows: 3 };
        let mut packed = PackedRows::default();
        let mut pending = built.clone();
        packed.push_blocks(&mut pending, bound, false);
        // [3 4] (2 would make 9 ids), [2] (9 would make 11), [9] (alone, larger than the
        // bound), [err 1 1] (three rows); [1 2] does not fill a block yet and stays.
        let shape = |packed: &PackedRows| -> Vec<(usize, usize)> {
            packed.blocks.iter().map(|b| (b.first, b.rows())).collect()
        };
        assert_eq!(shape(&packed), [(0, 2), (2, 1), (3, 1), (4, 3)]);
        assert_eq!(pending.len(), 2);
        assert_eq!(pending[0], built[7]);
        packed.push_blocks(&mut pending, bound, true);
        assert_eq!(shape(&packed), [(0, 2), (2, 1), (3, 1), (4, 3), (7, 2)]);
        assert!(pending.is_empty());
        assert_eq!(packed.blocks[0].ids.len(), 7);
        for (i, expected) in built.iter().enumerate() {
            match (packed.get(i), expected) {
                (Ok(view), Ok(row)) => assert_eq!(view.to_row(), *row, "row {i}"),
                (Err(e), Err(x)) => assert_eq!(e, x),
                (got, _) => panic!("row {i}: {got:?}"),
            }
        }
    }

    #[test]
    fn rows_come_back_as_built_across_blocks() {
        let built = [
            Ok(row(&[1, 2, 3], &[1..3], None)),
            Ok(row(&[], &[], None)),
            Err(SftError::new(ErrorCode::TemplateRender, "boom")),
            Ok(row(&[7, 8], &[0..1, 1..2], Some("careful"))),
        ];
        let mut packed = PackedRows::default();
        packed.push_rows(built[..2].to_vec());
        packed.push_rows(built[2..].to_vec());
        assert_eq!(packed.len(), 4);
        assert_eq!(packed.blocks.len(), 2);
        for (i, expected) in built.iter().enumerate() {
            match (packed.get(i), expected) {
                (Ok(view), Ok(row)) => assert_eq!(view.to_row(), *row, "row {i}"),
                (Err(e), Err(x)) => assert_eq!(e, x),
                (got, _) => panic!("row {i}: {got:?}"),
            }
        }
        let view = packed.get(3).unwrap();
        assert_eq!(view.warning(), Some("careful"));
        assert_eq!(view.stats(), &RowStats::NONE);
        assert_eq!(packed.get(0).unwrap().extra, None);
    }

    #[test]
    fn rows_with_loss_bits_alone_share_one_extra_part_and_encode_as_before() {
        let with = |losses: u8, warning: Option<&str>| {
            let stats = RowStats {
                losses,
                ..RowStats::NONE
            };
            TokenizedRow::new([5, 6].into(), [0..1].into(), warning.map(Into::into), stats)
        };
        let built = vec![
            Ok(with(0b1000, None)),
            Ok(with(0b1000, Some("w"))),
            Ok(with(0, None)),
            Ok(with(0b10001, None)),
            Err(SftError::new(ErrorCode::TemplateRender, "boom")),
        ];
        let mut packed = PackedRows::default();
        packed.push_rows(built.clone());
        let Rare::Built(rare) = &packed.blocks[0].rare else {
            unreachable!()
        };
        assert_eq!(rare.extras.len(), 1);
        assert_eq!(&rare.losses[..], &[(0, 0b1000), (3, 0b10001)]);
        for (i, expected) in built.iter().enumerate() {
            match (packed.get(i), expected) {
                (Ok(view), Ok(row)) => assert_eq!(view.to_row(), *row, "row {i}"),
                (Err(e), Err(x)) => assert_eq!(e, x),
                (got, _) => panic!("row {i}: {got:?}"),
            }
        }
        // The cache encoding lists every extra part in row order, as a full one.
        let bytes = encode_rare(rare);
        let back = decode_rare(&bytes).unwrap();
        assert_eq!(back.extras.len(), 1);
        assert_eq!(&back.losses[..], &rare.losses[..]);
        let all: Vec<u32> = back.all_extras().map(|(i, _)| i).collect();
        assert_eq!(all, vec![0, 1, 3]);
    }

    #[test]
    fn plain_rows_allocate_no_extra_part() {
        let plain = row(&[1], &[0..1], None);
        assert!(plain.extra.is_none());
        assert!(row(&[1], &[0..1], Some("w")).extra.is_some());
    }
}
