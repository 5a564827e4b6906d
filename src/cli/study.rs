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
use super::prescribed::PrescribedDraw;
use super::sample::{Scalar, draw};
use super::scenario::{BodySpec, ConstraintSpec, Flag, InertiaSpec, MAX_RECORD_SAMPLES, Scenario};
use crate::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use crate::backend::Backend;
use crate::batch::Batch;
use crate::constraints::{PointOnPlaneContact, PointToGround, SphereOnPlaneContact};
use crate::gpu::{GpuDevice, Precision};
use crate::integrate::Stepper;
use crate::math::quaternion_from_rotation_vector;
use crate::model::{Baumgarte, BodyId, ConstraintId, GROUND, SystemTemplate};

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

/// One body's draws.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyDraw {
    /// Mass.
    pub mass: f64,
    /// COM offset.
    pub com: [f64; 3],
    /// Central inertia `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]`.
    pub inertia: [f64; 6],
    /// `[e0, e1, e2, e3, x, y, z]`.
    pub q: [f64; 7],
    /// `[w, v]` in Ground.
    pub u: [f64; 6],
}

/// One constraint's draws.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintDraw {
    /// The structural flag (rolling rows).
    pub rolling: bool,
    /// Parameter values by name (`baumgarte_time`: the Baumgarte time constant).
    pub params: Vec<(&'static str, Vec<f64>)>,
}

/// One instance's draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// Gravity.
    pub gravity: [f64; 3],
    /// Per body.
    pub bodies: Vec<BodyDraw>,
    /// Per prescribed body.
    pub prescribed: Vec<PrescribedDraw>,
    /// Per constraint.
    pub constraints: Vec<ConstraintDraw>,
    /// The random inputs, in [`input_names`] order.
    pub inputs: Vec<f64>,
}

/// Draws instance `index`; `names` collects the recorded input names when given.
pub fn sample(sc: &Scenario, index: usize, mut names: Option<&mut Vec<String>>) -> Sampled {
    let seed = sc.seed;
    let mut inputs = Vec::new();
    let vars: Vec<f64> = sc
        .vars
        .iter()
        .map(|(name, s)| draw(s, seed, &format!("vars.{name}"), index, &[]))
        .collect();
    for ((name, s), v) in sc.vars.iter().zip(&vars) {
        if s.is_random() {
            inputs.push(*v);
            if let Some(n) = names.as_deref_mut() {
                n.push(name.clone());
            }
        }
    }
    let mut take = |s: &Scalar, path: String| -> f64 {
        let v = draw(s, seed, &path, index, &vars);
        if matches!(
            s,
            Scalar::Uniform(..) | Scalar::Normal(..) | Scalar::LogUniform(..) | Scalar::Choice(_)
        ) {
            inputs.push(v);
            if let Some(n) = names.as_deref_mut() {
                n.push(path);
            }
        }
        v
    };
    let take3 =
        |take: &mut dyn FnMut(&Scalar, String) -> f64, s: &[Scalar; 3], path: &str| -> [f64; 3] {
            [0, 1, 2].map(|k| take(&s[k], format!("{path}.{}", ["x", "y", "z"][k])))
        };
    let gravity = take3(&mut take, &sc.gravity, "gravity");
    let bodies = sc
        .bodies
        .iter()
        .map(|b: &BodySpec| {
            let p = |f: &str| format!("{}.{f}", b.name);
            let mass = take(&b.mass, p("mass"));
            let com = take3(&mut take, &b.com, &p("com"));
            let inertia = match &b.inertia {
                InertiaSpec::Full(i) => {
                    let names = ["ixx", "iyy", "izz", "ixy", "ixz", "iyz"];
                    [0, 1, 2, 3, 4, 5].map(|k| take(&i[k], p(&format!("inertia.{}", names[k]))))
                }
                InertiaSpec::Gyration(k) => {
                    let k = take(k, p("inertia.gyration"));
                    let m = mass * k * k;
                    [m, m, m, 0.0, 0.0, 0.0]
                }
                InertiaSpec::SolidSphere(r) => {
                    let r = take(r, p("inertia.solid_sphere"));
                    let m = 0.4 * mass * r * r;
                    [m, m, m, 0.0, 0.0, 0.0]
                }
            };
            let position = take3(&mut take, &b.position, &p("position"));
            let rotation = take3(&mut take, &b.rotation, &p("rotation"));
            let velocity = take3(&mut take, &b.velocity, &p("velocity"));
            let angular = take3(&mut take, &b.angular_velocity, &p("angular_velocity"));
            let e = quaternion_from_rotation_vector(rotation);
            let q = [
                e[0],
                e[1],
                e[2],
                e[3],
                position[0],
                position[1],
                position[2],
            ];
            let u = [
                angular[0],
                angular[1],
                angular[2],
                velocity[0],
                velocity[1],
                velocity[2],
            ];
            BodyDraw {
                mass,
                com,
                inertia,
                q,
                u,
            }
        })
        .collect();
    let prescribed = sc.prescribed.iter().map(|p| p.draw(&mut take)).collect();
    let mut constraints = Vec::new();
    for (k, c) in sc.constraints.iter().enumerate() {
        let p = |f: &str| format!("constraint[{k}].{f}");
        let plane_frame = |take: &mut dyn FnMut(&Scalar, String) -> f64,
                           incline: &Scalar,
                           origin: &[Scalar; 3]| {
            let a = take(incline, p("incline_deg")).to_radians();
            let o = take3(take, origin, &p("plane_origin"));
            vec![(0.5 * a).cos(), (0.5 * a).sin(), 0.0, 0.0, o[0], o[1], o[2]]
        };
        constraints.push(match c {
            ConstraintSpec::SphereOnPlane {
                rolling,
                radius,
                sphere_center,
                incline_deg,
                plane_origin,
                ..
            } => {
                let rolling = match rolling {
                    Flag::Fixed(b) => *b,
                    Flag::Either => take(&Scalar::Choice(vec![0.0, 1.0]), p("rolling")) == 1.0,
                };
                let r = take(radius, p("radius"));
                let center = take3(&mut take, sphere_center, &p("sphere_center"));
                let frame = plane_frame(&mut take, incline_deg, plane_origin);
                ConstraintDraw {
                    rolling,
                    params: vec![
                        ("plane_frame", frame),
                        ("sphere_center", center.to_vec()),
                        ("radius", vec![r]),
                    ],
                }
            }
            ConstraintSpec::PointOnPlane {
                follower_point,
                incline_deg,
                plane_origin,
                ..
            } => {
                let point = take3(&mut take, follower_point, &p("follower_point"));
                let frame = plane_frame(&mut take, incline_deg, plane_origin);
                ConstraintDraw {
                    rolling: false,
                    params: vec![("plane_frame", frame), ("follower_point", point.to_vec())],
                }
            }
            ConstraintSpec::PointToGround {
                point,
                baumgarte_time,
                ..
            } => {
                let point = take3(&mut take, point, &p("point"));
                let mut params = vec![("point", point.to_vec())];
                if let Some(t) = baumgarte_time {
                    params.push(("baumgarte_time", vec![take(t, p("baumgarte_time"))]));
                }
                ConstraintDraw {
                    rolling: false,
                    params,
                }
            }
        });
    }
    Sampled {
        gravity,
        bodies,
        prescribed,
        constraints,
        inputs,
    }
}

