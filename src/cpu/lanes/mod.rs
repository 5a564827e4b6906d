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
//!   inverse of `physics.md` §1's `M`), with `I_c⁻¹` computed once per call and `I_G⁻¹ = R
//!   I_c⁻¹ Rᵀ` once per derivative;
//! * each constraint's rows from [`Constraint::evaluate_lanes`](crate::model::Constraint) — the
//!   built-in kinds run their formulas on lanes, any other constraint runs its scalar
//!   `evaluate` lane by lane through the trait's default, so built-in and custom constraints go
//!   through the same interface;
//! * `A = G M⁻¹ Gᵀ` from the per-body Jacobian blocks, and its factor `U D Uᵀ` (the Cholesky
//!   factor without its square roots, `solve::solve_certified`) with the reference solver's
//!   full-rank certificate (`cpu::solver`): `tr A · ‖L⁻¹‖²_F · RANK_TOLERANCE < 1`.
//!   A disabled constraint's rows are masked out (zero row, unit pivot, zero right-hand side),
//!   which leaves the other rows' arithmetic exactly as without them.
//!
//! A lane whose certificate fails because rows are redundant gets its multipliers from the
//! reference solver's minimum-norm route (`solve_min_norm_rows` on that lane's `A`) and stays on
//! lanes for the rest. A lane the fast formulas cannot answer — its state or result is not
//! finite, or its mass properties are not invertible — is recomputed on the reference path, so
//! every answer is the reference's answer to rounding (the tests hold the two to 1e-12; with
//! RKM to 1e-10 after a duration, since its step sizes follow an error estimate that cancels).
//! Lanes never look at each other, so an instance's result does not depend on the chunk it ran
//! in, and stays bit-identical across thread counts.
//!
//! Prescribed bodies (at most [`MAX_PRESCRIBED`]) take the reference's rules: a body with the
//! constant law moves with the pose and velocity of its state and the acceleration of its
//! column; a driven body follows its law at each lane's own time (every stage time), evaluated
//! lane by lane through [`MotionLaw::evaluate`](crate::motion::MotionLaw), so built-in and
//! user laws run alike. Templates with more prescribed or free bodies than that, or more than
//! [`MAX_M`] rows, use the reference path.

// Index loops over rows, lanes and slots mirror the reference formulas they are held against.
#![allow(clippy::needless_range_loop)]

mod adaptive;
mod dynamics;
pub(crate) mod evaluate;
mod kept;
mod kinematics;
mod load;
mod reduce;
mod single;
mod solve;
pub(crate) mod step;

use std::cell::RefCell;

use simba::simd::SimdValue;

use crate::batch::{Batch, InstanceState, StateLayout};
use crate::constraints::{BodyLanes, MAX_ROWS, PREPARED_LANES, PreparedLanes, RowLanes, RowLevel};
use crate::math::lanes::{
    LANES, Lane, LaneInstances, LaneMask, LaneMat3, LaneVec3, identity3, is_finite, splat,
};
use crate::model::{BodyKind, SystemTemplate};
use dynamics::Dynamics;
use kinematics::LawEntry;

/// Most free bodies a template may have on the lane path.
pub(crate) const MAX_FREE: usize = 4;
/// Most prescribed bodies (constant law or driven) a template may have on the lane path.
pub(crate) const MAX_PRESCRIBED: usize = 2;
/// Most constraint rows (all constraints together) on the lane path.
pub(crate) const MAX_M: usize = 12;
/// Most bodies (Ground, the free and the prescribed bodies).
const MAX_BODIES: usize = 1 + MAX_FREE + MAX_PRESCRIBED;
/// Most state values per instance: q and u of every free body, pose and velocity of every
/// prescribed body, and the two work integrals.
pub(crate) const MAX_Y: usize = 13 * (MAX_FREE + MAX_PRESCRIBED) + 2;
/// Every lane.
pub(crate) const ALL_LANES: u32 = (1 << LANES) - 1;

/// The loop bounds of the lane formulas: the number of free bodies and of rows. A [`Fixed`]
/// shape makes them constants, so the compiler unrolls the small loops and removes their
/// bounds checks; [`Runtime`] takes any plan.
pub(super) trait Shape: Copy {
    /// Free bodies.
    fn free(self) -> usize;
    /// Constraint rows.
    fn m(self) -> usize;
}

