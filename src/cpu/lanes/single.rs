//! Evaluation and stepping of the commonest template — one free body and one constraint between
//! it and Ground (a sphere or a point on a plane, a point against the ground, a user's
//! constraint on one body) — in one function per row count: the body's kinematics, `u̇₀`,
//! the constraint's rows (through [`Constraint::evaluate_lanes`](crate::model::Constraint), the
//! interface every constraint goes through), `M⁻¹ Gᵀ`, the Gram matrix, the certified `U D Uᵀ`
//! solve and `u̇`. The Jacobian blocks, `M⁻¹ Gᵀ`, the Gram matrix and the multipliers are
//! fixed-size locals of `M` rows, not entries of the general path's `MAX_M`-row scratch read back
//! through the plan's per-row slot tables. The kernel writes whatever the evaluation selects
//! itself (`Chunk::write_single`), straight from those locals, for one constraint of `M` rows
//! on one free body: none of the general writer's per-constraint bookkeeping, and no copy of
//! its results into the general path's scratch. It owns the loop over a block's chunks, in its
//! copy for the row count, with a load for its template (`Chunk::load_single`), so what stays
//! fixed over a block is looked up once; full chunks run in a copy where the lane count is a
//! constant, so their writes are the transposes alone, and a block's last, partial chunk in
//! another.
//!
//! The arithmetic is the general path's (`dynamics.rs`, `evaluate.rs`), operation for operation
//! and in the same order, so the two give the same bits (`lanes::tests` holds them to it); the
//! tests hold both to the reference path at 1e-12 and across thread counts bit for bit. On the
//! 2-core AMD VM it evaluated u̇ and λ 1.10–1.19× faster than the general path on one thread
//! when it came (rolling sphere 1.34–1.39e7 → 1.55–1.57e7 per second), and 1.81e7 with its own
//! chunk loop and the fused multiply-adds (`docs/performance-log.md`). Evaluations of every output
//! came to it later: 1.15–1.2× (rolling sphere, 1.40–1.41e7 → 1.66–1.69e7 per second on the
//! Zen 5 VM, with the general writer inlined into the kernel's copies), and 1.05–1.08× more
//! with the kernel's own writer and the full chunks' copy (1.66–1.72e7 → 1.80–1.85e7 per
//! second, N = 10³; 969 → about 850 instructions an evaluation).
//!
//! Stepping's state derivative takes the same dynamics (`Chunk::single_dynamics`, then
//! `derivative_single` instead of the writer), which made RK4 1.19–1.21× and Euler 1.15–1.16×
//! as fast on one thread (rolling ball, N = 10⁴, Zen 5 VM).

// Index loops over rows mirror the general path's loops they are held against.
#![allow(clippy::needless_range_loop)]

use super::dynamics::dot6;
use super::evaluate::{Place, put, put_reported};
use super::kinematics::apply_row_levels;
use super::load::PREFETCH_AHEAD;
use super::solve::solve_sized;
use super::{ALL_LANES, BodyLanes, Chunk, MAX_BODIES, MAX_M, Scratch, all_finite};
use crate::batch::status;
use crate::constraints::{ParamLanes, RowLanes};
use crate::cpu::evaluate::BaumgarteMode;
use crate::evaluation::EvaluationBlock;
use crate::math::lanes::{
    LANES, Lane, LaneMask, LaneVec3, avx512, bits, is_finite, mul_add, quaternion_rate,
    rotation_from_quaternion, select, splat,
};

/// What the kernel's dynamics leave besides the kinematics and rows, handed to what follows
/// them ([`AfterDynamics`], from `Chunk::single_dynamics`): references to the kernel's locals,
/// which stay where they are (returned by value, they were copied, a kilobyte per chunk).
struct SingleDynamics<'d, const M: usize> {
    /// The lanes where every step was finite and the solve certified (or the minimum-norm
    /// route answered).
    ok: LaneMask,
    /// `u̇₀ = M⁻¹ (f − c)`.
    udot0: &'d [Lane; 6],
    /// `u̇ = u̇₀ − M⁻¹ Gᵀ λ`.
    udot: &'d [Lane; 6],
    /// λ per row (0 on disabled rows).
    lambda: &'d [Lane; M],
    /// The free body's masked Jacobian block per row.
    g: &'d [[Lane; 6]; M],
    /// `c_G = R c`.
    c_g: &'d LaneVec3,
}

/// What the kernel hands its writer: the rows, `u̇₀`, `u̇`, λ and the free body's masked
/// Jacobian blocks.
type Results<'s, const M: usize> = (
    &'s [RowLanes; M],
    &'s [Lane; 6],
    &'s [Lane; 6],
    &'s [Lane; M],
    &'s [[Lane; 6]; M],
);

