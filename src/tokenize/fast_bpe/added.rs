//! Added tokens: found before pre-tokenization and never split.
//!
//! Tokenizers carry thousands of added tokens (Gemma 3 has 6,415), too many for the automaton's
//! own prefilters, so an unanchored search walks it at every byte of the text. Almost all of them
//! start with one of a few bytes (`<`, a newline, a tab), which are rare in text: the matcher
//! looks for those bytes first, a block at a time, and runs the automaton anchored only where
//! one is. The leftmost position where an anchored search matches, and its longest match there,
//! is the leftmost-longest match an unanchored search finds.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, Anchored, Input, MatchKind, StartKind};

/// One leftmost-longest matcher, as HF builds one for the tokens matched on the raw
/// text and one for those matched on the normalized text.
pub(super) struct AddedMatcher {
    /// The automaton, and the bytes its tokens start with; none for no tokens (made for every
    /// piece encoded without added tokens, so it allocates nothing).
    automaton: Option<(AhoCorasick, Starts)>,
    ids: Vec<u32>,
}

/// The bytes an added token starts with.
enum Starts {
    /// One to three of them (most tokenizers' added tokens all start with `<`): `memchr`.
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
    /// Up to `FEW` of them, the array padded by repeating one: compared with each byte of a
    /// block in a loop the compiler vectorizes.
    Few([u8; FEW]),
    /// Whether each byte starts one.
    Many(Box<[bool; 256]>),
}

const FEW: usize = 8;
/// Bytes tested together before looking for the one that matched.
const BLOCK: usize = 32;

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
            .start_kind(StartKind::Anchored)
            .build(patterns.iter().map(|(p, _)| p.as_str()))
            .map_err(|e| e.to_string())?;
        let mut firsts = [false; 256];
        for (p, _) in &patterns {
            // Patterns are never empty (`FastBpe::from_tokenizer_json` leaves those out).
            if let Some(&b) = p.as_bytes().first() {
                firsts[usize::from(b)] = true;
            }
        }
        let distinct: Vec<u8> = (0..=255u8).filter(|&b| firsts[usize::from(b)]).collect();
        let starts = match distinct[..] {
            [a] => Starts::One(a),
            [a, b] => Starts::Two(a, b),
            [a, b, c] => Starts::Three(a, b, c),
            [one, ..] if distinct.len() <= FEW => {
                let mut few = [one; FEW];
                few[..distinct.len()].copy_from_slice(&distinct);
                Starts::Few(few)
            }
            _ => Starts::Many(Box::new(firsts)),
        };
        Ok(Self {
            automaton: Some((automaton, starts)),
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

    pub(super) fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// Where, from `at`, the next byte that starts an added token is.
    #[inline]
    fn next_start(starts: &Starts, bytes: &[u8], mut at: usize) -> Option<usize> {
        match starts {
            Starts::One(a) => memchr::memchr(*a, &bytes[at..]).map(|k| at + k),
            Starts::Two(a, b) => memchr::memchr2(*a, *b, &bytes[at..]).map(|k| at + k),
            Starts::Three(a, b, c) => memchr::memchr3(*a, *b, *c, &bytes[at..]).map(|k| at + k),
            Starts::Few(few) => {
                while let Some(block) = bytes.get(at..at + BLOCK) {
                    let hit = block.iter().fold(0u8, |hit, &b| {
                        hit | few.iter().fold(0u8, |h, &s| h | u8::from(b == s))
                    });
                    if hit != 0 {
                        break;
                    }
                    at += BLOCK;
                }
                bytes[at..]
                    .iter()
                    .position(|b| few.contains(b))
                    .map(|k| at + k)
            }
            Starts::Many(firsts) => bytes[at..]
                .iter()
                .position(|&b| firsts[usize::from(b)])
                .map(|k| at + k),
        }
    }

    /// Calls `each` with the pieces of `text` in order; text pieces are never empty.
    pub(super) fn split(&self, text: &str, mut each: impl FnMut(Piece)) {
        let Some((automaton, starts)) = &self.automaton else {
            if !text.is_empty() {
                each(Piece::Text(0, text.len()));
            }
            return;
        };
        let bytes = text.as_bytes();
        let mut last = 0;
        let mut at = 0;
        while let Some(start) = Self::next_start(starts, bytes, at) {
            let input = Input::new(bytes).range(start..).anchored(Anchored::Yes);
            let Some(m) = automaton.find(input) else {
                at = start + 1;
                continue;
            };
            if m.start() > last {
                each(Piece::Text(last, m.start()));
            }
            each(Piece::Added(
                self.ids[m.pattern().as_usize()],
                m.start(),
                m.end(),
            ));
            last = m.end();
            at = last;
        }
        if last < text.len() {
            each(Piece::Text(last, text.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Rng;

    /// The pieces an unanchored leftmost-longest search gives.
    fn unanchored(patterns: &[(String, u32)], text: &str) -> Vec<(bool, u32, usize, usize)> {
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(patterns.iter().map(|(p, _)| p.as_str()))
            .unwrap();
        let mut out = Vec::new();
        let mut last = 0;
        for m in automaton.find_iter(text) {
            if m.start() > last {
                out.push((false, 0, last, m.start()));
            }
            out.push((true, patterns[m.pattern().as_usize()].1, m.start(), m.end()));
            last = m.end();
        }
        if last < text.len() {
            out.push((false, 0, last, text.len()));
        }
        out
    }

    #[test]
    fn pieces_are_those_of_an_unanchored_search() {
        // Few first bytes and many; tokens that are prefixes of others and overlap each other,
        // multi-byte first chars, texts long enough to cross blocks.
        let alphabet = [
            "<", ">", "a", "b", "\n", "\t", "▁", "é", "|", "x", "y", "z", "0", "1",
        ];
        let mut rng = Rng(0x05ee_dadd);
        for round in 0..400 {
            let used = if round % 2 == 0 { 4 } else { alphabet.len() };
            let patterns: Vec<(String, u32)> = (0..1 + rng.below(30))
                .map(|k| {
                    let text: String = (0..1 + rng.below(5))
                        .map(|_| alphabet[rng.below(used)])
                        .collect();
                    (text, k as u32)
                })
                .collect();
            let matcher = AddedMatcher::new(patterns.clone()).unwrap();
            for _ in 0..20 {
                let text: String = (0..rng.below(120))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                let mut got = Vec::new();
                matcher.split(&text, |piece| {
                    got.push(match piece {
                        Piece::Text(s, e) => (false, 0, s, e),
                        Piece::Added(id, s, e) => (true, id, s, e),
                    })
                });
                assert_eq!(
                    got,
                    unanchored(&patterns, &text),
                    "{patterns:?} on {text:?}"
                );
            }
        }
    }
}
