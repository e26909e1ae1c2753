//! Rust errors as Python exceptions of the `deltacells.errors` family, with
//! the Rust error's message.

use deltacells::format::npy::NpyError;
use deltacells::format::ts2diff::Ts2diffError;
use deltacells::format::xdelta::XdeltaError;
use deltacells::format::EncodeError;
use deltacells::Error;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The class in `deltacells.errors` that an error becomes.
fn class_name(e: &Error) -> &'static str {
    match e {
        Error::Input(_)
        | Error::OutputLength { .. }
        | Error::Encode(EncodeError::Input(_) | EncodeError::Policy(_))
        | Error::Ts2diff(
            Ts2diffError::UnknownType(_)
            | Ts2diffError::BlockSize(_)
            | Ts2diffError::PageTooLarge(_)
            | Ts2diffError::MaxPointNumber(_),
        )
        | Error::Npy(NpyError::Array(_) | NpyError::Archive(_) | NpyError::File { .. }) => {
            "InputError"
        }
        Error::Io { .. } | Error::Npy(NpyError::Io { .. }) => "StorageError",
        Error::InMember { error, .. } => class_name(error),
        Error::Config(_)
        | Error::Backend(_)
        | Error::Encode(EncodeError::Compress(_) | EncodeError::Backend(_))
        | Error::Ts2diff(Ts2diffError::Backend(_))
        | Error::Xdelta(XdeltaError::Backend(_)) => "DeltacellsError",
        // Everything else is data that breaks the format: tiles, the manifest,
        // side files, obs shards, codec input.
        _ => "FormatError",
    }
}

/// Converts a Rust error into the matching Python exception.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    let class = py
        .import("deltacells.errors")
        .and_then(|m| m.getattr(class_name(&e)))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(class) => PyErr::from_type(class, message),
        // The package's Python half is missing: still an exception, never a crash.
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

/// `?` for engine results inside `#[pymethods]`.
pub trait OrRaise<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for deltacells::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

pyo3::import_exception!(deltacells.errors, InputError);
pyo3::import_exception!(deltacells.errors, FormatError);

/// An invalid argument, raised as `deltacells.errors.InputError` (a
/// `ValueError`), as the engine's own input errors are.
pub fn input_error(message: impl Into<String>) -> PyErr {
    InputError::new_err(message.into())
}

/// Stored data the package cannot represent, raised as
/// `deltacells.errors.FormatError`.
pub fn format_error(message: impl Into<String>) -> PyErr {
    FormatError::new_err(message.into())
}
