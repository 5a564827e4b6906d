//! Evaluation on lanes: the twin of `cpu::evaluate`'s per-instance evaluation for four
//! instances at once, written straight into the [`Evaluation`](crate::evaluation::Evaluation)'s
//! columns. Every output is computed as the reference computes it — `G u̇ + k` for the
//! acceleration errors, `Σ λ G` for the body forces, `−λ · verr` for the power, the kind's
//! [`report_lanes`](crate::model::Constraint::report_lanes) for contact point, separation and
//! force — and any lane the lane formulas cannot answer is evaluated on the reference path,
//! which also sets its status bits.

// Index loops over rows, lanes and slots mirror the reference formulas they are held against.
#![allow(clippy::needless_range_loop)]

use super::dynamics::{Dynamics, dot6};
use super::kept::Kept;
use super::{BodyLanes, Chunk, LanePlan, MAX_BODIES, MAX_Y, Scratch, all_finite};
use crate::batch::{Batch, status};
use crate::constraints::{MAX_ROWS, ParamLanes};
use crate::cpu::evaluate::BaumgarteMode;
use crate::evaluation::{ConstraintBlock, EvaluationBlock};
use crate::math::lanes::{
    LANES, Lane, LaneMask, bits, is_finite, mul_add, scatter_fixed_with, scatter_rows_with, select,
    splat, streaming_fence, values,
};

/// The lanes of each of `x`'s values, by a loop (`map` was left as a call by the compiler).
#[inline(always)]
fn lane_values<const W: usize>(x: &[Lane; W]) -> [[f64; LANES]; W] {
    let mut out = [[0.0; LANES]; W];
    for k in 0..W {
        out[k] = values(x[k]);
    }
    out
}

/// Where a chunk's lanes `0..count` go: entries `at..at + count` of a block's columns, with
/// streaming stores or not (the block's choice, `EvaluationBlock::streaming`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub(super) at: usize,
    pub(super) count: usize,
    pub(super) streaming: bool,
}

impl Place {
    /// Entries `at..at + count` of `block`'s columns.
    #[inline(always)]
    pub(super) fn of(block: &EvaluationBlock<'_>, at: usize, count: usize) -> Self {
        Self {
            at,
            count,
            streaming: block.streaming,
        }
    }
}

/// Writes lanes `0..count` of the values `x` into `column` at entries
/// `(at + l) · width + offset + k`: a full chunk (every chunk but a block's last) by
/// [`scatter_rows_with`]'s transpose ([`scatter_fixed_with`] for the common widths), streaming
/// when `place` says so, a partial one value by value.
#[inline(always)]
pub(super) fn put(column: &mut [f64], width: usize, offset: usize, place: Place, x: &[Lane]) {
    let Place {
        at,
        count,
        streaming,
    } = place;
    if count == LANES {
        // The widths the kernels write (one value, a 3-vector, a body's six, two bodies'
        // twelve) with the width a constant; others by the general transpose.
        match width {
            1 => return scatter_fixed_with::<1>(column, offset, at, x, streaming),
            2 => return scatter_fixed_with::<2>(column, offset, at, x, streaming),
            3 => return scatter_fixed_with::<3>(column, offset, at, x, streaming),
            6 => return scatter_fixed_with::<6>(column, offset, at, x, streaming),
            12 => return scatter_fixed_with::<12>(column, offset, at, x, streaming),
            _ => {
                let block = &mut column[at * width..(at + count) * width];
                return scatter_rows_with(block, width, offset, x, streaming);
            }
        }
    }
    if width == 0 {
        return; // Nothing to write (a constraint that reports no slot), and no rows to split.
    }
    let block = &mut column[at * width..(at + count) * width];
    for (l, row) in block.chunks_exact_mut(width).enumerate() {
        for (value, x) in row[offset..offset + x.len()].iter_mut().zip(x) {
            *value = values(*x)[l];
        }
    }
}

/// The row of a report slot that reports none (`ConstraintPlan::report_rows`): beyond every
/// row count.
pub(super) const NOT_REPORTED: usize = usize::MAX;

/// Writes lanes `0..count` of each report slot's value of the row it reports (`value(row)`,
/// `None` for a row out of range) or 0 where it reports none into `column` (one value a slot,
/// `slots.len()` an instance) at `place`. `slots` are a constraint's `report_rows`; the usual
/// widths (one to three slots) take [`put_slots`], whose width is a constant.
#[inline(always)]
pub(super) fn put_reported(
    column: &mut [f64],
    slots: &[usize],
    place: Place,
    value: impl Fn(usize) -> Option<Lane>,
) {
    match *slots {
        [a] => put_slots(column, [a], place, value),
        [a, b] => put_slots(column, [a, b], place, value),
        [a, b, c] => put_slots(column, [a, b, c], place, value),
        _ => {
            let mut x = [splat(0.0); MAX_ROWS];
            for (x, row) in x.iter_mut().zip(slots) {
                *x = value(*row).unwrap_or(splat(0.0));
            }
            put(column, slots.len(), 0, place, &x[..slots.len()]);
        }
    }
}

