//! Closed-form and RBDL cases of `reference-cases.md` (sections A and B), on the CPU f64 path.
//! Numbers below are copied from that file; λ uses Simbody's sign (λ = −λ_rbdl).

use nalgebra::{DVector, Matrix3, Rotation3, UnitQuaternion, Vector3};
use simbatch::constraints::point_to_ground::{body_frame_force, root_frame_wrench};
use simbatch::math::{quaternion_rate, rotation_from_quaternion};
use simbatch::model::Baumgarte;
use simbatch::prelude::*;

fn assert_close(what: &str, got: f64, expected: f64, tol: f64) {
    assert!(
        (got - expected).abs() <= tol * expected.abs().max(1.0),
        "{what}: got {got:.15e}, expected {expected:.15e}"
    );
}

fn assert_all_close(what: &str, got: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(got.len(), expected.len(), "{what}: length");
    for (k, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_close(&format!("{what}[{k}]"), *g, *e, tol);
    }
}

fn quat_of(r: &Matrix3<f64>) -> [f64; 4] {
    let q = UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(*r));
    [q.w, q.i, q.j, q.k]
}

fn axis_angle_quat(axis: [f64; 3], angle: f64) -> [f64; 4] {
    let a = Vector3::from(axis).normalize() * (angle / 2.0).sin();
    [(angle / 2.0).cos(), a.x, a.y, a.z]
}

fn pose(q: [f64; 4], p: [f64; 3]) -> [f64; 7] {
    [q[0], q[1], q[2], q[3], p[0], p[1], p[2]]
}

fn solid_sphere_inertia(m: f64, r: f64) -> [f64; 6] {
    let i = 0.4 * m * r * r;
    [i, i, i, 0.0, 0.0, 0.0]
}

/// Plane frame with Pz = +Y and Px = +X (a −90° turn about X).
fn y_up_plane() -> [f64; 7] {
    pose(
        axis_angle_quat([1.0, 0.0, 0.0], -std::f64::consts::FRAC_PI_2),
        [0.0; 3],
    )
}

// ---------------------------------------------------------------------------------------------
// A. Closed form
// ---------------------------------------------------------------------------------------------

#[test]
fn a1_ball_resting_on_level_ground() {
    for rolling in [false, true] {
        let (m, r, g) = (2.0, 0.3, 9.81);
        let mut t = SystemTemplate::new();
        let ball = t.add_free_body("ball");
        let c = t
            .add_constraint(
                SphereOnPlaneContact::new(GROUND, ball, rolling)
                    .with_plane_frame(y_up_plane())
                    .with_radius(r),
            )
            .unwrap();
        let mut batch = Batch::new(t, 1).unwrap();
        batch.set_gravity(0, [0.0, -g, 0.0]).unwrap();
        batch
            .set_mass_properties(ball, 0, m, [0.0; 3], solid_sphere_inertia(m, r))
            .unwrap();
        batch
            .set_q(ball, 0, pose([1.0, 0.0, 0.0, 0.0], [0.4, r, -0.2]))
            .unwrap();
        let ev = batch.evaluate();
        let ce = ev.constraint(c).unwrap();
        assert_all_close("udot", ev.udot_of(0).unwrap(), &[0.0; 6], 1e-12);
        assert_all_close(
            "lambda",
            ce.multipliers_of(0).unwrap(),
            &[0.0, 0.0, -m * g],
            1e-12,
        );
        assert_all_close(
            "force_on_sphere",
            &ce.contact_force.as_ref().unwrap()[0],
            &[0.0, m * g, 0.0],
            1e-12,
        );
        assert_close("perr", ce.position_errors_of(0).unwrap()[2], 0.0, 1e-15);
        assert_close("separation", ce.separation.as_ref().unwrap()[0], 0.0, 1e-15);
        assert_close("power", ce.power[0], 0.0, 1e-15);
    }
}

/// Incline of angle θ about Ground's Y axis: Px up-slope, Pz the incline's normal.
fn incline(theta: f64) -> [f64; 7] {
    pose(axis_angle_quat([0.0, 1.0, 0.0], -theta), [0.0; 3])
}

