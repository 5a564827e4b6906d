//! Constraints: one file per kind, each with its WGSL twin.
//!
//! Every kind implements the [`Constraint`] interface (defined with the model, which holds a
//! template's constraints, and re-exported here): it declares its rows (each position-, velocity-
//! or acceleration-level, `physics.md` §5), its per-instance parameters (SoA columns of the
//! batch) and, per instance, fills Jacobian blocks, position errors, velocity errors and the
//! acceleration bias. The solver assembles these without knowing which kind produced them.
//!
//! Sign conventions (`physics.md` §1): `aerr(u̇) = G u̇ + k`, `k = aerr(u̇ = 0)` with prescribed
//! bodies keeping their prescribed accelerations; the solver's bias is `b = −k`.

pub mod point_on_plane;
pub mod point_to_ground;
pub mod sphere_on_plane;

use crate::math::lanes::{self, Lane, LaneMat3, LaneVec3};
use crate::math::{Mat3, Vec3, vec3};

pub use crate::model::constraint::{
    BodyKinematics, BodyLanes, Check, Constraint, ContactReport, Decoration, MAX_GPU_ROWS,
    MAX_ROWS, PREPARED_LANES, ParamLanes, ParamSpec, Params, PreparedLanes, ReportLanes,
    ReportedExtras, Row, RowLanes, RowLevel, WgslConstraint, negated_point_row_lanes,
    point_row_lanes,
};

pub use point_on_plane::PointOnPlaneContact;
pub use point_to_ground::PointToGround;
pub use sphere_on_plane::SphereOnPlaneContact;

/// A Jacobian row `[ (c × e)ᵀ, eᵀ ]` of a point `c` (from the body origin, in Ground) moving
/// along direction `e`.
#[inline]
pub fn point_row(c: &Vec3, e: &Vec3) -> [f64; 6] {
    let t = c.cross(e);
    [t.x, t.y, t.z, e.x, e.y, e.z]
}

/// The negated [`point_row`], used for the second body of a two-body contact.
#[inline]
pub fn negated_point_row(c: &Vec3, e: &Vec3) -> [f64; 6] {
    let r = point_row(c, e);
    [-r[0], -r[1], -r[2], -r[3], -r[4], -r[5]]
}

/// Rotation and origin of a plane frame parameter `[e0, e1, e2, e3, x, y, z]` (normalised at
/// store time, so this is exact).
pub fn plane_frame(frame: &[f64]) -> (Mat3, Vec3) {
    let rotation =
        crate::math::rotation_from_quaternion(&frame[..4]).unwrap_or_else(Mat3::identity);
    (rotation, vec3(&frame[4..7]))
}

/// [`plane_frame`] per lane. A zero quaternion cannot be stored, so unlike the scalar function
/// this needs no identity fallback.
#[inline(always)]
pub fn plane_frame_lanes(frame: &[Lane; 7]) -> (LaneMat3, LaneVec3) {
    let rotation = lanes::rotation_from_quaternion(&[frame[0], frame[1], frame[2], frame[3]]);
    (rotation, LaneVec3::new(frame[4], frame[5], frame[6]))
}

/// A built-in constraint kind's three lane methods (`prepare_lanes`, `evaluate_lanes`,
/// `report_lanes` of [`Constraint`]), each running the kind's `#[inline(always)]` inherent
/// `prepare_lanes_body`, `evaluate_lanes_body` or `report_lanes_body`, in a copy compiled for
/// AVX-512 where the CPU has it (`math::lanes::avx512`). Invoked inside
/// `impl Constraint for $kind`.
macro_rules! avx512_lane_methods {
    ($kind:ty) => {
        $crate::math::lanes::avx512::avx512_method! {
            fn prepare_lanes(
                &self,
                params: &$crate::constraints::ParamLanes<'_>,
                prepared: &mut $crate::constraints::PreparedLanes,
            ) => $kind, prepare_lanes_body
        }
        $crate::math::lanes::avx512::avx512_method! {
            fn evaluate_lanes(
                &self,
                params: &$crate::constraints::ParamLanes<'_>,
                prepared: &$crate::constraints::PreparedLanes,
                kinematics: &[$crate::constraints::BodyLanes],
                rows: &mut [$crate::constraints::RowLanes],
            ) => $kind, evaluate_lanes_body
        }
        $crate::math::lanes::avx512::avx512_method! {
            fn report_lanes(
                &self,
                params: &$crate::constraints::ParamLanes<'_>,
                prepared: &$crate::constraints::PreparedLanes,
                kinematics: &[$crate::constraints::BodyLanes],
                multipliers: &[$crate::math::lanes::Lane],
            ) -> $crate::constraints::ReportLanes => $kind, report_lanes_body
        }
    };
}
pub(crate) use avx512_lane_methods;
