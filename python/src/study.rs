//! Monte Carlo studies from Python: the scenario is parsed, checked, drawn and run by the same
//! Rust code as the `simbatch` command (one parser of the scenario and distribution syntax),
//! and results come back as whole NumPy columns (no per-row Python work); a study's instances
//! are replayed into pictures as `simbatch render` does.

use std::path::PathBuf;

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use simbatch::backend::Backend;
use simbatch::cli::scenario::Scenario;
use simbatch::cli::{CliError, output, run_study, shard_range};
use simbatch::gpu::Precision;

/// A command error as the Python exception a user expects: a located scenario mistake or a bad
/// value is a `ValueError`, a file problem an `OSError`, the rest the engine's.
pub fn cli_err(e: CliError) -> PyErr {
    match e {
        CliError::Engine(e) => super::py_err(e),
        CliError::Io { .. } => PyOSError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// A Python value (dict, list, str, int, float, bool) as TOML, for a scenario given as a dict.
fn toml_value(v: &Bound<'_, PyAny>, path: &str) -> PyResult<toml::Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(toml::Value::Integer(v.extract()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(v.extract()?));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut table = toml::map::Map::new();
        for (k, item) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("{path}: keys must be strings")))?;
            let value = toml_value(&item, &format!("{path}.{key}"))?;
            table.insert(key, value);
        }
        return Ok(toml::Value::Table(table));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = v.try_iter()?.collect::<PyResult<_>>()?;
        let values = items
            .iter()
            .enumerate()
            .map(|(k, item)| toml_value(item, &format!("{path}[{k}]")))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(toml::Value::Array(values));
    }
    // NumPy scalars and the like: as a float when they convert.
    if let Ok(x) = v.extract::<f64>() {
        return Ok(toml::Value::Float(x));
    }
    Err(PyTypeError::new_err(format!(
        "{path}: {} is not a scenario value; accepted: dict, list, str, int, float, bool",
        v.get_type().name()?
    )))
}

/// The TOML text of a scenario given as a dict with the file format's schema.
#[pyfunction]
pub fn scenario_toml(source: &Bound<'_, PyDict>) -> PyResult<String> {
    let value = toml_value(source.as_any(), "scenario")?;
    toml::to_string(&value).map_err(|e| PyValueError::new_err(format!("scenario: {e}")))
}

/// Parses and checks a scenario (`file` names it in messages); returns `(name, instances,
/// duration)`. A mistake raises `ValueError` located as the command locates it
/// (`file:line:column: field: what is accepted`).
#[pyfunction]
pub fn check_scenario(file: &str, source: &str) -> PyResult<(String, usize, f64)> {
    let sc = Scenario::parse(file, source).map_err(cli_err)?;
    Ok((sc.name.clone(), sc.instances, sc.simulation.duration))
}

/// Runs a study as `simbatch run` does into `out` (the default directory when `None`); returns
/// the output directory and its manifest (JSON text). The GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (file, source, out=None, backend=None, precision=None, shard=None, instances=None, force=false, quiet=true))]
#[allow(clippy::too_many_arguments)]
pub fn run_scenario(
    py: Python<'_>,
    file: &str,
    source: &str,
    out: Option<PathBuf>,
    backend: Option<&str>,
    precision: Option<&str>,
    shard: Option<(usize, usize)>,
    instances: Option<usize>,
    force: bool,
    quiet: bool,
) -> PyResult<(String, String)> {
    let mut sc = Scenario::parse(file, source).map_err(cli_err)?;
    if let Some(n) = instances {
        if n == 0 {
            return Err(PyValueError::new_err(
                "instances: got 0; accepted: an integer ≥ 1",
            ));
        }
        sc.instances = n;
    }
    if let Some(p) = precision {
        sc.simulation.precision = p.parse::<Precision>().map_err(super::py_err)?;
    }
    if let Some((i, n)) = shard
        && (n == 0 || i >= n)
    {
        return Err(PyValueError::new_err(format!(
            "shard = ({i}, {n}); accepted: (I, N) with 0 ≤ I < N"
        )));
    }
    let explicit = backend
        .map(|b| b.parse::<Backend>())
        .transpose()
        .map_err(super::py_err)?;
    let backend =
        simbatch::backend::choose(explicit, sc.simulation.backend).map_err(super::py_err)?;
    let out = out.unwrap_or_else(|| simbatch::cli::default_out(&sc, shard));
    let _ = shard_range(sc.instances, shard);
    let manifest = py
        .detach(|| run_study(&sc, shard, backend, &out, force, quiet))
        .map_err(cli_err)?;
    Ok((out.display().to_string(), manifest.to_string()))
}

