//! Event-driven stepping of unilateral contact on the GPU (`shaders/event_step.wgsl`): the twin
//! of `cpu::unilateral::run_batch_resuming` for templates of stage 1 of
//! `docs/gpu-unilateral.md` — one free body and one unilateral contact (a `SphereOnPlaneContact`
//! with rolling rows, or any constraint reporting slip x, slip y and normal rows) as the only
//! rows, on a plane that is Ground, a constant-law body or a driven one.
//!
//! Each instance runs the CPU's event machine — RK4 steps with the mode fixed, the event test
//! at each step's end, bisection on real steps to `t_tol`, and at the event the impact law, the
//! slip → stick projection and the mode determined again (`shaders/contact_laws.wgsl`) — inside
//! the kernel, with no host round trip per event: an instance is a state machine whose progress
//! (phase, mode, bracket, records) lives in carry columns, a dispatch runs a bounded number of
//! trials of it, and the host submits rounds of dispatches until every instance is done,
//! reading back the carry and the state columns after each round. An instance's events do not
//! shorten the others' steps.

mod carry;

pub use carry::{EVENT_CARRY, carry_width, event_constants};
use carry::{carry_offset, initial_values, run_of, tolerances};

use std::sync::Arc;

use crate::batch::{Batch, status};
use crate::contact::{
    Coefficients, ContactRecord, EventOptions, ImpactLaw, MAX_BISECTIONS, MIN_STEP_FRACTION,
};
use crate::error::{Error, Result};
use crate::gpu::buffers::{
    Launch, bind_entry, gpu_allocation_error, layout_entry, staging_size, submit_round, write_reals,
};
use crate::gpu::cache::KernelLayout;
use crate::gpu::device::GpuDevice;
use crate::gpu::evaluate::GpuEvaluator;
use crate::gpu::layout::Layout;
use crate::gpu::shader::{KernelSource, stepping_source};
use crate::gpu::step::readback::{read_chunk, read_state, state_columns, state_inputs, state_len};
use crate::gpu::{GpuOptions, Precision};
use crate::math::vec3;
use crate::model::ConstraintId;

/// `shaders/event_step.wgsl`.
pub const EVENT_STEP: &str = include_str!("../../../shaders/event_step.wgsl");
/// `shaders/event_machine.wgsl`.
pub const EVENT_MACHINE: &str = include_str!("../../../shaders/event_machine.wgsl");

/// The `option` of the error [`GpuEventStepper::new`] refuses a template outside stage 1 with
/// (a caller that has the CPU's event path to fall back on matches it).
pub const OUTSIDE_STAGE_ONE: &str = "GPU unilateral contact";

/// Trials (RK4 steps, bisection points, settlings) per instance per dispatch: as the stepping
/// kernel's, short enough for lavapipe's JIT.
const TRIALS_PER_DISPATCH: u32 = 16;
/// Most dispatches in one submit.
const MAX_DISPATCHES_PER_SUBMIT: usize = 1024;

/// The event kernel for a template's layout whose contact has the rows `rows` (x, y, z): the
/// RK4 stepping kernel, the event constants, the contact laws and `event_step.wgsl`.
pub fn event_kernel_source(
    precision: Precision,
    layout: &Layout,
    workgroup_size: u32,
    rows: [usize; 3],
) -> KernelSource {
    let mut source = stepping_source(precision, layout, workgroup_size, 1, false);
    source.append("the event constants", &event_constants(rows));
    source.append(
        "contact_common.wgsl",
        crate::gpu::contact_laws::CONTACT_COMMON,
    );
    source.append("contact_laws.wgsl", crate::gpu::contact_laws::CONTACT_LAWS);
    source.append("event_machine.wgsl", EVENT_MACHINE);
    source.append("event_step.wgsl", EVENT_STEP);
    source
}

