//! The stepping kernel's host side (`shaders/step.wgsl`): [`GpuStepper`], the evaluation
//! kernel plus the stepping kernels, many trial steps per dispatch on the chunks' own input
//! buffers, so the state stays on the GPU between steps and only the state columns (q, u,
//! prescribed poses and velocities, work) and each instance's progress come back at the end of
//! a call.
//!
//! Every integrator and drift control of the CPU path runs here: semi-implicit Euler, RK4 and
//! RKM with per-instance step control; Baumgarte, Simbody projection, or none. The one public
//! way to step — on either backend — is the backend's `Stepper`, which drives this.

mod kernel;
pub(crate) mod readback;

use std::sync::Arc;

use kernel::{
    ChunkStep, KernelSettings, MAX_DISPATCHES_PER_SUBMIT, MAX_STEPS_PER_CALL, RKM, StepPipeline,
    params_bytes, trials_per_dispatch,
};
use readback::{Rounds, mark_resident, run_rounds, state_columns, store_states};

use crate::batch::{Batch, status};
use crate::error::{Error, Result};
use crate::gpu::buffers::{Launch, Staging, gpu_allocation_error, within_error_scope, write_reals};
use crate::gpu::device::GpuDevice;
use crate::gpu::evaluate::GpuEvaluator;
use crate::gpu::layout::carry::{
    CARRY_ACCEPTED, CARRY_COLUMNS, CARRY_FINISHED, CARRY_REJECTED, CARRY_STATUS, CARRY_STEP_SIZE,
};
use crate::gpu::{GpuOptions, Precision};
use crate::step::{Goal, Integrator, MAX_ADAPTIVE_ATTEMPTS, StepOptions, StepReport};

/// Largest staging buffer of a stepping call, in bytes: the carry and the state columns come
/// back through one, or two in alternation, in as many rounds as they need.
pub use crate::gpu::buffers::STAGING_BYTES;

/// The GPU kernels of one template: the evaluation kernel ([`GpuEvaluator`]) and the stepping
/// kernels, which advance the state in the evaluator's own input buffers.
pub struct GpuStepper {
    evaluator: GpuEvaluator,
    /// The stepping pipelines, built on first step.
    pipeline: Option<StepPipeline>,
    /// Per chunk of the evaluator, its stepping buffers, and the chunks' generation they are
    /// bound to.
    chunk_steps: Vec<ChunkStep>,
    /// The staging buffers the carry and the state columns come back through: one of the
    /// largest chunk's readback up to 1 MiB, above it two of an eighth, at most
    /// [`STAGING_BYTES`] each (`Staging::sizes`).
    staging: Option<Staging>,
    bound_to: u64,
    /// Per chunk, what its last readback brought (the carry, then the state columns, in f64):
    /// kept across calls, so a stepping call allocates nothing on the host per instance.
    readback: Vec<Vec<f64>>,
    /// Per instance of a chunk, whether it was flagged before the call (`store_states`'s
    /// scratch), kept across calls likewise.
    halted: Vec<bool>,
}

impl std::fmt::Debug for GpuStepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuStepper")
            .field("evaluator", &self.evaluator)
            .field("stepping_buffers", &self.chunk_steps.len())
            .finish()
    }
}

impl GpuStepper {
    /// Generates the kernels for `batch`'s template: the stepping variant the first step asks
    /// for is built by the driver then, the evaluation kernel only when the stepper's
    /// evaluator first evaluates; errors as [`GpuEvaluator::new`].
    pub fn new(
        device: Arc<GpuDevice>,
        batch: &Batch,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        Ok(Self {
            evaluator: GpuEvaluator::new(device, batch, precision, options)?,
            pipeline: None,
            chunk_steps: Vec::new(),
            staging: None,
            bound_to: 0,
            readback: Vec::new(),
            halted: Vec::new(),
        })
    }

    /// Bytes of GPU memory these kernels hold: the evaluator's
    /// ([`GpuEvaluator::device_bytes`]), each chunk's carry columns and launch word, and the
    /// stepping staging buffer.
    pub fn device_bytes(&self) -> u64 {
        let steps: u64 = self
            .chunk_steps
            .iter()
            .map(|s| s.output.size() + s.launch.size())
            .sum();
        self.evaluator.device_bytes() + steps + self.staging.as_ref().map_or(0, |s| s.size())
    }

