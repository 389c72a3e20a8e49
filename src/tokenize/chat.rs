//! A tokenizer's chat templates: which one renders a conversation, with which renderer, and
//! the named special tokens templates see.

use std::sync::OnceLock;

use minijinja::value::Value;
use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};
use crate::render::{ChatTemplate, RenderAs, RenderOptions, Renderer, RendererChoice};

use super::ChatTokenizer;
impl ChatTokenizer {
    pub(super) fn compile_templates(&mut self) {
        let special = self.special_tokens_map();
        let compile = |source: &Option<String>| {
            source
                .as_deref()
                .map(|source| ChatTemplate::compile(source, special.clone()))
        };
        self.template = compile(&self.config.chat_template);
        self.tool_use = compile(&self.config.tool_use_template);
        self.mlx_template = OnceLock::new();
    }

    /// Sets how renders that do not say otherwise follow (`fromPretrained`'s `renderAs`).
    pub fn set_render_as(&mut self, render_as: RenderAs) {
        self.render_as = render_as;
    }

    /// The rendering renders follow unless their options say otherwise.
    pub fn render_as(&self) -> RenderAs {
        self.render_as
    }

    /// The rendering `opts` asks for, or the tokenizer's own.
    pub fn render_as_for(&self, opts: &RenderOptions) -> RenderAs {
        opts.render_as.unwrap_or(self.render_as)
    }

    /// Replaces the model's chat templates with `source`, as transformers' `chat_template`
    /// argument does (the renderer goes back to the default choice).
    pub fn set_chat_template(&mut self, source: &str) {
        self.config.chat_template = Some(source.to_string());
        self.config.tool_use_template = None;
        self.config.template_names = Vec::new();
        self.sanitize = OnceLock::new();
        self.compile_templates();
    }

    /// The variables transformers passes to every render from `special_tokens_map`.
    pub fn special_tokens_map(&self) -> Vec<(String, Value)> {
        self.config.special_tokens_map()
    }

