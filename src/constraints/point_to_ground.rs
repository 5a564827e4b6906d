//! RBDL's `ContactConstraint` (`physics.md` §4): a body point held along 1 to 3 world normals.
//!
//! Rows are velocity-level by default (`ė_i = n_i · v_p`, no position error, as in RBDL); with
//! [`PointToGround::position_level`] they become holonomic with `e_i = n_i · (x_p − ground_point)`
//! — RBDL fixes the ground point at the world origin, simbatch makes it a per-instance parameter.
//! Baumgarte stabilisation is the engine's, enabled per constraint on the template
//! ([`SystemTemplate::set_baumgarte`](crate::model::SystemTemplate::set_baumgarte)).
//!
//! Multipliers use simbatch's sign (`λ = −λ_rbdl`); `contact_force` reports RBDL's physical force
//! on the body `Σ n_i λ_rbdl,i` in Ground, and [`body_frame_force`] / [`root_frame_wrench`] give
//! RBDL's two wrench forms.

use crate::constraints::{
    BodyKinematics, BodyLanes, Check, Constraint, ContactReport, Decoration, ParamLanes, ParamSpec,
    Params, PreparedLanes, ReportLanes, ReportedExtras, Row, RowLanes, RowLevel, WgslConstraint,
    avx512_lane_methods, point_row, point_row_lanes,
};
use crate::error::{Error, Result};
use crate::math::lanes::{Lane, LaneVec3, cross, dot3, mul_vec, splat};
use crate::math::{Mat3, Vec3};
use crate::model::BodyId;
use crate::model::constraint::decoration::{PLANE_HALF_WIDTH, POINT_RADIUS, array};

/// The WGSL twin of this file (`shaders/point_to_ground.wgsl`), spliced into the kernels through
/// [`Constraint::wgsl`].
pub const WGSL: &str = include_str!("../../shaders/point_to_ground.wgsl");

/// Index of the `point` parameter: `p_b` in the body frame.
pub const POINT: usize = 0;
/// Index of the `normals` parameter: `3 × k` numbers, unit, mutually orthogonal, in Ground.
pub const NORMALS: usize = 1;
/// Index of the `ground_point` parameter: where position-level rows measure from.
pub const GROUND_POINT: usize = 2;

const VELOCITY_LEVELS: [RowLevel; 3] = [RowLevel::Velocity; 3];
const POSITION_LEVELS: [RowLevel; 3] = [RowLevel::Position; 3];
const SLOTS: [Option<usize>; 3] = [Some(0), Some(1), Some(2)];

/// A point of a free body held along 1–3 world normals.
#[derive(Debug, Clone, PartialEq)]
pub struct PointToGround {
    bodies: [BodyId; 1],
    normal_count: usize,
    position_level: bool,
    default_point: [f64; 3],
    default_normals: Vec<f64>,
}

impl PointToGround {
    /// A contact of `point` (body frame) of `body` along `normals` (Ground; 1 to 3, unit,
    /// mutually orthogonal — RBDL only asserts this in debug builds, simbatch rejects them).
    /// The normals are the default for every instance and may be changed per instance.
    pub fn new(body: BodyId, point: [f64; 3], normals: &[[f64; 3]]) -> Result<Self> {
        if normals.is_empty() || normals.len() > 3 {
            return Err(Error::Template(format!(
                "point_to_ground: {} normals given; accepted: 1 to 3",
                normals.len()
            )));
        }
        let mut flat: Vec<f64> = normals.iter().flatten().copied().collect();
        if !Check::UnitOrthogonal.accept(&mut flat) {
            return Err(Error::Template(format!(
                "point_to_ground: normals {normals:?} not accepted; accepted: {}",
                Check::UnitOrthogonal.accepted()
            )));
        }
        if !point.iter().all(|v| v.is_finite()) {
            return Err(Error::Template(format!(
                "point_to_ground: point {point:?} not accepted; accepted: finite numbers"
            )));
        }
        Ok(Self {
            bodies: [body],
            normal_count: normals.len(),
            position_level: false,
            default_point: point,
            default_normals: flat,
        })
    }

