//! What a render trace is written in: expressions of an example's contents (a content, stripped,
//! a part of it split on a separator), the facts about them a render's course depended on, and
//! the pieces of the trace's text. Shared by the recording (`trace`) and the replay (`replay`).

use std::sync::Arc;

use crate::render::python_str::{python_lstrip, python_rstrip, python_strip};

/// How a symbolic string was made from the contents.
#[derive(Debug, Clone, PartialEq)]
pub enum SExpr {
    /// Slot `i` of the example: field `i % 3` of [`SLOT_FIELDS`] of message `i / 3`.
    Slot(u32),
    /// Python's `strip`, `lstrip` or `rstrip`: of whitespace, or of the given chars.
    Strip(Arc<SExpr>, Side, Option<Arc<str>>),
    /// Part `k` of `split(sep)` (the guards fix how many parts there are).
    Part(Arc<SExpr>, Arc<str>, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Both,
    Left,
    Right,
}

/// A fact about the contents that a render's course depended on.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    NonEmpty,
    Contains(Arc<str>),
    StartsWith(Arc<str>),
    EndsWith(Arc<str>),
    Equals(Arc<str>),
    /// How many parts `split(sep)` gives.
    Parts(Arc<str>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    pub of: Arc<SExpr>,
    pub test: Test,
    pub answer: u64,
}

/// A piece of a render's text: literal, or a hole.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(Arc<str>),
    Hole(Arc<SExpr>),
}

/// Python's `strip`, `lstrip` or `rstrip` of `text`: of whitespace, or of the chars of `chars`.
/// Every result is a slice of `text`.
pub fn strip_text<'t>(text: &'t str, side: Side, chars: Option<&[char]>) -> &'t str {
    match chars {
        None => match side {
            Side::Both => python_strip(text),
            Side::Left => python_lstrip(text),
            Side::Right => python_rstrip(text),
        },
        Some(set) => match side {
            Side::Both => text.trim_matches(set),
            Side::Left => text.trim_start_matches(set),
            Side::Right => text.trim_end_matches(set),
        },
    }
}

/// The answer of `test` about `text`: 0 or 1, or the number of parts.
pub fn answer(text: &str, test: &Test) -> u64 {
    let yes = |b: bool| u64::from(b);
    match test {
        Test::NonEmpty => yes(!text.is_empty()),
        Test::Contains(x) => yes(text.contains(&**x)),
        Test::StartsWith(x) => yes(text.starts_with(&**x)),
        Test::EndsWith(x) => yes(text.ends_with(&**x)),
        Test::Equals(x) => yes(text == &**x),
        Test::Parts(sep) => text.split(&**sep).count() as u64,
    }
}
