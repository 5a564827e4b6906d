//! A massless rod: point P (body frame) of one body keeps distance `length` from a fixed point A
//! of Ground. One holonomic row with `e = x_P − A`, `d = |e|`, `n = e / d`:
//!
//! - position error `d − L`,
//! - velocity error `n · v_P`,
//! - acceleration error `n · a_P + (|v_P|² − (n · v_P)²) / d`,
//! - Jacobian `[ (r_P × n)ᵀ, nᵀ ]` with `r_P = R p` (the point from the body origin, in Ground).
//!
//! Twin: `shaders/custom/distance_rod.wgsl`.

use crate::constraints::{
    BodyKinematics, Check, Constraint, ParamSpec, Params, Row, RowLevel, WgslConstraint, point_row,
};
use crate::model::BodyId;

/// Parameter index of the body point P (body frame).
pub const POINT: usize = 0;
/// Parameter index of the anchor A (Ground).
pub const ANCHOR: usize = 1;
/// Parameter index of the length L.
pub const LENGTH: usize = 2;

const LEVELS: [RowLevel; 1] = [RowLevel::Position];
const SLOTS: [Option<usize>; 1] = [Some(0)];

/// A rod of fixed length between a body point and a Ground point.
#[derive(Debug, Clone, PartialEq)]
pub struct DistanceRod {
    bodies: [BodyId; 1],
    point: [f64; 3],
    anchor: [f64; 3],
    length: f64,
}

impl DistanceRod {
    /// A rod from `point` (body frame) of `body` to `anchor` (Ground), of `length` (> 0): the
    /// defaults of every instance, changeable per instance (`point`, `anchor`, `length`).
    pub fn new(body: BodyId, point: [f64; 3], anchor: [f64; 3], length: f64) -> Self {
        Self {
            bodies: [body],
            point,
            anchor,
            length,
        }
    }
}

impl Constraint for DistanceRod {
    fn kind_name(&self) -> &'static str {
        "distance_rod"
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
                name: "anchor",
                default: self.anchor.to_vec(),
                check: Check::Finite,
            },
            ParamSpec {
                name: "length",
                default: vec![self.length],
                check: Check::Positive,
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
        let e = x_p - params.vec3(ANCHOR);
        let d = e.norm();
        let n = e / d;
        let n_v = n.dot(&v_p);
        rows[0] = Row {
            jacobian: [point_row(&r_p, &n), [0.0; 6]],
            position_error: d - params.get(LENGTH)[0],
            velocity_error: n_v,
            acceleration_error: n.dot(&a_p) + (v_p.norm_squared() - n_v * n_v) / d,
        };
    }

    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "distance_rod.wgsl".into(),
            source: include_str!("../../shaders/custom/distance_rod.wgsl").into(),
            evaluate: "distance_rod_rows(p, a)".into(),
            report: None,
        })
    }
}
