//! The vectorcall fast path of `Counter.count`, `Encoding.count` and `windowfit.count`: a
//! text (and for `windowfit.count`, a model whose shared counter exists) goes straight to
//! `PyCounter::count_text`; any other call goes to the regular PyO3 method, or the Python
//! layer's function.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use pyo3::Borrowed;
use pyo3::PyClass;

use super::count::{PyCounter, PyEncoding};
use super::errors::{guarded, ArgumentTypeError};

/// `Counter.count` as a plain vectorcall method. PyO3's generic argument parsing, and the
/// generic call CPython falls back to when the method was defined on a base class of the
/// object's type, were most of a warm count's cost: `_fast_count` installs this on
/// `windowfit.Counter` itself, where CPython's specialised call path reaches it directly.
/// Anything but one positional argument goes to the regular method (same errors).
/// `Encoding.count` is the same, installed on the class by `register`; the module-level
/// `windowfit.count` is [`ModuleCount`].
unsafe extern "C" fn fastcall<F: FastCall>(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls methods and functions with the thread attached, with the
    // arguments `F::call` asks for. No panic may unwind out of a C callback: the whole body
    // is guarded, not just the count.
    unsafe {
        let py = Python::assume_attached();
        returned(py, guarded("count", || F::call(py, slf, Arguments { args, nargs, kwnames })))
    }
}

/// What a fast `count` does with a vectorcall's arguments: counts the text here, or hands the
/// call on.
trait FastCall {
    /// # Safety
    /// `slf` is the callable's `self` (an instance of the class the method was made for, or
    /// the module of a function); `given` as CPython passed it; the thread is attached.
    unsafe fn call(py: Python<'_>, slf: *mut ffi::PyObject, given: Arguments) -> PyResult<Py<PyAny>>;
}

/// A vectorcall's arguments: `args` holds `nargs` positional ones, then one per name in
/// `kwnames` (a tuple of str, or null).
#[derive(Clone, Copy)]
struct Arguments {
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
}

/// The classes with a fast `count`: the counter they count with, and their regular method.
trait CountOwner: PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync {
    fn counter(&self) -> &PyCounter;
    fn regular() -> &'static PyOnceLock<Py<PyAny>>;
}

impl CountOwner for PyCounter {
    fn counter(&self) -> &PyCounter {
        self
    }
    fn regular() -> &'static PyOnceLock<Py<PyAny>> {
        &COUNTER_COUNT
    }
}

impl CountOwner for PyEncoding {
    fn counter(&self) -> &PyCounter {
        self.counter.get()
    }
    fn regular() -> &'static PyOnceLock<Py<PyAny>> {
        &ENCODING_COUNT
    }
}

/// The regular (PyO3) `count` methods, for the calls the fast ones leave.
static COUNTER_COUNT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ENCODING_COUNT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// One positional `str`: counted here. Anything else: `regular(slf, *args, **kwargs)`.
impl<T: CountOwner> FastCall for T {
    unsafe fn call(py: Python<'_>, slf: *mut ffi::PyObject, given: Arguments) -> PyResult<Py<PyAny>> {
        // SAFETY: the descriptor checked that `slf` is an instance of the class it was made
        // for, a `T` (`_fast_count` verifies for `Counter`'s subclasses; `Encoding` is final)
        let owner = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<T>() };
        if given.nargs == 1 && given.kwnames.is_null() {
            // SAFETY: args[0] is a borrowed reference
            return counted(py, owner.get().counter(), unsafe { *given.args });
        }
        match T::regular().get(py) {
            // SAFETY: the caller's arguments, as CPython passed them
            Some(regular) => unsafe { call_regular(py, regular.bind(py), Some(slf), given) },
            None => Err(super::errors::InternalError::new_err("count: the regular method is not registered")),
        }
    }
}

/// The count of the text `text` (a borrowed reference) by `counter`, as a Python int.
fn counted(py: Python<'_>, counter: &PyCounter, text: *mut ffi::PyObject) -> PyResult<Py<PyAny>> {
    // SAFETY: the caller's borrowed reference, alive for the call
    let text = unsafe { Borrowed::from_ptr(py, text) };
    let n = counter.count_text(py, &text)?;
    Ok(n.into_pyobject(py)?.into_any().unbind())
}

