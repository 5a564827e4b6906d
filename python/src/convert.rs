//! Conversions between Python and the engine: Rust errors as Python exceptions, settings as
//! samplers, columns of rows as NumPy arrays and back.

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use simbatch::Error;
use simbatch::sample::Scalar;

use crate::{EnvNeedsResetError, SimbatchError};

/// The Python exception for a Rust error.
pub(crate) fn py_err(e: Error) -> PyErr {
    let message = e.to_string();
    match e {
        Error::EnvNeedsReset { .. } => EnvNeedsResetError::new_err(message),
        Error::InvalidValue { .. }
        | Error::InstanceOutOfRange { .. }
        | Error::ColumnLength { .. }
        | Error::Dimension { .. }
        | Error::BadChoice { .. }
        | Error::BadHandle { .. }
        | Error::UnknownParameter { .. }
        | Error::UnknownMotionParameter { .. }
        | Error::DrivenBody { .. }
        | Error::InvalidOption { .. } => PyValueError::new_err(message),
        Error::OutOfMemory { .. } => PyMemoryError::new_err(message),
        _ => SimbatchError::new_err(message),
    }
}

/// The error for an array that is not C-contiguous, naming it.
pub(crate) fn contiguous(what: &str) -> PyErr {
    PyValueError::new_err(format!("{what}: a C-contiguous array is needed"))
}

/// A setting's value: a number, or `{"uniform": [lo, hi]}`, `{"normal": [mean, std]}`,
/// `{"log_uniform": [lo, hi]}`, `{"choice": [v, ...]}` (the `simbatch` command's syntax).
pub(crate) fn scalar(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    const ACCEPTED: &str = "a number, or a dict with one key: uniform=[lo, hi], \
                            normal=[mean, std], log_uniform=[lo, hi] or choice=[values...]";
    if let Ok(x) = value.extract::<f64>() {
        return Ok(Scalar::Fixed(x));
    }
    let bad = || {
        PyValueError::new_err(format!(
            "setting {field}: got {value}; accepted: {ACCEPTED}"
        ))
    };
    let dict = value.cast::<PyDict>().map_err(|_| bad())?;
    if dict.len() != 1 {
        return Err(bad());
    }
    let (kind, args) = dict.iter().next().ok_or_else(bad)?;
    let kind: String = kind.extract().map_err(|_| bad())?;
    let numbers: Vec<f64> = args.extract().map_err(|_| bad())?;
    // The one parser of the distribution syntax, shared with the `simbatch` command.
    Scalar::distribution(&kind, &numbers)
        .map_err(|e| PyValueError::new_err(format!("setting {field}: {e}")))
}

/// A column of `[f64; K]` rows as an `(n, K)` array.
pub(crate) fn rows_to_array<'py, const K: usize>(
    py: Python<'py>,
    rows: &[[f64; K]],
) -> Bound<'py, PyArray2<f64>> {
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    PyArray1::from_vec(py, flat)
        .reshape([rows.len(), K])
        .expect("n × K elements")
}

/// An `(n, K)` array as rows of `[f64; K]`.
pub(crate) fn array_to_rows<const K: usize>(
    field: &str,
    a: &PyReadonlyArray2<'_, f64>,
) -> PyResult<Vec<[f64; K]>> {
    let shape = a.shape();
    if shape[1] != K {
        return Err(PyValueError::new_err(format!(
            "{field}: got {} values per instance, expected {K}",
            shape[1]
        )));
    }
    let flat = a.as_slice().map_err(|_| contiguous(field))?;
    Ok(flat
        .chunks_exact(K)
        .map(|c| c.try_into().expect("K values"))
        .collect())
}
