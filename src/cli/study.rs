//! Running a scenario: sample every instance of a shard, build batches (one per structural
//! variant, e.g. rolling or sliding), assemble, step, record.
//!
//! Every instance's inputs are drawn from its global index alone and every instance is
//! simulated on its own, so a result does not depend on how instances are chunked, grouped,
//! sharded or threaded: on the CPU the results are identical bit for bit.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::CliError;
pub use super::instances::{BodyDraw, ConstraintDraw, Sampled, input_names, sample};
use super::instances::{FieldKeys, apply, sample_keyed, template};
use super::scenario::{MAX_RECORD_SAMPLES, Scenario};
use crate::backend::Backend;
use crate::backend::Stepper;
use crate::batch::Batch;
use crate::cpu::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use crate::gpu::{GpuDevice, Precision};
use crate::model::BodyId;

/// Instances per batch at most (bounds memory; results do not depend on it).
pub const CHUNK: usize = 1 << 16;

/// Where a study runs, resolved once.
#[derive(Clone)]
pub enum Runner {
    /// The f64 CPU path.
    Cpu,
    /// A GPU device.
    Gpu(Arc<GpuDevice>),
}

impl Runner {
    /// Resolves a backend through the library's one resolver
    /// ([`backend::resolve`](crate::backend::resolve)): `auto` takes a hardware GPU and otherwise
    /// the CPU (a software adapter such as lavapipe is slower than the CPU path itself); `gpu`
    /// takes any adapter and says so when it is a software one. Returns the runner and one line
    /// naming what runs (for the manifest and the report).
    pub fn resolve(backend: Backend, precision: Precision) -> Result<(Runner, String), CliError> {
        let resolution = crate::backend::resolve(backend, precision)?;
        let what = resolution.describe();
        Ok(match resolution.device {
            Some(d) => (Runner::Gpu(d), what),
            None => (Runner::Cpu, what),
        })
    }
}

/// The recorded results of a shard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    /// Column names of `rows` (after `index`).
    pub columns: Vec<String>,
    /// `(global index, values)` in index order.
    pub rows: Vec<(usize, Vec<f64>)>,
    /// Column names of `series` (after `index`).
    pub series_columns: Vec<String>,
    /// `(global index, values)`: time series samples, by index then time.
    pub series: Vec<(usize, Vec<f64>)>,
    /// The inputs drawn log-uniformly (their plots use log axes).
    pub log_inputs: Vec<String>,
}

/// Names of the per-instance outputs after the inputs.
pub(super) fn output_names(sc: &Scenario) -> Vec<String> {
    let mut names = vec!["status".to_string(), "time".into()];
    if sc.simulation.assemble {
        names.push("assembly_failed".into());
    }
    for b in &sc.bodies {
        for f in [
            "e0", "e1", "e2", "e3", "x", "y", "z", "wx", "wy", "wz", "vx", "vy", "vz",
        ] {
            names.push(format!("{}.{f}", b.name));
        }
    }
    names.push("energy".into());
    names.push("energy_change".into());
    names.push("driven_work".into());
    names.push("applied_work".into());
    names.push("energy_error".into());
    names.push("max_position_error".into());
    names.push("max_velocity_error".into());
    for (k, c) in sc.constraints.iter().enumerate() {
        if c.unilateral().is_some() {
            for f in super::unilateral::CONTACT_OUTPUTS {
                names.push(format!("c{k}.{f}"));
            }
        } else if c.has_normal_force() {
            names.push(format!("c{k}.normal_force"));
            names.push(format!("c{k}.separation"));
            if sc.record.events {
                names.push(format!("c{k}.lift_off_time"));
            }
        } else {
            for r in 0..3 {
                names.push(format!("c{k}.lambda{r}"));
            }
        }
    }
    names
}

