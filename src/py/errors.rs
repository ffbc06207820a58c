//! Core errors as Python exceptions, one class per error kind, mapped by variant.
//!
//! The classes are those of `windowfit.errors` (imported, not created here), so an error
//! raised by Rust is the very class Python code raises and catches, all under
//! `WindowfitError`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;

use crate::error::Error;

pyo3::import_exception!(windowfit.errors, BudgetError);
pyo3::import_exception!(windowfit.errors, InvalidMessageError);
pyo3::import_exception!(windowfit.errors, MessageTypeError);
pyo3::import_exception!(windowfit.errors, VocabularyError);
pyo3::import_exception!(windowfit.errors, UnknownEncodingError);
pyo3::import_exception!(windowfit.errors, InvalidArgumentError);
pyo3::import_exception!(windowfit.errors, ArgumentTypeError);
pyo3::import_exception!(windowfit.errors, TokenizerFileNotFoundError);
pyo3::import_exception!(windowfit.errors, InternalError);
pyo3::import_exception!(windowfit.errors, DisallowedSpecialTokenError);

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::Vocabulary { ref path, ref reason } if !path.exists() => {
                TokenizerFileNotFoundError::new_err(format!("tokenizer file not found: {} ({reason})", path.display()))
            }
            Error::Vocabulary { .. } | Error::Pattern(_) => VocabularyError::new_err(e.to_string()),
            Error::UnknownEncoding(_) => UnknownEncodingError::new_err(e.to_string()),
            Error::Message { .. } => InvalidMessageError::new_err(e.to_string()),
            Error::Budget(_) => BudgetError::new_err(e.to_string()),
            Error::DisallowedSpecial(_) => DisallowedSpecialTokenError::new_err(e.to_string()),
            Error::UnknownToken(_) | Error::Value(_) | Error::Unsupported(_) => {
                InvalidArgumentError::new_err(e.to_string())
            }
        }
    }
}

/// A message field with a bad value: names the message index and the field.
pub(crate) fn message_error(index: usize, field: &str, reason: impl Into<String>) -> PyErr {
    InvalidMessageError::new_err(format!("message {index}: {field}: {}", reason.into()))
}

/// A message field of the wrong type: names the index, the field and both types.
pub(crate) fn message_type_error(index: usize, field: &str, expected: &str, got: &Bound<'_, PyAny>) -> PyErr {
    MessageTypeError::new_err(format!("message {index}: {field}: expected {expected}, got {}", type_name(got)))
}

pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// Run `f`, turning a Rust panic into `windowfit.errors.InternalError` instead of aborting
/// the interpreter.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(InternalError::new_err(format!("windowfit internal error in {what}: {msg}")))
        }
    }
}
