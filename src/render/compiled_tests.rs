//! The direct renderers against the interpreter: the same text for every template golden, every
//! real conversation and thousands of generated ones, under every render option, for each of the
//! five templates; and a decline wherever the interpreter fails.

use std::path::Path;

use serde_json::{json, Value as Json};

use super::compiled::{family_of, fingerprint, Family, CHATML};
use super::*;
use crate::example::message::normalize_messages;
use crate::test_support::{family_dir, load_family, real_data, Rng, FAMILIES};
use crate::tokenize::ChatTokenizer;

fn family_of_dir(family: &str) -> Family {
    match family {
        "qwen3" => Family::Qwen3,
        "llama3_1" => Family::Llama3,
        "gemma3" => Family::Gemma3,
        "deepseek_v3" => Family::DeepSeekV3,
        other => panic!("no family {other}"),
    }
}

/// Each family's template compiled with its own special tokens, and ChatML with Qwen3's.
fn templates() -> Vec<(String, ChatTemplate)> {
    let mut out = Vec::new();
    for family in FAMILIES {
        let t = load_family(family);
        let source = t.config().chat_template.clone().unwrap();
        let compiled = ChatTemplate::compile(&source, t.special_tokens_map()).unwrap();
        out.push((family.to_string(), compiled));
        if family == "qwen3" {
            let chatml = ChatTemplate::compile(CHATML, t.special_tokens_map()).unwrap();
            out.push(("chatml".to_string(), chatml));
        }
    }
    out
}

/// The option sets every conversation is rendered under.
fn option_sets() -> Vec<RenderOptions<'static>> {
    let mut out = Vec::new();
    for add_generation_prompt in [false, true] {
        for enable_thinking in [None, Some(false), Some(true)] {
            out.push(RenderOptions {
                add_generation_prompt,
                enable_thinking,
                ..Default::default()
            });
        }
    }
    out.push(RenderOptions {
        continue_final_message: true,
        ..Default::default()
    });
    out
}

/// Renders with both; panics when the direct renderer writes other text than the interpreter, or
/// writes text where the interpreter fails. True when the direct renderer rendered.
fn agree(t: &ChatTemplate, messages: &[Json], opts: &RenderOptions, what: &str) -> bool {
    let want = t.render_interpreted(messages, opts);
    let Some(got) = t.render_direct(messages, opts) else {
        return false;
    };
    match (&got, &want) {
        (Ok(g), Ok(w)) => assert_eq!(
            g,
            w,
            "{what}: direct and interpreted renders differ for {}",
            serde_json::to_string(messages).unwrap()
        ),
        (Err(g), Err(w)) => assert_eq!(g.message, w.message, "{what}"),
        _ => panic!(
            "{what}: direct {got:?} but interpreted {want:?} for {}",
            serde_json::to_string(messages).unwrap()
        ),
    }
    true
}

#[test]
fn fingerprints_name_the_known_templates() {
    for family in FAMILIES {
        let dir = family_dir(family);
        let t = ChatTokenizer::load(&dir).unwrap();
        let source = t.config().chat_template.clone().unwrap();
        assert_eq!(
            family_of(&source),
            Some(family_of_dir(family)),
            "{family}: template fingerprint {}",
            fingerprint(&source)
        );
        assert_eq!(t.renderer(), Renderer::Compiled, "{family}");
    }
    assert_eq!(
        family_of(CHATML),
        Some(Family::ChatMl),
        "{}",
        fingerprint(CHATML)
    );
    // One byte more and the interpreter renders.
    assert_eq!(family_of(&format!("{CHATML} ")), None);
}

#[test]
fn the_renderer_can_be_chosen() {
    let mut t = load_family("qwen3");
    t.set_renderer(RendererChoice::Interpreter).unwrap();
    assert_eq!(t.renderer(), Renderer::Interpreter);
    t.set_renderer(RendererChoice::Compiled).unwrap();
    assert_eq!(t.renderer(), Renderer::Compiled);
    t.set_renderer(RendererChoice::Plan).unwrap();
    assert_eq!(t.renderer(), Renderer::Plan);
    let mut other = ChatTemplate::compile("{{ messages[0].content }}", vec![]).unwrap();
    assert_eq!(other.renderer(), Renderer::Plan);
    other.set_renderer(RendererChoice::Interpreter).unwrap();
    assert_eq!(other.renderer(), Renderer::Interpreter);
    let err = other.set_renderer(RendererChoice::Compiled).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    assert!(err
        .message
        .starts_with("renderer 'compiled': this chat template has no direct renderer"));
    other.set_renderer(RendererChoice::Auto).unwrap();
    assert_eq!(other.renderer(), Renderer::Plan);
}

