//! Unilateral contact on the GPU's one-contact event kernel in f32 against the closed forms of
//! `unilateral.md` §9: a dropped ball's impact times and losses (with fixed steps and under
//! error control), a launched ball's rolling speed, a sphere on an incline, an elastic bounce's
//! energy, random balls kept finite and on their planes; and coefficients refused before the
//! kernel runs. (The f64 kernel against the CPU's event path is in `events.rs`.)

use simbatch::cpu::unilateral::{Coefficients, ContactMode, EventOptions};
use simbatch::prelude::*;

use crate::common::device;
use crate::events::{balls, f32_run, f32_stepper, one_ball, options};

#[test]
fn f32_a_dropped_ball_bounces_at_the_closed_form_times_and_comes_to_rest() {
    // unilateral.md §9 (a): h = 1, e = 0.8: impacts at t₀ (1 + 2e + … + 2e^(k−1)), t₀ = √(2h/g),
    // losses (1 − e²) times each arrival's kinetic energy, rest after Zeno capture.
    let Some(device) = device() else { return };
    let (mut batch, contact) = one_ball(4, 1.0, [0.0; 6]);
    let coefficients = vec![Coefficients::with_friction(0.8, 0.5).unwrap(); 4];
    let (runs, mut stepper) = f32_run(device, &mut batch, contact, &coefficients, 2.3);
    let t0 = (2.0f64 / 9.81).sqrt();
    for run in &runs {
        let r = run.unwrap().contact;
        assert_eq!(r.impacts, 4, "{r:?}");
        let first = r.first_impact.unwrap();
        assert!((first - t0).abs() < 2e-5, "first impact {first} vs {t0}");
        let losses = 3.5316 + 2.260224 + 1.44654336 + 0.92578775;
        assert!((r.impact_loss - losses).abs() < 1e-3 * losses, "{r:?}");
        assert_eq!(r.mode, ContactMode::Open);
    }
    let previous: Vec<_> = runs.iter().map(|r| r.map(|r| r.contact)).collect();
    let runs = stepper
        .run(&mut batch, &coefficients, 2.0, &options(), &previous)
        .unwrap();
    // At rest by the closed form's t₀ (1 + e) / (1 − e): the capture ends the bounces when
    // their apex is below what f32 resolves of the height (~1e-8 m after about 40 bounces; the
    // f64 CPU path takes 41 more), and the few left would have taken a millisecond.
    let rest = t0 * 1.8 / 0.2;
    let ball = BodyId::new(1);
    for (i, run) in runs.iter().enumerate() {
        let r = run.unwrap().contact;
        assert!((35..=42).contains(&r.impacts), "{} more impacts", r.impacts);
        assert_eq!(r.mode, ContactMode::Stick, "{r:?}");
        let at = r.last_mode_change.unwrap();
        assert!(
            (at - rest).abs() < 2e-3,
            "at rest from {at}, closed form {rest}"
        );
        let q = batch.q(ball).unwrap()[i];
        let u = batch.u(ball).unwrap()[i];
        assert!((q[6] - 0.1).abs() < 1e-4, "on the plane: {}", q[6]);
        assert!(u.iter().all(|v| v.abs() < 1e-3), "at rest: {u:?}");
        assert_eq!(batch.status()[i], 0);
        assert!((batch.time()[i] - 4.3).abs() < 1e-12);
    }
}

/// The dropped ball of §9 (a) in f32 under error control (the kernel built for it: Merson
/// steps within the accuracy, at most 0.1 s): the impact times and losses of the closed form
/// as with fixed steps, in a small fraction of fixed RK4's 2 300 steps of 1 ms — free flight
/// is a parabola, which Merson integrates exactly, so its steps grow to the longest allowed
/// between the events.
#[test]
fn f32_a_dropped_ball_under_error_control_bounces_at_the_closed_form_times() {
    let Some(device) = device() else { return };
    let (mut batch, contact) = one_ball(4, 1.0, [0.0; 6]);
    let coefficients = vec![Coefficients::with_friction(0.8, 0.5).unwrap(); 4];
    let controlled = EventOptions {
        step: 0.1,
        accuracy: Some(1e-5),
        ..options()
    };
    let mut stepper = f32_stepper(device, &batch, contact);
    let fresh = vec![None; 4];
    let runs = stepper
        .run(&mut batch, &coefficients, 2.3, &controlled, &fresh)
        .unwrap();
    let t0 = (2.0f64 / 9.81).sqrt();
    let arrivals = [t0, t0 * 2.6, t0 * 3.88, t0 * 4.904];
    for (i, run) in runs.iter().enumerate() {
        let run = run.unwrap();
        let r = run.contact;
        assert_eq!(r.impacts, 4, "{r:?}");
        let first = r.first_impact.unwrap();
        assert!((first - t0).abs() < 2e-5, "first impact {first} vs {t0}");
        let losses = 3.5316 + 2.260224 + 1.44654336 + 0.92578775;
        assert!((r.impact_loss - losses).abs() < 1e-3 * losses, "{r:?}");
        assert_eq!(r.mode, ContactMode::Open);
        // Each impact is an event: its bracket's bisection steps, then a flight of few steps.
        assert!(run.steps < 400, "{} steps", run.steps);
        assert!((batch.time()[i] - 2.3).abs() < 1e-6, "{}", batch.time()[i]);
        // After the fourth impact at t₀ (1 + 2e + 2e² + 2e³) it rises at e⁴ √(2 g h).
        let v = 0.8f64.powi(4) * (2.0f64 * 9.81).sqrt() - 9.81 * (2.3 - arrivals[3]);
        let w = batch.u(BodyId::new(1)).unwrap()[i][5];
        assert!((w - v).abs() < 1e-3, "vertical speed {w} vs {v}");
    }
}

