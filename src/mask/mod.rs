//! Stage 5, mask: tokens and the render in (`tokenize`), the trained token ranges out: the
//! reference's ChatML scan, message `spans` for any template, `truncation`, and the
//! `silent_loss` checks of what a template drops.
//!
//! Label masks: which tokens carry loss. Every mask in the library is built here, as a list of
//! trained token ranges, and written out as labels (`-100` where no loss is taken, the token id
//! where it is).

pub mod silent_loss;
pub mod spans;
mod text_search;
pub mod truncation;

use std::ops::Range;

use crate::mask::spans::MessageLayout;

/// The ignore index of cross-entropy loss.
pub const IGNORE_INDEX: i32 = -100;

/// Trained token ranges of one row, sorted and disjoint.
pub type TrainedSpans = Vec<Range<u32>>;

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
///
/// Only `<|im_start|>` and `<|im_end|>` change the scan's state, so it jumps from one of them to
/// the next: the tokens between are all trained or all not.
pub fn chatml_assistant_spans(ids: &[u32], m: &ChatMlMarkers) -> TrainedSpans {
    // Trained runs are written as they end: a header's tokens, `<|im_end|>` and everything
    // outside an assistant region close the open run.
    let n = ids.len();
    let mut spans = Vec::new();
    let mut run: Option<usize> = None;
    let mut close = |run: &mut Option<usize>, at: usize| {
        if let Some(start) = run.take() {
            spans.push(start as u32..at as u32);
        }
    };
    let mut in_assistant = false;
    let mut i = 0;
    while i < n {
        let next = next_marker(ids, i, m.im_start, m.im_end);
        if next > i {
            // Plain tokens: the first one opens the run or closes it, as the rest would.
            if in_assistant {
                run.get_or_insert(i);
            } else {
                close(&mut run, i);
            }
            i = next;
            if i == n {
                break;
            }
        }
        if ids[i] == m.im_start && i + 1 < n && Some(ids[i + 1]) == m.assistant {
            close(&mut run, i);
            // Without a newline id the header's end is not looked for: the search would only
            // run to the next `<|im_end|>` and find nothing.
            if !m.newlines.is_empty() {
                let mut j = i + 2;
                while j < n && ids[j] != m.im_end {
                    if m.newlines.contains(&ids[j]) {
                        in_assistant = true;
                        i = j;
                        break;
                    }
                    j += 1;
                }
            }
            if !in_assistant {
                in_assistant = true;
                i += 1;
            }
            i += 1;
            continue;
        }
        // `<|im_end|>`, or an `<|im_start|>` that opens no assistant header.
        if in_assistant && ids[i] != m.im_end {
            run.get_or_insert(i);
        } else {
            close(&mut run, i);
        }
        if ids[i] == m.im_end {
            in_assistant = false;
        }
        i += 1;
    }
    close(&mut run, n);
    spans
}

/// The first position at or after `from` that holds `a` or `b`, or `ids.len()`. Blocks of ids
/// are tested whole (a test the compiler vectorizes) before the hit is looked for one by one.
fn next_marker(ids: &[u32], from: usize, a: u32, b: u32) -> usize {
    const BLOCK: usize = 16;
    let mut at = from;
    while let Some(block) = ids.get(at..at + BLOCK) {
        if block
            .iter()
            .fold(false, |hit, &t| hit | (t == a) | (t == b))
        {
            break;
        }
        at += BLOCK;
    }
    ids[at..]
        .iter()
        .position(|&t| t == a || t == b)
        .map_or(ids.len(), |k| at + k)
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

/// Which messages and which of their parts carry loss under the `'spans'` strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanPolicy {
    /// Roles whose turns are trained; ignored when `only_last` is set.
    pub roles: Vec<String>,
    /// Train only the last message (the completion of a prompt-completion example).
    pub only_last: bool,
    pub turn_end: bool,
    pub reasoning: Reasoning,
    /// The example's own per-message flags (`train_flags`), by message index; a flag wins over
    /// `roles` and `only_last`. Empty for the dataset's policy.
    pub overrides: Vec<Option<bool>>,
}

