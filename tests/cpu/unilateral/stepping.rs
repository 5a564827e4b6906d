//! Event-driven stepping (`cpu::unilateral::run_instance`, `run_batch`) against the closed
//! forms of `unilateral.md` §9 — (a) a ball dropped with restitution: impact times and speeds,
//! losses, rest after Zeno capture; (b) a ball launched without spin: slip ends at t*, then it
//! rolls at 5/7 v₀; (c) a sphere and (d) a brick on inclines over time — through the engine's own
//! `SphereOnPlaneContact` rows; energy books; bit-identity across thread counts; isolation of a
//! failing instance.

use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, EventOptions, UnilateralContact, run_instance,
};

use super::{assert_closed_form_bounces, close, dropped_ball, engine_sphere};

#[test]
fn a_dropped_ball_bounces_at_the_closed_form_times_and_comes_to_rest() {
    // (a): lowest point at h = 1, e = 0.8, v_cap = 2e-4, m = 1.
    let (mut batch, contacts) = dropped_ball();
    let ball = simbatch::prelude::BodyId::new(1);
    let options = EventOptions {
        capture_speed: 2e-4,
        ..EventOptions::default()
    };
    let run = run_instance(&mut batch, 0, &contacts, 2.3, &options).unwrap();
    assert_closed_form_bounces(&run);
    let record = run.contacts[0];
    assert_eq!(record.mode, ContactMode::Open);

    // On to rest: impact 45 is captured (plastic) at 4.0635161026, and the ball stays.
    let run = run_instance(&mut batch, 0, &contacts, 2.0, &options).unwrap();
    let record = run.contacts[0];
    assert_eq!(record.impacts, 41, "4 + 41 = 45 impacts");
    let last = run.events.iter().rfind(|e| e.approach_speed > 0.0).unwrap();
    close(last.time, 4.0635161026, 1e-7, "rest");
    assert_eq!(record.mode, ContactMode::Stick);
    let q = batch.q(ball).unwrap()[0];
    let u = batch.u(ball).unwrap()[0];
    assert!((q[6] - 0.1).abs() < 1e-6, "on the plane: {}", q[6]);
    assert!(u.iter().all(|v| v.abs() < 1e-9), "at rest: {u:?}");
    close(batch.time()[0], 4.3, 1e-12, "time");
}

#[test]
fn a_ball_launched_without_spin_slides_then_rolls_at_five_sevenths() {
    // (b): m = 1, r = 0.1, v₀ = 3, ω₀ = 0, μ_d = 0.2; v_roll = 2e-4 (2 ctol).
    let (mut batch, contact) = engine_sphere(0.0, 1.0, 0.1, [0.0, 0.0, 0.0, 3.0, 0.0, 0.0]);
    let ball = simbatch::prelude::BodyId::new(1);
    let contacts = [UnilateralContact {
        constraint: contact,
        coefficients: Coefficients::with_friction(0.0, 0.2).unwrap(),
    }];
    let t_star = 0.4368719965;
    let run = run_instance(&mut batch, 0, &contacts, t_star, &EventOptions::default()).unwrap();
    // Sliding from the start, then one slip → stick event.
    let changes: Vec<_> = run.events.iter().filter(|e| e.modes_changed).collect();
    assert_eq!(changes.len(), 1, "{:?}", run.events);
    close(changes[0].time, 0.4368428717, 1e-8, "slip → stick");
    assert_eq!(run.contacts[0].mode, ContactMode::Stick);
    assert_eq!(run.contacts[0].impacts, 0);
    let q = batch.q(ball).unwrap()[0];
    let u = batch.u(ball).unwrap()[0];
    close(u[3], 2.1428571429, 1e-9, "v = 5/7 v₀");
    close(u[1], 21.4285714286, 1e-8, "ω = v / r");
    close(q[4], 1.1233851339, 1e-8, "centre travel");
    // Energy: m v₀² / 7 lost, all of it to friction but the projection's sliver.
    let energy = 0.5 * u[3] * u[3] + 0.5 * 0.004 * u[1] * u[1];
    close(4.5 - energy, 1.2857142857, 1e-8, "loss");
    let record = run.contacts[0];
    assert!(record.impact_loss >= 0.0 && record.impact_loss < 1e-6);
    // §7's books balance: friction took μ_d m g × the slip length, the projection the rest.
    close(
        record.friction_loss + record.impact_loss,
        1.2857142857,
        1e-8,
        "losses",
    );
    close(
        record.friction_loss,
        0.2 * 9.81 * 0.6553079948,
        1e-6,
        "friction × slip length",
    );
}

