//! Time stepping against closed forms (reference-cases A2, A3, A4, A6, A9), energy and drift of
//! RBDL point contacts, RK4's order, projection over 100 000 steps, per-instance adaptive RKM and
//! isolation of a failing instance.

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

fn max_errors(b: &Batch, c: ConstraintId) -> (f64, f64) {
    let ev = b.evaluate();
    let ce = ev.constraint(c).unwrap();
    let m = |v: &[f64]| v.iter().fold(0.0f64, |a, x| a.max(x.abs()));
    (m(&ce.position_errors), m(&ce.velocity_errors))
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

/// RBDL point contacts: a pivot (3 normals: a spherical pendulum) and a frictionless slide (1
/// normal, position level). Energy is conserved and the contact point stays put; with a
/// perturbed start, Baumgarte pulls the error back.
#[test]
fn point_to_ground_pivot_and_slide_conserve_energy() {
    for (normals, position_level) in [(3usize, true), (1, true)] {
        let axes = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
        let mut t = SystemTemplate::new();
        let body = t.add_free_body("body");
        let mut contact = PointToGround::new(body, [0.0, 0.0, 0.3], &axes[..normals]).unwrap();
        if position_level {
            contact = contact.position_level();
        }
        let c = t.add_constraint(contact).unwrap();
        let mut b = Batch::new(t, 1).unwrap();
        b.set_mass_properties(body, 0, 2.0, [0.0; 3], [0.1, 0.2, 0.25, 0.0, 0.0, 0.0])
            .unwrap();
        let q = axis_angle([1.0, 0.2, 0.0], 2.5); // hanging-ish, tilted
        let rot = rotation_from_quaternion(&q).unwrap();
        let r_p = rot * Vector3::new(0.0, 0.0, 0.3);
        let origin = -r_p; // the point at the Ground origin (= ground point)
        let w = Vector3::new(0.5, -1.0, 0.8);
        let mut v = -w.cross(&r_p);
        if normals == 1 {
            v += Vector3::new(0.3, -0.2, 0.0); // slides in the plane
        }
        b.set_q(
            body,
            0,
            [q[0], q[1], q[2], q[3], origin.x, origin.y, origin.z],
        )
        .unwrap();
        b.set_u(body, 0, [w.x, w.y, w.z, v.x, v.y, v.z]).unwrap();
        let e0 = b.energy(0).unwrap();
        Stepper::new(rk4(2e-4))
            .unwrap()
            .advance(&mut b, 2.0)
            .unwrap();
        let (perr, verr) = max_errors(&b, c);
        let de = (b.energy(0).unwrap() - e0).abs();
        println!("normals={normals}: |ΔE| {de:e}, perr {perr:e}, verr {verr:e}");
        assert!(
            de < 1e-9 && perr < 1e-9 && verr < 1e-9,
            "normals={normals}: ΔE {de:e} perr {perr:e} verr {verr:e}"
        );

        // Baumgarte (RBDL mode) pulls a 1 mm violation back.
        b.set_param(c, "ground_point", 0, &[0.0, 0.0, 1e-3])
            .unwrap();
        b.set_baumgarte_time_constant(c, 0, 0.05).unwrap();
        let before = max_errors(&b, c).0;
        Stepper::new(StepOptions {
            integrator: Integrator::Rk4 { step: 1e-3 },
            stabilization: Stabilization::Baumgarte,
        })
        .unwrap()
        .advance(&mut b, 1.0)
        .unwrap();
        let after = max_errors(&b, c).0;
        println!("normals={normals}: Baumgarte error {before:e} -> {after:e}");
        assert!(
            before > 9e-4 && after < 1e-6,
            "Baumgarte {before:e} -> {after:e}"
        );
    }
}

#[test]
fn adaptive_rkm_keeps_per_instance_time_and_accuracy() {
    let (mut a, _, _) = simbatch::scenarios::contact_batch(
        simbatch::scenarios::ContactKind::RollingSphere,
        simbatch::scenarios::PlaneBody::Free,
        8,
        3,
    )
    .unwrap();
    let mut reference = a.clone();
    let mut rkm = Stepper::new(StepOptions {
        integrator: Integrator::RungeKuttaMerson {
            accuracy: 1e-8,
            max_step: 0.05,
        },
        stabilization: Stabilization::None,
    })
    .unwrap();
    // Instances start at different times and have different step histories.
    a.set_time(3, 5.0).unwrap();
    reference.set_time(3, 5.0).unwrap();
    let report = rkm.advance(&mut a, 0.3).unwrap();
    assert!(report.steps > 0);
    Stepper::new(rk4(1e-4))
        .unwrap()
        .advance(&mut reference, 0.3)
        .unwrap();
    for i in 0..8 {
        assert!((a.time()[i] - reference.time()[i]).abs() < 1e-12);
        let (x, y) = (
            a.u(BodyId::new(2)).unwrap()[i],
            reference.u(BodyId::new(2)).unwrap()[i],
        );
        for k in 0..6 {
            assert!(
                (x[k] - y[k]).abs() < 1e-5 * y[k].abs().max(1.0),
                "instance {i}: {x:?} vs {y:?}"
            );
        }
    }
    assert!((a.time()[3] - 5.3).abs() < 1e-12);
}

#[test]
fn a_failing_instance_is_flagged_and_the_others_step_on() {
    let (mut b, ball, _) = simbatch::scenarios::contact_batch(
        simbatch::scenarios::ContactKind::SlidingSphere,
        simbatch::scenarios::PlaneBody::Ground,
        20,
        5,
    )
    .unwrap();
    let mut clean = b.clone();
    b.set_u(ball, 7, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    let report = Stepper::new(rk4(1e-3)).unwrap().step(&mut b, 50).unwrap();
    Stepper::new(rk4(1e-3))
        .unwrap()
        .step(&mut clean, 50)
        .unwrap();
    // The random states are not assembled, so most instances are also flagged as off their
    // constraints; only instance 7 is halted.
    assert_eq!(
        report.flagged,
        b.status().iter().filter(|s| **s != status::OK).count()
    );
    assert_eq!(
        b.status()
            .iter()
            .filter(|s| **s & status::HALTED != 0)
            .count(),
        1
    );
    assert_ne!(b.status()[7] & status::NONFINITE_STATE, 0);
    assert_eq!(
        b.time()[7],
        0.0,
        "the failing instance keeps its last finite state"
    );
    for i in (0..20).filter(|i| *i != 7) {
        assert_eq!(b.status()[i] & status::HALTED, status::OK);
        assert_eq!(b.status()[i], clean.status()[i]);
        assert_eq!(b.q(ball).unwrap()[i], clean.q(ball).unwrap()[i]);
    }
}

#[test]
fn bad_step_options_are_rejected_with_the_field_named() {
    let e = Stepper::new(rk4(0.0)).unwrap_err().to_string();
    assert!(e.contains("integrator.step") && e.contains("> 0"), "{e}");
    let e = Stepper::new(StepOptions::simbody(2.0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("integrator.accuracy"), "{e}");
    let e = Stepper::new(StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::Projection { tolerance: -1.0 },
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("stabilization.tolerance"), "{e}");
    let (mut b, _, _) = eccentric_ball(true);
    assert!(
        Stepper::new(rk4(1e-3))
            .unwrap()
            .advance(&mut b, f64::NAN)
            .is_err()
    );
}

/// The benchmark's rolling balls (`scenarios::rolling_balls`: consistent, rolling along x at
/// 0.5–1.1 m/s on level ground) and the ball's handle.
fn rolling(n: usize) -> (Batch, BodyId) {
    let b = simbatch::scenarios::rolling_balls(n).unwrap();
    let ball = b.template().free_bodies()[0];
    (b, ball)
}

/// Issue 14: RKM with projection halved its step forever when an instance's velocity error on
/// entry exceeded the projection limit `max(2·tol, √tol)`, hanging the whole batch. Now the
/// step stops at the minimum, the instance is flagged (step failed, constraint violated) and
/// keeps its state, and the others arrive unaffected.
#[test]
fn rkm_with_an_entry_error_beyond_the_projection_limit_ends_and_flags_the_instance() {
    let (mut b, ball) = rolling(6);
    let mut clean = b.clone();
    // 100 m/s without spin on a rolling contact: velocity error 100 ≫ √1e-4.
    b.set_u(ball, 3, [0.0, 0.0, 0.0, 100.0, 0.0, 0.0]).unwrap();
    let started = std::time::Instant::now();
    let mut stepper = Stepper::new(StepOptions::simbody(1e-3)).unwrap();
    let report = stepper.advance(&mut b, 0.1).unwrap();
    assert!(started.elapsed().as_secs_f64() < 30.0);
    assert_eq!(report.flagged, 1);
    let s = b.status()[3];
    assert_ne!(s & status::STEP_FAILED, 0, "{}", status::describe(s));
    assert_ne!(
        s & status::CONSTRAINT_VIOLATED,
        0,
        "{}",
        status::describe(s)
    );
    assert_eq!(b.time()[3], 0.0);
    assert_eq!(b.u(ball).unwrap()[3], [0.0, 0.0, 0.0, 100.0, 0.0, 0.0]);
    Stepper::new(StepOptions::simbody(1e-3))
        .unwrap()
        .advance(&mut clean, 0.1)
        .unwrap();
    for i in (0..6).filter(|i| *i != 3) {
        assert_eq!(b.status()[i], status::OK);
        assert!((b.time()[i] - 0.1).abs() < 1e-15);
        assert_eq!(b.q(ball).unwrap()[i], clean.q(ball).unwrap()[i]);
    }
    // A halted instance is not stepped again; the others go on.
    let report = stepper.advance(&mut b, 0.05).unwrap();
    assert_eq!(report.flagged, 0);
    assert_eq!(b.time()[3], 0.0);
    assert!((b.time()[0] - 0.15).abs() < 1e-15);
    // The user resets it: it steps again.
    b.set_u(ball, 3, [0.0; 6]).unwrap();
    assert!(b.refresh_status_of(3).unwrap());
    stepper.reset_step_size(3);
    stepper.advance(&mut b, 0.05).unwrap();
    assert_eq!(b.status()[3], status::OK);
    assert!((b.time()[3] - 0.05).abs() < 1e-15);
}

/// Issue 14: an instance whose constraint errors exceed the tolerance after a call is flagged,
/// never reported as fine; it is still stepped. The tolerance is the projection's, else 1e-3,
/// or the one the user sets.
#[test]
fn an_instance_off_its_constraints_after_a_call_is_flagged() {
    let (mut b, ball) = rolling(4);
    // Instance 1 slips at 0.01 m/s on its rolling contact: nothing corrects it without drift
    // control, so its velocity error stays 0.01 > 1e-3.
    b.set_u(ball, 1, [0.0, 0.0, 0.0, 0.01, 0.0, 0.0]).unwrap();
    let mut loose = b.clone();
    let mut stepper = Stepper::new(rk4(1e-3)).unwrap();
    assert_eq!(stepper.violation_tolerance(), 1e-3);
    let report = stepper.step(&mut b, 10).unwrap();
    assert_eq!(report.flagged, 1);
    assert_eq!(b.status()[1], status::CONSTRAINT_VIOLATED);
    assert!((b.time()[1] - 0.01).abs() < 1e-15, "still stepped");
    for i in [0, 2, 3] {
        assert_eq!(b.status()[i], status::OK);
    }
    // A looser tolerance, set by the user, lets it pass; a bad one is refused.
    let mut tolerant = Stepper::new(rk4(1e-3)).unwrap();
    assert!(tolerant.set_violation_tolerance(-1.0).is_err());
    assert!(tolerant.set_violation_tolerance(f64::NAN).is_err());
    tolerant.set_violation_tolerance(0.1).unwrap();
    tolerant.step(&mut loose, 10).unwrap();
    assert_eq!(loose.status()[1], status::OK);
    // With projection the projection tolerance is the bound (and projection fixes the slip).
    let projected = Stepper::new(StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::Projection { tolerance: 1e-6 },
    })
    .unwrap();
    assert_eq!(projected.violation_tolerance(), 1e-6);
}

/// Every stepping loop has a bound: a fixed step too small for the duration, or a maximum RKM
/// step below the minimum step, is refused up front.
#[test]
fn calls_that_could_not_end_are_refused_up_front() {
    let (mut b, _) = rolling(1);
    let e = Stepper::new(rk4(1e-12))
        .unwrap()
        .advance(&mut b, 10.0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("duration") && e.contains("steps per call"),
        "{e}"
    );
    let e = Stepper::new(StepOptions {
        integrator: Integrator::RungeKuttaMerson {
            accuracy: 1e-3,
            max_step: 1e-300,
        },
        stabilization: Stabilization::None,
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("integrator.max_step"), "{e}");
    // An accuracy below what f64 resolves ends too (the error estimate rounds to 0 at small
    // steps, which are accepted), within the attempt cap.
    let mut stepper = Stepper::new(StepOptions {
        integrator: Integrator::RungeKuttaMerson {
            accuracy: 1e-300,
            max_step: 0.1,
        },
        stabilization: Stabilization::None,
    })
    .unwrap();
    b.set_u(
        b.template().free_bodies()[0],
        0,
        [0.0, 5.0, 0.0, 0.5, 0.0, 0.0],
    )
    .unwrap();
    let started = std::time::Instant::now();
    let report = stepper.advance(&mut b, 0.01).unwrap();
    assert!(started.elapsed().as_secs_f64() < 60.0);
    assert!(report.rejected > 0);
    assert!(
        b.status()[0] & status::STEP_FAILED != 0 || (b.time()[0] - 0.01).abs() < 1e-15,
        "either it arrived or it is flagged"
    );
}

/// Energy bookkeeping on driven systems: balls rolling on tilting plates (random laws), pushed
/// by applied forces and torques. The plate does work on the balls, so their energy is not
/// conserved; `energy change − driven work − applied work` is the integration error, which
/// RK4's fourth order makes vanish (the same check at h and h/2 shrinks ~16×).
#[test]
fn work_done_by_a_driven_plate_accounts_for_the_energy_change() {
    use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};
    let (mut batch, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Tilting, 64, 3).expect("batch");
    simbatch::cpu::assembly::assemble_positions(&mut batch, &Default::default())
        .expect("assembles");
    simbatch::cpu::assembly::assemble_velocities(&mut batch, None).expect("velocities assemble");
    let residual = |h: f64| {
        let mut b = batch.clone();
        let e0: Vec<f64> = (0..b.len()).map(|i| b.energy(i).unwrap()).collect();
        let mut stepper = Stepper::new(rk4(h)).unwrap();
        stepper.advance(&mut b, 0.5).unwrap();
        let mut worst: f64 = 0.0;
        let mut driven: f64 = 0.0;
        let mut applied: f64 = 0.0;
        for (i, e0) in e0.iter().enumerate() {
            assert_eq!(b.status()[i], 0, "instance {i}");
            let [wd, wa] = b.work()[i];
            let change = b.energy(i).unwrap() - e0;
            worst = worst.max((change - wd - wa).abs());
            driven = driven.max(wd.abs());
            applied = applied.max(wa.abs());
        }
        (worst, driven, applied)
    };
    let (coarse, driven, applied) = residual(2e-3);
    let (fine, _, _) = residual(1e-3);
    println!(
        "|ΔE − W| {coarse:.3e} (h 2e-3), {fine:.3e} (h 1e-3); |W driven| ≤ {driven:.3}, |W applied| ≤ {applied:.3}"
    );
    assert!(
        driven > 0.01 && applied > 0.01,
        "the plate and the loads do work"
    );
    assert!(fine < 1e-6 * driven, "bookkeeping misses: {fine:e}");
    assert!(
        coarse / fine > 8.0,
        "not fourth order: {coarse:e} → {fine:e}"
    );
}

/// Without prescribed bodies the constraint forces are workless: the driven work stays at
/// rounding level and the energy change is the applied loads' work.
#[test]
fn constraint_forces_between_free_bodies_do_no_work() {
    use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};
    let (mut batch, _, _) =
        contact_batch(ContactKind::Point, PlaneBody::Free, 32, 8).expect("batch");
    simbatch::cpu::assembly::assemble_positions(&mut batch, &Default::default())
        .expect("assembles");
    simbatch::cpu::assembly::assemble_velocities(&mut batch, None).expect("velocities assemble");
    let e0: Vec<f64> = (0..batch.len()).map(|i| batch.energy(i).unwrap()).collect();
    let mut stepper = Stepper::new(rk4(5e-4)).unwrap();
    stepper.advance(&mut batch, 0.2).unwrap();
    for (i, e0) in e0.iter().enumerate() {
        let [wd, wa] = batch.work()[i];
        let change = batch.energy(i).unwrap() - e0;
        assert!(wd.abs() < 1e-9, "instance {i}: driven work {wd:e}");
        assert!(
            (change - wa).abs() < 1e-7,
            "instance {i}: ΔE {change} vs W {wa}"
        );
    }
}