/// Names of the recorded random inputs, in [`Sampled::inputs`] order (the same for every
/// instance: draws vary, structure does not).
pub fn input_names(sc: &Scenario) -> Vec<String> {
    let mut names = Vec::new();
    sample(sc, 0, Some(&mut names));
    names
}

/// Builds the template of one structural variant (`rolling[k]` per constraint).
fn template(
    sc: &Scenario,
    rolling: &[bool],
) -> Result<(SystemTemplate, Vec<BodyId>, Vec<ConstraintId>), CliError> {
    let mut t = SystemTemplate::new();
    let bodies: Vec<BodyId> = sc
        .bodies
        .iter()
        .map(|b| t.add_free_body(b.name.clone()))
        .collect();
    // Constraints index free bodies, then prescribed ones.
    let mut all = bodies.clone();
    for p in &sc.prescribed {
        all.push(match p.law()? {
            Some(law) => t.add_driven_body_arc(p.name.clone(), law),
            None => t.add_prescribed_body(p.name.clone()),
        });
    }
    let body = |k: &Option<usize>| k.map_or(GROUND, |k| all[k]);
    let mut ids = Vec::new();
    for (c, rolling) in sc.constraints.iter().zip(rolling) {
        ids.push(match c {
            ConstraintSpec::SphereOnPlane { plane, body: b, .. } => {
                t.add_constraint(SphereOnPlaneContact::new(body(plane), bodies[*b], *rolling))?
            }
            ConstraintSpec::PointOnPlane { plane, body: b, .. } => {
                t.add_constraint(PointOnPlaneContact::new(body(plane), bodies[*b]))?
            }
            ConstraintSpec::PointToGround {
                body: b,
                normals,
                baumgarte_time,
                ..
            } => {
                let id = t.add_constraint(PointToGround::new(bodies[*b], [0.0; 3], normals)?)?;
                if baumgarte_time.is_some() {
                    t.set_baumgarte(id, Some(Baumgarte::default()))?;
                }
                id
            }
        });
    }
    Ok((t, bodies, ids))
}

