//! A user's own SphereOnPlaneContact, written against the public constraint interface only
//! (CPU formulas, WGSL twin, report, assembly conditions), gives the built-in's results on
//! Simbody's golden files on both paths; its optional assembly conditions (RBDL's
//! `CalcAssemblyPositionError` / `CalcAssemblyVelocityError`) steer position and velocity
//! assembly; the GPU's limits on a constraint (3 rows, 32 parameter values) are typed errors.
//!
//! The formulation deliberately differs from the built-in's where the physics allows: velocity
//! errors are the slip of the ball's material point at the contact against the plane's
//! (`v_B(C) − v_F(C)`), where the built-in differentiates the sphere centre's motion seen from F.
//!
//! The constraint is defined here; its tests are in `simbody` (the golden files, CPU and GPU)
//! and `assembly` (assembly conditions, the GPU's limits).

use crate::common;
use common::{device, golden_dir};

use std::collections::BTreeMap;
use std::sync::Arc;

use simbatch::constraints::{
    BodyKinematics, Check, Constraint, ContactReport, ParamSpec, Params, ReportedExtras, Row,
    RowLevel, WgslConstraint, plane_frame, point_row,
};
use simbatch::cpu::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use simbatch::golden::{
    self, ContactStructure, Record, Report, builtin_contact, compare_contact, compare_evaluations,
    contact_batch, contact_batch_with,
};
use simbatch::math::Vec3;
use simbatch::prelude::*;
use simbatch::scenarios::Rng;

/// Parameter indices, in `params()` order.
const PLANE_FRAME: usize = 0;
const SPHERE_CENTER: usize = 1;
const RADIUS: usize = 2;
/// Only with assembly conditions: where in the plane (x, y in P) the contact should be.
const CONTACT_XY: usize = 3;

/// A sphere on body `ball` touching a plane on body `plane`, rows `[z]` or `[z, x, y]`.
#[derive(Debug)]
struct MySphereOnPlane {
    bodies: [BodyId; 2],
    rolling: bool,
    /// Declares the assembly conditions: position — the contact sits at `contact_xy` in the
    /// plane, on it; velocity — no slip in any direction and no spin about the normal.
    assembly: bool,
}

/// Contact geometry and motion in Ground, shared by rows, report and assembly conditions.
struct Contact {
    axes: [Vec3; 3],
    /// Plane origin `P_o`.
    plane_origin: Vec3,
    /// Sphere centre `O`.
    center: Vec3,
    /// Contact point `C = O − r Pz`.
    point: Vec3,
    /// Signed distance `(O − P_o)·Pz − r`.
    height: f64,
    /// `v_B(C) − v_F(C)`: the ball's material point at C against the plane's.
    slip: Vec3,
    radius: f64,
}

fn contact(params: &Params<'_>, plane: &BodyKinematics, ball: &BodyKinematics) -> Contact {
    let (r_fp, p_fp) = plane_frame(params.get(PLANE_FRAME));
    let r_gp = plane.rotation * r_fp;
    let axes = [0, 1, 2].map(|k| r_gp.column(k).into_owned());
    let radius = params.get(RADIUS)[0];
    let plane_origin = plane.origin + plane.rotation * p_fp;
    let center = ball.origin + ball.rotation * params.vec3(SPHERE_CENTER);
    let point = center - radius * axes[2];
    let v_ball = ball.lin_vel + ball.ang_vel.cross(&(point - ball.origin));
    let v_plane = plane.lin_vel + plane.ang_vel.cross(&(point - plane.origin));
    Contact {
        axes,
        plane_origin,
        center,
        point,
        height: (center - plane_origin).dot(&axes[2]) - radius,
        slip: v_ball - v_plane,
        radius,
    }
}

/// Jacobian blocks of a point `p` (in Ground) of both bodies moving along `e`.
fn blocks(plane: &BodyKinematics, ball: &BodyKinematics, p: &Vec3, e: &Vec3) -> [[f64; 6]; 2] {
    [
        point_row(&(p - plane.origin), &(-e)),
        point_row(&(p - ball.origin), e),
    ]
}

