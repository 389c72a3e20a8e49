//! What a tokenizer directory says besides the vocabulary: the chat templates and the named
//! special tokens, from `tokenizer_config.json`, `chat_template.jinja` and
//! `additional_chat_templates/*.jinja`.
//!
//! Template files win over the config's `chat_template`, as in transformers 5: when the folder
//! has any, they are the model's templates (`chat_template.jinja` as `default`, each file of
//! `additional_chat_templates/` under its name) and the config's entry is not read.

use std::path::Path;

use minijinja::value::Value;
use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};

/// The parts of `tokenizer_config.json` the library uses.
#[derive(Debug, Default, Clone)]
pub struct TokenizerConfig {
    /// The template a render without tools uses (`default` of named templates).
    pub chat_template: Option<String>,
    /// The template named `tool_use`, which a render with tools uses where the model has one.
    pub tool_use_template: Option<String>,
    /// The names of the model's templates when it has several, for the error of a model
    /// without a `default` one.
    pub template_names: Vec<String>,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    pub pad_token: Option<String>,
    pub unk_token: Option<String>,
    pub additional_special_tokens: Vec<String>,
    pub mask_token: Option<String>,
    pub sep_token: Option<String>,
    pub cls_token: Option<String>,
    /// The model's own named tokens (`image_token`, `audio_bos_token`, ...): the config's other
    /// `*_token` strings and its `extra_special_tokens` / `model_specific_special_tokens` maps,
    /// which transformers 5 adds to `special_tokens_map`.
    pub model_tokens: Vec<(String, String)>,
    /// The Python class transformers builds (`GemmaTokenizer`, ...).
    pub tokenizer_class: Option<String>,
    /// The added tokens that `sanitizeControlTokens` treats as control tokens besides the
    /// special ones; without this list they are inferred from the chat template.
    pub chat_control_tokens: Option<Vec<String>>,
}

