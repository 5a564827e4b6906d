//! Unilateral contacts in a study (`contact = "unilateral"` in a scenario): drawn heights,
//! restitution and friction, each instance checked against its own closed form (first impact
//! at `√(2h/g)`, the next at `t₀(1 + 2e)`; a launched ball rolls on at 5/7 v₀ after
//! `t* = 2 v₀ / (7 μ g)`), the result and series columns, and the scenario errors. Other
//! constraint kinds made unilateral, and a bilateral constraint beside them, are in
//! `study_kinds.rs`.

use std::path::Path;

use simbatch::backend::Backend;
use simbatch::cli::scenario::Scenario;
use simbatch::cli::{output, run_study};

use super::close;

pub(super) fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("simbatch-unilateral-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) fn results(dir: &Path, file: &str) -> (Vec<String>, Vec<(usize, Vec<f64>)>) {
    output::read_csv(&dir.join(file)).unwrap()
}

pub(super) fn col(columns: &[String], name: &str) -> usize {
    columns
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {columns:?}"))
}

const DROPS: &str = r#"
name = "drops"
instances = 24
seed = 5

[[body]]
name = "ball"
mass = { uniform = [0.5, 2.0] }
inertia = { solid_sphere = 0.1 }
position = [0.0, 0.0, { uniform = [0.3, 1.0] }]
velocity = [{ uniform = [-1.0, 1.0] }, 0.0, 0.0]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
radius = 0.1
contact = "unilateral"
restitution = { uniform = [0.3, 0.9] }
friction = { static = 0.6, dynamic = { uniform = [0.1, 0.5] } }

[simulation]
integrator = "rk4"
step = 1e-3
duration = 0.8
backend = "cpu"

[record]
interval = 0.1
series_instances = 4
"#;