#[test]
fn every_template_golden_renders_the_same() {
    let templates = templates();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/fixtures/templates");
    let mut direct = 0;
    for family in FAMILIES {
        let golden: Json = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{family}.json"))).unwrap(),
        )
        .unwrap();
        for case in golden["cases"].as_array().unwrap() {
            let mut messages = case["messages"].as_array().unwrap().clone();
            if normalize_messages(&mut messages).is_err() {
                continue;
            }
            let tools = (!case["tools"].is_null()).then_some(&case["tools"]);
            let opts = RenderOptions {
                tools,
                add_generation_prompt: case["addGenerationPrompt"].as_bool().unwrap_or(false),
                enable_thinking: case["enableThinking"].as_bool(),
                ..Default::default()
            };
            for (name, t) in &templates {
                let what = format!("{name} on {family} golden {}", case["name"]);
                direct += agree(t, &messages, &opts, &what) as usize;
            }
            // Each family's own goldens, rendered directly, are transformers' text.
            let own = templates.iter().find(|(n, _)| n == family).map(|(_, t)| t);
            if let Some(Some(Ok(text))) = own.map(|t| t.render_direct(&messages, &opts)) {
                assert_eq!(
                    text,
                    case["text"].as_str().unwrap(),
                    "{family} {}",
                    case["name"]
                );
            }
        }
    }
    assert!(direct > 500, "only {direct} direct renders");
}

#[test]
fn every_real_conversation_renders_the_same() {
    let data = real_data();
    let templates = templates();
    for (name, t) in &templates {
        let (mut direct, mut total) = (0, 0);
        for (at, messages) in &data {
            for opts in option_sets() {
                total += 1;
                direct += agree(t, messages, &opts, &format!("{name} {at}")) as usize;
                // The prompt render of a prompt-completion example.
                let prompt = &messages[..messages.len() - 1];
                if !prompt.is_empty() && opts.add_generation_prompt {
                    agree(t, prompt, &opts, &format!("{name} {at} prompt"));
                }
            }
        }
        // Only conversations with tool calls (and, for Gemma, unalternating roles) are declined.
        let least = if name == "gemma3" { 0.5 } else { 0.7 };
        assert!(
            direct as f64 >= least * total as f64,
            "{name}: {direct} of {total} rendered directly"
        );
    }
}

/// Contents made of what the templates treat specially: reasoning markers, tool-response
/// wrappers, Python whitespace at the edges, control tokens, empty strings.
fn content(rng: &mut Rng) -> String {
    const EDGES: [&str; 12] = [
        "", "\n", "\n\n", " ", "\u{1c}", "\u{1f} ", "\u{a0}", "\u{3000}", "\t\r\n", "<think>",
        "</think>", "\u{200b}",
    ];
    const MIDDLES: [&str; 10] = [
        "hello",
        "<think>\nwhy\n</think>\n\nbecause",
        "a</think>b</think>c",
        "<think>x<think>y</think>",
        "<tool_response>\n{\"ok\": 1}\n</tool_response>",
        "<|im_end|>",
        "é🙂 漢字",
        "",
        "two\n\nlines",
        "<tool_response>",
    ];
    let mut s = String::new();
    for _ in 0..rng.below(3) {
        s.push_str(rng.pick(&EDGES));
    }
    s.push_str(rng.pick(&MIDDLES));
    for _ in 0..rng.below(3) {
        s.push_str(rng.pick(&EDGES));
    }
    s
}

