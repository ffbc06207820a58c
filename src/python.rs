//! `windowfit._core`: thin PyO3 wrappers over the pure-Rust core.
//!
//! Rules kept here: every `Error` becomes a Python exception (never a panic across the FFI:
//! each entry point also catches panics); the GIL is released around real work; Python
//! objects are read in Rust (messages are dicts, read field by field, errors name the
//! message index and field).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::{PyFileNotFoundError, PyKeyError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::cache::{CountCache, DEFAULT_ENTRIES};
use crate::count::{Counter, ImageDetail, KeyBuilder, Message, MessageFormat, Part, ToolCall};
use crate::error::Error;
use crate::fit::{self, FitOptions, FitPlan, MessageInfo, Role, Unanswered};
use crate::tokenize::{Backend, Heuristic, HfTokenizer, OpenAiEncoding, TiktokenFile};
use crate::truncate::{self, Direction, Limits, TruncateOptions};

create_exception!(_core, BudgetError, PyValueError, "The pinned messages alone exceed the token budget.");
create_exception!(_core, InvalidMessageError, PyValueError, "A message has a bad value; the message names its index and field.");
create_exception!(_core, MessageTypeError, PyTypeError, "A message or one of its fields has the wrong type; the message names its index and field.");
create_exception!(_core, VocabularyError, PyValueError, "A vocabulary or tokenizer file is corrupt or unsupported.");
create_exception!(_core, UnknownEncodingError, PyKeyError, "No embedded encoding has this name.");

fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::Vocabulary { ref path, ref reason } if !path.exists() => {
            PyFileNotFoundError::new_err(format!("tokenizer file not found: {} ({reason})", path.display()))
        }
        Error::Vocabulary { .. } | Error::Pattern(_) => VocabularyError::new_err(e.to_string()),
        Error::Message { .. } => InvalidMessageError::new_err(e.to_string()),
        Error::Budget(_) => BudgetError::new_err(e.to_string()),
        Error::UnknownToken(_) | Error::Value(_) => PyValueError::new_err(e.to_string()),
        Error::Unsupported(_) => PyValueError::new_err(e.to_string()),
    }
}

/// Run `f`, turning a Rust panic into a Python RuntimeError instead of aborting.
fn guarded<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!("windowfit internal error in {what}: {msg}")))
        }
    }
}

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

fn text_from_str(s: &Bound<'_, PyString>) -> Text {
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
fn id_text(s: &Bound<'_, PyString>) -> Text {
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

fn id_field(index: usize, field: &str, v: &Bound<'_, PyAny>) -> PyResult<Text> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(id_text(s)),
        Err(_) => Err(msg_type_err(index, field, "str", v)),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

fn extract_text(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Text> {
    match obj.cast::<PyString>() {
        Ok(s) => Ok(text_from_str(s)),
        Err(_) => Err(PyTypeError::new_err(format!("{what} must be str, not {}", type_name(obj)))),
    }
}

fn extract_texts(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Text>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("texts must be an iterable of str, not a single str"));
    }
    let mut out = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        out.push(extract_text(&item?, &format!("texts[{i}]"))?);
    }
    Ok(out)
}

// ---------------------------------------------------------------- backends

/// Loaded backends and their shared caches, by a key naming the source, so creating many
/// counters for one model loads its vocabulary once and shares warm counts.
static BACKENDS: LazyLock<Mutex<HashMap<String, (Arc<dyn Backend>, Arc<CountCache>)>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn shared_backend(
    key: String,
    load: impl FnOnce() -> Result<Arc<dyn Backend>, Error>,
) -> Result<(Arc<dyn Backend>, Arc<CountCache>), Error> {
    if let Some(found) = BACKENDS.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(found.clone());
    }
    let backend = load()?;
    let entry = (backend, Arc::new(CountCache::new(DEFAULT_ENTRIES)));
    let mut map = BACKENDS.lock().unwrap_or_else(|p| p.into_inner());
    Ok(map.entry(key).or_insert(entry).clone())
}

// ---------------------------------------------------------------- messages

fn msg_err(index: usize, field: &str, reason: impl Into<String>) -> PyErr {
    InvalidMessageError::new_err(format!("message {index}: {field}: {}", reason.into()))
}

fn msg_type_err(index: usize, field: &str, expected: &str, got: &Bound<'_, PyAny>) -> PyErr {
    MessageTypeError::new_err(format!("message {index}: {field}: expected {expected}, got {}", type_name(got)))
}

/// `d[key]` unless missing or None. Keys are interned Python strings: building a new key
/// object per lookup dominated the cost of reading large histories.
fn get_opt<'py>(d: &Bound<'py, PyDict>, key: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}

fn str_field(index: usize, field: &str, v: &Bound<'_, PyAny>) -> PyResult<Text> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(text_from_str(s)),
        Err(_) => Err(msg_type_err(index, field, "str", v)),
    }
}

const ROLES: [&str; 6] = ["system", "developer", "user", "assistant", "tool", "function"];

