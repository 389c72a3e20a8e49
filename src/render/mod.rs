//! Stage 3, render: messages in (`example`), the text of the model's chat template out.
//!
//! Rendering a model's Jinja chat template the way `transformers.apply_chat_template` does.
//!
//! transformers uses jinja2 with `trim_blocks`, `lstrip_blocks`, loop controls, its own
//! `tojson`, `raise_exception` and `strftime_now`, and the `{% generation %}` tag of its
//! assistant-mask extension. minijinja with pycompat supplies the Python string and dict methods;
//! the rest is set up here so that the rendered text matches Python byte for byte.

pub mod json_dumps;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind};

use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::json_value::{list_to_template, to_template};

pub mod compiled;
#[cfg(test)]
mod compiled_tests;
mod environment;
pub mod generation;
mod html_entities;
mod html_unescape;
mod memo;
pub mod mlx_node;
pub mod plan;
#[cfg(test)]
mod plan_tests;
mod python_bigint;
mod python_complex;
pub mod python_filters;
mod python_for_else;
mod python_format;
mod python_format_spec;
pub mod python_generators;
mod python_iterables;
mod python_loop_filter;
pub mod python_macros;
mod python_markup;
mod python_namespace;
pub mod python_ops;
pub mod python_order;
pub mod python_range;
mod python_raw;
pub mod python_rewrite;
pub mod python_semantics;
mod python_signature;
mod python_slice;
pub mod python_str;
mod python_str_format;
mod python_str_methods;
mod python_strings;
#[cfg(test)]
mod python_tests;
mod python_tests_syntax;
mod python_text_filters;
mod python_text_wrap;
pub mod python_undefined;
mod python_unpack;
mod python_urlize;
pub mod python_value;
#[cfg(test)]
mod template_tests;

use compiled::Compiled;
pub use mlx_node::RenderAs;

const TEMPLATE_NAME: &str = "chat_template";
/// The same template with its generation blocks marked (see `generation`), where it has any.
const MARKED_NAME: &str = "chat_template_marked";

/// A render that runs longer than this many template instructions is stopped: a template that
/// loops for ever must not hang a training job. Real chat templates need a few thousand per turn.
const RENDER_FUEL: u64 = 10_000_000;

/// What of minijinja's rules a template keeps in the interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// None: its rewrite to Python's semantics applies (or it needs none).
    Nothing,
    /// All but its namespace assignments: MLX Node's rendering, or a failed rewrite.
    Rules,
    /// All, its namespace assignments too.
    Namespaces,
}

thread_local! {
    /// The message given to `raise_exception` in the render that is running on this thread, so
    /// that it reaches the user verbatim rather than wrapped in minijinja's error text.
    static RAISED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A compiled chat template with the variables every render gets (`bos_token`, `eos_token`, ...).
pub struct ChatTemplate {
    env: Environment<'static>,
    special_tokens: Vec<(String, Value)>,
    /// The direct renderer of a known template (see `compiled`), when one is in use.
    direct: Option<Compiled>,
    /// The direct renderer the source has, in use or not.
    available: Option<Compiled>,
    /// The render plan of the template, when it has one (see `plan`).
    plan: Option<plan::Plan>,
    /// Whether renders go through the plan (not with the `'interpreter'` renderer).
    use_plan: bool,
    /// Whether the template has `{% generation %}` blocks.
    has_generation: bool,
    /// The engine rules this template renders by.
    render_as: RenderAs,
    /// The source and syntax the diagnostic render is built from (transformers' rendering
    /// only), and that render's environment once a render has failed (see `python_undefined`).
    diagnostic_source: Option<(String, SyntaxConfig)>,
    diagnosis: OnceLock<Option<Environment<'static>>>,
    /// The last renders of one-message lists (see `memo`).
    kept: Mutex<memo::Kept>,
    /// How the template's renders depend on the clock (see `memo`).
    clock: memo::Clock,
}

/// Which renderer writes the text. Both write the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renderer {
    /// minijinja interpreting the template.
    Interpreter,
    /// A direct renderer of a known template, with the interpreter for what it declines.
    Compiled,
    /// The template's render plan, with the interpreter for what it declines.
    Plan,
}

