//! The evaluation kernel's host side (`shaders/evaluate.wgsl`): pipeline, buffers, chunks,
//! uploads of changed columns, dispatch and readback into an [`Evaluation`].
//!
//! A batch is split into chunks small enough for one storage binding (the adapter's
//! `max_storage_buffer_binding_size`, 128 MiB on lavapipe) and one dispatch. Every chunk keeps
//! its own input buffer across calls — the per-instance columns, then one row of each column
//! the batch shares ([`Layout::for_batch`]) — and remembers the version of each column it
//! holds: a call uploads only the columns written since ([`Batch::column_version`]).
//!
//! The outputs are work buffers, not batch storage, made on the first evaluation (a batch that
//! is only stepped never has them): one output buffer of at most [`DISPATCH_BYTES`], into which
//! each chunk is evaluated one slice (one dispatch) at a time, and one staging buffer (two when
//! the readback takes several pieces) of at most [`SLICE_BYTES`], through which a slice is read
//! back a piece at a time — the next piece copied while the host converts this one, in blocks
//! of instances on every core.

use std::sync::Arc;

use crate::batch::{Batch, ColumnData};
use crate::error::{Error, Result};
use crate::evaluation::{Evaluation, Outputs};
use crate::gpu::buffers::{
    Launch, gpu_allocation_error, layout_entry, within_error_scope, write_reals,
};
use crate::gpu::cache::KernelLayout;
use crate::gpu::device::GpuDevice;
use crate::gpu::layout::{Layout, OutputColumn, OutputOrder};
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

mod results;
mod slices;

/// Largest staging buffer of an evaluation (host-visible memory; two when the readback is
/// pipelined), in bytes, unless [`GpuOptions::staging_bytes`] says otherwise: a slice's outputs
/// are read back in pieces of at most this much.
pub const SLICE_BYTES: u64 = 32 << 20;

/// Largest output buffer of an evaluation (device memory), in bytes: a chunk is evaluated in
/// slices (one dispatch each) of at most this much output: large enough that a slice fills the
/// largest GPUs several times over (a rolling sphere writes 264 B in f32, so a slice holds about
/// 10⁶ of them; an H100 holds 270 000 threads at once).
pub const DISPATCH_BYTES: u64 = 256 << 20;

/// Values read back from one slice, in the kernel's precision, borrowed from the mapping.
enum RawRef<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

/// A chunk of the batch: its instances' input buffer and, once evaluated, its slices.
pub(crate) struct Chunk {
    pub(crate) start: usize,
    pub(crate) count: usize,
    pub(crate) input: wgpu::Buffer,
    /// Made on the first evaluation.
    slices: Vec<Slice>,
    pub(crate) uploaded: Vec<u64>,
}

/// Instances `first … first + count − 1` of a chunk, evaluated in one dispatch into the
/// evaluator's output buffer.
struct Slice {
    count: usize,
    bind_group: wgpu::BindGroup,
}

/// The evaluation's work buffers (shared by every slice): the kernel's output, and one staging
/// buffer, or two when the batch takes several slices, so that the host reads one slice while
/// the device computes and copies the next.
struct OutputBuffers {
    output: wgpu::Buffer,
    staging: Vec<wgpu::Buffer>,
}

