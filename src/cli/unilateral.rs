//! A study group whose contacts are unilateral (`contact = "unilateral"`): every instance runs
//! event-driven from checkpoint to checkpoint through `backend::UnilateralRunner` — on the GPU's
//! event kernels when the study runs on a GPU and the template is within their reach (up to 8
//! contacts beside up to 12 bilateral rows), else on the CPU path — with its own drawn
//! restitution and friction, and reports per contact its final mode, impacts, first impact, last
//! mode change and the energy its impacts took.

use super::CliError;
use super::instances::Sampled;
use super::scenario::{FrictionSpec, Scenario};
use super::study::{GroupOutput, Progress, Runner, checkpoint, checkpoint_count};
use crate::backend::UnilateralRunner;
use crate::batch::{Batch, status};
use crate::constraints::Params;
use crate::cpu::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use crate::cpu::evaluate::BaumgarteMode;
use crate::cpu::unilateral::{
    Coefficients, ContactMode, ContactRecord, EventOptions, InstanceContacts, UnilateralContact,
    contact_multipliers,
};
use crate::gpu::GpuOptions;
use crate::model::{BodyId, ConstraintId};
use crate::step::{Integrator, Stabilization};

/// The per-contact result columns of a unilateral contact, after `c{k}.`.
pub const CONTACT_OUTPUTS: [&str; 7] = [
    "separation",
    "mode",
    "impacts",
    "first_impact_time",
    "last_mode_change_time",
    "impact_loss",
    "friction_loss",
];

/// A mode as a number in results: 0 open, 1 sticking (rolling), 2 sliding.
pub fn mode_code(mode: ContactMode) -> f64 {
    f64::from(mode.code().0)
}

