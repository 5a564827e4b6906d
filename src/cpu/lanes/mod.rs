//! The CPU lane path: the dynamics of [`LANES`] instances at once, on the stack.
//!
//! The reference path (`cpu::evaluate`, `cpu::integrate`) assembles each instance into dynamic
//! matrices and solves it with the generic min-norm solver; that is exact but spends most of its
//! time in allocation and generic loops. This path runs the same physics on [`Lane`] values
//! (four instances per SIMD value), with every buffer a fixed-size array:
//!
//! * kinematics from q and u (`rotation_from_quaternion` per lane);
//! * `f − c(q, u)` as `cpu::dynamics::applied_minus_coriolis`, and `M⁻¹` of each free body in
//!   closed form about its COM (`b = I_G⁻¹ (τ − c_G × f)`, `a_o = f / m − b × c_G`, the exact
//!   inverse of `physics.md` §1's `M`), with `I_c⁻¹` computed once per call;
//! * each constraint's rows from [`Constraint::evaluate_lanes`](crate::model::Constraint) — the
//!   built-in kinds run their formulas on lanes, any other constraint runs its scalar
//!   `evaluate` lane by lane through the trait's default, so built-in and custom constraints go
//!   through the same interface;
//! * `A = G M⁻¹ Gᵀ` from the per-body Jacobian blocks, and its Cholesky factor with the reference
//!   solver's full-rank certificate (`cpu::solver`): `tr A · ‖L⁻¹‖²_F · RANK_TOLERANCE < 1`.
//!   A disabled constraint's rows are masked out (zero row, unit pivot, zero right-hand side),
//!   which leaves the other rows' arithmetic exactly as without them.
//!
//! A lane the fast formulas cannot answer — its state or result is not finite, its mass
//! properties are not invertible, or the certificate fails because rows are redundant (the
//! min-norm case) — is recomputed on the reference path, so every answer is the reference's
//! answer to rounding (the tests hold the two to 1e-12). Lanes never look at each other, so an
//! instance's result does not depend on the chunk it ran in, and stays bit-identical across
//! thread counts.
//!
//! Templates with prescribed bodies, more than [`MAX_FREE`] free bodies or more than [`MAX_M`]
//! rows use the reference path.

// Index loops over rows, lanes and slots mirror the reference formulas they are held against.
#![allow(clippy::needless_range_loop)]

mod solve;
pub(crate) mod step;

use simba::simd::{SimdComplexField, SimdPartialOrd, SimdValue};

use crate::batch::{Batch, InstanceState};
use crate::constraints::{
    BodyLanes, MAX_ROWS, PREPARED_LANES, ParamLanes, PreparedLanes, RowLanes, RowLevel,
};
use crate::cpu::evaluate::BaumgarteMode;
use crate::math::lanes::{
    LANES, Lane, LaneMask, LaneMat3, LaneVec3, bits, from_fn, is_finite, quaternion_rate,
    rotation_from_quaternion, select, splat, vec3_from_fn,
};
use crate::model::{BodyKind, SystemTemplate};
use solve::{inverse_inertia, solve_certified};

/// Most free bodies a template may have on the lane path.
pub(crate) const MAX_FREE: usize = 4;
/// Most constraint rows (all constraints together) on the lane path.
pub(crate) const MAX_M: usize = 12;
/// Most bodies (Ground and the free bodies).
const MAX_BODIES: usize = MAX_FREE + 1;
/// Most state values per instance: q and u of every free body, and the two work integrals.
pub(crate) const MAX_Y: usize = 13 * MAX_FREE + 2;
/// Every lane.
pub(crate) const ALL_LANES: u32 = (1 << LANES) - 1;