/// What one instance's GPU run did (the one-contact `cpu::unilateral::EventRun`,
/// with the events counted rather than listed: the kernel keeps no list).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuEventRun {
    /// The contact's record.
    pub contact: ContactRecord,
    /// Events located (impacts, mode changes).
    pub events: usize,
    /// RK4 steps committed.
    pub steps: usize,
    /// Penetration at the end (m, ≥ 0).
    pub penetration: f64,
    /// The penetration exceeds `p_tol`: the instance is flagged `status::CONSTRAINT_VIOLATED`.
    pub violated: bool,
}

/// A chunk's event buffers: its launch uniform and carry, bound to its input buffer.
struct EventChunk {
    launch: wgpu::Buffer,
    carry: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
}

/// The event-driven stepping kernel of one stage-1 template.
pub struct GpuEventStepper {
    evaluator: GpuEvaluator,
    contact: ConstraintId,
    rows: [usize; 3],
    kernel_layout: KernelLayout,
    pipeline: Option<wgpu::ComputePipeline>,
    params: wgpu::Buffer,
    chunks: Vec<EventChunk>,
    bound_to: u64,
    staging: Option<wgpu::Buffer>,
    readback: Vec<Vec<f64>>,
}

impl std::fmt::Debug for GpuEventStepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEventStepper")
            .field("evaluator", &self.evaluator)
            .field("contact", &self.contact)
            .finish()
    }
}

impl GpuEventStepper {
    /// The kernel for `batch`'s template with `contact` as its unilateral contact. Refused with
    /// an error naming what is outside stage 1: more than one free body, rows other than the
    /// contact's three, a contact without slip and normal rows (those run on the CPU path).
    pub fn new(
        device: Arc<GpuDevice>,
        batch: &Batch,
        contact: ConstraintId,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        let template = batch.template();
        let unsupported = |reason: String| Error::InvalidOption {
            option: OUTSIDE_STAGE_ONE,
            value: reason,
            accepted: "one free body whose only rows are one unilateral contact's slip and \
                       normal rows (stage 1 of docs/gpu-unilateral.md); others run on the CPU"
                .into(),
        };
        let free = template.free_bodies().len();
        if free != 1 {
            return Err(unsupported(format!("{free} free bodies")));
        }
        let slot = template.constraint(contact)?;
        let slots = slot.constraint.report_slots();
        let [Some(x), Some(y), Some(z)] = slots else {
            return Err(unsupported(format!(
                "{} has no slip and normal rows",
                slot.constraint.kind_name()
            )));
        };
        let evaluator = GpuEvaluator::new(device, batch, precision, options)?;
        let layout = &evaluator.layout;
        let placement = layout
            .placements
            .get(contact.0)
            .ok_or_else(|| unsupported("the contact is not in the kernel's layout".into()))?;
        if layout.rows != 3 || placement.rows != 3 {
            return Err(unsupported(format!(
                "{} rows in all, {} of them the contact's",
                layout.rows, placement.rows
            )));
        }
        let first = placement.first_row;
        let rows = [first + *x, first + *y, first + *z];
        let d = &evaluator.device.device;
        let kernel_layout = evaluator.device.kernels.layout(
            d,
            "simbatch events",
            &[
                layout_entry(0, wgpu::BufferBindingType::Uniform),
                layout_entry(1, wgpu::BufferBindingType::Storage { read_only: false }),
                layout_entry(2, wgpu::BufferBindingType::Storage { read_only: false }),
                layout_entry(4, wgpu::BufferBindingType::Storage { read_only: true }),
            ],
        );
        let params = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch event parameters"),
            size: 32,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(Self {
            evaluator,
            contact,
            rows,
            kernel_layout,
            pipeline: None,
            params,
            chunks: Vec::new(),
            bound_to: 0,
            staging: None,
            readback: Vec::new(),
        })
    }

    /// The kernel's whole source.
    pub fn kernel_source(&self) -> KernelSource {
        let gpu = &self.evaluator;
        event_kernel_source(gpu.precision, &gpu.layout, gpu.workgroup_size, self.rows)
    }

    /// Bytes of GPU memory these kernels hold (the evaluator's, the carry, the staging buffer).
    pub fn device_bytes(&self) -> u64 {
        let chunks: u64 = self
            .chunks
            .iter()
            .map(|c| c.carry.size() + c.launch.size())
            .sum();
        self.evaluator.device_bytes() + chunks + self.staging.as_ref().map_or(0, |s| s.size())
    }

