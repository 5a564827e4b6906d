//! RBDL point contacts' energy, per-instance adaptive RKM, a failing instance isolated, bad
//! options and calls refused, instances off their constraints flagged.

use super::*;

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