impl Renderer {
    pub fn name(self) -> &'static str {
        match self {
            Renderer::Interpreter => "interpreter",
            Renderer::Compiled => "compiled",
            Renderer::Plan => "plan",
        }
    }
}

/// The renderer a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RendererChoice {
    /// `Compiled` when the template has a direct renderer, `Plan` when it has a render plan,
    /// `Interpreter` otherwise.
    #[default]
    Auto,
    Interpreter,
    Compiled,
    /// The render plan, never a direct renderer; the interpreter where the template has no plan.
    Plan,
}

/// What a single render needs besides the template.
#[derive(Default, Clone, Copy)]
pub struct RenderOptions<'a> {
    pub tools: Option<&'a serde_json::Value>,
    pub add_generation_prompt: bool,
    /// `None` leaves `enable_thinking` undefined in the template.
    pub enable_thinking: Option<bool>,
    pub continue_final_message: bool,
    /// Extra template variables, like the keyword arguments of `apply_chat_template`.
    pub template_kwargs: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// `reasoning_effort` (GPT-OSS, Qwen3.8); `None` leaves it undefined, so that a template
    /// keeps its own default. Any string is passed on, as transformers does.
    pub reasoning_effort: Option<&'a str>,
    /// Whose rendering to follow; `None`: the tokenizer's own setting.
    pub render_as: Option<RenderAs>,
    /// A failed render keeps minijinja's words, without the diagnostic render that finds
    /// jinja2's (see `python_undefined`): for renders whose errors nobody reads.
    pub plain_errors: bool,
}

impl ChatTemplate {
    /// Compiles `source`. `special_tokens` are the `special_tokens_map` entries transformers 5
    /// passes to every render (`bos_token`, `eos_token`, `pad_token`, the model's own named tokens
    /// such as `image_token`, ...).
    pub fn compile(source: &str, special_tokens: Vec<(String, Value)>) -> SftResult<Self> {
        Self::compile_as(source, special_tokens, RenderAs::Transformers)
    }