/// One constraint as the lane path sees it.
#[derive(Debug, Clone)]
struct ConstraintPlan {
    /// Template index of each of its bodies.
    bodies: [usize; 2],
    /// How many bodies it has (1 or 2).
    body_count: usize,
    /// Free slot of each body (`None`: Ground).
    slots: [Option<usize>; 2],
    /// First row among all rows.
    offset: usize,
    /// Its row levels.
    levels: [RowLevel; MAX_ROWS],
    /// Number of rows.
    rows: usize,
    /// Whether the template gives it Baumgarte terms.
    template_baumgarte: bool,
}

/// What the lane path needs to know about a template; built per call, it is cheap.
#[derive(Debug, Clone)]
pub(crate) struct LanePlan {
    free: usize,
    m: usize,
    /// Template body index of each free slot.
    free_bodies: [usize; MAX_FREE],
    constraints: Vec<ConstraintPlan>,
}

impl LanePlan {
    /// The plan of `template`, or `None` when the lane path cannot run it (module doc).
    pub(crate) fn new(template: &SystemTemplate) -> Option<Self> {
        let free = template.free_bodies().len();
        let bodies = template.bodies();
        if !template.prescribed_bodies().is_empty()
            || free == 0
            || free > MAX_FREE
            || bodies.len() > MAX_BODIES
        {
            return None;
        }
        let mut free_bodies = [0; MAX_FREE];
        for (slot, body) in template.free_bodies().iter().enumerate() {
            free_bodies[slot] = body.index();
        }
        let mut m = 0;
        let mut constraints = Vec::with_capacity(template.constraints().len());
        for slot in template.constraints() {
            let c = &slot.constraint;
            let (ids, levels) = (c.bodies(), c.row_levels());
            if ids.is_empty() || ids.len() > 2 || levels.len() > MAX_ROWS {
                return None;
            }
            let mut plan = ConstraintPlan {
                bodies: [ids[0].index(); 2],
                body_count: ids.len(),
                slots: [None; 2],
                offset: m,
                levels: [RowLevel::Acceleration; MAX_ROWS],
                rows: levels.len(),
                template_baumgarte: slot.baumgarte.is_some(),
            };
            for (j, id) in ids.iter().enumerate() {
                let body = bodies.get(id.index())?;
                plan.bodies[j] = id.index();
                plan.slots[j] = (body.kind == BodyKind::Free).then_some(body.slot);
            }
            plan.levels[..levels.len()].copy_from_slice(levels);
            m += levels.len();
            if m > MAX_M {
                return None;
            }
            constraints.push(plan);
        }
        Some(Self {
            free,
            m,
            free_bodies,
            constraints,
        })
    }

    /// State values per instance (`InstanceState::to_vec` without prescribed bodies).
    pub(crate) fn ny(&self) -> usize {
        13 * self.free + 2
    }

    /// Number of q values, where u starts in the state.
    fn nq(&self) -> usize {
        7 * self.free
    }
}

/// Per-call values of one free body in four instances.
#[derive(Debug, Clone, Copy)]
struct FreeBody {
    mass: Lane,
    inverse_mass: Lane,
    com: LaneVec3,
    inertia: LaneMat3,
    inverse_inertia: LaneMat3,
    force: LaneVec3,
    torque: LaneVec3,
}

/// The working arrays of one derivative, kept across the stages and steps of a call so that no
/// derivative pays for clearing them: every entry a derivative reads it has written first.
pub(crate) struct Scratch {
    kin: [BodyLanes; MAX_BODIES],
    rows: [RowLanes; MAX_M],
    /// Masked Jacobian blocks, per row and constraint body.
    g: [[[Lane; 6]; 2]; MAX_M],
    /// `M⁻¹ Gᵀ`, in the same blocks.
    y_blocks: [[[Lane; 6]; 2]; MAX_M],
    /// `A = G M⁻¹ Gᵀ` (lower triangle), factored in place.
    l: [[Lane; MAX_M]; MAX_M],
}

impl Scratch {
    /// Scratch for any plan.
    pub(crate) fn new() -> Box<Self> {
        let zero = splat(0.0);
        Box::new(Self {
            kin: [BodyLanes::ground(); MAX_BODIES],
            rows: [RowLanes::default(); MAX_M],
            g: [[[zero; 6]; 2]; MAX_M],
            y_blocks: [[[zero; 6]; 2]; MAX_M],
            l: [[zero; MAX_M]; MAX_M],
        })
    }
}

