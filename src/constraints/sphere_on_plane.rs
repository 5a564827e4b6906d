//! Simbody's `Constraint::SphereOnPlaneContact` (`physics.md` §2).
//!
//! A sphere (centre `p_BO`, radius `r`) fixed on body B touches a plane (frame `X_FP`, normal
//! `Pz`) fixed on body F. One holonomic row keeps the sphere on the plane; with
//! `enforce_rolling` two nonholonomic rows forbid slip at the contact point `C = O − r Pz`.
//!
//! Internal row order is Simbody's: `[z]`, or `[z, x, y]` when rolling. Reported quantities are
//! in `(x, y, z)` order in the plane frame P; x and y are 0 when rolling is not enforced (slip is
//! not reported, as in Simbody).

use crate::constraints::{
    BodyKinematics, BodyLanes, Check, Constraint, ContactReport, Decoration, ParamLanes, ParamSpec,
    Params, PreparedLanes, ReportLanes, ReportedExtras, Row, RowLanes, RowLevel, WgslConstraint,
    avx512_lane_methods, negated_point_row, negated_point_row_lanes, plane_frame,
    plane_frame_lanes, point_row, point_row_lanes,
};
use crate::math::Vec3;
use crate::math::lanes::{Lane, LaneMat3, LaneVec3, cross, dot3, mul_mat, mul_vec, splat};
use crate::model::BodyId;
use crate::model::constraint::decoration::{PLANE_HALF_WIDTH, array, axes_of};

/// The WGSL twin of this file (`shaders/sphere_on_plane.wgsl`), spliced into the kernels through
/// [`Constraint::wgsl`].
pub const WGSL: &str = include_str!("../../shaders/sphere_on_plane.wgsl");

/// Index of the `plane_frame` parameter: `X_FP` as `[e0, e1, e2, e3, x, y, z]` in F.
pub const PLANE_FRAME: usize = 0;
/// Index of the `sphere_center` parameter: `p_BO` in B.
pub const SPHERE_CENTER: usize = 1;
/// Index of the `radius` parameter: `r > 0`.
pub const RADIUS: usize = 2;

/// A sphere on body `ball` in contact with a plane on body `plane`.
#[derive(Debug, Clone, PartialEq)]
pub struct SphereOnPlaneContact {
    bodies: [BodyId; 2],
    enforce_rolling: bool,
    default_plane_frame: [f64; 7],
    default_sphere_center: [f64; 3],
    default_radius: f64,
}

const ROLLING_LEVELS: [RowLevel; 3] = [RowLevel::Position, RowLevel::Velocity, RowLevel::Velocity];
const SLIDING_LEVELS: [RowLevel; 1] = [RowLevel::Position];
const ROLLING_SLOTS: [Option<usize>; 3] = [Some(1), Some(2), Some(0)];
const SLIDING_SLOTS: [Option<usize>; 3] = [None, None, Some(0)];

/// What [`SphereOnPlaneContact::geometry`] computes: the contact geometry in Ground.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SphereOnPlaneGeometry {
    /// Plane axes `Px, Py, Pz` in Ground (columns of `R_GF R_FP`).
    pub plane_axes: [Vec3; 3],
    /// Sphere centre `p_GO` in Ground.
    pub sphere_center: Vec3,
    /// Contact point `C = O − r Pz` in Ground.
    pub contact_point: Vec3,
    /// Signed distance from C to the plane.
    pub position_error: f64,
}

impl SphereOnPlaneContact {
    /// A contact between a plane fixed on `plane` and a sphere fixed on `ball`. Defaults: plane
    /// frame = F's frame, sphere centre at B's origin, radius 1; change them with the builder
    /// methods (template defaults) or per instance on the batch.
    pub fn new(plane: BodyId, ball: BodyId, enforce_rolling: bool) -> Self {
        Self {
            bodies: [plane, ball],
            enforce_rolling,
            default_plane_frame: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            default_sphere_center: [0.0; 3],
            default_radius: 1.0,
        }
    }

    /// Default plane frame `X_FP` `[e0, e1, e2, e3, x, y, z]` for new instances.
    pub fn with_plane_frame(mut self, frame: [f64; 7]) -> Self {
        self.default_plane_frame = frame;
        self
    }

