//! `simbatch bench`: throughput per backend, system, N and substeps per call, as a table and
//! as JSON. Times are medians over repeated calls (at least 3, about `--seconds` each).

mod unilateral;

use std::time::Instant;

use serde_json::json;

use super::CliError;
use crate::backend::Evaluator;
use crate::backend::Stepper;
use crate::batch::Batch;
use crate::evaluation::{Evaluation, OUTPUT_STORES, OutputStores, Outputs};
use crate::gpu::layout::{OUTPUT_ORDERS, OutputOrder};
use crate::gpu::{GpuEvaluator, GpuOptions, Precision};
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
    /// Integrators of the stepping rows: rk4 (no drift control), rk4-projection (Simbody's
    /// projection at 1e-6), euler (semi-implicit, no drift control); all at h = 1 ms. Also
    /// rkm-projection (Simbody's adaptive Runge–Kutta–Merson, accuracy 1e-6, steps of at most
    /// 1 ms, projection at 1e-6).
    #[arg(long, value_delimiter = ',', default_values_t = ["rk4".to_string(), "rk4-projection".to_string(), "euler".to_string()])]
    pub integrators: Vec<String>,
    /// CPU threads (rayon); 0: every core. One thread is the figure to compare with MuJoCo's
    /// single-threaded `mj_step` (`benches/mujoco_rolling_ball.py`).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// GPU precision: f32 or f64.
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// GPU workgroup sizes to measure, comma-separated (each GPU row once per size); empty: the
    /// adapter's default only. Results do not depend on the size; this finds the fastest.
    #[arg(long, value_delimiter = ',')]
    pub workgroup_sizes: Vec<u32>,
    /// Also measure unilateral contact: the bouncing balls (`scenarios::bouncing_balls`, one
    /// contact) and the sliding bricks (`scenarios::sliding_bricks`, four corners), each call
    /// simulating `substeps` ms of event-driven RK4 (h = 1 ms) from the same start, on the
    /// CPU's event path and the GPU's event kernels (`backend::UnilateralRunner`; instances a
    /// software adapter's kernel withholds run on the CPU in the call, and the row says how
    /// many). Rows count instance-steps of 1 ms, as the stepping rows do; the `events-rkm` rows
    /// simulate the same time under error control (Merson steps within 1e-6, at most 20 ms).
    #[arg(long)]
    pub unilateral: bool,
    /// With `--unilateral`: which event-driven rows, comma-separated: `fixed` (RK4 at 1 ms, the
    /// `events` rows), `rkm` (under error control, the `events-rkm` rows).
    #[arg(long, value_delimiter = ',', default_value = "fixed,rkm", value_parser = ["fixed", "rkm"])]
    pub events: Vec<String>,
    /// Seconds of repeated calls per measurement.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Also write the rows as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Diagnostics: build every GPU kernel without one stage (no-fallback: the solve's eigen
    /// fallback; no-solve: the multiplier solve; no-rows: the constraint rows and the solve;
    /// no-dynamics: the whole derivative of the stepping kernels; no-cache: the private copy
    /// of the parameter columns), to time what that stage costs on hardware (`gpu::probe`).
    /// The results are wrong by design (but no-cache's); the rows' backend reads e.g.
    /// `gpu-f32/no-solve`.
    #[arg(long)]
    pub gpu_probe: Option<String>,
    /// The order of the GPU evaluation kernel's output columns: instance-major or value-major
    /// (`GpuOptions::output_order`); unset: the adapter's (value-major on GPUs, instance-major
    /// on CPU drivers). Set, the evaluation rows' backend names it (`gpu-f32/value-major`).
    #[arg(long)]
    pub gpu_output_order: Option<String>,
    /// How the CPU evaluation rows write their outputs: auto (streaming stores for large
    /// outputs on CPUs where they pay), cached (ordinary stores) or streamed
    /// (`OutputStores`); set, the CPU evaluation rows' backend names it (`cpu/cached`).
    #[arg(long, default_value = "auto")]
    pub cpu_stores: String,
    /// Build the GPU kernels reading the batch's shared parameters from the buffer instead of
    /// holding them as constants (`GpuOptions::fold_shared`), to time what folding gains; the
    /// GPU rows' backend reads e.g. `gpu-f32/unfolded`.
    #[arg(long)]
    pub gpu_unfolded: bool,
}

