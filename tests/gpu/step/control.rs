//! What a GPU stepping call keeps and refuses: instances that cannot proceed flagged as on the
//! CPU, state and carry per instance, a shared column made per-instance, workgroup sizes.

use super::*;

/// The benchmark's rolling balls (`scenarios::rolling_balls`: consistent, rolling along x at
/// 0.5–1.1 m/s on level ground) and the ball's handle.
fn rolling(n: usize) -> (Batch, BodyId) {
    let b = simbatch::scenarios::rolling_balls(n).unwrap();
    let ball = b.template().free_bodies()[0];
    (b, ball)
}

/// Issue 14 on the GPU: RKM with projection and an instance whose velocity error on entry is
/// beyond the projection limit used to resubmit forever. Now its step stops at the minimum, it
/// is flagged as on the CPU (step failed, constraint violated; its state kept), the others
/// arrive; a slipping instance without drift control is flagged as violating, as on the CPU.
#[test]
fn gpu_stepping_ends_and_flags_what_cannot_proceed_as_the_cpu_does() {
    let Some(device) = device() else { return };
    let (mut batch, ball) = rolling(64);
    batch
        .set_u(ball, 5, [0.0, 0.0, 0.0, 100.0, 0.0, 0.0])
        .unwrap();
    let mut cpu = batch.clone();
    let options = StepOptions::simbody(1e-4);
    let mut stepper = Stepper::on_gpu(options, device.clone(), Precision::F32).unwrap();
    let report = stepper.advance(&mut batch, 0.05).unwrap();
    let cpu_report = Stepper::new(options)
        .unwrap()
        .advance(&mut cpu, 0.05)
        .unwrap();
    // It ends (the stuck instance used to resubmit forever), after about the CPU's attempts.
    let attempts = |r: &StepReport| r.steps + r.rejected;
    assert!(
        attempts(&report) <= 2 * attempts(&cpu_report) + 64,
        "GPU {report:?}, CPU {cpu_report:?}"
    );
    assert_eq!(report.flagged, 1);
    assert_eq!(batch.status(), cpu.status(), "same flags on both paths");
    let s = batch.status()[5];
    assert_ne!(s & status::STEP_FAILED, 0, "{}", status::describe(s));
    assert_eq!(batch.time()[5], 0.0);
    assert_eq!(batch.u(ball).unwrap()[5], [0.0, 0.0, 0.0, 100.0, 0.0, 0.0]);
    for i in (0..64).filter(|i| *i != 5) {
        assert_eq!(batch.status()[i], status::OK);
        assert!((batch.time()[i] - 0.05).abs() < 1e-12);
    }

    let (mut batch, ball) = rolling(16);
    batch
        .set_u(ball, 9, [0.0, 0.0, 0.0, 0.01, 0.0, 0.0])
        .unwrap();
    let mut cpu = batch.clone();
    let rk4 = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    Stepper::on_gpu(rk4, device, Precision::F32)
        .unwrap()
        .step(&mut batch, 10)
        .unwrap();
    Stepper::new(rk4).unwrap().step(&mut cpu, 10).unwrap();
    assert_eq!(batch.status()[9], status::CONSTRAINT_VIOLATED);
    assert_eq!(batch.status(), cpu.status());
    assert!((batch.time()[9] - 0.01).abs() < 1e-12, "still stepped");
}

