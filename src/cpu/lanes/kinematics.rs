//! The kinematics of a chunk's bodies at a lane state and its times, and the constraint rows
//! and errors they give: free bodies from q and u, prescribed bodies by the reference's rules
//! (the constant law from the state and the acceleration column, a driven body from its law at
//! each lane's time), each constraint's rows from its lane kernel.

use simba::simd::{SimdPartialOrd, SimdValue};

use super::{Chunk, ConstraintPlan, MAX_BODIES, MAX_M, Scratch, all_finite};
use crate::constraints::{BodyLanes, ParamLanes, RowLanes, RowLevel};
use crate::math::lanes::{
    LANES, Lane, LaneMask, LaneMat3, LaneVec3, abs, is_finite, rotation_from_quaternion, select,
    splat, values,
};

/// A driven body's kinematics as its law gave them at `time` (bits, lane by lane) for the
/// chunk's instances: RK4's two middle stages share their time, and a step's last stage has
/// the next step's first, so a chunk evaluates each law at two times a step, not four. Reset
/// by [`Chunk::load`]; a law's parameters do not change during a call.
#[derive(Debug, Clone, Copy)]
pub(super) struct LawEntry {
    /// Whether `body` and `finite` hold the law's answer at `time`.
    valid: bool,
    time: [u64; LANES],
    body: BodyLanes,
    finite: LaneMask,
}

impl LawEntry {
    /// Marks the entry as holding no answer (the chunk's instances changed).
    pub(super) fn forget(&mut self) {
        self.valid = false;
    }

    /// No answer yet.
    pub(super) fn empty() -> Self {
        Self {
            valid: false,
            time: [0; LANES],
            body: BodyLanes::ground(),
            finite: LaneMask::splat(false),
        }
    }
}

/// The generic row-level rules on a constraint's rows: no position error on non-holonomic rows,
/// no velocity error on acceleration-level rows (`cpu::evaluate`'s `constraint_rows_into`).
#[inline(always)]
pub(super) fn apply_row_levels(rows: &mut [RowLanes], levels: &[RowLevel]) {
    for (row, level) in rows.iter_mut().zip(levels) {
        if *level != RowLevel::Position {
            row.position_error = splat(0.0);
        }
        if *level == RowLevel::Acceleration {
            row.velocity_error = splat(0.0);
        }
    }
}

