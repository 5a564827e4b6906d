//! The [`Evaluator`] façade: evaluates a batch on the backend [`resolve`](super::resolve) chose,
//! keeping the GPU kernel and buffers between calls.

use std::sync::Arc;

use super::{Backend, choose, resolve};
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::evaluation::{Evaluation, OutputStores, Outputs};
use crate::gpu::{GpuDevice, GpuEvaluator, GpuOptions, GpuStepper, Precision};

enum Resolved {
    Cpu,
    Gpu {
        device: Arc<GpuDevice>,
        precision: Precision,
        options: GpuOptions,
        /// Built for the first batch, rebuilt for a batch of another layout. A [`GpuStepper`]
        /// is the evaluation kernel plus the stepping kernels, made on first step.
        gpu: Option<Box<GpuStepper>>,
    },
}

/// Evaluates batches on the chosen backend; keeps GPU buffers between calls.
pub struct Evaluator {
    resolved: Resolved,
    note: Option<String>,
    /// What [`evaluate`](Self::evaluate) computes and stores.
    outputs: Outputs,
    /// How the CPU backend writes them.
    stores: OutputStores,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator")
            .field("backend", &self.backend())
            .field("note", &self.note)
            .field("outputs", &self.outputs)
            .field("stores", &self.stores)
            .finish()
    }
}

impl Evaluator {
    /// An evaluator on the f64 CPU path, whatever `SIMBATCH_BACKEND` says.
    pub fn cpu() -> Self {
        Self {
            resolved: Resolved::Cpu,
            note: None,
            outputs: Outputs::ALL,
            stores: OutputStores::Auto,
        }
    }

    /// An evaluator on `backend` (after `SIMBATCH_BACKEND`), f32 on the GPU.
    pub fn new(backend: Backend) -> Result<Self> {
        Self::with_options(backend, Precision::F32, GpuOptions::default())
    }

    /// An evaluator with a GPU precision and options, through [`choose`] and [`resolve`]: asking
    /// for f64 on an adapter without `SHADER_F64` is an error with `Gpu`, and falls back to the
    /// CPU (which is f64) with `Auto`; `Auto` passes over software adapters.
    pub fn with_options(
        backend: Backend,
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        let resolution = resolve(choose(None, backend)?, precision)?;
        let resolved = match resolution.device {
            None => Resolved::Cpu,
            Some(device) => Resolved::Gpu {
                device,
                precision,
                options,
                gpu: None,
            },
        };
        Ok(Self {
            resolved,
            note: resolution.note,
            outputs: Outputs::ALL,
            stores: OutputStores::Auto,
        })
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
                gpu: None,
            },
            note: None,
            outputs: Outputs::ALL,
            stores: OutputStores::Auto,
        })
    }

    /// This evaluator, computing and storing only `outputs` (see
    /// [`set_outputs`](Self::set_outputs)).
    pub fn with_outputs(mut self, outputs: Outputs) -> Self {
        self.outputs = outputs;
        self
    }

    /// Selects the outputs later evaluations compute and store; the other columns of the
    /// [`Evaluation`] are left empty and reading them is [`Error::OutputNotSelected`]. On the
    /// CPU an unselected output is not computed, which is most of the time of an evaluation
    /// that only wants u̇ and λ ([`Outputs::DYNAMICS`]). The GPU kernel computes every output
    /// (its layout is per template, not per call); only the selected columns are read back and
    /// converted. Selected columns are the same bits whatever else is selected.
    pub fn set_outputs(&mut self, outputs: Outputs) {
        self.outputs = outputs;
    }

    /// The outputs evaluations compute and store ([`Outputs::ALL`] unless set).
    pub fn outputs(&self) -> Outputs {
        self.outputs
    }

    /// This evaluator, its CPU backend writing outputs with `stores` instead of
    /// [`OutputStores::Auto`]'s choice (the same bits, the speed this CPU gives them; the GPU
    /// backend ignores it).
    pub fn with_output_stores(mut self, stores: OutputStores) -> Self {
        self.stores = stores;
        self
    }

    /// How the CPU backend writes outputs ([`OutputStores::Auto`] unless set).
    pub fn output_stores(&self) -> OutputStores {
        self.stores
    }

    /// The backend in use (`Cpu` or `Gpu`, never `Auto`).
    pub fn backend(&self) -> Backend {
        match self.resolved {
            Resolved::Cpu => Backend::Cpu,
            Resolved::Gpu { .. } => Backend::Gpu,
        }
    }

    /// Why `Auto` fell back to the CPU, or that the GPU chosen is a software adapter.
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

    /// The GPU device with the precision and options the kernels use, when the backend is the
    /// GPU: for other kernels on the same device (the event kernel of unilateral contact).
    pub fn gpu_setup(&self) -> Option<(Arc<GpuDevice>, Precision, GpuOptions)> {
        match &self.resolved {
            Resolved::Gpu {
                device,
                precision,
                options,
                ..
            } => Some((device.clone(), *precision, *options)),
            Resolved::Cpu => None,
        }
    }

    /// The GPU kernels built so far (`None` on the CPU, or before the first batch).
    pub fn gpu_evaluator(&self) -> Option<&GpuEvaluator> {
        match &self.resolved {
            Resolved::Gpu { gpu: Some(g), .. } => Some(g.evaluator()),
            _ => None,
        }
    }

    /// Bytes of GPU memory the kernels hold now: the chunks' inputs (shared columns once),
    /// the stepping carry and staging, and the evaluation's output slices once it has
    /// evaluated. `None` on the CPU or before the first batch.
    pub fn device_bytes(&self) -> Option<u64> {
        match &self.resolved {
            Resolved::Gpu { gpu: Some(g), .. } => Some(g.device_bytes()),
            _ => None,
        }
    }

    /// As [`evaluate`](Self::evaluate), writing into `out` (on the GPU its allocations are reused).
    pub fn evaluate_into(&mut self, batch: &Batch, out: &mut Evaluation) -> Result<()> {
        match &mut self.resolved {
            Resolved::Cpu => {
                batch.evaluate_stored_into(self.outputs, self.stores, out);
                Ok(())
            }
            Resolved::Gpu { .. } => {
                let outputs = self.outputs;
                self.gpu_for(batch)?
                    .evaluator_mut()
                    .evaluate_outputs_into(batch, outputs, out)
            }
        }
    }

    /// The GPU kernels for `batch`'s template: built on first use, rebuilt when a batch of
    /// another layout comes.
    pub(crate) fn gpu_for(&mut self, batch: &Batch) -> Result<&mut GpuStepper> {
        match &mut self.resolved {
            Resolved::Cpu => Err(Error::Gpu("the CPU backend has no GPU kernels".into())),
            Resolved::Gpu {
                device,
                precision,
                options,
                gpu,
            } => {
                let fits = match gpu {
                    Some(g) => g.fits(batch)?,
                    None => false,
                };
                if !fits {
                    let built = GpuStepper::new(device.clone(), batch, *precision, *options)?;
                    *gpu = Some(Box::new(built));
                }
                gpu.as_deref_mut()
                    .ok_or_else(|| Error::Gpu("no GPU kernels".into()))
            }
        }
    }

    /// Evaluates every instance of `batch`. On the GPU the kernel is built on first use and
    /// rebuilt when a batch of another template layout comes; buffers are kept and only changed
    /// columns are uploaded.
    pub fn evaluate(&mut self, batch: &Batch) -> Result<Evaluation> {
        let mut out = Evaluation::default();
        self.evaluate_into(batch, &mut out)?;
        Ok(out)
    }
}
