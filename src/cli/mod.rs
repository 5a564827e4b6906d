//! The `simbatch` command: Monte Carlo studies (`run`, `merge`), the benchmark harness
//! (`bench`) and the conformance check (`check`). Built with the default `cli` feature; the
//! binary (`src/main.rs`) only parses arguments and calls [`main_with`].
//!
//! Rooms: [`scenario`] reads and checks scenario files; [`sample`] draws parameters from
//! counter-based streams (the crate's [`sample`] module, shared with the RL
//! environments); [`study`] builds batches and runs them; [`output`] writes the
//! output directory atomically and merges shards; [`plots`] draws SVG plots; [`replay`]
//! simulates chosen instances of a study again and [`render`](mod@render) draws them;
//! [`bench`](mod@bench) and [`check`] are the other commands.

pub mod bench;
pub mod check;
pub mod instances;
pub mod outdir;
pub mod output;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod plots;
pub mod prescribed;
pub mod render;
pub mod replay;
pub mod rollout;
pub mod scenario;
pub use crate::sample;
pub mod study;
pub mod unilateral;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, Subcommand};
use serde_json::json;

use crate::backend::Backend;
use scenario::{DEFAULT_SCENARIO, Scenario};
use study::Runner;

/// What can go wrong in the command; every message names what to fix.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A scenario mistake, located.
    #[error("{file}:{line}:{column}: {field}{}{message}", if field.is_empty() { "" } else { ": " })]
    Scenario {
        /// Scenario file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field, e.g. `body[0].mass`.
        field: String,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// An engine error.
    #[error(transparent)]
    Engine(#[from] crate::Error),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A drawn value the engine refused (e.g. an inertia that breaks the triangle inequality).
    #[error("{file}: instance {instance}: {message}")]
    Sample {
        /// The scenario file (`<dict>` or `<text>` from Python) the instance was drawn from.
        file: String,
        /// Global instance index.
        instance: usize,
        /// The engine's message, naming the field and the accepted range.
        message: String,
    },
    /// A bad shard specification.
    #[error("shard {0}")]
    Shard(String),
    /// The output directory exists.
    #[error("output directory {0} exists; pass --force to replace it")]
    OutputExists(String),
    /// `--force` was given for something that is not a study output.
    #[error(
        "{0} is not a simbatch study output (no manifest.json of a run or merge): --force \
         replaces only study outputs; choose another --out or remove it yourself"
    )]
    NotStudyOutput(String),
    /// Another run is writing the same output directory.
    #[error(
        "output directory {target} is being written by another simbatch run (process {pid}; \
         lock {lock}); wait for it, or choose another --out"
    )]
    Locked {
        /// The output directory.
        target: String,
        /// The process holding the lock.
        pid: u32,
        /// The lock file.
        lock: String,
    },
    /// A study that cannot fit: what it would need, and the way out.
    #[error("{field}: {message}")]
    TooLarge {
        /// The scenario field (or flag) responsible.
        field: String,
        /// What it would need, what is available, and what to do (e.g. `--shard`).
        message: String,
    },
    /// Shard outputs that do not merge.
    #[error("merge: {0}")]
    Merge(String),
    /// A plot could not be drawn.
    #[error("plot {path}: {message}")]
    Plot {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The conformance check found errors above their bounds.
    #[error("check failed: {0}")]
    Check(String),
    /// A render request that cannot be met (names the flag and what it accepts).
    #[error("render: {0}")]
    Render(String),
}

