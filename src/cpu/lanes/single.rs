//! Evaluation of the commonest template — one free body and one constraint between it and
//! Ground (a sphere or a point on a plane, a point against the ground, a user's constraint on
//! one body) — in one function per row count: the state gathered, the body's kinematics, `u̇₀`,
//! the constraint's rows (through [`Constraint::evaluate_lanes`](crate::model::Constraint), the
//! interface every constraint goes through), `M⁻¹ Gᵀ`, the Gram matrix, the certified Cholesky
//! solve and `u̇`. The Jacobian blocks, `M⁻¹ Gᵀ`, the Gram matrix and the multipliers are
//! fixed-size locals of `M` rows, not entries of the general path's `MAX_M`-row scratch read back
//! through the plan's per-row slot tables. When an evaluation selects nothing but `u̇`, `u̇₀` and
//! λ (what a study of the dynamics reads, [`Outputs::DYNAMICS`](crate::evaluation::Outputs)),
//! the kernel writes them itself, without the general writer's per-constraint bookkeeping; any
//! other selection (every output, the default) hands its results to the general writer
//! (`Chunk::write_outputs`) where the general path's dynamics would have left them. The kernel
//! owns the loop over a block's chunks, in its copy for the row count, with a load for its
//! template (`Chunk::load_single`), so what stays fixed over a block is looked up once.
//!
//! The arithmetic is the general path's (`dynamics.rs`, `evaluate.rs`), operation for operation
//! and in the same order, so the two give the same bits (`lanes::tests` holds them to it); the
//! tests hold both to the reference path at 1e-12 and across thread counts bit for bit. On the
//! 2-core AMD VM it evaluated u̇ and λ 1.10–1.19× faster than the general path on one thread
//! when it came (rolling sphere 1.34–1.39e7 → 1.55–1.57e7 per second), and 1.81e7 with its own
//! chunk loop and the fused multiply-adds (README "Performance"). Evaluations of every output
//! came to it later: 1.15–1.2× (rolling sphere, 1.40–1.41e7 → 1.66–1.69e7 per second on the
//! Zen 5 VM, with the general writer inlined into the kernel's copies).

// Index loops over rows mirror the general path's loops they are held against.
#![allow(clippy::needless_range_loop)]

use super::dynamics::dot6;
use super::evaluate::{put, reported};
use super::kinematics::apply_row_levels;
use super::solve::solve_sized;
use super::{ALL_LANES, Chunk, MAX_M, Scratch, all_finite};
use crate::batch::status;
use crate::constraints::{ParamLanes, RowLanes};
use crate::evaluation::EvaluationBlock;
use crate::math::lanes::{
    LANES, Lane, LaneMask, LaneVec3, bits, gather_rows, gather_values, is_finite, mul_add,
    rotation_from_quaternion, select, splat,
};

/// What the kernel hands its writer: the rows, `u̇₀`, `u̇` and λ.
type Results<'s, const M: usize> = (
    &'s [RowLanes; M],
    &'s [Lane; 6],
    &'s [Lane; 6],
    &'s [Lane; M],
);

/// Whether `block` selects no output but `u̇`, `u̇₀` and λ, which the kernel writes itself;
/// the others go through the general writer (`Chunk::write_outputs`), with its per-constraint
/// bookkeeping.
#[inline(always)]
fn dynamics_only(block: &EvaluationBlock<'_>) -> bool {
    let selected = block.outputs;
    let contact = block.constraints.first().is_some_and(|out| {
        out.contact_point.is_some() || out.separation.is_some() || out.contact_force.is_some()
    });
    !(selected.position_errors
        || selected.velocity_errors
        || selected.acceleration_errors
        || selected.power
        || selected.body_forces
        || contact)
}