/// Runs one group (every constraint a unilateral contact; the scenario checks it), on the
/// GPU's event kernels when `runner` is a GPU and the template is within their reach, else on
/// the CPU's event path (saying why on the log).
#[allow(clippy::too_many_arguments)]
pub(super) fn run_group(
    sc: &Scenario,
    mut batch: Batch,
    bodies: &[BodyId],
    members: &[usize],
    sampled: &[Sampled],
    start: usize,
    runner: &Runner,
    progress: Progress<'_>,
) -> Result<GroupOutput, CliError> {
    let n = members.len();
    let setup = UnilateralSetup::new(sc, &mut batch, members, sampled, start)?;
    let UnilateralSetup {
        ids,
        coefficients,
        events,
        assembly_failed,
    } = setup;
    let contacts = |i: usize| contacts_of(&ids, &coefficients[i]);
    let mut events_runner = match runner {
        Runner::Gpu(device) => UnilateralRunner::gpu(
            device.clone(),
            &batch,
            &ids,
            sc.simulation.precision,
            GpuOptions::default(),
        )?,
        Runner::Cpu => UnilateralRunner::cpu(&ids),
    };
    if let Some(note) = events_runner.note() {
        log::warn!("simbatch: {note}");
    }
    let energy0: Vec<f64> = (0..n)
        .map(|i| batch.energy(i).unwrap_or(f64::NAN))
        .collect();
    let mut records: Vec<Vec<Option<ContactRecord>>> = vec![vec![None; ids.len()]; n];
    let in_series: Vec<usize> = (0..n)
        .filter(|i| start + members[*i] < sc.record.series_instances)
        .collect();
    let mut series = Vec::new();
    let record_series = |batch: &Batch,
                         records: &[Vec<Option<ContactRecord>>],
                         series: &mut Vec<(usize, Vec<f64>)>| {
        for &i in &in_series {
            let mut row = vec![batch.time()[i]];
            for b in bodies {
                let q = batch.q(*b).map(|q| q[i]).unwrap_or([f64::NAN; 7]);
                row.extend_from_slice(&q[4..7]);
            }
            row.push(batch.energy(i).unwrap_or(f64::NAN));
            for r in &records[i] {
                row.push(r.map_or(f64::NAN, |r| mode_code(r.mode)));
            }
            series.push((start + members[i], row));
        }
    };
    if sc.record.interval.is_some() {
        record_series(&batch, &records, &mut series);
    }
    // Per instance and constraint, when a bilateral plane contact would first have pulled.
    let mut lift_off = vec![vec![f64::NAN; sc.constraints.len()]; n];
    let watch_lift_off =
        |batch: &Batch, records: &[Vec<Option<ContactRecord>>], lift_off: &mut [Vec<f64>]| {
            let watched = sc
                .constraints
                .iter()
                .any(|c| c.unilateral().is_none() && c.has_normal_force());
            if !sc.record.events || !watched {
                return;
            }
            for (i, times) in lift_off.iter_mut().enumerate() {
                let state = batch.state_of(i);
                let system = batch.assemble_with(i, &state, BaumgarteMode::Off);
                let outs =
                    bilateral_outputs(batch, i, &system, &ids, &contacts(i), &records[i], &events);
                let plane_contacts = sc
                    .constraints
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.unilateral().is_none());
                for ((k, c), out) in plane_contacts.zip(&outs) {
                    if c.has_normal_force()
                        && times[k].is_nan()
                        && super::study::pulls(batch, k, i, -out.reported[2])
                    {
                        times[k] = state.time;
                    }
                }
            }
        };
    watch_lift_off(&batch, &records, &mut lift_off);
    let count = checkpoint_count(sc);
    let mut elapsed = 0.0;
    for k in 1..=count {
        let t = checkpoint(sc, k, count);
        // Each instance resumes in the modes its last call left it in.
        let previous: Vec<Option<Vec<ContactRecord>>> = records
            .iter()
            .map(|per| per.iter().copied().collect())
            .collect();
        let call = events_runner.run(&mut batch, &coefficients, t - elapsed, &events, &previous)?;
        if events_runner.on_gpu() && call.handed_to_cpu() > 0 {
            log::info!(
                "checkpoint {k}: {} instances the GPU's event kernel withheld ran on the CPU",
                call.handed_to_cpu()
            );
        }
        let runs = call.records;
        elapsed = t;
        for (per, run) in records.iter_mut().zip(runs) {
            let Some(run) = run else { continue };
            for (slot, new) in per.iter_mut().zip(run) {
                *slot = Some(slot.map_or(new, |old| old.then(new)));
            }
        }
        watch_lift_off(&batch, &records, &mut lift_off);
        if sc.record.interval.is_some() {
            record_series(&batch, &records, &mut series);
        }
        progress(n as u64);
    }

    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        let energy = batch.energy(i).unwrap_or(f64::NAN);
        let mut flags = batch.status()[i];
        if !energy.is_finite() {
            flags |= status::NONFINITE_OUTPUT;
        }
        let mut row = vec![f64::from(flags), batch.time()[i]];
        if sc.simulation.assemble {
            row.push(f64::from(u8::from(assembly_failed[i])));
        }
        for b in bodies {
            row.extend_from_slice(&batch.q(*b)?[i]);
            row.extend_from_slice(&batch.u(*b)?[i]);
        }
        let [driven, applied] = batch.work()[i];
        // What the contacts took (§7): with it, energy_error is the integration error alone.
        let lost: f64 = records[i]
            .iter()
            .flatten()
            .map(|r| r.impact_loss + r.friction_loss)
            .sum();
        row.extend([
            energy,
            energy - energy0[i],
            driven,
            applied,
            energy - energy0[i] - driven - applied + lost,
        ]);
        // Violations of what the contacts enforce: penetration, and the speed of enforced rows;
        // the bilateral constraints' own errors beside them.
        let state = batch.state_of(i);
        let system = batch.assemble_with(i, &state, BaumgarteMode::Off);
        let space = InstanceContacts::new(&system, batch.template(), &ids);
        let (mut penetration, mut speed) = (0.0f64, 0.0f64);
        let mut separations = vec![f64::NAN; ids.len()];
        if let Ok(space) = &space {
            for (c, rows_of) in space.space.contacts().iter().enumerate() {
                let s = space.separation[c];
                separations[c] = s;
                penetration = penetration.max(-s);
                let v = |r: usize| space.velocity[rows_of[r]];
                match records[i][c].map(|r| r.mode) {
                    Some(ContactMode::Stick) => speed = speed.max(v(0).hypot(v(1)).max(v(2).abs())),
                    Some(ContactMode::Slide { .. }) => speed = speed.max(v(2).abs()),
                    _ => {}
                }
            }
        }
        let bilateral =
            bilateral_outputs(&batch, i, &system, &ids, &contacts(i), &records[i], &events);
        let drift = bilateral
            .iter()
            .fold(0.0f64, |m, b| m.max(b.position_error));
        if drift > events.constraint_tolerance {
            // A bilateral constraint left beyond the tolerance: flagged, never reported as fine.
            row[0] = f64::from(flags | status::CONSTRAINT_VIOLATED);
        }
        row.push(penetration.max(drift));
        row.push(bilateral.iter().fold(speed, |m, b| m.max(b.velocity_error)));
        let mut unilateral_slot = 0;
        let mut bilateral_slot = 0;
        for (k, c) in sc.constraints.iter().enumerate() {
            let nan = f64::NAN;
            if c.unilateral().is_none() {
                let b = &bilateral[bilateral_slot];
                bilateral_slot += 1;
                if c.has_normal_force() {
                    row.push(-b.reported[2]);
                    row.push(b.separation);
                    if sc.record.events {
                        row.push(lift_off[i][k]);
                    }
                } else {
                    row.extend(b.reported);
                }
                continue;
            }
            let u = unilateral_slot;
            unilateral_slot += 1;
            match records[i][u] {
                Some(r) => row.extend([
                    separations[u],
                    mode_code(r.mode),
                    f64::from(r.impacts),
                    r.first_impact.unwrap_or(nan),
                    r.last_mode_change.unwrap_or(nan),
                    r.impact_loss,
                    r.friction_loss,
                ]),
                None => row.extend([separations[u], nan, nan, nan, nan, nan, nan]),
            }
        }
        rows.push(row);
    }
    Ok((rows, series))
}

