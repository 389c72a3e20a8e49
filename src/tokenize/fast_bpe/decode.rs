//! Decoding ids back to text, as HF's decoders do.
//!
//! Byte-level tokenizers decode each token's byte-level spelling to raw bytes. SentencePiece-
//! style ones run a chain of per-token string steps (`Replace`, `ByteFallback`, `Fuse`,
//! `Strip`, `Metaspace`) over the token strings, each step exactly as HF's `decode_chain`.

/// One decoder of a `Sequence` (or the only one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// A literal pattern, replaced in every token.
    Replace { pattern: String, content: String },
    /// Runs of `<0xNN>` tokens become the text of their bytes, or one U+FFFD per byte when
    /// they are not UTF-8.
    ByteFallback,
    /// All tokens joined into one.
    Fuse,
    /// Up to `start` leading `content` chars removed from every token (`stop` is 0).
    Strip { content: char, start: usize },
    /// The replacement char becomes a space, or nothing in the first token unless the
    /// prepend scheme is `never`.
    Metaspace { replacement: char, drop_first: bool },
}

/// The `<0xNN>` byte a token stands for, with HF's test (6 bytes, hex read by
/// `u8::from_str_radix`).
fn byte_token(token: &str) -> Option<u8> {
    if token.len() != 6 || !token.starts_with("<0x") || !token.ends_with('>') {
        return None;
    }
    u8::from_str_radix(token.get(3..5)?, 16).ok()
}

fn flush_bytes(bytes: &mut Vec<u8>, out: &mut Vec<String>) {
    if bytes.is_empty() {
        return;
    }
    match String::from_utf8(std::mem::take(bytes)) {
        Ok(s) => out.push(s),
        Err(e) => out.extend(std::iter::repeat_n(
            "\u{fffd}".to_owned(),
            e.as_bytes().len(),
        )),
    }
}

/// Runs `steps` over `tokens` and joins what is left, as HF's `Decoder::decode` does.
pub(super) fn decode_chain(steps: &[Step], mut tokens: Vec<String>) -> String {
    for step in steps {
        tokens = match step {
            Step::Replace { pattern, content } => tokens
                .into_iter()
                .map(|t| {
                    if t.contains(pattern.as_str()) {
                        t.replace(pattern.as_str(), content)
                    } else {
                        t
                    }
                })
                .collect(),
            Step::ByteFallback => {
                let mut out = Vec::with_capacity(tokens.len());
                let mut bytes = Vec::new();
                for t in tokens {
                    match byte_token(&t) {
                        Some(b) => bytes.push(b),
                        None => {
                            flush_bytes(&mut bytes, &mut out);
                            out.push(t);
                        }
                    }
                }
                flush_bytes(&mut bytes, &mut out);
                out
            }
            Step::Fuse => vec![tokens.concat()],
            Step::Strip { content, start } => tokens
                .into_iter()
                .map(|t| {
                    let cut: usize = t
                        .chars()
                        .take(*start)
                        .take_while(|c| c == content)
                        .map(char::len_utf8)
                        .sum();
                    t[cut..].to_owned()
                })
                .collect(),
            Step::Metaspace {
                replacement,
                drop_first,
            } => tokens
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    t.chars()
                        .filter_map(|c| match c == *replacement {
                            true if i == 0 && *drop_first => None,
                            true => Some(' '),
                            false => Some(c),
                        })
                        .collect()
                })
                .collect(),
        };
    }
    tokens.concat()
}