/// Lanes where every value of `values` is finite: their sum is, since a NaN or an infinity
/// makes the sum NaN or infinite (an overflowing sum of finite values only sends the lane to
/// the reference path).
#[inline(always)]
pub(crate) fn all_finite(values: &[Lane]) -> LaneMask {
    is_finite(values.iter().fold(splat(0.0), |sum, x| sum + *x))
}

/// Four instances of one batch, with everything that stays fixed over a call gathered.
pub(crate) struct Chunk<'a> {
    batch: &'a Batch,
    plan: &'a LanePlan,
    /// The instance of each lane (the last real one repeats in padding lanes).
    pub(crate) instances: [usize; LANES],
    gravity: LaneVec3,
    bodies: [FreeBody; MAX_FREE],
    /// Per row: whether its constraint is enabled.
    enabled: [LaneMask; MAX_M],
    /// Per row: `1 / T` of its constraint's Baumgarte time constant.
    inverse_time_constant: [Lane; MAX_M],
    /// Per constraint, what it prepared for the call ([`Constraint::prepare_lanes`]).
    ///
    /// [`Constraint::prepare_lanes`]: crate::model::Constraint::prepare_lanes
    prepared: Vec<PreparedLanes>,
    /// Lanes that always take the reference path (mass properties the closed form refuses).
    reference_only: u32,
}

impl<'a> Chunk<'a> {
    /// Gathers instances `instances` of `batch`.
    pub(crate) fn new(batch: &'a Batch, plan: &'a LanePlan, instances: [usize; LANES]) -> Self {
        let gravity = vec3_from_fn(|l| batch.gravity()[instances[l]]);
        let mut reference_only = 0;
        let bodies = std::array::from_fn(|slot| {
            let Some(cols) = batch.free_columns().get(slot) else {
                return FreeBody {
                    mass: splat(1.0),
                    inverse_mass: splat(1.0),
                    com: LaneVec3::repeat(splat(0.0)),
                    inertia: LaneMat3::identity(),
                    inverse_inertia: LaneMat3::identity(),
                    force: LaneVec3::repeat(splat(0.0)),
                    torque: LaneVec3::repeat(splat(0.0)),
                };
            };
            let mass = from_fn(|l| cols.mass[instances[l]]);
            let packed: [Lane; 6] =
                std::array::from_fn(|k| from_fn(|l| cols.inertia[instances[l]][k]));
            let (inverse_inertia, ok) = inverse_inertia(&packed);
            let [a, b, c, d, e, f] = packed;
            reference_only |= !bits(ok & mass.simd_gt(splat(0.0)) & is_finite(mass)) & ALL_LANES;
            FreeBody {
                mass,
                inverse_mass: splat(1.0) / mass,
                com: vec3_from_fn(|l| cols.com[instances[l]]),
                inertia: LaneMat3::new(a, d, e, d, b, f, e, f, c),
                inverse_inertia,
                force: vec3_from_fn(|l| cols.applied_force[instances[l]]),
                torque: vec3_from_fn(|l| cols.applied_torque[instances[l]]),
            }
        });
        let mut enabled = [LaneMask::splat(false); MAX_M];
        let mut inverse_time_constant = [splat(0.0); MAX_M];
        let mut prepared = vec![[splat(0.0); PREPARED_LANES]; plan.constraints.len()];
        for (((c, cols), slot), prepared) in plan
            .constraints
            .iter()
            .zip(batch.all_constraint_columns())
            .zip(batch.template().constraints())
            .zip(&mut prepared)
        {
            let params = ParamLanes::new(&cols.params, &cols.widths, instances);
            slot.constraint.prepare_lanes(&params, prepared);
            let on = LaneMask::from(std::array::from_fn::<bool, LANES, _>(|l| {
                cols.enabled[instances[l]] != 0
            }));
            let inv_t = from_fn(|l| 1.0 / cols.baumgarte_time_constant[instances[l]]);
            for r in c.offset..c.offset + c.rows {
                enabled[r] = on;
                inverse_time_constant[r] = inv_t;
            }
        }
        Self {
            batch,
            plan,
            instances,
            gravity,
            bodies,
            enabled,
            inverse_time_constant,
            prepared,
            reference_only,
        }
    }

