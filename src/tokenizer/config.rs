//! What a tokenizer directory says besides the vocabulary: the chat template and the named
//! special tokens, from `tokenizer_config.json` (or `chat_template.jinja`).

use std::path::Path;

use minijinja::value::Value;
use serde_json::Value as Json;

use crate::error::{ErrorCode, SftError, SftResult};

/// The parts of `tokenizer_config.json` the library uses.
#[derive(Debug, Default, Clone)]
pub struct TokenizerConfig {
    pub chat_template: Option<String>,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    pub pad_token: Option<String>,
    pub unk_token: Option<String>,
    pub additional_special_tokens: Vec<String>,
    pub mask_token: Option<String>,
    /// The Python class transformers builds (`GemmaTokenizer`, ...).
    pub tokenizer_class: Option<String>,
    /// The added tokens that `sanitizeControlTokens` treats as control tokens besides the
    /// special ones; without this list they are inferred from the chat template.
    pub chat_control_tokens: Option<Vec<String>>,
}

/// A special token may be spelled as a string or as an object with `content` (including the
/// `{"__type": "AddedToken", ...}` form of older configs).
fn token_string(value: Option<&Json>) -> Option<String> {
    match value? {
        Json::String(s) => Some(s.clone()),
        Json::Object(map) => map.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

/// `chat_template` is a string, or a list of `{name, template}` of which `default` is used.
fn template_from(value: Option<&Json>) -> Option<String> {
    match value? {
        Json::String(s) => Some(s.clone()),
        Json::Array(named) => named.iter().find_map(|entry| {
            (entry.get("name")?.as_str()? == "default")
                .then(|| entry.get("template")?.as_str().map(str::to_string))
                .flatten()
        }),
        _ => None,
    }
}

/// The named special tokens a transformers tokenizer class has when its config names none.
const CLASS_DEFAULTS: &[(&str, &[&str])] = &[(
    "GemmaTokenizer",
    &["<unk>", "<bos>", "<eos>", "<pad>", "<mask>"],
)];

impl TokenizerConfig {
    /// The variables transformers passes to every render from `special_tokens_map`.
    pub fn special_tokens_map(&self) -> Vec<(String, Value)> {
        let mut map = Vec::new();
        for (name, token) in [
            ("bos_token", &self.bos_token),
            ("eos_token", &self.eos_token),
            ("unk_token", &self.unk_token),
            ("pad_token", &self.pad_token),
        ] {
            if let Some(token) = token {
                map.push((name.to_string(), Value::from(token.as_str())));
            }
        }
        if !self.additional_special_tokens.is_empty() {
            map.push((
                "additional_special_tokens".to_string(),
                Value::from(self.additional_special_tokens.clone()),
            ));
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
        Ok(TokenizerConfig {
            chat_template: template_from(obj.get("chat_template")),
            bos_token: token_string(obj.get("bos_token")),
            eos_token: token_string(obj.get("eos_token")),
            pad_token: token_string(obj.get("pad_token")),
            unk_token: token_string(obj.get("unk_token")),
            additional_special_tokens: additional,
            mask_token: token_string(obj.get("mask_token")),
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

    /// Reads `tokenizer_config.json` and `chat_template.jinja` from `dir`; both are optional.
    pub fn load(dir: &Path) -> SftResult<Self> {
        let config_path = dir.join("tokenizer_config.json");
        let mut config = match std::fs::read_to_string(&config_path) {
            Ok(text) => Self::from_json_text(&text, &config_path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TokenizerConfig::default(),
            Err(e) => {
                return Err(SftError::new(
                    ErrorCode::TokenizerLoad,
                    format!("cannot read {}: {e}", config_path.display()),
                ))
            }
        };
        if config.chat_template.is_none() {
            let jinja_path = dir.join("chat_template.jinja");
            match std::fs::read_to_string(&jinja_path) {
                Ok(text) => config.chat_template = Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(SftError::new(
                        ErrorCode::TokenizerLoad,
                        format!("cannot read {}: {e}", jinja_path.display()),
                    ))
                }
            }
        }
        Ok(config)
    }
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
        assert_eq!(c.additional_special_tokens, vec!["<a>", "<b>"]);
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
