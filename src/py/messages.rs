//! Reading Python message dicts into the core's message model ([`crate::message`]).
//!
//! Two readers produce the same cache key for a message: the light one in `light` (borrowed
//! pointers, warm path, gives up on anything unusual) and [`extract_message`] here (safe,
//! validating, every format; its errors name the message index and field). A test proves
//! they agree (`_message_keys`).

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString};

use super::errors::{self, guarded, message_error, message_type_error, type_name, ArgumentTypeError};
use super::light;
use super::text::{id_text, text_from_str, Text};
use crate::count::{Counter, ImageDetail, KeyBuilder, Message, Part, ToolCall};
use crate::fit::{CountOnDemand, UNCOUNTED};
use crate::message::{MessageInfo, ROLES};

fn id_field(index: usize, field: &str, v: &Bound<'_, PyAny>) -> PyResult<Text> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(id_text(s)),
        Err(_) => Err(message_type_error(index, field, "str", v)),
    }
}

/// `d[key]` unless missing or None. Keys are interned Python strings: building a new key
/// object per lookup dominated the cost of reading large histories.
fn get_opt<'py>(d: &Bound<'py, PyDict>, key: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}

fn str_field(index: usize, field: &str, v: &Bound<'_, PyAny>) -> PyResult<Text> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(text_from_str(s)),
        Err(_) => Err(message_type_error(index, field, "str", v)),
    }
}

/// How deep content may nest (`tool_result` content holding parts, values inside a
/// `tool_use.input` or an unknown part) before the reader refuses it. Real messages nest a
/// few levels; the bound keeps the reader's recursion (and its stack) small on any thread,
/// and turns a value that contains itself into an error instead of endless recursion.
pub(crate) const MAX_NESTING: usize = 64;

fn too_deep(index: usize, field: &str) -> PyErr {
    message_error(
        index,
        field,
        format!("nested more than {MAX_NESTING} levels deep (or a list or dict that contains itself)"),
    )
}

