//! Rollouts (`simbatch::cli::rollout`): the time each rollout step covers — the integrator's
//! step, an `rkm` scenario's record interval, or the caller's control period —, the states
//! against a study's series and the closed form, and bad intervals refused by name.

use super::*;
use simbatch::cli::rollout::{Rollout, default_interval, rollout, rollout_every};

/// Balls rolling down drawn inclines (`SMALL`'s physics, six instances), stepped by
/// `simulation` and sampled every 0.05 s for 0.2 s.
fn incline(simulation: &str) -> Scenario {
    let text = format!(
        r#"name = "incline"
instances = 6
seed = 11

[vars]
radius = {{ uniform = [0.05, 0.15] }}

[[body]]
name = "ball"
mass = {{ log_uniform = [0.5, 2.0] }}
inertia = {{ solid_sphere = "$radius" }}
position = [0.0, 0.0, "$radius"]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
rolling = true
radius = "$radius"
incline_deg = {{ uniform = [5.0, 40.0] }}

[simulation]
{simulation}
duration = 0.2
backend = "cpu"

[record]
interval = 0.05
series_instances = 6
"#
    );
    Scenario::parse("incline.toml", &text).unwrap()
}

/// The rollout's ball positions (q's origin) equal the study's series at every sample, bit
/// for bit: `rollout` of `instances` against `run_study` of the same scenario.
fn assert_rollout_is_the_series(name: &str, sc: &Scenario, roll: &Rollout, instances: &[usize]) {
    let dir = scratch(name);
    run_study(sc, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, series) = output::read_csv(&dir.join("out").join("series.csv")).unwrap();
    let at = |n: &str| column(&columns, n);
    let times = roll.steps + 1;
    for (slot, &instance) in instances.iter().enumerate() {
        let samples: Vec<&Vec<f64>> = series
            .iter()
            .filter(|(i, _)| *i == instance)
            .map(|(_, r)| r)
            .collect();
        assert_eq!(samples.len(), times, "instance {instance}");
        for (k, sample) in samples.iter().enumerate() {
            let q = &roll.q[(slot * times + k) * roll.nq..][..7];
            let expected = [
                sample[at("ball.x")],
                sample[at("ball.y")],
                sample[at("ball.z")],
            ];
            assert_eq!(q[4..7], expected, "instance {instance}, sample {k}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_rkm_rollout_steps_by_the_record_interval_as_the_study_samples() {
    // rkm has no step of its own; its default max_step is the whole duration, which made a
    // rollout step 0.2 s (a 40-step rollout spanning 8 s). The record interval is the
    // scenario's own sampling.
    let sc = incline("integrator = \"rkm\"\naccuracy = 1e-7");
    assert_eq!(default_interval(&sc), 0.05);
    let instances = [0, 2, 5];
    let roll = rollout(&sc, &instances, 4, None).unwrap();
    assert_eq!(roll.step, 0.05);
    assert_rollout_is_the_series("rollout-rkm", &sc, &roll, &instances);
    // And the states are the closed form's: down the slope ½ a t² with a = 5/7 g sin θ.
    let u0: Vec<f64> = roll.u[..6].to_vec();
    assert!(u0.iter().all(|v| *v == 0.0), "starts at rest: {u0:?}");
    for slot in 0..instances.len() {
        let times = roll.steps + 1;
        let p = |k: usize| roll.q[(slot * times + k) * roll.nq + 4..][..3].to_vec();
        let (p0, p4) = (p(0), p(4));
        let travelled = p0
            .iter()
            .zip(&p4)
            .map(|(a, b)| (b - a).powi(2))
            .sum::<f64>()
            .sqrt();
        let speed = roll.u[(slot * times + 4) * roll.nu + 3..][..3]
            .iter()
            .map(|v| v * v)
            .sum::<f64>()
            .sqrt();
        // a from the speed (a t) and the distance (½ a t²) agree.
        let (t, a) = (0.2, speed / 0.2);
        assert!(
            (travelled - 0.5 * a * t * t).abs() < 1e-9,
            "{travelled} vs {}",
            0.5 * a * t * t
        );
        assert!(a > 0.0);
    }
}

#[test]
fn a_rollout_interval_is_a_control_period_over_several_integrator_steps() {
    // RK4 at 10 ms; a rollout whose steps cover 50 ms (five integrator steps each) is the study
    // recording every 50 ms, and its times are the interval's multiples.
    let sc = incline("integrator = \"rk4\"\nstep = 0.01");
    assert_eq!(default_interval(&sc), 0.01);
    let instances = [1, 4];
    let every = rollout_every(&sc, &instances, 4, Some(0.05), None).unwrap();
    assert_eq!((every.step, every.steps), (0.05, 4));
    assert_rollout_is_the_series("rollout-interval", &sc, &every, &instances);
    // The default rollout steps the integrator's step: after 20 of them it is where the
    // 50 ms rollout is after 4 (to rounding: the spans are summed differently).
    let fine = rollout(&sc, &instances, 20, None).unwrap();
    assert_eq!(fine.step, 0.01);
    for slot in 0..instances.len() {
        let end_fine = &fine.q[(slot * 21 + 20) * 7..][..7];
        let end_every = &every.q[(slot * 5 + 4) * 7..][..7];
        for (a, b) in end_fine.iter().zip(end_every) {
            assert!((a - b).abs() < 1e-12, "{end_fine:?} vs {end_every:?}");
        }
    }
}

#[test]
fn controls_are_held_over_each_interval_of_an_event_driven_rkm_rollout() {
    // A ball 1 m above the ground (unilateral contact, open): falling, z = 1 − g t²/2, which
    // RKM integrates exactly (a quadratic); held by an upward force equal to its weight, it
    // stays. Ten 20 ms steps, controls held over each.
    let text = r#"name = "drop"
instances = 3
seed = 3

[[body]]
name = "ball"
mass = 2.0
inertia = { solid_sphere = 0.1 }
position = [0.0, 0.0, 1.0]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
radius = 0.1
contact = "unilateral"
restitution = 0.5
friction = 0.4

[simulation]
integrator = "rkm"
accuracy = 1e-8
duration = 0.5
backend = "cpu"
"#;
    let sc = Scenario::parse("drop.toml", text).unwrap();
    // No record interval: max_step, here its default, the duration.
    assert_eq!(default_interval(&sc), 0.5);
    let (steps, interval) = (10, 0.02);
    let free = rollout_every(&sc, &[0, 2], steps, Some(interval), None).unwrap();
    let g = 9.81;
    for slot in 0..2 {
        for k in 0..=steps {
            let t = k as f64 * interval;
            let z = free.q[(slot * (steps + 1) + k) * 7 + 6];
            assert!((z - (1.0 - 0.5 * g * t * t)).abs() < 1e-12, "t = {t}: {z}");
        }
    }
    let mut controls = vec![0.0; 2 * steps * 6];
    for held in controls.chunks_exact_mut(6) {
        held[5] = 2.0 * g;
    }
    let held = rollout_every(&sc, &[0, 2], steps, Some(interval), Some(&controls)).unwrap();
    for z in held.q.chunks_exact(7).map(|q| q[6]) {
        assert!((z - 1.0).abs() < 1e-12, "{z}");
    }
}

#[test]
fn a_rollout_interval_that_is_not_a_finite_positive_span_is_refused_by_name() {
    let sc = incline("integrator = \"rk4\"\nstep = 0.01");
    for bad in [0.0, -0.01, f64::NAN, f64::INFINITY, 1e308] {
        let e = rollout_every(&sc, &[0], 10, Some(bad), None).unwrap_err();
        let message = e.to_string();
        assert!(message.contains("interval"), "{bad}: {message}");
        assert!(message.contains("finite number > 0"), "{bad}: {message}");
    }
}