/// A C callback's return: the object, or null with the error set.
fn returned(py: Python<'_>, result: PyResult<Py<PyAny>>) -> *mut ffi::PyObject {
    match result {
        Ok(obj) => obj.into_ptr(),
        Err(e) => {
            e.restore(py);
            std::ptr::null_mut()
        }
    }
}

/// `regular(slf, *args, **kwargs)` (without `slf` where it is `None`) from a vectorcall's
/// arguments.
unsafe fn call_regular(
    py: Python<'_>,
    regular: &Bound<'_, PyAny>,
    slf: Option<*mut ffi::PyObject>,
    given: Arguments,
) -> PyResult<Py<PyAny>> {
    let Arguments { args, nargs, kwnames } = given;
    let names = if kwnames.is_null() {
        None
    } else {
        Some(unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() })
    };
    let given = nargs as usize + names.as_ref().map_or(0, |n| n.len());
    let values: Vec<Bound<'_, PyAny>> =
        (0..given).map(|i| unsafe { Bound::from_borrowed_ptr(py, *args.add(i)) }).collect();
    let mut positional: Vec<Bound<'_, PyAny>> =
        slf.map(|slf| unsafe { Bound::from_borrowed_ptr(py, slf) }).into_iter().collect();
    positional.extend(values[..nargs as usize].iter().cloned());
    let kwargs = PyDict::new(py);
    if let Some(names) = names {
        for (name, value) in names.iter().zip(&values[nargs as usize..]) {
            kwargs.set_item(name, value)?;
        }
    }
    Ok(regular.call(PyTuple::new(py, positional)?, Some(&kwargs))?.unbind())
}

/// A method definition for CPython, which keeps a pointer to it.
struct MethodDef(std::cell::UnsafeCell<ffi::PyMethodDef>);
// SAFETY: never written after construction; CPython only reads it.
unsafe impl Sync for MethodDef {}

const fn count_def<T: CountOwner>() -> MethodDef {
    MethodDef(std::cell::UnsafeCell::new(ffi::PyMethodDef {
        ml_name: c"count".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunctionFastWithKeywords: fastcall::<T> },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: c"count($self, text)\n--\n\nTokens of `text` (cached by content).".as_ptr(),
    }))
}

static COUNT_DEF: MethodDef = count_def::<PyCounter>();
static ENCODING_COUNT_DEF: MethodDef = count_def::<PyEncoding>();

/// Define `count` on `cls` from `def` (a method descriptor of `cls` itself).
fn install_count(cls: &Bound<'_, PyType>, def: &'static MethodDef) -> PyResult<()> {
    // SAFETY: a live type object and a definition that lives as long as the process.
    let descr =
        unsafe { Bound::from_owned_ptr_or_err(cls.py(), ffi::PyDescr_NewMethod(cls.as_type_ptr(), def.0.get()))? };
    cls.setattr("count", descr)
}

/// Give `cls` (a Python subclass of `Counter`) its own `count`, defined on `cls`, so that
/// CPython's specialised method call applies to its instances (see [`fastcall`]).
#[pyfunction]
fn _fast_count(cls: &Bound<'_, PyType>) -> PyResult<()> {
    if !cls.is_subclass_of::<PyCounter>()? {
        return Err(ArgumentTypeError::new_err(format!("{} is not a subclass of Counter", cls.name()?)));
    }
    install_count(cls, &COUNT_DEF)
}

/// `windowfit.count(text, model=...)` as a plain vectorcall function over the Python layer's
/// state ([`MODULE_COUNT_STATE`]). As a Python function it cost 122 ns a warm count against
/// `Counter.count`'s 29 (benches/RESULTS.md, 2026-11-27): the call, the keyword and the dict
/// read in bytecode. Its `__self__` is the module that defines it, so that it pickles by name
/// (`multiprocessing` sends it so); a builtin bound to any other object pickles as that
/// object's attribute.
struct ModuleCount;

/// `(shared, default_model, slow)`: the Python layer's dict of shared counters by model, the
/// default model's name, and the Python function that makes a missing counter and takes any
/// other call. Set once, by the first `_module_count`.
static MODULE_COUNT_STATE: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();