/// Evaluates batches of one template on the GPU.
pub struct GpuEvaluator {
    pub(crate) device: Arc<GpuDevice>,
    pub(crate) precision: Precision,
    pub(crate) layout: Layout,
    /// The evaluation kernel's text (checked by naga when the evaluator is made) and its
    /// pipeline, built by the driver on the first evaluation: a batch that is only stepped
    /// never waits for it (the driver's build is most of a first step's time).
    source: String,
    pipeline: Option<wgpu::ComputePipeline>,
    kernel_layout: KernelLayout,
    bind_group_layout: wgpu::BindGroupLayout,
    capacity: usize,
    max_binding_bytes: u64,
    options: GpuOptions,
    /// Invocations per workgroup of its kernels (the evaluation and the stepping ones).
    pub(crate) workgroup_size: u32,
    /// The order of the evaluation kernel's output columns (`GpuOptions::output_order`).
    output_order: OutputOrder,
    /// The batch the kernel was built for and its input columns' versions then.
    built_for: Option<(u64, Vec<u64>)>,
    batch_uid: Option<u64>,
    pub(crate) chunks: Vec<Chunk>,
    outputs: Option<OutputBuffers>,
    pub(crate) last_upload_bytes: u64,
    /// Output bytes the last evaluation copied to the staging buffer and read.
    last_readback_bytes: u64,
    /// Names the chunks' buffers (unique in the process, new at every rebuild of the chunks or
    /// of the evaluator): buffers bound to a chunk's input (the stepping kernel's) are remade
    /// when it changes.
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

/// Bytes that reading `segments` (`run_slices`) of `n` instances moves.
fn readback_bytes(segments: &[(usize, usize)], n: usize, precision: Precision) -> u64 {
    let values: usize = segments.iter().map(|(_, width)| width).sum();
    (values * n * precision.bytes()) as u64
}

/// The versions of `layout`'s input columns in `batch`.
fn versions(batch: &Batch, layout: &Layout) -> Vec<u64> {
    let version = |c: &crate::gpu::layout::InputColumn| batch.column_version(c.column);
    layout
        .inputs
        .iter()
        .map(|c| version(c).unwrap_or(0))
        .collect()
}

/// Places `layout`'s inputs for `batch` as `options` say: its shared parameters folded into
/// the kernel ([`GpuOptions::fold_shared`], the default) or read from the shared row.
fn place_inputs(layout: &mut Layout, batch: &Batch, options: GpuOptions) {
    if options.fold_shared != Some(false) {
        layout.fold_shared(batch);
    } else {
        layout.place_inputs();
    }
}

/// A process-unique generation number for a set of chunks.
fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl GpuEvaluator {
    /// Generates and validates the kernel for `batch`'s template, reading once the columns the
    /// batch shares now ([`Layout::for_batch`]). Errors (no panic) when the template has a
    /// constraint kind without a GPU kernel, when f64 is asked of an adapter without
    /// `SHADER_F64`, or when the kernel fails naga's validation. The driver builds the
    /// pipeline on the first evaluation (a driver's refusal is that call's error): a stepper's
    /// evaluator that never evaluates never waits for it.
    pub fn new(
        device: Arc<GpuDevice>,
        batch: &Batch,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        let mut layout = Layout::for_batch(batch)?;
        place_inputs(&mut layout, batch, options);
        let mut built = Self::build(device, layout, precision, options)?;
        built.built_for = Some((batch.uid(), versions(batch, &built.layout)));
        Ok(built)
    }

    /// Rebuilds the kernel when `batch` has made per-instance a column this kernel reads as one
    /// shared row, or holds other values in a column the kernel folded in as constants
    /// ([`GpuOptions::fold_shared`]) (the buffers follow on the next call); returns whether it
    /// did. The new kernel reads per instance every column written since the kernel was built
    /// (the columns a caller writes per instance, such as an environment's actions, change
    /// together: one rebuild, not one per column). A column the batch shares but the kernel
    /// reads per instance needs nothing — its row is uploaded to every instance — so a column
    /// flipping between the two forms recompiles at most once.
    pub fn rebuild_for(&mut self, batch: &Batch) -> Result<bool> {
        if self.layout.serves(batch) {
            return Ok(false);
        }
        let mut layout = Layout::for_batch(batch)?;
        // Keep per-instance what this kernel already reads per instance.
        if layout.unshared() != self.layout.unshared() {
            return Err(Error::Gpu(
                "this evaluator was built for another template layout".into(),
            ));
        }
        let written = |k: usize, c: &crate::gpu::layout::InputColumn| match &self.built_for {
            Some((uid, v)) if *uid == batch.uid() => batch.column_version(c.column) != Some(v[k]),
            _ => false,
        };
        for (k, (c, old)) in layout
            .inputs
            .iter_mut()
            .zip(&self.layout.inputs)
            .enumerate()
        {
            c.shared &= old.shared && !written(k, old);
        }
        place_inputs(&mut layout, batch, self.options);
        *self = Self::build(self.device.clone(), layout, self.precision, self.options)?;
        self.built_for = Some((batch.uid(), versions(batch, &self.layout)));
        Ok(true)
    }

    fn build(
        device: Arc<GpuDevice>,
        layout: Layout,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        if precision == Precision::F64 && !device.supports_f64 {
            return Err(Error::Gpu(format!(
                "f64 kernels need SHADER_F64, which {} does not offer",
                device.info.name
            )));
        }
        let workgroup_size = device.workgroup_size(options.workgroup_size)?;
        let output_order = options
            .output_order
            .unwrap_or_else(|| OutputOrder::for_adapter(device.info.device_type));
        let source = kernel_source(precision, &layout, workgroup_size, output_order);
        source.check()?;
        let d = &device.device;
        let kernel_layout = device.kernels.layout(
            d,
            "simbatch evaluate",
            &[
                layout_entry(0, wgpu::BufferBindingType::Uniform),
                // read-write: the stepping kernel advances the state in place.
                layout_entry(1, wgpu::BufferBindingType::Storage { read_only: false }),
                layout_entry(2, wgpu::BufferBindingType::Storage { read_only: false }),
            ],
        );
        let bind_group_layout = kernel_layout.bind_group.clone();
        let limits = &device.limits;
        let max_binding_bytes = options
            .max_binding_bytes
            .unwrap_or(u64::MAX)
            .min(limits.max_storage_buffer_binding_size)
            .min(limits.max_buffer_size);
        // Inputs: the per-instance columns, then one row of the shared ones. The outputs go
        // through slices (`DISPATCH_BYTES`), so they do not bound a chunk.
        let per_instance = (layout.varying_width * precision.bytes()) as u64;
        let shared_bytes = (layout.shared_width * precision.bytes()) as u64;
        let by_binding =
            (max_binding_bytes.saturating_sub(shared_bytes) / per_instance.max(1)) as usize;
        let output_bytes = (layout.output_width * precision.bytes()) as u64;
        if output_bytes > max_binding_bytes {
            return Err(Error::Gpu(format!(
                "one instance's outputs need {output_bytes} bytes, more than the {max_binding_bytes}-byte binding limit"
            )));
        }
        let by_dispatch =
            limits.max_compute_workgroups_per_dimension as usize * workgroup_size as usize;
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
            source: source.text,
            pipeline: None,
            kernel_layout,
            bind_group_layout,
            capacity,
            max_binding_bytes,
            options,
            workgroup_size,
            output_order,
            built_for: None,
            batch_uid: None,
            chunks: Vec::new(),
            outputs: None,
            last_upload_bytes: 0,
            last_readback_bytes: 0,
            generation: next_generation(),
        })
    }

    /// The evaluation pipeline, built by the driver on first use (or taken from the device's
    /// cache); its error as [`Error::Gpu`] when the driver refuses the kernel.
    pub(super) fn evaluation_pipeline(&mut self) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = &self.pipeline {
            return Ok(p.clone());
        }
        let d = &self.device.device;
        let pipeline = self
            .device
            .kernels
            .pipeline(
                d,
                &self.kernel_layout,
                "simbatch evaluate",
                &self.source,
                "main",
            )
            .map_err(|e| Error::Gpu(format!("kernel build failed: {e}")))?;
        self.pipeline = Some(pipeline.clone());
        Ok(pipeline)
    }

    /// Instances per chunk (per storage binding and dispatch).
    pub fn chunk_capacity(&self) -> usize {
        self.capacity
    }

    /// Number of chunks of the last batch evaluated.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Number of slices the last evaluation ran (each one dispatch into an output buffer of at
    /// most [`DISPATCH_BYTES`], read back through staging buffers of at most [`SLICE_BYTES`]);
    /// 0 before the first.
    pub fn slice_count(&self) -> usize {
        self.chunks.iter().map(|c| c.slices.len()).sum()
    }

    /// The binding-size limit in force (the adapter's, or a smaller one from [`GpuOptions`]).
    pub fn max_binding_bytes(&self) -> u64 {
        self.max_binding_bytes
    }

    /// Bytes uploaded by the last call (only columns written since the previous call move).
    pub fn last_upload_bytes(&self) -> u64 {
        self.last_upload_bytes
    }

    /// Output bytes the last evaluation read back: the status and the selected columns
    /// (`evaluate_outputs_into`), every output with the Jacobians (`evaluate_with_jacobians`).
    pub fn last_readback_bytes(&self) -> u64 {
        self.last_readback_bytes
    }

    /// The order of the evaluation kernel's output columns (`GpuOptions::output_order`, or
    /// the adapter's).
    pub fn output_order(&self) -> OutputOrder {
        self.output_order
    }

    /// Precision of the kernel.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The layout of the buffers.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether this evaluator's kernel serves `batch`'s template (the same layout; which
    /// columns are shared is handled by [`rebuild_for`](Self::rebuild_for)).
    pub(crate) fn fits(&self, batch: &Batch) -> Result<bool> {
        // The batch the buffers were made for fits by construction (a batch's template never
        // changes): its layout is built once, not on every call.
        if self.batch_uid == Some(batch.uid()) {
            return Ok(true);
        }
        Ok(Layout::new(batch.template())? == self.layout.unshared())
    }

    /// Makes the chunks' buffers for `batch` (kept while the same batch of the same size comes).
    pub(crate) fn prepare(&mut self, batch: &Batch) -> Result<()> {
        if self.batch_uid == Some(batch.uid())
            && self.chunks.iter().map(|c| c.count).sum::<usize>() == batch.len()
        {
            return Ok(());
        }
        if Layout::new(batch.template())? != self.layout.unshared() {
            return Err(Error::Gpu(
                "this evaluator was built for another template layout".into(),
            ));
        }
        let d = &self.device.device;
        let bytes = self.precision.bytes() as u64;
        self.chunks.clear();
        self.batch_uid = None;
        self.generation = next_generation();
        // Sizes come from the user: a buffer the GPU cannot allocate is a typed error, not the
        // uncaptured-error panic.
        let total = (self.layout.varying_width as u128 * batch.len() as u128
            + self.layout.shared_width as u128)
            * bytes as u128;
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut start = 0;
        while start < batch.len() {
            // A chunk's column segments are `count` instances long: its buffer holds its own
            // instances only, and a readback moves exactly the values asked for.
            let count = self.capacity.min(batch.len() - start);
            let in_size =
                (self.layout.varying_width * count + self.layout.shared_width) as u64 * bytes;
            let input = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("simbatch input"),
                size: in_size.max(4),
                // COPY_SRC: the stepping kernel's state is read back from here.
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            self.chunks.push(Chunk {
                start,
                count,
                input,
                slices: Vec::new(),
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

    /// Bytes of GPU memory the evaluator holds: every chunk's input buffer and, once it has
    /// evaluated, the output and staging buffers and the slices' launch words.
    pub fn device_bytes(&self) -> u64 {
        let bytes = self.precision.bytes() as u64;
        let inputs: u64 = self
            .chunks
            .iter()
            .map(|c| {
                (self.layout.varying_width * c.count + self.layout.shared_width) as u64 * bytes
            })
            .sum();
        let launches = self.chunks.iter().map(|c| c.slices.len()).sum::<usize>()
            * std::mem::size_of::<Launch>();
        let outputs = self.outputs.as_ref().map_or(0, |o| {
            o.output.size() + o.staging.iter().map(wgpu::Buffer::size).sum::<u64>()
        });
        inputs + launches as u64 + outputs
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
                // The chunk's values as f64: a shared column's one row, once where the kernel
                // reads it so, else repeated for every instance.
                let width = view.width;
                let (first, count) = if view.shared {
                    (0, 1)
                } else {
                    (chunk.start, chunk.count)
                };
                let range = first * width..(first + count) * width;
                // A shared column the kernel reads per instance is repeated for each of them.
                let values = if view.shared && !col.shared {
                    chunk.count * width
                } else {
                    count * width
                };
                let offset = (col.offset(self.layout.varying_width, chunk.count, 0) * bytes) as u64;
                let (input, precision) = (&chunk.input, self.precision);
                match view.data {
                    ColumnData::F64(v) => {
                        let row = v[range].iter().copied();
                        write_reals(&self.device, precision, input, offset, values, row.cycle())?
                    }
                    ColumnData::U32(v) => {
                        let row = v[range].iter().map(|x| *x as f64);
                        write_reals(&self.device, precision, input, offset, values, row.cycle())?
                    }
                }
                let payload = values * bytes;
                sent += payload as u64;
                chunk.uploaded[k] = version;
            }
        }
        Ok(sent)
    }

    /// Forgets which columns the GPU holds, so the next call uploads every column (for
    /// benchmarks of the full path, and after the device's memory was tampered with).
    pub fn invalidate(&mut self) {
        for chunk in &mut self.chunks {
            chunk.uploaded.iter_mut().for_each(|v| *v = 0);
        }
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
        self.evaluate_outputs_into(batch, Outputs::ALL, out)
    }

    /// As [`evaluate_into`](Self::evaluate_into), keeping only `outputs` (the others are left
    /// empty, as on the CPU). The kernel computes every output — its layout is per template,
    /// not per call — but only the selected columns (and the status) are copied to the staging
    /// buffer, mapped and converted on the host, which is most of an evaluation's time beside
    /// the kernel's when only u̇ and λ are read. Selected columns are the same bits whatever
    /// else is selected.
    pub fn evaluate_outputs_into(
        &mut self,
        batch: &Batch,
        outputs: Outputs,
        out: &mut Evaluation,
    ) -> Result<()> {
        let device = self.device.clone();
        let (ran, invalid) =
            within_error_scope(&device.device, wgpu::ErrorFilter::Validation, || {
                self.run_evaluation(batch, outputs, out)
            });
        if let Some(e) = invalid {
            return Err(Error::Gpu(format!("kernel run failed: {e}")));
        }
        ran?;
        out.keep_only(outputs);
        Ok(())
    }

    /// [`evaluate_outputs_into`](Self::evaluate_outputs_into) within its error scope.
    fn run_evaluation(
        &mut self,
        batch: &Batch,
        outputs: Outputs,
        out: &mut Evaluation,
    ) -> Result<()> {
        let pipeline = self.ready(batch)?;
        let segments = self.read_segments(outputs);
        out.fill_for(batch.template(), batch.len(), outputs);
        self.last_readback_bytes = 0;
        let mut start = 0;
        self.run_slices(&pipeline, &segments, |m, raw| {
            match raw {
                RawRef::F32(v) => self.convert_piece(batch, out, v, start, m),
                RawRef::F64(v) => self.convert_piece(batch, out, v, start, m),
            }
            start += m;
        })?;
        self.last_readback_bytes = readback_bytes(&segments, batch.len(), self.precision);
        self.finish_evaluation(batch, out, outputs);
        Ok(())
    }

    /// As [`evaluate`](Self::evaluate), also reading back G and k.
    pub fn evaluate_with_jacobians(&mut self, batch: &Batch) -> Result<(Evaluation, GpuJacobians)> {
        let every = [(0, self.layout.output_width)];
        let nu = self.layout.nu;
        let pipeline = self.ready(batch)?;
        let mut ev = Evaluation::default();
        ev.fill_for(batch.template(), batch.len(), Outputs::ALL);
        let n_c = self.layout.constraints.len();
        let mut jac = GpuJacobians {
            jacobian: vec![Vec::new(); n_c],
            bias_acceleration: vec![Vec::new(); n_c],
        };
        self.last_readback_bytes = 0;
        let mut start = 0;
        self.run_slices(&pipeline, &every, |count, raw| {
            let values: Vec<f64> = match raw {
                RawRef::F32(v) => v.iter().map(|x| *x as f64).collect(),
                RawRef::F64(v) => v.to_vec(),
            };
            self.convert_piece(batch, &mut ev, &values, start, count);
            start += count;
            let (n, order) = (count, self.output_order);
            for (k, c) in self.layout.constraints.iter().enumerate() {
                let column = |p: usize, w: usize| OutputColumn::new(&values, p, w, n, order);
                column(c.jacobian_prefix, c.rows * nu).extend_into(&mut jac.jacobian[k], |x| x);
                let bias = column(c.bias_acceleration(nu), c.rows);
                bias.extend_into(&mut jac.bias_acceleration[k], |x| x);
            }
        })?;
        self.last_readback_bytes = readback_bytes(&every, batch.len(), self.precision);
        self.finish_evaluation(batch, &mut ev, Outputs::ALL);
        Ok((ev, jac))
    }
}