/// What follows the kernel's dynamics ([`Chunk::single_dynamics`]): evaluation's writer
/// ([`WriteOutputs`]) or stepping's state derivative ([`StateDerivative`]). A trait with
/// methods inlined always, not a closure: the compiler left a closure of this size as a call,
/// which kept the dynamics' locals in memory (zeroed, then written) — 1.03× the u̇-and-λ
/// evaluation's instructions.
trait AfterDynamics<const M: usize> {
    /// Finishes the loaded instances with `d` and what `scratch` holds; returns the lanes
    /// answered.
    fn finish(self, chunk: &Chunk<'_>, d: SingleDynamics<'_, M>, scratch: &Scratch) -> u32;
}

/// Evaluation: writes lanes `0..count` of the selected outputs into `block` from entry `at`
/// (the lanes' `time` must be finite).
struct WriteOutputs<'b, 'e> {
    block: &'b mut EvaluationBlock<'e>,
    at: usize,
    count: usize,
    time: Lane,
}

impl<const M: usize> AfterDynamics<M> for WriteOutputs<'_, '_> {
    #[inline(always)]
    fn finish(self, chunk: &Chunk<'_>, d: SingleDynamics<'_, M>, scratch: &Scratch) -> u32 {
        let ok = d.ok & is_finite(self.time);
        let Some(rows) = scratch.rows.first_chunk::<M>() else {
            return 0; // M ≤ MAX_ROWS < MAX_M: not reached.
        };
        let results = (rows, d.udot0, d.udot, d.lambda, d.g);
        chunk.write_single(results, &scratch.kin, ok, self.block, self.at, self.count)
    }
}

/// Stepping: `ẏ` at the state `(q, u, work)` into `dy`.
struct StateDerivative<'y> {
    q: &'y [Lane; 7],
    u: &'y [Lane; 6],
    dy: &'y mut [Lane; 15],
}

