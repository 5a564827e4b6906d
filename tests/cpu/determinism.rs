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
