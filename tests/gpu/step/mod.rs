//! Fused GPU stepping against the CPU stepper: the same integrator from the same assembled
//! states, 10 000 random instances per system. f64 kernels agree with the CPU to 1e-9; f32
//! kernels within the bound below, measured on lavapipe and an H100 and documented in the
//! README. With `CI=true` and no adapter these tests fail.
//!
//! The f64 comparisons run wherever the adapter offers SHADER_F64, lavapipe included (its f64
//! stepping kernels compile in about a second since the stages share one call of the dynamics;
//! they once took minutes). They caught what f32 cannot: Vulkan has no f64 sin, cos or pow, so
//! the f64 kernels carry their own (`shaders/trig_f64.wgsl`).
//!
//! The tests: `trajectories` (against the CPU and Simbody), `control` (flags, per-instance
//! state and carry, kernel rebuilds, workgroup sizes) and `folding` (shared parameters held as
//! constants in the kernels).

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

/// Evaluates `batch` on `e` and holds it to the CPU's evaluation (the GPU evaluation tests'
/// f32 bound).
fn evaluates_as_the_cpu(e: &mut Evaluator, batch: &Batch, what: &str) {
    let gpu = e.evaluate(batch).unwrap();
    let mut report = Report::default();
    simbatch::golden::compare_evaluations(&gpu, &batch.evaluate(), 2e-4, &mut report).unwrap();
    assert!(report.passed(), "{what}:\n{report}");
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

mod control;
mod folding;
mod trajectories;