fn sphere_on_incline(
    rolling: bool,
    velocity_along_px: f64,
) -> (Batch, ConstraintId, BodyId, Matrix3<f64>) {
    let (m, r, theta) = (2.0, 0.3, 25f64.to_radians());
    let frame = incline(theta);
    let r_gp = rotation_from_quaternion(&frame[..4]).unwrap();
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(
            SphereOnPlaneContact::new(GROUND, ball, rolling)
                .with_plane_frame(frame)
                .with_radius(r),
        )
        .unwrap();
    let mut batch = Batch::new(t, 1).unwrap();
    batch
        .set_mass_properties(ball, 0, m, [0.0; 3], solid_sphere_inertia(m, r))
        .unwrap();
    let center = r * r_gp.column(2).into_owned();
    batch
        .set_q(ball, 0, pose([1.0, 0.0, 0.0, 0.0], center.into()))
        .unwrap();
    let v = velocity_along_px * r_gp.column(0).into_owned();
    batch
        .set_u(ball, 0, [0.0, 0.0, 0.0, v.x, v.y, v.z])
        .unwrap();
    (batch, c, ball, r_gp)
}

#[test]
fn a2_solid_sphere_rolls_down_incline() {
    let (batch, c, _, r_gp) = sphere_on_incline(true, 0.0);
    let ev = batch.evaluate();
    let udot = ev.udot_of(0).unwrap();
    let a = Vector3::new(udot[3], udot[4], udot[5]);
    let b = Vector3::new(udot[0], udot[1], udot[2]);
    let px = r_gp.column(0).into_owned();
    assert_close("a along Px", a.dot(&px), -2.961346534, 1e-9);
    assert_close("|a|", a.norm(), 2.961346534, 1e-9);
    assert_close("|b|", b.norm(), 9.871155114, 1e-9);
    // Rolling down-slope (−Px) spins about −Py.
    assert_close(
        "b along Py",
        b.dot(&r_gp.column(1).into_owned()),
        -9.871155114,
        1e-9,
    );
    assert_all_close(
        "lambda",
        ev.constraint(c).unwrap().multipliers_of(0).unwrap(),
        &[-2.369077227, 0.0, -17.78175878],
        1e-9,
    );
}

#[test]
fn a3_sliding_sphere_does_not_spin_and_reports_no_slip_error() {
    let (batch, c, _, r_gp) = sphere_on_incline(false, 0.7);
    let ev = batch.evaluate();
    let udot = ev.udot_of(0).unwrap();
    let a = Vector3::new(udot[3], udot[4], udot[5]);
    assert_close(
        "a along Px",
        a.dot(&r_gp.column(0).into_owned()),
        -4.145885148,
        1e-9,
    );
    assert_close("|a|", a.norm(), 4.145885148, 1e-9);
    assert_all_close("b", &udot[..3], &[0.0; 3], 1e-12);
    let ce = ev.constraint(c).unwrap();
    let (m, g, theta) = (2.0, 9.81, 25f64.to_radians());
    assert_close(
        "lambda_z",
        ce.multipliers_of(0).unwrap()[2],
        -m * g * theta.cos(),
        1e-12,
    );
    // The ball slides at 0.7 m/s, yet velocity errors x, y are 0 (slip is not reported).
    assert_all_close(
        "verr",
        ce.velocity_errors_of(0).unwrap(),
        &[0.0, 0.0, 0.0],
        1e-15,
    );
}

#[test]
fn a5_falling_stick_pinned_by_point_on_plane() {
    let (m, l, phi, g) = (1.5, 1.2, 30f64.to_radians(), 9.81);
    let mut t = SystemTemplate::new();
    let stick = t.add_free_body("stick");
    let c = t
        .add_constraint(
            PointOnPlaneContact::new(GROUND, stick)
                .with_plane_frame(y_up_plane())
                .with_follower_point([0.0, -l / 2.0, 0.0]),
        )
        .unwrap();
    let mut batch = Batch::new(t, 1).unwrap();
    batch.set_gravity(0, [0.0, -g, 0.0]).unwrap();
    // Thin uniform rod along its body y axis; the tiny axial inertia plays no part in planar motion.
    let i = m * l * l / 12.0;
    batch
        .set_mass_properties(stick, 0, m, [0.0; 3], [i, 1e-9, i, 0.0, 0.0, 0.0])
        .unwrap();
    let com = [0.5 * l * phi.sin(), 0.5 * l * phi.cos(), 0.0];
    batch
        .set_q(stick, 0, pose(axis_angle_quat([0.0, 0.0, 1.0], -phi), com))
        .unwrap();
    let ev = batch.evaluate();
    let udot = ev.udot_of(0).unwrap();
    assert_all_close(
        "angular acceleration",
        &udot[..3],
        &[0.0, 0.0, -6.13125],
        1e-9,
    );
    assert_all_close(
        "COM acceleration",
        &udot[3..],
        &[3.185890954, -1.839375, 0.0],
        1e-9,
    );
    let lambda = ev.constraint(c).unwrap().multipliers_of(0).unwrap();
    assert_close("lambda_z", lambda[2], -11.9559375, 1e-9);
    assert_close("lambda_x", lambda[0], -4.778836431, 1e-9);
    assert_close("lambda_y", lambda[1], 0.0, 1e-9);
}

