//! Simbody's `Constraint::PointOnPlaneContact` (`physics.md` §3): a follower point F on body B
//! stays on a plane fixed on surface body S and does not slip on it.
//!
//! Always one holonomic row (`z`) and two nonholonomic rows (`x`, `y`), internal order
//! `[z, x, y]`; reported in `(x, y, z)` order in the plane frame P, as Simbody documents (Simbody
//! 3.x's code returns `z, x, y`; the golden README explains the comparison).

use crate::constraints::{
    BodyKinematics, BodyLanes, Check, Constraint, ContactReport, Decoration, ParamLanes, ParamSpec,
    Params, PreparedLanes, ReportLanes, ReportedExtras, Row, RowLanes, RowLevel, WgslConstraint,
    avx512_lane_methods, negated_point_row, negated_point_row_lanes, plane_frame,
    plane_frame_lanes, point_row, point_row_lanes,
};
use crate::math::Vec3;
use crate::math::lanes::{Lane, LaneMat3, LaneVec3, cross, dot3, mul_mat, mul_vec, splat};
use crate::model::BodyId;
use crate::model::constraint::decoration::{PLANE_HALF_WIDTH, POINT_RADIUS, array, axes_of};

/// The WGSL twin of this file (`shaders/point_on_plane.wgsl`), spliced into the kernels through
/// [`Constraint::wgsl`].
pub const WGSL: &str = include_str!("../../shaders/point_on_plane.wgsl");

/// Index of the `plane_frame` parameter: `X_SP` as `[e0, e1, e2, e3, x, y, z]` in S.
pub const PLANE_FRAME: usize = 0;
/// Index of the `follower_point` parameter: `p_BF` in B.
pub const FOLLOWER_POINT: usize = 1;

const LEVELS: [RowLevel; 3] = [RowLevel::Position, RowLevel::Velocity, RowLevel::Velocity];
const SLOTS: [Option<usize>; 3] = [Some(1), Some(2), Some(0)];

/// A point on body `follower` in no-slip contact with a plane on body `surface`.
#[derive(Debug, Clone, PartialEq)]
pub struct PointOnPlaneContact {
    bodies: [BodyId; 2],
    default_plane_frame: [f64; 7],
    default_follower_point: [f64; 3],
}

impl PointOnPlaneContact {
    /// A contact between a plane fixed on `surface` and a point fixed on `follower`. Defaults:
    /// plane frame = S's frame, follower point at B's origin.
    pub fn new(surface: BodyId, follower: BodyId) -> Self {
        Self {
            bodies: [surface, follower],
            default_plane_frame: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            default_follower_point: [0.0; 3],
        }
    }

    /// Default plane frame `X_SP` for new instances.
    pub fn with_plane_frame(mut self, frame: [f64; 7]) -> Self {
        self.default_plane_frame = frame;
        self
    }

    /// Default follower point `p_BF` for new instances.
    pub fn with_follower_point(mut self, point: [f64; 3]) -> Self {
        self.default_follower_point = point;
        self
    }

    /// Surface body S.
    pub fn surface_body(&self) -> BodyId {
        self.bodies[0]
    }

    /// Follower body B.
    pub fn follower_body(&self) -> BodyId {
        self.bodies[1]
    }
}