impl Constraint for MySphereOnPlane {
    fn kind_name(&self) -> &'static str {
        "my_sphere_on_plane"
    }

    fn bodies(&self) -> &[BodyId] {
        &self.bodies
    }

    fn params(&self) -> Vec<ParamSpec> {
        let mut p = vec![
            ParamSpec {
                name: "plane_frame",
                default: vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                check: Check::Frame,
            },
            ParamSpec {
                name: "sphere_center",
                default: vec![0.0; 3],
                check: Check::Finite,
            },
            ParamSpec {
                name: "radius",
                default: vec![1.0],
                check: Check::Positive,
            },
        ];
        if self.assembly {
            p.push(ParamSpec {
                name: "contact_xy",
                default: vec![0.0; 2],
                check: Check::Finite,
            });
        }
        p
    }

    fn row_levels(&self) -> &[RowLevel] {
        if self.rolling {
            &[RowLevel::Position, RowLevel::Velocity, RowLevel::Velocity]
        } else {
            &[RowLevel::Position]
        }
    }

    fn report_slots(&self) -> &[Option<usize>] {
        if self.rolling {
            &[Some(1), Some(2), Some(0)]
        } else {
            &[None, None, Some(0)]
        }
    }

    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let k = contact(params, plane, ball);
        let [px, py, pz] = k.axes;
        // Accelerations: the sphere centre's motion seen from the plane (physics.md §2).
        let (w_f, w_b) = (plane.ang_vel, ball.ang_vel);
        let o_b = k.center - ball.origin;
        let d = k.center - plane.origin;
        let v_o = ball.lin_vel + w_b.cross(&o_b);
        let a_o = ball.lin_acc + ball.ang_acc.cross(&o_b) + w_b.cross(&w_b.cross(&o_b));
        let d_dot = v_o - plane.lin_vel;
        let a_fo = a_o - plane.lin_acc - plane.ang_acc.cross(&d) - 2.0 * w_f.cross(&d_dot)
            + w_f.cross(&w_f.cross(&d));
        rows[0] = Row {
            jacobian: blocks(plane, ball, &k.point, &pz),
            position_error: k.height,
            velocity_error: k.slip.dot(&pz),
            acceleration_error: a_fo.dot(&pz),
        };
        if self.rolling {
            let a_fc =
                a_fo - k.radius * ((ball.ang_acc - plane.ang_acc) - w_f.cross(&w_b)).cross(&pz);
            for (row, e) in rows[1..3].iter_mut().zip([px, py]) {
                *row = Row {
                    jacobian: blocks(plane, ball, &k.point, &e),
                    position_error: 0.0,
                    velocity_error: k.slip.dot(&e),
                    acceleration_error: a_fc.dot(&e),
                };
            }
        }
    }

    fn reported_extras(&self) -> ReportedExtras {
        ReportedExtras {
            contact_point: true,
            separation: true,
            contact_force: true,
        }
    }

    fn report(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> ContactReport {
        let k = contact(params, &kinematics[0], &kinematics[1]);
        let [px, py, pz] = k.axes;
        let mut force = multipliers[0] * pz;
        if self.rolling {
            force += multipliers[1] * px + multipliers[2] * py;
        }
        ContactReport {
            contact_point: k.point.into(),
            separation: k.height,
            contact_force: (-force).into(),
        }
    }

    fn assembly_position_rows(&self) -> usize {
        if self.assembly { 3 } else { 0 }
    }

    /// On the plane, with the sphere centre over `contact_xy`: `(O − P_o)·Px − x₀`,
    /// `(O − P_o)·Py − y₀`. Moving O along Px moves these errors; rotating the plane sweeps its
    /// axes about `F_o`, hence the blocks at O.
    fn assembly_position(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        rows: &mut [Row],
    ) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let k = contact(params, plane, ball);
        let xy = params.get(CONTACT_XY);
        let offset = k.center - k.plane_origin;
        rows[0] = Row {
            jacobian: blocks(plane, ball, &k.point, &k.axes[2]),
            position_error: k.height,
            ..Row::default()
        };
        for (row, (e, target)) in rows[1..3]
            .iter_mut()
            .zip([(k.axes[0], xy[0]), (k.axes[1], xy[1])])
        {
            *row = Row {
                jacobian: blocks(plane, ball, &k.center, &e),
                position_error: offset.dot(&e) - target,
                ..Row::default()
            };
        }
    }

    fn assembly_velocity_rows(&self) -> usize {
        if self.assembly { 4 } else { 0 }
    }

    /// No slip along Pz, Px, Py and no spin about the normal: `(ω_B − ω_F)·Pz`.
    fn assembly_velocity(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        rows: &mut [Row],
    ) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let k = contact(params, plane, ball);
        for (row, e) in rows[..3].iter_mut().zip(k.axes) {
            *row = Row {
                jacobian: blocks(plane, ball, &k.point, &e),
                velocity_error: k.slip.dot(&e),
                ..Row::default()
            };
        }
        let pz = k.axes[2];
        rows[3] = Row {
            jacobian: [
                [-pz.x, -pz.y, -pz.z, 0.0, 0.0, 0.0],
                [pz.x, pz.y, pz.z, 0.0, 0.0, 0.0],
            ],
            velocity_error: (ball.ang_vel - plane.ang_vel).dot(&pz),
            ..Row::default()
        };
    }

    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "my_sphere_on_plane.wgsl".into(),
            source: MY_SPHERE_WGSL.into(),
            evaluate: format!("my_sphere_rows(p, {}, a, b)", self.rolling),
            report: Some(format!(
                "my_sphere_report(p, {}, a, b, multipliers)",
                self.rolling
            )),
        })
    }
}

