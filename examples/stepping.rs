//! Instance-steps per second: a rolling ball on a plane (the system of MuJoCo's reference figure,
//! dt = 1 ms) and a no-slip point (a stick standing on its tip), with semi-implicit Euler and
//! RK4, on the CPU (1 thread, all threads) and the GPU (f32; several substeps per call, the
//! state read back once per call).
//!
//! `cargo run --release --example stepping -- [--max-n 1000000] [--cpu-steps 100] [--cpu-only]`

use std::sync::Arc;
use std::time::Instant;

use simbatch::prelude::*;
use simbatch::scenarios::{rolling_balls, standing_sticks};

/// A system to benchmark: its name and how to build N instances of it.
type System = (&'static str, fn(usize) -> simbatch::Result<Batch>);

fn rate(n: usize, steps: usize, seconds: f64) -> f64 {
    (n * steps) as f64 / seconds
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|k| args.get(k + 1))
            .map_or(default, |s| s.parse().expect("integer"))
    };
    let (max_n, cpu_steps) = (arg("--max-n", 100_000), arg("--cpu-steps", 100));
    let cpu_only = args.iter().any(|a| a == "--cpu-only");
    let device = if cpu_only {
        None
    } else {
        GpuDevice::new().ok().map(Arc::new)
    };
    match &device {
        Some(d) => println!("GPU: {}", d.describe()),
        None => println!("no GPU: CPU only"),
    }
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    println!("| system | integrator | N | backend | substeps per call | instance-steps/s |");
    println!("|---|---|---|---|---|---|");
    let systems: [System; 2] = [
        ("rolling ball", rolling_balls),
        ("no-slip stick", standing_sticks),
    ];
    for (name, make) in systems {
        for (iname, integrator) in [
            (
                "semi-implicit Euler",
                Integrator::SemiImplicitEuler { step: 1e-3 },
            ),
            ("RK4", Integrator::Rk4 { step: 1e-3 }),
        ] {
            let options = StepOptions {
                integrator,
                stabilization: Stabilization::None,
            };
            for n in [1_000, 10_000, 100_000, 1_000_000]
                .into_iter()
                .filter(|n| *n <= max_n)
            {
                // The CPU at one size only: its rate does not depend on N.
                if n == 1_000.max(max_n.min(10_000)) {
                    for (threads, pool) in [(1, Some(&one)), (rayon::current_num_threads(), None)] {
                        let mut batch = make(n).expect("batch");
                        let mut stepper = Stepper::new(options).expect("options");
                        let start = Instant::now();
                        match pool {
                            Some(p) => p.install(|| stepper.step(&mut batch, cpu_steps)),
                            None => stepper.step(&mut batch, cpu_steps),
                        }
                        .expect("step");
                        let r = rate(n, cpu_steps, start.elapsed().as_secs_f64());
                        println!(
                            "| {name} | {iname} | {n} | CPU f64, {threads} threads | — | {r:.3e} |"
                        );
                    }
                }
                let Some(device) = &device else { continue };
                let mut batch = make(n).expect("batch");
                let mut gpu =
                    Stepper::on_gpu(options, device.clone(), Precision::F32).expect("kernel");
                gpu.step(&mut batch, 1).expect("warm-up");
                for substeps in [16, 256, 1024] {
                    let start = Instant::now();
                    gpu.step(&mut batch, substeps).expect("step");
                    let r = rate(n, substeps, start.elapsed().as_secs_f64());
                    println!("| {name} | {iname} | {n} | GPU f32 | {substeps} | {r:.3e} |");
                }
            }
        }
    }
}