    /// The chunk's states as held in the batch's columns, and their times.
    pub(crate) fn gather_state(&self) -> ([Lane; MAX_Y], Lane) {
        let (plan, batch, inst) = (self.plan, self.batch, &self.instances);
        let mut y = [splat(0.0); MAX_Y];
        let nq = plan.nq();
        for (slot, cols) in batch.free_columns().iter().enumerate() {
            for k in 0..7 {
                y[7 * slot + k] = from_fn(|l| cols.q[inst[l]][k]);
            }
            for k in 0..6 {
                y[nq + 6 * slot + k] = from_fn(|l| cols.u[inst[l]][k]);
            }
        }
        let ny = plan.ny();
        y[ny - 2] = from_fn(|l| batch.work()[inst[l]][0]);
        y[ny - 1] = from_fn(|l| batch.work()[inst[l]][1]);
        (y, from_fn(|l| batch.time()[inst[l]]))
    }

    /// Lane `l` of a lane state as an [`InstanceState`], for the reference path.
    pub(crate) fn instance_state(&self, y: &[Lane], time: Lane, l: usize) -> InstanceState {
        let nq = self.plan.nq();
        let value = |j: usize| y[j].extract(l);
        InstanceState {
            time: time.extract(l),
            q: (0..self.plan.free)
                .map(|s| std::array::from_fn(|k| value(7 * s + k)))
                .collect(),
            u: (0..self.plan.free)
                .map(|s| std::array::from_fn(|k| value(nq + 6 * s + k)))
                .collect(),
            pose: Vec::new(),
            velocity: Vec::new(),
            work: [value(self.plan.ny() - 2), value(self.plan.ny() - 1)],
        }
    }

    /// Writes an [`InstanceState`] into lane `l` of a lane state.
    pub(crate) fn set_instance_state(&self, y: &mut [Lane], l: usize, state: &InstanceState) {
        for (j, value) in state.to_vec().into_iter().enumerate() {
            y[j].replace(l, value);
        }
    }

    /// Kinematics of every body at state `y` (free bodies' accelerations zero), indexed by
    /// template body, and the lanes whose state is finite with a usable quaternion.
    fn kinematics(&self, y: &[Lane], kin: &mut [BodyLanes; MAX_BODIES]) -> LaneMask {
        let nq = self.plan.nq();
        let zero = LaneVec3::repeat(splat(0.0));
        let mut ok = all_finite(&y[..self.plan.ny() - 2]);
        for slot in 0..self.plan.free {
            let q = &y[7 * slot..7 * slot + 7];
            let u = &y[nq + 6 * slot..nq + 6 * slot + 6];
            let rotation = rotation_from_quaternion(&[q[0], q[1], q[2], q[3]]);
            ok = ok & is_finite(rotation.m11);
            kin[self.plan.free_bodies[slot]] = BodyLanes {
                rotation,
                origin: LaneVec3::new(q[4], q[5], q[6]),
                ang_vel: LaneVec3::new(u[0], u[1], u[2]),
                lin_vel: LaneVec3::new(u[3], u[4], u[5]),
                ang_acc: zero,
                lin_acc: zero,
            };
        }
        ok
    }

