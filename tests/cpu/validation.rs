//! Bad input gets a typed error naming the field, the instance and the accepted range — never a
//! panic, never a silently stored bad value.

use simbatch::prelude::*;

fn sphere_batch(n: usize) -> (Batch, BodyId, ConstraintId) {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
        .unwrap();
    (Batch::new(t, n).unwrap(), ball, c)
}

fn expect_invalid(result: Result<()>, field: &str, instance: usize, accepted_contains: &str) {
    match result {
        Err(Error::InvalidValue {
            field: f,
            instance: i,
            accepted,
            ..
        }) => {
            assert_eq!(f, field);
            assert_eq!(i, instance);
            assert!(
                accepted.contains(accepted_contains),
                "accepted = {accepted:?}"
            );
        }
        other => panic!("expected InvalidValue for {field}, got {other:?}"),
    }
}

#[test]
fn non_positive_or_non_finite_mass() {
    let (mut b, ball, _) = sphere_batch(3);
    expect_invalid(b.set_mass(ball, 2, 0.0), "body[1].mass", 2, "> 0");
    expect_invalid(b.set_mass(ball, 1, -1.0), "body[1].mass", 1, "> 0");
    expect_invalid(b.set_mass(ball, 0, f64::NAN), "body[1].mass", 0, "finite");
    assert_eq!(b.mass(ball).unwrap(), &[1.0, 1.0, 1.0], "nothing stored");
    let msg = b.set_mass(ball, 2, -1.0).unwrap_err().to_string();
    assert!(
        msg.contains("body[1].mass") && msg.contains("instance 2") && msg.contains("> 0"),
        "{msg}"
    );
}

#[test]
fn inertia_not_spd_or_violating_triangle_inequality() {
    let (mut b, ball, _) = sphere_batch(2);
    expect_invalid(
        b.set_inertia(ball, 0, [1.0, 1.0, -0.5, 0.0, 0.0, 0.0]),
        "body[1].inertia",
        0,
        "positive definite",
    );
    // Eigenvalues 1 ± 2 and 1: indefinite.
    expect_invalid(
        b.set_inertia(ball, 1, [1.0, 1.0, 1.0, 2.0, 0.0, 0.0]),
        "body[1].inertia",
        1,
        "positive definite",
    );
    // SPD but Izz > Ixx + Iyy.
    expect_invalid(
        b.set_inertia(ball, 1, [1.0, 1.0, 2.5, 0.0, 0.0, 0.0]),
        "body[1].inertia",
        1,
        "triangle",
    );
    expect_invalid(
        b.set_inertia(ball, 0, [1.0, f64::INFINITY, 1.0, 0.0, 0.0, 0.0]),
        "body[1].inertia",
        0,
        "finite",
    );
    // Equality (a thin disc's Izz = Ixx + Iyy) is physical and accepted.
    b.set_inertia(ball, 0, [1.0, 1.0, 2.0, 0.0, 0.0, 0.0])
        .unwrap();
    // set_mass_properties is all-or-nothing.
    let before = b.free_body_columns(ball).unwrap().clone();
    assert!(
        b.set_mass_properties(ball, 1, 2.0, [0.0; 3], [1.0, 1.0, 3.0, 0.0, 0.0, 0.0])
            .is_err()
    );
    assert_eq!(b.free_body_columns(ball).unwrap(), &before);
}

#[test]
fn radius_must_be_positive() {
    let (mut b, _, c) = sphere_batch(2);
    expect_invalid(
        b.set_param(c, "radius", 1, &[0.0]),
        "constraint[0].radius",
        1,
        "> 0",
    );
    expect_invalid(
        b.set_param(c, "radius", 0, &[-0.2]),
        "constraint[0].radius",
        0,
        "> 0",
    );
    expect_invalid(
        b.set_param(c, "radius", 0, &[f64::NAN]),
        "constraint[0].radius",
        0,
        "finite",
    );
    assert_eq!(b.param(c, "radius").unwrap().0, &[0.1, 0.1]);
    // Bulk: one bad value rejects the column, naming the instance; nothing written.
    expect_invalid(
        b.set_param_column(c, "radius", &[0.3, -1.0]),
        "constraint[0].radius",
        1,
        "> 0",
    );
    assert_eq!(b.param(c, "radius").unwrap().0, &[0.1, 0.1]);
    b.set_param_column(c, "radius", &[0.3, 0.4]).unwrap();
    assert_eq!(b.param(c, "radius").unwrap().0, &[0.3, 0.4]);
}