impl Chunk<'_> {
    /// Kinematics of every body at state `y` and times `time` (free bodies' accelerations
    /// zero), indexed by template body, and the lanes whose state is finite with usable
    /// quaternions (and, for a driven body, whose law answered finite values).
    #[inline(always)]
    pub(super) fn kinematics(
        &self,
        free: usize,
        y: &[Lane],
        time: Lane,
        kin: &mut [BodyLanes; MAX_BODIES],
    ) -> LaneMask {
        let plan = self.plan;
        let nq = plan.nq();
        // Built from its components: `repeat` compiled to overlapping stack copies that stalled
        // store-to-load forwarding at every derivative.
        let z = splat(0.0);
        let zero = LaneVec3::new(z, z, z);
        let mut ok = all_finite(&y[..plan.ny() - 2]);
        for slot in 0..free {
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
        for slot in 0..plan.prescribed {
            let body = &mut kin[plan.prescribed_bodies[slot]];
            if plan.driven[slot] {
                let mut laws = self.laws.borrow_mut();
                let law = &mut laws[slot];
                let bits_of_time = values(time).map(f64::to_bits);
                if !(law.valid && law.time == bits_of_time) {
                    law.finite = self.law_kinematics(slot, time, &mut law.body);
                    law.time = bits_of_time;
                    law.valid = true;
                }
                *body = law.body;
                ok = ok & law.finite;
                continue;
            }
            let (p, v) = (&y[plan.pose_at(slot)..], &y[plan.velocity_at(slot)..]);
            let rotation = rotation_from_quaternion(&[p[0], p[1], p[2], p[3]]);
            ok = ok & is_finite(rotation.m11);
            let a = &self.accelerations[slot];
            ok = ok & all_finite(a);
            *body = BodyLanes {
                rotation,
                origin: LaneVec3::new(p[4], p[5], p[6]),
                ang_vel: LaneVec3::new(v[0], v[1], v[2]),
                lin_vel: LaneVec3::new(v[3], v[4], v[5]),
                ang_acc: LaneVec3::new(a[0], a[1], a[2]),
                lin_acc: LaneVec3::new(a[3], a[4], a[5]),
            };
        }
        ok
    }

    /// Driven prescribed slot `slot` at each lane's time, from its law's lane form
    /// ([`MotionLaw::evaluate_lanes`](crate::model::MotionLaw::evaluate_lanes): the built-in
    /// laws every lane at once, a user law by default lane by lane) into `body`; the lanes
    /// where every value is finite.
    #[inline(never)]
    fn law_kinematics(&self, slot: usize, time: Lane, body: &mut BodyLanes) -> LaneMask {
        // The plan marks the slot driven, so its law answers; were it not to, the lanes would
        // read not finite and go to the reference path.
        let Some((law, columns)) = self.batch.law_of(slot) else {
            let nan = splat(f64::NAN);
            *body = BodyLanes {
                rotation: LaneMat3::repeat(nan),
                origin: LaneVec3::repeat(nan),
                ang_vel: LaneVec3::repeat(nan),
                lin_vel: LaneVec3::repeat(nan),
                ang_acc: LaneVec3::repeat(nan),
                lin_acc: LaneVec3::repeat(nan),
            };
            return is_finite(nan);
        };
        *body = law.evaluate_lanes(&ParamLanes::of(&columns.params, self.instances), time);
        let mut finite = is_finite(body.rotation[0]);
        for x in body.rotation.iter().skip(1) {
            finite = finite & is_finite(*x);
        }
        for v in [
            &body.origin,
            &body.ang_vel,
            &body.lin_vel,
            &body.ang_acc,
            &body.lin_acc,
        ] {
            for x in v.iter() {
                finite = finite & is_finite(*x);
            }
        }
        finite
    }

    /// Calls `f` with the kinematics of constraint `c`'s bodies, in its order: a slice of `kin`
    /// when they are consecutive there (no copy), else a copy.
    #[inline(always)]
    pub(super) fn with_bodies<T>(
        &self,
        c: &ConstraintPlan,
        kin: &[BodyLanes; MAX_BODIES],
        f: impl FnOnce(&[BodyLanes]) -> T,
    ) -> T {
        let [a, b] = c.bodies;
        if c.body_count == 1 {
            f(std::slice::from_ref(&kin[a]))
        } else if b == a + 1 {
            f(&kin[a..=b])
        } else {
            f(&[kin[a], kin[b]])
        }
    }

    /// Every constraint's rows at `kin`, with the generic row-level rules applied (no position
    /// error on non-holonomic rows, no velocity error on acceleration-level rows), as
    /// `cpu::evaluate`'s `constraint_rows_into`.
    pub(super) fn rows(&self, kin: &[BodyLanes; MAX_BODIES], rows: &mut [RowLanes; MAX_M]) {
        let template = self.batch.template();
        for (k, ((plan, slot), cols)) in self
            .plan
            .constraints
            .iter()
            .zip(template.constraints())
            .zip(self.batch.all_constraint_columns())
            .enumerate()
        {
            let params = ParamLanes::of(&cols.params, self.instances);
            let prepared = &self.prepared[k];
            let out = &mut rows[plan.offset..plan.offset + plan.rows];
            let c = &slot.constraint;
            self.with_bodies(plan, kin, |bodies| {
                c.evaluate_lanes(&params, prepared, bodies, out)
            });
            apply_row_levels(out, &plan.levels);
        }
    }

    /// Largest position error (enabled holonomic rows) and velocity error (enabled rows) at
    /// state `y` and times `time`, lane by lane: the twin of `cpu::integrate`'s
    /// `constraint_errors`.
    pub(crate) fn constraint_errors(
        &self,
        y: &[Lane],
        time: Lane,
        scratch: &mut Scratch,
    ) -> (Lane, Lane) {
        let Scratch { kin, rows, .. } = scratch;
        self.kinematics(self.plan.free, y, time, kin);
        self.rows(kin, rows);
        let (mut perr, mut verr) = (splat(0.0), splat(0.0));
        for (row, on) in rows[..self.plan.m].iter().zip(&self.enabled) {
            // `fold(0, f64::max)`: a NaN error leaves the maximum as it was.
            let p = select(*on, abs(row.position_error), splat(0.0));
            let v = select(*on, abs(row.velocity_error), splat(0.0));
            perr = select(p.simd_gt(perr), p, perr);
            verr = select(v.simd_gt(verr), v, verr);
        }
        (perr, verr)
    }
}
