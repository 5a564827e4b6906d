//! Event-driven stepping (`cpu::unilateral::run_instance`) against the closed forms of
//! `unilateral.md` §9 (a) (a ball dropped with restitution: impact times and speeds, losses, rest
//! after Zeno capture) and (b) (a ball launched without spin: slip ends at t*, then it rolls at
//! 5/7 v₀), through the engine's own `SphereOnPlaneContact` rows.

use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, EventOptions, UnilateralContact, run_instance,
};

use super::{close, engine_sphere};

#[test]
fn a_dropped_ball_bounces_at_the_closed_form_times_and_comes_to_rest() {
    // (a): lowest point at h = 1, e = 0.8, v_cap = 2e-4, m = 1.
    let (mut batch, contact) = engine_sphere(0.0, 1.0, 0.1, [0.0; 6]);
    let ball = simbatch::prelude::BodyId::new(1);
    batch
        .set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.1])
        .unwrap();
    let contacts = [UnilateralContact {
        constraint: contact,
        coefficients: Coefficients::with_friction(0.8, 0.5).unwrap(),
    }];
    let options = EventOptions {
        capture_speed: 2e-4,
        ..EventOptions::default()
    };
    let run = run_instance(&mut batch, 0, &contacts, 2.3, &options).unwrap();
    let impacts: Vec<_> = run
        .events
        .iter()
        .filter(|e| e.approach_speed > 0.0)
        .collect();
    assert_eq!(impacts.len(), 4, "{:?}", run.events);
    for (event, (t, v)) in impacts.iter().zip([
        (0.4515236410, 4.4294469181),
        (1.1739614666, 3.5435575345),
        (1.7519117270, 2.8348460276),
        (2.2142719354, 2.2678768221),
    ]) {
        close(event.time, t, 1e-8, "impact time");
        close(event.approach_speed, v, 1e-7, "impact speed");
    }
    let record = run.contacts[0];
    assert_eq!(record.impacts, 4);
    close(
        record.first_impact.unwrap(),
        0.4515236410,
        1e-8,
        "first impact",
    );
    close(
        record.impact_loss,
        3.5316 + 2.260224 + 1.44654336 + 0.92578775,
        1e-7,
        "losses",
    );
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
    assert!(run.contacts[0].impact_loss >= 0.0 && run.contacts[0].impact_loss < 1e-6);
}
