//! Environment-steps per second of the built-in RL environments through the Rust API (random
//! actions, autoresets included), the baseline for the Python figures of
//! `python/examples/bench.py`.
//!
//! `cargo run --release --example env_throughput -- [--n 1000,10000,100000] [--steps 50]
//! [--backend cpu|gpu] [--tasks BallOnPlate-v0,BrickPush-v0]` (default: every task)

use std::time::Instant;

use simbatch::backend::Backend;
use simbatch::env::{EnvOptions, StepOut, TASK_NAMES, VectorEnv, make_task};
use simbatch::gpu::Precision;
use simbatch::scenarios::Rng;

fn main() -> simbatch::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|k| args.get(k + 1))
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let sizes: Vec<usize> = arg("--n", "1000,10000,100000")
        .split(',')
        .map(|s| s.parse().expect("--n: integers separated by commas"))
        .collect();
    let steps: usize = arg("--steps", "50").parse().expect("--steps: an integer");
    let tasks = arg("--tasks", &TASK_NAMES.join(","));
    let tasks: Vec<&str> = tasks.split(',').collect();
    if let Some(unknown) = tasks.iter().find(|t| !TASK_NAMES.contains(t)) {
        panic!(
            "--tasks: unknown task {unknown}; accepted: {}",
            TASK_NAMES.join(", ")
        );
    }
    let backend = match arg("--backend", "cpu").as_str() {
        "gpu" => Backend::Gpu,
        _ => Backend::Cpu,
    };
    println!("| environment | N | backend | env-steps/s |");
    println!("|---|---|---|---|");
    for name in tasks {
        for &n in &sizes {
            let options = EnvOptions {
                backend,
                precision: Precision::F32,
                ..EnvOptions::default()
            };
            let mut env = VectorEnv::new(make_task(name, &[])?, n, options)?;
            let (od, ad) = (env.spec().observation.dim(), env.spec().action.dim());
            let mut obs = vec![0.0; n * od];
            env.reset(Some(0), None, &mut obs)?;
            let (mut reward, mut terminated, mut truncated) =
                (vec![0.0; n], vec![false; n], vec![false; n]);
            let mut rng = Rng::for_instance(1, 0);
            let mut actions = vec![0.0f32; n * ad];
            let mut run = |env: &mut VectorEnv, count: usize| -> simbatch::Result<f64> {
                let start = Instant::now();
                for _ in 0..count {
                    for a in actions.iter_mut() {
                        *a = rng.uniform(-1.0, 1.0) as f32;
                    }
                    env.step(
                        &actions,
                        StepOut {
                            obs: &mut obs,
                            reward: &mut reward,
                            terminated: &mut terminated,
                            truncated: &mut truncated,
                            final_obs: None,
                            flags: None,
                        },
                    )?;
                }
                Ok(start.elapsed().as_secs_f64())
            };
            run(&mut env, 2)?; // warm up (kernel compilation on the GPU)
            let seconds = run(&mut env, steps)?;
            println!(
                "| {name} | {n} | {:?} | {:.3e} |",
                env.backend(),
                (n * steps) as f64 / seconds
            );
        }
    }
    Ok(())
}
