//! Rows of examples whose messages carry `train`/`weight` flags (see `example::train_flags`):
//! the render never changes, the trained tokens follow the flags.

use serde_json::{json, Value as Json};

use super::*;
use crate::mask::spans::discover_turn_end;
use crate::mask::Reasoning;
use crate::test_support::load_family;

fn conversation(messages: Vec<Json>) -> SftExample {
    SftExample::Conversation {
        messages,
        distill: None,
        tools: None,
    }
}

fn flagged() -> Vec<Json> {
    vec![
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "first question"}),
        json!({"role": "assistant", "content": "first answer", "weight": 0}),
        json!({"role": "user", "content": "second question", "train": true}),
        json!({"role": "assistant", "content": "second answer"}),
    ]
}

fn plain() -> Vec<Json> {
    let mut messages = flagged();
    for m in &mut messages {
        let m = m.as_object_mut().unwrap();
        m.remove("train");
        m.remove("weight");
    }
    messages
}

/// The decoded text of each trained run of a row.
fn runs(t: &ChatTokenizer, row: &TokenizedRow) -> Vec<String> {
    row.spans
        .iter()
        .map(|s| {
            t.decode(&row.ids[s.start as usize..s.end as usize], false)
                .unwrap()
        })
        .collect()
}

fn settings<'a>(masking: &'a Masking, turn_end: Option<&'a TurnEnd>) -> RowSettings<'a> {
    RowSettings {
        completion_only: true,
        enable_thinking: false,
        masking,
        turn_end,
        max_seq_length: 4096,
        truncation: Truncation::KeepEnd,
        drop_untrainable: false,
        tools: ToolsMode::Ignore,
        sanitize: false,
        parse_tool_arguments: false,
        reasoning_effort: None,
        render_as: None,
        loss: None,
    }
}

fn spans_masking() -> Masking {
    Masking::Spans(SpanPolicy {
        roles: vec!["assistant".into()],
        only_last: false,
        turn_end: true,
        reasoning: Reasoning::Train,
        overrides: Vec::new(),
    })
}

#[test]
fn spans_train_what_the_flags_ask_over_the_same_ids() {
    let t = load_family("qwen3");
    let turn_end = discover_turn_end(&t, &RenderOptions::default());
    let masking = spans_masking();
    let settings = settings(&masking, turn_end.as_ref());
    let row = build_row(&t, &settings, conversation(flagged())).unwrap();
    let unflagged = build_row(&t, &settings, conversation(plain())).unwrap();
    assert_eq!(row.ids, unflagged.ids);
    assert_eq!(
        runs(&t, &unflagged),
        ["first answer<|im_end|>", "second answer<|im_end|>"]
    );
    assert_eq!(
        runs(&t, &row),
        ["second question<|im_end|>", "second answer<|im_end|>"]
    );
}

#[test]
fn turns_truncation_keeps_the_last_flagged_message() {
    let t = load_family("qwen3");
    let turn_end = discover_turn_end(&t, &RenderOptions::default());
    let masking = spans_masking();
    // Only the first user message is trained: the oldest turn cannot be cut.
    let mut messages = plain();
    messages[1]["train"] = json!(true);
    messages[2]["weight"] = json!(0);
    messages[4]["train"] = json!(false);
    let full = build_row(
        &t,
        &settings(&masking, turn_end.as_ref()),
        conversation(messages.clone()),
    )
    .unwrap();
    let short = RowSettings {
        max_seq_length: full.ids.len() - 1,
        truncation: Truncation::Turns,
        ..settings(&masking, turn_end.as_ref())
    };
    let row = build_row(&t, &short, conversation(messages)).unwrap();
    assert_eq!(row.stats().dropped, Some(DropReason::TooLong));
    // Unflagged, the first turn goes and the row fits.
    let row = build_row(&t, &short, conversation(plain())).unwrap();
    assert_eq!(row.stats().dropped, None);
    assert_eq!(row.stats().messages_dropped, 2);
}

#[test]
fn flags_need_a_masking_that_knows_messages() {
    let t = load_family("qwen3");
    let markers = crate::dataset::reference_markers(&t, &Default::default()).unwrap();
    let masking = Masking::Reference(markers);
    let err = build_row(&t, &settings(&masking, None), conversation(flagged())).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    assert_eq!(
        err.message,
        "message 2 has a train/weight flag, which the reference masking cannot honour (its ChatML scan trains every assistant turn): per-message flags are supported under maskingStrategy 'spans' and 'generation' with completionOnly on"
    );
    let masking = spans_masking();
    let all = RowSettings {
        completion_only: false,
        ..settings(&masking, None)
    };
    let err = build_row(&t, &all, conversation(flagged())).unwrap_err();
    assert_eq!(
        err.message,
        "message 2 has a train/weight flag, which has no effect with completionOnly off (every token is trained): per-message flags are supported under maskingStrategy 'spans' and 'generation' with completionOnly on"
    );
    let mut bad = flagged();
    bad[4]["weight"] = json!(0.25);
    let err = build_row(&t, &settings(&masking, None), conversation(bad)).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidExample);
    assert!(err
        .message
        .starts_with("message 4: weight must be 0 or 1, got 0.25"));
}
