//! Random library inputs never panic and never pass silently; shared columns are stored once and
//! expand on a differing write.

use super::*;

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