/// Writes instance draws into a batch (`local` = position in the batch).
fn apply(
    batch: &mut Batch,
    bodies: &[BodyId],
    ids: &[ConstraintId],
    local: usize,
    s: &Sampled,
) -> crate::Result<()> {
    batch.set_gravity(local, s.gravity)?;
    for (id, b) in bodies.iter().zip(&s.bodies) {
        batch.set_mass_properties(*id, local, b.mass, b.com, b.inertia)?;
        batch.set_q(*id, local, b.q)?;
        batch.set_u(*id, local, b.u)?;
    }
    let driven = batch.template().prescribed_bodies().to_vec();
    for (id, d) in driven.iter().zip(&s.prescribed) {
        match d {
            PrescribedDraw::Constant {
                pose,
                velocity,
                acceleration,
            } => {
                batch.set_pose(*id, local, *pose)?;
                batch.set_velocity(*id, local, *velocity)?;
                batch.set_acceleration(*id, local, *acceleration)?;
            }
            PrescribedDraw::Law(values) => batch.set_motion_params(*id, local, values)?,
        }
    }
    for (id, c) in ids.iter().zip(&s.constraints) {
        for (name, values) in &c.params {
            if *name == "baumgarte_time" {
                batch.set_baumgarte_time_constant(*id, local, values[0])?;
            } else {
                batch.set_param(*id, name, local, values)?;
            }
        }
    }
    Ok(())
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
}

/// Names of the per-instance outputs after the inputs.
fn output_names(sc: &Scenario) -> Vec<String> {
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
        if c.has_normal_force() {
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
fn contact_outputs(sc: &Scenario, ev: &crate::evaluate::Evaluation, i: usize) -> Vec<Vec<f64>> {
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

/// Progress callback: `(instances × checkpoints done)`.
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// Number of progress units a shard takes (instances × checkpoints).
pub fn progress_units(sc: &Scenario, range: &std::ops::Range<usize>) -> u64 {
    (range.len() as u64) * checkpoint_count(sc) as u64
}

/// Number of checkpoints (see [`checkpoint`]); the scenario bounds it by
/// [`MAX_RECORD_SAMPLES`](super::scenario::MAX_RECORD_SAMPLES).
fn checkpoint_count(sc: &Scenario) -> usize {
    let d = sc.simulation.duration;
    match sc.record.interval {
        Some(h) => ((d / h - 1e-9).ceil().max(1.0) as usize).min(MAX_RECORD_SAMPLES),
        None if sc.record.events => 100,
        None => 1,
    }
}

/// Checkpoint `k` of `count` (1-based): a time after the start at which the state is sampled;
/// the last is the duration. Computed, not stored, so a long recording costs no memory here.
fn checkpoint(sc: &Scenario, k: usize, count: usize) -> f64 {
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
            c
        },
        series: Vec::new(),
    };
    let mut start = range.start;
    while start < range.end {
        let end = (start + CHUNK).min(range.end);
        let sampled: Vec<Sampled> = (start..end)
            .into_par_iter()
            .map(|i| sample(sc, i, None))
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
fn build(
    sc: &Scenario,
    rolling: &[bool],
    members: &[usize],
    sampled: &[Sampled],
    start: usize,
) -> Result<(Batch, Vec<BodyId>), CliError> {
    let (template, bodies, ids) = template(sc, rolling)?;
    let mut batch = Batch::new(template, members.len())?;
    for (local, k) in members.iter().enumerate() {
        apply(&mut batch, &bodies, &ids, local, &sampled[*k]).map_err(|e| CliError::Sample {
            instance: start + k,
            message: e.to_string(),
        })?;
    }
    Ok((batch, bodies))
}

/// Groups chunk-local instances by structural variant.
fn groups(sampled: &[Sampled]) -> BTreeMap<Vec<bool>, Vec<usize>> {
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
    let mut start = range.start;
    while start < range.end {
        let end = (start + CHUNK).min(range.end);
        let sampled: Vec<Sampled> = (start..end)
            .into_par_iter()
            .map(|i| sample(sc, i, None))
            .collect();
        for (rolling, members) in groups(&sampled) {
            build(sc, &rolling, &members, &sampled, start)?;
        }
        start = end;
    }
    Ok(())
}

type GroupOutput = (Vec<Vec<f64>>, Vec<(usize, Vec<f64>)>);

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
    let n = members.len();
    let mut assembly_failed = vec![false; n];
    if sc.simulation.assemble {
        let report = assemble_positions(&mut batch, &AssemblyOptions::default())?;
        for i in report.failed {
            assembly_failed[i] = true;
        }
        let report = assemble_velocities(&mut batch, None)?;
        for i in report.failed {
            assembly_failed[i] = true;
        }
    }
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
                if l[slot].is_nan() && outs[*k][0] < 0.0 {
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
