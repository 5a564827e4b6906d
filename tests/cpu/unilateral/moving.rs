//! Unilateral contacts on moving (prescribed) planes, against closed forms: a ball dropped onto
//! a plate moving at constant velocity (a constant-law body and a polynomial law alike) meets it
//! when the two heights agree, leaves with the Newton rule in the plate's frame, and the energy
//! books close with the work the plate did; a ball resting on a plate accelerating upward rides
//! it with normal force m (g + a).

use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, EventOptions, UnilateralContact, contact_multipliers, run_batch,
};
use simbatch::motion::PolynomialMotion;
use simbatch::prelude::*;

use super::close;

const G: f64 = 9.81;
const RADIUS: f64 = 0.1;
const MASS: f64 = 2.0;

/// A ball of `MASS` and `RADIUS` above a horizontal plate body `plate` made by `add_plate`, with
/// their contact, `n` instances.
fn ball_over_plate(
    n: usize,
    add_plate: impl FnOnce(&mut SystemTemplate) -> BodyId,
) -> (Batch, BodyId, BodyId, ConstraintId) {
    let mut t = SystemTemplate::new();
    let plate = add_plate(&mut t);
    let ball = t.add_free_body("ball");
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(plate, ball, true).with_radius(RADIUS))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    let i = 0.4 * MASS * RADIUS * RADIUS;
    for k in 0..n {
        batch.set_gravity(k, [0.0, 0.0, -G]).unwrap();
        batch
            .set_mass_properties(ball, k, MASS, [0.0; 3], [i, i, i, 0.0, 0.0, 0.0])
            .unwrap();
    }
    (batch, plate, ball, contact)
}

/// The closed form of a ball released at rest with its lowest point `h` above a plate that
/// moves up at `speed` from height 0: the impact time, the ball's speed just before and after
/// (Newton's rule in the plate's frame: `v⁺ − V = −e (v⁻ − V)`), the energy the impact takes
/// (`½ m (1 − e²)(v⁻ − V)²`), and the ball's height and speed a time `tau` after the impact.
struct Drop {
    impact: f64,
    before: f64,
    after: f64,
    loss: f64,
}

fn drop(h: f64, speed: f64, e: f64) -> Drop {
    // h − ½ g t² = V t.
    let impact = (-speed + (speed * speed + 2.0 * G * h).sqrt()) / G;
    let before = -G * impact;
    let after = speed - e * (before - speed);
    Drop {
        impact,
        before,
        after,
        loss: 0.5 * MASS * (1.0 - e * e) * (before - speed).powi(2),
    }
}

/// Runs the dropped balls of `batch` (instance k: drop height `cases[k].0`, plate speed
/// `cases[k].1`, restitution `cases[k].2`) to the apex of their first bounce relative to the
/// plate and checks the impact, the state there and the energy books.
fn check_drops(mut batch: Batch, ball: BodyId, contact: ConstraintId, cases: &[(f64, f64, f64)]) {
    let energy0: Vec<f64> = (0..cases.len()).map(|k| batch.energy(k).unwrap()).collect();
    let contacts = |k: usize| {
        vec![UnilateralContact {
            constraint: contact,
            coefficients: Coefficients::with_friction(cases[k].2, 0.5).unwrap(),
        }]
    };
    // Every instance runs to the same time: the latest apex of the first bounce, before any
    // second impact.
    let ends: Vec<f64> = cases
        .iter()
        .map(|&(h, v, e)| {
            let d = drop(h, v, e);
            (d.impact, d.impact + 2.0 * (d.after - v) / G)
        })
        .map(|(first, second)| 0.5 * (first + second))
        .collect();
    let duration = ends.iter().fold(f64::INFINITY, |m, t| m.min(*t));
    let runs = run_batch(&mut batch, &contacts, duration, &EventOptions::default()).unwrap();
    for (k, &(h, v, e)) in cases.iter().enumerate() {
        let d = drop(h, v, e);
        let run = runs[k].as_ref().unwrap();
        let record = run.contacts[0];
        assert_eq!(record.impacts, 1, "case {k}: {:?}", run.events);
        close(record.first_impact.unwrap(), d.impact, 1e-8, "impact time");
        close(record.impact_loss, d.loss, 1e-8, "impact loss");
        assert_eq!(record.mode, ContactMode::Open);
        let tau = duration - d.impact;
        let q = batch.q(ball).unwrap()[k];
        let u = batch.u(ball).unwrap()[k];
        let z = RADIUS + v * d.impact + d.after * tau - 0.5 * G * tau * tau;
        close(q[6], z, 1e-7, "height after the bounce");
        close(u[5], d.after - G * tau, 1e-7, "speed after the bounce");
        // The plate's work: the ball's kinetic-energy change at the impact plus the loss.
        let [driven, applied] = batch.work()[k];
        let gained = 0.5 * MASS * (d.after.powi(2) - d.before.powi(2));
        close(driven, gained + d.loss, 1e-8, "work of the plate");
        assert_eq!(applied, 0.0);
        // Energy balance: ΔE = W_driven + W_applied − losses.
        let change = batch.energy(k).unwrap() - energy0[k];
        close(
            change,
            driven + applied - record.impact_loss - record.friction_loss,
            1e-9,
            "energy books",
        );
        assert_eq!(batch.status()[k], status::OK);
    }
}