/// A batch larger than one block of the host's parallel store (tens of thousands of
/// instances): instances flagged before a call, in different blocks, keep their state, time and
/// flags bit for bit; every other instance advances as on the CPU; the zero carry columns are
/// cleared on the device, the status column written where an instance is flagged.
#[test]
fn large_batches_store_their_states_in_blocks_and_keep_the_flagged_ones() {
    let Some(device) = device() else { return };
    let n = 70_000;
    let (mut batch, ball) = rolling(n);
    let stuck = [5, 40_000, n - 1];
    for i in stuck {
        batch
            .set_u(ball, i, [0.0, 0.0, 0.0, 100.0, 0.0, 0.0])
            .unwrap();
    }
    let mut cpu = batch.clone();
    let rkm = StepOptions::simbody(1e-4);
    let mut gpu_rkm = Stepper::on_gpu(rkm, device.clone(), Precision::F32).unwrap();
    gpu_rkm.advance(&mut batch, 0.002).unwrap();
    Stepper::new(rkm).unwrap().advance(&mut cpu, 0.002).unwrap();
    assert_eq!(batch.status(), cpu.status(), "same flags on both paths");
    for i in stuck {
        assert_ne!(batch.status()[i] & status::HALTED, 0, "instance {i}");
    }
    let before = batch.clone();
    let mut gpu_rk4 = Stepper::on_gpu(RK4_1MS, device, Precision::F32).unwrap();
    let report = gpu_rk4.step(&mut batch, 1).unwrap();
    Stepper::new(RK4_1MS).unwrap().step(&mut cpu, 1).unwrap();
    assert_eq!(report.steps, (n - stuck.len()) as u64);
    assert_eq!(batch.status(), before.status(), "no new flags");
    let (q, u) = (batch.q(ball).unwrap(), batch.u(ball).unwrap());
    let (q0, u0) = (before.q(ball).unwrap(), before.u(ball).unwrap());
    let (cq, cu) = (cpu.q(ball).unwrap(), cpu.u(ball).unwrap());
    for i in 0..n {
        if stuck.contains(&i) {
            assert_eq!((q[i], u[i]), (q0[i], u0[i]), "flagged instance {i} moved");
            assert_eq!(batch.time()[i], before.time()[i], "flagged instance {i}");
            continue;
        }
        assert!((batch.time()[i] - 0.003).abs() < 1e-12, "instance {i}");
        for k in 0..7 {
            assert!(
                (q[i][k] - cq[i][k]).abs() < 1e-5,
                "q of {i}: {:?} {:?}",
                q[i],
                cq[i]
            );
        }
        for k in 0..6 {
            assert!(
                (u[i][k] - cu[i][k]).abs() < 1e-4,
                "u of {i}: {:?} {:?}",
                u[i],
                cu[i]
            );
        }
    }
}

const RK4_1MS: StepOptions = StepOptions {
    integrator: Integrator::Rk4 { step: 1e-3 },
    stabilization: Stabilization::None,
};

/// GPU memory (issue 17): per instance, a stepped f32 rolling-ball batch holds only its state
/// (q, u, time, work) and the kernel's carry, 96 B; gravity, mass properties and the contact's
/// parameters are one row per chunk, and the readback of a large batch goes through a staging
/// buffer of a quarter of its size (at least 1 MiB, at most 4 MiB): 120 B in all. The evaluation's outputs exist only once something is evaluated, in bounded slices.
#[test]
fn gpu_batches_hold_the_state_and_the_carry_per_instance() {
    let Some(device) = device() else { return };
    let options = RK4_1MS;
    let mut held = Vec::new();
    for n in [50_000, 60_000] {
        let (mut batch, _) = rolling(n);
        let mut stepper = Stepper::on_gpu(options, device.clone(), Precision::F32).unwrap();
        stepper.step(&mut batch, 1).unwrap();
        held.push(stepper.device_bytes().unwrap());
    }
    let per_instance = (held[1] - held[0]) / 10_000;
    // q 7, u 6, time 1, work 2; carry 8; f32: 96 B. The staging buffer is a quarter of the
    // readback (carry and state), so it grows with N too: 24 B more.
    let state = (7 + 6 + 1 + 2 + 8) * 4;
    assert!(
        (state + state / 4 - 1..=state + state / 4).contains(&per_instance),
        "{per_instance} B an instance"
    );
    // Besides: one shared row per chunk. So the batch holds at most 128 B an instance (issue
    // 17's goal) from N ≈ 44 000 up (a readback of up to 1 MiB takes one round, its staging
    // buffer its size), not only past the old fixed staging's 4 MiB (N ≈ 131 000).
    assert!(held[0] - 50_000 * per_instance <= 4096);
    for (n, bytes) in [(50_000, held[0]), (60_000, held[1])] {
        assert!(bytes / n <= 128, "{} B an instance at N = {n}", bytes / n);
    }

    // Evaluating adds the output buffer (the result's own size, at most DISPATCH_BYTES) and its
    // staging (at most SLICE_BYTES).
    let (batch, _) = rolling(1000);
    let mut e =
        Evaluator::on_device(device.clone(), Precision::F32, GpuOptions::default()).unwrap();
    let ev = e.evaluate(&batch).unwrap();
    let layout = e.gpu_evaluator().unwrap().layout().clone();
    assert!(layout.shared_width >= 3 + 1 + 3 + 6 + 3 + 3 + 1 + 1 + 11);
    assert_eq!(layout.varying_width, 7 + 6 + 1 + 2);
    let outputs = 2 * 1000 * layout.output_width as u64 * 4;
    assert!(e.device_bytes().unwrap() >= outputs);
    let mut report = Report::default();
    simbatch::golden::compare_evaluations(&ev, &batch.evaluate(), 2e-4, &mut report).unwrap();
    assert!(report.passed(), "{report}");
}

