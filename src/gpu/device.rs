//! Opening a GPU: adapter, device and queue, with the adapter's own limits, and what the
//! device reports outside any error scope (a lost device, an uncaptured error), kept for the
//! next readback to return as an error instead of wgpu's default of panicking.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::gpu::cache::KernelCache;
use crate::gpu::pipeline_cache::{PipelineCacheFile, PipelineCacheSetting};

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
    /// Whether passes can be timed on the device's own clock (`TIMESTAMP_QUERY`, which the
    /// benchmarks' pass clock uses).
    pub supports_timestamps: bool,
    /// The kernels built on this device, reused by later evaluators and steppers.
    pub kernels: KernelCache,
    /// What the device reported outside an error scope ([`GpuDevice::fault`]).
    faults: Arc<Mutex<Faults>>,
}

/// A device's reports outside any error scope.
#[derive(Debug, Default)]
struct Faults {
    /// Why the device was lost: every later call on it fails.
    lost: Option<String>,
    /// The first uncaptured error since the last [`GpuDevice::fault`] (a kernel or buffer that
    /// failed to be made, or a command on it).
    uncaptured: Option<String>,
}

impl GpuDevice {
    /// Opens the highest-performance adapter wgpu finds (backends may be restricted with
    /// `WGPU_BACKEND`), requesting the adapter's full limits and `SHADER_F64` where offered,
    /// with the pipeline cache on disk that the environment names
    /// ([`PipelineCacheSetting::FromEnvironment`]).
    pub fn new() -> Result<Self> {
        Self::with_pipeline_cache(PipelineCacheSetting::FromEnvironment)
    }

    /// [`new`](Self::new), keeping the driver's compiled kernels where `setting` says
    /// ([`pipeline_cache`](crate::gpu::pipeline_cache)).
    pub fn with_pipeline_cache(setting: PipelineCacheSetting) -> Result<Self> {
        pollster::block_on(Self::open(setting.directory()))
    }

    async fn open(cache_dir: Option<PathBuf>) -> Result<Self> {
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
        let supports_timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let mut required_features = wgpu::Features::empty();
        if supports_f64 {
            required_features |= wgpu::Features::SHADER_F64;
        }
        if supports_timestamps {
            required_features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        if cache_dir.is_some() {
            required_features |= adapter.features() & wgpu::Features::PIPELINE_CACHE;
        }
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
        // wgpu's defaults panic on an uncaptured error and say nothing of a lost device; a
        // library must return both as errors (a device lost under one batch, seen on an H200,
        // otherwise surfaced as a panic on the next buffer write).
        let faults = Arc::new(Mutex::new(Faults::default()));
        let on_error = Arc::clone(&faults);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            log::error!("simbatch: uncaptured GPU error: {e}");
            if let Ok(mut f) = on_error.lock() {
                f.uncaptured.get_or_insert_with(|| e.to_string());
            }
        }));
        let on_lost = Arc::clone(&faults);
        device.set_device_lost_callback(move |reason, message| {
            log::error!("simbatch: GPU device lost ({reason:?}): {message}");
            if let Ok(mut f) = on_lost.lock() {
                f.lost = Some(format!("device lost ({reason:?}): {message}"));
            }
        });
        let disk = cache_dir.and_then(|dir| PipelineCacheFile::open(&device, &info, &dir));
        Ok(Self {
            device,
            queue,
            info,
            limits,
            supports_f64,
            supports_timestamps,
            kernels: KernelCache::with_disk(disk),
            faults,
        })
    }

    /// What the device reported outside any error scope since the last call, as an error: the
    /// device lost (for good: every later call says so too), or the first uncaptured error
    /// (reported once). Readbacks check it, so a call whose commands failed returns an error
    /// rather than whatever the buffers held. The record is the device's, not a call's: where
    /// several threads share one device, an uncaptured error raised by one call may be
    /// returned by another thread's next readback (each error is still returned once, and a
    /// lost device fails them all).
    pub fn fault(&self) -> Result<()> {
        let Ok(mut f) = self.faults.lock() else {
            return Err(Error::Gpu("the device's fault record is poisoned".into()));
        };
        if let Some(lost) = &f.lost {
            return Err(Error::Gpu(format!("{} on {}", lost, self.info.name)));
        }
        match f.uncaptured.take() {
            Some(e) => Err(Error::Gpu(format!("{} reported: {e}", self.info.name))),
            None => Ok(()),
        }
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
            "{} ({:?}, {:?}, driver {} {}), max storage binding {} MiB, f64 {}, {}",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            self.info.driver,
            self.info.driver_info,
            self.limits.max_storage_buffer_binding_size >> 20,
            if self.supports_f64 { "yes" } else { "no" },
            self.describe_pipeline_cache()
        )
    }

    /// Where the device keeps its pipeline cache and what it found there, for reports.
    pub fn describe_pipeline_cache(&self) -> String {
        match self.kernels.disk() {
            Some(disk) => format!(
                "pipeline cache {} ({} KiB loaded)",
                disk.path().display(),
                disk.loaded_bytes().div_ceil(1024)
            ),
            None => "no pipeline cache on disk".into(),
        }
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
