//! Self-distillation payloads: per-token top-k token ids and logprobs of a student model,
//! `[sequence][position][k]`, entry `[s][p]` describing position `p` of sequence `s`.
//!
//! Two pure halves of the reference's distillation step live here; the fetching itself is the
//! caller's async function, driven from JS (`lib/distill.js`):
//! - `plan_requests`: whether a group is fetched at all, and the request of each sequence with
//!   its overrides merged;
//! - `check_replies`: the alignment and length checks that decide whether the group keeps its
//!   payload (all sequences) or drops it (none).
//!
//! `pack` turns nested payloads into dense arrays for a trainer.

use serde_json::{Map, Value as Json};

use crate::error::{ErrorCode, SftError, SftResult};

/// Id of an entry that is absent: position 0 (nothing predicts it), positions past the end of a
/// shorter sequence, and the ranks a position does not fill.
pub const MISSING_ID: i32 = -1;
/// Logprob of an absent entry: probability zero.
pub const MISSING_LOGPROB: f32 = f32::NEG_INFINITY;

/// What the reference's warning says when a reply describes other tokens than the sequence.
pub const MISALIGNED: &str = "Student distillation request did not align to the original token sequence. Override-driven prompt/messages are only supported when they reproduce the exact same prompt tokens.";

fn invalid_distillation(message: String) -> SftError {
    SftError::new(ErrorCode::InvalidDistillation, message)
}

/// Dense payload, row-major `[sequences, positions, k]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub ids: Vec<i32>,
    pub logprobs: Vec<f32>,
    pub shape: [usize; 3],
}

/// Packs `[sequence][position][rank]` lists into `[sequences, positions, top_k + 1]` (the
/// selected token and `top_k` alternatives). `positions` is the longest sequence; everything
/// absent holds `MISSING_ID` / `MISSING_LOGPROB`. Ids and logprobs must have the same shape
/// down to every position; ids must be integers in `[0, 2^31)`; logprobs may be `-Infinity`
/// but not NaN or `+Infinity`.
pub fn pack(
    token_ids: &[Vec<Vec<f64>>],
    logprobs: &[Vec<Vec<f64>>],
    top_k: f64,
) -> SftResult<Packed> {
    if !(top_k.is_finite() && top_k >= 0.0 && top_k.fract() == 0.0 && top_k < 65536.0) {
        return Err(SftError::invalid_argument(format!(
            "topK must be an integer >= 0, got {top_k}"
        )));
    }
    let k = top_k as usize + 1;
    if token_ids.len() != logprobs.len() {
        return Err(invalid_distillation(format!(
            "tokenIds has {} sequences but logprobs has {}",
            token_ids.len(),
            logprobs.len()
        )));
    }
    for (s, (ids, lps)) in token_ids.iter().zip(logprobs).enumerate() {
        if ids.len() != lps.len() {
            return Err(invalid_distillation(format!(
                "sequence {s}: tokenIds has {} positions but logprobs has {}",
                ids.len(),
                lps.len()
            )));
        }
    }
    let positions = token_ids.iter().map(Vec::len).max().unwrap_or(0);
    let size = token_ids.len() * positions * k;
    let mut out_ids = vec![MISSING_ID; size];
    let mut out_lps = vec![MISSING_LOGPROB; size];
    for (s, (ids, lps)) in token_ids.iter().zip(logprobs).enumerate() {
        for (p, (ids, lps)) in ids.iter().zip(lps).enumerate() {
            let at =
                |what: String| invalid_distillation(format!("sequence {s}, position {p}: {what}"));
            if ids.len() != lps.len() {
                return Err(at(format!(
                    "{} token ids but {} logprobs",
                    ids.len(),
                    lps.len()
                )));
            }
            if ids.len() > k {
                return Err(at(format!(
                    "{} entries, more than topK + 1 = {k}",
                    ids.len()
                )));
            }
            let base = (s * positions + p) * k;
            for (r, (&id, &lp)) in ids.iter().zip(lps).enumerate() {
                if !(id.fract() == 0.0 && (0.0..=i32::MAX as f64).contains(&id)) {
                    return Err(at(format!(
                        "token id {id} is not an integer in [0, 2147483647]"
                    )));
                }
                if lp.is_nan() {
                    return Err(at("logprob is NaN".to_string()));
                }
                if lp == f64::INFINITY {
                    return Err(at("logprob is +Infinity".to_string()));
                }
                out_ids[base + r] = id as i32;
                out_lps[base + r] = lp as f32;
            }
        }
    }
    Ok(Packed {
        ids: out_ids,
        logprobs: out_lps,
        shape: [token_ids.len(), positions, k],
    })
}