    /// Runs every instance of `batch` for `duration` with its contact's coefficients
    /// `coefficients[i]`, resuming from `previous[i]` (its mode and slip → stick readiness; `None`:
    /// afresh), as `cpu::unilateral::run_batch_resuming` does. Returns each instance's run,
    /// `None` for one halted before the call or failed in it (kept at its state, flagged
    /// `status::STEP_FAILED`); one ending deeper in its plane than `p_tol` is flagged
    /// `status::CONSTRAINT_VIOLATED`.
    pub fn run(
        &mut self,
        batch: &mut Batch,
        coefficients: &[Coefficients],
        duration: f64,
        options: &EventOptions,
        previous: &[Option<ContactRecord>],
    ) -> Result<Vec<Option<GpuEventRun>>> {
        let n = batch.len();
        for (what, got) in [
            (
                "contact coefficients (one per instance)",
                coefficients.len(),
            ),
            (
                "previous contact records (one per instance)",
                previous.len(),
            ),
        ] {
            if got != n {
                return Err(Error::Dimension {
                    what,
                    got,
                    expected: n,
                });
            }
        }
        options.check(duration)?;
        for k in coefficients {
            k.check()?;
        }
        let gpu = &mut self.evaluator;
        if gpu.rebuild_for(batch)? {
            self.pipeline = None;
        }
        gpu.prepare(batch)?;
        gpu.last_upload_bytes = gpu.upload(batch)?;
        if self.pipeline.is_none() {
            let source = self.kernel_source();
            source.check()?;
            let gpu = &self.evaluator;
            let pipeline = gpu
                .device
                .kernels
                .pipeline(
                    &gpu.device.device,
                    &self.kernel_layout,
                    "simbatch events",
                    &source.text,
                    "event_main",
                )
                .map_err(|e| Error::Gpu(format!("event kernel build failed: {e}")))?;
            self.pipeline = Some(pipeline);
        }
        let precision = self.evaluator.precision;
        let mut params = Vec::new();
        for x in [options.step, duration] {
            match precision {
                Precision::F32 => params.extend((x as f32).to_ne_bytes()),
                Precision::F64 => params.extend(x.to_ne_bytes()),
            }
        }
        let newton = u32::from(options.law == ImpactLaw::Newton);
        let max_events = options.max_events.min(u32::MAX as usize - 1) as u32;
        params.extend(max_events.to_ne_bytes());
        params.extend(newton.to_ne_bytes());
        self.evaluator
            .device
            .queue
            .write_buffer(&self.params, 0, &params);
        let columns = state_columns(batch);
        let state_width: usize = columns.iter().map(|(_, w)| w).sum();
        self.bind_chunks(batch, state_width)?;
        self.write_carry(batch, coefficients, options, previous)?;
        let steps = duration / options.step;
        let events = options.max_events as f64 + 1.0;
        let most_trials = steps / MIN_STEP_FRACTION + 2.0 + events * (MAX_BISECTIONS as f64 + 2.0);
        self.dispatch_until_done(&columns, steps + 16.0, most_trials)?;
        self.store(batch, state_width, duration)
    }

