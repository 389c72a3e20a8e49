//! Render plans: a chat template compiled once into instructions that run straight over the
//! example's JSON, for every template, where the interpreter builds template values for every
//! message and walks minijinja's bytecode on every render.
//!
//! A plan is exact or silent. It is made only from templates whose every construct it implements
//! (anything else, such as imports or call blocks, leaves the template to the interpreter), and a
//! render gives up ([`value::Bail`]) the moment it meets a value or an operation whose result it
//! does not know for certain: a type it does not handle, an error the template would raise
//! (`raise_exception` included), a long loop. The interpreter then renders that example, so
//! errors read as they always have. The differential tests in `plan_tests`, the template corpus
//! suite and the `render_template` fuzz target hold every plan render to the interpreter's bytes.

mod builtins;
mod compile;
mod eval;
mod ir;
mod replay;
mod trace;
mod trace_expr;
mod value;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;
use minijinja::Value;
use serde_json::Value as Json;

use super::RenderOptions;
pub use trace::TraceStats;
use value::{Sym, V};

/// The global functions of the interpreter's environment: minijinja's and this crate's.
const GLOBALS: [&str; 9] = [
    "range",
    "dict",
    "namespace",
    "debug",
    "lipsum",
    "cycler",
    "joiner",
    "raise_exception",
    "strftime_now",
];

/// A compiled render plan of one chat template.
pub struct Plan {
    body: Vec<ir::Stmt>,
    macros: Vec<ir::Macro>,
    /// Every name the template reads or writes.
    names: HashMap<Box<str>, Sym>,
    loop_sym: Sym,
    /// The symbols of the render's own variables, where the template reads them.
    context_syms: ContextSyms,
    /// The names of the environment's global functions that the template reads.
    globals: Vec<Sym>,
    /// The special-token variables, in the order the render context sets them.
    special: Vec<(Sym, Special)>,
    /// MLX Node's rendering: compact `tojson`, no `documents` variable.
    compact_json: bool,
    mlx: bool,
    /// The length of the last render, to size the next one's buffer.
    last_len: AtomicUsize,
    /// Renders handed to the interpreter.
    declined: AtomicU64,
    /// Kept renders by shape, for a template whose renders depend on nothing but their inputs
    /// (no clock); `None` otherwise (see `trace`).
    traces: Option<trace::Traces>,
}

struct ContextSyms {
    messages: Option<Sym>,
    tools: Option<Sym>,
    documents: Option<Sym>,
    add_generation_prompt: Option<Sym>,
    enable_thinking: Option<Sym>,
    reasoning_effort: Option<Sym>,
}

enum Special {
    Str(Box<str>),
    Value(Value),
}

impl Plan {
    /// The plan of `source` (as the interpreter's environment holds it, generation tags already
    /// rewritten), or `None` when the template uses something plans do not implement.
    pub fn compile(
        source: &str,
        syntax: SyntaxConfig,
        special_tokens: &[(String, Value)],
        mlx: bool,
    ) -> Option<Plan> {
        let ast = minijinja::machinery::parse(source, "chat_template", syntax).ok()?;
        let mut compiler = compile::Compiler::default();
        let body = compiler.template(&ast).ok()?;
        let loop_sym = compiler.sym("loop");
        let names: HashMap<Box<str>, Sym> = compiler
            .names()
            .into_iter()
            .enumerate()
            .map(|(i, name)| (name, i as Sym))
            .collect();
        let globals = GLOBALS
            .iter()
            .filter_map(|name| names.get(*name).copied())
            .collect();
        let special = special_tokens
            .iter()
            .filter_map(|(name, value)| {
                let sym = *names.get(name.as_str())?;
                let stored = match value.as_str() {
                    Some(s) if value.kind() == ValueKind::String => Special::Str(s.into()),
                    _ => Special::Value(value.clone()),
                };
                Some((sym, stored))
            })
            .collect();
        let sym = |name: &str| names.get(name).copied();
        let context_syms = ContextSyms {
            messages: sym("messages"),
            tools: sym("tools"),
            documents: sym("documents"),
            add_generation_prompt: sym("add_generation_prompt"),
            enable_thinking: sym("enable_thinking"),
            reasoning_effort: sym("reasoning_effort"),
        };
        Some(Plan {
            context_syms,
            body,
            macros: compiler.macros,
            names,
            loop_sym,
            globals,
            special,
            compact_json: mlx,
            mlx,
            last_len: AtomicUsize::new(0),
            declined: AtomicU64::new(0),
            traces: trace::Traces::for_source(source),
        })
    }