/// The WGSL twin of [`MySphereOnPlane`]: the same names, in the same order.
const MY_SPHERE_WGSL: &str = r#"
struct MyContact {
    px: vec3<real>,
    py: vec3<real>,
    pz: vec3<real>,
    plane_origin: vec3<real>,
    center: vec3<real>,
    point: vec3<real>,
    height: real,
    slip: vec3<real>,
    radius: real,
}

fn my_contact(p: array<real, PARAMS_CAP>, plane: BodyKinematics, ball: BodyKinematics) -> MyContact {
    let r_fp = rotation_from_quaternion(vec4<real>(p[0], p[1], p[2], p[3]));
    let p_fp = vec3<real>(p[4], p[5], p[6]);
    let r_gp = plane.rotation * r_fp;
    let radius = p[10];
    let plane_origin = plane.origin + plane.rotation * p_fp;
    let center = ball.origin + ball.rotation * vec3<real>(p[7], p[8], p[9]);
    let point = center - radius * r_gp[2];
    let v_ball = ball.lin_vel + cross(ball.ang_vel, point - ball.origin);
    let v_plane = plane.lin_vel + cross(plane.ang_vel, point - plane.origin);
    return MyContact(r_gp[0], r_gp[1], r_gp[2], plane_origin, center, point,
                     dot(center - plane_origin, r_gp[2]) - radius, v_ball - v_plane, radius);
}

fn my_row(plane: BodyKinematics, ball: BodyKinematics, at: vec3<real>, e: vec3<real>,
          position_error: real, velocity_error: real, acceleration_error: real) -> Row {
    let c_f = at - plane.origin;
    let c_b = at - ball.origin;
    return Row(cross(c_f, -e), -e, cross(c_b, e), e, position_error, velocity_error, acceleration_error);
}

fn my_sphere_rows(p: array<real, PARAMS_CAP>, rolling: bool, plane: BodyKinematics, ball: BodyKinematics) -> array<Row, 3> {
    let k = my_contact(p, plane, ball);
    let w_f = plane.ang_vel;
    let w_b = ball.ang_vel;
    let o_b = k.center - ball.origin;
    let d = k.center - plane.origin;
    let v_o = ball.lin_vel + cross(w_b, o_b);
    let a_o = ball.lin_acc + cross(ball.ang_acc, o_b) + cross(w_b, cross(w_b, o_b));
    let d_dot = v_o - plane.lin_vel;
    let a_fo = a_o - plane.lin_acc - cross(plane.ang_acc, d) - 2.0 * cross(w_f, d_dot)
        + cross(w_f, cross(w_f, d));
    var rows: array<Row, 3>;
    rows[0] = my_row(plane, ball, k.point, k.pz, k.height, dot(k.slip, k.pz), dot(a_fo, k.pz));
    if rolling {
        let a_fc = a_fo - k.radius * cross((ball.ang_acc - plane.ang_acc) - cross(w_f, w_b), k.pz);
        rows[1] = my_row(plane, ball, k.point, k.px, 0.0, dot(k.slip, k.px), dot(a_fc, k.px));
        rows[2] = my_row(plane, ball, k.point, k.py, 0.0, dot(k.slip, k.py), dot(a_fc, k.py));
    }
    return rows;
}

fn my_sphere_report(p: array<real, PARAMS_CAP>, rolling: bool, plane: BodyKinematics, ball: BodyKinematics, multipliers: vec3<real>) -> ContactReport {
    let k = my_contact(p, plane, ball);
    var force = multipliers.x * k.pz;
    if rolling {
        force += multipliers.y * k.px + multipliers.z * k.py;
    }
    return ContactReport(k.point, k.height, -force);
}
"#;

mod assembly;
mod simbody;
