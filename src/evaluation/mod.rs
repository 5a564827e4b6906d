//! What an evaluation reports: per-instance results as columns, the same type whichever backend
//! computed them.
//!
//! An evaluation fills the columns its [`Outputs`] select (all by default) and leaves the others
//! empty: a study that reads u̇ and the multipliers should not pay for writing fifty other
//! numbers per instance, which on the CPU cost more than the physics. Reading an output that was
//! not selected is [`Error::OutputNotSelected`], never an empty or stale answer.
//!
//! Both backends fill an [`Evaluation`] through [`Evaluation::reset_for`], which sizes every
//! column from the template (keeping allocations between calls), so the two cannot disagree on
//! shape: the CPU appends one instance at a time, the GPU one chunk at a time.

use crate::batch::status;
use crate::error::{Error, Result};
use crate::model::{ConstraintId, SystemTemplate};

mod blocks;

#[cfg(test)]
pub(crate) use blocks::STREAMING_BYTES;
pub(crate) use blocks::{ConstraintBlock, EvaluationBlock};

/// Which outputs an evaluation computes and stores (module doc). The status column is always
/// filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Outputs {
    /// Constrained u̇ ([`Evaluation::udot`]).
    pub udot: bool,
    /// Unconstrained u̇ ([`Evaluation::udot_unconstrained`]).
    pub udot_unconstrained: bool,
    /// Position errors per constraint.
    pub position_errors: bool,
    /// Velocity errors per constraint.
    pub velocity_errors: bool,
    /// Acceleration errors per constraint.
    pub acceleration_errors: bool,
    /// Multipliers per constraint.
    pub multipliers: bool,
    /// Constraint forces on the constraint's bodies.
    pub body_forces: bool,
    /// Constraint power `−λ · verr`.
    pub power: bool,
    /// Contact point, separation and contact force, where the kind reports them.
    pub contact: bool,
}

impl Outputs {
    /// Every output (the default).
    pub const ALL: Self = Self {
        udot: true,
        udot_unconstrained: true,
        position_errors: true,
        velocity_errors: true,
        acceleration_errors: true,
        multipliers: true,
        body_forces: true,
        power: true,
        contact: true,
    };

    /// No output but the status column.
    pub const NONE: Self = Self {
        udot: false,
        udot_unconstrained: false,
        position_errors: false,
        velocity_errors: false,
        acceleration_errors: false,
        multipliers: false,
        body_forces: false,
        power: false,
        contact: false,
    };

    /// The constrained u̇ and the multipliers: the dynamics' answer, what a controller or a
    /// study of constraint forces reads.
    pub const DYNAMICS: Self = Self {
        udot: true,
        multipliers: true,
        ..Self::NONE
    };

    /// The error unless `selected`.
    fn check(selected: bool, output: &'static str) -> Result<()> {
        if selected {
            Ok(())
        } else {
            Err(Error::OutputNotSelected { output })
        }
    }
}

impl Default for Outputs {
    fn default() -> Self {
        Self::ALL
    }
}

/// Outputs of one constraint for every instance, in reported order (`report_slots`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConstraintEvaluation {
    /// The outputs computed; the columns of the others are empty.
    pub outputs: Outputs,
    /// Values per instance in the reported vectors (3 for plane contacts, the normal count for
    /// point-to-ground contacts).
    pub width: usize,
    /// Number of bodies of the constraint (entries per instance of `body_forces`).
    pub body_count: usize,
    /// Position errors, reported order (plane contacts: `(0, 0, perr)`).
    pub position_errors: Vec<f64>,
    /// Velocity errors, reported order.
    pub velocity_errors: Vec<f64>,
    /// Acceleration errors at the constrained u̇ (≈ 0), reported order.
    pub acceleration_errors: Vec<f64>,
    /// Multipliers (Simbody's sign), reported order; 0 when disabled.
    pub multipliers: Vec<f64>,
    /// Constraint force on each of the constraint's bodies, `(torque about the body origin,
    /// force)` in Ground with Simbody's sign (= minus the force applied), Ground included.
    pub body_forces: Vec<[f64; 6]>,
    /// `−λ · verr`.
    pub power: Vec<f64>,
    /// Contact point in Ground, where the kind reports one.
    pub contact_point: Option<Vec<[f64; 3]>>,
    /// Separation (valid when disabled), where the kind reports one.
    pub separation: Option<Vec<f64>>,
    /// The kind's force accessor (sphere: force on sphere in Ground; point on plane: force on
    /// follower point in the plane frame; point to ground: physical force in Ground).
    pub contact_force: Option<Vec<[f64; 3]>>,
}

/// `v[i·w .. (i+1)·w]`, or the typed error naming the instance and the count.
fn instance_slice<T>(v: &[T], w: usize, i: usize) -> Result<&[T]> {
    let len = v.len().checked_div(w).unwrap_or(0);
    i.checked_mul(w)
        .and_then(|start| v.get(start..start + w))
        .filter(|_| w > 0 || i < len)
        .ok_or(Error::InstanceOutOfRange { instance: i, len })
}

