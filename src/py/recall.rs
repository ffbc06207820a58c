//! Bindings of `recall`: `RecallIndex`, the incremental lexical index over a history's
//! messages, `recall_terms`, its text rules (so Python layers compare texts by the same
//! terms the index scores), and `recall_asks` / `recall_recaps`, what a user message asks.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use super::errors::{guarded, InvalidArgumentError};
use super::messages::extract_message;
use super::text::{text_from_str, Text};
use crate::count::{Message, MessageFormat};
use crate::message::MessageInfo;
use crate::recall::units::{self, Turns};
use crate::recall::{asks, dates, doc_texts, terms, CoverUnit, RecallIndex};
use rustc_hash::{FxHashMap, FxHashSet};
use xxhash_rust::xxh3::xxh3_64;

struct State {
    index: RecallIndex,
    /// The message objects of the last history searched, with their fingerprints and index
    /// slots: a message object seen at the same position again is not read again, nor looked
    /// up by its fingerprint. Holding the reference keeps its address from being reused.
    seen: Vec<(Py<PyAny>, u128, u32)>,
    /// The terms of the last text asked about in `held_shares` (a summary, the same on most
    /// calls), by its hash.
    held: Option<(u64, Arc<FxHashSet<u64>>)>,
}

impl State {
    fn new(max_messages: usize) -> Self {
        State { index: RecallIndex::new(max_messages), seen: Vec::new(), held: None }
    }

    /// The term set of `text`, kept for the next call.
    fn held_terms(&mut self, text: &str) -> Arc<FxHashSet<u64>> {
        let key = xxh3_64(text.as_bytes());
        match &self.held {
            Some((k, terms)) if *k == key => terms.clone(),
            _ => {
                let terms = Arc::new(RecallIndex::term_set(text));
                self.held = Some((key, terms.clone()));
                terms
            }
        }
    }
}

/// A bounded, incremental BM25 index of messages (see `windowfit.recall`).
#[pyclass(module = "windowfit._core", name = "RecallIndex", frozen, weakref)]
pub struct PyRecallIndex {
    state: Mutex<State>,
    max_messages: usize,
}

impl PyRecallIndex {
    /// The lock. It is never waited for with the GIL held: a thread holding the lock may need
    /// the GIL back, so a waiter releases the GIL between tries.
    fn lock<'a>(&'a self, py: Python<'_>) -> MutexGuard<'a, State> {
        loop {
            match self.state.try_lock() {
                Ok(g) => return g,
                Err(TryLockError::Poisoned(poisoned)) => {
                    // a panic mid-update may have left the index half-changed: start afresh
                    let mut g = poisoned.into_inner();
                    self.state.clear_poison();
                    *g = State::new(self.max_messages);
                    return g;
                }
                Err(TryLockError::WouldBlock) => py.detach(std::thread::yield_now),
            }
        }
    }
}

/// The index slots of the messages at `positions` of `messages`, indexing the new ones. A
/// message object seen at the same position in the last call is not read again.
fn slots_of(
    py: Python<'_>,
    state: &mut State,
    messages: &Bound<'_, PyList>,
    positions: &[usize],
) -> PyResult<Vec<(usize, u32)>> {
    let format = MessageFormat::default();
    state.seen.truncate(messages.len());
    let mut out = Vec::with_capacity(positions.len());
    for &i in positions {
        let obj = messages.get_item(i)?;
        let known = state.seen.get(i).filter(|(o, _, _)| o.as_ptr() == obj.as_ptr()).map(|&(_, k, s)| (k, s));
        let slot = match known {
            Some((key, slot)) if state.index.touch(slot, key) => slot,
            _ => {
                let m = extract_message(py, i, &obj)?;
                let key = m.key(&format, &[]);
                let slot = state.index.insert(key, doc_texts(&m));
                while state.seen.len() <= i {
                    state.seen.push((py.None(), 0, 0));
                }
                state.seen[i] = (obj.unbind(), key, slot);
                slot
            }
        };
        out.push((i, slot));
    }
    Ok(out)
}

