//! The evaluation kernel's host side (`shaders/evaluate.wgsl`): pipeline, buffers, chunks,
//! uploads of changed columns, dispatch and readback into an [`Evaluation`].
//!
//! A batch is split into chunks small enough for one storage binding (the adapter's
//! `max_storage_buffer_binding_size`, 128 MiB on lavapipe) and one dispatch. Every chunk keeps
//! its own input, output and staging buffers across calls, and remembers the version of each
//! column it holds: a call uploads only the columns written since ([`Batch::column_version`]).

use std::sync::Arc;

use crate::batch::{Batch, ColumnData, status};
use crate::error::{Error, Result};
use crate::evaluate::{ConstraintEvaluation, Evaluation};
use crate::gpu::device::GpuDevice;
use crate::gpu::layout::Layout;
use crate::gpu::shader::kernel_source;
use crate::gpu::{GpuOptions, Precision};

const WORKGROUP: usize = 64;

/// Jacobians and biases read back from the GPU (on request).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuJacobians {
    /// Per constraint: G rows (`rows × nu` per instance, row-major, internal row order; zero rows
    /// where the constraint is disabled).
    pub jacobian: Vec<Vec<f64>>,
    /// Per constraint: `k` (`rows` per instance).
    pub bias_acceleration: Vec<Vec<f64>>,
}

