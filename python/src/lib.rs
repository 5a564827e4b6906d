//! `simbatch._simbatch`: the Rust core behind the Python package.
//!
//! [`Core`] owns one [`VectorEnv`]; the Python class `simbatch.VectorEnv` (in
//! `simbatch/__init__.py`) wraps it as a `gymnasium.vector.VectorEnv`. Every step and reset
//! writes into NumPy arrays the caller passes (allocated once per call by the wrapper, or reused
//! by the caller through `step_into`), with the GIL released while the physics runs. Errors
//! become Python exceptions carrying the Rust message: bad input is a `ValueError`, an ended
//! environment stepped with autoreset disabled an `EnvNeedsResetError`, anything else a
//! `SimbatchError`.

use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1,
    PyReadwriteArray2,
};
use pyo3::create_exception;
use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use simbatch::Error;
use simbatch::backend::Backend;
use simbatch::env::{AutoReset, StepOut, VectorEnv, make_task};
use simbatch::gpu::Precision;
use simbatch::model::{BodyId, BodyKind, ConstraintId};

mod convert;
mod study;

use convert::{array_to_rows, contiguous, py_err, rows_to_array, scalar};

create_exception!(
    _simbatch,
    SimbatchError,
    PyException,
    "An error of the simbatch engine (the message is the Rust error's)."
);
create_exception!(
    _simbatch,
    EnvNeedsResetError,
    SimbatchError,
    "An environment that ended was stepped with autoreset disabled; reset it first."
);

/// Seeds, episode numbers and elapsed steps, one array each.
type Counters<'py> = (
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u32>>,
);

/// The Rust core of one vector environment.
///
/// The environment sits behind a mutex: the GIL is released while it steps, so a second
/// Python thread may call in meanwhile; it gets a clear `RuntimeError` instead of waiting (a
/// thread waiting for the mutex while holding the GIL would deadlock the one that needs the GIL
/// back to return).
#[pyclass(module = "simbatch._simbatch")]
struct Core {
    env: Mutex<VectorEnv>,
}

impl Core {
    /// The environment, or an error when another thread is using it.
    fn lock(&self) -> PyResult<MutexGuard<'_, VectorEnv>> {
        match self.env.try_lock() {
            Ok(guard) => Ok(guard),
            // A panic in another call cannot leave the environment half-written (every call
            // checks its inputs before changing anything), so a poisoned lock is still usable.
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(
                "this simbatch environment is in use by another thread (a step or reset is \
                 running); step one environment from one thread at a time, or give each \
                 thread its own environment",
            )),
        }
    }

    fn body(env: &VectorEnv, name: &str) -> PyResult<(BodyId, BodyKind)> {
        let bodies = env.batch().template().bodies();
        bodies
            .iter()
            .position(|b| b.name == name)
            .map(|k| (BodyId::new(k), bodies[k].kind))
            .ok_or_else(|| {
                let names: Vec<&str> = bodies.iter().map(|b| b.name.as_str()).collect();
                PyValueError::new_err(format!("no body {name:?}; bodies: {names:?}"))
            })
    }
}

#[pymethods]
impl Core {
    #[new]
    #[pyo3(signature = (env_id, num_envs, autoreset = "next_step", backend = "cpu", precision = "f32", settings = None))]
    fn new(
        env_id: &str,
        num_envs: usize,
        autoreset: &str,
        backend: &str,
        precision: &str,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut parsed = Vec::new();
        if let Some(d) = settings {
            for (k, v) in d.iter() {
                let field: String = k.extract()?;
                let value = scalar(&field, &v)?;
                parsed.push((field, value));
            }
        }
        let task = make_task(env_id, &parsed).map_err(py_err)?;
        let autoreset = AutoReset::parse(autoreset).map_err(py_err)?;
        let backend = match backend {
            "cpu" => Backend::Cpu,
            "gpu" => Backend::Gpu,
            "auto" => Backend::Auto,
            other => {
                return Err(PyValueError::new_err(format!(
                    "backend {other:?}; accepted: cpu, gpu, auto"
                )));
            }
        };
        let precision = match precision {
            "f32" => Precision::F32,
            "f64" => Precision::F64,
            other => {
                return Err(PyValueError::new_err(format!(
                    "precision {other:?}; accepted: f32, f64"
                )));
            }
        };
        let options = simbatch::env::EnvOptions {
            autoreset,
            backend,
            precision,
        };
        let env = VectorEnv::new(task, num_envs, options).map_err(py_err)?;
        Ok(Self {
            env: Mutex::new(env),
        })
    }

