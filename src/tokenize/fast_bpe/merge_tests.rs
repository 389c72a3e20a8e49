//! The merge strategies (`merge_by_scan`, `merge_by_blocks` in every size, `merge_by_heap`)
//! against the plainest rank-ordered merge, written here for nothing but clarity: on every
//! supported model, on many random words of every script, emoji and the vocabulary's own entries,
//! started from bytes, from whole chars and (SentencePiece-style models) from the chars' initial
//! symbols, each must give the same symbols (ids and spans) as the plain loop.

use super::super::tests::{decoded_vocabulary, load, Rng, SUPPORTED};
use super::*;

const WORDS: usize = 20_000;

/// Rank-ordered BPE as its definition reads: merge the lowest-ranked adjacent pair, the leftmost
/// on a tie, until no pair merges.
fn plain_merge(model: &BpeModel, symbols: &mut Vec<Symbol>) {
    loop {
        let mut best: Option<(u32, usize, u32)> = None;
        for i in 0..symbols.len().saturating_sub(1) {
            let (rank, id) = model.merge_of(symbols[i].id, symbols[i + 1].id);
            if rank != NO_MERGE && best.is_none_or(|(low, _, _)| rank < low) {
                best = Some((rank, i, id));
            }
        }
        let Some((_, at, id)) = best else {
            return;
        };
        let right = symbols.remove(at + 1);
        symbols[at].id = id;
        symbols[at].len += right.len;
    }
}

fn spelled(symbols: &[Symbol]) -> Vec<(u32, u32, u32)> {
    symbols.iter().map(|s| (s.id, s.start, s.len)).collect()
}

/// A word of 1 to 60 chars: vocabulary entries, chars of many scripts and emoji, run together.
fn random_word(rng: &mut Rng, entries: &[String]) -> String {
    const BLOCKS: [(u32, u32); 10] = [
        (0x4E00, 0x9FFF),
        (0x3041, 0x30FF),
        (0x0E01, 0x0E5B),
        (0x0980, 0x09FF),
        (0x0600, 0x06FF),
        (0x0400, 0x04FF),
        (0xAC00, 0xD7A3),
        (0x1F300, 0x1FAFF),
        (0x20, 0x7E),
        (0x80, 0x24F),
    ];
    let mut s = String::new();
    let goal = 1 + rng.below(60);
    while s.chars().count() < goal {
        if rng.below(3) != 0 && !entries.is_empty() {
            s.push_str(&entries[rng.below(entries.len())]);
        } else {
            let (from, to) = BLOCKS[rng.below(BLOCKS.len())];
            s.extend(char::from_u32(
                from + rng.below((to - from + 1) as usize) as u32,
            ));
        }
    }
    s
}

/// Checks both strategies against `plain_merge` on `first`, the symbols of one chunk.
fn check(model: &BpeModel, bytes: &[u8], first: &[Symbol], scratch: &mut Scratch, word: &str) {
    let mut want = first.to_vec();
    plain_merge(model, &mut want);
    if (2..=SCAN).contains(&first.len()) {
        scratch.symbols.clear();
        scratch.symbols.extend_from_slice(first);
        model.merge_by_scan::<SCAN>(bytes, scratch);
        assert_eq!(
            spelled(&scratch.symbols),
            spelled(&want),
            "scan of {word:?}"
        );
    }
    let blocked: [fn(&BpeModel, &[u8], &mut Scratch); 4] = [
        BpeModel::merge_by_blocks::<{ BLOCKED[0] }>,
        BpeModel::merge_by_blocks::<{ BLOCKED[1] }>,
        BpeModel::merge_by_blocks::<{ BLOCKED[2] }>,
        BpeModel::merge_by_blocks::<{ BLOCKED[3] }>,
    ];
    for (slots, merge) in BLOCKED.into_iter().zip(blocked) {
        if (2..=slots).contains(&first.len()) {
            scratch.symbols.clear();
            scratch.symbols.extend_from_slice(first);
            merge(model, bytes, scratch);
            assert_eq!(
                spelled(&scratch.symbols),
                spelled(&want),
                "blocks of {slots} for {word:?}"
            );
        }
    }
    if first.len() >= 2 {
        scratch.symbols.clear();
        scratch.symbols.extend_from_slice(first);
        model.merge_by_heap(scratch);
        assert_eq!(
            spelled(&scratch.symbols),
            spelled(&want),
            "heap of {word:?}"
        );
    }
}

#[test]
fn merge_strategies_match_the_plain_merge_on_random_words() {
    for (seed, name) in SUPPORTED.iter().enumerate() {
        let (hf, fast) = load(name);
        let model = &fast.model;
        // Entries of several chars, most of them outside ASCII: the merges worth checking.
        let entries: Vec<String> = decoded_vocabulary(&hf)
            .filter(|t| t.chars().count() >= 2 && !t.is_ascii())
            .collect();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed as u64 + 1));
        let mut scratch = Scratch::default();
        let (mut symbols, mut cuts) = (Vec::new(), Vec::new());
        for _ in 0..WORDS {
            let word = random_word(&mut rng, &entries);
            let bytes = word.as_bytes();
            match &model.alphabet {
                Alphabet::Bytes(byte_ids) => {
                    // Whole chars only where the model has a table for them, bytes always;
                    // the words stay short enough for the scan now and then.
                    let short = &bytes[..bytes.len().min(SCAN)];
                    let from_bytes: Vec<Symbol> = short
                        .iter()
                        .enumerate()
                        .map(|(i, &b)| Symbol {
                            id: byte_ids[usize::from(b)],
                            start: i as u32,
                            len: 1,
                        })
                        .collect();
                    check(model, short, &from_bytes, &mut scratch, &word);
                    let from_bytes: Vec<Symbol> = bytes
                        .iter()
                        .enumerate()
                        .map(|(i, &b)| Symbol {
                            id: byte_ids[usize::from(b)],
                            start: i as u32,
                            len: 1,
                        })
                        .collect();
                    check(model, bytes, &from_bytes, &mut scratch, &word);
                    symbols.clear();
                    model.char_symbols::<false>(&word, byte_ids, &mut symbols, &mut cuts);
                    check(model, bytes, &symbols, &mut scratch, &word);
                }
                Alphabet::Chars(chars) => {
                    let mut initials = Initials::default();
                    chars.initials(&word, ' ', &mut initials, &mut cuts);
                    cuts.push((initials.len(), word.len()));
                    for chunk in cuts.windows(2) {
                        let ((from, text_from), (to, text_to)) = (chunk[0], chunk[1]);
                        let mut at = 0;
                        let first: Vec<Symbol> = initials[from..to]
                            .iter()
                            .map(|&(id, len)| {
                                at += len;
                                Symbol {
                                    id,
                                    start: at - len,
                                    len,
                                }
                            })
                            .collect();
                        check(
                            model,
                            &bytes[text_from..text_to],
                            &first,
                            &mut scratch,
                            &word,
                        );
                    }
                }
            }
        }
    }
}