/// `studentDistillEnabled` / `studentTopK` of the reference's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DistillConfig {
    pub enabled: bool,
    /// Alternatives fetched beyond the selected token; -1 disables fetching.
    pub top_k: i64,
}

impl DistillConfig {
    /// The reference's defaults (disabled, top-k 0) and its `top_k >= -1` constraint.
    pub fn new(enabled: Option<bool>, top_k: Option<f64>) -> SftResult<Self> {
        let top_k = match top_k {
            None => 0,
            Some(v) if v.is_finite() && v.fract() == 0.0 && v >= -1.0 && v <= i32::MAX as f64 => {
                v as i64
            }
            Some(v) => {
                return Err(SftError::invalid_argument(format!(
                    "studentTopK must be an integer >= -1, got {v}"
                )))
            }
        };
        Ok(DistillConfig {
            enabled: enabled.unwrap_or(false),
            top_k,
        })
    }
}

/// What to do with a group before any fetch.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Distillation is off: the group is left exactly as it is.
    Unchanged,
    /// The group gets `distill_token_ids` and `distill_logprobs` set to null.
    Drop,
    /// One request per sequence, to be fetched concurrently.
    Fetch(Vec<Json>),
}

/// Python truthiness of a JSON value.
fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}

/// `value or {}` where the value must then be a dict.
fn object_or_empty<'a>(v: &'a Json, what: &str) -> SftResult<Option<&'a Map<String, Json>>> {
    match v {
        Json::Object(o) => Ok(Some(o)),
        _ if !truthy(v) => Ok(None),
        _ => Err(SftError::invalid_argument(format!(
            "{what} must be an object"
        ))),
    }
}

/// `int(value)` as Python evaluates it for the values JSON can hold.
fn python_int(v: &Json) -> SftResult<i64> {
    let bad = || SftError::invalid_argument(format!("student_top_k must be an integer, got {v}"));
    match v {
        Json::Bool(b) => Ok(i64::from(*b)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Ok(i),
            None => n
                .as_f64()
                .filter(|x| x.is_finite() && x.abs() < 9.0e15)
                .map(|x| x.trunc() as i64)
                .ok_or_else(bad),
        },
        Json::String(s) => s.trim().parse::<i64>().map_err(|_| bad()),
        _ => Err(bad()),
    }
}

/// The logprob kwargs of one override dict: `student_logprob_kwargs` when the key is present
/// (whatever its value), else `student_distill_kwargs`; only a dict is used.
fn kwargs_of(overrides: &Map<String, Json>) -> Option<&Map<String, Json>> {
    overrides
        .get("student_logprob_kwargs")
        .or_else(|| overrides.get("student_distill_kwargs"))
        .and_then(Json::as_object)
}

