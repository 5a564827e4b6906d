//! One API over the two backends: evaluate a batch on the CPU (f64 reference) or on the GPU
//! (f32, or f64 where the adapter offers `SHADER_F64`).
//!
//! [`Backend::Auto`] takes the GPU when an adapter opens and otherwise falls back to the CPU with
//! one log line (`log::warn!`, or stderr when no logger is installed; also kept in
//! [`Evaluator::note`]). The environment variable
//! `SIMBATCH_BACKEND` (`cpu`, `gpu`, `auto`) overrides the choice made in code, so a deployed
//! program can be moved between backends without rebuilding.

use std::sync::Arc;

use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::evaluate::Evaluation;
use crate::gpu::{GpuDevice, GpuEvaluator, GpuOptions, Precision};

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

enum Resolved {
    Cpu,
    Gpu {
        device: Arc<GpuDevice>,
        precision: Precision,
        options: GpuOptions,
        evaluator: Option<Box<GpuEvaluator>>,
    },
}

/// Evaluates batches on the chosen backend; keeps GPU buffers between calls.
pub struct Evaluator {
    resolved: Resolved,
    note: Option<String>,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator")
            .field("backend", &self.backend())
            .field("note", &self.note)
            .finish()
    }
}

impl Evaluator {
    /// An evaluator on `backend` (after `SIMBATCH_BACKEND`), f32 on the GPU.
    pub fn new(backend: Backend) -> Result<Self> {
        Self::with_options(backend, Precision::F32, GpuOptions::default())
    }

    /// An evaluator with a GPU precision and options. Asking for f64 on an adapter without
    /// `SHADER_F64` is an error with `Gpu`, and falls back to the CPU (which is f64) with `Auto`.
    pub fn with_options(
        backend: Backend,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        let backend = backend.with_env_override()?;
        let open = || -> Result<Resolved> {
            let device = Arc::new(GpuDevice::new()?);
            if precision == Precision::F64 && !device.supports_f64 {
                return Err(Error::Gpu(format!(
                    "{} has no SHADER_F64 for f64 kernels",
                    device.info.name
                )));
            }
            Ok(Resolved::Gpu {
                device,
                precision,
                options,
                evaluator: None,
            })
        };
        match backend {
            Backend::Cpu => Ok(Self {
                resolved: Resolved::Cpu,
                note: None,
            }),
            Backend::Gpu => Ok(Self {
                resolved: open()?,
                note: None,
            }),
            Backend::Auto => match open() {
                Ok(resolved) => Ok(Self {
                    resolved,
                    note: None,
                }),
                Err(e) => {
                    let note =
                        format!("simbatch: GPU unavailable ({e}); using the f64 CPU backend");
                    log::warn!("{note}");
                    Ok(Self {
                        resolved: Resolved::Cpu,
                        note: Some(note),
                    })
                }
            },
        }
    }

    /// A GPU evaluator on a device already open (shared between evaluators and steppers).
    pub fn on_device(
        device: Arc<GpuDevice>,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        if precision == Precision::F64 && !device.supports_f64 {
            return Err(Error::Gpu(format!(
                "{} has no SHADER_F64 for f64 kernels",
                device.info.name
            )));
        }
        Ok(Self {
            resolved: Resolved::Gpu {
                device,
                precision,
                options,
                evaluator: None,
            },
            note: None,
        })
    }

    /// The backend in use (`Cpu` or `Gpu`, never `Auto`).
    pub fn backend(&self) -> Backend {
        match self.resolved {
            Resolved::Cpu => Backend::Cpu,
            Resolved::Gpu { .. } => Backend::Gpu,
        }
    }

    /// Why `Auto` fell back to the CPU, if it did.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// The GPU device, when the backend is the GPU.
    pub fn gpu_device(&self) -> Option<&GpuDevice> {
        match &self.resolved {
            Resolved::Gpu { device, .. } => Some(device),
            Resolved::Cpu => None,
        }
    }

    /// As [`evaluate`](Self::evaluate), writing into `out` (on the GPU its allocations are reused).
    pub fn evaluate_into(&mut self, batch: &Batch, out: &mut Evaluation) -> Result<()> {
        match &mut self.resolved {
            Resolved::Cpu => {
                *out = batch.evaluate();
                Ok(())
            }
            Resolved::Gpu { .. } => self.gpu_for(batch)?.evaluate_into(batch, out),
        }
    }

    pub(crate) fn gpu_for(&mut self, batch: &Batch) -> Result<&mut GpuEvaluator> {
        match &mut self.resolved {
            Resolved::Cpu => Err(Error::Gpu("the CPU backend has no GPU evaluator".into())),
            Resolved::Gpu {
                device,
                precision,
                options,
                evaluator,
            } => {
                let fits = match evaluator {
                    Some(e) => {
                        crate::gpu::layout::Layout::new(batch.template())? == *e.layout()
                            && e.precision() == *precision
                    }
                    None => false,
                };
                if !fits {
                    let built = GpuEvaluator::new(device.clone(), batch, *precision, *options)?;
                    *evaluator = Some(Box::new(built));
                }
                evaluator
                    .as_deref_mut()
                    .ok_or_else(|| Error::Gpu("no evaluator".into()))
            }
        }
    }

    /// Evaluates every instance of `batch`. On the GPU the kernel is built on first use and
    /// rebuilt when a batch of another template layout comes; buffers are kept and only changed
    /// columns are uploaded.
    pub fn evaluate(&mut self, batch: &Batch) -> Result<Evaluation> {
        match self.resolved {
            Resolved::Cpu => Ok(batch.evaluate()),
            Resolved::Gpu { .. } => self.gpu_for(batch)?.evaluate(batch),
        }
    }
}