/// JSON text of a Python object, for Anthropic `tool_use.input` dicts.
fn json_text(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Text> {
    let dumps = py.import("json")?.getattr("dumps")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("ensure_ascii", false)?;
    kwargs.set_item("separators", (",", ":"))?;
    let s = dumps.call((obj,), Some(&kwargs))?;
    Ok(text_from_str(s.cast::<PyString>()?))
}

/// Every string inside an unknown part, so it is counted rather than silently ignored.
fn collect_strings(obj: &Bound<'_, PyAny>, out: &mut Vec<Part<Text>>, depth: usize) -> PyResult<()> {
    if depth > 32 {
        return Ok(());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        out.push(Part::Text(text_from_str(s)));
    } else if let Ok(d) = obj.cast::<PyDict>() {
        for (k, v) in d.iter() {
            if k.extract::<&str>().map(|k| k != "type").unwrap_or(true) {
                collect_strings(&v, out, depth + 1)?;
            }
        }
    } else if let Ok(l) = obj.cast::<PyList>() {
        for v in l.iter() {
            collect_strings(&v, out, depth + 1)?;
        }
    }
    Ok(())
}

fn image_size(index: usize, field: &str, d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<u32>> {
    match get_opt(d, &PyString::intern(d.py(), key))? {
        None => Ok(None),
        Some(v) => v.extract::<u32>().map(Some).map_err(|_| msg_err(index, &format!("{field}.{key}"), "must be a non-negative int")),
    }
}

fn extract_part(
    py: Python<'_>,
    index: usize,
    field: &str,
    part: &Bound<'_, PyAny>,
    msg: &mut Message<Text>,
) -> PyResult<()> {
    if let Ok(s) = part.cast::<PyString>() {
        msg.parts.push(Part::Text(text_from_str(s)));
        return Ok(());
    }
    let d = part.cast::<PyDict>().map_err(|_| msg_type_err(index, field, "a dict content part", part))?;
    let kind = match get_opt(d, pyo3::intern!(d.py(), "type"))? {
        Some(t) => str_field(index, &format!("{field}.type"), &t)?,
        None => return Err(msg_err(index, &format!("{field}.type"), "missing")),
    };
    match kind.as_ref() {
        "text" | "input_text" | "output_text" => {
            let t = get_opt(d, pyo3::intern!(d.py(), "text"))?.ok_or_else(|| msg_err(index, &format!("{field}.text"), "missing"))?;
            msg.parts.push(Part::Text(str_field(index, &format!("{field}.text"), &t)?));
        }
        "refusal" => {
            if let Some(t) = get_opt(d, pyo3::intern!(d.py(), "refusal"))? {
                msg.parts.push(Part::Text(str_field(index, &format!("{field}.refusal"), &t)?));
            }
        }
        "thinking" => {
            if let Some(t) = get_opt(d, pyo3::intern!(d.py(), "thinking"))? {
                msg.parts.push(Part::Text(str_field(index, &format!("{field}.thinking"), &t)?));
            }
        }
        "image_url" | "image" | "input_image" => {
            let inner = match get_opt(d, pyo3::intern!(d.py(), "image_url"))? {
                Some(v) => v.cast_into::<PyDict>().ok(),
                None => None,
            };
            let src = inner.as_ref().unwrap_or(d);
            let detail = match get_opt(src, pyo3::intern!(src.py(), "detail"))?.or(get_opt(d, pyo3::intern!(d.py(), "detail"))?) {
                None => ImageDetail::Auto,
                Some(v) => match v.extract::<&str>() {
                    Ok("low") => ImageDetail::Low,
                    Ok("high") => ImageDetail::High,
                    Ok("auto") => ImageDetail::Auto,
                    _ => return Err(msg_err(index, &format!("{field}.detail"), "must be 'low', 'high' or 'auto'")),
                },
            };
            let width = image_size(index, field, src, "width")?.or(image_size(index, field, d, "width")?);
            let height = image_size(index, field, src, "height")?.or(image_size(index, field, d, "height")?);
            msg.parts.push(Part::Image { detail, width, height });
        }
        "input_audio" | "audio" | "file" | "input_file" | "document" => msg.parts.push(Part::Opaque),
        "tool_use" => {
            let id = get_opt(d, pyo3::intern!(d.py(), "id"))?.ok_or_else(|| msg_err(index, &format!("{field}.id"), "missing"))?;
            let name = get_opt(d, pyo3::intern!(d.py(), "name"))?.ok_or_else(|| msg_err(index, &format!("{field}.name"), "missing"))?;
            let arguments = match get_opt(d, pyo3::intern!(d.py(), "input"))? {
                Some(v) if v.is_instance_of::<PyString>() => str_field(index, &format!("{field}.input"), &v)?,
                Some(v) => json_text(py, &v)?,
                None => Text::Owned("{}".into()),
            };
            msg.tool_calls.push(ToolCall {
                id: id_field(index, &format!("{field}.id"), &id)?,
                name: str_field(index, &format!("{field}.name"), &name)?,
                arguments,
            });
        }
        "tool_result" => {
            let id = get_opt(d, pyo3::intern!(d.py(), "tool_use_id"))?.ok_or_else(|| msg_err(index, &format!("{field}.tool_use_id"), "missing"))?;
            msg.result_ids.push(id_field(index, &format!("{field}.tool_use_id"), &id)?);
            match get_opt(d, pyo3::intern!(d.py(), "content"))? {
                None => {}
                Some(c) if c.is_instance_of::<PyString>() => msg.parts.push(Part::Text(str_field(index, &format!("{field}.content"), &c)?)),
                Some(c) => {
                    let list = c.cast::<PyList>().map_err(|_| msg_type_err(index, &format!("{field}.content"), "str or list", &c))?;
                    for (j, sub) in list.iter().enumerate() {
                        extract_part(py, index, &format!("{field}.content[{j}]"), &sub, msg)?;
                    }
                }
            }
        }
        // Unknown part types: count every string in them rather than ignore them.
        _ => collect_strings(d, &mut msg.parts, 0)?,
    }
    Ok(())
}

fn extract_message(py: Python<'_>, index: usize, obj: &Bound<'_, PyAny>) -> PyResult<Message<Text>> {
    let d = obj.cast::<PyDict>().map_err(|_| {
        MessageTypeError::new_err(format!(
            "message {index}: expected a dict in OpenAI chat format, got {} (convert framework messages with windowfit.adapters)",
            type_name(obj)
        ))
    })?;
    let role_obj = get_opt(d, pyo3::intern!(d.py(), "role"))?.ok_or_else(|| msg_err(index, "role", "missing"))?;
    let role = str_field(index, "role", &role_obj)?;
    if !ROLES.contains(&role.as_ref()) {
        return Err(msg_err(index, "role", format!("unknown role {:?}; expected one of {}", role.as_ref(), ROLES.join(", "))));
    }
    let mut msg = Message { role, name: None, parts: Vec::new(), tool_calls: Vec::new(), result_ids: Vec::new() };
    if let Some(name) = get_opt(d, pyo3::intern!(d.py(), "name"))? {
        msg.name = Some(str_field(index, "name", &name)?);
    }
    match get_opt(d, pyo3::intern!(d.py(), "content"))? {
        None => {}
        Some(c) if c.is_instance_of::<PyString>() => msg.parts.push(Part::Text(str_field(index, "content", &c)?)),
        Some(c) => {
            let list = c.cast::<PyList>().map_err(|_| msg_type_err(index, "content", "str, list of parts or None", &c))?;
            for (j, part) in list.iter().enumerate() {
                extract_part(py, index, &format!("content[{j}]"), &part, &mut msg)?;
            }
        }
    }
    if let Some(calls) = get_opt(d, pyo3::intern!(d.py(), "tool_calls"))? {
        let list = calls.cast::<PyList>().map_err(|_| msg_type_err(index, "tool_calls", "list", &calls))?;
        for (j, call) in list.iter().enumerate() {
            let f = format!("tool_calls[{j}]");
            let cd = call.cast::<PyDict>().map_err(|_| msg_type_err(index, &f, "dict", &call))?;
            let id = get_opt(cd, pyo3::intern!(cd.py(), "id"))?.ok_or_else(|| msg_err(index, &format!("{f}.id"), "missing: every tool call needs an id to pair it with its result"))?;
            let func = get_opt(cd, pyo3::intern!(cd.py(), "function"))?.ok_or_else(|| msg_err(index, &format!("{f}.function"), "missing"))?;
            let fd = func.cast::<PyDict>().map_err(|_| msg_type_err(index, &format!("{f}.function"), "dict", &func))?;
            let name = get_opt(fd, pyo3::intern!(fd.py(), "name"))?.ok_or_else(|| msg_err(index, &format!("{f}.function.name"), "missing"))?;
            let arguments = match get_opt(fd, pyo3::intern!(fd.py(), "arguments"))? {
                Some(a) => str_field(index, &format!("{f}.function.arguments"), &a)?,
                None => Text::Owned(String::new()),
            };
            msg.tool_calls.push(ToolCall {
                id: id_field(index, &format!("{f}.id"), &id)?,
                name: str_field(index, &format!("{f}.function.name"), &name)?,
                arguments,
            });
        }
    }
    // The legacy `function_call` (before tool_calls) is counted like a call without an id.
    if let Some(fc) = get_opt(d, pyo3::intern!(d.py(), "function_call"))? {
        let fd = fc.cast::<PyDict>().map_err(|_| msg_type_err(index, "function_call", "dict", &fc))?;
        for key in ["name", "arguments"] {
            if let Some(v) = get_opt(fd, &PyString::intern(py, key))? {
                msg.parts.push(Part::Text(str_field(index, &format!("function_call.{key}"), &v)?));
            }
        }
    }
    if let Some(id) = get_opt(d, pyo3::intern!(d.py(), "tool_call_id"))? {
        msg.result_ids.push(id_field(index, "tool_call_id", &id)?);
    } else if msg.role.as_ref() == "tool" {
        return Err(msg_err(index, "tool_call_id", "missing: a tool message must name the call it answers"));
    }
    Ok(msg)
}

// ---------------------------------------------------------------- Counter

/// Token counter over one tokenizer, with a content-keyed cache.
#[pyclass(module = "windowfit._core", name = "Counter", frozen, subclass)]
pub struct PyCounter {
    pub(crate) inner: Arc<Counter>,
}

#[pymethods]
impl PyCounter {
    /// Low-level constructor; `windowfit.Counter` resolves models and files into these arguments.
    /// `kind` is "openai" (source: encoding name), "tiktoken" (source: path; pattern required),
    /// "tokenizer_json" (source: path) or "heuristic".
    #[new]
    #[pyo3(signature = (kind, source=None, *, pattern=None, special_tokens=None, nfc=false, cache_entries=None,
                        cache_bytes=None, tokens_per_message=3, tokens_per_name=1, tokens_per_tool_call=3, reply_priming=3))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        kind: &str,
        source: Option<PathBuf>,
        pattern: Option<String>,
        special_tokens: Option<HashMap<String, u32>>,
        nfc: bool,
        cache_entries: Option<usize>,
        cache_bytes: Option<usize>,
        tokens_per_message: u32,
        tokens_per_name: u32,
        tokens_per_tool_call: u32,
        reply_priming: u32,
    ) -> PyResult<Self> {
        let format = MessageFormat { tokens_per_message, tokens_per_name, tokens_per_tool_call, reply_priming };
        let kind = kind.to_string();
        let (backend, shared_cache) = guarded("Counter()", || {
            py.detach(|| load_backend(&kind, source, pattern, special_tokens, nfc)).map_err(|e| match e {
                Error::Value(m) if m.starts_with("unknown encoding") => UnknownEncodingError::new_err(m),
                e => to_py_err(e),
            })
        })?;
        // A private cache when a bound is given; otherwise the tokenizer's shared one.
        let cache = match (cache_entries, cache_bytes) {
            (Some(_), Some(_)) => return Err(PyValueError::new_err("give cache_entries or cache_bytes, not both")),
            (Some(n), None) => Arc::new(CountCache::new(n)),
            (None, Some(b)) => Arc::new(CountCache::with_max_bytes(b)),
            (None, None) => shared_cache,
        };
        Ok(Self { inner: Arc::new(Counter::new(backend, cache, format)) })
    }

    /// The tokenizer's name (encoding name or file).
    #[getter]
    fn encoding_name(&self) -> String {
        self.inner.backend().name().to_string()
    }

    /// False when counts are estimates (no public tokenizer, or its package is missing).
    #[getter]
    fn is_exact(&self) -> bool {
        self.inner.is_exact()
    }

    #[getter]
    fn reply_priming(&self) -> u32 {
        self.inner.format().reply_priming
    }

    #[getter]
    fn tokens_per_message(&self) -> u32 {
        self.inner.format().tokens_per_message
    }

    #[getter]
    fn tokens_per_name(&self) -> u32 {
        self.inner.format().tokens_per_name
    }

    #[getter]
    fn tokens_per_tool_call(&self) -> u32 {
        self.inner.format().tokens_per_tool_call
    }

    /// Tokens of `text` (cached by content).
    fn count(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
        let text = extract_text(text, "text")?;
        let s = text.as_ref();
        guarded("count", || {
            // Releasing the GIL costs more than counting a short text.
            Ok(if s.len() > 16 * 1024 { py.detach(|| self.inner.count(s)) } else { self.inner.count(s) })
        })
    }

    /// Tokens of each text; the GIL is released and large batches use all cores.
    fn count_many(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        let texts = extract_texts(texts)?;
        guarded("count_many", || Ok(py.detach(|| self.inner.count_many(&texts))))
    }

    /// `count(text)` if it is at most `limit`, else None; stops reading once past `limit`.
    fn count_until(&self, py: Python<'_>, text: &Bound<'_, PyAny>, limit: i64) -> PyResult<Option<usize>> {
        let text = extract_text(text, "text")?;
        let limit = usize::try_from(limit).map_err(|_| PyValueError::new_err(format!("limit must be >= 0, got {limit}")))?;
        let s = text.as_ref();
        guarded("count_until", || Ok(py.detach(|| self.inner.count_until(s, limit))))
    }

    /// Token ids of `text` (ordinary: special-token text is plain text).
    fn encode(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let text = extract_text(text, "text")?;
        guarded("encode", || py.detach(|| self.inner.backend().encode(text.as_ref())).map_err(to_py_err))
    }

    /// Text of token ids; bytes that are not valid UTF-8 become U+FFFD.
    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        guarded("decode", || {
            let bytes = py.detach(|| self.inner.backend().decode_bytes(&ids)).map_err(to_py_err)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
    }

    /// Bytes of token ids.
    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = guarded("decode_bytes", || py.detach(|| self.inner.backend().decode_bytes(&ids)).map_err(to_py_err))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Tokens of one OpenAI-format message dict, without the reply priming.
    fn count_message(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<usize> {
        let m = extract_message(py, 0, message)?;
        guarded("count_message", || Ok(self.inner.count_message(&m)))
    }

    /// Tokens of a prompt: `sum(count_message(m)) + reply_priming`.
    fn count_messages(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<usize> {
        let (infos, _) = counted_messages(py, &self.inner, messages, false)?;
        if infos.is_empty() {
            return Ok(0); // no prompt, no reply to prime
        }
        Ok(infos.iter().map(|i| i.tokens as usize).sum::<usize>() + self.inner.format().reply_priming as usize)
    }

    /// Tokens of each message (without priming), in order.
    fn count_each_message(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        let (infos, _) = counted_messages(py, &self.inner, messages, false)?;
        Ok(infos.iter().map(|i| i.tokens as usize).collect())
    }

    /// Cache statistics: hits, misses, size (entries) and capacity.
    fn cache_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.inner.cache_info();
        let d = PyDict::new(py);
        d.set_item("hits", info.hits)?;
        d.set_item("misses", info.misses)?;
        d.set_item("size", info.size)?;
        d.set_item("capacity", info.capacity)?;
        Ok(d)
    }

    fn clear_cache(&self) {
        self.inner.clear_cache()
    }

    /// The multiplier applied to estimates (1.0 for exact counters).
    #[getter]
    fn calibration(&self) -> f64 {
        self.inner.calibration()
    }

    /// Learn from a provider's reported prompt tokens (`actual`) vs this counter's estimate.
    fn calibrate(&self, estimated: u64, actual: u64) {
        self.inner.calibrate(estimated, actual)
    }

    fn set_calibration(&self, factor: f64) -> PyResult<()> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(PyValueError::new_err(format!("calibration factor must be a positive number, got {factor}")));
        }
        self.inner.set_calibration(factor);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("<Counter {} exact={}>", self.inner.backend().name(), self.inner.is_exact())
    }
}

