//! Self-distillation payloads (`distill`) for JS: `packDistillation`, and the two pure steps that
//! `attachDistillation` (lib/distill.js) runs around the caller's fetches.

use napi::bindgen_prelude::{Float32Array, Int32Array, JsObjectValue, Object, Unknown};
use napi::{JsValue, ValueType};
use napi_derive::napi;
use serde_json::Value;

use super::error::{run_sync, JsResult as Result};
use crate::error::{ErrorCode, SftError};
use crate::tools::distill::{self, DistillConfig, Fetched, Member, Plan};

#[napi(object)]
pub struct PackDistillationOptions {
    /// Alternatives per position beyond the selected token: `k = topK + 1` entries.
    pub top_k: f64,
}

/// Dense distillation payload. Absent entries (position 0, ranks a position does not fill,
/// positions past the end of a shorter sequence) hold id -1 and logprob -Infinity.
#[napi(object)]
pub struct PackedDistillation {
    /// Row-major `[sequences, positions, k]`.
    pub ids: Int32Array,
    /// Row-major `[sequences, positions, k]`.
    pub logprobs: Float32Array,
    #[napi(ts_type = "[number, number, number]")]
    pub shape: Vec<u32>,
}

/// `[sequence][position][rank]` token ids and logprobs as dense arrays of
/// `[sequences, longest sequence, topK + 1]`. Throws `INVALID_DISTILLATION`, naming the sequence
/// and position, when ids and logprobs differ in shape, a position holds more than `topK + 1`
/// entries, an id is not an integer in `[0, 2^31)` or a logprob is NaN or +Infinity.
#[napi]
pub fn pack_distillation(
    token_ids: Vec<Vec<Vec<f64>>>,
    logprobs: Vec<Vec<Vec<f64>>>,
    options: PackDistillationOptions,
) -> Result<PackedDistillation> {
    run_sync(|| {
        let p = distill::pack(&token_ids, &logprobs, options.top_k)?;
        Ok(PackedDistillation {
            ids: Int32Array::new(p.ids),
            logprobs: Float32Array::new(p.logprobs),
            shape: p.shape.iter().map(|&d| d as u32).collect(),
        })
    })
}

/// `attachDistillation`'s config (the reference's `StudentDistillationConfig`).
#[napi(object)]
pub struct DistillationConfig {
    /// Fetch student logprobs at all. Default false: groups are left untouched.
    pub student_distill_enabled: Option<bool>,
    /// Alternatives fetched beyond the selected token; 0 fetches the selected token's logprob
    /// only, -1 disables fetching (the payload is set to null). Default 0, at least -1.
    pub student_top_k: Option<f64>,
}

#[napi(object)]
pub struct DistillationPlan {
    /// `'unchanged'`, `'drop'` (payload set to null) or `'fetch'`.
    pub action: String,
    /// One request per sequence when `action` is `'fetch'`.
    pub requests: Option<Vec<Value>>,
}

/// Internal step of `attachDistillation`: the group's fate and its requests.
#[napi]
pub fn plan_distillation_requests(
    tokens: Value,
    overrides: Value,
    group_overrides: Value,
    config: Option<DistillationConfig>,
) -> Result<DistillationPlan> {
    run_sync(|| {
        let config = config.map_or_else(
            || DistillConfig::new(None, None),
            |c| DistillConfig::new(c.student_distill_enabled, c.student_top_k),
        )?;
        let plan = distill::plan_requests(&tokens, &overrides, &group_overrides, &config)?;
        Ok(match plan {
            Plan::Unchanged => DistillationPlan {
                action: "unchanged".into(),
                requests: None,
            },
            Plan::Drop => DistillationPlan {
                action: "drop".into(),
                requests: None,
            },
            Plan::Fetch(requests) => DistillationPlan {
                action: "fetch".into(),
                requests: Some(requests),
            },
        })
    })
}

fn member(reply: &Object, name: &str) -> napi::Result<Member> {
    let value: Unknown = reply.get_named_property(name)?;
    Ok(match value.get_type()? {
        ValueType::Undefined => Member::Missing,
        _ if value.is_array()? => {
            let list: Object = reply.get_named_property(name)?;
            Member::List(list.get_array_length()? as usize)
        }
        _ => Member::Other,
    })
}

/// The message of a rejection: `reason.message` when it is a string, else `String(reason)`.
fn reason_text(outcome: &Object) -> napi::Result<String> {
    let reason: Unknown = outcome.get_named_property("reason")?;
    if reason.get_type()? == ValueType::Object {
        let reason: Object = outcome.get_named_property("reason")?;
        let message: Unknown = reason.get_named_property("message")?;
        if message.get_type()? == ValueType::String {
            return reason.get_named_property("message");
        }
    }
    reason.coerce_to_string()?.into_utf8()?.into_owned()
}

/// One `Promise.allSettled` outcome, read without converting the (large) payload arrays.
fn fetched(outcome: &Object) -> napi::Result<Fetched> {
    let status: String = outcome.get_named_property("status")?;
    if status != "fulfilled" {
        return Ok(Fetched::Rejected(reason_text(outcome)?));
    }
    let value: Unknown = outcome.get_named_property("value")?;
    if value.get_type()? != ValueType::Object || value.is_array()? {
        return Ok(Fetched::NotObject);
    }
    let reply: Object = outcome.get_named_property("value")?;
    let prompt: Unknown = reply.get_named_property("prompt_tokens")?;
    let prompt_tokens = match prompt.get_type()? {
        ValueType::Undefined => Value::Null,
        _ => reply.get_named_property_unchecked("prompt_tokens")?,
    };
    Ok(Fetched::Reply {
        prompt_tokens,
        token_ids: member(&reply, "prompt_topk_token_ids")?,
        logprobs: member(&reply, "prompt_topk_logprobs")?,
    })
}

/// Internal step of `attachDistillation`: the warning that drops the group's payload, or null
/// when every reply is aligned. `settled` are the `Promise.allSettled` outcomes of the fetches.
#[napi]
pub fn check_distillation_replies(
    tokens: Vec<Value>,
    settled: Vec<Object>,
) -> Result<Option<String>> {
    run_sync(|| {
        let outcomes = settled
            .iter()
            .map(fetched)
            .collect::<napi::Result<Vec<_>>>()
            .map_err(|e| {
                SftError::new(
                    ErrorCode::InvalidDistillation,
                    format!("cannot read a fetch outcome: {}", e.reason),
                )
            })?;
        distill::check_replies(&tokens, &outcomes)
    })
}
