//! The stepping kernel's host side (`shaders/step.wgsl`): many substeps per dispatch on the
//! chunks' own input buffers, so the state stays on the GPU between substeps and only the
//! state columns (q, u, prescribed poses and velocities) come back at the end of a call.
//!
//! Fixed-step integrators (semi-implicit Euler, RK4) with Baumgarte or no drift control; RKM's
//! per-instance step control and Simbody projection run on the CPU [`Stepper`](crate::integrate::Stepper).

use crate::batch::{Batch, Column, FreeField, PrescribedField};
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::evaluate::{GpuEvaluator, WORKGROUP, layout_entry, map_read};
use crate::integrate::{Integrator, Stabilization, StepOptions, StepReport};

/// Largest number of substeps in one dispatch; longer runs are several dispatches in the same
/// submit (the state stays on the GPU in between). Short dispatches keep clear of driver
/// watchdogs, and of lavapipe's LLVM JIT, whose stack grows with every iteration of a long
/// in-kernel loop over the inlined solve until it overflows (seen at 35 RK4 substeps in f32);
/// reloading the state every 16 substeps costs about 1% of an RK4 dispatch.
const MAX_SUBSTEPS_PER_DISPATCH: usize = 16;

/// `launch.mode` bit of a dispatch that continues an earlier one of the same call.
const CONTINUING: u32 = 0x10000;

/// The stepping pipeline of an evaluator.
pub(crate) struct StepPipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    step_size: wgpu::Buffer,
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
    cols
}

