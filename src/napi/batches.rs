//! Batches as JS receives them: typed arrays written on the JS thread from collated or prepared
//! rows.

use napi::Env;
use napi_derive::napi;

use super::arrays::{uninit_array, BatchArray, Owned, OwnedF32, OwnedI32, OwnedU32};
use super::warnings::warn_first_sight;
use crate::batch::collate::{BatchDistill, Cells};
use crate::dataset::{CollatedBatch, PreparedBatch};
use crate::error::{js_number, ErrorCode, SftError, SftResult};

#[napi(object, js_name = "SFTBatch", object_from_js = false)]
pub struct SftBatch {
    /// Token ids, row-major `[batch, seqLen]`, right-padded with the pad id.
    #[napi(ts_type = "Int32Array")]
    pub input_ids: BatchArray<i32>,
    /// Labels, `-100` where no loss is taken.
    #[napi(ts_type = "Int32Array")]
    pub labels: BatchArray<i32>,
    #[napi(ts_type = "[number, number]")]
    pub shape: Vec<u32>,
    /// Distillation target ids `[batch, seqLen, k]`, truncated and padded like `inputIds`
    /// (-1 where there is no target). Present when any example of the batch has `distill`.
    #[napi(ts_type = "Int32Array")]
    pub distill_token_ids: Option<OwnedI32>,
    /// Distillation logprobs, same shape (`-Infinity` where there is no target).
    #[napi(ts_type = "Float32Array")]
    pub distill_logprobs: Option<OwnedF32>,
    /// `[batch, seqLen, k]` of the distillation tensors.
    #[napi(ts_type = "[number, number, number]")]
    pub distill_shape: Option<Vec<u32>>,
    /// Every batching but `'reference'` (and any sharded dataset): the example index of each
    /// row; of a packed row, its first example.
    #[napi(ts_type = "Uint32Array")]
    pub indices: Option<OwnedU32>,
    /// `'packed'`: each token's position within its own example, restarting at 0 for every
    /// example (0 on padding), `[batch, seqLen]`.
    #[napi(ts_type = "Int32Array")]
    pub position_ids: Option<BatchArray<i32>>,
    /// `'packed'`: the example index of each token, -1 on padding, `[batch, seqLen]`.
    #[napi(ts_type = "Int32Array")]
    pub example_ids: Option<BatchArray<i32>>,
}

/// A position in the epoch order, as the JS generator passes it.
pub(crate) fn position(v: f64) -> SftResult<usize> {
    if v.fract() == 0.0 && v >= 0.0 && v <= u32::MAX as f64 {
        Ok(v as usize)
    } else {
        Err(SftError::invalid_argument(format!(
            "{} is not a position",
            js_number(v)
        )))
    }
}

pub(crate) fn finish_batch(env: &Env, collated: CollatedBatch) -> SftResult<SftBatch> {
    warn_first_sight(env, &collated.warnings)?;
    let b = collated.batch;
    let packing = b
        .packing
        .map(|p| (p.position_ids.into(), p.example_ids.into()));
    Ok(sft_batch(
        (b.input_ids.into(), b.labels.into(), packing),
        (b.rows, b.seq_len),
        b.distill,
        collated.indices,
    ))
}

/// `finish_batch` of a batch laid out on the JS thread: its cells are written straight into the
/// typed arrays' V8 memory, with no vector between.
pub(crate) fn write_batch(env: &Env, prepared: PreparedBatch) -> SftResult<SftBatch> {
    warn_first_sight(env, &prepared.warnings)?;
    let layout = &prepared.layout;
    let cells = layout.cells();
    let made = |e: napi::Error| {
        SftError::new(
            ErrorCode::Internal,
            format!("a batch array could not be made: {e}"),
        )
    };
    let raw = env.raw();
    // SAFETY: `raw` is the environment of the current call; `layout.write` writes every cell of
    // the arrays (it panics otherwise, and the arrays are then dropped unseen), and the cells
    // are not kept past this function.
    let arrays = unsafe {
        let (input_ids, input_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
        let (labels, label_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
        let packing = if layout.is_packed() {
            let (positions, position_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
            let (examples, example_cells) = uninit_array::<i32>(raw, cells).map_err(made)?;
            Some(((positions, examples), (position_cells, example_cells)))
        } else {
            None
        };
        let (packing, packing_cells) = packing.unzip();
        layout.write(Cells {
            input_ids: input_cells,
            labels: label_cells,
            packing: packing_cells,
        });
        let made = BatchArray::Made;
        (
            made(input_ids),
            made(labels),
            packing.map(|(p, e)| (made(p), made(e))),
        )
    };
    Ok(sft_batch(
        arrays,
        (layout.rows(), layout.seq_len()),
        layout.distill(),
        prepared.indices,
    ))
}

/// Input ids, labels and, for packed batches, position and example ids.
pub(crate) type BatchArrays = (
    BatchArray<i32>,
    BatchArray<i32>,
    Option<(BatchArray<i32>, BatchArray<i32>)>,
);

/// The `SFTBatch` of a batch's arrays, `(rows, seq_len)`, distillation targets and row indices.
pub(crate) fn sft_batch(
    (input_ids, labels, packing): BatchArrays,
    (rows, seq_len): (usize, usize),
    distill: Option<BatchDistill>,
    indices: Option<Vec<u32>>,
) -> SftBatch {
    let distill_shape = distill
        .as_ref()
        .map(|d| vec![rows as u32, seq_len as u32, d.k as u32]);
    let (distill_token_ids, distill_logprobs) =
        distill.map(|d| (Owned(d.ids), Owned(d.logprobs))).unzip();
    let (position_ids, example_ids) = packing.unzip();
    SftBatch {
        input_ids,
        labels,
        shape: vec![rows as u32, seq_len as u32],
        distill_token_ids,
        distill_logprobs,
        distill_shape,
        indices: indices.map(Owned),
        position_ids,
        example_ids,
    }
}