/// Normal force the plane exerts (`−λ_z`, Simbody's sign: compressive is positive here), or
/// RBDL multipliers, per constraint, from an evaluation.
fn contact_outputs(sc: &Scenario, ev: &crate::evaluation::Evaluation, i: usize) -> Vec<Vec<f64>> {
    sc.constraints
        .iter()
        .zip(&ev.constraints)
        .map(|(c, ce)| {
            let m = ce.multipliers_of(i).unwrap_or(&[]);
            if c.has_normal_force() {
                let sep = ce
                    .separation
                    .as_ref()
                    .and_then(|s| s.get(i).copied())
                    .unwrap_or(f64::NAN);
                vec![-m.get(2).copied().unwrap_or(f64::NAN), sep]
            } else {
                (0..3).map(|r| m.get(r).copied().unwrap_or(0.0)).collect()
            }
        })
        .collect()
}

/// Whether bilateral plane contact `k` of instance `i` pulls with normal force `force`: by more
/// than `unilateral.md` §8's liftoff margin `f_tol` (1e-9 m‖g‖ for the constraint's body, 1e-9
/// N when g = 0), the margin a unilateral contact's liftoff test takes. A smaller pull is zero
/// to rounding: a ball and the free plate it rests on, falling together, push with ±1e-15 N,
/// which read as a lift-off at t = 0.
pub(super) fn pulls(batch: &Batch, k: usize, i: usize, force: f64) -> bool {
    let body = batch
        .template()
        .constraints()
        .get(k)
        .and_then(|c| c.constraint.bodies().last().copied());
    let mass = body
        .and_then(|b| batch.free_body_columns(b).ok())
        .map_or(0.0, |c| c.mass.row(i)[0]);
    let [gx, gy, gz] = batch.gravity_column().row(i)[0];
    let gravity = (gx * gx + gy * gy + gz * gz).sqrt();
    // §8's f_tol depends on the body's weight alone (not on ctol, v_cap or v_roll).
    force < -crate::contact::Tolerances::f64(1e-4, gravity, mass, 0.0, 0.0).f_tol
}

/// Progress callback: `(instances × checkpoints done)`.
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// Number of progress units a shard takes (instances × checkpoints).
pub fn progress_units(sc: &Scenario, range: &std::ops::Range<usize>) -> u64 {
    (range.len() as u64) * checkpoint_count(sc) as u64
}

/// Number of checkpoints (see [`checkpoint`]); the scenario bounds it by
/// [`MAX_RECORD_SAMPLES`](super::scenario::MAX_RECORD_SAMPLES).
pub(super) fn checkpoint_count(sc: &Scenario) -> usize {
    let d = sc.simulation.duration;
    match sc.record.interval {
        Some(h) => ((d / h - 1e-9).ceil().max(1.0) as usize).min(MAX_RECORD_SAMPLES),
        None if sc.record.events => 100,
        None => 1,
    }
}

/// Checkpoint `k` of `count` (1-based): a time after the start at which the state is sampled;
/// the last is the duration. Computed, not stored, so a long recording costs no memory here.
pub(super) fn checkpoint(sc: &Scenario, k: usize, count: usize) -> f64 {
    let d = sc.simulation.duration;
    if k == count {
        return d;
    }
    match sc.record.interval {
        Some(h) => k as f64 * h,
        None => d * k as f64 / count as f64,
    }
}

/// Bytes a shard of `range` holds in memory at its peak (result rows, time series, one chunk's
/// batches and draws), estimated from the scenario before any work.
pub fn memory_estimate(sc: &Scenario, range: &std::ops::Range<usize>) -> u128 {
    let n = range.len() as u128;
    let row = (input_names(sc).len() + output_names(sc).len()) as u128 * 8 + 64;
    let series_instances = sc
        .record
        .series_instances
        .saturating_sub(range.start)
        .min(range.len()) as u128;
    let series_row = (2 + 3 * sc.bodies.len()) as u128 * 8 + 64;
    let samples = if sc.record.interval.is_some() {
        checkpoint_count(sc) as u128 + 1
    } else {
        0
    };
    let chunk = (CHUNK.min(range.len()) as u128) * 4096;
    // Results are built, then written: count the rows twice for the summary's sorted copies.
    2 * n * row + series_instances * samples * series_row + chunk
}