/// Refuses a value nested deeper than [`MAX_NESTING`] (cycles included) before anything
/// recursive (such as `json.dumps`) walks it.
fn check_nesting(index: usize, field: &str, obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<()> {
    if depth > MAX_NESTING {
        return Err(too_deep(index, field));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        for v in d.values() {
            check_nesting(index, field, &v, depth + 1)?;
        }
    } else if let Ok(l) = obj.cast::<PyList>() {
        for v in l.iter() {
            check_nesting(index, field, &v, depth + 1)?;
        }
    } else if let Ok(t) = obj.cast::<pyo3::types::PyTuple>() {
        for v in t.iter() {
            check_nesting(index, field, &v, depth + 1)?;
        }
    }
    Ok(())
}

/// JSON text of a Python object, for Anthropic `tool_use.input` dicts; a value JSON cannot
/// hold (a set, an object) is an error naming the message and field.
fn json_text(py: Python<'_>, index: usize, field: &str, obj: &Bound<'_, PyAny>) -> PyResult<Text> {
    check_nesting(index, field, obj, 0)?;
    let dumps = py.import("json")?.getattr("dumps")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("ensure_ascii", false)?;
    kwargs.set_item("separators", (",", ":"))?;
    let s = dumps.call((obj,), Some(&kwargs)).map_err(|e| {
        let why = e.value(py).to_string();
        if e.is_instance_of::<PyTypeError>(py) {
            errors::MessageTypeError::new_err(format!("message {index}: {field}: expected a JSON value: {why}"))
        } else {
            message_error(index, field, format!("not a JSON value: {why}"))
        }
    })?;
    Ok(text_from_str(s.cast::<PyString>()?))
}

/// Every string inside an unknown part, so it is counted rather than silently ignored.
fn collect_strings(
    index: usize,
    field: &str,
    obj: &Bound<'_, PyAny>,
    out: &mut Vec<Part<Text>>,
    depth: usize,
) -> PyResult<()> {
    if depth > MAX_NESTING {
        return Err(too_deep(index, field));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        out.push(Part::Text(text_from_str(s)));
    } else if let Ok(d) = obj.cast::<PyDict>() {
        for (k, v) in d.iter() {
            if k.extract::<&str>().map(|k| k != "type").unwrap_or(true) {
                collect_strings(index, field, &v, out, depth + 1)?;
            }
        }
    } else if let Ok(l) = obj.cast::<PyList>() {
        for v in l.iter() {
            collect_strings(index, field, &v, out, depth + 1)?;
        }
    }
    Ok(())
}

fn image_size(index: usize, field: &str, d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<u32>> {
    match get_opt(d, &PyString::intern(d.py(), key))? {
        None => Ok(None),
        Some(v) => {
            let name = format!("{field}.{key}");
            // A bool is an int to Python, but `width=True` is a bug, not one pixel.
            if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
                return Err(message_type_error(index, &name, "an int (pixels)", &v));
            }
            match v.extract::<u32>() {
                Ok(n) => Ok(Some(n)),
                Err(_) => {
                    Err(message_error(index, &name, format!("must be between 0 and {} pixels, got {v}", u32::MAX)))
                }
            }
        }
    }
}

/// Reads one content part into `msg`; `depth` is how many `tool_result` contents enclose it.
fn extract_part(
    py: Python<'_>,
    index: usize,
    field: &str,
    part: &Bound<'_, PyAny>,
    msg: &mut Message<Text>,
    depth: usize,
) -> PyResult<()> {
    if depth > MAX_NESTING {
        return Err(too_deep(index, field));
    }
    if let Ok(s) = part.cast::<PyString>() {
        msg.parts.push(Part::Text(text_from_str(s)));
        return Ok(());
    }
    let d = as_dict(part)?.ok_or_else(|| message_type_error(index, field, "a dict content part", part))?;
    let d = &d;
    let kind = match get_opt(d, pyo3::intern!(d.py(), "type"))? {
        Some(t) => str_field(index, &format!("{field}.type"), &t)?,
        None => return Err(message_error(index, &format!("{field}.type"), "missing")),
    };
    match kind.as_ref() {
        "text" | "input_text" | "output_text" => {
            let t = get_opt(d, pyo3::intern!(d.py(), "text"))?
                .ok_or_else(|| message_error(index, &format!("{field}.text"), "missing"))?;
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
            let detail = match get_opt(src, pyo3::intern!(src.py(), "detail"))?
                .or(get_opt(d, pyo3::intern!(d.py(), "detail"))?)
            {
                None => ImageDetail::Auto,
                Some(v) => match v.extract::<&str>() {
                    Ok("low") => ImageDetail::Low,
                    Ok("high") => ImageDetail::High,
                    Ok("auto") => ImageDetail::Auto,
                    _ => {
                        return Err(message_error(index, &format!("{field}.detail"), "must be 'low', 'high' or 'auto'"))
                    }
                },
            };
            let width = image_size(index, field, src, "width")?.or(image_size(index, field, d, "width")?);
            let height = image_size(index, field, src, "height")?.or(image_size(index, field, d, "height")?);
            msg.parts.push(Part::Image { detail, width, height });
        }
        "input_audio" | "audio" | "file" | "input_file" | "document" => msg.parts.push(Part::Opaque),
        "tool_use" => {
            let id = get_opt(d, pyo3::intern!(d.py(), "id"))?
                .ok_or_else(|| message_error(index, &format!("{field}.id"), "missing"))?;
            let name = get_opt(d, pyo3::intern!(d.py(), "name"))?
                .ok_or_else(|| message_error(index, &format!("{field}.name"), "missing"))?;
            let arguments = match get_opt(d, pyo3::intern!(d.py(), "input"))? {
                Some(v) if v.is_instance_of::<PyString>() => str_field(index, &format!("{field}.input"), &v)?,
                Some(v) => json_text(py, index, &format!("{field}.input"), &v)?,
                None => Text::Owned("{}".into()),
            };
            msg.tool_calls.push(ToolCall {
                id: id_field(index, &format!("{field}.id"), &id)?,
                name: str_field(index, &format!("{field}.name"), &name)?,
                arguments,
            });
        }
        "tool_result" => {
            let id = get_opt(d, pyo3::intern!(d.py(), "tool_use_id"))?
                .ok_or_else(|| message_error(index, &format!("{field}.tool_use_id"), "missing"))?;
            msg.result_ids.push(id_field(index, &format!("{field}.tool_use_id"), &id)?);
            let first = msg.parts.len();
            match get_opt(d, pyo3::intern!(d.py(), "content"))? {
                None => {}
                Some(c) if c.is_instance_of::<PyString>() => {
                    msg.parts.push(Part::Text(str_field(index, &format!("{field}.content"), &c)?))
                }
                Some(c) => {
                    let list = c
                        .cast::<PyList>()
                        .map_err(|_| message_type_error(index, &format!("{field}.content"), "str or list", &c))?;
                    for (j, sub) in list.iter().enumerate() {
                        extract_part(py, index, &format!("{field}.content[{j}]"), &sub, msg, depth + 1)?;
                    }
                }
            }
            // A nested block's range lies inside this one: only the outermost is recorded.
            msg.result_parts.retain(|r| r.start < first);
            msg.result_parts.push(first..msg.parts.len());
        }
        // Unknown part types: count every string in them rather than ignore them.
        _ => collect_strings(index, field, d, &mut msg.parts, depth)?,
    }
    Ok(())
}

/// `obj` as a dict: itself, or the dict `windowfit.messages.plain_message` reads from an SDK
/// object (an OpenAI or Anthropic pydantic message or block); None when it is neither.
fn as_dict<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Some(d.clone()));
    }
    static PLAIN: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = obj.py();
    let plain =
        PLAIN.get_or_try_init(py, || py.import("windowfit.messages")?.getattr("plain_message").map(Bound::unbind))?;
    Ok(plain.bind(py).call1((obj,))?.cast_into::<PyDict>().ok())
}