impl Constraint for PointOnPlaneContact {
    fn kind_name(&self) -> &'static str {
        "point_on_plane"
    }

    fn bodies(&self) -> &[BodyId] {
        &self.bodies
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec {
                name: "plane_frame",
                default: self.default_plane_frame.to_vec(),
                check: Check::Frame,
            },
            ParamSpec {
                name: "follower_point",
                default: self.default_follower_point.to_vec(),
                check: Check::Finite,
            },
        ]
    }

    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "point_on_plane.wgsl".into(),
            source: WGSL.into(),
            evaluate: "point_on_plane_rows(p, a, b)".into(),
            report: Some("point_on_plane_report_params(p, a, b, multipliers)".into()),
        })
    }

    fn row_levels(&self) -> &[RowLevel] {
        &LEVELS
    }

    fn report_slots(&self) -> &[Option<usize>] {
        &SLOTS
    }

    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]) {
        let (surface, follower) = (&kinematics[0], &kinematics[1]);
        let (r_sp, p_sp) = plane_frame(params.get(PLANE_FRAME));
        let r_gp = surface.rotation * r_sp;
        let px: Vec3 = r_gp.column(0).into_owned();
        let py: Vec3 = r_gp.column(1).into_owned();
        let pz: Vec3 = r_gp.column(2).into_owned();
        let h = (surface.rotation * p_sp).dot(&pz);
        let (w_s, b_s) = (surface.ang_vel, surface.ang_acc);
        let (w_b, b_b) = (follower.ang_vel, follower.ang_acc);

        let f_b = follower.rotation * params.vec3(FOLLOWER_POINT);
        let p_gf = follower.origin + f_b;
        let v_gf = follower.lin_vel + w_b.cross(&f_b);
        let a_gf = follower.lin_acc + b_b.cross(&f_b) + w_b.cross(&w_b.cross(&f_b));
        let s = p_gf - surface.origin;
        let v_gc = surface.lin_vel + w_s.cross(&s);
        let a_gc = surface.lin_acc + b_s.cross(&s) + w_s.cross(&w_s.cross(&s));
        let v_sf = v_gf - v_gc;
        let a_sf = (a_gf - a_gc) - 2.0 * w_s.cross(&v_sf);

        let position_error = s.dot(&pz) - h;
        for (k, e) in [pz, px, py].iter().enumerate() {
            rows[k] = Row {
                jacobian: [negated_point_row(&s, e), point_row(&f_b, e)],
                position_error: if k == 0 { position_error } else { 0.0 },
                velocity_error: e.dot(&v_sf),
                acceleration_error: e.dot(&a_sf),
            };
        }
    }

    avx512_lane_methods!(PointOnPlaneContact);

    fn reported_extras(&self) -> ReportedExtras {
        ReportedExtras::ALL
    }

    /// The plane (a square of Simbody's default half-width), the follower point as a small
    /// ball, and the force on it (`contact_force` turned from P into Ground).
    fn decorations(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> Vec<Decoration> {
        let surface = &kinematics[0];
        let (r_sp, p_sp) = plane_frame(params.get(PLANE_FRAME));
        let r_gp = surface.rotation * r_sp;
        let report = self.report(params, kinematics, multipliers);
        let force = r_gp * Vec3::from(report.contact_force);
        vec![
            Decoration::Plane {
                origin: array(&(surface.origin + surface.rotation * p_sp)),
                axes: axes_of(&r_gp),
                half_width: PLANE_HALF_WIDTH,
            },
            Decoration::Point {
                position: report.contact_point,
                radius: POINT_RADIUS,
            },
            Decoration::ContactPoint {
                position: report.contact_point,
            },
            Decoration::Force {
                point: report.contact_point,
                force: array(&force),
            },
        ]
    }

    /// `contact_point` = the follower point in Ground; `separation` = its signed height above the
    /// plane; `contact_force` = `force_on_follower_point` = `−(λx, λy, λz)` in the plane frame P.
    fn report(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> ContactReport {
        let (surface, follower) = (&kinematics[0], &kinematics[1]);
        let (r_sp, p_sp) = plane_frame(params.get(PLANE_FRAME));
        let pz: Vec3 = (surface.rotation * r_sp).column(2).into_owned();
        let p_gf = follower.origin + follower.rotation * params.vec3(FOLLOWER_POINT);
        let p_gpo = surface.origin + surface.rotation * p_sp;
        ContactReport {
            contact_point: p_gf.into(),
            separation: (p_gf - p_gpo).dot(&pz),
            contact_force: [-multipliers[1], -multipliers[2], -multipliers[0]],
        }
    }
}

/// The lane methods' bodies, each inlined into its trait method and into that method's
/// AVX-512 copy (`math::lanes::avx512`).
impl PointOnPlaneContact {
    /// Prepares `[R_SP (9, column-major), p_SP (3), p_BF (3)]` per lane.
    #[inline(always)]
    fn prepare_lanes_body(&self, params: &ParamLanes<'_>, prepared: &mut PreparedLanes) {
        let (r_sp, p_sp) = plane_frame_lanes(&params.array::<7>(PLANE_FRAME));
        prepared[..9].copy_from_slice(r_sp.as_slice());
        prepared[9..12].copy_from_slice(p_sp.as_slice());
        prepared[12..15].copy_from_slice(params.vec3(FOLLOWER_POINT).as_slice());
    }

    /// [`evaluate`](Constraint::evaluate), line for line, on four instances at once. On a
    /// Ground surface the surface's motion terms are left out: they are exact zeros there.
    #[inline(always)]
    fn evaluate_lanes_body(
        &self,
        _params: &ParamLanes<'_>,
        prepared: &PreparedLanes,
        kinematics: &[BodyLanes],
        rows: &mut [RowLanes],
    ) {
        let (surface, follower) = (&kinematics[0], &kinematics[1]);
        let on_ground = self.surface_body().index() == 0;
        let r_sp = LaneMat3::from_column_slice(&prepared[..9]);
        let p_sp = LaneVec3::from_column_slice(&prepared[9..12]);
        let follower_point = LaneVec3::from_column_slice(&prepared[12..15]);
        let r_gp = if on_ground {
            r_sp
        } else {
            mul_mat(&surface.rotation, &r_sp)
        };
        let px: LaneVec3 = r_gp.column(0).into_owned();
        let py: LaneVec3 = r_gp.column(1).into_owned();
        let pz: LaneVec3 = r_gp.column(2).into_owned();
        let h = if on_ground {
            dot3(&p_sp, &pz)
        } else {
            dot3(&mul_vec(&surface.rotation, &p_sp), &pz)
        };
        let (w_s, b_s) = (surface.ang_vel, surface.ang_acc);
        let (w_b, b_b) = (follower.ang_vel, follower.ang_acc);

        let f_b = mul_vec(&follower.rotation, &follower_point);
        let p_gf = follower.origin + f_b;
        let v_gf = follower.lin_vel + cross(&w_b, &f_b);
        let a_gf = follower.lin_acc + cross(&b_b, &f_b) + cross(&w_b, &cross(&w_b, &f_b));
        let (s, v_sf, a_sf) = if on_ground {
            (p_gf, v_gf, a_gf)
        } else {
            let s = p_gf - surface.origin;
            let v_gc = surface.lin_vel + cross(&w_s, &s);
            let a_gc = surface.lin_acc + cross(&b_s, &s) + cross(&w_s, &cross(&w_s, &s));
            let v_sf = v_gf - v_gc;
            let a_sf = (a_gf - a_gc) - cross(&w_s, &v_sf) * splat(2.0);
            (s, v_sf, a_sf)
        };

        let position_error = dot3(&s, &pz) - h;
        for (k, e) in [pz, px, py].iter().enumerate() {
            rows[k] = RowLanes {
                jacobian: [negated_point_row_lanes(&s, e), point_row_lanes(&f_b, e)],
                position_error: if k == 0 { position_error } else { splat(0.0) },
                velocity_error: dot3(e, &v_sf),
                acceleration_error: dot3(e, &a_sf),
            };
        }
    }

    /// [`report`](Constraint::report), line for line, on four instances at once.
    #[inline(always)]
    fn report_lanes_body(
        &self,
        _params: &ParamLanes<'_>,
        prepared: &PreparedLanes,
        kinematics: &[BodyLanes],
        multipliers: &[Lane],
    ) -> ReportLanes {
        let (surface, follower) = (&kinematics[0], &kinematics[1]);
        let r_sp = LaneMat3::from_column_slice(&prepared[..9]);
        let p_sp = LaneVec3::from_column_slice(&prepared[9..12]);
        let pz: LaneVec3 = mul_mat(&surface.rotation, &r_sp).column(2).into_owned();
        let p_gf = follower.origin
            + mul_vec(
                &follower.rotation,
                &LaneVec3::from_column_slice(&prepared[12..15]),
            );
        let p_gpo = surface.origin + mul_vec(&surface.rotation, &p_sp);
        ReportLanes {
            contact_point: p_gf,
            separation: dot3(&(p_gf - p_gpo), &pz),
            contact_force: LaneVec3::new(-multipliers[1], -multipliers[2], -multipliers[0]),
        }
    }
}
