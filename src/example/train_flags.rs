//! Per-message training flags: a message's `train` (a boolean) or `weight` (`0` or `1`, the
//! spelling of axolotl and of OpenAI's fine-tuning files) says whether what the message adds is
//! trained, whatever `trainOnRoles` says of its role.
//!
//! The flags are read off the messages before anything renders them, so that a template never
//! sees them: a flagged example renders byte for byte as the same example without its flags.

use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::{json_value, SftExample};

/// The keys a flag is read from.
const TRAIN: &str = "train";
const WEIGHT: &str = "weight";

/// Each message's flag, by position: `Some(true)` trains the message, `Some(false)` leaves it
/// untrained, `None` leaves the decision to the dataset's settings.
pub type TrainFlags = Box<[Option<bool>]>;

fn invalid(index: usize, what: impl std::fmt::Display) -> SftError {
    SftError::new(
        ErrorCode::InvalidExample,
        format!("message {index}: {what}"),
    )
}

/// The flag one message carries, read without changing it. `index` is the message's position,
/// for errors.
pub fn message_flag(index: usize, message: &Json) -> SftResult<Option<bool>> {
    let Some(map) = message.as_object() else {
        return Ok(None);
    };
    let train = match json_value::get(map, TRAIN) {
        None | Some(Json::Null) => None,
        Some(Json::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(invalid(
                index,
                format_args!("train must be true or false, got {other}"),
            ))
        }
    };
    let weight = match json_value::get(map, WEIGHT) {
        None | Some(Json::Null) => None,
        Some(Json::Number(n)) => {
            let w = n.as_f64().unwrap_or(f64::NAN);
            if w == 0.0 || w == 1.0 {
                Some(w == 1.0)
            } else if w > 0.0 && w < 1.0 {
                return Err(invalid(
                    index,
                    format_args!(
                        "weight must be 0 or 1, got {n} (fractional loss weights are not supported yet: a message is trained whole or not at all)"
                    ),
                ));
            } else {
                return Err(invalid(
                    index,
                    format_args!("weight must be 0 or 1, got {n}"),
                ));
            }
        }
        Some(other) => {
            return Err(invalid(
                index,
                format_args!("weight must be 0 or 1, got {other}"),
            ))
        }
    };
    match (train, weight) {
        (Some(t), Some(w)) if t != w => Err(invalid(
            index,
            format_args!("train is {t} but weight is {}: they disagree", u8::from(w)),
        )),
        (t, w) => Ok(t.or(w)),
    }
}

/// Every message's flag, or `None` when no message has one (the common case, which costs two
/// key lookups a message).
pub fn read_flags(messages: &[Json]) -> SftResult<Option<TrainFlags>> {
    let mut flags: Option<Vec<Option<bool>>> = None;
    for (i, message) in messages.iter().enumerate() {
        if let Some(flag) = message_flag(i, message)? {
            flags.get_or_insert_with(|| vec![None; messages.len()])[i] = Some(flag);
        }
    }
    Ok(flags.map(Vec::into_boxed_slice))
}

/// Reads every message's flag and removes the flag keys (null ones too), so that the template
/// never receives them.
pub fn take_flags(messages: &mut [Json]) -> SftResult<Option<TrainFlags>> {
    let flags = read_flags(messages)?;
    for message in messages.iter_mut() {
        if let Some(map) = message.as_object_mut() {
            // Looked up first: most messages have neither key, and a scan of a small object
            // costs less than the hashing `remove` does.
            for key in [TRAIN, WEIGHT] {
                if json_value::get(map, key).is_some() {
                    map.remove(key);
                }
            }
        }
    }
    Ok(flags)
}

/// The messages of an example in render order (the prompt, then the completion).
fn messages_of(example: &SftExample) -> impl Iterator<Item = &Json> {
    let (list, last): (&[Json], Option<&Json>) = match example {
        SftExample::PromptCompletion {
            prompt, completion, ..
        } => (prompt, Some(completion)),
        SftExample::Conversation { messages, .. } => (messages, None),
    };
    list.iter().chain(last)
}

/// The position of the first flagged message of an example, after checking every flag's value.
pub fn first_flagged(example: &SftExample) -> SftResult<Option<usize>> {
    let mut first = None;
    for (i, message) in messages_of(example).enumerate() {
        if message_flag(i, message)?.is_some() && first.is_none() {
            first = Some(i);
        }
    }
    Ok(first)
}