/// (h, plate speed, e): up fast, up slowly, elastic, and down slower than the ball falls.
const CASES: [(f64, f64, f64); 4] = [
    (1.0, 1.0, 0.5),
    (0.5, 0.2, 0.8),
    (0.8, 0.6, 1.0),
    (1.0, -0.5, 0.7),
];

#[test]
fn a_ball_bounces_off_a_plate_moving_at_constant_velocity() {
    let (mut batch, plate, ball, contact) =
        ball_over_plate(CASES.len(), |t| t.add_prescribed_body("plate"));
    for (k, &(h, v, _)) in CASES.iter().enumerate() {
        batch
            .set_pose(plate, k, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
            .unwrap();
        batch
            .set_velocity(plate, k, [0.0, 0.0, 0.0, 0.0, 0.0, v])
            .unwrap();
        batch
            .set_q(ball, k, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, h + RADIUS])
            .unwrap();
    }
    check_drops(batch, ball, contact, &CASES);
}

#[test]
fn a_ball_bounces_off_a_plate_driven_by_a_polynomial_law() {
    let (mut batch, plate, ball, contact) = ball_over_plate(CASES.len(), |t| {
        t.add_driven_body("plate", PolynomialMotion::new(1).unwrap())
    });
    for (k, &(h, v, _)) in CASES.iter().enumerate() {
        // t0, base rotation, position [[x0, x1], [y0, y1], [z0, z1]], three angles' [θ0, θ1].
        let mut law = vec![0.0, 1.0, 0.0, 0.0, 0.0];
        law.extend([0.0, 0.0, 0.0, 0.0, 0.0, v]);
        law.extend([0.0; 6]);
        batch.set_motion_params(plate, k, &law).unwrap();
        batch
            .set_q(ball, k, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, h + RADIUS])
            .unwrap();
    }
    check_drops(batch, ball, contact, &CASES);
}

#[test]
fn a_ball_rides_a_plate_accelerating_upward() {
    let a = 3.0;
    let (mut batch, plate, ball, contact) = ball_over_plate(1, |t| t.add_prescribed_body("plate"));
    batch
        .set_pose(plate, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        .unwrap();
    batch
        .set_acceleration(plate, 0, [0.0, 0.0, 0.0, 0.0, 0.0, a])
        .unwrap();
    batch
        .set_q(ball, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, RADIUS])
        .unwrap();
    let energy0 = batch.energy(0).unwrap();
    let contacts = [UnilateralContact {
        constraint: contact,
        coefficients: Coefficients::with_friction(0.5, 0.5).unwrap(),
    }];
    let time = 0.4;
    let runs = run_batch(
        &mut batch,
        &|_| contacts.to_vec(),
        time,
        &EventOptions::default(),
    )
    .unwrap();
    let run = runs[0].as_ref().unwrap();
    assert_eq!(run.contacts[0].impacts, 0);
    assert_eq!(run.contacts[0].mode, ContactMode::Stick);
    let (q, u) = (batch.q(ball).unwrap()[0], batch.u(ball).unwrap()[0]);
    close(q[6], RADIUS + 0.5 * a * time * time, 1e-10, "riding height");
    close(u[5], a * time, 1e-10, "riding speed");
    // The plate pushes with m (g + a) over ½ a t².
    let (lambda, modes) = contact_multipliers(
        &batch,
        0,
        &contacts,
        &[ContactMode::Stick],
        &EventOptions::default(),
    )
    .unwrap();
    assert_eq!(modes, vec![ContactMode::Stick]);
    let normal = lambda.iter().fold(0.0f64, |m, l| m.max(l.abs()));
    close(normal, MASS * (G + a), 1e-9, "normal force");
    let driven = batch.work()[0][0];
    close(
        driven,
        MASS * (G + a) * 0.5 * a * time * time,
        1e-9,
        "work of the plate",
    );
    close(
        batch.energy(0).unwrap() - energy0,
        driven,
        1e-9,
        "energy books",
    );
}

