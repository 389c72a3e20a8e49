//! A kept trace as a small program over an example's contents. Its expressions (see
//! `trace_expr`) are numbered once, when the trace is kept, each after the ones it is made from,
//! and one that a guard and a hole share (`content.split('</think>')` read by both) is one
//! entry. A replay computes every entry once, as a slice of a content: a strip or a part of a
//! split is always a slice of the string it is taken from, so nothing is copied until the
//! text is written. The strings searched for (separators, `in` operands) are searched with one
//! searcher each, built when the trace is kept.

use std::sync::Arc;

use memchr::memmem::Finder;

use super::trace_expr::{strip_text, Guard, Piece, SExpr, Side, Test};

/// How one entry is computed from the contents and the entries before it.
#[derive(Debug, PartialEq)]
enum Step {
    /// Slot `i` of the example (see `trace::SLOT_FIELDS`).
    Slot(u32),
    /// A strip of entry `from`: of whitespace, or of the given chars.
    Strip {
        from: u32,
        side: Side,
        chars: Option<Box<[char]>>,
    },
    /// Part `k` of entry `from` split on needle `sep`.
    Part { from: u32, sep: u32, k: u32 },
}

/// A fact to check: of an entry, the test, with its string as a needle where it is searched.
#[derive(Debug)]
struct Check {
    at: u32,
    test: Test,
    /// The needle of `Contains` and `Parts`.
    needle: Option<u32>,
    answer: u64,
}

/// A piece of the text: literal, or the text of an entry.
#[derive(Debug)]
enum Out {
    Lit(Arc<str>),
    Entry(u32),
}

/// A trace ready to replay.
#[derive(Debug)]
pub struct Program {
    steps: Vec<Step>,
    /// The strings searched for, each with its searcher.
    needles: Vec<(Arc<str>, Finder<'static>)>,
    guards: Vec<Check>,
    out: Vec<Out>,
    /// The length of the literal pieces.
    literal_len: usize,
}

impl Program {
    pub fn new(guards: &[Guard], pieces: &[Piece]) -> Program {
        let mut steps = Vec::new();
        let mut needles = Vec::new();
        let guards = guards
            .iter()
            .map(|g| Check {
                at: entry(&mut steps, &mut needles, &g.of),
                needle: match &g.test {
                    Test::Contains(x) | Test::Parts(x) => Some(needle(&mut needles, x)),
                    _ => None,
                },
                test: g.test.clone(),
                answer: g.answer,
            })
            .collect();
        let mut literal_len = 0;
        let out = pieces
            .iter()
            .map(|p| match p {
                Piece::Lit(s) => {
                    literal_len += s.len();
                    Out::Lit(s.clone())
                }
                Piece::Hole(e) => Out::Entry(entry(&mut steps, &mut needles, e)),
            })
            .collect();
        Program {
            steps,
            needles,
            guards,
            out,
            literal_len,
        }
    }

    /// The trace's text for `slots`, where they meet its guards.
    pub fn replay(&self, slots: &[Option<&str>]) -> Option<String> {
        let mut values: Vec<&str> = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            let value = match step {
                Step::Slot(i) => (*slots.get(*i as usize)?)?,
                Step::Strip { from, side, chars } => {
                    strip_text(values[*from as usize], *side, chars.as_deref())
                }
                Step::Part { from, sep, k } => {
                    let (sep, finder) = &self.needles[*sep as usize];
                    part(values[*from as usize], finder, sep.len(), *k)?
                }
            };
            values.push(value);
        }
        for check in &self.guards {
            if self.answer(values[check.at as usize], check) != check.answer {
                return None;
            }
        }
        let holes: usize = self
            .out
            .iter()
            .map(|p| match p {
                Out::Lit(_) => 0,
                Out::Entry(at) => values[*at as usize].len(),
            })
            .sum();
        let mut text = String::with_capacity(self.literal_len + holes);
        for piece in &self.out {
            text.push_str(match piece {
                Out::Lit(s) => s,
                Out::Entry(at) => values[*at as usize],
            });
        }
        Some(text)
    }

    /// `trace_expr::answer`, searching with the needle's searcher.
    fn answer(&self, text: &str, check: &Check) -> u64 {
        let finder = || &self.needles[check.needle.unwrap_or(0) as usize].1;
        match &check.test {
            Test::Contains(_) => u64::from(finder().find(text.as_bytes()).is_some()),
            Test::Parts(_) => finder().find_iter(text.as_bytes()).count() as u64 + 1,
            other => super::trace_expr::answer(text, other),
        }
    }
}

/// Part `k` of `text` split on a separator of `len` bytes that `finder` finds, as Python's
/// `split` gives it (matches taken left to right, none overlapping); `None` where there are
/// fewer parts.
fn part<'t>(text: &'t str, finder: &Finder<'_>, len: usize, k: u32) -> Option<&'t str> {
    let mut matches = finder.find_iter(text.as_bytes());
    let mut start = 0;
    for _ in 0..k {
        start = matches.next()? + len;
    }
    let end = matches.next().unwrap_or(text.len());
    text.get(start..end)
}

