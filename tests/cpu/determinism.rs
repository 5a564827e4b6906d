//! Determinism and isolation: identical bits with 1 rayon thread and with many; one instance
//! going non-finite is flagged and changes nothing for the others.

use simbatch::prelude::*;

fn random_batch(n: usize) -> (Batch, BodyId, ConstraintId) {
    let mut t = SystemTemplate::new();
    let plane = t.add_free_body("plane");
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(SphereOnPlaneContact::new(plane, ball, true).with_radius(0.2))
        .unwrap();
    t.add_constraint(PointOnPlaneContact::new(GROUND, plane).with_follower_point([0.3, 0.1, -0.2]))
        .unwrap();
    let mut b = Batch::new(t, n).unwrap();
    let mut s = 0x9E3779B97F4A7C15u64;
    let mut r = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    for i in 0..n {
        for body in [plane, ball] {
            b.set_q(body, i, [1.0 + r(), r(), r(), r(), r(), r(), r()])
                .unwrap();
            b.set_u(body, i, [r(), r(), r(), r(), r(), r()]).unwrap();
            b.set_mass_properties(
                body,
                i,
                1.0 + r().abs(),
                [0.1 * r(), 0.1 * r(), 0.1 * r()],
                [0.4, 0.5, 0.6, 0.02 * r(), 0.02 * r(), 0.02 * r()],
            )
            .unwrap();
        }
        b.set_param(c, "radius", i, &[0.1 + 0.05 * r().abs()])
            .unwrap();
    }
    (b, ball, c)
}

fn bits(ev: &Evaluation) -> Vec<u64> {
    let mut out: Vec<u64> = ev
        .udot
        .iter()
        .chain(&ev.udot_unconstrained)
        .map(|x| x.to_bits())
        .collect();
    for c in &ev.constraints {
        out.extend(
            c.multipliers
                .iter()
                .chain(&c.velocity_errors)
                .chain(&c.acceleration_errors)
                .chain(&c.power)
                .map(|x| x.to_bits()),
        );
        out.extend(c.body_forces.iter().flatten().map(|x| x.to_bits()));
    }
    out
}

#[test]
fn identical_bits_with_one_thread_and_many() {
    let (batch, _, _) = random_batch(4000);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| batch.evaluate());
    let many = rayon::ThreadPoolBuilder::new()
        .num_threads(8)
        .build()
        .unwrap()
        .install(|| batch.evaluate());
    let seq = batch.evaluate_sequential();
    assert_eq!(one.flagged(), 0);
    assert_eq!(bits(&one), bits(&many));
    assert_eq!(bits(&one), bits(&seq));
    assert_eq!(one, many);
}

#[test]
fn non_finite_instance_is_flagged_and_isolated() {
    let (mut batch, ball, c) = random_batch(50);
    let reference = batch.evaluate();
    // A finite but absurd angular velocity overflows the velocity-product terms to infinity.
    batch
        .set_u(ball, 17, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    let ev = batch.evaluate();
    assert_eq!(ev.flagged(), 1);
    assert_ne!(
        ev.status[17] & (status::NONFINITE_STATE | status::NONFINITE_RESULT),
        0
    );
    assert!(
        ev.udot_of(17).unwrap().iter().all(|x| x.is_nan()),
        "flagged outputs are NaN, not numbers"
    );
    for i in (0..50).filter(|i| *i != 17) {
        assert_eq!(ev.status[i], status::OK);
        assert_eq!(ev.udot_of(i).unwrap(), reference.udot_of(i).unwrap());
        assert_eq!(
            ev.constraint(c).unwrap().multipliers_of(i).unwrap(),
            reference.constraint(c).unwrap().multipliers_of(i).unwrap()
        );
    }
    // The batch's own status column sees finite state (the overflow happens in the dynamics).
    assert_eq!(batch.refresh_status(), 0);
    assert!(batch.instance_system(17).unwrap().solve().is_err());
}

/// A user's rod between a point of a body and an anchor fixed in Ground's frame, with Ground
/// among its bodies: the lane path evaluates it lane by lane through this scalar formula, which
/// reads Ground's kinematics (`x_A = p_G + R_G a`), the one entry of the kept scratch that no
/// call writes.
#[derive(Debug)]
struct GroundAnchoredRod {
    bodies: [BodyId; 2],
}

impl simbatch::constraints::Constraint for GroundAnchoredRod {
    fn kind_name(&self) -> &'static str {
        "ground_anchored_rod"
    }

    fn bodies(&self) -> &[BodyId] {
        &self.bodies
    }

    fn params(&self) -> Vec<simbatch::constraints::ParamSpec> {
        Vec::new()
    }

    fn row_levels(&self) -> &[simbatch::constraints::RowLevel] {
        &[simbatch::constraints::RowLevel::Position]
    }

    fn report_slots(&self) -> &[Option<usize>] {
        &[Some(0)]
    }

    fn evaluate(
        &self,
        _params: &simbatch::constraints::Params<'_>,
        kinematics: &[simbatch::constraints::BodyKinematics],
        rows: &mut [simbatch::constraints::Row],
    ) {
        let (ground, body) = (&kinematics[0], &kinematics[1]);
        let anchor = ground.origin + ground.rotation * simbatch::math::Vec3::new(0.0, 0.0, 0.1);
        let (w, b) = (body.ang_vel, body.ang_acc);
        let r_p = body.rotation * simbatch::math::Vec3::new(0.0, 0.0, 0.5);
        let v_p = body.lin_vel + w.cross(&r_p);
        let a_p = body.lin_acc + b.cross(&r_p) + w.cross(&w.cross(&r_p));
        let e = body.origin + r_p - anchor;
        let d = e.norm();
        let n = e / d;
        let n_v = n.dot(&v_p);
        rows[0] = simbatch::constraints::Row {
            jacobian: [[0.0; 6], simbatch::constraints::point_row(&r_p, &n)],
            position_error: d - 0.3,
            velocity_error: n_v,
            acceleration_error: n.dot(&a_p) + (v_p.norm_squared() - n_v * n_v) / d,
        };
    }
}

