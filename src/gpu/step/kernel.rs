//! The stepping kernel's pipelines and per-chunk buffers, and what the host tells it: the
//! integrator and drift-control codes, the step parameters, the carry columns.

use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::buffers::{Launch, bind_entry, layout_entry};
use crate::gpu::cache::KernelLayout;
use crate::gpu::device::GpuDevice;
use crate::gpu::evaluate::Chunk;
use crate::gpu::layout::Layout;
use crate::gpu::layout::carry::CARRY_COLUMNS;
use crate::gpu::shader::{INTEGRATOR_EULER, INTEGRATOR_RK4, INTEGRATOR_RKM};
use crate::step::{Integrator, Stabilization, StepOptions};

/// Largest number of trial steps in one dispatch; longer runs are several dispatches (the state
/// stays on the GPU in between). Short dispatches keep clear of driver watchdogs, and of
/// lavapipe's LLVM JIT, whose stack grows with every iteration of a long in-kernel loop over the
/// inlined solve until it overflows (seen at 35 RK4 substeps in f32); reloading the state every
/// few steps costs about 1% of an RK4 dispatch. RKM (five solves a trial) and projection (up to
/// 27 more) take fewer.
pub(super) fn trials_per_dispatch(options: &StepOptions) -> usize {
    let heavy = matches!(options.integrator, Integrator::RungeKuttaMerson { .. })
        || matches!(options.stabilization, Stabilization::Projection { .. });
    if heavy { 8 } else { 16 }
}

/// Most dispatches per chunk in one submit; a call that needs more submits again.
pub(super) const MAX_DISPATCHES_PER_SUBMIT: usize = 1024;

/// Largest step count per kernel call: the f32 carry columns count exactly up to 2²⁴.
pub(super) const MAX_STEPS_PER_CALL: usize = 1 << 23;

/// The integrator code of the kernel for RKM (`INTEGRATOR` in `shaders/step.wgsl`).
pub(super) const RKM: u32 = INTEGRATOR_RKM;

/// The options as the kernel reads them.
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelSettings {
    /// 0 semi-implicit Euler, 1 RK4, [`RKM`].
    pub integrator: u32,
    /// The fixed step (0 with RKM).
    pub fixed_step: f64,
    pub accuracy: f64,
    pub max_step: f64,
    /// 1: Baumgarte terms on every row; 2: none.
    pub baumgarte: u32,
    pub projection: bool,
    pub tolerance: f64,
}

impl KernelSettings {
    pub(super) fn new(options: &StepOptions) -> Self {
        let (integrator, fixed_step, accuracy, max_step) = match options.integrator {
            Integrator::SemiImplicitEuler { step } => (INTEGRATOR_EULER, step, 0.0, step),
            Integrator::Rk4 { step } => (INTEGRATOR_RK4, step, 0.0, step),
            Integrator::RungeKuttaMerson { accuracy, max_step } => (RKM, 0.0, accuracy, max_step),
        };
        let (baumgarte, projection, tolerance) = match options.stabilization {
            Stabilization::None => (2u32, false, 0.0),
            Stabilization::Baumgarte => (1u32, false, 0.0),
            Stabilization::Projection { tolerance } => (2u32, true, tolerance),
        };
        Self {
            integrator,
            fixed_step,
            accuracy,
            max_step,
            baumgarte,
            projection,
            tolerance,
        }
    }

    /// The launch word: integrator in the low byte, Baumgarte mode in the next.
    pub(super) fn mode(&self) -> u32 {
        self.integrator | (self.baumgarte << 8)
    }
}

/// `StepParams` of `shaders/step.wgsl` in the kernel's precision.
pub(super) fn params_bytes(
    precision: Precision,
    reals: [f64; 7],
    target: u32,
    goal: u32,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    for x in reals {
        match precision {
            Precision::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            Precision::F64 => out.extend_from_slice(&x.to_le_bytes()),
        }
    }
    out.extend_from_slice(&target.to_le_bytes());
    out.extend_from_slice(&goal.to_le_bytes());
    // Storage structs round up to their alignment (8 bytes for f64 members).
    out.resize(out.len().next_multiple_of(8), 0);
    out
}