impl SpanPolicy {
    /// Whether message `index` of `count`, of role `role`, carries loss.
    pub fn trains(&self, index: usize, count: usize, role: &str) -> bool {
        if let Some(&Some(flag)) = self.overrides.get(index) {
            flag
        } else if self.only_last {
            index + 1 == count
        } else {
            self.roles.iter().any(|r| r == role)
        }
    }
}

/// What happens to `<think>` blocks (inline or rendered from `reasoning_content`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reasoning {
    Train,
    Mask,
    /// Trained in the last assistant message only.
    LastTurnOnly,
}

impl Reasoning {
    /// The option's value as users write it.
    pub fn name(self) -> &'static str {
        match self {
            Reasoning::Train => "train",
            Reasoning::Mask => "mask",
            Reasoning::LastTurnOnly => "lastTurnOnly",
        }
    }
}

/// The byte ranges of the rendered text that carry loss, sorted and merged.
pub fn trained_byte_ranges(layouts: &[MessageLayout], policy: &SpanPolicy) -> Vec<Range<usize>> {
    let last_assistant = layouts.iter().rposition(|l| l.role == "assistant");
    let mut ranges = Vec::new();
    for (i, layout) in layouts.iter().enumerate() {
        if !policy.trains(i, layouts.len(), &layout.role) {
            continue;
        }
        let masked = layout
            .reasoning
            .as_ref()
            .filter(|_| match policy.reasoning {
                Reasoning::Train => false,
                Reasoning::Mask => true,
                Reasoning::LastTurnOnly => Some(i) != last_assistant,
            });
        match masked {
            Some(r) => {
                ranges.push(layout.body.start..r.start.max(layout.body.start));
                ranges.push(r.end.min(layout.body.end)..layout.body.end);
            }
            None => ranges.push(layout.body.clone()),
        }
        if policy.turn_end {
            if let Some(t) = &layout.turn_end {
                ranges.push(t.clone());
            }
        }
    }
    // Some templates print a message inside another's turn (Gemma 4 writes tool results into
    // the model turn that called the tool): the content of a message that is not trained stays
    // untrained wherever it is printed.
    let untrained: Vec<Range<usize>> = layouts
        .iter()
        .enumerate()
        .filter(|(i, l)| !policy.trains(*i, layouts.len(), &l.role))
        .filter_map(|(_, l)| l.content.clone())
        .collect();
    without(merge(ranges), &merge(untrained))
}

/// The `'generation'` strategy's trained byte ranges for an example with per-message flags
/// (`train_flags`). Each `{% generation %}` body belongs to the message in whose part of the
/// render it starts (a part runs from the end of the previous message's turn to the end of this
/// one's, so that it holds the message's header). A message flagged untrained loses the bodies
/// that belong to it; one flagged trained keeps them, or, when the template marks nothing of it
/// (a user message), trains what `'spans'` would: its body and turn end. Sorted and merged, as
/// `generation::trained_tokens` reads them.
pub fn flagged_generation_ranges(
    bodies: &[(usize, usize)],
    layouts: &[MessageLayout],
    flags: &[Option<bool>],
    len: usize,
) -> Vec<(usize, usize)> {
    // Where each message's part starts: message 0 at 0, the others where the one before ends.
    let mut starts = Vec::with_capacity(layouts.len());
    let mut at = 0;
    for (i, layout) in layouts.iter().enumerate() {
        starts.push(at);
        if i + 1 < layouts.len() {
            let end = layout.turn_end.as_ref().map_or(layout.body.end, |t| t.end);
            at = at.max(end).min(len);
        }
    }
    let owner = |start: usize| starts.partition_point(|&s| s <= start).saturating_sub(1);
    let flag = |i: usize| flags.get(i).copied().flatten();
    let mut ranges: Vec<Range<usize>> = bodies
        .iter()
        .filter(|&&(start, _)| flag(owner(start)) != Some(false))
        .map(|&(start, end)| start..end)
        .collect();
    for (i, layout) in layouts.iter().enumerate() {
        let marked = bodies.iter().any(|&(start, _)| owner(start) == i);
        if flag(i) == Some(true) && !marked {
            ranges.push(layout.body.clone());
            ranges.extend(layout.turn_end.clone());
        }
    }
    merge(ranges)
        .into_iter()
        .map(|r| (r.start, r.end))
        .collect()
}

