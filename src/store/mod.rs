//! Beside the pipeline, the store: rows kept on disk. `token_cache` maps the rows of a data file
//! built before (keyed by every input of a row); `export` writes rows or an epoch's batches as
//! Parquet.

pub mod export;
pub mod token_cache;
