//! Reads a HF `tokenizer.json` into the parts the fast engine runs, refusing anything
//! whose behaviour it does not reproduce exactly.

use std::fmt;

use serde_json::{Map, Value};

use super::decode::Step;
use super::normalize::Edit;
use super::pretokenize::GPT2_PATTERN;
use super::sp_pretokenize::{Behavior, CharPreTokenizer, Prepend};

/// Why a `tokenizer.json` cannot be served by the fast engine; `component` is the
/// top-level key at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    pub component: &'static str,
    pub detail: String,
}

impl Unsupported {
    pub(super) fn new(component: &'static str, detail: impl Into<String>) -> Self {
        Self {
            component,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.component, self.detail)
    }
}

impl std::error::Error for Unsupported {}

pub(super) struct AddedSpec {
    pub(super) content: String,
    pub(super) special: bool,
    pub(super) normalized: bool,
}

pub(super) enum NormalizerSpec {
    None,
    Nfc,
    Edits(Vec<Edit>),
}

pub(super) enum PreTokenizerSpec {
    /// The regex splits of a byte-level tokenizer (`ByteLevel`, possibly after `Split`s).
    ByteLevel(Vec<String>),
    /// A SentencePiece-style tokenizer's (none, `Split` on a string, `Metaspace`).
    Chars(CharPreTokenizer),
}

pub(super) enum DecoderSpec {
    ByteLevel,
    Chain(Vec<Step>),
}

/// The BPE model's options that matter to char-level BPE.
pub(super) struct CharModel {
    pub(super) byte_fallback: bool,
    pub(super) unk_token: Option<String>,
    pub(super) fuse_unk: bool,
}

pub(super) struct Spec {
    pub(super) normalizer: NormalizerSpec,
    pub(super) pre_tokenizer: PreTokenizerSpec,
    pub(super) vocab: Vec<(String, u32)>,
    pub(super) merges: Vec<(String, String)>,
    pub(super) ignore_merges: bool,
    pub(super) char_model: CharModel,
    pub(super) decoder: DecoderSpec,
    pub(super) added: Vec<AddedSpec>,
    /// Tokens (by template name) the post-processor puts around the sequence.
    pub(super) template: Option<(Vec<String>, Vec<String>)>,
    pub(super) template_ids: Vec<(String, Vec<u32>)>,
}

fn type_of(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("<untyped>")
}

fn not_supported(component: &'static str, what: &str) -> Unsupported {
    Unsupported::new(
        component,
        format!("{what} is not supported by the fast engine"),
    )
}

fn flag(obj: &Value, key: &str, default: bool) -> bool {
    obj.get(key).and_then(Value::as_bool).unwrap_or(default)
}

fn is_null_or_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// A literal (`{"String": ...}`) pattern; `component` names the refusal of a regex one.
fn string_pattern(v: &Value, component: &'static str, what: &str) -> Result<String, Unsupported> {
    match v
        .get("pattern")
        .and_then(|p| p.get("String"))
        .and_then(Value::as_str)
    {
        Some("") => Err(not_supported(
            component,
            &format!("{what} with an empty pattern"),
        )),
        Some(s) => Ok(s.to_owned()),
        None => Err(not_supported(
            component,
            &format!("{what} with a Regex pattern"),
        )),
    }
}

fn parse_normalizer_into(
    v: &Value,
    nfc: &mut bool,
    edits: &mut Vec<Edit>,
) -> Result<(), Unsupported> {
    match type_of(v) {
        _ if v.is_null() => {}
        // NFC is idempotent, so repeating it changes nothing.
        "NFC" => *nfc = true,
        "Replace" => edits.push(Edit::Replace {
            pattern: string_pattern(v, "normalizer", "Replace")?,
            content: v
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }),
        "Prepend" => edits.push(Edit::Prepend(
            v.get("prepend")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        )),
        "Sequence" => {
            for n in v
                .get("normalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                parse_normalizer_into(n, nfc, edits)?;
            }
        }
        other => return Err(not_supported("normalizer", other)),
    }
    Ok(())
}

fn parse_normalizer(v: &Value) -> Result<NormalizerSpec, Unsupported> {
    let mut nfc = false;
    let mut edits = Vec::new();
    parse_normalizer_into(v, &mut nfc, &mut edits)?;
    match (nfc, edits.is_empty()) {
        (false, true) => Ok(NormalizerSpec::None),
        (true, true) => Ok(NormalizerSpec::Nfc),
        (false, false) => Ok(NormalizerSpec::Edits(edits)),
        (true, false) => Err(not_supported(
            "normalizer",
            "NFC together with Replace or Prepend",
        )),
    }
}