#[test]
fn a_study_of_drops_meets_each_instances_closed_form() {
    let dir = scratch("drops");
    let scenario = Scenario::parse("drops.toml", DROPS).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("out"), "results.csv");
    assert_eq!(rows.len(), 24);
    let g = 9.81;
    let mut bounced_twice = 0;
    for (index, v) in &rows {
        let h = v[col(&columns, "ball.position.z")] - 0.1;
        let e = v[col(&columns, "constraint[0].restitution")];
        let t0 = (2.0 * h / g).sqrt();
        assert_eq!(v[col(&columns, "status")], 0.0, "instance {index}");
        close(
            v[col(&columns, "c0.first_impact_time")],
            t0,
            1e-8,
            "first impact",
        );
        // The second impact, if within the run: after a flight of 2 e √(2 g h) / g.
        let impacts = v[col(&columns, "c0.impacts")];
        let t1 = t0 * (1.0 + 2.0 * e);
        assert_eq!(
            impacts >= 2.0,
            t1 < 0.8,
            "instance {index}: {impacts} impacts, t1 = {t1}"
        );
        bounced_twice += usize::from(impacts >= 2.0);
        // Energy: never gained; the impacts' share is at most all of what was lost.
        let lost = -v[col(&columns, "energy_change")];
        assert!(lost >= -1e-9, "instance {index}: energy rose by {}", -lost);
        assert!(v[col(&columns, "c0.impact_loss")] <= lost + 1e-9);
        // The books balance: what impacts and friction took is what the energy lost.
        assert!(
            v[col(&columns, "energy_error")].abs() < 1e-6,
            "instance {index}"
        );
        assert!(
            v[col(&columns, "c0.separation")] >= -1e-4,
            "on or above the plane"
        );
        assert!(v[col(&columns, "max_position_error")] <= 1e-4);
        assert!((0.0..=2.0).contains(&v[col(&columns, "c0.mode")]));
    }
    assert!(bounced_twice > 0 && bounced_twice < 24, "{bounced_twice}");
    let (series_columns, series) = results(&dir.join("out"), "series.csv");
    assert!(series_columns.iter().any(|c| c == "c0.mode"));
    assert_eq!(series.len(), 4 * 9, "t = 0 … 0.8 every 0.1 for 4 instances");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_study_of_launched_balls_ends_rolling_at_five_sevenths() {
    let dir = scratch("launch");
    let text = r#"
name = "launch"
instances = 12
seed = 9

[[body]]
name = "ball"
mass = 1.0
inertia = { solid_sphere = 0.1 }
position = [0.0, 0.0, 0.1]
velocity = [{ uniform = [1.0, 3.0] }, 0.0, 0.0]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
radius = 0.1
contact = "unilateral"
friction = { uniform = [0.2, 0.6] }

[simulation]
integrator = "rk4"
step = 1e-3
tolerance = 1e-4
duration = 1.0
backend = "cpu"
"#;
    let scenario = Scenario::parse("launch.toml", text).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("out"), "results.csv");
    for (index, v) in &rows {
        let v0 = v[col(&columns, "ball.velocity.x")];
        let mu = v[col(&columns, "constraint[0].friction")];
        let t_star = 2.0 * v0 / (7.0 * mu * 9.81);
        assert!(t_star < 1.0);
        close(
            v[col(&columns, "ball.vx")],
            5.0 / 7.0 * v0,
            1e-9,
            "rolls at 5/7 v₀",
        );
        assert_eq!(
            v[col(&columns, "c0.mode")],
            1.0,
            "instance {index} sticks (rolls)"
        );
        assert_eq!(v[col(&columns, "c0.impacts")], 0.0);
        // Slip → stick fires when the slip is down to v_roll = 2e-4 (2 × the tolerance 1e-4).
        let t_event = t_star - 2e-4 / (3.5 * mu * 9.81);
        close(
            v[col(&columns, "c0.last_mode_change_time")],
            t_event,
            1e-8,
            "slip → stick",
        );
        close(
            -v[col(&columns, "energy_change")],
            v0 * v0 / 7.0,
            1e-8,
            "m v₀² / 7 lost",
        );
        assert!(
            v[col(&columns, "energy_error")].abs() < 1e-8,
            "instance {index}"
        );
        assert!(v[col(&columns, "c0.friction_loss")] > 0.99 * v0 * v0 / 7.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ball with its COM a millimetre off centre released on a 25° incline it cannot roll down
/// (μ = 0.153) slides from rest. At slow slip its sliding friction is stiff, and with steps past
/// RK4's stability its slip wandered: at h = 5 ms the ball ended 1.5e-3 m/s off and its energy
/// books 3.6e-3 J out, and still 2.4e-4 J out at h = 0.3 ms. Now the books close and the
/// speed is the same at h = 5 ms as at h = 0.3125 ms (−1.33042275 m/s down the slope's y), and
/// under error control (rkm at 1e-8, steps up to the whole run).
#[test]
fn a_slowly_sliding_eccentric_ball_keeps_its_books_at_any_step() {
    let dir = scratch("eccentric");
    let text = r#"
name = "eccentric-slide"
instances = 1
seed = 1

[[body]]
name = "ball"
mass = 4.841150045260173
com = [-0.0007356012762902197, 0.00105347680617614, -0.0001465286400690235]
inertia = { solid_sphere = 0.03544807203761815 }
position = [0.0, 0.0, 0.03544807203761815]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
contact = "unilateral"
friction = 0.15289009955429492
radius = 0.03544807203761815
incline_deg = 25.157701103204946

[simulation]
integrator = "rk4"
step = 5e-3
stabilization = "projection"
tolerance = 1e-6
duration = 0.5
assemble = true
"#;
    // RK4 at 5 ms, and error control (rkm, its longest step the whole run) at 1e-8.
    let controlled = text.replace(
        "integrator = \"rk4\"\nstep = 5e-3\nstabilization = \"projection\"\ntolerance = 1e-6",
        "integrator = \"rkm\"\naccuracy = 1e-8",
    );
    assert_ne!(controlled, text);
    for (name, text) in [("rk4", text), ("rkm", controlled.as_str())] {
        let scenario = Scenario::parse("eccentric.toml", text).unwrap();
        run_study(&scenario, None, Backend::Cpu, &dir.join(name), false, true).unwrap();
        let (columns, rows) = results(&dir.join(name), "results.csv");
        let v = &rows[0].1;
        assert_eq!(v[col(&columns, "status")], 0.0, "{name}");
        assert_eq!(v[col(&columns, "c0.mode")], 2.0, "{name} slides");
        let error = v[col(&columns, "energy_error")];
        assert!(error.abs() <= 1e-6, "{name}: energy books out by {error}");
        close(
            v[col(&columns, "ball.vy")],
            -1.33042275,
            1e-6,
            "speed at 0.5 s",
        );
    }
}

#[test]
fn unilateral_scenario_errors_name_the_field() {
    let base = DROPS.to_string();
    for (from, to, field) in [
        (
            "contact = \"unilateral\"",
            "contact = \"sticky\"",
            "constraint[0].contact",
        ),
        (
            "restitution = { uniform = [0.3, 0.9] }",
            "restitution = 1.5",
            "constraint[0].restitution",
        ),
        (
            "contact = \"unilateral\"",
            "contact = \"unilateral\"\nrolling = true",
            "constraint[0].rolling",
        ),
        (
            "friction = { static = 0.6, dynamic = { uniform = [0.1, 0.5] } }",
            "friction = { static = 0.2, dynamic = 0.4 }",
            "constraint[0].friction",
        ),
        (
            "friction = { static",
            "friction = { stat",
            "constraint[0].friction",
        ),
        (
            "contact = \"unilateral\"\n",
            "",
            "constraint[0].restitution",
        ),
    ] {
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "{to}");
        let err = Scenario::parse("bad.toml", &text)
            .expect_err(to)
            .to_string();
        assert!(err.contains(field), "{to}: {err}");
    }
    // A drawn μ_s below μ_d is refused with its instance and key by the dry pass, before any
    // work (no output directory is left).
    let text = DROPS.replacen(
        "friction = { static = 0.6, dynamic = { uniform = [0.1, 0.5] } }",
        "friction = { static = 0.3, dynamic = { uniform = [0.1, 0.5] } }",
        1,
    );
    let scenario = Scenario::parse("mu.toml", &text).unwrap();
    let dir = scratch("mu");
    let err = run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true)
        .expect_err("μ_s < μ_d")
        .to_string();
    assert!(
        err.starts_with("mu.toml: instance ")
            && err.ends_with(
                ": invalid constraint[0].friction.static: got 0.3; accepted: a finite number ≥ \
                 the dynamic friction"
            ),
        "{err}"
    );
    assert!(!dir.join("out").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped example study runs (scaled down): every instance ends finite, unflagged, on or
/// above its plane, with its energy books balanced.
#[test]
fn the_bouncing_balls_example_runs_clean() {
    let text = include_str!("../../../examples/scenarios/bouncing_balls.toml")
        .replacen("instances = 2000", "instances = 40", 1)
        .replacen("duration = 3.0", "duration = 1.5", 1);
    assert!(text.contains("instances = 40") && text.contains("duration = 1.5"));
    let scenario = Scenario::parse("bouncing_balls.toml", &text).unwrap();
    let dir = scratch("bouncing");
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("out"), "results.csv");
    assert_eq!(rows.len(), 40);
    let mut impacts = 0.0;
    for (index, v) in &rows {
        assert_eq!(v[col(&columns, "status")], 0.0, "instance {index}");
        assert!(
            v[col(&columns, "c0.separation")] >= -1e-4,
            "instance {index}"
        );
        assert!(
            v[col(&columns, "energy_change")] <= 1e-9,
            "instance {index}"
        );
        assert!(
            v[col(&columns, "energy_error")].abs() < 1e-5,
            "instance {index}"
        );
        impacts += v[col(&columns, "c0.impacts")];
    }
    assert!(impacts >= 40.0, "the balls bounce: {impacts} impacts");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What steps a unilateral study: `rk4` (and `euler`) event-driven RK4 at the scenario's
/// `step`; `rkm` (the default integrator) event-driven Runge–Kutta–Merson whose steps each
/// instance adapts to `accuracy`, up to `max_step` — by default the whole duration. A ball
/// rolling on a tilting plate under the defaults follows a fine RK4 reference to its accuracy
/// (it was stepped at h = duration before: 0.75 m off, unflagged); drops keep their
/// closed-form first impacts. The manifest records what stepped.
#[test]
fn a_unilateral_study_with_rkm_controls_each_instances_error() {
    const TILTING: &str = r#"
name = "tilting"
instances = 4
[[body]]
name = "plate"
prescribed = { kind = "tilting", angle_amplitude = [0.2, 0.1], angle_rate = [3.0, 2.0] }
[[body]]
name = "ball"
mass = 1.0
inertia = { solid_sphere = 0.05 }
position = [{ uniform = [-0.1, 0.1] }, 0.0, 0.05]
[[constraint]]
kind = "sphere_on_plane"
plane = "plate"
body = "ball"
radius = 0.05
contact = "unilateral"
friction = 1.0
[simulation]
duration = 2.0
backend = "cpu"
"#;
    let dir = scratch("integrator");
    let fine_text = TILTING.replace(
        "[simulation]",
        "[simulation]\nintegrator = \"rk4\"\nstep = 1e-4",
    );
    let fine = Scenario::parse("tilting.toml", &fine_text).unwrap();
    let controlled = Scenario::parse("tilting.toml", TILTING).unwrap();
    let a = run_study(&fine, None, Backend::Cpu, &dir.join("fine"), false, true).unwrap();
    let b = run_study(
        &controlled,
        None,
        Backend::Cpu,
        &dir.join("rkm"),
        false,
        true,
    )
    .unwrap();
    let text = a["integrator"].as_str().unwrap();
    assert!(
        text.starts_with("event-driven RK4 between events, h = 0.0001"),
        "{text}"
    );
    let text = b["integrator"].as_str().unwrap();
    assert!(
        text.starts_with("event-driven Runge-Kutta-Merson between events, per-instance steps at accuracy 0.001, at most 2"),
        "{text}"
    );
    let (columns, want) = results(&dir.join("fine"), "results.csv");
    let (_, got) = results(&dir.join("rkm"), "results.csv");
    let mut moved = 0.0f64;
    for ((i, w), (_, g)) in want.iter().zip(&got) {
        assert_eq!(g[col(&columns, "status")], 0.0, "instance {i}");
        assert_eq!(g[col(&columns, "c0.mode")], w[col(&columns, "c0.mode")]);
        for name in ["ball.x", "ball.y", "ball.z"] {
            let k = col(&columns, name);
            assert!(
                (g[k] - w[k]).abs() < 1e-4,
                "instance {i} {name}: {} vs {}",
                g[k],
                w[k]
            );
        }
        moved = moved.max(w[col(&columns, "ball.y")].abs());
    }
    assert!(moved > 0.5, "the balls roll far on the plate: {moved}");

    // Drops under rkm's defaults: the first impacts at their closed form, as with rk4.
    let rkm_text = DROPS.replace("integrator = \"rk4\"\nstep = 1e-3", "integrator = \"rkm\"");
    assert_ne!(rkm_text, DROPS);
    let rkm = Scenario::parse("drops.toml", &rkm_text).unwrap();
    run_study(&rkm, None, Backend::Cpu, &dir.join("drops"), false, true).unwrap();
    let (columns, rows) = results(&dir.join("drops"), "results.csv");
    for (index, v) in &rows {
        let h = v[col(&columns, "ball.position.z")] - 0.1;
        assert_eq!(v[col(&columns, "status")], 0.0, "instance {index}");
        close(
            v[col(&columns, "c0.first_impact_time")],
            (2.0 * h / 9.81).sqrt(),
            1e-8,
            "first impact",
        );
        assert!(
            v[col(&columns, "energy_error")].abs() < 1e-6,
            "instance {index}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A study's record interval samples the run; it does not change it. Each record ends a call
/// and the next resumes (`run_batch_resuming`); before resuming treated a call's end as a
/// fresh start, a ball at the apex of a bounce lower than the contact tolerance was captured
/// there, above the ground, and a ball within it on its way down took its impact early: one
/// instance in ten of the bouncing-balls example counted other impacts with `interval = 0.05`.
#[test]
fn a_record_interval_does_not_change_a_unilateral_study() {
    let text = include_str!("../../../examples/scenarios/bouncing_balls.toml")
        .replacen("instances = 2000", "instances = 60", 1)
        .replacen("duration = 3.0", "duration = 2.0", 1)
        .replacen("interval = 0.05", "interval = 0.01", 1);
    assert!(text.contains("interval = 0.01") && text.contains("duration = 2.0"));
    let unrecorded = text[..text.find("[record]").unwrap()].to_string();
    let dir = scratch("record-interval");
    for (name, text) in [("recorded", &text), ("unrecorded", &unrecorded)] {
        let scenario = Scenario::parse("bouncing_balls.toml", text).unwrap();
        run_study(&scenario, None, Backend::Cpu, &dir.join(name), false, true).unwrap();
    }
    let (columns, recorded) = results(&dir.join("recorded"), "results.csv");
    let (_, unrecorded) = results(&dir.join("unrecorded"), "results.csv");
    let mut impacts = 0.0;
    for ((i, a), (_, b)) in recorded.iter().zip(&unrecorded) {
        for name in ["status", "c0.impacts", "c0.mode"] {
            let k = col(&columns, name);
            assert_eq!(a[k], b[k], "instance {i}: {name}");
        }
        for name in [
            "c0.first_impact_time",
            "c0.last_mode_change_time",
            "ball.x",
            "ball.y",
            "ball.z",
            "ball.vx",
            "ball.vy",
            "c0.impact_loss",
            "energy",
        ] {
            let k = col(&columns, name);
            assert!(
                (a[k] - b[k]).abs() < 1e-8 || (a[k].is_nan() && b[k].is_nan()),
                "instance {i}: {name} {} vs {}",
                a[k],
                b[k]
            );
        }
        impacts += a[col(&columns, "c0.impacts")];
    }
    assert!(
        impacts >= 60.0 * 5.0,
        "the balls bounce to rest: {impacts} impacts"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