/// The step a study with unilateral contacts takes between events: RK4's fixed `step` (of
/// `euler` and `rk4`), or the longest adaptive step, `max_step`, of `rkm`, whose accuracy
/// `UnilateralSetup` passes on as error control (`EventOptions::accuracy`).
pub(crate) fn event_step(options: &crate::step::StepOptions) -> f64 {
    match options.integrator {
        Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step } => step,
        Integrator::RungeKuttaMerson { max_step, .. } => max_step,
    }
}

/// What stepping a group of unilateral instances needs, prepared as a study prepares it (the
/// render command replays instances through the same preparation).
pub(super) struct UnilateralSetup {
    /// The contacts (every constraint of the scenario).
    pub ids: Vec<ConstraintId>,
    /// Per instance of the batch, per contact, the drawn coefficients.
    pub coefficients: Vec<Vec<Coefficients>>,
    /// Event-driven stepping options from the scenario's integrator.
    pub events: EventOptions,
    /// Per instance, whether lifting it out of its planes failed (`assemble = true`).
    pub assembly_failed: Vec<bool>,
}

/// Constraint `c`'s contact coefficients as `sampled` (global instance `instance`) drew them,
/// checked (`e ∈ [0, 1]`, `μ_s ≥ μ_d ≥ 0`): a draw outside is named by the scenario's key
/// (`constraint[0].restitution`, `constraint[0].friction` or its `static` / `dynamic` part),
/// with the value and the accepted range. The dry pass (`study::build`) checks every instance
/// with it before any work, as the run does.
pub(super) fn drawn_coefficients(
    sc: &Scenario,
    sampled: &Sampled,
    c: usize,
    instance: usize,
) -> Result<Coefficients, CliError> {
    let [e, mu_s, mu_d] = sampled.constraints[c].unilateral.unwrap_or([0.0; 3]);
    Coefficients::new(e, mu_s, mu_d).map_err(|err| {
        let split = matches!(
            sc.constraints[c].unilateral().map(|u| &u.friction),
            Some(FrictionSpec::Split { .. })
        );
        let message = match err {
            crate::Error::BadChoice {
                what,
                value,
                accepted,
            } => {
                let key = match (what, split) {
                    ("restitution", _) => "restitution",
                    ("static friction", true) => "friction.static",
                    ("dynamic friction", true) => "friction.dynamic",
                    _ => "friction",
                };
                format!("invalid constraint[{c}].{key}: got {value}; accepted: {accepted}")
            }
            other => format!("constraint[{c}]: {other}"),
        };
        CliError::Sample {
            file: sc.file.clone(),
            instance,
            message,
        }
    })
}