fn parse_byte_level_pre(v: &Value, patterns: &mut Vec<String>) -> Result<(), Unsupported> {
    if flag(v, "add_prefix_space", true) {
        return Err(not_supported(
            "pre_tokenizer",
            "ByteLevel with add_prefix_space=true",
        ));
    }
    if flag(v, "use_regex", true) {
        patterns.push(GPT2_PATTERN.to_owned());
    }
    Ok(())
}

fn parse_split(v: &Value) -> Result<String, Unsupported> {
    let pattern = v
        .get("pattern")
        .and_then(|p| p.get("Regex"))
        .and_then(Value::as_str)
        .ok_or_else(|| not_supported("pre_tokenizer", "Split with a String pattern"))?;
    let behavior = v.get("behavior").and_then(Value::as_str).unwrap_or("");
    if behavior != "Isolated" {
        return Err(not_supported(
            "pre_tokenizer",
            &format!("Split with behavior {behavior}"),
        ));
    }
    if flag(v, "invert", false) {
        return Err(not_supported("pre_tokenizer", "Split with invert=true"));
    }
    Ok(pattern.to_owned())
}

fn parse_metaspace(v: &Value) -> Result<CharPreTokenizer, Unsupported> {
    let replacement = v
        .get("replacement")
        .and_then(Value::as_str)
        .filter(|r| r.chars().count() == 1)
        .ok_or_else(|| {
            not_supported("pre_tokenizer", "Metaspace without a one-char replacement")
        })?;
    Ok(CharPreTokenizer::Metaspace {
        replacement: replacement.to_owned(),
        prepend: prepend_scheme(v, "pre_tokenizer")?,
        split: flag(v, "split", true),
    })
}

/// Metaspace's `prepend_scheme` (default `always`), `never` when the legacy
/// `add_prefix_space` is false.
fn prepend_scheme(v: &Value, component: &'static str) -> Result<Prepend, Unsupported> {
    if v.get("add_prefix_space").and_then(Value::as_bool) == Some(false) {
        return Ok(Prepend::Never);
    }
    match v.get("prepend_scheme").and_then(Value::as_str) {
        None | Some("always") => Ok(Prepend::Always),
        Some("first") => Ok(Prepend::First),
        Some("never") => Ok(Prepend::Never),
        Some(other) => Err(not_supported(
            component,
            &format!("Metaspace with prepend_scheme {other:?}"),
        )),
    }
}

fn parse_pre_tokenizer(v: &Value) -> Result<PreTokenizerSpec, Unsupported> {
    let mut patterns = Vec::new();
    match type_of(v) {
        _ if v.is_null() => return Ok(PreTokenizerSpec::Chars(CharPreTokenizer::None)),
        "ByteLevel" => parse_byte_level_pre(v, &mut patterns)?,
        "Metaspace" => return Ok(PreTokenizerSpec::Chars(parse_metaspace(v)?)),
        "Split" => {
            let pattern = string_pattern(v, "pre_tokenizer", "Split without ByteLevel")?;
            if flag(v, "invert", false) {
                return Err(not_supported("pre_tokenizer", "Split with invert=true"));
            }
            let name = v.get("behavior").and_then(Value::as_str).unwrap_or("");
            let behavior = Behavior::parse(name).ok_or_else(|| {
                not_supported("pre_tokenizer", &format!("Split with behavior {name}"))
            })?;
            return Ok(PreTokenizerSpec::Chars(CharPreTokenizer::Split {
                pattern,
                behavior,
            }));
        }
        "Sequence" => {
            let items = v
                .get("pretokenizers")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let Some((last, splits)) = items.split_last() else {
                return Err(not_supported("pre_tokenizer", "an empty Sequence"));
            };
            for s in splits {
                match type_of(s) {
                    "Split" => patterns.push(parse_split(s)?),
                    other => return Err(not_supported("pre_tokenizer", other)),
                }
            }
            match type_of(last) {
                "ByteLevel" => parse_byte_level_pre(last, &mut patterns)?,
                other => {
                    return Err(not_supported(
                        "pre_tokenizer",
                        &format!("a Sequence not ending in ByteLevel (ends in {other})"),
                    ))
                }
            }
        }
        other => return Err(not_supported("pre_tokenizer", other)),
    }
    Ok(PreTokenizerSpec::ByteLevel(patterns))
}

type Model = (Vec<(String, u32)>, Vec<(String, String)>, bool, CharModel);