/// A shape known when compiling: `F` free bodies, `M` rows.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fixed<const F: usize, const M: usize>;

impl<const F: usize, const M: usize> Shape for Fixed<F, M> {
    #[inline(always)]
    fn free(self) -> usize {
        F
    }
    #[inline(always)]
    fn m(self) -> usize {
        M
    }
}

/// A shape known only when running.
#[derive(Debug, Clone, Copy)]
pub(super) struct Runtime {
    pub(super) free: usize,
    pub(super) m: usize,
}

impl Shape for Runtime {
    #[inline(always)]
    fn free(self) -> usize {
        self.free
    }
    #[inline(always)]
    fn m(self) -> usize {
        self.m
    }
}

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
    /// Its [`report_slots`](crate::model::Constraint::report_slots), each the row the slot
    /// reports or [`NOT_REPORTED`](evaluate::NOT_REPORTED): one comparison with the row count
    /// then tells both whether a slot reports a row and that the row is in range.
    report_rows: Vec<usize>,
}

/// What the lane path needs to know about a template; built per call, it is cheap.
#[derive(Debug, Clone)]
pub(crate) struct LanePlan {
    free: usize,
    m: usize,
    /// Template body index of each free slot.
    free_bodies: [usize; MAX_FREE],
    /// Number of prescribed bodies.
    prescribed: usize,
    /// Template body index of each prescribed slot.
    prescribed_bodies: [usize; MAX_PRESCRIBED],
    /// Per prescribed slot: whether a motion law drives it (else the constant law).
    driven: [bool; MAX_PRESCRIBED],
    constraints: Vec<ConstraintPlan>,
    /// Per row: the free slot of each of its constraint's bodies (`None`: Ground).
    row_slots: [[Option<usize>; 2]; MAX_M],
    /// Per row: whether the template gives its constraint Baumgarte terms.
    row_baumgarte: [bool; MAX_M],
    /// When the template is one free body and one constraint between it and Ground, the
    /// index of the free body among the constraint's bodies: evaluation then takes the
    /// one-constraint kernel (`single`).
    single: Option<usize>,
}