    /// Every constraint's rows at `kin`, with the generic row-level rules applied (no position
    /// error on non-holonomic rows, no velocity error on acceleration-level rows), as
    /// `cpu::evaluate`'s `constraint_rows_into`.
    fn rows(&self, kin: &[BodyLanes; MAX_BODIES], rows: &mut [RowLanes; MAX_M]) {
        let template = self.batch.template();
        for (k, ((plan, slot), cols)) in self
            .plan
            .constraints
            .iter()
            .zip(template.constraints())
            .zip(self.batch.all_constraint_columns())
            .enumerate()
        {
            let params = ParamLanes::new(&cols.params, &cols.widths, self.instances);
            let prepared = &self.prepared[k];
            let out = &mut rows[plan.offset..plan.offset + plan.rows];
            let c = &slot.constraint;
            let [a, b] = plan.bodies;
            if plan.body_count == 1 {
                c.evaluate_lanes(&params, prepared, std::slice::from_ref(&kin[a]), out);
            } else if b == a + 1 {
                c.evaluate_lanes(&params, prepared, &kin[a..=b], out);
            } else {
                c.evaluate_lanes(&params, prepared, &[kin[a], kin[b]], out);
            }
            for (row, level) in out.iter_mut().zip(&plan.levels) {
                if *level != RowLevel::Position {
                    row.position_error = splat(0.0);
                }
                if *level == RowLevel::Acceleration {
                    row.velocity_error = splat(0.0);
                }
            }
        }
    }

    /// `M⁻¹ (τ, f)` of free slot `slot` at rotation `r`, `c_G = R c`: the closed form of the
    /// module doc.
    #[inline(always)]
    fn inverse_mass(
        &self,
        slot: usize,
        r: &LaneMat3,
        c_g: &LaneVec3,
        tau: LaneVec3,
        f: LaneVec3,
    ) -> (LaneVec3, LaneVec3) {
        let body = &self.bodies[slot];
        let b = r * (body.inverse_inertia * r.tr_mul(&(tau - c_g.cross(&f))));
        let a_o = f * body.inverse_mass - b.cross(c_g);
        (b, a_o)
    }

    /// Largest position error (enabled holonomic rows) and velocity error (enabled rows) at
    /// state `y`, lane by lane: the twin of `cpu::integrate`'s `constraint_errors`.
    pub(crate) fn constraint_errors(&self, y: &[Lane], scratch: &mut Scratch) -> (Lane, Lane) {
        let Scratch { kin, rows, .. } = scratch;
        self.kinematics(y, kin);
        self.rows(kin, rows);
        let (mut perr, mut verr) = (splat(0.0), splat(0.0));
        for (row, on) in rows[..self.plan.m].iter().zip(&self.enabled) {
            // `fold(0, f64::max)`: a NaN error leaves the maximum as it was.
            let p = select(*on, row.position_error.simd_abs(), splat(0.0));
            let v = select(*on, row.velocity_error.simd_abs(), splat(0.0));
            perr = select(p.simd_gt(perr), p, perr);
            verr = select(v.simd_gt(verr), v, verr);
        }
        (perr, verr)
    }