/// Sorted, non-empty, non-overlapping ranges covering the same bytes as `ranges`.
fn merge(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// The bytes of `ranges` outside `holes` (both merged).
fn without(ranges: Vec<Range<usize>>, holes: &[Range<usize>]) -> Vec<Range<usize>> {
    if holes.is_empty() {
        return ranges;
    }
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let mut start = r.start;
        for h in holes.iter().filter(|h| h.start < r.end && h.end > r.start) {
            if h.start > start {
                out.push(start..h.start);
            }
            start = start.max(h.end);
        }
        if start < r.end {
            out.push(start..r.end);
        }
    }
    out
}

/// Token spans from trained byte ranges (sorted, merged), through each token's byte offsets.
///
/// Straddle policy: a token is trained when any of its bytes is (a zero-width token when its
/// position is), so no trained byte ever goes without loss. A trained token with bytes outside
/// the trained ranges straddles; the second value counts them.
///
/// `known_sorted` says the offsets' starts and ends never go back (as an encoder that
/// `decodes_verbatim` gives them), which is then not checked.
pub fn token_spans_from_bytes(
    offsets: &[(usize, usize)],
    ranges: &[Range<usize>],
    known_sorted: bool,
) -> (TrainedSpans, u32) {
    let sorted = known_sorted
        || offsets
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1);
    if sorted {
        spans_of_sorted(offsets, ranges)
    } else {
        spans_token_by_token(offsets, ranges)
    }
}

/// Whether token `(start, end)` is trained by `r`, the first range that ends after `start`.
fn touches(r: &Range<usize>, (start, end): (usize, usize)) -> bool {
    if start == end {
        r.start <= start
    } else {
        r.start < end
    }
}

/// `token_spans_from_bytes` where starts and ends both never go back (every engine's offsets
/// but for rare zero-width tokens): each range's tokens are searched, not every token walked.
/// The tokens whose first range ending after their start is `r` are a run; the trained ones are
/// its tail (`touches` holds from its first token on, the ends growing), and the straddling
/// ones are the head of that tail that starts before `r` and the end of it that ends after.
fn spans_of_sorted(offsets: &[(usize, usize)], ranges: &[Range<usize>]) -> (TrainedSpans, u32) {
    let mut spans: TrainedSpans = Vec::new();
    let mut straddling = 0;
    let mut lo = 0;
    for r in ranges {
        let hi = lo + offsets[lo..].partition_point(|&(start, _)| start < r.end);
        let run = &offsets[lo..hi];
        let first = lo + run.partition_point(|&token| !touches(r, token));
        let trained = &offsets[first..hi];
        let before = trained.partition_point(|&(start, _)| start < r.start);
        let after = trained.len() - trained.partition_point(|&(_, end)| end <= r.end);
        // A token both starts before the range and ends after it where the range is inside it.
        let both = (before + after).saturating_sub(trained.len());
        straddling += before + after - both;
        if first < hi {
            match spans.last_mut() {
                Some(last) if last.end == first as u32 => last.end = hi as u32,
                _ => spans.push(first as u32..hi as u32),
            }
        }
        lo = hi;
    }
    (spans, straddling as u32)
}

/// `token_spans_from_bytes` by its definition: each token looked up among the ranges.
fn spans_token_by_token(
    offsets: &[(usize, usize)],
    ranges: &[Range<usize>],
) -> (TrainedSpans, u32) {
    let mut flags = vec![false; offsets.len()];
    let mut straddling = 0;
    for (flag, &(start, end)) in flags.iter_mut().zip(offsets) {
        let k = ranges.partition_point(|r| r.end <= start);
        let Some(r) = ranges.get(k) else { continue };
        if touches(r, (start, end)) {
            *flag = true;
            if start < r.start || end > r.end {
                straddling += 1;
            }
        }
    }
    (spans_from_flags(&flags), straddling)
}

/// Labels for `ids[window]`: the id inside a trained span, `IGNORE_INDEX` elsewhere.
pub fn write_labels(ids: &[u32], spans: &[Range<u32>], window: Range<usize>, out: &mut [i32]) {
    out.fill(IGNORE_INDEX);
    overlay_trained(ids, spans, window, out);
}

