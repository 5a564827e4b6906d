//! Closed forms (reference-cases A2, A3, A4, A6, A9), RK4's order, projection over 100 000
//! steps.

use super::*;

#[test]
fn a2_rolling_down_an_incline_covers_half_a_t_squared() {
    let (mut b, ball, px) = incline(true, 0.0);
    let s = b.q(ball).unwrap()[0];
    let start = Vector3::new(s[4], s[5], s[6]);
    Stepper::new(rk4(1e-3))
        .unwrap()
        .advance(&mut b, 1.0)
        .unwrap();
    let q = b.q(ball).unwrap()[0];
    let moved = Vector3::new(q[4], q[5], q[6]) - start;
    let a = 2.961346534; // (5/7) g sin 25°
    assert_close("distance down-slope", -moved.dot(&px), 0.5 * a, 1e-9);
    assert_close("off-line motion", (moved + 0.5 * a * px).norm(), 0.0, 1e-9);
    let u = b.u(ball).unwrap()[0];
    assert_close("speed", Vector3::new(u[3], u[4], u[5]).norm(), a, 1e-9);
    assert_close(
        "spin rate",
        Vector3::new(u[0], u[1], u[2]).norm(),
        a / 0.3,
        1e-8,
    );
}

#[test]
fn a3_sliding_sphere_keeps_its_spin_and_slides_at_g_sin_theta() {
    let (mut b, ball, px) = incline(false, 0.7);
    let start = b.q(ball).unwrap()[0];
    Stepper::new(rk4(1e-3))
        .unwrap()
        .advance(&mut b, 1.0)
        .unwrap();
    let q = b.q(ball).unwrap()[0];
    let moved = Vector3::new(q[4] - start[4], q[5] - start[5], q[6] - start[6]);
    let g_sin = 4.145885148;
    assert_close("position along Px", moved.dot(&px), 0.7 - 0.5 * g_sin, 1e-9);
    let u = b.u(ball).unwrap()[0];
    assert_close(
        "spin stays 0",
        Vector3::new(u[0], u[1], u[2]).norm(),
        0.0,
        1e-12,
    );
}

#[test]
fn a4_steady_rolling_is_steady() {
    let (m, r) = (1.5, 0.2);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(r))
        .unwrap();
    let mut b = Batch::new(t, 1).unwrap();
    let k = 0.4 * m * r * r;
    b.set_mass_properties(ball, 0, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0])
        .unwrap();
    b.set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, r]).unwrap();
    let v = Vector3::new(0.8, -0.3, 0.0);
    let w: Vector3<f64> = Vector3::z().cross(&v) / r + 0.7 * Vector3::<f64>::z();
    b.set_u(ball, 0, [w.x, w.y, w.z, v.x, v.y, v.z]).unwrap();
    let e0 = b.energy(0).unwrap();
    let ev = b.evaluate();
    assert!(
        ev.udot_of(0).unwrap().iter().all(|a| a.abs() < 1e-12),
        "u̇ = 0"
    );
    assert_close(
        "λz",
        ev.constraint(c).unwrap().multipliers_of(0).unwrap()[2],
        -m * 9.81,
        1e-12,
    );
    Stepper::new(rk4(1e-3))
        .unwrap()
        .advance(&mut b, 2.0)
        .unwrap();
    let q = b.q(ball).unwrap()[0];
    let u = b.u(ball).unwrap()[0];
    assert_close("x", q[4], 2.0 * v.x, 1e-12);
    assert_close("y", q[5], 2.0 * v.y, 1e-12);
    assert_close("z", q[6], r, 1e-12);
    for k in 0..3 {
        assert_close("w", u[k], w[k], 1e-12);
        assert_close("v", u[3 + k], v[k], 1e-12);
    }
    assert_close("energy", b.energy(0).unwrap(), e0, 1e-12);
    assert_close(
        "power",
        b.evaluate().constraint(c).unwrap().power[0],
        0.0,
        1e-12,
    );
}