    /// `compile` with the engine rules of `render_as` (see `mlx_node`): MLX Node's rendering has
    /// its own whitespace rules, `tojson`, context and messages, and no direct renderer.
    pub fn compile_as(
        source: &str,
        special_tokens: Vec<(String, Value)>,
        render_as: RenderAs,
    ) -> SftResult<Self> {
        let mlx = render_as == RenderAs::MlxNode;
        let opened;
        let source = if mlx {
            opened = mlx_node::gate_opened(source);
            opened.as_ref()
        } else {
            source
        };
        let special_tokens = if mlx {
            let mut tokens = mlx_node::context_tokens(&special_tokens);
            for name in mlx_node::PRESERVED_THINKING {
                tokens.push((name.to_string(), Value::from(true)));
            }
            tokens
        } else {
            special_tokens
        };
        // jinja2 reads `\r\n` and a lone `\r` in a template as `\n` (its `newline_sequence`).
        let normalized;
        let source = if source.contains('\r') {
            normalized = source.replace("\r\n", "\n").replace('\r', "\n");
            normalized.as_str()
        } else {
            source
        };
        let syntax = SyntaxConfig::builder()
            .trim_blocks(!mlx)
            .lstrip_blocks(!mlx)
            .keep_trailing_newline(false)
            .build()
            .map_err(|e| SftError::new(ErrorCode::Internal, format!("syntax config: {e}")))?;
        // jinja2's reading where minijinja's differs: the newline after `{% raw %}` stays
        // (`python_raw`), string literals hold the values jinja2 reads from them
        // (`python_strings`), and a test followed by arithmetic (`x is string +
        // y`), which minijinja does not parse, gets jinja2's reading (`python_tests_syntax`).
        let mut read = std::borrow::Cow::Borrowed(source);
        if !mlx {
            if let Some(text) = python_raw::kept_raw_newlines(&read) {
                read = text.into();
            }
            if let Some(text) = python_strings::pythonized(&read, &syntax) {
                read = text.into();
            }
            if let Some(text) = python_tests_syntax::reparsed(&read, &syntax) {
                read = text.into();
            }
        }
        let source = read.as_ref();
        let mut env = environment::environment(mlx, syntax.clone());
        let syntax_error = |e: Error| {
            SftError::new(
                ErrorCode::TemplateSyntax,
                format!("chat template does not compile: {}", describe(&e)),
            )
        };
        let transparent =
            generation::rewrite_generation_tags(source, generation::Rewrite::Transparent);
        let mut plan = plan::Plan::compile(&transparent, syntax.clone(), &special_tokens, mlx);
        // Python's semantics where a template can observe them (see `python_semantics`);
        // MLX Node's engine keeps minijinja's. A rewrite that fails leaves the template to
        // minijinja's rules (`Kept::Rules`). Where minijinja's rules stay, namespace assignments
        // are still rewritten, so that a render frees its namespaces (see `python_namespace`),
        // unless that rewrite fails too (`Kept::Namespaces`).
        let pythonic = |text: String| -> (String, Kept) {
            let full = match mlx {
                true => python_rewrite::Rewrite::Failed,
                false => python_rewrite::rewrite(&text, syntax.clone()),
            };
            let kept =
                |text: String| match python_rewrite::namespace_assignments(&text, syntax.clone()) {
                    python_rewrite::Rewrite::Done(rewritten) => (rewritten, Kept::Rules),
                    python_rewrite::Rewrite::Nothing => (text, Kept::Rules),
                    python_rewrite::Rewrite::Failed => (text, Kept::Namespaces),
                };
            match full {
                python_rewrite::Rewrite::Done(rewritten) => (rewritten, Kept::Nothing),
                python_rewrite::Rewrite::Nothing => (text, Kept::Nothing),
                python_rewrite::Rewrite::Failed => kept(text),
            }
        };
        let transparent_source = transparent.clone();
        let (interpreted, kept) = pythonic(transparent);
        // The plan follows Python: where the interpreter follows minijinja instead, the two
        // would render otherwise, and the template is interpreted alone.
        if kept != Kept::Nothing && !mlx {
            plan = None;
        }
        // `{% set ns.name = ... %}` left as it is assigns to minijinja's namespace type alone.
        if kept == Kept::Namespaces {
            match mlx {
                true => env.add_function("namespace", minijinja::functions::namespace),
                false => env.add_function("namespace", python_namespace::kept_namespace_function),
            }
        }
        env.add_template_owned(TEMPLATE_NAME, interpreted)
            .map_err(syntax_error)?;
        let has_generation = generation::has_generation_tags(source);
        if has_generation {
            env.add_template_owned(
                MARKED_NAME,
                pythonic(generation::rewrite_generation_tags(
                    source,
                    generation::Rewrite::Marked,
                ))
                .0,
            )
            .map_err(syntax_error)?;
        }
        // Later entries win, as in the render context.
        let bos = special_tokens
            .iter()
            .rev()
            .find(|(name, _)| name == "bos_token")
            .map(|(_, v)| v);
        let available = compiled::family_of(source)
            .filter(|_| !mlx)
            .and_then(|f| Compiled::new(f, bos));
        Ok(ChatTemplate {
            env,
            special_tokens,
            direct: available.clone(),
            available,
            plan,
            use_plan: true,
            has_generation,
            render_as,
            diagnostic_source: (!mlx).then_some((transparent_source, syntax)),
            diagnosis: OnceLock::new(),
            kept: Mutex::new(memo::Kept::default()),
            clock: memo::Clock::of(source),
        })
    }

    /// Chooses the renderer. `Compiled` fails for a template without a direct renderer.
    pub fn set_renderer(&mut self, choice: RendererChoice) -> SftResult<()> {
        self.use_plan = choice != RendererChoice::Interpreter;
        self.direct = match choice {
            RendererChoice::Interpreter | RendererChoice::Plan => None,
            RendererChoice::Auto => self.available.clone(),
            RendererChoice::Compiled => Some(self.available.clone().ok_or_else(|| {
                SftError::new(
                    ErrorCode::InvalidArgument,
                    "renderer 'compiled': this chat template has no direct renderer (the known templates are Qwen3, Llama 3.x, Gemma 3, DeepSeek V3 and ChatML); use 'auto' or 'interpreter'",
                )
            })?),
        };
        Ok(())
    }