#[test]
fn f32_a_ball_launched_without_spin_slides_then_rolls_at_five_sevenths() {
    // unilateral.md §9 (b): v₀ = 3, μ = 0.2: slip ends at t* = 2 v₀ / (7 μ g), then it rolls at
    // 5/7 v₀, the centre having travelled (12/49) v₀² / (μ g) by then.
    let Some(device) = device() else { return };
    let (mut batch, contact) = one_ball(2, 0.0, [0.0, 0.0, 0.0, 3.0, 0.0, 0.0]);
    let coefficients = vec![Coefficients::with_friction(0.5, 0.2).unwrap(); 2];
    let t_star = 6.0 / (7.0 * 0.2 * 9.81);
    let (runs, _) = f32_run(device, &mut batch, contact, &coefficients, t_star + 0.2);
    let ball = BodyId::new(1);
    for (i, run) in runs.iter().enumerate() {
        let r = run.unwrap().contact;
        assert_eq!(r.mode, ContactMode::Stick, "{r:?}");
        let change = r.last_mode_change.unwrap();
        assert!(
            (change - t_star).abs() < 1e-4,
            "slip ends at {change}, closed form {t_star}"
        );
        let u = batch.u(ball).unwrap()[i];
        assert!((u[3] - 15.0 / 7.0).abs() < 1e-4, "rolls at {}", u[3]);
        assert!((u[1] - u[3] / 0.1).abs() < 1e-3, "ω_y = v/r: {u:?}");
        let x = batch.q(ball).unwrap()[i][4];
        let travelled = 12.0 / 49.0 * 9.0 / (0.2 * 9.81) + 15.0 / 7.0 * 0.2;
        assert!(
            (x - travelled).abs() < 1e-4,
            "x = {x}, closed form {travelled}"
        );
        // The books: what friction took is the kinetic energy lost, ½ m v₀² (1 − 5/7).
        let lost = r.friction_loss + r.impact_loss;
        assert!((lost - 4.5 * 2.0 / 7.0).abs() < 1e-4, "{r:?}");
    }
}

#[test]
fn f32_random_balls_stay_finite_on_or_above_their_planes_and_gain_no_energy() {
    let Some(device) = device() else { return };
    let n = 512;
    let (mut batch, contact, coefficients) = balls(n, 9);
    let energy0: Vec<f64> = (0..n).map(|i| batch.energy(i).unwrap()).collect();
    let (runs, _) = f32_run(device, &mut batch, contact, &coefficients, 1.0);
    let mut worst = 0.0f64;
    for (i, run) in runs.iter().enumerate() {
        let run = run.unwrap_or_else(|| panic!("instance {i} failed"));
        assert_eq!(batch.status()[i], 0, "instance {i}: {run:?}");
        assert!(run.penetration <= 1e-4, "instance {i}: {run:?}");
        let energy = batch.energy(i).unwrap();
        assert!(energy.is_finite());
        let [driven, applied] = batch.work()[i];
        let lost = run.contact.impact_loss + run.contact.friction_loss;
        assert!(lost >= -1e-6, "instance {i}: losses {lost}");
        // Books: E − E₀ = work − losses, up to f32 integration error.
        let books = energy - energy0[i] - driven - applied + lost;
        worst = worst.max(books.abs() / energy0[i].abs().max(1.0));
        assert!(
            energy <= energy0[i] + 1e-4 * energy0[i].abs().max(1.0),
            "instance {i} gained"
        );
    }
    eprintln!("f32 random balls: worst energy books {worst:.1e}");
    assert!(worst < 1e-3, "{worst}");
}

