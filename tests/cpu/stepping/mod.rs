//! Time stepping, one file per part: closed forms (reference-cases A2, A3, A4, A6, A9), RK4's
//! order and projection over 100 000 steps (`closed_form`); energy and drift of RBDL point
//! contacts, per-instance adaptive RKM, isolation of a failing instance, refusals and flags
//! (`control`); work done by driven and internal forces (`work`).

use nalgebra::Vector3;
use simbatch::math::rotation_from_quaternion;
use simbatch::prelude::*;

fn axis_angle(axis: [f64; 3], angle: f64) -> [f64; 4] {
    let a = Vector3::from(axis).normalize() * (angle / 2.0).sin();
    [(angle / 2.0).cos(), a.x, a.y, a.z]
}

fn rk4(step: f64) -> StepOptions {
    StepOptions {
        integrator: Integrator::Rk4 { step },
        stabilization: Stabilization::None,
    }
}

fn assert_close(what: &str, got: f64, expected: f64, tol: f64) {
    assert!(
        (got - expected).abs() <= tol,
        "{what}: got {got:.15e}, expected {expected:.15e}, tol {tol:e}"
    );
}

/// A solid sphere on an incline of 25° (Px up-slope), started at rest or sliding along Px.
fn incline(rolling: bool, v0: f64) -> (Batch, BodyId, Vector3<f64>) {
    let (m, r, theta) = (2.0, 0.3, 25f64.to_radians());
    let q = axis_angle([0.0, 1.0, 0.0], -theta);
    let frame = [q[0], q[1], q[2], q[3], 0.0, 0.0, 0.0];
    let r_gp = rotation_from_quaternion(&q).unwrap();
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    t.add_constraint(
        SphereOnPlaneContact::new(GROUND, ball, rolling)
            .with_plane_frame(frame)
            .with_radius(r),
    )
    .unwrap();
    let mut b = Batch::new(t, 1).unwrap();
    let k = 0.4 * m * r * r;
    b.set_mass_properties(ball, 0, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0])
        .unwrap();
    let c = r * r_gp.column(2).into_owned();
    b.set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, c.x, c.y, c.z])
        .unwrap();
    let px = r_gp.column(0).into_owned();
    let v = v0 * px;
    b.set_u(ball, 0, [0.0, 0.0, 0.0, v.x, v.y, v.z]).unwrap();
    (b, ball, px)
}

fn max_errors(b: &Batch, c: ConstraintId) -> (f64, f64) {
    let ev = b.evaluate();
    let ce = ev.constraint(c).unwrap();
    let m = |v: &[f64]| v.iter().fold(0.0f64, |a, x| a.max(x.abs()));
    (m(&ce.position_errors), m(&ce.velocity_errors))
}

/// A9: an eccentric ball on level ground, rolling or sliding, started consistent.
fn eccentric_ball(rolling: bool) -> (Batch, BodyId, ConstraintId) {
    let (m, r) = (1.0, 0.2);
    let p_bo = Vector3::new(0.05, 0.0, 0.0);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(
            SphereOnPlaneContact::new(GROUND, ball, rolling)
                .with_radius(r)
                .with_sphere_center(p_bo.into()),
        )
        .unwrap();
    let mut b = Batch::new(t, 1).unwrap();
    b.set_mass_properties(ball, 0, m, [0.0; 3], [0.010, 0.012, 0.014, 0.0, 0.0, 0.0])
        .unwrap();
    let q = axis_angle([0.3, -0.5, 1.0], 0.8);
    let rot = rotation_from_quaternion(&q).unwrap();
    let o_b = rot * p_bo;
    let centre = Vector3::new(0.1, -0.2, r);
    let origin = centre - o_b;
    let w = Vector3::new(1.0, 2.0, 0.5);
    let n = Vector3::z();
    let v_c = if rolling {
        r * w.cross(&n)
    } else {
        Vector3::new(0.4, -0.3, 0.0)
    };
    let v_o = v_c - w.cross(&o_b);
    b.set_q(
        ball,
        0,
        [q[0], q[1], q[2], q[3], origin.x, origin.y, origin.z],
    )
    .unwrap();
    b.set_u(ball, 0, [w.x, w.y, w.z, v_o.x, v_o.y, v_o.z])
        .unwrap();
    (b, ball, c)
}

mod closed_form;
mod control;
mod work;