    /// The renderer in use.
    pub fn renderer(&self) -> Renderer {
        match (&self.direct, &self.plan) {
            (Some(_), _) => Renderer::Compiled,
            (None, Some(_)) if self.use_plan => Renderer::Plan,
            _ => Renderer::Interpreter,
        }
    }

    /// How many renders the plan handed to the interpreter, `None` without a plan.
    pub fn plan_declined(&self) -> Option<u64> {
        self.plan.as_ref().map(plan::Plan::declined)
    }

    /// What the render plan's traces did (see `plan`); `None` without a plan or traces.
    pub fn trace_stats(&self) -> Option<plan::TraceStats> {
        self.plan.as_ref().and_then(plan::Plan::trace_stats)
    }

    /// The family of the direct renderer in use.
    pub fn compiled_family(&self) -> Option<compiled::Family> {
        self.direct.as_ref().map(Compiled::family)
    }

    /// The direct renderer's text, `None` when there is none or it declines these messages.
    pub fn render_direct(
        &self,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> Option<SftResult<String>> {
        let text = self.available.as_ref()?.render(messages, opts)?;
        Some(self.finish(text, messages, opts))
    }

    fn finish(
        &self,
        text: String,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> SftResult<String> {
        if opts.continue_final_message {
            return cut_after_final_message(text, messages);
        }
        Ok(text)
    }

    /// Renders `messages` (already in the shape the template expects) to text.
    pub fn render(
        &self,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> SftResult<String> {
        check_options(opts)?;
        if let Some(text) = self.direct.as_ref().and_then(|d| d.render(messages, opts)) {
            return self.finish(text, messages, opts);
        }
        if let Some(plan) = self.plan.as_ref().filter(|_| self.use_plan) {
            let text = if self.render_as == RenderAs::MlxNode {
                plan.render(&mlx_node::sanitized_messages(messages), opts)
            } else {
                plan.render(messages, opts)
            };
            if let Some(text) = text {
                return self.finish(text, messages, opts);
            }
        }
        self.interpret(TEMPLATE_NAME, messages, opts)
    }

    /// `render` of a list of one message, reusing one of the template's latest renders of the
    /// same message with the same options while the clock reads the same (see `memo`); any
    /// other list is rendered as it comes.
    pub fn render_reusing(
        &self,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> SftResult<String> {
        let Some(key) = (messages.len() == 1)
            .then(|| memo::key(messages, opts, self.clock))
            .flatten()
        else {
            return self.render(messages, opts);
        };
        if let Some(text) = self.kept.lock().ok().and_then(|k| k.get(&key)) {
            return Ok(text);
        }
        let text = self.render(messages, opts)?;
        if let Ok(mut kept) = self.kept.lock() {
            kept.put(key, &text);
        }
        Ok(text)
    }

    /// Renders with the plan alone: `None` where the template has no plan or the plan declines.
    pub fn render_planned(
        &self,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> Option<SftResult<String>> {
        check_options(opts).ok()?;
        let plan = self.plan.as_ref()?;
        let text = if self.render_as == RenderAs::MlxNode {
            plan.render(&mlx_node::sanitized_messages(messages), opts)
        } else {
            plan.render(messages, opts)
        }?;
        Some(self.finish(text, messages, opts))
    }

    /// Renders with the interpreter, whatever renderer is chosen.
    pub fn render_interpreted(
        &self,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> SftResult<String> {
        check_options(opts)?;
        self.interpret(TEMPLATE_NAME, messages, opts)
    }

    /// Whether the template has `{% generation %}` blocks.
    pub fn has_generation(&self) -> bool {
        self.has_generation
    }

    /// The render and the byte range of each `{% generation %}` body in it, in the order
    /// transformers records them (see `generation`).
    pub fn render_generation(
        &self,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> SftResult<(String, Vec<(usize, usize)>)> {
        check_options(opts)?;
        if !self.has_generation {
            return Err(SftError::new(
                ErrorCode::TemplateRender,
                "maskingStrategy 'generation' needs {% generation %} blocks in the chat template, and this one has none (TRL's *_training.jinja templates have them)",
            ));
        }
        if opts.continue_final_message {
            return Err(SftError::new(
                ErrorCode::InvalidArgument,
                "continue_final_message is not compatible with generation masks",
            ));
        }
        let inputs = messages
            .iter()
            .chain(opts.tools)
            .chain(opts.template_kwargs.into_iter().flat_map(|m| m.values()));
        if inputs.into_iter().any(json_holds_marks) {
            return Err(SftError::new(
                ErrorCode::InvalidExample,
                "the data holds U+FDD0 or U+FDD1, noncharacters that generation masks reserve",
            ));
        }
        let marked = self.interpret(MARKED_NAME, messages, opts)?;
        generation::split_marks(&marked).map_err(|e| {
            SftError::new(
                ErrorCode::TemplateRender,
                format!("generation mask: {}", describe(&e)),
            )
        })
    }

    fn interpret(
        &self,
        name: &str,
        messages: &[serde_json::Value],
        opts: &RenderOptions,
    ) -> SftResult<String> {
        let template = self.env.get_template(name).map_err(|e| {
            SftError::new(
                ErrorCode::Internal,
                format!("compiled template vanished: {e}"),
            )
        })?;
        let mlx = self.render_as == RenderAs::MlxNode;
        let mut ctx: Vec<(String, Value)> = self.special_tokens.clone();
        if mlx {
            let sanitized = mlx_node::sanitized_messages(messages);
            ctx.push(("messages".into(), list_to_template(&sanitized)));
        } else {
            ctx.push(("messages".into(), list_to_template(messages)));
        }
        ctx.push((
            "tools".into(),
            opts.tools.map(to_template).unwrap_or(Value::from(())),
        ));
        if !mlx {
            ctx.push(("documents".into(), Value::from(())));
        }
        ctx.push((
            "add_generation_prompt".into(),
            Value::from(opts.add_generation_prompt),
        ));
        if let Some(thinking) = opts.enable_thinking {
            ctx.push(("enable_thinking".into(), Value::from(thinking)));
        }
        if let Some(kwargs) = opts.template_kwargs {
            for (key, value) in kwargs {
                ctx.push((key.clone(), to_template(value)));
            }
        }
        if let Some(effort) = opts.reasoning_effort {
            ctx.push(("reasoning_effort".into(), Value::from(effort)));
        }
        // Later entries win, as keyword arguments override the special-token map in Python.
        let context = Value::from(ctx.into_iter().collect::<BTreeMap<String, Value>>());
        RAISED.with(|r| r.borrow_mut().take());
        let rendered = render_guarded(&template, context.clone()).map_err(|e| {
            let raised = RAISED.with(|r| r.borrow_mut().take());
            match raised {
                Some(message) => SftError::new(ErrorCode::TemplateRender, message),
                // minijinja's "engine ran out of fuel" does not tell a user what happened.
                None if e.kind() == ErrorKind::OutOfFuel => SftError::new(
                    ErrorCode::TemplateRender,
                    format!(
                        "chat template exceeded the render limit of {RENDER_FUEL} steps (does it loop for ever?){}",
                        e.line().map(|l| format!(" (line {l})")).unwrap_or_default()
                    ),
                ),
                None => match (!opts.plain_errors)
                    .then(|| self.diagnose(context))
                    .flatten()
                {
                    // Python's own words for what was undefined, at the failure's line.
                    Some(hint) => SftError::new(
                        ErrorCode::TemplateRender,
                        format!(
                            "chat template failed to render: {hint}{}",
                            e.line().map(|l| format!(" (line {l})")).unwrap_or_default()
                        ),
                    ),
                    None => SftError::new(
                        ErrorCode::TemplateRender,
                        format!("chat template failed to render: {}", describe(&e)),
                    ),
                },
            }
        })?;
        self.finish(rendered, messages, opts)
    }
}

impl ChatTemplate {
    /// jinja2's text for the undefined value whose use failed a render of `context`, where
    /// there is one: the diagnostic render's first refusal (see `python_undefined`). A refusal
    /// is recorded only where Python raises, so it names the failure even where the diagnostic
    /// render goes on past it (minijinja's `selectattr` skips an item whose lookup refused).
    fn diagnose(&self, context: Value) -> Option<String> {
        let env = self
            .diagnosis
            .get_or_init(|| {
                let (source, syntax) = self.diagnostic_source.as_ref()?;
                let rewritten = python_rewrite::rewrite_diagnostic(source, syntax.clone())?;
                let mut env = environment::diagnostic_environment(syntax.clone());
                env.add_template_owned(TEMPLATE_NAME, rewritten).ok()?;
                Some(env)
            })
            .as_ref()?;
        let template = env.get_template(TEMPLATE_NAME).ok()?;
        python_undefined::clear_refusals();
        let _ = render_guarded(&template, context);
        RAISED.with(|r| r.borrow_mut().take());
        python_undefined::take_first_refusal()
    }
}

/// `template.render(context)`, with a panic of the engine (minijinja loses track of its frames
/// where a `continue` leaves a `with` block) turned into an error of the render, and the render's
/// namespaces emptied (see `python_namespace`).
fn render_guarded(template: &minijinja::Template<'_, '_>, context: Value) -> Result<String, Error> {
    // Dropped last: every namespace of the render is emptied, once the render has let go of
    // everything else.
    let _namespaces = python_namespace::RenderNamespaces::start();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| template.render(context)))
        .unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::InvalidOperation,
                "the template engine stopped on this template (a loop control inside a `with` block?)",
            ))
        })
}

fn check_options(opts: &RenderOptions) -> SftResult<()> {
    if opts.continue_final_message && opts.add_generation_prompt {
        return Err(SftError::new(
            ErrorCode::InvalidArgument,
            "continueFinalMessage and addGenerationPrompt cannot both be true",
        ));
    }
    Ok(())
}

/// minijinja's error text with the template location, on one line.
fn describe(e: &Error) -> String {
    // Calling a name that is not defined is jinja2's `UndefinedError` for that name.
    let unknown_name = (e.kind() == ErrorKind::UnknownFunction)
        .then(|| e.detail()?.strip_suffix(" is unknown"))
        .flatten();
    let mut text = match (unknown_name, e.detail()) {
        (Some(name), _) => format!("'{name}' is undefined"),
        (None, Some(detail)) => format!("{}: {}", e.kind(), detail),
        (None, None) => e.kind().to_string(),
    };
    if let Some(line) = e.line() {
        text.push_str(&format!(" (line {line})"));
    }
    text
}

/// Python's `str.rindex` cut of `continue_final_message`: keep the text up to the end of the last
/// message's content so the model continues it.
fn cut_after_final_message(rendered: String, messages: &[serde_json::Value]) -> SftResult<String> {
    let last = messages.last().ok_or_else(|| {
        SftError::new(
            ErrorCode::InvalidArgument,
            "continueFinalMessage needs at least one message",
        )
    })?;
    let content = match last.get("content") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(parts)) => parts
            .iter()
            .rev()
            .find_map(|p| p.get("text").and_then(|t| t.as_str()).map(str::to_string))
            .unwrap_or_default(),
        _ => String::new(),
    };
    for needle in [content.as_str(), content.trim()] {
        if let Some(pos) = rendered.rfind(needle) {
            let mut text = rendered;
            text.truncate(pos + needle.len());
            return Ok(text);
        }
    }
    Err(SftError::new(
        ErrorCode::TemplateRender,
        "continueFinalMessage: the final message's content does not appear in the rendered text",
    ))
}

