//! Unilateral studies on the GPU's event kernel against the CPU's event path, through the
//! interfaces a user runs: scenario files (`simbatch run`'s `run_study`) — balls on a plate
//! driven by a law of time, rods dropped tip first — and `simbatch check`'s unilateral parity.
//! (The kernel's own tests, on random balls and the closed forms, are in `events.rs`.)

use simbatch::gpu::Precision;

use crate::common::device;

/// A unilateral study (`simbatch run`) on the GPU gives the CPU's results: balls dropped and
/// thrown on a plate driven by the `tilting` law (a moving plane, evaluated at every stage and
/// bisection point), f64, every result column within 1e-9 (event times within their 1e-9
/// bracket), and the manifest names the kernel.
#[test]
fn a_unilateral_study_on_the_gpu_gives_the_cpus_results() {
    study_parity("plate-drops.toml", PLATE_DROPS, 1e-9, 24.0);
}

/// The same study under error control (`integrator = "rkm"`: the kernel built for it takes
/// Merson steps, each within the accuracy), on the GPU rather than moved to the CPU: every
/// result column within 1e-7 of the CPU's (Merson's step factor is rounded differently on the
/// GPU, so a step a rounding apart locates an event within a bracket of the CPU's, which moves
/// a ball by its speed times the bracket), event times within ten brackets (1e-8 s: the
/// differences add up over a ball's events).
#[test]
fn a_unilateral_study_under_error_control_on_the_gpu_gives_the_cpus_results() {
    let text = PLATE_DROPS.replace(
        "integrator = \"rk4\"\nstep = 1e-3",
        "integrator = \"rkm\"\naccuracy = 1e-7\nmax_step = 0.02",
    );
    assert!(text.contains("rkm"));
    study_parity_timed("plate-drops-rkm.toml", &text, 1e-7, 1e-8, 24.0);
}

/// Balls dropped and thrown on a plate driven by the `tilting` law, f64, RK4 at 1 ms.
const PLATE_DROPS: &str = r#"
name = "plate-drops"
instances = 24
seed = 11

[[body]]
name = "plate"
prescribed = { kind = "tilting", axis1 = [1.0, 0.0, 0.0], axis2 = [0.0, 1.0, 0.0],
               angle_amplitude = [{ uniform = [0.05, 0.2] }, 0.1],
               angle_rate = [{ uniform = [1.0, 4.0] }, 2.0], angle_phase = [0.0, 1.0],
               origin_amplitude = [0.0, 0.0, 0.01], origin_rate = [0.0, 0.0, 6.0] }

[[body]]
name = "ball"
mass = { uniform = [0.2, 2.0] }
inertia = { solid_sphere = 0.05 }
position = [{ uniform = [-0.2, 0.2] }, 0.0, { uniform = [0.1, 0.4] }]
velocity = [{ uniform = [-1.0, 1.0] }, { uniform = [-1.0, 1.0] }, 0.0]
angular_velocity = [{ normal = [0.0, 5.0] }, 0.0, 0.0]

[[constraint]]
kind = "sphere_on_plane"
plane = "plate"
body = "ball"
radius = 0.05
contact = "unilateral"
restitution = { uniform = [0.2, 0.8] }
friction = { static = 0.5, dynamic = { uniform = [0.05, 0.4] } }

[simulation]
integrator = "rk4"
step = 1e-3
duration = 0.6
precision = "f64"
"#;

/// Runs the scenario `text` on the CPU and on the GPU, and holds every result column of the
/// GPU's within `tol` of the CPU's (event times within two brackets, 2e-9); `impacts_at_least` is the
/// least number of impacts the study must have (a study that exercises the laws).
fn study_parity(name: &str, text: &str, tol: f64, impacts_at_least: f64) {
    study_parity_timed(name, text, tol, 2e-9, impacts_at_least);
}

/// [`study_parity`] with event times within `time_tol`.
fn study_parity_timed(name: &str, text: &str, tol: f64, time_tol: f64, impacts_at_least: f64) {
    study_parity_bounded(name, text, tol, tol, time_tol, impacts_at_least);
}