    /// Number of environments.
    #[getter]
    fn num_envs(&self) -> PyResult<usize> {
        let env = self.lock()?;
        Ok(env.len())
    }

    /// The task's name.
    #[getter]
    fn name(&self) -> PyResult<&'static str> {
        let env = self.lock()?;
        Ok(env.spec().name)
    }

    /// `(low, high)` of one environment's observation.
    #[getter]
    fn observation_bounds(&self) -> PyResult<(Vec<f32>, Vec<f32>)> {
        let env = self.lock()?;
        let s = &env.spec().observation;
        Ok((s.low.clone(), s.high.clone()))
    }

    /// `(low, high)` of one environment's action.
    #[getter]
    fn action_bounds(&self) -> PyResult<(Vec<f32>, Vec<f32>)> {
        let env = self.lock()?;
        let s = &env.spec().action;
        Ok((s.low.clone(), s.high.clone()))
    }

    /// Names of the observation values.
    #[getter]
    fn observation_names(&self) -> PyResult<Vec<&'static str>> {
        let env = self.lock()?;
        Ok(env.spec().observation_names.clone())
    }

    /// Names of the action values.
    #[getter]
    fn action_names(&self) -> PyResult<Vec<&'static str>> {
        let env = self.lock()?;
        Ok(env.spec().action_names.clone())
    }

    /// Seconds of simulated time per step.
    #[getter]
    fn control_dt(&self) -> PyResult<f64> {
        let env = self.lock()?;
        Ok(env.spec().control_dt)
    }

    /// Episode length limit.
    #[getter]
    fn max_episode_steps(&self) -> PyResult<u32> {
        let env = self.lock()?;
        Ok(env.spec().max_episode_steps)
    }

    /// Autoreset mode name.
    #[getter]
    fn autoreset(&self) -> PyResult<&'static str> {
        let env = self.lock()?;
        Ok(env.autoreset().name())
    }

    /// `"cpu"` or `"gpu"`: where the physics runs.
    #[getter]
    fn backend(&self) -> PyResult<&'static str> {
        let env = self.lock()?;
        Ok(match env.backend() {
            Backend::Gpu => "gpu",
            _ => "cpu",
        })
    }

    /// Why `auto` fell back to the CPU, if it did.
    #[getter]
    fn backend_note(&self) -> PyResult<Option<String>> {
        let env = self.lock()?;
        Ok(env.backend_note().map(str::to_string))
    }

    /// Whether the task's unilateral contacts step on the GPU's event kernels (a GPU backend and
    /// a task within their reach, from the first step on); else on the CPU.
    #[getter]
    fn unilateral_on_gpu(&self) -> PyResult<bool> {
        let env = self.lock()?;
        Ok(env.unilateral_on_gpu())
    }

    /// Names of the template's bodies (index = body id; 0 is Ground).
    #[getter]
    fn body_names(&self) -> PyResult<Vec<String>> {
        let env = self.lock()?;
        Ok(env
            .batch()
            .template()
            .bodies()
            .iter()
            .map(|b| b.name.clone())
            .collect())
    }

    /// `(kind, parameter names)` of each constraint.
    #[getter]
    fn constraints(&self) -> PyResult<Vec<(String, Vec<String>)>> {
        let env = self.lock()?;
        Ok(env
            .batch()
            .template()
            .constraints()
            .iter()
            .map(|c| {
                (
                    c.constraint.kind_name().to_string(),
                    c.constraint
                        .params()
                        .iter()
                        .map(|p| p.name.to_string())
                        .collect(),
                )
            })
            .collect())
    }

    /// Starts new episodes (see `simbatch::env::VectorEnv::reset_with_seeds`), writing every
    /// observation into `obs`; the GIL is released meanwhile.
    #[pyo3(signature = (obs, seeds = None, mask = None))]
    fn reset(
        &self,
        py: Python<'_>,
        mut obs: PyReadwriteArray2<'_, f32>,
        seeds: Option<PyReadonlyArray1<'_, u64>>,
        mask: Option<PyReadonlyArray1<'_, bool>>,
    ) -> PyResult<()> {
        let mut env = self.lock()?;
        let obs = obs.as_slice_mut().map_err(|_| contiguous("obs"))?;
        let seeds = match &seeds {
            Some(s) => Some(s.as_slice().map_err(|_| contiguous("seeds"))?),
            None => None,
        };
        let mask = match &mask {
            Some(m) => Some(m.as_slice().map_err(|_| contiguous("mask"))?),
            None => None,
        };
        let env = &mut *env;
        py.detach(|| env.reset_with_seeds(seeds, mask, obs))
            .map_err(py_err)
    }

    /// One step of every environment, writing into the arrays given; the GIL is released
    /// meanwhile. Returns every environment's flags OR-ed together, so the caller looks at the
    /// per-environment flags only when something ended or went non-finite.
    #[pyo3(signature = (actions, obs, reward, terminated, truncated, flags, final_obs = None))]
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        py: Python<'_>,
        actions: PyReadonlyArray2<'_, f32>,
        mut obs: PyReadwriteArray2<'_, f32>,
        mut reward: PyReadwriteArray1<'_, f32>,
        mut terminated: PyReadwriteArray1<'_, bool>,
        mut truncated: PyReadwriteArray1<'_, bool>,
        mut flags: PyReadwriteArray1<'_, u32>,
        final_obs: Option<PyReadwriteArray2<'_, f32>>,
    ) -> PyResult<u32> {
        let mut env = self.lock()?;
        let actions = actions.as_slice().map_err(|_| contiguous("actions"))?;
        let obs = obs.as_slice_mut().map_err(|_| contiguous("obs"))?;
        let reward = reward.as_slice_mut().map_err(|_| contiguous("reward"))?;
        let terminated = terminated
            .as_slice_mut()
            .map_err(|_| contiguous("terminated"))?;
        let truncated = truncated
            .as_slice_mut()
            .map_err(|_| contiguous("truncated"))?;
        let flags = flags.as_slice_mut().map_err(|_| contiguous("flags"))?;
        let mut final_obs = final_obs;
        let final_obs = match &mut final_obs {
            Some(f) => Some(f.as_slice_mut().map_err(|_| contiguous("final_obs"))?),
            None => None,
        };
        let env = &mut *env;
        py.detach(|| {
            env.step(
                actions,
                StepOut {
                    obs,
                    reward,
                    terminated,
                    truncated,
                    final_obs,
                    flags: Some(&mut *flags),
                },
            )?;
            Ok(flags.iter().fold(0, |seen, f| seen | f))
        })
        .map_err(py_err)
    }

    /// Every environment's current observation into `obs`.
    fn observe(&self, mut obs: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        let env = self.lock()?;
        let n = env.len() * env.spec().observation.dim();
        let obs = obs.as_slice_mut().map_err(|_| contiguous("obs"))?;
        if obs.len() != n {
            return Err(py_err(Error::Dimension {
                what: "observation buffer",
                got: obs.len(),
                expected: n,
            }));
        }
        env.observe_all(obs);
        Ok(())
    }

    /// A body's column as an `(num_envs, width)` array (a copy). Free bodies: `mass`, `com`,
    /// `inertia`, `applied_force`, `applied_torque`, `q`, `u`; prescribed bodies: `pose`,
    /// `velocity`, `acceleration`.
    fn get_body<'py>(
        &self,
        py: Python<'py>,
        body: &str,
        field: &str,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let env = self.lock()?;
        let (id, kind) = Self::body(&env, body)?;
        let b = env.batch();
        let e = py_err;
        Ok(match (kind, field) {
            (BodyKind::Free, "mass") => {
                let rows: Vec<[f64; 1]> = b.mass(id).map_err(e)?.iter().map(|m| [*m]).collect();
                rows_to_array(py, &rows)
            }
            (BodyKind::Free, "com") => rows_to_array(py, b.com(id).map_err(e)?),
            (BodyKind::Free, "inertia") => rows_to_array(py, b.inertia(id).map_err(e)?),
            (BodyKind::Free, "applied_force") => rows_to_array(py, b.applied_force(id).map_err(e)?),
            (BodyKind::Free, "applied_torque") => {
                rows_to_array(py, b.applied_torque(id).map_err(e)?)
            }
            (BodyKind::Free, "q") => rows_to_array(py, b.q(id).map_err(e)?),
            (BodyKind::Free, "u") => rows_to_array(py, b.u(id).map_err(e)?),
            (BodyKind::Prescribed, "pose") => rows_to_array(py, b.pose(id).map_err(e)?),
            (BodyKind::Prescribed, "velocity") => rows_to_array(py, b.velocity(id).map_err(e)?),
            (BodyKind::Prescribed, "acceleration") => {
                rows_to_array(py, b.acceleration(id).map_err(e)?)
            }
            _ => {
                return Err(PyValueError::new_err(format!(
                    "body {body:?} ({kind:?}) has no field {field:?}; free bodies: mass, com, \
                     inertia, applied_force, applied_torque, q, u; prescribed bodies: pose, \
                     velocity, acceleration"
                )));
            }
        })
    }

    /// Sets a body's column from an `(num_envs, width)` array; validated, nothing is written
    /// unless every value is accepted.
    fn set_body(&self, body: &str, field: &str, values: PyReadonlyArray2<'_, f64>) -> PyResult<()> {
        let mut env = self.lock()?;
        let (id, kind) = Self::body(&env, body)?;
        let b = env.batch_mut();
        let e = py_err;
        match (kind, field) {
            (BodyKind::Free, "mass") => {
                let rows = array_to_rows::<1>(field, &values)?;
                let m: Vec<f64> = rows.iter().map(|r| r[0]).collect();
                b.set_mass_column(id, &m).map_err(e)
            }
            (BodyKind::Free, "com") => b
                .set_com_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Free, "inertia") => b
                .set_inertia_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Free, "applied_force") => b
                .set_applied_force_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Free, "applied_torque") => b
                .set_applied_torque_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Free, "q") => b
                .set_q_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Free, "u") => b
                .set_u_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Prescribed, "pose") => b
                .set_pose_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Prescribed, "velocity") => b
                .set_velocity_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            (BodyKind::Prescribed, "acceleration") => b
                .set_acceleration_column(id, &array_to_rows(field, &values)?)
                .map_err(e),
            _ => Err(PyValueError::new_err(format!(
                "body {body:?} ({kind:?}) has no settable field {field:?}"
            ))),
        }
    }

    /// Parameter `name` of constraint `constraint` as an `(num_envs, width)` array (a copy).
    fn get_param<'py>(
        &self,
        py: Python<'py>,
        constraint: usize,
        name: &str,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let env = self.lock()?;
        let (column, width) = env
            .batch()
            .param(ConstraintId(constraint), name)
            .map_err(py_err)?;
        PyArray1::from_slice(py, column).reshape([env.len(), width])
    }

    /// Sets parameter `name` of constraint `constraint` from an `(num_envs, width)` array.
    fn set_param(
        &self,
        constraint: usize,
        name: &str,
        values: PyReadonlyArray2<'_, f64>,
    ) -> PyResult<()> {
        let mut env = self.lock()?;
        let flat = values.as_slice().map_err(|_| contiguous(name))?;
        env.batch_mut()
            .set_param_column(ConstraintId(constraint), name, flat)
            .map_err(py_err)
    }

    /// Parameter `name` of driven body `body`'s motion law as an `(num_envs, width)` array (a
    /// copy).
    fn get_motion<'py>(
        &self,
        py: Python<'py>,
        body: &str,
        name: &str,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let env = self.lock()?;
        let (id, _) = Self::body(&env, body)?;
        let (column, width) = env.batch().motion_param(id, name).map_err(py_err)?;
        PyArray1::from_slice(py, column).reshape([env.len(), width])
    }

    /// Sets parameter `name` of driven body `body`'s motion law from an `(num_envs, width)`
    /// array (validated; the body's pose, velocity and acceleration follow the law).
    fn set_motion(
        &self,
        body: &str,
        name: &str,
        values: PyReadonlyArray2<'_, f64>,
    ) -> PyResult<()> {
        let mut env = self.lock()?;
        let (id, _) = Self::body(&env, body)?;
        let flat = values.as_slice().map_err(|_| contiguous(name))?;
        env.batch_mut()
            .set_motion_param_column(id, name, flat)
            .map_err(py_err)
    }

    /// Work done on the free bodies since their episode began, `(num_envs, 2)`: by the
    /// constraint forces (the driven bodies' work) and by the applied loads.
    fn get_work<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let env = self.lock()?;
        Ok(rows_to_array(py, env.batch().work()))
    }

    /// Gravity per environment, `(num_envs, 3)`.
    fn get_gravity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let env = self.lock()?;
        Ok(rows_to_array(py, env.batch().gravity()))
    }

    /// Sets gravity per environment from an `(num_envs, 3)` array.
    fn set_gravity(&self, values: PyReadonlyArray2<'_, f64>) -> PyResult<()> {
        let mut env = self.lock()?;
        let rows = array_to_rows::<3>("gravity", &values)?;
        env.batch_mut().set_gravity_column(&rows).map_err(py_err)
    }

    /// Environment `env` now as a `(height, width, 3)` uint8 RGB array (Gymnasium's
    /// `rgb_array`), drawn on the CPU with the GIL released.
    fn render<'py>(
        &self,
        py: Python<'py>,
        env: usize,
        width: usize,
        height: usize,
    ) -> PyResult<Bound<'py, numpy::PyArray3<u8>>> {
        let guard = self.lock()?;
        let canvas = py
            .detach(|| guard.render(env, width, height))
            .map_err(py_err)?;
        let (w, h) = (canvas.width(), canvas.height());
        PyArray1::from_vec(py, canvas.into_pixels()).reshape([h, w, 3])
    }

    /// Each environment's simulated time in its episode.
    fn get_time<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let env = self.lock()?;
        Ok(PyArray1::from_slice(py, env.batch().time()))
    }

    /// The task values (targets, drawn settings), `(num_envs, width)`.
    fn task_values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let env = self.lock()?;
        let v = env.task_values();
        let width = v.len() / env.len();
        PyArray1::from_slice(py, v).reshape([env.len(), width])
    }

    /// Per environment: seed, episode number, steps taken in the episode.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Counters<'py>> {
        let env = self.lock()?;
        Ok((
            PyArray1::from_slice(py, env.seeds()),
            PyArray1::from_slice(py, env.episodes()),
            PyArray1::from_slice(py, env.elapsed_steps()),
        ))
    }

    /// Per-instance status bits of the batch (non-zero: flagged).
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let env = self.lock()?;
        Ok(PyArray1::from_slice(py, env.batch().status()))
    }
}

