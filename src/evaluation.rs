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

/// Splits `v` into `count` consecutive slices of `block · width` values (the last one shorter,
/// empty ones when `width` is 0).
fn split_blocks<T>(mut v: &mut [T], width: usize, block: usize, count: usize) -> Vec<&mut [T]> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let take = (block * width).min(v.len());
        let (head, tail) = std::mem::take(&mut v).split_at_mut(take);
        out.push(head);
        v = tail;
    }
    out
}

/// The entries of instances `range` of a column `width` values an instance wide (all of an
/// empty, unselected column).
fn part<'a, T>(v: &'a mut [T], width: usize, range: &std::ops::Range<usize>) -> &'a mut [T] {
    if v.is_empty() {
        return v;
    }
    &mut v[range.start * width..range.end * width]
}

/// [`split_blocks`] of the instances `range` of a column ([`part`]).
fn split_part<'a, T>(
    v: &'a mut [T],
    width: usize,
    range: &std::ops::Range<usize>,
    block: usize,
    count: usize,
) -> Vec<&'a mut [T]> {
    split_blocks(part(v, width, range), width, block, count)
}

/// As [`split_blocks`], for the instances `range` of an optional column.
fn split_optional<'a, T>(
    v: &'a mut Option<Vec<T>>,
    range: &std::ops::Range<usize>,
    block: usize,
    count: usize,
) -> Vec<Option<&'a mut [T]>> {
    match v {
        Some(v) => split_part(v, 1, range, block, count)
            .into_iter()
            .map(Some)
            .collect(),
        None => (0..count).map(|_| None).collect(),
    }
}

/// One constraint's columns for a run of consecutive instances (see [`EvaluationBlock`]).
#[derive(Debug)]
pub(crate) struct ConstraintBlock<'a> {
    pub(crate) width: usize,
    pub(crate) body_count: usize,
    pub(crate) position_errors: &'a mut [f64],
    pub(crate) velocity_errors: &'a mut [f64],
    pub(crate) acceleration_errors: &'a mut [f64],
    pub(crate) multipliers: &'a mut [f64],
    pub(crate) body_forces: &'a mut [[f64; 6]],
    pub(crate) power: &'a mut [f64],
    pub(crate) contact_point: Option<&'a mut [[f64; 3]]>,
    pub(crate) separation: Option<&'a mut [f64]>,
    pub(crate) contact_force: Option<&'a mut [[f64; 3]]>,
}

/// The output size above which the CPU's lane path writes an evaluation with streaming stores
/// ([`Evaluation::streams`]). On the Zen 5 VM, one thread, every output of rolling spheres
/// (352 bytes an instance) streamed against cached stores: 3.5 MB (10⁴ instances, which the
/// caches hold) 0.97×, 7 MB 1.32–1.37×, 14 MB 1.56×, 35 MB 1.52×, 352 MB 1.46–1.56×. 6 MiB
/// sits between the sizes where streaming lost and won there; a larger last-level cache moves
/// the crossover, not the sign far from it.
pub(crate) const STREAMING_BYTES: usize = 6 << 20;

/// Every column of an [`Evaluation`] for the instances `start .. start + len`: what the CPU
/// path writes in place, one block per rayon job, so no instance's results are copied twice.
#[derive(Debug)]
pub(crate) struct EvaluationBlock<'a> {
    /// What to write; the columns of the others are empty slices.
    pub(crate) outputs: Outputs,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) nu: usize,
    pub(crate) status: &'a mut [u32],
    pub(crate) udot: &'a mut [f64],
    pub(crate) udot_unconstrained: &'a mut [f64],
    pub(crate) constraints: Vec<ConstraintBlock<'a>>,
    /// Whether the lane path writes its full chunks with streaming stores (chosen by the size
    /// of the whole evaluation's outputs, [`Evaluation::streams`]; `math::lanes::transpose`).
    pub(crate) streaming: bool,
}

impl Evaluation {
    /// Sizes this evaluation for `len` instances of `template` with every column `outputs`
    /// selects at its full length (the others empty), for a backend that writes instances in
    /// place through [`blocks`](Self::blocks).
    ///
    /// Columns that already have their length keep their (stale) values: every backend writing
    /// through blocks writes every entry of a selected column, so clearing them first would
    /// only cost a pass over memory (new entries are zeros).
    pub(crate) fn fill_for(&mut self, template: &SystemTemplate, len: usize, outputs: Outputs) {
        self.shape_for(template, outputs);
        self.len = len;
        let nu = self.nu;
        let size = |v: &mut Vec<f64>, on: bool, n: usize| {
            if on { v.resize(n, 0.0) } else { v.clear() }
        };
        self.status.resize(len, status::OK);
        size(&mut self.udot, outputs.udot, len * nu);
        size(
            &mut self.udot_unconstrained,
            outputs.udot_unconstrained,
            len * nu,
        );
        for c in &mut self.constraints {
            let w = c.width;
            size(&mut c.position_errors, outputs.position_errors, len * w);
            size(&mut c.velocity_errors, outputs.velocity_errors, len * w);
            size(
                &mut c.acceleration_errors,
                outputs.acceleration_errors,
                len * w,
            );
            size(&mut c.multipliers, outputs.multipliers, len * w);
            size(&mut c.power, outputs.power, len);
            if outputs.body_forces {
                c.body_forces.resize(len * c.body_count, [0.0; 6]);
            } else {
                c.body_forces.clear();
            }
            if let Some(v) = c.contact_point.as_mut() {
                v.resize(len, [0.0; 3]);
            }
            if let Some(v) = c.separation.as_mut() {
                v.resize(len, 0.0);
            }
            if let Some(v) = c.contact_force.as_mut() {
                v.resize(len, [0.0; 3]);
            }
        }
    }

