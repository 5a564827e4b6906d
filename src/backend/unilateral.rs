//! Event-driven runs of unilateral contact on either backend, one call at a time: on the GPU's
//! event kernel (`gpu::events::GpuEventStepper`) when asked and the template is within its
//! reach, else on the CPU's event path (`cpu::unilateral`); the instances the kernel gives back
//! (a software adapter's loop budget, [`GpuEventOutcome::Withheld`]) run on the CPU in the same
//! call, so every instance of every call has its run.

use std::sync::Arc;

use crate::batch::Batch;
use crate::cpu::unilateral::{
    Coefficients, ContactRecord, EventOptions, UnilateralContact, run_batch_resuming,
    run_selected_resuming,
};
use crate::error::{Error, Result};
use crate::gpu::events::{GpuEventOutcome, GpuEventStepper, OUTSIDE_STAGE_ONE};
use crate::gpu::{GpuDevice, GpuOptions, Precision};
use crate::model::ConstraintId;

/// One call's outcome: per instance its contacts' records (`None`: halted before the call or
/// failed in it, kept at its state and flagged `status::STEP_FAILED`), and which instances ran
/// on the CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct UnilateralCall {
    /// Per instance, one record per contact.
    pub records: Vec<Option<Vec<ContactRecord>>>,
    /// Per instance, whether the CPU's event path ran it (every instance on the CPU backend;
    /// on the GPU, those its kernel withheld).
    pub on_cpu: Vec<bool>,
}

impl UnilateralCall {
    /// How many instances ran on the CPU.
    pub fn handed_to_cpu(&self) -> usize {
        self.on_cpu.iter().filter(|c| **c).count()
    }
}

/// Runs a batch's unilateral contacts `contacts` (the same constraints in every instance, the
/// coefficients per instance) event-driven, call after call, each resuming from the last.
#[derive(Debug)]
pub struct UnilateralRunner {
    contacts: Vec<ConstraintId>,
    gpu: Option<GpuEventStepper>,
    /// Why the GPU was asked for and not used (`None` when it runs, or was not asked for).
    note: Option<String>,
}

impl UnilateralRunner {
    /// On the CPU's event path.
    pub fn cpu(contacts: &[ConstraintId]) -> Self {
        Self {
            contacts: contacts.to_vec(),
            gpu: None,
            note: None,
        }
    }

    /// On `device`'s event kernel for `batch`'s template, or on the CPU when the template is
    /// outside the kernels' reach (the reason in [`note`](Self::note)); any other error is
    /// returned.
    pub fn gpu(
        device: Arc<GpuDevice>,
        batch: &Batch,
        contacts: &[ConstraintId],
        precision: Precision,
        options: GpuOptions,
    ) -> Result<Self> {
        let software = super::is_software(&device);
        match GpuEventStepper::with_contacts(device, batch, contacts, precision, options) {
            Ok(stepper) => {
                if software && stepper.is_general() {
                    // It answers, but it is a check of the kernel rather than a way to run.
                    log::warn!(
                        "simbatch: the several-contact event kernel on a software adapter runs \
                         one instance per workgroup and one trial per dispatch (lavapipe's \
                         loop limit): expect 100-1000x the CPU event path's time (on the \
                         2-core CI VM, bricks on four corners stepped 50 steps/s against the \
                         CPU's 6e4); the cpu or auto backend runs it on the CPU"
                    );
                }
                Ok(Self {
                    contacts: contacts.to_vec(),
                    gpu: Some(stepper),
                    note: None,
                })
            }
            Err(Error::InvalidOption {
                option: OUTSIDE_STAGE_ONE,
                value,
                accepted,
            }) => Ok(Self {
                note: Some(format!(
                    "unilateral contacts run on the CPU: {value} (the GPU takes {accepted})"
                )),
                ..Self::cpu(contacts)
            }),
            Err(e) => Err(e),
        }
    }

    /// Whether calls run on the GPU's event kernel.
    pub fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// Bytes of GPU memory the event kernel holds (`None` on the CPU).
    pub fn device_bytes(&self) -> Option<u64> {
        self.gpu.as_ref().map(GpuEventStepper::device_bytes)
    }

    /// Why a GPU run was asked for and the CPU runs instead.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Runs every instance of `batch` for `duration`, instance `i` with its contacts'
    /// coefficients `coefficients[i]` (one per contact), resuming from `previous[i]` (one record
    /// per contact; `None`: afresh), as `cpu::unilateral::run_batch_resuming` does, with fixed
    /// RK4 steps or under error control (`EventOptions::accuracy`) on either backend.
    pub fn run(
        &mut self,
        batch: &mut Batch,
        coefficients: &[Vec<Coefficients>],
        duration: f64,
        options: &EventOptions,
        previous: &[Option<Vec<ContactRecord>>],
    ) -> Result<UnilateralCall> {
        if coefficients.len() != batch.len() {
            return Err(Error::Dimension {
                what: "contact coefficients (one entry per instance)",
                got: coefficients.len(),
                expected: batch.len(),
            });
        }
        // One coefficient per contact in every instance: a short list would drop contacts.
        let n = self.contacts.len();
        if let Some((instance, per)) = coefficients.iter().enumerate().find(|(_, k)| k.len() != n) {
            return Err(Error::per_contact(
                "contact coefficients",
                instance,
                per.len(),
                n,
            ));
        }
        let ids = &self.contacts;
        let contacts = |i: usize| -> Vec<UnilateralContact> {
            ids.iter()
                .zip(&coefficients[i])
                .map(|(c, k)| UnilateralContact {
                    constraint: *c,
                    coefficients: *k,
                })
                .collect()
        };
        let Some(stepper) = &mut self.gpu else {
            let runs = run_batch_resuming(batch, &contacts, duration, options, previous)?;
            return Ok(UnilateralCall {
                records: runs.into_iter().map(|r| r.map(|r| r.contacts)).collect(),
                on_cpu: vec![true; batch.len()],
            });
        };
        let outcomes = stepper.run_contacts(batch, coefficients, duration, options, previous)?;
        let withheld: Vec<bool> = outcomes
            .iter()
            .map(|o| matches!(o, GpuEventOutcome::Withheld))
            .collect();
        let mut records: Vec<Option<Vec<ContactRecord>>> = outcomes
            .into_iter()
            .map(|o| match o {
                GpuEventOutcome::Ran(r) => Some(r.contacts),
                _ => None,
            })
            .collect();
        if withheld.iter().any(|w| *w) {
            let runs =
                run_selected_resuming(batch, &withheld, &contacts, duration, options, previous)?;
            for ((slot, run), w) in records.iter_mut().zip(runs).zip(&withheld) {
                if *w {
                    *slot = run.map(|r| r.contacts);
                }
            }
        }
        Ok(UnilateralCall {
            records,
            on_cpu: withheld,
        })
    }
}
