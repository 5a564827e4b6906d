//! Instance-evaluations per second: CPU (1 thread, all threads) and GPU (kernel only, kernel +
//! readback, upload + kernel + readback), for N = 1e3 … 1e6 rolling spheres on Ground.
//!
//! `cargo bench --bench evaluate` (set `SIMBATCH_BENCH_MAX_N` to cap N, e.g. 100000 on a laptop).
//! Criterion reports time per call; instance-evaluations/s = N / time, printed as throughput.

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
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
        group.bench_with_input(BenchmarkId::new("cpu_1_thread", n), &batch, |b, batch| {
            b.iter(|| one_thread.install(|| batch.evaluate()))
        });
        group.bench_with_input(
            BenchmarkId::new("cpu_all_threads", n),
            &batch,
            |b, batch| b.iter(|| batch.evaluate()),
        );
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
            group.bench_with_input(
                BenchmarkId::new("gpu_f32_kernel_readback", n),
                &batch,
                |b, batch| b.iter(|| gpu.evaluate(batch).expect("evaluate")),
            );
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