/// [`put_reported`] for `W` slots: the values go straight from the rows to the transpose,
/// one comparison a slot, with the width a constant — not through a loop over the slots
/// into an array of `MAX_ROWS` (that took a sixteenth of an every-output evaluation's
/// instructions, `docs/performance-log.md`).
#[inline(always)]
fn put_slots<const W: usize>(
    column: &mut [f64],
    slots: [usize; W],
    place: Place,
    value: impl Fn(usize) -> Option<Lane>,
) {
    let x: [Lane; W] = slots.map(|row| value(row).unwrap_or(splat(0.0)));
    put(column, W, 0, place, &x);
}

/// What a rayon job of an evaluation keeps across its blocks.
pub(crate) struct Buffers<'a> {
    pub(super) chunk: Chunk<'a>,
    /// The thread's kept scratch ([`kept`](super::kept)).
    pub(super) scratch: Kept<Scratch>,
    pub(super) y: [Lane; MAX_Y],
}

impl<'a> Buffers<'a> {
    /// Buffers for evaluating `batch` with `plan`.
    pub(crate) fn new(batch: &'a Batch, plan: &'a LanePlan) -> Self {
        Self {
            chunk: Chunk::new(batch, plan),
            scratch: Kept::take(),
            y: [splat(0.0); MAX_Y],
        }
    }
}

/// Evaluates every instance of `block` on lanes, falling back to the reference path lane by
/// lane.
pub(crate) fn evaluate_block(buffers: &mut Buffers<'_>, block: &mut EvaluationBlock<'_>) {
    let Buffers { chunk, scratch, y } = buffers;
    if !chunk.evaluate_block_single(scratch, block) {
        let mut at = 0;
        while at < block.len {
            let count = (block.len - at).min(LANES);
            // Padding lanes repeat the last instance; they are computed and never written.
            chunk.load(std::array::from_fn(|l| block.start + at + l.min(count - 1)));
            let answered = chunk.evaluate(scratch, y, block, at, count);
            chunk.answer_on_reference(answered, block, at, count);
            at += count;
        }
    }
    if block.streaming {
        // The block's streaming stores, ordered before the pool hands its results on.
        streaming_fence();
    }
}

