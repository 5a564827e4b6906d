//! The [`Stepper`] façade: advances a batch in time on the backend [`resolve`](super::resolve)
//! chose, with the same options and semantics on both; callers never name a backend's types.

use std::sync::Arc;

use super::{Backend, Evaluator};
use crate::batch::Batch;
use crate::cpu::stepping;
use crate::error::{Error, Result};
use crate::gpu::{GpuDevice, GpuOptions, Precision};
use crate::step::{Goal, MAX_FIXED_STEPS_PER_CALL, StepOptions, StepReport, check_duration};

/// Advances batches in time on the CPU or the GPU through one API; keeps each instance's RKM
/// step size between calls. The one public way to step, on either backend.
pub struct Stepper {
    options: StepOptions,
    step_sizes: Vec<f64>,
    /// The backend, and on the GPU the kernels and the buffers the state stays resident in.
    evaluator: Evaluator,
    violation_tolerance: Option<f64>,
    /// Whether the CPU may use its lane path (`cpu::lanes`).
    cpu_lanes: bool,
}

impl std::fmt::Debug for Stepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stepper")
            .field("options", &self.options)
            .field("backend", &self.backend())
            .finish()
    }
}

/// The finest RKM accuracy the GPU's f32 kernels honour: their error estimates bottom out near
/// 1e-6, the state's rounding (README "The GPU path").
pub const F32_RKM_ACCURACY: f64 = 1e-5;

/// What to tell a caller asking f32 GPU stepping for an RKM accuracy finer than
/// [`F32_RKM_ACCURACY`]: it is not an error (steps shrink until rounding hides the error, and
/// instances that cannot go on are flagged), but the results carry f32's error, not the one
/// asked for.
pub fn f32_accuracy_note(options: &StepOptions, evaluator: &Evaluator) -> Option<String> {
    let crate::step::Integrator::RungeKuttaMerson { accuracy, .. } = options.integrator else {
        return None;
    };
    let (_, precision, _) = evaluator.gpu_setup()?;
    (precision == Precision::F32 && accuracy < F32_RKM_ACCURACY).then(|| {
        format!(
            "RKM accuracy {accuracy:e} is finer than f32 GPU stepping resolves (its error \
             estimates bottom out near 1e-6): expect f32's error (about 1e-7 relative), not \
             {accuracy:e}; ask for an accuracy ≥ {F32_RKM_ACCURACY:e}, or precision f64"
        )
    })
}

impl Stepper {
    /// A stepper on the f64 CPU path, with validated options.
    pub fn new(options: StepOptions) -> Result<Self> {
        Self::with_evaluator(options, Evaluator::cpu())
    }

    /// A stepper on `backend` (after `SIMBATCH_BACKEND`; `Auto` falls back to the CPU with a
    /// note when no adapter opens), in `precision` on the GPU. Every option runs on both paths
    /// with the same semantics; the GPU keeps the state resident between steps of a call.
    pub fn with_backend(
        options: StepOptions,
        backend: Backend,
        precision: Precision,
    ) -> Result<Self> {
        options.validate()?;
        let evaluator = Evaluator::with_options(backend, precision, GpuOptions::default())?;
        Self::with_evaluator(options, evaluator)
    }

    /// A stepper on a GPU device already open, in `precision`.
    pub fn on_gpu(
        options: StepOptions,
        device: Arc<GpuDevice>,
        precision: Precision,
    ) -> Result<Self> {
        options.validate()?;
        let evaluator = Evaluator::on_device(device, precision, GpuOptions::default())?;
        Self::with_evaluator(options, evaluator)
    }

    /// A stepper on the backend of `evaluator` (which it keeps: evaluations through
    /// [`evaluator_mut`](Self::evaluator_mut) read the state the GPU already holds).
    pub fn with_evaluator(options: StepOptions, evaluator: Evaluator) -> Result<Self> {
        options.validate()?;
        if let Some(note) = f32_accuracy_note(&options, &evaluator) {
            log::warn!("simbatch: {note}");
        }
        Ok(Self {
            options,
            step_sizes: Vec::new(),
            evaluator,
            violation_tolerance: None,
            cpu_lanes: true,
        })
    }

    /// Whether the CPU runs its integrators on its lane path (four instances per SIMD value,
    /// `cpu::lanes`) where the template allows it: on by default. Off, every instance runs on
    /// the scalar reference path, the one the lane path is tested against; the answers agree to
    /// rounding (1e-12 for the fixed-step integrators; 1e-10 after a duration with RKM, whose
    /// step sizes follow an error estimate that cancels), and each path is bit-identical across
    /// thread counts.
    pub fn with_cpu_lanes(mut self, on: bool) -> Self {
        self.cpu_lanes = on;
        self
    }