/// A uniform brick (m = 3, half-dims 0.4 along the slope × 0.25 × 0.1 normal) resting on Ground's
/// plane tilted by `theta` (as [`engine_sphere`]), touching it at its four bottom corners through
/// small `SphereOnPlaneContact`s (radius 0.01, lowest points at the corners).
pub(super) fn engine_brick(theta: f64) -> (simbatch::prelude::Batch, Vec<UnilateralContact>) {
    use simbatch::prelude::*;
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let (s, c) = ((-theta / 2.0).sin(), (-theta / 2.0).cos());
    let r = 0.01;
    let mut ids = Vec::new();
    for (x, y) in [(-0.4, -0.25), (-0.4, 0.25), (0.4, -0.25), (0.4, 0.25)] {
        ids.push(
            t.add_constraint(
                SphereOnPlaneContact::new(GROUND, brick, true)
                    .with_plane_frame([c, 0.0, s, 0.0, 0.0, 0.0, 0.0])
                    .with_sphere_center([x, y, -0.1 + r])
                    .with_radius(r),
            )
            .unwrap(),
        );
    }
    let mut batch = Batch::new(t, 1).unwrap();
    batch.set_gravity(0, [0.0, 0.0, -9.81]).unwrap();
    let (hx, hy, hz) = (0.4f64, 0.25f64, 0.1f64);
    let inertia = [
        hy * hy + hz * hz,
        hx * hx + hz * hz,
        hx * hx + hy * hy,
        0.0,
        0.0,
        0.0,
    ];
    batch
        .set_mass_properties(brick, 0, 3.0, [0.0; 3], inertia)
        .unwrap();
    // The body frame is the plane's; its bottom face lies on the plane.
    let origin = [-theta.sin() * hz, 0.0, theta.cos() * hz];
    batch
        .set_q(brick, 0, [c, 0.0, s, 0.0, origin[0], origin[1], origin[2]])
        .unwrap();
    let k = Coefficients::new(0.0, 0.5, 0.4).unwrap();
    let contacts = ids
        .into_iter()
        .map(|constraint| UnilateralContact {
            constraint,
            coefficients: k,
        })
        .collect();
    (batch, contacts)
}

#[test]
fn a_brick_holds_on_its_corners_up_to_tan_mu_and_slides_past_it() {
    // (d): holds at 20° and 25° (the latter only through pruning), slides at 30° with
    // a = g (sin θ − μ_d cos θ) = 1.5067163155 and no rotation.
    let brick = simbatch::prelude::BodyId::new(1);
    for deg in [20.0, 25.0] {
        let (mut batch, contacts) = engine_brick(f64::to_radians(deg));
        let before = batch.q(brick).unwrap()[0];
        let run = run_instance(&mut batch, 0, &contacts, 0.5, &EventOptions::default()).unwrap();
        assert!(run.events.is_empty(), "{deg}°: {:?}", run.events);
        assert!(run.contacts.iter().all(|c| c.mode == ContactMode::Stick));
        let after = batch.q(brick).unwrap()[0];
        for k in 0..7 {
            assert!((after[k] - before[k]).abs() < 1e-12, "{deg}°: q[{k}] moved");
        }
    }
    let theta = f64::to_radians(30.0);
    let (mut batch, contacts) = engine_brick(theta);
    let run = run_instance(&mut batch, 0, &contacts, 0.5, &EventOptions::default()).unwrap();
    for c in &run.contacts {
        let ContactMode::Slide { direction } = c.mode else {
            panic!("30°: {:?}", run.contacts);
        };
        assert!((direction[0] + 1.0).abs() < 1e-9, "{direction:?}");
    }
    let u = batch.u(brick).unwrap()[0];
    let along = u[3] * theta.cos() + u[5] * theta.sin();
    close(
        along,
        -1.5067163155 * 0.5,
        1e-9,
        "30° velocity down the slope",
    );
    assert!(u[..3].iter().all(|w| w.abs() < 1e-9), "no rotation: {u:?}");
}

