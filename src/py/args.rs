//! Counts and token ids handed straight to the core's own classes (`Encoding` has no Python
//! layer in front of it): read by the rules the Python layer applies, with its error classes.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyInt, PyString};

use super::errors::{type_name, ArgumentTypeError, InvalidArgumentError};

/// `value` as a count, by `windowfit._validate.count_arg` (the one rule for counts: integral
/// floats accepted, bools and fractions refused, values beyond any text clamped).
pub(crate) fn count_arg(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<usize> {
    // The usual plain int in range, without a call into Python.
    if value.is_exact_instance_of::<PyInt>() {
        if let Ok(n) = value.extract::<i64>() {
            if n >= 0 {
                return Ok(n as usize);
            }
        }
    }
    static CHECK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let check =
        CHECK.get_or_try_init(py, || py.import("windowfit._validate")?.getattr("count_arg").map(Bound::unbind))?;
    let n: i64 = check.bind(py).call1((name, value))?.extract()?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Token ids from any sequence of ints, or an error naming the first bad entry.
pub(crate) fn token_ids(ids: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    if let Ok(v) = ids.extract::<Vec<u32>>() {
        return Ok(v);
    }
    if ids.is_instance_of::<PyString>() {
        return Err(ArgumentTypeError::new_err("ids must be a sequence of token ids (ints), not str"));
    }
    let items = ids.try_iter().map_err(|_| {
        ArgumentTypeError::new_err(format!("ids must be a sequence of token ids (ints), not {}", type_name(ids)))
    })?;
    let mut out = Vec::new();
    for (k, item) in items.enumerate() {
        let item = item?;
        if item.is_instance_of::<PyBool>() || !item.is_instance_of::<PyInt>() {
            return Err(ArgumentTypeError::new_err(format!("ids[{k}] must be an int, not {}", type_name(&item))));
        }
        match item.extract::<u32>() {
            Ok(id) => out.push(id),
            Err(_) => {
                return Err(InvalidArgumentError::new_err(format!(
                    "ids[{k}] = {item} is not a token id (they run from 0 to {})",
                    u32::MAX
                )))
            }
        }
    }
    Ok(out)
}