#[test]
fn f32_a_sphere_on_an_incline_rolls_or_slides_as_the_closed_form_says() {
    // unilateral.md §9 (c): a solid sphere on an incline θ (gravity tilted by θ over a level
    // plane, x down the slope) rolls iff tan θ ≤ (7/2) μ_s, at (5/7) g sin θ; else it slides at
    // g (sin θ − μ_d cos θ) and spins up at 5 μ_d g cos θ / (2 r). Cases kept clear of the
    // boundary, where f32 may decide either way.
    let Some(device) = device() else { return };
    let cases: Vec<(f64, f64)> = [5.0f64, 12.0, 20.0, 30.0, 40.0]
        .iter()
        .flat_map(|deg| [0.05, 0.1, 0.2, 0.3].map(|mu| (deg.to_radians(), mu)))
        .filter(|(theta, mu)| (theta.tan() / (3.5 * mu) - 1.0).abs() > 0.05)
        .collect();
    let n = cases.len();
    let (mut batch, contact) = one_ball(n, 0.0, [0.0; 6]);
    let (g, r, t) = (9.81, 0.1, 0.5);
    for (i, (theta, _)) in cases.iter().enumerate() {
        batch
            .set_gravity(i, [g * theta.sin(), 0.0, -g * theta.cos()])
            .unwrap();
    }
    let coefficients: Vec<Coefficients> = cases
        .iter()
        .map(|(_, mu)| Coefficients::with_friction(0.0, *mu).unwrap())
        .collect();
    let (runs, _) = f32_run(device, &mut batch, contact, &coefficients, t);
    let ball = BodyId::new(1);
    let (mut rolled, mut slid) = (0, 0);
    for (i, ((theta, mu), run)) in cases.iter().zip(&runs).enumerate() {
        let record = run.unwrap().contact;
        let u = batch.u(ball).unwrap()[i];
        let rolls = theta.tan() <= 3.5 * mu;
        let (v, spin) = if rolls {
            rolled += 1;
            assert_eq!(record.mode, ContactMode::Stick, "θ {theta}, μ {mu}");
            let v = 5.0 / 7.0 * g * theta.sin() * t;
            (v, v / r)
        } else {
            slid += 1;
            assert!(
                matches!(record.mode, ContactMode::Slide { .. }),
                "θ {theta}, μ {mu}"
            );
            let v = g * (theta.sin() - mu * theta.cos()) * t;
            (v, 5.0 * mu * g * theta.cos() * t / (2.0 * r))
        };
        assert!(
            (u[3] - v).abs() < 1e-4 * v.max(1.0),
            "θ {theta}, μ {mu}: v {} vs {v}",
            u[3]
        );
        assert!(
            (u[1] - spin).abs() < 1e-4 * spin.max(1.0),
            "θ {theta}, μ {mu}: ω {} vs {spin}",
            u[1]
        );
        assert!(u[5].abs() < 1e-5, "stays on the plane: {u:?}");
    }
    assert!(rolled >= 4 && slid >= 4, "{rolled} rolled, {slid} slid");
}

#[test]
fn f32_a_ball_bouncing_with_e_one_and_no_friction_keeps_its_energy() {
    // e = 1, μ = 0: every impact returns the approach speed, so the ball rises to its drop
    // height again and again (impacts at t₀ (1 + 2k)), losing nothing.
    let Some(device) = device() else { return };
    let (mut batch, contact) = one_ball(4, 0.5, [0.0, 0.0, 3.0, 0.8, 0.0, 0.0]);
    let energy0: Vec<f64> = (0..4).map(|i| batch.energy(i).unwrap()).collect();
    let coefficients = vec![Coefficients::with_friction(1.0, 0.0).unwrap(); 4];
    let (runs, _) = f32_run(device, &mut batch, contact, &coefficients, 3.0);
    let t0 = (2.0f64 * 0.5 / 9.81).sqrt();
    for (i, run) in runs.iter().enumerate() {
        let r = run.unwrap().contact;
        // Impacts at t₀, 3t₀, 5t₀, 7t₀, 9t₀ ≤ 3 s.
        assert_eq!(r.impacts, 5, "{r:?}");
        assert!((r.first_impact.unwrap() - t0).abs() < 2e-5, "{r:?}");
        assert!(r.impact_loss.abs() < 1e-5, "{r:?}");
        assert!(r.friction_loss.abs() < 1e-9, "{r:?}");
        let energy = batch.energy(i).unwrap();
        assert!(
            (energy - energy0[i]).abs() < 1e-5 * energy0[i],
            "{energy} vs {}",
            energy0[i]
        );
        // Spin and sideways speed untouched by frictionless impacts.
        let u = batch.u(BodyId::new(1)).unwrap()[i];
        assert!(
            (u[2] - 3.0).abs() < 1e-5 && (u[3] - 0.8).abs() < 1e-5,
            "{u:?}"
        );
    }
}

/// Coefficients built without `Coefficients::new` (public fields) are refused by the kernel's
/// host with a typed error naming the field, before anything is uploaded or stepped.
#[test]
fn invalid_coefficients_are_refused_before_the_kernel_runs() {
    let Some(device) = device() else { return };
    let (mut batch, contact, mut coefficients) = balls(8, 5);
    coefficients[3].restitution = f64::NAN;
    let time0 = batch.time().to_vec();
    let mut stepper = f32_stepper(device, &batch, contact);
    let err = stepper
        .run(&mut batch, &coefficients, 0.1, &options(), &vec![None; 8])
        .expect_err("a NaN restitution");
    assert!(err.to_string().contains("restitution"), "{err}");
    assert_eq!(batch.time(), time0.as_slice());
}