impl<const M: usize> AfterDynamics<M> for StateDerivative<'_> {
    /// `Chunk::derivative`'s formulas, operation for operation.
    #[inline(always)]
    fn finish(self, chunk: &Chunk<'_>, d: SingleDynamics<'_, M>, scratch: &Scratch) -> u32 {
        let (q, u, dy) = (self.q, self.u, self.dy);
        let z = splat(0.0);
        let mut ok = d.ok;
        // −λ · (G u), the constraint forces' power.
        let mut driven = z;
        for k in 0..M {
            let gu = z + dot6(&d.g[k], u);
            driven -= d.lambda[k] * gu;
        }
        let k = &scratch.kin[chunk.plan.free_bodies[0]];
        let rate = quaternion_rate(&[q[0], q[1], q[2], q[3]], &k.ang_vel);
        dy[..4].copy_from_slice(&rate);
        dy[4] = k.lin_vel.x;
        dy[5] = k.lin_vel.y;
        dy[6] = k.lin_vel.z;
        dy[7..13].copy_from_slice(d.udot);
        // Applied power F · v_com + T · w (cpu::integrate's applied_power).
        let body = &chunk.bodies[0];
        let v_com = k.lin_vel + k.ang_vel.cross(d.c_g);
        let power = z + (body.force.dot(&v_com) + body.torque.dot(&k.ang_vel));
        dy[13] = driven;
        dy[14] = power;
        ok = ok & all_finite(dy);
        bits(ok) & !chunk.reference_only
    }
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
    /// looked up once, not per chunk. Where the CPU has AVX-512, in the copy compiled for it.
    #[inline(never)]
    fn evaluate_chunks<const M: usize>(
        &mut self,
        j: usize,
        scratch: &mut Scratch,
        block: &mut EvaluationBlock<'_>,
    ) {
        #[cfg(target_arch = "x86_64")]
        if avx512::enabled() {
            // SAFETY: `enabled` is true only where the CPU has every feature the copy is
            // compiled for.
            return unsafe { self.evaluate_chunks_avx512::<M>(j, scratch, block) };
        }
        self.evaluate_chunks_body::<M>(j, scratch, block)
    }

    /// [`evaluate_chunks`](Self::evaluate_chunks) compiled for AVX-512, whose 32 vector
    /// registers hold what the 16 of x86-64-v3 spill (`math::lanes::avx512`); the same bits.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx512cd")]
    #[inline(never)]
    fn evaluate_chunks_avx512<const M: usize>(
        &mut self,
        j: usize,
        scratch: &mut Scratch,
        block: &mut EvaluationBlock<'_>,
    ) {
        self.evaluate_chunks_body::<M>(j, scratch, block)
    }

    /// The body of [`evaluate_chunks`](Self::evaluate_chunks), inlined into both its copies.
    #[inline(always)]
    fn evaluate_chunks_body<const M: usize>(
        &mut self,
        j: usize,
        scratch: &mut Scratch,
        block: &mut EvaluationBlock<'_>,
    ) {
        let mut at = 0;
        // Full chunks, with the lane count a constant in this copy of the kernel (its writes
        // take the transposes only), then the last, partial chunk.
        while at + LANES <= block.len {
            if let Some(ahead) = PREFETCH_AHEAD {
                self.prefetch_single(block.start + at + ahead);
            }
            self.load_single(std::array::from_fn(|l| block.start + at + l));
            let answered = self.evaluate_rows::<M>(j, scratch, block, at, LANES);
            self.answer_on_reference(answered, block, at, LANES);
            at += LANES;
        }
        if at < block.len {
            let count = block.len - at;
            // Padding lanes repeat the last instance; they are computed and never written.
            self.load_single(std::array::from_fn(|l| block.start + at + l.min(count - 1)));
            let answered = self.evaluate_rows::<M>(j, scratch, block, at, count);
            self.answer_on_reference(answered, block, at, count);
        }
    }

    /// The kernel on the loaded instances, for `M` rows, the free body being body `j` of the
    /// constraint: writes lanes `0..count` into `block` from entry `at` and returns the lanes
    /// answered.
    #[inline(always)]
    fn evaluate_rows<const M: usize>(
        &self,
        j: usize,
        scratch: &mut Scratch,
        block: &mut EvaluationBlock<'_>,
        at: usize,
        count: usize,
    ) -> u32 {
        let (batch, inst) = (self.batch, &self.instances);
        let columns = &batch.free_columns()[0];
        let q: [Lane; 7] = inst.rows(&columns.q);
        let u: [Lane; 6] = inst.rows(&columns.u);
        let time = inst.values(batch.time());
        let then = WriteOutputs {
            block,
            at,
            count,
            time,
        };
        self.single_dynamics::<M>(j, &q, &u, BaumgarteMode::Template, scratch, then)
    }

    /// The constrained dynamics of the loaded instances at `q` and `u`, for `M` rows, the free
    /// body being body `j` of the constraint, with the Baumgarte terms of `baumgarte`: the
    /// free body's kinematics into `scratch.kin` (accelerations zero), the rows into the first
    /// `M` of `scratch.rows`, the rest ([`SingleDynamics`]) handed to `then`, whose answer (the
    /// lanes answered) it returns. Evaluation's and stepping's kernel alike (`evaluate_rows`,
    /// `derivative_single`).
    #[inline(always)]
    fn single_dynamics<const M: usize>(
        &self,
        j: usize,
        q: &[Lane; 7],
        u: &[Lane; 6],
        baumgarte: BaumgarteMode,
        scratch: &mut Scratch,
        then: impl AfterDynamics<M>,
    ) -> u32 {
        let (plan, batch, inst) = (self.plan, self.batch, &self.instances);
        let z = splat(0.0);
        let c = &plan.constraints[0];

        // The free body's kinematics (`Chunk::kinematics`).
        let mut ok = is_finite(q.iter().chain(u).fold(z, |sum, x| sum + *x));
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
        let params = ParamLanes::of(&batch.all_constraint_columns()[0].params, *inst);
        self.with_bodies(c, kin, |bodies| {
            constraint.evaluate_lanes(&params, &self.prepared[0], bodies, rows)
        });
        apply_row_levels(rows, &c.levels);

        // Bias, masked blocks, Y = M⁻¹ Gᵀ, the Gram matrix and rhs = G u̇₀ − b; a disabled
        // constraint's rows get a unit pivot (`Chunk::dynamics`).
        let with_baumgarte = match baumgarte {
            BaumgarteMode::Template => plan.row_baumgarte[0],
            BaumgarteMode::All => true,
            BaumgarteMode::Off => false,
        };
        let on = self.enabled[0];
        let all_on = bits(on) == ALL_LANES;
        let inverse_time_constant = self.inverse_time_constant[0];
        let mut g = [[z; 6]; M];
        let mut y = [[z; 6]; M];
        let mut bias = [z; M];
        for k in 0..M {
            let row = &rows[k];
            bias[k] = -row.acceleration_error;
            if with_baumgarte {
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
        let done = SingleDynamics {
            ok,
            udot0: &udot0,
            udot: &udot,
            lambda: &lambda,
            g: &g,
            c_g: &c_g,
        };
        then.finish(self, done, scratch)
    }

    /// `ẏ` at state `y` (`(q, u, work)` of the one free body) into `dy`, with the Baumgarte
    /// terms of `baumgarte`, for `M` rows, the free body being body `j` of the constraint; returns
    /// the lanes answered. Stepping's one-constraint kernel: `Chunk::derivative`'s formulas,
    /// operation for operation and in the same order, on the kernel's dynamics
    /// ([`single_dynamics`](Self::single_dynamics)), so the two give the same bits
    /// (`lanes::tests`).
    #[inline(never)]
    pub(super) fn derivative_single<const M: usize>(
        &self,
        j: usize,
        y: &[Lane],
        baumgarte: BaumgarteMode,
        dy: &mut [Lane],
        scratch: &mut Scratch,
    ) -> u32 {
        let (Some(q), Some(u), Some(dy)) = (
            y.first_chunk::<7>(),
            y.get(7..).and_then(|u| u.first_chunk::<6>()),
            dy.first_chunk_mut::<15>(),
        ) else {
            return 0; // Not reached: one free body's state is 15 values.
        };
        let then = StateDerivative { q, u, dy };
        self.single_dynamics::<M>(j, q, u, baumgarte, scratch, then)
    }

    /// Writes lanes `0..count` of the outputs `block` selects from the kernel's results into
    /// `block` from entry `at`, and returns the lanes answered: those `ok` keeps whose λ, `u̇`
    /// and power −λ · verr are finite (the checks `Chunk::write_outputs` makes). Each output is
    /// the general writer's formula, operation for operation (the power is the constraint's,
    /// and so the total); the contact report comes from the kind's
    /// [`report_lanes`](crate::model::Constraint::report_lanes) at the bodies' kinematics `kin`.
    #[inline(always)]
    fn write_single<const M: usize>(
        &self,
        (rows, udot0, udot, lambda, g): Results<'_, M>,
        kin: &[BodyLanes; MAX_BODIES],
        mut ok: LaneMask,
        block: &mut EvaluationBlock<'_>,
        at: usize,
        count: usize,
    ) -> u32 {
        let z = splat(0.0);
        let selected = block.outputs;
        let place = Place::of(block, at, count);
        ok = ok & all_finite(lambda) & all_finite(udot);
        let mut power = z;
        for k in 0..M {
            power -= lambda[k] * rows[k].velocity_error;
        }
        ok = ok & is_finite(power);
        let nu = block.nu;
        if selected.udot {
            put(block.udot, nu, 0, place, udot);
        }
        if selected.udot_unconstrained {
            put(block.udot_unconstrained, nu, 0, place, udot0);
        }
        let c = &self.plan.constraints[0];
        let on = self.enabled[0];
        let out = &mut block.constraints[0];
        if selected.power {
            put(out.power, 1, 0, place, &[power]);
        }
        if selected.body_forces {
            let width = 6 * out.body_count;
            let column = out.body_forces.as_flattened_mut();
            // Σ λ G_body, as the general writer sums it.
            let force = |b: usize| {
                let mut force = [z; 6];
                for k in 0..M {
                    for n in 0..6 {
                        force[n] = mul_add(lambda[k], rows[k].jacobian[b][n], force[n]);
                    }
                }
                force
            };
            if c.body_count == 2 && width == 12 {
                // Both bodies' forces are a whole row: one transpose at constant offsets.
                let (first, second) = (force(0), force(1));
                let both: [Lane; 12] =
                    std::array::from_fn(|n| if n < 6 { first[n] } else { second[n - 6] });
                put(column, 12, 0, place, &both);
            } else {
                for b in 0..c.body_count {
                    put(column, width, 6 * b, place, &force(b));
                }
            }
        }
        let slots = &c.report_rows;
        if selected.position_errors {
            put_reported(out.position_errors, slots, place, |r| {
                rows.get(r).map(|row| row.position_error)
            });
        }
        if selected.velocity_errors {
            put_reported(out.velocity_errors, slots, place, |r| {
                rows.get(r).map(|row| row.velocity_error)
            });
        }
        if selected.acceleration_errors {
            let mut acceleration_errors = [z; M];
            for k in 0..M {
                let g_udot = z + dot6(&g[k], udot);
                acceleration_errors[k] = select(on, g_udot + rows[k].acceleration_error, z);
            }
            let a = &acceleration_errors;
            put_reported(out.acceleration_errors, slots, place, |r| a.get(r).copied());
        }
        if selected.multipliers {
            put_reported(out.multipliers, slots, place, |r| lambda.get(r).copied());
        }
        self.put_contact_report(0, kin, lambda, out, place);
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