/// `write_labels` onto `out` already holding `IGNORE_INDEX`: writes only the trained tokens.
pub fn overlay_trained(ids: &[u32], spans: &[Range<u32>], window: Range<usize>, out: &mut [i32]) {
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

    #[test]
    fn holes_are_cut_out_of_trained_ranges() {
        assert_eq!(
            without(vec![0..10, 20..30], &[2..4, 8..22, 29..40]),
            vec![0..2, 4..8, 22..29]
        );
        let whole = vec![0..10, 12..14];
        assert_eq!(without(whole.clone(), &[]), whole);
        assert_eq!(merge(vec![5..7, 0..2, 1..3, 9..9]), vec![0..3, 5..7]);
    }

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

    /// The scan as the reference writes it: one flag per token, collapsed at the end.
    fn flagged_assistant_spans(ids: &[u32], m: &ChatMlMarkers) -> TrainedSpans {
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

    #[test]
    fn the_scan_matches_per_token_flags_on_random_sequences() {
        // Sequences over the markers and two plain ids, with assistant headers planted often, so
        // that unclosed regions, doubled headers and trailing markers all occur.
        let alphabet = [S, E, A, U, NL, 7, 8];
        let mut rng = crate::test_support::Rng(0x5eed_c0de);
        let mut with_runs = 0;
        for case in 0..40_000 {
            // Short sequences, and long ones with rare markers, where the scan skips blocks.
            let (len, plain) = if case % 4 == 3 { (200, 90) } else { (32, 0) };
            let mut ids = Vec::new();
            for _ in 0..rng.below(len) {
                if rng.chance(plain) {
                    ids.push(7 + rng.below(2) as u32);
                } else if rng.chance(20) {
                    ids.extend([S, A]);
                } else {
                    ids.push(alphabet[rng.below(alphabet.len())]);
                }
            }
            let mut m = markers(if case % 2 == 0 { vec![] } else { vec![NL] });
            if case % 7 == 6 {
                m.assistant = None;
            }
            let fast = chatml_assistant_spans(&ids, &m);
            assert_eq!(fast, flagged_assistant_spans(&ids, &m), "ids {ids:?}");
            with_runs += usize::from(fast.len() > 1);
        }
        assert!(
            with_runs > 5_000,
            "only {with_runs} cases with several trained runs"
        );
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

    fn layout(role: &str, body: Range<usize>, turn_end: Option<Range<usize>>) -> MessageLayout {
        MessageLayout {
            role: role.to_string(),
            content: Some(body.clone()),
            content_missing: false,
            body,
            turn_end,
            reasoning: None,
            prefix_mismatch: false,
        }
    }

    #[test]
    fn reasoning_is_cut_out_of_earlier_turns_only() {
        let mut first = layout("assistant", 10..30, Some(30..32));
        first.reasoning = Some(10..20);
        let mut last = layout("assistant", 40..60, Some(60..62));
        last.reasoning = Some(40..45);
        let layouts = [layout("user", 0..8, Some(8..10)), first, last];
        let policy = SpanPolicy {
            roles: vec!["assistant".into()],
            only_last: false,
            turn_end: true,
            reasoning: Reasoning::LastTurnOnly,
            overrides: Vec::new(),
        };
        assert_eq!(trained_byte_ranges(&layouts, &policy), vec![20..32, 40..62]);
        let policy = SpanPolicy {
            reasoning: Reasoning::Mask,
            turn_end: false,
            ..policy
        };
        assert_eq!(trained_byte_ranges(&layouts, &policy), vec![20..30, 45..60]);
        let policy = SpanPolicy {
            only_last: true,
            reasoning: Reasoning::Train,
            ..policy
        };
        assert_eq!(trained_byte_ranges(&layouts, &policy), vec![40..60]);
    }

    #[test]
    fn flags_override_the_roles_of_the_span_policy() {
        let layouts = [
            layout("system", 0..5, Some(5..6)),
            layout("user", 10..20, Some(20..21)),
            layout("assistant", 30..40, Some(40..41)),
            layout("user", 50..60, Some(60..61)),
            layout("assistant", 70..80, Some(80..81)),
        ];
        let policy = SpanPolicy {
            roles: vec!["assistant".into()],
            only_last: false,
            turn_end: true,
            reasoning: Reasoning::Train,
            overrides: vec![None, Some(true), Some(false), None, None],
        };
        assert_eq!(trained_byte_ranges(&layouts, &policy), vec![10..21, 70..81]);
        // A prompt-completion row trains its last message unless that one is flagged off.
        let policy = SpanPolicy {
            only_last: true,
            overrides: vec![Some(true), None, None, None, Some(false)],
            ..policy
        };
        assert_eq!(trained_byte_ranges(&layouts, &policy), vec![0..6]);
    }

    #[test]
    fn flags_choose_generation_bodies_by_the_message_they_start_in() {
        let layouts = [
            layout("user", 10..20, Some(20..21)),
            layout("assistant", 30..40, Some(40..41)),
            layout("user", 50..60, Some(60..61)),
            layout("assistant", 70..80, Some(80..81)),
        ];
        // Bodies as a template marks them: the assistant's header, content and turn end (the
        // second one nested), none of the user messages.
        let bodies = [(25, 42), (70, 75), (66, 82)];
        let ranges =
            |flags: &[Option<bool>]| flagged_generation_ranges(&bodies, &layouts, flags, 90);
        assert_eq!(ranges(&[None, None, None, None]), vec![(25, 42), (66, 82)]);
        assert_eq!(ranges(&[None, Some(false), None, None]), vec![(66, 82)]);
        assert_eq!(
            ranges(&[Some(true), Some(true), None, Some(false)]),
            vec![(10, 21), (25, 42)]
        );
        assert_eq!(
            ranges(&[None, None, Some(true), None]),
            vec![(25, 42), (50, 61), (66, 82)]
        );
    }

    #[test]
    fn a_token_touching_a_trained_byte_is_trained_and_counted() {
        // Tokens: [0,3) [3,6) [6,9) [9,9) [9,12); trained bytes 4..9.
        let offsets = [(0, 3), (3, 6), (6, 9), (9, 9), (9, 12)];
        let (spans, straddling) =
            token_spans_from_bytes(&offsets, std::slice::from_ref(&(4..9)), false);
        assert_eq!(spans, vec![1..3]);
        assert_eq!(straddling, 1);
        let (spans, straddling) =
            token_spans_from_bytes(&offsets, std::slice::from_ref(&(9..10)), false);
        assert_eq!(spans, vec![3..5]);
        assert_eq!(straddling, 1);
    }

    #[test]
    fn searched_runs_find_what_a_lookup_per_token_finds() {
        let searched = spans_token_by_token;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut sorted_cases = 0;
        for _ in 0..4000 {
            let mut offsets: Vec<(usize, usize)> = Vec::new();
            let mut at = 0usize;
            for _ in 0..next(30) {
                let (start, end) = match next(12) {
                    // A token that starts before the one it follows (engines' zero-width
                    // tokens can).
                    0 if next(3) == 0 => {
                        let start = at.saturating_sub(next(6));
                        (start, start + next(4))
                    }
                    // One that shares the last one's bytes (a char split across tokens).
                    1 => offsets.last().copied().unwrap_or((at, at + 1)),
                    // A zero-width one.
                    2 => (at, at),
                    _ => (at, at + 1 + next(4)),
                };
                offsets.push((start, end));
                at = end.max(at);
            }
            if offsets
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
            {
                sorted_cases += 1;
            }
            let mut ranges = Vec::new();
            let mut from = 0;
            for _ in 0..next(5) {
                let start = from + next(8);
                let end = start + next(9);
                ranges.push(start..end);
                from = end + 1;
            }
            assert_eq!(
                token_spans_from_bytes(&offsets, &ranges, false),
                searched(&offsets, &ranges),
                "{offsets:?} {ranges:?}"
            );
        }
        assert!(sorted_cases > 2000, "{sorted_cases}");
    }

    #[test]
    fn windows_cut_spans() {
        let ids = [10, 11, 12, 13, 14];
        let mut out = vec![0; 3];
        write_labels(&ids, &spans_from(1, 5), 2..5, &mut out);
        assert_eq!(out, vec![12, 13, 14]);
        assert_eq!(trained_count(&spans_from(1, 5), 0..3), 2);
    }
}