impl GpuEvaluator {
    fn step_pipeline(&mut self) -> &StepPipeline {
        if self.step_pipeline.is_none() {
            let d = &self.device.device;
            let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("simbatch step"),
                source: wgpu::ShaderSource::Wgsl(
                    crate::gpu::shader::stepping_source(
                        self.precision,
                        &self.layout.wgsl_constants,
                    )
                    .into(),
                ),
            });
            let storage = |read_only| wgpu::BufferBindingType::Storage { read_only };
            let layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("simbatch step"),
                entries: &[
                    // Dynamic offset: each dispatch picks one of the chunk's launch records.
                    wgpu::BindGroupLayoutEntry {
                        binding: 0,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Uniform,
                            has_dynamic_offset: true,
                            min_binding_size: None,
                        },
                        count: None,
                    },
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
            let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("simbatch step"),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("step_main"),
                compilation_options: Default::default(),
                cache: None,
            });
            let step_size = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch step size"),
                size: 8,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            self.step_pipeline = Some(StepPipeline {
                pipeline,
                layout,
                step_size,
            });
        }
        self.step_pipeline.as_ref().expect("built above")
    }

    /// Advances every instance by `n` fixed steps on the GPU, all substeps in one submit, then
    /// reads back the state columns into the batch (time advances by the substeps each instance
    /// completed). An instance whose state stops being finite keeps its last finite state and is
    /// flagged. Supports [`Integrator::SemiImplicitEuler`] and [`Integrator::Rk4`] with
    /// [`Stabilization::None`] or [`Stabilization::Baumgarte`]; other options are an error.
    pub fn step(
        &mut self,
        batch: &mut Batch,
        options: &StepOptions,
        n: usize,
    ) -> Result<StepReport> {
        options.validate()?;
        let (integrator, h) = match options.integrator {
            Integrator::SemiImplicitEuler { step } => (0u32, step),
            Integrator::Rk4 { step } => (1u32, step),
            Integrator::RungeKuttaMerson { .. } => {
                return Err(Error::Gpu(
                    "Runge–Kutta–Merson (per-instance step control) runs on the CPU Stepper; the GPU steps with SemiImplicitEuler or Rk4".into(),
                ));
            }
        };
        let baumgarte = match options.stabilization {
            Stabilization::None => 2u32,
            Stabilization::Baumgarte => 1u32,
            Stabilization::Projection { .. } => {
                return Err(Error::Gpu(
                    "projection runs on the CPU Stepper; the GPU controls drift with Baumgarte (Stabilization::Baumgarte) or not at all".into(),
                ));
            }
        };
        if n == 0 {
            return Ok(StepReport::default());
        }
        self.prepare(batch)?;
        self.last_upload_bytes = self.upload(batch)?;
        let precision = self.precision;
        let bytes = precision.bytes() as u64;
        let columns = state_columns(batch);
        let state_width: usize = columns.iter().map(|(_, w)| w).sum();
        let step_bytes: Vec<u8> = match precision {
            Precision::F32 => bytemuck::bytes_of(&(h as f32)).to_vec(),
            Precision::F64 => bytemuck::bytes_of(&h).to_vec(),
        };
        self.step_pipeline();
        let device = self.device.clone();
        let (d, queue) = (&device.device, &device.queue);
        let pipeline = self.step_pipeline.as_ref().expect("built");
        queue.write_buffer(&pipeline.step_size, 0, &step_bytes);
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        // Launch records are spaced by the uniform offset alignment (256 bytes on most adapters).
        let record = u64::from(device.limits.min_uniform_buffer_offset_alignment).max(16);
        // Buffers per chunk, made once.
        for chunk in &mut self.chunks {
            if chunk.step.is_none() {
                let count = chunk.count as u64;
                let launch = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch step launch"),
                    size: 3 * record,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let output = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch step output"),
                    size: 2 * count * bytes,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                let staging = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch step staging"),
                    size: (2 + state_width as u64) * count * bytes,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("simbatch step"),
                    layout: &pipeline.layout,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                buffer: &launch,
                                offset: 0,
                                size: wgpu::BufferSize::new(16),
                            }),
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
                            resource: pipeline.step_size.as_entire_binding(),
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
        }
        // All substeps of all chunks in one submit: no readback in between.
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("simbatch step"),
        });
        let mut remaining = n;
        let mut dispatches = Vec::new();
        while remaining > 0 {
            let steps = remaining.min(MAX_SUBSTEPS_PER_DISPATCH);
            dispatches.push(steps);
            remaining -= steps;
        }
        let input_prefix = |column: Column| {
            self.layout
                .inputs
                .iter()
                .find(|c| c.column == column)
                .map(|c| c.prefix)
                .ok_or_else(|| Error::Gpu(format!("state column {column:?} not in the layout")))
        };
        let prefixes = columns
            .iter()
            .map(|(c, _)| input_prefix(*c))
            .collect::<Result<Vec<_>>>()?;
        let last = dispatches.len().saturating_sub(1);
        for chunk in &self.chunks {
            let step = chunk.step.as_ref().expect("made above");
            // Three launch records cover every dispatch: the first of several (full, fresh),
            // the middle ones (full, continuing) and the last (the remainder, continuing unless
            // it is also the first). Written before the submit; dispatches pick one by offset.
            let mode = integrator | (baumgarte << 8);
            let full = MAX_SUBSTEPS_PER_DISPATCH.min(n) as u32;
            let rest = dispatches.last().copied().unwrap_or(0) as u32;
            let count = chunk.count as u32;
            let records: [[u32; 4]; 3] = [
                [count, count, full, mode],
                [count, count, full, mode | CONTINUING],
                [
                    count,
                    count,
                    rest,
                    mode | if last > 0 { CONTINUING } else { 0 },
                ],
            ];
            for (k, r) in records.iter().enumerate() {
                queue.write_buffer(&step.launch, k as u64 * record, bytemuck::cast_slice(r));
            }
            for k in 0..dispatches.len() {
                let which = if k == last {
                    2
                } else if k == 0 {
                    0
                } else {
                    1
                };
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("simbatch step"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&pipeline.pipeline);
                pass.set_bind_group(0, &step.bind_group, &[(which * record) as u32]);
                pass.dispatch_workgroups(chunk.count.div_ceil(WORKGROUP) as u32, 1, 1);
            }
            // Read back: status and substeps done, then every state column.
            let count = chunk.count as u64;
            encoder.copy_buffer_to_buffer(&step.output, 0, &step.staging, 0, 2 * count * bytes);
            let mut at = 2 * count * bytes;
            for ((_, width), prefix) in columns.iter().zip(&prefixes) {
                let size = *width as u64 * count * bytes;
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

        let mut states = Vec::with_capacity(batch.len());
        let mut report = StepReport::default();
        for chunk in &self.chunks {
            let step = chunk.step.as_ref().expect("made above");
            let count = chunk.count;
            let size = ((2 + state_width) * count) as u64 * bytes;
            let values: Vec<f64> =
                map_read(&self.device, &step.staging, size, |view| match precision {
                    Precision::F32 => bytemuck::cast_slice::<u8, f32>(view)
                        .iter()
                        .map(|x| *x as f64)
                        .collect(),
                    Precision::F64 => bytemuck::cast_slice::<u8, f64>(view).to_vec(),
                })?;
            for local in 0..count {
                let i = chunk.start + local;
                let status = values[local] as u32;
                let done = values[count + local] as usize;
                let mut state = batch.state_of(i);
                let mut at = 2 * count;
                let (nf, np) = (state.q.len(), state.pose.len());
                for slot in 0..nf {
                    state.q[slot].copy_from_slice(&values[at + 7 * local..at + 7 * local + 7]);
                    at += 7 * count;
                    state.u[slot].copy_from_slice(&values[at + 6 * local..at + 6 * local + 6]);
                    at += 6 * count;
                }
                for slot in 0..np {
                    state.pose[slot].copy_from_slice(&values[at + 7 * local..at + 7 * local + 7]);
                    at += 7 * count;
                    state.velocity[slot]
                        .copy_from_slice(&values[at + 6 * local..at + 6 * local + 6]);
                    at += 6 * count;
                }
                state.time += done as f64 * h;
                report.steps += done as u64;
                let failed = status != 0;
                report.flagged += usize::from(failed);
                states.push((state, failed));
            }
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("stepping kernel failed: {e}")));
        }
        batch.store_states(&states);
        // The GPU already holds exactly these values: mark them uploaded.
        for chunk in &mut self.chunks {
            for (k, col) in self.layout.inputs.iter().enumerate() {
                if columns.iter().any(|(c, _)| *c == col.column) {
                    chunk.uploaded[k] = batch.column_version(col.column).unwrap_or(0);
                }
            }
        }
        Ok(report)
    }
}
