//! `Tokenizer` (also exported as `Qwen3Tokenizer`): the reference tokenizer's API over
//! `tokenizer::ChatTokenizer`.

use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, ClassInstance, Either, FromNapiValue, Unknown};
use napi::{JsValue, ValueType};
use napi_derive::napi;
use rayon::prelude::*;
use serde_json::Value;

use super::arrays::{Owned, OwnedParts, OwnedU32};
use super::error::{run_sync, to_js, JsResult as Result};
use super::handles::{self, Handle};
use super::ids::{token_ids, IdsInput};
use super::json::JsJson;
use super::task::{job, Job};
use super::text::{Text, Texts};
use crate::error::{ErrorCode, SftError, SftResult};
use crate::example::message::prepare_chat;
use crate::render::RendererChoice;
use crate::render::{RenderAs, RenderOptions};
use crate::tokenize::{ChatTokenizer, EngineChoice, ENDOFTEXT, IM_END, IM_START};

/// Options of `renderChatTemplate`, named as in `apply_chat_template`.
#[napi(object)]
pub struct RenderChatTemplateOptions {
    /// Append the assistant header so the model writes the next turn. Default false.
    pub add_generation_prompt: Option<bool>,
    /// OpenAI-style tool definitions; `parameters.properties` may be a JSON string.
    #[napi(ts_type = "Array<any>")]
    pub tools: Option<Vec<JsJson>>,
    /// Sets `enable_thinking`; left undefined in the template when not given.
    pub enable_thinking: Option<bool>,
    /// End the text right after the last message's content, so the model continues it.
    /// Default false.
    pub continue_final_message: Option<bool>,
    /// Extra template variables (keyword arguments of `apply_chat_template`).
    #[napi(ts_type = "Record<string, any>")]
    pub template_kwargs: Option<JsJson>,
    /// Passed to the template as `reasoning_effort` (GPT-OSS, Qwen3.8 read it); left undefined
    /// when not given, so that the template keeps its own default. Any string is passed on.
    pub reasoning_effort: Option<String>,
    /// `'transformers'` (default: the tokenizer's own setting, `'transformers'` unless
    /// `fromPretrained` chose otherwise) or `'mlx-node'`: render as MLX Node's tokenizer does
    /// (every assistant turn keeps its reasoning; see docs/mlx-node.md).
    #[napi(ts_type = "'transformers' | 'mlx-node'")]
    pub render_as: Option<String>,
}

/// Options of `applyChatTemplate` beyond the reference's arguments.
#[napi(object)]
pub struct ApplyChatTemplateOptions {
    /// Encode control-token strings found in the messages, tools and template variables as
    /// plain text; the template's own control tokens stay tokens. The ids are those of
    /// transformers 5 `apply_chat_template(..., tokenize=True, sanitize_control_tokens=True)`.
    /// Default false.
    pub sanitize_control_tokens: Option<bool>,
    /// Extra template variables (keyword arguments of `apply_chat_template`).
    #[napi(ts_type = "Record<string, any>")]
    pub template_kwargs: Option<JsJson>,
    /// Passed to the template as `reasoning_effort` (GPT-OSS, Qwen3.8 read it); left undefined
    /// when not given, so that the template keeps its own default. Any string is passed on.
    pub reasoning_effort: Option<String>,
    /// `'transformers'` (default: the tokenizer's own setting, `'transformers'` unless
    /// `fromPretrained` chose otherwise) or `'mlx-node'`: render as MLX Node's tokenizer does
    /// (every assistant turn keeps its reasoning; see docs/mlx-node.md).
    #[napi(ts_type = "'transformers' | 'mlx-node'")]
    pub render_as: Option<String>,
}

