//! `simbatch bench`: throughput per backend, system, N and substeps per call, as a table and
//! as JSON. Times are medians over repeated calls (at least 3, about `--seconds` each).

use std::time::Instant;

use serde_json::json;

use super::CliError;
use crate::backend::Evaluator;
use crate::backend::Stepper;
use crate::batch::Batch;
use crate::evaluation::Evaluation;
use crate::gpu::{GpuOptions, Precision};
use crate::scenarios::{
    ContactKind, PlaneBody, contact_batch, point_to_ground_batch, rolling_balls, standing_sticks,
};
use crate::step::{Integrator, Stabilization, StepOptions};

/// Arguments of `simbatch bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Instance counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 10_000, 100_000])]
    pub n: Vec<usize>,
    /// Backends: cpu, gpu (gpu rows are skipped with a note when no adapter opens).
    #[arg(long, value_delimiter = ',', default_values_t = ["cpu".to_string(), "gpu".to_string()])]
    pub backends: Vec<String>,
    /// Steps per call for the stepping rows (on the GPU, fused in one submit).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 16])]
    pub substeps: Vec<usize>,
    /// GPU precision: f32 or f64.
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// Seconds of repeated calls per measurement.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Also write the rows as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// Median seconds per call of `f`.
fn time(mut f: impl FnMut() -> Result<(), CliError>, budget: f64) -> Result<f64, CliError> {
    let mut samples = Vec::new();
    let start = Instant::now();
    f()?; // warm-up: pipelines, buffers
    while samples.len() < 3 || (start.elapsed().as_secs_f64() < budget && samples.len() < 50) {
        let t = Instant::now();
        f()?;
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

type Build = fn(usize) -> crate::Result<Batch>;

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> Result<(), CliError> {
    let precision: Precision = args.precision.parse()?;
    // Every name is checked before any work: an unknown one is an error, not an empty table.
    for b in &args.backends {
        if !matches!(b.as_str(), "cpu" | "gpu") {
            return Err(CliError::Engine(crate::Error::BadChoice {
                what: "--backends entry",
                value: b.clone(),
                accepted: "cpu, gpu (comma-separated)",
            }));
        }
    }
    if args.backends.is_empty() {
        return Err(CliError::Engine(crate::Error::BadChoice {
            what: "--backends",
            value: String::new(),
            accepted: "cpu, gpu (comma-separated)",
        }));
    }
    if let Some(n) = args.n.iter().find(|n| **n == 0) {
        return Err(CliError::Engine(crate::Error::BadChoice {
            what: "--n entry",
            value: n.to_string(),
            accepted: "instance counts ≥ 1 (comma-separated)",
        }));
    }
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(CliError::Engine(crate::Error::BadChoice {
            what: "--seconds",
            value: args.seconds.to_string(),
            accepted: "a number in (0, 3600]",
        }));
    }
    let device = if args.backends.iter().any(|b| b == "gpu") {
        // The one resolver: an explicit GPU, noted when it is a software adapter.
        match crate::backend::resolve(crate::backend::Backend::Gpu, precision) {
            Ok(r) => {
                println!("{}", r.describe());
                r.device
            }
            Err(e) => {
                println!("GPU rows skipped: {e}");
                None
            }
        }
    } else {
        None
    };
    println!("CPU: {} threads (rayon)", rayon::current_num_threads());
    let evaluated: [(&str, Build); 4] = [
        ("rolling sphere", |n| {
            Ok(contact_batch(ContactKind::RollingSphere, PlaneBody::Ground, n, 1)?.0)
        }),
        ("sliding sphere", |n| {
            Ok(contact_batch(ContactKind::SlidingSphere, PlaneBody::Ground, n, 1)?.0)
        }),
        ("point on plane", |n| {
            Ok(contact_batch(ContactKind::Point, PlaneBody::Ground, n, 1)?.0)
        }),
        ("point to ground (3 normals)", |n| {
            Ok(point_to_ground_batch(n, 1, 3, false, false)?.0)
        }),
    ];
    let stepped: [(&str, Build); 2] = [
        ("rolling ball", rolling_balls),
        ("no-slip stick", standing_sticks),
    ];
    let options = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let mut rows = Vec::new();
    println!(
        "{:<28} {:>8} {:<10} {:>9} {:>16} {:>14}",
        "system", "N", "backend", "substeps", "per second", "what"
    );
    let mut report = |system: &str,
                      n: usize,
                      backend: &str,
                      substeps: usize,
                      rate: f64,
                      what: &str| {
        println!("{system:<28} {n:>8} {backend:<10} {substeps:>9} {rate:>16.0} {what:>14}");
        rows.push(json!({ "system": system, "n": n, "backend": backend, "substeps": substeps, "per_second": rate, "what": what }));
    };
    let gpu_name = format!("gpu-{}", args.precision);
    for &n in &args.n {
        for (system, build) in evaluated {
            let batch = build(n)?;
            let mut out = Evaluation::default();
            if args.backends.iter().any(|b| b == "cpu") {
                let mut e = Evaluator::new(crate::backend::Backend::Cpu)?;
                let s = time(|| Ok(e.evaluate_into(&batch, &mut out)?), args.seconds)?;
                report(system, n, "cpu", 1, n as f64 / s, "evaluations");
            }
            if let Some(d) = &device {
                let mut e = Evaluator::on_device(d.clone(), precision, GpuOptions::default())?;
                let s = time(|| Ok(e.evaluate_into(&batch, &mut out)?), args.seconds)?;
                report(system, n, &gpu_name, 1, n as f64 / s, "evaluations");
            }
        }
        for (system, build) in stepped {
            let mut batch = build(n)?;
            for &k in &args.substeps {
                if args.backends.iter().any(|b| b == "cpu") {
                    let mut stepper = Stepper::new(options)?;
                    let s = time(
                        || Ok(stepper.step(&mut batch, k).map(|_| ())?),
                        args.seconds,
                    )?;
                    report(system, n, "cpu", k, (n * k) as f64 / s, "steps");
                }
                if let Some(d) = &device {
                    let mut stepper = Stepper::on_gpu(options, d.clone(), precision)?;
                    let s = time(
                        || Ok(stepper.step(&mut batch, k).map(|_| ())?),
                        args.seconds,
                    )?;
                    report(system, n, &gpu_name, k, (n * k) as f64 / s, "steps");
                }
            }
        }
    }
    if let Some(path) = &args.json {
        let doc = json!({
            "simbatch": env!("CARGO_PKG_VERSION"),
            "cpu_threads": rayon::current_num_threads(),
            "gpu": device.as_ref().map(|d| d.describe()),
            "integrator": "RK4 h = 1e-3, no stabilization",
            "rows": rows,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| CliError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        std::fs::write(path, text).map_err(|source| CliError::Io {
            path: path.display().to_string(),
            source,
        })?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