fn load_backend(
    kind: &str,
    source: Option<PathBuf>,
    pattern: Option<String>,
    special_tokens: Option<HashMap<String, u32>>,
    nfc: bool,
) -> Result<(Arc<dyn Backend>, Arc<CountCache>), Error> {
    let need_source = || source.clone().ok_or_else(|| Error::Value(format!("Counter kind {kind:?} needs a source")));
    match kind {
        "openai" => {
            let name = need_source()?.to_string_lossy().into_owned();
            shared_backend(format!("openai:{name}"), || {
                OpenAiEncoding::get(&name)
                    .map(|e| Arc::new(e) as Arc<dyn Backend>)
                    .ok_or_else(|| Error::Value(format!("unknown encoding {name:?}; embedded: cl100k_base, o200k_base")))
            })
        }
        "tiktoken" => {
            let path = need_source()?;
            let pattern = pattern.ok_or_else(|| Error::Value("a .tiktoken vocabulary needs its pre-tokenizer pattern".into()))?;
            let mut special: Vec<(String, u32)> = special_tokens.unwrap_or_default().into_iter().collect();
            special.sort();
            let key = format!("tiktoken:{}:{pattern}:{nfc}:{special:?}", path.display());
            shared_backend(key, || Ok(Arc::new(TiktokenFile::load(&path, &pattern, &special, nfc)?) as Arc<dyn Backend>))
        }
        "tokenizer_json" => {
            let path = need_source()?;
            shared_backend(format!("hf:{}", path.display()), || Ok(Arc::new(HfTokenizer::load(&path)?) as Arc<dyn Backend>))
        }
        "heuristic" => shared_backend("heuristic".into(), || Ok(Arc::new(Heuristic) as Arc<dyn Backend>)),
        other => Err(Error::Value(format!("unknown Counter kind {other:?}"))),
    }
}

