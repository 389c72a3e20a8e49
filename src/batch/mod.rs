//! Stage 7, batches: rows in (`rows`), padded batches out: the epoch order (`shuffle`), the plan
//! of which rows go together under each batching strategy (`plan`), and the padded arrays with
//! their labels (`collate`).

pub mod collate;
pub mod plan;
pub mod shuffle;
