//! The evaluation's work buffers and its slices: one output buffer and one or two staging
//! buffers of at most [`SLICE_BYTES`] each, made on the first evaluation, through which each
//! chunk is evaluated and read back a slice at a time, pipelined over the two staging buffers.

use super::{GpuEvaluator, OutputBuffers, RawRef, SLICE_BYTES, Slice};
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::buffers::{Launch, gpu_allocation_error, map_read_after};

impl GpuEvaluator {
    /// Makes the evaluation's output and staging buffers (at most [`SLICE_BYTES`] each; a second
    /// staging buffer when the chunks take several slices) and every chunk's slices, on the
    /// first evaluation of these chunks.
    pub(super) fn prepare_outputs(&mut self) -> Result<()> {
        if self.outputs.is_some() && self.chunks.iter().all(|c| !c.slices.is_empty()) {
            return Ok(());
        }
        let d = &self.device.device;
        let bytes = self.precision.bytes() as u64;
        let per_instance = (self.layout.output_width as u64 * bytes).max(1);
        let largest = self
            .chunks
            .iter()
            .map(|c| c.count)
            .max()
            .unwrap_or(1)
            .max(1);
        let slice =
            ((SLICE_BYTES.min(self.max_binding_bytes) / per_instance) as usize).clamp(1, largest);
        let size = (slice as u64 * per_instance).max(4);
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let output = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch output"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        // A second staging buffer only when some chunk takes more than one slice.
        let slices: usize = self.chunks.iter().map(|c| c.count.div_ceil(slice)).sum();
        let staging = (0..slices.min(2))
            .map(|_| {
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch staging"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
            .collect();
        for chunk in &mut self.chunks {
            chunk.slices.clear();
            let mut first = 0;
            while first < chunk.count {
                let count = slice.min(chunk.count - first);
                // The kernel's `capacity` is the chunk's input segment length; its outputs are
                // segments of this slice's length.
                let launch = Launch {
                    count: count as u32,
                    capacity: chunk.count as u32,
                    first: first as u32,
                    out_capacity: count as u32,
                    ..Launch::default()
                };
                let uniform = launch.buffer(&self.device);
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
                            resource: chunk.input.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: output.as_entire_binding(),
                        },
                    ],
                });
                chunk.slices.push(Slice { count, bind_group });
                first += count;
            }
        }
        if let Some(e) = pollster::block_on(oom.pop()) {
            self.outputs = None;
            self.chunks.iter_mut().for_each(|c| c.slices.clear());
            return Err(gpu_allocation_error(
                &self.device,
                slice,
                (1 + slices.min(2)) as u128 * size as u128,
                Some(e),
            ));
        }
        self.outputs = Some(OutputBuffers { output, staging });
        Ok(())
    }

    /// Makes the buffers (the first time), uploads the changed columns, makes the output
    /// slices and the evaluation pipeline (the first time), and returns the pipeline.
    pub(super) fn ready(&mut self, batch: &Batch) -> Result<wgpu::ComputePipeline> {
        self.rebuild_for(batch)?;
        self.prepare(batch)?;
        self.last_upload_bytes = self.upload(batch)?;
        self.prepare_outputs()?;
        self.evaluation_pipeline()
    }

    /// One evaluation pass over one slice.
    fn encode_slice(
        &self,
        pipeline: &wgpu::ComputePipeline,
        encoder: &mut wgpu::CommandEncoder,
        slice: &Slice,
    ) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("simbatch evaluate"),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &slice.bind_group, &[]);
        pass.dispatch_workgroups(
            slice.count.div_ceil(self.workgroup_size as usize) as u32,
            1,
            1,
        );
    }

    /// Runs the kernel on each slice of each chunk in turn, copies the output `segments` to a
    /// staging buffer — `(prefix, width)` in the units of [`Layout`](crate::gpu::layout::Layout)'s
    /// output prefixes: in a slice of `n` instances, values `prefix · n .. (prefix + width) · n`,
    /// copied to the same place, so that the kernel's layout reads the same in staging — and
    /// hands the staging buffer up to the last segment's end, in the kernel's precision, to
    /// `consume` while mapped (no intermediate copy), in instance order. What lies between the
    /// segments is not this call's: `consume` reads the segments only.
    ///
    /// Pipelined over two staging buffers: slice k + 1 is submitted before the host waits for
    /// slice k, so the device computes and copies the next slice while the host converts this
    /// one. The slices share the output buffer; the queue runs submissions in order, so slice
    /// k + 1's kernel writes it only after slice k's copies have read it.
    pub(super) fn run_slices(
        &self,
        pipeline: &wgpu::ComputePipeline,
        segments: &[(usize, usize)],
        mut consume: impl FnMut(&Slice, RawRef<'_>),
    ) -> Result<()> {
        let outputs = self
            .outputs
            .as_ref()
            .ok_or_else(|| Error::Gpu("evaluation buffers missing".into()))?;
        let bytes = self.precision.bytes();
        // Submits slice `slice`'s kernel and copies into `staging`; returns the bytes to map
        // (0: nothing selected) and the submission to wait for.
        let submit = |slice: &Slice, staging: &wgpu::Buffer| {
            let per_value = (slice.count * bytes) as u64;
            let mut encoder =
                self.device
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("simbatch evaluate"),
                    });
            self.encode_slice(pipeline, &mut encoder, slice);
            let mut read = 0;
            for &(prefix, width) in segments {
                let (at, size) = (prefix as u64 * per_value, width as u64 * per_value);
                if size > 0 {
                    encoder.copy_buffer_to_buffer(&outputs.output, at, staging, at, size);
                    read = read.max(at + size);
                }
            }
            (read, self.device.queue.submit([encoder.finish()]))
        };
        let slices: Vec<&Slice> = self.chunks.iter().flat_map(|c| &c.slices).collect();
        let staging = |k: usize| &outputs.staging[k % outputs.staging.len()];
        let Some(first) = slices.first() else {
            return Ok(());
        };
        let mut pending = Some(submit(first, staging(0)));
        for (k, slice) in slices.iter().enumerate() {
            let Some((read, submission)) = pending.take() else {
                break; // Not reached: each slice but the last submits the next.
            };
            // The next slice's staging buffer was unmapped when its previous slice was read.
            if let Some(next) = slices.get(k + 1) {
                pending = Some(submit(next, staging(k + 1)));
            }
            if read == 0 {
                continue;
            }
            map_read_after(
                &self.device,
                staging(k),
                read,
                submission,
                |view| match self.precision {
                    Precision::F32 => consume(slice, RawRef::F32(bytemuck::cast_slice(view))),
                    Precision::F64 => consume(slice, RawRef::F64(bytemuck::cast_slice(view))),
                },
            )?;
        }
        Ok(())
    }

    /// Uploads changed columns and runs the kernel on every slice in one submit, waiting for
    /// it, without reading anything back (for benchmarks of the kernel alone).
    pub fn dispatch(&mut self, batch: &Batch) -> Result<()> {
        let pipeline = self.ready(batch)?;
        let mut encoder =
            self.device
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("simbatch evaluate"),
                });
        for slice in self.chunks.iter().flat_map(|c| &c.slices) {
            self.encode_slice(&pipeline, &mut encoder, slice);
        }
        self.device.queue.submit([encoder.finish()]);
        self.device
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
        Ok(())
    }
}
