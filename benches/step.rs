//! Instance-steps per second: a rolling ball (MuJoCo's reference system, dt = 1 ms) and a no-slip
//! stick standing on its tip, with semi-implicit Euler, RK4, and RK4 with Simbody's projection at
//! 1e-6 (the `simbatch bench` rows `euler`, `rk4`, `rk4-projection`); CPU (1 thread, all threads) and
//! GPU f32 for several substeps per call (the state read back once per call), N = 1e3 … 1e6.
//!
//! `cargo bench --bench step` (set `SIMBATCH_BENCH_MAX_N` to cap N, e.g. 100000 on a laptop).
//! Criterion reports time per call; instance-steps/s = N × substeps / time, printed as
//! throughput. The one-thread CPU rows stop at N = 1e4: their rate does not depend on N.

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use simbatch::prelude::*;
use simbatch::scenarios::{rolling_balls, standing_sticks};

fn sizes() -> Vec<usize> {
    let max: usize = std::env::var("SIMBATCH_BENCH_MAX_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    [1_000, 10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|n| *n <= max)
        .collect()
}

/// Steps per CPU call: enough to dwarf the per-call cost, few enough for N = 1e6.
const CPU_STEPS: usize = 10;

fn step(c: &mut Criterion) {
    let device = GpuDevice::new().ok().map(Arc::new);
    if device.is_none() {
        eprintln!("no GPU adapter: GPU benchmarks skipped");
    }
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("thread pool");
    type Make = fn(usize) -> simbatch::Result<Batch>;
    let systems: [(&str, Make); 2] = [
        ("rolling_ball", rolling_balls),
        ("no_slip_stick", standing_sticks),
    ];
    let (euler, rk4) = (
        Integrator::SemiImplicitEuler { step: 1e-3 },
        Integrator::Rk4 { step: 1e-3 },
    );
    let projection = Stabilization::Projection { tolerance: 1e-6 };
    let integrators = [
        ("euler", euler, Stabilization::None),
        ("rk4", rk4, Stabilization::None),
        ("rk4_projection", rk4, projection),
    ];
    for (system, make) in systems {
        for (iname, integrator, stabilization) in integrators {
            let options = StepOptions {
                integrator,
                stabilization,
            };
            let mut group = c.benchmark_group(format!("step/{system}/{iname}"));
            group.sample_size(10);
            for n in sizes() {
                let base = make(n).expect("batch");
                group.throughput(Throughput::Elements((n * CPU_STEPS) as u64));
                if n <= 10_000 {
                    let mut batch = base.clone();
                    let mut stepper = Stepper::new(options).expect("options");
                    // The whole loop on the pool's thread: a wake-up per call would be timed too.
                    group.bench_function(BenchmarkId::new("cpu_1_thread", n), |b| {
                        one_thread.install(|| {
                            b.iter(|| stepper.step(&mut batch, CPU_STEPS).expect("step"))
                        })
                    });
                }
                let mut batch = base.clone();
                let mut stepper = Stepper::new(options).expect("options");
                group.bench_function(BenchmarkId::new("cpu_all_threads", n), |b| {
                    b.iter(|| stepper.step(&mut batch, CPU_STEPS).expect("step"))
                });
                let Some(device) = &device else { continue };
                let mut batch = base.clone();
                let mut stepper =
                    Stepper::on_gpu(options, device.clone(), Precision::F32).expect("kernel");
                stepper.step(&mut batch, 1).expect("warm-up");
                for substeps in [16, 256, 1024] {
                    group.throughput(Throughput::Elements((n * substeps) as u64));
                    group.bench_function(
                        BenchmarkId::new(format!("gpu_f32_{substeps}_substeps"), n),
                        |b| b.iter(|| stepper.step(&mut batch, substeps).expect("step")),
                    );
                }
            }
            group.finish();
        }
    }
}

criterion_group!(benches, step);
criterion_main!(benches);
