//! Bindings of `fit`: `fit_indices` and `repair_indices`, returning a typed `FitOutcome`, and
//! `tool_units`, the pairing analysis alone (for folds and history checks in Python).

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::count::PyCounter;
use super::errors::guarded;
use super::messages::{counted_messages, message_infos, read_messages, recount};
use crate::fit::{self, count_for_window, FitOptions, FitPlan, Problem, Unanswered};

/// What the core chose: indices, stripped calls, tokens and the statistics of the plan.
/// `tokens_dropped` is None when the window search left far older messages uncounted (the
/// Python layer counts them on demand).
#[pyclass(module = "windowfit._core", name = "FitOutcome", frozen, get_all)]
pub struct PyFitOutcome {
    kept: Vec<usize>,
    dropped: Vec<usize>,
    stripped: Vec<(usize, Vec<String>)>,
    tokens: u64,
    pins_tokens: u64,
    tokens_kept: u64,
    tokens_dropped: Option<u64>,
    messages_kept: usize,
    messages_dropped: usize,
    orphans_removed: usize,
    unanswered_removed: usize,
    calls_stripped: usize,
    results_stripped: usize,
    stop_reason: &'static str,
    /// The first message after the latest user turn (0 without one).
    round_start: usize,
    /// Sendable messages from `round_start` on that the budget or a cap left out.
    round_lost: Vec<usize>,
}

impl PyFitOutcome {
    fn new(plan: FitPlan, dropped_known: bool) -> Self {
        let s = plan.stats;
        PyFitOutcome {
            kept: plan.kept,
            dropped: plan.dropped,
            stripped: plan.stripped,
            tokens: plan.tokens,
            pins_tokens: s.pins_tokens,
            tokens_kept: s.tokens_kept,
            tokens_dropped: dropped_known.then_some(s.tokens_dropped),
            messages_kept: s.messages_kept,
            messages_dropped: s.messages_dropped,
            orphans_removed: s.orphans_removed,
            unanswered_removed: s.unanswered_removed,
            calls_stripped: s.calls_stripped,
            results_stripped: s.results_stripped,
            stop_reason: s.stop_reason.as_str(),
            round_start: plan.round_start,
            round_lost: plan.round_lost,
        }
    }
}

#[pymethods]
impl PyFitOutcome {
    /// `messages[i]` for each kept index, in order: the list built here, one borrowed lookup
    /// a message, where `list(map(messages.__getitem__, kept))` cost about 200 instructions
    /// a kept message through Python (a tenth of a 10,000-message prepare).
    fn pick<'py>(&self, messages: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyList>> {
        let items = self.kept.iter().map(|&i| messages.get_item(i)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(messages.py(), items)
    }

    fn __repr__(&self) -> String {
        format!(
            "FitOutcome(kept={}, dropped={}, tokens={}, stop_reason={:?})",
            self.kept.len(),
            self.dropped.len(),
            self.tokens,
            self.stop_reason
        )
    }
}

fn mode(strip_unanswered: bool) -> Unanswered {
    if strip_unanswered {
        Unanswered::Strip
    } else {
        Unanswered::Drop
    }
}

/// Select the messages to send: pins plus the longest recent window of whole tool units
/// (and, before the latest user turn, whole rounds) within `budget`. Arguments come checked
/// from `windowfit.fit` (pins in range, budget a non-negative int).
#[pyfunction]
#[pyo3(signature = (counter, messages, budget, *, keep_system=true, keep_last_user=true, start_on_user=true,
                    pinned=Vec::new(), strip_unanswered=false, max_messages=None, max_turns=None))]
