//! Bindings of `count`: `Counter` (any tokenizer, cached counts of texts and messages) and
//! the tiktoken-shaped `Encoding`.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use super::args::{count_arg, token_ids};
use super::errors::guarded;
use super::ids::{id_list, id_lists};
use super::light;
use super::messages::{extract_message, message_tokens};
use super::text::{extract_strings, stored, with_text};
use crate::cache::{CountCache, HeldTable, FOLLOW_BUDGET};
use crate::count::{Counter, KeyBuilder, MessageFormat};
use crate::error::Error;
use crate::registry::{self, Source};
use crate::tokenize::engine::{ids as piece_ids, long_pieces, pieces};
use crate::tokenize::special::{SpecialEncoder, Specials};

/// The tokenizer source a `Counter(kind, source, ...)` names (`windowfit.Counter` builds
/// these arguments; a direct call with a bad pair still gets a clear error, not a default).
fn source_of(
    kind: &str,
    source: Option<PathBuf>,
    pattern: Option<String>,
    special_tokens: Option<HashMap<String, u32>>,
    nfc: bool,
) -> Result<Source, Error> {
    let need = |s: Option<PathBuf>| s.ok_or_else(|| Error::Value(format!("Counter kind {kind:?} needs a source")));
    Ok(match kind {
        "openai" => Source::OpenAi(need(source)?.to_string_lossy().into_owned()),
        "tiktoken" => Source::Tiktoken {
            path: need(source)?,
            pattern: pattern
                .ok_or_else(|| Error::Value("a .tiktoken vocabulary needs its pre-tokenizer pattern".into()))?,
            special_tokens: special_tokens.unwrap_or_default().into_iter().collect(),
            nfc,
        },
        "tokenizer_json" => Source::TokenizerJson(need(source)?),
        "heuristic" => Source::Heuristic,
        other => return Err(Error::Value(format!("unknown Counter kind {other:?}"))),
    })
}

/// Token counter over one tokenizer, with a content-keyed cache.
#[pyclass(module = "windowfit._core", name = "Counter", frozen, subclass)]
pub struct PyCounter {
    pub(crate) inner: Arc<Counter>,
    /// The model name `windowfit.Counter(model=...)` was made for. Held here rather than in
    /// an instance `__dict__` of the Python subclass, which has none (`__slots__`): a counter
    /// carries no per-instance dict for a method lookup to look past.
    model: Option<String>,
}