const RISING: &str = r#"
name = "rising-plate"
instances = 16
seed = 8

[[body]]
name = "plate"
prescribed = { kind = "constant", velocity = [0.0, 0.0, { uniform = [-0.5, 1.0] }] }

[[body]]
name = "ball"
mass = { uniform = [0.5, 2.0] }
inertia = { solid_sphere = 0.1 }
position = [0.0, 0.0, { uniform = [0.4, 1.0] }]

[[constraint]]
kind = "sphere_on_plane"
plane = "plate"
body = "ball"
radius = 0.1
contact = "unilateral"
restitution = { uniform = [0.3, 0.9] }
friction = 0.5

[simulation]
integrator = "rk4"
step = 1e-3
duration = 0.6
"#;

/// A study of balls dropped onto plates moving at drawn vertical speeds: each instance's first
/// impact where its closed form puts it, and the books closing with the plate's work.
#[test]
fn a_study_of_drops_onto_moving_plates_meets_each_closed_form() {
    use simbatch::backend::Backend;
    use simbatch::cli::run_study;
    use simbatch::cli::scenario::Scenario;

    use super::study::{col, results, scratch};

    let dir = scratch("rising");
    let scenario = Scenario::parse("rising.toml", RISING).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("out"), "results.csv");
    assert_eq!(rows.len(), 16);
    let mut hit = 0;
    for (index, v) in &rows {
        let h = v[col(&columns, "ball.position.z")] - RADIUS;
        let speed = v[col(&columns, "plate.velocity[2]")];
        let impact = (-speed + (speed * speed + 2.0 * G * h).sqrt()) / G;
        assert_eq!(v[col(&columns, "status")], 0.0, "instance {index}");
        let first = v[col(&columns, "c0.first_impact_time")];
        if impact < 0.6 {
            close(first, impact, 1e-8, "first impact");
            hit += 1;
        } else {
            assert!(first.is_nan(), "instance {index}: no impact before the end");
        }
        assert!(
            v[col(&columns, "energy_error")].abs() < 1e-6,
            "instance {index}: energy error {}",
            v[col(&columns, "energy_error")]
        );
        assert!(v[col(&columns, "c0.separation")] >= -1e-4);
    }
    assert!(hit > 8, "{hit} of 16 hit their plate");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tilting-plate example with its contacts unilateral: balls bounce and roll on plates that
/// tilt and shake; every instance ends finite, on or above its plate, with its books closed.
#[test]
fn bouncing_balls_on_tilting_plates_run_clean() {
    use simbatch::backend::Backend;
    use simbatch::cli::run_study;
    use simbatch::cli::scenario::Scenario;

    use super::study::{col, results, scratch};

    let text = include_str!("../../../examples/scenarios/tilting_plate.toml")
        .replacen("instances = 2000", "instances = 24", 1)
        .replacen("duration = 2.0", "duration = 0.5", 1)
        .replacen(
            "rolling = true",
            "contact = \"unilateral\"\nrestitution = { uniform = [0.2, 0.8] }\nfriction = { uniform = [0.2, 0.8] }",
            1,
        )
        .replacen(
            "\"$radius\"]\n",
            "{ uniform = [0.2, 0.4] }]\nvelocity = [{ uniform = [-1.0, 1.0] }, 0.0, 0.0]\n",
            1,
        );
    assert!(text.contains("contact = \"unilateral\"") && text.contains("velocity = ["));
    let dir = scratch("tilting");
    let scenario = Scenario::parse("tilting.toml", &text).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("out"), "results.csv");
    assert_eq!(rows.len(), 24);
    let mut bounced = 0;
    for (index, v) in &rows {
        assert_eq!(v[col(&columns, "status")], 0.0, "instance {index}");
        assert!(
            v[col(&columns, "c0.separation")] >= -1e-4,
            "instance {index}"
        );
        let error = v[col(&columns, "energy_error")];
        let scale = v[col(&columns, "driven_work")].abs().max(1e-3);
        assert!(
            error.abs() < 1e-6 * scale.max(1.0),
            "instance {index}: energy error {error}"
        );
        bounced += usize::from(v[col(&columns, "c0.impacts")] >= 1.0);
    }
    assert!(bounced > 12, "{bounced} of 24 bounced");
    let _ = std::fs::remove_dir_all(&dir);
}
