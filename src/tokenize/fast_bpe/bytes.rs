//! The GPT-2 byte-level alphabet: every byte is shown as one printable char so that
//! vocabularies can be stored as JSON strings.

/// Bytes that stand for themselves; every other byte is shifted to U+0100 and above,
/// in byte order.
fn is_self_mapped(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

pub(super) struct ByteAlphabet {
    to_char: [char; 256],
    /// Indexed by code point; the alphabet never goes past U+0143.
    from_char: [Option<u8>; 0x144],
}

impl ByteAlphabet {
    pub(super) fn new() -> Self {
        let mut to_char = ['\0'; 256];
        let mut from_char = [None; 0x144];
        let mut shifted = 0u32;
        for b in 0..=255u8 {
            let cp = if is_self_mapped(b) {
                u32::from(b)
            } else {
                shifted += 1;
                255 + shifted
            };
            // Every value is below U+0144, so the conversion always succeeds.
            let c = char::from_u32(cp).unwrap_or('\0');
            to_char[usize::from(b)] = c;
            from_char[cp as usize] = Some(b);
        }
        Self { to_char, from_char }
    }

    pub(super) fn char_of(&self, b: u8) -> char {
        self.to_char[usize::from(b)]
    }

    pub(super) fn byte_of(&self, c: char) -> Option<u8> {
        self.from_char.get(c as usize).copied().flatten()
    }

    /// The raw bytes a vocabulary entry stands for, or `None` when it holds a char
    /// outside the alphabet (such entries can only come from added tokens).
    pub(super) fn decode_token(&self, token: &str) -> Option<Vec<u8>> {
        token.chars().map(|c| self.byte_of(c)).collect()
    }
}