/// `simbatch`: batches of small constrained rigid-body systems on CPU and GPU.
#[derive(Debug, Parser)]
#[command(name = "simbatch", version, about)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a Monte Carlo study (the embedded default study when no file is given).
    Run {
        /// Scenario file (TOML); `simbatch scenario` prints the default one to start from.
        scenario: Option<PathBuf>,
        /// Output directory (default: `simbatch-out/<name>`, with `-shard-I-of-N` when sharded).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace an existing output directory.
        #[arg(long)]
        force: bool,
        /// Backend, overriding SIMBATCH_BACKEND and the scenario's: auto (a hardware GPU, else
        /// the CPU), cpu, gpu.
        #[arg(long)]
        backend: Option<String>,
        /// Run slice I of N (0-based), e.g. `--shard 3/8`. Default: from SLURM_ARRAY_TASK_ID /
        /// SLURM_ARRAY_TASK_COUNT (minus SLURM_ARRAY_TASK_MIN), or JOB_COMPLETION_INDEX with
        /// SIMBATCH_SHARDS; else the whole study.
        #[arg(long)]
        shard: Option<String>,
        /// Override the scenario's instance count (quick trials).
        #[arg(long)]
        instances: Option<usize>,
        /// No progress bar or summary table.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Join shard outputs of one study, checking that they cover it exactly once.
    Merge {
        /// Shard output directories.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Replace an existing output directory.
        #[arg(long)]
        force: bool,
    },
    /// Throughput table: instance-evaluations/s and instance-steps/s per backend, system, N
    /// and substeps per call.
    Bench(bench::BenchArgs),
    /// Conformance against a directory of golden files (Simbody's format) and CPU-vs-GPU parity.
    Check(check::CheckArgs),
    /// Print the embedded default scenario (a starting point for your own).
    Scenario,
    /// Replay chosen instances of a study and draw them: an animated GIF, a 3-D HTML player
    /// or one PNG frame (by the extension of --out).
    Render(render::RenderArgs),
}

/// The command's logger: the library's warnings (`log::warn!` from `simbatch`'s own modules:
/// an `auto` backend that passed over a software adapter, unilateral contacts that run on the
/// CPU though the GPU was asked for, and why) on standard error, one line each. Other crates'
/// records (wgpu's) and lower levels are left out.
struct Warnings;

