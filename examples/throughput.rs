//! Throughput table: instance-evaluations per second on the CPU (1 thread, all threads, f64) and
//! the GPU (f32 kernel alone, with readback, with upload and readback; f64 with readback where
//! the adapter offers it), for several N, with the GPU-vs-CPU ratios.
//!
//! `cargo run --release --example throughput -- [--max-n 1000000] [--json out.json]`

use std::sync::Arc;
use std::time::Instant;

use simbatch::gpu::{GpuDevice, GpuEvaluator, GpuOptions, Precision};
use simbatch::prelude::Batch;
use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};

/// Median seconds per call of `f`, over at least 3 calls and about `budget` seconds.
fn time(mut f: impl FnMut(), budget: f64) -> f64 {
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 3 || (start.elapsed().as_secs_f64() < budget && samples.len() < 50) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

struct Row {
    system: &'static str,
    n: usize,
    mode: String,
    seconds: f64,
}

fn measure(
    system: &'static str,
    batch: &Batch,
    device: Option<&Arc<GpuDevice>>,
    rows: &mut Vec<Row>,
) {
    let n = batch.len();
    let budget = 1.0;
    let mut push = |mode: &str, seconds: f64| {
        println!(
            "  {system:<28} N={n:<8} {mode:<34} {:>12.0} /s",
            n as f64 / seconds
        );
        rows.push(Row {
            system,
            n,
            mode: mode.to_string(),
            seconds,
        })
    };
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    push(
        "cpu f64, 1 thread",
        time(|| drop(one.install(|| batch.evaluate())), budget),
    );
    push(
        &format!("cpu f64, {} threads", rayon::current_num_threads()),
        time(|| drop(batch.evaluate()), budget),
    );
    let Some(device) = device else { return };
    let mut gpu = GpuEvaluator::new(device.clone(), batch, Precision::F32, GpuOptions::default())
        .expect("kernel");
    gpu.evaluate(batch).expect("warm-up");
    push(
        "gpu f32, kernel only",
        time(|| gpu.dispatch(batch).expect("dispatch"), budget),
    );
    let mut out = simbatch::evaluation::Evaluation::default();
    push(
        "gpu f32, kernel + readback",
        time(
            || gpu.evaluate_into(batch, &mut out).expect("evaluate"),
            budget,
        ),
    );
    push(
        "gpu f32, upload + kernel + readback",
        time(
            || {
                gpu.invalidate();
                gpu.evaluate_into(batch, &mut out).expect("evaluate")
            },
            budget,
        ),
    );
    if device.supports_f64 {
        let mut gpu64 =
            GpuEvaluator::new(device.clone(), batch, Precision::F64, GpuOptions::default())
                .expect("kernel");
        gpu64.evaluate(batch).expect("warm-up");
        push(
            "gpu f64, kernel only",
            time(|| gpu64.dispatch(batch).expect("dispatch"), budget),
        );
        push(
            "gpu f64, kernel + readback",
            time(
                || gpu64.evaluate_into(batch, &mut out).expect("evaluate"),
                budget,
            ),
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|k| args.get(k + 1))
            .cloned()
    };
    let max_n: usize =
        arg("--max-n").map_or(1_000_000, |s| s.parse().expect("--max-n takes an integer"));
    let device = match GpuDevice::new() {
        Ok(d) => {
            println!("GPU: {}", d.describe());
            Some(Arc::new(d))
        }
        Err(e) => {
            println!("no GPU ({e}); CPU only");
            None
        }
    };
    println!("CPU threads: {}", rayon::current_num_threads());
    let mut rows = Vec::new();
    let systems: [(&str, ContactKind, PlaneBody); 2] = [
        (
            "rolling sphere on ground",
            ContactKind::RollingSphere,
            PlaneBody::Ground,
        ),
        (
            "point on free plane body",
            ContactKind::Point,
            PlaneBody::Free,
        ),
    ];
    for n in [1_000, 10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|n| *n <= max_n)
    {
        for (name, kind, plane) in systems {
            let (batch, _, _) = contact_batch(kind, plane, n, 7).expect("batch");
            measure(name, &batch, device.as_ref(), &mut rows);
        }
    }
    println!("\n| system | N | mode | instance-evaluations/s | vs CPU 1 thread |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        let base = rows
            .iter()
            .find(|b| b.system == r.system && b.n == r.n && b.mode == "cpu f64, 1 thread")
            .map_or(r.seconds, |b| b.seconds);
        println!(
            "| {} | {} | {} | {:.3e} | {:.1}× |",
            r.system,
            r.n,
            r.mode,
            r.n as f64 / r.seconds,
            base / r.seconds
        );
    }
    if let Some(path) = arg("--json") {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"system\":\"{}\",\"n\":{},\"mode\":\"{}\",\"seconds\":{},\"per_second\":{}}}",
                    r.system,
                    r.n,
                    r.mode,
                    r.seconds,
                    r.n as f64 / r.seconds
                )
            })
            .collect();
        std::fs::write(&path, format!("[{}]\n", items.join(",\n"))).expect("write json");
        println!("wrote {path}");
    }
}
