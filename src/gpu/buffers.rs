//! Helpers every GPU kernel host shares: mapped readback, bind-group layout entries, and the
//! typed error for buffers the device cannot make.

use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::device::GpuDevice;

/// Largest staging buffer a kernel host makes, in bytes (a readback of several rounds goes
/// through two, in alternation).
pub const STAGING_BYTES: u64 = 4 << 20;
/// A readback of at most this many bytes takes one round through one staging buffer of its
/// own size: each round is a submit, a map and a wait for the device (and about 30 host
/// allocations of wgpu's), so a readback of up to 1 MiB — an environment step, a batch of up to
/// about ten thousand balls — takes one.
const MIN_STAGING_BYTES: u64 = 1 << 20;

/// Most rounds a readback takes below the [`STAGING_BYTES`] cap (past it, one more per 4 MiB).
pub const STAGING_ROUNDS: u64 = 8;

/// The staging buffers a kernel host reads back through (MAP_READ | COPY_DST): one, for a
/// readback that fits it, or two of equal size, so that while the host converts one round's
/// piece the device copies the next into the other ([`read_back_into`]). Sized by
/// [`Staging::sizes`].
#[derive(Debug)]
pub(crate) struct Staging {
    buffers: Vec<wgpu::Buffer>,
}

impl Staging {
    /// Staging for readbacks of up to `readback` bytes, labelled `label`.
    pub(crate) fn new(device: &wgpu::Device, label: &'static str, readback: u64) -> Self {
        let (size, count) = Self::sizes(readback);
        let buffers = (0..count)
            .map(|_| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
            .collect();
        Self { buffers }
    }

    /// The size of each staging buffer for a readback of `readback` bytes, and how many: one
    /// of the readback's own size up to [`MIN_STAGING_BYTES`]; above, two, each an eighth of
    /// it ([`STAGING_ROUNDS`] rounds) but at least half of [`MIN_STAGING_BYTES`] and at most
    /// [`STAGING_BYTES`]. Up to 16 MiB of readback the pair holds what the one buffer of a
    /// quarter of it held before (issue 17: an f32 stepped rolling ball is 96 B of state and
    /// carry an instance, 120 B with its staging, from N ≈ 44 000 up); above, at most 8 MiB in
    /// all, 4 MiB more than before (4 B an instance at 10⁶ rolling balls). A multiple of 8, so
    /// no f64 is split between rounds.
    pub(crate) fn sizes(readback: u64) -> (u64, usize) {
        if readback <= MIN_STAGING_BYTES {
            return (readback.max(8).next_multiple_of(8), 1);
        }
        let size = readback
            .div_ceil(STAGING_ROUNDS)
            .clamp(MIN_STAGING_BYTES / 2, STAGING_BYTES)
            .next_multiple_of(8);
        (size, 2)
    }

    /// Bytes the staging buffers hold, together.
    pub(crate) fn size(&self) -> u64 {
        self.buffers.iter().map(wgpu::Buffer::size).sum()
    }
}

/// The kernels' `Launch` uniform (twin of `shaders/evaluate.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Launch {
    /// Instances the dispatch runs.
    pub count: u32,
    /// The chunk's instance count (the length of its input segments).
    pub capacity: u32,
    /// Stepping: trial steps per dispatch.
    pub steps: u32,
    /// Stepping: integrator | (Baumgarte mode << 8).
    pub mode: u32,
    /// Evaluation: the slice's first instance in the chunk.
    pub first: u32,
    /// Evaluation: the length of the output segments (the slice's instance count).
    pub out_capacity: u32,
    /// Uniform structs round up to 16 bytes.
    pub pad: [u32; 2],
}

impl Launch {
    /// A uniform buffer holding this launch.
    pub(crate) fn buffer(&self, device: &GpuDevice) -> wgpu::Buffer {
        let buffer = device.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch launch"),
            size: std::mem::size_of::<Self>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        device
            .queue
            .write_buffer(&buffer, 0, bytemuck::bytes_of(self));
        buffer
    }
}