impl UnilateralSetup {
    /// Checks every instance's coefficients (a drawn μ_s below μ_d is refused, with its
    /// instance) and, with `assemble = true`, lifts instances out of their planes.
    pub(super) fn new(
        sc: &Scenario,
        batch: &mut Batch,
        members: &[usize],
        sampled: &[Sampled],
        start: usize,
    ) -> Result<Self, CliError> {
        let ids: Vec<ConstraintId> = sc
            .constraints
            .iter()
            .enumerate()
            .filter(|(_, c)| c.unilateral().is_some())
            .map(|(k, _)| ConstraintId(k))
            .collect();
        let mut coefficients = Vec::with_capacity(members.len());
        for &k in members {
            let mut per = Vec::with_capacity(ids.len());
            for id in &ids {
                let c = id.0;
                per.push(drawn_coefficients(sc, &sampled[k], c, start + k)?);
            }
            coefficients.push(per);
        }
        let options = &sc.simulation.options;
        let events = EventOptions {
            step: event_step(options),
            accuracy: match options.integrator {
                Integrator::RungeKuttaMerson { accuracy, .. } => Some(accuracy),
                _ => None,
            },
            // §8's tolerances derive from the constraint tolerance: projection's, else 1e-4.
            constraint_tolerance: match options.stabilization {
                Stabilization::Projection { tolerance } => tolerance,
                _ => 1e-4,
            },
            ..EventOptions::default()
        };
        let assembly_failed = if sc.simulation.assemble {
            lift_out_of_planes(batch, &ids, ids.len() < sc.constraints.len())?
        } else {
            vec![false; batch.len()]
        };
        Ok(Self {
            ids,
            coefficients,
            events,
            assembly_failed,
        })
    }
}

/// The unilateral contacts of one instance.
pub(super) fn contacts_of(
    ids: &[ConstraintId],
    coefficients: &[Coefficients],
) -> Vec<UnilateralContact> {
    ids.iter()
        .zip(coefficients)
        .map(|(id, k)| UnilateralContact {
            constraint: *id,
            coefficients: *k,
        })
        .collect()
}

/// What a bilateral constraint beside unilateral contacts reports at the end of a run.
struct BilateralOutput {
    /// Multipliers in reported `(x, y, z)` order (Simbody's sign).
    reported: [f64; 3],
    /// The kind's separation (plane contacts).
    separation: f64,
    /// Largest |position error| of its rows.
    position_error: f64,
    /// Largest |velocity error| of its rows.
    velocity_error: f64,
}

