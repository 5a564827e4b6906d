//! The lane forms of the constraint interface's types: [`LANES`] instances at once, each a
//! [`Lane`] per scalar, for [`Constraint::evaluate_lanes`](super::Constraint::evaluate_lanes),
//! [`prepare_lanes`](super::Constraint::prepare_lanes) and
//! [`report_lanes`](super::Constraint::report_lanes) — the CPU fast path.

use simba::simd::SimdValue;

use super::{BodyKinematics, ContactReport, Params, Row};
use crate::math::lanes::{
    LANES, Lane, LaneInstances, LaneMat3, LaneVec3, cross, mat3_lane, set_mat3_lane, set_vec3_lane,
    splat, vec3_lane,
};
use crate::model::Broadcast;

/// [`LANES`] instances' parameter values of one constraint: the lane form of [`Params`].
#[derive(Debug, Clone, Copy)]
pub struct ParamLanes<'a> {
    columns: &'a [Broadcast<f64>],
    instances: LaneInstances,
}

impl<'a> ParamLanes<'a> {
    /// A view of instances `instances` (one per lane; a lane may repeat another's instance)
    /// over a batch's parameter columns.
    pub fn new(columns: &'a [Broadcast<f64>], instances: [usize; LANES]) -> Self {
        Self::of(columns, LaneInstances::new(instances))
    }

    /// [`new`](Self::new) with the lanes' instances already described.
    #[inline(always)]
    pub fn of(columns: &'a [Broadcast<f64>], instances: LaneInstances) -> Self {
        Self { columns, instances }
    }

    /// The scalar view of lane `l`.
    #[inline]
    pub fn lane(&self, l: usize) -> Params<'a> {
        Params::of(self.columns, self.instances[l])
    }

    /// Whether parameter `k` is one value shared by every instance of the batch (then every
    /// lane reads the same value).
    #[inline(always)]
    pub fn is_shared(&self, k: usize) -> bool {
        self.columns[k].is_shared()
    }

    /// Value `j` of parameter `k`, one per lane.
    #[inline(always)]
    pub fn value(&self, k: usize, j: usize) -> Lane {
        let column = &self.columns[k];
        let w = column.width();
        debug_assert!(j < w, "value {j} of a parameter of width {w}");
        let stored = column.stored();
        if column.is_shared() {
            splat(stored[j])
        } else {
            self.instances.strided_value(stored, w, j)
        }
    }

    /// Parameter `k` as a 3-vector per lane (its first three values).
    #[inline(always)]
    pub fn vec3(&self, k: usize) -> LaneVec3 {
        let [x, y, z] = self.array::<3>(k);
        LaneVec3::new(x, y, z)
    }

    /// The first `N` values of parameter `k`, one lane value each.
    #[inline(always)]
    pub fn array<const N: usize>(&self, k: usize) -> [Lane; N] {
        let column = &self.columns[k];
        let (w, stored) = (column.width(), column.stored());
        debug_assert!(N <= w, "{N} values of a parameter of width {w}");
        if column.is_shared() {
            return std::array::from_fn(|j| splat(stored[j]));
        }
        self.instances.strided(stored, w)
    }
}

/// Most values a constraint may prepare per call with [`Constraint::prepare_lanes`](super::Constraint::prepare_lanes).
pub const PREPARED_LANES: usize = 16;

/// What [`Constraint::prepare_lanes`](super::Constraint::prepare_lanes) fills: up to [`PREPARED_LANES`] values per lane, their
/// meaning the constraint's own.
pub type PreparedLanes = [Lane; PREPARED_LANES];

/// [`BodyKinematics`] of [`LANES`] instances.
#[derive(Debug, Clone, Copy)]
pub struct BodyLanes {
    /// `R_GB`.
    pub rotation: LaneMat3,
    /// `p_GBo`.
    pub origin: LaneVec3,
    /// `w_GB` in Ground.
    pub ang_vel: LaneVec3,
    /// Velocity of the body origin in Ground.
    pub lin_vel: LaneVec3,
    /// `b_GB` in Ground.
    pub ang_acc: LaneVec3,
    /// Acceleration of the body origin in Ground.
    pub lin_acc: LaneVec3,
}