/// A column the kernel reads as one shared row that becomes per-instance rebuilds the kernel
/// (it reads the column per instance from then on, also once the column is shared again), and
/// the results follow the batch on every path.
#[test]
fn a_shared_column_made_per_instance_rebuilds_the_kernel() {
    let Some(device) = device() else { return };
    let (mut batch, ball) = rolling(300);
    let contact = ConstraintId(0);
    let mut e =
        Evaluator::on_device(device.clone(), Precision::F32, GpuOptions::default()).unwrap();
    let radius_shared = |e: &Evaluator| {
        let layout = e.gpu_evaluator().unwrap().layout();
        layout.input(Column::Param(0, 2)).unwrap().shared
    };
    evaluates_as_the_cpu(&mut e, &batch, "radius");
    assert!(radius_shared(&e));
    let r = batch.param_value(contact, "radius", 5).unwrap()[0];
    batch.set_param(contact, "radius", 5, &[1.5 * r]).unwrap();
    batch.set_mass(ball, 7, 2.5).unwrap();
    evaluates_as_the_cpu(&mut e, &batch, "radius");
    assert!(!radius_shared(&e));
    batch.set_param(contact, "radius", 5, &[r]).unwrap();
    assert!(batch.share_uniform_columns() >= 1);
    evaluates_as_the_cpu(&mut e, &batch, "radius");
    assert!(!radius_shared(&e), "read per instance from then on");
    // Stepping through the same kernels after the change.
    let mut stepped = batch.clone();
    stepped.set_param(contact, "radius", 9, &[0.9 * r]).unwrap();
    let mut gpu = Stepper::on_gpu(RK4_1MS, device.clone(), Precision::F32).unwrap();
    gpu.step(&mut stepped, 5).unwrap();
    stepped
        .set_param(contact, "radius", 11, &[1.1 * r])
        .unwrap();
    gpu.step(&mut stepped, 5).unwrap();
    let mut cpu = batch.clone();
    cpu.set_param(contact, "radius", 9, &[0.9 * r]).unwrap();
    let mut reference = Stepper::new(RK4_1MS).unwrap();
    reference.step(&mut cpu, 5).unwrap();
    cpu.set_param(contact, "radius", 11, &[1.1 * r]).unwrap();
    reference.step(&mut cpu, 5).unwrap();
    let mut report = Report::default();
    compare_states(&stepped, &cpu, F32_TRAJECTORY_TOL, &mut report);
    assert!(report.passed(), "{report}");
}

/// The workgroup size is a launch setting only: every instance is one invocation that reads
/// and writes its own entries, so any size the adapter allows — one, an odd size that leaves
/// a partial last workgroup, a large one — gives the default's bits, for evaluation and for
/// stepping; a size the adapter does not allow is a typed error naming the option.
#[test]
fn workgroup_size_changes_no_bit_and_is_checked_against_the_adapter() {
    let Some(device) = device() else { return };
    let batch = assembled(ContactKind::RollingSphere, PlaneBody::Ground, 1000, 71);
    let options = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::Projection { tolerance: 1e-6 },
    };
    let run = |size: Option<u32>| {
        let gpu_options = GpuOptions {
            workgroup_size: size,
            ..GpuOptions::default()
        };
        let evaluator = Evaluator::on_device(device.clone(), Precision::F32, gpu_options).unwrap();
        let mut stepper = Stepper::with_evaluator(options, evaluator).unwrap();
        let mut stepped = batch.clone();
        stepper.step(&mut stepped, 5).unwrap();
        let evaluation = stepper.evaluator_mut().evaluate(&stepped).unwrap();
        (stepped, evaluation)
    };
    let (default_state, default_evaluation) = run(None);
    let max = device.max_workgroup_size();
    assert!(device.default_workgroup_size() <= max);
    for size in [1, 7, 96, max] {
        let (state, evaluation) = run(Some(size));
        for i in 0..batch.len() {
            assert_eq!(
                state.instance_state(i).unwrap(),
                default_state.instance_state(i).unwrap(),
                "workgroup size {size}: stepped state of instance {i}"
            );
        }
        assert_eq!(
            evaluation, default_evaluation,
            "workgroup size {size}: evaluation"
        );
    }
    for bad in [0, max + 1] {
        let options = GpuOptions {
            workgroup_size: Some(bad),
            ..GpuOptions::default()
        };
        let err = Evaluator::on_device(device.clone(), Precision::F32, options)
            .and_then(|mut e| e.evaluate(&batch))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, Error::InvalidOption { .. })
                && text.contains("workgroup_size")
                && text.contains(&format!("1 to {max}")),
            "{text}"
        );
    }
}