/// The index slots of each span's messages (`(start, end)` positions of `messages`, cut to
/// its length), indexing the new ones; the start of a request.
fn span_slots(
    py: Python<'_>,
    state: &mut State,
    messages: &Bound<'_, PyList>,
    spans: &[(usize, usize)],
) -> PyResult<Vec<Vec<u32>>> {
    let n = messages.len();
    let mut positions: Vec<usize> = spans.iter().flat_map(|&(a, b)| a.min(n)..b.min(n)).collect();
    positions.sort_unstable();
    positions.dedup();
    state.index.tick();
    let slot_of: FxHashMap<usize, u32> = slots_of(py, state, messages, &positions)?.into_iter().collect();
    Ok(spans.iter().map(|&(a, b)| (a..b).filter_map(|k| slot_of.get(&k).copied()).collect()).collect())
}

#[pymethods]
impl PyRecallIndex {
    #[new]
    #[pyo3(signature = (max_messages = 200_000))]
    fn new(max_messages: usize) -> Self {
        PyRecallIndex { state: Mutex::new(State::new(max_messages)), max_messages: max_messages.max(1) }
    }

    #[getter]
    fn max_messages(&self) -> usize {
        self.max_messages
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.lock(py).index.len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("RecallIndex(messages={}, max_messages={})", self.lock(py).index.len(), self.max_messages)
    }

    /// Forget every message.
    fn clear(&self, py: Python<'_>) {
        let mut g = self.lock(py);
        *g = State::new(self.max_messages);
    }

    /// BM25 scores for `query` of the messages at positions `lo..hi` of `messages` (all of
    /// them by default) except those in `skip`, best first, at most `limit`, only those with
    /// a score. New messages are indexed on the way.
    #[pyo3(signature = (messages, query, lo = 0, hi = None, skip = None, limit = 256))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        query: &Bound<'_, PyString>,
        lo: usize,
        hi: Option<usize>,
        skip: Option<HashSet<usize>>,
        limit: usize,
    ) -> PyResult<Vec<(usize, f64)>> {
        let query = text_from_str(query);
        let mut guard = self.lock(py);
        let state = &mut *guard;
        guarded("RecallIndex.search", || {
            state.index.tick();
            let n = messages.len();
            let hi = hi.unwrap_or(n).min(n);
            let mut skipped = vec![false; n];
            for &i in skip.iter().flatten().filter(|&&i| i < n) {
                skipped[i] = true;
            }
            let wanted: Vec<usize> = (lo.min(hi)..hi).filter(|&i| !skipped[i]).collect();
            let mut slots: Vec<Option<u32>> = vec![None; n];
            for (i, slot) in slots_of(py, state, messages, &wanted)? {
                slots[i] = Some(slot);
            }
            let index = &state.index;
            let mut out: Vec<(usize, f64)> = py.detach(|| {
                let scores = index.score(query.as_ref());
                wanted.iter().filter_map(|&i| scores.get(&slots[i]?).map(|&s| (i, s as f64))).collect()
            });
            out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            out.truncate(limit);
            Ok(out)
        })
    }

    /// How much of `query` the messages at `positions` of `messages` and the text `extra`
    /// hold: `(distinct query terms, terms held, a number not held)`. New messages are
    /// indexed on the way.
    fn coverage(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        query: &Bound<'_, PyString>,
        positions: Vec<usize>,
        extra: &Bound<'_, PyString>,
    ) -> PyResult<(usize, usize, bool)> {
        let (query, extra) = (text_from_str(query), text_from_str(extra));
        let n = messages.len();
        let positions: Vec<usize> = positions.into_iter().filter(|&i| i < n).collect();
        let mut guard = self.lock(py);
        let state = &mut *guard;
        guarded("RecallIndex.coverage", || {
            state.index.tick();
            let slots: FxHashSet<u32> =
                slots_of(py, state, messages, &positions)?.into_iter().map(|(_, s)| s).collect();
            let index = &state.index;
            let c = py.detach(|| index.coverage(query.as_ref(), &slots, extra.as_ref()));
            Ok((c.terms, c.held, c.number_missing))
        })
    }

    /// For each span `(start, end)` of `messages`, the share of its messages' distinct terms
    /// that `text` (a summary in the prompt) already holds; None for a span without terms.
    /// New messages are indexed on the way.
    fn held_shares(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        spans: Vec<(usize, usize)>,
        text: &Bound<'_, PyString>,
    ) -> PyResult<Vec<Option<f64>>> {
        let text = text_from_str(text);
        let mut guard = self.lock(py);
        let state = &mut *guard;
        guarded("RecallIndex.held_shares", || {
            let slots = span_slots(py, state, messages, &spans)?;
            let held = state.held_terms(text.as_ref());
            let index = &state.index;
            Ok(py.detach(|| slots.iter().map(|s| index.held_share(s, &held)).collect()))
        })
    }

    /// The spans `(start, end)` of `messages` (in order) to bring back when nothing in
    /// particular is asked (a recap), within `room` tokens: `costs` are their tokens, `joins`
    /// whether each follows the one before it in the same session (one stamp of `stamp`
    /// tokens for a stretch of them); greedily, by what each adds per token that the prompt's
    /// `text` and the spans chosen before it do not hold (`RecallIndex::cover`). Returns the
    /// chosen spans' indices, best first. New messages are indexed on the way.
    #[allow(clippy::too_many_arguments)]
    fn cover(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        spans: Vec<(usize, usize)>,
        costs: Vec<u64>,
        joins: Vec<bool>,
        text: &Bound<'_, PyString>,
        room: u64,
        stamp: u64,
    ) -> PyResult<Vec<usize>> {
        if costs.len() != spans.len() || joins.len() != spans.len() {
            return Err(InvalidArgumentError::new_err("cover: one cost and one join per span"));
        }
        let text = text_from_str(text);
        let mut guard = self.lock(py);
        let state = &mut *guard;
        guarded("RecallIndex.cover", || {
            let slots = span_slots(py, state, messages, &spans)?;
            let index = &state.index;
            Ok(py.detach(|| {
                let held = RecallIndex::term_set(text.as_ref());
                let units: Vec<CoverUnit> = slots
                    .into_iter()
                    .zip(costs)
                    .zip(joins)
                    .map(|((slots, tokens), joins_previous)| CoverUnit { slots, tokens, joins_previous })
                    .collect();
                index.cover(&units, &held, room, stamp)
            }))
        })
    }
}