fn brick_on_four_corners(theta: f64) -> (Batch, Vec<ConstraintId>) {
    let (m, h) = (3.0, [0.4, 0.1, 0.25]);
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let mut corners = Vec::new();
    for sx in [-1.0, 1.0] {
        for sz in [-1.0, 1.0] {
            let p = [sx * h[0], -h[1], sz * h[2]];
            corners.push(
                t.add_constraint(PointOnPlaneContact::new(GROUND, brick).with_follower_point(p))
                    .unwrap(),
            );
        }
    }
    let mut batch = Batch::new(t, 1).unwrap();
    // The incline is expressed by tilting gravity: up-slope = +X, normal = +Z.
    batch
        .set_gravity(0, [-9.81 * theta.sin(), 0.0, -9.81 * theta.cos()])
        .unwrap();
    let (a, b, c) = (2.0 * h[0], 2.0 * h[1], 2.0 * h[2]);
    let inertia = [
        m / 12.0 * (b * b + c * c),
        m / 12.0 * (a * a + c * c),
        m / 12.0 * (a * a + b * b),
        0.0,
        0.0,
        0.0,
    ];
    batch
        .set_mass_properties(brick, 0, m, [0.0; 3], inertia)
        .unwrap();
    // Brick's y axis (height) along Ground's Z: +90° about X.
    batch
        .set_q(
            brick,
            0,
            pose(
                axis_angle_quat([1.0, 0.0, 0.0], std::f64::consts::FRAC_PI_2),
                [0.0, 0.0, h[1]],
            ),
        )
        .unwrap();
    (batch, corners)
}

#[test]
fn a7_brick_on_four_corners_min_norm() {
    let (m, g) = (3.0, 9.81);
    let (batch, corners) = brick_on_four_corners(0.0);
    let ev = batch.evaluate();
    assert_all_close("udot level", ev.udot_of(0).unwrap(), &[0.0; 6], 1e-12);
    for c in &corners {
        assert_all_close(
            "lambda level",
            ev.constraint(*c).unwrap().multipliers_of(0).unwrap(),
            &[0.0, 0.0, -m * g / 4.0],
            1e-9,
        );
    }
    let (batch, corners) = brick_on_four_corners(20f64.to_radians());
    let ev = batch.evaluate();
    assert_all_close("udot incline", ev.udot_of(0).unwrap(), &[0.0; 6], 1e-12);
    // Corners 0, 1 have x = −0.4 (downhill), corners 2, 3 x = +0.4 (uphill).
    let expected_z = [-7.542891759, -7.542891759, -6.284685156, -6.284685156];
    for (c, z) in corners.iter().zip(expected_z) {
        let l = ev.constraint(*c).unwrap().multipliers_of(0).unwrap();
        assert_all_close("lambda incline", l, &[-2.516413205, 0.0, z], 1e-9);
    }
}

/// Second-order Taylor path of a free body's q given u and u̇ (exact first derivative at t = 0).
fn advance(q: &[f64; 7], u: &[f64; 6], udot: &[f64; 6], t: f64) -> ([f64; 7], [f64; 6]) {
    let w = Vector3::new(u[0], u[1], u[2]);
    let b = Vector3::new(udot[0], udot[1], udot[2]);
    let qd = quaternion_rate(&q[..4], &w);
    // q̈ = ½ E(q̇) w + ½ E(q) b; E is linear in its quaternion argument.
    let e1 = quaternion_rate(&qd, &w);
    let e2 = quaternion_rate(&q[..4], &b);
    let mut out = *q;
    for k in 0..4 {
        out[k] = q[k] + qd[k] * t + 0.5 * (e1[k] + e2[k]) * t * t;
    }
    for k in 0..3 {
        out[4 + k] = q[4 + k] + u[3 + k] * t + 0.5 * udot[3 + k] * t * t;
    }
    let mut u_t = *u;
    for k in 0..6 {
        u_t[k] = u[k] + udot[k] * t;
    }
    (out, u_t)
}