    /// The evaluation kernel (shares the buffers the stepping kernels advance).
    pub fn evaluator(&self) -> &GpuEvaluator {
        &self.evaluator
    }

    /// The evaluation kernel, to evaluate the state the last step left on the GPU.
    pub fn evaluator_mut(&mut self) -> &mut GpuEvaluator {
        &mut self.evaluator
    }

    /// Whether these kernels serve `batch` (same layout).
    pub(crate) fn fits(&self, batch: &Batch) -> Result<bool> {
        self.evaluator.fits(batch)
    }

    /// Runs a goal on every instance; `step_sizes` holds the RKM step size per instance (0: not
    /// chosen yet; one per instance) and is updated. Instances flagged before the call are left
    /// alone; one whose state stops being finite keeps its last finite state and is flagged.
    pub(crate) fn run_goal(
        &mut self,
        batch: &mut Batch,
        options: &StepOptions,
        goal: Goal,
        step_sizes: &mut [f64],
        violation: f64,
    ) -> Result<StepReport> {
        if let Some(parts) = split_goal(goal, &options.integrator) {
            let mut report = StepReport::default();
            for part in parts {
                report.add(&self.run_goal(batch, options, part, step_sizes, violation)?);
            }
            return Ok(report);
        }
        let (target, duration, goal_code) = match goal {
            Goal::Steps(0) => return Ok(StepReport::default()),
            Goal::Steps(n) => (n as u32, 0.0, 0u32),
            Goal::Duration(0.0) => return Ok(StepReport::default()),
            Goal::Duration(d) => (0, d, 1u32),
        };
        let settings = KernelSettings::new(options);
        let gpu = &mut self.evaluator;
        if gpu.rebuild_for(batch)? {
            // The stepping kernels read the columns as the evaluation kernel does.
            self.pipeline = None;
        }
        gpu.prepare(batch)?;
        gpu.last_upload_bytes = gpu.upload(batch)?;
        let (precision, device) = (gpu.precision, gpu.device.clone());
        let sp = self
            .pipeline
            .get_or_insert_with(|| StepPipeline::new(&device));
        sp.variant(
            &device,
            precision,
            &gpu.layout,
            gpu.workgroup_size,
            &settings,
        )?;
        // The host's minimum RKM step at the latest time of the batch (the kernel knows only
        // elapsed times), and the violation tolerance no finer than the precision resolves
        // (projection stops at 16 ε: `projection_target`).
        let latest = batch.time().iter().fold(0.0f64, |m, t| m.max(t.abs()));
        let reals = [
            settings.fixed_step,
            settings.accuracy,
            settings.max_step,
            settings.tolerance,
            duration,
            crate::step::min_step(latest),
            violation.max(160.0 * precision.epsilon()),
        ];
        device.queue.write_buffer(
            &sp.params,
            0,
            &params_bytes(precision, reals, target, goal_code),
        );
        let columns = state_columns(batch);
        let state_width: usize = columns.iter().map(|(_, w)| w).sum();
        self.bind_chunks(batch, state_width, &settings, options, step_sizes)?;
        self.dispatch_until_done(goal, options, &settings, &columns, step_sizes)?;
        let gpu = &mut self.evaluator;
        let stored = store_states(
            batch,
            &gpu.chunks,
            &self.readback,
            &columns,
            &mut self.halted,
            goal,
            &settings,
            step_sizes,
        )?;
        let ended = stored.every_instance_ended;
        mark_resident(batch, &mut gpu.chunks, &gpu.layout.inputs, &columns, ended);
        Ok(stored.report)
    }

