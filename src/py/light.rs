//! The warm path: read a message's fields as borrowed pointers (no reference counting, no
//! copies), hash them into the same key `Message::key` gives, and return what selection
//! needs. Returns `None` for anything unusual (multi-modal parts, Anthropic blocks, wrong
//! types): the caller then does the full, validating extraction, which also reports errors.
//! Counting alone needs no pairing ids: they are copied (into an inline `Ids`) only when the
//! caller asks for them.

use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use rustc_hash::FxHashMap;

use crate::count::{text_hash, KeyBuilder, MessageFormat};
use crate::message::{Ids, MessageInfo, Role};

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

impl Keys {
    /// The interned key strings (interned once per process, so their pointers stay valid).
    pub fn new(py: Python<'_>) -> Keys {
        Keys {
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
        }
    }
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

/// Drop every memoized hash and the string references the memo keeps alive (a counter's
/// `clear_cache` clears it too: it is a cache of content hashes). Needs the GIL (held by
/// the caller) to release the references.
pub fn clear(py: Python<'_>) {
    if let Some(m) = memo(py).as_mut() {
        m.map.clear();
        m.bytes = 0;
    }
}

/// Strings memoized now, and the bytes they hold.
pub fn stats(py: Python<'_>) -> (usize, usize) {
    memo(py).as_ref().map_or((0, 0), |m| (m.map.len(), m.bytes))
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
#[inline(always)]
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
unsafe fn content_text(
    py: Python<'_>,
    memo: &mut Option<HashMemo>,
    o: *mut ffi::PyObject,
    t: &str,
    key: &mut KeyBuilder,
) {
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

/// The message's cache key and its `MessageInfo` (tokens 0; call and result ids only with
/// `ids`, though they are checked either way so both readers accept the same messages).
/// Safety: GIL held; `obj` alive for the call (results hold no borrowed pointers).
// Always inlined into the reading loop: the message info is then built in place in the
// caller's vector instead of copied out (a tenth of a warm read of a long history).
#[inline(always)]
pub unsafe fn read(
    py: Python<'_>,
    obj: *mut ffi::PyObject,
    k: &Keys,
    format: &MessageFormat,
    key: &mut KeyBuilder,
    memo: &mut Option<HashMemo>,
    ids: bool,
) -> Option<(u128, MessageInfo)> {
    if !is_dict(obj) {
        return None;
    }
    let f = fields(obj, k)?;
    let role_text = text(f.role?)?;
    let role = Role::parse(role_text);
    if role == Role::Other {
        return None;
    }
    key.reset(format);
    key.role(role_text);
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
    // Ids go inline into `Ids` (no allocation for the usual one short id).
    let mut call_ids = Ids::new();
    let mut empty_calls = false;
    if let Some(calls) = f.tool_calls {
        if ffi::PyList_Check(calls) == 0 {
            return None;
        }
        let n = ffi::PyList_Size(calls);
        empty_calls = n == 0;
        for j in 0..n {
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
            if ids {
                call_ids.push(id);
            }
        }
    }
    let mut result_ids = Ids::new();
    match f.tool_call_id {
        Some(id) => {
            let id = text(id)?;
            key.result_id(id);
            if ids {
                result_ids.push(id);
            }
        }
        None if role == Role::Tool => return None,
        None => {}
    }
    Some((
        key.finish(),
        MessageInfo { role, tokens: 0, call_ids, result_ids, has_content, own_content: false, empty_calls },
    ))
}