/// What [`time`] measured: the median seconds per call, and the first call's seconds (on the
/// GPU: building or fetching the kernels and the buffers, then the call itself).
#[derive(Debug, Clone, Copy)]
struct Timing {
    median: f64,
    first: f64,
}

/// Most calls one measurement times.
const MAX_SAMPLES: usize = 1 << 20;

/// Median seconds per call of `f`, after a first (warm-up) call that is timed apart.
fn time(mut f: impl FnMut() -> Result<(), CliError>, budget: f64) -> Result<Timing, CliError> {
    time_reported(|| f().map(|()| None), budget)
}

/// [`time`], where a call may return its own seconds (the device's clock: a kernel's passes
/// without the submission and the wait around them), taken in place of the host's.
fn time_reported(
    mut f: impl FnMut() -> Result<Option<f64>, CliError>,
    budget: f64,
) -> Result<Timing, CliError> {
    let mut samples = Vec::new();
    let start = Instant::now();
    // Warm-up: pipelines, buffers. Its host time is what a user waits for, whatever clock
    // times the calls after it.
    f()?;
    let first = start.elapsed().as_secs_f64();
    // Calls until the budget is spent (at least 3): a cap of 50 calls had made a row of fast
    // calls (0.6 ms at N = 10⁴ on the CPU) a 30 ms measurement, at the mercy of the first
    // milliseconds of a row (1.1–1.7e7 evaluations/s in runs of one build). The cap bounds the
    // samples' memory only.
    while samples.len() < 3
        || (start.elapsed().as_secs_f64() < budget && samples.len() < MAX_SAMPLES)
    {
        let t = Instant::now();
        let own = f()?;
        samples.push(own.unwrap_or_else(|| t.elapsed().as_secs_f64()));
    }
    samples.sort_by(f64::total_cmp);
    Ok(Timing {
        median: samples[samples.len() / 2],
        first,
    })
}

type Build = fn(usize) -> crate::Result<Batch>;

/// What one row measured (its rate aside).
struct Row<'a> {
    system: &'a str,
    n: usize,
    backend: &'a str,
    integrator: &'a str,
    substeps: usize,
    what: &'a str,
    bytes_per_instance: usize,
    /// GPU rows: invocations per workgroup.
    workgroup_size: Option<u32>,
    /// Unilateral GPU rows: the instances of a call the kernel handed to the CPU.
    handed_to_cpu: Option<usize>,
}

/// The stepping options a `--integrators` entry names, or `None`.
/// The names `--integrators` accepts.
const INTEGRATORS: &str = "rk4, rk4-projection, euler, rkm-projection (comma-separated)";

fn integrator_options(name: &str) -> Option<StepOptions> {
    let (integrator, stabilization) = match name {
        "rk4" => (Integrator::Rk4 { step: 1e-3 }, Stabilization::None),
        "rk4-projection" => (
            Integrator::Rk4 { step: 1e-3 },
            Stabilization::Projection { tolerance: 1e-6 },
        ),
        "euler" => (
            Integrator::SemiImplicitEuler { step: 1e-3 },
            Stabilization::None,
        ),
        "rkm-projection" => (
            Integrator::RungeKuttaMerson {
                accuracy: 1e-6,
                max_step: 1e-3,
            },
            Stabilization::Projection { tolerance: 1e-6 },
        ),
        _ => return None,
    };
    Some(StepOptions {
        integrator,
        stabilization,
    })
}

/// Bytes per instance `batch` holds on the host: its columns (status, time, work, gravity,
/// every body and constraint column; shared ones once), [`Batch::bytes`] divided by N,
/// plus `work` bytes per instance of the call's own buffers (the evaluation result, or the
/// stepping call's states). Scratch of the CPU path is per thread, not per instance.
fn host_bytes_per_instance(batch: &Batch, work: usize) -> usize {
    batch.bytes().div_ceil(batch.len().max(1)) + work
}

