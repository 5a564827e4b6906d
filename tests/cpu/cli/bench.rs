//! `simbatch bench`: rows carry integrators, threads and bytes; flags refused by name.

use super::*;

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
    let doc = json_of(&json);
    assert_eq!(doc["cpu_threads"], 1);
    // Which copy of the lane code ran: the AVX-512 one wherever this process would take it.
    let expected = if simbatch::math::lanes::avx512::enabled() {
        "avx512"
    } else if cfg!(all(target_feature = "avx2", target_feature = "fma")) {
        "avx2+fma"
    } else {
        "baseline"
    };
    assert_eq!(doc["cpu_lane_code"], expected);
    let rows = doc["rows"].as_array().unwrap();
    // `--unilateral`: the bouncing balls and the bricks on the CPU's event path, with fixed
    // steps and under error control: the batch's columns and the records the call returns (one
    // per contact).
    let (bouncing_batch, _, _) = simbatch::scenarios::bouncing_balls(64).unwrap();
    let (brick_batch, corners, _) = simbatch::scenarios::sliding_bricks(64).unwrap();
    let systems = [
        ("bouncing ball (unilateral)", &bouncing_batch, 1),
        ("brick 4 corners (unilateral)", &brick_batch, corners.len()),
    ];
    for ((system, batch, contacts), integrator) in systems
        .into_iter()
        .flat_map(|s| ["events", "events-rkm"].map(|i| (s, i)))
    {
        let row = rows
            .iter()
            .find(|r| {
                r["system"] == system && r["backend"] == "cpu" && r["integrator"] == integrator
            })
            .unwrap_or_else(|| panic!("no {system} {integrator} row in {rows:?}"));
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
        ("--events", "rk5", "fixed, rkm"),
        ("--cpu-stores", "uncached", "auto, cached, streamed"),
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

/// The JSON document `bench --json` wrote at `path`.
fn json_of(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `bench` at its smallest: the CPU, eight instances, one Euler step a call, on one thread.
fn tiny_bench() -> Command {
    let mut c = bin();
    c.args(["bench", "--backends", "cpu", "--n", "8", "--substeps", "1"])
        .args([
            "--integrators",
            "euler",
            "--seconds",
            "0.01",
            "--threads",
            "1",
        ]);
    c
}

/// `SIMBATCH_NO_AVX512` keeps `bench` off the AVX-512 copies of the lane code, and its header
/// says which copy ran.
#[test]
fn bench_says_which_lane_code_ran() {
    let o = tiny_bench()
        .env("SIMBATCH_NO_AVX512", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let header = out.lines().find(|l| l.starts_with("CPU: ")).unwrap();
    assert!(header.ends_with("lane code: avx2+fma") || header.ends_with("lane code: baseline"));
}

/// `--cpu-stores`: the CPU evaluation rows name the stores they were measured with (the
/// stepping rows, which write no evaluation, do not), and every choice gives a rate.
#[test]
fn bench_rows_name_the_cpu_stores() {
    for (stores, backend) in [
        ("auto", "cpu"),
        ("cached", "cpu/cached"),
        ("streamed", "cpu/streamed"),
    ] {
        let dir = scratch(&format!("bench-stores-{stores}"));
        let json = dir.join("bench.json");
        let o = tiny_bench()
            .args(["--cpu-stores", stores, "--json"])
            .arg(&json)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let doc = json_of(&json);
        let rows = doc["rows"].as_array().unwrap();
        let evaluations: Vec<_> = rows.iter().filter(|r| r["integrator"] == "-").collect();
        assert_eq!(
            evaluations.len(),
            8,
            "{stores}: four systems, two output sets"
        );
        for row in evaluations {
            assert_eq!(row["backend"], backend, "{row}");
            assert!(row["per_second"].as_f64().unwrap() > 0.0, "{row}");
        }
        for row in rows.iter().filter(|r| r["integrator"] != "-") {
            assert_eq!(row["backend"], "cpu", "{row}");
        }
    }
}

/// Output into a closed pipe (`simbatch bench | head`) ends the command quietly, by SIGPIPE as
/// Unix tools end, not with a panic about a broken pipe.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = tiny_bench()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reading end closes at once, while the command still has rows to print (each row
    // comes after its measurement).
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?}", o.status);
}