impl BodyLanes {
    /// Ground in every lane.
    pub fn ground() -> Self {
        let zero = LaneVec3::repeat(splat(0.0));
        Self {
            rotation: crate::math::lanes::identity3(),
            origin: zero,
            ang_vel: zero,
            lin_vel: zero,
            ang_acc: zero,
            lin_acc: zero,
        }
    }

    /// Lane `l` as scalar kinematics.
    pub fn lane(&self, l: usize) -> BodyKinematics {
        BodyKinematics {
            rotation: mat3_lane(&self.rotation, l),
            origin: vec3_lane(&self.origin, l),
            ang_vel: vec3_lane(&self.ang_vel, l),
            lin_vel: vec3_lane(&self.lin_vel, l),
            ang_acc: vec3_lane(&self.ang_acc, l),
            lin_acc: vec3_lane(&self.lin_acc, l),
        }
    }

    /// Overwrites lane `l` with scalar kinematics.
    pub fn set_lane(&mut self, l: usize, k: &BodyKinematics) {
        set_mat3_lane(&mut self.rotation, l, &k.rotation);
        set_vec3_lane(&mut self.origin, l, &k.origin);
        set_vec3_lane(&mut self.ang_vel, l, &k.ang_vel);
        set_vec3_lane(&mut self.lin_vel, l, &k.lin_vel);
        set_vec3_lane(&mut self.ang_acc, l, &k.ang_acc);
        set_vec3_lane(&mut self.lin_acc, l, &k.lin_acc);
    }
}

/// [`Row`] of [`LANES`] instances.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowLanes {
    /// Jacobian blocks `(angular, linear)` on each of the constraint's bodies.
    pub jacobian: [[Lane; 6]; 2],
    /// Position error.
    pub position_error: Lane,
    /// Velocity error.
    pub velocity_error: Lane,
    /// Acceleration error at the kinematics' accelerations.
    pub acceleration_error: Lane,
}

impl RowLanes {
    /// Overwrites lane `l` with a scalar row.
    pub fn set_lane(&mut self, l: usize, row: &Row) {
        for (lanes, values) in self.jacobian.iter_mut().zip(&row.jacobian) {
            for (x, v) in lanes.iter_mut().zip(values) {
                x.replace(l, *v);
            }
        }
        self.position_error.replace(l, row.position_error);
        self.velocity_error.replace(l, row.velocity_error);
        self.acceleration_error.replace(l, row.acceleration_error);
    }
}

/// `point_row` per lane: `[c × e, e]`, the lane twin of the constraints' `point_row` (the cross
/// product fused, [`cross`](crate::math::lanes::cross)).
#[inline(always)]
pub fn point_row_lanes(c: &LaneVec3, e: &LaneVec3) -> [Lane; 6] {
    let t = cross(c, e);
    [t.x, t.y, t.z, e.x, e.y, e.z]
}

/// The negated [`point_row_lanes`].
#[inline(always)]
pub fn negated_point_row_lanes(c: &LaneVec3, e: &LaneVec3) -> [Lane; 6] {
    // Element by element rather than `map`, which the compiler left as a call.
    let r = point_row_lanes(c, e);
    [-r[0], -r[1], -r[2], -r[3], -r[4], -r[5]]
}

/// [`ContactReport`] of [`LANES`] instances.
#[derive(Debug, Clone, Copy)]
pub struct ReportLanes {
    /// Contact point in Ground.
    pub contact_point: LaneVec3,
    /// Signed separation, valid when the constraint is disabled.
    pub separation: Lane,
    /// The kind's own force accessor (see [`ReportedExtras`](super::ReportedExtras)).
    pub contact_force: LaneVec3,
}

impl Default for ReportLanes {
    fn default() -> Self {
        Self {
            contact_point: LaneVec3::repeat(splat(0.0)),
            separation: splat(0.0),
            contact_force: LaneVec3::repeat(splat(0.0)),
        }
    }
}

impl ReportLanes {
    /// Overwrites lane `l` with a scalar report.
    pub fn set_lane(&mut self, l: usize, report: &ContactReport) {
        set_vec3_lane(&mut self.contact_point, l, &report.contact_point.into());
        self.separation.replace(l, report.separation);
        set_vec3_lane(&mut self.contact_force, l, &report.contact_force.into());
    }
}