// ---------------------------------------------------------------- Encoding

/// A tiktoken-shaped view of an embedded encoding: `encode`, `decode`, `count`.
#[pyclass(module = "windowfit._core", name = "Encoding", frozen)]
pub struct PyEncoding {
    counter: Py<PyCounter>,
    name: String,
}

#[pymethods]
impl PyEncoding {
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The counter behind this encoding (shares its cache).
    #[getter]
    fn counter(&self, py: Python<'_>) -> Py<PyCounter> {
        self.counter.clone_ref(py)
    }

    /// Token ids of `text`, equal to tiktoken's `encode_ordinary`.
    fn encode(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        self.counter.get().encode(py, text)
    }

    fn encode_ordinary(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        self.counter.get().encode(py, text)
    }

    /// Token ids of each text; the GIL is released and large batches use all cores.
    fn encode_batch(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u32>>> {
        use rayon::prelude::*;
        let texts = extract_texts(texts)?;
        let backend = self.counter.get().inner.backend().clone();
        guarded("encode_batch", || {
            py.detach(|| texts.par_iter().map(|t| backend.encode(t.as_ref())).collect::<Result<Vec<_>, _>>()).map_err(to_py_err)
        })
    }

    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        self.counter.get().decode(py, ids)
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyBytes>> {
        self.counter.get().decode_bytes(py, ids)
    }

    /// `len(encode(text))`, cached by content.
    fn count(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.counter.get().count(py, text)
    }

    fn count_many(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        self.counter.get().count_many(py, texts)
    }

    /// `count(text)` if it is at most `limit`, else None; stops reading once past `limit`.
    fn count_until(&self, py: Python<'_>, text: &Bound<'_, PyAny>, limit: i64) -> PyResult<Option<usize>> {
        self.counter.get().count_until(py, text, limit)
    }

    fn __repr__(&self) -> String {
        format!("<Encoding {:?}>", self.name)
    }
}

/// The embedded encoding `name` ("cl100k_base" or "o200k_base").
#[pyfunction]
fn get_encoding(py: Python<'_>, name: &str) -> PyResult<PyEncoding> {
    let (backend, cache) = load_backend("openai", Some(PathBuf::from(name)), None, None, false).map_err(|e| match e {
        Error::Value(m) => UnknownEncodingError::new_err(m),
        e => to_py_err(e),
    })?;
    let counter = Py::new(py, PyCounter { inner: Arc::new(Counter::new(backend, cache, MessageFormat::default())) })?;
    Ok(PyEncoding { counter, name: name.to_string() })
}

// ---------------------------------------------------------------- fit

fn role_of(role: &str) -> Role {
    match role {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        "function" => Role::Function,
        _ => Role::Other,
    }
}

fn unanswered_of(s: &str) -> PyResult<Unanswered> {
    match s {
        "drop" => Ok(Unanswered::Drop),
        "strip" => Ok(Unanswered::Strip),
        other => Err(PyValueError::new_err(format!("unanswered must be 'drop' or 'strip', not {other:?}"))),
    }
}

/// The warm path: read a message's fields as borrowed pointers (no reference counting, no
/// copies), hash them into the same key `Message::key` gives, and return what selection
/// needs. Returns `None` for anything unusual (multi-modal parts, Anthropic blocks, wrong
/// types): the caller then does the full, validating extraction, which also reports errors.
mod light {
    use std::sync::Mutex;

