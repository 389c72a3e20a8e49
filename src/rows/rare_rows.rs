//! The rows of a block that carry more than ids and trained ranges (warnings, statistics,
//! distillation targets) or failed to build, and their encoding in a stored block (a token cache
//! entry, or the file a load writes its rows to beyond its memory budget).

use std::ops::Range;
use std::sync::OnceLock;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::rows::{DropReason, RowExtra, RowStats, TokenizedRow};
use crate::tools::distill::RowDistill;

/// The rows of a block that carry more than ids and ranges, or failed to build.
#[derive(Default)]
pub struct RareRows {
    /// Local row index and its extra part, sorted by index.
    pub(super) extras: Box<[(u32, RowExtra)]>,
    /// Rows whose extra part holds nothing but silent-loss bits (a duplicate example, a control
    /// token in a content): local row index and the bits, sorted by index. A file of many copies
    /// of a few examples then costs 8 bytes a copy here instead of a whole extra part.
    pub(super) losses: Box<[(u32, u8)]>,
    /// Local row index and why it could not be built, sorted by index.
    pub(super) failures: Box<[(u32, SftError)]>,
}

impl RareRows {
    /// Sorts `extras` (in local order) into full extra parts and loss bits.
    pub fn new(extras: Vec<(u32, RowExtra)>, failures: Vec<(u32, SftError)>) -> Self {
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

    /// What the rows take in memory, their own allocations included.
    pub fn heap_bytes(&self) -> usize {
        let extra = |e: &RowExtra| {
            std::mem::size_of::<(u32, RowExtra)>()
                + e.warning.as_ref().map_or(0, |w| w.len())
                + e.stats.content_mismatches.len() * 4
                + e.distill
                    .as_ref()
                    .map_or(0, |d| (d.ids.len() + d.logprobs.len()) * 4)
        };
        self.extras.iter().map(|(_, e)| extra(e)).sum::<usize>()
            + std::mem::size_of_val::<[(u32, u8)]>(&self.losses)
            + self
                .failures
                .iter()
                .map(|(_, e)| std::mem::size_of::<(u32, SftError)>() + e.message.len())
                .sum::<usize>()
    }

    /// Why row `local` could not be built, if it could not.
    pub fn failure(&self, local: u32) -> Option<&SftError> {
        self.failures
            .binary_search_by_key(&local, |(i, _)| *i)
            .ok()
            .map(|k| &self.failures[k].1)
    }

    /// Row `local` from its ids and trained ranges, its extra part or its failure added.
    pub fn row(
        &self,
        local: u32,
        ids: Box<[u32]>,
        spans: Box<[Range<u32>]>,
    ) -> SftResult<TokenizedRow> {
        if let Some(e) = self.failure(local) {
            return Err(e.clone());
        }
        Ok(TokenizedRow {
            ids,
            spans,
            extra: self.extra(local).map(|e| Box::new(e.clone())),
        })
    }

    pub fn extra(&self, local: u32) -> Option<&RowExtra> {
        if let Ok(k) = self.extras.binary_search_by_key(&local, |(i, _)| *i) {
            return Some(&self.extras[k].1);
        }
        self.losses
            .binary_search_by_key(&local, |(i, _)| *i)
            .ok()
            .map(|k| loss_extra(self.losses[k].1))
    }

    /// Every row's extra part, full or loss bits alone, in local order.
    pub(super) fn all_extras(&self) -> impl Iterator<Item = (u32, &RowExtra)> {
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

pub fn encode_rare(rare: &RareRows) -> Vec<u8> {
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

pub fn decode_rare(bytes: &[u8]) -> Result<RareRows, String> {
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
