//! The differential template fuzzer's goldens (`scripts/gen_jinja_fuzz_goldens.py`): small random
//! templates over the constructs chat templates use, with random variables, rendered by Python's
//! jinja2 as transformers 5 configures it. Every case is replayed through the interpreter and
//! through the render plan: the interpreter writes Python's text, or raises where Python raised;
//! the plan writes the same text or hands the render to the interpreter.
//!
//! Printed Python objects compare without their addresses (`<generator object f at 0x?>`). A case
//! whose text reads an address (`count('a')` of a text that prints one) has no one answer: the
//! script marks it `varies` where a second Python process renders it otherwise, and only the
//! plan's agreement with the interpreter is checked there.
//! Error messages are compared where Python's is the template's own (`raise_exception`) or one
//! the engine reproduces (ours then contains it): undefined values (see `python_undefined`),
//! refused macro calls, Python's `TypeError`s of operators and filters.
//! What still differs is listed in [`RESIDUAL`], each class with the most cases it may hold (see
//! docs/templates.md, "Known residual differences"). `JINJA_FUZZ_DUMP=<file>` appends every
//! differing case to that file, one JSON line each.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;
use sft_dataset::render::{ChatTemplate, RenderOptions};

use common::{fuzz_cases, fuzz_kwargs};

/// Python's exception text as it appears in ours: the interpreter's message wraps minijinja's
/// error, which carries Python's words where the engine follows Python.
fn same_error(ours: &str, python: &Value) -> bool {
    let message = python["message"].as_str().unwrap();
    if python["type"] == "TemplateError" {
        return ours == message;
    }
    ours.contains(message)
}

