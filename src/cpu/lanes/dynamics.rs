//! The constrained dynamics of a chunk: `u̇₀ = M⁻¹ (f − c)`, the rows, `λ` from the certified
//! solve of `G M⁻¹ Gᵀ λ = G u̇₀ − b`, and `u̇ = u̇₀ − M⁻¹ Gᵀ λ` — shared by stepping (the state
//! derivative) and evaluation (the reported outputs).

// Index loops over rows, lanes and slots mirror the reference formulas they are held against.
#![allow(clippy::needless_range_loop)]

use simba::simd::SimdValue;

use super::reduce::reduced_lanes;
use super::solve::solve_certified;
use super::{ALL_LANES, Chunk, Fixed, MAX_FREE, MAX_M, Runtime, Scratch, Shape, all_finite};
use crate::cpu::evaluate::BaumgarteMode;
use crate::cpu::jacobi::MAX_JACOBI_ROWS;
use crate::cpu::jacobi::min_norm;
use crate::cpu::solver::{solve_min_norm_reduced, solve_min_norm_rows};
use crate::math::lanes::{LANES, from_fn, values};
use crate::math::lanes::{
    Lane, LaneMask, LaneMat3, LaneVec3, bits, cross, is_finite, mul_add, mul_mat, mul_vec,
    quaternion_rate, select, splat, tr_mul_vec,
};

/// What [`Chunk::dynamics`] solves for, kept in the [`Scratch`] next to the rows and the masked
/// Jacobian it leaves there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dynamics {
    /// `c_G = R c` per free slot.
    pub(crate) c_g: [LaneVec3; MAX_FREE],
    /// `I_G⁻¹` in Ground per free slot ([`world_inverse_inertia`]).
    pub(crate) w_inv: [LaneMat3; MAX_FREE],
    /// Unconstrained `u̇₀` per free slot, `[b, a_origin]`.
    pub(crate) udot0: [[Lane; 6]; MAX_FREE],
    /// Constrained `u̇` per free slot.
    pub(crate) udot: [[Lane; 6]; MAX_FREE],
    /// Multipliers per row (0 on disabled rows).
    pub(crate) lambda: [Lane; MAX_M],
}

impl Dynamics {
    /// Zeros.
    pub(super) fn new() -> Self {
        let zero = splat(0.0);
        Self {
            c_g: [LaneVec3::repeat(zero); MAX_FREE],
            w_inv: [LaneMat3::repeat(zero); MAX_FREE],
            udot0: [[zero; 6]; MAX_FREE],
            udot: [[zero; 6]; MAX_FREE],
            lambda: [zero; MAX_M],
        }
    }
}

/// `R I⁻¹ Rᵀ`: a body's inverse inertia about its COM in Ground, once per derivative rather than
/// two rotations at every use (`u̇₀` and each row's `M⁻¹ Gᵀ`). Symmetric, so its upper
/// triangle is computed and mirrored.
#[inline(always)]
fn world_inverse_inertia(r: &LaneMat3, inverse_inertia: &LaneMat3) -> LaneMat3 {
    let ri = mul_mat(r, inverse_inertia);
    let entry = |i: usize, j: usize| {
        mul_add(
            ri[(i, 2)],
            r[(j, 2)],
            mul_add(ri[(i, 1)], r[(j, 1)], ri[(i, 0)] * r[(j, 0)]),
        )
    };
    let (w00, w01, w02) = (entry(0, 0), entry(0, 1), entry(0, 2));
    let (w11, w12, w22) = (entry(1, 1), entry(1, 2), entry(2, 2));
    LaneMat3::new(w00, w01, w02, w01, w11, w12, w02, w12, w22)
}

/// `a · b` of two 6-vectors, in index order (the order `cpu::solver`'s products take), each
/// term after the first fused into the sum ([`mul_add`]).
#[inline(always)]
pub(super) fn dot6(a: &[Lane; 6], b: &[Lane; 6]) -> Lane {
    let mut sum = a[0] * b[0];
    for k in 1..6 {
        sum = mul_add(a[k], b[k], sum);
    }
    sum
}

