//! The event kernel's host side: the pipeline, the parameters, each chunk's carry and bind
//! group, the rounds of dispatches until every instance is done, and the read-back states and
//! records into the batch.

use super::carry::{initial_values, phase, run_of, tolerances};
use super::{
    EVENT_WITHHELD, EventChunk, GpuEventOutcome, GpuEventStepper, MAX_DISPATCHES_PER_SUBMIT,
};
use crate::batch::{Batch, Column, status};
use crate::contact::{Coefficients, ContactRecord, EventOptions, ImpactLaw};
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::buffers::{Launch, Staging, bind_entry, gpu_allocation_error, write_reals};
use crate::gpu::step::readback::{Rounds, read_state, run_rounds, state_len};
use crate::math::vec3;

impl GpuEventStepper {
    /// The evaluator's buffers for `batch` uploaded, and the pipeline (with fixed RK4 steps, or
    /// under error control: `adaptive`) built on first use (and again when the chunks were
    /// remade).
    pub(super) fn prepare(&mut self, batch: &Batch, adaptive: bool) -> Result<()> {
        let gpu = &mut self.evaluator;
        if gpu.rebuild_for(batch)? {
            self.pipelines = [None, None];
        }
        gpu.prepare(batch)?;
        gpu.last_upload_bytes = gpu.upload(batch)?;
        if self.workgroup == 1 {
            // One instance per workgroup: a chunk may not have more than a dispatch holds (the
            // evaluator, built for workgroups of one, sizes them so; this is a guard).
            let most = gpu.device.limits.max_compute_workgroups_per_dimension as usize;
            if let Some(chunk) = gpu.chunks.iter().find(|c| c.count > most) {
                return Err(Error::InvalidOption {
                    option: "instances per chunk",
                    value: chunk.count.to_string(),
                    accepted: format!(
                        "at most {most} on a software adapter for the several-contact event \
                         kernel (one instance per workgroup); a lower \
                         GpuOptions::max_binding_bytes makes smaller chunks"
                    ),
                });
            }
        }
        let slot = usize::from(adaptive);
        if self.pipelines[slot].is_none() {
            let source = self.kernel_source(adaptive);
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
            self.pipelines[slot] = Some(pipeline);
        }
        Ok(())
    }

    /// The call's parameters: step, duration, most events, the impact law.
    pub(super) fn write_params(&self, duration: f64, options: &EventOptions) {
        let mut params = Vec::new();
        for x in [options.step, duration] {
            match self.evaluator.precision {
                Precision::F32 => params.extend((x as f32).to_ne_bytes()),
                Precision::F64 => params.extend(x.to_ne_bytes()),
            }
        }
        let newton = u32::from(options.law == ImpactLaw::Newton);
        let max_events = options.max_events.min(u32::MAX as usize - 1) as u32;
        params.extend(max_events.to_ne_bytes());
        params.extend(newton.to_ne_bytes());
        // `EventParams::accuracy` (read by the kernel built for error control only).
        let accuracy = options.accuracy.unwrap_or(0.0);
        match self.evaluator.precision {
            Precision::F32 => params.extend((accuracy as f32).to_ne_bytes()),
            Precision::F64 => params.extend(accuracy.to_ne_bytes()),
        }
        self.evaluator
            .device
            .queue
            .write_buffer(&self.params, 0, &params);
    }