    /// Makes the rows position-level: `e_i = n_i · (x_p − ground_point)`.
    pub fn position_level(mut self) -> Self {
        self.position_level = true;
        self
    }

    /// Number of normals (rows).
    pub fn normal_count(&self) -> usize {
        self.normal_count
    }

    /// Whether rows carry position errors.
    pub fn is_position_level(&self) -> bool {
        self.position_level
    }
}

impl Constraint for PointToGround {
    fn kind_name(&self) -> &'static str {
        "point_to_ground"
    }

    fn bodies(&self) -> &[BodyId] {
        &self.bodies
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec {
                name: "point",
                default: self.default_point.to_vec(),
                check: Check::Finite,
            },
            ParamSpec {
                name: "normals",
                default: self.default_normals.clone(),
                check: Check::UnitOrthogonal,
            },
            ParamSpec {
                name: "ground_point",
                default: vec![0.0; 3],
                check: Check::Finite,
            },
        ]
    }

    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "point_to_ground.wgsl".into(),
            source: WGSL.into(),
            evaluate: format!(
                "point_to_ground_rows(p, {}u, {}, a)",
                self.normal_count, self.position_level
            ),
            report: Some(format!(
                "point_to_ground_report_params(p, {}u, a, multipliers)",
                self.normal_count
            )),
        })
    }

    fn row_levels(&self) -> &[RowLevel] {
        if self.position_level {
            &POSITION_LEVELS[..self.normal_count]
        } else {
            &VELOCITY_LEVELS[..self.normal_count]
        }
    }

    fn report_slots(&self) -> &[Option<usize>] {
        &SLOTS[..self.normal_count]
    }

    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]) {
        let body = &kinematics[0];
        let (w, b) = (body.ang_vel, body.ang_acc);
        let r_p = body.rotation * params.vec3(POINT);
        let x_p = body.origin + r_p;
        let v_p = body.lin_vel + w.cross(&r_p);
        let a_p = body.lin_acc + b.cross(&r_p) + w.cross(&w.cross(&r_p));
        let ground_point = params.vec3(GROUND_POINT);
        let normals = params.get(NORMALS);
        for (i, row) in rows.iter_mut().enumerate().take(self.normal_count) {
            let n = Vec3::new(normals[3 * i], normals[3 * i + 1], normals[3 * i + 2]);
            *row = Row {
                jacobian: [point_row(&r_p, &n), [0.0; 6]],
                position_error: if self.position_level {
                    n.dot(&(x_p - ground_point))
                } else {
                    0.0
                },
                velocity_error: n.dot(&v_p),
                acceleration_error: n.dot(&a_p),
            };
        }
    }

    avx512_lane_methods!(PointToGround);

    fn reported_extras(&self) -> ReportedExtras {
        ReportedExtras {
            contact_point: true,
            separation: false,
            contact_force: true,
        }
    }

    /// The body point as a small ball and the force on it; with one normal, the ground plane
    /// through `ground_point` normal to it (with two or three the point is held on a line or
    /// fixed, and no plane is drawn).
    fn decorations(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> Vec<Decoration> {
        let report = self.report(params, kinematics, multipliers);
        let mut out = Vec::with_capacity(4);
        if self.normal_count == 1 {
            let n = params.vec3(NORMALS).normalize();
            // Any unit vector across the normal, then the third axis.
            let seed = if n.x.abs() < 0.9 {
                Vec3::x()
            } else {
                Vec3::y()
            };
            let px = (seed - n * n.dot(&seed)).normalize();
            let py = n.cross(&px);
            out.push(Decoration::Plane {
                origin: array(&params.vec3(GROUND_POINT)),
                axes: [array(&px), array(&py), array(&n)],
                half_width: PLANE_HALF_WIDTH,
            });
        }
        out.push(Decoration::Point {
            position: report.contact_point,
            radius: POINT_RADIUS,
        });
        out.push(Decoration::Force {
            point: report.contact_point,
            force: report.contact_force,
        });
        out
    }

    /// `contact_point` = `x_p` in Ground; `contact_force` = physical force on the body,
    /// `Σ n_i λ_rbdl,i = −Σ n_i λ_i`, in Ground.
    fn report(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> ContactReport {
        let body = &kinematics[0];
        let x_p = body.origin + body.rotation * params.vec3(POINT);
        let normals = params.get(NORMALS);
        let mut force = Vec3::zeros();
        for (i, lambda) in multipliers.iter().enumerate().take(self.normal_count) {
            force -= *lambda * Vec3::new(normals[3 * i], normals[3 * i + 1], normals[3 * i + 2]);
        }
        ContactReport {
            contact_point: x_p.into(),
            separation: 0.0,
            contact_force: force.into(),
        }
    }
}

/// The lane methods' bodies, each inlined into its trait method and into that method's
/// AVX-512 copy (`math::lanes::avx512`).
impl PointToGround {
    /// Prepares `[p_b (3), ground_point (3), n_1, …, n_k (3 each)]` per lane.
    #[inline(always)]
    fn prepare_lanes_body(&self, params: &ParamLanes<'_>, prepared: &mut PreparedLanes) {
        prepared[..3].copy_from_slice(params.vec3(POINT).as_slice());
        prepared[3..6].copy_from_slice(params.vec3(GROUND_POINT).as_slice());
        for j in 0..3 * self.normal_count {
            prepared[6 + j] = params.value(NORMALS, j);
        }
    }

    /// [`evaluate`](Constraint::evaluate), line for line, on four instances at once.
    #[inline(always)]
    fn evaluate_lanes_body(
        &self,
        _params: &ParamLanes<'_>,
        prepared: &PreparedLanes,
        kinematics: &[BodyLanes],
        rows: &mut [RowLanes],
    ) {
        let body = &kinematics[0];
        let (w, b) = (body.ang_vel, body.ang_acc);
        let r_p = mul_vec(&body.rotation, &LaneVec3::from_column_slice(&prepared[..3]));
        let x_p = body.origin + r_p;
        let v_p = body.lin_vel + cross(&w, &r_p);
        let a_p = body.lin_acc + cross(&b, &r_p) + cross(&w, &cross(&w, &r_p));
        let ground_point = LaneVec3::from_column_slice(&prepared[3..6]);
        let zero = splat(0.0);
        for (i, row) in rows.iter_mut().enumerate().take(self.normal_count) {
            let n = LaneVec3::from_column_slice(&prepared[6 + 3 * i..9 + 3 * i]);
            *row = RowLanes {
                jacobian: [point_row_lanes(&r_p, &n), [zero; 6]],
                position_error: if self.position_level {
                    dot3(&n, &(x_p - ground_point))
                } else {
                    zero
                },
                velocity_error: dot3(&n, &v_p),
                acceleration_error: dot3(&n, &a_p),
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
        let body = &kinematics[0];
        let x_p =
            body.origin + mul_vec(&body.rotation, &LaneVec3::from_column_slice(&prepared[..3]));
        let mut force = LaneVec3::repeat(splat(0.0));
        for (i, lambda) in multipliers.iter().enumerate().take(self.normal_count) {
            force -= LaneVec3::from_column_slice(&prepared[6 + 3 * i..9 + 3 * i]) * *lambda;
        }
        ReportLanes {
            contact_point: x_p,
            separation: splat(0.0),
            contact_force: force,
        }
    }
}

/// RBDL's body-frame form: the physical force in the body's frame, applied at the contact point
/// (the torque about the point is zero). `rotation` is `R_GB`.
pub fn body_frame_force(rotation: &Mat3, force_in_ground: &[f64; 3]) -> [f64; 3] {
    (rotation.transpose() * Vec3::from(*force_in_ground)).into()
}

/// RBDL's root-frame form: the physical force as a spatial force `(torque, force)` about the
/// Ground origin, for a contact point `x_p` in Ground.
pub fn root_frame_wrench(contact_point: &[f64; 3], force_in_ground: &[f64; 3]) -> [f64; 6] {
    let f = Vec3::from(*force_in_ground);
    let t = Vec3::from(*contact_point).cross(&f);
    [t.x, t.y, t.z, f.x, f.y, f.z]
}