/// Options of `fromPretrained`.
#[napi(object)]
pub struct TokenizerLoadOptions {
    /// `'auto'` (default): the fast linear-time BPE engine when it supports every component of
    /// the tokenizer.json, the HF `tokenizers` engine otherwise. `'hf'`: always HF. `'fast'`:
    /// the fast engine or an error naming the unsupported component. Both give identical ids.
    #[napi(ts_type = "'auto' | 'hf' | 'fast'")]
    pub engine: Option<String>,
    /// `'auto'` (default): a direct renderer when the chat template is one of the known
    /// templates (Qwen3, Llama 3.x, Gemma 3, DeepSeek V3, ChatML; matched byte for byte), the
    /// template's render plan otherwise (any template built from the constructs plans
    /// implement), the minijinja interpreter for the rest. `'plan'`: the render plan, never a
    /// direct renderer. `'interpreter'`: always the interpreter. `'compiled'`: the direct renderer
    /// or an error. All write the same text; the direct renderer and the plan hand what they do
    /// not cover to the interpreter.
    #[napi(ts_type = "'auto' | 'plan' | 'interpreter' | 'compiled'")]
    pub renderer: Option<String>,
    /// How chat templates render: `'transformers'` (default), as
    /// `transformers.apply_chat_template`; `'mlx-node'`, as MLX Node's own tokenizer
    /// (`@mlx-node/core`) renders them: every assistant turn keeps its reasoning, messages
    /// sanitised (see docs/mlx-node.md). Renders, datasets and the token cache follow it unless
    /// their own `renderAs` says otherwise.
    #[napi(ts_type = "'transformers' | 'mlx-node'")]
    pub render_as: Option<String>,
}

/// A `renderAs` setting; `what` names it in the error.
pub(crate) fn render_as_arg(value: Option<&str>, what: &str) -> SftResult<Option<RenderAs>> {
    value
        .map(|v| RenderAs::parse(v).ok_or_else(|| RenderAs::parse_error(what, v)))
        .transpose()
}

fn engine_choice(options: Option<&TokenizerLoadOptions>) -> SftResult<EngineChoice> {
    match options.and_then(|o| o.engine.as_deref()) {
        None | Some("auto") => Ok(EngineChoice::Auto),
        Some("hf") => Ok(EngineChoice::Hf),
        Some("fast") => Ok(EngineChoice::Fast),
        Some(other) => Err(SftError::new(
            ErrorCode::InvalidArgument,
            format!("engine must be 'auto', 'hf' or 'fast', got {other:?}"),
        )),
    }
}

fn renderer_choice(options: Option<&TokenizerLoadOptions>) -> SftResult<RendererChoice> {
    match options.and_then(|o| o.renderer.as_deref()) {
        None | Some("auto") => Ok(RendererChoice::Auto),
        Some("interpreter") => Ok(RendererChoice::Interpreter),
        Some("compiled") => Ok(RendererChoice::Compiled),
        Some("plan") => Ok(RendererChoice::Plan),
        Some(other) => Err(SftError::new(
            ErrorCode::InvalidArgument,
            format!("renderer must be 'auto', 'plan', 'interpreter' or 'compiled', got {other:?}"),
        )),
    }
}

fn load(path: String, options: Option<TokenizerLoadOptions>) -> SftResult<ChatTokenizer> {
    let engine = engine_choice(options.as_ref())?;
    let renderer = renderer_choice(options.as_ref())?;
    let render_as = render_as_arg(
        options.as_ref().and_then(|o| o.render_as.as_deref()),
        "renderAs",
    )?;
    if renderer == RendererChoice::Compiled && render_as == Some(RenderAs::MlxNode) {
        return Err(SftError::invalid_argument(
            "renderer 'compiled' cannot render as MLX Node does (its rendering has no direct renderer); use 'auto', 'plan' or 'interpreter'",
        ));
    }
    let mut tokenizer = ChatTokenizer::load_with_engine(&PathBuf::from(path), engine)?;
    tokenizer.set_renderer(renderer)?;
    if let Some(render_as) = render_as {
        tokenizer.set_render_as(render_as);
    }
    Ok(tokenizer)
}

#[napi(js_name = "Tokenizer")]
pub struct JsTokenizer {
    pub(crate) inner: Arc<ChatTokenizer>,
    handle: Handle,
}