    use pyo3::ffi;
    use rustc_hash::FxHashMap;
    use pyo3::prelude::*;

    use super::ROLES;
    use crate::count::{text_hash, KeyBuilder, MessageFormat};

    pub struct Keys {
        pub role: *mut ffi::PyObject,
        pub name: *mut ffi::PyObject,
        pub content: *mut ffi::PyObject,
        pub kind: *mut ffi::PyObject,
        pub text: *mut ffi::PyObject,
        pub tool_calls: *mut ffi::PyObject,
        pub id: *mut ffi::PyObject,
        pub function: *mut ffi::PyObject,
        pub arguments: *mut ffi::PyObject,
        pub tool_call_id: *mut ffi::PyObject,
    }

    pub struct Light {
        pub key: u128,
        pub role: &'static str,
        pub call_ids: Vec<String>,
        pub result_ids: Vec<String>,
        pub has_content: bool,
    }

    /// Content hashes of recently seen large strings, by object identity. The memo holds a
    /// strong reference, so the object can't be freed and its address reused: the same
    /// pointer is the same immutable string, and re-fitting a history costs a lookup per
    /// message instead of hashing every byte again. Bounded by the bytes it keeps alive.
    pub struct HashMemo {
        map: FxHashMap<usize, (Py<PyAny>, u128)>,
        bytes: usize,
    }

    const MEMO_MIN_LEN: usize = 256;
    const MEMO_MAX_BYTES: usize = 64 << 20;

    static MEMO: Mutex<Option<HashMemo>> = Mutex::new(None);