/// Group kwargs, then the sequence's own on top.
fn merged_kwargs(
    group_overrides: Option<&Map<String, Json>>,
    overrides: &[Json],
    seq: usize,
) -> SftResult<Map<String, Json>> {
    let mut merged = Map::new();
    if let Some(kw) = group_overrides.and_then(kwargs_of) {
        merged.extend(kw.clone());
    }
    if let Some(seq_overrides) = overrides.get(seq) {
        let what = format!("overrides[{seq}]");
        if let Some(kw) = object_or_empty(seq_overrides, &what)?.and_then(kwargs_of) {
            for (key, value) in kw {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(merged)
}

/// The reference's decision and requests for a group `{tokens, overrides, group_overrides}`
/// (absent members as `Json::Null`). A request is `{input_ids, top_k, max_tokens: 1, split:
/// 'train', ...kwargs}`, without `input_ids` when the kwargs supply `messages` or `prompt`.
pub fn plan_requests(
    tokens: &Json,
    overrides: &Json,
    group_overrides: &Json,
    config: &DistillConfig,
) -> SftResult<Plan> {
    if !config.enabled {
        return Ok(Plan::Unchanged);
    }
    if !truthy(tokens) {
        return Ok(Plan::Drop);
    }
    let Json::Array(seqs) = tokens else {
        return Err(SftError::invalid_argument(
            "group.tokens must be an array of token sequences".to_string(),
        ));
    };
    let group_overrides = object_or_empty(group_overrides, "group.group_overrides")?;
    if group_overrides
        .and_then(|g| g.get("skip_student_top_k"))
        .is_some_and(truthy)
    {
        return Ok(Plan::Drop);
    }
    let top_k = match group_overrides.and_then(|g| g.get("student_top_k")) {
        Some(v) => python_int(v)?,
        None => config.top_k,
    };
    if top_k <= -1 {
        return Ok(Plan::Drop);
    }
    let overrides: &[Json] = match overrides {
        Json::Array(list) => list.as_slice(),
        v if !truthy(v) => &[],
        _ => {
            return Err(SftError::invalid_argument(
                "group.overrides must be an array".to_string(),
            ))
        }
    };
    let mut requests = Vec::with_capacity(seqs.len());
    for (i, seq) in seqs.iter().enumerate() {
        let kwargs = merged_kwargs(group_overrides, overrides, i)?;
        let mut request = Map::new();
        request.insert("input_ids".into(), seq.clone());
        request.insert("top_k".into(), Json::from(top_k));
        request.insert("max_tokens".into(), Json::from(1));
        request.insert("split".into(), Json::from("train"));
        let replaces_ids = ["messages", "prompt"]
            .iter()
            .any(|k| kwargs.get(*k).is_some_and(|v| !v.is_null()));
        for (key, value) in kwargs {
            request.insert(key, value);
        }
        if replaces_ids {
            request.shift_remove("input_ids");
        }
        requests.push(Json::Object(request));
    }
    Ok(Plan::Fetch(requests))
}

/// A member of a reply as far as the checks care.
#[derive(Debug, Clone, PartialEq)]
pub enum Member {
    Missing,
    /// An array of this length.
    List(usize),
    /// Present but not an array.
    Other,
}

/// How one fetch settled.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    /// The fetch threw or rejected, with its message.
    Rejected(String),
    /// The reply was not an object.
    NotObject,
    Reply {
        /// `prompt_tokens`, `Json::Null` when absent.
        prompt_tokens: Json,
        token_ids: Member,
        logprobs: Member,
    },
}

/// Python `==` on JSON: numbers by value (`1 == 1.0`).
fn python_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| python_eq(x, y))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| python_eq(v, w)))
        }
        _ => a == b,
    }
}

fn fetch_failed(seq: usize, why: &str) -> String {
    format!(
        "Student logprob fetch failed for seq {seq}: {why}. Dropping distill payload for this group."
    )
}

