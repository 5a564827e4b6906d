//! One API over the two backends: evaluate a batch on the CPU (f64 reference) or on the GPU
//! (f32, or f64 where the adapter offers `SHADER_F64`).
//!
//! One resolver, [`resolve`], decides for the library, the RL environments, the CLI and Python:
//!
//! * the choice: an explicit one (the CLI's `--backend`) wins, else the environment variable
//!   `SIMBATCH_BACKEND` (`cpu`, `gpu`, `auto`), else the choice made in code or in the scenario
//!   file — so a deployed program can be moved between backends without rebuilding;
//! * [`Backend::Auto`] takes a **hardware** GPU; a software adapter (lavapipe, WARP, SwiftShader:
//!   a CPU emulating a GPU, ~100× slower than the f64 CPU path) or no adapter falls back to the
//!   CPU with one log line (`log::warn!`; also kept in [`Evaluator::note`]);
//! * [`Backend::Gpu`] takes any adapter, and on a software one says so in the note.

mod evaluator;
mod stepper;
mod unilateral;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gpu::{GpuDevice, Precision};

pub use evaluator::Evaluator;
pub use stepper::{F32_RKM_ACCURACY, Stepper, f32_accuracy_note};
pub use unilateral::{UnilateralCall, UnilateralRunner};

/// Environment variable that overrides the backend chosen in code.
pub const BACKEND_ENV: &str = "SIMBATCH_BACKEND";

/// Which backend evaluates batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The f64 CPU reference path (rayon).
    Cpu,
    /// The GPU; an error when no adapter opens.
    Gpu,
    /// The GPU when an adapter opens, else the CPU.
    #[default]
    Auto,
}

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Backend::Cpu),
            "gpu" => Ok(Backend::Gpu),
            "auto" => Ok(Backend::Auto),
            _ => Err(Error::BadChoice {
                what: "backend",
                value: s.to_string(),
                accepted: "cpu, gpu, auto",
            }),
        }
    }
}

impl Backend {
    /// The backend after applying `SIMBATCH_BACKEND`, if set (an invalid value is an error).
    pub fn with_env_override(self) -> Result<Self> {
        match std::env::var(BACKEND_ENV) {
            Ok(v) if !v.trim().is_empty() => v.parse(),
            _ => Ok(self),
        }
    }
}

/// Picks the backend: `explicit` (e.g. a command-line flag) if given, else `SIMBATCH_BACKEND`
/// if set, else `default` (the choice made in code or in a scenario file). An invalid variable
/// is an error naming it.
pub fn choose(explicit: Option<Backend>, default: Backend) -> Result<Backend> {
    match explicit {
        Some(b) => Ok(b),
        None => default.with_env_override().map_err(|e| match e {
            Error::BadChoice {
                value, accepted, ..
            } => Error::BadChoice {
                what: "SIMBATCH_BACKEND",
                value,
                accepted,
            },
            other => other,
        }),
    }
}

/// What [`resolve`] decided.
#[derive(Debug, Clone)]
pub struct Resolution {
    /// The GPU device when the GPU runs (`None`: the f64 CPU path).
    pub device: Option<Arc<GpuDevice>>,
    /// Why `Auto` passed over the GPU, or that an explicit GPU is a software adapter.
    pub note: Option<String>,
}

impl Resolution {
    /// One line for reports and manifests: `cpu (f64)` or `gpu: <adapter>`, with the note.
    pub fn describe(&self) -> String {
        let what = match &self.device {
            Some(d) => format!("gpu: {}", d.describe()),
            None => "cpu (f64)".to_string(),
        };
        match &self.note {
            Some(n) => format!("{what}; {n}"),
            None => what,
        }
    }
}

/// Whether an adapter is a CPU emulating a GPU (lavapipe, WARP, SwiftShader).
pub fn is_software(device: &GpuDevice) -> bool {
    device.info.device_type == wgpu::DeviceType::Cpu
}

/// The one backend resolver (see the module documentation): `backend` is the choice already
/// made by [`choose`]; `precision` is what the GPU would run (f64 needs `SHADER_F64`: an error
/// with `Gpu`, the CPU with `Auto`).
pub fn resolve(backend: Backend, precision: Precision) -> Result<Resolution> {
    let open = || -> Result<Arc<GpuDevice>> {
        let device = Arc::new(GpuDevice::new()?);
        if precision == Precision::F64 && !device.supports_f64 {
            return Err(Error::Gpu(format!(
                "{} has no SHADER_F64 for f64 kernels",
                device.info.name
            )));
        }
        Ok(device)
    };
    match backend {
        Backend::Cpu => Ok(Resolution {
            device: None,
            note: None,
        }),
        Backend::Gpu => {
            let device = open()?;
            let note = is_software(&device).then(|| {
                format!(
                    "{} is a software rasterizer (a CPU emulating a GPU): expect it to run \
                     slower than the CPU backend, some kernels (several contacts per instance) \
                     100x or more",
                    device.info.name
                )
            });
            if let Some(n) = &note {
                log::warn!("simbatch: {n}");
            }
            Ok(Resolution {
                device: Some(device),
                note,
            })
        }
        Backend::Auto => {
            let note = match open() {
                Ok(device) if !is_software(&device) => {
                    return Ok(Resolution {
                        device: Some(device),
                        note: None,
                    });
                }
                Ok(device) => format!(
                    "auto passed over {}, a software rasterizer slower than the CPU backend \
                     (ask for gpu to use it anyway)",
                    device.info.name
                ),
                Err(e) => format!("GPU unavailable ({e}); using the f64 CPU backend"),
            };
            log::warn!("simbatch: {note}");
            Ok(Resolution {
                device: None,
                note: Some(note),
            })
        }
    }
}