impl JsTokenizer {
    fn new(tokenizer: ChatTokenizer) -> Self {
        let inner = Arc::new(tokenizer);
        JsTokenizer {
            handle: Handle::new(inner.clone()),
            inner,
        }
    }
}

/// The tokenizer behind a `tokenizer` argument. Entry points take the argument as `Unknown` and
/// convert it here, because napi's own conversion of a foreign object (another library's
/// tokenizer, a plain object, `null`) throws "Failed to recover `JsTokenizer` type" with code
/// `InvalidArg`, which names neither the argument nor what to pass.
pub fn tokenizer_arg(value: &Unknown) -> SftResult<Arc<ChatTokenizer>> {
    let raw = value.value();
    // SAFETY: `raw` is a live value of the current call; the conversion checks napi's type tag
    // before it reads the wrapped pointer, so an object of another class is refused, not read.
    match unsafe { ClassInstance::<JsTokenizer>::from_napi_value(raw.env, raw.value) } {
        Ok(instance) => Ok(instance.inner.clone()),
        Err(_) => {
            let got = match value.get_type() {
                Ok(ValueType::Null) => "null",
                Ok(ValueType::Undefined) => "undefined",
                Ok(ValueType::String) => "a string",
                Ok(ValueType::Number) => "a number",
                Ok(ValueType::Boolean) => "a boolean",
                Ok(ValueType::Function) => "a function",
                Ok(ValueType::Object) => "an object that is not one",
                _ => "a value of another type",
            };
            Err(SftError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "tokenizer must be a Tokenizer of sft-dataset (from Tokenizer.fromPretrained), got {got}"
                ),
            ))
        }
    }
}

fn kwargs_map(kwargs: Option<JsJson>) -> SftResult<Option<serde_json::Map<String, Value>>> {
    match kwargs.map(|k| k.0) {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(SftError::invalid_argument(
            "templateKwargs must be an object of template variables",
        )),
    }
}

/// `applyChatTemplate`'s arguments after `enableThinking`: our options object in position five,
/// or upstream MLX Node's `contentOrder`, `existingImagePlaceholder` (strings for multimodal
/// content, which has no effect on text) and `reasoningEffort`.
struct TemplateCallTail {
    options: Option<ApplyChatTemplateOptions>,
    reasoning_effort: Option<String>,
}

impl TemplateCallTail {
    fn new(
        fifth: Option<Either<ApplyChatTemplateOptions, String>>,
        reasoning_effort: Option<String>,
    ) -> Self {
        // A string is upstream's `contentOrder`, which orders image and text parts.
        let options = match fifth {
            Some(Either::A(options)) => Some(options),
            Some(Either::B(_)) | None => None,
        };
        TemplateCallTail {
            options,
            reasoning_effort,
        }
    }
}

fn apply_template(
    tokenizer: &ChatTokenizer,
    messages: Vec<JsJson>,
    add_generation_prompt: Option<bool>,
    tools: Option<Vec<JsJson>>,
    enable_thinking: Option<bool>,
    tail: TemplateCallTail,
) -> SftResult<Vec<u32>> {
    let (messages, tools) = prepare_chat(JsJson::list(messages), tools.map(JsJson::list))?;
    let (sanitize, kwargs, effort, render_as) = match tail.options {
        Some(o) => (
            o.sanitize_control_tokens.unwrap_or(false),
            o.template_kwargs,
            o.reasoning_effort,
            o.render_as,
        ),
        None => (false, None, None, None),
    };
    let render_as = render_as_arg(render_as.as_deref(), "renderAs")?;
    let reasoning_effort = tail.reasoning_effort.or(effort);
    let kwargs = kwargs_map(kwargs)?;
    let opts = RenderOptions {
        tools: tools.as_ref(),
        add_generation_prompt: add_generation_prompt.unwrap_or(true),
        enable_thinking,
        template_kwargs: kwargs.as_ref(),
        reasoning_effort: reasoning_effort.as_deref(),
        render_as,
        ..Default::default()
    };
    if sanitize {
        tokenizer.apply_chat_template_sanitized(&messages, &opts)
    } else {
        tokenizer.apply_chat_template(&messages, &opts)
    }
}

