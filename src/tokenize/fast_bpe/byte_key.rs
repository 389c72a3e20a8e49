//! Keys for the encoder's flat tables (`piece_cache`, `tables`): a byte string of up to 16
//! bytes is held in place as two little-endian words, compared without a call; a longer one is
//! known by its hash and compared against a byte arena. Both come with a hash whose top bits
//! pick a table slot.

/// Bytes a key holds in place.
pub(super) const INLINE: usize = 16;

/// Little-endian word of up to 8 bytes, zero-padded, read without a loop or a call.
#[inline(always)]
fn short_word(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    if n >= 4 {
        let lo = u64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
        let hi = u64::from(u32::from_le_bytes([
            bytes[n - 4],
            bytes[n - 3],
            bytes[n - 2],
            bytes[n - 1],
        ]));
        // `hi` holds bytes n-4..n: its top n-4 bytes are bytes 4..n.
        lo | ((hi >> ((8 - n) * 8)) << 32)
    } else {
        match n {
            0 => 0,
            1 => u64::from(bytes[0]),
            2 => u64::from(bytes[0]) | u64::from(bytes[1]) << 8,
            _ => u64::from(bytes[0]) | u64::from(bytes[1]) << 8 | u64::from(bytes[2]) << 16,
        }
    }
}

/// The in-place key of up to 16 bytes.
#[inline(always)]
fn inline_key(bytes: &[u8]) -> [u64; 2] {
    if bytes.len() > 8 {
        let (head, tail) = bytes.split_at(8);
        let mut first = [0u8; 8];
        first.copy_from_slice(head);
        [u64::from_le_bytes(first), short_word(tail)]
    } else {
        [short_word(bytes), 0]
    }
}

/// Spreads two words over the slots (a folded multiply, as fast hashers do).
#[inline(always)]
pub(super) fn mix(a: u64, b: u64) -> u64 {
    let product = u128::from(a ^ 0x243F_6A88_85A3_08D3) * u128::from(b ^ 0x1319_8A2E_0370_7344);
    (product as u64) ^ ((product >> 64) as u64)
}

fn long_hash(bytes: &[u8]) -> u64 {
    bytes.chunks(8).fold(bytes.len() as u64, |h, chunk| {
        mix(h, short_word(chunk) ^ chunk.len() as u64)
    })
}

/// `bytes` as a slot key and its hash. Up to `INLINE` bytes: the bytes, zero-padded (a slot
/// keeps the length beside the key, which tells a key from its zero-padded twin). Longer:
/// `[hash, 0]`, where the slot's second word is the caller's (an offset into its arena).
#[inline(always)]
pub(super) fn key(bytes: &[u8]) -> ([u64; 2], u64) {
    let len = bytes.len();
    if len <= INLINE {
        let key = inline_key(bytes);
        (key, mix(key[0], key[1] ^ len as u64))
    } else {
        let hash = long_hash(bytes);
        ([hash, 0], hash)
    }
}
