//! `run` and `check`: shards merged equal the unsharded run bit for bit, the closed form of
//! balls on inclines, no output from a failed run, the golden files, the GPU against the CPU,
//! Parquet against CSV.

use super::*;

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
    let (_, out, o) = run_scenario(
        &dir,
        "inclines.toml",
        &SMALL.replace("instances = 240", "instances = 60"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
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

/// `record.events`' lift-off time is the first sample at which a bilateral plane contact
/// pulls by more than `unilateral.md` §8's liftoff margin (1e-9 m‖g‖): a ball on a free plate,
/// the two falling together, presses with zero force to rounding (±1e-15 N, which read as a
/// lift-off at t = 0 before the margin) and never lifts off; on a plate driven down at 2 g the
/// plane pulls with m g from the start.
#[test]
fn a_lift_off_is_a_pull_beyond_the_liftoff_margin() {
    let dir = scratch("lift-off");
    let text = |plate: &str| {
        format!(
            r#"
instances = 40
[[body]]
name = "plate"
{plate}
[[body]]
name = "ball"
mass = {{ uniform = [0.5, 2.0] }}
inertia = {{ solid_sphere = 0.1 }}
position = [0.0, 0.0, 0.1]
velocity = [{{ uniform = [-1.0, 1.0] }}, 0.0, 0.0]
angular_velocity = [0.0, {{ uniform = [-5.0, 5.0] }}, 0.0]
[[constraint]]
kind = "sphere_on_plane"
plane = "plate"
body = "ball"
radius = 0.1
rolling = {{ choice = [true, false] }}
[simulation]
integrator = "rk4"
step = 1e-3
duration = 0.3
backend = "cpu"
[record]
interval = 0.1
events = true
"#
        )
    };
    let cases = [
        (
            "falling",
            "mass = 5.0\ninertia = [1.0, 1.0, 1.5, 0.0, 0.0, 0.0]",
            false,
        ),
        (
            "driven-down",
            "prescribed = { kind = \"constant\", acceleration = [0.0, 0.0, -19.62] }",
            true,
        ),
    ];
    for (name, plate, lifts) in cases {
        let scenario = Scenario::parse("plate.toml", &text(plate)).unwrap();
        let out = dir.join(name);
        run_study(&scenario, None, Backend::Cpu, &out, false, true).unwrap();
        let (columns, rows) = output::read_csv(&out.join("results.csv")).unwrap();
        let col = |n: &str| columns.iter().position(|c| c == n).unwrap();
        assert_eq!(rows.len(), 40);
        for (i, v) in &rows {
            let (force, lift_off) = (v[col("c0.normal_force")], v[col("c0.lift_off_time")]);
            let m = v[col("ball.mass")];
            if lifts {
                assert!(
                    (force + m * 9.81).abs() < 1e-9 * m * 9.81,
                    "{name} {i}: {force}"
                );
                assert_eq!(lift_off, 0.0, "{name} {i}");
            } else {
                assert!(force.abs() < 1e-12, "{name} {i}: {force}");
                assert!(lift_off.is_nan(), "{name} {i}: {lift_off}");
            }
        }
    }
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