/// N bars hanging from a [`GroundAnchoredRod`].
fn hanging_rods(n: usize) -> Batch {
    let mut t = SystemTemplate::new();
    let bar = t.add_free_body("bar");
    t.add_constraint(GroundAnchoredRod {
        bodies: [GROUND, bar],
    })
    .unwrap();
    let mut b = Batch::new(t, n).unwrap();
    for i in 0..n {
        let mut r = simbatch::scenarios::Rng::for_instance(5, i);
        let mut x = |lo: f64, hi: f64| lo + (hi - lo) * r.unit();
        b.set_q(
            bar,
            i,
            [1.0, x(-0.2, 0.2), x(-0.2, 0.2), 0.0, 0.0, 0.0, -0.8],
        )
        .unwrap();
        b.set_u(
            bar,
            i,
            [x(-1.0, 1.0), x(-1.0, 1.0), 0.0, x(-0.5, 0.5), 0.0, 0.0],
        )
        .unwrap();
    }
    b
}

/// The batches whose results the kept-buffers test compares: the general lane path (two free
/// bodies, four rows), the one-constraint kernel and a user's constraint on Ground.
fn kept_buffer_targets() -> Vec<Batch> {
    use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};
    vec![
        random_batch(37).0,
        contact_batch(ContactKind::RollingSphere, PlaneBody::Ground, 37, 3)
            .unwrap()
            .0,
        hanging_rods(37),
    ]
}

/// Bits of `batch`'s every-output evaluation, then of its evaluation after 10 steps of RK4
/// with projection and 10 of RKM, each call made on the current thread.
fn evaluated_and_stepped(mut batch: Batch) -> Vec<u64> {
    let mut out = bits(&batch.evaluate_sequential());
    for integrator in [
        Integrator::Rk4 { step: 1e-3 },
        Integrator::RungeKuttaMerson {
            accuracy: 1e-6,
            max_step: 1e-3,
        },
    ] {
        let options = StepOptions {
            integrator,
            stabilization: Stabilization::Projection { tolerance: 1e-7 },
        };
        Stepper::new(options).unwrap().step(&mut batch, 10).unwrap();
        out.extend(bits(&batch.evaluate_sequential()));
        out.extend(batch.time().iter().map(|t| t.to_bits()));
    }
    out
}

/// The lane path's buffers that a thread keeps from one call to the next (`cpu::lanes::kept`)
/// carry nothing into the next call: each target gives the same bits on a fresh thread (no
/// spare yet) as on a thread whose spares other templates — more rows, more bodies, driven
/// planes, redundant rows, unilateral corners' bilateral twins — have just filled.
#[test]
fn buffers_kept_between_calls_change_no_result() {
    use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch, point_to_ground_batch};
    let one_thread = || {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
    };
    let fresh: Vec<Vec<u64>> = kept_buffer_targets()
        .into_iter()
        .map(|batch| one_thread().install(|| evaluated_and_stepped(batch)))
        .collect();
    let used = one_thread();
    let others = || -> Vec<Batch> {
        let mut v = vec![
            point_to_ground_batch(41, 7, 3, true, true).unwrap().0,
            contact_batch(ContactKind::Point, PlaneBody::Polynomial, 41, 8)
                .unwrap()
                .0,
            contact_batch(ContactKind::SlidingSphere, PlaneBody::Free, 41, 9)
                .unwrap()
                .0,
            simbatch::scenarios::sliding_bricks(41).unwrap().0,
        ];
        v.extend(kept_buffer_targets().into_iter().rev());
        v
    };
    let after: Vec<Vec<u64>> = used.install(|| {
        for batch in others() {
            evaluated_and_stepped(batch);
        }
        kept_buffer_targets()
            .into_iter()
            .map(evaluated_and_stepped)
            .collect()
    });
    for (k, (fresh, after)) in fresh.iter().zip(&after).enumerate() {
        assert_eq!(fresh.len(), after.len(), "target {k}");
        let first = fresh.iter().zip(after).position(|(a, b)| a != b);
        assert_eq!(first, None, "target {k}: first different value");
    }
}