#[test]
fn a_sphere_rolls_down_a_gentle_incline_and_slides_down_a_steep_one() {
    // (c) over time: from rest, 0.5 s.
    let ball = simbatch::prelude::BodyId::new(1);
    let k = Coefficients::new(0.0, 0.2, 0.15).unwrap();
    for (deg, a, spin, rolling) in [
        (25.0, -2.9613465341, None, true),
        (40.0, -5.1785120530, Some(-9.3936199837), false),
    ] {
        let theta = f64::to_radians(deg);
        let (mut batch, contact) = engine_sphere(theta, 2.0, 0.3, [0.0; 6]);
        let contacts = [UnilateralContact {
            constraint: contact,
            coefficients: k,
        }];
        let run = run_instance(&mut batch, 0, &contacts, 0.5, &EventOptions::default()).unwrap();
        assert!(run.events.is_empty(), "{deg}°: {:?}", run.events);
        assert_eq!(
            run.contacts[0].mode == ContactMode::Stick,
            rolling,
            "{deg}°"
        );
        let u = batch.u(ball).unwrap()[0];
        close(
            u[3] * theta.cos() + u[5] * theta.sin(),
            a * 0.5,
            1e-9,
            "velocity",
        );
        // Rolling down the slope (−Px) spins about Py = Gy negatively, ω = v / r when rolling.
        close(u[1], spin.unwrap_or(a / 0.3) * 0.5, 1e-8, "spin");
    }
}

#[test]
fn an_elastic_frictionless_ball_keeps_its_energy_and_random_drops_never_gain() {
    use simbatch::prelude::BodyId;
    let ball = BodyId::new(1);
    let energy = |batch: &simbatch::prelude::Batch| {
        let (q, u) = (batch.q(ball).unwrap()[0], batch.u(ball).unwrap()[0]);
        let i = 0.4 * 0.01;
        0.5 * (u[3] * u[3] + u[4] * u[4] + u[5] * u[5])
            + 0.5 * i * (u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
            + 9.81 * q[6]
    };
    // e = 1, μ = 0: every bounce returns to the same height.
    let (mut batch, contact) = engine_sphere(0.0, 1.0, 0.1, [5.0, -3.0, 1.0, 0.5, 0.2, 0.0]);
    batch
        .set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6])
        .unwrap();
    let e0 = energy(&batch);
    let contacts = [UnilateralContact {
        constraint: contact,
        coefficients: Coefficients::with_friction(1.0, 0.0).unwrap(),
    }];
    let run = run_instance(&mut batch, 0, &contacts, 3.0, &EventOptions::default()).unwrap();
    assert!(run.contacts[0].impacts >= 4, "{:?}", run.contacts);
    close(energy(&batch), e0, 1e-9, "elastic frictionless energy");
    assert!(run.contacts[0].impact_loss.abs() < 1e-9);
    assert!(run.contacts[0].friction_loss.abs() < 1e-9);

    // Random drops with spin, e and μ: energy never rises, the ball ends on or above its plane.
    let mut seed = 17u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    for case in 0..12 {
        let mut u = [0.0; 6];
        for v in u.iter_mut() {
            *v = 6.0 * next() - 3.0;
        }
        let (mut batch, contact) = engine_sphere(0.0, 1.0, 0.1, u);
        batch
            .set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1 + 0.5 * next()])
            .unwrap();
        let e = next();
        let mu_d = next();
        let contacts = [UnilateralContact {
            constraint: contact,
            coefficients: Coefficients::new(e, mu_d + 0.2 * next(), mu_d).unwrap(),
        }];
        let e0 = energy(&batch);
        let options = EventOptions {
            capture_speed: 1e-3,
            ..EventOptions::default()
        };
        let run = run_instance(&mut batch, 0, &contacts, 1.5, &options).unwrap();
        let e1 = energy(&batch);
        assert!(e1 <= e0 + 1e-9, "case {case}: {e0} → {e1}");
        // §7: E(t) + Σ losses = E(0) to integrator accuracy.
        let record = run.contacts[0];
        close(
            e0 - e1,
            record.impact_loss + record.friction_loss,
            1e-6,
            "energy books",
        );
        assert!(record.friction_loss >= -1e-9, "case {case}");
        let z = batch.q(ball).unwrap()[0][6];
        assert!(z >= 0.1 - 1e-4, "case {case}: below the plane at {z}");
    }
}

/// A batch of balls dropped and thrown with different coefficients per instance.
fn thrown_balls(n: usize) -> (simbatch::prelude::Batch, Vec<Vec<UnilateralContact>>) {
    use simbatch::prelude::*;
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    let mut contacts = Vec::new();
    for i in 0..n {
        let x = i as f64 / n as f64;
        batch.set_gravity(i, [0.0, 0.0, -9.81]).unwrap();
        batch
            .set_mass_properties(
                ball,
                i,
                1.0 + x,
                [0.0; 3],
                // A solid ball of radius 0.1: 2/5 m r².
                [
                    0.004 * (1.0 + x),
                    0.004 * (1.0 + x),
                    0.004 * (1.0 + x),
                    0.0,
                    0.0,
                    0.0,
                ],
            )
            .unwrap();
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1 + 0.8 * x])
            .unwrap();
        batch
            .set_u(ball, i, [3.0 * x, -2.0, 1.0, 2.0 - 3.0 * x, 1.0, -x])
            .unwrap();
        contacts.push(vec![UnilateralContact {
            constraint: contact,
            coefficients: Coefficients::new(0.9 * x, 0.5, 0.5 * x).unwrap(),
        }]);
    }
    (batch, contacts)
}

