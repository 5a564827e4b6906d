//! Bodies that share an instance but not a contact move as they would alone: another body's
//! event (a ball's impact, or its slip ending as it starts to roll) is an event of the instance, at which every contact is settled
//! again (`unilateral.md` §2 item 5), but a sliding contact has slowed only if its slip along
//! ŝ_a — its direction at the step's start (§2 item 4) — has fallen to v_roll. Tested along
//! the direction its mode was found with instead, a brick spinning on its corners (each
//! corner's slip turning a right angle in a quarter second) read as slowed at a neighbouring
//! ball's impact and was stopped dead.

use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactRecord, EventOptions, UnilateralContact, run_instance,
};
use simbatch::prelude::*;

const G: f64 = 9.81;

/// The ball beside the brick.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Ball {
    None,
    /// Dropped 3 m away from 0.3 m, e = 0.6, frictionless: it bounces every 0.2–0.5 s.
    Bouncing,
    /// Thrown along the ground 3 m away at `v₀` without spin, μ = 0.1: it slides, then rolls
    /// from t* = 2 v₀ / (7 μ g) on (§9 (b)).
    Sliding(f64),
}

/// A brick (2 kg, 0.8 × 0.5 × 0.2 m) spinning at 6 rad/s on its four corners over level
/// ground and drifting at 0.3 m/s (μ_d = 0.02), and a ball (1 kg, r = 0.05) beside it (the
/// brick alone is also `resume`'s turning brick).
pub(super) fn brick_and_ball(
    ball: Ball,
) -> (Batch, BodyId, Option<BodyId>, Vec<UnilateralContact>) {
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let mut contacts = Vec::new();
    for (x, y) in [(0.4, 0.25), (0.4, -0.25), (-0.4, 0.25), (-0.4, -0.25)] {
        let corner = PointOnPlaneContact::new(GROUND, brick).with_follower_point([x, y, -0.1]);
        contacts.push(UnilateralContact {
            constraint: t.add_constraint(corner).unwrap(),
            coefficients: Coefficients::new(0.0, 0.05, 0.02).unwrap(),
        });
    }
    let radius = 0.05;
    let sphere = (ball != Ball::None).then(|| t.add_free_body("ball"));
    if let Some(sphere) = sphere {
        let contact = SphereOnPlaneContact::new(GROUND, sphere, true).with_radius(radius);
        let coefficients = match ball {
            Ball::Sliding(_) => Coefficients::with_friction(0.0, 0.1),
            _ => Coefficients::with_friction(0.6, 0.0),
        };
        contacts.push(UnilateralContact {
            constraint: t.add_constraint(contact).unwrap(),
            coefficients: coefficients.unwrap(),
        });
    }
    let mut batch = Batch::new(t, 1).unwrap();
    batch.set_gravity(0, [0.0, 0.0, -G]).unwrap();
    let mass = 2.0;
    let inertia = [0.0125, 0.035, 0.04, 0.0, 0.0, 0.0].map(|x| x * mass);
    batch
        .set_mass_properties(brick, 0, mass, [0.0; 3], inertia)
        .unwrap();
    batch
        .set_q(brick, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1])
        .unwrap();
    batch
        .set_u(brick, 0, [0.0, 0.0, 6.0, 0.3, 0.1, 0.0])
        .unwrap();
    if let Some(sphere) = sphere {
        let i = 0.4 * radius * radius;
        batch
            .set_mass_properties(sphere, 0, 1.0, [0.0; 3], [i, i, i, 0.0, 0.0, 0.0])
            .unwrap();
        let (height, speed) = match ball {
            Ball::Sliding(speed) => (0.0, speed),
            _ => (0.3, 0.0),
        };
        batch
            .set_q(sphere, 0, [1.0, 0.0, 0.0, 0.0, 3.0, 0.0, radius + height])
            .unwrap();
        batch
            .set_u(sphere, 0, [0.0, 0.0, 0.0, 0.0, speed, 0.0])
            .unwrap();
    }
    (batch, brick, sphere, contacts)
}