fn parse_model(v: &Value) -> Result<Model, Unsupported> {
    let kind = type_of(v);
    if kind != "BPE" {
        return Err(not_supported("model", kind));
    }
    if v.get("dropout")
        .and_then(Value::as_f64)
        .is_some_and(|d| d > 0.0)
    {
        return Err(not_supported("model", "BPE dropout"));
    }
    if !is_null_or_empty(v.get("continuing_subword_prefix")) {
        return Err(not_supported("model", "continuing_subword_prefix"));
    }
    if !is_null_or_empty(v.get("end_of_word_suffix")) {
        return Err(not_supported("model", "end_of_word_suffix"));
    }
    let vocab = v
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| Unsupported::new("model", "vocab is missing"))?
        .iter()
        .map(|(token, id)| {
            // `u32::MAX` marks an empty slot of the pair table (`tables`).
            id.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .filter(|&id| id != u32::MAX)
                .map(|id| (token.clone(), id))
                .ok_or_else(|| Unsupported::new("model", format!("token {token:?} has a bad id")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let raw_merges = v
        .get("merges")
        .and_then(Value::as_array)
        .ok_or_else(|| Unsupported::new("model", "merges are missing"))?;
    let mut merges = Vec::with_capacity(raw_merges.len());
    for m in raw_merges {
        let pair = match m {
            // HF skips the header line of a merges.txt carried over into the JSON.
            Value::String(s) if s.starts_with("#version") => continue,
            Value::String(s) => {
                let mut parts = s.split(' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(a), Some(b), None) => (a.to_owned(), b.to_owned()),
                    _ => {
                        return Err(Unsupported::new(
                            "model",
                            format!("merge {s:?} is malformed"),
                        ))
                    }
                }
            }
            Value::Array(parts) => match parts.as_slice() {
                [Value::String(a), Value::String(b)] => (a.clone(), b.clone()),
                _ => return Err(Unsupported::new("model", format!("merge {m} is malformed"))),
            },
            _ => return Err(Unsupported::new("model", format!("merge {m} is malformed"))),
        };
        merges.push(pair);
    }
    let char_model = CharModel {
        byte_fallback: flag(v, "byte_fallback", false),
        unk_token: v
            .get("unk_token")
            .and_then(Value::as_str)
            .map(str::to_owned),
        fuse_unk: flag(v, "fuse_unk", false),
    };
    Ok((vocab, merges, flag(v, "ignore_merges", false), char_model))
}

fn parse_added(v: &Value) -> Result<Vec<AddedSpec>, Unsupported> {
    let mut out = Vec::new();
    for t in v.as_array().into_iter().flatten() {
        let content = t
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| Unsupported::new("added_tokens", "an entry has no content"))?;
        for option in ["single_word", "lstrip", "rstrip"] {
            if flag(t, option, false) {
                return Err(not_supported(
                    "added_tokens",
                    &format!("{option}=true (on {content:?})"),
                ));
            }
        }
        out.push(AddedSpec {
            content: content.to_owned(),
            special: flag(t, "special", false),
            normalized: flag(t, "normalized", !flag(t, "special", false)),
        });
    }
    Ok(out)
}

type Template = (Option<(Vec<String>, Vec<String>)>, Vec<(String, Vec<u32>)>);

fn parse_template(v: &Value) -> Result<Template, Unsupported> {
    let mut prefix = Vec::new();
    let mut suffix = Vec::new();
    let mut seen_sequence = false;
    for piece in v
        .get("single")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(id) = piece
            .get("SpecialToken")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
        {
            if seen_sequence {
                suffix.push(id.to_owned());
            } else {
                prefix.push(id.to_owned());
            }
        } else if piece
            .get("Sequence")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
            == Some("A")
            && !seen_sequence
        {
            seen_sequence = true;
        } else {
            return Err(not_supported(
                "post_processor",
                &format!("TemplateProcessing piece {piece}"),
            ));
        }
    }
    if !seen_sequence {
        return Err(not_supported(
            "post_processor",
            "TemplateProcessing without the sequence $A",
        ));
    }
    let mut ids = Vec::new();
    if let Some(map) = v.get("special_tokens").and_then(Value::as_object) {
        for (name, entry) in map {
            let list = entry
                .get("ids")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|i| i.as_u64().and_then(|i| u32::try_from(i).ok()))
                .collect::<Option<Vec<u32>>>()
                .ok_or_else(|| {
                    Unsupported::new("post_processor", format!("bad ids for {name:?}"))
                })?;
            ids.push((name.clone(), list));
        }
    }
    for name in prefix.iter().chain(&suffix) {
        if !ids.iter().any(|(n, _)| n == name) {
            return Err(Unsupported::new(
                "post_processor",
                format!("template token {name:?} has no ids"),
            ));
        }
    }
    Ok((Some((prefix, suffix)), ids))
}