/// `text` with every address of a printed Python object (`<generator object f at 0x7f..>`, or
/// one a method changed afterwards, `0X7Fcc..`) written `0x?`: Python's differ from run to run,
/// so only their places compare.
fn without_addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("0x").or_else(|| rest.find("0X")) {
        let at = match (rest.find("0x"), rest.find("0X")) {
            (Some(a), Some(b)) => a.min(b),
            _ => at,
        };
        let (head, tail) = rest.split_at(at + 2);
        out.push_str(head);
        let digits = tail.len()
            - tail
                .trim_start_matches(|c: char| c.is_ascii_hexdigit())
                .len();
        if digits >= 8 {
            out.push('?');
            rest = &tail[digits..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// The classes of cases that still differ from Python, and the most cases each may hold.
const RESIDUAL: [(&str, usize); 6] = [
    // The one of two errors that is reached first where Python and the engine evaluate in
    // another order (Python joins an output's items, and finds a filter block's refused text,
    // only once the output ends).
    ("error message differs", 2),
    // minijinja's parser: a test whose bare argument is followed by more (`x is t in [1, 2]`
    // inside a list).
    ("does not compile", 3),
    // None in this set: a text that reads a printed object's address is marked `varies` where
    // the script's second renders caught it changing.
    ("text differs", 0),
    // None in this set.
    ("we raise, Python renders", 0),
    // None in this set: jinja2's constant folding of a non-finite float from arithmetic or a
    // literal (`1e308 * 10`), which it writes into the code it generates (`NameError`), would be.
    ("we render, Python raises", 0),
    // None: the plan writes the interpreter's bytes or hands the render over.
    ("the plan differs from the interpreter", 0),
];

#[derive(Default)]
struct Tally {
    /// Failures by class, each with its first few examples.
    classes: BTreeMap<String, (usize, Vec<String>)>,
    planned: usize,
    rendered: usize,
    raised: usize,
    /// Cases whose result Python gives differently from one process to the next.
    varying: usize,
}

impl Tally {
    fn fail(&mut self, class: String, example: String) {
        if let Ok(path) = std::env::var("JINJA_FUZZ_DUMP") {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .unwrap();
            writeln!(
                f,
                "{}",
                serde_json::json!({"class": class, "example": example})
            )
            .unwrap();
        }
        let entry = self.classes.entry(class).or_default();
        entry.0 += 1;
        if entry.1.len() < 3 {
            entry.1.push(example);
        }
    }
}

fn check_case(case: &Value, contexts: &[Value], tally: &mut Tally) {
    let source = case["t"].as_str().unwrap();
    let context = contexts[case["c"].as_u64().unwrap() as usize]
        .as_object()
        .unwrap();
    let show = |detail: String| format!("{source:?} with context {}: {detail}", case["c"]);
    let template = match ChatTemplate::compile(source, Vec::new()) {
        Ok(t) => t,
        Err(e) => return tally.fail("does not compile".into(), show(e.message)),
    };
    let messages = context["messages"].as_array().unwrap();
    let kwargs = fuzz_kwargs(context);
    let opts = RenderOptions {
        tools: context.get("tools"),
        add_generation_prompt: case["g"].as_bool().unwrap(),
        template_kwargs: Some(&kwargs),
        ..Default::default()
    };
    let interpreted = template.render_interpreted(messages, &opts);
    let planned = template.render_planned(messages, &opts);
    // Python's own answer changes from process to process (the script rendered it twice):
    // only the plan's agreement with the interpreter is checked.
    let varies = case.get("varies") == Some(&Value::Bool(true));
    match (case.get("out"), &interpreted) {
        _ if varies => tally.varying += 1,
        (Some(want), Ok(text)) => {
            tally.rendered += 1;
            if without_addresses(text) != without_addresses(want.as_str().unwrap()) {
                tally.fail(
                    "text differs".into(),
                    show(format!("ours {text:?}, Python {want}")),
                );
            }
        }
        (Some(want), Err(e)) => tally.fail(
            "we raise, Python renders".into(),
            show(format!("ours {:?}, Python {want}", e.message)),
        ),
        (None, Ok(text)) => tally.fail(
            format!("we render, Python raises {}", case["err"]["type"]),
            show(format!("ours {text:?}, Python {}", case["err"])),
        ),
        (None, Err(e)) => {
            tally.raised += 1;
            if !same_error(&e.message, &case["err"]) {
                tally.fail(
                    format!("error message differs ({})", case["err"]["type"]),
                    show(format!("ours {:?}, Python {}", e.message, case["err"])),
                );
            }
        }
    }
    if let Some(planned) = planned {
        tally.planned += 1;
        let planned = planned
            .map(|t| without_addresses(&t))
            .map_err(|e| e.message);
        let interpreted = interpreted
            .map(|t| without_addresses(&t))
            .map_err(|e| e.message);
        if planned != interpreted {
            tally.fail(
                "the plan differs from the interpreter".into(),
                show(format!("plan {planned:?}, interpreter {interpreted:?}")),
            );
        }
    }
}

#[test]
fn random_templates_render_as_python_jinja2() {
    let all = fuzz_cases();
    let contexts = all["contexts"].as_array().unwrap();
    let cases = all["cases"].as_array().unwrap();
    assert!(cases.len() >= 36_000, "only {} cases", cases.len());
    let mut tally = Tally::default();
    for case in cases {
        check_case(case, contexts, &mut tally);
    }
    let report: Vec<String> = tally
        .classes
        .iter()
        .map(|(class, (count, examples))| {
            format!("{count} × {class}:\n  {}", examples.join("\n  "))
        })
        .collect();
    eprintln!(
        "{} cases: {} rendered, {} raised, {} vary in Python; the plan rendered {}",
        cases.len(),
        tally.rendered,
        tally.raised,
        tally.varying,
        tally.planned
    );
    let mut over = Vec::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (class, (count, _)) in &tally.classes {
        let residual = RESIDUAL
            .iter()
            .find(|(prefix, _)| class.starts_with(prefix));
        match residual {
            Some((prefix, _)) => *counts.entry(prefix).or_default() += count,
            None => over.push(format!("{class}: not a known residual class")),
        }
    }
    for (prefix, most) in &RESIDUAL {
        let count = counts.get(prefix).copied().unwrap_or(0);
        eprintln!("{prefix}: {count} (at most {most})");
        if count > *most {
            over.push(format!("{prefix}: {count} cases, at most {most} allowed"));
        }
    }
    assert!(
        over.is_empty(),
        "{}\ncases that differ from Python:\n{}",
        over.join("\n"),
        report.join("\n")
    );
}