    /// The memo, locked once per batch of messages. Waiting releases the GIL: the holder may
    /// run Python code (a generator of messages) and need the GIL back to finish.
    pub fn memo(py: Python<'_>) -> std::sync::MutexGuard<'static, Option<HashMemo>> {
        use pyo3::sync::MutexExt;
        MEMO.lock_py_attached(py).unwrap_or_else(|p| p.into_inner())
    }

    /// The memoized hash of `o`, found by address alone: the memo holds a reference, so a
    /// known address is the same string, and the object itself is not touched (reading
    /// thousands of scattered string headers is what a warm fit otherwise waits on).
    fn memo_hash(memo: &Option<HashMemo>, o: *mut ffi::PyObject) -> Option<u128> {
        memo.as_ref()?.map.get(&(o as usize)).map(|(_, h)| *h)
    }

    /// Fields of one dict by walking its entries once (no hashing of absent keys). Interned
    /// keys match by pointer; others (e.g. from json.loads) by text.
    #[derive(Default)]
    struct Fields {
        role: Option<*mut ffi::PyObject>,
        name: Option<*mut ffi::PyObject>,
        content: Option<*mut ffi::PyObject>,
        tool_calls: Option<*mut ffi::PyObject>,
        tool_call_id: Option<*mut ffi::PyObject>,
    }

    /// Safety: GIL held, `d` a live dict.
    unsafe fn fields(d: *mut ffi::PyObject, k: &Keys) -> Option<Fields> {
        let mut f = Fields::default();
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        while ffi::PyDict_Next(d, &mut pos, &mut key, &mut value) != 0 {
            if value == ffi::Py_None() {
                continue;
            }
            let slot = if key == k.role {
                &mut f.role
            } else if key == k.content {
                &mut f.content
            } else if key == k.tool_calls {
                &mut f.tool_calls
            } else if key == k.tool_call_id {
                &mut f.tool_call_id
            } else if key == k.name {
                &mut f.name
            } else {
                match text(key)? {
                    "function_call" => return None, // legacy field: the full path counts it
                    "role" => &mut f.role,
                    "content" => &mut f.content,
                    "tool_calls" => &mut f.tool_calls,
                    "tool_call_id" => &mut f.tool_call_id,
                    "name" => &mut f.name,
                    _ => continue,
                }
            };
            *slot = Some(value);
        }
        Some(f)
    }

    /// `d[key]` borrowed, or None when missing or None.
    /// Safety: GIL held, `d` a live dict, `key` a live str.
    unsafe fn item(d: *mut ffi::PyObject, key: *mut ffi::PyObject) -> Option<*mut ffi::PyObject> {
        let v = ffi::PyDict_GetItemWithError(d, key);
        if v.is_null() {
            // Missing, or an error (then cleared: the full path will report it).
            if !ffi::PyErr_Occurred().is_null() {
                ffi::PyErr_Clear();
            }
            return None;
        }
        (v != ffi::Py_None()).then_some(v)
    }

    /// The UTF-8 of a str, borrowed from the string object's cached representation; `None`
    /// for non-str or strings with lone surrogates.
    /// Safety: GIL held and the object alive while the result is used.
    unsafe fn text<'a>(o: *mut ffi::PyObject) -> Option<&'a str> {
        if ffi::PyUnicode_Check(o) == 0 {
            return None;
        }
        let mut size: ffi::Py_ssize_t = 0;
        let p = ffi::PyUnicode_AsUTF8AndSize(o, &mut size);
        if p.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        Some(std::str::from_utf8_unchecked(std::slice::from_raw_parts(p as *const u8, size as usize)))
    }

    /// Add a content text to the key, through the identity memo for large strings.
    /// Safety: GIL held, `o` a live str whose UTF-8 is `t`.
    unsafe fn content_text(py: Python<'_>, memo: &mut Option<HashMemo>, o: *mut ffi::PyObject, t: &str, key: &mut KeyBuilder) {
        if t.len() < MEMO_MIN_LEN {
            key.text(t);
            return;
        }
        let memo = memo.get_or_insert_with(|| HashMemo { map: FxHashMap::default(), bytes: 0 });
        if let Some((_, h)) = memo.map.get(&(o as usize)) {
            key.text_hashed(*h);
            return;
        }
        let h = text_hash(t);
        if memo.bytes + t.len() > MEMO_MAX_BYTES {
            memo.map.clear(); // drops the references; the GIL is held
            memo.bytes = 0;
        }
        memo.map.insert(o as usize, (Borrowed::from_ptr(py, o).to_owned().unbind(), h));
        memo.bytes += t.len();
        key.text_hashed(h);
    }

    unsafe fn is_dict(o: *mut ffi::PyObject) -> bool {
        ffi::PyDict_Check(o) != 0
    }

    /// Safety: GIL held; `obj` alive for the call (results hold no borrowed pointers).
    pub unsafe fn read(
        py: Python<'_>,
        obj: *mut ffi::PyObject,
        k: &Keys,
        format: &MessageFormat,
        key: &mut KeyBuilder,
        memo: &mut Option<HashMemo>,
    ) -> Option<Light> {
        if !is_dict(obj) {
            return None;
        }
        let f = fields(obj, k)?;
        let role_text = text(f.role?)?;
        let role = *ROLES.iter().find(|r| **r == role_text)?;
        key.reset(format);
        key.role(role);
        if let Some(n) = f.name {
            key.name(text(n)?);
        }
        let mut has_content = false;
        if let Some(c) = f.content {
            if let Some(h) = memo_hash(memo, c) {
                key.text_hashed(h);
                has_content = true; // only strings of MEMO_MIN_LEN+ bytes are memoized
            } else if let Some(t) = text(c) {
                content_text(py, memo, c, t, key);
                has_content = !t.is_empty();
            } else if ffi::PyList_Check(c) != 0 {
                for j in 0..ffi::PyList_Size(c) {
                    let part = ffi::PyList_GetItem(c, j);
                    if part.is_null() {
                        ffi::PyErr_Clear();
                        return None;
                    }
                    let t = match text(part) {
                        Some(t) => t,
                        None if is_dict(part) => match text(item(part, k.kind)?)? {
                            "text" | "input_text" | "output_text" => text(item(part, k.text)?)?,
                            _ => return None,
                        },
                        None => return None,
                    };
                    key.text(t);
                    has_content |= !t.is_empty();
                }
            } else {
                return None;
            }
        }
        let mut call_ids = Vec::new();
        if let Some(calls) = f.tool_calls {
            if ffi::PyList_Check(calls) == 0 {
                return None;
            }
            for j in 0..ffi::PyList_Size(calls) {
                let call = ffi::PyList_GetItem(calls, j);
                if call.is_null() || !is_dict(call) {
                    ffi::PyErr_Clear();
                    return None;
                }
                let id = text(item(call, k.id)?)?;
                let func = item(call, k.function)?;
                if !is_dict(func) {
                    return None;
                }
                let name = text(item(func, k.name)?)?;
                let arguments = match item(func, k.arguments) {
                    Some(a) => text(a)?,
                    None => "",
                };
                key.call(name, arguments);
                call_ids.push(id.to_string());
            }
        }
        let mut result_ids = Vec::new();
        match f.tool_call_id {
            Some(id) => {
                let id = text(id)?;
                key.result_id(id);
                result_ids.push(id.to_string());
            }
            None if role == "tool" => return None,
            None => {}
        }
        Some(Light { key: key.finish(), role, call_ids, result_ids, has_content })
    }
}

fn info_of(m: &Message<Text>, tokens: usize) -> MessageInfo {
    MessageInfo {
        role: role_of(m.role.as_ref()),
        tokens: tokens as u64,
        call_ids: m.tool_calls.iter().map(|c| c.id.as_ref().to_string()).collect(),
        result_ids: m.result_ids.iter().map(|r| r.as_ref().to_string()).collect(),
        has_content: m.has_content(),
    }
}

/// Messages read for counting and selection: `infos` (tokens filled for cache hits), the
/// misses still to count (`pending`: index, key, full message), and with `keep_calls` the
/// full form of messages making tool calls (for recounting when calls are stripped).
struct ReadMessages<'py> {
    infos: Vec<MessageInfo>,
    /// By message index: the key and message of each one still to count.
    pending: Vec<Option<(u128, Pending<'py>)>>,
    pending_count: usize,
    full: HashMap<usize, Message<Text>>,
}

/// A message not found in the cache: extracted only if it ever needs counting, since a fit
/// leaves most of a long history uncounted and re-reads it every turn.
enum Pending<'py> {
    /// Read by the light path (which checks a subset of what full extraction checks).
    Read(Bound<'py, PyAny>),
    Extracted(Message<Text>),
}

impl<'py> ReadMessages<'py> {
    /// Count the pending messages among `indices` (in parallel when there is enough new
    /// text), without the GIL.
    fn count_pending(
        &mut self,
        py: Python<'py>,
        counter: &Counter,
        keep_calls: bool,
        indices: impl IntoIterator<Item = usize>,
    ) -> PyResult<()> {
        let mut now = Vec::new();
        for i in indices {
            if let Some((key, p)) = self.pending.get_mut(i).and_then(Option::take) {
                let m = match p {
                    Pending::Read(obj) => extract_message(py, i, &obj)?,
                    Pending::Extracted(m) => m,
                };
                now.push((i, key, m));
            }
        }
        self.pending_count -= now.len();
        if now.is_empty() {
            return Ok(());
        }
        let counts = guarded("counting", || {
            Ok(py.detach(|| {
                let refs: Vec<(u128, &Message<Text>)> = now.iter().map(|(_, k, m)| (*k, m)).collect();
                counter.count_missing(&refs)
            }))
        })?;
        for ((i, _, m), t) in now.into_iter().zip(counts) {
            self.infos[i].tokens = t as u64;
            if keep_calls && !m.tool_calls.is_empty() {
                self.full.insert(i, m);
            }
        }
        Ok(())
    }
}

/// Each message's `MessageInfo` with its token count. Warm messages cost a borrowed read and
/// a hash; the others are fully extracted (with the GIL) and counted without it.
fn counted_messages(
    py: Python<'_>,
    counter: &Counter,
    messages: &Bound<'_, PyAny>,
    keep_calls: bool,
) -> PyResult<(Vec<MessageInfo>, HashMap<usize, Message<Text>>)> {
    let mut read = read_messages(py, counter, messages, keep_calls)?;
    let n = read.infos.len();
    read.count_pending(py, counter, keep_calls, 0..n)?;
    Ok((read.infos, read.full))
}

/// Read every message; count nothing that is not already cached.
fn read_messages<'py>(
    py: Python<'py>,
    counter: &Counter,
    messages: &Bound<'py, PyAny>,
    keep_calls: bool,
) -> PyResult<ReadMessages<'py>> {
    if messages.is_instance_of::<PyDict>() || messages.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!("messages must be a list of message dicts, not a {}", type_name(messages))));
    }
    let keys = light::Keys {
        role: pyo3::intern!(py, "role").as_ptr(),
        name: pyo3::intern!(py, "name").as_ptr(),
        content: pyo3::intern!(py, "content").as_ptr(),
        kind: pyo3::intern!(py, "type").as_ptr(),
        text: pyo3::intern!(py, "text").as_ptr(),
        tool_calls: pyo3::intern!(py, "tool_calls").as_ptr(),
        id: pyo3::intern!(py, "id").as_ptr(),
        function: pyo3::intern!(py, "function").as_ptr(),
        arguments: pyo3::intern!(py, "arguments").as_ptr(),
        tool_call_id: pyo3::intern!(py, "tool_call_id").as_ptr(),
    };
    let format = counter.format();
    let mut key_builder = KeyBuilder::new(&format);
    let mut memo = light::memo(py);
    let mut infos = Vec::with_capacity(messages.len().unwrap_or(0));
    let mut missing: Vec<Option<(u128, Pending<'py>)>> = Vec::new();
    let mut pending_count = 0usize;
    let mut full: HashMap<usize, Message<Text>> = HashMap::new();
    for (i, obj) in messages.try_iter()?.enumerate() {
        let obj = obj?;
        // SAFETY: the GIL is held and `obj` outlives the call; `read` keeps no pointers.
        let light = unsafe { light::read(py, obj.as_ptr(), &keys, &format, &mut key_builder, &mut memo) };
        match light {
            Some(l) => {
                let info = MessageInfo {
                    role: role_of(l.role),
                    tokens: 0,
                    call_ids: l.call_ids,
                    result_ids: l.result_ids,
                    has_content: l.has_content,
                };
                let needs_full = keep_calls && !info.call_ids.is_empty();
                match counter.cached_message(l.key) {
                    Some(t) => {
                        infos.push(MessageInfo { tokens: t as u64, ..info });
                        if needs_full {
                            full.insert(i, extract_message(py, i, &obj)?);
                        }
                    }
                    None => {
                        infos.push(info);
                        missing.resize_with(i + 1, || None);
                        missing[i] = Some((l.key, Pending::Read(obj)));
                        pending_count += 1;
                    }
                }
            }
            None => {
                let m = extract_message(py, i, &obj)?;
                let key = m.key(&format, &[]);
                match counter.cached_message(key) {
                    Some(t) => {
                        infos.push(info_of(&m, t));
                        if keep_calls && !m.tool_calls.is_empty() {
                            full.insert(i, m);
                        }
                    }
                    None => {
                        infos.push(info_of(&m, 0));
                        missing.resize_with(i + 1, || None);
                        missing[i] = Some((key, Pending::Extracted(m)));
                        pending_count += 1;
                    }
                }
            }
        }
    }
    Ok(ReadMessages { infos, pending: missing, pending_count, full })
}