impl ConstraintEvaluation {
    fn slice(v: &[f64], w: usize, i: usize) -> Result<&[f64]> {
        instance_slice(v, w, i)
    }

    /// Position errors of instance `i`. An index past the end is [`Error::InstanceOutOfRange`].
    pub fn position_errors_of(&self, i: usize) -> Result<&[f64]> {
        Outputs::check(self.outputs.position_errors, "position_errors")?;
        Self::slice(&self.position_errors, self.width, i)
    }

    /// Velocity errors of instance `i`. An index past the end is [`Error::InstanceOutOfRange`].
    pub fn velocity_errors_of(&self, i: usize) -> Result<&[f64]> {
        Outputs::check(self.outputs.velocity_errors, "velocity_errors")?;
        Self::slice(&self.velocity_errors, self.width, i)
    }

    /// Acceleration errors of instance `i`. An index past the end is [`Error::InstanceOutOfRange`].
    pub fn acceleration_errors_of(&self, i: usize) -> Result<&[f64]> {
        Outputs::check(self.outputs.acceleration_errors, "acceleration_errors")?;
        Self::slice(&self.acceleration_errors, self.width, i)
    }

    /// Multipliers of instance `i`. An index past the end is [`Error::InstanceOutOfRange`].
    pub fn multipliers_of(&self, i: usize) -> Result<&[f64]> {
        Outputs::check(self.outputs.multipliers, "multipliers")?;
        Self::slice(&self.multipliers, self.width, i)
    }

    /// Constraint forces on the bodies of instance `i`. An index past the end is [`Error::InstanceOutOfRange`].
    pub fn body_forces_of(&self, i: usize) -> Result<&[[f64; 6]]> {
        Outputs::check(self.outputs.body_forces, "body_forces")?;
        instance_slice(&self.body_forces, self.body_count, i)
    }
}

/// How the CPU's lane path writes an evaluation's outputs to memory (the backend's
/// `Evaluator::with_output_stores`,
/// [`Batch::evaluate_stored_into`](crate::batch::Batch::evaluate_stored_into)). The results
/// are the same bits whichever it is; only the speed differs, and which is faster depends on
/// the CPU (`docs/performance-log.md`, 2026-11-28): streaming (non-temporal) stores skip the
/// read of each output line before it is written, which made large evaluations 1.5× as fast
/// on a Zen 5 VM, but a chunk's few values a column leave lines half written, which made them
/// 3× as slow on a Xeon VM. The GPU backend ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputStores {
    /// Streaming stores for outputs larger than 6 MiB (more than the caches hold for whoever
    /// reads them next) on x86-64 CPUs where they were measured to pay (AMD's Zen 5 and
    /// later; not Zen 3, nor an Intel Xeon); ordinary stores otherwise.
    #[default]
    Auto,
    /// Ordinary stores, whatever the size.
    Cached,
    /// Streaming stores, whatever the size and the CPU (on x86-64; ordinary stores elsewhere).
    Streamed,
}

/// The names [`OutputStores::from_str`](std::str::FromStr::from_str) accepts.
pub const OUTPUT_STORES: &str = "auto, cached, streamed";

impl OutputStores {
    /// Its name, as [`OutputStores::from_str`](std::str::FromStr::from_str) reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cached => "cached",
            Self::Streamed => "streamed",
        }
    }
}

impl std::str::FromStr for OutputStores {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cached" => Ok(Self::Cached),
            "streamed" => Ok(Self::Streamed),
            _ => Err(Error::BadChoice {
                what: "output stores",
                value: s.to_string(),
                accepted: OUTPUT_STORES,
            }),
        }
    }
}

/// Results of evaluating every instance of a batch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evaluation {
    /// The outputs computed; the columns of the others are empty.
    pub outputs: Outputs,
    /// Number of instances.
    pub len: usize,
    /// Mobilities per instance.
    pub nu: usize,
    /// Status bits per instance ([`status`]); outputs of a flagged instance are NaN.
    pub status: Vec<u32>,
    /// Constrained u̇, `nu` per instance.
    pub udot: Vec<f64>,
    /// Unconstrained u̇ = M⁻¹ (f − c), `nu` per instance.
    pub udot_unconstrained: Vec<f64>,
    /// Per constraint, in template order.
    pub constraints: Vec<ConstraintEvaluation>,
}

impl Evaluation {
    /// Constrained u̇ of instance `i`. An index past the end is [`Error::InstanceOutOfRange`].
    pub fn udot_of(&self, i: usize) -> Result<&[f64]> {
        Outputs::check(self.outputs.udot, "udot")?;
        self.check_instance(i)?;
        instance_slice(&self.udot, self.nu, i)
    }

    /// Unconstrained u̇ of instance `i`. An index past the end is [`Error::InstanceOutOfRange`].
    pub fn udot_unconstrained_of(&self, i: usize) -> Result<&[f64]> {
        Outputs::check(self.outputs.udot_unconstrained, "udot_unconstrained")?;
        self.check_instance(i)?;
        instance_slice(&self.udot_unconstrained, self.nu, i)
    }

    fn check_instance(&self, i: usize) -> Result<()> {
        if i < self.len {
            Ok(())
        } else {
            Err(Error::InstanceOutOfRange {
                instance: i,
                len: self.len,
            })
        }
    }