    /// Chooses the chat-template renderer (see `chat_template::compiled`). `Compiled` fails for a
    /// template without a direct renderer; a tokenizer without a template has nothing to choose.
    pub fn set_renderer(&mut self, choice: RendererChoice) -> SftResult<()> {
        self.renderer_choice = choice;
        self.mlx_template = OnceLock::new();
        if let Some(Ok(t)) = &mut self.tool_use {
            // A direct renderer is known for default templates only; the tool_use one keeps
            // the interpreter where it has none.
            if t.set_renderer(choice).is_err() {
                t.set_renderer(RendererChoice::Interpreter)?;
            }
        }
        match &mut self.template {
            Some(Ok(t)) => t.set_renderer(choice),
            _ if choice == RendererChoice::Compiled => Err(SftError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "renderer 'compiled': {} has no usable chat template",
                    self.source.display()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The renderer renders use where their options do not say otherwise: `Compiled` for a
    /// known template rendered as transformers (unless another renderer was chosen); MLX Node's
    /// rendering has no direct renderer.
    pub fn renderer(&self) -> Renderer {
        match self.template_of(&RenderOptions::default()) {
            Ok(t) => t.renderer(),
            Err(_) => Renderer::Interpreter,
        }
    }

    /// The compiled chat template.
    pub fn chat_template(&self) -> SftResult<&ChatTemplate> {
        self.template()
    }

    fn template(&self) -> SftResult<&ChatTemplate> {
        self.template_for(false)
    }

    /// The template for a render with `opts`: under MLX Node's rules, the model's chat template
    /// compiled with them (MLX Node has no `tool_use` template); otherwise `template_for`.
    fn template_of(&self, opts: &RenderOptions) -> SftResult<&ChatTemplate> {
        if self.render_as_for(opts) == RenderAs::Transformers {
            return self.template_for(opts.tools.is_some());
        }
        let compiled = self.mlx_template.get_or_init(|| {
            let source = self.config.chat_template.as_deref()?;
            let mut template =
                ChatTemplate::compile_as(source, self.special_tokens_map(), RenderAs::MlxNode);
            // The interpreter when it was chosen; otherwise the plan (no direct renderer here).
            if let Ok(t) = &mut template {
                if self.renderer_choice == RendererChoice::Interpreter {
                    let _ = t.set_renderer(RendererChoice::Interpreter);
                }
            }
            Some(template)
        });
        match compiled {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e.clone()),
            None => self.template_for(false),
        }
    }

    /// The template a render uses: the `tool_use` one when tools are passed and the model has
    /// one, the default otherwise (transformers' `get_chat_template`).
    fn template_for(&self, with_tools: bool) -> SftResult<&ChatTemplate> {
        let chosen = if with_tools && self.tool_use.is_some() {
            &self.tool_use
        } else {
            &self.template
        };
        match chosen {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e.clone()),
            None => Err(match self.config.template_for(with_tools) {
                Err(several) => SftError::new(ErrorCode::ChatTemplateMissing, several),
                Ok(_) => SftError::new(
                    ErrorCode::ChatTemplateMissing,
                    format!(
                        "no chat template for {}: tokenizer_config.json has no chat_template and there is no chat_template.jinja",
                        self.source.display()
                    ),
                ),
            }),
        }
    }

    pub fn has_chat_template(&self) -> bool {
        matches!(self.template, Some(Ok(_)))
    }

    /// Renders messages that are already normalized (see `message::normalize_messages`).
    pub fn render(&self, messages: &[Json], opts: &RenderOptions) -> SftResult<String> {
        self.template_of(opts)?.render(messages, opts)
    }

    /// `render`, reusing the last render of the same one-message list with the same options
    /// (see `ChatTemplate::render_reusing`).
    pub fn render_reusing(&self, messages: &[Json], opts: &RenderOptions) -> SftResult<String> {
        self.template_of(opts)?.render_reusing(messages, opts)
    }

    /// The render and the byte ranges of its `{% generation %}` bodies (see
    /// `ChatTemplate::render_generation`).
    pub fn render_generation(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
    ) -> SftResult<(String, Vec<(usize, usize)>)> {
        self.template_of(opts)?.render_generation(messages, opts)
    }

    /// `applyChatTemplate`: render, then encode without adding special tokens (the template
    /// already wrote them; special-token strings in the text map to their ids).
    pub fn apply_chat_template(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
    ) -> SftResult<Vec<u32>> {
        let text = self.render(messages, opts)?;
        self.encode(&text, false)
    }

    /// `applyChatTemplate` with `sanitizeControlTokens`: the strings of the messages, the tools
    /// and the template variables have their control tokens marked before the render, and the
    /// render is encoded with `encode_marked`.
    pub fn apply_chat_template_sanitized(
        &self,
        messages: &[Json],
        opts: &RenderOptions,
    ) -> SftResult<Vec<u32>> {
        let text = self.render_marked(messages, opts)?;
        Ok(self.encode_marked(&text)?.ids)
    }

    /// The render of `messages`, tools and template variables with their control tokens
    /// marked (see `ControlTokens::mark_json`).
    pub fn render_marked(&self, messages: &[Json], opts: &RenderOptions) -> SftResult<String> {
        let control = self.control_token_set();
        let mut messages = Json::Array(messages.to_vec());
        control.mark_json(&mut messages);
        let mut tools = opts.tools.cloned();
        if let Some(tools) = &mut tools {
            control.mark_json(tools);
        }
        // `reasoning_effort` is one of the template variables transformers marks.
        let mut kwargs = opts.template_kwargs.cloned().map(Json::Object);
        if let Some(effort) = opts.reasoning_effort {
            if let Json::Object(map) =
                kwargs.get_or_insert_with(|| Json::Object(Default::default()))
            {
                map.insert("reasoning_effort".into(), Json::from(effort));
            }
        }
        if let Some(kwargs) = &mut kwargs {
            control.mark_json(kwargs);
        }
        let marked_opts = RenderOptions {
            tools: tools.as_ref(),
            template_kwargs: kwargs.as_ref().and_then(Json::as_object),
            reasoning_effort: None,
            ..*opts
        };
        let list = messages.as_array().map(Vec::as_slice).unwrap_or_default();
        self.render(list, &marked_opts)
    }
}