/// Refuses a shard that cannot fit in memory, naming the field and what it would need, with
/// `--shard` as the way out.
pub fn check_fits(sc: &Scenario, range: &std::ops::Range<usize>) -> Result<(), CliError> {
    let need = memory_estimate(sc, range);
    let gib = |b: u128| b as f64 / (1u128 << 30) as f64;
    let limit = crate::resources::memory_available().unwrap_or(isize::MAX as u128);
    if need > limit {
        let shards = need.div_ceil(limit.max(1)).max(2);
        let series =
            sc.record.series_instances.min(range.len()) as u128 * checkpoint_count(sc) as u128;
        let field = if sc.record.interval.is_some() && series > range.len() as u128 {
            "record.series_instances × duration / record.interval"
        } else {
            "instances"
        };
        return Err(CliError::TooLarge {
            field: field.into(),
            message: format!(
                "{} instances would need about {:.1} GiB in memory, and {:.1} GiB is \
                 available; run the study in shards (e.g. --shard I/{shards} for I = 0 … \
                 {}, then `simbatch merge`), or record less",
                range.len(),
                gib(need),
                gib(limit),
                shards - 1
            ),
        });
    }
    Ok(())
}

/// Runs global instances `range` of the study.
pub fn run(
    sc: &Scenario,
    range: std::ops::Range<usize>,
    runner: &Runner,
    progress: Progress<'_>,
) -> Result<Results, CliError> {
    let inputs = input_names(sc);
    let outputs = output_names(sc);
    let mut rows = Vec::new();
    rows.try_reserve_exact(range.len())
        .map_err(|_| CliError::TooLarge {
            field: "instances".into(),
            message: format!(
                "{} result rows do not fit in memory; run the study in shards (--shard I/N, \
                 then `simbatch merge`)",
                range.len()
            ),
        })?;
    let mut results = Results {
        columns: inputs.iter().chain(&outputs).cloned().collect(),
        rows,
        series_columns: {
            let mut c = vec!["time".to_string()];
            for b in &sc.bodies {
                for f in ["x", "y", "z"] {
                    c.push(format!("{}.{f}", b.name));
                }
            }
            c.push("energy".into());
            for (k, con) in sc.constraints.iter().enumerate() {
                if con.unilateral().is_some() {
                    c.push(format!("c{k}.mode"));
                }
            }
            c
        },
        series: Vec::new(),
        log_inputs: super::instances::input_kinds(sc)
            .into_iter()
            .filter(|(_, log)| *log)
            .map(|(n, _)| n)
            .collect(),
    };
    let keys = FieldKeys::of(sc);
    let mut start = range.start;
    while start < range.end {
        let end = (start + CHUNK).min(range.end);
        let sampled: Vec<Sampled> = (start..end)
            .into_par_iter()
            .map(|i| sample_keyed(sc, i, &keys))
            .collect();
        let mut chunk_rows: Vec<Option<Vec<f64>>> = vec![None; end - start];
        let mut chunk_series: Vec<(usize, Vec<f64>)> = Vec::new();
        for (rolling, members) in groups(&sampled) {
            let (rows, series) =
                run_group(sc, &rolling, &members, &sampled, start, runner, progress)?;
            for (k, row) in members.iter().zip(rows) {
                chunk_rows[*k] = Some(row);
            }
            chunk_series.extend(series);
        }
        for (k, row) in chunk_rows.into_iter().enumerate() {
            let mut values = sampled[k].inputs.clone();
            values.extend(row.ok_or_else(|| CliError::Sample {
                file: sc.file.clone(),
                instance: start + k,
                message: "no structural variant ran this instance (internal error)".into(),
            })?);
            results.rows.push((start + k, values));
        }
        chunk_series.sort_by(|a, b| a.0.cmp(&b.0).then(a.1[0].total_cmp(&b.1[0])));
        results.series.extend(chunk_series);
        start = end;
    }
    Ok(results)
}

/// The batch of one structural variant: `members` index `sampled` (chunk-local), `start` is
/// the chunk's first global index.
pub(super) fn build(
    sc: &Scenario,
    rolling: &[bool],
    members: &[usize],
    sampled: &[Sampled],
    start: usize,
) -> Result<(Batch, Vec<BodyId>), CliError> {
    let (template, bodies, ids) = template(sc, rolling)?;
    let mut batch = Batch::new(template, members.len())?;
    for (local, k) in members.iter().enumerate() {
        sc.check_var_draws(start + k, &sampled[*k].vars)?;
        for (c, spec) in sc.constraints.iter().enumerate() {
            if spec.unilateral().is_some() {
                super::unilateral::drawn_coefficients(sc, &sampled[*k], c, start + k)?;
            }
        }
        apply(&mut batch, &bodies, &ids, local, &sampled[*k]).map_err(|e| CliError::Sample {
            file: sc.file.clone(),
            instance: start + k,
            message: in_scenario_terms(&e, batch.template()),
        })?;
    }
    // Inputs the scenario does not draw were written per instance with one value.
    batch.share_uniform_columns();
    Ok((batch, bodies))
}

