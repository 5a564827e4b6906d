//! `simbatch check`: conformance against a directory of golden files (the format of Simbody's
//! golden output: `*.jsonl` evaluation records, trajectory records), and CPU-vs-GPU parity on
//! the same batches. Prints the worst error per quantity; fails when a bound is exceeded.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::CliError;
use crate::backend::Stepper;
use crate::golden::{self, Record, Report};
use crate::gpu::{GpuDevice, GpuEvaluator, GpuOptions, Precision};
use crate::step::{Integrator, Stabilization, StepOptions};

/// Arguments of `simbatch check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Directory of golden files (`*.jsonl`, Simbody's format); without it, the golden files
    /// shipped inside the binary (the repository's `tests/data/golden`).
    pub dir: Option<PathBuf>,
    /// CPU bound on evaluation records (relative to max(1, |x|)).
    #[arg(long, default_value_t = 1e-9)]
    pub tol: f64,
    /// CPU bound on trajectory samples (RK4, h = 5e-4).
    #[arg(long, default_value_t = 1e-7)]
    pub trajectory_tol: f64,
    /// GPU parity: none, or any adapter (`gpu`), f32 within 2e-4 of the CPU and f64 (where
    /// offered) within 1e-9.
    #[arg(long, default_value = "gpu")]
    pub parity: String,
}

/// The golden files shipped inside the binary, so `simbatch check` works from any directory.
pub const EMBEDDED: [(&str, &str); 6] = [
    (
        "brick_on_corners.jsonl",
        include_str!("../../tests/data/golden/brick_on_corners.jsonl"),
    ),
    (
        "point_on_plane.jsonl",
        include_str!("../../tests/data/golden/point_on_plane.jsonl"),
    ),
    (
        "sphere_on_plane.jsonl",
        include_str!("../../tests/data/golden/sphere_on_plane.jsonl"),
    ),
    (
        "tilt_plate.jsonl",
        include_str!("../../tests/data/golden/tilt_plate.jsonl"),
    ),
    (
        "tilt_trajectories.jsonl",
        include_str!("../../tests/data/golden/tilt_trajectories.jsonl"),
    ),
    (
        "trajectories.jsonl",
        include_str!("../../tests/data/golden/trajectories.jsonl"),
    ),
];

/// Reads the records: from `dir`, or the embedded files.
fn records_of(dir: Option<&std::path::Path>) -> Result<(Vec<Record>, String), CliError> {
    match dir {
        None => {
            let mut records = Vec::new();
            for (name, text) in EMBEDDED {
                records.extend(golden::parse_jsonl(&format!("<embedded>/{name}"), text)?);
            }
            Ok((records, "the embedded golden files".into()))
        }
        Some(d) => {
            if !d.is_dir() {
                return Err(CliError::Check(format!(
                    "{}: not a directory of golden files (*.jsonl); run `simbatch check` \
                     without a directory to use the golden files shipped in the binary",
                    d.display()
                )));
            }
            let records = golden::read_dir(d)?;
            if records.is_empty() {
                return Err(CliError::Check(format!(
                    "{}: no *.jsonl golden records found",
                    d.display()
                )));
            }
            Ok((records, d.display().to_string()))
        }
    }
}

/// Runs the check.
pub fn run(args: &CheckArgs) -> Result<(), CliError> {
    if !matches!(args.parity.as_str(), "gpu" | "none") {
        return Err(CliError::Check(format!(
            "--parity {:?}; accepted: gpu, none",
            args.parity
        )));
    }
    for (name, value) in [
        ("--tol", args.tol),
        ("--trajectory-tol", args.trajectory_tol),
    ] {
        if !(value.is_finite() && value > 0.0) {
            return Err(CliError::Check(format!(
                "{name} {value}; accepted: a finite number > 0"
            )));
        }
    }
    let (records, source) = records_of(args.dir.as_deref())?;
    let mut failures = Vec::new();
    let cpu = golden::check_records_cpu(&records, args.tol)?;
    println!("CPU f64 against {source} (bound {:e}):\n{cpu}", args.tol);
    if !cpu.passed() {
        failures.push("CPU evaluation records".to_string());
    }
    let trajectories: Vec<Record> = records
        .iter()
        .filter(|r| r.kind().ok() == Some("trajectory"))
        .cloned()
        .collect();
    if !trajectories.is_empty() {
        let options = StepOptions {
            integrator: Integrator::Rk4 { step: 5e-4 },
            stabilization: Stabilization::None,
        };
        let report = golden::check_trajectories(
            &trajectories,
            || Stepper::new(options),
            args.trajectory_tol,
        )?;
        println!(
            "CPU f64 trajectories, RK4 h = 5e-4 (bound {:e}):\n{report}",
            args.trajectory_tol
        );
        if !report.passed() {
            failures.push("CPU trajectories".into());
        }
    }
    match args.parity.as_str() {
        "none" => {}
        "gpu" => match GpuDevice::new() {
            Err(e) => {
                println!("GPU parity not run: {e}");
            }
            Ok(d) => {
                let d = Arc::new(d);
                println!("GPU: {}", d.describe());
                let mut precisions = vec![(Precision::F32, 2e-4)];
                if d.supports_f64 {
                    precisions.push((Precision::F64, 1e-9));
                }
                let mut groups: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
                for r in &records {
                    if matches!(r.kind()?, "sphere_on_plane" | "point_on_plane") {
                        groups.entry(golden::group_key(r)?).or_default().push(r);
                    }
                }
                for (precision, tol) in precisions {
                    let mut report = Report::default();
                    for group in groups.values() {
                        let (batch, _) = golden::contact_batch(group)?;
                        let mut gpu =
                            GpuEvaluator::new(d.clone(), &batch, precision, GpuOptions::default())?;
                        let ev = gpu.evaluate(&batch)?;
                        golden::compare_evaluations(&ev, &batch.evaluate(), tol, &mut report)?;
                    }
                    println!("GPU {precision:?} against the CPU (bound {tol:e}):\n{report}");
                    if !report.passed() {
                        failures.push(format!("GPU {precision:?} parity"));
                    }
                }
            }
        },
        other => {
            return Err(CliError::Check(format!(
                "--parity {other:?}; accepted: gpu, none"
            )));
        }
    }
    if failures.is_empty() {
        println!("check passed");
        Ok(())
    } else {
        Err(CliError::Check(failures.join(", ")))
    }
}
