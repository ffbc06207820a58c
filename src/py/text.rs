//! Python strings as the core reads them: borrowed without a copy when they are valid UTF-8,
//! with lone surrogates as tiktoken reads them otherwise, and pairing ids kept exact.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyString;

use super::errors::{type_name, ArgumentTypeError};

/// A Python string borrowed without copying, or its lossy UTF-8 copy when it holds lone
/// surrogates (counted as U+FFFD, as tiktoken does).
pub(crate) enum Text {
    Backed(PyBackedStr),
    Owned(String),
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        match self {
            Text::Backed(s) => s,
            Text::Owned(s) => s,
        }
    }
}

pub(crate) fn text_from_str(s: &Bound<'_, PyString>) -> Text {
    match PyBackedStr::try_from(s.clone()) {
        Ok(b) => Text::Backed(b),
        Err(_) => Text::Owned(replace_surrogates(s)),
    }
}

/// A string with lone surrogates as tiktoken reads it: each one becomes a single U+FFFD
/// (UTF-16 with surrogatepass, decoded with replacement), so characters map one to one.
fn replace_surrogates(s: &Bound<'_, PyString>) -> String {
    s.call_method1("encode", ("utf-16-le", "surrogatepass"))
        .and_then(|b| b.call_method1("decode", ("utf-16-le", "replace")))
        .and_then(|t| t.extract::<String>())
        .unwrap_or_else(|_| s.to_string_lossy().into_owned())
}

/// An id used for pairing calls with results. Ids are compared, not just counted, so an id
/// with lone surrogates keeps its exact UTF-16 code units (after a NUL, which no provider
/// id contains) instead of collapsing into U+FFFD like another id that differs only there.
pub(crate) fn id_text(s: &Bound<'_, PyString>) -> Text {
    match PyBackedStr::try_from(s.clone()) {
        Ok(b) => Text::Backed(b),
        Err(_) => {
            let lossy = replace_surrogates(s);
            let units = s
                .call_method1("encode", ("utf-16-le", "surrogatepass"))
                .and_then(|b| b.extract::<Vec<u8>>())
                .unwrap_or_default();
            let hex: String = units.iter().map(|b| format!("{b:02x}")).collect();
            Text::Owned(format!("{lossy}\0{hex}"))
        }
    }
}

pub(crate) fn extract_text(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Text> {
    match obj.cast::<PyString>() {
        Ok(s) => Ok(text_from_str(s)),
        Err(_) => Err(not_str(what, obj)),
    }
}

/// `text` borrowed from the Python string (no copy, no new reference) when it is valid
/// UTF-8, as nearly every string is; one with lone surrogates is read as tiktoken reads it.
/// The per-call path of a warm `count`, where a `PyBackedStr` cost a noticeable share.
pub(crate) fn with_text<R>(obj: &Bound<'_, PyAny>, what: &str, f: impl FnOnce(&str) -> R) -> PyResult<R> {
    let s = obj.cast::<PyString>().map_err(|_| not_str(what, obj))?;
    match s.to_str() {
        Ok(t) => Ok(f(t)),
        Err(_) => Ok(f(&replace_surrogates(s))),
    }
}

fn not_str(what: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    ArgumentTypeError::new_err(format!("{what} must be str, not {}", type_name(obj)))
}

pub(crate) fn extract_texts(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Text>> {
    if obj.is_instance_of::<PyString>() {
        return Err(ArgumentTypeError::new_err("texts must be an iterable of str, not a single str"));
    }
    let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        // The field name is formatted only for the error: per item it cost more than a cache hit.
        match item.cast::<PyString>() {
            Ok(s) => out.push(text_from_str(s)),
            Err(_) => return Err(not_str(&format!("texts[{i}]"), &item)),
        }
    }
    Ok(out)
}