/// An engine error about a drawn value in the scenario's terms: the engine's body index
/// (`body[1]`, Ground being `body[0]`) becomes the scenario's body name (`body "brick"`), as the
/// scenario's own list numbers its bodies differently, and the batch-local instance index is
/// left out (the caller names the global one).
fn in_scenario_terms(error: &crate::Error, template: &crate::model::SystemTemplate) -> String {
    let mut message = match error {
        crate::Error::InvalidValue {
            field,
            value,
            accepted,
            ..
        } => format!("invalid {field}: got {value}; accepted: {accepted}"),
        other => other.to_string(),
    };
    for (index, body) in template.bodies().iter().enumerate() {
        message = message.replace(&format!("body[{index}]"), &format!("body {:?}", body.name));
    }
    message
}

/// Groups chunk-local instances by structural variant.
pub(super) fn groups(sampled: &[Sampled]) -> BTreeMap<Vec<bool>, Vec<usize>> {
    let mut groups: BTreeMap<Vec<bool>, Vec<usize>> = BTreeMap::new();
    for (k, s) in sampled.iter().enumerate() {
        groups
            .entry(s.constraints.iter().map(|c| c.rolling).collect())
            .or_default()
            .push(k);
    }
    groups
}

/// Draws every instance of `range` and writes it into a batch without simulating: any value
/// the engine refuses (an inertia breaking the triangle inequality, a mass drawn ≤ 0 …) is
/// reported with its instance and field before any work.
pub fn validate(sc: &Scenario, range: std::ops::Range<usize>) -> Result<(), CliError> {
    let keys = FieldKeys::of(sc);
    let mut start = range.start;
    while start < range.end {
        let end = (start + CHUNK).min(range.end);
        let sampled: Vec<Sampled> = (start..end)
            .into_par_iter()
            .map(|i| sample_keyed(sc, i, &keys))
            .collect();
        for (rolling, members) in groups(&sampled) {
            build(sc, &rolling, &members, &sampled, start)?;
        }
        start = end;
    }
    Ok(())
}

/// With `assemble = true`, assembles positions then velocities (in the mass-matrix norm) as
/// the study does before stepping a bilateral group; returns the instances whose assembly
/// failed.
pub(super) fn assemble(sc: &Scenario, batch: &mut Batch) -> Result<Vec<bool>, CliError> {
    let mut assembly_failed = vec![false; batch.len()];
    if sc.simulation.assemble {
        let report = assemble_positions(batch, &AssemblyOptions::default())?;
        for i in report.failed {
            assembly_failed[i] = true;
        }
        let report = assemble_velocities(batch, None)?;
        for i in report.failed {
            assembly_failed[i] = true;
        }
    }
    Ok(assembly_failed)
}

/// A group's result rows and time-series samples.
pub(super) type GroupOutput = (Vec<Vec<f64>>, Vec<(usize, Vec<f64>)>);