/// Maps the first `size` bytes of a staging buffer once `submission` (the one that fills it)
/// is done — not waiting for work submitted after it, which keeps the device busy while the
/// host reads — hands them to `f` while mapped, and unmaps.
pub(crate) fn map_read_after<R>(
    device: &GpuDevice,
    buffer: &wgpu::Buffer,
    size: u64,
    submission: wgpu::SubmissionIndex,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R> {
    let wait = wgpu::PollType::Wait {
        submission_index: Some(submission),
        timeout: None,
    };
    let slice = buffer.slice(0..size);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device
        .device
        .poll(wait)
        .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
    // A lost device fails the mapping: say why.
    let failed = |what: String| device.fault().err().unwrap_or(Error::Gpu(what));
    rx.recv()
        .map_err(|e| failed(format!("readback lost: {e}")))?
        .map_err(|e| failed(format!("readback failed: {e}")))?;
    let view = slice
        .get_mapped_range()
        .map_err(|e| Error::Gpu(format!("readback failed: {e}")))?;
    let out = f(&view);
    drop(view);
    buffer.unmap();
    // A command of the call that failed outside an error scope, or a lost device: the
    // buffer's bytes are not the call's answer.
    device.fault()?;
    Ok(out)
}

/// Reads `ranges` (buffer, byte offset, byte size) back to the host, in order, through
/// `staging`, as many rounds as its size needs: work buffers stay bounded whatever the batch
/// size. With two staging buffers the rounds overlap: each round's copy is submitted before
/// the host maps and converts the round before, from the other buffer, so the device copies
/// while the host converts (with one, each round waits for the one before). `convert` appends
/// each mapped piece to `out` as the caller's values, in order; `out` is cleared first and
/// keeps its capacity, so a caller that passes the same vector every call allocates nothing
/// once it has grown.
pub(crate) fn read_back_into<T>(
    device: &GpuDevice,
    staging: &Staging,
    ranges: &[(&wgpu::Buffer, u64, u64)],
    out: &mut Vec<T>,
    mut convert: impl FnMut(&[u8], &mut Vec<T>),
) -> Result<()> {
    // Copies keep 4-byte alignment: reals are 4 or 8 bytes and every offset a multiple of them.
    let buffers = &staging.buffers;
    out.clear();
    let mut pending: Vec<(&wgpu::Buffer, u64, u64)> = ranges.iter().rev().copied().collect();
    // The round whose copy was submitted and not yet read: its buffer, bytes and submission.
    let mut in_flight: Option<(usize, u64, wgpu::SubmissionIndex)> = None;
    let mut read = |(b, used, submission): (usize, u64, wgpu::SubmissionIndex),
                    out: &mut Vec<T>| {
        map_read_after(device, &buffers[b], used, submission, |view| {
            convert(view, out)
        })
    };
    let mut next = 0;
    while !pending.is_empty() {
        let Some(target) = buffers.get(next) else {
            return Err(Error::Gpu("readback without a staging buffer".into()));
        };
        // The buffer about to be filled must have been read (with one buffer, always).
        if let Some(round) = in_flight.take_if(|(b, _, _)| *b == next) {
            read(round, out)?;
        }
        let mut encoder = device
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("simbatch readback"),
            });
        let room = target.size();
        let mut used = 0;
        while let Some((buffer, offset, size)) = pending.pop() {
            let take = size.min(room - used);
            if take > 0 {
                encoder.copy_buffer_to_buffer(buffer, offset, target, used, take);
                used += take;
            }
            if take < size {
                pending.push((buffer, offset + take, size - take));
                break;
            }
        }
        let submission = device.queue.submit([encoder.finish()]);
        // While the device copies this round, the host reads the one before.
        if let Some(round) = in_flight.take() {
            read(round, out)?;
        }
        if used > 0 {
            in_flight = Some((next, used, submission));
        }
        next = (next + 1) % buffers.len();
    }
    if let Some(round) = in_flight {
        read(round, out)?;
    }
    Ok(())
}

/// Writes `count` reals into `buffer` at byte `offset`, in `precision`, converting each value of
/// `values` (zeros past its end) straight into wgpu's staging memory
/// (`Queue::write_buffer_with`): no host-side buffer is filled first. The copy runs at the
/// queue's next submit.
pub(crate) fn write_reals(
    device: &GpuDevice,
    precision: Precision,
    buffer: &wgpu::Buffer,
    offset: u64,
    count: usize,
    values: impl Iterator<Item = f64>,
) -> Result<()> {
    let Some(size) = wgpu::BufferSize::new((count * precision.bytes()) as u64) else {
        return Ok(());
    };
    // `None`: a validation error, reported through the caller's error scope as well.
    let mut view = device
        .queue
        .write_buffer_with(buffer, offset, size)
        .ok_or_else(|| match device.fault() {
            Err(fault) => fault,
            Ok(()) => Error::Gpu(format!("could not write {size} bytes at {offset}")),
        })?;
    let values = values.chain(std::iter::repeat(0.0)).take(count);
    match precision {
        Precision::F32 => {
            let (reals, _) = view.slice(..).into_chunks::<4>();
            reals.write_iter(values.map(|x| (x as f32).to_ne_bytes()));
        }
        Precision::F64 => {
            let (reals, _) = view.slice(..).into_chunks::<8>();
            reals.write_iter(values.map(f64::to_ne_bytes));
        }
    }
    Ok(())
}

