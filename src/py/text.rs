//! Python strings as the core reads them: counted and encoded from CPython's own storage
//! ([`stored`]: ASCII as it lies, other text written out as UTF-8 by the core); messages and
//! other kept texts borrowed as CPython's UTF-8 without a copy, with lone surrogates as
//! tiktoken reads them; pairing ids kept exact.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyString, PyStringData};

use crate::stored_text::{AsUtf8, Stored};

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
/// and a high one before a low one their character ([`crate::stored_text`]).
fn replace_surrogates(s: &Bound<'_, PyString>) -> String {
    match stored(s) {
        Ok(text) => text.to_utf8(),
        Err(_) => s.to_string_lossy().into_owned(),
    }
}

/// The string's characters as CPython stores them, without a copy: ASCII as UTF-8, other
/// text a fixed width a character ([`Stored`]). The borrow lives as long as `s`.
pub(crate) fn stored<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Stored<'a>> {
    // SAFETY: `s` is a live str, the thread attached; `data` canonicalises a legacy string
    // first, and its reading of CPython's state bits is tested by PyO3 on x86_64 and here by
    // every storage kind against tiktoken (`tests/counting/test_encoding.py`).
    let data = unsafe { s.data()? };
    Ok(match data {
        // SAFETY: an ASCII string's bytes are its UTF-8
        PyStringData::Ucs1(b) if unsafe { ffi::PyUnicode_IS_ASCII(s.as_ptr()) } != 0 => {
            Stored::Utf8(unsafe { std::str::from_utf8_unchecked(b) })
        }
        PyStringData::Ucs1(b) => Stored::Latin1(b),
        PyStringData::Ucs2(u) => Stored::Ucs2(u),
        PyStringData::Ucs4(u) => Stored::Ucs4(u),
    })
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

/// `f` of `text`'s UTF-8: an ASCII string's own bytes, any other written out by the core
/// into a buffer of this thread ([`crate::stored_text`]), never CPython's UTF-8 copy, which
/// is made with the interpreter held and kept beside the string for its lifetime. The
/// per-call path of `count`.
pub(crate) fn with_text<R>(obj: &Bound<'_, PyAny>, what: &str, f: impl FnOnce(&str) -> R) -> PyResult<R> {
    let s = obj.cast::<PyString>().map_err(|_| not_str(what, obj))?;
    Ok(stored(s)?.with_utf8(f))
}

/// The strings of `obj` (an iterable of `str`), each held: what [`stored`] borrows stays
/// alive while the batch is counted detached, whatever another thread does to the list.
pub(crate) fn extract_strings<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyString>>> {
    if obj.is_instance_of::<PyString>() {
        return Err(ArgumentTypeError::new_err("texts must be an iterable of str, not a single str"));
    }
    let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        // The field name is formatted only for the error: per item it cost more than a cache hit.
        match item.cast_into::<PyString>() {
            Ok(s) => out.push(s),
            Err(e) => return Err(not_str(&format!("texts[{i}]"), e.into_inner().as_any())),
        }
    }
    Ok(out)
}

fn not_str(what: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    ArgumentTypeError::new_err(format!("{what} must be str, not {}", type_name(obj)))
}