    /// Whether an evaluation writing these outputs should stream them past the caches: when
    /// they are larger than [`STREAMING_BYTES`], as the per-instance columns of a large batch
    /// are (the caches could not hold them for whoever reads them next anyway).
    pub(crate) fn streams(&self) -> bool {
        self.output_bytes() > STREAMING_BYTES
    }

    /// Bytes of the selected `f64` output columns (the status column aside).
    pub(crate) fn output_bytes(&self) -> usize {
        let mut values = self.udot.len() + self.udot_unconstrained.len();
        for c in &self.constraints {
            values += c.position_errors.len()
                + c.velocity_errors.len()
                + c.acceleration_errors.len()
                + c.multipliers.len()
                + c.power.len()
                + c.body_forces.len() * 6
                + c.contact_point.as_ref().map_or(0, |v| v.len() * 3)
                + c.separation.as_ref().map_or(0, Vec::len)
                + c.contact_force.as_ref().map_or(0, |v| v.len() * 3);
        }
        values * std::mem::size_of::<f64>()
    }

    /// The columns of a [`fill_for`](Self::fill_for)-sized evaluation cut into blocks of
    /// `block` consecutive instances (`block > 0`; the last block may be shorter).
    /// `streaming`: whether the lane path writes them with streaming stores ([`streams`](Self::streams)).
    pub(crate) fn blocks(&mut self, block: usize, streaming: bool) -> Vec<EvaluationBlock<'_>> {
        self.blocks_in(0..self.len, block, streaming)
    }

    /// As [`blocks`](Self::blocks), for the instances `range` only (within `0 .. len`): the
    /// first block starts at `range.start`.
    pub(crate) fn blocks_in(
        &mut self,
        range: std::ops::Range<usize>,
        block: usize,
        streaming: bool,
    ) -> Vec<EvaluationBlock<'_>> {
        let block = block.max(1);
        let (nu, outputs) = (self.nu, self.outputs);
        let range = range.start.min(self.len)..range.end.min(self.len);
        let count = range.len().div_ceil(block);
        let mut per_constraint: Vec<std::vec::IntoIter<ConstraintBlock<'_>>> = self
            .constraints
            .iter_mut()
            .map(|c| {
                let (w, bodies) = (c.width, c.body_count);
                let split = |v, width| split_part(v, width, &range, block, count);
                let columns = split(&mut c.position_errors, w)
                    .into_iter()
                    .zip(split(&mut c.velocity_errors, w))
                    .zip(split(&mut c.acceleration_errors, w))
                    .zip(split(&mut c.multipliers, w))
                    .zip(split_part(&mut c.body_forces, bodies, &range, block, count))
                    .zip(split(&mut c.power, 1))
                    .zip(split_optional(&mut c.contact_point, &range, block, count))
                    .zip(split_optional(&mut c.separation, &range, block, count))
                    .zip(split_optional(&mut c.contact_force, &range, block, count));
                columns
                    .map(|((((((((p, v), a), m), f), power), point), sep), force)| {
                        ConstraintBlock {
                            width: w,
                            body_count: bodies,
                            position_errors: p,
                            velocity_errors: v,
                            acceleration_errors: a,
                            multipliers: m,
                            body_forces: f,
                            power,
                            contact_point: point,
                            separation: sep,
                            contact_force: force,
                        }
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
            })
            .collect();
        split_part(&mut self.status, 1, &range, block, count)
            .into_iter()
            .zip(split_part(&mut self.udot, nu, &range, block, count))
            .zip(split_part(
                &mut self.udot_unconstrained,
                nu,
                &range,
                block,
                count,
            ))
            .enumerate()
            .map(
                |(b, ((status, udot), udot_unconstrained))| EvaluationBlock {
                    outputs,
                    start: range.start + b * block,
                    len: status.len(),
                    nu,
                    status,
                    udot,
                    udot_unconstrained,
                    constraints: per_constraint
                        .iter_mut()
                        .filter_map(Iterator::next)
                        .collect(),
                    streaming,
                },
            )
            .collect()
    }
}
