//! A tokenizer outside this crate: any object with the reference's methods, such as MLX Node's
//! own `Qwen3Tokenizer`. It renders and encodes through its own calls (made by the JS binding);
//! a dataset knows it only by the answers of its lookups and the ids of its renders.

use std::sync::Arc;

use super::ChatTokenizer;

/// What a foreign tokenizer answered to the reference's lookups, asked once when the dataset is
/// made: its pad id, the ChatML tokens it names and the raw vocabulary lookups the reference
/// makes (those tokens, the newline candidates, `assistant`).
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignTokenizer {
    pub pad_token_id: u32,
    /// `getImStartToken()`.
    pub im_start_token: String,
    /// `getImEndToken()`.
    pub im_end_token: String,
    /// `tokenToId(token)` for each token the reference looks up.
    pub lookups: Vec<(String, Option<u32>)>,
}

impl ForeignTokenizer {
    /// The answer `tokenToId(token)` gave; `None` for a token that was not asked or not found.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.lookups
            .iter()
            .find(|(t, _)| t == token)
            .and_then(|(_, id)| *id)
    }
}

/// The tokenizer a dataset's rows come from.
#[derive(Clone)]
pub enum RowTokenizer {
    /// This crate's: rows are rendered, encoded and masked here.
    Ours(Arc<ChatTokenizer>),
    /// Another library's: rows arrive as the ids of its renders.
    Foreign(ForeignTokenizer),
}

impl RowTokenizer {
    pub fn ours(&self) -> Option<&Arc<ChatTokenizer>> {
        match self {
            RowTokenizer::Ours(tokenizer) => Some(tokenizer),
            RowTokenizer::Foreign(_) => None,
        }
    }

    pub fn pad_token_id(&self) -> u32 {
        match self {
            RowTokenizer::Ours(tokenizer) => tokenizer.pad_token_id(),
            RowTokenizer::Foreign(foreign) => foreign.pad_token_id,
        }
    }

    /// The BOS id a report counts at the start of rows; a foreign tokenizer is not asked for one.
    pub fn bos_token_id(&self) -> Option<u32> {
        self.ours().and_then(|t| t.bos_token_id())
    }
}
