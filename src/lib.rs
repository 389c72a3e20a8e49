//! sft-dataset: chat fine-tuning data to exact token batches.
//!
//! Data flow: records of a JSONL, JSON or Parquet file, compressed or not (`input`, `jsonl`) ->
//! the reference's shapes (`dataset_format`) -> examples (`example`) -> messages (`message`) -> rendered text
//! (`chat_template`: the interpreter, and direct renderers of known templates) -> token ids (`tokenizer`) -> labels (`masking`) -> cached rows (`dataset`)
//! -> padded batches (`collate`) in epoch order (`shuffle`). `grpo` (label masks for RL trainers)
//! and `distill` (self-distillation payloads) build on the same rendering, tokenizer and masking.
//! `napi` only converts between JS and these modules.

pub mod chat_template;
pub mod collate;
pub mod control_tokens;
pub mod dataset;
pub mod dataset_format;
pub mod distill;
pub mod error;
pub mod example;
pub mod export;
pub mod fast_bpe;
pub mod grpo;
pub mod input;
pub mod json_dumps;
pub mod json_text;
pub mod json_value;
pub mod jsonl;
pub mod loader;
pub mod masking;
pub mod message;
#[cfg(feature = "napi")]
pub mod napi;
pub mod packed_rows;
pub mod path_security;
pub mod plan;
pub mod repeats;
pub mod report;
pub mod row;
pub mod row_cache;
pub mod shuffle;
pub mod silent_loss;
pub mod spans;
#[cfg(test)]
mod test_support;
pub mod token_cache;
pub mod tokenizer;
pub mod truncation;
pub mod validate;
