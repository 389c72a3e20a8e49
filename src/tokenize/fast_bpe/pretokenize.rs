//! Pre-tokenization: the chain of `Split(Regex, Isolated)` stages (plus the GPT-2 regex
//! when `ByteLevel.use_regex` is set), each applied to every piece the previous one
//! produced. Oniguruma is used with the same defaults as HF's `onig` feature, so the
//! matches are the same by construction.

use onig::Regex;

use super::gpt4_split::{Gpt4Split, RunSplit};
use super::o200k_split::O200kSplit;
use super::word_split::{DeepSeekSplit, WordSplit};

/// The split `ByteLevel` applies when `use_regex` is true.
pub(super) const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

enum Stage {
    Regex(Regex),
    /// The common GPT-4-style pattern, matched by hand (same pieces, several times
    /// faster than the regex engine).
    Gpt4(Gpt4Split),
    /// GPT-OSS's case-aware pattern, matched by hand.
    O200k(O200kSplit),
    Runs(RunSplit),
    /// DeepSeek V3's word stage, matched by hand.
    Words(WordSplit),
    /// DeepSeek V3's three stages, fused into one pass.
    DeepSeek(DeepSeekSplit),
}

pub(super) struct PreTokenizer {
    stages: Vec<Stage>,
}

impl PreTokenizer {
    /// How many stages run Oniguruma (the others are matched by hand).
    #[cfg(test)]
    pub(super) fn regex_stages(&self) -> usize {
        self.stages
            .iter()
            .filter(|s| matches!(s, Stage::Regex(_)))
            .count()
    }

    pub(super) fn new(patterns: &[String]) -> Result<Self, String> {
        if let Some(split) = DeepSeekSplit::for_patterns(patterns) {
            return Ok(Self {
                stages: vec![Stage::DeepSeek(split)],
            });
        }
        let stages = patterns
            .iter()
            .map(|p| {
                if let Some(split) = Gpt4Split::for_pattern(p) {
                    return Ok(Stage::Gpt4(split));
                }
                if let Some(split) = O200kSplit::for_pattern(p) {
                    return Ok(Stage::O200k(split));
                }
                if let Some(split) = RunSplit::for_pattern(p) {
                    return Ok(Stage::Runs(split));
                }
                if let Some(split) = WordSplit::for_pattern(p) {
                    return Ok(Stage::Words(split));
                }
                Regex::new(p)
                    .map(Stage::Regex)
                    .map_err(|e| format!("regex {p:?} does not compile: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { stages })
    }

    /// Replaces `out` with the non-empty pieces of `text` as byte ranges, in order.
    pub(super) fn split(
        &self,
        text: &str,
        out: &mut Vec<(usize, usize)>,
        tmp: &mut Vec<(usize, usize)>,
    ) {
        out.clear();
        if text.is_empty() {
            return;
        }
        out.push((0, text.len()));
        for stage in &self.stages {
            tmp.clear();
            for &(start, end) in out.iter() {
                let piece = &text[start..end];
                let regex = match stage {
                    Stage::Gpt4(split) => {
                        split.split(piece, start, tmp);
                        continue;
                    }
                    Stage::O200k(split) => {
                        split.split(piece, start, tmp);
                        continue;
                    }
                    Stage::Runs(split) => {
                        split.split(piece, start, tmp);
                        continue;
                    }
                    Stage::Words(split) => {
                        split.split(piece, start, tmp);
                        continue;
                    }
                    Stage::DeepSeek(split) => {
                        split.split(piece, start, tmp);
                        continue;
                    }
                    Stage::Regex(regex) => regex,
                };
                let mut last = 0;
                for (m_start, m_end) in regex.find_iter(piece) {
                    if m_start > last {
                        tmp.push((start + last, start + m_start));
                    }
                    if m_end > m_start {
                        tmp.push((start + m_start, start + m_end));
                    }
                    last = m_end;
                }
                if last < piece.len() {
                    tmp.push((start + last, end));
                }
            }
            std::mem::swap(out, tmp);
        }
    }
}