/// Every bilateral constraint's outputs for instance `i` at its stored state (`system` its
/// assembly there), with the multipliers of the contacts' modes (`records`; NaN when the
/// instance cannot be solved).
fn bilateral_outputs(
    batch: &Batch,
    i: usize,
    system: &crate::cpu::evaluate::InstanceSystem,
    ids: &[ConstraintId],
    contacts: &[UnilateralContact],
    records: &[Option<ContactRecord>],
    events: &EventOptions,
) -> Vec<BilateralOutput> {
    if ids.len() == batch.template().constraints().len() {
        // Every constraint is a contact: nothing bilateral to report (and nothing to solve).
        return Vec::new();
    }
    let modes: Vec<ContactMode> = records
        .iter()
        .map(|r| r.map_or(ContactMode::Stick, |r| r.mode))
        .collect();
    let multipliers = contact_multipliers(batch, i, contacts, &modes, events)
        .map(|(m, _)| m)
        .ok();
    let template = batch.template();
    let mut out = Vec::new();
    for (k, ((slot, cols), rows)) in template
        .constraints()
        .iter()
        .zip(batch.all_constraint_columns())
        .zip(&system.constraints)
        .enumerate()
    {
        if ids.contains(&ConstraintId(k)) {
            continue;
        }
        let c = &slot.constraint;
        let n = rows.rows.len();
        let lambda = match &multipliers {
            Some(m) => rows.multipliers_in(m),
            None => vec![f64::NAN; n],
        };
        let mut reported = [0.0; 3];
        for (value, s) in reported.iter_mut().zip(c.report_slots()) {
            if let Some(r) = s {
                *value = lambda.get(*r).copied().unwrap_or(f64::NAN);
            }
        }
        let kin: Vec<_> = c
            .bodies()
            .iter()
            .map(|b| system.kinematics[b.index()])
            .collect();
        let report = c.report(&Params::of(&cols.params, i), &kin, &lambda);
        let (mut pe, mut ve) = (0.0f64, 0.0f64);
        if rows.enabled {
            for r in 0..n {
                pe = pe.max(system.position_errors[rows.offset + r].abs());
                ve = ve.max(system.velocity_errors[rows.offset + r].abs());
            }
        }
        out.push(BilateralOutput {
            reported,
            separation: report.separation,
            position_error: pe,
            velocity_error: ve,
        });
    }
    out
}

/// `assemble = true` with unilateral contacts: an instance drawn with a contact inside its plane
/// is moved out (position assembly on the normal rows of the contacts that penetrate, the
/// others left out, and on every bilateral constraint); a contact drawn apart or touching stays
/// as drawn. Velocities are assembled onto the bilateral constraints alone (`bilateral`: there
/// are some), in the mass-matrix norm; a body may start approaching or leaving its plane.
/// Returns the instances whose assembly failed.
fn lift_out_of_planes(
    batch: &mut Batch,
    ids: &[ConstraintId],
    bilateral: bool,
) -> Result<Vec<bool>, CliError> {
    let n = batch.len();
    let mut penetrating = vec![vec![false; ids.len()]; n];
    for (i, flags) in penetrating.iter_mut().enumerate() {
        let state = batch.state_of(i);
        let system = batch.assemble_with(i, &state, BaumgarteMode::Off);
        if let Ok(space) = InstanceContacts::new(&system, batch.template(), ids) {
            for (flag, s) in flags.iter_mut().zip(&space.separation) {
                *flag = *s < 0.0;
            }
        }
    }
    for (i, flags) in penetrating.iter().enumerate() {
        for (id, flag) in ids.iter().zip(flags) {
            batch.set_enabled(*id, i, *flag)?;
        }
    }
    let report = assemble_positions(batch, &AssemblyOptions::default())?;
    let mut failed = vec![false; n];
    for i in report.failed {
        failed[i] = true;
    }
    if bilateral {
        for i in 0..n {
            for id in ids {
                batch.set_enabled(*id, i, false)?;
            }
        }
        for i in assemble_velocities(batch, None)?.failed {
            failed[i] = true;
        }
    }
    for i in 0..n {
        for id in ids {
            batch.set_enabled(*id, i, true)?;
        }
    }
    Ok(failed)
}
