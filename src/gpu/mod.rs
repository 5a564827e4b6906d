//! The GPU path: WGSL compute kernels (`shaders/`) run through wgpu, reading the same SoA
//! columns as the CPU path and producing the same [`Evaluation`](crate::evaluation::Evaluation).
//!
//! Rooms: [`device`] opens an adapter with its own limits; [`layout`] places a template's
//! columns in buffers and emits the kernel's constants; [`solve`] generates the multiplier solve
//! for the template's row count; [`codegen`] unrolls the kernels' walks over the template's
//! bodies and constraints into straight-line WGSL; [`shader`] assembles the WGSL files;
//! [`cache`] keeps the pipelines built on a device for the next evaluator or stepper, and
//! [`pipeline_cache`] the driver's compiled code on disk for the next process;
//! [`evaluate`] is the evaluation kernel's host side (buffers, chunking, uploads, readback);
//! [`probe`] makes stage-dropping variants of the kernels, to time on hardware what each stage
//! costs; [`clock`] times passes on the device's own clock, for benchmarks.

pub mod buffers;
pub mod cache;
pub mod clock;
pub mod codegen;
pub mod contact_laws;
pub mod device;
pub mod evaluate;
pub mod events;
pub mod layout;
pub mod pipeline_cache;
pub mod probe;
pub mod shader;
pub mod solve;
pub mod step;

pub use device::GpuDevice;
pub use evaluate::{GpuEvaluator, GpuJacobians};
pub use pipeline_cache::PipelineCacheSetting;
pub use step::GpuStepper;

use crate::error::{Error, Result};

/// Floating-point precision of a GPU kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// 32-bit (every adapter).
    #[default]
    F32,
    /// 64-bit (adapters with `SHADER_F64`).
    F64,
}

impl Precision {
    /// Machine epsilon of the precision.
    pub fn epsilon(self) -> f64 {
        match self {
            Precision::F32 => f32::EPSILON as f64,
            Precision::F64 => f64::EPSILON,
        }
    }

    /// Bytes per value.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(Precision::F32),
            "f64" => Ok(Precision::F64),
            _ => Err(Error::BadChoice {
                what: "precision",
                value: s.to_string(),
                accepted: "f32, f64",
            }),
        }
    }
}

/// Tuning of the GPU evaluator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuOptions {
    /// Cap on bytes per storage binding below the adapter's limit (chunking tests use a small
    /// one; `None`: the adapter's limit).
    pub max_binding_bytes: Option<u64>,
    /// Invocations per workgroup (one instance each); `None`: the adapter's default
    /// ([`GpuDevice::default_workgroup_size`]). Results do not depend on it, bit for bit; it is
    /// a tuning knob, swept by `simbatch bench --workgroup-sizes`.
    pub workgroup_size: Option<u32>,
    /// The order of the evaluation kernel's output columns; `None`: the adapter's
    /// ([`OutputOrder::for_adapter`](layout::OutputOrder::for_adapter): value-major on GPUs,
    /// instance-major on CPU drivers). Results do not depend on it, bit for bit.
    pub output_order: Option<layout::OutputOrder>,
    /// Largest staging buffer of an evaluation's readback, in bytes (host-visible memory, two
    /// when the readback takes several pieces; at least one instance's outputs); `None`:
    /// [`SLICE_BYTES`](evaluate::SLICE_BYTES). Results do not depend on it, bit for bit.
    pub staging_bytes: Option<u64>,
    /// Whether the kernels hold the batch's shared parameter columns as constants (`None`:
    /// yes), so that the shader compiler drops the work they make trivial
    /// ([`layout`]'s module doc, "Shared parameters folded in"). A kernel is then
    /// built for those values: a batch whose shared values differ gets a kernel of its own,
    /// and a column changed after the build is read per instance from then on (one rebuild).
    /// `Some(false)` reads them from the buffer, for callers that set new shared values call
    /// after call on fresh batches and would otherwise build a kernel each time. Results agree
    /// either way within the precision's rounding (the compiler may contract or reorder the
    /// arithmetic it folds), not bit for bit.
    pub fold_shared: Option<bool>,
}
