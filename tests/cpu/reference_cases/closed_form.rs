//! Section A of `reference-cases.md`: closed forms (a ball at rest, spheres on inclines, a
//! pinned stick, a brick on four corners) and finite differences of the bias terms.

use super::*;

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