#[test]
fn a_batch_runs_bit_identically_on_any_thread_count_and_failing_or_sunk_instances_are_flagged_alone()
 {
    use simbatch::cpu::unilateral::run_batch;
    use simbatch::prelude::{BodyId, status};
    let ball = BodyId::new(1);
    let mut states = Vec::new();
    for threads in [1, 3] {
        let (mut batch, contacts) = thrown_balls(17);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let runs = pool
            .install(|| {
                run_batch(
                    &mut batch,
                    &|i| contacts[i].clone(),
                    1.0,
                    &EventOptions::default(),
                )
            })
            .unwrap();
        assert!(runs.iter().all(Option::is_some));
        assert!(batch.status().iter().all(|s| *s == status::OK));
        states.push((
            batch.q(ball).unwrap().to_vec(),
            batch.u(ball).unwrap().to_vec(),
            runs,
        ));
    }
    assert_eq!(states[0], states[1], "1 thread and 3 threads differ");
    // An instance past its event budget fails alone: flagged, its state kept; the others run.
    let (mut batch, contacts) = thrown_balls(4);
    let q0 = batch.q(ball).unwrap().to_vec();
    let options = EventOptions {
        max_events: 3,
        ..EventOptions::default()
    };
    // Instance 3 bounces with e = 0.675 (many events); instance 0 has e = 0 and lands once.
    let runs = run_batch(&mut batch, &|i| contacts[i].clone(), 2.0, &options).unwrap();
    assert!(runs[0].is_some());
    assert!(runs[3].is_none());
    assert_eq!(batch.status()[3], status::STEP_FAILED);
    assert_eq!(batch.q(ball).unwrap()[3], q0[3]);
    assert_eq!(batch.status()[0], status::OK);
    close(batch.time()[0], 2.0, 1e-12, "instance 0 ran to the end");
    // An instance left sunk 5 cm into its plane (drawn there, at rest) is flagged, not fine.
    let (mut batch, contacts) = thrown_balls(3);
    batch
        .set_q(ball, 1, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.05])
        .unwrap();
    batch.set_u(ball, 1, [0.0; 6]).unwrap();
    let runs = run_batch(
        &mut batch,
        &|i| contacts[i].clone(),
        0.5,
        &EventOptions::default(),
    )
    .unwrap();
    let sunk = runs[1].as_ref().unwrap();
    assert!(sunk.violated);
    close(sunk.penetration, 0.05, 1e-9, "penetration");
    assert_eq!(batch.status()[1], status::CONSTRAINT_VIOLATED);
    for i in [0, 2] {
        assert_eq!(batch.status()[i], status::OK);
        assert!(!runs[i].as_ref().unwrap().violated);
    }
}

/// A contact named twice in one instance's list would enforce its rows twice: the run refuses
/// it with a typed error (the contact space names every row once), and a batch flags that
/// instance alone.
#[test]
fn a_contact_named_twice_is_refused() {
    let (mut batch, contact) = engine_sphere(0.0, 1.0, 0.1, [0.0; 6]);
    let one = UnilateralContact {
        constraint: contact,
        coefficients: Coefficients::with_friction(0.5, 0.3).unwrap(),
    };
    let err = run_instance(&mut batch, 0, &[one, one], 0.1, &EventOptions::default())
        .expect_err("a contact named twice");
    assert!(err.to_string().contains("named once"), "{err}");
    let runs = simbatch::cpu::unilateral::run_batch(
        &mut batch,
        &|_| vec![one, one],
        0.1,
        &EventOptions::default(),
    )
    .unwrap();
    assert!(runs[0].is_none());
    assert_ne!(
        batch.status()[0] & simbatch::prelude::status::STEP_FAILED,
        0
    );
    // Named once, the same instance runs.
    let mut fresh = engine_sphere(0.0, 1.0, 0.1, [0.0; 6]).0;
    run_instance(&mut fresh, 0, &[one], 0.1, &EventOptions::default()).unwrap();
}