fn run_group(
    sc: &Scenario,
    rolling: &[bool],
    members: &[usize],
    sampled: &[Sampled],
    start: usize,
    runner: &Runner,
    progress: Progress<'_>,
) -> Result<GroupOutput, CliError> {
    let (mut batch, bodies) = build(sc, rolling, members, sampled, start)?;
    if sc.constraints.iter().any(|c| c.unilateral().is_some()) {
        return super::unilateral::run_group(
            sc, batch, &bodies, members, sampled, start, runner, progress,
        );
    }
    let n = members.len();
    let assembly_failed = assemble(sc, &mut batch)?;
    let energy0: Vec<f64> = (0..n)
        .map(|i| batch.energy(i).unwrap_or(f64::NAN))
        .collect();
    let options = sc.simulation.options;
    let mut stepper = match runner {
        Runner::Cpu => Stepper::new(options)?,
        Runner::Gpu(d) => Stepper::on_gpu(options, d.clone(), sc.simulation.precision)?,
    };
    let plane_contacts: Vec<usize> = sc
        .constraints
        .iter()
        .enumerate()
        .filter(|(_, c)| c.has_normal_force())
        .map(|(k, _)| k)
        .collect();
    let mut lift_off = vec![vec![f64::NAN; plane_contacts.len()]; n];
    let watch = |batch: &Batch, lift_off: &mut Vec<Vec<f64>>, t_of: &dyn Fn(usize) -> f64| {
        let ev = batch.evaluate();
        for (i, l) in lift_off.iter_mut().enumerate() {
            let outs = contact_outputs(sc, &ev, i);
            for (slot, k) in plane_contacts.iter().enumerate() {
                // The plane pulls: the contact would have separated.
                if l[slot].is_nan() && pulls(batch, *k, i, outs[*k][0]) {
                    l[slot] = t_of(i);
                }
            }
        }
    };
    if sc.record.events {
        watch(&batch, &mut lift_off, &|_| 0.0);
    }
    let in_series: Vec<usize> = (0..n)
        .filter(|i| start + members[*i] < sc.record.series_instances)
        .collect();
    let mut series = Vec::new();
    let record_series = |batch: &Batch, series: &mut Vec<(usize, Vec<f64>)>| {
        for &i in &in_series {
            let mut row = vec![batch.time()[i]];
            for b in &bodies {
                let q = batch.q(*b).map(|q| q[i]).unwrap_or([f64::NAN; 7]);
                row.extend_from_slice(&q[4..7]);
            }
            row.push(batch.energy(i).unwrap_or(f64::NAN));
            series.push((start + members[i], row));
        }
    };
    record_series(&batch, &mut series);
    let mut elapsed = 0.0;
    let count = checkpoint_count(sc);
    for k in 1..=count {
        let t = checkpoint(sc, k, count);
        stepper.advance(&mut batch, t - elapsed)?;
        elapsed = t;
        if sc.record.interval.is_some() {
            record_series(&batch, &mut series);
        }
        if sc.record.events {
            let times = batch.time().to_vec();
            watch(&batch, &mut lift_off, &|i| times[i]);
        }
        progress(n as u64);
    }
    let ev = batch.evaluate();
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        let energy = batch.energy(i).unwrap_or(f64::NAN);
        let mut flags = batch.status()[i] | ev.status[i];
        if !energy.is_finite() {
            // A finite state whose energy overflows is not a result to trust either.
            flags |= crate::batch::status::NONFINITE_OUTPUT;
        }
        let mut row = vec![f64::from(flags), batch.time()[i]];
        if sc.simulation.assemble {
            row.push(f64::from(u8::from(assembly_failed[i])));
        }
        for b in &bodies {
            row.extend_from_slice(&batch.q(*b)?[i]);
            row.extend_from_slice(&batch.u(*b)?[i]);
        }
        row.push(energy);
        row.push(energy - energy0[i]);
        // Work on the free bodies since the start (Batch::work): what the energy change
        // should be; the rest is integration error.
        let [driven, applied] = batch.work()[i];
        row.push(driven);
        row.push(applied);
        row.push(energy - energy0[i] - driven - applied);
        let (mut pe, mut ve) = (0.0f64, 0.0f64);
        for ce in &ev.constraints {
            pe = ce
                .position_errors_of(i)?
                .iter()
                .fold(pe, |m, x| m.max(x.abs()));
            ve = ce
                .velocity_errors_of(i)?
                .iter()
                .fold(ve, |m, x| m.max(x.abs()));
        }
        row.push(pe);
        row.push(ve);
        let outs = contact_outputs(sc, &ev, i);
        let mut slot = 0;
        for (c, out) in sc.constraints.iter().zip(outs) {
            row.extend(out);
            if c.has_normal_force() && sc.record.events {
                row.push(lift_off[i][slot]);
            }
            if c.has_normal_force() {
                slot += 1;
            }
        }
        rows.push(row);
    }
    Ok((rows, series))
}
