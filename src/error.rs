//! The one error type of the core: a stable machine-readable code and a message that says where
//! and what. The napi layer turns it into a JS `Error` whose `code` property is `code`.

use std::fmt;

/// Stable error codes. They are part of the public API: JS callers switch on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A JSONL line is not valid JSON (or not valid UTF-8).
    JsonlParse,
    /// A data file could not be read.
    FileRead,
    /// A gzip or zstd data file is truncated or corrupt.
    Decompress,
    /// A Parquet data file is corrupt or holds columns that cannot become records.
    ParquetRead,
    /// An example does not have the shape the dataset needs.
    InvalidExample,
    /// A chat message does not have the shape a chat template needs.
    InvalidMessage,
    /// `tokenizer.json` or `tokenizer_config.json` is missing or corrupt.
    TokenizerLoad,
    /// A chat template was needed and none was found.
    ChatTemplateMissing,
    /// The chat template does not compile.
    TemplateSyntax,
    /// The chat template failed while rendering (including its own `raise_exception`).
    TemplateRender,
    /// The tokenizer failed to encode or decode.
    Tokenize,
    /// A path escapes the allowed root.
    PathTraversal,
    /// An argument is outside its domain (a batch size of 0, an index out of range, ...).
    InvalidArgument,
    /// The tokenizer lacks tokens that a masking strategy needs.
    UnsupportedTokenizer,
    /// Distillation targets that do not line up with their tokens.
    InvalidDistillation,
    /// `sanitizeControlTokens` met a control token that the tokenizer produces from plain text.
    ControlToken,
    /// A bug: something the code assumed could not happen did.
    Internal,
}

impl ErrorCode {
    /// Every code, for reading one back by name (`token_cache` stores row errors).
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::JsonlParse,
        ErrorCode::FileRead,
        ErrorCode::InvalidExample,
        ErrorCode::InvalidMessage,
        ErrorCode::TokenizerLoad,
        ErrorCode::ChatTemplateMissing,
        ErrorCode::TemplateSyntax,
        ErrorCode::TemplateRender,
        ErrorCode::Tokenize,
        ErrorCode::PathTraversal,
        ErrorCode::InvalidArgument,
        ErrorCode::UnsupportedTokenizer,
        ErrorCode::InvalidDistillation,
        ErrorCode::ControlToken,
        ErrorCode::Internal,
    ];

    /// The code whose `as_str` is `name`.
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::JsonlParse => "JSONL_PARSE",
            ErrorCode::FileRead => "FILE_READ",
            ErrorCode::Decompress => "DECOMPRESS",
            ErrorCode::ParquetRead => "PARQUET_READ",
            ErrorCode::InvalidExample => "INVALID_EXAMPLE",
            ErrorCode::InvalidMessage => "INVALID_MESSAGE",
            ErrorCode::TokenizerLoad => "TOKENIZER_LOAD",
            ErrorCode::ChatTemplateMissing => "CHAT_TEMPLATE_MISSING",
            ErrorCode::TemplateSyntax => "TEMPLATE_SYNTAX",
            ErrorCode::TemplateRender => "TEMPLATE_RENDER",
            ErrorCode::Tokenize => "TOKENIZE",
            ErrorCode::PathTraversal => "PATH_TRAVERSAL",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::UnsupportedTokenizer => "UNSUPPORTED_TOKENIZER",
            ErrorCode::InvalidDistillation => "INVALID_DISTILLATION",
            ErrorCode::ControlToken => "CONTROL_TOKEN",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SftError {
    pub code: ErrorCode,
    pub message: String,
}

impl SftError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        SftError {
            code,
            message: message.into(),
        }
    }

    /// A bad argument: a value outside its domain or of the wrong kind.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        SftError::new(ErrorCode::InvalidArgument, message)
    }

    /// Prefixes the message with where the error happened, keeping the code.
    pub fn context(self, prefix: impl fmt::Display) -> Self {
        SftError {
            code: self.code,
            message: format!("{prefix}: {}", self.message),
        }
    }
}

impl SftError {
    /// Appends the file and physical line an error comes from, keeping the message's start
    /// (the reference's wording) intact.
    pub fn at_line(self, path: &str, line: usize) -> Self {
        SftError {
            code: self.code,
            message: format!("{} (at {path}:{line})", self.message),
        }
    }

    /// Appends the file and the line (JSON, JSONL) or row (Parquet) an error comes from.
    pub fn at(self, path: &str, location: Location) -> Self {
        match location {
            Location::Line(line) => self.at_line(path, line),
            Location::Row(row) => SftError {
                code: self.code,
                message: format!("{} (at {path} row {row})", self.message),
            },
        }
    }
}

impl fmt::Display for SftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for SftError {}

pub type SftResult<T> = Result<T, SftError>;

/// A number as JavaScript prints it: argument errors quote what the caller passed, and Rust
/// would print `Infinity` as `inf`.
pub fn js_number(v: f64) -> String {
    match v {
        f64::INFINITY => "Infinity".to_string(),
        f64::NEG_INFINITY => "-Infinity".to_string(),
        _ => v.to_string(),
    }
}

/// Where a record sits in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A 1-based physical line (JSON, JSONL), the line where the record starts.
    Line(usize),
    /// A 0-based row (Parquet).
    Row(usize),
}

impl Location {
    pub fn number(self) -> usize {
        match self {
            Location::Line(n) | Location::Row(n) => n,
        }
    }
}