/// `Coefficients`' fields are public, so a caller can build invalid ones without
/// `Coefficients::new`; the event paths refuse them with a typed error naming the field and
/// its range, before any instance steps (the batch is left as it was).
#[test]
fn coefficients_built_without_their_checks_are_refused() {
    use simbatch::cpu::unilateral::run_batch;
    let (batch0, contact) = engine_sphere(0.0, 1.0, 0.1, [0.0; 6]);
    let good = Coefficients::with_friction(0.5, 0.3).unwrap();
    for (bad, field) in [
        (
            Coefficients {
                restitution: f64::NAN,
                ..good
            },
            "restitution",
        ),
        (
            Coefficients {
                restitution: 1.5,
                ..good
            },
            "restitution",
        ),
        (
            Coefficients {
                mu_dynamic: -0.1,
                mu_static: 0.3,
                ..good
            },
            "dynamic friction",
        ),
        (
            Coefficients {
                mu_static: 0.1,
                mu_dynamic: 0.3,
                ..good
            },
            "static friction",
        ),
        (
            Coefficients {
                mu_static: f64::INFINITY,
                ..good
            },
            "static friction",
        ),
    ] {
        assert!(bad.check().is_err());
        let contact = UnilateralContact {
            constraint: contact,
            coefficients: bad,
        };
        let mut batch = batch0.clone();
        let err = run_instance(&mut batch, 0, &[contact], 0.1, &EventOptions::default())
            .expect_err("invalid coefficients");
        assert!(err.to_string().contains(field), "{field}: {err}");
        let err = run_batch(
            &mut batch,
            &|_| vec![contact],
            0.1,
            &EventOptions::default(),
        )
        .expect_err("invalid coefficients");
        assert!(err.to_string().contains(field), "{field}: {err}");
        assert_eq!(batch.time(), batch0.time(), "nothing stepped");
        assert_eq!(batch.status(), batch0.status());
    }
    assert!(good.check().is_ok());
}

/// `backend::UnilateralRunner` on the CPU gives `run_batch_resuming`'s runs, bit for bit, and
/// refuses an instance whose coefficients do not name every contact (a short list would have
/// dropped contacts silently).
#[test]
fn the_unilateral_runner_on_the_cpu_is_the_cpus_event_path_and_checks_its_input() {
    use simbatch::backend::UnilateralRunner;
    use simbatch::cpu::unilateral::{Coefficients, UnilateralContact, run_batch_resuming};
    use simbatch::prelude::*;
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
        .unwrap();
    let mut batch = Batch::new(t, 3).unwrap();
    for i in 0..3 {
        let height = 0.1 + 0.2 * i as f64;
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, height])
            .unwrap();
        batch
            .set_u(ball, i, [0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
            .unwrap();
    }
    let k = Coefficients::new(0.5, 0.4, 0.3).unwrap();
    let options = EventOptions::default();
    let previous = vec![None; 3];
    let mut reference = batch.clone();
    let contacts = |_: usize| {
        vec![UnilateralContact {
            constraint: contact,
            coefficients: k,
        }]
    };
    let expected = run_batch_resuming(&mut reference, &contacts, 0.4, &options, &previous).unwrap();
    let mut runner = UnilateralRunner::cpu(&[contact]);
    assert!(!runner.on_gpu());
    let call = runner
        .run(&mut batch, &vec![vec![k]; 3], 0.4, &options, &previous)
        .unwrap();
    assert_eq!(call.handed_to_cpu(), 3);
    for (i, run) in expected.iter().enumerate() {
        let runs = run.as_ref().map(|r| r.contacts.clone());
        assert_eq!(call.records[i], runs, "instance {i}");
        assert_eq!(
            batch.instance_state(i).unwrap().to_vec(),
            reference.instance_state(i).unwrap().to_vec()
        );
    }
    let short = vec![vec![k], vec![], vec![k]];
    // The error names the instance whose list is short.
    match runner.run(&mut batch, &short, 0.4, &options, &previous) {
        Err(Error::InvalidValue {
            instance: 1,
            value,
            accepted,
            ..
        }) if value == "0 entries" && accepted.starts_with("exactly 1,") => {}
        other => panic!("{other:?}"),
    }
    // So does a resumed instance whose records do not match its contacts.
    let mut resumed = call.records.clone();
    if let Some(records) = &mut resumed[2] {
        let extra = records[0];
        records.push(extra);
    }
    match runner.run(&mut batch, &vec![vec![k]; 3], 0.4, &options, &resumed) {
        Err(Error::InvalidValue {
            instance: 2, field, ..
        }) if field.starts_with("previous contact records") => {}
        other => panic!("{other:?}"),
    }
}