/// A study's CSV table (`results.csv`, `series.csv`, …) as `(columns, index, values)`: the
/// column names after `index`, the instance index of each row, and the values as one
/// `(rows, columns)` float64 array.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn read_table<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(
    Vec<String>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray2<f64>>,
)> {
    let (columns, rows) = py.detach(|| output::read_csv(&path)).map_err(cli_err)?;
    let width = columns.len();
    let mut values = Vec::with_capacity(rows.len() * width);
    let mut index = Vec::with_capacity(rows.len());
    for (i, row) in &rows {
        index.push(*i as u64);
        values.extend_from_slice(row);
    }
    let values = PyArray1::from_vec(py, values).reshape([rows.len(), width])?;
    Ok((columns, PyArray1::from_vec(py, index), values))
}

/// The arrays of a rollout: `(q, u, multipliers)`, each `(instances, steps + 1, width)`.
type RolloutArrays<'py> = (
    Bound<'py, numpy::PyArray3<f64>>,
    Bound<'py, numpy::PyArray3<f64>>,
    Bound<'py, numpy::PyArray3<f64>>,
    f64,
);

/// Rolls out `instances` of a scenario for `steps` steps of `interval` seconds (default: the
/// scenario's integrator step, see `simbatch::cli::rollout`), with optional controls
/// `(instances, steps, bodies, 6)`; returns `(q, u, multipliers, interval)`. The GIL is
/// released while it runs.
#[pyfunction]
#[pyo3(signature = (file, source, instances, steps, controls=None, interval=None))]
pub fn rollout<'py>(
    py: Python<'py>,
    file: &str,
    source: &str,
    instances: Vec<usize>,
    steps: usize,
    controls: Option<numpy::PyReadonlyArray1<'py, f64>>,
    interval: Option<f64>,
) -> PyResult<RolloutArrays<'py>> {
    let sc = Scenario::parse(file, source).map_err(cli_err)?;
    let controls = controls
        .as_ref()
        .map(|c| c.as_slice().map(<[f64]>::to_vec))
        .transpose()
        .map_err(|_| PyValueError::new_err("controls: accepted: a C-contiguous float64 array"))?;
    let r = py
        .detach(|| {
            simbatch::cli::rollout::rollout_every(
                &sc,
                &instances,
                steps,
                interval,
                controls.as_deref(),
            )
        })
        .map_err(cli_err)?;
    let shape = |w: usize| [r.instances, r.steps + 1, w];
    Ok((
        PyArray1::from_vec(py, r.q).reshape(shape(r.nq))?,
        PyArray1::from_vec(py, r.u).reshape(shape(r.nu))?,
        PyArray1::from_vec(py, r.multipliers).reshape(shape(r.nm))?,
        r.step,
    ))
}

/// Runs `simbatch bench` with `args` (the command's flags after `bench`), GIL released; its
/// table goes to standard output and, with `--json`, its rows to that file.
#[pyfunction]
pub fn bench(py: Python<'_>, args: Vec<String>) -> PyResult<()> {
    // Checked here: clap would end the process on a bad flag.
    let known = [
        "--n",
        "--backends",
        "--substeps",
        "--integrators",
        "--threads",
        "--precision",
        "--seconds",
        "--json",
    ];
    if !args.len().is_multiple_of(2) {
        return Err(PyValueError::new_err(
            "bench flags come in flag, value pairs",
        ));
    }
    if let Some(bad) = args
        .iter()
        .step_by(2)
        .find(|a| !known.contains(&a.as_str()))
    {
        return Err(PyValueError::new_err(format!(
            "bench flag {bad:?}; accepted: {}",
            known.join(", ")
        )));
    }
    let argv: Vec<std::ffi::OsString> = ["simbatch", "bench"]
        .into_iter()
        .map(String::from)
        .chain(args)
        .map(Into::into)
        .collect();
    py.detach(|| simbatch::cli::main_with(argv))
        .map_err(cli_err)
}

/// Replays `instances` of the study in `study` (an output directory of `simbatch run`) and
/// writes `out` (`.gif`, `.html` or `.png` by extension), as `simbatch render` does; returns
/// the number of frames replayed. The GIL is released meanwhile.
#[pyfunction]
#[pyo3(signature = (study, instances, out, interval=None, time=None, layout="panels", size=(640, 480), speed=1.0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn render_study(
    py: Python<'_>,
    study: PathBuf,
    instances: Vec<usize>,
    out: PathBuf,
    interval: Option<f64>,
    time: Option<f64>,
    layout: &str,
    size: (usize, usize),
    speed: f64,
) -> PyResult<usize> {
    let args = simbatch::cli::render::RenderArgs {
        study,
        instances,
        out,
        interval,
        time,
        layout: layout.to_string(),
        size: format!("{}x{}", size.0, size.1),
        speed,
    };
    py.detach(|| simbatch::cli::render::render_study(&args))
        .map_err(cli_err)
}
