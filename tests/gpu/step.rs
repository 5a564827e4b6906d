//! Fused GPU stepping against the CPU stepper: the same integrator from the same assembled
//! states, 10 000 random instances per system. f64 kernels agree with the CPU to 1e-9; f32
//! kernels within the bound below, measured on lavapipe and an H100 and documented in the
//! README. With `CI=true` and no adapter these tests fail.
//!
//! The f64 comparisons run wherever the adapter offers SHADER_F64, lavapipe included (its f64
//! stepping kernels compile in about a second since the stages share one call of the dynamics;
//! they once took minutes). They caught what f32 cannot: Vulkan has no f64 sin, cos or pow, so
//! the f64 kernels carry their own (`shaders/trig_f64.wgsl`).

use std::sync::Arc;

use crate::common;
use common::device;

use simbatch::batch::Column;
use simbatch::cpu::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use simbatch::golden::Report;
use simbatch::prelude::*;
use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch, point_to_ground_batch};

/// f32 trajectories over 50 steps of 1 ms, per component relative to max(1, |x|): measured
/// worst 3.9e-6 (lavapipe); the bound leaves room for other systems and hardware.
const F32_TRAJECTORY_TOL: f64 = 1e-4;
const F64_TRAJECTORY_TOL: f64 = 1e-9;

/// f64 stepping is compared wherever the adapter offers SHADER_F64 (see the module
/// documentation); under `CI=true` lavapipe must offer it.
fn f64_stepping(device: &GpuDevice) -> bool {
    if !device.supports_f64 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI's adapter (lavapipe) offers SHADER_F64; this one does not: {}",
            device.describe()
        );
        eprintln!(
            "no SHADER_F64 on {}: f64 stepping not compared",
            device.describe()
        );
    }
    device.supports_f64
}

fn assembled(kind: ContactKind, plane: PlaneBody, n: usize, seed: u64) -> Batch {
    let (mut batch, _, _) = contact_batch(kind, plane, n, seed).unwrap();
    assemble_positions(&mut batch, &AssemblyOptions::default()).unwrap();
    assemble_velocities(&mut batch, None).unwrap();
    batch
}

fn compare_states(gpu: &Batch, cpu: &Batch, tol: f64, report: &mut Report) {
    for (slot, body) in cpu.template().free_bodies().iter().enumerate() {
        let _ = slot;
        for i in 0..cpu.len() {
            let loc = format!("instance {i}");
            let (qg, qc) = (gpu.q(*body).unwrap()[i], cpu.q(*body).unwrap()[i]);
            let sign = if qg[..4]
                .iter()
                .zip(&qc[..4])
                .map(|(a, b)| a * b)
                .sum::<f64>()
                < 0.0
            {
                -1.0
            } else {
                1.0
            };
            let qg: Vec<f64> = qg
                .iter()
                .enumerate()
                .map(|(k, x)| if k < 4 { sign * x } else { *x })
                .collect();
            report.check_slice("q", &loc, &qg, &qc, tol);
            report.check_slice(
                "u",
                &loc,
                &gpu.u(*body).unwrap()[i],
                &cpu.u(*body).unwrap()[i],
                tol,
            );
            report.check("time", || loc.clone(), gpu.time()[i], cpu.time()[i], 1e-12);
            // Halting flags agree exactly; the violation flag is a threshold on an error that
            // f32 and f64 round differently, so it may differ near the threshold (below).
            report.check(
                "status (halting bits)",
                || loc.clone(),
                (gpu.status()[i] & status::HALTED) as f64,
                (cpu.status()[i] & status::HALTED) as f64,
                0.0,
            );
        }
    }
    let differ = (0..cpu.len())
        .filter(|i| (gpu.status()[*i] ^ cpu.status()[*i]) & status::CONSTRAINT_VIOLATED != 0)
        .count();
    assert!(
        differ * 100 <= cpu.len(),
        "the violation flag differs on {differ} of {} instances",
        cpu.len()
    );
    report.records += cpu.len();
}

fn run(
    device: &Arc<GpuDevice>,
    batch: &Batch,
    options: StepOptions,
    steps: usize,
    precision: Precision,
    tol: f64,
    name: &str,
) {
    let mut cpu = batch.clone();
    Stepper::new(options)
        .unwrap()
        .step(&mut cpu, steps)
        .unwrap();
    let mut gpu = batch.clone();
    let mut e = Stepper::on_gpu(options, device.clone(), precision).unwrap();
    // Two calls: the state stays on the GPU between them and only changed columns move.
    e.step(&mut gpu, steps / 2).unwrap();
    e.step(&mut gpu, steps - steps / 2).unwrap();
    assert_eq!(
        e.evaluator().gpu_evaluator().unwrap().last_upload_bytes(),
        0,
        "nothing changed between the calls: nothing uploaded"
    );
    let mut report = Report::default();
    compare_states(&gpu, &cpu, tol, &mut report);
    println!("{name}:\n{report}");
    assert!(report.passed(), "{name}:\n{report}");
}

