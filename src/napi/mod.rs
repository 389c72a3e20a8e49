//! The JS surface: conversions between JS values and the core modules, nothing more.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod arrays;
pub mod batches;
pub mod config;
pub mod create;
pub mod dataset;
pub mod distill;
pub mod error;
pub mod grpo;
pub mod ids;
pub mod json;
pub mod path;
pub mod report;
pub mod summary;
pub mod task;
pub mod token_cache;
pub mod tokenizer;
pub mod validate;
pub mod warnings;
