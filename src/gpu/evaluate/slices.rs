//! The evaluation's work buffers and its slices: one output buffer of at most
//! [`DISPATCH_BYTES`], into which each chunk is evaluated a slice (one dispatch) at a time, and
//! one or two staging buffers of at most [`SLICE_BYTES`] each (or
//! [`GpuOptions::staging_bytes`](crate::gpu::GpuOptions::staging_bytes)), through which a slice
//! is read back a piece at a time, pipelined over the two staging buffers. All made on the
//! first evaluation.
//!
//! Why two sizes: a dispatch must fill the device — on an H100 a slice of 32 MiB (127 000
//! rolling spheres, half of the threads the GPU holds at once) ran the kernel at 1.4e9
//! evaluations/s, one of the whole 10⁶ at 4.1e9 (2026-11-27) — while host-visible staging
//! memory is the host's, and a piece small enough to be converted while the next is copied
//! keeps the copy and the conversion overlapped.

use super::{DISPATCH_BYTES, GpuEvaluator, OutputBuffers, RawRef, SLICE_BYTES, Slice};
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::buffers::{Launch, gpu_allocation_error, map_read_after};
use crate::gpu::clock::PassClock;
use crate::gpu::layout::OutputOrder;

impl GpuEvaluator {
    /// Makes the evaluation's output buffer (at most [`DISPATCH_BYTES`]) and staging buffers (at
    /// most [`SLICE_BYTES`] or the options' `staging_bytes` each, but one instance's outputs at
    /// least; a second one when an evaluation of every output takes several pieces) and every
    /// chunk's slices, on the first evaluation of these chunks.
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
        let slice = ((DISPATCH_BYTES.min(self.max_binding_bytes) / per_instance) as usize)
            .clamp(1, largest);
        let size = (slice as u64 * per_instance).max(4);
        let staging_size = self
            .options
            .staging_bytes
            .unwrap_or(SLICE_BYTES)
            .min(self.max_binding_bytes)
            .max(per_instance)
            .min(size);
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let output = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch output"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        // A second staging buffer only when a readback may take more than one piece: several
        // slices (chunks, or slices of a chunk), or a slice larger than the staging.
        let slices: usize = self.chunks.iter().map(|c| c.count.div_ceil(slice)).sum();
        let staging_count = if slices > 1 || size > staging_size {
            2
        } else {
            1
        };
        let staging = (0..staging_count)
            .map(|_| {
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("simbatch staging"),
                    size: staging_size,
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
                size as u128 + staging_count as u128 * staging_size as u128,
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
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("simbatch evaluate"),
            timestamp_writes,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &slice.bind_group, &[]);
        pass.dispatch_workgroups(
            slice.count.div_ceil(self.workgroup_size as usize) as u32,
            1,
            1,
        );
    }

