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