/// Whether a string anywhere in `value` (keys included) holds a generation mark.
fn json_holds_marks(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => generation::holds_marks(s),
        serde_json::Value::Array(items) => items.iter().any(json_holds_marks),
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(k, v)| generation::holds_marks(k) || json_holds_marks(v)),
        _ => false,
    }
}

/// `strftime_now`: the local time, or the time `SOURCE_DATE_EPOCH` names (seconds since 1970,
/// the reproducible-builds convention, printed as UTC) so that templates that print today's
/// date (GPT-OSS, Llama 3.1) render the same text on every day.
pub(crate) fn strftime_now(format: String) -> Result<Value, Error> {
    use std::fmt::Write;
    // The clock's second (or the fixed time) and the format name the text, unless the format
    // can print fractions of a second (chrono spells those with an `f`): the renders of one
    // second reuse the first one's text instead of formatting the date again.
    let second = strftime_second();
    let cacheable = !format.contains('f');
    if cacheable {
        let hit = LAST_STRFTIME.with(|last| {
            let last = last.borrow();
            last.as_deref()
                .filter(|(f, s, _)| *s == second && *f == format)
                .map(|(_, _, text)| text.clone())
        });
        if let Some(text) = hit {
            return Ok(Value::from(text));
        }
    }
    let mut out = String::new();
    let written = match second {
        (true, secs) => match chrono::DateTime::from_timestamp(secs, 0) {
            Some(time) => write!(out, "{}", time.naive_utc().format(&format)),
            None => Err(std::fmt::Error),
        },
        // The pinned second, where one is: a format with fractions prints the clock's now.
        (false, secs) => {
            let pinned = (cacheable && PINNED_CLOCK.with(Cell::get).0 == PINNED_LOCAL)
                .then(|| chrono::TimeZone::timestamp_opt(&chrono::Local, secs, 0).single())
                .flatten();
            match pinned {
                Some(time) => write!(out, "{}", time.format(&format)),
                None => write!(out, "{}", chrono::Local::now().format(&format)),
            }
        }
    };
    written.map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: invalid format {format:?}"),
        )
    })?;
    if cacheable {
        let text = out.clone();
        LAST_STRFTIME.with(|last| *last.borrow_mut() = Some(Box::new((format, second, text))));
    }
    Ok(Value::from(out))
}