// Ids cross as copies into V8's own memory (`OwnedU32`): a lent external buffer costs a
// finalizer per array, about 1 µs, as much as encoding a short text.
fn to_u32_array(_: &napi::Env, ids: Vec<u32>) -> SftResult<OwnedU32> {
    Ok(Owned(ids))
}

/// The work of `encodeBatch` and `encodeBatchFlat`: every text's ids, on all cores.
fn encode_all(
    tokenizer: Arc<ChatTokenizer>,
    texts: Texts,
    add_special_tokens: Option<bool>,
) -> impl FnOnce() -> SftResult<Vec<Vec<u32>>> + Send + 'static {
    let add = add_special_tokens.unwrap_or(true);
    move || {
        let encode = |k| tokenizer.encode(texts.get(k), add);
        if total_bytes(&texts) < INLINE_BYTES {
            return (0..texts.len()).map(encode).collect();
        }
        (0..texts.len()).into_par_iter().map(encode).collect()
    }
}

/// A batch of fewer bytes than this is encoded on the worker thread that took the call, one text
/// after another: it takes a few tens of microseconds on one core, about what handing it to the
/// pool's threads and waking them would cost.
const INLINE_BYTES: usize = 4 << 10;

fn total_bytes(texts: &Texts) -> usize {
    (0..texts.len()).map(|k| texts.get(k).len()).sum()
}

fn to_u32_arrays(_: &napi::Env, rows: Vec<Vec<u32>>) -> SftResult<Vec<OwnedU32>> {
    Ok(rows.into_iter().map(Owned).collect())
}

/// `encodeBatchFlat`'s result: every text's ids in one array.
#[napi(object, object_from_js = false)]
pub struct FlatIds {
    /// The ids of every text, one text after another.
    #[napi(ts_type = "Uint32Array")]
    pub ids: OwnedParts<u32>,
    /// `texts.length + 1` positions in `ids`: the ids of text `k` are
    /// `ids.subarray(offsets[k], offsets[k + 1])`.
    #[napi(ts_type = "Uint32Array")]
    pub offsets: OwnedU32,
}

/// Every text's ids, as the runs of consecutive texts were encoded, and where each text's ids
/// start in the runs put end to end (and where the last ends).
type Flat = (Vec<Vec<u32>>, Vec<u32>);

/// Texts are encoded in runs of consecutive texts, each run into one vector: about an eighth of a
/// core's share of the batch, between these bounds, so that every core has several runs to take
/// (none waits long on another's last one) and a small batch wakes no more cores than it needs.
const FLAT_RUN_BYTES: std::ops::RangeInclusive<usize> = (4 << 10)..=(32 << 10);