/// The stepping pipelines of a stepper: one per (integrator, projection) pair, built on first
/// use from constants prepended to the source, so each carries only the code it runs (and taken
/// from the device's kernel cache when another stepper built the same one).
pub(super) struct StepPipeline {
    /// (integrator code, projection) → pipeline.
    pipelines: Vec<((u32, bool), wgpu::ComputePipeline)>,
    kernel_layout: KernelLayout,
    pub(super) layout: wgpu::BindGroupLayout,
    pub(super) params: wgpu::Buffer,
}

impl StepPipeline {
    pub(super) fn new(device: &GpuDevice) -> Self {
        let d = &device.device;
        let storage = |read_only| wgpu::BufferBindingType::Storage { read_only };
        let kernel_layout = device.kernels.layout(
            d,
            "simbatch step",
            &[
                layout_entry(0, wgpu::BufferBindingType::Uniform),
                layout_entry(1, storage(false)),
                layout_entry(2, storage(false)),
                layout_entry(3, storage(true)),
            ],
        );
        let params = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch step parameters"),
            size: 64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Self {
            pipelines: Vec::new(),
            layout: kernel_layout.bind_group.clone(),
            kernel_layout,
            params,
        }
    }

    /// The pipeline for `settings`' (integrator, projection), built on first use.
    pub(super) fn variant(
        &mut self,
        device: &GpuDevice,
        precision: Precision,
        layout: &Layout,
        workgroup_size: u32,
        settings: &KernelSettings,
    ) -> Result<&wgpu::ComputePipeline> {
        let key = (settings.integrator, settings.projection);
        if let Some(k) = self.pipelines.iter().position(|(k, _)| *k == key) {
            return Ok(&self.pipelines[k].1);
        }
        let source =
            crate::gpu::shader::stepping_source(precision, layout, workgroup_size, key.0, key.1);
        source.check()?;
        let pipeline = device
            .kernels
            .pipeline(
                &device.device,
                &self.kernel_layout,
                "simbatch step",
                &source.text,
                "step_main",
            )
            .map_err(|e| Error::Gpu(format!("stepping kernel build failed: {e}")))?;
        self.pipelines.push((key, pipeline));
        Ok(&self.pipelines[self.pipelines.len() - 1].1)
    }
}

impl StepPipeline {
    /// The pipeline for `settings`, which [`variant`](Self::variant) has built.
    pub(super) fn built(&self, settings: &KernelSettings) -> Result<&wgpu::ComputePipeline> {
        let key = (settings.integrator, settings.projection);
        self.pipelines
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, p)| p)
            .ok_or_else(|| Error::Gpu("stepping variant missing".into()))
    }
}

/// A chunk's stepping buffers: its launch uniform and the carry columns. Bound to the chunk's
/// input buffer.
pub(super) struct ChunkStep {
    pub(super) launch: wgpu::Buffer,
    pub(super) output: wgpu::Buffer,
    pub(super) bind_group: wgpu::BindGroup,
}

impl ChunkStep {
    /// Buffers for `chunk`, in `bytes`-byte reals.
    pub(super) fn new(device: &GpuDevice, sp: &StepPipeline, chunk: &Chunk, bytes: u64) -> Self {
        let d = &device.device;
        let count = chunk.count as u64;
        let launch = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch step launch"),
            size: std::mem::size_of::<Launch>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let output = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("simbatch step carry"),
            size: CARRY_COLUMNS as u64 * count * bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("simbatch step"),
            layout: &sp.layout,
            entries: &[
                bind_entry(0, &launch),
                bind_entry(1, &chunk.input),
                bind_entry(2, &output),
                bind_entry(3, &sp.params),
            ],
        });
        Self {
            launch,
            output,
            bind_group,
        }
    }
}