/// The names of the built-in environments.
#[pyfunction]
fn env_ids<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, simbatch::env::TASK_NAMES)
}

/// The Rust core of the `simbatch` Python package.
#[pymodule]
fn _simbatch(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Core>()?;
    m.add_function(wrap_pyfunction!(env_ids, m)?)?;
    m.add_function(wrap_pyfunction!(study::render_study, m)?)?;
    m.add_function(wrap_pyfunction!(study::scenario_toml, m)?)?;
    m.add_function(wrap_pyfunction!(study::check_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(study::run_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(study::read_table, m)?)?;
    m.add_function(wrap_pyfunction!(study::rollout, m)?)?;
    m.add_function(wrap_pyfunction!(study::bench, m)?)?;
    m.add("__version__", simbatch::VERSION)?;
    m.add("SimbatchError", m.py().get_type::<SimbatchError>())?;
    m.add(
        "EnvNeedsResetError",
        m.py().get_type::<EnvNeedsResetError>(),
    )?;
    m.add("FLAG_RESET", simbatch::env::flags::RESET)?;
    m.add("FLAG_FINAL_OBS", simbatch::env::flags::FINAL_OBS)?;
    m.add("FLAG_NONFINITE", simbatch::env::flags::NONFINITE)?;
    Ok(())
}