pub(crate) fn extract_message(py: Python<'_>, index: usize, obj: &Bound<'_, PyAny>) -> PyResult<Message<Text>> {
    let d = as_dict(obj)?.ok_or_else(|| {
        errors::MessageTypeError::new_err(format!(
            "message {index}: expected a dict in OpenAI chat format, got {} (convert framework messages with windowfit.adapters)",
            type_name(obj)
        ))
    })?;
    let d = &d;
    let role_obj = get_opt(d, pyo3::intern!(d.py(), "role"))?.ok_or_else(|| message_error(index, "role", "missing"))?;
    let role = str_field(index, "role", &role_obj)?;
    if !ROLES.contains(&role.as_ref()) {
        return Err(message_error(
            index,
            "role",
            format!("unknown role {:?}; expected one of {}", role.as_ref(), ROLES.join(", ")),
        ));
    }
    let mut msg = Message {
        role,
        name: None,
        parts: Vec::new(),
        tool_calls: Vec::new(),
        result_ids: Vec::new(),
        result_parts: Vec::new(),
        empty_calls: false,
    };
    if let Some(name) = get_opt(d, pyo3::intern!(d.py(), "name"))? {
        msg.name = Some(str_field(index, "name", &name)?);
    }
    match get_opt(d, pyo3::intern!(d.py(), "content"))? {
        None => {}
        Some(c) if c.is_instance_of::<PyString>() => msg.parts.push(Part::Text(str_field(index, "content", &c)?)),
        Some(c) => {
            let list = c
                .cast::<PyList>()
                .map_err(|_| message_type_error(index, "content", "str, list of parts or None", &c))?;
            for (j, part) in list.iter().enumerate() {
                extract_part(py, index, &format!("content[{j}]"), &part, &mut msg, 0)?;
            }
        }
    }
    if let Some(calls) = get_opt(d, pyo3::intern!(d.py(), "tool_calls"))? {
        let list = calls.cast::<PyList>().map_err(|_| message_type_error(index, "tool_calls", "list", &calls))?;
        msg.empty_calls = list.is_empty();
        for (j, call) in list.iter().enumerate() {
            let f = format!("tool_calls[{j}]");
            let cd = as_dict(&call)?.ok_or_else(|| message_type_error(index, &f, "dict", &call))?;
            let cd = &cd;
            let id = get_opt(cd, pyo3::intern!(cd.py(), "id"))?.ok_or_else(|| {
                message_error(
                    index,
                    &format!("{f}.id"),
                    "missing: every tool call needs an id to pair it with its result",
                )
            })?;
            let func = get_opt(cd, pyo3::intern!(cd.py(), "function"))?
                .ok_or_else(|| message_error(index, &format!("{f}.function"), "missing"))?;
            let fd =
                as_dict(&func)?.ok_or_else(|| message_type_error(index, &format!("{f}.function"), "dict", &func))?;
            let fd = &fd;
            let name = get_opt(fd, pyo3::intern!(fd.py(), "name"))?
                .ok_or_else(|| message_error(index, &format!("{f}.function.name"), "missing"))?;
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
        let fd = fc.cast::<PyDict>().map_err(|_| message_type_error(index, "function_call", "dict", &fc))?;
        for key in ["name", "arguments"] {
            if let Some(v) = get_opt(fd, &PyString::intern(py, key))? {
                msg.parts.push(Part::Text(str_field(index, &format!("function_call.{key}"), &v)?));
            }
        }
    }
    if let Some(id) = get_opt(d, pyo3::intern!(d.py(), "tool_call_id"))? {
        msg.result_ids.push(id_field(index, "tool_call_id", &id)?);
    } else if msg.role.as_ref() == "tool" {
        return Err(message_error(index, "tool_call_id", "missing: a tool message must name the call it answers"));
    }
    Ok(msg)
}

/// Full messages by index, kept for recounting tool-call messages when calls are stripped,
/// and messages carrying results beside text of their own (recounted without the results
/// when those answer nothing).
pub(crate) type FullMessages = HashMap<usize, Message<Text>>;

/// Whether a fit may need `m` again to recount it (see [`FullMessages`]).
fn keep_full(keep_calls: bool, m: &Message<Text>) -> bool {
    (keep_calls && !m.tool_calls.is_empty()) || (!m.result_parts.is_empty() && m.without_results().has_content())
}

/// Tokens of full message `m` as a fit sends it without the entries `skip`: the call
/// entries of a stripped call message, or all the results of a message kept for its own
/// content.
pub(crate) fn recount(counter: &Counter, m: &Message<Text>, skip: &[String]) -> u64 {
    if m.result_ids.is_empty() {
        let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
        counter.count_message_without(m, &skip) as u64
    } else {
        counter.count_message(&m.without_results()) as u64
    }
}

/// The messages of a history still to count, read but not yet counted (a fit leaves most
/// of a long history uncounted and re-reads it every turn, so extraction waits too), and
/// with `keep_calls` the full form of messages making tool calls (recounted when stripped).
pub(crate) struct Uncounted<'py> {
    py: Python<'py>,
    counter: Arc<Counter>,
    keep_calls: bool,
    /// By message index: the key and message of each one still to count.
    slots: Vec<Option<(u128, Unread<'py>)>>,
    left: usize,
    pub(crate) full: FullMessages,
}

/// A message not found in the cache.
enum Unread<'py> {
    /// Read by the light path (which checks a subset of what full extraction checks).
    Read(Bound<'py, PyAny>),
    Extracted(Message<Text>),
}

impl CountOnDemand for Uncounted<'_> {
    type Error = PyErr;

    fn pending(&self) -> usize {
        self.left
    }

    fn is_pending(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(Option::is_some)
    }

    /// Extracts (with the GIL) and counts (without it, in parallel when there is enough new
    /// text) the pending messages among `indices`.
    fn count(&mut self, infos: &mut [MessageInfo], indices: &[usize], cap: Option<u64>) -> PyResult<()> {
        let mut now = Vec::new();
        for &i in indices {
            if let Some((key, p)) = self.slots.get_mut(i).and_then(Option::take) {
                let m = match p {
                    Unread::Read(obj) => extract_message(self.py, i, &obj)?,
                    Unread::Extracted(m) => m,
                };
                now.push((i, key, m));
            }
        }
        self.left -= now.len();
        if now.is_empty() {
            return Ok(());
        }
        let counter = &self.counter;
        let cap = cap.map(|c| usize::try_from(c).unwrap_or(usize::MAX));
        let counts = guarded("counting", || {
            Ok(self.py.detach(|| {
                let refs: Vec<(u128, &Message<Text>)> = now.iter().map(|(_, k, m)| (*k, m)).collect();
                counter.count_missing_until(&refs, cap)
            }))
        })?;
        for ((i, _, m), t) in now.into_iter().zip(counts) {
            infos[i].tokens = t.map_or(UNCOUNTED, |t| t as u64);
            if keep_full(self.keep_calls, &m) {
                self.full.insert(i, m);
            }
        }
        Ok(())
    }
}