#[test]
fn a6_ball_on_a_turntable_returns_after_seven_pi_over_omega() {
    let (omega, r, m) = (2.0, 0.1, 1.0);
    let q_up = axis_angle([1.0, 0.0, 0.0], -std::f64::consts::FRAC_PI_2); // Pz = +Y
    let mut t = SystemTemplate::new();
    let table = t.add_prescribed_body("turntable");
    let ball = t.add_free_body("ball");
    t.add_constraint(
        SphereOnPlaneContact::new(table, ball, true)
            .with_plane_frame([q_up[0], q_up[1], q_up[2], q_up[3], 0.0, 0.0, 0.0])
            .with_radius(r),
    )
    .unwrap();
    let mut b = Batch::new(t, 1).unwrap();
    b.set_gravity(0, [0.0, -9.81, 0.0]).unwrap(); // along the table's normal
    b.set_velocity(table, 0, [0.0, omega, 0.0, 0.0, 0.0, 0.0])
        .unwrap();
    let k = 0.4 * m * r * r;
    b.set_mass_properties(ball, 0, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0])
        .unwrap();
    let n = Vector3::y();
    let centre = Vector3::new(0.5, 0.1, 0.0);
    let v0 = Vector3::new(0.0, 0.0, 0.3);
    let p_c = centre - r * n;
    let w0 = n.cross(&(v0 - omega * n.cross(&p_c))) / r;
    b.set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, centre.x, centre.y, centre.z])
        .unwrap();
    b.set_u(ball, 0, [w0.x, w0.y, w0.z, v0.x, v0.y, v0.z])
        .unwrap();
    let period = 7.0 * std::f64::consts::PI / omega;
    let mut stepper = Stepper::new(rk4(1e-3)).unwrap();
    stepper.advance(&mut b, period / 4.0).unwrap();
    let u = b.u(ball).unwrap()[0];
    assert_close("v after T/4, x", u[3], 0.3, 1e-8);
    assert_close("v after T/4, y", u[4], 0.0, 1e-8);
    assert_close("v after T/4, z", u[5], 0.0, 1e-8);
    stepper.advance(&mut b, 0.75 * period).unwrap();
    assert_close("period", b.time()[0], 10.995574, 1e-6);
    let q = b.q(ball).unwrap()[0];
    assert_close("x after T", q[4], 0.5, 1e-8);
    assert_close("y after T", q[5], 0.1, 1e-8);
    assert_close("z after T", q[6], 0.0, 1e-8);
}

#[test]
fn a9_energy_is_conserved_to_1e_12_with_rk4() {
    for rolling in [true, false] {
        let (mut b, _, c) = eccentric_ball(rolling);
        let (p0, v0) = max_errors(&b, c);
        assert!(p0 < 1e-15 && v0 < 1e-15, "consistent start: {p0:e} {v0:e}");
        let e0 = b.energy(0).unwrap();
        let mut stepper = Stepper::new(rk4(2e-4)).unwrap();
        let mut worst = 0.0f64;
        for _ in 0..20 {
            stepper.advance(&mut b, 0.1).unwrap();
            worst = worst.max((b.energy(0).unwrap() - e0).abs());
        }
        let (perr, verr) = max_errors(&b, c);
        println!("rolling={rolling}: |ΔE| = {worst:e}, perr = {perr:e}, verr = {verr:e}");
        assert!(worst < 1e-11, "energy drift {worst:e}");
        assert!(
            perr < 1e-12 && verr < 1e-12,
            "constraint drift {perr:e} {verr:e}"
        );
    }
}

#[test]
fn rk4_is_fourth_order() {
    let run = |h: f64| {
        let (mut b, ball, _) = eccentric_ball(true);
        Stepper::new(rk4(h)).unwrap().advance(&mut b, 0.5).unwrap();
        let mut y = b.q(ball).unwrap()[0].to_vec();
        y.extend_from_slice(&b.u(ball).unwrap()[0]);
        y
    };
    let reference = run(1e-3 / 16.0);
    let err = |y: &[f64]| {
        y.iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    };
    let (e1, e2, e3) = (err(&run(0.02)), err(&run(0.01)), err(&run(0.005)));
    println!(
        "RK4 errors {e1:e} {e2:e} {e3:e}: ratios {} {}",
        e1 / e2,
        e2 / e3
    );
    for ratio in [e1 / e2, e2 / e3] {
        assert!(
            (12.0..20.0).contains(&ratio),
            "halving the step divides the error by {ratio}, not ≈ 16"
        );
    }
}

#[test]
fn projection_keeps_errors_under_tolerance_for_100_000_steps() {
    let (mut b, _, c) = eccentric_ball(true);
    let tolerance = 1e-8;
    let mut stepper = Stepper::new(StepOptions {
        integrator: Integrator::SemiImplicitEuler { step: 1e-3 },
        stabilization: Stabilization::Projection { tolerance },
    })
    .unwrap();
    let mut projections = 0;
    for _ in 0..10 {
        projections += stepper.step(&mut b, 10_000).unwrap().projections;
        let (perr, verr) = max_errors(&b, c);
        assert!(
            perr <= tolerance && verr <= tolerance,
            "perr {perr:e} verr {verr:e}"
        );
    }
    assert!((b.time()[0] - 100.0).abs() < 1e-9);
    assert!(projections > 0, "Euler drifts: projection must have acted");
    // Without projection the same run drifts past the tolerance.
    let (mut free, _, c2) = eccentric_ball(true);
    Stepper::new(StepOptions {
        integrator: Integrator::SemiImplicitEuler { step: 1e-3 },
        stabilization: Stabilization::None,
    })
    .unwrap()
    .step(&mut free, 10_000)
    .unwrap();
    let (perr, _) = max_errors(&free, c2);
    assert!(
        perr > tolerance,
        "unprojected drift {perr:e} should exceed {tolerance:e}"
    );
}