#[test]
fn zero_quaternions_are_rejected_and_others_normalised() {
    let (mut b, ball, c) = sphere_batch(2);
    expect_invalid(
        b.set_q(ball, 0, [0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]),
        "body[1].q",
        0,
        "quaternion not zero",
    );
    expect_invalid(
        b.set_param(c, "plane_frame", 1, &[0.0; 7]),
        "constraint[0].plane_frame",
        1,
        "quaternion not zero",
    );
    b.set_q(ball, 1, [2.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0])
        .unwrap();
    assert_eq!(b.q(ball).unwrap()[1], [1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
    let mut t = SystemTemplate::new();
    let table = t.add_prescribed_body("table");
    let ball2 = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(table, ball2, false))
        .unwrap();
    let mut b2 = Batch::new(t, 1).unwrap();
    expect_invalid(
        b2.set_pose(table, 0, [0.0; 7]),
        "body[1].pose",
        0,
        "quaternion not zero",
    );
    expect_invalid(
        b2.set_velocity(table, 0, [f64::NAN; 6]),
        "body[1].velocity",
        0,
        "finite",
    );
}

#[test]
fn normals_must_be_unit_orthogonal_and_at_most_three() {
    let b = BodyId::new(1);
    assert!(matches!(
        PointToGround::new(b, [0.0; 3], &[]),
        Err(Error::Template(_))
    ));
    let four = [
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [1.0, 0.0, 0.0],
    ];
    let e = PointToGround::new(b, [0.0; 3], &four)
        .unwrap_err()
        .to_string();
    assert!(e.contains("4 normals") && e.contains("1 to 3"), "{e}");
    let e = PointToGround::new(b, [0.0; 3], &[[1.0, 0.1, 0.0]])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unit"), "{e}");
    assert!(PointToGround::new(b, [0.0; 3], &[[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]).is_err());
    assert!(PointToGround::new(b, [f64::NAN, 0.0, 0.0], &[[1.0, 0.0, 0.0]]).is_err());

    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    let c = t
        .add_constraint(
            PointToGround::new(body, [0.0; 3], &[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]).unwrap(),
        )
        .unwrap();
    let mut batch = Batch::new(t, 2).unwrap();
    expect_invalid(
        batch.set_param(c, "normals", 1, &[0.0, 0.0, 2.0, 1.0, 0.0, 0.0]),
        "constraint[0].normals",
        1,
        "unit",
    );
    expect_invalid(
        batch.set_param(c, "normals", 0, &[0.0, 0.0, 1.0, 0.0, 0.6, 0.8]),
        "constraint[0].normals",
        0,
        "orthogonal",
    );
    assert!(matches!(
        batch.set_param(c, "normals", 0, &[0.0, 0.0, 1.0]),
        Err(Error::ColumnLength {
            expected: 6,
            got: 3,
            ..
        })
    ));
    batch
        .set_param(c, "normals", 0, &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0])
        .unwrap();
}

#[test]
fn non_finite_numbers_are_rejected_everywhere() {
    let (mut b, ball, c) = sphere_batch(1);
    expect_invalid(
        b.set_gravity(0, [0.0, f64::NAN, 0.0]),
        "gravity",
        0,
        "finite",
    );
    expect_invalid(b.set_time(0, f64::INFINITY), "time", 0, "finite");
    expect_invalid(
        b.set_com(ball, 0, [f64::NAN, 0.0, 0.0]),
        "body[1].com",
        0,
        "finite",
    );
    expect_invalid(
        b.set_u(ball, 0, [0.0, 0.0, 0.0, f64::NEG_INFINITY, 0.0, 0.0]),
        "body[1].u",
        0,
        "finite",
    );
    expect_invalid(
        b.set_applied_force(ball, 0, [f64::NAN; 3]),
        "body[1].applied_force",
        0,
        "finite",
    );
    expect_invalid(
        b.set_applied_torque(ball, 0, [f64::NAN; 3]),
        "body[1].applied_torque",
        0,
        "finite",
    );
    expect_invalid(
        b.set_param(c, "sphere_center", 0, &[0.0, f64::NAN, 0.0]),
        "constraint[0].sphere_center",
        0,
        "finite",
    );
    expect_invalid(
        b.set_baumgarte_time_constant(c, 0, 0.0),
        "constraint[0].baumgarte_time_constant",
        0,
        "> 0",
    );
}

#[test]
fn handles_lengths_and_names_are_checked() {
    let (mut b, ball, c) = sphere_batch(2);
    assert!(matches!(
        b.set_mass(ball, 5, 1.0),
        Err(Error::InstanceOutOfRange {
            instance: 5,
            len: 2
        })
    ));
    assert!(matches!(
        b.set_mass_column(ball, &[1.0]),
        Err(Error::ColumnLength {
            got: 1,
            expected: 2,
            ..
        })
    ));
    assert!(matches!(
        b.mass(GROUND),
        Err(Error::BadHandle {
            what: "body",
            index: 0,
            ..
        })
    ));
    assert!(matches!(
        b.mass(BodyId::new(9)),
        Err(Error::BadHandle { .. })
    ));
    assert!(matches!(b.pose(ball), Err(Error::BadHandle { .. })));
    assert!(matches!(
        b.enabled(ConstraintId(3)),
        Err(Error::BadHandle {
            what: "constraint",
            ..
        })
    ));
    let e = b.param(c, "radiuss").unwrap_err().to_string();
    assert!(
        e.contains("radiuss") && e.contains("plane_frame, sphere_center, radius"),
        "{e}"
    );
    assert!(b.instance_system(2).is_err());
    assert!(matches!(
        b.acceleration_errors_at(0, &[0.0; 3]),
        Err(Error::Dimension {
            expected: 6,
            got: 3,
            ..
        })
    ));
}

#[test]
fn inconsistent_templates_are_rejected() {
    let mut t = SystemTemplate::new();
    let table = t.add_prescribed_body("table");
    let e = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, table, true))
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least one of its bodies must be free"), "{e}");
    let ball = t.add_free_body("ball");
    assert!(
        t.add_constraint(SphereOnPlaneContact::new(ball, ball, true))
            .is_err()
    );
    assert!(
        t.add_constraint(PointOnPlaneContact::new(GROUND, BodyId::new(7)))
            .is_err()
    );
    let c = t
        .add_constraint(PointOnPlaneContact::new(GROUND, ball))
        .unwrap();
    assert!(
        t.set_baumgarte(
            c,
            Some(Baumgarte {
                time_constant: -1.0
            })
        )
        .is_err()
    );
    assert!(t.set_baumgarte(ConstraintId(4), None).is_err());
    // A bad template default is caught when the batch is built.
    let mut t2 = SystemTemplate::new();
    let b2 = t2.add_free_body("ball");
    t2.add_constraint(SphereOnPlaneContact::new(GROUND, b2, false).with_radius(-1.0))
        .unwrap();
    let e = Batch::new(t2, 1).unwrap_err().to_string();
    assert!(e.contains("radius"), "{e}");
}

