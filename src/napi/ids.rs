//! Token ids and masks from JS: `Int32Array`, `Uint32Array` or `number[]`, checked element by
//! element so that an error names the position.

use napi::bindgen_prelude::{Either3, Int32Array, Uint32Array};

use crate::error::{js_number, SftError, SftResult};

/// `Int32Array`, `Uint32Array` or `number[]`.
pub type IdsInput = Either3<Int32Array, Uint32Array, Vec<f64>>;

/// Token ids: integers in `[0, 2^31)`, so that labels fit an `Int32Array`.
pub fn token_ids(input: &IdsInput, name: &str) -> SftResult<Vec<u32>> {
    let bad = |i: usize, v: String| {
        SftError::invalid_argument(format!("{name}[{i}] = {v} is not a token id"))
    };
    match input {
        Either3::A(a) => a
            .iter()
            .enumerate()
            .map(|(i, &v)| u32::try_from(v).map_err(|_| bad(i, v.to_string())))
            .collect(),
        Either3::B(a) => a
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if v <= i32::MAX as u32 {
                    Ok(v)
                } else {
                    Err(bad(i, v.to_string()))
                }
            })
            .collect(),
        Either3::C(a) => a
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if v.fract() == 0.0 && (0.0..=i32::MAX as f64).contains(&v) {
                    Ok(v as u32)
                } else {
                    Err(bad(i, js_number(v)))
                }
            })
            .collect(),
    }
}

/// Masks: any 32-bit signed integer (-100, token ids, legacy 0/1 flags, ...).
pub fn mask_values(input: &IdsInput, name: &str) -> SftResult<Vec<i32>> {
    let bad = |i: usize, v: String| {
        SftError::invalid_argument(format!("{name}[{i}] = {v} is not a 32-bit integer"))
    };
    match input {
        Either3::A(a) => Ok(a.to_vec()),
        Either3::B(a) => a
            .iter()
            .enumerate()
            .map(|(i, &v)| i32::try_from(v).map_err(|_| bad(i, v.to_string())))
            .collect(),
        Either3::C(a) => a
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if v.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&v) {
                    Ok(v as i32)
                } else {
                    Err(bad(i, js_number(v)))
                }
            })
            .collect(),
    }
}
