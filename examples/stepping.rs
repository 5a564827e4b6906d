//! Instance-steps per second of the CPU stepper: one rolling ball on a plane (the system MuJoCo's
//! reference figure uses, dt = 1 ms) with semi-implicit Euler and RK4, on one thread and on all.
//!
//! `cargo run --release --example stepping -- [--n 10000] [--steps 200]`

use std::time::Instant;

use simbatch::prelude::*;

fn balls(n: usize) -> Batch {
    let (m, r) = (1.0, 0.1);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(r))
        .expect("template");
    let mut b = Batch::new(t, n).expect("batch");
    let k = 0.4 * m * r * r;
    for i in 0..n {
        let v = 0.5 + (i % 7) as f64 * 0.1;
        b.set_mass_properties(ball, i, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0]).expect("mass");
        b.set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, r]).expect("q");
        // Rolling along x: w = (n × v) / r.
        b.set_u(ball, i, [0.0, v / r, 0.0, v, 0.0, 0.0]).expect("u");
    }
    b
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|k| args.get(k + 1))
            .map_or(default, |s| s.parse().expect("integer"))
    };
    let (n, steps) = (arg("--n", 10_000), arg("--steps", 200));
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool");
    println!("| integrator | threads | instance-steps/s |");
    println!("|---|---|---|");
    for (name, integrator) in [
        ("semi-implicit Euler", Integrator::SemiImplicitEuler { step: 1e-3 }),
        ("RK4", Integrator::Rk4 { step: 1e-3 }),
    ] {
        let options = StepOptions {
            integrator,
            stabilization: Stabilization::None,
        };
        for (threads, pool) in [(1, Some(&one)), (rayon::current_num_threads(), None)] {
            let mut batch = balls(n);
            let mut stepper = Stepper::new(options).expect("options");
            let start = Instant::now();
            match pool {
                Some(p) => p.install(|| stepper.step(&mut batch, steps)),
                None => stepper.step(&mut batch, steps),
            }
            .expect("step");
            let rate = (n * steps) as f64 / start.elapsed().as_secs_f64();
            println!("| {name} | {threads} | {rate:.3e} |");
        }
    }
}