impl LanePlan {
    /// The plan of `template`, or `None` when the lane path cannot run it (module doc).
    pub(crate) fn new(template: &SystemTemplate) -> Option<Self> {
        let free = template.free_bodies().len();
        let prescribed = template.prescribed_bodies().len();
        let bodies = template.bodies();
        if free == 0 || free > MAX_FREE || prescribed > MAX_PRESCRIBED || bodies.len() > MAX_BODIES
        {
            return None;
        }
        let mut free_bodies = [0; MAX_FREE];
        for (slot, body) in template.free_bodies().iter().enumerate() {
            free_bodies[slot] = body.index();
        }
        let mut prescribed_bodies = [0; MAX_PRESCRIBED];
        let mut driven = [false; MAX_PRESCRIBED];
        for (slot, body) in template.prescribed_bodies().iter().enumerate() {
            prescribed_bodies[slot] = body.index();
            driven[slot] = bodies.get(body.index())?.motion.is_some();
        }
        let mut m = 0;
        let mut row_slots = [[None; 2]; MAX_M];
        let mut row_baumgarte = [false; MAX_M];
        let mut constraints = Vec::with_capacity(template.constraints().len());
        for slot in template.constraints() {
            let c = &slot.constraint;
            let (ids, levels) = (c.bodies(), c.row_levels());
            if ids.is_empty()
                || ids.len() > 2
                || levels.len() > MAX_ROWS
                || c.report_slots().len() > MAX_ROWS
            {
                return None;
            }
            let mut plan = ConstraintPlan {
                bodies: [ids[0].index(); 2],
                body_count: ids.len(),
                slots: [None; 2],
                offset: m,
                levels: [RowLevel::Acceleration; MAX_ROWS],
                rows: levels.len(),
                report_rows: c
                    .report_slots()
                    .iter()
                    .map(|row| row.unwrap_or(evaluate::NOT_REPORTED))
                    .collect(),
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
            row_slots[plan.offset..m].fill(plan.slots);
            row_baumgarte[plan.offset..m].fill(slot.baumgarte.is_some());
            constraints.push(plan);
        }
        let single = match constraints.as_slice() {
            [c] if free == 1 && prescribed == 0 && c.slots.iter().flatten().count() == 1 => {
                c.slots[..c.body_count].iter().position(Option::is_some)
            }
            _ => None,
        };
        Some(Self {
            single,
            free,
            m,
            free_bodies,
            prescribed,
            prescribed_bodies,
            driven,
            constraints,
            row_slots,
            row_baumgarte,
        })
    }

    /// Whether evaluation takes the one-constraint kernel (`single`) for this plan.
    #[cfg(test)]
    pub(crate) fn takes_single(&self) -> bool {
        self.single.is_some()
    }

    /// This plan with the one-constraint kernel turned off: the general lane formulas, which
    /// the tests hold the kernel to.
    #[cfg(test)]
    pub(crate) fn without_single(mut self) -> Self {
        self.single = None;
        self
    }

    /// The lane state's layout: the batch's ([`StateLayout`], `InstanceState::to_vec`).
    fn layout(&self) -> StateLayout {
        StateLayout {
            free: self.free,
            prescribed: self.prescribed,
        }
    }

    /// State values per instance.
    pub(crate) fn ny(&self) -> usize {
        self.layout().len()
    }

    /// Number of q values (free bodies' q and prescribed poses), where u starts in the state.
    fn nq(&self) -> usize {
        self.layout().nq()
    }

    /// Where prescribed slot `slot`'s pose starts in the state.
    fn pose_at(&self, slot: usize) -> usize {
        self.layout().pose_at(slot)
    }

    /// Where prescribed slot `slot`'s velocity starts in the state.
    fn velocity_at(&self, slot: usize) -> usize {
        self.layout().velocity_at(slot)
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
    /// What the last [`Chunk::dynamics`] solved for.
    pub(crate) dynamics: Dynamics,
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
            dynamics: Dynamics::new(),
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
    pub(crate) instances: LaneInstances,
    gravity: LaneVec3,
    bodies: [FreeBody; MAX_FREE],
    /// Per prescribed slot with the constant law, its acceleration `[b, a_origin]` (constant
    /// over a call, as on the reference path).
    accelerations: [[Lane; 6]; MAX_PRESCRIBED],
    /// Per driven prescribed slot, the kinematics its law gave last (see [`LawEntry`]).
    laws: RefCell<[LawEntry; MAX_PRESCRIBED]>,
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
    /// What every instance shares ([`Broadcast`](crate::batch::Broadcast) columns stored
    /// once), gathered and prepared on the first load only: gravity; per free body its mass
    /// properties and loads; per constraint its parameters, enabled flag and time constant.
    shared: Shared,
    loaded: bool,
}

/// Which parts of a chunk's load every instance shares (see [`Chunk::load`]).
struct Shared {
    gravity: bool,
    bodies: [bool; MAX_FREE],
    /// Per free body, the reference-only lanes its shared mass properties gave.
    body_reference_only: [u32; MAX_FREE],
    constraints: Vec<bool>,
}

impl Shared {
    fn of(batch: &Batch) -> Self {
        let mut bodies = [false; MAX_FREE];
        for (shared, c) in bodies.iter_mut().zip(batch.free_columns()) {
            *shared = c.mass.is_shared()
                && c.com.is_shared()
                && c.inertia.is_shared()
                && c.applied_force.is_shared()
                && c.applied_torque.is_shared();
        }
        Self {
            gravity: batch.gravity_column().is_shared(),
            bodies,
            body_reference_only: [0; MAX_FREE],
            constraints: batch
                .all_constraint_columns()
                .iter()
                .map(|c| {
                    c.enabled.is_shared()
                        && c.baumgarte_time_constant.is_shared()
                        && c.params.iter().all(|p| p.is_shared())
                })
                .collect(),
        }
    }
}

impl<'a> Chunk<'a> {
    /// A chunk of `batch` with no instances loaded yet: [`load`](Self::load) fills it. One
    /// chunk serves a rayon job's every group of instances, so its buffers are allocated once.
    pub(crate) fn new(batch: &'a Batch, plan: &'a LanePlan) -> Self {
        let free = FreeBody {
            mass: splat(1.0),
            inverse_mass: splat(1.0),
            com: LaneVec3::repeat(splat(0.0)),
            inertia: identity3(),
            inverse_inertia: identity3(),
            force: LaneVec3::repeat(splat(0.0)),
            torque: LaneVec3::repeat(splat(0.0)),
        };
        Self {
            batch,
            plan,
            instances: LaneInstances::new([0; LANES]),
            gravity: LaneVec3::repeat(splat(0.0)),
            bodies: [free; MAX_FREE],
            accelerations: [[splat(0.0); 6]; MAX_PRESCRIBED],
            laws: RefCell::new([LawEntry::empty(); MAX_PRESCRIBED]),
            enabled: [LaneMask::splat(false); MAX_M],
            inverse_time_constant: [splat(0.0); MAX_M],
            prepared: vec![[splat(0.0); PREPARED_LANES]; plan.constraints.len()],
            reference_only: ALL_LANES,
            shared: Shared::of(batch),
            loaded: false,
        }
    }

    /// The chunk's states as held in the batch's columns, and their times (for the tests; the
    /// stepping and evaluation paths gather into buffers they keep).
    #[cfg(test)]
    pub(crate) fn gather_state(&self) -> ([Lane; MAX_Y], Lane) {
        let mut y = [splat(0.0); MAX_Y];
        let time = self.gather_state_into(&mut y);
        (y, time)
    }

    /// The chunk's states as held in the batch's columns, into `y` (its first `ny` values);
    /// returns their times.
    pub(crate) fn gather_state_into(&self, y: &mut [Lane; MAX_Y]) -> Lane {
        let (plan, batch, inst) = (self.plan, self.batch, &self.instances);
        let nq = plan.nq();
        for (slot, cols) in batch.free_columns().iter().enumerate() {
            let q: [Lane; 7] = inst.rows(&cols.q);
            y[7 * slot..7 * slot + 7].copy_from_slice(&q);
            let u: [Lane; 6] = inst.rows(&cols.u);
            y[nq + 6 * slot..nq + 6 * slot + 6].copy_from_slice(&u);
        }
        for (slot, cols) in batch.prescribed_columns().iter().enumerate() {
            let (p, v) = (plan.pose_at(slot), plan.velocity_at(slot));
            let pose: [Lane; 7] = inst.rows(&cols.pose);
            y[p..p + 7].copy_from_slice(&pose);
            let velocity: [Lane; 6] = inst.rows(&cols.velocity);
            y[v..v + 6].copy_from_slice(&velocity);
        }
        let ny = plan.ny();
        let [w0, w1] = inst.rows(batch.work());
        y[ny - 2] = w0;
        y[ny - 1] = w1;
        inst.values(batch.time())
    }

    /// Lane `l` of a lane state as an [`InstanceState`], for the reference path.
    pub(crate) fn instance_state(&self, y: &[Lane], time: Lane, l: usize) -> InstanceState {
        let plan = self.plan;
        let nq = plan.nq();
        let value = |j: usize| y[j].extract(l);
        InstanceState {
            time: time.extract(l),
            q: (0..plan.free)
                .map(|s| std::array::from_fn(|k| value(7 * s + k)))
                .collect(),
            u: (0..plan.free)
                .map(|s| std::array::from_fn(|k| value(nq + 6 * s + k)))
                .collect(),
            pose: (0..plan.prescribed)
                .map(|s| std::array::from_fn(|k| value(plan.pose_at(s) + k)))
                .collect(),
            velocity: (0..plan.prescribed)
                .map(|s| std::array::from_fn(|k| value(plan.velocity_at(s) + k)))
                .collect(),
            work: [value(plan.ny() - 2), value(plan.ny() - 1)],
        }
    }

    /// Writes an [`InstanceState`] into lane `l` of a lane state.
    pub(crate) fn set_instance_state(&self, y: &mut [Lane], l: usize, state: &InstanceState) {
        for (j, value) in state.to_vec().into_iter().enumerate() {
            y[j].replace(l, value);
        }
    }
}

#[cfg(test)]
mod tests;
