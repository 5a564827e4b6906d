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
use crate::evaluation::Evaluation;
use crate::gpu::buffers::{WORKGROUP, gpu_allocation_error, layout_entry, map_read};
use crate::gpu::device::GpuDevice;
use crate::gpu::layout::Layout;
use crate::gpu::shader::kernel_source;
use crate::gpu::{GpuOptions, Precision};

/// Jacobians and biases read back from the GPU (on request).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuJacobians {
    /// Per constraint: G rows (`rows × nu` per instance, row-major, internal row order; zero rows
    /// where the constraint is disabled).
    pub jacobian: Vec<Vec<f64>>,
    /// Per constraint: `k` (`rows` per instance).
    pub bias_acceleration: Vec<Vec<f64>>,
}

/// Values read back from one chunk, in the kernel's precision, borrowed from the mapping.
enum RawRef<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

pub(crate) struct Chunk {
    pub(crate) start: usize,
    pub(crate) count: usize,
    pub(crate) input: wgpu::Buffer,
    output: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    pub(crate) uploaded: Vec<u64>,
}

/// Evaluates batches of one template on the GPU.
pub struct GpuEvaluator {
    pub(crate) device: Arc<GpuDevice>,
    pub(crate) precision: Precision,
    pub(crate) layout: Layout,
    pipeline: wgpu::ComputePipeline,
    bind_group_layout: wgpu::BindGroupLayout,
    capacity: usize,
    max_binding_bytes: u64,
    batch_uid: Option<u64>,
    pub(crate) chunks: Vec<Chunk>,
    pub(crate) last_upload_bytes: u64,
    /// Counts rebuilds of the chunks: buffers bound to a chunk's input (the stepping kernel's)
    /// are remade when it changes.
    pub(crate) generation: u64,
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
        let source = kernel_source(precision, &layout);
        source.check()?;
        let d = &device.device;
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("simbatch evaluate"),
            source: wgpu::ShaderSource::Wgsl(source.text.into()),
        });
        let bind_group_layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("simbatch evaluate"),
            entries: &[
                layout_entry(0, wgpu::BufferBindingType::Uniform),
                // read-write: the stepping kernel advances the state in place.
                layout_entry(1, wgpu::BufferBindingType::Storage { read_only: false }),
                layout_entry(2, wgpu::BufferBindingType::Storage { read_only: false }),
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
            generation: 0,
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

    /// Whether this evaluator's kernel serves `batch` (same layout).
    pub(crate) fn fits(&self, batch: &Batch) -> Result<bool> {
        // The batch the buffers were made for fits by construction (a batch's template never
        // changes): its layout is built once, not on every call.
        if self.batch_uid == Some(batch.uid()) {
            return Ok(true);
        }
        Ok(Layout::new(batch.template())? == self.layout)
    }

    /// Makes the chunks' buffers for `batch` (kept while the same batch of the same size comes).
    pub(crate) fn prepare(&mut self, batch: &Batch) -> Result<()> {
        if self.batch_uid == Some(batch.uid())
            && self.chunks.iter().map(|c| c.count).sum::<usize>() == batch.len()
        {
            return Ok(());
        }
        if Layout::new(batch.template())? != self.layout {
            return Err(Error::Gpu(
                "this evaluator was built for another template layout".into(),
            ));
        }
        let d = &self.device.device;
        let bytes = self.precision.bytes() as u64;
        self.chunks.clear();
        self.batch_uid = None;
        self.generation += 1;
        // Sizes come from the user: a buffer the GPU cannot allocate is a typed error, not the
        // uncaptured-error panic.
        let total = (self.layout.input_width + 2 * self.layout.output_width) as u128
            * batch.len() as u128
            * bytes as u128;
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = d.push_error_scope(wgpu::ErrorFilter::Validation);
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
                // COPY_SRC: the stepping kernel's state is read back from here.
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
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
        let invalid = pollster::block_on(validation.pop());
        let out_of_memory = pollster::block_on(oom.pop());
        if out_of_memory.is_some() || invalid.is_some() {
            self.chunks.clear();
            return Err(gpu_allocation_error(
                &self.device,
                batch.len(),
                total,
                out_of_memory.or(invalid),
            ));
        }
        self.batch_uid = Some(batch.uid());
        Ok(())
    }

    /// Uploads the columns that changed since this chunk last saw them; returns bytes sent.
    ///
    /// (Buffers are made by `prepare`, whose failures [`gpu_allocation_error`] reports.)
    pub(crate) fn upload(&mut self, batch: &Batch) -> Result<u64> {
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
                let view = batch.column_data(col.column).ok_or_else(|| {
                    Error::Gpu(format!("column {:?} missing from the batch", col.column))
                })?;
                // The chunk's values as f64: a shared column's one row, repeated.
                let width = view.width;
                let (first, count) = if view.shared {
                    (0, 1)
                } else {
                    (chunk.start, chunk.count)
                };
                let range = first * width..(first + count) * width;
                let values: Vec<f64> = match view.data {
                    ColumnData::F64(v) => v[range].to_vec(),
                    ColumnData::U32(v) => v[range].iter().map(|x| *x as f64).collect(),
                };
                let values: Vec<f64> = if view.shared {
                    values
                        .iter()
                        .copied()
                        .cycle()
                        .take(chunk.count * width)
                        .collect()
                } else {
                    values
                };
                let payload: Vec<u8> = match self.precision {
                    Precision::F32 => bytemuck::cast_slice(
                        &values.iter().map(|x| *x as f32).collect::<Vec<f32>>(),
                    )
                    .to_vec(),
                    Precision::F64 => bytemuck::cast_slice(&values).to_vec(),
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

    /// Uploads changed columns, runs the kernel on every chunk and copies `width` output values
    /// per instance (the main outputs, or all of them with the Jacobians) to the staging buffers.
    fn submit(&mut self, batch: &Batch, width: usize) -> Result<()> {
        self.prepare(batch)?;
        self.last_upload_bytes = self.upload(batch)?;
        let mut encoder =
            self.device
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("simbatch evaluate"),
                });
        self.encode_evaluation(&mut encoder, width);
        self.device.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// Maps each chunk's staging buffer in turn and hands its values, in the kernel's precision,
    /// to `consume` while mapped (no intermediate copy).
    fn read(&self, width: usize, mut consume: impl FnMut(&Chunk, RawRef<'_>)) -> Result<()> {
        let bytes = self.precision.bytes();
        for chunk in &self.chunks {
            let read = width * chunk.count * bytes;
            if read == 0 {
                continue;
            }
            map_read(
                &self.device,
                &chunk.staging,
                read as u64,
                |view| match self.precision {
                    Precision::F32 => consume(chunk, RawRef::F32(bytemuck::cast_slice(view))),
                    Precision::F64 => consume(chunk, RawRef::F64(bytemuck::cast_slice(view))),
                },
            )?;
        }
        Ok(())
    }

    /// Forgets which columns the GPU holds, so the next call uploads every column (for
    /// benchmarks of the full path, and after the device's memory was tampered with).
    pub fn invalidate(&mut self) {
        for chunk in &mut self.chunks {
            chunk.uploaded.iter_mut().for_each(|v| *v = 0);
        }
    }

    /// One evaluation pass per chunk, each followed by a copy of `width` output values per
    /// instance to its staging buffer (none when `width` is 0).
    fn encode_evaluation(&self, encoder: &mut wgpu::CommandEncoder, width: usize) {
        let bytes = self.precision.bytes() as u64;
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
            let read = (width * chunk.count) as u64 * bytes;
            if read > 0 {
                encoder.copy_buffer_to_buffer(&chunk.output, 0, &chunk.staging, 0, read);
            }
        }
    }

    /// Uploads changed columns and runs the kernel on every chunk, waiting for it, without
    /// reading anything back (results stay on the GPU; for benchmarks of the kernel alone).
    pub fn dispatch(&mut self, batch: &Batch) -> Result<()> {
        self.submit(batch, 0)?;
        self.device
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
        Ok(())
    }

    /// Evaluates every instance: the same [`Evaluation`] as the CPU path, within the precision
    /// bounds of `physics.md` §7.
    pub fn evaluate(&mut self, batch: &Batch) -> Result<Evaluation> {
        let mut ev = Evaluation::default();
        self.evaluate_into(batch, &mut ev)?;
        Ok(ev)
    }

    /// As [`evaluate`](Self::evaluate), writing into `out` and reusing its allocations (no page
    /// faults on the host for repeated calls on large batches).
    pub fn evaluate_into(&mut self, batch: &Batch, out: &mut Evaluation) -> Result<()> {
        let width = self.layout.output_main_width;
        let scope = self
            .device
            .device
            .push_error_scope(wgpu::ErrorFilter::Validation);
        self.submit(batch, width)?;
        out.reset_for(batch.template(), batch.len());
        self.read(width, |chunk, raw| match raw {
            RawRef::F32(v) => self.append_chunk(batch, out, v, chunk.count),
            RawRef::F64(v) => self.append_chunk(batch, out, v, chunk.count),
        })?;
        self.finish_evaluation(batch, out);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("kernel run failed: {e}")));
        }
        Ok(())
    }

    /// As [`evaluate`](Self::evaluate), also reading back G and k.
    pub fn evaluate_with_jacobians(&mut self, batch: &Batch) -> Result<(Evaluation, GpuJacobians)> {
        let width = self.layout.output_width;
        let nu = self.layout.nu;
        self.submit(batch, width)?;
        let mut ev = Evaluation::default();
        ev.reset_for(batch.template(), batch.len());
        let n_c = self.layout.constraints.len();
        let mut jac = GpuJacobians {
            jacobian: vec![Vec::new(); n_c],
            bias_acceleration: vec![Vec::new(); n_c],
        };
        self.read(width, |chunk, raw| {
            let values: Vec<f64> = match raw {
                RawRef::F32(v) => v.iter().map(|x| *x as f64).collect(),
                RawRef::F64(v) => v.to_vec(),
            };
            self.append_chunk(batch, &mut ev, &values, chunk.count);
            let n = chunk.count;
            for (k, c) in self.layout.constraints.iter().enumerate() {
                let seg = |prefix: usize, w: usize| &values[prefix * n..(prefix + w) * n];
                jac.jacobian[k].extend_from_slice(seg(c.jacobian_prefix, c.rows * nu));
                jac.bias_acceleration[k].extend_from_slice(seg(c.bias_acceleration(nu), c.rows));
            }
        })?;
        self.finish_evaluation(batch, &mut ev);
        Ok((ev, jac))
    }

    /// Appends one chunk's outputs. In a chunk of `n` instances, the column with prefix p and
    /// width w is the instance-major slice `v[p·n .. (p + w)·n]`.
    fn append_chunk<T: Copy + Into<f64>>(
        &self,
        batch: &Batch,
        ev: &mut Evaluation,
        v: &[T],
        n: usize,
    ) {
        let nu = self.layout.nu;
        let segment = |prefix: usize, width: usize| &v[prefix * n..(prefix + width) * n];
        let f = |x: &T| -> f64 { (*x).into() };
        ev.status
            .extend(segment(self.layout.status, 1).iter().map(|x| f(x) as u32));
        ev.udot.extend(segment(self.layout.udot, nu).iter().map(f));
        ev.udot_unconstrained
            .extend(segment(self.layout.udot_unconstrained, nu).iter().map(f));
        for ((slot, place), out) in batch
            .template()
            .constraints()
            .iter()
            .zip(&self.layout.constraints)
            .zip(ev.constraints.iter_mut())
        {
            let slots = slot.constraint.report_slots();
            let rows = place.rows;
            // Internal rows → reported slots (x, y, z); absent slots are 0.
            let reorder = |prefix: usize, dst: &mut Vec<f64>| {
                for row in segment(prefix, rows).chunks_exact(rows) {
                    dst.extend(slots.iter().map(|s| s.map_or(0.0, |r| f(&row[r]))));
                }
            };
            reorder(place.prefix, &mut out.position_errors);
            reorder(place.velocity_errors(), &mut out.velocity_errors);
            reorder(place.acceleration_errors(), &mut out.acceleration_errors);
            reorder(place.multipliers(), &mut out.multipliers);
            for forces in segment(place.body_forces(), 12).chunks_exact(12) {
                for b in 0..out.body_count {
                    let mut force = [0.0; 6];
                    for (k, x) in force.iter_mut().enumerate() {
                        *x = f(&forces[6 * b + k]);
                    }
                    out.body_forces.push(force);
                }
            }
            out.power.extend(segment(place.power(), 1).iter().map(f));
            let triples = |prefix: usize| {
                segment(prefix, 3)
                    .chunks_exact(3)
                    .map(|p| [f(&p[0]), f(&p[1]), f(&p[2])])
            };
            if let Some(p) = out.contact_point.as_mut() {
                p.extend(triples(place.contact_point()));
            }
            if let Some(s) = out.separation.as_mut() {
                s.extend(segment(place.separation(), 1).iter().map(f));
            }
            if let Some(c) = out.contact_force.as_mut() {
                c.extend(triples(place.contact_force()));
            }
        }
    }

    /// As on the CPU: an instance whose state is not finite (or whose mass matrix is singular)
    /// has no solution, and its solved quantities are NaN.
    fn finish_evaluation(&self, batch: &Batch, ev: &mut Evaluation) {
        let nu = ev.nu;
        for i in 0..ev.len {
            if ev.status[i] & (status::NONFINITE_STATE | status::SINGULAR_MASS) == 0 {
                continue;
            }
            ev.udot[i * nu..(i + 1) * nu].fill(f64::NAN);
            ev.udot_unconstrained[i * nu..(i + 1) * nu].fill(f64::NAN);
            for (c, slot) in ev
                .constraints
                .iter_mut()
                .zip(batch.template().constraints())
            {
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
    }
}