/// `simbatch bench --workgroup-sizes`: every GPU row once per size, each carrying its size; a
/// size the adapter does not allow is refused before any work, naming the flag and the range.
#[test]
fn bench_measures_each_workgroup_size_and_refuses_what_the_adapter_cannot_run() {
    let Some(device) = device() else { return };
    let json = std::env::temp_dir().join(format!("simbatch-wg-{}.json", std::process::id()));
    let bench = |sizes: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_simbatch"))
            .args([
                "bench",
                "--backends",
                "gpu",
                "--n",
                "100",
                "--substeps",
                "1",
            ])
            .args(["--integrators", "euler", "--seconds", "0.01"])
            .args(["--workgroup-sizes", sizes, "--json"])
            .arg(&json)
            .output()
            .unwrap()
    };
    let o = bench("7,64");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let rows = doc["rows"].as_array().unwrap();
    for (system, what) in [
        ("rolling sphere", "evaluations"),
        ("rolling sphere", "evaluations (kernel only)"),
        ("rolling ball", "steps"),
    ] {
        let measured: Vec<_> = rows
            .iter()
            .filter(|r| r["system"] == system && r["what"] == what)
            .collect();
        let sizes: Vec<_> = measured
            .iter()
            .map(|r| r["workgroup_size"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, [7, 64], "{system}, {what}: {rows:?}");
        for r in measured {
            let rate = r["per_second"].as_f64().unwrap();
            assert!(rate.is_finite() && rate > 0.0, "{r}");
        }
    }
    let too_big = device.max_workgroup_size() + 1;
    let o = bench(&too_big.to_string());
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--workgroup-sizes") && stderr.contains(&format!("1 to {}", too_big - 1)),
        "{stderr}"
    );
}

/// An RKM accuracy finer than f32 GPU stepping resolves is not refused (steps shrink until
/// rounding hides the error) but said: `backend::f32_accuracy_note` names it and the floor, for
/// f32 on the GPU only — not f64, not the CPU, not RK4, not an accuracy at the floor.
#[test]
fn an_rkm_accuracy_finer_than_f32_resolves_is_said() {
    use simbatch::backend::{F32_RKM_ACCURACY, f32_accuracy_note};
    use simbatch::step::{Integrator, Stabilization};
    let Some(device) = device() else { return };
    let rkm = |accuracy: f64| StepOptions {
        integrator: Integrator::RungeKuttaMerson {
            accuracy,
            max_step: 1e-2,
        },
        stabilization: Stabilization::None,
    };
    let note = |options: StepOptions, precision: Precision| {
        let stepper = Stepper::on_gpu(options, device.clone(), precision).unwrap();
        f32_accuracy_note(&options, stepper.evaluator())
    };
    let text = note(rkm(1e-10), Precision::F32).expect("1e-10 in f32");
    assert!(text.contains("1e-10") && text.contains("1e-5"), "{text}");
    assert_eq!(note(rkm(F32_RKM_ACCURACY), Precision::F32), None);
    assert_eq!(note(StepOptions::simbody(1e-4), Precision::F32), None);
    let rk4 = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    assert_eq!(note(rk4, Precision::F32), None);
    if device.supports_f64 {
        assert_eq!(note(rkm(1e-10), Precision::F64), None);
    }
    let cpu = Stepper::new(rkm(1e-10)).unwrap();
    assert_eq!(f32_accuracy_note(&rkm(1e-10), cpu.evaluator()), None);
}