/// Bytes per instance of the GPU memory the kernels hold after the timed calls
/// ([`Stepper::device_bytes`]): the chunks' inputs (shared columns once), and the stepping
/// carry or the evaluation outputs, with the staging buffers (bounded per call, not per
/// instance). The host's f64 copy of the batch is the CPU row's figure.
fn gpu_bytes_per_instance(device_bytes: Option<u64>, n: usize) -> usize {
    device_bytes.unwrap_or(0).div_ceil(n.max(1) as u64) as usize
}

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
    for name in &args.integrators {
        if integrator_options(name).is_none() {
            return Err(CliError::Engine(crate::Error::BadChoice {
                what: "--integrators entry",
                value: name.clone(),
                accepted: INTEGRATORS,
            }));
        }
    }
    if args.threads > 4096 {
        return Err(CliError::Engine(crate::Error::BadChoice {
            what: "--threads",
            value: args.threads.to_string(),
            accepted: "0 (every core) or a thread count in [1, 4096]",
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
    // Refused before anything is measured (`measure` reads them again).
    gpu_output_order(args)?;
    cpu_stores(args)?;
    let probe = match &args.gpu_probe {
        Some(name) => Some(name.parse::<crate::gpu::probe::Probe>()?),
        None => None,
    };
    crate::gpu::probe::set(probe);
    if let Some(p) = probe {
        println!(
            "GPU kernels built without a stage ({}): their results are wrong by design",
            p.name()
        );
    }
    if args.threads == 0 {
        return measure(args, precision);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()
        .map_err(|e| CliError::Engine(crate::Error::Gpu(format!("thread pool: {e}"))))?;
    pool.install(|| measure(args, precision))
}

/// Which copy of the CPU's lane code runs (`math::lanes::avx512`): the rows' CPU figures
/// depend on it.
fn cpu_lane_code() -> &'static str {
    if crate::math::lanes::avx512::enabled() {
        "avx512"
    } else if cfg!(all(target_feature = "avx2", target_feature = "fma")) {
        "avx2+fma"
    } else {
        "baseline"
    }
}

/// `--gpu-output-order`, read: `None` when unset (the adapter's order).
fn gpu_output_order(args: &BenchArgs) -> Result<Option<OutputOrder>, CliError> {
    let Some(name) = &args.gpu_output_order else {
        return Ok(None);
    };
    let order = name
        .parse::<OutputOrder>()
        .map_err(|_| crate::Error::BadChoice {
            what: "--gpu-output-order",
            value: name.clone(),
            accepted: OUTPUT_ORDERS,
        })?;
    Ok(Some(order))
}

/// `--cpu-stores`, read.
fn cpu_stores(args: &BenchArgs) -> Result<OutputStores, CliError> {
    Ok(args
        .cpu_stores
        .parse::<OutputStores>()
        .map_err(|_| crate::Error::BadChoice {
            what: "--cpu-stores",
            value: args.cpu_stores.clone(),
            accepted: OUTPUT_STORES,
        })?)
}

/// The measurements, on the current rayon pool.
fn measure(args: &BenchArgs, precision: Precision) -> Result<(), CliError> {
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
    // Each requested workgroup size (none: the adapter's default), resolved and checked
    // against the adapter once, before any work; every GPU row runs at its resolved size.
    let mut workgroups: Vec<u32> = Vec::new();
    if let Some(d) = &device {
        let requested: Vec<Option<u32>> = if args.workgroup_sizes.is_empty() {
            vec![None]
        } else {
            args.workgroup_sizes.iter().map(|s| Some(*s)).collect()
        };
        for w in requested {
            // The device's check, reported against the flag the user typed.
            let size = d.workgroup_size(w).map_err(|e| match e {
                crate::Error::InvalidOption {
                    value, accepted, ..
                } => crate::Error::InvalidOption {
                    option: "--workgroup-sizes entry",
                    value,
                    accepted,
                },
                other => other,
            })?;
            workgroups.push(size);
        }
    }
    println!(
        "CPU: {} threads (rayon), lane code: {}",
        rayon::current_num_threads(),
        cpu_lane_code()
    );
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
    let mut rows = Vec::new();
    println!(
        "{:<28} {:>8} {:<10} {:>5} {:<15} {:>9} {:>16} {:>26} {:>7} {:>8}",
        "system",
        "N",
        "backend",
        "wg",
        "integrator",
        "substeps",
        "per second",
        "what",
        "B/inst",
        "first s"
    );
    let mut report = |row: Row<'_>, work: f64, timing: Timing| {
        let rate = work / timing.median;
        println!(
            "{:<28} {:>8} {:<10} {:>5} {:<15} {:>9} {:>16.0} {:>26} {:>7} {:>8.3}",
            row.system,
            row.n,
            row.backend,
            row.workgroup_size
                .map_or("-".to_string(), |w| w.to_string()),
            row.integrator,
            row.substeps,
            rate,
            row.what,
            row.bytes_per_instance,
            timing.first
        );
        rows.push(json!({
            "system": row.system,
            "n": row.n,
            "backend": row.backend,
            "integrator": row.integrator,
            "substeps": row.substeps,
            "per_second": rate,
            "what": row.what,
            "bytes_per_instance": row.bytes_per_instance,
            "first_call_s": timing.first,
            "workgroup_size": row.workgroup_size,
            "handed_to_cpu": row.handed_to_cpu,
        }));
        if let Some(k) = row.handed_to_cpu.filter(|k| *k > 0) {
            println!(
                "  ({k} of {} instances a call handed to the CPU: the kernel's loop budget)",
                row.n
            );
        }
    };
    let mut gpu_name = match crate::gpu::probe::current() {
        Some(p) => format!("gpu-{}/{}", args.precision, p.name()),
        None => format!("gpu-{}", args.precision),
    };
    let fold_shared = args.gpu_unfolded.then_some(false);
    if args.gpu_unfolded {
        gpu_name.push_str("/unfolded");
    }
    let output_order = gpu_output_order(args)?;
    let evaluation_name = match output_order {
        Some(order) => format!("{gpu_name}/{}", order.name()),
        None => gpu_name.clone(),
    };
    let cpu = args.backends.iter().any(|b| b == "cpu");
    let stores = cpu_stores(args)?;
    let cpu_name = match stores {
        OutputStores::Auto => "cpu".to_string(),
        other => format!("cpu/{}", other.name()),
    };
    for &n in &args.n {
        for (system, build) in evaluated {
            let batch = build(n)?;
            let mut out = Evaluation::default();
            let row = |backend, what, bytes_per_instance, workgroup_size| Row {
                system,
                n,
                backend,
                integrator: "-",
                substeps: 1,
                what,
                bytes_per_instance,
                workgroup_size,
                handed_to_cpu: None,
            };
            if cpu {
                // Every output, then u̇ and λ alone (what a study of the dynamics reads).
                for (outputs, what) in [
                    (Outputs::ALL, "evaluations"),
                    (Outputs::DYNAMICS, "evaluations (udot, lambda)"),
                ] {
                    let mut e = Evaluator::cpu()
                        .with_outputs(outputs)
                        .with_output_stores(stores);
                    let s = time(|| Ok(e.evaluate_into(&batch, &mut out)?), args.seconds)?;
                    let bytes = host_bytes_per_instance(&batch, out.bytes() / n);
                    report(row(&cpu_name, what, bytes, None), n as f64, s);
                }
            }
            for (d, workgroup) in device
                .iter()
                .flat_map(|d| workgroups.iter().map(move |w| (d, *w)))
            {
                let options = GpuOptions {
                    workgroup_size: Some(workgroup),
                    output_order,
                    fold_shared,
                    ..GpuOptions::default()
                };
                // Every output, then u̇ and λ alone: the kernel is the same, only the selected
                // columns are read back and converted.
                let mut bytes = 0;
                for (outputs, what) in [
                    (Outputs::ALL, "evaluations"),
                    (Outputs::DYNAMICS, "evaluations (udot, lambda)"),
                ] {
                    let mut e =
                        Evaluator::on_device(d.clone(), precision, options)?.with_outputs(outputs);
                    let s = time(|| Ok(e.evaluate_into(&batch, &mut out)?), args.seconds)?;
                    bytes = gpu_bytes_per_instance(e.device_bytes(), n);
                    report(
                        row(&evaluation_name, what, bytes, Some(workgroup)),
                        n as f64,
                        s,
                    );
                }
                // The kernel alone (changed columns uploaded, nothing read back): what the row
                // above spends beyond it is the readback and the host's conversion.
                let mut kernel = GpuEvaluator::new(d.clone(), &batch, precision, options)?;
                let s = time(|| Ok(kernel.dispatch(&batch)?), args.seconds)?;
                report(
                    row(
                        &evaluation_name,
                        "evaluations (kernel only)",
                        bytes,
                        Some(workgroup),
                    ),
                    n as f64,
                    s,
                );
                // The same dispatches timed on the device's clock, where it has one: the
                // kernel's share of memory bandwidth is judged on this row.
                if d.supports_timestamps {
                    let s = time_reported(|| Ok(kernel.dispatch_timed(&batch)?), args.seconds)?;
                    report(
                        row(
                            &evaluation_name,
                            "evaluations (kernel, device clock)",
                            bytes,
                            Some(workgroup),
                        ),
                        n as f64,
                        s,
                    );
                }
            }
        }
        for (system, build) in stepped {
            for integrator in &args.integrators {
                let options = integrator_options(integrator).ok_or_else(|| {
                    CliError::Engine(crate::Error::BadChoice {
                        what: "--integrators entry",
                        value: integrator.clone(),
                        accepted: INTEGRATORS,
                    })
                })?;
                let mut batch = build(n)?;
                for &k in &args.substeps {
                    let row = |backend, bytes_per_instance, workgroup_size| Row {
                        system,
                        n,
                        backend,
                        integrator,
                        substeps: k,
                        what: "steps",
                        bytes_per_instance,
                        workgroup_size,
                        handed_to_cpu: None,
                    };
                    if cpu {
                        let mut stepper = Stepper::new(options)?;
                        let s = time(
                            || Ok(stepper.step(&mut batch, k).map(|_| ())?),
                            args.seconds,
                        )?;
                        let call = stepper.host_call_bytes(&batch).div_ceil(n);
                        let bytes = host_bytes_per_instance(&batch, call);
                        report(row("cpu", bytes, None), (n * k) as f64, s);
                    }
                    let gpus = device
                        .iter()
                        .flat_map(|d| workgroups.iter().map(move |w| (d, *w)));
                    for (d, workgroup) in gpus {
                        let gpu_options = GpuOptions {
                            workgroup_size: Some(workgroup),
                            fold_shared,
                            ..GpuOptions::default()
                        };
                        let evaluator = Evaluator::on_device(d.clone(), precision, gpu_options)?;
                        let mut stepper = Stepper::with_evaluator(options, evaluator)?;
                        let s = time(
                            || Ok(stepper.step(&mut batch, k).map(|_| ())?),
                            args.seconds,
                        )?;
                        let bytes = gpu_bytes_per_instance(stepper.device_bytes(), n);
                        report(row(&gpu_name, bytes, Some(workgroup)), (n * k) as f64, s);
                    }
                }
            }
        }
    }
    if args.unilateral {
        for &n in &args.n {
            unilateral::rows(
                args,
                n,
                cpu,
                &device,
                &workgroups,
                precision,
                &gpu_name,
                &mut report,
            )?;
        }
    }
    if let Some(path) = &args.json {
        let doc = json!({
            "simbatch": env!("CARGO_PKG_VERSION"),
            "cpu_threads": rayon::current_num_threads(),
            "cpu_lane_code": cpu_lane_code(),
            "gpu": device.as_ref().map(|d| d.describe()),
            "integrators": "h = 1e-3; rk4 and euler without drift control, rk4-projection at 1e-6; rkm-projection: accuracy 1e-6, h ≤ 1e-3, projection at 1e-6",
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