/// [`study_parity_timed`] with the energy-loss columns (`…_loss`, sums over every step and
/// impact) within `loss_tol` instead of `tol`.
fn study_parity_bounded(
    name: &str,
    text: &str,
    tol: f64,
    loss_tol: f64,
    time_tol: f64,
    impacts_at_least: f64,
) {
    use simbatch::backend::Backend;
    use simbatch::cli::scenario::Scenario;
    use simbatch::cli::{output, run_study};
    // f64 studies: wherever the adapter offers SHADER_F64 (lavapipe does).
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        return;
    }
    let scenario = Scenario::parse(name, text).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "simbatch-gpu-events-{}-{}",
        std::process::id(),
        name.trim_end_matches(".toml")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let cpu = run_study(&scenario, None, Backend::Cpu, &dir.join("cpu"), false, true).unwrap();
    let gpu = run_study(&scenario, None, Backend::Gpu, &dir.join("gpu"), false, true).unwrap();
    assert!(
        gpu["backend"]
            .as_str()
            .unwrap()
            .contains("event-driven unilateral kernel"),
        "{}",
        gpu["backend"]
    );
    assert!(cpu["backend"].as_str().unwrap().starts_with("cpu"));
    let (columns, a) = output::read_csv(&dir.join("cpu/results.csv")).unwrap();
    let (columns_gpu, b) = output::read_csv(&dir.join("gpu/results.csv")).unwrap();
    assert_eq!(columns, columns_gpu);
    // A software adapter runs each operation as written. A hardware driver may fuse a multiply
    // and an add (WGSL allows it) and fold constants, a rounding apart per operation, which a
    // study's impacts amplify: on an H200 the tip drops' impact losses came 1.1e-8 from the
    // CPU's (2026-11-26). Hardware gets five times the software bound.
    let hardware = if device.info.device_type == wgpu::DeviceType::Cpu {
        1.0
    } else {
        5.0
    };
    let (tol, loss_tol) = (hardware * tol, hardware * loss_tol);
    let mut impacts = 0.0;
    for ((i, x), (j, y)) in a.iter().zip(&b) {
        assert_eq!(i, j);
        for (k, (p, q)) in x.iter().zip(y).enumerate() {
            if p.is_nan() && q.is_nan() {
                continue;
            }
            let tol = if columns[k].ends_with("_time") {
                time_tol
            } else if columns[k].ends_with("_loss") {
                loss_tol
            } else {
                tol
            };
            assert!(
                (p - q).abs() <= tol * p.abs().max(1.0),
                "instance {i}, {}: cpu {p}, gpu {q}",
                columns[k]
            );
            if columns[k] == "c0.impacts" {
                impacts += p;
            }
        }
    }
    assert!(impacts > impacts_at_least, "{impacts} impacts");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same for `point_on_plane` contacts: rods dropped tip first, tilted and spinning, their tip
/// a unilateral point contact with restitution and friction (rows in another order than a
/// sphere's, and an eccentric contact point): they bounce, slide and stick. Every column within
/// 1e-8, the impact and friction losses within 5e-8: they sum thousands of rounded terms, and
/// a rounding apart per operation moves them by about 1e-8 where the states move by 1e-13
/// (quaternions normalised by `1 / |q|` times `q` instead of `q / |q|`, on the CPU alone: the
/// losses 1.6e-8 apart, the states 1e-13; CPU and GPU with the same change on lavapipe:
/// 1.1e-8 and 3e-14, 2026-11-29).
#[test]
fn a_point_on_plane_study_on_the_gpu_gives_the_cpus_results() {
    let text = r#"
name = "tip-drops"
instances = 24
seed = 4

[[body]]
name = "rod"
mass = { uniform = [0.5, 2.0] }
inertia = [0.08, 0.08, 0.002, 0.0, 0.0, 0.0]
position = [0.0, 0.0, { uniform = [0.6, 0.9] }]
rotation = [{ uniform = [-0.4, 0.4] }, { uniform = [-0.4, 0.4] }, 0.0]
velocity = [{ uniform = [-0.5, 0.5] }, 0.0, 0.0]
angular_velocity = [0.0, { uniform = [-1.0, 1.0] }, 0.0]

[[constraint]]
kind = "point_on_plane"
plane = "ground"
body = "rod"
follower_point = [0.0, 0.0, -0.5]
contact = "unilateral"
restitution = { uniform = [0.0, 0.6] }
friction = { uniform = [0.2, 0.8] }

[simulation]
integrator = "rk4"
step = 1e-3
duration = 0.8
precision = "f64"
"#;
    study_parity_bounded("tip-drops.toml", text, 1e-8, 5e-8, 2e-9, 100.0);
}

/// `simbatch check`'s unilateral parity (`cli::check::unilateral_parity`): the event kernel
/// passes it in f32 and f64 with the bounds the command uses.
#[test]
fn the_check_commands_unilateral_parity_passes() {
    use simbatch::cli::check::{UNILATERAL_F32_TOL, UNILATERAL_F64_TOL, unilateral_parity};
    let Some(device) = device() else { return };
    let mut runs = vec![(Precision::F32, UNILATERAL_F32_TOL)];
    if device.supports_f64 {
        runs.push((Precision::F64, UNILATERAL_F64_TOL));
    }
    for (precision, tol) in runs {
        let report = unilateral_parity(&device, precision, 64, tol).unwrap();
        eprintln!("{precision:?}:\n{report}");
        assert!(report.passed(), "{precision:?}:\n{report}");
        assert_eq!(report.records, 64);
        assert!(report.worst["impacts"].count == 64 && report.worst["q"].count == 64 * 7);
    }
}
