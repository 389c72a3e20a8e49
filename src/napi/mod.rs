//! The JS surface: conversions between JS values and the core modules, nothing more.

#[cfg(feature = "napi")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "napi")]
pub mod arrays;
#[cfg(feature = "napi")]
pub mod batches;
#[cfg(feature = "napi")]
pub mod config;
#[cfg(feature = "napi")]
pub mod create;
#[cfg(feature = "napi")]
pub mod dataset;
#[cfg(feature = "napi")]
pub mod distill;
#[cfg(feature = "napi")]
pub mod error;
#[cfg(feature = "napi")]
pub mod foreign;
#[cfg(feature = "napi")]
pub mod grpo;
#[cfg(feature = "napi")]
pub mod handles;
#[cfg(feature = "napi")]
pub mod ids;
#[cfg(feature = "napi")]
pub mod json;
#[cfg(feature = "napi")]
pub mod mix;
#[cfg(feature = "napi")]
pub mod path;
#[cfg(feature = "napi")]
pub mod report;
#[cfg(feature = "napi")]
pub mod summary;
#[cfg(feature = "napi")]
pub mod task;
#[cfg(feature = "napi")]
pub mod text;
#[cfg(feature = "napi")]
pub mod token_cache;
#[cfg(feature = "napi")]
pub mod tokenizer;
// The V8 serialization reader needs no N-API: `cargo test` covers it.
pub mod v8_wire;
#[cfg(feature = "napi")]
pub mod validate;
#[cfg(feature = "napi")]
pub mod warnings;