impl Chunk<'_> {
    /// Evaluates every instance of `block` with the one-constraint kernel when the plan takes
    /// it (`LanePlan::single`, at most `MAX_ROWS` rows); returns whether it did (else nothing
    /// is written). Lanes the kernel cannot answer are evaluated on the reference path, as
    /// `evaluate_block` does.
    pub(super) fn evaluate_block_single(
        &mut self,
        scratch: &mut Scratch,
        block: &mut EvaluationBlock<'_>,
    ) -> bool {
        let Some(j) = self.plan.single else {
            return false;
        };
        match self.plan.m {
            1 => self.evaluate_chunks::<1>(j, scratch, block),
            2 => self.evaluate_chunks::<2>(j, scratch, block),
            3 => self.evaluate_chunks::<3>(j, scratch, block),
            4 => self.evaluate_chunks::<4>(j, scratch, block),
            5 => self.evaluate_chunks::<5>(j, scratch, block),
            6 => self.evaluate_chunks::<6>(j, scratch, block),
            _ => return false,
        }
        true
    }

    /// [`evaluate_block_single`](Self::evaluate_block_single) for `M` rows, the free body being
    /// body `j` of the constraint: the loop over the block's chunks inside the copy compiled
    /// for `M`, so that what stays fixed over the block (the columns, the plan's entries) is
    /// looked up once, not per chunk.
    #[inline(never)]
    fn evaluate_chunks<const M: usize>(
        &mut self,
        j: usize,
        scratch: &mut Scratch,
        block: &mut EvaluationBlock<'_>,
    ) {
        let own_writer = dynamics_only(block);
        let mut at = 0;
        while at < block.len {
            let count = (block.len - at).min(LANES);
            // Padding lanes repeat the last instance; they are computed and never written.
            self.load_single(std::array::from_fn(|l| block.start + at + l.min(count - 1)));
            let answered = self.evaluate_rows::<M>(j, own_writer, scratch, block, at, count);
            self.answer_on_reference(answered, block, at, count);
            at += count;
        }
    }

    /// The kernel on the loaded instances, for `M` rows, the free body being body `j` of the
    /// constraint: writes lanes `0..count` into `block` from entry `at` (by its own writer when
    /// `own_writer`, the block selecting only u̇, u̇₀ and λ, else by the general one) and
    /// returns the lanes answered.
    #[inline(always)]
    fn evaluate_rows<const M: usize>(
        &self,
        j: usize,
        own_writer: bool,
        scratch: &mut Scratch,
        block: &mut EvaluationBlock<'_>,
        at: usize,
        count: usize,
    ) -> u32 {
        let (plan, batch, inst) = (self.plan, self.batch, &self.instances);
        let z = splat(0.0);
        let c = &plan.constraints[0];

        // The state, and the free body's kinematics (`Chunk::kinematics`).
        let columns = &batch.free_columns()[0];
        let q: [Lane; 7] = gather_rows(&columns.q, inst);
        let u: [Lane; 6] = gather_rows(&columns.u, inst);
        let time = gather_values(batch.time(), inst);
        let mut ok = is_finite(q.iter().chain(&u).fold(z, |sum, x| sum + *x));
        let rotation = rotation_from_quaternion(&[q[0], q[1], q[2], q[3]]);
        ok = ok & is_finite(rotation.m11);
        let (r, w) = (rotation, LaneVec3::new(u[0], u[1], u[2]));
        // Field by field: the body is updated in place, not built and copied.
        let kin = &mut scratch.kin;
        let body_kin = &mut kin[plan.free_bodies[0]];
        body_kin.rotation = rotation;
        body_kin.origin = LaneVec3::new(q[4], q[5], q[6]);
        body_kin.ang_vel = w;
        body_kin.lin_vel = LaneVec3::new(u[3], u[4], u[5]);
        body_kin.ang_acc = LaneVec3::new(z, z, z);
        body_kin.lin_acc = LaneVec3::new(z, z, z);

        // f − c and u̇₀ = M⁻¹ (f − c).
        let (w_inv, c_g, udot0) = self.unconstrained_acceleration(0, &r, w);

        // The rows, with the generic row-level rules (`Chunk::rows`).
        // The rows live in the scratch, which needs no clearing: `evaluate_lanes` writes them.
        let Some(rows) = scratch.rows.first_chunk_mut::<M>() else {
            return 0; // M ≤ MAX_ROWS < MAX_M: not reached (every lane to the reference path).
        };
        let constraint = &batch.template().constraints()[0].constraint;
        let params = ParamLanes::new(&batch.all_constraint_columns()[0].params, *inst);
        self.with_bodies(c, kin, |bodies| {
            constraint.evaluate_lanes(&params, &self.prepared[0], bodies, rows)
        });
        apply_row_levels(rows, &c.levels);

        // Bias, masked blocks, Y = M⁻¹ Gᵀ, the Gram matrix and rhs = G u̇₀ − b; a disabled
        // constraint's rows get a unit pivot (`Chunk::dynamics`).
        let on = self.enabled[0];
        let all_on = bits(on) == ALL_LANES;
        let inverse_time_constant = self.inverse_time_constant[0];
        let mut g = [[z; 6]; M];
        let mut y = [[z; 6]; M];
        let mut bias = [z; M];
        for k in 0..M {
            let row = &rows[k];
            bias[k] = -row.acceleration_error;
            if plan.row_baumgarte[0] {
                let a = inverse_time_constant;
                bias[k] -= splat(2.0) * a * row.velocity_error + a * a * row.position_error;
            }
            let mut block = row.jacobian[j];
            if !all_on {
                for x in &mut block {
                    *x = select(on, *x, z);
                }
            }
            ok = ok & is_finite(block.iter().fold(z, |sum, x| sum + *x));
            g[k] = block;
            let (b, a) = self.inverse_mass(
                0,
                &w_inv,
                &c_g,
                LaneVec3::new(block[0], block[1], block[2]),
                LaneVec3::new(block[3], block[4], block[5]),
            );
            y[k] = [b.x, b.y, b.z, a.x, a.y, a.z];
            ok = ok & (is_finite(bias[k]) | !on);
        }
        let mut l = [[z; M]; M];
        let mut rhs = [z; M];
        for k in 0..M {
            for n in k..M {
                l[n][k] = z + dot6(&g[k], &y[n]);
            }
            l[k][k] = select(on, l[k][k], splat(1.0));
            rhs[k] = select(on, (z + dot6(&g[k], &udot0)) - bias[k], z);
        }
        let mut lambda = [z; M];
        let before = bits(ok);
        solve_sized::<M, M>(&mut l, &rhs, &[on; M], &mut ok, &mut lambda);
        let redundant = before & !bits(ok);
        if redundant != 0 {
            let (g_blocks, y_blocks) = (&mut scratch.g, &mut scratch.y_blocks);
            ok = ok
                | self.single_min_norm(redundant, j, &g, &y, &rhs, &mut lambda, g_blocks, y_blocks);
        }

        // u̇ = u̇₀ − M⁻¹ Gᵀ λ.
        let mut udot = [z; 6];
        for n in 0..6 {
            let mut sum = z;
            for k in 0..M {
                sum = mul_add(y[k][n], lambda[k], sum);
            }
            udot[n] = udot0[n] - sum;
        }
        let ok = ok & is_finite(time);
        if own_writer {
            let rows: &[RowLanes; M] = rows;
            return self.write_single((rows, &udot0, &udot, &lambda), ok, block, at, count);
        }
        // Any other output: the general writer, reading the kernel's results where the general
        // path's dynamics leaves them (the rows and the kinematics are there already).
        let dynamics = &mut scratch.dynamics;
        dynamics.udot0[0] = udot0;
        dynamics.udot[0] = udot;
        dynamics.lambda[..M].copy_from_slice(&lambda);
        for k in 0..M {
            scratch.g[k][j] = g[k];
        }
        self.write_outputs(scratch, ok, block, at, count)
    }

    /// Writes lanes `0..count` of the kernel's results (`u̇`, `u̇₀` and λ, those selected)
    /// into `block` from entry `at`, and returns the lanes answered, with the checks
    /// `Chunk::evaluate` makes: λ, `u̇` and the power −λ · verr finite.
    #[inline(always)]
    fn write_single<const M: usize>(
        &self,
        (rows, udot0, udot, lambda): Results<'_, M>,
        mut ok: LaneMask,
        block: &mut EvaluationBlock<'_>,
        at: usize,
        count: usize,
    ) -> u32 {
        let selected = block.outputs;
        ok = ok & all_finite(lambda) & all_finite(udot);
        let mut total_power = splat(0.0);
        for k in 0..M {
            total_power -= lambda[k] * rows[k].velocity_error;
        }
        ok = ok & is_finite(total_power);
        let nu = block.nu;
        if selected.udot {
            put(block.udot, nu, 0, at, count, udot);
        }
        if selected.udot_unconstrained {
            put(block.udot_unconstrained, nu, 0, at, count, udot0);
        }
        if selected.multipliers {
            let slots = &self.plan.constraints[0].report_slots;
            let out = &mut block.constraints[0];
            let mu = reported(slots, |r| lambda[r]);
            put(out.multipliers, out.width, 0, at, count, &mu[..slots.len()]);
        }
        block.status[at..at + count].fill(status::OK);
        bits(ok) & !self.reference_only
    }

    /// The minimum-norm multipliers of lanes `lanes` (`Chunk::min_norm_multipliers`, which
    /// reads the general path's scratch layout), for the kernel's own arrays.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn single_min_norm<const M: usize>(
        &self,
        lanes: u32,
        j: usize,
        g: &[[Lane; 6]; M],
        y: &[[Lane; 6]; M],
        rhs: &[Lane; M],
        lambda: &mut [Lane; M],
        g_blocks: &mut [[[Lane; 6]; 2]; MAX_M],
        y_blocks: &mut [[[Lane; 6]; 2]; MAX_M],
    ) -> LaneMask {
        let mut all_rhs = [splat(0.0); MAX_M];
        let mut all_lambda = [splat(0.0); MAX_M];
        for k in 0..M {
            g_blocks[k][j] = g[k];
            y_blocks[k][j] = y[k];
            all_rhs[k] = rhs[k];
            all_lambda[k] = lambda[k];
        }
        let answered =
            self.min_norm_multipliers(lanes, g_blocks, y_blocks, &all_rhs, &mut all_lambda);
        lambda.copy_from_slice(&all_lambda[..M]);
        answered
    }
}
