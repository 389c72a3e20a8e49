//! The Unicode categories the hand-written split matchers tell apart, as Oniguruma sees them.
//! Every char falls in at most one: the case splits of `\p{L}` (which GPT-OSS's pattern tells
//! apart), `\p{M}`, `\p{N}`, `\s` and `[\p{P}\p{S}]`; each matcher reads the classes of its
//! pattern off these. ASCII comes from a table written here, the rest from `unicode_classes.rs`
//! (generated from Oniguruma), spread into a two-level table on first use so that a lookup is
//! two loads rather than a binary search. Runs of ASCII are also scanned eight bytes at a time.

use std::sync::LazyLock;

use super::unicode_classes::RANGES;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u8)]
pub(super) enum Category {
    #[default]
    Other = 0,
    /// `\p{Lu}`, `\p{Lt}`
    Upper = 1,
    /// `\p{Ll}`
    Lower = 2,
    /// `\p{Lm}`, `\p{Lo}`
    OtherLetter = 3,
    /// `\p{M}`
    Mark = 4,
    /// `\p{N}`
    Number = 5,
    /// `\s`
    Space = 6,
    /// `[\p{P}\p{S}]`
    PunctOrSymbol = 7,
}

/// How many categories there are: a matcher maps them to its own classes with an array this long.
pub(super) const COUNT: usize = 8;

impl Category {
    pub(super) const ALL: [Category; COUNT] = [
        Category::Other,
        Category::Upper,
        Category::Lower,
        Category::OtherLetter,
        Category::Mark,
        Category::Number,
        Category::Space,
        Category::PunctOrSymbol,
    ];

    /// The category of a code stored in `unicode_classes.rs`.
    pub(super) const fn from_code(code: u8) -> Category {
        match code {
            1 => Category::Upper,
            2 => Category::Lower,
            3 => Category::OtherLetter,
            4 => Category::Mark,
            5 => Category::Number,
            6 => Category::Space,
            7 => Category::PunctOrSymbol,
            _ => Category::Other,
        }
    }

    /// `\p{L}`
    pub(super) const fn is_letter(self) -> bool {
        matches!(
            self,
            Category::Upper | Category::Lower | Category::OtherLetter
        )
    }
}

const fn ascii_category(b: u8) -> Category {
    match b {
        b'A'..=b'Z' => Category::Upper,
        b'a'..=b'z' => Category::Lower,
        b'0'..=b'9' => Category::Number,
        b'\t'..=b'\r' | b' ' => Category::Space,
        _ if b.is_ascii_punctuation() => Category::PunctOrSymbol,
        _ => Category::Other,
    }
}

pub(super) const ASCII: [Category; 128] = {
    let mut table = [Category::Other; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = ascii_category(b as u8);
        b += 1;
    }
    table
};

/// Code points per block of the second level.
const BLOCK: usize = 128;

struct Table {
    /// The block of each run of `BLOCK` code points.
    index: Box<[u16]>,
    blocks: Vec<[Category; BLOCK]>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let mut flat = vec![Category::Other; 0x11_0000];
    for (cp, category) in flat.iter_mut().enumerate().take(128) {
        *category = ASCII[cp];
    }
    for &(lo, hi, code) in RANGES {
        flat[lo as usize..=hi as usize].fill(Category::from_code(code));
    }
    let mut blocks: Vec<[Category; BLOCK]> = Vec::new();
    let mut seen = rustc_hash::FxHashMap::default();
    let index = flat
        .chunks(BLOCK)
        .map(|chunk| {
            let mut block = [Category::Other; BLOCK];
            block.copy_from_slice(chunk);
            *seen.entry(block.map(|c| c as u8)).or_insert_with(|| {
                blocks.push(block);
                (blocks.len() - 1) as u16
            })
        })
        .collect();
    Table { index, blocks }
});

/// The category of a char beyond ASCII.
#[inline]
pub(super) fn non_ascii(cp: u32) -> Category {
    let table = &*TABLE;
    let block = table.index[(cp as usize) / BLOCK];
    table.blocks[block as usize][(cp as usize) % BLOCK]
}

#[inline(always)]
pub(super) fn category(c: char) -> Category {
    let cp = c as u32;
    if cp < 128 {
        ASCII[cp as usize]
    } else {
        non_ascii(cp)
    }
}