/// Fourth-order central difference from f(±h), f(±2h).
fn five_point(fp1: f64, fm1: f64, fp2: f64, fm2: f64, h: f64) -> f64 {
    (8.0 * (fp1 - fm1) - (fp2 - fm2)) / (12.0 * h)
}

/// A8: central differences along a trajectory match the analytic derivatives; G from verr(u)
/// equals the force map; power = −λ·verr. Both bodies free, random states.
#[test]
fn a8_finite_differences_both_bodies_free() {
    let mut seed = 0x2545F4914F6CDD1Du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    for kind in 0..3 {
        for _trial in 0..5 {
            let mut t = SystemTemplate::new();
            let plane = t.add_free_body("plane");
            let ball = t.add_free_body("ball");
            let frame = pose([0.9, rnd(), rnd(), rnd()], [rnd(), rnd(), rnd()]);
            let c = match kind {
                0 => t.add_constraint(
                    SphereOnPlaneContact::new(plane, ball, true)
                        .with_plane_frame(frame)
                        .with_radius(0.3)
                        .with_sphere_center([rnd() * 0.1, rnd() * 0.1, 0.0]),
                ),
                1 => t.add_constraint(
                    SphereOnPlaneContact::new(plane, ball, false)
                        .with_plane_frame(frame)
                        .with_radius(0.2),
                ),
                _ => t.add_constraint(
                    PointOnPlaneContact::new(plane, ball)
                        .with_plane_frame(frame)
                        .with_follower_point([rnd(), rnd(), rnd()]),
                ),
            }
            .unwrap();
            let mut batch = Batch::new(t, 1).unwrap();
            let mut q0 = Vec::new();
            let mut u0 = Vec::new();
            for body in [plane, ball] {
                let q = pose([1.0 + rnd(), rnd(), rnd(), rnd()], [rnd(), rnd(), rnd()]);
                let u = [rnd() * 2.0, rnd() * 2.0, rnd() * 2.0, rnd(), rnd(), rnd()];
                batch.set_q(body, 0, q).unwrap();
                batch.set_u(body, 0, u).unwrap();
                batch
                    .set_mass_properties(
                        body,
                        0,
                        1.0 + rnd().abs(),
                        [rnd() * 0.1, rnd() * 0.1, rnd() * 0.1],
                        [0.3, 0.4, 0.5, 0.01, 0.02, -0.01],
                    )
                    .unwrap();
                q0.push(batch.q(body).unwrap()[0]);
                u0.push(u);
            }
            let udot: Vec<f64> = (0..12).map(|_| rnd() * 3.0).collect();
            let sys0 = batch.instance_system(0).unwrap();
            let aerr = batch.acceleration_errors_at(0, &udot).unwrap()[c.0].clone();
            let h = 1e-3;
            let at = |t: f64| {
                let mut b = batch.clone();
                for (k, body) in [plane, ball].iter().enumerate() {
                    let ud: [f64; 6] = udot[6 * k..6 * k + 6].try_into().unwrap();
                    let (q, u) = advance(&q0[k], &u0[k], &ud, t);
                    b.set_q(*body, 0, q).unwrap();
                    b.set_u(*body, 0, u).unwrap();
                }
                let s = b.instance_system(0).unwrap();
                (s.position_errors.clone(), s.velocity_errors.clone())
            };
            let (p1, v1) = at(h);
            let (m1, w1) = at(-h);
            let (p2, v2) = at(2.0 * h);
            let (m2, w2) = at(-2.0 * h);
            let dperr = five_point(p1[0], m1[0], p2[0], m2[0], h);
            assert_close("d perr/dt vs verr_z", dperr, sys0.velocity_errors[0], 1e-9);
            for r in 0..v1.len() {
                let dverr = five_point(v1[r], w1[r], v2[r], w2[r], h);
                assert_close(&format!("d verr[{r}]/dt vs aerr"), dverr, aerr[r], 1e-9);
            }
            // G built from verr(u): verr is affine in u, so differences are exact up to rounding.
            for col in 0..12 {
                let mut b = batch.clone();
                let body = [plane, ball][col / 6];
                let mut u = b.u(body).unwrap()[0];
                u[col % 6] += 1.0;
                b.set_u(body, 0, u).unwrap();
                let v1 = b.instance_system(0).unwrap().velocity_errors;
                for r in 0..v1.len() {
                    assert_close(
                        &format!("G[{r},{col}]"),
                        v1[r] - sys0.velocity_errors[r],
                        sys0.jacobian[(r, col)],
                        1e-12,
                    );
                }
            }
            let ev = batch.evaluate();
            let ce = ev.constraint(c).unwrap();
            let lambda = sys0.solve().unwrap().multipliers;
            assert_close(
                "power",
                ce.power[0],
                -lambda.dot(&sys0.velocity_errors),
                1e-12,
            );
            // aerr at the constrained u̇ vanishes.
            for e in ce.acceleration_errors_of(0).unwrap() {
                assert!(e.abs() < 1e-10, "aerr at dynamic udot {e}");
            }
        }
    }
}