    /// Makes each chunk's stepping buffers (when the chunks were remade) and writes its launch
    /// word and carry: flagged instances are skipped, RKM resumes at its last step size,
    /// everything else starts from 0.
    fn bind_chunks(
        &mut self,
        batch: &Batch,
        state_width: usize,
        settings: &KernelSettings,
        options: &StepOptions,
        step_sizes: &[f64],
    ) -> Result<()> {
        let gpu = &self.evaluator;
        let sp = self
            .pipeline
            .as_ref()
            .ok_or_else(|| Error::Gpu("stepping pipeline missing".into()))?;
        let (d, queue) = (&gpu.device.device, &gpu.device.queue);
        let bytes = gpu.precision.bytes() as u64;
        // What an allocation that failed (here, or in the queue's staging for the writes below)
        // is reported as; the chunks are dropped, so the next call allocates again.
        let total =
            CARRY_COLUMNS as u128 * batch.len() as u128 * bytes as u128 + 2 * STAGING_BYTES as u128;
        let failed = |e| gpu_allocation_error(&gpu.device, batch.len(), total, Some(e));
        if self.bound_to != gpu.generation || self.chunk_steps.len() != gpu.chunks.len() {
            let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            self.chunk_steps = gpu
                .chunks
                .iter()
                .map(|chunk| ChunkStep::new(&gpu.device, sp, chunk, bytes))
                .collect();
            self.bound_to = gpu.generation;
            // Sized for the largest chunk's readback.
            let largest = gpu.chunks.iter().map(|c| c.count).max().unwrap_or(1) as u64;
            let readback = (CARRY_COLUMNS + state_width) as u64 * largest * bytes;
            self.staging = Some(Staging::new(d, "simbatch step staging", readback));
            // Checked before anything is written: a write to a buffer whose allocation failed
            // would raise a second error, outside any scope.
            if let Some(e) = pollster::block_on(oom.pop()) {
                self.chunk_steps.clear();
                return Err(failed(e));
            }
        }
        let trials = trials_per_dispatch(options) as u32;
        let (written, out_of_memory) =
            within_error_scope(d, wgpu::ErrorFilter::OutOfMemory, || {
                // The carry, column after column: a flagged instance starts halted, RKM at its
                // step size, every other value at 0. A column of zeros is cleared on the device
                // (nothing crosses the bus); only a column with another value is written. The
                // cleared and the written ranges are disjoint, so their order does not matter.
                let mut clears = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("simbatch step carry"),
                });
                for (chunk, step) in gpu.chunks.iter().zip(&self.chunk_steps) {
                    let c = chunk.count as u32;
                    let launch = Launch {
                        count: c,
                        capacity: c,
                        steps: trials,
                        mode: settings.mode(),
                        first: 0,
                        out_capacity: c,
                        pad: [0; 2],
                    };
                    queue.write_buffer(&step.launch, 0, bytemuck::bytes_of(&launch));
                    let instances = chunk.start..chunk.start + chunk.count;
                    let status = &batch.status()[instances.clone()];
                    let step_sizes = &step_sizes[instances];
                    let per_column = chunk.count as u64 * bytes;
                    for column in 0..CARRY_COLUMNS {
                        let offset = column as u64 * per_column;
                        let halted = |s: &u32| s & status::HALTED != 0;
                        let write = |values: &mut dyn Iterator<Item = f64>| {
                            write_reals(
                                &gpu.device,
                                gpu.precision,
                                &step.output,
                                offset,
                                chunk.count,
                                values,
                            )
                        };
                        match column {
                            CARRY_STATUS if status.iter().any(halted) => {
                                write(&mut status.iter().map(|s| {
                                    if halted(s) {
                                        status::HALTED as f64
                                    } else {
                                        0.0
                                    }
                                }))?
                            }
                            CARRY_STEP_SIZE if step_sizes.iter().any(|h| *h != 0.0) => {
                                write(&mut step_sizes.iter().copied())?
                            }
                            _ => clears.clear_buffer(&step.output, offset, Some(per_column)),
                        }
                    }
                }
                queue.submit([clears.finish()]);
                Ok(())
            });
        if let Some(e) = out_of_memory {
            self.chunk_steps.clear();
            return Err(failed(e));
        }
        written
    }

    /// Submits rounds of dispatches (doubling each round) until every chunk's instances have
    /// arrived or stopped, reading back the carry and the state columns after each round.
    fn dispatch_until_done(
        &mut self,
        goal: Goal,
        options: &StepOptions,
        settings: &KernelSettings,
        columns: &[(crate::batch::Column, usize)],
        step_sizes: &[f64],
    ) -> Result<()> {
        let gpu = &self.evaluator;
        let sp = self
            .pipeline
            .as_ref()
            .ok_or_else(|| Error::Gpu("stepping pipeline missing".into()))?;
        let staging = self
            .staging
            .as_ref()
            .ok_or_else(|| Error::Gpu("stepping staging buffer missing".into()))?;
        let trials = trials_per_dispatch(options);
        let needed = dispatches_needed(goal, &options.integrator, settings, step_sizes);
        // A fixed-step trial is a step of the goal or the instance's stop; RKM's attempts are
        // capped per instance (the readback's test below).
        let most_trials = match options.integrator {
            Integrator::RungeKuttaMerson { .. } => MAX_ADAPTIVE_ATTEMPTS as usize,
            _ => 2 * needed,
        };
        let rounds = Rounds {
            label: "stepping kernel",
            pipeline: sp.built(settings)?,
            chunks: self
                .chunk_steps
                .iter()
                .map(|step| (&step.bind_group, &step.output))
                .collect(),
            staging,
            carry_width: CARRY_COLUMNS,
            columns,
            workgroup: gpu.workgroup_size as usize,
            dispatches: needed.div_ceil(trials),
            most_dispatches: MAX_DISPATCHES_PER_SUBMIT,
            most_rounds: most_trials.div_ceil(trials * MAX_DISPATCHES_PER_SUBMIT) + 12,
        };
        let (precision, layout) = (gpu.precision, &gpu.layout);
        run_rounds(
            &gpu.device,
            precision,
            layout,
            &gpu.chunks,
            rounds,
            &mut self.readback,
            |v, n| {
                (0..n).any(|local| {
                    v[CARRY_STATUS * n + local] == 0.0
                        && v[CARRY_FINISHED * n + local] == 0.0
                        && (settings.integrator != RKM
                            || v[CARRY_ACCEPTED * n + local] + v[CARRY_REJECTED * n + local]
                                < MAX_ADAPTIVE_ATTEMPTS as f64)
                })
            },
        )
    }
}