/// `tool_calls` of the shapes data has (OpenAI's `function` wrapper, flat calls, string or
/// JSON arguments) and, with `odd`, of shapes the direct renderer leaves to the interpreter.
fn tool_calls(rng: &mut Rng, odd: bool) -> Json {
    const ARGUMENTS: [&str; 9] = [
        r#""{\"city\": \"Paris\"}""#,
        r#""""#,
        r#"{"city": "Zürich", "days": 3, "hourly": true}"#,
        r#"{"b": 1.5, "a": [1e20, -0.0, null, "é\n\"q\""], "nested": {"x": {}}}"#,
        "[]",
        "17",
        "null",
        "2.0",
        r#"{"big": 12345678901234567890}"#,
    ];
    let call = |rng: &mut Rng| -> Json {
        let arguments: Json = serde_json::from_str(rng.pick(&ARGUMENTS)).unwrap();
        let flat = json!({"name": rng.pick(&["get_weather", "", "é 🙂"]), "arguments": arguments});
        match rng.below(if odd { 12 } else { 8 }) {
            0..=4 => json!({"type": "function", "id": "call_1", "function": flat}),
            5..=7 => flat,
            8 => json!({"function": null, "name": "f", "arguments": "{}"}),
            9 => json!({"function": {}, "name": "f", "arguments": {"a": 1}}),
            10 => json!({"function": {"name": 5, "arguments": "{}"}}),
            _ => serde_json::from_str(rng.pick(&[r#"{"name": "f"}"#, "[1]", r#""call""#, "{}"]))
                .unwrap(),
        }
    };
    match rng.below(8) {
        0 => json!([]),
        1 if odd => json!("not a list"),
        n => Json::Array((0..n.min(3)).map(|_| call(rng)).collect()),
    }
}

/// A message list of any shape: known and unknown roles, extra keys, reasoning, tool calls,
/// non-string contents now and then.
fn messages(rng: &mut Rng) -> Vec<Json> {
    const ROLES: [&str; 7] = [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "developer",
    ];
    let len = 1 + rng.below(7);
    let alternate = rng.chance(40);
    let mut out = Vec::with_capacity(len);
    let mut turns = 0;
    for i in 0..len {
        let role = if alternate {
            if i == 0 && rng.chance(30) {
                "system"
            } else {
                turns += 1;
                if turns % 2 == 1 {
                    "user"
                } else {
                    "assistant"
                }
            }
        } else {
            rng.pick(&ROLES)
        };
        let mut m = json!({"role": role, "content": content(rng)});
        match rng.below(20) {
            0 => m["content"] = json!([{"type": "text", "text": content(rng)}]),
            1 => m["content"] = json!(7),
            2 => m["reasoning_content"] = json!(content(rng)),
            3 => m["reasoning_content"] = json!(null),
            4 | 7 | 8 => m["tool_calls"] = tool_calls(rng, true),
            5 => m["name"] = json!("someone"),
            6 => m["role"] = json!(3),
            _ => {}
        }
        out.push(m);
    }
    out
}

#[test]
fn generated_message_lists_render_the_same() {
    let templates = templates();
    for (name, t) in &templates {
        let mut rng = Rng(0x5eed_c0de ^ name.len() as u64);
        let (mut direct, mut direct_calls) = (0, 0);
        for case in 0..3000 {
            let mut list = messages(&mut rng);
            // The template sees normalized messages; lists normalization refuses are rendered
            // as they are (applyChatTemplate passes them through).
            let _ = normalize_messages(&mut list);
            let options = option_sets();
            let opts = &options[rng.below(options.len())];
            let rendered = agree(t, &list, opts, &format!("{name} case {case}"));
            direct += rendered as usize;
            let calls = list.iter().any(|m| {
                m["role"] == "assistant"
                    && m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
            });
            direct_calls += (rendered && calls) as usize;
        }
        assert!(direct > 600, "{name}: {direct} direct renders");
        // Qwen3 prints tool calls: lists with calls are rendered directly too.
        if name == "qwen3" {
            assert!(
                direct_calls > 40,
                "qwen3: {direct_calls} direct renders with tool calls"
            );
        }
    }
}

#[test]
fn generated_tool_call_conversations_render_the_same() {
    // Agent traces: a user turn, then assistant calls, tool results and answers, in any number.
    let Some((name, t)) = templates().into_iter().find(|(n, _)| n == "qwen3") else {
        return;
    };
    let mut rng = Rng(0x7001_ca11);
    let mut direct = 0;
    for case in 0..2000 {
        let mut list = vec![json!({"role": "user", "content": content(&mut rng)})];
        if rng.chance(30) {
            list.insert(0, json!({"role": "system", "content": content(&mut rng)}));
        }
        for _ in 0..1 + rng.below(4) {
            let mut call = json!({"role": "assistant", "content": content(&mut rng)});
            let odd = rng.chance(10);
            call["tool_calls"] = tool_calls(&mut rng, odd);
            if rng.chance(20) {
                call["reasoning_content"] = json!(content(&mut rng));
            }
            list.push(call);
            for _ in 0..rng.below(3) {
                list.push(json!({"role": "tool", "content": content(&mut rng)}));
            }
            if rng.chance(50) {
                list.push(json!({"role": "assistant", "content": content(&mut rng)}));
            }
        }
        let _ = normalize_messages(&mut list);
        let options = option_sets();
        let opts = &options[rng.below(options.len())];
        direct += agree(&t, &list, opts, &format!("{name} agent case {case}")) as usize;
    }
    assert!(
        direct > 600,
        "{name}: {direct} of 2000 agent traces rendered directly"
    );
}

#[test]
fn declines_leave_errors_to_the_interpreter() {
    let t = load_family("gemma3");
    let t = t.chat_template().unwrap();
    let unalternating = [
        json!({"role": "user", "content": "a"}),
        json!({"role": "user", "content": "b"}),
    ];
    assert!(t
        .render_direct(&unalternating, &RenderOptions::default())
        .is_none());
    let err = t
        .render(&unalternating, &RenderOptions::default())
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::TemplateRender);
    assert_eq!(
        err.message,
        "Conversation roles must alternate user/assistant/user/assistant/..."
    );
}

#[test]
fn trim_strips_what_python_strips() {
    let src = "{% for m in messages %}[{{ m.content | trim }}|{{ m.content.strip() }}|{{ m.content.lstrip() }}|{{ m.content.rstrip() }}|{{ m.content | trim('x') }}]{% endfor %}";
    let t = ChatTemplate::compile(src, vec![]).unwrap();
    let messages = [json!({"role": "user", "content": "\u{1c}x a\u{1f}\u{a0}x"})];
    let out = t.render(&messages, &RenderOptions::default()).unwrap();
    assert_eq!(
        out,
        "[x a\u{1f}\u{a0}x|x a\u{1f}\u{a0}x|x a\u{1f}\u{a0}x|\u{1c}x a\u{1f}\u{a0}x|\u{1c}x a\u{1f}\u{a0}]"
    );
}
