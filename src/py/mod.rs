//! `windowfit._core`: the PyO3 bindings, one file per core module. They convert Python
//! objects to core types and back, release the GIL around real work and map errors; the
//! logic lives in the pure-Rust modules, where `cargo test` reaches it. Arguments arrive
//! validated by the Python layer.

mod args;
mod count;
mod errors;
mod fast_count;
mod fit;
mod ids;
mod light;
mod messages;
mod recall;
mod text;
mod truncate;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Before any parallel work: the process whose global thread pool it may use.
    crate::parallel::claim_home();
    count::register(m)?;
    fast_count::register(m)?;
    fit::register(m)?;
    truncate::register(m)?;
    messages::register(m)?;
    recall::register(m)?;
    // The error classes live in `windowfit.errors`; re-exported here for old imports.
    m.add("BudgetError", py.get_type::<errors::BudgetError>())?;
    m.add("InvalidMessageError", py.get_type::<errors::InvalidMessageError>())?;
    m.add("MessageTypeError", py.get_type::<errors::MessageTypeError>())?;
    m.add("VocabularyError", py.get_type::<errors::VocabularyError>())?;
    m.add("UnknownEncodingError", py.get_type::<errors::UnknownEncodingError>())?;
    m.add("ENCODINGS", PyTuple::new(py, crate::tokenize::OPENAI_ENCODINGS)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // Whether this build checks debug assertions (`make test` installs one): the benchmarks
    // refuse to time it.
    m.add("DEBUG_ASSERTIONS", cfg!(debug_assertions))?;
    Ok(())
}