/// A8 with a prescribed (driven) plane body: the prescribed motion enters only through the bias.
#[test]
fn a8_prescribed_plane_body_bias_matches_finite_differences() {
    let mut t = SystemTemplate::new();
    let table = t.add_prescribed_body("table");
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(
            SphereOnPlaneContact::new(table, ball, true)
                .with_radius(0.1)
                .with_sphere_center([0.01, 0.0, -0.02]),
        )
        .unwrap();
    let mut batch = Batch::new(t, 1).unwrap();
    let tq = pose([0.95, 0.1, -0.2, 0.15], [0.1, -0.2, 0.05]);
    let tu = [0.3, -0.4, 2.0, 0.1, 0.05, -0.2];
    let ta = [0.5, 0.2, -0.3, 0.4, -0.1, 0.2];
    batch.set_pose(table, 0, tq).unwrap();
    batch.set_velocity(table, 0, tu).unwrap();
    batch.set_acceleration(table, 0, ta).unwrap();
    let bq = pose([0.7, 0.3, 0.2, -0.1], [0.4, 0.3, 0.2]);
    let bu = [1.0, -0.5, 0.7, 0.2, 0.3, -0.4];
    batch.set_q(ball, 0, bq).unwrap();
    batch.set_u(ball, 0, bu).unwrap();
    let bd = [0.3, -0.2, 0.1, 0.5, 0.4, -0.6];
    let sys0 = batch.instance_system(0).unwrap();
    let aerr = batch.acceleration_errors_at(0, &bd).unwrap()[c.0].clone();
    // G u̇ + k equals the formula with the prescribed accelerations kept.
    let via_g = sys0
        .acceleration_errors(&DVector::from_row_slice(&bd))
        .unwrap();
    assert_all_close("G u̇ + k", via_g.as_slice(), &aerr, 1e-12);
    let h = 1e-3;
    let at = |t: f64| {
        let mut b = batch.clone();
        let tq0 = b.pose(table).unwrap()[0];
        let (q, u) = advance(&tq0, &tu, &ta, t);
        b.set_pose(table, 0, q).unwrap();
        b.set_velocity(table, 0, u).unwrap();
        let bq0 = batch.q(ball).unwrap()[0];
        let (q, u) = advance(&bq0, &bu, &bd, t);
        b.set_q(ball, 0, q).unwrap();
        b.set_u(ball, 0, u).unwrap();
        let s = b.instance_system(0).unwrap();
        (s.position_errors.clone(), s.velocity_errors.clone())
    };
    let (p1, v1) = at(h);
    let (m1, w1) = at(-h);
    let (p2, v2) = at(2.0 * h);
    let (m2, w2) = at(-2.0 * h);
    assert_close(
        "d perr/dt",
        five_point(p1[0], m1[0], p2[0], m2[0], h),
        sys0.velocity_errors[0],
        1e-9,
    );
    for r in 0..3 {
        assert_close(
            &format!("d verr[{r}]/dt"),
            five_point(v1[r], w1[r], v2[r], w2[r], h),
            aerr[r],
            1e-9,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// B. RBDL cases (PointToGround)
// ---------------------------------------------------------------------------------------------

const XYZ: [[f64; 3]; 3] = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

struct Rbdl {
    batch: Batch,
    body: BodyId,
    contacts: Vec<ConstraintId>,
}

#[allow(clippy::too_many_arguments)]
fn rbdl_body(
    mass: f64,
    inertia: [f64; 6],
    com: [f64; 3],
    gravity: [f64; 3],
    q: [f64; 7],
    u: [f64; 6],
    contacts: Vec<PointToGround>,
    baumgarte: Option<f64>,
) -> Rbdl {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    let _ = body;
    let ids: Vec<ConstraintId> = contacts
        .into_iter()
        .map(|c| t.add_constraint(c).unwrap())
        .collect();
    if let Some(tc) = baumgarte {
        for id in &ids {
            t.set_baumgarte(*id, Some(Baumgarte { time_constant: tc }))
                .unwrap();
        }
    }
    let mut batch = Batch::new(t, 1).unwrap();
    batch
        .set_mass_properties(body, 0, mass, com, inertia)
        .unwrap();
    batch.set_gravity(0, gravity).unwrap();
    batch.set_q(body, 0, q).unwrap();
    batch.set_u(body, 0, u).unwrap();
    Rbdl {
        batch,
        body,
        contacts: ids,
    }
}

/// RBDL's q̈ = [a_o (world), ω̇ (body frame)] from simbatch's u̇ = [b (world), a_o].
fn rbdl_qddot(udot: &[f64], r: &Matrix3<f64>) -> Vec<f64> {
    let wdot_body = r.transpose() * Vector3::new(udot[0], udot[1], udot[2]);
    vec![
        udot[3],
        udot[4],
        udot[5],
        wdot_body.x,
        wdot_body.y,
        wdot_body.z,
    ]
}

#[test]
fn p1_instantaneous_pivot() {
    let c = PointToGround::new(BodyId::new(1), [0.0, -1.0, 0.0], &XYZ).unwrap();
    let s = rbdl_body(
        1.0,
        [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, -9.81, 0.0],
        pose([1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0]),
        [0.0, 0.0, -1.0, 1.0, 0.0, 0.0],
        vec![c],
        None,
    );
    let ev = s.batch.evaluate();
    let udot = ev.udot_of(0).unwrap();
    assert_all_close("a_o", &udot[3..], &[0.0, -1.0, 0.0], 1e-12);
    assert_all_close("wdot", &udot[..3], &[0.0; 3], 1e-12);
    let ce = ev.constraint(s.contacts[0]).unwrap();
    assert_all_close(
        "lambda_rbdl",
        &ce.multipliers_of(0)
            .unwrap()
            .iter()
            .map(|l| -l)
            .collect::<Vec<_>>(),
        &[0.0, 8.81, 0.0],
        1e-12,
    );
    assert_all_close(
        "physical force",
        &ce.contact_force.as_ref().unwrap()[0],
        &[0.0, 8.81, 0.0],
        1e-12,
    );
}

#[test]
fn p2_inconsistent_moving_state() {
    let r = Matrix3::new(
        0.808307066774345,
        -0.0720659114904708,
        0.584333971461272,
        0.341746746490328,
        0.865601553329486,
        -0.365982393206091,
        -0.479425538604203,
        0.495520388354132,
        0.724300143351802,
    );
    let w = [-0.709163793375977, -1.92838628538885, -0.632919138233275];
    let c = PointToGround::new(BodyId::new(1), [0.0, -1.0, 0.0], &XYZ).unwrap();
    let s = rbdl_body(
        1.0,
        [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, -9.81, 0.0],
        pose(quat_of(&r), [0.1, 0.2, 0.3]),
        [w[0], w[1], w[2], 1.1, 1.2, 1.3],
        vec![c],
        None,
    );
    let ev = s.batch.evaluate();
    let udot = ev.udot_of(0).unwrap();
    assert_all_close(
        "a_o",
        &udot[3..],
        &[0.577622487794113, -1.75321359772555, 1.34934126213606],
        1e-9,
    );
    assert_all_close(
        "wdot_world",
        &udot[..3],
        &[2.82431003446478, -0.383465227441357, 1.08061057843656],
        1e-9,
    );
    let l: Vec<f64> = ev
        .constraint(s.contacts[0])
        .unwrap()
        .multipliers_of(0)
        .unwrap()
        .iter()
        .map(|l| -l)
        .collect();
    assert_all_close(
        "lambda_rbdl",
        &l,
        &[0.577622487794113, 8.05678640227445, 1.34934126213606],
        1e-9,
    );
}

const Q_QUAT: [f64; 4] = [
    0.939372712847379,
    0.0916432938695913,
    0.183286587739183,
    0.274929881608774,
];
const Q_ORIGIN: [f64; 3] = [0.231047052335367, -0.365720597983117, 0.316798047876956];
const Q_POINT: [f64; 3] = [0.05, -0.1, -0.3];

fn q_case(
    com: [f64; 3],
    v_o: [f64; 3],
    normals: &[[f64; 3]],
    baumgarte: Option<f64>,
) -> (Rbdl, Matrix3<f64>) {
    let r = rotation_from_quaternion(&Q_QUAT).unwrap();
    let w = r * Vector3::new(0.3, -0.5, 0.8);
    let c = PointToGround::new(BodyId::new(1), Q_POINT, normals).unwrap();
    let s = rbdl_body(
        2.0,
        [0.1, 0.2, 0.3, 0.0, 0.0, 0.0],
        com,
        [0.0, 0.0, -9.81],
        pose(Q_QUAT, Q_ORIGIN),
        [w.x, w.y, w.z, v_o[0], v_o[1], v_o[2]],
        vec![c],
        baumgarte,
    );
    (s, r)
}

#[test]
fn q1_sticking_contact() {
    let (s, r) = q_case(
        [0.0; 3],
        [-0.115022504059899, -0.235047842949794, 0.0367060633198293],
        &XYZ,
        None,
    );
    let sys = s.batch.instance_system(0).unwrap();
    // The point sits at (0.2, −0.4, 0) and is at rest.
    let ce_pt = s.batch.evaluate();
    let ce = ce_pt.constraint(s.contacts[0]).unwrap();
    assert_all_close(
        "contact point",
        &ce.contact_point.as_ref().unwrap()[0],
        &[0.2, -0.4, 0.0],
        1e-12,
    );
    assert_all_close("verr", ce.velocity_errors_of(0).unwrap(), &[0.0; 3], 1e-12);
    assert_all_close(
        "gamma",
        sys.bias.as_slice(),
        &[0.108129829454534, -0.0875102459883495, -0.221536445825945],
        1e-9,
    );
    assert_all_close(
        "qddot",
        &rbdl_qddot(ce_pt.udot_of(0).unwrap(), &r),
        &[
            0.523416116860159,
            0.50145818880254,
            -0.325965437962739,
            -0.797566514003202,
            2.11960435640095,
            -0.434221329978178,
        ],
        1e-9,
    );
    let l: Vec<f64> = ce.multipliers_of(0).unwrap().iter().map(|l| -l).collect();
    assert_all_close(
        "lambda_rbdl",
        &l,
        &[1.04683223372032, 1.00291637760508, 18.9680691240745],
        1e-9,
    );
    let force = ce.contact_force.as_ref().unwrap()[0];
    assert_all_close(
        "body-frame force at the point",
        &body_frame_force(&r, &force),
        &[-4.20584669512874, 5.50636541038846, 17.7166627451686],
        1e-9,
    );
    // Root-frame wrench: the same force, with its moment about the Ground origin.
    let wrench = root_frame_wrench(&ce.contact_point.as_ref().unwrap()[0], &force);
    let moment = Vector3::new(0.2, -0.4, 0.0).cross(&Vector3::from(force));
    assert_all_close(
        "root wrench",
        &wrench,
        &[moment.x, moment.y, moment.z, force[0], force[1], force[2]],
        1e-12,
    );
}

const Q2_QDDOT: [f64; 6] = [
    0.0853853840222278,
    0.0946817796818292,
    -0.543898989844552,
    -6.74826931000824,
    5.41145119264501,
    -1.74198320619304,
];

#[test]
fn q2_frictionless_sliding() {
    let (s, r) = q_case(
        [0.02, 0.03, -0.01],
        [0.584977495940101, -0.535047842949794, 0.0367060633198293],
        &[[0.0, 0.0, 1.0]],
        None,
    );
    let sys = s.batch.instance_system(0).unwrap();
    assert_close("gamma", sys.bias[0], -0.221536445825945, 1e-9);
    let ev = s.batch.evaluate();
    let ce = ev.constraint(s.contacts[0]).unwrap();
    // The point slides at (0.7, −0.3, 0).
    let point_velocity = sys.velocity_errors[0];
    assert_close("normal velocity", point_velocity, 0.0, 1e-12);
    assert_all_close(
        "qddot",
        &rbdl_qddot(ev.udot_of(0).unwrap(), &r),
        &Q2_QDDOT,
        1e-9,
    );
    assert_close(
        "lambda_rbdl",
        -ce.multipliers_of(0).unwrap()[0],
        17.9044139561362,
        1e-9,
    );
}

#[test]
fn q3_baumgarte_on_a_velocity_error() {
    let v_o = [0.584977495940101, -0.535047842949794, -0.463293936680171];
    let (off, r) = q_case([0.02, 0.03, -0.01], v_o, &[[0.0, 0.0, 1.0]], None);
    let ev = off.batch.evaluate();
    assert_close(
        "verr",
        ev.constraint(off.contacts[0])
            .unwrap()
            .velocity_errors_of(0)
            .unwrap()[0],
        -0.5,
        1e-12,
    );
    assert_all_close(
        "qddot off",
        &rbdl_qddot(ev.udot_of(0).unwrap(), &r),
        &Q2_QDDOT,
        1e-9,
    );

    let (on, r) = q_case([0.02, 0.03, -0.01], v_o, &[[0.0, 0.0, 1.0]], Some(0.1));
    let sys = on.batch.instance_system(0).unwrap();
    assert_close("gamma", sys.bias[0], 9.77846355417405, 1e-9);
    let ev = on.batch.evaluate();
    assert_all_close(
        "qddot on",
        &rbdl_qddot(ev.udot_of(0).unwrap(), &r),
        &[
            0.160515832732829,
            0.16295646043724,
            9.12569622828533,
            -14.2020344264116,
            10.8039148547165,
            -3.61055045404439,
        ],
        1e-9,
    );
    let ce = ev.constraint(on.contacts[0]).unwrap();
    assert_close(
        "lambda_rbdl",
        -ce.multipliers_of(0).unwrap()[0],
        36.5740094047916,
        1e-9,
    );
    assert_close(
        "normal point acceleration",
        ce.acceleration_errors_of(0).unwrap()[0],
        10.0,
        1e-9,
    );
    // The per-instance time constant is honoured: T = 0.2 halves α, quarters β².
    let mut b = on.batch.clone();
    b.set_baumgarte_time_constant(on.contacts[0], 0, 0.2)
        .unwrap();
    let ce2 = b.evaluate();
    assert_close(
        "normal point acceleration T=0.2",
        ce2.constraint(on.contacts[0])
            .unwrap()
            .acceleration_errors_of(0)
            .unwrap()[0],
        5.0,
        1e-9,
    );
}

#[test]
fn q_position_level_rows_and_ground_point() {
    // Position-level rows measure from the per-instance ground point; Baumgarte then pulls the
    // point towards it: a = −2α ė − β² e with ė = 0 at rest.
    let r = rotation_from_quaternion(&Q_QUAT).unwrap();
    let c = PointToGround::new(BodyId::new(1), Q_POINT, &[[0.0, 0.0, 1.0]])
        .unwrap()
        .position_level();
    let mut s = rbdl_body(
        2.0,
        [0.1, 0.2, 0.3, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, 0.0, -9.81],
        pose(Q_QUAT, Q_ORIGIN),
        [0.0; 6],
        vec![c],
        Some(0.1),
    );
    s.batch
        .set_param(s.contacts[0], "ground_point", 0, &[0.0, 0.0, -0.01])
        .unwrap();
    let ev = s.batch.evaluate();
    let ce = ev.constraint(s.contacts[0]).unwrap();
    assert_close(
        "position error",
        ce.position_errors_of(0).unwrap()[0],
        0.01,
        1e-12,
    );
    assert_close(
        "normal acceleration",
        ce.acceleration_errors_of(0).unwrap()[0],
        -100.0 * 0.01,
        1e-9,
    );
    let _ = (r, s.body);
}

#[test]
fn r1_redundant_support_unique_udot_and_total_force() {
    let mut contacts = Vec::new();
    for sx in [-0.2, 0.2] {
        for sy in [-0.3, 0.3] {
            contacts.push(
                PointToGround::new(BodyId::new(1), [sx, sy, -0.1], &[[0.0, 0.0, 1.0]]).unwrap(),
            );
        }
    }
    let s = rbdl_body(
        2.0,
        [0.1, 0.2, 0.3, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, 0.0, -9.81],
        pose([1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.1]),
        [0.0; 6],
        contacts,
        None,
    );
    let ev = s.batch.evaluate();
    assert_all_close("udot", ev.udot_of(0).unwrap(), &[0.0; 6], 1e-12);
    let mut total = Vector3::zeros();
    let mut moment = Vector3::zeros();
    for c in &s.contacts {
        let ce = ev.constraint(*c).unwrap();
        let f = Vector3::from(ce.contact_force.as_ref().unwrap()[0]);
        total += f;
        moment += Vector3::from(ce.contact_point.as_ref().unwrap()[0]).cross(&f);
    }
    assert_all_close(
        "total force",
        total.as_slice(),
        &[0.0, 0.0, 2.0 * 9.81],
        1e-12,
    );
    // About the COM (0, 0, 0.1): the contacts balance gravity without a moment.
    let about_com = moment - Vector3::new(0.0, 0.0, 0.1).cross(&total);
    assert_all_close("moment about COM", about_com.as_slice(), &[0.0; 3], 1e-12);
    let _ = s.body;
}
