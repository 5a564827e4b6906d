//! Error control on the CPU's event path (`EventOptions::accuracy`, `unilateral.md` §6: "Error
//! control (RKM) stays per instance"): a ball rolling on a tilting plate with steps as long as
//! the run follows a fine fixed-step reference to its accuracy, and converges as the accuracy
//! tightens, where fixed RK4 steps of that length miss by 0.75 m; a dropped ball's impacts
//! land at §9 (a)'s closed-form times with a step ceiling longer than the flight; runs are
//! bit-identical across thread counts; an accuracy outside (0, 1) is refused.

use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, EventOptions, UnilateralContact, run_batch, run_instance,
};
use simbatch::motion::TiltingMotion;
use simbatch::prelude::*;

use super::{assert_closed_form_bounces, dropped_ball};

const RADIUS: f64 = 0.05;
const DURATION: f64 = 2.0;

/// `n` uniform balls (m = 1, r = `RADIUS`) resting at `x = −0.1 … 0.1` on the xy plane of a
/// plate that tilts about x and y (`θ1 = 0.2 sin 3t`, `θ2 = 0.1 sin 2t`: level at t = 0),
/// rough (μ = 1, e = 0), under gravity −9.81 z; the contacts per instance.
fn balls_on_a_tilting_plate(n: usize) -> (Batch, BodyId, Vec<Vec<UnilateralContact>>) {
    let mut t = SystemTemplate::new();
    let plate = t.add_driven_body("plate", TiltingMotion);
    let ball = t.add_free_body("ball");
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(plate, ball, true).with_radius(RADIUS))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    let inertia = 0.4 * RADIUS * RADIUS;
    for i in 0..n {
        batch.set_gravity(i, [0.0, 0.0, -9.81]).unwrap();
        batch
            .set_mass_properties(
                ball,
                i,
                1.0,
                [0.0; 3],
                [inertia, inertia, inertia, 0.0, 0.0, 0.0],
            )
            .unwrap();
        batch
            .set_motion_param(plate, "angle_amplitude", i, &[0.2, 0.1])
            .unwrap();
        batch
            .set_motion_param(plate, "angle_rate", i, &[3.0, 2.0])
            .unwrap();
        let x = if n > 1 {
            -0.1 + 0.2 * i as f64 / (n - 1) as f64
        } else {
            0.0
        };
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, x, 0.0, RADIUS])
            .unwrap();
    }
    let contacts = vec![
        vec![UnilateralContact {
            constraint: contact,
            coefficients: Coefficients::with_friction(0.0, 1.0).unwrap(),
        }];
        n
    ];
    (batch, ball, contacts)
}

/// Instance 0 of a fresh batch run for `DURATION`: the ball's position at the end, its
/// contact's mode, and the RK4 or RKM steps committed.
fn ball_after(options: &EventOptions) -> ([f64; 3], ContactMode, usize) {
    let (mut batch, ball, contacts) = balls_on_a_tilting_plate(1);
    let run = run_instance(&mut batch, 0, &contacts[0], DURATION, options).unwrap();
    let q = batch.q(ball).unwrap()[0];
    ([q[4], q[5], q[6]], run.contacts[0].mode, run.steps)
}

fn distance(a: [f64; 3], b: [f64; 3]) -> f64 {
    (0..3).map(|k| (a[k] - b[k]).powi(2)).sum::<f64>().sqrt()
}

#[test]
fn error_control_follows_a_rolling_ball_on_a_tilting_plate_where_long_fixed_steps_miss() {
    // The reference: fixed RK4 steps of 1e-4 s (20 000 of them).
    let (reference, mode, reference_steps) = ball_after(&EventOptions {
        step: 1e-4,
        ..EventOptions::default()
    });
    assert_eq!(mode, ContactMode::Stick, "the ball rolls on the plate");
    // It has rolled well away from where it started: the plate's tilt matters.
    assert!(reference[1].abs() > 0.5, "{reference:?}");
    // Steps of up to the whole run, adapted to the accuracy asked.
    let controlled = |accuracy: f64| {
        ball_after(&EventOptions {
            step: DURATION,
            accuracy: Some(accuracy),
            ..EventOptions::default()
        })
    };
    let mut errors = Vec::new();
    for accuracy in [1e-3, 1e-5, 1e-7] {
        let (at, mode, steps) = controlled(accuracy);
        assert_eq!(mode, ContactMode::Stick, "accuracy {accuracy}");
        assert!(
            steps < reference_steps,
            "accuracy {accuracy}: {steps} steps, the reference {reference_steps}"
        );
        errors.push(distance(at, reference));
    }
    // The default accuracy (Simbody's 1e-3) lands within a tenth of a millimetre, and a
    // tighter one converges on the reference.
    assert!(errors[0] < 1e-4, "{errors:?}");
    assert!(errors[1] < errors[0] && errors[2] < errors[1], "{errors:?}");
    assert!(errors[2] < 1e-8, "{errors:?}");
    // Fixed RK4 steps of the same ceiling miss the ball's path entirely: what a scenario's rkm
    // with its default max_step (the duration) stepped before error control.
    let (fixed, _, _) = ball_after(&EventOptions {
        step: DURATION,
        ..EventOptions::default()
    });
    assert!(distance(fixed, reference) > 0.1, "{fixed:?}");
}

#[test]
fn with_error_control_a_dropped_ball_bounces_at_the_closed_form_times() {
    // §9 (a) as in `stepping.rs`, steps of up to 2.3 s: longer than any flight, so each flight
    // is one or two steps and every impact is found by the event test and its bisection.
    let (mut batch, contacts) = dropped_ball();
    let options = EventOptions {
        step: 2.3,
        accuracy: Some(1e-8),
        capture_speed: 2e-4,
        ..EventOptions::default()
    };
    let run = run_instance(&mut batch, 0, &contacts, 2.3, &options).unwrap();
    assert_closed_form_bounces(&run);
}

#[test]
fn error_controlled_runs_are_bit_identical_on_any_thread_count() {
    let options = EventOptions {
        step: DURATION,
        accuracy: Some(1e-4),
        ..EventOptions::default()
    };
    let run = |threads: usize| {
        let (mut batch, ball, contacts) = balls_on_a_tilting_plate(6);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let runs = pool
            .install(|| run_batch(&mut batch, &|i| contacts[i].clone(), 0.5, &options))
            .unwrap();
        assert!(runs.iter().all(Option::is_some));
        (
            batch.q(ball).unwrap().to_vec(),
            batch.u(ball).unwrap().to_vec(),
            batch.status().to_vec(),
        )
    };
    let one = run(1);
    assert_eq!(run(2), one);
    assert!(one.2.iter().all(|s| *s == 0), "{:?}", one.2);
}

#[test]
fn an_accuracy_outside_zero_to_one_is_refused() {
    let (mut batch, _, contacts) = balls_on_a_tilting_plate(1);
    let time0 = batch.time().to_vec();
    for accuracy in [0.0, -1e-3, 1.0, 2.0, f64::NAN, f64::INFINITY] {
        let options = EventOptions {
            accuracy: Some(accuracy),
            ..EventOptions::default()
        };
        let err = run_instance(&mut batch, 0, &contacts[0], 0.1, &options)
            .expect_err("an accuracy outside (0, 1)");
        let text = err.to_string();
        assert!(
            text.contains("event accuracy") && text.contains("(0, 1)"),
            "{accuracy}: {text}"
        );
    }
    assert_eq!(batch.time(), time0.as_slice(), "nothing stepped");
}