/// Submits one round of a stepping kernel: per `(bind group, instances)` of `groups`, a
/// compute pass of `pipeline` that dispatches those instances `dispatches` times in a row
/// (`workgroup` invocations per workgroup); one submit for all.
pub(crate) fn submit_round<'a>(
    device: &GpuDevice,
    label: &str,
    pipeline: &wgpu::ComputePipeline,
    groups: impl Iterator<Item = (&'a wgpu::BindGroup, usize)>,
    dispatches: usize,
    workgroup: usize,
) {
    let mut encoder = device
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
    for (bind_group, count) in groups {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, bind_group, &[]);
        for _ in 0..dispatches {
            pass.dispatch_workgroups(count.div_ceil(workgroup) as u32, 1, 1);
        }
    }
    device.queue.submit([encoder.finish()]);
}

/// Binding `binding` of a bind group: the whole of `buffer`.
pub(crate) fn bind_entry(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: buffer.as_entire_binding(),
    }
}

/// A compute-stage buffer binding of a bind group layout.
pub(crate) fn layout_entry(
    binding: u32,
    ty: wgpu::BufferBindingType,
) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// Runs `f` within a wgpu error scope of `filter` and pops the scope whatever `f` returns, so
/// an early error never leaves the scope on the device's stack (where it would capture the
/// errors of later, unrelated calls): `f`'s result, and what the scope caught.
pub(crate) fn within_error_scope<T>(
    device: &wgpu::Device,
    filter: wgpu::ErrorFilter,
    f: impl FnOnce() -> Result<T>,
) -> (Result<T>, Option<wgpu::Error>) {
    let scope = device.push_error_scope(filter);
    let result = f();
    (result, pollster::block_on(scope.pop()))
}

/// The typed error for GPU buffers of `instances` instances (`bytes` in all) that could not be
/// made: out of memory, or past a limit of the adapter.
pub(crate) fn gpu_allocation_error(
    device: &GpuDevice,
    instances: usize,
    bytes: u128,
    error: Option<wgpu::Error>,
) -> Error {
    match error {
        Some(wgpu::Error::OutOfMemory { .. }) | None => Error::OutOfMemory {
            what: format!("GPU buffers on {}", device.info.name),
            count: format!("{instances} instances"),
            bytes,
            where_: "GPU",
        },
        Some(e) => Error::Gpu(format!(
            "buffers for {instances} instances could not be made on {}: {e}",
            device.info.name
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{MIN_STAGING_BYTES, STAGING_BYTES, Staging};

    #[test]
    fn staging_is_one_buffer_for_small_readbacks_and_two_bounded_ones_above() {
        const MIB: u64 = 1 << 20;
        // Up to 1 MiB: one buffer of the readback's own size (a multiple of 8), one round.
        assert_eq!(Staging::sizes(0), (8, 1));
        assert_eq!(Staging::sizes(12), (16, 1));
        assert_eq!(Staging::sizes(MIN_STAGING_BYTES), (MIB, 1));
        for readback in [MIB + 8, 3 * MIB, 9_600_000, 30 * MIB, 92_000_000, 1 << 40] {
            let (size, count) = Staging::sizes(readback);
            assert_eq!(count, 2, "{readback}");
            assert_eq!(size % 8, 0, "{readback}");
            assert!(
                (MIB / 2..=STAGING_BYTES).contains(&size),
                "{readback}: {size}"
            );
            // At most eight rounds below the cap; up to 16 MiB of readback the pair holds no
            // more than the one buffer of a quarter of it (at least 1 MiB) held before it, and
            // at most 8 MiB above.
            assert!(
                size >= readback.div_ceil(8).min(STAGING_BYTES),
                "{readback}: {size}"
            );
            let before = readback.div_ceil(4).clamp(MIB, STAGING_BYTES);
            let most = if readback <= 16 * MIB {
                before + 8
            } else {
                2 * STAGING_BYTES
            };
            assert!(2 * size <= most, "{readback}: 2 × {size} against {most}");
        }
        // Past 32 MiB of readback, 4 MiB each.
        assert_eq!(Staging::sizes(92_000_000), (STAGING_BYTES, 2));
    }
}