/// The work of `encodeBatchFlat`: the texts in runs on all cores, each run's ids appended to one
/// vector, and the offsets. The runs cross to JS as one array, copied once.
fn encode_flat(
    tokenizer: Arc<ChatTokenizer>,
    texts: Texts,
    add_special_tokens: Option<bool>,
) -> impl FnOnce() -> SftResult<Flat> + Send + 'static {
    let add = add_special_tokens.unwrap_or(true);
    move || {
        let total = total_bytes(&texts);
        let run_bytes = (total / (rayon::current_num_threads() * 8))
            .clamp(*FLAT_RUN_BYTES.start(), *FLAT_RUN_BYTES.end());
        let mut runs = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for k in 0..texts.len() {
            bytes += texts.get(k).len();
            if bytes >= run_bytes {
                runs.push((start, k + 1, bytes));
                (start, bytes) = (k + 1, 0);
            }
        }
        if start < texts.len() || runs.is_empty() {
            runs.push((start, texts.len(), bytes));
        }
        let encode_run = |(from, to, bytes): (usize, usize, usize)| {
            let mut ids = Vec::with_capacity(bytes / 3 + 8);
            let mut ends = Vec::with_capacity(to - from);
            for k in from..to {
                tokenizer.encode_append(texts.get(k), add, &mut ids)?;
                ends.push(ids.len());
            }
            Ok((ids, ends))
        };
        // One run (a batch under the smallest run) is encoded on this thread: no hand-off.
        let encoded = if runs.len() == 1 {
            runs.into_iter()
                .map(encode_run)
                .collect::<SftResult<Vec<_>>>()?
        } else {
            runs.into_par_iter()
                .map(encode_run)
                .collect::<SftResult<Vec<_>>>()?
        };
        let mut offsets = Vec::with_capacity(texts.len() + 1);
        offsets.push(0);
        let mut before = 0usize;
        for (ids, ends) in &encoded {
            for &end in ends {
                offsets.push(u32::try_from(before + end).map_err(|_| {
                    SftError::invalid_argument(format!(
                        "Tokenizer.encodeBatchFlat: the texts make more than {} ids, more than a \
                         Uint32Array of offsets can point to; call it on fewer texts at a time",
                        u32::MAX
                    ))
                })?);
            }
            before += ids.len();
        }
        Ok((encoded.into_iter().map(|(ids, _)| ids).collect(), offsets))
    }
}

// The ids cross as one copy into V8's own memory, like every other id array: a lent external
// buffer would save that copy, but transferring it to a worker would copy it and leave it
// attached rather than move it.
fn to_flat(_: &napi::Env, (runs, offsets): Flat) -> SftResult<FlatIds> {
    Ok(FlatIds {
        ids: OwnedParts(runs),
        offsets: Owned(offsets),
    })
}

