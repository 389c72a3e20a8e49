//! Builtins beyond what the fuzzer generates (`scripts/gen_builtin_goldens.py`): Python's str
//! methods as chat templates call them, `dict.copy()`, and jinja2's `forceescape`, `xmlattr`,
//! `urlencode`, `filesizeformat`, `striptags`, `wordwrap` and `urlize`. Every case renders through
//! the interpreter to Python's text, or raises with Python's message, and the render plan writes
//! the same text or hands the render to the interpreter.

use std::path::Path;

use serde_json::{Map, Value};
use sft_dataset::render::{ChatTemplate, RenderOptions};

#[test]
fn builtins_render_as_python_jinja2() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/fixtures/builtins/cases.json");
    let text = std::fs::read_to_string(&path).expect("the builtin goldens");
    let doc: Value = serde_json::from_str(&text).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() > 1_000, "only {} cases", cases.len());
    let mut failures = Vec::new();
    let (mut rendered, mut raised) = (0, 0);
    for case in cases {
        let source = case["t"].as_str().unwrap();
        let s = case["s"].as_str().unwrap();
        let template = ChatTemplate::compile(source, Vec::new()).unwrap();
        let mut kwargs = Map::new();
        kwargs.insert("s".into(), Value::from(s));
        let opts = RenderOptions {
            template_kwargs: Some(&kwargs),
            ..Default::default()
        };
        let interpreted = template.render_interpreted(&[], &opts);
        match (case.get("out"), &interpreted) {
            (Some(want), Ok(text)) if want == text => rendered += 1,
            (None, Err(e)) if e.message.contains(case["err"]["message"].as_str().unwrap()) => {
                raised += 1
            }
            (want, got) => failures.push(format!(
                "{source} with s = {s:?}: Python {}, ours {:?}",
                want.unwrap_or(&case["err"]),
                got.as_ref().map_err(|e| &e.message)
            )),
        }
        if let Some(planned) = template.render_planned(&[], &opts) {
            let (planned, interpreted) = (
                planned.map_err(|e| e.message),
                interpreted.map_err(|e| e.message),
            );
            if planned != interpreted {
                failures.push(format!(
                    "{source} with s = {s:?}: plan {planned:?}, interpreter {interpreted:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ ({rendered} rendered, {raised} raised as Python):\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