/// The reference's verdict on the replies, sequence by sequence in order: `Ok(None)` keeps every
/// reply's `prompt_topk_token_ids` / `prompt_topk_logprobs` as the payload, `Ok(Some(warning))`
/// drops the payload of the whole group. An ids or logprobs member that is not an array is an
/// error, as `len()` raises in the reference.
pub fn check_replies(tokens: &[Json], fetched: &[Fetched]) -> SftResult<Option<String>> {
    if tokens.len() != fetched.len() {
        return Err(SftError::new(
            ErrorCode::Internal,
            format!("{} replies for {} sequences", fetched.len(), tokens.len()),
        ));
    }
    for (i, (seq, outcome)) in tokens.iter().zip(fetched).enumerate() {
        let (ids, lps) = match outcome {
            Fetched::Rejected(why) => return Ok(Some(fetch_failed(i, why))),
            Fetched::NotObject => return Ok(Some(fetch_failed(i, "reply is not an object"))),
            Fetched::Reply {
                prompt_tokens,
                token_ids,
                logprobs,
            } => {
                if !python_eq(prompt_tokens, seq) {
                    return Ok(Some(fetch_failed(i, MISALIGNED)));
                }
                (token_ids, logprobs)
            }
        };
        // The reference reads both members before it measures either: a missing one fails
        // the fetch, a present one that is not a list raises out of the whole step.
        for (member, name) in [(ids, IDS), (lps, LOGPROBS)] {
            if *member == Member::Missing {
                return Ok(Some(fetch_failed(i, &format!("reply has no {name}"))));
            }
        }
        let (a, b) = (list_len(ids, i, IDS)?, list_len(lps, i, LOGPROBS)?);
        if a != b {
            return Ok(Some(format!(
                "Student prompt-topk length mismatch for seq {i} ({a} != {b}). Dropping distill payload for this group."
            )));
        }
    }
    Ok(None)
}

const IDS: &str = "prompt_topk_token_ids";
const LOGPROBS: &str = "prompt_topk_logprobs";