/// Values read back from one chunk, in the kernel's precision.
enum Raw {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Raw {
    fn f32(&self) -> &[f32] {
        match self {
            Raw::F32(v) => v,
            Raw::F64(_) => &[],
        }
    }
    fn f64(&self) -> &[f64] {
        match self {
            Raw::F64(v) => v,
            Raw::F32(_) => &[],
        }
    }
    fn to_f64(&self) -> Vec<f64> {
        match self {
            Raw::F32(v) => v.iter().map(|x| *x as f64).collect(),
            Raw::F64(v) => v.clone(),
        }
    }
}

struct Chunk {
    start: usize,
    count: usize,
    input: wgpu::Buffer,
    output: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    uploaded: Vec<u64>,
}

/// Evaluates batches of one template on the GPU.
pub struct GpuEvaluator {
    device: Arc<GpuDevice>,
    precision: Precision,
    layout: Layout,
    pipeline: wgpu::ComputePipeline,
    bind_group_layout: wgpu::BindGroupLayout,
    capacity: usize,
    max_binding_bytes: u64,
    batch_uid: Option<u64>,
    chunks: Vec<Chunk>,
    last_upload_bytes: u64,
}

impl std::fmt::Debug for GpuEvaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEvaluator")
            .field("precision", &self.precision)
            .field("capacity", &self.capacity)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl GpuEvaluator {
    /// Builds the kernel for `batch`'s template. Errors (no panic) when the template has a
    /// constraint kind without a GPU kernel, when f64 is asked of an adapter without
    /// `SHADER_F64`, or when the kernel fails validation.
    pub fn new(
        device: Arc<GpuDevice>,
        batch: &Batch,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        if precision == Precision::F64 && !device.supports_f64 {
            return Err(Error::Gpu(format!(
                "f64 kernels need SHADER_F64, which {} does not offer",
                device.info.name
            )));
        }
        let layout = Layout::new(batch.template())?;
        let source = kernel_source(precision, &layout.wgsl_constants);
        let d = &device.device;
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("simbatch evaluate"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let entry = |binding, ty| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty,
            count: None,
        };
        let storage = |read_only| wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        };
        let bind_group_layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("simbatch evaluate"),
            entries: &[
                entry(
                    0,
                    wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                ),
                entry(1, storage(true)),
                entry(2, storage(false)),
            ],
        });
        let pipeline_layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("simbatch evaluate"),
            bind_group_layouts: &[Some(&bind_group_layout)],
            immediate_size: 0,
        });
        let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("simbatch evaluate"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("kernel build failed: {e}")));
        }
        let limits = &device.limits;
        let max_binding_bytes = options
            .max_binding_bytes
            .unwrap_or(u64::MAX)
            .min(limits.max_storage_buffer_binding_size)
            .min(limits.max_buffer_size);
        let per_instance = (layout.input_width.max(layout.output_width) * precision.bytes()) as u64;
        let by_binding = (max_binding_bytes / per_instance.max(1)) as usize;
        let by_dispatch = limits.max_compute_workgroups_per_dimension as usize * WORKGROUP;
        let capacity = by_binding.min(by_dispatch).max(1);
        if by_binding == 0 {
            return Err(Error::Gpu(format!(
                "one instance needs {per_instance} bytes, more than the {max_binding_bytes}-byte binding limit"
            )));
        }
        Ok(Self {
            device,
            precision,
            layout,
            pipeline,
            bind_group_layout,
            capacity,
            max_binding_bytes,
            batch_uid: None,
            chunks: Vec::new(),
            last_upload_bytes: 0,
        })
    }

    /// Instances per chunk (per storage binding and dispatch).
    pub fn chunk_capacity(&self) -> usize {
        self.capacity
    }

    /// Number of chunks of the last batch evaluated.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The binding-size limit in force (the adapter's, or a smaller one from [`GpuOptions`]).
    pub fn max_binding_bytes(&self) -> u64 {
        self.max_binding_bytes
    }

    /// Bytes uploaded by the last call (only columns written since the previous call move).
    pub fn last_upload_bytes(&self) -> u64 {
        self.last_upload_bytes
    }

    /// Precision of the kernel.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The layout of the buffers.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn prepare(&mut self, batch: &Batch) -> Result<()> {
        if Layout::new(batch.template())? != self.layout {
            return Err(Error::Gpu(
                "this evaluator was built for another template layout".into(),
            ));
        }
        if self.batch_uid == Some(batch.uid())
            && self.chunks.iter().map(|c| c.count).sum::<usize>() == batch.len()
        {
            return Ok(());
        }
        let d = &self.device.device;
        let bytes = self.precision.bytes() as u64;
        self.chunks.clear();
        let mut start = 0;
        while start < batch.len() {
            // A chunk's column segments are `count` instances long: its buffers hold its own
            // instances only, and a readback moves exactly the values asked for.
            let count = self.capacity.min(batch.len() - start);
            let in_size = (self.layout.input_width * count) as u64 * bytes;
            let out_size = (self.layout.output_width * count) as u64 * bytes;
            let input = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch input"),
                size: in_size.max(4),
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let output = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch output"),
                size: out_size.max(4),
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let staging = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch staging"),
                size: out_size.max(4),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            // The kernel's `capacity` is the chunk's segment length.
            let launch: [u32; 4] = [count as u32, count as u32, 0, 0];
            let uniform = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch launch"),
                size: 16,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            self.device
                .queue
                .write_buffer(&uniform, 0, bytemuck::cast_slice(&launch));
            let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("simbatch evaluate"),
                layout: &self.bind_group_layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: uniform.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: input.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: output.as_entire_binding(),
                    },
                ],
            });
            self.chunks.push(Chunk {
                start,
                count,
                input,
                output,
                staging,
                bind_group,
                uploaded: vec![0; self.layout.inputs.len()],
            });
            start += count;
        }
        self.batch_uid = Some(batch.uid());
        Ok(())
    }

    /// Uploads the columns that changed since this chunk last saw them; returns bytes sent.
    fn upload(&mut self, batch: &Batch) -> Result<u64> {
        let bytes = self.precision.bytes();
        let mut sent = 0;
        for chunk in &mut self.chunks {
            for (k, col) in self.layout.inputs.iter().enumerate() {
                let version = batch.column_version(col.column).ok_or_else(|| {
                    Error::Gpu(format!("column {:?} missing from the batch", col.column))
                })?;
                if chunk.uploaded[k] == version {
                    continue;
                }
                let (data, width) = batch.column_data(col.column).ok_or_else(|| {
                    Error::Gpu(format!("column {:?} missing from the batch", col.column))
                })?;
                let range = chunk.start * width..(chunk.start + chunk.count) * width;
                let payload: Vec<u8> = match (self.precision, data) {
                    (Precision::F32, ColumnData::F64(v)) => bytemuck::cast_slice(
                        &v[range].iter().map(|x| *x as f32).collect::<Vec<f32>>(),
                    )
                    .to_vec(),
                    (Precision::F64, ColumnData::F64(v)) => {
                        bytemuck::cast_slice(&v[range]).to_vec()
                    }
                    (Precision::F32, ColumnData::U32(v)) => bytemuck::cast_slice(
                        &v[range].iter().map(|x| *x as f32).collect::<Vec<f32>>(),
                    )
                    .to_vec(),
                    (Precision::F64, ColumnData::U32(v)) => bytemuck::cast_slice(
                        &v[range].iter().map(|x| *x as f64).collect::<Vec<f64>>(),
                    )
                    .to_vec(),
                };
                let offset = (col.prefix * chunk.count * bytes) as u64;
                if !payload.is_empty() {
                    self.device
                        .queue
                        .write_buffer(&chunk.input, offset, &payload);
                }
                sent += payload.len() as u64;
                chunk.uploaded[k] = version;
            }
        }
        Ok(sent)
    }

    /// Runs the kernel on every chunk and reads back `widths` (the main outputs, or all of them
    /// with the Jacobians); returns one `Vec<f64>` of output values per chunk.
    fn run(&mut self, batch: &Batch, with_jacobians: bool) -> Result<Vec<Raw>> {
        self.prepare(batch)?;
        self.last_upload_bytes = self.upload(batch)?;
        let bytes = self.precision.bytes() as u64;
        let width = if with_jacobians {
            self.layout.output_width
        } else {
            self.layout.output_main_width
        };
        let read_bytes = |chunk: &Chunk| (width * chunk.count) as u64 * bytes;
        let d = &self.device.device;
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("simbatch evaluate"),
        });
        for chunk in &self.chunks {
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("simbatch evaluate"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &chunk.bind_group, &[]);
                pass.dispatch_workgroups(chunk.count.div_ceil(WORKGROUP) as u32, 1, 1);
            }
            if read_bytes(chunk) > 0 {
                encoder.copy_buffer_to_buffer(
                    &chunk.output,
                    0,
                    &chunk.staging,
                    0,
                    read_bytes(chunk),
                );
            }
        }
        self.device.queue.submit([encoder.finish()]);
        let mut out = Vec::with_capacity(self.chunks.len());
        for chunk in &self.chunks {
            let read_bytes = read_bytes(chunk);
            let slice = chunk.staging.slice(0..read_bytes.max(4));
            let (tx, rx) = std::sync::mpsc::channel();
            slice.map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            d.poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
            rx.recv()
                .map_err(|e| Error::Gpu(format!("readback lost: {e}")))?
                .map_err(|e| Error::Gpu(format!("readback failed: {e}")))?;
            let view = slice
                .get_mapped_range()
                .map_err(|e| Error::Gpu(format!("readback failed: {e}")))?;
            let values = match self.precision {
                Precision::F32 => {
                    Raw::F32(bytemuck::cast_slice::<u8, f32>(&view[..read_bytes as usize]).to_vec())
                }
                Precision::F64 => {
                    Raw::F64(bytemuck::cast_slice::<u8, f64>(&view[..read_bytes as usize]).to_vec())
                }
            };
            drop(view);
            chunk.staging.unmap();
            out.push(values);
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("kernel run failed: {e}")));
        }
        Ok(out)
    }

    /// Forgets which columns the GPU holds, so the next call uploads every column (for
    /// benchmarks of the full path, and after the device's memory was tampered with).
    pub fn invalidate(&mut self) {
        for chunk in &mut self.chunks {
            chunk.uploaded.iter_mut().for_each(|v| *v = 0);
        }
    }

    /// Uploads changed columns and runs the kernel on every chunk, waiting for it, without
    /// reading anything back (results stay on the GPU; for benchmarks of the kernel alone).
    pub fn dispatch(&mut self, batch: &Batch) -> Result<()> {
        self.prepare(batch)?;
        self.last_upload_bytes = self.upload(batch)?;
        let d = &self.device.device;
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("simbatch dispatch"),
        });
        for chunk in &self.chunks {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("simbatch evaluate"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &chunk.bind_group, &[]);
            pass.dispatch_workgroups(chunk.count.div_ceil(WORKGROUP) as u32, 1, 1);
        }
        self.device.queue.submit([encoder.finish()]);
        d.poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
        Ok(())
    }

    /// Evaluates every instance: the same [`Evaluation`] as the CPU path, within the precision
    /// bounds of `physics.md` §7.
    pub fn evaluate(&mut self, batch: &Batch) -> Result<Evaluation> {
        let raw = self.run(batch, false)?;
        Ok(match &raw[..] {
            [Raw::F32(_), ..] => {
                self.to_evaluation(batch, &raw.iter().map(Raw::f32).collect::<Vec<_>>())
            }
            _ => self.to_evaluation(batch, &raw.iter().map(Raw::f64).collect::<Vec<_>>()),
        })
    }

    /// As [`evaluate`](Self::evaluate), also reading back G and k.
    pub fn evaluate_with_jacobians(&mut self, batch: &Batch) -> Result<(Evaluation, GpuJacobians)> {
        let raw = self.run(batch, true)?;
        let raw: Vec<Vec<f64>> = raw.iter().map(Raw::to_f64).collect();
        let raw_refs: Vec<&[f64]> = raw.iter().map(Vec::as_slice).collect();
        let ev = self.to_evaluation(batch, &raw_refs);
        let nu = self.layout.nu;
        let mut jac = GpuJacobians {
            jacobian: Vec::new(),
            bias_acceleration: Vec::new(),
        };
        for c in &self.layout.constraints {
            let (mut g, mut k) = (Vec::new(), Vec::new());
            for (chunk, values) in self.chunks.iter().zip(&raw) {
                let seg = |prefix: usize, width: usize| {
                    &values[prefix * chunk.count..prefix * chunk.count + chunk.count * width]
                };
                g.extend_from_slice(seg(c.jacobian_prefix, c.rows * nu));
                k.extend_from_slice(seg(c.bias_acceleration(nu), c.rows));
            }
            jac.jacobian.push(g);
            jac.bias_acceleration.push(k);
        }
        Ok((ev, jac))
    }

    fn to_evaluation<T: Copy + Into<f64>>(&self, batch: &Batch, raw: &[&[T]]) -> Evaluation {
        let template = batch.template();
        let (len, nu) = (batch.len(), self.layout.nu);
        // In a chunk of `count` instances, the column with prefix p and width w is the
        // instance-major slice raw[p·count .. (p + w)·count]: most columns are slice copies.
        let segment =
            |count: usize, prefix: usize, width: usize| prefix * count..(prefix + width) * count;
        let mut ev = Evaluation {
            len,
            nu,
            status: Vec::with_capacity(len),
            udot: Vec::with_capacity(len * nu),
            udot_unconstrained: Vec::with_capacity(len * nu),
            constraints: Vec::with_capacity(template.constraints().len()),
        };
        for (chunk, v) in self.chunks.iter().zip(raw) {
            let n = chunk.count;
            ev.status.extend(
                v[segment(n, self.layout.status, 1)]
                    .iter()
                    .map(|x| (*x).into() as u32),
            );
            ev.udot.extend(
                v[segment(n, self.layout.udot, nu)]
                    .iter()
                    .map(|x| (*x).into()),
            );
            ev.udot_unconstrained.extend(
                v[segment(n, self.layout.udot_unconstrained, nu)]
                    .iter()
                    .map(|x| (*x).into()),
            );
        }
        for (slot, place) in template.constraints().iter().zip(&self.layout.constraints) {
            let c = &slot.constraint;
            let extras = c.reported_extras();
            let slots = c.report_slots();
            let (width, rows, body_count) = (slots.len(), place.rows, c.bodies().len());
            let mut out = ConstraintEvaluation {
                width,
                body_count,
                position_errors: Vec::with_capacity(len * width),
                velocity_errors: Vec::with_capacity(len * width),
                acceleration_errors: Vec::with_capacity(len * width),
                multipliers: Vec::with_capacity(len * width),
                body_forces: Vec::with_capacity(len * body_count),
                power: Vec::with_capacity(len),
                contact_point: extras.contact_point.then(|| Vec::with_capacity(len)),
                separation: extras.separation.then(|| Vec::with_capacity(len)),
                contact_force: extras.contact_force.then(|| Vec::with_capacity(len)),
            };
            for (chunk, v) in self.chunks.iter().zip(raw) {
                let n = chunk.count;
                // Internal rows → reported slots (x, y, z); absent slots are 0.
                let reorder = |prefix: usize, dst: &mut Vec<f64>| {
                    for row in v[segment(n, prefix, rows)].chunks_exact(rows) {
                        dst.extend(slots.iter().map(|s| s.map_or(0.0, |r| row[r].into())));
                    }
                };
                reorder(place.prefix, &mut out.position_errors);
                reorder(place.velocity_errors(), &mut out.velocity_errors);
                reorder(place.acceleration_errors(), &mut out.acceleration_errors);
                reorder(place.multipliers(), &mut out.multipliers);
                for f in v[segment(n, place.body_forces(), 12)].chunks_exact(12) {
                    for b in 0..body_count {
                        let mut force = [0.0; 6];
                        for (k, x) in force.iter_mut().enumerate() {
                            *x = f[6 * b + k].into();
                        }
                        out.body_forces.push(force);
                    }
                }
                out.power
                    .extend(v[segment(n, place.power(), 1)].iter().map(|x| (*x).into()));
                let triples = |prefix: usize| {
                    v[segment(n, prefix, 3)]
                        .chunks_exact(3)
                        .map(|p| [p[0].into(), p[1].into(), p[2].into()])
                };
                if let Some(p) = out.contact_point.as_mut() {
                    p.extend(triples(place.contact_point()));
                }
                if let Some(s) = out.separation.as_mut() {
                    s.extend(
                        v[segment(n, place.separation(), 1)]
                            .iter()
                            .map(|x| (*x).into()),
                    );
                }
                if let Some(f) = out.contact_force.as_mut() {
                    f.extend(triples(place.contact_force()));
                }
            }
            ev.constraints.push(out);
        }
        // As on the CPU: an instance whose state is not finite (or whose mass matrix is singular)
        // has no solution, and its solved quantities are NaN.
        for i in 0..len {
            if ev.status[i] & (status::NONFINITE_STATE | status::SINGULAR_MASS) == 0 {
                continue;
            }
            ev.udot[i * nu..(i + 1) * nu].fill(f64::NAN);
            ev.udot_unconstrained[i * nu..(i + 1) * nu].fill(f64::NAN);
            for (c, slot) in ev.constraints.iter_mut().zip(template.constraints()) {
                let w = c.width;
                for (s, row) in slot.constraint.report_slots().iter().enumerate() {
                    if row.is_some() {
                        c.acceleration_errors[i * w + s] = f64::NAN;
                        c.multipliers[i * w + s] = f64::NAN;
                    }
                }
                let b = c.body_count;
                c.body_forces[i * b..(i + 1) * b].fill([f64::NAN; 6]);
                c.power[i] = f64::NAN;
                if let Some(f) = c.contact_force.as_mut() {
                    f[i] = [f64::NAN; 3];
                }
            }
        }
        ev
    }
}