/// The code point of the multi-byte char that starts at `at` in valid UTF-8, and its length.
#[inline(always)]
pub(super) fn decode_multibyte(bytes: &[u8], at: usize) -> (u32, usize) {
    let lead = u32::from(bytes[at]);
    let next = |k: usize| u32::from(bytes[at + k]) & 0x3F;
    if lead < 0xE0 {
        (((lead & 0x1F) << 6) | next(1), 2)
    } else if lead < 0xF0 {
        (((lead & 0x0F) << 12) | (next(1) << 6) | next(2), 3)
    } else {
        (
            ((lead & 0x07) << 18) | (next(1) << 12) | (next(2) << 6) | next(3),
            4,
        )
    }
}

/// The char at byte `at` (a char boundary) and its category; ASCII without decoding.
#[inline(always)]
pub(super) fn char_at(text: &str, at: usize) -> Option<(char, Category)> {
    let b = *text.as_bytes().get(at)?;
    if b < 0x80 {
        return Some((char::from(b), ASCII[usize::from(b)]));
    }
    let c = text[at..].chars().next()?;
    Some((c, non_ascii(c as u32)))
}

/// The end of the run of chars whose category `keep` takes, from `at`; ASCII bytes are
/// stepped over without decoding, other chars decoded in place.
#[inline(always)]
pub(super) fn run_end(text: &str, mut at: usize, keep: impl Fn(Category) -> bool) -> usize {
    let bytes = text.as_bytes();
    loop {
        while let Some(&b) = bytes.get(at) {
            if b >= 0x80 || !keep(ASCII[usize::from(b)]) {
                break;
            }
            at += 1;
        }
        // Stopped at the end, or at an ASCII byte `keep` refuses, or at other chars, which are
        // decoded in place while they last.
        if bytes.get(at).is_none_or(|&b| b < 0x80) {
            return at;
        }
        while let Some(&b) = bytes.get(at) {
            if b < 0x80 {
                break;
            }
            let (cp, len) = decode_multibyte(bytes, at);
            if !keep(non_ascii(cp)) {
                return at;
            }
            at += len;
        }
        if at == bytes.len() {
            return at;
        }
    }
}

/// Past the ASCII letters from `at`: eight bytes at a time while eight are left (words are
/// most of chat text), then byte by byte. So do the scans below.
#[inline(always)]
pub(super) fn ascii_letters_end(bytes: &[u8], at: usize) -> usize {
    skip_ascii(
        bytes,
        at,
        |w| in_range(w | (0x20 * EACH), b'a', b'z'),
        u8::is_ascii_alphabetic,
    )
}

/// `ascii_letters_end` for the lower-case letters `a..=z` alone.
#[inline(always)]
pub(super) fn ascii_lowers_end(bytes: &[u8], at: usize) -> usize {
    skip_ascii(
        bytes,
        at,
        |w| in_range(w, b'a', b'z'),
        u8::is_ascii_lowercase,
    )
}

/// Past the ASCII bytes other than digits.
#[inline(always)]
pub(super) fn ascii_non_digits_end(bytes: &[u8], at: usize) -> usize {
    skip_ascii(
        bytes,
        at,
        |w| !in_range(w, b'0', b'9') & HIGH,
        |b| b.is_ascii() && !b.is_ascii_digit(),
    )
}

const HIGH: u64 = 0x8080_8080_8080_8080;
const EACH: u64 = 0x0101_0101_0101_0101;

/// The high bit of each byte of `w` whose low seven bits lie in `lo..=hi`: with the high bits
/// cleared, adding `0x80 - lo` (or `0x7F - hi`) to a byte sets its high bit exactly when it is
/// at least `lo` (or past `hi`), and no sum carries into the next byte.
#[inline(always)]
fn in_range(w: u64, lo: u8, hi: u8) -> u64 {
    let low = w & !HIGH;
    let from = low.wrapping_add(u64::from(0x80 - lo) * EACH) & HIGH;
    let past = low.wrapping_add(u64::from(0x7F - hi) * EACH) & HIGH;
    from & !past
}

/// Past the ASCII bytes that `member_word` marks (by the high bit of each byte of a word),
/// eight at a time, then those `member` takes, one at a time; the two agree on every byte, and
/// a byte of 0x80 or above always ends the run.
#[inline(always)]
fn skip_ascii(
    bytes: &[u8],
    mut at: usize,
    member_word: impl Fn(u64) -> u64,
    member: impl Fn(&u8) -> bool,
) -> usize {
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let others = !(member_word(w) & !w) & HIGH;
        if others != 0 {
            return at + (others.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + bytes[at..].iter().take_while(|b| member(b)).count()
}
