//! The stepping kernel's host side (`shaders/step.wgsl`): many trial steps per dispatch on the
//! chunks' own input buffers, so the state stays on the GPU between steps and only the state
//! columns (q, u, prescribed poses and velocities) and each instance's progress come back at the
//! end of a call.
//!
//! Every integrator and drift control of the CPU `Stepper` runs
//! here: semi-implicit Euler, RK4 and RKM with per-instance step control; Baumgarte, Simbody
//! projection, or none. One pipeline per (integrator, projection) pair, built on first use from
//! constants prepended to the source, so each carries only the code it runs.

use crate::batch::{Batch, Column, FreeField, PrescribedField, status};
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::evaluate::{GpuEvaluator, WORKGROUP, layout_entry, map_read};
use crate::step::{
    Goal, Integrator, MAX_ADAPTIVE_ATTEMPTS, Stabilization, StepOptions, StepReport,
};

/// Largest number of trial steps in one dispatch; longer runs are several dispatches (the state
/// stays on the GPU in between). Short dispatches keep clear of driver watchdogs, and of
/// lavapipe's LLVM JIT, whose stack grows with every iteration of a long in-kernel loop over the
/// inlined solve until it overflows (seen at 35 RK4 substeps in f32); reloading the state every
/// few steps costs about 1% of an RK4 dispatch. RKM (five solves a trial) and projection (up to
/// 27 more) take fewer.
fn trials_per_dispatch(options: &StepOptions) -> usize {
    let heavy = matches!(options.integrator, Integrator::RungeKuttaMerson { .. })
        || matches!(options.stabilization, Stabilization::Projection { .. });
    if heavy { 8 } else { 16 }
}

/// Most dispatches per chunk in one submit; a call that needs more submits again.
const MAX_DISPATCHES_PER_SUBMIT: usize = 1024;

/// Output columns the kernel carries between dispatches (`CARRY_*` in `shaders/step.wgsl`).
const CARRY_COLUMNS: usize = 8;
const CARRY_STATUS: usize = 0;
const CARRY_ACCEPTED: usize = 1;
const CARRY_ELAPSED: usize = 2;
const CARRY_ELAPSED_LOW: usize = 3;
const CARRY_STEP_SIZE: usize = 4;
const CARRY_FINISHED: usize = 5;
const CARRY_REJECTED: usize = 6;
const CARRY_PROJECTIONS: usize = 7;

/// Largest step count per kernel call: the f32 carry columns count exactly up to 2²⁴.
const MAX_STEPS_PER_CALL: usize = 1 << 23;

/// The stepping pipelines of an evaluator.
pub(crate) struct StepPipeline {
    /// (integrator code, projection) → pipeline.
    pipelines: Vec<((u32, bool), wgpu::ComputePipeline)>,
    pipeline_layout: wgpu::PipelineLayout,
    layout: wgpu::BindGroupLayout,
    params: wgpu::Buffer,
}

/// A chunk's stepping buffers.
pub(crate) struct ChunkStep {
    launch: wgpu::Buffer,
    output: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
}

/// The state columns the kernel writes, in readback order.
fn state_columns(batch: &Batch) -> Vec<(Column, usize)> {
    let mut cols = Vec::new();
    for slot in 0..batch.template().free_bodies().len() {
        cols.push((
            Column::Free {
                slot,
                field: FreeField::Q,
            },
            7,
        ));
        cols.push((
            Column::Free {
                slot,
                field: FreeField::U,
            },
            6,
        ));
    }
    for slot in 0..batch.template().prescribed_bodies().len() {
        if batch.prescribed_columns()[slot].motion.is_some() {
            // Driven: the host sets its columns from its law.
            continue;
        }
        cols.push((
            Column::Prescribed {
                slot,
                field: PrescribedField::Pose,
            },
            7,
        ));
        cols.push((
            Column::Prescribed {
                slot,
                field: PrescribedField::Velocity,
            },
            6,
        ));
    }
    cols.push((Column::Work, 2));
    cols
}

/// `StepParams` of `shaders/step.wgsl` in the kernel's precision.
fn params_bytes(precision: Precision, reals: [f64; 7], target: u32, goal: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    for x in reals {
        match precision {
            Precision::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            Precision::F64 => out.extend_from_slice(&x.to_le_bytes()),
        }
    }
    out.extend_from_slice(&target.to_le_bytes());
    out.extend_from_slice(&goal.to_le_bytes());
    // Storage structs round up to their alignment (8 bytes for f64 members).
    out.resize(out.len().next_multiple_of(8), 0);
    out
}