#[test]
fn gpu_rk4_matches_cpu_rk4_on_random_assembled_instances() {
    let Some(device) = device() else { return };
    let options = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    for (kind, plane) in [
        (ContactKind::RollingSphere, PlaneBody::Ground),
        (ContactKind::RollingSphere, PlaneBody::Prescribed),
        (ContactKind::RollingSphere, PlaneBody::Tilting),
        (ContactKind::Point, PlaneBody::Polynomial),
        (ContactKind::SlidingSphere, PlaneBody::Free),
        (ContactKind::Point, PlaneBody::Ground),
    ] {
        let batch = assembled(kind, plane, 10_000, 17);
        run(
            &device,
            &batch,
            options,
            50,
            Precision::F32,
            F32_TRAJECTORY_TOL,
            &format!("{kind:?} on {plane:?}, RK4 f32"),
        );
        if f64_stepping(&device) {
            run(
                &device,
                &batch.clone(),
                options,
                50,
                Precision::F64,
                F64_TRAJECTORY_TOL,
                &format!("{kind:?} on {plane:?}, RK4 f64"),
            );
        }
    }
}

#[test]
fn gpu_euler_and_baumgarte_match_the_cpu() {
    let Some(device) = device() else { return };
    let euler = StepOptions {
        integrator: Integrator::SemiImplicitEuler { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let batch = assembled(ContactKind::RollingSphere, PlaneBody::Free, 10_000, 4);
    run(
        &device,
        &batch,
        euler,
        50,
        Precision::F32,
        F32_TRAJECTORY_TOL,
        "rolling sphere on a free plane, Euler f32",
    );
    let (ptg, _, _) = point_to_ground_batch(10_000, 8, 3, true, true).unwrap();
    let baumgarte = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::Baumgarte,
    };
    run(
        &device,
        &ptg,
        baumgarte,
        50,
        Precision::F32,
        F32_TRAJECTORY_TOL,
        "point-to-ground pivot, RK4 + Baumgarte f32",
    );
    if f64_stepping(&device) {
        run(
            &device,
            &ptg,
            baumgarte,
            50,
            Precision::F64,
            F64_TRAJECTORY_TOL,
            "point-to-ground pivot, RK4 + Baumgarte f64",
        );
    }
}

#[test]
fn gpu_stepping_flags_a_diverging_instance_and_keeps_the_others() {
    let Some(device) = device() else { return };
    let mut batch = assembled(ContactKind::SlidingSphere, PlaneBody::Ground, 300, 6);
    let clean = batch.clone();
    batch
        .set_u(BodyId::new(1), 42, [1e30, -1e30, 1e30, 0.0, 0.0, 0.0])
        .unwrap();
    let options = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let mut e = Stepper::on_gpu(options, device.clone(), Precision::F32).unwrap();
    let report = e.step(&mut batch, 20).unwrap();
    assert_eq!(report.flagged, 1);
    assert_ne!(batch.status()[42] & status::NONFINITE_STATE, 0);
    // The flagged instance keeps a finite state (its last finite one), never ∞ or NaN.
    let state = batch.instance_state(42).unwrap();
    assert!(state.is_finite(), "{state:?}");
    let mut clean_gpu = clean.clone();
    Stepper::on_gpu(options, device.clone(), Precision::F32)
        .unwrap()
        .step(&mut clean_gpu, 20)
        .unwrap();
    for i in (0..300).filter(|i| *i != 42) {
        assert_eq!(
            batch.q(BodyId::new(1)).unwrap()[i],
            clean_gpu.q(BodyId::new(1)).unwrap()[i]
        );
    }
}

#[test]
fn gpu_stepping_then_evaluation_uses_the_gpu_state() {
    let Some(device) = device() else { return };
    let mut batch = assembled(ContactKind::RollingSphere, PlaneBody::Ground, 2000, 12);
    let options = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let mut e = Stepper::on_gpu(options, device.clone(), Precision::F32).unwrap();
    e.step(&mut batch, 50).unwrap();
    // Zero steps change nothing (not even time).
    let before = batch.time().to_vec();
    assert_eq!(e.step(&mut batch, 0).unwrap().steps, 0);
    assert_eq!(batch.time(), &before[..]);
    let ev = e.evaluator_mut().evaluate(&batch).unwrap();
    assert_eq!(
        e.evaluator().gpu_evaluator().unwrap().last_upload_bytes(),
        0,
        "the stepped state is already on the GPU"
    );
    let mut report = Report::default();
    simbatch::golden::compare_evaluations(&ev, &batch.evaluate(), 2e-4, &mut report).unwrap();
    assert!(report.passed(), "{report}");
}

/// GPU f32 against Simbody's trajectories, every 0.05 s sample over the full 2 s, per component
/// relative to max(1, |x|). Each case's bound is what the CPU f64 path achieves with the same
/// options (the integrator's own error: RKM at accuracy 1e-4 is ~1e-3 away from Simbody's 1e-11
/// run on either path) plus the f32 margin: rotations, positions and velocities within the first
/// margin, the energy within the second (without drift control, f32 rounding of the state drifts
/// the sphere off its plane by ~1e-4 m over 2 000 steps, which shows in the potential energy).
/// An adaptive run (RKM) is bounded by twice the CPU's error plus the margin: each path chooses
/// its own step sequence from its own error estimates, so each carries its own integrator error
/// of the same size, not the same error (while the kernels' solve changed form, f32 rounding
/// alone moved the GPU's angular-velocity error between 1.1× and 1.95× the CPU's 6.3e-4 on
/// lavapipe).
/// Measured worst values are in the README's precision table. The f64 kernels with fixed RK4
/// steps meet Simbody to 1e-7 as the CPU does (the tilting plates' sines exercise
/// `shaders/trig_f64.wgsl`); RKM's f64 run is not compared here, since its distance from
/// Simbody is the integrator's ~1e-3, which the CPU comparison above already bounds.
const F32_GOLDEN_STATE_MARGIN: f64 = 5e-4;
const F32_GOLDEN_ENERGY_MARGIN: f64 = 3e-3;

#[test]
fn gpu_follows_simbody_trajectories_over_two_seconds() {
    let Some(device) = device() else { return };
    let records = simbatch::golden::trajectory_records(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden"),
    )
    .unwrap();
    let cases = [
        (
            StepOptions {
                integrator: Integrator::Rk4 { step: 1e-3 },
                stabilization: Stabilization::None,
            },
            "RK4 h=1e-3",
        ),
        (
            StepOptions {
                // f32 error estimates bottom out near 1e-6: ask for less.
                integrator: Integrator::RungeKuttaMerson {
                    accuracy: 1e-4,
                    max_step: 0.05,
                },
                stabilization: Stabilization::Projection { tolerance: 1e-5 },
            },
            "RKM accuracy 1e-4 with projection",
        ),
    ];
    for (options, name) in cases {
        let cpu =
            simbatch::golden::check_trajectories(&records, || Stepper::new(options), 1.0).unwrap();
        let report = simbatch::golden::check_trajectories(
            &records,
            || Stepper::on_gpu(options, device.clone(), Precision::F32),
            1.0,
        )
        .unwrap();
        println!("CPU f64 {name}:\n{cpu}\nGPU f32 {name}:\n{report}");
        assert!(report.passed(), "GPU f32 {name}:\n{report}");
        assert_eq!(report.records, records.len());
        assert!(!report.worst.is_empty());
        for (quantity, worst) in &report.worst {
            let margin = if quantity == "trajectory energy" {
                F32_GOLDEN_ENERGY_MARGIN
            } else {
                F32_GOLDEN_STATE_MARGIN
            };
            let reference = cpu.worst.get(quantity).map_or(0.0, |w| w.relative);
            let adaptive = matches!(options.integrator, Integrator::RungeKuttaMerson { .. });
            let reference = if adaptive { 2.0 * reference } else { reference };
            assert!(
                worst.relative <= reference + margin,
                "GPU f32 {name}: {quantity} {worst:?}, CPU f64 with the same options {reference:e}"
            );
        }
        let fixed_steps = matches!(options.integrator, Integrator::Rk4 { .. });
        if fixed_steps && f64_stepping(&device) {
            let report = simbatch::golden::check_trajectories(
                &records,
                || Stepper::on_gpu(options, device.clone(), Precision::F64),
                1e-7,
            )
            .unwrap();
            println!("GPU f64 {name}:\n{report}");
            assert!(report.passed(), "GPU f64 {name}:\n{report}");
        }
    }
}

/// RKM with per-instance step control and Simbody projection, on both paths from the same
/// assembled states over 0.1 s. The paths choose their own step sequences (f32 error estimates
/// differ from f64 ones), so states agree to the integration accuracy, not to rounding: the
/// bound is a few times the accuracy asked for. Both keep the constraints within tolerance.
const F32_ADAPTIVE_TOL: f64 = 2e-3;

#[test]
fn gpu_rkm_and_projection_track_the_cpu_and_hold_the_constraints() {
    let Some(device) = device() else { return };
    let tolerance = 1e-5;
    let cases = [
        (
            ContactKind::RollingSphere,
            PlaneBody::Ground,
            StepOptions {
                integrator: Integrator::RungeKuttaMerson {
                    accuracy: 1e-4,
                    max_step: 0.05,
                },
                stabilization: Stabilization::Projection { tolerance },
            },
        ),
        (
            ContactKind::Point,
            PlaneBody::Prescribed,
            StepOptions {
                integrator: Integrator::Rk4 { step: 2e-3 },
                stabilization: Stabilization::Projection { tolerance },
            },
        ),
        (
            ContactKind::SlidingSphere,
            PlaneBody::Free,
            StepOptions {
                integrator: Integrator::RungeKuttaMerson {
                    accuracy: 1e-4,
                    max_step: 0.05,
                },
                stabilization: Stabilization::None,
            },
        ),
    ];
    for (kind, plane, options) in cases {
        let name = format!("{kind:?} on {plane:?}, {options:?}");
        let batch = assembled(kind, plane, 2000, 23);
        let mut cpu = batch.clone();
        let cpu_report = Stepper::new(options)
            .unwrap()
            .advance(&mut cpu, 0.1)
            .unwrap();
        let mut gpu = batch.clone();
        let mut stepper = Stepper::on_gpu(options, device.clone(), Precision::F32).unwrap();
        assert_eq!(stepper.backend(), Backend::Gpu);
        // Two calls: RKM resumes at each instance's own step size.
        let first = stepper.advance(&mut gpu, 0.04).unwrap();
        let second = stepper.advance(&mut gpu, 0.06).unwrap();
        let gpu_steps = first.steps + second.steps;
        println!(
            "{name}: CPU {} steps ({} rejected, {} projections), GPU {} steps ({} rejected, {} projections)",
            cpu_report.steps,
            cpu_report.rejected,
            cpu_report.projections,
            gpu_steps,
            first.rejected + second.rejected,
            first.projections + second.projections
        );
        assert_eq!(first.flagged + second.flagged, 0, "{name}");
        let ratio = gpu_steps as f64 / cpu_report.steps as f64;
        assert!(
            (0.5..2.0).contains(&ratio),
            "{name}: step counts differ: GPU {gpu_steps}, CPU {}",
            cpu_report.steps
        );
        let mut report = Report::default();
        compare_states(&gpu, &cpu, F32_ADAPTIVE_TOL, &mut report);
        println!("{name}:\n{report}");
        assert!(report.passed(), "{name}:\n{report}");
        for (i, t) in gpu.time().iter().enumerate() {
            assert!((t - 0.1).abs() < 1e-12, "{name}: instance {i} at t = {t}");
        }
        if let Stabilization::Projection { tolerance } = options.stabilization {
            // Constraint errors of the GPU's states, measured in f64 on the enabled contacts:
            // within the tolerance plus the f32 rounding of the stored state.
            let ev = gpu.evaluate();
            let c = &ev.constraints[0];
            let enabled = gpu.enabled(ConstraintId(0)).unwrap();
            let rows = c.position_errors.len() / gpu.len();
            let worst = |values: &[f64]| {
                values
                    .chunks(rows)
                    .zip(enabled)
                    .filter(|(_, e)| **e != 0)
                    .flat_map(|(v, _)| v.iter())
                    .fold(0.0f64, |m, x| m.max(x.abs()))
            };
            let (worst_p, worst_v) = (worst(&c.position_errors), worst(&c.velocity_errors));
            println!("{name}: worst position error {worst_p:.2e}, velocity error {worst_v:.2e}");
            assert!(worst_p <= tolerance + 1e-6, "{name}: {worst_p}");
            assert!(worst_v <= tolerance + 1e-5, "{name}: {worst_v}");
        }
    }
}

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

    // Evaluating adds the output slices (the result's own size), bounded by SLICE_BYTES.
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
    let compare = |gpu: &Evaluation, batch: &Batch| {
        let mut report = Report::default();
        simbatch::golden::compare_evaluations(gpu, &batch.evaluate(), 2e-4, &mut report).unwrap();
        assert!(report.passed(), "{report}");
    };
    let radius_shared = |e: &Evaluator| {
        let layout = e.gpu_evaluator().unwrap().layout();
        layout.input(Column::Param(0, 2)).unwrap().shared
    };
    compare(&e.evaluate(&batch).unwrap(), &batch);
    assert!(radius_shared(&e));
    let r = batch.param_value(contact, "radius", 5).unwrap()[0];
    batch.set_param(contact, "radius", 5, &[1.5 * r]).unwrap();
    batch.set_mass(ball, 7, 2.5).unwrap();
    compare(&e.evaluate(&batch).unwrap(), &batch);
    assert!(!radius_shared(&e));
    batch.set_param(contact, "radius", 5, &[r]).unwrap();
    assert!(batch.share_uniform_columns() >= 1);
    compare(&e.evaluate(&batch).unwrap(), &batch);
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