    /// How many renders this plan handed to the interpreter.
    pub fn declined(&self) -> u64 {
        self.declined.load(Ordering::Relaxed)
    }

    /// What the plan's traces did; `None` for a template that keeps none.
    pub fn trace_stats(&self) -> Option<TraceStats> {
        self.traces.as_ref().map(trace::Traces::stats)
    }

    /// The render of `messages` (already in the shape the template expects), or `None` when the
    /// interpreter must render them.
    pub fn render(&self, messages: &[Json], opts: &RenderOptions) -> Option<String> {
        match &self.traces {
            Some(traces) => traces.render(
                messages,
                opts,
                || self.render_plainly(messages, opts),
                || self.record(messages, opts),
            ),
            None => self.render_plainly(messages, opts),
        }
    }

    /// The render of `messages` recorded as a trace: its text and pieces (see `trace`), or
    /// `None` where the recording gives up.
    fn record(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
    ) -> Option<(String, Vec<trace::Piece>)> {
        let context = self.context(messages, opts);
        let mut run = eval::Run::traced(self, context, 0);
        run.top(&self.body).ok()?;
        run.finish_traced()
    }

    /// The render of `messages` by running the plan.
    pub(crate) fn render_plainly(&self, messages: &[Json], opts: &RenderOptions) -> Option<String> {
        let context = self.context(messages, opts);
        let capacity = self.last_len.load(Ordering::Relaxed) + 256;
        let mut run = eval::Run::new(self, context, capacity);
        match run.top(&self.body) {
            Ok(()) => {
                let text = run.finish();
                self.last_len.store(text.len(), Ordering::Relaxed);
                Some(text)
            }
            Err(_) => {
                self.declined.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The render's variables, in the interpreter's order (later entries win).
    fn context<'a>(&'a self, messages: &'a [Json], opts: &RenderOptions<'a>) -> Vec<(Sym, V<'a>)> {
        let mut frame = Vec::with_capacity(self.special.len() + 8);
        for (sym, value) in &self.special {
            frame.push((
                *sym,
                match value {
                    Special::Str(s) => V::Str(s),
                    Special::Value(v) => match v.kind() {
                        ValueKind::Undefined => V::Undef,
                        ValueKind::None => V::None,
                        ValueKind::Bool => V::Bool(v.is_true()),
                        _ => V::Other(v.clone()),
                    },
                },
            ));
        }
        let syms = &self.context_syms;
        let mut put = |sym: Option<Sym>, value: V<'a>| {
            if let Some(sym) = sym {
                frame.push((sym, value));
            }
        };
        put(
            syms.messages,
            V::List(Rc::new(messages.iter().map(V::lift).collect())),
        );
        put(syms.tools, opts.tools.map(V::lift).unwrap_or(V::None));
        if !self.mlx {
            put(syms.documents, V::None);
        }
        put(
            syms.add_generation_prompt,
            V::Bool(opts.add_generation_prompt),
        );
        if let Some(thinking) = opts.enable_thinking {
            put(syms.enable_thinking, V::Bool(thinking));
        }
        if let Some(kwargs) = opts.template_kwargs {
            for (key, value) in kwargs {
                put(self.names.get(key.as_str()).copied(), V::lift(value));
            }
        }
        if let Some(effort) = opts.reasoning_effort {
            put(syms.reasoning_effort, V::Str(effort));
        }
        frame
    }
}

/// Why `source` gets no plan (for tests and tools): `None` when it gets one.
pub fn why_no_plan(source: &str, syntax: SyntaxConfig) -> Option<String> {
    let ast = match minijinja::machinery::parse(source, "chat_template", syntax) {
        Ok(ast) => ast,
        Err(e) => return Some(format!("parse: {e}")),
    };
    let mut compiler = compile::Compiler::default();
    compiler.template(&ast).err().map(|u| u.0.to_string())
}