impl Chunk<'_> {
    /// `M⁻¹ (τ, f)` of free slot `slot` with `I_G⁻¹` in Ground `w_inv` (see
    /// [`world_inverse_inertia`]) and `c_G = R c`: the closed form of the module doc.
    #[inline(always)]
    pub(super) fn inverse_mass(
        &self,
        slot: usize,
        w_inv: &LaneMat3,
        c_g: &LaneVec3,
        tau: LaneVec3,
        f: LaneVec3,
    ) -> (LaneVec3, LaneVec3) {
        let body = &self.bodies[slot];
        let b = mul_vec(w_inv, &(tau - cross(c_g, &f)));
        let a_o = f * body.inverse_mass - cross(&b, c_g);
        (b, a_o)
    }

    /// `I_G⁻¹` in Ground, `c_G = R c` and `u̇₀ = M⁻¹ (f − c)` of free slot `slot` at rotation
    /// `r` and angular velocity `w` (`cpu::dynamics::applied_minus_coriolis`, then the closed
    /// form of [`inverse_mass`](Self::inverse_mass)): the free bodies' half of the dynamics,
    /// shared by the general path and the one-constraint kernel.
    #[inline(always)]
    pub(super) fn unconstrained_acceleration(
        &self,
        slot: usize,
        r: &LaneMat3,
        w: LaneVec3,
    ) -> (LaneMat3, LaneVec3, [Lane; 6]) {
        let body = &self.bodies[slot];
        let w_inv = world_inverse_inertia(r, &body.inverse_inertia);
        let c_g = mul_vec(r, &body.com);
        let m_ = body.mass;
        let i_g_w = mul_vec(r, &mul_vec(&body.inertia, &tr_mul_vec(r, &w)));
        let w_x_c = cross(&w, &cross(&w, &c_g));
        let coriolis_ang = cross(&w, &i_g_w) + cross(&c_g, &w_x_c) * m_;
        let coriolis_lin = w_x_c * m_;
        let f_com = self.gravity * m_ + body.force;
        let f_ang = cross(&c_g, &f_com) + body.torque;
        let (b, a) = self.inverse_mass(
            slot,
            &w_inv,
            &c_g,
            f_ang - coriolis_ang,
            f_com - coriolis_lin,
        );
        (w_inv, c_g, [b.x, b.y, b.z, a.x, a.y, a.z])
    }

    /// The dynamics at state `y` (module doc) into `scratch.dynamics`, and the lanes where
    /// every step was finite and the solve certified. Fills `scratch`'s kinematics (free
    /// bodies' accelerations zero), rows and masked Jacobian blocks.
    ///
    /// Dispatches on the plan's shape (free bodies, rows) to a copy compiled for it, whose
    /// loops the compiler unrolls and whose bounds checks it removes; other shapes run the
    /// same code with runtime bounds.
    #[inline]
    pub(crate) fn dynamics(
        &self,
        y: &[Lane],
        time: Lane,
        baumgarte: BaumgarteMode,
        scratch: &mut Scratch,
    ) -> LaneMask {
        let (free, m) = (self.plan.free, self.plan.m);
        macro_rules! sized {
            ($(($f:literal, $m:literal)),*) => {
                match (free, m) {
                    $(($f, $m) => self.dynamics_in(Fixed::<$f, $m>, y, time, baumgarte, scratch),)*
                    _ => self.dynamics_in(Runtime { free, m }, y, time, baumgarte, scratch),
                }
            };
        }
        sized!(
            (1, 1),
            (1, 2),
            (1, 3),
            (1, 4),
            (1, 5),
            (1, 6),
            (2, 1),
            (2, 2),
            (2, 3),
            (2, 4)
        )
    }

    /// [`dynamics`](Self::dynamics) with the loop bounds of `shape`.
    #[inline(never)]
    fn dynamics_in(
        &self,
        shape: impl Shape,
        y: &[Lane],
        time: Lane,
        baumgarte: BaumgarteMode,
        scratch: &mut Scratch,
    ) -> LaneMask {
        let plan = self.plan;
        let (free, m) = (shape.free(), shape.m());
        let Scratch {
            kin,
            rows,
            g,
            y_blocks,
            l,
            dynamics,
        } = scratch;
        let Dynamics {
            c_g,
            w_inv,
            udot0,
            udot,
            lambda,
        } = dynamics;
        let mut ok = self.kinematics(free, y, time, kin);

        // f − c and u̇₀ = M⁻¹ (f − c), body by body (cpu::dynamics::applied_minus_coriolis).
        for slot in 0..free {
            let k = &kin[plan.free_bodies[slot]];
            (w_inv[slot], c_g[slot], udot0[slot]) =
                self.unconstrained_acceleration(slot, &k.rotation, k.ang_vel);
        }

        // Rows, bias b = −k (− 2α ė − β² e with Baumgarte), masked Jacobian blocks and
        // Y = M⁻¹ Gᵀ per block.
        self.rows(kin, rows);
        let slots = &plan.row_slots;
        let mut bias = [splat(0.0); MAX_M];
        for r in 0..m {
            let with_baumgarte = match baumgarte {
                BaumgarteMode::Template => plan.row_baumgarte[r],
                BaumgarteMode::All => true,
                BaumgarteMode::Off => false,
            };
            let row = &rows[r];
            let on = self.enabled[r];
            bias[r] = -row.acceleration_error;
            if with_baumgarte {
                let a = self.inverse_time_constant[r];
                bias[r] -= splat(2.0) * a * row.velocity_error + a * a * row.position_error;
            }
            // Every lane enabled (the usual case): the mask would keep every entry.
            let all_on = bits(on) == ALL_LANES;
            for (j, slot) in slots[r].iter().enumerate() {
                let Some(slot) = *slot else { continue };
                let block = if all_on {
                    row.jacobian[j]
                } else {
                    let mut masked = row.jacobian[j];
                    for x in &mut masked {
                        *x = select(on, *x, splat(0.0));
                    }
                    masked
                };
                // The block is finite where its sum is (as `all_finite`).
                ok = ok & all_finite(&block);
                g[r][j] = block;
                let (b, a) = self.inverse_mass(
                    slot,
                    &w_inv[slot],
                    &c_g[slot],
                    LaneVec3::new(block[0], block[1], block[2]),
                    LaneVec3::new(block[3], block[4], block[5]),
                );
                y_blocks[r][j] = [b.x, b.y, b.z, a.x, a.y, a.z];
            }
            ok = ok & (is_finite(bias[r]) | !on);
        }

        // A = G M⁻¹ Gᵀ (symmetrised), rhs = G u̇₀ − b; masked rows get a unit pivot.
        let mut rhs = [splat(0.0); MAX_M];
        for r in 0..m {
            for q in r..m {
                let mut sum = splat(0.0);
                for (j, slot) in slots[r].iter().enumerate() {
                    for (jq, slot_q) in slots[q].iter().enumerate() {
                        if slot.is_some() && slot == slot_q {
                            sum += dot6(&g[r][j], &y_blocks[q][jq]);
                        }
                    }
                }
                // A is symmetric: its lower triangle is all the factorisation reads.
                l[q][r] = sum;
            }
            l[r][r] = select(self.enabled[r], l[r][r], splat(1.0));
            let mut g_udot = splat(0.0);
            for (j, slot) in slots[r].iter().enumerate() {
                if let Some(s) = slot {
                    g_udot += dot6(&g[r][j], &udot0[*s]);
                }
            }
            rhs[r] = select(self.enabled[r], g_udot - bias[r], splat(0.0));
        }
        let before = bits(ok);
        solve_certified(l, m, &rhs, &self.enabled, &mut ok, lambda);
        // Lanes whose only failure is the solve (redundant rows, or a pivot rounding to zero)
        // take the reference's minimum-norm route for λ alone; the rest stays on lanes.
        let redundant = before & !bits(ok);
        if redundant != 0 {
            ok = ok | self.min_norm_multipliers(redundant, g, y_blocks, &rhs, lambda);
        }

        // u̇ = u̇₀ − M⁻¹ Gᵀ λ, each body's sum taken over the rows in order (one body at a
        // time: a sum per body of the batch's shape, not a zeroed array of `MAX_FREE`).
        for slot in 0..free {
            let mut sum = [splat(0.0); 6];
            for r in 0..m {
                for (j, s) in slots[r].iter().enumerate() {
                    if *s == Some(slot) {
                        for k in 0..6 {
                            sum[k] = mul_add(y_blocks[r][j][k], lambda[r], sum[k]);
                        }
                    }
                }
            }
            for k in 0..6 {
                udot[slot][k] = udot0[slot][k] - sum[k];
            }
        }
        ok
    }

    /// The multipliers of lanes `lanes`, whose certified solve failed, by the reference
    /// solver's minimum-norm route on their enabled rows, into `lambda` (0 on disabled rows);
    /// returns the lanes answered with finite values. Lanes with the same enabled rows, up to
    /// six, are reduced to their rank four at a time (lane by lane where they part ways),
    /// else take the eigen route four at a time
    /// ([`min_norm_lanes`](Self::min_norm_lanes)); others go lane by lane through
    /// `solve_min_norm_rows` (its Cholesky, its reduction, else the eigen route). `A = G M⁻¹ Gᵀ` is rebuilt from the masked blocks
    /// ([`gram_entry`](Self::gram_entry)).
    #[cold]
    #[inline(never)]
    pub(super) fn min_norm_multipliers(
        &self,
        lanes: u32,
        g: &[[[Lane; 6]; 2]; MAX_M],
        y_blocks: &[[[Lane; 6]; 2]; MAX_M],
        rhs: &[Lane; MAX_M],
        lambda: &mut [Lane; MAX_M],
    ) -> LaneMask {
        let plan = self.plan;
        if let Some(answered) = self.min_norm_lanes(lanes, g, y_blocks, rhs, lambda) {
            return answered;
        }
        let mut answered = [false; LANES];
        for (l, answer) in answered.iter_mut().enumerate() {
            if lanes & (1 << l) == 0 {
                continue;
            }
            // The enabled rows, in order: the system the reference solves.
            let mut rows = [0; MAX_M];
            let mut n = 0;
            for r in 0..plan.m {
                if bits(self.enabled[r]) & (1 << l) != 0 {
                    rows[n] = r;
                    n += 1;
                }
            }
            let entry = |r: usize, q: usize| self.gram_entry(r, q, g, y_blocks).extract(l);
            let mut a = [0.0; MAX_M * MAX_M];
            let mut b = [0.0; MAX_M];
            for i in 0..n {
                for k in 0..n {
                    let (r, q) = (rows[i].min(rows[k]), rows[i].max(rows[k]));
                    a[i * n + k] = entry(r, q);
                }
                b[i] = rhs[rows[i]].extract(l);
            }
            // The eigen route iterates on its input: a non-finite system (an overflowing
            // `M⁻¹ Gᵀ`) has no answer here and goes to the reference path.
            if !a[..n * n].iter().chain(&b[..n]).all(|v| v.is_finite()) {
                continue;
            }
            let mut x = [0.0; MAX_M];
            let mut work = [0.0; MAX_M * MAX_M + MAX_M];
            solve_min_norm_rows(&a[..n * n], n, &b[..n], &mut x[..n], &mut work);
            *answer = x[..n].iter().all(|v| v.is_finite());
            for r in 0..plan.m {
                lambda[r].replace(l, 0.0);
            }
            for (i, &r) in rows[..n].iter().enumerate() {
                lambda[r].replace(l, x[i]);
            }
        }
        LaneMask::from(answered)
    }

    /// Entry `(r, q)` of `A = G M⁻¹ Gᵀ`, `r ≤ q`, from the masked blocks `g` and `M⁻¹ Gᵀ`
    /// blocks `y_blocks`: the lanes' own products in the lane formulas' order, so the bits the
    /// lanes had.
    fn gram_entry(
        &self,
        r: usize,
        q: usize,
        g: &[[[Lane; 6]; 2]; MAX_M],
        y_blocks: &[[[Lane; 6]; 2]; MAX_M],
    ) -> Lane {
        let slots = &self.plan.row_slots;
        let mut sum = splat(0.0);
        for (j, slot) in slots[r].iter().enumerate() {
            for (jq, slot_q) in slots[q].iter().enumerate() {
                if slot.is_some() && slot == slot_q {
                    sum += dot6(&g[r][j], &y_blocks[q][jq]);
                }
            }
        }
        sum
    }

    /// [`min_norm_multipliers`](Self::min_norm_multipliers) for lanes that all have the same
    /// enabled rows, at most `MAX_JACOBI_ROWS` of them: a lane whose system is of lower rank is
    /// reduced to it as the reference does (`solve_min_norm_reduced`): four lanes at once,
    /// each pivoting on its own rows (`lanes::reduce`: `BrickPush-v0`'s four corners, rank
    /// three, stepped 1.55× as fast as on the eigen route reduced one lane at a time, and 1.7×
    /// as fast again four at once), else one lane at a time where the lanes' ranks or
    /// certificates part ways; the lanes left take the eigen route on their systems at
    /// once (`cpu::jacobi::min_norm` on lane values, each lane masked once its sweeps
    /// converge), which hides the latency of a rotation's divisions and square roots. A lane's
    /// answer has the bits the scalar route gives its system (the Cholesky retry of
    /// `solve_min_norm_rows` aside: these lanes failed the lanes' certificate).
    /// `None` when the lanes' enabled rows differ or are too many: the scalar route then.
    fn min_norm_lanes(
        &self,
        lanes: u32,
        g: &[[[Lane; 6]; 2]; MAX_M],
        y_blocks: &[[[Lane; 6]; 2]; MAX_M],
        rhs: &[Lane; MAX_M],
        lambda: &mut [Lane; MAX_M],
    ) -> Option<LaneMask> {
        let plan = self.plan;
        let mut rows = [0; MAX_M];
        let mut n = 0;
        for r in 0..plan.m {
            let on = bits(self.enabled[r]) & lanes;
            if on != 0 && on != lanes {
                return None; // The lanes' systems differ in size.
            }
            if on != 0 {
                rows[n] = r;
                n += 1;
            }
        }
        let rows = &rows[..n];
        Some(match n {
            1 => self.min_norm_sized::<1>(lanes, rows, g, y_blocks, rhs, lambda),
            2 => self.min_norm_sized::<2>(lanes, rows, g, y_blocks, rhs, lambda),
            3 => self.min_norm_sized::<3>(lanes, rows, g, y_blocks, rhs, lambda),
            4 => self.min_norm_sized::<4>(lanes, rows, g, y_blocks, rhs, lambda),
            5 => self.min_norm_sized::<5>(lanes, rows, g, y_blocks, rhs, lambda),
            6 => self.min_norm_sized::<6>(lanes, rows, g, y_blocks, rhs, lambda),
            _ => return None,
        })
    }

    /// [`min_norm_lanes`](Self::min_norm_lanes) for `N` enabled rows `rows`.
    #[allow(clippy::too_many_arguments)]
    fn min_norm_sized<const N: usize>(
        &self,
        lanes: u32,
        rows: &[usize],
        g: &[[[Lane; 6]; 2]; MAX_M],
        y_blocks: &[[[Lane; 6]; 2]; MAX_M],
        rhs: &[Lane; MAX_M],
        lambda: &mut [Lane; MAX_M],
    ) -> LaneMask {
        let a: [[Lane; N]; N] = std::array::from_fn(|i| {
            std::array::from_fn(|k| {
                let (r, q) = (rows[i].min(rows[k]), rows[i].max(rows[k]));
                self.gram_entry(r, q, g, y_blocks)
            })
        });
        let b: [Lane; N] = std::array::from_fn(|i| rhs[rows[i]]);
        // A non-finite system has no answer here and goes to the reference path.
        let mut finite = is_finite(splat(0.0));
        for (row, b) in a.iter().zip(&b) {
            finite = finite & all_finite(row) & is_finite(*b);
        }
        let active = finite & LaneMask::from(std::array::from_fn(|l| lanes & (1 << l) != 0));
        // Lanes of lower rank (redundant rows, why the certificate mostly fails) are reduced
        // to it as the reference reduces them: all at once where they reduce alike (each
        // pivoting on its own rows), else one lane at a time; the rest take the eigen route
        // four at a time.
        if let Some(x) = reduced_lanes(&a, &b, active) {
            return self.put_multipliers(active, rows, &x, lambda);
        }
        let (a_values, b_values) = (a.map(|row| row.map(values)), b.map(values));
        let mut reduced_x = [[0.0; N]; LANES];
        let mut reduced = [false; LANES];
        for l in 0..LANES {
            if bits(active) & (1 << l) == 0 {
                continue;
            }
            let mut a_lane = [0.0; MAX_JACOBI_ROWS * MAX_JACOBI_ROWS];
            for i in 0..N {
                for k in 0..N {
                    a_lane[i * N + k] = a_values[i][k][l];
                }
            }
            let b_lane: [f64; N] = std::array::from_fn(|i| b_values[i][l]);
            reduced[l] =
                solve_min_norm_reduced(&a_lane[..N * N], N, &b_lane, &mut reduced_x[l]).is_some();
        }
        let eigen = LaneMask::from(std::array::from_fn(|l| {
            bits(active) & (1 << l) != 0 && !reduced[l]
        }));
        let mut x = [splat(0.0); N];
        if bits(eigen) != 0 {
            min_norm(&a, &b, eigen, &mut x);
        }
        let reduced = LaneMask::from(reduced);
        for (i, x) in x.iter_mut().enumerate() {
            *x = select(reduced, from_fn(|l| reduced_x[l][i]), *x);
        }
        self.put_multipliers(active, rows, &x, lambda)
    }

    /// Writes the multipliers `x` of the enabled `rows` into `lambda` for the lanes `active`
    /// (0 on their other rows); returns the lanes whose `x` is finite.
    fn put_multipliers<const N: usize>(
        &self,
        active: LaneMask,
        rows: &[usize],
        x: &[Lane; N],
        lambda: &mut [Lane; MAX_M],
    ) -> LaneMask {
        let answered = active & all_finite(x);
        for r in 0..self.plan.m {
            lambda[r] = select(active, splat(0.0), lambda[r]);
        }
        for (i, &r) in rows.iter().enumerate() {
            lambda[r] = select(active, x[i], lambda[r]);
        }
        answered
    }

    /// `ẏ` at state `y` and times `time` into `dy` (`(q̇, pose rates, u̇, prescribed
    /// accelerations, work rates)`, as `cpu::integrate::derivative`: a body with the constant
    /// law moves at its velocity, which changes at its acceleration; a driven body's entries do
    /// not move, its law giving its motion at every stage time), and the bit mask of the lanes
    /// the lane formulas answered; the others must be recomputed on the reference path. A plan
    /// of one free body and one constraint (`LanePlan::single`) takes the one-constraint
    /// kernel (`Chunk::derivative_single`), which gives these bits.
    pub(crate) fn derivative(
        &self,
        y: &[Lane],
        time: Lane,
        baumgarte: BaumgarteMode,
        dy: &mut [Lane],
        scratch: &mut Scratch,
    ) -> u32 {
        let plan = self.plan;
        let (nq, m) = (plan.nq(), plan.m);
        // One free body and one constraint: the one-constraint kernel (same bits).
        if let Some(j) = plan.single {
            match m {
                1 => return self.derivative_single::<1>(j, y, baumgarte, dy, scratch),
                2 => return self.derivative_single::<2>(j, y, baumgarte, dy, scratch),
                3 => return self.derivative_single::<3>(j, y, baumgarte, dy, scratch),
                4 => return self.derivative_single::<4>(j, y, baumgarte, dy, scratch),
                5 => return self.derivative_single::<5>(j, y, baumgarte, dy, scratch),
                6 => return self.derivative_single::<6>(j, y, baumgarte, dy, scratch),
                _ => {}
            }
        }
        let mut ok = self.dynamics(y, time, baumgarte, scratch);
        let (kin, g) = (&scratch.kin, &scratch.g);
        let Dynamics {
            c_g, udot, lambda, ..
        } = &scratch.dynamics;
        let mut driven = splat(0.0);
        for r in 0..m {
            let mut gu = splat(0.0);
            for (j, s) in plan.row_slots[r].iter().enumerate() {
                if let Some(s) = s {
                    gu += dot6(&g[r][j], &std::array::from_fn(|k| y[nq + 6 * s + k]));
                }
            }
            driven -= lambda[r] * gu;
        }
        let mut power = splat(0.0);
        for slot in 0..plan.free {
            let k = &kin[plan.free_bodies[slot]];
            let q = &y[7 * slot..7 * slot + 4];
            let rate = quaternion_rate(&[q[0], q[1], q[2], q[3]], &k.ang_vel);
            dy[7 * slot..7 * slot + 4].copy_from_slice(&rate);
            dy[7 * slot + 4] = k.lin_vel.x;
            dy[7 * slot + 5] = k.lin_vel.y;
            dy[7 * slot + 6] = k.lin_vel.z;
            dy[nq + 6 * slot..nq + 6 * slot + 6].copy_from_slice(&udot[slot]);
            // Applied power Σ F · v_com + T · w (cpu::integrate's applied_power).
            let body = &self.bodies[slot];
            let v_com = k.lin_vel + k.ang_vel.cross(&c_g[slot]);
            power += body.force.dot(&v_com) + body.torque.dot(&k.ang_vel);
        }
        for slot in 0..plan.prescribed {
            let (p, v) = (plan.pose_at(slot), plan.velocity_at(slot));
            if plan.driven[slot] {
                dy[p..p + 7].fill(splat(0.0));
                dy[v..v + 6].fill(splat(0.0));
                continue;
            }
            let e = &y[p..p + 4];
            let w = LaneVec3::new(y[v], y[v + 1], y[v + 2]);
            dy[p..p + 4].copy_from_slice(&quaternion_rate(&[e[0], e[1], e[2], e[3]], &w));
            dy[p + 4..p + 7].copy_from_slice(&y[v + 3..v + 6]);
            dy[v..v + 6].copy_from_slice(&self.accelerations[slot]);
        }
        let ny = plan.ny();
        dy[ny - 2] = driven;
        dy[ny - 1] = power;
        ok = ok & all_finite(&dy[..ny]);
        bits(ok) & !self.reference_only
    }
}
