//! Label masks: which tokens carry loss. Every mask in the library is built here, as a list of
//! trained token ranges, and written out as labels (`-100` where no loss is taken, the token id
//! where it is).

use std::ops::Range;

/// The ignore index of cross-entropy loss.
pub const IGNORE_INDEX: i32 = -100;

/// Trained token ranges of one row, sorted and disjoint.
pub type TrainedSpans = Vec<Range<u32>>;

/// The length of the longest common prefix of two token sequences.
pub fn common_prefix_len(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The ids the reference's conversation scan keys on.
#[derive(Debug, Clone)]
pub struct ChatMlMarkers {
    pub im_start: u32,
    pub im_end: u32,
    /// `tokenToId('assistant')`; `None` never matches.
    pub assistant: Option<u32>,
    /// Newline ids that end the role header; empty for Qwen3 (its vocabulary spells `\n` as
    /// `Ċ`), which makes the scan take its fallback and train the header's newline.
    pub newlines: Vec<u32>,
}

/// The reference's conversation masking: after `<|im_start|>assistant` (and the header's
/// newline, when a newline id is known) every token up to, not including, `<|im_end|>` is
/// trained. Reproduced step for step, including how a second header inside an open assistant
/// region is treated.
pub fn chatml_assistant_spans(ids: &[u32], m: &ChatMlMarkers) -> TrainedSpans {
    let n = ids.len();
    let mut trained = vec![false; n];
    let mut in_assistant = false;
    let mut i = 0;
    while i < n {
        if ids[i] == m.im_start && i + 1 < n && Some(ids[i + 1]) == m.assistant {
            let mut j = i + 2;
            while j < n && ids[j] != m.im_end {
                if m.newlines.contains(&ids[j]) {
                    in_assistant = true;
                    i = j;
                    break;
                }
                j += 1;
            }
            if !in_assistant {
                in_assistant = true;
                i += 1;
            }
            i += 1;
            continue;
        }
        if in_assistant && ids[i] != m.im_end {
            trained[i] = true;
        }
        if ids[i] == m.im_end {
            in_assistant = false;
        }
        i += 1;
    }
    spans_from_flags(&trained)
}

/// Collapses per-token flags into ranges.
pub fn spans_from_flags(flags: &[bool]) -> TrainedSpans {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, &f) in flags.iter().enumerate() {
        match (f, start) {
            (true, None) => start = Some(i as u32),
            (false, Some(s)) => {
                spans.push(s..i as u32);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push(s..flags.len() as u32);
    }
    spans
}

/// Everything from `start` on is trained (prompt-completion with `completionOnly`).
pub fn spans_from(start: usize, len: usize) -> TrainedSpans {
    if start < len {
        std::iter::once(start as u32..len as u32).collect()
    } else {
        Vec::new()
    }
}

/// Labels for `ids[window]`: the id inside a trained span, `IGNORE_INDEX` elsewhere.
pub fn write_labels(ids: &[u32], spans: &[Range<u32>], window: Range<usize>, out: &mut [i32]) {
    out.fill(IGNORE_INDEX);
    for span in spans {
        let start = (span.start as usize).max(window.start);
        let end = (span.end as usize).min(window.end);
        for pos in start..end {
            out[pos - window.start] = ids[pos] as i32;
        }
    }
}

/// How many tokens of `window` the spans train.
pub fn trained_count(spans: &[Range<u32>], window: Range<usize>) -> usize {
    spans
        .iter()
        .map(|s| {
            let start = (s.start as usize).max(window.start);
            let end = (s.end as usize).min(window.end);
            end.saturating_sub(start)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u32 = 1; // <|im_start|>
    const E: u32 = 2; // <|im_end|>
    const A: u32 = 3; // assistant
    const U: u32 = 4; // user
    const NL: u32 = 5;

    fn markers(newlines: Vec<u32>) -> ChatMlMarkers {
        ChatMlMarkers {
            im_start: S,
            im_end: E,
            assistant: Some(A),
            newlines,
        }
    }

    fn labels(ids: &[u32], spans: &[Range<u32>]) -> Vec<i32> {
        let mut out = vec![0; ids.len()];
        write_labels(ids, spans, 0..ids.len(), &mut out);
        out
    }

    #[test]
    fn fallback_trains_the_header_newline() {
        let ids = [S, U, NL, 9, E, NL, S, A, NL, 7, 8, E, NL];
        let spans = chatml_assistant_spans(&ids, &markers(vec![]));
        assert_eq!(
            labels(&ids, &spans),
            vec![-100, -100, -100, -100, -100, -100, -100, -100, 5, 7, 8, -100, -100]
        );
    }

    #[test]
    fn known_newline_is_skipped() {
        let ids = [S, A, NL, 7, E, NL];
        let spans = chatml_assistant_spans(&ids, &markers(vec![NL]));
        assert_eq!(labels(&ids, &spans), vec![-100, -100, -100, 7, -100, -100]);
    }

    #[test]
    fn a_second_header_in_an_open_region_is_trained() {
        // No <|im_end|> between two assistant headers: the reference stays in the region and
        // labels the second `assistant` token.
        let ids = [S, A, 7, S, A, 8, E];
        let spans = chatml_assistant_spans(&ids, &markers(vec![]));
        assert_eq!(labels(&ids, &spans), vec![-100, -100, 7, -100, 3, 8, -100]);
    }

    #[test]
    fn windows_cut_spans() {
        let ids = [10, 11, 12, 13, 14];
        let mut out = vec![0; 3];
        write_labels(&ids, &spans_from(1, 5), 2..5, &mut out);
        assert_eq!(out, vec![12, 13, 14]);
        assert_eq!(trained_count(&spans_from(1, 5), 0..3), 2);
        assert_eq!(common_prefix_len(&[1, 2, 3], &[1, 2, 4, 5]), 2);
    }
}