/// The special tokens transformers names itself (`SPECIAL_TOKENS_ATTRIBUTES`).
const NAMED_TOKENS: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// A special token may be spelled as a string or as an object with `content` (including the
/// `{"__type": "AddedToken", ...}` form of older configs).
fn token_string(value: Option<&Json>) -> Option<String> {
    match value? {
        Json::String(s) => Some(s.clone()),
        Json::Object(map) => map.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

/// A model's templates: one, or several by name.
#[derive(Debug, Default)]
struct Templates {
    default: Option<String>,
    tool_use: Option<String>,
    names: Vec<String>,
}

impl Templates {
    fn from_named(named: Vec<(String, String)>) -> Self {
        let mut templates = Templates::default();
        for (name, text) in named {
            match name.as_str() {
                "default" => templates.default = Some(text),
                "tool_use" => templates.tool_use = Some(text),
                _ => {}
            }
            if !templates.names.contains(&name) {
                templates.names.push(name);
            }
        }
        templates.names.sort();
        templates
    }
}

/// The config's `chat_template`: a string, or a list of `{name, template}`.
fn templates_from(value: Option<&Json>) -> Templates {
    match value {
        Some(Json::String(s)) => Templates {
            default: Some(s.clone()),
            ..Default::default()
        },
        Some(Json::Array(named)) => Templates::from_named(
            named
                .iter()
                .filter_map(|entry| {
                    let name = entry.get("name")?.as_str()?;
                    let text = entry.get("template")?.as_str()?;
                    Some((name.to_string(), text.to_string()))
                })
                .collect(),
        ),
        _ => Templates::default(),
    }
}

fn read_optional(path: &Path) -> SftResult<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SftError::new(
            ErrorCode::TokenizerLoad,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// The template files of a model folder, by name (`default` for `chat_template.jinja`).
fn template_files(dir: &Path) -> SftResult<Vec<(String, String)>> {
    let mut named = Vec::new();
    if let Some(text) = read_optional(&dir.join("chat_template.jinja"))? {
        named.push(("default".to_string(), text));
    }
    let extra = dir.join("additional_chat_templates");
    let entries = match std::fs::read_dir(&extra) {
        Ok(entries) => entries,
        Err(_) => return Ok(named),
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jinja") && p.is_file())
        .collect();
    files.sort();
    for path in files {
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if let Some(text) = read_optional(&path)? {
            named.push((name.to_string(), text));
        }
    }
    Ok(named)
}

/// The named special tokens a transformers tokenizer class has when its config names none.
const CLASS_DEFAULTS: &[(&str, &[&str])] = &[(
    "GemmaTokenizer",
    &["<unk>", "<bos>", "<eos>", "<pad>", "<mask>"],
)];

impl TokenizerConfig {
    /// The variables transformers 5 passes to every render from `special_tokens_map`: the named
    /// tokens that are set, then the model's own (`additional_special_tokens` is not among them
    /// since transformers 5).
    pub fn special_tokens_map(&self) -> Vec<(String, Value)> {
        let mut map = Vec::new();
        for (name, token) in [
            ("bos_token", &self.bos_token),
            ("eos_token", &self.eos_token),
            ("unk_token", &self.unk_token),
            ("sep_token", &self.sep_token),
            ("pad_token", &self.pad_token),
            ("cls_token", &self.cls_token),
            ("mask_token", &self.mask_token),
        ] {
            if let Some(token) = token {
                map.push((name.to_string(), Value::from(token.as_str())));
            }
        }
        for (name, token) in &self.model_tokens {
            map.push((name.clone(), Value::from(token.as_str())));
        }
        map
    }

    /// Every token the config names (`bos_token`, ..., `additional_special_tokens`), and the
    /// defaults of its tokenizer class: transformers makes these special added tokens whatever
    /// `tokenizer.json` says.
    pub fn named_special_tokens(&self) -> Vec<&str> {
        let mut named: Vec<&str> = [
            &self.bos_token,
            &self.eos_token,
            &self.unk_token,
            &self.pad_token,
            &self.mask_token,
        ]
        .into_iter()
        .filter_map(|t| t.as_deref())
        .chain(self.additional_special_tokens.iter().map(String::as_str))
        .collect();
        if let Some((_, defaults)) = CLASS_DEFAULTS
            .iter()
            .find(|(class, _)| self.tokenizer_class.as_deref() == Some(class))
        {
            named.extend_from_slice(defaults);
        }
        named
    }

    pub fn from_json_text(text: &str, origin: &Path) -> SftResult<Self> {
        let json: Json = serde_json::from_str(text).map_err(|e| {
            SftError::new(
                ErrorCode::TokenizerLoad,
                format!("{} is not valid JSON: {e}", origin.display()),
            )
        })?;
        let obj = json.as_object().ok_or_else(|| {
            SftError::new(
                ErrorCode::TokenizerLoad,
                format!("{} must hold a JSON object", origin.display()),
            )
        })?;
        let additional = match obj.get("additional_special_tokens") {
            Some(Json::Array(items)) => {
                items.iter().filter_map(|t| token_string(Some(t))).collect()
            }
            _ => Vec::new(),
        };
        let templates = templates_from(obj.get("chat_template"));
        let mut model_tokens: Vec<(String, String)> = Vec::new();
        let mut add_model_token = |name: &str, token: Option<String>| {
            let Some(token) = token else { return };
            match model_tokens.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = token,
                None => model_tokens.push((name.to_string(), token)),
            }
        };
        for (key, value) in obj {
            if key.ends_with("_token") && !NAMED_TOKENS.contains(&key.as_str()) {
                add_model_token(key, value.as_str().map(str::to_string));
            }
        }
        for key in ["extra_special_tokens", "model_specific_special_tokens"] {
            if let Some(Json::Object(named)) = obj.get(key) {
                for (name, value) in named {
                    add_model_token(name, token_string(Some(value)));
                }
            }
        }
        Ok(TokenizerConfig {
            chat_template: templates.default,
            tool_use_template: templates.tool_use,
            template_names: templates.names,
            bos_token: token_string(obj.get("bos_token")),
            eos_token: token_string(obj.get("eos_token")),
            pad_token: token_string(obj.get("pad_token")),
            unk_token: token_string(obj.get("unk_token")),
            additional_special_tokens: additional,
            mask_token: token_string(obj.get("mask_token")),
            sep_token: token_string(obj.get("sep_token")),
            cls_token: token_string(obj.get("cls_token")),
            model_tokens,
            tokenizer_class: obj
                .get("tokenizer_class")
                .and_then(Json::as_str)
                .map(str::to_string),
            chat_control_tokens: match obj.get("chat_control_tokens") {
                Some(Json::Array(items)) => Some(
                    items
                        .iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect(),
                ),
                _ => None,
            },
        })
    }

    /// Reads `tokenizer_config.json` and the template files from `dir`; all are optional.
    pub fn load(dir: &Path) -> SftResult<Self> {
        let config_path = dir.join("tokenizer_config.json");
        let mut config = match read_optional(&config_path)? {
            Some(text) => Self::from_json_text(&text, &config_path)?,
            None => TokenizerConfig::default(),
        };
        let files = template_files(dir)?;
        if !files.is_empty() {
            config.set_templates(Templates::from_named(files));
        }
        Ok(config)
    }

    fn set_templates(&mut self, templates: Templates) {
        // One file alone is the model's single template, as a plain `chat_template` string.
        let single = templates.names.len() == 1 && templates.default.is_some();
        self.chat_template = templates.default;
        self.tool_use_template = templates.tool_use;
        self.template_names = if single { Vec::new() } else { templates.names };
    }

    /// The template transformers' `get_chat_template` picks: `tool_use` when tools are passed
    /// and the model has one, else the default. `Err` names the templates of a model that has
    /// several and no default.
    pub fn template_for(&self, with_tools: bool) -> Result<Option<&str>, String> {
        if with_tools {
            if let Some(text) = &self.tool_use_template {
                return Ok(Some(text));
            }
        }
        match &self.chat_template {
            Some(text) => Ok(Some(text)),
            None if self.template_names.is_empty() => Ok(None),
            None => Err(format!(
                "This model has multiple chat templates with no default specified! Please either pass a chat template or the name of the template you wish to use to the `chat_template` argument. Available template names are {}.",
                python_list(&self.template_names)
            )),
        }
    }
}

/// `str(sorted(names))` of a list of strings.
fn python_list(names: &[String]) -> String {
    let mut out = String::from("[");
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        crate::render::python_value::write_str_repr(&mut out, name);
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_token_spellings_and_named_templates() {
        let text = r#"{"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
            "pad_token": null, "chat_template": [{"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"}], "additional_special_tokens": ["<a>", {"content": "<b>"}]}"#;
        let c = TokenizerConfig::from_json_text(text, Path::new("x.json")).unwrap();
        assert_eq!(c.bos_token.as_deref(), Some("<s>"));
        assert_eq!(c.eos_token.as_deref(), Some("</s>"));
        assert_eq!(c.pad_token, None);
        assert_eq!(c.chat_template.as_deref(), Some("D"));
        assert_eq!(c.template_for(false), Ok(Some("D")));
        assert_eq!(c.template_for(true), Ok(Some("T")));
        assert_eq!(c.additional_special_tokens, vec!["<a>", "<b>"]);
        let text = r#"{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "rag", "template": "R"}]}"#;
        let c = TokenizerConfig::from_json_text(text, Path::new("x.json")).unwrap();
        assert_eq!(c.template_for(true), Ok(Some("T")));
        assert_eq!(
            c.template_for(false).unwrap_err(),
            "This model has multiple chat templates with no default specified! Please either pass a chat template or the name of the template you wish to use to the `chat_template` argument. Available template names are ['rag', 'tool_use']."
        );
    }

    #[test]
    fn template_files_win_over_the_config() {
        let dir = std::env::temp_dir().join(format!("sft-config-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("additional_chat_templates")).unwrap();
        std::fs::write(
            dir.join("tokenizer_config.json"),
            r#"{"chat_template": "CONFIG", "eos_token": "</s>"}"#,
        )
        .unwrap();
        std::fs::write(dir.join("chat_template.jinja"), "FILE").unwrap();
        let c = TokenizerConfig::load(&dir).unwrap();
        assert_eq!(c.chat_template.as_deref(), Some("FILE"));
        assert!(c.template_names.is_empty());
        std::fs::write(
            dir.join("additional_chat_templates/tool_use.jinja"),
            "TOOLS",
        )
        .unwrap();
        let c = TokenizerConfig::load(&dir).unwrap();
        assert_eq!(c.template_for(false), Ok(Some("FILE")));
        assert_eq!(c.template_for(true), Ok(Some("TOOLS")));
        assert_eq!(c.eos_token.as_deref(), Some("</s>"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn invalid_json_names_the_file() {
        let err = TokenizerConfig::from_json_text("{", Path::new("/m/tokenizer_config.json"))
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::TokenizerLoad);
        assert!(err
            .message
            .starts_with("/m/tokenizer_config.json is not valid JSON"));
    }
}