#[pymethods]
impl PyCounter {
    /// Low-level constructor; `windowfit.Counter` resolves models and files into these arguments.
    /// `kind` is "openai" (source: encoding name), "tiktoken" (source: path; pattern required),
    /// "tokenizer_json" (source: path) or "heuristic".
    #[new]
    #[pyo3(signature = (kind, source=None, *, pattern=None, special_tokens=None, nfc=false, cache_entries=None,
                        cache_bytes=None, tokens_per_message=3, tokens_per_name=1, tokens_per_tool_call=3, reply_priming=3,
                        model=None))]
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
        model: Option<String>,
    ) -> PyResult<Self> {
        let format = MessageFormat { tokens_per_message, tokens_per_name, tokens_per_tool_call, reply_priming };
        let source = source_of(kind, source, pattern, special_tokens, nfc)?;
        let (backend, shared_cache) =
            guarded("Counter()", || py.detach(|| registry::shared(&source)).map_err(PyErr::from))?;
        // A private cache when a bound is given; otherwise the tokenizer's shared one. The
        // Python layer allows one bound at most; given both, entries win.
        let cache = match (cache_entries, cache_bytes) {
            (Some(n), _) => Arc::new(CountCache::new(n)),
            (None, Some(b)) => Arc::new(CountCache::with_max_bytes(b)),
            (None, None) => shared_cache,
        };
        Ok(Self { inner: Arc::new(Counter::new(backend, cache, format)), model })
    }

    /// The model this counter was made for (None when made from an encoding or a file).
    #[getter]
    fn model(&self) -> Option<&str> {
        self.model.as_deref()
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
        self.count_text(py, text)
    }

    /// Tokens of each text; the GIL is released and large batches use all cores.
    fn count_many(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        let strings = extract_strings(texts)?;
        let texts = strings.iter().map(stored).collect::<PyResult<Vec<_>>>()?;
        guarded("count_many", || Ok(py.detach(|| self.inner.count_many(&texts))))
    }

    /// `count(text)` if it is at most `limit`, else None; stops reading once past `limit`.
    fn count_until(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
    ) -> PyResult<Option<usize>> {
        // `Encoding` is this class itself, with no Python layer to check the limit first
        let limit = count_arg(py, "limit", limit)?;
        with_text(text, "text", |s| {
            guarded("count_until", || Ok(detach_if_long(py, s.len(), || self.inner.count_until(s, limit))))
        })?
    }

    /// Token ids of `text` (ordinary: special-token text is plain text).
    fn encode<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let ids = with_text(text, "text", |s| {
            guarded("encode", || detach_if_long(py, s.len(), || self.inner.backend().encode(s)).map_err(PyErr::from))
        })??;
        id_list(py, &ids)
    }

    /// Text of token ids; bytes that are not valid UTF-8 become U+FFFD.
    fn decode(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<String> {
        let ids = token_ids(ids)?;
        guarded("decode", || {
            let bytes = py.detach(|| self.inner.backend().decode_bytes(&ids)).map_err(PyErr::from)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
    }

    /// Bytes of token ids.
    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = token_ids(ids)?;
        let bytes =
            guarded("decode_bytes", || py.detach(|| self.inner.backend().decode_bytes(&ids)).map_err(PyErr::from))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Tokens of one OpenAI-format message dict, without the reply priming.
    fn count_message(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<usize> {
        let m = extract_message(py, 0, message)?;
        guarded("count_message", || Ok(self.inner.count_message(&m)))
    }

    /// Tokens of a prompt: `sum(count_message(m)) + reply_priming`.
    fn count_messages(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tokens = message_tokens(py, &self.inner, messages)?;
        if tokens.is_empty() {
            return Ok(0); // no prompt, no reply to prime
        }
        Ok(tokens.iter().map(|t| *t as usize).sum::<usize>() + self.inner.format().reply_priming as usize)
    }

    /// Tokens of each message (without priming), in order.
    fn count_each_message(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        Ok(message_tokens(py, &self.inner, messages)?.into_iter().map(|t| t as usize).collect())
    }

    /// Cache statistics: hits, misses, size (entries) and capacity.
    fn cache_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.inner.cache_info();
        let d = PyDict::new(py);
        d.set_item("hits", info.hits)?;
        d.set_item("misses", info.misses)?;
        d.set_item("size", info.size)?;
        d.set_item("capacity", info.capacity)?;
        // The per-thread piece tables of the embedded encodings: process-wide, shared by
        // every counter (the bound each thread's table follows, and the bytes all hold now).
        let (_, piece_bytes) = pieces::usage();
        d.set_item("piece_cache_entries", pieces::entries())?;
        d.set_item("piece_cache_bytes", piece_bytes)?;
        // and the per-thread maps of pieces longer than a packed key (by their bytes)
        d.set_item("long_piece_cache_bytes", long_pieces::usage())?;
        // and the per-thread ids of pieces of more than one token that `encode` keeps
        d.set_item("id_cache_bytes", piece_ids::usage())?;
        Ok(d)
    }

    /// Empty the count cache, and the readers' memo of string hashes with it.
    fn clear_cache(&self, py: Python<'_>) {
        self.inner.clear_cache();
        light::clear(py);
        // Its entries no longer match (the stamp changed), but they still hold their texts.
        HELD.with(|h| h.borrow_mut().clear());
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
            return Err(Error::Value(format!("calibration factor must be a positive number, got {factor}")).into());
        }
        self.inner.set_calibration(factor);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("<Counter {} exact={}>", self.inner.backend().name(), self.inner.is_exact())
    }
}

impl PyCounter {
    /// The body of `count`, for the method and its fast-call twin (`fast_count.rs`).
    pub(crate) fn count_text(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
        // A plain `str` is immutable and carries its hash, computed once per object by
        // Python: held, its identity names its content (the held table), and its hash keys
        // the front table. Subclasses may hash otherwise; they take the shared cache.
        let plain = text.is_exact_instance_of::<PyString>();
        let addr = text.as_ptr() as usize;
        if plain {
            if let Some(n) = guarded("count", || Ok(HELD.with(|h| self.inner.held_count(&h.borrow(), addr))))? {
                return Ok(n);
            }
        }
        with_text(text, "text", |s| {
            guarded("count", || {
                if !plain || s.len() > HOLD_MAX_LEN {
                    return Ok(detach_if_long(py, s.len(), || self.inner.count(s)));
                }
                // Asked only for a text the front cache keeps (the core decides): a fresh
                // long one would be read once more by siphash for nothing.
                // SAFETY: a live str, GIL held; a str's hash never fails
                let hash = || unsafe { ffi::PyObject_Hash(text.as_ptr()) } as u64;
                release_held_on_thread_exit(py);
                Ok(HELD.with(|h| {
                    let holder = || text.clone().unbind();
                    self.inner.count_and_hold(s, hash, &mut h.borrow_mut(), addr, holder)
                }))
            })
        })?
    }
}

/// Texts up to this many bytes are counted with the GIL held (releasing it costs more than
/// counting or finding them) and held by identity; longer ones are counted detached.
const HOLD_MAX_LEN: usize = 16 * 1024;

/// `f` for a text of `len` bytes: detached from the interpreter when the text is longer than
/// [`HOLD_MAX_LEN`], with the GIL held otherwise (releasing and taking it back cost more than
/// encoding a short text).
fn detach_if_long<T: Send>(py: Python<'_>, len: usize, f: impl FnOnce() -> T + Send) -> T {
    if len > HOLD_MAX_LEN {
        py.detach(f)
    } else {
        f()
    }
}

/// Slots of a thread's held table (four per 128-byte set): 1 MiB once used, room for the
/// tens of thousands of texts an agent re-counts without sets evicting each other.
const HELD_SLOTS: usize = 1 << 15;

thread_local! {
    /// The `str` objects this thread counted last, held alive so that their addresses name
    /// their contents (at most four times the front-cache byte budget of text).
    static HELD: std::cell::RefCell<HeldTable<Py<PyAny>>> =
        const { std::cell::RefCell::new(HeldTable::new(HELD_SLOTS, FOLLOW_BUDGET)) };
}

thread_local! {
    /// Whether this thread's Python thread state holds a [`HeldRelease`].
    static RELEASE_ARMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Releases its thread's held table when the thread ends. It lives in the dict of the
/// thread's Python state, which the interpreter clears as the thread ends, on that thread and
/// with the GIL held: the texts are released then. The table's own thread-local destructor
/// runs later, without the GIL, and could only queue them for whichever PyO3 call comes next
/// (never, for a server that only counts through the fast path), so every finished thread
/// kept up to its table's budget of text alive.
#[pyclass(module = "windowfit._core", frozen)]
struct HeldRelease;

impl Drop for HeldRelease {
    fn drop(&mut self) {
        // The GIL is held (a Python object's deallocation); nothing else borrows the table then.
        let _ = HELD.try_with(|h| h.try_borrow_mut().map(|mut h| h.clear()));
        let _ = RELEASE_ARMED.try_with(|armed| armed.set(false));
    }
}

/// Arms [`HeldRelease`] for the calling thread (once per thread).
fn release_held_on_thread_exit(py: Python<'_>) {
    if RELEASE_ARMED.with(std::cell::Cell::get) {
        return;
    }
    // SAFETY: the GIL is held; the dict is borrowed from the current thread state.
    let dict = unsafe { ffi::PyThreadState_GetDict() };
    if dict.is_null() {
        return; // no thread state dict (cannot happen with the GIL held): nothing armed
    }
    // SAFETY: a live dict owned by the thread state, borrowed for this call only.
    let dict = unsafe { Bound::from_borrowed_ptr(py, dict) };
    let armed = Py::new(py, HeldRelease).and_then(|r| dict.set_item(pyo3::intern!(py, "windowfit.held_release"), r));
    if armed.is_ok() {
        RELEASE_ARMED.with(|a| a.set(true));
    }
}

/// `(entries, text bytes)` of the calling thread's held table of `str` objects.
#[pyfunction]
fn _held_cache_stats() -> (usize, usize) {
    HELD.with(|h| {
        let h = h.borrow();
        (h.len(), h.bytes())
    })
}

/// `(entries, text bytes)` of the calling thread's front cache of short texts (for tests
/// of its bounds).
#[pyfunction]
fn _front_cache_stats() -> (usize, usize) {
    crate::cache::front_stats()
}

/// Text bytes each thread's front cache may hold (0 turns it off); `windowfit` sets it from
/// `WINDOWFIT_FRONT_CACHE_BYTES`.
#[pyfunction]
fn _set_front_cache_bytes(n: usize) {
    crate::cache::set_front_bytes(n)
}

/// Entries of each thread's piece table from now on (0 turns it off); `windowfit` validates
/// the bound and sets it from `WINDOWFIT_PIECE_CACHE_ENTRIES` or a `Counter`'s argument.
#[pyfunction]
fn _set_piece_cache_entries(n: usize) {
    pieces::set_entries(n)
}

/// `(bound, tables, bytes)` of the per-thread piece tables: the entries each follows, the
/// tables allocated now (one per thread and vocabulary that counted) and their bytes.
#[pyfunction]
fn _piece_cache_stats() -> (usize, usize, usize) {
    let (tables, bytes) = pieces::usage();
    (pieces::entries(), tables, bytes)
}

/// A tiktoken-shaped view of an embedded encoding: `encode`, `decode`, `count`.
#[pyclass(module = "windowfit._core", name = "Encoding", frozen)]
pub struct PyEncoding {
    pub(crate) counter: Py<PyCounter>,
    specials: SpecialEncoder,
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

    /// Token ids of `text`, as tiktoken's `encode`: the special tokens in `allowed_special`
    /// ("all" or a set of their texts) become their ids; text spelling one in
    /// `disallowed_special` ("all", the default: every one not allowed) raises
    /// `DisallowedSpecialTokenError` (a `ValueError`); `disallowed_special=()` encodes it as
    /// plain text. None means the default.
    #[pyo3(signature = (text, *, allowed_special=None, disallowed_special=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        allowed_special: Option<&Bound<'py, PyAny>>,
        disallowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let (allowed, disallowed) = special_args(allowed_special, disallowed_special)?;
        let ids = with_text(text, "text", |s| {
            guarded("encode", || {
                detach_if_long(py, s.len(), || self.specials.encode(s, &allowed, &disallowed)).map_err(PyErr::from)
            })
        })??;
        id_list(py, &ids)
    }

    /// Token ids of `text` with special-token text encoded as plain text.
    fn encode_ordinary<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        self.counter.get().encode(py, text)
    }

    /// `encode` of each text; the GIL is released and a large batch spread over all cores
    /// (`num_threads` is accepted for tiktoken's signature; the core's pool decides).
    #[pyo3(signature = (text, *, num_threads=8, allowed_special=None, disallowed_special=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        num_threads: usize,
        allowed_special: Option<&Bound<'py, PyAny>>,
        disallowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let _ = num_threads;
        let (allowed, disallowed) = special_args(allowed_special, disallowed_special)?;
        self.encode_many(py, text, "encode_batch", Some((&allowed, &disallowed)))
    }

    /// `encode_ordinary` of each text, spread over all cores like `encode_batch`.
    #[pyo3(signature = (text, *, num_threads=8))]
    fn encode_ordinary_batch<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        num_threads: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let _ = num_threads;
        self.encode_many(py, text, "encode_ordinary_batch", None)
    }

    /// The texts of the encoding's special tokens.
    #[getter]
    fn special_tokens_set(&self) -> HashSet<String> {
        self.counter.get().inner.backend().special_tokens().into_iter().map(|(s, _)| s).collect()
    }

    /// The highest token id, special tokens included.
    #[getter]
    fn max_token_value(&self) -> PyResult<u32> {
        self.counter
            .get()
            .inner
            .backend()
            .max_token_value()
            .ok_or_else(|| Error::Unsupported(format!("{} has no token ids", self.name)).into())
    }

    /// The size of the id space: `max_token_value + 1`.
    #[getter]
    fn n_vocab(&self) -> PyResult<u32> {
        Ok(self.max_token_value()? + 1)
    }

    /// The id of `<|endoftext|>`.
    #[getter]
    fn eot_token(&self) -> Option<u32> {
        let specials = self.counter.get().inner.backend().special_tokens();
        specials.into_iter().find(|(s, _)| s == "<|endoftext|>").map(|(_, id)| id)
    }

    /// Pickled by name: the receiving process rebuilds it from its embedded vocabulary.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let rebuild = py.import("windowfit.counting")?.getattr("get_encoding")?;
        Ok((rebuild, (self.name.clone(),)))
    }

    fn decode(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<String> {
        self.counter.get().decode(py, ids)
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
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
    fn count_until(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
    ) -> PyResult<Option<usize>> {
        self.counter.get().count_until(py, text, limit)
    }

    fn __repr__(&self) -> String {
        format!("<Encoding {:?}>", self.name)
    }
}

impl PyEncoding {
    /// The texts of `text` encoded by the core's batch ([`SpecialEncoder::encode_many`]), the
    /// GIL released.
    fn encode_many<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        what: &str,
        specials: Option<(&Specials, &Specials)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let strings = extract_strings(text)?;
        let texts = strings.iter().map(stored).collect::<PyResult<Vec<_>>>()?;
        let ids = guarded(what, || py.detach(|| self.specials.encode_many(&texts, specials)).map_err(PyErr::from))?;
        id_lists(py, &ids)
    }
}

