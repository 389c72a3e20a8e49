//! What an encoder gives: token ids with the byte span of the text each came from. Its own
//! module, so that the engines and `control_tokens` share it without depending on each other.

/// Token ids with the byte span of the text each one came from.
pub struct EncodedText {
    pub ids: Vec<u32>,
    pub offsets: Vec<(usize, usize)>,
}