    /// Host bytes a CPU stepping call on `batch` holds besides the batch's columns: the
    /// stepper's per-instance step sizes and the call's outcome buffers (sized per block of
    /// instances on the lane path, per instance on the reference path); per-thread scratch is
    /// not counted. What `simbatch bench` adds to the batch's bytes per instance.
    pub fn host_call_bytes(&self, batch: &Batch) -> usize {
        batch.len() * std::mem::size_of::<f64>() + stepping::call_bytes(batch, self.cpu_lanes)
    }

    /// Bytes of GPU memory the stepper's kernels hold (see [`Evaluator::device_bytes`]);
    /// `None` on the CPU or before the first step.
    pub fn device_bytes(&self) -> Option<u64> {
        self.evaluator.device_bytes()
    }

    /// The backend in use (`Cpu` or `Gpu`).
    pub fn backend(&self) -> Backend {
        self.evaluator.backend()
    }

    /// Why `Auto` fell back to the CPU, or that the GPU chosen is a software adapter.
    pub fn note(&self) -> Option<&str> {
        self.evaluator.note()
    }

    /// The evaluator on the stepper's backend.
    pub fn evaluator(&self) -> &Evaluator {
        &self.evaluator
    }

    /// The evaluator on the stepper's backend; on the GPU it shares the stepper's buffers, so
    /// evaluating after a step uploads nothing.
    pub fn evaluator_mut(&mut self) -> &mut Evaluator {
        &mut self.evaluator
    }

    /// The options in force.
    pub fn options(&self) -> &StepOptions {
        &self.options
    }

    /// The largest constraint error (position or velocity, enabled rows) an instance may show
    /// after a call before it is flagged [`status::CONSTRAINT_VIOLATED`](crate::batch::status::CONSTRAINT_VIOLATED): the one set with
    /// [`set_violation_tolerance`](Self::set_violation_tolerance), else the projection
    /// tolerance, else [`DEFAULT_VIOLATION_TOLERANCE`](crate::step::DEFAULT_VIOLATION_TOLERANCE).
    pub fn violation_tolerance(&self) -> f64 {
        self.violation_tolerance
            .unwrap_or_else(|| self.options.violation_tolerance())
    }

    /// Sets the violation tolerance (a finite number > 0; `f64::INFINITY` turns the check off).
    pub fn set_violation_tolerance(&mut self, tolerance: f64) -> Result<()> {
        if tolerance.is_nan() || tolerance <= 0.0 {
            return Err(Error::InvalidValue {
                field: "violation_tolerance".into(),
                instance: 0,
                value: format!("{tolerance:?}"),
                accepted: "a number > 0 (infinity: no check)".into(),
            });
        }
        self.violation_tolerance = Some(tolerance);
        Ok(())
    }

    /// Forgets the RKM step size of instance `i` (after the user resets it).
    pub fn reset_step_size(&mut self, i: usize) {
        if let Some(h) = self.step_sizes.get_mut(i) {
            *h = 0.0;
        }
    }

    /// Advances every instance by `n` steps (fixed-step integrators: `n · h`; RKM: `n` accepted
    /// adaptive steps).
    pub fn step(&mut self, batch: &mut Batch, n: usize) -> Result<StepReport> {
        if n as f64 > MAX_FIXED_STEPS_PER_CALL {
            return Err(Error::InvalidValue {
                field: "n (steps)".into(),
                instance: 0,
                value: n.to_string(),
                accepted: format!("at most {MAX_FIXED_STEPS_PER_CALL:e} steps per call"),
            });
        }
        self.run(batch, Goal::Steps(n))
    }

    /// Advances every instance by `duration` seconds of its own time, landing exactly on
    /// `t + duration` (the last fixed step is shortened when needed).
    pub fn advance(&mut self, batch: &mut Batch, duration: f64) -> Result<StepReport> {
        check_duration(duration, &self.options)?;
        self.run(batch, Goal::Duration(duration))
    }

    fn run(&mut self, batch: &mut Batch, goal: Goal) -> Result<StepReport> {
        let violation = self.violation_tolerance();
        let options = self.options;
        // Options were validated when the stepper was made; instances added since start with
        // no step size.
        self.step_sizes.resize(batch.len(), 0.0);
        // Cheap (a scan stops at the first differing value, and a shared column is skipped),
        // and it keeps a batch filled one instance at a time from holding N copies of a value.
        batch.share_uniform_columns();
        match self.evaluator.backend() {
            Backend::Gpu => self.evaluator.gpu_for(batch)?.run_goal(
                batch,
                &options,
                goal,
                &mut self.step_sizes,
                violation,
            ),
            _ => stepping::run_goal(
                batch,
                &options,
                goal,
                &mut self.step_sizes,
                violation,
                self.cpu_lanes,
            ),
        }
    }
}
