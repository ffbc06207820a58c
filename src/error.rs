//! One error type for the pure-Rust core; the bindings map each variant to a Python exception.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A vocabulary or tokenizer file could not be read or parsed.
    #[error("cannot load tokenizer from {path}: {reason}")]
    Vocabulary { path: PathBuf, reason: String },
    /// A pre-tokenization pattern failed to compile.
    #[error("invalid pre-tokenizer pattern: {0}")]
    Pattern(String),
    /// No embedded encoding has this name.
    #[error("unknown encoding {0:?}; embedded: cl100k_base, o200k_base")]
    UnknownEncoding(String),
    /// Token ids that the vocabulary does not know.
    #[error("unknown token id {0}")]
    UnknownToken(u32),
    /// The backend cannot do this (e.g. encode with a heuristic estimate).
    #[error("{0}")]
    Unsupported(String),
    /// Bad argument values: the message names the argument.
    #[error("{0}")]
    Value(String),
    /// A message in a history is malformed: index and field are named.
    #[error("message {index}: {field}: {reason}")]
    Message { index: usize, field: String, reason: String },
    /// The text holds a special token the caller did not allow (tiktoken's `encode` check).
    #[error(
        "the text contains the special token {0:?}, which is disallowed; to encode it as that token pass \
         allowed_special={{{0:?}, ...}}, to encode it as plain text leave it out of disallowed_special \
         (disallowed_special=() turns the check off)"
    )]
    DisallowedSpecial(String),
    /// The pins of a window alone exceed the budget.
    #[error("{0}")]
    Budget(String),
}

pub type Result<T> = std::result::Result<T, Error>;