    /// Outputs of one constraint.
    pub fn constraint(&self, c: ConstraintId) -> Result<&ConstraintEvaluation> {
        self.constraints.get(c.0).ok_or_else(|| Error::BadHandle {
            what: "constraint",
            index: c.0,
            reason: format!(
                "the evaluation holds {} constraints",
                self.constraints.len()
            ),
        })
    }

    /// Empties this evaluation and sizes it for `len` instances of `template` (reserving every
    /// column, keeping allocations): the one place both backends start from.
    ///
    /// Every output is selected; [`keep_only`](Self::keep_only) then drops what was not asked
    /// for.
    pub fn reset_for(&mut self, template: &SystemTemplate, len: usize) {
        self.shape_for(template, Outputs::ALL);
        self.len = len;
        let nu = self.nu;
        for v in [&mut self.udot, &mut self.udot_unconstrained] {
            v.clear();
            v.reserve(len * nu);
        }
        self.status.clear();
        self.status.reserve(len);
        for out in &mut self.constraints {
            for v in [
                &mut out.position_errors,
                &mut out.velocity_errors,
                &mut out.acceleration_errors,
                &mut out.multipliers,
            ] {
                v.clear();
                v.reserve(len * out.width);
            }
            out.body_forces.clear();
            out.body_forces.reserve(len * out.body_count);
            out.power.clear();
            out.power.reserve(len);
            for v in [&mut out.contact_point, &mut out.contact_force]
                .into_iter()
                .flatten()
            {
                v.clear();
                v.reserve(len);
            }
            if let Some(v) = out.separation.as_mut() {
                v.clear();
                v.reserve(len);
            }
        }
    }

    /// Clears the columns `outputs` does not select (keeping their allocations) and records
    /// the selection: what a backend that computes every output does to honour a selection.
    pub fn keep_only(&mut self, outputs: Outputs) {
        let keep = |v: &mut Vec<f64>, on: bool| {
            if !on {
                v.clear()
            }
        };
        keep(&mut self.udot, outputs.udot);
        keep(&mut self.udot_unconstrained, outputs.udot_unconstrained);
        self.outputs = outputs;
        for c in &mut self.constraints {
            keep(&mut c.position_errors, outputs.position_errors);
            keep(&mut c.velocity_errors, outputs.velocity_errors);
            keep(&mut c.acceleration_errors, outputs.acceleration_errors);
            keep(&mut c.multipliers, outputs.multipliers);
            keep(&mut c.power, outputs.power);
            if !outputs.body_forces {
                c.body_forces.clear();
            }
            if !outputs.contact {
                c.contact_point = None;
                c.separation = None;
                c.contact_force = None;
            }
            c.outputs = outputs;
        }
    }

    /// What [`reset_for`](Self::reset_for) and [`fill_for`](Self::fill_for) share: `nu`, the
    /// selection, one entry per constraint with its width and body count, and the optional
    /// columns present exactly when the kind reports them and contacts are selected (existing
    /// ones keep their values).
    fn shape_for(&mut self, template: &SystemTemplate, outputs: Outputs) {
        self.nu = template.nu();
        self.outputs = outputs;
        self.constraints
            .resize_with(template.constraints().len(), ConstraintEvaluation::default);
        for (out, slot) in self.constraints.iter_mut().zip(template.constraints()) {
            let c = &slot.constraint;
            let extras = c.reported_extras();
            out.outputs = outputs;
            out.width = c.report_slots().len();
            out.body_count = c.bodies().len();
            keep_optional(
                extras.contact_point && outputs.contact,
                &mut out.contact_point,
            );
            keep_optional(
                extras.contact_force && outputs.contact,
                &mut out.contact_force,
            );
            keep_optional(extras.separation && outputs.contact, &mut out.separation);
        }
    }

    /// Bytes the result's columns hold (their lengths, not their capacities).
    pub fn bytes(&self) -> usize {
        let f = std::mem::size_of::<f64>();
        let mut total = self.status.len() * std::mem::size_of::<u32>()
            + (self.udot.len() + self.udot_unconstrained.len()) * f;
        for c in &self.constraints {
            total += (c.position_errors.len()
                + c.velocity_errors.len()
                + c.acceleration_errors.len()
                + c.multipliers.len()
                + c.power.len())
                * f
                + c.body_forces.len() * 6 * f
                + c.contact_point.as_ref().map_or(0, |v| v.len() * 3 * f)
                + c.separation.as_ref().map_or(0, |v| v.len() * f)
                + c.contact_force.as_ref().map_or(0, |v| v.len() * 3 * f);
        }
        total
    }

    /// Number of instances whose status is not OK.
    pub fn flagged(&self) -> usize {
        self.status.iter().filter(|s| **s != status::OK).count()
    }
}

/// An optional column: present (keeping its values) when the kind reports it, `None` otherwise.
fn keep_optional<T>(keep: bool, column: &mut Option<Vec<T>>) {
    if keep {
        column.get_or_insert_with(Vec::new);
    } else {
        *column = None;
    }
}