    /// Default sphere centre `p_BO` for new instances.
    pub fn with_sphere_center(mut self, center: [f64; 3]) -> Self {
        self.default_sphere_center = center;
        self
    }

    /// Default radius for new instances.
    pub fn with_radius(mut self, radius: f64) -> Self {
        self.default_radius = radius;
        self
    }

    /// Whether the two no-slip rows are present.
    pub fn enforce_rolling(&self) -> bool {
        self.enforce_rolling
    }

    /// Plane body F.
    pub fn plane_body(&self) -> BodyId {
        self.bodies[0]
    }

    /// Ball body B.
    pub fn ball_body(&self) -> BodyId {
        self.bodies[1]
    }

    /// Contact geometry from poses only (valid whether or not the constraint is enabled).
    pub fn geometry(
        params: &Params<'_>,
        plane: &BodyKinematics,
        ball: &BodyKinematics,
    ) -> SphereOnPlaneGeometry {
        let (r_fp, p_fp) = plane_frame(params.get(PLANE_FRAME));
        let r = params.get(RADIUS)[0];
        let r_gp = plane.rotation * r_fp;
        let (px, py, pz) = (
            r_gp.column(0).into_owned(),
            r_gp.column(1).into_owned(),
            r_gp.column(2).into_owned(),
        );
        let p_gpo = plane.origin + plane.rotation * p_fp;
        let sphere_center = ball.origin + ball.rotation * params.vec3(SPHERE_CENTER);
        SphereOnPlaneGeometry {
            plane_axes: [px, py, pz],
            sphere_center,
            contact_point: sphere_center - r * pz,
            position_error: (sphere_center - p_gpo).dot(&pz) - r,
        }
    }
}