/// The time `SOURCE_DATE_EPOCH` names, when it is set.
fn fixed_time() -> Option<chrono::DateTime<chrono::Utc>> {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
}

/// The second `strftime_now` prints now: the fixed time's (`true`) or the clock's.
fn clock_second(fixed: Option<chrono::DateTime<chrono::Utc>>) -> (bool, i64) {
    match fixed {
        Some(time) => (true, time.timestamp()),
        None => (false, chrono::Utc::now().timestamp()),
    }
}

/// The second `strftime_now` would print now: the pinned one inside [`with_pinned_clock`],
/// read at the first call there.
pub(crate) fn strftime_second() -> (bool, i64) {
    match PINNED_CLOCK.with(Cell::get) {
        (PINNED_FIXED, second) => (true, second),
        (PINNED_LOCAL, second) => (false, second),
        (PIN_ASKED, _) => {
            let (fixed, second) = clock_second(fixed_time());
            PINNED_CLOCK.with(|p| p.set((if fixed { PINNED_FIXED } else { PINNED_LOCAL }, second)));
            (fixed, second)
        }
        _ => clock_second(fixed_time()),
    }
}

/// Runs `f` with the clock read at most once: every render in it prints the same second (the
/// renders of one example agree on the date), and the environment is not read for each of them,
/// nor at all where no render asks for the time. Nested calls keep the outer second.
pub fn with_pinned_clock<T>(f: impl FnOnce() -> T) -> T {
    if PINNED_CLOCK.with(Cell::get).0 != UNPINNED {
        return f();
    }
    PINNED_CLOCK.with(|p| p.set((PIN_ASKED, 0)));
    // Unpinned even where `f` unwinds.
    struct Unpin;
    impl Drop for Unpin {
        fn drop(&mut self) {
            let _ = PINNED_CLOCK.try_with(|p| p.set((UNPINNED, 0)));
        }
    }
    let _unpin = Unpin;
    f()
}

const UNPINNED: u8 = 0;
const PINNED_FIXED: u8 = 1;
const PINNED_LOCAL: u8 = 2;
/// Inside `with_pinned_clock`, before any render has read the clock.
const PIN_ASKED: u8 = 3;

/// The last `strftime_now` text of this thread: its format, the second it was made in (and
/// whether that second was `SOURCE_DATE_EPOCH`'s) and the text. Boxed, to keep the static TLS
/// space this module takes small (see `fast_bpe`'s `WORK`).
type LastStrftime = Option<Box<(String, (bool, i64), String)>>;

thread_local! {
    static LAST_STRFTIME: RefCell<LastStrftime> = const { RefCell::new(None) };
    /// The second [`with_pinned_clock`] fixed on this thread: a tag (`UNPINNED`, ...) and it.
    static PINNED_CLOCK: Cell<(u8, i64)> = const { Cell::new((UNPINNED, 0)) };
}
