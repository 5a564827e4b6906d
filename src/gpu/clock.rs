//! Kernel time on the device's own clock (timestamp queries), for benchmarks.
//!
//! A host timer around a submission also counts the submission, the wait for it and the
//! driver's scheduling — on an H100 a fraction of a millisecond, as long as a whole evaluation
//! of 10⁵ instances. What a kernel's share of memory bandwidth is measured against is the time
//! the device spent in its passes: each pass writes a timestamp when it starts and one when it
//! ends, and [`PassClock::read`] returns the span from the first start to the last end (the
//! barriers between passes included: they are the kernel's cost at that slicing).
//!
//! Only where the adapter offers `TIMESTAMP_QUERY` ([`GpuDevice::supports_timestamps`]); the
//! library's own evaluations and steps never ask for it.

use crate::error::{Error, Result};
use crate::gpu::GpuDevice;
use crate::gpu::buffers::map_read_after;

/// Timestamps for up to `passes` compute passes of one submission.
pub struct PassClock {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readable: wgpu::Buffer,
    passes: u32,
}

impl PassClock {
    /// A clock for `passes` passes, or `None` where the device has no timestamp queries.
    pub fn new(device: &GpuDevice, passes: usize) -> Result<Option<Self>> {
        if !device.supports_timestamps {
            return Ok(None);
        }
        // Two queries a pass; a query set holds at most 4 096 (wgpu's QUERY_SET_MAX_QUERIES).
        let passes = u32::try_from(passes)
            .ok()
            .filter(|p| (1..=2048).contains(p))
            .ok_or_else(|| Error::Gpu(format!("{passes} passes to time: 1 to 2048 accepted")))?;
        let d = &device.device;
        let queries = d.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("simbatch pass clock"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * passes,
        });
        let size = 2 * passes as u64 * 8;
        let resolved = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch pass clock"),
            size,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readable = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch pass clock"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(Some(Self {
            queries,
            resolved,
            readable,
            passes,
        }))
    }

    /// The timestamp writes of pass `k` (0-based, below the `passes` the clock was made for).
    pub fn writes(&self, k: usize) -> wgpu::ComputePassTimestampWrites<'_> {
        let k = (k as u32).min(self.passes - 1);
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(2 * k),
            end_of_pass_write_index: Some(2 * k + 1),
        }
    }

    /// Encodes the copy of the timestamps of the first `passes` passes to where
    /// [`read`](Self::read) finds them; after the passes, in the same encoder.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder, passes: usize) {
        let queries = 2 * (passes as u32).clamp(1, self.passes);
        encoder.resolve_query_set(&self.queries, 0..queries, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readable, 0, queries as u64 * 8);
    }

    /// Seconds from the first pass's start to the last one's end, of the `passes` passes
    /// resolved in `submission`.
    pub fn read(
        &self,
        device: &GpuDevice,
        passes: usize,
        submission: wgpu::SubmissionIndex,
    ) -> Result<f64> {
        let queries = 2 * (passes as u32).clamp(1, self.passes) as u64;
        let ticks: Vec<u64> =
            map_read_after(device, &self.readable, queries * 8, submission, |v| {
                v.chunks_exact(8)
                    .map(|b| u64::from_ne_bytes(<[u8; 8]>::try_from(b).unwrap_or_default()))
                    .collect()
            })?;
        let start = ticks.iter().step_by(2).min().copied().unwrap_or(0);
        let end = ticks.iter().skip(1).step_by(2).max().copied().unwrap_or(0);
        let period = device.queue.get_timestamp_period() as f64 * 1e-9;
        Ok(end.saturating_sub(start) as f64 * period)
    }
}
