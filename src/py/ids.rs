//! Token ids handed to Python as lists of shared ints.
//!
//! A list of new ints costs an allocation per id, and freeing it a deallocation per id: for
//! 466,429 ids of source code, 7.7 ms of a 17 ms `encode` pass, where the same list made of
//! ints already held took 0.8 ms (benches/RESULTS.md, 2026-11-27). Each id's int is made the
//! first time the id is handed out and kept for the process: at most [`SHARED_IDS`] ints of
//! 32 bytes (o200k's 200,019 ids: 6.4 MB once every id has been seen) and a table of
//! pointers, 2 MiB, mapped whole on the first `encode` (0.7-1.1 ms once; faulted page by page
//! as ids reached them, a fresh process's first `encode` pass over the English dialog took
//! 4.4-4.8 ms, against 3.0-3.3; benches/RESULTS.md, 2026-11-27).

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Ids below this share their int: every id of the vocabularies windowfit reads in full
/// (cl100k, o200k, Qwen, DeepSeek). A higher id gets a new int each time, as before.
const SHARED_IDS: usize = 1 << 18;

/// The shared ints, a null pointer where the id has not been handed out yet. Written only
/// while attached to the interpreter; each pointer holds one reference, never released.
static INTS: OnceLock<Box<[AtomicPtr<ffi::PyObject>]>> = OnceLock::new();

fn table() -> &'static [AtomicPtr<ffi::PyObject>] {
    // All its pages mapped at once: ids land all over the table, and a fresh process's first
    // pass faulted page after page of it.
    INTS.get_or_init(|| crate::memory::populated(SHARED_IDS, || AtomicPtr::new(ptr::null_mut())).into_boxed_slice())
}

/// A new reference to the int `id`, the shared one where there is one.
#[inline(always)]
fn int_of(py: Python<'_>, table: &[AtomicPtr<ffi::PyObject>], id: u32) -> PyResult<*mut ffi::PyObject> {
    let Some(slot) = table.get(id as usize) else {
        return Ok(id.into_pyobject(py)?.into_ptr());
    };
    let mut int = slot.load(Ordering::Acquire);
    if int.is_null() {
        int = shared_int(py, slot, id)?;
    }
    // SAFETY: the table holds a reference to `int` for the life of the process; attached to
    // the interpreter, the count is ours to raise (inline: a call per id was a tenth of a
    // pass over source code).
    unsafe { ffi::Py_INCREF(int) };
    Ok(int)
}

/// The int `id` made and kept in its empty `slot` (or the one another thread kept first).
#[cold]
fn shared_int(py: Python<'_>, slot: &AtomicPtr<ffi::PyObject>, id: u32) -> PyResult<*mut ffi::PyObject> {
    let made = id.into_pyobject(py)?.into_ptr();
    Ok(match slot.compare_exchange(ptr::null_mut(), made, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => made,
        Err(theirs) => {
            // SAFETY: `made` is our own new reference, not stored anywhere.
            unsafe { ffi::Py_DecRef(made) };
            theirs
        }
    })
}

/// `ids` as a Python list of ints.
pub(crate) fn id_list<'py>(py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
    let table = table();
    // SAFETY: a new list of `ids.len()` empty slots, owned by `list` from here on; every slot is
    // set below before the list is handed out (on an error the list is dropped, and a list's
    // deallocation skips empty slots).
    let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(ids.len() as ffi::Py_ssize_t))? };
    for (at, &id) in ids.iter().enumerate() {
        let int = int_of(py, table, id)?;
        // SAFETY: `at` is within the brand-new list, whose slot is empty; the slot takes the
        // new reference `int`.
        unsafe { ffi::PyList_SET_ITEM(list.as_ptr(), at as ffi::Py_ssize_t, int) };
    }
    Ok(list.cast_into::<PyList>()?)
}

/// Each of `batches` as [`id_list`], in a list.
pub(crate) fn id_lists<'py>(py: Python<'py>, batches: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
    let lists = batches.iter().map(|ids| id_list(py, ids)).collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, lists)
}