/// The number of needle `x`, added where it is not there yet.
fn needle(needles: &mut Vec<(Arc<str>, Finder<'static>)>, x: &Arc<str>) -> u32 {
    match needles.iter().position(|(n, _)| n == x) {
        Some(at) => at as u32,
        None => {
            needles.push((x.clone(), Finder::new(x.as_bytes()).into_owned()));
            (needles.len() - 1) as u32
        }
    }
}

/// The number of `expr`'s entry, added (after the entries it is made from) where no equal entry
/// is there yet.
fn entry(
    steps: &mut Vec<Step>,
    needles: &mut Vec<(Arc<str>, Finder<'static>)>,
    expr: &SExpr,
) -> u32 {
    let step = match expr {
        SExpr::Slot(i) => Step::Slot(*i),
        SExpr::Strip(inner, side, chars) => Step::Strip {
            from: entry(steps, needles, inner),
            side: *side,
            chars: chars.as_deref().map(|c| c.chars().collect()),
        },
        SExpr::Part(inner, sep, k) => Step::Part {
            from: entry(steps, needles, inner),
            sep: needle(needles, sep),
            k: *k,
        },
    };
    match steps.iter().position(|s| *s == step) {
        Some(at) => at as u32,
        None => {
            steps.push(step);
            (steps.len() - 1) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(i: u32) -> Arc<SExpr> {
        Arc::new(SExpr::Slot(i))
    }

    /// `content.split('</think>')[-1].lstrip('\n')` and the reasoning before it, as Qwen's
    /// templates take them, sharing the split.
    #[test]
    fn shared_expressions_are_one_entry_and_replay_as_slices() {
        let sep: Arc<str> = Arc::from("</think>");
        let split_last = Arc::new(SExpr::Part(slot(0), sep.clone(), 1));
        let answer_expr = Arc::new(SExpr::Strip(
            split_last.clone(),
            Side::Left,
            Some(Arc::from("\n")),
        ));
        let reasoning = Arc::new(SExpr::Strip(
            Arc::new(SExpr::Part(slot(0), sep.clone(), 0)),
            Side::Both,
            None,
        ));
        let guards = [Guard {
            of: slot(0),
            test: Test::Parts(sep.clone()),
            answer: 2,
        }];
        let pieces = [
            Piece::Lit(Arc::from("<r>")),
            Piece::Hole(reasoning),
            Piece::Lit(Arc::from("</r>")),
            Piece::Hole(answer_expr),
        ];
        let program = Program::new(&guards, &pieces);
        // The slot, its two parts and their two strips.
        assert_eq!(program.steps.len(), 5);
        assert_eq!(
            program.replay(&[Some("<think> why </think>\n\nso")]),
            Some("<r><think> why</r>so".to_string())
        );
        // Three parts where the trace was made for two: not this trace.
        assert_eq!(program.replay(&[Some("a</think>b</think>c")]), None);
        // A missing slot: not this trace either.
        assert_eq!(program.replay(&[None]), None);
    }

    #[test]
    fn strips_of_given_chars_strip_any_of_them() {
        let pieces = [Piece::Hole(Arc::new(SExpr::Strip(
            slot(1),
            Side::Both,
            Some(Arc::from("xy")),
        )))];
        let program = Program::new(&[], &pieces);
        assert_eq!(
            program.replay(&[None, Some("xyxhixyy")]),
            Some("hi".to_string())
        );
    }

    /// Parts and counts as `str::split` gives them, overlapping and repeated separators
    /// included.
    #[test]
    fn parts_and_counts_follow_split() {
        let texts = [
            "",
            "a",
            "aa",
            "aaa",
            "aaaa",
            "baaab",
            "é</think>ü</think>",
            "</think>",
        ];
        for sep in ["a", "aa", "</think>", "é"] {
            let finder = Finder::new(sep.as_bytes());
            for text in texts {
                let want: Vec<&str> = text.split(sep).collect();
                for k in 0..=want.len() as u32 {
                    assert_eq!(
                        part(text, &finder, sep.len(), k),
                        want.get(k as usize).copied(),
                        "{text:?} split on {sep:?}, part {k}"
                    );
                }
                let check = Check {
                    at: 0,
                    test: Test::Parts(Arc::from(sep)),
                    needle: Some(0),
                    answer: 0,
                };
                let program = Program {
                    steps: Vec::new(),
                    needles: vec![(Arc::from(sep), finder.clone().into_owned())],
                    guards: Vec::new(),
                    out: Vec::new(),
                    literal_len: 0,
                };
                assert_eq!(program.answer(text, &check), want.len() as u64);
            }
        }
    }
}