fn list_len(member: &Member, seq: usize, name: &str) -> SftResult<usize> {
    match member {
        Member::List(n) => Ok(*n),
        _ => Err(invalid_distillation(format!(
            "seq {seq}: {name} of the reply is not an array"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NINF: f32 = f32::NEG_INFINITY;

    fn on(top_k: i64) -> DistillConfig {
        DistillConfig {
            enabled: true,
            top_k,
        }
    }

    fn reply(prompt: Json, ids: usize, lps: usize) -> Fetched {
        Fetched::Reply {
            prompt_tokens: prompt,
            token_ids: Member::List(ids),
            logprobs: Member::List(lps),
        }
    }

    #[test]
    fn pack_pads_with_sentinels() {
        let ids = vec![
            vec![vec![], vec![5.0, 6.0]],
            vec![vec![], vec![7.0], vec![8.0, 9.0]],
        ];
        let lps = vec![
            vec![vec![], vec![-0.5, -1.5]],
            vec![vec![], vec![-0.25], vec![-1.0, f64::NEG_INFINITY]],
        ];
        let p = pack(&ids, &lps, 1.0).unwrap();
        assert_eq!(p.shape, [2, 3, 2]);
        assert_eq!(p.ids, vec![-1, -1, 5, 6, -1, -1, -1, -1, 7, -1, 8, 9]);
        assert_eq!(
            p.logprobs,
            vec![NINF, NINF, -0.5, -1.5, NINF, NINF, NINF, NINF, -0.25, NINF, -1.0, NINF]
        );
        let empty = pack(&[], &[], 0.0).unwrap();
        assert_eq!(empty.shape, [0, 0, 1]);
    }

    #[test]
    fn pack_rejects_malformed_input_naming_where() {
        let msg = |ids: Vec<Vec<Vec<f64>>>, lps: Vec<Vec<Vec<f64>>>| {
            let e = pack(&ids, &lps, 1.0).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidDistillation);
            e.message
        };
        assert_eq!(
            msg(vec![vec![]], vec![]),
            "tokenIds has 1 sequences but logprobs has 0"
        );
        assert_eq!(
            msg(
                vec![vec![vec![]], vec![vec![], vec![]]],
                vec![vec![vec![]], vec![vec![]]]
            ),
            "sequence 1: tokenIds has 2 positions but logprobs has 1"
        );
        assert_eq!(
            msg(vec![vec![vec![], vec![1.0]]], vec![vec![vec![], vec![]]]),
            "sequence 0, position 1: 1 token ids but 0 logprobs"
        );
        assert_eq!(
            msg(
                vec![vec![vec![1.0, 2.0, 3.0]]],
                vec![vec![vec![0.0, 0.0, 0.0]]]
            ),
            "sequence 0, position 0: 3 entries, more than topK + 1 = 2"
        );
        assert_eq!(
            msg(vec![vec![vec![1.0, 2.0]]], vec![vec![vec![0.0, f64::NAN]]]),
            "sequence 0, position 0: logprob is NaN"
        );
        assert_eq!(
            msg(vec![vec![vec![1.0]]], vec![vec![vec![f64::INFINITY]]]),
            "sequence 0, position 0: logprob is +Infinity"
        );
        assert_eq!(
            msg(vec![vec![vec![1.5]]], vec![vec![vec![0.0]]]),
            "sequence 0, position 0: token id 1.5 is not an integer in [0, 2147483647]"
        );
        assert_eq!(
            pack(&[], &[], -1.0).unwrap_err().message,
            "topK must be an integer >= 0, got -1"
        );
    }

    #[test]
    fn plan_follows_the_reference_gates() {
        let toks = json!([[1, 2], [3]]);
        let off = DistillConfig::new(None, None).unwrap();
        assert_eq!(
            plan_requests(&toks, &Json::Null, &Json::Null, &off).unwrap(),
            Plan::Unchanged
        );
        assert_eq!(
            plan_requests(&json!([]), &Json::Null, &Json::Null, &on(0)).unwrap(),
            Plan::Drop
        );
        let skip = json!({"skip_student_top_k": 1});
        assert_eq!(
            plan_requests(&toks, &Json::Null, &skip, &on(0)).unwrap(),
            Plan::Drop
        );
        assert_eq!(
            plan_requests(&toks, &Json::Null, &Json::Null, &on(-1)).unwrap(),
            Plan::Drop
        );
        let negative = json!({"student_top_k": -3});
        assert_eq!(
            plan_requests(&toks, &Json::Null, &negative, &on(5)).unwrap(),
            Plan::Drop
        );
        assert_eq!(
            DistillConfig::new(Some(true), Some(-2.0))
                .unwrap_err()
                .message,
            "studentTopK must be an integer >= -1, got -2"
        );
    }

    #[test]
    fn requests_merge_group_then_sequence_kwargs() {
        let toks = json!([[1, 2], [3], [4]]);
        let group = json!({
            "student_top_k": "4",
            "student_logprob_kwargs": {"temperature": 0.5, "top_k": 9},
            "student_distill_kwargs": {"ignored": true}
        });
        let overrides = json!([
            {"student_distill_kwargs": {"temperature": 1.0, "prompt": "p"}},
            null,
            {"student_logprob_kwargs": null, "student_distill_kwargs": {"x": 1}}
        ]);
        let Plan::Fetch(reqs) = plan_requests(&toks, &overrides, &group, &on(0)).unwrap() else {
            panic!("expected requests");
        };
        assert_eq!(
            serde_json::to_string(&reqs).unwrap(),
            r#"[{"top_k":9,"max_tokens":1,"split":"train","temperature":1.0,"prompt":"p"},{"input_ids":[3],"top_k":9,"max_tokens":1,"split":"train","temperature":0.5},{"input_ids":[4],"top_k":9,"max_tokens":1,"split":"train","temperature":0.5}]"#
        );
        let plain = plan_requests(
            &json!([[7]]),
            &Json::Null,
            &json!({"student_top_k": 2.9}),
            &on(0),
        );
        assert_eq!(
            plain.unwrap(),
            Plan::Fetch(vec![
                json!({"input_ids": [7], "top_k": 2, "max_tokens": 1, "split": "train"})
            ])
        );
        assert_eq!(
            plan_requests(&toks, &Json::Null, &json!({"student_top_k": null}), &on(0))
                .unwrap_err()
                .message,
            "student_top_k must be an integer, got null"
        );
    }

    #[test]
    fn replies_are_checked_in_sequence_order() {
        let toks = vec![json!([1, 2]), json!([3])];
        assert_eq!(
            check_replies(
                &toks,
                &[reply(json!([1.0, 2]), 2, 2), reply(json!([3]), 1, 1)]
            )
            .unwrap(),
            None
        );
        assert_eq!(
            check_replies(&toks, &[reply(json!([1, 2]), 2, 1), Fetched::Rejected("boom".into())])
                .unwrap(),
            Some("Student prompt-topk length mismatch for seq 0 (2 != 1). Dropping distill payload for this group.".into())
        );
        assert_eq!(
            check_replies(&toks, &[reply(json!([1, 2]), 2, 2), reply(json!([4]), 1, 1)]).unwrap(),
            Some(format!("Student logprob fetch failed for seq 1: {MISALIGNED}. Dropping distill payload for this group."))
        );
        let missing = Fetched::Reply {
            prompt_tokens: json!([3]),
            token_ids: Member::List(1),
            logprobs: Member::Missing,
        };
        assert_eq!(
            check_replies(&toks, &[reply(json!([1, 2]), 2, 2), missing]).unwrap(),
            Some("Student logprob fetch failed for seq 1: reply has no prompt_topk_logprobs. Dropping distill payload for this group.".into())
        );
        let not_list = Fetched::Reply {
            prompt_tokens: json!([1, 2]),
            token_ids: Member::Other,
            logprobs: Member::List(2),
        };
        assert_eq!(
            check_replies(&toks, &[not_list, Fetched::NotObject])
                .unwrap_err()
                .message,
            "seq 0: prompt_topk_token_ids of the reply is not an array"
        );
    }
}

/// Distillation targets of one cached SFT row: `k` slots per token, row-major `[tokens, k]`,
/// missing slots holding `MISSING_ID` / `MISSING_LOGPROB`.
#[derive(Debug, Clone, PartialEq)]
pub struct RowDistill {
    pub k: usize,
    pub ids: Box<[i32]>,
    pub logprobs: Box<[f32]>,
}

/// Reads an example's `distill: {tokenIds, logprobs}` (`[position][rank]`, aligned with the
/// full token sequence of `tokens` tokens: entry i describes token i; position 0 may be empty)
/// and packs it with `pack`'s rules.
pub fn targets_for_row(targets: &Json, tokens: usize) -> SftResult<RowDistill> {
    let lists = |key: &str| -> SftResult<Vec<Vec<f64>>> {
        let rows = targets.get(key).and_then(Json::as_array).ok_or_else(|| {
            invalid_distillation(format!("distill.{key} must be an array of arrays"))
        })?;
        rows.iter()
            .enumerate()
            .map(|(p, row)| {
                let entries = row.as_array().ok_or_else(|| {
                    invalid_distillation(format!("distill.{key}[{p}] must be an array"))
                })?;
                entries
                    .iter()
                    .map(|v| {
                        v.as_f64().ok_or_else(|| {
                            invalid_distillation(format!(
                                "distill.{key}[{p}] must hold only numbers"
                            ))
                        })
                    })
                    .collect()
            })
            .collect()
    };
    let ids = lists("tokenIds")?;
    let logprobs = lists("logprobs")?;
    if ids.len() != tokens {
        return Err(invalid_distillation(format!(
            "distill targets cover {} positions but the example has {tokens} tokens",
            ids.len()
        )));
    }
    let widest = ids.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let packed = pack(&[ids], &[logprobs], (widest - 1) as f64)?;
    Ok(RowDistill {
        k: packed.shape[2],
        ids: packed.ids.into(),
        logprobs: packed.logprobs.into(),
    })
}
