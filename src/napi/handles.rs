//! Tokenizers known by a number, for the sync calls that lib/ makes once per text.
//!
//! napi-rs checks the borrow of the native object behind `this` on every `&self` method call
//! (an unwrap, a type-tag check, a lock and a hash map: about 0.3 µs, a third of
//! `encodeSync` on a short text). A static method that gets a number skips all of it: lib/
//! asks a tokenizer for its number once and passes the number after that.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use rustc_hash::FxHashMap;

use crate::tokenize::ChatTokenizer;

static NEXT: AtomicU32 = AtomicU32::new(1);
static LIVE: LazyLock<RwLock<FxHashMap<u32, Arc<ChatTokenizer>>>> = LazyLock::new(RwLock::default);

/// A tokenizer's number, given up when the JS object that owns it is collected.
pub struct Handle(u32);

impl Handle {
    pub fn new(tokenizer: Arc<ChatTokenizer>) -> Self {
        let mut live = LIVE
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // After 2^32 tokenizers the numbers wrap: one still in use is skipped.
        let number = loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            if n != 0 && !live.contains_key(&n) {
                break n;
            }
        };
        live.insert(number, tokenizer);
        Handle(number)
    }

    pub fn number(&self) -> u32 {
        self.0
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut live = LIVE
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        live.remove(&self.0);
    }
}

/// The live tokenizer numbered `number`.
pub fn tokenizer(number: u32) -> Option<Arc<ChatTokenizer>> {
    let live = LIVE.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    live.get(&number).cloned()
}
