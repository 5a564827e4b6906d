//! The command's edges: output files quoted, locked and checked, odd arguments, `auto` over
//! software adapters, plots of extreme columns.

use super::*;

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

/// The summary's lines count what ran in words: "simulated 1 instance", "(6 instances, …)".
#[test]
fn the_summary_counts_instances_in_words() {
    let dir = scratch("count-words");
    for (count, words) in [
        (1, ["simulated 1 instance for", "(1 instance, cpu"]),
        (6, ["simulated 6 instances for", "(6 instances, cpu"]),
    ] {
        let text = ball_study(
            "count",
            "",
            "integrator = \"rk4\"\nstep = 1e-2\nduration = 0.02",
        )
        .replacen("instances = 6", &format!("instances = {count}"), 1);
        let file = dir.join(format!("count{count}.toml"));
        std::fs::write(&file, text).unwrap();
        let o = bin()
            .arg("run")
            .arg(&file)
            .arg("--out")
            .arg(dir.join(format!("out{count}")))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        for words in words {
            assert!(stdout.contains(words), "{stdout}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `write_csv` formats its rows on every core, a block at a time: the file is the one the CSV
/// writer wrote, byte for byte (header quoted, every value by `Display`, rows in order across
/// the blocks), the values read back bit for bit, and a row unlike the header is refused.
#[test]
fn csv_rows_written_in_parallel_blocks_are_the_csv_writers_bytes() {
    let dir = scratch("csv-blocks");
    let columns: Vec<String> = ["a", "b,\"c\"", "d"].map(String::from).to_vec();
    let odd = [
        0.0,
        -0.0,
        1.0 / 3.0,
        -2.5e-300,
        1.7976931348623157e308,
        f64::NAN,
        f64::INFINITY,
        -f64::INFINITY,
        5e-324,
        123456789.0,
    ];
    // More rows than one block of jobs (2 048 rows a job), some indices out of order.
    let rows: Vec<(usize, Vec<f64>)> = (0..9_001)
        .map(|i| {
            let v =
                |k: usize| odd[(i * 7 + k * 3) % odd.len()] * if i % 2 == 0 { 1.0 } else { 1.5 };
            ((i * 37) % 10_007, vec![v(0), v(1), v(2)])
        })
        .collect();
    let path = dir.join("t.csv");
    output::write_csv(&path, &columns, &rows).unwrap();
    let mut reference = csv::Writer::from_writer(Vec::new());
    reference
        .write_record(std::iter::once("index").chain(columns.iter().map(String::as_str)))
        .unwrap();
    for (index, values) in &rows {
        let record: Vec<String> = std::iter::once(index.to_string())
            .chain(values.iter().map(f64::to_string))
            .collect();
        reference.write_record(&record).unwrap();
    }
    let reference = reference.into_inner().unwrap();
    let written = std::fs::read(&path).unwrap();
    assert_eq!(written.len(), reference.len());
    assert!(written == reference, "the CSV writer's bytes");
    let (read_columns, read_rows) = output::read_csv(&path).unwrap();
    assert_eq!(read_columns, columns);
    assert_eq!(read_rows.len(), rows.len());
    for ((i, v), (j, w)) in rows.iter().zip(&read_rows) {
        assert_eq!(i, j);
        let same = |a: &f64, b: &f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(
            v.iter().zip(w).all(|(a, b)| same(a, b)),
            "row {i}: {v:?} read as {w:?}"
        );
    }
    let mut short = rows.clone();
    short[4_500].1.pop();
    let e = output::write_csv(&dir.join("short.csv"), &columns, &short).unwrap_err();
    let message = e.to_string();
    let instance = short[4_500].0;
    assert!(
        message.contains(&format!(
            "instance {instance}: 2 values; the header has 3 columns"
        )),
        "{message}"
    );
}