/// A history read for [`units::candidates`]: each message read once per call, on demand.
/// A message that cannot be read is kept as the first error, returned after the pass.
struct ListTurns<'a, 'py> {
    py: Python<'py>,
    messages: &'a Bound<'py, PyList>,
    len: usize,
    read: FxHashMap<usize, Message<Text>>,
    error: Option<PyErr>,
}

impl ListTurns<'_, '_> {
    fn message(&mut self, i: usize) -> Option<&Message<Text>> {
        if !self.read.contains_key(&i) && self.error.is_none() {
            match self.messages.get_item(i).and_then(|obj| extract_message(self.py, i, &obj)) {
                Ok(m) => {
                    self.read.insert(i, m);
                }
                Err(e) => self.error = Some(e),
            }
        }
        self.read.get(&i)
    }
}

impl Turns for ListTurns<'_, '_> {
    fn count(&self) -> usize {
        self.len
    }

    fn info(&mut self, i: usize) -> MessageInfo {
        self.message(i).map(|m| m.info(0)).unwrap_or_default()
    }

    fn text(&mut self, i: usize) -> String {
        self.message(i).map(Message::content_text).unwrap_or_default()
    }
}

/// A recallable unit as Python gets it: `(start, end, score, context_of)`.
type Unit = (usize, usize, f64, Option<usize>);

/// The units around `hits` (position, score) that may be recalled from `messages`: only
/// positions in `lo..hi` and not in `skip`. `context_of` is the follow-up a neighbouring
/// exchange was added for (None for a hit's own).
#[pyfunction]
#[pyo3(signature = (messages, hits, lo = 0, hi = None, skip = None))]
fn recall_units(
    py: Python<'_>,
    messages: &Bound<'_, PyList>,
    hits: Vec<(usize, f64)>,
    lo: usize,
    hi: Option<usize>,
    skip: Option<HashSet<usize>>,
) -> PyResult<Vec<Unit>> {
    let n = messages.len();
    let hi = hi.unwrap_or(n).min(n);
    let skip = skip.unwrap_or_default();
    let allowed = |k: usize| lo <= k && k < hi && !skip.contains(&k);
    let mut turns = ListTurns { py, messages, len: n, read: FxHashMap::default(), error: None };
    let out = guarded("recall_units", || Ok(units::candidates(&mut turns, &hits, &allowed)))?;
    if let Some(e) = turns.error {
        return Err(e);
    }
    Ok(out.into_iter().map(|c| (c.start, c.end, c.score, c.context_of)).collect())
}

