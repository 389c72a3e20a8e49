//! sft-dataset: chat fine-tuning data to exact token batches.
//!
//! The pipeline is the folder tree, in data order:
//! `input` (files and records) -> `example` (examples, messages) -> `render` (the chat template,
//! as transformers renders it) -> `tokenize` (token ids and offsets) -> `mask` (trained ranges)
//! -> `rows` (one row per example) -> `batch` (order, plan, padded batches) -> `dataset` (the
//! whole). Beside it: `store` (token cache, Parquet export), `tools` (GRPO masks, distillation
//! payloads) and `napi`, which only converts between JS and these modules. `error` is shared by
//! all.

pub mod batch;
pub mod dataset;
pub mod error;
pub mod example;
pub mod input;
pub mod mask;
pub mod napi;
pub mod render;
pub mod rows;
pub mod store;
#[cfg(test)]
mod test_support;
pub mod tokenize;
pub mod tools;
