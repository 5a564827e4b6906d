//! A knife edge (Chaplygin sleigh blade): point P (body frame) of one body stays on the ground
//! plane `z = 0` and does not slip along the body-fixed lateral direction `l` (body frame,
//! unit). Rows, with `r_P = R p`, `L = R l`:
//!
//! - holonomic `z`: position error `z_P`, velocity error `v_P,z`, acceleration error `a_P,z`,
//!   Jacobian `[ (r_P × e_z)ᵀ, e_zᵀ ]`;
//! - nonholonomic lateral: velocity error `L · v_P`, acceleration error
//!   `L · a_P + (ω × L) · v_P`, Jacobian `[ (r_P × L)ᵀ, Lᵀ ]`.
//!
//! Both rows are workless, so energy is conserved. Twin: `shaders/custom/knife_edge.wgsl`.

use crate::constraints::{
    BodyKinematics, Check, Constraint, ParamSpec, Params, Row, RowLevel, WgslConstraint, point_row,
};
use crate::math::Vec3;
use crate::model::BodyId;

/// Parameter index of the blade point P (body frame).
pub const POINT: usize = 0;
/// Parameter index of the lateral direction l (body frame, unit).
pub const LATERAL: usize = 1;

const LEVELS: [RowLevel; 2] = [RowLevel::Position, RowLevel::Velocity];
const SLOTS: [Option<usize>; 2] = [Some(0), Some(1)];

/// A blade at a body point on the ground plane, with no sideways slip.
#[derive(Debug, Clone, PartialEq)]
pub struct KnifeEdge {
    bodies: [BodyId; 1],
    point: [f64; 3],
    lateral: [f64; 3],
}

impl KnifeEdge {
    /// A blade at `point` of `body` that cannot slip along `lateral` (both body frame).
    pub fn new(body: BodyId, point: [f64; 3], lateral: [f64; 3]) -> Self {
        Self {
            bodies: [body],
            point,
            lateral,
        }
    }
}

impl Constraint for KnifeEdge {
    fn kind_name(&self) -> &'static str {
        "knife_edge"
    }

    fn bodies(&self) -> &[BodyId] {
        &self.bodies
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec {
                name: "point",
                default: self.point.to_vec(),
                check: Check::Finite,
            },
            ParamSpec {
                name: "lateral",
                default: self.lateral.to_vec(),
                check: Check::UnitOrthogonal,
            },
        ]
    }

    fn row_levels(&self) -> &[RowLevel] {
        &LEVELS
    }

    fn report_slots(&self) -> &[Option<usize>] {
        &SLOTS
    }

    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]) {
        let body = &kinematics[0];
        let (w, b) = (body.ang_vel, body.ang_acc);
        let r_p = body.rotation * params.vec3(POINT);
        let x_p = body.origin + r_p;
        let v_p = body.lin_vel + w.cross(&r_p);
        let a_p = body.lin_acc + b.cross(&r_p) + w.cross(&w.cross(&r_p));
        let ez = Vec3::z();
        rows[0] = Row {
            jacobian: [point_row(&r_p, &ez), [0.0; 6]],
            position_error: x_p.z,
            velocity_error: v_p.z,
            acceleration_error: a_p.z,
        };
        let l = body.rotation * params.vec3(LATERAL);
        rows[1] = Row {
            jacobian: [point_row(&r_p, &l), [0.0; 6]],
            position_error: 0.0,
            velocity_error: l.dot(&v_p),
            acceleration_error: l.dot(&a_p) + w.cross(&l).dot(&v_p),
        };
    }

    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "knife_edge.wgsl".into(),
            source: include_str!("../../shaders/custom/knife_edge.wgsl").into(),
            evaluate: "knife_edge_rows(p, a)".into(),
            report: None,
        })
    }
}