impl log::Log for Warnings {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn && metadata.target().starts_with("simbatch")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("warning: {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs [`Warnings`] unless a logger is already set (a host program's, or an earlier call's).
fn install_logger() {
    static LOGGER: Warnings = Warnings;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// Runs the command line `args` (including the program name); what `main` calls. The
/// library's warnings go to standard error (unless the host program set a logger of its own).
pub fn main_with(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<(), CliError> {
    install_logger();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Run {
            scenario,
            out,
            force,
            backend,
            shard,
            instances,
            quiet,
        } => {
            let scenario = load(scenario.as_deref(), instances)?;
            let shard = shard_spec(shard.as_deref(), &|k| std::env::var(k).ok())?;
            // One resolver with the library: --backend, else SIMBATCH_BACKEND, else the scenario.
            let explicit = backend.map(|b| b.parse::<Backend>()).transpose()?;
            let backend = crate::backend::choose(explicit, scenario.simulation.backend)?;
            let out = out.unwrap_or_else(|| default_out(&scenario, shard));
            let manifest = run_study(&scenario, shard, backend, &out, force, quiet)?;
            if !quiet {
                println!(
                    "wrote {} ({}, {})",
                    out.display(),
                    output::counted(
                        manifest["shard"]["end"].as_u64().unwrap_or(0)
                            - manifest["shard"]["start"].as_u64().unwrap_or(0),
                        "instance"
                    ),
                    manifest["backend"].as_str().unwrap_or("")
                );
            }
            Ok(())
        }
        Command::Merge { shards, out, force } => {
            let manifest = output::merge(&shards, &out, force)?;
            println!(
                "merged {} into {} ({})",
                output::counted(shards.len() as u64, "shard"),
                out.display(),
                output::counted(manifest["instances"].as_u64().unwrap_or(0), "instance")
            );
            Ok(())
        }
        Command::Bench(args) => bench::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Render(args) => {
            let frames = render::render_study(&args)?;
            let frames = if render::Format::of(&args.out)? == render::Format::Png {
                1
            } else {
                frames
            };
            println!(
                "wrote {} ({} of instance{} {})",
                args.out.display(),
                output::counted(frames as u64, "frame"),
                if args.instances.len() == 1 { "" } else { "s" },
                args.instances
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(())
        }
        Command::Scenario => {
            print!("{DEFAULT_SCENARIO}");
            Ok(())
        }
    }
}

/// Reads a scenario file, or the embedded default; `instances` overrides its count.
pub fn load(path: Option<&Path>, instances: Option<usize>) -> Result<Scenario, CliError> {
    let mut scenario = match path {
        None => Scenario::parse("<default>", DEFAULT_SCENARIO)?,
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| CliError::Io {
                path: p.display().to_string(),
                source,
            })?;
            Scenario::parse(&p.display().to_string(), &text)?
        }
    };
    if let Some(n) = instances {
        if n == 0 {
            return Err(CliError::Shard("--instances 0; accepted: ≥ 1".into()));
        }
        scenario.instances = n;
    }
    Ok(scenario)
}

/// Parses `I/N`, or reads it from the scheduler's environment (`env` looks a variable up).
pub fn shard_spec(
    arg: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(usize, usize)>, CliError> {
    let parse = |s: &str, what: &str| -> Result<usize, CliError> {
        s.trim().parse::<usize>().map_err(|_| {
            CliError::Shard(format!("{what} = {s:?}; accepted: a non-negative integer"))
        })
    };
    let (index, count) = if let Some(a) = arg {
        let Some((i, n)) = a.split_once('/') else {
            return Err(CliError::Shard(format!(
                "--shard {a:?}; accepted: I/N with 0 ≤ I < N, e.g. 0/4"
            )));
        };
        (parse(i, "--shard index")?, parse(n, "--shard count")?)
    } else if let Some(id) = env("SLURM_ARRAY_TASK_ID") {
        let count = env("SLURM_ARRAY_TASK_COUNT").ok_or_else(|| {
            CliError::Shard("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not".into())
        })?;
        let min =
            env("SLURM_ARRAY_TASK_MIN").map_or(Ok(0), |m| parse(&m, "SLURM_ARRAY_TASK_MIN"))?;
        let id = parse(&id, "SLURM_ARRAY_TASK_ID")?;
        (
            id.checked_sub(min).ok_or_else(|| {
                CliError::Shard(format!(
                    "SLURM_ARRAY_TASK_ID {id} < SLURM_ARRAY_TASK_MIN {min}"
                ))
            })?,
            parse(&count, "SLURM_ARRAY_TASK_COUNT")?,
        )
    } else if let Some(index) = env("JOB_COMPLETION_INDEX") {
        let count = env("SIMBATCH_SHARDS").ok_or_else(|| {
            CliError::Shard(
                "JOB_COMPLETION_INDEX is set; also set SIMBATCH_SHARDS to the Job's completions"
                    .into(),
            )
        })?;
        (
            parse(&index, "JOB_COMPLETION_INDEX")?,
            parse(&count, "SIMBATCH_SHARDS")?,
        )
    } else {
        return Ok(None);
    };
    if count == 0 || index >= count {
        return Err(CliError::Shard(format!(
            "{index}/{count}; accepted: I/N with 0 ≤ I < N"
        )));
    }
    Ok(Some((index, count)))
}

/// Global instances of shard `I/N`: `[I·n/N, (I+1)·n/N)`.
pub fn shard_range(instances: usize, shard: Option<(usize, usize)>) -> std::ops::Range<usize> {
    match shard {
        None => 0..instances,
        Some((i, n)) => {
            let at = |k: usize| ((k as u128 * instances as u128) / n as u128) as usize;
            at(i)..at(i + 1)
        }
    }
}

/// The default output directory of a study: `simbatch-out/<name>`, with `-shard-I-of-N` when
/// sharded.
pub fn default_out(scenario: &Scenario, shard: Option<(usize, usize)>) -> PathBuf {
    let name: String = scenario
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = match shard {
        None => name,
        Some((i, n)) => format!("{name}-shard-{i}-of-{n}"),
    };
    Path::new("simbatch-out").join(dir)
}

/// Runs a study (or one shard of it) into `out`; returns its manifest.
pub fn run_study(
    scenario: &Scenario,
    shard: Option<(usize, usize)>,
    backend: Backend,
    out: &Path,
    force: bool,
    quiet: bool,
) -> Result<serde_json::Value, CliError> {
    let started = Instant::now();
    // Everything that can be refused is refused before any work or any file.
    let dir = output::OutDir::create(out, force)?;
    let range = shard_range(scenario.instances, shard);
    study::check_fits(scenario, &range)?;
    study::validate(scenario, range.clone())?;
    let (runner, backend_text) = Runner::resolve(backend, scenario.simulation.precision)?;
    // Unilateral contacts run on the GPU's event kernels when the template is within their
    // reach (docs/gpu-unilateral.md), else on the event-driven CPU path (said on the log).
    let unilateral = scenario
        .constraints
        .iter()
        .any(|c| c.unilateral().is_some());
    let (runner, backend_text) = match runner {
        Runner::Gpu(d) if unilateral => (
            Runner::Gpu(d),
            format!(
                "{backend_text}, event-driven unilateral kernels (a template outside their \
                 reach, and instances a software adapter's loop budget withholds, run on the CPU)"
            ),
        ),
        runner => (runner, backend_text),
    };
    // Say what ran: the CPU path is f64 whatever the scenario asked of a GPU.
    let precision = match runner {
        Runner::Cpu => "f64".to_string(),
        Runner::Gpu(_) => format!("{:?}", scenario.simulation.precision).to_lowercase(),
    };
    let units = study::progress_units(scenario, &range);
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(units)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:40}] {percent}% instance-checkpoints, eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let setup = started.elapsed().as_secs_f64();
    let simulate_start = Instant::now();
    let inc = |k: u64| bar.inc(k);
    let results = study::run(scenario, range.clone(), &runner, &inc)?;
    bar.finish_and_clear();
    let simulate = simulate_start.elapsed().as_secs_f64();
    let write_start = Instant::now();
    let body = scenario.bodies.first().map(|b| b.name.as_str());
    let (summary, files) = output::write_results(dir.path(), &results, body)?;
    // What stepped: with unilateral contacts, event-driven RK4 at the scenario's step, or
    // event-driven RKM with its error control.
    let options = &scenario.simulation.options;
    let integrator_text = match options.integrator {
        crate::step::Integrator::RungeKuttaMerson { accuracy, max_step } if unilateral => format!(
            "event-driven Runge-Kutta-Merson between events, per-instance steps at accuracy \
             {accuracy}, at most {max_step} (unilateral contacts)"
        ),
        _ if unilateral => format!(
            "event-driven RK4 between events, h = {} (shorter while a contact slides slowly; \
             unilateral contacts; {:?} asked)",
            unilateral::event_step(options),
            options.integrator
        ),
        _ => format!("{options:?}"),
    };
    let manifest = json!({
        "complete": true,
        "simbatch": env!("CARGO_PKG_VERSION"),
        "wgpu": "30",
        "command": std::env::args().collect::<Vec<_>>(),
        "scenario": { "file": scenario.file, "name": scenario.name, "hash": scenario.hash(), "text": scenario.source },
        "seed": scenario.seed,
        "instances": scenario.instances,
        "shard": { "index": shard.map_or(0, |s| s.0), "count": shard.map_or(1, |s| s.1), "start": range.start, "end": range.end },
        "backend": backend_text,
        "precision": precision,
        "integrator": integrator_text,
        "duration": scenario.simulation.duration,
        "bodies": scenario.bodies.iter().map(|b| b.name.clone()).collect::<Vec<_>>(),
        "timings": { "setup_s": setup, "simulate_s": simulate, "write_s": write_start.elapsed().as_secs_f64(), "total_s": started.elapsed().as_secs_f64() },
        "flagged": results.rows.iter().filter(|(_, v)| results.columns.iter().position(|c| c == "status").is_some_and(|k| v[k] != 0.0)).count(),
        "files": files,
    });
    output::write_manifest(dir.path(), &manifest)?;
    dir.commit()?;
    if !quiet {
        let shown: Vec<(String, output::Stats)> = summary
            .into_iter()
            .filter(|(n, _)| {
                !n.contains(".e")
                    && !n.ends_with(".wx")
                    && !n.ends_with(".wy")
                    && !n.ends_with(".wz")
            })
            .collect();
        print!("{}", output::summary_table(&shown));
        if unilateral && !matches!(options.integrator, crate::step::Integrator::Rk4 { .. }) {
            println!("stepped with {integrator_text}");
        }
        println!(
            "simulated {} for {} s in {simulate:.2} s on {backend_text}",
            output::counted(range.len() as u64, "instance"),
            scenario.simulation.duration
        );
    }
    Ok(manifest)
}