/// `allowed_special` and `disallowed_special` as tiktoken reads them ("all" or texts).
fn special_args(
    allowed: Option<&Bound<'_, PyAny>>,
    disallowed: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Specials, Specials)> {
    Ok((
        specials_arg("allowed_special", allowed, Specials::These(Vec::new()))?,
        specials_arg("disallowed_special", disallowed, Specials::All)?,
    ))
}

fn specials_arg(name: &str, arg: Option<&Bound<'_, PyAny>>, default: Specials) -> PyResult<Specials> {
    let Some(v) = arg.filter(|v| !v.is_none()) else { return Ok(default) };
    let wrong = || {
        super::errors::ArgumentTypeError::new_err(format!(
            "{name} must be 'all' or a set of special token texts, not {}",
            super::errors::type_name(v)
        ))
    };
    if let Ok(s) = v.cast::<PyString>() {
        return if s.to_str()? == "all" { Ok(Specials::All) } else { Err(wrong()) };
    }
    let mut names = Vec::new();
    for item in v.try_iter().map_err(|_| wrong())? {
        let item = item?;
        let s = item.cast::<PyString>().map_err(|_| wrong())?;
        names.push(s.to_str()?.to_owned());
    }
    Ok(Specials::These(names))
}

/// The embedded encoding `name` ("cl100k_base" or "o200k_base").
#[pyfunction]
fn get_encoding(py: Python<'_>, name: &str) -> PyResult<PyEncoding> {
    let (backend, cache) = registry::shared(&Source::OpenAi(name.to_string()))?;
    let specials = SpecialEncoder::new(backend.clone());
    let counter = Py::new(
        py,
        PyCounter { inner: Arc::new(Counter::new(backend, cache, MessageFormat::default())), model: None },
    )?;
    Ok(PyEncoding { counter, specials, name: name.to_string() })
}

