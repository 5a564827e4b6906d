//! Opening a GPU: adapter, device and queue, with the adapter's own limits.

use crate::error::{Error, Result};
use crate::gpu::cache::KernelCache;

/// An opened GPU device.
#[derive(Debug)]
pub struct GpuDevice {
    /// The wgpu device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Adapter name, backend, driver.
    pub info: wgpu::AdapterInfo,
    /// The limits granted: the adapter's own (not wgpu's conservative defaults).
    pub limits: wgpu::Limits,
    /// Whether f64 kernels are available (`SHADER_F64`).
    pub supports_f64: bool,
    /// The kernels built on this device, reused by later evaluators and steppers.
    pub kernels: KernelCache,
}

impl GpuDevice {
    /// Opens the highest-performance adapter wgpu finds (backends may be restricted with
    /// `WGPU_BACKEND`), requesting the adapter's full limits and `SHADER_F64` where offered.
    pub fn new() -> Result<Self> {
        pollster::block_on(Self::open())
    }

    async fn open() -> Result<Self> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::NoGpuAdapter(e.to_string()))?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let supports_f64 = adapter.features().contains(wgpu::Features::SHADER_F64);
        let required_features = if supports_f64 {
            wgpu::Features::SHADER_F64
        } else {
            wgpu::Features::empty()
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("simbatch"),
                required_features,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| Error::NoGpuAdapter(format!("{} ({:?}): {e}", info.name, info.backend)))?;
        Ok(Self {
            device,
            queue,
            info,
            limits,
            supports_f64,
            kernels: KernelCache::default(),
        })
    }

    /// Largest workgroup the adapter runs: its invocation limit and its x-size limit.
    pub fn max_workgroup_size(&self) -> u32 {
        self.limits
            .max_compute_invocations_per_workgroup
            .min(self.limits.max_compute_workgroup_size_x)
            .max(1)
    }

    /// The workgroup size the kernels use on this adapter when none is asked for: 64
    /// invocations, rounded up to a whole number of the adapter's widest subgroups, within its
    /// limits. Each invocation is one independent instance, so the size only decides how the
    /// instances fill the hardware: a workgroup that is not a whole number of subgroups leaves
    /// lanes idle, and 64 is the smallest size that holds whole subgroups on the common
    /// adapters (NVIDIA 32, AMD 32 or 64, Intel 8–32, Apple 32, lavapipe 8); Qualcomm's 128
    /// rounds it up. On lavapipe 64, 128 and 256 measured alike and 16 slower (README).
    pub fn default_workgroup_size(&self) -> u32 {
        default_workgroup_size(self.info.subgroup_max_size, self.max_workgroup_size())
    }

    /// The workgroup size for `requested` ([`GpuOptions::workgroup_size`](crate::gpu::GpuOptions)):
    /// the adapter's default when `None`, else the request when it is between 1 and
    /// [`max_workgroup_size`](Self::max_workgroup_size), and an error naming the accepted range
    /// otherwise.
    pub fn workgroup_size(&self, requested: Option<u32>) -> Result<u32> {
        let max = self.max_workgroup_size();
        match requested {
            None => Ok(self.default_workgroup_size()),
            Some(n) if (1..=max).contains(&n) => Ok(n),
            Some(n) => Err(Error::InvalidOption {
                option: "GpuOptions::workgroup_size",
                value: n.to_string(),
                accepted: format!("1 to {max} on {}", self.info.name),
            }),
        }
    }

    /// One line describing the adapter, for logs and reports.
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?}, driver {} {}), max storage binding {} MiB, f64 {}",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            self.info.driver,
            self.info.driver_info,
            self.limits.max_storage_buffer_binding_size >> 20,
            if self.supports_f64 { "yes" } else { "no" }
        )
    }
}

/// 64 rounded up to a multiple of `subgroup` (when it is a plausible subgroup width, 1 to
/// 128), at most `max`.
pub(crate) fn default_workgroup_size(subgroup: u32, max: u32) -> u32 {
    const BASE: u32 = 64;
    let size = if (1..=128).contains(&subgroup) {
        BASE.div_ceil(subgroup) * subgroup
    } else {
        BASE
    };
    size.min(max).max(1)
}

#[cfg(test)]
mod tests {
    use super::default_workgroup_size;

    #[test]
    fn default_workgroup_holds_whole_subgroups_within_the_limit() {
        // NVIDIA, AMD wave64, lavapipe, Qualcomm, an adapter reporting no size.
        assert_eq!(default_workgroup_size(32, 1024), 64);
        assert_eq!(default_workgroup_size(64, 1024), 64);
        assert_eq!(default_workgroup_size(8, 256), 64);
        assert_eq!(default_workgroup_size(128, 1024), 128);
        assert_eq!(default_workgroup_size(48, 1024), 96);
        assert_eq!(default_workgroup_size(0, 1024), 64);
        assert_eq!(default_workgroup_size(u32::MAX, 1024), 64);
        // The adapter's limit wins.
        assert_eq!(default_workgroup_size(32, 32), 32);
        assert_eq!(default_workgroup_size(128, 64), 64);
    }
}
