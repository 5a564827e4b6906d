//! The `simbatch` command: scenario parsing (good files, and bad ones reported with file, line,
//! column, field and what is accepted), sampling statistics, shard invariance (shards merged
//! equal the unsharded run bit for bit on the CPU), an end-to-end `run` checked against the
//! closed form of balls on inclines, atomic outputs, and `check` on the golden files.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use simbatch::backend::Backend;
use simbatch::cli::sample::{Scalar, draw};
use simbatch::cli::scenario::{ConstraintSpec, DEFAULT_SCENARIO, Flag, InertiaSpec, Scenario};
use simbatch::cli::{CliError, output, run_study, shard_range, shard_spec};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_simbatch"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("simbatch-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_default_scenario_parses_as_documented() {
    let s = Scenario::parse("<default>", DEFAULT_SCENARIO).unwrap();
    assert_eq!(s.instances, 100_000);
    assert_eq!(s.vars.len(), 1);
    assert_eq!(s.vars[0].0, "radius");
    assert!(matches!(s.vars[0].1, Scalar::LogUniform(lo, hi) if lo == 0.02 && hi == 0.2));
    assert_eq!(s.bodies.len(), 1);
    assert_eq!(
        s.bodies[0].inertia,
        InertiaSpec::SolidSphere(Scalar::Var(0))
    );
    match &s.constraints[0] {
        ConstraintSpec::SphereOnPlane {
            rolling,
            radius,
            plane,
            ..
        } => {
            assert_eq!(*rolling, Flag::Either);
            assert_eq!(*radius, Scalar::Var(0));
            assert_eq!(*plane, None);
        }
        other => panic!("{other:?}"),
    }
    assert!(s.simulation.assemble);
    assert_eq!(s.record.interval, Some(0.05));
}

/// A small scenario: `{}` gets extra TOML at the end of the constraint table.
const SMALL: &str = r#"name = "small"
instances = 240
seed = 11

[vars]
radius = { uniform = [0.05, 0.15] }

[[body]]
name = "ball"
mass = { log_uniform = [0.5, 2.0] }
inertia = { solid_sphere = "$radius" }
position = [0.0, 0.0, "$radius"]

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
rolling = { choice = [true, false] }
radius = "$radius"
incline_deg = { uniform = [5.0, 40.0] }

[simulation]
integrator = "rk4"
step = 0.01
stabilization = "projection"
tolerance = 1e-9
duration = 0.2
backend = "cpu"

[record]
interval = 0.05
series_instances = 240
events = true
"#;

/// Line and column (1-based) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    (
        before.matches('\n').count() + 1,
        before.len() - before.rfind('\n').map_or(0, |k| k + 1) + 1,
    )
}

/// Bad scenarios: (what to change, into what, where in it the error must point, text in the
/// message). A `None` marker (a TOML syntax error) checks the line only.
#[test]
fn bad_scenarios_are_rejected_with_file_line_column_field_and_accepted_values() {
    let cases: &[(&str, &str, Option<&str>, &[&str])] = &[
        // A misspelt key: TOML's own error, pointing at the key.
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mas = 1.0",
            Some("mas"),
            &["unknown field `mas`", "expected one of"],
        ),
        (
            "incline_deg = { uniform = [5.0, 40.0] }",
            "incline_deg = { uniform = [40.0, 5.0] }",
            Some("{ uniform"),
            &["constraint[0].incline_deg", "accepted: lo ≤ hi"],
        ),
        (
            "body = \"ball\"",
            "body = \"bal\"",
            Some("\"bal\""),
            &["constraint[0].body", "\"bal\" is not a body", "[\"ball\"]"],
        ),
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mass = -1.0",
            Some("-1.0"),
            &["body[0].mass", "accepted: values > 0"],
        ),
        (
            "radius = \"$radius\"",
            "radius = \"$radios\"",
            Some("\"$radios\""),
            &[
                "constraint[0].radius",
                "names no [vars] entry",
                "[\"radius\"]",
            ],
        ),
        (
            "integrator = \"rk4\"",
            "integrator = \"rk5\"",
            Some("\"rk5\""),
            &["simulation.integrator", "accepted: euler, rk4, rkm"],
        ),
        (
            "instances = 240",
            "instances = 0",
            Some("0"),
            &["instances", "accepted: an integer ≥ 1"],
        ),
        (
            "incline_deg = { uniform = [5.0, 40.0] }",
            "incline_deg = 3.0\nfollower_point = [0.0, 0.0, 0.0]",
            Some("[0.0, 0.0, 0.0]"),
            &[
                "constraint[0].follower_point",
                "does not apply to sphere_on_plane",
            ],
        ),
        (
            "step = 0.01",
            "step = 0.01\naccuracy = 1e-3",
            Some("1e-3"),
            &[
                "simulation.accuracy",
                "does not apply to integrator \"rk4\"",
            ],
        ),
        (
            "interval = 0.05",
            "interval = 5.0",
            Some("5.0"),
            &["record.interval", "(0, simulation.duration = 0.2]"],
        ),
        (
            "uniform = [0.05, 0.15]",
            "uniform = [0.05, 0.15",
            None,
            &["bad.toml:"],
        ),
        (
            "rolling = { choice = [true, false] }",
            "rolling = \"maybe\"",
            Some("\"maybe\""),
            &[
                "constraint[0].rolling",
                "accepted: true, false, or {choice = [true, false]}",
            ],
        ),
        (
            "kind = \"sphere_on_plane\"",
            "kind = \"cylinder\"",
            Some("\"cylinder\""),
            &[
                "constraint[0].kind",
                "accepted: sphere_on_plane, point_on_plane, point_to_ground",
            ],
        ),
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mass = { log_uniform = [0.0, 2.0] }",
            Some("{ log_uniform"),
            &["body[0].mass", "accepted: 0 < lo ≤ hi"],
        ),
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mass = { poisson = [1.0] }",
            Some("{ poisson"),
            &[
                "body[0].mass",
                "unknown distribution \"poisson\"",
                "log_uniform",
            ],
        ),
    ];
    for (from, to, marker, needles) in cases {
        assert!(SMALL.contains(from), "{from}");
        let text = SMALL.replacen(from, to, 1);
        let at = text.find(to).expect("replaced");
        let err = Scenario::parse("bad.toml", &text).expect_err(to);
        let message = err.to_string();
        let CliError::Scenario {
            file, line, column, ..
        } = &err
        else {
            panic!("{to}: not a located scenario error: {err:?}");
        };
        assert_eq!(file, "bad.toml");
        match marker {
            Some(m) => {
                let expected =
                    line_column(&text, at + to.find(m).expect("marker in the replacement"));
                assert_eq!((*line, *column), expected, "{to}: {message}");
            }
            None => assert!(*line >= line_column(&text, at).0, "{to}: {message}"),
        }
        assert!(
            message.starts_with(&format!("bad.toml:{line}:{column}: ")),
            "{message}"
        );
        for needle in *needles {
            assert!(
                message.contains(needle),
                "{to}: {message:?} lacks {needle:?}"
            );
        }
    }
}