/// Values of one chunk as read back: the carry columns, then the state columns.
fn to_f64(precision: Precision, view: &[u8]) -> Vec<f64> {
    match precision {
        Precision::F32 => bytemuck::cast_slice::<u8, f32>(view)
            .iter()
            .map(|x| *x as f64)
            .collect(),
        Precision::F64 => bytemuck::cast_slice::<u8, f64>(view).to_vec(),
    }
}

impl GpuEvaluator {
    /// The pipeline for `(integrator, projection)`, built on first use.
    fn step_pipeline_for(&mut self, integrator: u32, projection: bool) -> Result<()> {
        let d = self.device.device.clone();
        if self.step_pipeline.is_none() {
            let storage = |read_only| wgpu::BufferBindingType::Storage { read_only };
            let layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("simbatch step"),
                entries: &[
                    layout_entry(0, wgpu::BufferBindingType::Uniform),
                    layout_entry(1, storage(false)),
                    layout_entry(2, storage(false)),
                    layout_entry(3, storage(true)),
                ],
            });
            let pipeline_layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("simbatch step"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let params = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch step parameters"),
                size: 64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            self.step_pipeline = Some(StepPipeline {
                pipelines: Vec::new(),
                pipeline_layout,
                layout,
                params,
            });
        }
        let precision = self.precision;
        let built = self.step_pipeline.as_ref().is_some_and(|sp| {
            sp.pipelines
                .iter()
                .any(|(k, _)| *k == (integrator, projection))
        });
        if !built {
            let source = crate::gpu::shader::stepping_source(
                precision,
                &self.layout,
                integrator,
                projection,
            );
            source.check()?;
            let sp = self
                .step_pipeline
                .as_mut()
                .ok_or_else(|| Error::Gpu("stepping pipeline missing".into()))?;
            let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
            let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("simbatch step"),
                source: wgpu::ShaderSource::Wgsl(source.text.into()),
            });
            let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("simbatch step"),
                layout: Some(&sp.pipeline_layout),
                module: &module,
                entry_point: Some("step_main"),
                compilation_options: Default::default(),
                cache: None,
            });
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::Gpu(format!("stepping kernel build failed: {e}")));
            }
            sp.pipelines.push(((integrator, projection), pipeline));
        }
        Ok(())
    }

    /// Advances every instance by `n` steps on the GPU: `n · h` with the fixed-step
    /// integrators, `n` accepted adaptive steps with RKM (each instance keeps its own step size
    /// between calls). The same semantics as `Stepper::step`,
    /// which is also the way to step on either backend through one API.
    ///
    /// All steps run in as few submits as the goal allows, the state stays on the GPU, and only
    /// the state columns come back at the end, into the batch. An instance whose state stops
    /// being finite keeps its last finite state and is flagged; instances flagged before the
    /// call are left alone.
    pub fn step(
        &mut self,
        batch: &mut Batch,
        options: &StepOptions,
        n: usize,
    ) -> Result<StepReport> {
        let mut sizes = std::mem::take(&mut self.step_sizes);
        let out = self.run_goal(
            batch,
            options,
            Goal::Steps(n),
            &mut sizes,
            options.violation_tolerance(),
        );
        self.step_sizes = sizes;
        out
    }

    /// Advances every instance by `duration` seconds of its own time on the GPU, landing on
    /// `t + duration` (the last step shortened when needed); as
    /// `Stepper::advance`.
    pub fn advance(
        &mut self,
        batch: &mut Batch,
        options: &StepOptions,
        duration: f64,
    ) -> Result<StepReport> {
        crate::step::check_duration(duration, options)?;
        let mut sizes = std::mem::take(&mut self.step_sizes);
        let out = self.run_goal(
            batch,
            options,
            Goal::Duration(duration),
            &mut sizes,
            options.violation_tolerance(),
        );
        self.step_sizes = sizes;
        out
    }

    /// Runs a goal on every instance; `step_sizes` holds the RKM step size per instance (0: not
    /// chosen yet) and is updated.
    pub(crate) fn run_goal(
        &mut self,
        batch: &mut Batch,
        options: &StepOptions,
        goal: Goal,
        step_sizes: &mut Vec<f64>,
        violation: f64,
    ) -> Result<StepReport> {
        options.validate()?;
        // The carry columns count exactly to 2²⁴ in f32: long calls run in parts (step counts,
        // and fixed-step durations, each part landing on its own end).
        let parts: Vec<Goal> = match (goal, options.integrator) {
            (Goal::Steps(n), _) if n > MAX_STEPS_PER_CALL => (0..n)
                .step_by(MAX_STEPS_PER_CALL)
                .map(|k| Goal::Steps((n - k).min(MAX_STEPS_PER_CALL)))
                .collect(),
            (
                Goal::Duration(d),
                Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step },
            ) if d / step > MAX_STEPS_PER_CALL as f64 => {
                let part = MAX_STEPS_PER_CALL as f64 * step;
                let mut parts = Vec::new();
                let mut left = d;
                while left > 0.0 {
                    parts.push(Goal::Duration(left.min(part)));
                    left -= left.min(part);
                }
                parts
            }
            _ => Vec::new(),
        };
        if !parts.is_empty() {
            let mut report = StepReport::default();
            for part in parts {
                report.add(&self.run_goal(batch, options, part, step_sizes, violation)?);
            }
            return Ok(report);
        }
        let (integrator, fixed_step, accuracy, max_step) = match options.integrator {
            Integrator::SemiImplicitEuler { step } => (0u32, step, 0.0, step),
            Integrator::Rk4 { step } => (1u32, step, 0.0, step),
            Integrator::RungeKuttaMerson { accuracy, max_step } => (2u32, 0.0, accuracy, max_step),
        };
        let (baumgarte, projection, tolerance) = match options.stabilization {
            Stabilization::None => (2u32, false, 0.0),
            Stabilization::Baumgarte => (1u32, false, 0.0),
            Stabilization::Projection { tolerance } => (2u32, true, tolerance),
        };
        if step_sizes.len() != batch.len() {
            step_sizes.resize(batch.len(), 0.0);
        }
        let (target, duration, goal_code) = match goal {
            Goal::Steps(0) => return Ok(StepReport::default()),
            Goal::Steps(n) => (n as u32, 0.0, 0u32),
            Goal::Duration(0.0) => return Ok(StepReport::default()),
            Goal::Duration(d) => (0, d, 1u32),
        };
        // The host's minimum RKM step at the latest time of the batch (the kernel knows only
        // elapsed times), and the violation tolerance no finer than the precision resolves
        // (projection stops at 16 ε: `projection_target`).
        let latest = batch.time().iter().fold(0.0f64, |m, t| m.max(t.abs()));
        let min_step = crate::step::min_step(latest);
        let gpu_violation = violation.max(160.0 * self.precision.epsilon());
        self.prepare(batch)?;
        self.last_upload_bytes = self.upload(batch)?;
        self.step_pipeline_for(integrator, projection)?;
        let precision = self.precision;
        let bytes = precision.bytes() as u64;
        let columns = state_columns(batch);
        let state_width: usize = columns.iter().map(|(_, w)| w).sum();
        let trials = trials_per_dispatch(options);
        let device = self.device.clone();
        let (d, queue) = (&device.device, &device.queue);
        let sp = self
            .step_pipeline
            .as_ref()
            .ok_or_else(|| Error::Gpu("stepping pipeline missing".into()))?;
        let pipeline = &sp
            .pipelines
            .iter()
            .find(|(k, _)| *k == (integrator, projection))
            .ok_or_else(|| Error::Gpu("stepping variant missing".into()))?
            .1;
        queue.write_buffer(
            &sp.params,
            0,
            &params_bytes(
                precision,
                [
                    fixed_step,
                    accuracy,
                    max_step,
                    tolerance,
                    duration,
                    min_step,
                    gpu_violation,
                ],
                target,
                goal_code,
            ),
        );
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let mode = integrator | (baumgarte << 8);
        for chunk in &mut self.chunks {
            let count = chunk.count as u64;
            if chunk.step.is_none() {
                let launch = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch step launch"),
                    size: 16,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let output = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch step carry"),
                    size: CARRY_COLUMNS as u64 * count * bytes,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let staging = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch step staging"),
                    size: (CARRY_COLUMNS + state_width) as u64 * count * bytes,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("simbatch step"),
                    layout: &sp.layout,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: launch.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: chunk.input.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: output.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 3,
                            resource: sp.params.as_entire_binding(),
                        },
                    ],
                });
                chunk.step = Some(ChunkStep {
                    launch,
                    output,
                    staging,
                    bind_group,
                });
            }
            let step = chunk
                .step
                .as_ref()
                .ok_or_else(|| Error::Gpu("chunk stepping buffers missing".into()))?;
            let c = chunk.count as u32;
            queue.write_buffer(
                &step.launch,
                0,
                bytemuck::cast_slice(&[c, c, trials as u32, mode]),
            );
            // The carry: flagged instances are skipped, RKM resumes at its last step size,
            // everything else starts from 0.
            let mut carry = vec![0.0f64; CARRY_COLUMNS * chunk.count];
            for local in 0..chunk.count {
                let i = chunk.start + local;
                if batch.status()[i] & status::HALTED != 0 {
                    carry[CARRY_STATUS * chunk.count + local] = status::HALTED as f64;
                }
                carry[CARRY_STEP_SIZE * chunk.count + local] = step_sizes[i];
            }
            let carry_bytes: Vec<u8> = match precision {
                Precision::F32 => {
                    bytemuck::cast_slice(&carry.iter().map(|x| *x as f32).collect::<Vec<f32>>())
                        .to_vec()
                }
                Precision::F64 => bytemuck::cast_slice(&carry).to_vec(),
            };
            queue.write_buffer(&step.output, 0, &carry_bytes);
        }
        if let Some(e) = pollster::block_on(oom.pop()) {
            for chunk in &mut self.chunks {
                chunk.step = None;
            }
            let total = (CARRY_COLUMNS * 2 + state_width) as u128 * batch.len() as u128;
            return Err(crate::gpu::evaluate::gpu_allocation_error(
                &self.device,
                batch.len(),
                total * bytes as u128,
                Some(e),
            ));
        }
        let prefixes = columns
            .iter()
            .map(|(column, _)| {
                self.layout
                    .inputs
                    .iter()
                    .find(|c| c.column == *column)
                    .map(|c| c.prefix)
                    .ok_or_else(|| Error::Gpu(format!("state column {column:?} not in the layout")))
            })
            .collect::<Result<Vec<_>>>()?;

        // Dispatches a goal needs: known for fixed steps, estimated for RKM from the instances'
        // step sizes (more rounds follow while some instance has not arrived).
        let steps_needed = match (goal, options.integrator) {
            (Goal::Steps(n), Integrator::RungeKuttaMerson { .. }) => n + n / 4 + 1,
            (Goal::Steps(n), _) => n,
            (Goal::Duration(d), Integrator::RungeKuttaMerson { .. }) => {
                let known: Vec<f64> = step_sizes.iter().copied().filter(|h| *h > 0.0).collect();
                let h = if known.is_empty() {
                    max_step.min(1e-3)
                } else {
                    known.iter().sum::<f64>() / known.len() as f64
                };
                ((d / h) * 1.25).ceil() as usize + 1
            }
            (Goal::Duration(d), _) => (d / fixed_step).ceil() as usize + 1,
        };
        let mut dispatches = steps_needed
            .div_ceil(trials)
            .clamp(1, MAX_DISPATCHES_PER_SUBMIT);
        let mut values: Vec<Option<Vec<f64>>> = vec![None; self.chunks.len()];
        let mut pending: Vec<bool> = vec![true; self.chunks.len()];
        let width = CARRY_COLUMNS + state_width;
        while pending.iter().any(|p| *p) {
            let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("simbatch step"),
            });
            for (chunk, _) in self.chunks.iter().zip(&pending).filter(|(_, p)| **p) {
                let step = chunk
                    .step
                    .as_ref()
                    .ok_or_else(|| Error::Gpu("chunk stepping buffers missing".into()))?;
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("simbatch step"),
                        timestamp_writes: None,
                    });
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, &step.bind_group, &[]);
                    for _ in 0..dispatches {
                        pass.dispatch_workgroups(chunk.count.div_ceil(WORKGROUP) as u32, 1, 1);
                    }
                }
                // Read back: the carry, then every state column.
                let count = chunk.count as u64;
                let carry = CARRY_COLUMNS as u64 * count * bytes;
                encoder.copy_buffer_to_buffer(&step.output, 0, &step.staging, 0, carry);
                let mut at = carry;
                for ((_, w), prefix) in columns.iter().zip(&prefixes) {
                    let size = *w as u64 * count * bytes;
                    encoder.copy_buffer_to_buffer(
                        &chunk.input,
                        *prefix as u64 * count * bytes,
                        &step.staging,
                        at,
                        size,
                    );
                    at += size;
                }
            }
            queue.submit([encoder.finish()]);
            for (k, chunk) in self.chunks.iter().enumerate() {
                if !pending[k] {
                    continue;
                }
                let step = chunk
                    .step
                    .as_ref()
                    .ok_or_else(|| Error::Gpu("chunk stepping buffers missing".into()))?;
                let size = (width * chunk.count) as u64 * bytes;
                let v = map_read(&self.device, &step.staging, size, |view| {
                    to_f64(precision, view)
                })?;
                let n = chunk.count;
                // RKM attempts are capped (fixed steps are bounded by the goal itself).
                pending[k] = (0..n).any(|local| {
                    v[CARRY_STATUS * n + local] == 0.0
                        && v[CARRY_FINISHED * n + local] == 0.0
                        && (integrator != 2
                            || v[CARRY_ACCEPTED * n + local] + v[CARRY_REJECTED * n + local]
                                < MAX_ADAPTIVE_ATTEMPTS as f64)
                });
                values[k] = Some(v);
            }
            dispatches = (dispatches * 2).min(MAX_DISPATCHES_PER_SUBMIT);
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("stepping kernel failed: {e}")));
        }

        let mut states = Vec::with_capacity(batch.len());
        let mut every_instance_ended = true;
        let mut report = StepReport::default();
        for (chunk, v) in self.chunks.iter().zip(&values) {
            let v = v
                .as_ref()
                .ok_or_else(|| Error::Gpu("a chunk was not read back".into()))?;
            let count = chunk.count;
            for local in 0..count {
                let i = chunk.start + local;
                let carry = |col: usize| v[col * count + local];
                let mut state = batch.state_of(i);
                if batch.status()[i] & status::HALTED != 0 {
                    states.push((state, 0));
                    continue;
                }
                let mut at = CARRY_COLUMNS * count;
                for slot in 0..state.q.len() {
                    state.q[slot].copy_from_slice(&v[at + 7 * local..at + 7 * local + 7]);
                    at += 7 * count;
                    state.u[slot].copy_from_slice(&v[at + 6 * local..at + 6 * local + 6]);
                    at += 6 * count;
                }
                for slot in 0..state.pose.len() {
                    if batch.prescribed_columns()[slot].motion.is_some() {
                        continue;
                    }
                    state.pose[slot].copy_from_slice(&v[at + 7 * local..at + 7 * local + 7]);
                    at += 7 * count;
                    state.velocity[slot].copy_from_slice(&v[at + 6 * local..at + 6 * local + 6]);
                    at += 6 * count;
                }
                state
                    .work
                    .copy_from_slice(&v[at + 2 * local..at + 2 * local + 2]);
                every_instance_ended &= carry(CARRY_FINISHED) != 0.0 || carry(CARRY_STATUS) != 0.0;
                let accepted = carry(CARRY_ACCEPTED) as u64;
                let mut flags = carry(CARRY_STATUS) as u32;
                if flags == 0 && carry(CARRY_FINISHED) == 0.0 {
                    // Stopped by the attempt cap: an instance that cannot arrive.
                    flags = status::STEP_FAILED;
                }
                let arrived = carry(CARRY_FINISHED) != 0.0;
                // Time in f64 on the host: exact multiples of a fixed step, the goal itself
                // when a duration was reached, else the kernel's compensated sum.
                state.time += match goal {
                    Goal::Duration(d) if arrived => d,
                    _ if fixed_step > 0.0 => accepted as f64 * fixed_step,
                    _ => carry(CARRY_ELAPSED) - carry(CARRY_ELAPSED_LOW),
                };
                if integrator == 2 {
                    step_sizes[i] = carry(CARRY_STEP_SIZE);
                }
                report.steps += accepted;
                report.rejected += carry(CARRY_REJECTED) as u64;
                report.projections += carry(CARRY_PROJECTIONS) as u64;
                report.flagged += usize::from(flags != 0);
                states.push((state, flags));
            }
        }
        batch.store_states(&states);
        // The GPU already holds exactly these values: mark them uploaded (not a driven body's
        // pose and velocity, which the host has just set from its law).
        let driven = |c: &Column| match c {
            Column::Prescribed { slot, .. } => batch.prescribed_columns()[*slot].motion.is_some(),
            _ => false,
        };
        for chunk in &mut self.chunks {
            for (k, col) in self.layout.inputs.iter().enumerate() {
                // The kernel also writes each instance's time (`step_main`).
                let written = (col.column == Column::Time && every_instance_ended)
                    || columns.iter().any(|(c, _)| *c == col.column);
                if !driven(&col.column) && written {
                    chunk.uploaded[k] = batch.column_version(col.column).unwrap_or(0);
                }
            }
        }
        Ok(report)
    }
}
