//! Words cut into parts (`boundaries`) against the `tokenizers` crate: long runs of the
//! scripts written without spaces, of the vocabulary's own entries of several chars, with emoji,
//! digits and Latin letters inside them and at their edges; and, for the models with
//! `ignore_merges`, vocabulary entries that merging does not rebuild, met as parts of a word.

use tokenizers::Tokenizer;

use super::tests::{check, decoded_vocabulary, load, model_json, Rng, SUPPORTED};

const LONG_RUNS: usize = 3_000;

/// Chars of the scripts written without spaces (Han, kana, Thai) and Hangul, each the
/// vocabulary's own token, and its entries of two chars or more from the same ranges.
fn letters_and_words(hf: &Tokenizer) -> (Vec<char>, Vec<String>) {
    let ranges = [
        (0x4E00, 0x9FFF),
        (0x3041, 0x30FF),
        (0x0E01, 0x0E5B),
        (0xAC00, 0xD7A3),
        (0x3000, 0x303F),
    ];
    let inside = |c: char| ranges.iter().any(|&(a, b)| (a..=b).contains(&(c as u32)));
    let (mut letters, mut words) = (Vec::new(), Vec::new());
    for text in decoded_vocabulary(hf) {
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if inside(c) => letters.push(c),
            (Some(c), Some(_)) if inside(c) && text.chars().all(inside) => words.push(text),
            _ => {}
        }
    }
    (letters, words)
}

/// A word of 10 to 120 chars with no space: letters and entries of several chars, now and then
/// an emoji, a digit, a Latin letter or a char outside the vocabulary, first and last included.
fn long_run(rng: &mut Rng, letters: &[char], words: &[String]) -> String {
    let mut s = String::new();
    while s.chars().count() < 10 + rng.below(110) {
        match rng.below(16) {
            0 => s.push_str(rng.pick(&["🙂", "👍🏽", "🇯🇵", "❤️", "\u{200d}"])),
            1 => s.push_str(rng.pick(&["7", "a", "Q", "ー", "々", "ๆ"])),
            2 => s.extend(char::from_u32(0x4E00 + rng.below(0x5200) as u32)),
            3..=8 if !words.is_empty() => s.push_str(&words[rng.below(words.len())]),
            _ => s.push(letters[rng.below(letters.len())]),
        }
    }
    s
}

#[test]
fn matches_hf_on_long_runs_without_spaces() {
    for (seed, name) in SUPPORTED.iter().enumerate() {
        let (hf, fast) = load(name);
        let (letters, words) = letters_and_words(&hf);
        let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ (seed as u64 + 1));
        let (mut tokens, mut cut) = (0, 0);
        for _ in 0..LONG_RUNS {
            let mut text = long_run(&mut rng, &letters, &words);
            if rng.below(4) == 0 {
                // Several words: the pre-tokenizer's own edges next to a cut.
                text.push_str(rng.pick(&["，", "。", " ", "\n", "! "]));
                text.push_str(&long_run(&mut rng, &letters, &words));
            }
            cut += usize::from(fast.model.parts(&text) > 1);
            tokens += check(&hf, &fast, &text, name);
            // A second time, its parts in the piece cache.
            check(&hf, &fast, &text, name);
        }
        eprintln!(
            "{name}: {LONG_RUNS} long runs ({cut} cut into parts), {tokens} tokens identical"
        );
        if *name != "gemma3" {
            assert!(cut > LONG_RUNS / 2, "{name}: only {cut} runs were cut");
        }
    }
}

/// With `ignore_merges`, a vocabulary entry is one token as a word of its own, but inside a
/// longer word it is merged like any other part. Entries that merging does not rebuild (found
/// with the same tokenizer, `ignore_merges` turned off) are run into each other and into
/// letters, each also encoded alone first so that the piece cache has seen it as a word.
#[test]
fn vocabulary_entries_inside_words_are_merged() {
    let mut checked = 0;
    for name in ["llama3_1", "gptoss"] {
        let (hf, fast) = load(name);
        let mut json: serde_json::Value =
            serde_json::from_str(&model_json(name)).unwrap_or_default();
        assert_eq!(json["model"]["ignore_merges"], true, "{name}");
        json["model"]["ignore_merges"] = false.into();
        let merged_only = Tokenizer::from_bytes(json.to_string().as_bytes()).unwrap();
        let (letters, _) = letters_and_words(&hf);
        let entries: Vec<String> = decoded_vocabulary(&hf)
            .filter(|w| w.chars().count() >= 2 && w.chars().all(|c| c as u32 >= 0x2E80))
            .filter(|w| {
                merged_only
                    .encode(w.as_str(), false)
                    .is_ok_and(|e| e.get_ids().len() > 1)
            })
            .collect();
        assert!(!entries.is_empty(), "{name}");
        let mut rng = Rng(0x9E6C_63D0_676A_9A99);
        for _ in 0..2_000 {
            let mut text = String::new();
            for _ in 0..6 + rng.below(8) {
                let entry = &entries[rng.below(entries.len())];
                check(&hf, &fast, entry, name);
                text.push_str(entry);
                for _ in 0..rng.below(3) {
                    text.push(letters[rng.below(letters.len())]);
                }
            }
            check(&hf, &fast, &text, name);
            checked += usize::from(fast.model.parts(&text) > 1);
        }
    }
    assert!(checked > 1_000, "only {checked} texts were cut");
}