#[allow(clippy::too_many_arguments)]
fn fit_indices(
    py: Python<'_>,
    counter: &Bound<'_, PyCounter>,
    messages: &Bound<'_, PyAny>,
    budget: u64,
    keep_system: bool,
    keep_last_user: bool,
    start_on_user: bool,
    pinned: Vec<usize>,
    strip_unanswered: bool,
    max_messages: Option<usize>,
    max_turns: Option<usize>,
) -> PyResult<PyFitOutcome> {
    let counter = counter.get().inner.clone();
    let unanswered = mode(strip_unanswered);
    let (mut infos, mut rest) = read_messages(py, &counter, messages, strip_unanswered, true)?;
    let opts = FitOptions {
        keep_system,
        keep_last_user,
        start_on_user,
        pinned,
        unanswered,
        reply_priming: counter.format().reply_priming as u64,
        max_messages,
        max_turns,
    };
    let complete = count_for_window(&mut infos, &mut rest, budget, &opts)?;
    let full = rest.full;
    let plan = guarded("fit", || {
        py.detach(|| {
            let recount = |i: usize, skip: &[String]| full.get(&i).map_or(0, |m| recount(&counter, m, skip));
            fit::fit(&infos, budget, &opts, &recount)
        })
        .map_err(PyErr::from)
    })?;
    Ok(PyFitOutcome::new(plan, complete))
}

/// Only the orphan / unanswered-call cleaning of `fit_indices`, with no budget.
#[pyfunction]
#[pyo3(signature = (counter, messages, *, strip_unanswered=false))]
fn repair_indices(
    py: Python<'_>,
    counter: &Bound<'_, PyCounter>,
    messages: &Bound<'_, PyAny>,
    strip_unanswered: bool,
) -> PyResult<PyFitOutcome> {
    let counter = counter.get().inner.clone();
    let (infos, full) = counted_messages(py, &counter, messages, strip_unanswered)?;
    let priming = counter.format().reply_priming as u64;
    let plan = guarded("repair", || {
        Ok(py.detach(|| {
            let recount = |i: usize, skip: &[String]| full.get(&i).map_or(0, |m| recount(&counter, m, skip));
            fit::repair(&infos, mode(strip_unanswered), priming, &recount)
        }))
    })?;
    Ok(PyFitOutcome::new(plan, true))
}

/// How a history splits into tool rounds and what pairs wrongly in it (the rule a fit applies).
#[pyclass(module = "windowfit._core", name = "ToolUnits", frozen, get_all)]
pub struct PyToolUnits {
    /// `(start, end, kind)`: contiguous spans covering every message, kind `"message"`,
    /// `"tool_round"` (a call message and the result run after it) or `"orphan"`.
    units: Vec<(usize, usize, &'static str)>,
    /// `(index, kind, ids)` by message index, kind `"orphan"` (results answering no open call)
    /// or `"unanswered"` (call ids left without a result).
    problems: Vec<(usize, &'static str, Vec<String>)>,
}

#[pymethods]
impl PyToolUnits {
    fn __repr__(&self) -> String {
        format!("ToolUnits(units={}, problems={})", self.units.len(), self.problems.len())
    }
}

/// The tool units and pairing problems of `messages` (OpenAI and Anthropic shapes).
#[pyfunction]
fn tool_units(py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<PyToolUnits> {
    let infos = message_infos(py, messages)?;
    let report = guarded("tool_units", || Ok(py.detach(|| fit::tool_units(&infos))))?;
    let units = report.blocks.iter().map(|b| (b.start, b.end, b.kind.as_str())).collect();
    let problems = report
        .problems
        .into_iter()
        .map(|p| match p {
            Problem::Orphan { index, ids } => (index, "orphan", ids),
            Problem::Unanswered { index, ids } => (index, "unanswered", ids),
        })
        .collect();
    Ok(PyToolUnits { units, problems })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFitOutcome>()?;
    m.add_class::<PyToolUnits>()?;
    m.add_function(wrap_pyfunction!(tool_units, m)?)?;
    m.add_function(wrap_pyfunction!(fit_indices, m)?)?;
    m.add_function(wrap_pyfunction!(repair_indices, m)?)?;
    Ok(())
}
