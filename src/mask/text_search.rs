//! Finding a message's content in a render: long needles (whole contents) in a text that holds
//! them once, near where the search starts. The standard library's substring search prepares
//! each needle in time proportional to its length before it reads the text, which for a content
//! of a few kilobytes costs more than the search itself; here a short prefix of the needle is
//! searched and each hit checked against the whole needle.

use memchr::memmem;

/// Needles up to this long are searched whole.
const PREFIX: usize = 32;
/// Prefix hits that are not the needle before the search falls back to the standard one, which
/// is linear whatever the text repeats.
const MISSES: usize = 8;

/// The byte offset of the first occurrence of `needle` in `hay`: `hay.find(needle)`.
///
/// A match of a whole UTF-8 needle starts at a character boundary of the text (its first byte
/// is a leading byte), so byte offsets are string offsets.
pub fn find(hay: &str, needle: &str) -> Option<usize> {
    find_bytes(hay.as_bytes(), needle.as_bytes())
}

/// The byte offset of the first occurrence of `needle` in `hay`.
pub fn find_bytes(h: &[u8], n: &[u8]) -> Option<usize> {
    if n.len() <= PREFIX {
        return find_short(h, n);
    }
    let mut at = 0;
    for _ in 0..MISSES {
        let hit = at + find_short(&h[at..], &n[..PREFIX])?;
        if h[hit..].starts_with(n) {
            return Some(hit);
        }
        at = hit + 1;
    }
    memmem::find(&h[at..], n).map(|p| at + p)
}

/// Candidates tried by their first byte before a short search builds a searcher.
const FIRST_BYTE_TRIES: usize = 16;

/// The first occurrence of a short `needle` in `hay`: its first byte's occurrences are tried
/// in turn (no searcher to build, which costs more than the search in a render of a few
/// kilobytes); a text where that byte keeps coming without the needle is searched by `memmem`,
/// linear whatever the text repeats.
fn find_short(h: &[u8], n: &[u8]) -> Option<usize> {
    let Some(&first) = n.first() else {
        return Some(0);
    };
    let mut at = 0;
    for _ in 0..FIRST_BYTE_TRIES {
        let hit = at + memchr::memchr(first, &h[at..])?;
        if h[hit..].starts_with(n) {
            return Some(hit);
        }
        at = hit + 1;
    }
    memmem::find(&h[at..], n).map(|p| at + p)
}

/// How far past `from` a needle is first looked for by its first byte alone: a template writes
/// a message's header (a few dozen bytes) between two contents.
const NEAR: usize = 256;

/// The first occurrence of a non-empty `needle` in `hay` at or after `from`. Candidates within
/// `NEAR` bytes are tried by their first byte (no searcher to build, which costs more than the
/// search when the match is a header away); past that, `find_bytes`.
pub fn find_from(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let rest = hay.get(from..)?;
    let near = &rest[..rest.len().min(NEAR)];
    let &first = needle.first()?;
    for at in memchr::memchr_iter(first, near) {
        if rest[at..].starts_with(needle) {
            return Some(from + at);
        }
    }
    let skip = near.len();
    find_bytes(&rest[skip..], needle).map(|at| from + skip + at)
}

/// Whether `needle` occurs in `hay` exactly once, counting occurrences that do not overlap (as
/// `match_indices` does), and where.
pub fn find_once(hay: &str, needle: &str) -> Option<usize> {
    let first = find(hay, needle)?;
    let after = first + needle.len().max(1);
    match hay.get(after..).map(|rest| find(rest, needle)) {
        Some(Some(_)) => None,
        _ => Some(first),
    }
}