/// Mean within 5 standard errors, and the distribution's own shape: 200 000 draws each.
#[test]
fn distributions_have_their_statistics() {
    let n = 200_000;
    let draws =
        |s: &Scalar, path: &str| -> Vec<f64> { (0..n).map(|i| draw(s, 9, path, i, &[])).collect() };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var = |v: &[f64]| {
        let m = mean(v);
        v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
    };
    let within = |got: f64, expected: f64, se: f64, what: &str| {
        assert!(
            (got - expected).abs() <= 5.0 * se,
            "{what}: {got} vs {expected} (5σ = {})",
            5.0 * se
        );
    };
    // Uniform [2, 5): mean 3.5, variance 9/12, all inside.
    let u = draws(&Scalar::Uniform(2.0, 5.0), "u");
    assert!(u.iter().all(|x| (2.0..5.0).contains(x)));
    within(mean(&u), 3.5, (0.75f64 / n as f64).sqrt(), "uniform mean");
    within(
        var(&u),
        0.75,
        0.75 * (0.8f64 / n as f64).sqrt(),
        "uniform variance",
    ); // Var(s²) = (μ4 − σ⁴)/n, μ4 = 9/5 σ⁴
    // Normal (1, 0.5): mean, std, 68.27 % within 1σ.
    let g = draws(&Scalar::Normal(1.0, 0.5), "g");
    within(mean(&g), 1.0, 0.5 / (n as f64).sqrt(), "normal mean");
    within(
        var(&g),
        0.25,
        0.25 * (2.0f64 / n as f64).sqrt(),
        "normal variance",
    );
    let inside = g.iter().filter(|x| (*x - 1.0).abs() < 0.5).count() as f64 / n as f64;
    let p = 0.682_689_492;
    within(
        inside,
        p,
        (p * (1.0 - p) / n as f64).sqrt(),
        "normal 1σ mass",
    );
    // Log-uniform [0.1, 10]: ln x uniform on [ln 0.1, ln 10].
    let l: Vec<f64> = draws(&Scalar::LogUniform(0.1, 10.0), "l")
        .iter()
        .map(|x| x.ln())
        .collect();
    let w = 10f64.ln() - 0.1f64.ln();
    within(
        mean(&l),
        0.0,
        (w * w / 12.0 / n as f64).sqrt(),
        "log-uniform mean of ln",
    );
    within(
        var(&l),
        w * w / 12.0,
        w * w / 12.0 * (0.8f64 / n as f64).sqrt(),
        "log-uniform variance of ln",
    );
    // Truncated normal (1, 2) on [0, 3]: inside, with the closed-form mean and variance
    // (α = −0.5, β = 1: mean = μ + σ (φ(α) − φ(β)) / Z, Z = Φ(β) − Φ(α)).
    use simbatch::sample::truncated::{phi, phi_inverse};
    let pdf = |x: f64| (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let (alpha, beta) = (-0.5f64, 1.0f64);
    let z = phi(beta) - phi(alpha);
    let tm = 1.0 + 2.0 * (pdf(alpha) - pdf(beta)) / z;
    let tv = 4.0
        * (1.0 + (alpha * pdf(alpha) - beta * pdf(beta)) / z
            - ((pdf(alpha) - pdf(beta)) / z).powi(2));
    let t = draws(&Scalar::TruncatedNormal(1.0, 2.0, 0.0, 3.0), "t");
    assert!(t.iter().all(|x| (0.0..=3.0).contains(x)));
    within(
        mean(&t),
        tm,
        (tv / n as f64).sqrt(),
        "truncated normal mean",
    );
    within(
        var(&t),
        tv,
        tv * (2.0f64 / n as f64).sqrt(),
        "truncated normal variance",
    );
    // Far in a tail (the interval's probability underflows): inside, near its lower end.
    let far = draws(&Scalar::TruncatedNormal(0.0, 1.0, 40.0, 41.0), "far");
    assert!(far.iter().all(|x| (40.0..=41.0).contains(x)));
    within(
        mean(&far),
        40.0 + 1.0 / 40.0,
        0.05,
        "deep-tail truncated normal mean",
    );
    // The inverse distribution function inverts: Φ(Φ⁻¹(p)) = p across the range.
    for p in [1e-300, 1e-20, 1e-5, 0.02, 0.3, 0.5, 0.9, 0.999_999] {
        assert!(((phi(phi_inverse(p)) - p) / p).abs() < 1e-12, "p = {p}");
    }
    // Lognormal (mu 0.5, sigma 0.4): ln x is normal (0.5, 0.4).
    let ln: Vec<f64> = draws(&Scalar::LogNormal(0.5, 0.4), "ln")
        .iter()
        .map(|x| x.ln())
        .collect();
    within(
        mean(&ln),
        0.5,
        0.4 / (n as f64).sqrt(),
        "lognormal mean of ln",
    );
    within(
        var(&ln),
        0.16,
        0.16 * (2.0f64 / n as f64).sqrt(),
        "lognormal variance of ln",
    );
    // Choice of 3: each a third.
    let c = draws(&Scalar::Choice(vec![1.0, 2.0, 7.0]), "c");
    for v in [1.0, 2.0, 7.0] {
        let f = c.iter().filter(|x| **x == v).count() as f64 / n as f64;
        within(
            f,
            1.0 / 3.0,
            (2.0 / 9.0 / n as f64).sqrt(),
            "choice frequency",
        );
    }
    // Fields are independent streams: the correlation of two uniform fields is ~0 (se 1/√n).
    let a = draws(&Scalar::Uniform(0.0, 1.0), "body[0].mass");
    let b = draws(&Scalar::Uniform(0.0, 1.0), "body[0].com.x");
    let cov = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - 0.5) * (y - 0.5))
        .sum::<f64>()
        / n as f64;
    within(
        cov / (1.0 / 12.0),
        0.0,
        1.0 / (n as f64).sqrt(),
        "correlation between fields",
    );
    // Counter-based: a draw depends on (seed, field, index) only.
    let s = Scalar::Normal(0.0, 1.0);
    assert_eq!(
        draw(&s, 3, "x", 123_456, &[]),
        draw(&s, 3, "x", 123_456, &[])
    );
    assert_ne!(
        draw(&s, 3, "x", 123_456, &[]),
        draw(&s, 4, "x", 123_456, &[])
    );
    assert_ne!(
        draw(&s, 3, "x", 123_456, &[]),
        draw(&s, 3, "y", 123_456, &[])
    );
}

