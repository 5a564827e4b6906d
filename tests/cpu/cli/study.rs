//! Studies: mass-weighted velocity assembly, unprojectable instances flagged, studies that
//! cannot fit refused up front, overflowing outputs flagged.

use super::*;

/// Issue 14: the study's velocity assembly is the mass-weighted one: a ball launched at 1 m/s
/// without spin onto a rolling contact leaves assembly at 5/7 m/s (it was 0.0099 m/s), and
/// rolls on at that speed.
#[test]
fn study_velocity_assembly_is_mass_weighted() {
    let dir = scratch("assemble");
    let text = ball_study(
        "launch",
        "velocity = [1.0, 0.0, 0.0]",
        "integrator = \"rk4\"\nstep = 1e-3\nduration = 0.01\nassemble = true",
    );
    let scenario = Scenario::parse("launch.toml", &text).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results_of(&dir.join("out"));
    for (_, v) in &rows {
        assert!(
            (v[column(&columns, "ball.vx")] - 5.0 / 7.0).abs() < 1e-9,
            "{v:?}"
        );
        assert!(
            (v[column(&columns, "ball.wy")] - 50.0 / 7.0).abs() < 1e-8,
            "{v:?}"
        );
        assert_eq!(v[column(&columns, "status")], 0.0);
        assert_eq!(v[column(&columns, "assembly_failed")], 0.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 14: RKM with projection and no assembly, where half the instances start with a
/// velocity error beyond the projection limit: the run ends, those instances are flagged
/// (step failed, constraint violated; their state is where it started) and the others finish.
#[test]
fn a_study_with_unprojectable_instances_ends_and_flags_them() {
    let dir = scratch("rkm-hang");
    let text = ball_study(
        "hang",
        "velocity = [{ choice = [0.0, 80.0] }, 0.0, 0.0]",
        "integrator = \"rkm\"\naccuracy = 1e-3\nduration = 0.2\nassemble = false\nstabilization = \"projection\"",
    );
    let scenario = Scenario::parse("hang.toml", &text).unwrap();
    let started = std::time::Instant::now();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    assert!(started.elapsed().as_secs_f64() < 60.0);
    let (columns, rows) = results_of(&dir.join("out"));
    let (mut flagged, mut fine) = (0, 0);
    for (_, v) in &rows {
        let st = v[column(&columns, "status")] as u32;
        if v[column(&columns, "ball.velocity.x")] == 80.0 {
            assert_ne!(st & simbatch::batch::status::STEP_FAILED, 0, "{v:?}");
            assert_ne!(st & simbatch::batch::status::CONSTRAINT_VIOLATED, 0);
            assert_eq!(v[column(&columns, "time")], 0.0);
            flagged += 1;
        } else {
            assert_eq!(st, 0, "{v:?}");
            assert!((v[column(&columns, "time")] - 0.2).abs() < 1e-12);
            fine += 1;
        }
    }
    assert!(flagged > 0 && fine > 0, "{flagged} {fine}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&read(&dir.join("out/manifest.json"))).unwrap();
    assert_eq!(manifest["flagged"], flagged);
    assert_eq!(manifest["precision"], "f64", "the CPU ran: say so");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 14: sizes that cannot fit are refused before any work, naming the field, what it
/// would need and `--shard`; a recording too fine for its duration is refused at its location.
#[test]
fn studies_that_cannot_fit_are_refused_up_front() {
    let dir = scratch("too-large");
    let text = SMALL.replace("instances = 240", "instances = 1000000000000000");
    let scenario = Scenario::parse("big.toml", &text).unwrap();
    let started = std::time::Instant::now();
    let e = run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap_err();
    assert!(
        started.elapsed().as_secs_f64() < 5.0,
        "refused before the dry pass"
    );
    let message = e.to_string();
    assert!(matches!(e, CliError::TooLarge { .. }), "{message}");
    assert!(
        message.contains("--shard") && message.contains("GiB"),
        "{message}"
    );
    assert!(!dir.join("out").exists());
    // The same study in a small shard is accepted by the check.
    assert!(simbatch::cli::study::check_fits(&scenario, &(0..1000)).is_ok());

    let tiny = SMALL
        .replace("interval = 0.05", "interval = 1e-12")
        .replace("duration = 0.2", "duration = 1000.0");
    let e = Scenario::parse("tiny.toml", &tiny).unwrap_err().to_string();
    assert!(
        e.contains("record.interval") && e.contains("tiny.toml:"),
        "{e}"
    );
    let e = Scenario::parse("steps.toml", &SMALL.replace("step = 0.01", "step = 1e-300"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("simulation.step"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 14: energy that overflows with a finite state is flagged, not reported as fine; an
/// inertia far too small for its mass is refused in the dry pass, naming the instance.
#[test]
fn overflowing_outputs_are_flagged_and_ill_conditioned_bodies_refused() {
    let dir = scratch("overflow");
    let text = ball_study(
        "huge",
        "velocity = [1e160, 0.0, 0.0]\nangular_velocity = [0.0, 1e161, 0.0]",
        "integrator = \"rk4\"\nstep = 1e-3\nduration = 0.001\nassemble = false\nstabilization = \"none\"",
    )
    .replace("mass = 2.0", "mass = 1e10");
    let scenario = Scenario::parse("huge.toml", &text).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = results_of(&dir.join("out"));
    for (_, v) in &rows {
        assert!(!v[column(&columns, "energy")].is_finite());
        assert_ne!(v[column(&columns, "status")], 0.0, "{v:?}");
    }
    let text = ball_study(
        "tiny-inertia",
        "",
        "integrator = \"rk4\"\nstep = 1e-3\nduration = 0.01",
    )
    .replace(
        "inertia = { solid_sphere = 0.1 }",
        "inertia = [1e-14, 1e-14, 1e-14, 0.0, 0.0, 0.0]",
    );
    let scenario = Scenario::parse("tiny.toml", &text).unwrap();
    let e = run_study(&scenario, None, Backend::Cpu, &dir.join("o2"), false, true).unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("instance 0") && message.contains("inertia"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