/// The terms recall scores `text` by (its text rules: stemmed words, numbers, whole
/// identifiers and paths, CJK characters and pairs).
#[pyfunction]
fn recall_terms(text: &Bound<'_, PyString>) -> PyResult<Vec<String>> {
    let text = text_from_str(text);
    guarded("recall_terms", || Ok(terms::terms(crate::recall::head(text.as_ref(), crate::recall::MAX_DOC_BYTES))))
}

/// Whether a user message asks something (a question, a request to be told or reminded, a
/// reference to an earlier time): only then does the manager recall for it.
#[pyfunction]
fn recall_asks(text: &Bound<'_, PyString>) -> PyResult<bool> {
    let text = text_from_str(text);
    guarded("recall_asks", || Ok(asks::asks(text.as_ref())))
}

/// A calendar day as Python sees it: `(year or None, month, day)`.
type PyDay = (Option<u16>, u8, u8);

fn py_day(d: dates::Day) -> PyDay {
    (d.year, d.month, d.day)
}

/// The calendar days `text` names, in order, each once.
#[pyfunction]
fn recall_named_days(text: &Bound<'_, PyString>) -> PyResult<Vec<PyDay>> {
    let text = text_from_str(text);
    guarded("recall_named_days", || Ok(dates::named_days(text.as_ref()).into_iter().map(py_day).collect()))
}

/// `text` with the days it names blanked out (for a question's lexical search).
#[pyfunction]
fn recall_without_days(text: &Bound<'_, PyString>) -> PyResult<String> {
    let text = text_from_str(text);
    guarded("recall_without_days", || Ok(dates::without_days(text.as_ref())))
}

/// The day each session date or timestamp falls on, `(year or None, month, day)`, or None.
#[pyfunction]
fn recall_stamp_days(stamps: Vec<String>) -> PyResult<Vec<Option<PyDay>>> {
    guarded("recall_stamp_days", || Ok(stamps.iter().map(|s| dates::stamp_day(s).map(py_day)).collect()))
}

/// For each of `days` (from `recall_stamp_days`), whether it is a day `query` names.
#[pyfunction]
fn recall_on_named_days(query: &Bound<'_, PyString>, days: Vec<Option<PyDay>>) -> PyResult<Vec<bool>> {
    let query = text_from_str(query);
    guarded("recall_on_named_days", || {
        let days: Vec<Option<dates::Day>> =
            days.into_iter().map(|d| d.map(|(year, month, day)| dates::Day { year, month, day })).collect();
        Ok(dates::on_named_days(query.as_ref(), &days))
    })
}

/// Whether a user message asks to go over the conversation as a whole (a recap).
#[pyfunction]
fn recall_recaps(text: &Bound<'_, PyString>) -> PyResult<bool> {
    let text = text_from_str(text);
    guarded("recall_recaps", || Ok(asks::recaps(text.as_ref())))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecallIndex>()?;
    m.add_function(wrap_pyfunction!(recall_terms, m)?)?;
    m.add_function(wrap_pyfunction!(recall_units, m)?)?;
    m.add_function(wrap_pyfunction!(recall_asks, m)?)?;
    m.add_function(wrap_pyfunction!(recall_recaps, m)?)?;
    m.add_function(wrap_pyfunction!(recall_named_days, m)?)?;
    m.add_function(wrap_pyfunction!(recall_stamp_days, m)?)?;
    m.add_function(wrap_pyfunction!(recall_on_named_days, m)?)?;
    m.add_function(wrap_pyfunction!(recall_without_days, m)?)?;
    Ok(())
}
