//! How a row longer than `maxSeqLength` is shortened: one rule shared by the row builder (which
//! checks what survives), the batch plan (which measures rows) and collation (which cuts them).

use std::ops::Range;

/// How a row longer than `maxSeqLength` is shortened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Truncation {
    /// Keep the last tokens (the reference).
    #[default]
    KeepEnd,
    /// Keep the first tokens (TRL).
    KeepStart,
    /// Drop whole oldest turns before tokenizing (see `row`); a row that still does not fit is
    /// dropped, so collation never cuts one.
    Turns,
}

impl Truncation {
    /// The option's value as users write it.
    pub fn name(self) -> &'static str {
        match self {
            Truncation::KeepEnd => "keepEnd",
            Truncation::KeepStart => "keepStart",
            Truncation::Turns => "turns",
        }
    }
}

/// The part of a row of `len` tokens that survives truncation to `max_len`.
pub fn kept_window(len: usize, max_len: usize, mode: Truncation) -> Range<usize> {
    match mode {
        Truncation::KeepStart => 0..len.min(max_len),
        Truncation::KeepEnd | Truncation::Turns => len.saturating_sub(max_len)..len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_keep_the_chosen_end() {
        assert_eq!(kept_window(5, 3, Truncation::KeepEnd), 2..5);
        assert_eq!(kept_window(5, 3, Truncation::Turns), 2..5);
        assert_eq!(kept_window(5, 3, Truncation::KeepStart), 0..3);
        assert_eq!(kept_window(2, 3, Truncation::KeepEnd), 0..2);
        assert_eq!(kept_window(2, 3, Truncation::KeepStart), 0..2);
    }
}
