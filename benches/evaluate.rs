//! Instance-evaluations per second: CPU (1 thread, all threads; every output, and u̇ and λ alone,
//! as `simbatch bench`'s `evaluations` and `evaluations (udot, lambda)` rows, into a result
//! reused across calls) and GPU (kernel only, kernel + readback of every output or of u̇ and λ,
//! upload + kernel + readback), for N = 1e3 … 1e6 rolling spheres on Ground.
//!
//! `cargo bench --bench evaluate` (set `SIMBATCH_BENCH_MAX_N` to cap N, e.g. 100000 on a laptop).
//! Criterion reports time per call; instance-evaluations/s = N / time, printed as throughput.

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use simbatch::evaluation::{Evaluation, Outputs};
use simbatch::gpu::{GpuDevice, GpuEvaluator, GpuOptions, Precision};
use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};

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

fn evaluate(c: &mut Criterion) {
    let device = GpuDevice::new().ok().map(Arc::new);
    if device.is_none() {
        eprintln!("no GPU adapter: GPU benchmarks skipped");
    }
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("thread pool");
    let mut group = c.benchmark_group("evaluate/rolling_sphere");
    group.sample_size(10);
    for n in sizes() {
        let (batch, _, _) =
            contact_batch(ContactKind::RollingSphere, PlaneBody::Ground, n, 1).expect("batch");
        group.throughput(Throughput::Elements(n as u64));
        let mut out = Evaluation::default();
        for (outputs, what) in [(Outputs::ALL, ""), (Outputs::DYNAMICS, "_udot_lambda")] {
            group.bench_with_input(
                BenchmarkId::new(format!("cpu_1_thread{what}"), n),
                &batch,
                // The whole loop on the pool's thread: a wake-up per call would be timed too.
                |b, batch| {
                    one_thread.install(|| b.iter(|| batch.evaluate_outputs_into(outputs, &mut out)))
                },
            );
            group.bench_with_input(
                BenchmarkId::new(format!("cpu_all_threads{what}"), n),
                &batch,
                |b, batch| b.iter(|| batch.evaluate_outputs_into(outputs, &mut out)),
            );
        }
        if let Some(device) = &device {
            let mut gpu = GpuEvaluator::new(
                device.clone(),
                &batch,
                Precision::F32,
                GpuOptions::default(),
            )
            .expect("kernel");
            gpu.evaluate(&batch).expect("warm-up");
            group.bench_with_input(BenchmarkId::new("gpu_f32_kernel", n), &batch, |b, batch| {
                b.iter(|| gpu.dispatch(batch).expect("dispatch"))
            });
            for (outputs, what) in [(Outputs::ALL, ""), (Outputs::DYNAMICS, "_udot_lambda")] {
                group.bench_with_input(
                    BenchmarkId::new(format!("gpu_f32_kernel_readback{what}"), n),
                    &batch,
                    |b, batch| {
                        b.iter(|| {
                            gpu.evaluate_outputs_into(batch, outputs, &mut out)
                                .expect("evaluate")
                        })
                    },
                );
            }
            group.bench_with_input(
                BenchmarkId::new("gpu_f32_upload_kernel_readback", n),
                &batch,
                |b, batch| {
                    b.iter(|| {
                        gpu.invalidate();
                        gpu.evaluate(batch).expect("evaluate")
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, evaluate);
criterion_main!(benches);