fn parse_post_processor(v: &Value) -> Result<Template, Unsupported> {
    match type_of(v) {
        _ if v.is_null() => Ok((None, Vec::new())),
        // Its only effect on an encoding is offset trimming.
        "ByteLevel" if !flag(v, "trim_offsets", true) => Ok((None, Vec::new())),
        "ByteLevel" => Err(not_supported(
            "post_processor",
            "ByteLevel with trim_offsets=true",
        )),
        "TemplateProcessing" => parse_template(v),
        "Sequence" => {
            let mut found: Template = (None, Vec::new());
            for p in v
                .get("processors")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let parsed = parse_post_processor(p)?;
                if parsed.0.is_some() {
                    if found.0.is_some() {
                        return Err(not_supported("post_processor", "two TemplateProcessing"));
                    }
                    found = parsed;
                }
            }
            Ok(found)
        }
        other => Err(not_supported("post_processor", other)),
    }
}

fn parse_decoder_step(v: &Value) -> Result<Step, Unsupported> {
    Ok(match type_of(v) {
        "Replace" => Step::Replace {
            pattern: string_pattern(v, "decoder", "Replace")?,
            content: v
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        },
        "ByteFallback" => Step::ByteFallback,
        "Fuse" => Step::Fuse,
        "Strip" => {
            let mut content = v
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars();
            let (Some(c), None) = (content.next(), content.next()) else {
                return Err(not_supported("decoder", "Strip without a one-char content"));
            };
            // HF indexes from the end without a bound check when `stop` exceeds a token.
            if v.get("stop").and_then(Value::as_u64).unwrap_or(0) != 0 {
                return Err(not_supported("decoder", "Strip with stop > 0"));
            }
            Step::Strip {
                content: c,
                start: v.get("start").and_then(Value::as_u64).unwrap_or(0) as usize,
            }
        }
        "Metaspace" => {
            let mut replacement = v
                .get("replacement")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars();
            let (Some(r), None) = (replacement.next(), replacement.next()) else {
                return Err(not_supported(
                    "decoder",
                    "Metaspace without a one-char replacement",
                ));
            };
            Step::Metaspace {
                replacement: r,
                drop_first: prepend_scheme(v, "decoder")? != Prepend::Never,
            }
        }
        other => return Err(not_supported("decoder", other)),
    })
}

fn parse_decoder(v: &Value) -> Result<DecoderSpec, Unsupported> {
    match type_of(v) {
        "ByteLevel" => Ok(DecoderSpec::ByteLevel),
        _ if v.is_null() => Err(not_supported("decoder", "no decoder")),
        "Sequence" => v
            .get("decoders")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(parse_decoder_step)
            .collect::<Result<Vec<_>, _>>()
            .map(DecoderSpec::Chain),
        _ => Ok(DecoderSpec::Chain(vec![parse_decoder_step(v)?])),
    }
}

pub(super) fn parse(json: &str) -> Result<Spec, Unsupported> {
    let root: Map<String, Value> = serde_json::from_str(json)
        .map_err(|e| Unsupported::new("tokenizer.json", format!("not a JSON object: {e}")))?;
    let null = Value::Null;
    let get = |key: &str| root.get(key).unwrap_or(&null);
    for key in ["truncation", "padding"] {
        if !get(key).is_null() {
            return Err(match key {
                "truncation" => not_supported("truncation", "truncation"),
                _ => not_supported("padding", "padding"),
            });
        }
    }
    let normalizer = parse_normalizer(get("normalizer"))?;
    let pre_tokenizer = parse_pre_tokenizer(get("pre_tokenizer"))?;
    let (vocab, merges, ignore_merges, char_model) = parse_model(get("model"))?;
    let added = parse_added(get("added_tokens"))?;
    let (template, template_ids) = parse_post_processor(get("post_processor"))?;
    let decoder = parse_decoder(get("decoder"))?;
    // The two families do not mix: byte-level symbols need the byte-level decoder, and the
    // char-level engine tracks offsets through Replace and Prepend only.
    match (&pre_tokenizer, &normalizer, &decoder) {
        (PreTokenizerSpec::ByteLevel(_), NormalizerSpec::Edits(_), _) => {
            return Err(not_supported(
                "normalizer",
                "Replace or Prepend before a ByteLevel pre-tokenizer",
            ))
        }
        (PreTokenizerSpec::ByteLevel(_), _, DecoderSpec::Chain(_)) => {
            return Err(not_supported(
                "decoder",
                "a non-ByteLevel decoder after a ByteLevel pre-tokenizer",
            ))
        }
        (PreTokenizerSpec::Chars(_), NormalizerSpec::Nfc, _) => {
            return Err(not_supported(
                "normalizer",
                "NFC without a ByteLevel pre-tokenizer",
            ))
        }
        (PreTokenizerSpec::Chars(_), _, DecoderSpec::ByteLevel) => {
            return Err(not_supported(
                "decoder",
                "ByteLevel without a ByteLevel pre-tokenizer",
            ))
        }
        _ => {}
    }
    Ok(Spec {
        normalizer,
        pre_tokenizer,
        vocab,
        merges,
        ignore_merges,
        char_model,
        decoder,
        added,
        template,
        template_ids,
    })
}