#[test]
fn disabled_constraint_drops_rows_but_reports_separation() {
    let (mut b, ball, c) = sphere_batch(2);
    b.set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.35])
        .unwrap();
    b.set_q(ball, 1, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.35])
        .unwrap();
    b.set_enabled(c, 1, false).unwrap();
    assert_eq!(b.instance_system(1).unwrap().rows(), 0);
    assert_eq!(b.instance_system(0).unwrap().rows(), 3);
    let ev = b.evaluate();
    let ce = ev.constraint(c).unwrap();
    // Disabled: free fall, no multipliers, no force, separation still 0.35 − 0.1.
    assert_eq!(ev.udot_of(1).unwrap(), &[0.0, 0.0, 0.0, 0.0, 0.0, -9.81]);
    assert_eq!(ce.multipliers_of(1).unwrap(), &[0.0, 0.0, 0.0]);
    assert_eq!(ce.contact_force.as_ref().unwrap()[1], [0.0, 0.0, 0.0]);
    assert!((ce.separation.as_ref().unwrap()[1] - 0.25).abs() < 1e-15);
    // Enabled: held, even though separated (bilateral, as in Simbody).
    assert!(ev.udot_of(0).unwrap().iter().all(|a| a.abs() < 1e-12));
}

/// Issue 14: a 2 kg ball with an inertia of 1e-14 (mass-matrix condition 2e14) was accepted and
/// then left its rolling constraint with status 0. It is refused by every setter, naming the
/// inertia and the condition, and nothing is stored.
#[test]
fn an_inertia_far_too_small_for_the_mass_is_refused() {
    let (mut b, ball, _) = sphere_batch(2);
    let tiny = [1e-14, 1e-14, 1e-14, 0.0, 0.0, 0.0];
    match b.set_mass_properties(ball, 1, 2.0, [0.0; 3], tiny) {
        Err(Error::InvalidValue {
            field,
            instance,
            value,
            accepted,
        }) => {
            assert_eq!((field.as_str(), instance), ("body[1].inertia", 1));
            assert!(value.contains("condition 2.000e14"), "{value}");
            assert!(accepted.contains("1e12"), "{accepted}");
        }
        other => panic!("{other:?}"),
    }
    b.set_mass(ball, 0, 2.0).unwrap();
    let e = b.set_inertia(ball, 0, tiny).unwrap_err().to_string();
    assert!(
        e.contains("body[1].inertia") && e.contains("instance 0"),
        "{e}"
    );
    // The column setters check each instance against the other column, and store nothing.
    let e = b.set_inertia_column(ball, &[[1.0, 1.0, 1.0, 0.0, 0.0, 0.0], tiny]);
    assert!(
        matches!(e, Err(Error::InvalidValue { instance: 1, .. })),
        "{e:?}"
    );
    let e = b.set_mass_column(ball, &[1.0, 1e13]);
    assert!(
        matches!(e, Err(Error::InvalidValue { instance: 1, .. })),
        "{e:?}"
    );
    assert_eq!(b.mass(ball).unwrap(), &[2.0, 1.0]);
    assert_eq!(b.inertia(ball).unwrap()[0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
    // Small but physical bodies pass: a 1 mm steel ball (4.1 mg, I = 1.6e-12).
    let m = 4.1e-6;
    let i = 0.4 * m * 1e-6;
    b.set_mass_properties(ball, 0, m, [0.0; 3], [i, i, i, 0.0, 0.0, 0.0])
        .unwrap();
}

/// Issue 14's API edges: indices past the end, handles from another template and non-finite
/// impact targets are typed errors, never panics or NaN.
#[test]
fn api_edges_are_typed_errors() {
    let (mut b, ball, c) = sphere_batch(3);
    let ev = b.evaluate();
    assert!(matches!(
        ev.udot_of(3),
        Err(Error::InstanceOutOfRange {
            instance: 3,
            len: 3
        })
    ));
    assert!(ev.udot_of(usize::MAX).is_err());
    assert!(ev.udot_unconstrained_of(7).is_err());
    let ce = ev.constraint(c).unwrap();
    assert!(ce.multipliers_of(3).is_err());
    assert!(ce.position_errors_of(3).is_err());
    assert!(ce.velocity_errors_of(usize::MAX).is_err());
    assert!(ce.acceleration_errors_of(3).is_err());
    assert!(ce.body_forces_of(3).is_err());
    assert_eq!(ev.udot_of(2).unwrap().len(), 6);

    // A handle made by another template for another body at the same index.
    let mut other = SystemTemplate::new();
    let brick = other.add_free_body("brick");
    assert_eq!(brick.index(), ball.index());
    let e = b.set_mass(brick, 0, 2.0).unwrap_err();
    assert!(matches!(e, Error::BadHandle { what: "body", .. }), "{e}");
    assert!(e.to_string().contains("another template"), "{e}");
    let mut t = SystemTemplate::new();
    t.add_free_body("wheel");
    let e = t
        .add_constraint(PointOnPlaneContact::new(GROUND, brick))
        .unwrap_err();
    assert!(e.to_string().contains("another template"), "{e}");
    // The same template built again by the same code accepts the first build's handles, and
    // an index handle is accepted anywhere it exists.
    let (mut again, _, _) = sphere_batch(1);
    again.set_mass(ball, 0, 3.0).unwrap();
    again.set_mass(BodyId::new(1), 0, 4.0).unwrap();
    assert_eq!(again.mass(ball).unwrap(), &[4.0]);

    // Non-finite impact targets.
    let mut targets = vec![vec![0.0; 3 * 3]];
    targets[0][4] = f64::NAN;
    let e = simbatch::cpu::assembly::apply_plastic_impacts(&mut b, Some(&targets)).unwrap_err();
    match e {
        Error::InvalidValue {
            field, instance, ..
        } => {
            assert_eq!(instance, 1);
            assert!(field.contains("impact targets"), "{field}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        b.u(ball)
            .unwrap()
            .iter()
            .all(|u| u.iter().all(|x| x.is_finite()))
    );
}

/// Sizes that come from users are refused up front with a typed error, never an abort.
#[test]
fn impossible_sizes_are_typed_errors() {
    let (_, _, _) = sphere_batch(1);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true))
        .unwrap();
    for n in [usize::MAX, 1usize << 50, 10_000_000_000_000] {
        match Batch::new(t.clone(), n) {
            Err(Error::OutOfMemory { what, bytes, .. }) => {
                assert!(what.contains(&n.to_string()), "{what}");
                assert!(bytes > 0);
            }
            other => panic!("{n}: {:?}", other.map(|b| b.len())),
        }
    }
    let task = simbatch::env::make_task("BallOnPlate-v0", &[]).unwrap();
    match simbatch::env::VectorEnv::new(task, 1 << 40, simbatch::env::EnvOptions::default()) {
        Err(Error::OutOfMemory { what, .. }) => assert_eq!(what, "num_envs"),
        other => panic!("{:?}", other.map(|e| e.len())),
    }
}

/// Status bits name what happened, for reports.
#[test]
fn status_bits_are_described() {
    assert_eq!(status::describe(0), "ok");
    let text = status::describe(status::STEP_FAILED | status::CONSTRAINT_VIOLATED);
    assert!(
        text.contains("step") && text.contains("constraint"),
        "{text}"
    );
    assert!(status::describe(1 << 20).contains("unknown"));
}

/// Issue 14's property test on the library: random, often absurd, values through every setter
/// of three kinds of batch, then evaluation and a few steps with every integrator and drift
/// control. Nothing panics; a setter either stores a valid value or refuses it; an instance
/// whose evaluation or state is not finite is flagged, and unflagged instances are finite.
#[test]
fn random_library_inputs_never_panic_and_never_pass_silently() {
    use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    const VALUES: [f64; 14] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e-300,
        1e300,
        -1e300,
        f64::NAN,
        f64::INFINITY,
        1e-14,
        1e12,
        0.1,
        2.5,
        -7.0,
    ];
    let pick = move |next: &mut dyn FnMut() -> u64| VALUES[(next() % VALUES.len() as u64) as usize];
    for (case, kind) in [
        ContactKind::RollingSphere,
        ContactKind::SlidingSphere,
        ContactKind::Point,
    ]
    .into_iter()
    .enumerate()
    {
        for plane in [PlaneBody::Ground, PlaneBody::Free, PlaneBody::Prescribed] {
            let (mut b, body, c) = contact_batch(kind, plane, 16, case as u64 + 1).unwrap();
            for _ in 0..300 {
                let i = (next() % 18) as usize; // sometimes out of range
                let v = pick(&mut next);
                let w = pick(&mut next);
                let r = match next() % 9 {
                    0 => b.set_mass(body, i, v),
                    1 => b.set_inertia(body, i, [v, v, w, 0.0, 0.0, 0.0]),
                    2 => b.set_com(body, i, [v, w, 0.0]),
                    3 => b.set_q(body, i, [1.0, v, 0.0, 0.0, w, 0.0, v]),
                    4 => b.set_u(body, i, [v, 0.0, w, 0.0, v, 0.0]),
                    5 => b.set_applied_force(body, i, [0.0, v, w]),
                    6 => b.set_gravity(i, [0.0, 0.0, v]),
                    7 => b.set_time(i, v),
                    _ => b
                        .param(c, "radius")
                        .map(|_| ())
                        .and_then(|_| b.set_param(c, "radius", i, &[v])),
                };
                if r.is_err() {
                    continue;
                }
            }
            // Every stored value passed validation.
            for m in b.mass(body).unwrap() {
                assert!(m.is_finite() && *m > 0.0);
            }
            let ev = b.evaluate();
            for i in 0..b.len() {
                if ev.status[i] == 0 {
                    assert!(ev.udot_of(i).unwrap().iter().all(|x| x.is_finite()));
                }
            }
            for options in [
                StepOptions {
                    integrator: Integrator::Rk4 { step: 1e-3 },
                    stabilization: Stabilization::None,
                },
                StepOptions {
                    integrator: Integrator::SemiImplicitEuler { step: 1e-3 },
                    stabilization: Stabilization::Baumgarte,
                },
                StepOptions::simbody(1e-3),
            ] {
                let mut s = b.clone();
                let started = std::time::Instant::now();
                Stepper::new(options)
                    .unwrap()
                    .advance(&mut s, 0.01)
                    .unwrap();
                assert!(started.elapsed().as_secs_f64() < 60.0, "{options:?}");
                for i in 0..s.len() {
                    if s.status()[i] & status::HALTED == 0 {
                        let st = s.instance_state(i).unwrap();
                        assert!(st.is_finite(), "instance {i} unflagged but not finite");
                    }
                }
            }
        }
    }
}

/// Template values every instance shares are stored once (broadcast columns); a write of the
/// shared value keeps them shared, a differing one expands only that column, and every reader
/// sees the same values either way.
#[test]
fn shared_columns_are_stored_once_and_expand_on_a_differing_write() {
    let n = 1000;
    let balls = simbatch::scenarios::rolling_balls(n).unwrap();
    let ball = BodyId::new(1);
    let full = Batch::bytes_per_instance(balls.template()) * n;
    let shared = balls.bytes();
    // Per instance: q, u, time, status and work; gravity, mass properties, loads, enabled,
    // Baumgarte and the contact's 11 parameters (plane frame, sphere centre, radius) once.
    let per_instance = (7 + 6) * 8 + 8 + 4 + 2 * 8;
    assert!(
        (per_instance * n..per_instance * n + 1000).contains(&shared),
        "{shared} bytes for {n} instances"
    );
    assert!(
        shared + 248 * n <= full,
        "the shared columns save 248 bytes an instance"
    );
    let cols = balls.free_body_columns(ball).unwrap();
    assert!(
        cols.mass.is_shared() && cols.inertia.is_shared() && balls.gravity_column().is_shared()
    );

    let mut b = balls.clone();
    // The shared value itself: still shared.
    b.set_gravity(7, [0.0, 0.0, -9.81]).unwrap();
    assert!(b.gravity_column().is_shared());
    assert_eq!(b.bytes(), shared);
    // A differing value: that column alone expands, and only instance 7 sees it.
    b.set_gravity(7, [0.0, 0.0, -1.62]).unwrap();
    assert!(!b.gravity_column().is_shared());
    assert_eq!(b.bytes(), shared - 24 + 24 * n);
    assert_eq!(b.gravity()[7], [0.0, 0.0, -1.62]);
    assert_eq!(b.gravity()[6], [0.0, 0.0, -9.81]);
    let (e, reference) = (b.evaluate(), balls.evaluate());
    for i in 0..n {
        // The normal force carries gravity (a rolling ball on level ground has u̇ = 0).
        let same = e.udot_unconstrained_of(i).unwrap()
            == reference.udot_unconstrained_of(i).unwrap()
            && e.constraints[0].multipliers_of(i).unwrap()
                == reference.constraints[0].multipliers_of(i).unwrap();
        assert_eq!(same, i != 7, "instance {i}");
    }
    // A bulk write of identical rows is shared again; the batches compare equal.
    b.set_gravity_column(&vec![[0.0, 0.0, -9.81]; n]).unwrap();
    assert!(b.gravity_column().is_shared());
    assert_eq!(
        b.free_body_columns(ball).unwrap(),
        balls.free_body_columns(ball).unwrap()
    );
    assert_eq!(bits(&b.evaluate()), bits(&reference));
    // A refused write leaves the column as it was (shared): refused by validation, or after
    // the write by the mass-matrix conditioning check (undone, shared again).
    assert!(b.set_mass(ball, 3, -1.0).is_err());
    assert!(b.free_body_columns(ball).unwrap().mass.is_shared());
    assert!(b.set_mass(ball, 3, 1e-16).is_err());
    assert!(b.free_body_columns(ball).unwrap().mass.is_shared());
    assert_eq!(b.bytes(), shared);

    // Constraint parameters: the radius of instance 5 alone expands that column (width 1).
    let contact = ConstraintId(0);
    let radius = balls.param_value(contact, "radius", 5).unwrap()[0];
    b.set_param(contact, "radius", 5, &[radius]).unwrap();
    assert_eq!(
        b.bytes(),
        shared,
        "the shared radius leaves the column shared"
    );
    b.set_param(contact, "radius", 5, &[2.0 * radius]).unwrap();
    assert_eq!(b.bytes(), shared - 8 + 8 * n);
    assert!(b.set_param(contact, "radius", 6, &[-1.0]).is_err());
    assert_eq!(
        b.param_value(contact, "radius", 5).unwrap(),
        &[2.0 * radius]
    );
    assert_eq!(b.param_value(contact, "radius", 6).unwrap(), &[radius]);
    let (e, reference) = (b.evaluate(), balls.evaluate());
    for i in 0..n {
        let same = e.constraints[0].position_errors_of(i).unwrap()
            == reference.constraints[0].position_errors_of(i).unwrap();
        assert_eq!(same, i != 5, "instance {i}");
    }
    // The flat column a caller asks for holds every instance's value.
    let (column, width) = b.param(contact, "radius").unwrap();
    assert_eq!((column.len(), width), (n, 1));
    b.set_param(contact, "radius", 5, &[radius]).unwrap();
    assert_eq!(b.share_uniform_columns(), 1);
    assert_eq!(b.bytes(), shared);
    assert_eq!(bits(&b.evaluate()), bits(&reference));
}

fn bits(e: &simbatch::evaluation::Evaluation) -> Vec<u64> {
    let c = &e.constraints[0];
    e.udot_unconstrained
        .iter()
        .chain(&c.multipliers)
        .chain(&c.power)
        .map(|x| x.to_bits())
        .collect()
}