/// Each message's `MessageInfo` with its token count. Warm messages cost a borrowed read and
/// a hash; the others are fully extracted (with the GIL) and counted without it.
pub(crate) fn counted_messages(
    py: Python<'_>,
    counter: &Arc<Counter>,
    messages: &Bound<'_, PyAny>,
    keep_calls: bool,
) -> PyResult<(Vec<MessageInfo>, FullMessages)> {
    let (mut infos, mut rest) = read_messages(py, counter, messages, keep_calls, true)?;
    count_rest(&mut infos, &mut rest)?;
    Ok((infos, rest.full))
}

/// Each message's tokens, as `counted_messages` gives them but without reading the pairing
/// ids (counting needs none).
pub(crate) fn message_tokens(
    py: Python<'_>,
    counter: &Arc<Counter>,
    messages: &Bound<'_, PyAny>,
) -> PyResult<Vec<u64>> {
    let (mut infos, mut rest) = read_messages(py, counter, messages, false, false)?;
    count_rest(&mut infos, &mut rest)?;
    Ok(infos.iter().map(|m| m.tokens).collect())
}

/// Count whatever `read_messages` did not find in the cache (nothing, when warm).
fn count_rest(infos: &mut [MessageInfo], rest: &mut Uncounted<'_>) -> PyResult<()> {
    if rest.pending() == 0 {
        return Ok(());
    }
    let all: Vec<usize> = (0..infos.len()).collect();
    rest.count(infos, &all, None)
}