/// The carry columns count exactly to 2²⁴ in f32: a long call runs in parts (step counts, and
/// fixed-step durations, each part landing on its own end). `None`: one part.
fn split_goal(goal: Goal, integrator: &Integrator) -> Option<Vec<Goal>> {
    match (goal, integrator) {
        (Goal::Steps(n), _) if n > MAX_STEPS_PER_CALL => Some(
            (0..n)
                .step_by(MAX_STEPS_PER_CALL)
                .map(|k| Goal::Steps((n - k).min(MAX_STEPS_PER_CALL)))
                .collect(),
        ),
        (Goal::Duration(d), Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step })
            if d / step > MAX_STEPS_PER_CALL as f64 =>
        {
            let part = MAX_STEPS_PER_CALL as f64 * step;
            let mut parts = Vec::new();
            let mut left = d;
            while left > 0.0 {
                parts.push(Goal::Duration(left.min(part)));
                left -= left.min(part);
            }
            Some(parts)
        }
        _ => None,
    }
}

/// Trial steps a goal needs: known for fixed steps, estimated for RKM from the instances' step
/// sizes (more rounds follow while some instance has not arrived).
fn dispatches_needed(
    goal: Goal,
    integrator: &Integrator,
    settings: &KernelSettings,
    step_sizes: &[f64],
) -> usize {
    match (goal, integrator) {
        (Goal::Steps(n), Integrator::RungeKuttaMerson { .. }) => n + n / 4 + 1,
        (Goal::Steps(n), _) => n,
        (Goal::Duration(d), Integrator::RungeKuttaMerson { .. }) => {
            let (sum, known) = step_sizes
                .iter()
                .filter(|h| **h > 0.0)
                .fold((0.0, 0usize), |(s, k), h| (s + h, k + 1));
            let h = if known == 0 {
                settings.max_step.min(crate::step::INITIAL_ADAPTIVE_STEP)
            } else {
                sum / known as f64
            };
            ((d / h) * 1.25).ceil() as usize + 1
        }
        (Goal::Duration(d), _) => (d / settings.fixed_step).ceil() as usize + 1,
    }
}