    /// Makes each chunk's launch, carry and bind group (when the chunks were remade) and the
    /// staging buffer.
    fn bind_chunks(&mut self, batch: &Batch, state_width: usize) -> Result<()> {
        let gpu = &self.evaluator;
        if self.bound_to == gpu.generation && self.chunks.len() == gpu.chunks.len() {
            return Ok(());
        }
        let d = &gpu.device.device;
        let bytes = gpu.precision.bytes() as u64;
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let mut chunks = Vec::with_capacity(gpu.chunks.len());
        for chunk in &gpu.chunks {
            let launch = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch event launch"),
                size: std::mem::size_of::<Launch>() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let carry = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch event carry"),
                size: (carry_width() * chunk.count) as u64 * bytes,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("simbatch events"),
                layout: &self.kernel_layout.bind_group,
                entries: &[
                    bind_entry(0, &launch),
                    bind_entry(1, &chunk.input),
                    bind_entry(2, &carry),
                    bind_entry(4, &self.params),
                ],
            });
            let count = chunk.count as u32;
            let l = Launch {
                count,
                capacity: count,
                steps: TRIALS_PER_DISPATCH,
                out_capacity: count,
                ..Launch::default()
            };
            gpu.device
                .queue
                .write_buffer(&launch, 0, bytemuck::bytes_of(&l));
            chunks.push(EventChunk {
                launch,
                carry,
                bind_group,
            });
        }
        let largest = gpu.chunks.iter().map(|c| c.count).max().unwrap_or(1) as u64;
        let size = staging_size((carry_width() + state_width) as u64 * largest * bytes);
        let staging = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch event staging"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if let Some(e) = pollster::block_on(oom.pop()) {
            let total = (carry_width() * batch.len()) as u128 * bytes as u128;
            return Err(gpu_allocation_error(
                &gpu.device,
                batch.len(),
                total,
                Some(e),
            ));
        }
        self.chunks = chunks;
        self.staging = Some(staging);
        self.bound_to = gpu.generation;
        Ok(())
    }

    /// Each instance's machine at the call's start: halted ones stay halted, a disabled contact
    /// fails the instance (as on the CPU), the mode and readiness from `previous`.
    fn write_carry(
        &self,
        batch: &Batch,
        coefficients: &[Coefficients],
        options: &EventOptions,
        previous: &[Option<ContactRecord>],
    ) -> Result<()> {
        let gpu = &self.evaluator;
        let width = carry_width();
        let enabled = &batch.all_constraint_columns()[self.contact.0].enabled;
        let free = &batch.free_columns()[0];
        let mut values = vec![0.0; width];
        for (chunk, events) in gpu.chunks.iter().zip(&self.chunks) {
            let count = chunk.count;
            let mut carry = vec![0.0; width * count];
            for local in 0..count {
                let i = chunk.start + local;
                let tol = tolerances(
                    gpu.precision,
                    options,
                    vec3(&batch.gravity_column()[i]).norm(),
                    free.mass[i],
                );
                initial_values(
                    &mut values,
                    batch.status()[i],
                    enabled[i] != 0,
                    batch.time()[i],
                    coefficients[i],
                    &tol,
                    previous[i],
                );
                for (column, x) in values.iter().enumerate() {
                    carry[column * count + local] = *x;
                }
            }
            write_reals(
                &gpu.device,
                gpu.precision,
                &events.carry,
                0,
                width * count,
                carry.into_iter(),
            )?;
        }
        Ok(())
    }

    /// Submits rounds of dispatches (doubling each round) until every instance is done or
    /// stopped, reading back the carry and the state columns after each round.
    fn dispatch_until_done(
        &mut self,
        columns: &[(crate::batch::Column, usize)],
        trials: f64,
        most_trials: f64,
    ) -> Result<()> {
        let gpu = &self.evaluator;
        let d = &gpu.device.device;
        let precision = gpu.precision;
        let pipeline = self
            .pipeline
            .as_ref()
            .ok_or_else(|| Error::Gpu("event pipeline missing".into()))?;
        let staging = self
            .staging
            .as_ref()
            .ok_or_else(|| Error::Gpu("event staging buffer missing".into()))?;
        let inputs = state_inputs(&gpu.layout, columns)?;
        let workgroup = gpu.workgroup_size as usize;
        let width = carry_width();
        let (status_at, phase_at) = (carry_offset("STATUS"), carry_offset("PHASE"));
        let mut dispatches = ((trials / TRIALS_PER_DISPATCH as f64).ceil() as usize)
            .clamp(1, MAX_DISPATCHES_PER_SUBMIT);
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        self.readback.resize_with(gpu.chunks.len(), Vec::new);
        let mut pending = vec![true; gpu.chunks.len()];
        // Every trial makes progress: it commits a step (at least MIN_STEP_FRACTION of the
        // scenario's step, so at most `most_steps` of them), or is one of an event's bisection
        // points and settling (at most MAX_BISECTIONS + 2 per event, max_events + 1 events).
        // That bounds an instance's trials, and so the rounds of this loop.
        let most_trials = most_trials.max(1.0);
        let per_round = (TRIALS_PER_DISPATCH as usize * MAX_DISPATCHES_PER_SUBMIT) as f64;
        let most_rounds = (most_trials / per_round).ceil() as usize + 12;
        let mut rounds = 0;
        while pending.iter().any(|p| *p) {
            rounds += 1;
            if rounds > most_rounds {
                return Err(Error::Gpu(format!(
                    "event kernel: instances still running after {most_rounds} rounds of dispatches, more than their trials allow"
                )));
            }
            let live = gpu.chunks.iter().zip(&self.chunks).zip(&pending);
            let groups = live
                .filter(|(_, p)| **p)
                .map(|((chunk, events), _)| (&events.bind_group, chunk.count));
            submit_round(
                &gpu.device,
                "simbatch events",
                pipeline,
                groups,
                dispatches,
                workgroup,
            );
            for (k, (chunk, events)) in gpu.chunks.iter().zip(&self.chunks).enumerate() {
                if !pending[k] {
                    continue;
                }
                let v = &mut self.readback[k];
                read_chunk(
                    &gpu.device,
                    staging,
                    precision,
                    &gpu.layout,
                    chunk,
                    &events.carry,
                    width,
                    columns,
                    &inputs,
                    v,
                )?;
                let n = chunk.count;
                pending[k] = (0..n)
                    .any(|local| v[status_at * n + local] == 0.0 && v[phase_at * n + local] != 3.0);
            }
            dispatches = (dispatches * 2).min(MAX_DISPATCHES_PER_SUBMIT);
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("event kernel failed: {e}")));
        }
        Ok(())
    }

    /// The read-back states into the batch, and each instance's run.
    fn store(
        &mut self,
        batch: &mut Batch,
        state_width: usize,
        duration: f64,
    ) -> Result<Vec<Option<GpuEventRun>>> {
        let width = carry_width();
        let mut y = vec![0.0; state_len(batch)];
        let mut runs = Vec::with_capacity(batch.len());
        for (chunk, v) in self.evaluator.chunks.iter().zip(&self.readback) {
            let count = chunk.count;
            if v.len() != (width + state_width) * count {
                return Err(Error::Gpu(format!(
                    "an event chunk read back {} values, expected {}",
                    v.len(),
                    (width + state_width) * count
                )));
            }
            for local in 0..count {
                let i = chunk.start + local;
                let carry = |name: &str, k: usize| v[(carry_offset(name) + k) * count + local];
                if batch.status()[i] & status::HALTED != 0 {
                    runs.push(None);
                    continue;
                }
                let flags = carry("STATUS", 0) as u32;
                if flags & !status::CONSTRAINT_VIOLATED != 0 {
                    // Failed: kept at its state, as the CPU keeps it.
                    let state = batch.state_of(i);
                    batch.store_values(i, state.time, &state.to_vec(), status::STEP_FAILED);
                    runs.push(None);
                    continue;
                }
                read_state(batch, i, &mut y, v, width * count, count, local);
                let run = run_of(&carry);
                let time = batch.time()[i] + duration;
                batch.store_values(i, time, &y, flags);
                runs.push(Some(run));
            }
        }
        batch.touch_state_columns();
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::{GROUND, SphereOnPlaneContact, SystemTemplate};

    #[test]
    fn the_event_kernel_validates_in_both_precisions() {
        let mut t = SystemTemplate::new();
        let ball = t.add_free_body("ball");
        t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true))
            .unwrap();
        let layout = Layout::new(&t).unwrap();
        for precision in [Precision::F32, Precision::F64] {
            if let Err(e) = event_kernel_source(precision, &layout, 64, [0, 1, 2]).check() {
                panic!("{precision:?}: {e}");
            }
        }
    }
}