/// Token count given to messages the selection never needs to count: larger than any
/// budget, so a unit holding one never fits (see `count_for_window`).
const UNCOUNTED: u64 = u64::MAX >> 4;

/// Count only what the window can reach. The window grows newest-first and contiguously, so
/// once the valid, non-pin messages of a suffix `[b, n)` together with the pins exceed the
/// budget, no message before `b` can be kept: those stay uncounted (cold fits of long
/// histories then cost the window, not the history). Pins are always counted; `strip` mode
/// and explicit pins count everything (recounted units make the bound unsafe).
fn count_for_window<'py>(
    py: Python<'py>,
    counter: &Counter,
    read: &mut ReadMessages<'py>,
    budget: u64,
    opts: &FitOptions,
) -> PyResult<bool> {
    let keep_calls = matches!(opts.unanswered, Unanswered::Strip);
    let n = read.infos.len();
    if read.pending_count == 0 {
        return Ok(true);
    }
    if keep_calls || !opts.pinned.is_empty() {
        read.count_pending(py, counter, keep_calls, 0..n)?;
        return Ok(true);
    }
    // Validity (pairing) reads ids and roles only; the token counts are not used.
    let valid = fit::repair(&read.infos, Unanswered::Drop, 0, &|_, _| 0).kept;
    let mut is_valid = vec![false; n];
    for i in valid {
        if let Some(v) = is_valid.get_mut(i) {
            *v = true;
        }
    }
    // Possible pins, counted up front: system/developer messages and the latest user turn.
    let last_user = read.infos.iter().rposition(|m| m.is_user_turn());
    let is_pin = |i: usize, m: &MessageInfo| m.role.is_system() || Some(i) == last_user;
    let pins: Vec<bool> = read.infos.iter().enumerate().map(|(i, m)| is_pin(i, m)).collect();
    let pin_indices: Vec<usize> = (0..n).filter(|&i| pins[i]).collect();
    read.count_pending(py, counter, false, pin_indices)?;
    let pins_tokens: u128 = read.infos.iter().zip(&pins).filter(|(_, p)| **p).map(|(m, _)| u128::from(m.tokens)).sum();
    let limit = u128::from(budget);
    let mut b = n;
    let mut step = 256usize;
    let mut window: u128 = 0;
    while b > 0 {
        let nb = b.saturating_sub(step);
        read.count_pending(py, counter, false, nb..b)?;
        window += (nb..b).filter(|&i| is_valid[i] && !pins[i]).map(|i| u128::from(read.infos[i].tokens)).sum::<u128>();
        b = nb;
        if window + pins_tokens + u128::from(opts.reply_priming) > limit {
            break;
        }
        step = step.saturating_mul(2);
    }
    let complete = read.pending_count == 0;
    for (info, slot) in read.infos.iter_mut().zip(&read.pending) {
        if slot.is_some() {
            info.tokens = UNCOUNTED;
        }
    }
    Ok(complete)
}

fn plan_to_py<'py>(py: Python<'py>, plan: FitPlan) -> PyResult<Bound<'py, PyTuple>> {
    let s = &plan.stats;
    let stats = PyDict::new(py);
    stats.set_item("pins_tokens", s.pins_tokens)?;
    stats.set_item("tokens_kept", s.tokens_kept)?;
    stats.set_item("tokens_dropped", s.tokens_dropped)?;
    stats.set_item("messages_kept", s.messages_kept)?;
    stats.set_item("messages_dropped", s.messages_dropped)?;
    stats.set_item("orphans_removed", s.orphans_removed)?;
    stats.set_item("unanswered_removed", s.unanswered_removed)?;
    stats.set_item("calls_stripped", s.calls_stripped)?;
    stats.set_item("stop_reason", s.stop_reason.as_str())?;
    (plan.kept, plan.dropped, plan.stripped, plan.tokens, stats).into_pyobject(py)
}