/// NFC by the running interpreter's `unicodedata`, as Qwen's reference normalizes (see
/// `tokenize::nfc`). Called with or without the GIL held, from any thread; `None` when the
/// interpreter cannot run it (shutting down), and the crate's tables are used instead.
fn python_nfc(text: &str) -> Option<String> {
    static NORMALIZE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    Python::try_attach(|py| {
        let normalize =
            NORMALIZE.get_or_try_init(py, || py.import("unicodedata")?.getattr("normalize").map(Bound::unbind)).ok()?;
        normalize.bind(py).call1(("NFC", text)).and_then(|s| s.extract::<String>()).ok()
    })
    .flatten()
}

/// The keys of a message by both readers: `(light, full)`, `light` None when the light
/// reader leaves the message to the full one. For the test proving they agree.
#[pyfunction]
fn _message_keys(
    py: Python<'_>,
    counter: &Bound<'_, PyCounter>,
    message: &Bound<'_, PyAny>,
) -> PyResult<(Option<u128>, u128)> {
    let format = counter.get().inner.format();
    let full = extract_message(py, 0, message)?.key(&format, &[]);
    let keys = light::Keys::new(py);
    let mut builder = KeyBuilder::new(&format);
    let mut memo = light::memo(py);
    // SAFETY: the GIL is held and `message` outlives the call; `read` keeps no pointers.
    let fast = unsafe { light::read(py, message.as_ptr(), &keys, &format, &mut builder, &mut memo, true) };
    Ok((fast.map(|(key, _)| key), full))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::tokenize::nfc::set_normalizer(python_nfc);
    m.add_class::<PyCounter>()?;
    m.add_class::<PyEncoding>()?;
    m.add_function(wrap_pyfunction!(get_encoding, m)?)?;
    m.add_function(wrap_pyfunction!(_front_cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(_held_cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(_set_front_cache_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_message_keys, m)?)?;
    m.add_function(wrap_pyfunction!(_set_piece_cache_entries, m)?)?;
    m.add_function(wrap_pyfunction!(_piece_cache_stats, m)?)?;
    Ok(())
}