/// The brick's state after `duration` alone and beside `ball`, the ball's contact record and
/// the instance's energy before and after.
fn beside(ball: Ball, duration: f64) -> ([f64; 7], [f64; 6], Batch, ContactRecord) {
    let options = EventOptions {
        step: 1e-3,
        ..EventOptions::default()
    };
    let (mut alone, brick, _, contacts) = brick_and_ball(Ball::None);
    let run = run_instance(&mut alone, 0, &contacts, duration, &options).unwrap();
    assert!(run.contacts.iter().all(|r| r.mode != ContactMode::Open));
    let (mut shared, _, _, contacts) = brick_and_ball(ball);
    let energy = shared.energy(0).unwrap();
    let run = run_instance(&mut shared, 0, &contacts, duration, &options).unwrap();
    assert!(!run.violated, "{run:?}");
    let now = shared.energy(0).unwrap();
    assert!(now < energy, "energy {energy} → {now}");
    // The brick, as alone: still sliding on every corner, its state within 1e-9 (the ball's
    // events cut the brick's RK4 steps at other times; 8e-15 measured).
    for (k, record) in run.contacts[..4].iter().enumerate() {
        assert!(
            matches!(record.mode, ContactMode::Slide { .. }),
            "corner {k}: {record:?}"
        );
    }
    let (qa, qb) = (alone.q(brick).unwrap()[0], shared.q(brick).unwrap()[0]);
    let (ua, ub) = (alone.u(brick).unwrap()[0], shared.u(brick).unwrap()[0]);
    for (x, y) in qa.iter().zip(&qb).chain(ua.iter().zip(&ub)) {
        assert!(
            (x - y).abs() < 1e-9,
            "alone {qa:?} {ua:?}\nbeside a ball {qb:?} {ub:?}"
        );
    }
    assert!(ub[2] > 1.0 && ub[3].hypot(ub[4]) > 0.1, "{ub:?}");
    (qb, ub, shared, run.contacts[4])
}

#[test]
fn a_neighbours_impacts_leave_a_spinning_bricks_slide_alone() {
    let (_, _, shared, record) = beside(Ball::Bouncing, 1.2);
    // The ball: dropped from 0.3 m with e = 0.6, its impacts at t₀(1 + 2e + 2e² + …), t₀ =
    // 0.2473 s: 0.247, 0.544, 0.722, 0.829, 0.893, 0.931, 0.954, … — the instance's events.
    assert!(record.impacts >= 6, "{record:?}");
    // On the ground between bounces, in its vertical line.
    let q = shared.q(BodyId::new(2)).unwrap()[0];
    assert!(q[6] >= 0.05 - 1e-4 && (q[4] - 3.0).abs() < 1e-9, "{q:?}");
}

#[test]
fn a_neighbour_starting_to_roll_leaves_a_spinning_bricks_slide_alone() {
    // Thrown at 1–3 m/s: its slip ends at t* = 2 v₀ / (7 μ g) = 0.29–0.87 s, the brick's
    // corners' slips having turned 100°–300° since they were found sliding.
    for speed in [1.0, 1.5, 2.0, 2.5, 3.0] {
        let (_, _, shared, record) = beside(Ball::Sliding(speed), 1.2);
        let t_star = 2.0 * speed / (7.0 * 0.1 * G);
        assert_eq!(record.mode, ContactMode::Stick, "v₀ = {speed}: {record:?}");
        let changed = record.last_mode_change.unwrap();
        assert!(
            (changed - t_star).abs() < 1e-4,
            "v₀ = {speed}: {changed} vs {t_star}"
        );
        // Rolling at 5/7 v₀.
        let u = shared.u(BodyId::new(2)).unwrap()[0];
        assert!(
            (u[4] - 5.0 / 7.0 * speed).abs() < 1e-6,
            "v₀ = {speed}: {u:?}"
        );
    }
}