#[test]
fn shard_specs_come_from_the_flag_or_the_scheduler() {
    let none = |_: &str| None;
    assert_eq!(shard_spec(Some("2/5"), &none).unwrap(), Some((2, 5)));
    assert_eq!(shard_spec(None, &none).unwrap(), None);
    for bad in ["5/5", "1", "a/3", "0/0"] {
        let e = shard_spec(Some(bad), &none).unwrap_err().to_string();
        assert!(e.contains("accepted"), "{bad}: {e}");
    }
    let slurm = |k: &str| match k {
        "SLURM_ARRAY_TASK_ID" => Some("4".to_string()),
        "SLURM_ARRAY_TASK_COUNT" => Some("4".to_string()),
        "SLURM_ARRAY_TASK_MIN" => Some("1".to_string()),
        _ => None,
    };
    assert_eq!(shard_spec(None, &slurm).unwrap(), Some((3, 4)));
    let k8s = |k: &str| match k {
        "JOB_COMPLETION_INDEX" => Some("0".to_string()),
        "SIMBATCH_SHARDS" => Some("8".to_string()),
        _ => None,
    };
    assert_eq!(shard_spec(None, &k8s).unwrap(), Some((0, 8)));
    let k8s_no_count = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "0".to_string());
    assert!(
        shard_spec(None, &k8s_no_count)
            .unwrap_err()
            .to_string()
            .contains("SIMBATCH_SHARDS")
    );
    // Ranges tile the study.
    for n in [1, 3, 7] {
        let mut next = 0;
        for i in 0..n {
            let r = shard_range(1001, Some((i, n)));
            assert_eq!(r.start, next);
            next = r.end;
        }
        assert_eq!(next, 1001);
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Three shards merged equal the unsharded run byte for byte (results, series, summary), on
/// the CPU; the series crosses shard boundaries. Merging refuses gaps and strangers.
#[test]
fn shards_merged_equal_the_unsharded_run_bit_for_bit() {
    let dir = scratch("shards");
    let scenario = Scenario::parse("small.toml", SMALL).unwrap();
    run_study(
        &scenario,
        None,
        Backend::Cpu,
        &dir.join("whole"),
        false,
        true,
    )
    .unwrap();
    let mut shards = Vec::new();
    for i in 0..3 {
        let out = dir.join(format!("shard{i}"));
        run_study(&scenario, Some((i, 3)), Backend::Cpu, &out, false, true).unwrap();
        shards.push(out);
    }
    output::merge(&shards, &dir.join("merged"), false).unwrap();
    for file in ["results.csv", "series.csv", "summary.csv"] {
        let whole = read(&dir.join("whole").join(file));
        assert!(whole.len() > 1000, "{file} is substantial");
        assert!(
            read(&dir.join("merged").join(file)) == whole,
            "{file} differs between the merged shards and the whole run"
        );
    }
    // Both populations are there, and instances flagged none.
    let (columns, rows) = output::read_csv(&dir.join("whole/results.csv")).unwrap();
    assert_eq!(rows.len(), 240);
    let rolling = columns
        .iter()
        .position(|c| c == "constraint[0].rolling")
        .unwrap();
    let status = columns.iter().position(|c| c == "status").unwrap();
    let rolled = rows.iter().filter(|(_, v)| v[rolling] == 1.0).count();
    assert!((80..160).contains(&rolled), "{rolled}");
    assert!(rows.iter().all(|(_, v)| v[status] == 0.0));

    // A missing shard, a doubled shard, a shard of another study.
    let e = output::merge(&shards[..2], &dir.join("m2"), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("exactly once"), "{e}");
    let e = output::merge(
        &[shards[0].clone(), shards[0].clone(), shards[2].clone()],
        &dir.join("m3"),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("exactly once"), "{e}");
    let other = Scenario::parse("other.toml", &SMALL.replace("seed = 11", "seed = 12")).unwrap();
    run_study(
        &other,
        Some((1, 3)),
        Backend::Cpu,
        &dir.join("stranger"),
        false,
        true,
    )
    .unwrap();
    let e = output::merge(
        &[shards[0].clone(), dir.join("stranger"), shards[2].clone()],
        &dir.join("m4"),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("another study"), "{e}");
    for m in ["m2", "m3", "m4"] {
        assert!(!dir.join(m).exists(), "a refused merge writes nothing");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// End to end through the binary: uniform balls (COM at the centre) released on inclines
/// roll down at 5/7 g sin θ and slide at g sin θ, so after T they have moved ½ a T² and move
/// at a T. RK4 integrates constant accelerations exactly; the bound is rounding. The output
/// directory holds everything the manifest lists.
#[test]
fn run_end_to_end_matches_the_closed_form_on_inclines() {
    let dir = scratch("e2e");
    let file = dir.join("inclines.toml");
    std::fs::write(&file, SMALL.replace("instances = 240", "instances = 60")).unwrap();
    let out = dir.join("out");
    let status = bin()
        .args([
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let manifest: serde_json::Value =
        serde_json::from_slice(&read(&out.join("manifest.json"))).unwrap();
    assert_eq!(manifest["complete"], true);
    assert_eq!(manifest["instances"], 60);
    assert!(manifest["backend"].as_str().unwrap().starts_with("cpu"));
    for f in manifest["files"].as_array().unwrap() {
        assert!(out.join(f.as_str().unwrap()).is_file(), "{f}");
    }
    assert!(
        manifest["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "plots/trajectories.svg")
    );

    let (columns, rows) = output::read_csv(&out.join("results.csv")).unwrap();
    let col = |n: &str| {
        columns
            .iter()
            .position(|c| c == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    let (series_columns, series) = output::read_csv(&out.join("series.csv")).unwrap();
    let scol = |n: &str| series_columns.iter().position(|c| c == n).unwrap();
    let g = 9.81;
    let t = 0.2;
    let mut worst = 0.0f64;
    for (index, v) in &rows {
        let theta = v[col("constraint[0].incline_deg")].to_radians();
        let a = if v[col("constraint[0].rolling")] == 1.0 {
            5.0 / 7.0
        } else {
            1.0
        } * g
            * theta.sin();
        let samples: Vec<&Vec<f64>> = series
            .iter()
            .filter(|(i, _)| i == index)
            .map(|(_, r)| r)
            .collect();
        assert_eq!(samples.len(), 5, "t = 0, 0.05, …, 0.2");
        let p = |r: &Vec<f64>| [r[scol("ball.x")], r[scol("ball.y")], r[scol("ball.z")]];
        let (p0, p1) = (p(samples[0]), p(samples[4]));
        let travelled =
            ((p1[0] - p0[0]).powi(2) + (p1[1] - p0[1]).powi(2) + (p1[2] - p0[2]).powi(2)).sqrt();
        let speed =
            (v[col("ball.vx")].powi(2) + v[col("ball.vy")].powi(2) + v[col("ball.vz")].powi(2))
                .sqrt();
        worst = worst
            .max((travelled - 0.5 * a * t * t).abs())
            .max((speed - a * t).abs());
        // The contact presses (no lift-off) with m g cos θ.
        let m = v[col("ball.mass")];
        assert!((v[col("c0.normal_force")] - m * g * theta.cos()).abs() < 1e-9 * m * g);
        assert!(v[col("c0.lift_off_time")].is_nan());
        assert!(v[col("energy_change")].abs() < 1e-9);
    }
    println!("worst deviation from the closed form: {worst:e}");
    assert!(worst < 1e-10, "{worst}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Nothing that looks like a result is left behind by a refused or failed run.
#[test]
fn failed_runs_leave_no_output() {
    let dir = scratch("atomic");
    // A var drawn negative reaches a mass: refused at the first such instance, before any work.
    let text = SMALL
        .replace(
            "radius = { uniform = [0.05, 0.15] }",
            "radius = { uniform = [0.05, 0.15] }\nm = { normal = [1.0, 1.0] }",
        )
        .replace("mass = { log_uniform = [0.5, 2.0] }", "mass = \"$m\"");
    let scenario = Scenario::parse("neg.toml", &text).unwrap();
    let e = run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, CliError::Sample { .. }), "{message}");
    assert!(
        message.contains("mass") && message.contains("accepted"),
        "{message}"
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "nothing written: {:?}",
        std::fs::read_dir(&dir).unwrap().collect::<Vec<_>>()
    );
    // An existing output is not replaced without --force (and is left as it was).
    std::fs::create_dir_all(dir.join("out")).unwrap();
    std::fs::write(dir.join("out/keep"), "x").unwrap();
    let ok = Scenario::parse("small.toml", SMALL).unwrap();
    let e = run_study(&ok, None, Backend::Cpu, &dir.join("out"), false, true).unwrap_err();
    assert!(matches!(e, CliError::OutputExists(_)), "{e}");
    assert!(dir.join("out/keep").exists());
    // The binary reports a bad file with its location and exits non-zero.
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        SMALL.replace(
            "mass = { log_uniform = [0.5, 2.0] }",
            "mass = { log_uniform = [0.0, 2.0] }",
        ),
    )
    .unwrap();
    let o = bin()
        .args([
            "run",
            bad.to_str().unwrap(),
            "--out",
            dir.join("o2").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    let text = std::fs::read_to_string(&bad).unwrap();
    let (line, column) = line_column(&text, text.find("{ log_uniform = [0.0").unwrap());
    let located = format!("bad.toml:{line}:{column}: body[0].mass");
    assert!(
        stderr.contains(&located) && stderr.contains("0 < lo ≤ hi"),
        "{stderr} lacks {located}"
    );
    assert!(!dir.join("o2").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check` passes on the golden files and fails, naming the quantity, on a corrupted copy.
#[test]
fn check_runs_on_the_golden_files_and_catches_a_corrupted_one() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden");
    let o = bin()
        .args(["check", golden.to_str().unwrap(), "--parity", "none"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("multipliers") && stdout.contains("check passed"),
        "{stdout}"
    );

    let dir = scratch("check");
    let text = std::fs::read_to_string(golden.join("sphere_on_plane.jsonl")).unwrap();
    let first = text.lines().next().unwrap();
    let mut record: serde_json::Value = serde_json::from_str(first).unwrap();
    let udot = &mut record["expect"]["udot"][0];
    *udot = serde_json::json!(udot.as_f64().unwrap() + 1e-6);
    std::fs::write(dir.join("sphere_on_plane.jsonl"), format!("{record}\n")).unwrap();
    let o = bin()
        .args(["check", dir.to_str().unwrap(), "--parity", "none"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("FAIL udot"), "{stdout}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("check failed"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same study on the GPU (f32 kernels, any adapter; lavapipe in CI) agrees with the CPU
/// within the f32 stepping bound (2e-4 of max(1, |x|)) on every final state value and holds
/// the closed form as well; the manifest names the adapter.
#[test]
fn run_on_the_gpu_agrees_with_the_cpu() {
    if common::device().is_none() {
        return;
    }
    let dir = scratch("gpu");
    let text = SMALL.replace("instances = 240", "instances = 64").replace(
        "stabilization = \"projection\"\ntolerance = 1e-9",
        "stabilization = \"none\"",
    );
    let scenario = Scenario::parse("small.toml", &text).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("cpu"), false, true).unwrap();
    let manifest = run_study(&scenario, None, Backend::Gpu, &dir.join("gpu"), false, true).unwrap();
    assert!(
        manifest["backend"].as_str().unwrap().starts_with("gpu: "),
        "{manifest}"
    );
    let (columns, cpu) = output::read_csv(&dir.join("cpu/results.csv")).unwrap();
    let (gpu_columns, gpu) = output::read_csv(&dir.join("gpu/results.csv")).unwrap();
    assert_eq!(columns, gpu_columns);
    let mut worst = (0.0f64, String::new());
    for ((i, a), (j, b)) in cpu.iter().zip(&gpu) {
        assert_eq!(i, j);
        for (k, c) in columns.iter().enumerate() {
            // Inputs are drawn on the host: identical. Errors and separation sit at rounding
            // level on each path, so they are compared against the scale of the state (1).
            let e = (a[k] - b[k]).abs() / a[k].abs().max(1.0);
            if c.ends_with("lift_off_time") {
                assert_eq!(a[k].is_nan(), b[k].is_nan(), "{c} of instance {i}");
            } else if e > worst.0 {
                worst = (e, format!("{c} of instance {i}"));
            }
        }
    }
    println!("GPU f32 vs CPU f64, worst: {:e} at {}", worst.0, worst.1);
    assert!(worst.0 <= 2e-4, "{worst:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With the `parquet` feature, `results.parquet` holds exactly the CSV's numbers.
#[cfg(feature = "parquet")]
#[test]
fn parquet_results_hold_the_csv_numbers() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;
    let dir = scratch("parquet");
    let scenario = Scenario::parse("small.toml", SMALL).unwrap();
    run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
    let (columns, rows) = output::read_csv(&dir.join("out/results.csv")).unwrap();
    let reader =
        SerializedFileReader::new(std::fs::File::open(dir.join("out/results.parquet")).unwrap())
            .unwrap();
    let fields = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .num_columns();
    assert_eq!(fields, columns.len() + 1);
    let mut n = 0;
    for (row, (index, values)) in reader.get_row_iter(None).unwrap().zip(&rows) {
        let row = row.unwrap();
        assert_eq!(row.get_long(0).unwrap(), *index as i64);
        for (k, v) in values.iter().enumerate() {
            let got = row.get_double(k + 1).unwrap();
            assert!(
                got.to_bits() == v.to_bits() || (got.is_nan() && v.is_nan()),
                "{}: {got} vs {v}",
                columns[k]
            );
        }
        n += 1;
    }
    assert_eq!(n, rows.len());
    assert!(dir.join("out/series.parquet").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// One-instance-kind study: a solid ball on level ground, with `simulation` and `extra` TOML.
fn ball_study(name: &str, body_extra: &str, simulation: &str) -> String {
    format!(
        r#"name = "{name}"
instances = 6
seed = 3

[[body]]
name = "ball"
mass = 2.0
inertia = {{ solid_sphere = 0.1 }}
position = [0.0, 0.0, 0.1]
{body_extra}

[[constraint]]
kind = "sphere_on_plane"
plane = "ground"
body = "ball"
rolling = true
radius = 0.1

[simulation]
{simulation}
backend = "cpu"
"#
    )
}

fn results_of(dir: &Path) -> (Vec<String>, Vec<(usize, Vec<f64>)>) {
    output::read_csv(&dir.join("results.csv")).unwrap()
}

fn column(columns: &[String], name: &str) -> usize {
    columns
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {columns:?}"))
}

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

/// Issue 14's files: names with commas and quotes are quoted in CSV and read back intact;
/// `--force` replaces only a study output; a live lock refuses a second writer; a killed run's
/// lock and partial directory are cleaned up; `merge` checks values (results and series).
#[test]
fn output_files_are_quoted_locked_and_checked() {
    let dir = scratch("files");
    let odd = "ba,l\"l";
    let text = SMALL
        .replace("name = \"ball\"", &format!("name = {odd:?}"))
        .replace("body = \"ball\"", &format!("body = {odd:?}"));
    let scenario = Scenario::parse("odd.toml", &text).unwrap();
    let out = dir.join("out");
    run_study(&scenario, None, Backend::Cpu, &out, false, true).unwrap();
    let (columns, rows) = results_of(&out);
    assert!(
        columns.iter().any(|c| c == &format!("{odd}.vx")),
        "{columns:?}"
    );
    assert!(rows.iter().all(|(_, v)| v.len() == columns.len()));
    let raw = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(raw.contains("\"ba,l\"\"l.vx\""), "RFC 4180 quoting");

    // --force: a directory that is not a study output is never deleted.
    let precious = dir.join("precious");
    std::fs::create_dir_all(&precious).unwrap();
    std::fs::write(precious.join("thesis.tex"), "years of work").unwrap();
    let e = run_study(&scenario, None, Backend::Cpu, &precious, true, true).unwrap_err();
    assert!(matches!(e, CliError::NotStudyOutput(_)), "{e}");
    assert!(precious.join("thesis.tex").exists());
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let e = run_study(&scenario, None, Backend::Cpu, &file, true, true).unwrap_err();
    assert!(matches!(e, CliError::NotStudyOutput(_)), "{e}");
    // … and a study output is replaced.
    run_study(&scenario, None, Backend::Cpu, &out, true, true).unwrap();

    // A live writer's lock (this process) refuses a second run.
    let lock = dir.join(".locked.lock");
    std::fs::write(&lock, std::process::id().to_string()).unwrap();
    let e = run_study(
        &scenario,
        None,
        Backend::Cpu,
        &dir.join("locked"),
        false,
        true,
    )
    .unwrap_err();
    assert!(matches!(e, CliError::Locked { .. }), "{e}");
    assert!(e.to_string().contains("another simbatch run"), "{e}");
    // A killed run's lock and partial directory are cleaned by the next run.
    std::fs::write(&lock, "4000000000").unwrap();
    let stale = dir.join(".locked.partial-4000000000");
    std::fs::create_dir_all(stale.join("plots")).unwrap();
    run_study(
        &scenario,
        None,
        Backend::Cpu,
        &dir.join("locked"),
        false,
        true,
    )
    .unwrap();
    assert!(!stale.exists() && !lock.exists());
    assert!(dir.join("locked/manifest.json").exists());

    // merge checks values: a changed number in a shard's results or series is caught.
    let small = Scenario::parse("small.toml", SMALL).unwrap();
    let mut shards = Vec::new();
    for i in 0..2 {
        let s = dir.join(format!("shard{i}"));
        run_study(&small, Some((i, 2)), Backend::Cpu, &s, false, true).unwrap();
        shards.push(s);
    }
    output::merge(&shards, &dir.join("merged"), false).unwrap();
    for file in ["results.csv", "series.csv"] {
        let path = shards[0].join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        let line = original.lines().nth(3).unwrap();
        let field = line.split(',').nth(4).unwrap();
        let changed = original.replacen(line, &line.replacen(field, "0.5", 1), 1);
        assert_ne!(changed, original);
        std::fs::write(&path, changed).unwrap();
        let e = output::merge(&shards, &dir.join("m-bad"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains(file) && e.contains("changed"), "{e}");
        std::fs::write(&path, original).unwrap();
    }
    assert!(!dir.join("m-bad").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 14's command edges: `check` works outside the repository (embedded golden files) and
/// names a bad directory; unknown bench backends are errors; SIMBATCH_BACKEND is honoured by
/// the command (and a bad value named); no doubled "no GPU adapter" in messages.
#[test]
fn command_edges_are_handled() {
    let dir = scratch("edges");
    let o = bin()
        .current_dir(&dir)
        .args(["check", "--parity", "none"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("embedded") && stdout.contains("check passed"),
        "{stdout}"
    );
    let o = bin()
        .current_dir(&dir)
        .args(["check", "no-such-dir", "--parity", "none"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("no-such-dir") && stderr.contains("without a directory"),
        "{stderr}"
    );

    let o = bin()
        .args([
            "bench",
            "--backends",
            "tpu",
            "--n",
            "10",
            "--seconds",
            "0.01",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("tpu") && stderr.contains("accepted: cpu, gpu"),
        "{stderr}"
    );

    // A bad output order is refused by its flag's name before anything is measured.
    let o = bin()
        .args([
            "bench",
            "--backends",
            "cpu",
            "--n",
            "10",
            "--seconds",
            "0.01",
            "--gpu-output-order",
            "row-major",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--gpu-output-order \"row-major\"")
            && stderr.contains("accepted: instance-major, value-major"),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).is_empty(),
        "measured first"
    );

    let file = dir.join("gpu.toml");
    std::fs::write(
        &file,
        SMALL
            .replace("instances = 240", "instances = 8")
            .replace("backend = \"cpu\"", "backend = \"gpu\""),
    )
    .unwrap();
    let o = bin()
        .env("SIMBATCH_BACKEND", "cpu")
        .args(["run", file.to_str().unwrap(), "--out"])
        .arg(dir.join("env-cpu"))
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest: serde_json::Value =
        serde_json::from_slice(&read(&dir.join("env-cpu/manifest.json"))).unwrap();
    assert!(
        manifest["backend"].as_str().unwrap().starts_with("cpu"),
        "{manifest}"
    );
    let o = bin()
        .env("SIMBATCH_BACKEND", "tpu")
        .args(["run", file.to_str().unwrap(), "--out"])
        .arg(dir.join("env-bad"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("SIMBATCH_BACKEND") && stderr.contains("tpu"),
        "{stderr}"
    );

    // No adapter at all (a backend this machine does not have): auto falls back with one
    // clear note.
    let o = bin()
        .env("WGPU_BACKEND", "dx12")
        .env("SIMBATCH_BACKEND", "auto")
        .args(["run", file.to_str().unwrap(), "--out"])
        .arg(dir.join("no-adapter"))
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest: serde_json::Value =
        serde_json::from_slice(&read(&dir.join("no-adapter/manifest.json"))).unwrap();
    let backend = manifest["backend"].as_str().unwrap();
    assert!(backend.starts_with("cpu"), "{backend}");
    assert_eq!(backend.matches("no GPU adapter").count(), 1, "{backend}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 14: `auto` prefers the CPU path over a software adapter, and an explicit `gpu` on one
/// says it is a software rasterizer (checked where the adapter found is a software one, as
/// lavapipe in CI; on hardware `auto` takes the GPU).
#[test]
fn auto_passes_over_software_adapters() {
    let Some(device) = common::device() else {
        return;
    };
    let software = simbatch::backend::is_software(&device);
    let auto = simbatch::backend::resolve(Backend::Auto, simbatch::gpu::Precision::F32).unwrap();
    let gpu = simbatch::backend::resolve(Backend::Gpu, simbatch::gpu::Precision::F32).unwrap();
    assert!(gpu.device.is_some());
    if software {
        assert!(auto.device.is_none());
        assert!(
            auto.note.as_deref().unwrap().contains("software"),
            "{:?}",
            auto.note
        );
        assert!(gpu.note.as_deref().unwrap().contains("software rasterizer"));
    } else {
        assert!(auto.device.is_some() && gpu.note.is_none());
    }
}

/// Issue 14: plotting a constant column near the largest double (or spanning the whole range)
/// ends and draws or skips, never loops.
#[test]
fn plots_end_on_extreme_columns() {
    use simbatch::cli::plots::axis_range;
    assert_eq!(axis_range(f64::MAX, f64::MAX), None);
    assert_eq!(axis_range(-f64::MAX, f64::MAX), None);
    let (lo, hi) = axis_range(1.0, 1.0).unwrap();
    assert!(lo < 1.0 && hi > 1.0);
    let (lo, hi) = axis_range(1e300, 1e300).unwrap();
    assert!(lo < 1e300 && hi > 1e300 && (hi - lo).is_finite());
    let (lo, hi) = axis_range(1.0, 1.0 + f64::EPSILON).unwrap();
    assert!(hi - lo > 1e-7);
    let dir = scratch("plots");
    std::fs::create_dir_all(dir.join("plots")).unwrap();
    let results = simbatch::cli::study::Results {
        columns: vec!["status".into(), "energy".into(), "energy_change".into()],
        rows: (0..50)
            .map(|i| {
                (
                    i,
                    vec![0.0, 1.7e308, if i % 2 == 0 { -1.7e308 } else { 1.7e308 }],
                )
            })
            .collect(),
        series_columns: vec!["time".into(), "energy".into()],
        series: (0..20)
            .map(|k| (0, vec![k as f64 * 0.1, 1.7e308]))
            .collect(),
        ..Default::default()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.clone();
    std::thread::spawn(move || {
        let _ = tx.send(output::write_results(&d, &results, None).map(|_| ()));
    });
    let done = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("write_results ended");
    done.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small seeded generator (xorshift64*), so the property tests below are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random mutation of a scenario text: a number replaced by an extreme or a value of
/// another type, a string by garbage, a line deleted or doubled, or the text truncated.
fn mutate(text: &str, rng: &mut Rng) -> String {
    const NUMBERS: [&str; 16] = [
        "0",
        "-1",
        "0.0",
        "-0.0",
        "1e-300",
        "1e300",
        "-1e300",
        "nan",
        "inf",
        "-inf",
        "1e20",
        "3",
        "0.5",
        "9223372036854775807",
        "-9223372036854775808",
        "1e-9",
    ];
    const VALUES: [&str; 8] = [
        "[1, 2]",
        "{ uniform = [2, 1] }",
        "{ normal = [0, -1] }",
        "{ log_uniform = [-1, 1] }",
        "{ choice = [] }",
        "\"$nope\"",
        "true",
        "{ gamma = [1, 2] }",
    ];
    const STRINGS: [&str; 6] = [
        "\"\"",
        "\"x\"",
        "\"ground\"",
        "\"rk5\"",
        "\"ball\"",
        "\"gpu\"",
    ];
    let lines: Vec<&str> = text.lines().collect();
    match rng.below(6) {
        0 | 1 => {
            // A number literal (not inside a name) replaced.
            let spots: Vec<usize> = text
                .char_indices()
                .filter(|(k, c)| {
                    (c.is_ascii_digit() || *c == '-')
                        && !text[..*k].ends_with(|p: char| {
                            p.is_ascii_alphanumeric() || p == '.' || p == '_' || p == '-'
                        })
                })
                .map(|(k, _)| k)
                .collect();
            if spots.is_empty() {
                return text.to_string();
            }
            let at = spots[rng.below(spots.len())];
            let end = text[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+'))
                .map_or(text.len(), |e| at + e);
            let with = if rng.below(3) == 0 {
                VALUES[rng.below(VALUES.len())]
            } else {
                NUMBERS[rng.below(NUMBERS.len())]
            };
            format!("{}{with}{}", &text[..at], &text[end..])
        }
        2 => {
            let quotes: Vec<usize> = text.match_indices(" = \"").map(|(k, _)| k + 3).collect();
            if quotes.is_empty() {
                return text.to_string();
            }
            let at = quotes[rng.below(quotes.len())];
            let end = text[at + 1..].find('"').map_or(text.len(), |e| at + e + 2);
            format!(
                "{}{}{}",
                &text[..at],
                STRINGS[rng.below(STRINGS.len())],
                &text[end..]
            )
        }
        3 => {
            let k = rng.below(lines.len());
            lines
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != k)
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n")
        }
        4 => {
            let k = rng.below(lines.len());
            let mut out: Vec<&str> = lines.clone();
            out.insert(k, lines[k]);
            out.join("\n")
        }
        _ => {
            let mut at = rng.below(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text[..at].to_string()
        }
    }
}

/// Issue 14's property test: 240 randomly mutated scenario files are either refused with a
/// located error or run to the end (on a few instances, a short duration) — never a panic,
/// never a hang — and every result row that says status 0 holds finite state.
#[test]
fn mutated_scenarios_never_panic_or_hang() {
    let dir = scratch("fuzz");
    let bases = [
        SMALL.to_string(),
        ball_study(
            "b",
            "velocity = [{ uniform = [0.0, 2.0] }, 0.0, 0.0]",
            "integrator = \"rkm\"\naccuracy = 1e-4\nduration = 0.05\nassemble = true",
        ),
        DEFAULT_SCENARIO.to_string(),
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut refused, mut ran) = (0, 0);
    for case in 0..240 {
        let mut text = bases[case % bases.len()].clone();
        for _ in 0..1 + rng.below(2) {
            text = mutate(&text, &mut rng);
        }
        let parsed = std::panic::catch_unwind(|| Scenario::parse("fuzz.toml", &text));
        let parsed = parsed.unwrap_or_else(|_| panic!("case {case}: parse panicked on\n{text}"));
        let Ok(mut scenario) = parsed else {
            let message = parsed.unwrap_err().to_string();
            if std::env::var("SIMBATCH_FUZZ_VERBOSE").is_ok() {
                eprintln!("case {case}: {message}");
            }
            assert!(
                message.starts_with("fuzz.toml:"),
                "case {case}: unlocated {message}"
            );
            refused += 1;
            continue;
        };
        // Keep each run short: a few instances (unless the count is beyond any memory, which
        // must be refused up front), a short duration, no step count in the millions.
        if scenario.instances < 1_000_000_000_000 {
            scenario.instances = scenario.instances.min(12);
        }
        scenario.simulation.duration = scenario.simulation.duration.min(0.05);
        let step = match scenario.simulation.options.integrator {
            simbatch::step::Integrator::SemiImplicitEuler { step }
            | simbatch::step::Integrator::Rk4 { step } => step,
            simbatch::step::Integrator::RungeKuttaMerson { max_step, .. } => max_step,
        };
        if scenario.simulation.duration / step > 1e5 {
            continue;
        }
        scenario.simulation.backend = Backend::Cpu;
        let out = dir.join(format!("case{case}"));
        let (tx, rx) = std::sync::mpsc::channel();
        let s = scenario.clone();
        let o = out.clone();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| {
                run_study(&s, None, Backend::Cpu, &o, false, true).map(|_| ())
            });
            let _ = tx.send(r.map_err(|_| ()));
        });
        let result = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("case {case}: the run hangs on\n{text}"))
            .unwrap_or_else(|_| panic!("case {case}: the run panicked on\n{text}"));
        match result {
            Err(e) => {
                assert!(!e.to_string().is_empty());
                if std::env::var("SIMBATCH_FUZZ_VERBOSE").is_ok() {
                    eprintln!("case {case}: {e}");
                }
                assert!(!out.exists(), "case {case}: a refused run left output");
                refused += 1;
            }
            Ok(()) => {
                ran += 1;
                let (columns, rows) = results_of(&out);
                let status = column(&columns, "status");
                for (i, v) in &rows {
                    if v[status] == 0.0 {
                        for (c, x) in columns.iter().zip(v) {
                            if c.contains(".e") || c.ends_with(".x") || c.ends_with(".vx") {
                                assert!(
                                    x.is_finite(),
                                    "case {case}: instance {i} {c} = {x} with status 0\n{text}"
                                );
                            }
                        }
                    }
                }
                let _ = std::fs::remove_dir_all(&out);
            }
        }
    }
    println!("mutated scenarios: {refused} refused, {ran} ran");
    assert!(refused > 30 && ran > 20, "{refused} refused, {ran} ran");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scenario with a tilting plate, written from Simbody's `tilt_trajectories.jsonl` (every
/// number fixed to the record's), runs through the study pipeline and lands on Simbody's final
/// sample within the trajectory bound (1e-7): the CLI drives the plate by its law at every
/// stage. Its energy change is the plate's work.
#[test]
fn tilting_plate_scenario_follows_simbody() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden/tilt_trajectories.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let rotation_vector = |q: &[f64]| -> [f64; 3] {
        let s = (q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
        let angle = 2.0 * s.atan2(q[0]);
        if s == 0.0 {
            [0.0; 3]
        } else {
            [q[1] / s * angle, q[2] / s * angle, q[3] / s * angle]
        }
    };
    let list = |v: &serde_json::Value| -> String {
        let items: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|x| format!("{:?}", x.as_f64().unwrap()))
            .collect();
        format!("[{}]", items.join(", "))
    };
    let vec3 = |v: [f64; 3]| format!("[{:?}, {:?}, {:?}]", v[0], v[1], v[2]);
    let dir = scratch("tilting");
    for (k, line) in text.lines().take(2).enumerate() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let m = &r["plane_motion"];
        let b = &r["body"];
        let q: Vec<f64> = b["rotation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let base: Vec<f64> = m["base_rotation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let fields = [
            "axis1",
            "axis2",
            "angle_amplitude",
            "angle_rate",
            "angle_phase",
            "origin_offset",
            "origin_amplitude",
            "origin_rate",
            "origin_phase",
        ]
        .map(|f| format!("{f} = {}", list(&m[f])))
        .join(", ");
        let scenario = format!(
            r#"name = "tilt-{k}"
instances = 1
gravity = {gravity}

[[body]]
name = "plate"
prescribed = {{ kind = "tilting", {fields}, base_rotation = {base} }}

[[body]]
name = "ball"
mass = {mass:?}
com = {com}
inertia = {inertia}
position = {position}
rotation = {rotation}
velocity = {velocity}
angular_velocity = {angular}

[[constraint]]
kind = "sphere_on_plane"
plane = "plate"
body = "ball"
rolling = true
radius = {radius:?}
sphere_center = {center}

[simulation]
integrator = "rk4"
step = 5e-4
stabilization = "none"
duration = 2.0
assemble = false
"#,
            gravity = list(&r["gravity"]),
            base = vec3(rotation_vector(&base)),
            mass = b["mass"].as_f64().unwrap(),
            com = list(&b["com"]),
            inertia = list(&b["inertia_com"]),
            position = list(&b["position"]),
            rotation = vec3(rotation_vector(&q)),
            velocity = list(&b["lin_vel"]),
            angular = list(&b["ang_vel"]),
            radius = r["radius"].as_f64().unwrap(),
            center = list(&r["sphere_center"]),
        );
        let sc =
            Scenario::parse("tilt.toml", &scenario).unwrap_or_else(|e| panic!("{e}\n{scenario}"));
        assert_eq!(sc.prescribed.len(), 1);
        let out = dir.join(format!("tilt{k}"));
        run_study(&sc, None, Backend::Cpu, &out, false, true).unwrap();
        let (columns, rows) = output::read_csv(&out.join("results.csv")).unwrap();
        let col = |name: &str| {
            let at = columns
                .iter()
                .position(|c| c == name)
                .unwrap_or_else(|| panic!("{name}"));
            rows[0].1[at]
        };
        assert_eq!(col("status"), 0.0);
        let last = r["samples"].as_array().unwrap().last().unwrap().clone();
        let expect = |key: &str, i: usize| last[key][i].as_f64().unwrap();
        for (i, f) in ["x", "y", "z"].iter().enumerate() {
            let got = col(&format!("ball.{f}"));
            assert!(
                (got - expect("position", i)).abs() < 1e-7,
                "line {}: ball.{f} {got} vs {}",
                k + 1,
                expect("position", i)
            );
            let got = col(&format!("ball.v{f}"));
            assert!(
                (got - expect("lin_vel", i)).abs() < 1e-7,
                "line {}: ball.v{f}",
                k + 1
            );
            let got = col(&format!("ball.w{f}"));
            assert!(
                (got - expect("ang_vel", i)).abs() < 1e-7,
                "line {}: ball.w{f}",
                k + 1
            );
        }
        let e0 = r["samples"][0]["energy"].as_f64().unwrap();
        assert!((col("energy") - last["energy"].as_f64().unwrap()).abs() < 1e-7);
        assert!((col("energy_change") - (last["energy"].as_f64().unwrap() - e0)).abs() < 1e-7);
        assert!(col("driven_work").abs() > 1e-3, "the plate does work");
        assert!(
            col("energy_error").abs() < 1e-8,
            "energy error {}",
            col("energy_error")
        );
    }
}

/// Prescribed bodies in scenario files are checked like everything else: located errors
/// naming the field and what is accepted.
#[test]
fn prescribed_body_errors_are_located() {
    let base = |prescribed: &str, extra: &str| {
        format!(
            "name = \"p\"\ninstances = 2\n\n[[body]]\nname = \"plate\"\nprescribed = {prescribed}\n{extra}\n\
             [[body]]\nname = \"ball\"\nmass = 1.0\ninertia = {{ solid_sphere = 0.1 }}\n\n\
             [[constraint]]\nkind = \"sphere_on_plane\"\nplane = \"plate\"\nbody = \"ball\"\nradius = 0.1\n\n\
             [simulation]\nduration = 0.1\n"
        )
    };
    for (prescribed, extra, expect) in [
        (
            "{ kind = \"wobble\" }",
            "",
            "accepted: constant, tilting, polynomial",
        ),
        (
            "{ kind = \"tilting\", axis3 = [0, 0, 1] }",
            "",
            "body[0].prescribed.axis3",
        ),
        (
            "{ kind = \"tilting\", angle_rate = [1.0] }",
            "",
            "an array of 2 scalars",
        ),
        (
            "{ kind = \"tilting\" }",
            "mass = 2.0",
            "does not apply to a prescribed body",
        ),
        (
            "{ kind = \"polynomial\", position = [[0, 1, 2, 3, 4, 5, 6], [0], [0]] }",
            "",
            "degree ≤ 5",
        ),
        (
            "{ kind = \"constant\", velocity = [1, \"$nope\", 0] }",
            "",
            "names no [vars] entry",
        ),
    ] {
        let text = base(prescribed, extra);
        let err = Scenario::parse("p.toml", &text)
            .expect_err(expect)
            .to_string();
        assert!(err.contains(expect), "{expect}: {err}");
        assert!(err.starts_with("p.toml:"), "{err}");
    }
    // A prescribed body cannot be the moving body of a contact.
    let text = base("{ kind = \"tilting\" }", "")
        .replace("body = \"ball\"\nradius", "body = \"plate\"\nradius");
    let err = Scenario::parse("p.toml", &text).unwrap_err().to_string();
    assert!(err.contains("is a prescribed body"), "{err}");
    // Polynomial and constant laws run.
    for prescribed in [
        "{ kind = \"polynomial\", angles = [[0.0, 0.2], [0.0, { uniform = [-0.1, 0.1] }], [0.0]] }",
        "{ kind = \"constant\", angular_velocity = [0.0, 0.0, 1.0] }",
    ] {
        let sc = Scenario::parse("p.toml", &base(prescribed, "")).unwrap();
        let dir = scratch("prescribed-kinds");
        run_study(&sc, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
        let (columns, rows) = output::read_csv(&dir.join("out/results.csv")).unwrap();
        let status = columns.iter().position(|c| c == "status").unwrap();
        assert!(rows.iter().all(|(_, v)| v[status] == 0.0), "{prescribed}");
    }
}

/// `bench` on one thread with every integrator row: the rows carry the integrator and the bytes
/// per instance, which equal the batch's columns plus the call's own buffers (computed here
/// from the library's own counts, not copied from the output); a bad integrator name or thread
/// count is refused before any work.
#[test]
fn bench_rows_carry_integrators_threads_and_bytes() {
    let dir = scratch("bench");
    let json = dir.join("bench.json");
    let o = bin()
        .args([
            "bench",
            "--backends",
            "cpu",
            "--n",
            "64",
            "--substeps",
            "2",
            "--seconds",
            "0.01",
            "--threads",
            "1",
            "--unilateral",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["cpu_threads"], 1);
    let rows = doc["rows"].as_array().unwrap();
    // `--unilateral`: the bouncing balls and the bricks on the CPU's event path: the batch's
    // columns and the records the call returns (one per contact).
    let (bouncing_batch, _, _) = simbatch::scenarios::bouncing_balls(64).unwrap();
    let (brick_batch, corners, _) = simbatch::scenarios::sliding_bricks(64).unwrap();
    for (system, batch, contacts) in [
        ("bouncing ball (unilateral)", &bouncing_batch, 1),
        ("brick 4 corners (unilateral)", &brick_batch, corners.len()),
    ] {
        let row = rows
            .iter()
            .find(|r| r["system"] == system && r["backend"] == "cpu")
            .unwrap_or_else(|| panic!("no {system} row in {rows:?}"));
        assert_eq!(row["integrator"], "events");
        assert!(row["per_second"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["handed_to_cpu"].is_null(), "{row}");
        let bytes = row["bytes_per_instance"].as_u64().unwrap() as usize;
        let records = std::mem::size_of::<Option<Vec<simbatch::cpu::unilateral::ContactRecord>>>()
            + contacts * std::mem::size_of::<simbatch::cpu::unilateral::ContactRecord>();
        assert!(bytes >= batch.bytes().div_ceil(64) + records, "{row}");
    }
    let balls = simbatch::scenarios::rolling_balls(64).unwrap();
    // Shared columns count once; the lane path's call holds one block's outcomes.
    let columns = balls.bytes().div_ceil(64);
    assert!(columns < simbatch::batch::Batch::bytes_per_instance(balls.template()));
    let stepper = simbatch::prelude::Stepper::new(simbatch::prelude::StepOptions {
        integrator: simbatch::prelude::Integrator::Rk4 { step: 1e-3 },
        stabilization: simbatch::prelude::Stabilization::None,
    })
    .unwrap();
    let state = stepper.host_call_bytes(&balls).div_ceil(64);
    for integrator in ["rk4", "rk4-projection", "euler"] {
        let row = rows
            .iter()
            .find(|r| r["system"] == "rolling ball" && r["integrator"] == integrator)
            .unwrap_or_else(|| panic!("no {integrator} row in {rows:?}"));
        assert_eq!(row["bytes_per_instance"], columns + state, "{row}");
        let rate = row["per_second"].as_f64().unwrap();
        assert!(rate > 0.0);
        // The first call (kernels, buffers, the call) is timed apart.
        let first = row["first_call_s"].as_f64().unwrap();
        assert!(first > 0.0 && first.is_finite(), "{row}");
        // Workgroups are a GPU setting.
        assert!(row["workgroup_size"].is_null(), "{row}");
    }
    let evaluation = rows
        .iter()
        .find(|r| r["system"] == "rolling sphere" && r["what"] == "evaluations")
        .unwrap();
    let (spheres, _, _) = simbatch::scenarios::contact_batch(
        simbatch::scenarios::ContactKind::RollingSphere,
        simbatch::scenarios::PlaneBody::Ground,
        64,
        1,
    )
    .unwrap();
    let expected = spheres.bytes().div_ceil(64) + spheres.evaluate().bytes() / 64;
    assert_eq!(evaluation["bytes_per_instance"], expected, "{evaluation}");

    for (flag, value, accepted) in [
        ("--integrators", "rk5", "rk4, rk4-projection, euler"),
        ("--threads", "100000", "0 (every core)"),
    ] {
        let o = bin()
            .args([
                "bench",
                "--backends",
                "cpu",
                "--n",
                "8",
                "--seconds",
                "0.01",
            ])
            .args([flag, value])
            .output()
            .unwrap();
        assert!(!o.status.success());
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(value) && stderr.contains(accepted),
            "{stderr}"
        );
    }
}

/// The new distributions in a scenario: drawn per instance, recorded as inputs (a lognormal on
/// a log axis), within their bounds; a truncated normal that can reach ≤ 0 is refused for a
/// field that must be positive, naming it.
#[test]
fn truncated_normal_and_lognormal_draw_in_scenarios() {
    let text = DEFAULT_SCENARIO
        .replacen(
            "mass = { log_uniform = [0.1, 10.0] }",
            "mass = { lognormal = [0.0, 0.5] }",
            1,
        )
        .replacen(
            "incline_deg = { uniform = [5.0, 30.0] }",
            "incline_deg = { truncated_normal = [15.0, 10.0, 5.0, 30.0] }",
            1,
        );
    assert!(
        text.contains("lognormal") && text.contains("truncated_normal"),
        "{text}"
    );
    let sc = Scenario::parse("d.toml", &text).unwrap();
    let kinds = simbatch::cli::instances::input_kinds(&sc);
    assert!(kinds.contains(&("ball.mass".to_string(), true)));
    assert!(kinds.contains(&("constraint[0].incline_deg".to_string(), false)));
    for i in 0..200 {
        let s = simbatch::cli::study::sample(&sc, i, None);
        let names = simbatch::cli::study::input_names(&sc);
        let get = |n: &str| s.inputs[names.iter().position(|x| x == n).unwrap()];
        assert!(get("ball.mass") > 0.0);
        assert!((5.0..=30.0).contains(&get("constraint[0].incline_deg")));
    }
    let bad = text.replacen(
        "mass = { lognormal = [0.0, 0.5] }",
        "mass = { truncated_normal = [1.0, 1.0, 0.0, 2.0] }",
        1,
    );
    let err = Scenario::parse("d.toml", &bad).unwrap_err().to_string();
    assert!(
        err.contains("body[0].mass") && err.contains("truncated_normal"),
        "{err}"
    );
}

#[test]
fn every_example_scenario_parses_and_its_draws_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let scenario = Scenario::parse(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The dry pass over every instance the study draws (what `simbatch run` does first).
        simbatch::cli::study::validate(&scenario, 0..scenario.instances)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn a_refused_draw_names_the_scenarios_body_and_the_instance_once() {
    let text = include_str!("../../examples/scenarios/tossed_bricks.toml").replace(
        "inertia = [0.0125, 0.035, 0.04, 0.0, 0.0, 0.0]",
        "inertia = [0.0125, 0.0135, 0.04, 0.0, 0.0, 0.0]",
    );
    let scenario = Scenario::parse("bricks.toml", &text).unwrap();
    let err = simbatch::cli::study::validate(&scenario, 0..scenario.instances).unwrap_err();
    let CliError::Sample { instance, message } = &err else {
        panic!("{err}");
    };
    assert_eq!(*instance, 0);
    assert!(
        message.starts_with("invalid body \"brick\".inertia: got [0.0125, 0.0135, 0.04"),
        "{message}"
    );
    assert!(message.contains("triangle inequality"), "{message}");
    assert!(
        !message.contains("body[") && !message.contains("for instance"),
        "{message}"
    );
}

/// The library's warnings reach the command's standard error: a run with `--backend auto`
/// either took a hardware GPU (the manifest says so, and there is nothing to warn about) or
/// fell back to the CPU, and then the reason the manifest records (`auto passed over` a
/// software adapter, or no GPU at all) is also a `warning:` line on standard error; other
/// crates' log records (wgpu's) are not.
#[test]
fn the_commands_warnings_reach_standard_error() {
    let dir = scratch("warnings");
    let o = bin()
        .args([
            "run",
            "--instances",
            "8",
            "--backend",
            "auto",
            "--quiet",
            "--out",
        ])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("out").join("manifest.json")).unwrap(),
    )
    .unwrap();
    let backend = manifest["backend"].as_str().unwrap();
    match backend.split_once("; ") {
        Some((_, note)) => assert!(
            stderr.contains(&format!("warning: simbatch: {note}")),
            "manifest note {note:?} not on stderr: {stderr}"
        ),
        None => assert!(backend.starts_with("gpu"), "{backend}"),
    }
    // Every warning the logger prints is the library's own (they all say `simbatch:`).
    assert!(
        stderr
            .lines()
            .filter(|l| l.starts_with("warning:"))
            .all(|l| l.starts_with("warning: simbatch: ")),
        "other crates' records: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
