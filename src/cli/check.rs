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
    /// GPU parity: none, or any adapter (`gpu`): evaluation f32 within 2e-4 of the CPU and f64
    /// (where offered) within 1e-9; the stepping kernel on Simbody's trajectories (RK4,
    /// h = 5e-4), f32 within 5e-3 and f64 within the trajectory bound; unilateral contact's
    /// event kernel on bouncing balls, f32 within 1e-3 and f64 within 1e-9.
    #[arg(long, default_value = "gpu")]
    pub parity: String,
}

/// Bound of the GPU's f32 RK4 trajectories (h = 5e-4, 2 s) against Simbody's, relative to
/// max(1, |x|): 4 000 steps of f32 rounding. The energy is the loosest quantity (1.4e-3 seen
/// on lavapipe, the states 1e-4 and below), being a sum of kinetic and potential terms each
/// rounded at their own, larger, scale.
pub const GPU_F32_TRAJECTORY_TOL: f64 = 5e-3;

/// The golden trajectories (`trajectories`, Simbody's) stepped on `device`'s stepping kernel in
/// `precision` with the integrator `check` uses on the CPU (RK4, h = 5e-4, no drift control),
/// compared within `tol`.
pub fn gpu_trajectory_parity(
    device: &Arc<GpuDevice>,
    precision: Precision,
    trajectories: &[Record],
    tol: f64,
) -> Result<Report, CliError> {
    Ok(golden::check_trajectories(
        trajectories,
        || Stepper::on_gpu(TRAJECTORY_OPTIONS, device.clone(), precision),
        tol,
    )?)
}

/// The integrator of the trajectory checks, CPU and GPU.
const TRAJECTORY_OPTIONS: StepOptions = StepOptions {
    integrator: Integrator::Rk4 { step: 5e-4 },
    stabilization: Stabilization::None,
};

/// Bound of the f64 event kernel against the CPU's event path (relative to max(1, |x|)): the
/// same algorithm, so rounding alone (1.2e-14 seen on lavapipe).
pub const UNILATERAL_F64_TOL: f64 = 1e-9;

/// Bound of the f32 event kernel against the CPU's f64 event path over
/// [`unilateral_parity`]'s 0.8 s: f32's event times (to its `t_tol` of 1e-6 s and its rounding)
/// move each bounce a little, and the states after it with it (2.1e-4 seen on lavapipe). Its
/// impact counts are compared within 25 %: f32's Zeno capture ends a ball's bounces a few
/// earlier, when their apex is below what f32 resolves of the height (README "On the GPU").
pub const UNILATERAL_F32_TOL: f64 = 1e-3;

/// `n` bouncing balls (`scenarios::bouncing_balls`: dropped, thrown and spun; by 0.8 s about
/// 60 % are still bouncing and the rest roll, their slip stopped by their impacts' friction;
/// `tests/gpu/events.rs` covers continuous sliding) stepped 0.8 s
/// with unilateral contact on the CPU's event path and on `device`'s event kernel in
/// `precision`: positions, velocities, time, work and the contact's losses compared within
/// `tol`, its mode and status exactly, its impacts exactly in f64 and within 25 % in f32
/// (instances the GPU failed or flagged where the CPU did not count as failures).
pub fn unilateral_parity(
    device: &Arc<GpuDevice>,
    precision: Precision,
    n: usize,
    tol: f64,
) -> Result<Report, CliError> {
    use crate::contact::{EventOptions, UnilateralContact};
    let (mut cpu, contact, coefficients) = crate::scenarios::bouncing_balls(n)?;
    let mut gpu = cpu.clone();
    let options = EventOptions::default();
    let duration = 0.8;
    let contacts = |i: usize| {
        vec![UnilateralContact {
            constraint: contact,
            coefficients: coefficients[i],
        }]
    };
    let cpu_runs = crate::cpu::unilateral::run_batch(&mut cpu, &contacts, duration, &options)?;
    let mut stepper = crate::gpu::events::GpuEventStepper::new(
        device.clone(),
        &gpu,
        contact,
        precision,
        GpuOptions::default(),
    )?;
    let gpu_runs = stepper.run(&mut gpu, &coefficients, duration, &options, &vec![None; n])?;
    let ball = crate::model::BodyId::new(1);
    let mut report = Report::default();
    for i in 0..n {
        report.records += 1;
        let at = || format!("ball {i}");
        let (Some(c), Some(g)) = (&cpu_runs[i], &gpu_runs[i]) else {
            let agree = cpu_runs[i].is_none() && gpu_runs[i].is_none();
            report.check(
                "run ended (1: on both paths)",
                at,
                f64::from(u8::from(agree)),
                1.0,
                0.0,
            );
            continue;
        };
        let (c, g) = (c.contacts[0], g.contact);
        let code = |m: crate::contact::ContactMode| f64::from(m.code().0);
        report.check("mode", at, code(g.mode), code(c.mode), 0.0);
        let counts = match precision {
            Precision::F64 => 0.0,
            Precision::F32 => 0.25,
        };
        report.check(
            "impacts",
            at,
            f64::from(g.impacts),
            f64::from(c.impacts),
            counts,
        );
        report.check(
            "status",
            at,
            f64::from(gpu.status()[i]),
            f64::from(cpu.status()[i]),
            0.0,
        );
        report.check("impact loss", at, g.impact_loss, c.impact_loss, tol);
        report.check("friction loss", at, g.friction_loss, c.friction_loss, tol);
        report.check("time", at, gpu.time()[i], cpu.time()[i], tol);
        let pairs = [
            ("q", gpu.q(ball)?[i].to_vec(), cpu.q(ball)?[i].to_vec()),
            ("u", gpu.u(ball)?[i].to_vec(), cpu.u(ball)?[i].to_vec()),
            ("work", gpu.work()[i].to_vec(), cpu.work()[i].to_vec()),
        ];
        for (what, a, b) in pairs {
            for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                report.check(what, || format!("ball {i}, component {k}"), *x, *y, tol);
            }
        }
    }
    Ok(report)
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
        let report = golden::check_trajectories(
            &trajectories,
            || Stepper::new(TRAJECTORY_OPTIONS),
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
                // The stepping kernel on Simbody's trajectories.
                if !trajectories.is_empty() {
                    let mut runs = vec![(Precision::F32, GPU_F32_TRAJECTORY_TOL)];
                    if d.supports_f64 {
                        runs.push((Precision::F64, args.trajectory_tol));
                    }
                    for (precision, tol) in runs {
                        let report = gpu_trajectory_parity(&d, precision, &trajectories, tol)?;
                        println!(
                            "GPU {precision:?} trajectories (stepping kernel), RK4 h = 5e-4 \
                             (bound {tol:e}):\n{report}"
                        );
                        if !report.passed() {
                            failures.push(format!("GPU {precision:?} trajectories"));
                        }
                    }
                }
                // The event kernel of unilateral contact against the CPU's event path.
                let mut unilateral = vec![(Precision::F32, UNILATERAL_F32_TOL)];
                if d.supports_f64 {
                    unilateral.push((Precision::F64, UNILATERAL_F64_TOL));
                }
                for (precision, tol) in unilateral {
                    let report = unilateral_parity(&d, precision, 256, tol)?;
                    println!(
                        "GPU {precision:?} unilateral contact (event kernel) against the CPU's \
                         event path, 256 bouncing balls over 0.8 s (bound {tol:e}):\n{report}"
                    );
                    if !report.passed() {
                        failures.push(format!("GPU {precision:?} unilateral parity"));
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