/// The position of the first flagged message of an example given as JSON (`{messages}` or
/// `{prompt, completion}`), after checking every flag's value.
pub fn first_flagged_json(example: &Json) -> SftResult<Option<usize>> {
    let listed = |key: &str| {
        example
            .get(key)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
    };
    let messages = listed("messages")
        .chain(listed("prompt"))
        .chain(example.get("completion"));
    let mut first = None;
    for (i, message) in messages.enumerate() {
        if message_flag(i, message)?.is_some() && first.is_none() {
            first = Some(i);
        }
    }
    Ok(first)
}

/// The error of a flagged example under the reference masking, which trains what its ChatML scan
/// finds and knows nothing of messages.
pub fn unsupported_by_reference(message: usize) -> SftError {
    unsupported(
        message,
        "the reference masking cannot honour (its ChatML scan trains every assistant turn)",
    )
}

/// The error of a flagged example when every token is trained.
pub fn unsupported_without_completion_only(message: usize) -> SftError {
    unsupported(
        message,
        "has no effect with completionOnly off (every token is trained)",
    )
}

fn unsupported(message: usize, why: &str) -> SftError {
    SftError::new(
        ErrorCode::InvalidArgument,
        format!(
            "message {message} has a train/weight flag, which {why}: per-message flags are supported under maskingStrategy 'spans' and 'generation' with completionOnly on"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn train_and_weight_read_alike() {
        let flag = |m: Json| message_flag(2, &m).unwrap();
        assert_eq!(flag(json!({"role": "user", "train": true})), Some(true));
        assert_eq!(flag(json!({"role": "user", "train": false})), Some(false));
        assert_eq!(flag(json!({"role": "user", "weight": 1})), Some(true));
        assert_eq!(flag(json!({"role": "user", "weight": 0})), Some(false));
        assert_eq!(flag(json!({"role": "user", "weight": 1.0})), Some(true));
        assert_eq!(flag(json!({"role": "user", "weight": 0.0})), Some(false));
        assert_eq!(
            flag(json!({"role": "user", "weight": 1, "train": true})),
            Some(true)
        );
        assert_eq!(flag(json!({"role": "user", "weight": null})), None);
        assert_eq!(flag(json!({"role": "user"})), None);
        assert_eq!(flag(json!("not a message")), None);
    }

    #[test]
    fn other_values_name_the_message_and_the_value() {
        let err = |m: Json| message_flag(3, &m).unwrap_err();
        let e = err(json!({"role": "assistant", "weight": 0.5}));
        assert_eq!(e.code, ErrorCode::InvalidExample);
        assert_eq!(
            e.message,
            "message 3: weight must be 0 or 1, got 0.5 (fractional loss weights are not supported yet: a message is trained whole or not at all)"
        );
        assert_eq!(
            err(json!({"role": "assistant", "weight": "1"})).message,
            "message 3: weight must be 0 or 1, got \"1\""
        );
        assert_eq!(
            err(json!({"role": "assistant", "weight": 2})).message,
            "message 3: weight must be 0 or 1, got 2"
        );
        assert_eq!(
            err(json!({"role": "assistant", "train": 1})).message,
            "message 3: train must be true or false, got 1"
        );
        assert_eq!(
            err(json!({"role": "assistant", "train": true, "weight": 0})).message,
            "message 3: train is true but weight is 0: they disagree"
        );
    }

    #[test]
    fn flags_are_taken_off_the_messages_in_place() {
        let mut messages = vec![
            json!({"role": "user", "content": "a", "train": true}),
            json!({"role": "assistant", "content": "b"}),
            json!({"role": "assistant", "weight": 0, "content": "c", "train": null}),
        ];
        let flags = take_flags(&mut messages).unwrap().unwrap();
        assert_eq!(&*flags, &[Some(true), None, Some(false)]);
        assert_eq!(
            serde_json::to_string(&messages).unwrap(),
            r#"[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"assistant","content":"c"}]"#
        );
        let mut plain = vec![json!({"role": "user", "content": "a"})];
        assert_eq!(take_flags(&mut plain).unwrap(), None);
    }

    #[test]
    fn the_first_flagged_message_counts_the_completion_last() {
        let example = SftExample::PromptCompletion {
            prompt: vec![json!({"role": "user", "content": "q"})],
            completion: json!({"role": "assistant", "content": "a", "weight": 0}),
            distill: None,
            tools: None,
        };
        assert_eq!(first_flagged(&example).unwrap(), Some(1));
        let bad = SftExample::Conversation {
            messages: vec![
                json!({"role": "user", "content": "q", "train": "yes"}),
                json!({"role": "assistant", "content": "a"}),
            ],
            distill: None,
            tools: None,
        };
        assert_eq!(
            first_flagged(&bad).unwrap_err().message,
            "message 0: train must be true or false, got \"yes\""
        );
    }
}