    /// Makes each chunk's launch, carry and bind group (when the chunks were remade) and the
    /// staging buffer.
    pub(super) fn bind_chunks(&mut self, batch: &Batch, state_width: usize) -> Result<()> {
        let gpu = &self.evaluator;
        if self.bound_to == gpu.generation && self.chunks.len() == gpu.chunks.len() {
            return Ok(());
        }
        let d = &gpu.device.device;
        let bytes = gpu.precision.bytes() as u64;
        let width = self.carry.width();
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
                size: (width * chunk.count) as u64 * bytes,
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
            chunks.push(EventChunk {
                launch,
                carry,
                bind_group,
            });
        }
        let largest = gpu.chunks.iter().map(|c| c.count).max().unwrap_or(1) as u64;
        let readback = (width + state_width) as u64 * largest * bytes;
        let staging = Staging::new(d, "simbatch event staging", readback);
        if let Some(e) = pollster::block_on(oom.pop()) {
            let total = (width * batch.len()) as u128 * bytes as u128;
            return Err(gpu_allocation_error(
                &gpu.device,
                batch.len(),
                total,
                Some(e),
            ));
        }
        // Written only once every buffer is known to exist: a write to a buffer whose
        // allocation failed would raise a second, uncaptured error.
        for (chunk, events) in gpu.chunks.iter().zip(&chunks) {
            let count = chunk.count as u32;
            let launch = Launch {
                count,
                capacity: count,
                steps: self.trials,
                out_capacity: count,
                ..Launch::default()
            };
            gpu.device
                .queue
                .write_buffer(&events.launch, 0, bytemuck::bytes_of(&launch));
        }
        self.chunks = chunks;
        self.staging = Some(staging);
        self.bound_to = gpu.generation;
        Ok(())
    }

    /// Each instance's machine at the call's start: halted ones stay halted, a disabled contact
    /// fails the instance (as on the CPU), the modes and readiness from `previous`.
    pub(super) fn write_carry(
        &self,
        batch: &Batch,
        coefficients: &[Vec<Coefficients>],
        options: &EventOptions,
        previous: &[Option<Vec<ContactRecord>>],
    ) -> Result<()> {
        let gpu = &self.evaluator;
        let width = self.carry.width();
        let columns = batch.all_constraint_columns();
        let free = batch.free_columns();
        let mut values = vec![0.0; width];
        for (chunk, events) in gpu.chunks.iter().zip(&self.chunks) {
            let count = chunk.count;
            let mut carry = vec![0.0; width * count];
            for local in 0..count {
                let i = chunk.start + local;
                // The §8 force scale takes the heaviest free body, as the CPU's machine does.
                let mass = free.iter().fold(0.0f64, |m, c| m.max(c.mass[i]));
                let tol = tolerances(
                    gpu.precision,
                    options,
                    vec3(&batch.gravity_column()[i]).norm(),
                    mass,
                );
                let enabled = self.contacts.iter().all(|c| columns[c.0].enabled[i] != 0);
                initial_values(
                    &self.carry,
                    &mut values,
                    batch.status()[i],
                    enabled,
                    batch.time()[i],
                    options.step,
                    &coefficients[i],
                    &tol,
                    previous[i].as_deref(),
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
    pub(super) fn dispatch_until_done(
        &mut self,
        columns: &[(Column, usize)],
        trials: f64,
        most_trials: f64,
        adaptive: bool,
    ) -> Result<()> {
        let gpu = &self.evaluator;
        let pipeline = self.pipelines[usize::from(adaptive)]
            .as_ref()
            .ok_or_else(|| Error::Gpu("event pipeline missing".into()))?;
        let staging = self
            .staging
            .as_ref()
            .ok_or_else(|| Error::Gpu("event staging buffer missing".into()))?;
        let (status_at, phase_at) = (self.carry.offset("STATUS"), self.carry.offset("PHASE"));
        let done = f64::from(phase("DONE"));
        let per_dispatch = self.trials as usize;
        // Every trial makes progress: it commits a step (at least MIN_STEP_FRACTION of the
        // scenario's step, so at most `most_steps` of them; under error control it is one of
        // at most MAX_ADAPTIVE_ATTEMPTS step trials, accepted or rejected), or is one of an
        // event's bisection points and settling (at most MAX_BISECTIONS + 2 per event,
        // max_events + 1 events), or the settling at the start. That bounds an instance's
        // trials, and so the rounds.
        let most_trials = most_trials.max(1.0);
        let per_round = (per_dispatch * MAX_DISPATCHES_PER_SUBMIT) as f64;
        let rounds = Rounds {
            label: "event kernel",
            pipeline,
            chunks: self
                .chunks
                .iter()
                .map(|events| (&events.bind_group, &events.carry))
                .collect(),
            staging,
            carry_width: self.carry.width(),
            columns,
            workgroup: self.workgroup as usize,
            dispatches: (trials / per_dispatch as f64).ceil() as usize,
            most_dispatches: MAX_DISPATCHES_PER_SUBMIT,
            most_rounds: (most_trials / per_round).ceil() as usize + 12,
        };
        run_rounds(
            &gpu.device,
            gpu.precision,
            &gpu.layout,
            &gpu.chunks,
            rounds,
            &mut self.readback,
            |v, n| {
                (0..n)
                    .any(|local| v[status_at * n + local] == 0.0 && v[phase_at * n + local] != done)
            },
        )
    }

    /// The read-back states into the batch, and how each instance's call ended.
    pub(super) fn store(
        &mut self,
        batch: &mut Batch,
        state_width: usize,
        duration: f64,
    ) -> Result<Vec<GpuEventOutcome>> {
        let width = self.carry.width();
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
                let at = |name: &str, k: usize| v[(self.carry.offset(name) + k) * count + local];
                if batch.status()[i] & status::HALTED != 0 {
                    runs.push(GpuEventOutcome::Stopped);
                    continue;
                }
                let flags = at("STATUS", 0) as u32;
                if flags & EVENT_WITHHELD != 0 {
                    // Left at the call's start, for the caller's CPU path.
                    runs.push(GpuEventOutcome::Withheld);
                    continue;
                }
                if flags & !status::CONSTRAINT_VIOLATED != 0 {
                    // Failed: kept at its state, as the CPU keeps it.
                    let state = batch.state_of(i);
                    batch.store_values(i, state.time, &state.to_vec(), status::STEP_FAILED);
                    runs.push(GpuEventOutcome::Stopped);
                    continue;
                }
                read_state(batch, i, &mut y, v, width * count, count, local);
                let run = run_of(&self.carry, &at);
                let time = batch.time()[i] + duration;
                batch.store_values(i, time, &y, flags);
                runs.push(GpuEventOutcome::Ran(run));
            }
        }
        batch.touch_state_columns();
        Ok(runs)
    }
}