/// A lone dict or str iterates without error but is never a history.
fn check_list(messages: &Bound<'_, PyAny>) -> PyResult<()> {
    if messages.is_instance_of::<PyDict>() || messages.is_instance_of::<PyString>() {
        return Err(ArgumentTypeError::new_err(format!(
            "messages must be a list of message dicts, not a {}",
            type_name(messages)
        )));
    }
    Ok(())
}

/// Each message's pairing facts (ids, role, content), uncounted: for the tool-unit analysis.
pub(crate) fn message_infos(py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<MessageInfo>> {
    check_list(messages)?;
    let mut infos = Vec::with_capacity(messages.len().unwrap_or(0));
    for (i, obj) in messages.try_iter()?.enumerate() {
        infos.push(extract_message(py, i, &obj?)?.info(0));
    }
    Ok(infos)
}

/// Read every message; count nothing that is not already cached. Without `ids` the infos
/// of warm-read messages carry no call or result ids (for counting, which pairs nothing).
pub(crate) fn read_messages<'py>(
    py: Python<'py>,
    counter: &Arc<Counter>,
    messages: &Bound<'py, PyAny>,
    keep_calls: bool,
    ids: bool,
) -> PyResult<(Vec<MessageInfo>, Uncounted<'py>)> {
    check_list(messages)?;
    let keys = light::Keys::new(py);
    let format = counter.format();
    let mut key_builder = KeyBuilder::new(&format);
    let mut memo = light::memo(py);
    let mut infos = Vec::with_capacity(messages.len().unwrap_or(0));
    let mut missing: Vec<Option<(u128, Unread<'py>)>> = Vec::new();
    let mut pending_count = 0usize;
    let mut full: HashMap<usize, Message<Text>> = HashMap::new();
    for (i, obj) in messages.try_iter()?.enumerate() {
        let obj = obj?;
        // SAFETY: the GIL is held and `obj` outlives the call; `read` keeps no pointers.
        let light = unsafe { light::read(py, obj.as_ptr(), &keys, &format, &mut key_builder, &mut memo, ids) };
        match light {
            Some((key, info)) => {
                let needs_full = keep_calls && !info.call_ids.is_empty();
                match counter.peek_message(key) {
                    Some(t) => {
                        infos.push(MessageInfo { tokens: t as u64, ..info });
                        if needs_full {
                            full.insert(i, extract_message(py, i, &obj)?);
                        }
                    }
                    None => {
                        infos.push(info);
                        missing.resize_with(i + 1, || None);
                        missing[i] = Some((key, Unread::Read(obj)));
                        pending_count += 1;
                    }
                }
            }
            None => {
                let m = extract_message(py, i, &obj)?;
                let key = m.key(&format, &[]);
                match counter.peek_message(key) {
                    Some(t) => {
                        infos.push(m.info(t as u64));
                        if keep_full(keep_calls, &m) {
                            full.insert(i, m);
                        }
                    }
                    None => {
                        infos.push(m.info(0));
                        missing.resize_with(i + 1, || None);
                        missing[i] = Some((key, Unread::Extracted(m)));
                        pending_count += 1;
                    }
                }
            }
        }
    }
    // Looked up without statistics (see `peek_message`): recorded here once.
    counter.record_lookups((infos.len() - pending_count) as u64, pending_count as u64);
    let rest = Uncounted { py, counter: counter.clone(), keep_calls, slots: missing, left: pending_count, full };
    Ok((infos, rest))
}

/// `(strings, bytes)` held by the light reader's identity memo (for tests of `clear_cache`).
#[pyfunction]
fn _memo_stats(py: Python<'_>) -> (usize, usize) {
    light::stats(py)
}

/// Whether every item of `messages` is exactly a dict: the Python layer's test for a history
/// with no SDK object to read (`windowfit.messages.plain_messages`), one type check per item
/// (a `set(map(type, ...))` there cost about 220 instructions a message, on every prepare).
/// Borrowed items, no iterator: pyo3's list iterator re-reads the length and takes a
/// reference per item, twice the work of the check itself.
#[pyfunction]
fn _dicts_only(messages: &Bound<'_, PyList>) -> bool {
    let list = messages.as_ptr();
    // SAFETY: `list` is a list held by the caller for the whole call, with the GIL held, and
    // nothing here runs Python code that could change it; PyList_GetItem returns a borrowed
    // reference to an item for every index below its size.
    unsafe {
        let n = pyo3::ffi::PyList_Size(list);
        (0..n).all(|i| pyo3::ffi::PyDict_CheckExact(pyo3::ffi::PyList_GetItem(list, i)) != 0)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_memo_stats, m)?)?;
    m.add_function(wrap_pyfunction!(_dicts_only, m)?)?;
    Ok(())
}