    /// Runs the kernel on each slice of each chunk in turn and reads the output `segments` back a
    /// piece at a time: `(prefix, width)` in the units of [`Layout`](crate::gpu::layout::Layout)'s
    /// output prefixes, placed in staging as the kernel places them in a slice of the piece's
    /// `m` instances — values `prefix · m .. (prefix + width) · m`, in the evaluator's
    /// [`OutputOrder`] — so that the kernel's layout reads the same in staging. Each piece's
    /// staging buffer, up to the last segment's end, in the kernel's precision, is handed to
    /// `consume` with `m` while mapped (no intermediate copy), in instance order. What lies
    /// between the segments is not this call's: `consume` reads the segments only.
    ///
    /// Pipelined over two staging buffers: piece k + 1 is submitted (with its slice's kernel,
    /// when it is the slice's first piece) before the host waits for piece k, so the device
    /// computes and copies the next piece while the host converts this one. The slices share
    /// the output buffer; the queue runs submissions in order, so slice s + 1's kernel writes
    /// it only after slice s's copies have read it.
    pub(super) fn run_slices(
        &self,
        pipeline: &wgpu::ComputePipeline,
        segments: &[(usize, usize)],
        mut consume: impl FnMut(usize, RawRef<'_>),
    ) -> Result<()> {
        let outputs = self
            .outputs
            .as_ref()
            .ok_or_else(|| Error::Gpu("evaluation buffers missing".into()))?;
        let bytes = self.precision.bytes();
        // What each piece copies: the segments themselves when value-major (each value's
        // instances are side by side, whatever column it is in); when instance-major, the
        // output columns within them, whose rows have each their own width.
        let copied: Vec<(usize, usize)> = match self.output_order {
            OutputOrder::ValueMajor => segments.to_vec(),
            OutputOrder::InstanceMajor => self
                .layout
                .output_columns()
                .into_iter()
                .filter(|&(p, w)| segments.iter().any(|&(s, sw)| s <= p && p + w <= s + sw))
                .collect(),
        };
        // Values an instance spans in staging, and the instances a piece holds.
        let end = segments.iter().map(|&(p, w)| p + w).max().unwrap_or(0);
        let staging_size = outputs.staging.first().map_or(0, wgpu::Buffer::size) as usize;
        let per_piece = (staging_size / (end * bytes).max(1)).max(1);
        // (slice, first instance in it, instances)
        let pieces: Vec<(&Slice, usize, usize)> = self
            .chunks
            .iter()
            .flat_map(|c| &c.slices)
            .flat_map(|s| {
                (0..s.count)
                    .step_by(per_piece)
                    .map(move |a| (s, a, per_piece.min(s.count - a)))
            })
            .collect();
        // Submits a piece (with its slice's kernel first when it is the slice's first) and its
        // copies into `staging`; returns the bytes to map (0: nothing selected) and the
        // submission to wait for.
        let submit = |&(slice, first, m): &(&Slice, usize, usize), staging: &wgpu::Buffer| {
            let mut encoder =
                self.device
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("simbatch evaluate"),
                    });
            if first == 0 {
                self.encode_slice(pipeline, &mut encoder, slice, None);
            }
            let piece = Piece {
                capacity: slice.count,
                first,
                count: m,
                bytes,
                order: self.output_order,
            };
            for &(prefix, width) in &copied {
                for (from, to, size) in piece.copies(prefix, width) {
                    encoder.copy_buffer_to_buffer(&outputs.output, from, staging, to, size);
                }
            }
            let read = (end * m * bytes) as u64;
            (read, self.device.queue.submit([encoder.finish()]))
        };
        let staging = |k: usize| &outputs.staging[k % outputs.staging.len()];
        let Some(first) = pieces.first() else {
            return Ok(());
        };
        let mut pending = Some(submit(first, staging(0)));
        for (k, &(_, _, m)) in pieces.iter().enumerate() {
            let Some((read, submission)) = pending.take() else {
                break; // Not reached: each piece but the last submits the next.
            };
            // The next piece's staging buffer was unmapped when its previous piece was read
            // (with one staging buffer, the next piece waits for this one to be read).
            let pipelined = outputs.staging.len() > 1;
            if let Some(next) = pieces.get(k + 1).filter(|_| pipelined) {
                pending = Some(submit(next, staging(k + 1)));
            }
            if read > 0 {
                map_read_after(
                    &self.device,
                    staging(k),
                    read,
                    submission,
                    |view| match self.precision {
                        Precision::F32 => consume(m, RawRef::F32(bytemuck::cast_slice(view))),
                        Precision::F64 => consume(m, RawRef::F64(bytemuck::cast_slice(view))),
                    },
                )?;
            }
            if let Some(next) = pieces.get(k + 1).filter(|_| !pipelined) {
                pending = Some(submit(next, staging(k + 1)));
            }
        }
        Ok(())
    }

    /// Uploads changed columns and runs the kernel on every slice in one submit, waiting for
    /// it, without reading anything back (for benchmarks of the kernel alone).
    pub fn dispatch(&mut self, batch: &Batch) -> Result<()> {
        self.dispatch_with(batch, false).map(|_| ())
    }

    /// [`dispatch`](Self::dispatch), timed on the device's clock: the seconds from the first
    /// slice's pass starting to the last one's ending ([`PassClock`]), or `None` where the
    /// device has no timestamp queries.
    pub fn dispatch_timed(&mut self, batch: &Batch) -> Result<Option<f64>> {
        self.dispatch_with(batch, true)
    }

    fn dispatch_with(&mut self, batch: &Batch, timed: bool) -> Result<Option<f64>> {
        let pipeline = self.ready(batch)?;
        let passes = self.chunks.iter().map(|c| c.slices.len()).sum::<usize>();
        let clock = match timed && passes > 0 {
            true => PassClock::new(&self.device, passes)?,
            false => None,
        };
        let mut encoder =
            self.device
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("simbatch evaluate"),
                });
        for (k, slice) in self.chunks.iter().flat_map(|c| &c.slices).enumerate() {
            let writes = clock.as_ref().map(|c| c.writes(k));
            self.encode_slice(&pipeline, &mut encoder, slice, writes);
        }
        if let Some(clock) = &clock {
            clock.resolve(&mut encoder, passes);
        }
        let submission = self.device.queue.submit([encoder.finish()]);
        match clock {
            Some(clock) => clock.read(&self.device, passes, submission).map(Some),
            None => {
                self.device
                    .device
                    .poll(wgpu::PollType::wait_indefinitely())
                    .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
                Ok(None)
            }
        }
    }
}

/// Instances `first … first + count − 1` of a slice of `capacity` instances, read back through
/// staging laid out as a slice of `count` instances.
struct Piece {
    capacity: usize,
    first: usize,
    count: usize,
    bytes: usize,
    order: OutputOrder,
}

impl Piece {
    /// The copies `(from, to, size)`, in bytes, that move the values `prefix .. prefix + width`
    /// of this piece's instances from the output buffer to staging: one for each value when
    /// value-major (each value's instances side by side, the piece's among them), one in all
    /// when the piece is the whole slice or, instance-major, when the values are one output
    /// column (its instances' rows side by side, `width` wide).
    fn copies(&self, prefix: usize, width: usize) -> Vec<(u64, u64, u64)> {
        let (c, a, m, b) = (self.capacity, self.first, self.count, self.bytes);
        let byte = |x: usize| (x * b) as u64;
        if width == 0 || m == 0 {
            return Vec::new();
        }
        match self.order {
            _ if a == 0 && m == c => vec![(byte(prefix * c), byte(prefix * m), byte(width * m))],
            OutputOrder::InstanceMajor => {
                vec![(
                    byte(prefix * c + a * width),
                    byte(prefix * m),
                    byte(width * m),
                )]
            }
            OutputOrder::ValueMajor => (prefix..prefix + width)
                .map(|v| (byte(v * c + a), byte(v * m), byte(m)))
                .collect(),
        }
    }
}