/// Select the messages to send: pins plus the longest recent window of whole tool units
/// (and, before the latest user turn, whole rounds) within `budget`. Returns
/// `(kept, dropped, stripped, tokens, stats)`; the Python layer builds the `FitResult`.
#[pyfunction]
#[pyo3(signature = (counter, messages, budget, *, keep_system=true, keep_last_user=true, start_on_user=true, pinned=Vec::new(), unanswered="drop"))]
#[allow(clippy::too_many_arguments)]
fn fit_indices<'py>(
    py: Python<'py>,
    counter: &Bound<'py, PyCounter>,
    messages: &Bound<'py, PyAny>,
    budget: u64,
    keep_system: bool,
    keep_last_user: bool,
    start_on_user: bool,
    pinned: Vec<usize>,
    unanswered: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let counter = counter.get().inner.clone();
    let strip = unanswered_of(unanswered)?;
    let mut read = read_messages(py, &counter, messages, matches!(strip, Unanswered::Strip))?;
    let opts = FitOptions {
        keep_system,
        keep_last_user,
        start_on_user,
        pinned,
        unanswered: strip,
        reply_priming: counter.format().reply_priming as u64,
    };
    let complete = count_for_window(py, &counter, &mut read, budget, &opts)?;
    let (infos, full) = (read.infos, read.full);
    let plan = guarded("fit", || {
        py.detach(|| {
            let recount = |i: usize, skip: &[String]| -> u64 {
                let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
                full.get(&i).map_or(0, |m| counter.count_message_without(m, &skip) as u64)
            };
            fit::fit(&infos, budget, &opts, &recount)
        })
        .map_err(to_py_err)
    })?;
    let out = plan_to_py(py, plan)?;
    if !complete {
        // Messages the window could not reach were never counted: the Python layer counts
        // `tokens_dropped` on demand.
        out.get_item(4)?.cast::<PyDict>()?.set_item("tokens_dropped", py.None())?;
    }
    Ok(out)
}

/// Only the orphan / unanswered-call cleaning of `fit_indices`, with no budget.
#[pyfunction]
#[pyo3(signature = (counter, messages, *, unanswered="drop"))]
fn repair_indices<'py>(
    py: Python<'py>,
    counter: &Bound<'py, PyCounter>,
    messages: &Bound<'py, PyAny>,
    unanswered: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let counter = counter.get().inner.clone();
    let mode = unanswered_of(unanswered)?;
    let (infos, full) = counted_messages(py, &counter, messages, matches!(mode, Unanswered::Strip))?;
    let priming = counter.format().reply_priming as u64;
    let plan = guarded("repair", || {
        Ok(py.detach(|| {
            let recount = |i: usize, skip: &[String]| -> u64 {
                let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
                full.get(&i).map_or(0, |m| counter.count_message_without(m, &skip) as u64)
            };
            fit::repair(&infos, mode, priming, &recount)
        }))
    })?;
    plan_to_py(py, plan)
}

// ---------------------------------------------------------------- truncate

/// Cut `text` to the limits (tokens by `counter`, lines, bytes: the tightest wins), keeping
/// its head, tail or both around `marker`. Returns the fields of `windowfit.Truncation`.
#[pyfunction]
#[pyo3(signature = (counter, text, *, max_tokens=None, max_lines=None, max_bytes=None, direction="head",
                    marker=truncate::DEFAULT_MARKER, head_ratio=0.5))]
#[allow(clippy::too_many_arguments)]
fn truncate_text<'py>(
    py: Python<'py>,
    counter: &Bound<'py, PyCounter>,
    text: &Bound<'py, PyAny>,
    max_tokens: Option<usize>,
    max_lines: Option<usize>,
    max_bytes: Option<usize>,
    direction: &str,
    marker: &str,
    head_ratio: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let counter = counter.get().inner.clone();
    let text = extract_text(text, "text")?;
    let direction: Direction = direction.parse().map_err(to_py_err)?;
    // An estimate's counts are scaled by its calibration: cut to the raw count that scales
    // to at most max_tokens, so re-counting with the same counter stays within the limit.
    let scale = if counter.is_exact() { 1.0 } else { counter.calibration() };
    let raw_max = max_tokens.map(|m| if scale == 1.0 { m } else { (m as f64 / scale).floor() as usize });
    let limits = Limits { max_tokens: raw_max, max_lines, max_bytes };
    let marker = marker.to_string();
    let t = guarded("truncate", || {
        py.detach(|| {
            let opts = TruncateOptions { direction, marker: &marker, head_ratio };
            truncate::truncate(counter.backend().as_ref(), text.as_ref(), &limits, &opts)
        })
        .map_err(to_py_err)
    })?;
    let scaled = |n: usize| if scale == 1.0 { n } else { (n as f64 * scale).ceil() as usize };
    let d = PyDict::new(py);
    d.set_item("text", &t.text)?;
    d.set_item("truncated", t.truncated)?;
    d.set_item("original_tokens", scaled(t.original_tokens))?;
    d.set_item("tokens", scaled(t.tokens))?;
    d.set_item("omitted_tokens", scaled(t.omitted_tokens))?;
    d.set_item("original_lines", t.original_lines)?;
    d.set_item("kept_lines", t.kept_lines)?;
    d.set_item("original_bytes", t.original_bytes)?;
    d.set_item("kept_bytes", t.kept_bytes)?;
    // Python indexes strings by character, Rust by byte.
    let src = text.as_ref();
    let head_chars = src.get(..t.head_end).map_or(0, |h| h.chars().count());
    let tail_chars = head_chars + src.get(t.head_end..t.tail_start).map_or(0, |m| m.chars().count());
    d.set_item("head_end", head_chars)?;
    d.set_item("tail_start", tail_chars)?;
    d.set_item("marker_used", t.marker_used)?;
    d.set_item("direction", direction.as_str())?;
    Ok(d)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyCounter>()?;
    m.add_class::<PyEncoding>()?;
    m.add_function(wrap_pyfunction!(get_encoding, m)?)?;
    m.add_function(wrap_pyfunction!(fit_indices, m)?)?;
    m.add_function(wrap_pyfunction!(repair_indices, m)?)?;
    m.add_function(wrap_pyfunction!(truncate_text, m)?)?;
    m.add("DEFAULT_MARKER", truncate::DEFAULT_MARKER)?;
    m.add("BudgetError", py.get_type::<BudgetError>())?;
    m.add("InvalidMessageError", py.get_type::<InvalidMessageError>())?;
    m.add("MessageTypeError", py.get_type::<MessageTypeError>())?;
    m.add("VocabularyError", py.get_type::<VocabularyError>())?;
    m.add("UnknownEncodingError", py.get_type::<UnknownEncodingError>())?;
    m.add("ENCODINGS", PyTuple::new(py, crate::tokenize::OPENAI_ENCODINGS)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