impl Chunk<'_> {
    /// Evaluates on the reference path each of lanes `0..count` (entries `at + l` of `block`)
    /// that `answered` leaves out.
    #[inline(always)]
    pub(super) fn answer_on_reference(
        &self,
        answered: u32,
        block: &mut EvaluationBlock<'_>,
        at: usize,
        count: usize,
    ) {
        let missing = !answered & ((1 << count) - 1);
        if missing == 0 {
            return;
        }
        if block.streaming {
            // The lanes' partial values went out by streaming stores: ordered before the
            // reference path overwrites them.
            streaming_fence();
        }
        for l in 0..count {
            if missing & (1 << l) != 0 {
                self.batch.evaluate_instance_into(block, at + l);
            }
        }
    }

    /// Evaluates the loaded instances at their batch states and writes lanes `0..count` into
    /// `block` from entry `at`; returns the lanes answered (the others hold partial values that
    /// the caller must overwrite).
    pub(super) fn evaluate(
        &self,
        scratch: &mut Scratch,
        y: &mut [Lane; MAX_Y],
        block: &mut EvaluationBlock<'_>,
        at: usize,
        count: usize,
    ) -> u32 {
        let time = self.gather_state_into(y);
        let ok = self.dynamics(y, time, BaumgarteMode::Template, scratch) & is_finite(time);
        self.write_outputs(scratch, ok, block, at, count)
    }

    /// Writes lanes `0..count` of the selected outputs of what `scratch` holds — the rows, the
    /// masked Jacobian blocks of the free bodies, `u̇₀`, `u̇` and λ of the loaded instances, and
    /// the bodies' kinematics (for the contact reports) — into `block` from entry `at`; returns
    /// the lanes answered: those `ok` keeps whose λ, `u̇` and powers are finite. The general
    /// path's writer; the one-constraint kernel has its own (`Chunk::write_single`), which
    /// must give the same bits.
    #[inline(always)]
    pub(super) fn write_outputs(
        &self,
        scratch: &Scratch,
        mut ok: LaneMask,
        block: &mut EvaluationBlock<'_>,
        at: usize,
        count: usize,
    ) -> u32 {
        let plan = self.plan;
        let (kin, rows, g) = (&scratch.kin, &scratch.rows, &scratch.g);
        let Dynamics {
            udot0,
            udot,
            lambda,
            ..
        } = &scratch.dynamics;
        ok = ok & all_finite(&lambda[..plan.m]);

        let (nu, selected) = (block.nu, block.outputs);
        let place = Place::of(block, at, count);
        for slot in 0..plan.free {
            ok = ok & all_finite(&udot[slot]);
            if selected.udot {
                put(block.udot, nu, 6 * slot, place, &udot[slot]);
            }
            if selected.udot_unconstrained {
                put(block.udot_unconstrained, nu, 6 * slot, place, &udot0[slot]);
            }
        }

        // Each constraint's power −λ · verr must be finite whether it is selected or not (its
        // finiteness is part of the status, which the reference path sets): their sum is
        // finite exactly when each is (an overflowing sum of finite powers only sends the lane
        // to the reference path).
        let zero = splat(0.0);
        let mut total_power = zero;
        for r in 0..plan.m {
            total_power -= lambda[r] * rows[r].velocity_error;
        }
        ok = ok & is_finite(total_power);

        let per_row = selected.position_errors
            || selected.velocity_errors
            || selected.acceleration_errors
            || selected.multipliers;
        for (k, c) in plan.constraints.iter().enumerate() {
            let out = &mut block.constraints[k];
            let own = &rows[c.offset..c.offset + c.rows];
            let multipliers = &lambda[c.offset..c.offset + c.rows];

            // aerr = G u̇ + k on enabled rows, 0 on disabled ones; power = −λ · verr; the
            // force on each body Σ λ G_body — each only when selected.
            let mut acceleration_errors = [zero; MAX_ROWS];
            if selected.acceleration_errors {
                for r in 0..c.rows {
                    let at_row = c.offset + r;
                    let mut g_udot = zero;
                    for j in 0..c.body_count {
                        if let Some(s) = c.slots[j] {
                            g_udot += dot6(&g[at_row][j], &udot[s]);
                        }
                    }
                    acceleration_errors[r] = select(
                        self.enabled[at_row],
                        g_udot + own[r].acceleration_error,
                        zero,
                    );
                }
            }
            if selected.power {
                let mut power = zero;
                for (row, multiplier) in own.iter().zip(multipliers) {
                    power -= *multiplier * row.velocity_error;
                }
                put(out.power, 1, 0, place, &[power]);
            }
            if selected.body_forces {
                let mut forces = [[zero; 6]; 2];
                for (row, multiplier) in own.iter().zip(multipliers) {
                    for j in 0..c.body_count {
                        for k in 0..6 {
                            forces[j][k] = mul_add(*multiplier, row.jacobian[j][k], forces[j][k]);
                        }
                    }
                }
                let bodies = out.body_count;
                for j in 0..c.body_count {
                    let f = lane_values(&forces[j]);
                    for l in 0..count {
                        out.body_forces[(at + l) * bodies + j] = std::array::from_fn(|k| f[k][l]);
                    }
                }
            }

            if per_row {
                // Each selected output's reported values (0 in a slot no row reports), written
                // at once; an output not selected is not gathered.
                let slots = &c.report_rows;
                if selected.position_errors {
                    put_reported(out.position_errors, slots, place, |r| {
                        own.get(r).map(|row| row.position_error)
                    });
                }
                if selected.velocity_errors {
                    put_reported(out.velocity_errors, slots, place, |r| {
                        own.get(r).map(|row| row.velocity_error)
                    });
                }
                if selected.acceleration_errors {
                    let a = &acceleration_errors[..c.rows];
                    put_reported(out.acceleration_errors, slots, place, |r| a.get(r).copied());
                }
                if selected.multipliers {
                    put_reported(out.multipliers, slots, place, |r| {
                        multipliers.get(r).copied()
                    });
                }
            }

            self.put_contact_report(k, kin, multipliers, out, place);
        }
        let answered = bits(ok) & !self.reference_only;
        block.status[at..at + count].fill(status::OK);
        answered
    }

    /// Writes lanes `0..count` of constraint `k`'s contact report — its kind's
    /// [`report_lanes`](crate::model::Constraint::report_lanes) at the bodies' kinematics
    /// `kin` and its `multipliers` — into those of `out`'s contact columns the evaluation
    /// selects, at `place`. Both writers' (general and one-constraint kernel).
    #[inline(always)]
    pub(super) fn put_contact_report(
        &self,
        k: usize,
        kin: &[BodyLanes; MAX_BODIES],
        multipliers: &[Lane],
        out: &mut ConstraintBlock<'_>,
        place: Place,
    ) {
        if out.contact_point.is_none() && out.separation.is_none() && out.contact_force.is_none() {
            return;
        }
        let c = &self.plan.constraints[k];
        let constraint = &self.batch.template().constraints()[k].constraint;
        let cols = &self.batch.all_constraint_columns()[k];
        let params = ParamLanes::of(&cols.params, self.instances);
        let report = self.with_bodies(c, kin, |bodies| {
            constraint.report_lanes(&params, &self.prepared[k], bodies, multipliers)
        });
        if let Some(v) = out.contact_point.as_deref_mut() {
            let p: [Lane; 3] = report.contact_point.into();
            put(v.as_flattened_mut(), 3, 0, place, &p);
        }
        if let Some(v) = out.separation.as_deref_mut() {
            put(v, 1, 0, place, &[report.separation]);
        }
        if let Some(v) = out.contact_force.as_deref_mut() {
            let f: [Lane; 3] = report.contact_force.into();
            put(v.as_flattened_mut(), 3, 0, place, &f);
        }
    }
}