/// Where each occurrence of a short, non-empty `needle` (an end-of-turn token) ends in `hay`,
/// occurrences not overlapping, as `match_indices` finds them. A dataset asks for one needle
/// over and over (its template's end-of-turn token, in every render of every example), and in
/// chat text the needle's first byte (`<`) starts every other special token; so each thread
/// keeps the searcher of the last needle it was asked for, and every call is one vector scan.
pub fn ends_of(hay: &str, needle: &str) -> Vec<usize> {
    thread_local! {
        /// Boxed: a searcher is a few hundred bytes, and a thread-local of a module loaded at
        /// run time takes glibc's small static TLS surplus (see `fast_bpe`'s `WORK`).
        static LAST: std::cell::RefCell<Option<Box<memmem::Finder<'static>>>> =
            const { std::cell::RefCell::new(None) };
    }
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.is_empty() {
        return Vec::new();
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.as_ref().is_none_or(|f| f.needle() != n) {
            *last = Some(Box::new(memmem::Finder::new(n).into_owned()));
        }
        let finder = last.as_ref().expect("a searcher was just made");
        finder.find_iter(h).map(|at| at + n.len()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_from_is_the_first_match_at_or_after_the_cursor() {
        // Every needle of a few generated texts, from every cursor: the same answer as a plain
        // scan, near the cursor, past `NEAR`, and straddling it.
        let mut rng = crate::test_support::Rng(7);
        let mut next = move || rng.next();
        for len in [0usize, 1, 5, NEAR - 3, NEAR + 40, 3 * NEAR] {
            let hay: Vec<u8> = (0..len).map(|_| b"ab<"[(next() % 3) as usize]).collect();
            for _ in 0..60 {
                let n = 1 + (next() % 6) as usize;
                let needle: Vec<u8> = (0..n).map(|_| b"ab<"[(next() % 3) as usize]).collect();
                for from in (0..=len).step_by(1 + len / 40) {
                    let plain = (from..len.saturating_sub(n - 1).max(from))
                        .find(|&at| hay[at..].starts_with(&needle));
                    assert_eq!(
                        find_from(&hay, from, &needle),
                        plain,
                        "{len} {from} {needle:?}"
                    );
                }
            }
        }
        assert_eq!(find_from(b"abc", 4, b"a"), None);
        assert_eq!(find_from(b"abc", 1, b""), None);
    }

    #[test]
    fn agrees_with_the_standard_search() {
        let long = "x".repeat(40);
        let needle_a = format!("{long}a");
        let cases: Vec<(String, String)> = vec![
            ("hello world".into(), "world".into()),
            ("hello world".into(), "".into()),
            (format!("{long}{long}a"), needle_a.clone()),
            (format!("{long}b {long}a"), needle_a.clone()),
            (format!("é{long}a…"), needle_a.clone()),
            ("x".repeat(1000) + "a", needle_a.clone()),
            ("x".repeat(1000), needle_a.clone()),
            (format!("ab{}", "é".repeat(30)), "é".repeat(20)),
        ];
        for (hay, needle) in &cases {
            assert_eq!(
                find(hay, needle),
                hay.find(needle.as_str()),
                "{hay:?} / {needle:?}"
            );
            let standard = {
                let mut hits = hay.match_indices(needle.as_str());
                hits.next()
                    .filter(|_| hits.next().is_none())
                    .map(|(p, _)| p)
            };
            if !needle.is_empty() {
                assert_eq!(find_once(hay, needle), standard, "{hay:?} / {needle:?}");
            }
        }
    }

    #[test]
    fn random_texts_give_the_standard_answers() {
        // A three-letter alphabet makes the first byte of a needle common: the tries by first
        // byte run out and the searcher takes over, at every point of the text.
        let mut rng = crate::test_support::Rng(11);
        let mut next = move || rng.next();
        for len in [0usize, 3, 40, 200, 2000] {
            let hay: String = (0..len)
                .map(|_| ['a', 'b', '<'][(next() % 3) as usize])
                .collect();
            for _ in 0..80 {
                let n = 1 + (next() % 40) as usize;
                let needle: String = if next() % 2 == 0 && len > n {
                    let at = (next() as usize) % (len - n);
                    hay[at..at + n].to_string()
                } else {
                    (0..n)
                        .map(|_| ['a', 'b', '<'][(next() % 3) as usize])
                        .collect()
                };
                assert_eq!(find(&hay, &needle), hay.find(needle.as_str()));
                let standard: Vec<usize> = hay
                    .match_indices(needle.as_str())
                    .map(|(p, m)| p + m.len())
                    .collect();
                assert_eq!(ends_of(&hay, &needle), standard);
            }
        }
    }

    #[test]
    fn turn_ends_are_found_as_match_indices_finds_them() {
        let many = format!("{}<e>{}<e>", "<x>".repeat(200), "<".repeat(100));
        for (hay, needle) in [
            ("<e>a<e><e>", "<e>"),
            ("aaaa", "aa"),
            ("none", "<e>"),
            ("<e", "<e>"),
            ("", "<e>"),
            (many.as_str(), "<e>"),
        ] {
            let standard: Vec<usize> = hay
                .match_indices(needle)
                .map(|(p, m)| p + m.len())
                .collect();
            assert_eq!(ends_of(hay, needle), standard);
        }
    }

    #[test]
    fn random_texts_agree_with_the_standard_search() {
        // A small alphabet, so that needles match often, overlap and repeat their prefixes;
        // needles both shorter and longer than the prefix searched first.
        let mut rng = crate::test_support::Rng(7);
        let pieces = ["<", "e", ">", "<e>", "a", "é", "<|end|>", "\n"];
        let text = |rng: &mut crate::test_support::Rng, len: usize| -> String {
            (0..rng.below(len)).map(|_| rng.pick(&pieces)).collect()
        };
        for _ in 0..20_000 {
            let hay = text(&mut rng, 200);
            let needle = text(&mut rng, 12);
            assert_eq!(
                find(&hay, &needle),
                hay.find(needle.as_str()),
                "{hay:?} / {needle:?}"
            );
            if !needle.is_empty() {
                let standard: Vec<usize> = hay
                    .match_indices(needle.as_str())
                    .map(|(p, m)| p + m.len())
                    .collect();
                assert_eq!(ends_of(&hay, &needle), standard, "{hay:?} / {needle:?}");
            }
        }
    }

    #[test]
    fn a_repeated_prefix_falls_back_to_the_linear_search() {
        // Every position matches the needle's prefix; the whole needle only at the end.
        let needle = format!("{}b", "a".repeat(PREFIX + 5));
        let hay = format!("{}b", "a".repeat(100_000));
        assert_eq!(find(&hay, &needle), Some(100_000 - PREFIX - 5));
        assert_eq!(find_once(&hay, &needle), Some(100_000 - PREFIX - 5));
    }
}
