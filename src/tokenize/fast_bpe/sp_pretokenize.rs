//! Pre-tokenization for SentencePiece-style (char-level) BPE: `Split` on a literal string and
//! `Metaspace`, each reproducing HF's delimiter behaviours exactly. Neither looks at regex
//! classes, so no regex engine is involved: a literal pattern matches where
//! `str::match_indices` does (leftmost, non-overlapping), as HF's escaped regex does.

use std::borrow::Cow;

use super::normalize::{apply_edits, Edit};

/// HF's `SplitDelimiterBehavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Behavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

impl Behavior {
    pub(super) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "Removed" => Self::Removed,
            "Isolated" => Self::Isolated,
            "MergedWithPrevious" => Self::MergedWithPrevious,
            "MergedWithNext" => Self::MergedWithNext,
            "Contiguous" => Self::Contiguous,
            _ => return None,
        })
    }
}

/// Metaspace's `prepend_scheme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prepend {
    Always,
    /// Only on a piece that starts at the start of the input.
    First,
    Never,
}

pub(super) enum CharPreTokenizer {
    /// The whole piece is one word.
    None,
    Split {
        pattern: String,
        behavior: Behavior,
    },
    Metaspace {
        replacement: String,
        prepend: Prepend,
        split: bool,
    },
}

impl CharPreTokenizer {
    /// Whether `rewrite` needs to know where a piece starts in the input even when no offsets
    /// are asked for.
    pub(super) fn needs_origin(&self) -> bool {
        matches!(
            self,
            Self::Metaspace {
                prepend: Prepend::First,
                ..
            }
        )
    }

    /// Whether every text without `c` is left whole, as one word.
    pub(super) fn keeps_whole_without(&self, c: char) -> bool {
        match self {
            Self::None => true,
            Self::Split { pattern, .. } => pattern.contains(c),
            Self::Metaspace { .. } => false,
        }
    }

    /// Metaspace's rewrite of one piece (spaces to the replacement, the prefix replacement);
    /// `at_input_start` tells whether the piece starts at input offset 0. Other pre-tokenizers
    /// leave the piece as it is.
    pub(super) fn rewrite<'a>(
        &self,
        piece: &'a str,
        align: Option<Vec<(usize, usize)>>,
        at_input_start: bool,
    ) -> (Cow<'a, str>, Option<Vec<(usize, usize)>>) {
        let Self::Metaspace {
            replacement,
            prepend,
            ..
        } = self
        else {
            return (Cow::Borrowed(piece), align);
        };
        let mut edits = vec![Edit::Replace {
            pattern: " ".to_owned(),
            content: replacement.clone(),
        }];
        // HF checks the piece after the spaces were replaced.
        let starts_replaced = piece.starts_with(' ') || piece.starts_with(replacement.as_str());
        let prefix = match prepend {
            Prepend::Always => !starts_replaced,
            Prepend::First => !starts_replaced && at_input_start,
            Prepend::Never => false,
        };
        if prefix {
            edits.push(Edit::Prepend(replacement.clone()));
        }
        apply_edits(piece, align, &edits)
    }

    /// Replaces `out` with the non-empty words of `text` (already rewritten) as byte ranges.
    pub(super) fn split(&self, text: &str, out: &mut Vec<(usize, usize)>) {
        out.clear();
        match self {
            Self::None => {
                if !text.is_empty() {
                    out.push((0, text.len()));
                }
            }
            Self::Split { pattern, behavior } => split_on(text, pattern, *behavior, out),
            Self::Metaspace {
                replacement,
                split: true,
                ..
            } => split_on(text, replacement, Behavior::MergedWithNext, out),
            Self::Metaspace { .. } => {
                if !text.is_empty() {
                    out.push((0, text.len()));
                }
            }
        }
    }
}

/// HF's `NormalizedString::split` with a literal pattern: the text as alternating runs of
/// matches and gaps, regrouped by `behavior`; empty pieces are dropped as
/// `PreTokenizedString::split` drops them.
fn split_on(text: &str, pattern: &str, behavior: Behavior, out: &mut Vec<(usize, usize)>) {
    if text.is_empty() {
        return;
    }
    let mut runs: Vec<((usize, usize), bool)> = Vec::new();
    let mut last = 0;
    for (at, m) in text.match_indices(pattern) {
        if at > last {
            runs.push(((last, at), false));
        }
        runs.push(((at, at + m.len()), true));
        last = at + m.len();
    }
    if last < text.len() {
        runs.push(((last, text.len()), false));
    }
    let mut previous_match = false;
    match behavior {
        Behavior::Removed => out.extend(runs.iter().filter(|(_, m)| !m).map(|(r, _)| *r)),
        Behavior::Isolated => out.extend(runs.iter().map(|(r, _)| *r)),
        Behavior::Contiguous => {
            for &(range, is_match) in &runs {
                match out.last_mut() {
                    Some(last) if is_match == previous_match => last.1 = range.1,
                    _ => out.push(range),
                }
                previous_match = is_match;
            }
        }
        Behavior::MergedWithPrevious => {
            for &(range, is_match) in &runs {
                match out.last_mut() {
                    Some(last) if is_match && !previous_match => last.1 = range.1,
                    _ => out.push(range),
                }
                previous_match = is_match;
            }
        }
        Behavior::MergedWithNext => {
            for &(range, is_match) in runs.iter().rev() {
                match out.last_mut() {
                    Some(last) if is_match && !previous_match => last.0 = range.0,
                    _ => out.push(range),
                }
                previous_match = is_match;
            }
            out.reverse();
        }
    }
}
