//! A message's content in the render: the forms a template may print it in, and where one of
//! them is printed.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::Value as Json;

use super::{char_floor, THINK_CLOSE};
use crate::example::json_value;
use crate::mask::text_search;

fn content_text(message: &Json) -> Option<Cow<'_, str>> {
    match json_value::field(message, "content")? {
        Json::String(s) => Some(Cow::Borrowed(s)),
        Json::Array(parts) => {
            let text: String = parts
                .iter()
                .filter_map(|p| json_value::str_field(p, "text"))
                .collect();
            Some(Cow::Owned(text))
        }
        _ => None,
    }
}

/// The forms a template may print the content in, and whether it may print none of them (an
/// answer that is empty once a `<think>` block is taken out). Borrowed from the message where
/// its content is a string.
pub(super) fn content_forms(message: &Json) -> (Vec<Cow<'_, str>>, bool) {
    let Some(text) = content_text(message) else {
        return (Vec::new(), true);
    };
    // Parts of the text, borrowed from the message when the text is.
    let part = |f: fn(&str) -> &str| -> Cow<'_, str> {
        match &text {
            Cow::Borrowed(t) => Cow::Borrowed(f(t)),
            Cow::Owned(t) => Cow::Owned(f(t).to_string()),
        }
    };
    let mut forms = vec![text.clone(), part(str::trim)];
    let has_reasoning_field =
        json_value::field(message, "reasoning_content").is_some_and(|r| !r.is_null());
    let mut may_vanish = false;
    if json_value::str_field(message, "role") == Some("assistant")
        && !has_reasoning_field
        && text.contains(THINK_CLOSE)
    {
        let answer = part(|t| {
            t.rsplit(THINK_CLOSE)
                .next()
                .unwrap_or_default()
                .trim_start_matches('\n')
        });
        may_vanish = answer.is_empty();
        forms.push(answer);
    }
    forms.retain(|f| !f.is_empty());
    // A content without surrounding whitespace is its own trimmed form: searched once.
    forms.dedup();
    (forms, may_vanish)
}

/// Where a form of the content is: at `from` if one starts there, else the earliest match that
/// starts before `limit` (the next end-of-turn token), so that a content the template did not
/// print is not found in a later turn.
pub(super) fn locate(
    full: &str,
    from: usize,
    limit: usize,
    forms: &[Cow<str>],
) -> Option<Range<usize>> {
    let rest = &full[from..];
    if let Some(f) = forms
        .iter()
        .filter(|f| rest.starts_with(f.as_ref()))
        .max_by_key(|f| f.len())
    {
        return Some(from..from + f.len());
    }
    forms
        .iter()
        .filter_map(|f| {
            // Only a match that starts before `limit` counts: the text past it is not read.
            let end = (limit.saturating_sub(from))
                .saturating_add(f.len())
                .min(rest.len());
            let window = &rest[..char_floor(rest, end)];
            text_search::find_from(window.as_bytes(), 0, f.as_bytes()).map(|p| (p, f.len()))
        })
        .filter(|&(p, _)| from + p < limit)
        .min_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(p, len)| from + p..from + p + len)
}

/// The one place after `from` where a form of the content is printed, if there is exactly one.
pub(super) fn locate_once(full: &str, from: usize, forms: &[Cow<str>]) -> Option<Range<usize>> {
    forms.iter().filter(|f| !f.is_empty()).find_map(|f| {
        text_search::find_once(&full[from..], f).map(|p| from + p..from + p + f.len())
    })
}
