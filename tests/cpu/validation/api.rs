//! Handles, lengths and names; inconsistent templates; disabled constraints; ill-conditioned
//! bodies; API edges, impossible sizes and status bits.

use super::*;

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
