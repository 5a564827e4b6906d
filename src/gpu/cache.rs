//! Kernels built on a device, kept for reuse.
//!
//! A kernel is generated per template, and building one is the driver's slow part (about a
//! second on lavapipe for a stepping kernel, more for large templates). A second evaluator or
//! stepper for a template already seen on the device — a new environment, the next shard of a
//! study, a kernel rebuilt back to a layout it had before — takes the pipeline built the first
//! time, keyed by its whole WGSL text and entry point. Bind group layouts are made once per
//! kind on the device, so every pipeline of a kind and every bind group made for it share one
//! layout object. The cache keeps the [`MAX_KERNELS`] most recently used pipelines.
//!
//! Between processes the driver's compiled code is kept on disk
//! ([`pipeline_cache`](crate::gpu::pipeline_cache)): every pipeline is built through the
//! device's pipeline cache when it has one, and the cache is written after builds.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::gpu::pipeline_cache::PipelineCacheFile;

/// Most pipelines a device keeps.
pub const MAX_KERNELS: usize = 64;

/// The runtime checks wgpu puts into the kernels: every bounds check (an index out of range
/// reads a clamped element, never another buffer), but no loop counter of its own.
///
/// By default naga gives every loop a hidden 64-bit iteration counter and a second exit on it,
/// so that a loop without an end cannot be undefined behaviour for the driver. In these
/// kernels that counter sits in every small `for k < NU` loop of the dynamics, and NVIDIA's
/// compiler then did not unroll them, leaving the arrays they index in memory rather than
/// registers: on an H100 (f32, 10⁶ instances, 256 steps a call) the RK4 stepping kernel ran
/// 1.8–1.9e8 instance-steps/s with the counters and 1.4–2.1e9 without (5.4e9 at 4 096 steps
/// a call), the evaluation kernel alone 1.9–5.9e8 and 5.8e8–1.2e9 evaluations/s
/// (2026-11-26). On lavapipe throughput is unchanged and the kernels compile about a quarter
/// faster.
///
/// What `force_loop_bounding: false` requires holds: every loop in the kernels ends by its
/// own bound — a constant trip count, or a counter against a fixed limit (`launch.steps`, the
/// projection's and the eigen fallback's iteration limits, the contact laws' rounds, the event
/// kernels' loop budget) — and a constraint's or law's own WGSL must keep to the same rule
/// ([`WgslConstraint`](crate::model::WgslConstraint)).
const KERNEL_CHECKS: wgpu::ShaderRuntimeChecks = {
    let mut checks = wgpu::ShaderRuntimeChecks::checked();
    checks.force_loop_bounding = false;
    checks
};

/// One kind of kernel's bindings: its bind group layout and the pipeline layout over it.
#[derive(Debug, Clone)]
pub(crate) struct KernelLayout {
    pub(crate) bind_group: wgpu::BindGroupLayout,
    pub(crate) pipeline: wgpu::PipelineLayout,
}

#[derive(Debug, Default)]
struct Inner {
    layouts: Vec<(&'static str, KernelLayout)>,
    /// (entry point, WGSL text) → pipeline, most recently used last.
    kernels: VecDeque<((&'static str, String), wgpu::ComputePipeline)>,
    built: u64,
}

/// The kernels and layouts built on one device.
#[derive(Debug, Default)]
pub struct KernelCache {
    inner: Mutex<Inner>,
    /// The device's pipeline cache on disk, where it has one.
    disk: Option<PipelineCacheFile>,
}

impl KernelCache {
    /// An empty cache whose pipelines are built through `disk` when given.
    pub(crate) fn with_disk(disk: Option<PipelineCacheFile>) -> Self {
        Self {
            inner: Mutex::default(),
            disk,
        }
    }

    /// The pipeline cache kept on disk for this device, if any
    /// ([`pipeline_cache`](crate::gpu::pipeline_cache)).
    pub fn disk(&self) -> Option<&PipelineCacheFile> {
        self.disk.as_ref()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the cache consistent (entries are
        // pushed whole), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The layout of kernel kind `name` (bindings `entries`), made on first use.
    pub(crate) fn layout(
        &self,
        d: &wgpu::Device,
        name: &'static str,
        entries: &[wgpu::BindGroupLayoutEntry],
    ) -> KernelLayout {
        let mut inner = self.lock();
        if let Some((_, l)) = inner.layouts.iter().find(|(n, _)| *n == name) {
            return l.clone();
        }
        let bind_group = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(name),
            entries,
        });
        let pipeline = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(name),
            bind_group_layouts: &[Some(&bind_group)],
            immediate_size: 0,
        });
        let l = KernelLayout {
            bind_group,
            pipeline,
        };
        inner.layouts.push((name, l.clone()));
        l
    }

    /// The pipeline of `source` at `entry` over `layout`, built on first use; the driver's
    /// validation error as text when it cannot be built (nothing is kept then).
    pub(crate) fn pipeline(
        &self,
        d: &wgpu::Device,
        layout: &KernelLayout,
        label: &'static str,
        source: &str,
        entry: &'static str,
    ) -> std::result::Result<wgpu::ComputePipeline, String> {
        {
            let mut inner = self.lock();
            let found = inner
                .kernels
                .iter()
                .position(|((e, text), _)| *e == entry && text == source);
            if let Some(hit) = found.and_then(|k| inner.kernels.remove(k)) {
                let pipeline = hit.1.clone();
                inner.kernels.push_back(hit);
                return Ok(pipeline);
            }
        }
        // Built outside the lock: another thread may build the same kernel meanwhile, which
        // costs time but not correctness (the first one kept wins).
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let descriptor = wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        };
        let started = std::time::Instant::now();
        // SAFETY: the kernels keep every check but naga's loop counters, and every loop in
        // them ends by its own bound (KERNEL_CHECKS).
        let module = unsafe { d.create_shader_module_trusted(descriptor, KERNEL_CHECKS) };
        let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: Some(&layout.pipeline),
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: self.disk.as_ref().map(PipelineCacheFile::cache),
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(e.to_string());
        }
        if let Some(disk) = &self.disk {
            disk.built(started.elapsed());
        }
        let mut inner = self.lock();
        inner.built += 1;
        if inner.kernels.len() >= MAX_KERNELS {
            inner.kernels.pop_front();
        }
        inner
            .kernels
            .push_back(((entry, source.to_string()), pipeline.clone()));
        Ok(pipeline)
    }

    /// Pipelines built on this device so far (a cache hit builds none).
    pub fn built(&self) -> u64 {
        self.lock().built
    }

    /// Pipelines kept now (at most [`MAX_KERNELS`]).
    pub fn len(&self) -> usize {
        self.lock().kernels.len()
    }

    /// Whether no pipeline is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
