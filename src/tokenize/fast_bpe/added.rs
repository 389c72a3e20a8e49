//! Added tokens: found before pre-tokenization and never split.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

/// One leftmost-longest matcher, as HF builds one for the tokens matched on the raw
/// text and one for those matched on the normalized text.
pub(super) struct AddedMatcher {
    automaton: Option<AhoCorasick>,
    ids: Vec<u32>,
}

pub(super) enum Piece {
    Text(usize, usize),
    Added(u32, usize, usize),
}

impl AddedMatcher {
    pub(super) fn new(patterns: Vec<(String, u32)>) -> Result<Self, String> {
        if patterns.is_empty() {
            return Ok(Self::none());
        }
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(patterns.iter().map(|(p, _)| p.as_str()))
            .map_err(|e| e.to_string())?;
        Ok(Self {
            automaton: Some(automaton),
            ids: patterns.into_iter().map(|(_, id)| id).collect(),
        })
    }

    /// A matcher of no tokens: the whole text is one piece.
    pub(super) fn none() -> Self {
        Self {
            automaton: None,
            ids: Vec::new(),
        }
    }

    /// Calls `each` with the pieces of `text` in order; text pieces are never empty.
    pub(super) fn split(&self, text: &str, mut each: impl FnMut(Piece)) {
        let Some(automaton) = &self.automaton else {
            if !text.is_empty() {
                each(Piece::Text(0, text.len()));
            }
            return;
        };
        let mut last = 0;
        for m in automaton.find_iter(text) {
            if m.start() > last {
                each(Piece::Text(last, m.start()));
            }
            each(Piece::Added(
                self.ids[m.pattern().as_usize()],
                m.start(),
                m.end(),
            ));
            last = m.end();
        }
        if last < text.len() {
            each(Piece::Text(last, text.len()));
        }
    }
}