/// `(text)`, `(text, model)` or `(text, model=...)` with the model's counter in `shared`:
/// counted here. Anything else goes to the Python layer's function.
impl FastCall for ModuleCount {
    unsafe fn call(py: Python<'_>, _module: *mut ffi::PyObject, given: Arguments) -> PyResult<Py<PyAny>> {
        let Arguments { args, nargs, kwnames } = given;
        let Some(state) = MODULE_COUNT_STATE.get(py) else {
            return Err(super::errors::InternalError::new_err("count: the module's state is not registered"));
        };
        let state = state.bind_borrowed(py);
        let (shared, default_model, slow) =
            (state.get_borrowed_item(0)?, state.get_borrowed_item(1)?, state.get_borrowed_item(2)?);
        // SAFETY: `kwnames` is null or a tuple of str, as CPython passes it
        let keywords = if kwnames.is_null() { 0 } else { unsafe { ffi::PyTuple_Size(kwnames) } };
        let model = match (nargs, keywords) {
            (1, 0) => Some(default_model.to_owned()),
            // SAFETY: args[1] is a borrowed reference
            (2, 0) => Some(unsafe { Bound::from_borrowed_ptr(py, *args.add(1)) }),
            (1, 1) => {
                // SAFETY: a one-item tuple of str
                let name = unsafe { Borrowed::from_ptr(py, ffi::PyTuple_GetItem(kwnames, 0)) };
                // SAFETY: args[1] is the keyword's value, a borrowed reference
                (name.cast::<PyString>().is_ok_and(|n| n.to_str().is_ok_and(|n| n == "model")))
                    .then(|| unsafe { Bound::from_borrowed_ptr(py, *args.add(1)) })
            }
            _ => None,
        };
        let counter = match &model {
            Some(model) if model.is_exact_instance_of::<PyString>() => {
                shared.cast::<PyDict>().ok().and_then(|d| d.get_item(model).ok().flatten())
            }
            _ => None,
        };
        if let Some(counter) = counter.as_ref().and_then(|c| c.cast::<PyCounter>().ok()) {
            // SAFETY: args[0] is a borrowed reference
            return counted(py, counter.get(), unsafe { *args });
        }
        // SAFETY: the caller's arguments, as CPython passed them
        unsafe { call_regular(py, &slow, None, given) }
    }
}

static MODULE_COUNT_DEF: MethodDef = MethodDef(std::cell::UnsafeCell::new(ffi::PyMethodDef {
    ml_name: c"count".as_ptr(),
    ml_meth: ffi::PyMethodDefPointer { PyCFunctionFastWithKeywords: fastcall::<ModuleCount> },
    ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
    ml_doc:
        c"count(text, model='gpt-4o')\n--\n\nTokens of ``text`` for ``model``, with a shared cached counter per model."
            .as_ptr(),
}));

/// The module-level `count` of `module` over `shared` (model -> counter), `default_model`
/// and `slow` (see [`MODULE_COUNT_STATE`]); the state of the first call is kept.
#[pyfunction]
fn _module_count(
    py: Python<'_>,
    module: &Bound<'_, PyModule>,
    shared: &Bound<'_, PyDict>,
    default_model: &Bound<'_, PyString>,
    slow: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    MODULE_COUNT_STATE
        .get_or_try_init(py, || PyTuple::new(py, [shared.as_any(), default_model.as_any(), slow]).map(Bound::unbind))?;
    let name = module.name()?;
    // SAFETY: a definition that lives as long as the process; the function keeps a reference
    // to `module` (its `__self__`) and to `name` (its `__module__`).
    let function = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyCFunction_NewEx(MODULE_COUNT_DEF.0.get(), module.as_ptr(), name.as_ptr()),
        )?
    };
    Ok(function.unbind())
}

/// Record the regular `count` methods, install the fast one on `Encoding`, and add
/// `_fast_count` (for `windowfit.Counter`, a Python subclass) to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    COUNTER_COUNT.get_or_try_init(py, || py.get_type::<PyCounter>().getattr("count").map(Bound::unbind))?;
    let encoding = py.get_type::<PyEncoding>();
    ENCODING_COUNT.get_or_try_init(py, || encoding.getattr("count").map(Bound::unbind))?;
    install_count(&encoding, &ENCODING_COUNT_DEF)?;
    m.add_function(wrap_pyfunction!(_fast_count, m)?)?;
    m.add_function(wrap_pyfunction!(_module_count, m)?)?;
    Ok(())
}