impl Constraint for SphereOnPlaneContact {
    fn kind_name(&self) -> &'static str {
        "sphere_on_plane"
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
                name: "sphere_center",
                default: self.default_sphere_center.to_vec(),
                check: Check::Finite,
            },
            ParamSpec {
                name: "radius",
                default: vec![self.default_radius],
                check: Check::Positive,
            },
        ]
    }

    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "sphere_on_plane.wgsl".into(),
            source: WGSL.into(),
            evaluate: format!("sphere_on_plane_rows(p, {}, a, b)", self.enforce_rolling),
            report: Some(format!(
                "sphere_on_plane_report_params(p, {}, a, b, multipliers)",
                self.enforce_rolling
            )),
        })
    }

    fn row_levels(&self) -> &[RowLevel] {
        if self.enforce_rolling {
            &ROLLING_LEVELS
        } else {
            &SLIDING_LEVELS
        }
    }

    fn report_slots(&self) -> &[Option<usize>] {
        if self.enforce_rolling {
            &ROLLING_SLOTS
        } else {
            &SLIDING_SLOTS
        }
    }

    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let (r_fp, p_fp) = plane_frame(params.get(PLANE_FRAME));
        let r = params.get(RADIUS)[0];
        let r_gp = plane.rotation * r_fp;
        let px: Vec3 = r_gp.column(0).into_owned();
        let py: Vec3 = r_gp.column(1).into_owned();
        let pz: Vec3 = r_gp.column(2).into_owned();
        let h = (plane.rotation * p_fp).dot(&pz);
        let (w_f, b_f) = (plane.ang_vel, plane.ang_acc);
        let (w_b, b_b) = (ball.ang_vel, ball.ang_acc);

        let o_b = ball.rotation * params.vec3(SPHERE_CENTER);
        let p_go = ball.origin + o_b;
        let v_go = ball.lin_vel + w_b.cross(&o_b);
        let a_go = ball.lin_acc + b_b.cross(&o_b) + w_b.cross(&w_b.cross(&o_b));
        let d = p_go - plane.origin;
        let d_dot = v_go - plane.lin_vel;
        let d_ddot = a_go - plane.lin_acc;
        let v_fo = d_dot - w_f.cross(&d);
        let a_fo = d_ddot - b_f.cross(&d) - 2.0 * w_f.cross(&d_dot) + w_f.cross(&w_f.cross(&d));

        let position_error = d.dot(&pz) - h - r;
        let c_b = o_b - r * pz; // p_BC
        let c_f = d - r * pz; // p_FC

        rows[0] = Row {
            jacobian: [negated_point_row(&c_f, &pz), point_row(&c_b, &pz)],
            position_error,
            velocity_error: v_fo.dot(&pz),
            acceleration_error: a_fo.dot(&pz),
        };
        if self.enforce_rolling {
            let v_fc = v_fo - r * (w_b - w_f).cross(&pz);
            let b_fb = (b_b - b_f) - w_f.cross(&w_b);
            let a_fc = a_fo - r * b_fb.cross(&pz);
            for (row, e) in rows[1..3].iter_mut().zip([px, py]) {
                *row = Row {
                    jacobian: [negated_point_row(&c_f, &e), point_row(&c_b, &e)],
                    position_error: 0.0,
                    velocity_error: e.dot(&v_fc),
                    acceleration_error: e.dot(&a_fc),
                };
            }
        }
    }

    avx512_lane_methods!(SphereOnPlaneContact);

    fn reported_extras(&self) -> ReportedExtras {
        ReportedExtras::ALL
    }

    /// The plane (a square of Simbody's default half-width), the sphere with its body's axes,
    /// the contact point `C` and the force on the sphere there.
    fn decorations(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> Vec<Decoration> {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let g = Self::geometry(params, plane, ball);
        let (_, p_fp) = plane_frame(params.get(PLANE_FRAME));
        let report = self.report(params, kinematics, multipliers);
        vec![
            Decoration::Plane {
                origin: array(&(plane.origin + plane.rotation * p_fp)),
                axes: g.plane_axes.map(|a| array(&a)),
                half_width: PLANE_HALF_WIDTH,
            },
            Decoration::Sphere {
                center: array(&g.sphere_center),
                radius: params.get(RADIUS)[0],
                axes: axes_of(&ball.rotation),
            },
            Decoration::ContactPoint {
                position: report.contact_point,
            },
            Decoration::Force {
                point: report.contact_point,
                force: report.contact_force,
            },
        ]
    }

    /// `contact_force` = `force_on_sphere_in_ground` = `R_GP (−λ)`.
    fn report(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> ContactReport {
        let g = Self::geometry(params, &kinematics[0], &kinematics[1]);
        let [px, py, pz] = g.plane_axes;
        let mut f = multipliers[0] * pz;
        if self.enforce_rolling {
            f += multipliers[1] * px + multipliers[2] * py;
        }
        ContactReport {
            contact_point: g.contact_point.into(),
            separation: g.position_error,
            contact_force: (-f).into(),
        }
    }
}

/// The lane methods' bodies, each inlined into its trait method and into that method's
/// AVX-512 copy (`math::lanes::avx512`).
impl SphereOnPlaneContact {
    /// Prepares `[R_FP (9, column-major), p_FP (3), p_BO (3), r]` per lane.
    #[inline(always)]
    fn prepare_lanes_body(&self, params: &ParamLanes<'_>, prepared: &mut PreparedLanes) {
        let (r_fp, p_fp) = plane_frame_lanes(&params.array::<7>(PLANE_FRAME));
        prepared[..9].copy_from_slice(r_fp.as_slice());
        prepared[9..12].copy_from_slice(p_fp.as_slice());
        prepared[12..15].copy_from_slice(params.vec3(SPHERE_CENTER).as_slice());
        prepared[15] = params.value(RADIUS, 0);
    }

    /// [`evaluate`](Constraint::evaluate), line for line, on four instances at once. On a
    /// Ground plane the plane's motion terms are left out: they are exact zeros there (the
    /// identity rotation, zero velocities and accelerations), so the result is the same.
    #[inline(always)]
    fn evaluate_lanes_body(
        &self,
        _params: &ParamLanes<'_>,
        prepared: &PreparedLanes,
        kinematics: &[BodyLanes],
        rows: &mut [RowLanes],
    ) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let on_ground = self.plane_body().index() == 0;
        let r_fp = LaneMat3::from_column_slice(&prepared[..9]);
        let p_fp = LaneVec3::from_column_slice(&prepared[9..12]);
        let sphere_center = LaneVec3::from_column_slice(&prepared[12..15]);
        let r = prepared[15];
        let r_gp = if on_ground {
            r_fp
        } else {
            mul_mat(&plane.rotation, &r_fp)
        };
        let px: LaneVec3 = r_gp.column(0).into_owned();
        let py: LaneVec3 = r_gp.column(1).into_owned();
        let pz: LaneVec3 = r_gp.column(2).into_owned();
        let h = if on_ground {
            dot3(&p_fp, &pz)
        } else {
            dot3(&mul_vec(&plane.rotation, &p_fp), &pz)
        };
        let (w_f, b_f) = (plane.ang_vel, plane.ang_acc);
        let (w_b, b_b) = (ball.ang_vel, ball.ang_acc);

        let o_b = mul_vec(&ball.rotation, &sphere_center);
        let p_go = ball.origin + o_b;
        let v_go = ball.lin_vel + cross(&w_b, &o_b);
        let a_go = ball.lin_acc + cross(&b_b, &o_b) + cross(&w_b, &cross(&w_b, &o_b));
        let (d, v_fo, a_fo) = if on_ground {
            (p_go, v_go, a_go)
        } else {
            let d = p_go - plane.origin;
            let d_dot = v_go - plane.lin_vel;
            let d_ddot = a_go - plane.lin_acc;
            let v_fo = d_dot - cross(&w_f, &d);
            let a_fo = d_ddot - cross(&b_f, &d) - cross(&w_f, &d_dot) * splat(2.0)
                + cross(&w_f, &cross(&w_f, &d));
            (d, v_fo, a_fo)
        };

        let position_error = dot3(&d, &pz) - h - r;
        let c_b = o_b - pz * r; // p_BC
        let c_f = d - pz * r; // p_FC

        rows[0] = RowLanes {
            jacobian: [
                negated_point_row_lanes(&c_f, &pz),
                point_row_lanes(&c_b, &pz),
            ],
            position_error,
            velocity_error: dot3(&v_fo, &pz),
            acceleration_error: dot3(&a_fo, &pz),
        };
        if self.enforce_rolling {
            let (v_fc, a_fc) = if on_ground {
                (v_fo - cross(&w_b, &pz) * r, a_fo - cross(&b_b, &pz) * r)
            } else {
                let b_fb = (b_b - b_f) - cross(&w_f, &w_b);
                (
                    v_fo - cross(&(w_b - w_f), &pz) * r,
                    a_fo - cross(&b_fb, &pz) * r,
                )
            };
            for (row, e) in rows[1..3].iter_mut().zip([px, py]) {
                *row = RowLanes {
                    jacobian: [negated_point_row_lanes(&c_f, &e), point_row_lanes(&c_b, &e)],
                    position_error: splat(0.0),
                    velocity_error: dot3(&e, &v_fc),
                    acceleration_error: dot3(&e, &a_fc),
                };
            }
        }
    }

    /// [`report`](Constraint::report) (through [`geometry`](SphereOnPlaneContact::geometry)),
    /// line for line, on four instances at once; on a Ground plane the plane's pose drops out
    /// as in [`evaluate_lanes`](Constraint::evaluate_lanes).
    #[inline(always)]
    fn report_lanes_body(
        &self,
        _params: &ParamLanes<'_>,
        prepared: &PreparedLanes,
        kinematics: &[BodyLanes],
        multipliers: &[Lane],
    ) -> ReportLanes {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let on_ground = self.plane_body().index() == 0;
        let r_fp = LaneMat3::from_column_slice(&prepared[..9]);
        let p_fp = LaneVec3::from_column_slice(&prepared[9..12]);
        let r = prepared[15];
        let (r_gp, p_gpo) = if on_ground {
            (r_fp, p_fp)
        } else {
            (
                mul_mat(&plane.rotation, &r_fp),
                plane.origin + mul_vec(&plane.rotation, &p_fp),
            )
        };
        let px: LaneVec3 = r_gp.column(0).into_owned();
        let py: LaneVec3 = r_gp.column(1).into_owned();
        let pz: LaneVec3 = r_gp.column(2).into_owned();
        let sphere_center = ball.origin
            + mul_vec(
                &ball.rotation,
                &LaneVec3::from_column_slice(&prepared[12..15]),
            );
        let mut f = pz * multipliers[0];
        if self.enforce_rolling {
            f += px * multipliers[1] + py * multipliers[2];
        }
        ReportLanes {
            contact_point: sphere_center - pz * r,
            separation: dot3(&(sphere_center - p_gpo), &pz) - r,
            contact_force: -f,
        }
    }
}