#[napi]
impl JsTokenizer {
    /// Loads a `tokenizer.json` file, or a directory holding one; the chat template and special
    /// tokens come from `tokenizer_config.json` (or `chat_template.jinja`) beside it.
    // Writable and configurable, like the instance methods, so that lib/arguments.js can guard
    // them (napi's default makes static methods read-only).
    #[napi(
        ts_return_type = "Promise<Tokenizer>",
        writable = true,
        configurable = true
    )]
    pub fn from_pretrained(
        path: String,
        options: Option<TokenizerLoadOptions>,
    ) -> AsyncTask<Job<ChatTokenizer, JsTokenizer>> {
        AsyncTask::new(Job::new(
            move || load(path, options),
            |_, t| Ok(JsTokenizer::new(t)),
        ))
    }

    #[napi(writable = true, configurable = true)]
    pub fn from_pretrained_sync(
        path: String,
        options: Option<TokenizerLoadOptions>,
    ) -> Result<JsTokenizer> {
        run_sync(|| Ok(JsTokenizer::new(load(path, options)?)))
    }

    /// The chat-template renderer in use: `'compiled'` (a direct renderer of a known template),
    /// `'plan'` (the template's render plan) or `'interpreter'`.
    #[napi(getter, ts_return_type = "'compiled' | 'plan' | 'interpreter'")]
    pub fn renderer(&self) -> String {
        self.inner.renderer().name().to_string()
    }

    /// The active encoder: `'fast'` or `'hf'`.
    #[napi(getter, ts_return_type = "'fast' | 'hf'")]
    pub fn engine(&self) -> String {
        self.inner.engine().name().to_string()
    }

    #[napi(
        ts_args_type = "text: string, addSpecialTokens?: boolean | undefined | null",
        ts_return_type = "Promise<Uint32Array>"
    )]
    pub fn encode(
        &self,
        text: Text,
        add_special_tokens: Option<bool>,
    ) -> AsyncTask<Job<Vec<u32>, OwnedU32>> {
        let t = self.inner.clone();
        let Text(text) = text;
        AsyncTask::new(Job::new(
            move || t.encode(&text, add_special_tokens.unwrap_or(true)),
            to_u32_array,
        ))
    }

    /// The number `_encodeSyncByHandle` knows this tokenizer by (see `napi::handles`).
    #[napi(js_name = "_handle")]
    pub fn handle(&self) -> u32 {
        self.handle.number()
    }

    /// `encodeSync` of the tokenizer numbered `handle`: lib/index.js gives `encodeSync` as
    /// `Tokenizer._encodeSyncByHandle(this._handle(), text, addSpecialTokens)`.
    #[napi(
        js_name = "_encodeSyncByHandle",
        writable = true,
        configurable = true,
        ts_args_type = "handle: number, text: string, addSpecialTokens?: boolean | undefined | null",
        ts_return_type = "Uint32Array"
    )]
    pub fn encode_sync_by_handle(
        handle: u32,
        text: Text,
        add_special_tokens: Option<bool>,
    ) -> Result<OwnedU32> {
        run_sync(|| {
            let tokenizer = handles::tokenizer(handle).ok_or_else(|| {
                SftError::invalid_argument(format!("no live tokenizer has the handle {handle}"))
            })?;
            Ok(Owned(
                tokenizer.encode(&text.0, add_special_tokens.unwrap_or(true))?,
            ))
        })
    }

    /// Encodes every text on all cores.
    #[napi(
        ts_args_type = "texts: Array<string>, addSpecialTokens?: boolean | undefined | null",
        ts_return_type = "Promise<Uint32Array[]>"
    )]
    pub fn encode_batch(
        &self,
        texts: Texts,
        add_special_tokens: Option<bool>,
    ) -> AsyncTask<Job<Vec<Vec<u32>>, Vec<OwnedU32>>> {
        AsyncTask::new(Job::new(
            encode_all(self.inner.clone(), texts, add_special_tokens),
            to_u32_arrays,
        ))
    }

    /// `encodeBatch` with every text's ids in one `Uint32Array` and their positions in
    /// another: two arrays whatever the number of texts, where `encodeBatch` makes one per text.
    #[napi(
        ts_args_type = "texts: Array<string>, addSpecialTokens?: boolean | undefined | null",
        ts_return_type = "Promise<FlatIds>"
    )]
    pub fn encode_batch_flat(
        &self,
        texts: Texts,
        add_special_tokens: Option<bool>,
    ) -> AsyncTask<Job<Flat, FlatIds>> {
        AsyncTask::new(Job::new(
            encode_flat(self.inner.clone(), texts, add_special_tokens),
            to_flat,
        ))
    }

    /// `encodeBatch` done on the JS thread: lib/index.js takes it for a few short texts, whose
    /// encoding costs less than handing the call to a worker thread and back.
    #[napi(
        js_name = "_encodeBatchNow",
        ts_args_type = "texts: Array<string>, addSpecialTokens?: boolean | undefined | null",
        ts_return_type = "Uint32Array[]"
    )]
    pub fn encode_batch_now(
        &self,
        texts: Texts,
        add_special_tokens: Option<bool>,
    ) -> Result<Vec<OwnedU32>> {
        run_sync(|| {
            let rows = encode_all(self.inner.clone(), texts, add_special_tokens)()?;
            Ok(rows.into_iter().map(Owned).collect())
        })
    }

    /// `encodeBatchFlat` done on the JS thread, as `_encodeBatchNow`.
    #[napi(
        js_name = "_encodeBatchFlatNow",
        ts_args_type = "texts: Array<string>, addSpecialTokens?: boolean | undefined | null",
        ts_return_type = "FlatIds"
    )]
    pub fn encode_batch_flat_now(
        &self,
        texts: Texts,
        add_special_tokens: Option<bool>,
    ) -> Result<FlatIds> {
        run_sync(|| {
            let (runs, offsets) = encode_flat(self.inner.clone(), texts, add_special_tokens)()?;
            Ok(FlatIds {
                ids: OwnedParts(runs),
                offsets: Owned(offsets),
            })
        })
    }

    /// Text of token ids (`Int32Array`, `Uint32Array` or `number[]`); an id that is negative
    /// (such as a `-100` label) or not an integer is an `INVALID_ARGUMENT` naming its position.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn decode(
        &self,
        token_ids: IdsInput,
        skip_special_tokens: Option<bool>,
    ) -> Result<AsyncTask<Job<String, String>>> {
        let t = self.inner.clone();
        let ids = token_ids_arg(&token_ids, "Tokenizer.decode", "tokenIds").map_err(to_js)?;
        Ok(AsyncTask::new(job(move || {
            t.decode(&ids, skip_special_tokens.unwrap_or(false))
        })))
    }

    /// `decode` on the JS thread.
    #[napi]
    pub fn decode_sync(
        &self,
        token_ids: IdsInput,
        skip_special_tokens: Option<bool>,
    ) -> Result<String> {
        run_sync(|| {
            let ids = token_ids_arg(&token_ids, "Tokenizer.decodeSync", "tokenIds")?;
            self.inner
                .decode(&ids, skip_special_tokens.unwrap_or(false))
        })
    }

    /// `decode` of every row, on all cores.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn decode_batch(
        &self,
        token_ids_batch: Vec<IdsInput>,
        skip_special_tokens: Option<bool>,
    ) -> Result<AsyncTask<Job<Vec<String>, Vec<String>>>> {
        let t = self.inner.clone();
        let rows = token_ids_batch
            .iter()
            .enumerate()
            .map(|(k, ids)| {
                token_ids_arg(ids, "Tokenizer.decodeBatch", &format!("tokenIdsBatch[{k}]"))
            })
            .collect::<SftResult<Vec<_>>>()
            .map_err(to_js)?;
        let skip = skip_special_tokens.unwrap_or(false);
        Ok(AsyncTask::new(job(move || {
            rows.par_iter().map(|ids| t.decode(ids, skip)).collect()
        })))
    }

    /// Renders the chat template and encodes the text without adding special tokens.
    /// `addGenerationPrompt` defaults to true; `enableThinking` undefined or null leaves
    /// `enable_thinking` undefined in the template. Position five is this library's options
    /// (`sanitizeControlTokens` encodes control-token strings of the data as text, a
    /// `CONTROL_TOKEN` error when the tokenizer produces one even from plain text), or, in the
    /// call shape of MLX Node's `Qwen3Tokenizer`, `contentOrder` and then
    /// `existingImagePlaceholder` (strings for image content, without effect on text) and
    /// `reasoningEffort` (given to the template as `reasoning_effort`).
    #[napi(ts_return_type = "Promise<Uint32Array>")]
    #[allow(clippy::too_many_arguments)]
    pub fn apply_chat_template(
        &self,
        #[napi(ts_arg_type = "Array<any>")] messages: Vec<JsJson>,
        add_generation_prompt: Option<bool>,
        #[napi(ts_arg_type = "Array<any> | undefined | null")] tools: Option<Vec<JsJson>>,
        enable_thinking: Option<bool>,
        options: Option<Either<ApplyChatTemplateOptions, String>>,
        existing_image_placeholder: Option<String>,
        reasoning_effort: Option<String>,
    ) -> AsyncTask<Job<Vec<u32>, OwnedU32>> {
        let _ = existing_image_placeholder;
        let t = self.inner.clone();
        let tail = TemplateCallTail::new(options, reasoning_effort);
        AsyncTask::new(Job::new(
            move || {
                apply_template(
                    &t,
                    messages,
                    add_generation_prompt,
                    tools,
                    enable_thinking,
                    tail,
                )
            },
            to_u32_array,
        ))
    }

    /// `applyChatTemplate` on the calling thread, with the same arguments.
    #[napi(ts_return_type = "Uint32Array")]
    #[allow(clippy::too_many_arguments)]
    pub fn apply_chat_template_sync(
        &self,
        #[napi(ts_arg_type = "Array<any>")] messages: Vec<JsJson>,
        add_generation_prompt: Option<bool>,
        #[napi(ts_arg_type = "Array<any> | undefined | null")] tools: Option<Vec<JsJson>>,
        enable_thinking: Option<bool>,
        options: Option<Either<ApplyChatTemplateOptions, String>>,
        existing_image_placeholder: Option<String>,
        reasoning_effort: Option<String>,
    ) -> Result<OwnedU32> {
        let _ = existing_image_placeholder;
        run_sync(|| {
            apply_template(
                &self.inner,
                messages,
                add_generation_prompt,
                tools,
                enable_thinking,
                TemplateCallTail::new(options, reasoning_effort),
            )
            .map(Owned)
        })
    }

    /// The rendered text, as `apply_chat_template(..., tokenize=False)`.
    #[napi]
    pub fn render_chat_template(
        &self,
        #[napi(ts_arg_type = "Array<any>")] messages: Vec<JsJson>,
        options: Option<RenderChatTemplateOptions>,
    ) -> Result<String> {
        run_sync(|| {
            let o = options.unwrap_or(RenderChatTemplateOptions {
                add_generation_prompt: None,
                tools: None,
                enable_thinking: None,
                continue_final_message: None,
                template_kwargs: None,
                reasoning_effort: None,
                render_as: None,
            });
            let render_as = render_as_arg(o.render_as.as_deref(), "renderAs")?;
            let (messages, tools) =
                prepare_chat(JsJson::list(messages), o.tools.map(JsJson::list))?;
            let template_kwargs = kwargs_map(o.template_kwargs)?;
            self.inner.render(
                &messages,
                &RenderOptions {
                    tools: tools.as_ref(),
                    add_generation_prompt: o.add_generation_prompt.unwrap_or(false),
                    enable_thinking: o.enable_thinking,
                    continue_final_message: o.continue_final_message.unwrap_or(false),
                    template_kwargs: template_kwargs.as_ref(),
                    reasoning_effort: o.reasoning_effort.as_deref(),
                    render_as,
                    plain_errors: false,
                },
            )
        })
    }

    /// Size of the vocabulary including added tokens.
    #[napi]
    pub fn vocab_size(&self) -> u32 {
        self.inner.vocab_size()
    }

    /// The pad token of `tokenizer_config.json`; without one, the end-of-sequence token, then 0.
    #[napi]
    pub fn get_pad_token_id(&self) -> u32 {
        self.inner.pad_token_id()
    }

    /// The end-of-sequence token of `tokenizer_config.json` (0 when it names none).
    #[napi]
    pub fn get_eos_token_id(&self) -> u32 {
        self.inner.eos_token_id().unwrap_or(0)
    }

    #[napi]
    pub fn get_bos_token_id(&self) -> Option<u32> {
        self.inner.bos_token_id()
    }

    /// The token of `id`, as spelled in the vocabulary.
    #[napi]
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// A raw vocabulary lookup: for byte-level vocabularies `tokenToId('\n')` is null (the
    /// vocabulary spells it `Ċ`).
    #[napi]
    pub fn token_to_id(&self, token: String) -> Option<u32> {
        self.inner.token_to_id(&token)
    }

    #[napi]
    pub fn get_im_start_token(&self) -> String {
        IM_START.to_string()
    }

    #[napi]
    pub fn get_im_end_token(&self) -> String {
        IM_END.to_string()
    }

    #[napi]
    pub fn get_endoftext_token(&self) -> String {
        ENDOFTEXT.to_string()
    }

    /// How this tokenizer renders chat templates unless told otherwise: `'transformers'` or
    /// `'mlx-node'` (`fromPretrained`'s `renderAs`).
    #[napi(getter, ts_return_type = "'transformers' | 'mlx-node'")]
    pub fn render_as(&self) -> String {
        self.inner.render_as().name().to_string()
    }

    /// Whether a chat template was found beside the tokenizer.
    #[napi(getter)]
    pub fn has_chat_template(&self) -> bool {
        self.inner.has_chat_template()
    }
}

/// `token_ids` with the public function's name in front of the message.
fn token_ids_arg(input: &IdsInput, function: &str, name: &str) -> SftResult<Vec<u32>> {
    token_ids(input, name).map_err(|e| SftError {
        message: format!("{function}: {}", e.message),
        ..e
    })
}
