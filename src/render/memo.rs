//! The last render of a one-message list, kept for the next identical one: span masking
//! renders the first message of every example with its content emptied, which for most datasets
//! is the same list every time (`[{"role": "user", "content": ""}]`), so the template's preamble
//! (GPT-OSS prints a long system message) is rendered once rather than once an example.
//!
//! A render is reused only for the same message with every option the same. A template that
//! calls `strftime_now` is reused only within the second it was rendered in (the clock's, or
//! `SOURCE_DATE_EPOCH`'s), the finest time `strftime_now` prints unless a format asks for
//! fractions of a second: a template that might (`%f`, `%.3f`, ...) is never reused.

use serde_json::Value as Json;

use super::{RenderAs, RenderOptions};
use crate::example::json_value::{write_len, write_str, write_tagged};

/// Keys longer than this (long contents, large tool schemas) are rendered as they come:
/// comparing them would cost a good part of the render saved.
const MAX_KEY: usize = 4096;

/// How a template's renders depend on the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Clock {
    /// It never reads it.
    Never,
    /// It may print the date or the time to the second.
    Seconds,
    /// It may print fractions of a second: no render is reused.
    Finer,
}

impl Clock {
    /// From the template's source: `strftime_now` is the only clock a template has.
    pub(super) fn of(source: &str) -> Clock {
        if !source.contains("strftime_now") {
            Clock::Never
        } else if source.contains("%f") || source.contains("%.") || has_width_fraction(source) {
            Clock::Finer
        } else {
            Clock::Seconds
        }
    }
}

/// chrono's `%3f`, `%6f`, `%9f`.
fn has_width_fraction(source: &str) -> bool {
    source
        .as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_digit() && w[2] == b'f')
}

/// How many renders a template keeps: the first messages of a dataset are few (a user
/// message, a system prompt, ...), and a dataset that mixes them must not push out the one it
/// needs next.
const KEPT: usize = 4;

/// The kept renders of a template, each with the key it was made for, the latest last.
#[derive(Default)]
pub(super) struct Kept(Vec<(Vec<u8>, String)>);

impl Kept {
    /// The kept text of `key`.
    pub(super) fn get(&self, key: &[u8]) -> Option<String> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, t)| t.clone())
    }

    /// Keeps `text` for `key`, forgetting the oldest render past `KEPT`.
    pub(super) fn put(&mut self, key: Vec<u8>, text: &str) {
        self.0.retain(|(k, _)| *k != key);
        if self.0.len() >= KEPT {
            self.0.remove(0);
        }
        self.0.push((key, text.to_string()));
    }
}

/// The key of `messages` rendered with `opts` now: every input of the render (the clock's
/// second for a template that reads it), or `None` when the render must not be kept or the
/// key would be too long to be worth it.
pub(super) fn key(messages: &[Json], opts: &RenderOptions, clock: Clock) -> Option<Vec<u8>> {
    let second = match clock {
        Clock::Never => None,
        Clock::Seconds => Some(super::strftime_second()),
        Clock::Finer => return None,
    };
    let mut key = Vec::with_capacity(128);
    write_len(messages.len(), &mut key);
    for message in messages {
        write_tagged(message, &mut key);
        if key.len() > MAX_KEY {
            return None;
        }
    }
    write_options(opts, &mut key);
    match second {
        Some((fixed, second)) => {
            key.push(u8::from(fixed));
            key.extend_from_slice(&second.to_le_bytes());
        }
        None => key.push(2),
    }
    (key.len() <= MAX_KEY).then_some(key)
}

/// Every option of a render in [`write_tagged`]'s unambiguous bytes (for the keys of kept
/// renders and of trace shapes).
pub(super) fn write_options(opts: &RenderOptions, key: &mut Vec<u8>) {
    let option = |on: Option<bool>| match on {
        None => 2,
        Some(on) => u8::from(on),
    };
    key.extend_from_slice(&[
        u8::from(opts.add_generation_prompt),
        u8::from(opts.continue_final_message),
        option(opts.enable_thinking),
        match opts.render_as {
            None => 0,
            Some(RenderAs::Transformers) => 1,
            Some(RenderAs::MlxNode) => 2,
        },
    ]);
    match opts.reasoning_effort {
        Some(effort) => {
            key.push(b'+');
            write_str(effort, key);
        }
        None => key.push(b'-'),
    }
    match opts.tools {
        Some(tools) => write_tagged(tools, key),
        None => key.push(b'-'),
    }
    match opts.template_kwargs {
        Some(kwargs) => {
            key.push(b'+');
            write_len(kwargs.len(), key);
            for (k, v) in kwargs {
                write_str(k, key);
                write_tagged(v, key);
            }
        }
        None => key.push(b'-'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_input_of_the_render_is_in_the_key() {
        let messages = [json!({"role": "user", "content": ""})];
        let base = RenderOptions::default();
        let tools = json!([{"name": "f"}]);
        let variants = [
            RenderOptions {
                add_generation_prompt: true,
                ..Default::default()
            },
            RenderOptions {
                enable_thinking: Some(false),
                ..Default::default()
            },
            RenderOptions {
                reasoning_effort: Some("high"),
                ..Default::default()
            },
            RenderOptions {
                tools: Some(&tools),
                ..Default::default()
            },
        ];
        let plain = key(&messages, &base, Clock::Never).expect("a short list has a key");
        for opts in &variants {
            assert_ne!(key(&messages, opts, Clock::Never).unwrap(), plain);
        }
        let other = [json!({"role": "system", "content": ""})];
        assert_ne!(key(&other, &base, Clock::Never).unwrap(), plain);
        let long = [json!({"role": "user", "content": "x".repeat(MAX_KEY)})];
        assert_eq!(key(&long, &base, Clock::Never), None);
        // A template that reads the clock has it in the key; one that may print fractions of
        // a second has none.
        assert_ne!(key(&messages, &base, Clock::Seconds).unwrap(), plain);
        assert_eq!(key(&messages, &base, Clock::Finer), None);
    }

    #[test]
    fn the_clock_a_template_reads_is_told_from_its_source() {
        assert_eq!(Clock::of("{{ messages }}"), Clock::Never);
        assert_eq!(Clock::of("{{ strftime_now('%Y-%m-%d') }}"), Clock::Seconds);
        for fine in ["%H:%M:%S.%f", "%.3f", "%6f"] {
            assert_eq!(
                Clock::of(&format!("{{{{ strftime_now('{fine}') }}}}")),
                Clock::Finer
            );
        }
    }

    #[test]
    fn the_latest_renders_are_kept() {
        let mut kept = Kept::default();
        kept.put(b"a".to_vec(), "text a");
        assert_eq!(kept.get(b"a").as_deref(), Some("text a"));
        assert_eq!(kept.get(b"b"), None);
        for key in ["b", "c", "d", "e"] {
            kept.put(key.as_bytes().to_vec(), key);
        }
        // "a" was the oldest of five.
        assert_eq!(kept.get(b"a"), None);
        assert_eq!(kept.get(b"e").as_deref(), Some("e"));
        assert_eq!(kept.0.len(), KEPT);
        kept.put(b"e".to_vec(), "again");
        assert_eq!(
            (kept.get(b"e").as_deref(), kept.0.len()),
            (Some("again"), KEPT)
        );
    }
}
