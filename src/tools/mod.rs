//! Beside the pipeline, tools for other trainers that reuse its rendering, tokenizing and
//! masking: `grpo` (label masks of RL rollouts) and `distill` (self-distillation payloads).

pub mod distill;
pub mod grpo;
