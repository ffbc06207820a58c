//! Bindings of `truncate`: `truncate_text`, returning a typed `TruncateOutcome`.

use pyo3::prelude::*;

use super::count::PyCounter;
use super::errors::guarded;
use pyo3::types::PyString;

use super::text::{extract_text, text_from_str};
use crate::truncate::{self, Direction, Limits, TruncateOptions};

/// The fields of `windowfit.Truncation`, with `head_end` / `tail_start` in characters.
#[pyclass(module = "windowfit._core", name = "TruncateOutcome", frozen, get_all)]
pub struct PyTruncateOutcome {
    text: String,
    truncated: bool,
    /// `None` unless counted (see `truncate::Truncation`): Python counts it on first access.
    original_tokens: Option<usize>,
    tokens: usize,
    omitted_tokens: Option<usize>,
    head_tokens: usize,
    tail_tokens: usize,
    original_lines: Option<usize>,
    kept_lines: usize,
    original_bytes: usize,
    kept_bytes: usize,
    head_end: usize,
    tail_start: usize,
    marker_used: bool,
    direction: &'static str,
}

#[pymethods]
impl PyTruncateOutcome {
    fn __repr__(&self) -> String {
        format!("TruncateOutcome(truncated={}, tokens={}, direction={:?})", self.truncated, self.tokens, self.direction)
    }
}

/// Cut `text` to the limits (tokens by `counter`, lines, bytes: the tightest wins), keeping
/// its head, tail or both around `marker`. Arguments come checked from `windowfit.truncate`.
#[pyfunction]
#[pyo3(signature = (counter, text, *, max_tokens=None, max_lines=None, max_bytes=None, direction=None,
                    marker=truncate::DEFAULT_MARKER, head_ratio=0.5, lines=false, count_total=false))]
#[allow(clippy::too_many_arguments)]
fn truncate_text(
    py: Python<'_>,
    counter: &Bound<'_, PyCounter>,
    text: &Bound<'_, PyAny>,
    max_tokens: Option<usize>,
    max_lines: Option<usize>,
    max_bytes: Option<usize>,
    direction: Option<&str>,
    marker: &str,
    head_ratio: f64,
    lines: bool,
    count_total: bool,
) -> PyResult<PyTruncateOutcome> {
    let counter = counter.get().inner.clone();
    let chars = text.len()?;
    let text = extract_text(text, "text")?;
    let direction: Direction = direction.map_or(Ok(truncate::DEFAULT_DIRECTION), str::parse)?;
    let scale = if counter.is_exact() { 1.0 } else { counter.calibration() };
    let limits = Limits { max_tokens, max_lines, max_bytes };
    let t = guarded("truncate", || {
        py.detach(|| {
            let opts = TruncateOptions { direction, marker, head_ratio, lines, count_total };
            truncate::truncate_calibrated(counter.backend().as_ref(), text.as_ref(), &limits, &opts, scale)
        })
        .map_err(PyErr::from)
    })?;
    // A lone surrogate became one U+FFFD: the char count is Python's `len`.
    let (head_end, tail_start) = t.char_bounds(text.as_ref(), chars);
    Ok(PyTruncateOutcome {
        text: t.text,
        truncated: t.truncated,
        original_tokens: t.original_tokens,
        tokens: t.tokens,
        omitted_tokens: t.omitted_tokens,
        head_tokens: t.head_tokens,
        tail_tokens: t.tail_tokens,
        original_lines: t.original_lines,
        kept_lines: t.kept_lines,
        original_bytes: t.original_bytes,
        kept_bytes: t.kept_bytes,
        head_end,
        tail_start,
        marker_used: t.marker_used,
        direction: direction.as_str(),
    })
}

/// Lines as the limits count them (the core's rule, so Python reports what the cut enforced).
/// Lone surrogates become U+FFFD first; newlines are untouched by that.
#[pyfunction]
fn count_lines(text: &Bound<'_, PyString>) -> usize {
    truncate::count_lines(text_from_str(text).as_ref())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTruncateOutcome>()?;
    m.add_function(wrap_pyfunction!(truncate_text, m)?)?;
    m.add_function(wrap_pyfunction!(count_lines, m)?)?;
    m.add("DEFAULT_MARKER", truncate::DEFAULT_MARKER)?;
    m.add("TOKENS_OMITTED_MARKER", truncate::TOKENS_OMITTED_MARKER)?;
    m.add("DEFAULT_DIRECTION", truncate::DEFAULT_DIRECTION.as_str())?;
    Ok(())
}