    /// `ẏ` at state `y` into `dy` (`(q̇, u̇, work rates)`, as `cpu::integrate::derivative`), and
    /// the bit mask of the lanes the lane formulas answered; the others must be recomputed on
    /// the reference path.
    pub(crate) fn derivative(
        &self,
        y: &[Lane],
        baumgarte: BaumgarteMode,
        dy: &mut [Lane],
        scratch: &mut Scratch,
    ) -> u32 {
        let plan = self.plan;
        let (nq, m) = (plan.nq(), plan.m);
        let Scratch {
            kin,
            rows,
            g,
            y_blocks,
            l,
        } = scratch;
        let mut ok = self.kinematics(y, kin);
        let zero3 = LaneVec3::repeat(splat(0.0));

        // f − c and u̇₀ = M⁻¹ (f − c), body by body (cpu::dynamics::applied_minus_coriolis).
        let mut c_g = [zero3; MAX_FREE];
        let mut udot0 = [(zero3, zero3); MAX_FREE];
        for slot in 0..plan.free {
            let k = &kin[plan.free_bodies[slot]];
            let body = &self.bodies[slot];
            let (r, w) = (&k.rotation, k.ang_vel);
            c_g[slot] = r * body.com;
            let m_ = body.mass;
            let i_g_w = r * (body.inertia * r.tr_mul(&w));
            let w_x_c = w.cross(&w.cross(&c_g[slot]));
            let coriolis_ang = w.cross(&i_g_w) + c_g[slot].cross(&w_x_c) * m_;
            let coriolis_lin = w_x_c * m_;
            let f_com = self.gravity * m_ + body.force;
            let f_ang = c_g[slot].cross(&f_com) + body.torque;
            udot0[slot] = self.inverse_mass(
                slot,
                r,
                &c_g[slot],
                f_ang - coriolis_ang,
                f_com - coriolis_lin,
            );
        }

        // Rows, bias b = −k (− 2α ė − β² e with Baumgarte), masked Jacobian blocks and
        // Y = M⁻¹ Gᵀ per block.
        self.rows(kin, rows);
        let mut slots = [[None; 2]; MAX_M];
        let mut bias = [splat(0.0); MAX_M];
        for c in &plan.constraints {
            let with_baumgarte = match baumgarte {
                BaumgarteMode::Template => c.template_baumgarte,
                BaumgarteMode::All => true,
                BaumgarteMode::Off => false,
            };
            for r in c.offset..c.offset + c.rows {
                let row = &rows[r];
                let on = self.enabled[r];
                slots[r] = c.slots;
                bias[r] = -row.acceleration_error;
                if with_baumgarte {
                    let a = self.inverse_time_constant[r];
                    bias[r] -= splat(2.0) * a * row.velocity_error + a * a * row.position_error;
                }
                for j in 0..c.body_count {
                    let Some(slot) = c.slots[j] else { continue };
                    let block = row.jacobian[j].map(|x| select(on, x, splat(0.0)));
                    ok = ok
                        & block
                            .iter()
                            .fold(LaneMask::splat(true), |all, x| all & is_finite(*x));
                    g[r][j] = block;
                    let k = &kin[plan.free_bodies[slot]];
                    let (b, a) = self.inverse_mass(
                        slot,
                        &k.rotation,
                        &c_g[slot],
                        LaneVec3::new(block[0], block[1], block[2]),
                        LaneVec3::new(block[3], block[4], block[5]),
                    );
                    y_blocks[r][j] = [b.x, b.y, b.z, a.x, a.y, a.z];
                }
                ok = ok & (is_finite(bias[r]) | !on);
            }
        }
        let dot6 = |a: &[Lane; 6], b: &[Lane; 6]| {
            a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]
        };
        let body6 = |(b, a): &(LaneVec3, LaneVec3)| [b.x, b.y, b.z, a.x, a.y, a.z];

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
                    g_udot += dot6(&g[r][j], &body6(&udot0[*s]));
                }
            }
            rhs[r] = select(self.enabled[r], g_udot - bias[r], splat(0.0));
        }
        let lambda = solve_certified(l, m, &rhs, &self.enabled, &mut ok);

        // u̇ = u̇₀ − M⁻¹ Gᵀ λ, and ẏ.
        let mut udot = udot0.map(|b| body6(&b));
        for slot in 0..plan.free {
            for (k, value) in udot[slot].iter_mut().enumerate() {
                let mut sum = splat(0.0);
                for r in 0..m {
                    for (j, s) in slots[r].iter().enumerate() {
                        if *s == Some(slot) {
                            sum += y_blocks[r][j][k] * lambda[r];
                        }
                    }
                }
                *value -= sum;
            }
        }
        let mut driven = splat(0.0);
        for r in 0..m {
            let mut gu = splat(0.0);
            for (j, s) in slots[r].iter().enumerate() {
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
        let ny = plan.ny();
        dy[ny - 2] = driven;
        dy[ny - 1] = power;
        ok = ok & all_finite(&dy[..ny]);
        bits(ok) & !self.reference_only
    }
}

#[cfg(test)]
mod tests;
