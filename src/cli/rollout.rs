//! Rollouts: chosen instances of a scenario advanced `K` times by an interval — by default the
//! scenario's integrator step ([`default_interval`]) —, with optional per-step controls
//! (applied torque and force on every free body, held over the interval), recording `q`, `u`
//! and every constraint's multipliers at each of the `K + 1` times — what `mujoco.rollout`
//! gives MPC and system-identification users, whose control period need not be the integrator
//! step. Instances are drawn and prepared exactly as a study draws and prepares them, and
//! stepped in one batch per structural variant, so a rollout's states are the study's (bit for
//! bit on the CPU) at the same times: a study recording every interval calls the integrator
//! over the same spans.

use super::CliError;
use super::instances::{FieldKeys, Sampled, sample_keyed};
use super::replay::instances_out_of_range;
use super::scenario::Scenario;
use super::study::{assemble, build, groups};
use super::unilateral::{UnilateralSetup, contacts_of};
use crate::backend::Stepper;
use crate::batch::Batch;
use crate::cpu::evaluate::InstanceSystem;
use crate::cpu::unilateral::{ContactMode, ContactRecord, contact_multipliers, run_batch_resuming};
use crate::evaluation::{Evaluation, Outputs};
use crate::step::Integrator;

/// What a rollout recorded, row-major: instance, then time, then the quantity.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    /// Instances (in the order asked).
    pub instances: usize,
    /// Steps taken (`K`); every array has `K + 1` times.
    pub steps: usize,
    /// The time (s) each rollout step covers: the interval asked for, else
    /// [`default_interval`]'s.
    pub step: f64,
    /// `q` values per instance and time: 7 per free body (quaternion, origin).
    pub nq: usize,
    /// `u` values per instance and time: 6 per free body (angular, linear velocity).
    pub nu: usize,
    /// Multipliers per instance and time: 3 per constraint, in reported `(x, y, z)` order
    /// (Simbody's sign; zeros where a row is not reported, NaN where not solvable).
    pub nm: usize,
    /// `(instances, K + 1, nq)`.
    pub q: Vec<f64>,
    /// `(instances, K + 1, nu)`.
    pub u: Vec<f64>,
    /// `(instances, K + 1, nm)`.
    pub multipliers: Vec<f64>,
}

/// A sample error of group member `k` named by its global instance.
fn global(instances: &[usize]) -> impl Fn(CliError) -> CliError + '_ {
    |e| match e {
        CliError::Sample {
            file,
            instance,
            message,
        } => CliError::Sample {
            file,
            instance: instances.get(instance).copied().unwrap_or(instance),
            message,
        },
        other => other,
    }
}

/// The time a rollout step covers when the caller names none: the integrator's step with
/// `euler` and `rk4`. Runge–Kutta–Merson (`rkm`) has no step of its own — each instance's
/// steps follow its error — so it takes the scenario's sampling interval (`[record]
/// interval`), which makes the rollout's samples the study's series, and without one
/// `max_step` (by default the whole duration).
pub fn default_interval(sc: &Scenario) -> f64 {
    match sc.simulation.options.integrator {
        Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step } => step,
        Integrator::RungeKuttaMerson { max_step, .. } => sc.record.interval.unwrap_or(max_step),
    }
}

/// Rolls out `instances` of `sc` for `steps` steps of [`default_interval`]; `controls`, when
/// given, holds per instance, step and free body `[torque (3), force (3)]` in Ground
/// (`instances × steps × bodies × 6`).
pub fn rollout(
    sc: &Scenario,
    instances: &[usize],
    steps: usize,
    controls: Option<&[f64]>,
) -> Result<Rollout, CliError> {
    rollout_every(sc, instances, steps, None, controls)
}

/// [`rollout`] with each step covering `interval` seconds (`None`: [`default_interval`]): the
/// integrator takes its own steps within it (a fixed step is shortened to land on the
/// interval's end), and `controls` are held over it. `interval` must be a finite number > 0
/// with `steps × interval` finite.
pub fn rollout_every(
    sc: &Scenario,
    instances: &[usize],
    steps: usize,
    interval: Option<f64>,
    controls: Option<&[f64]>,
) -> Result<Rollout, CliError> {
    // Named as the library and Python call it (`simbatch render`'s flag is `--instances`).
    if let Some((value, accepted)) = instances_out_of_range(sc, instances) {
        return Err(crate::Error::InvalidOption {
            option: "instances",
            value,
            accepted,
        }
        .into());
    }
    if steps == 0 || steps > 10_000_000 {
        return Err(CliError::TooLarge {
            field: "steps".into(),
            message: format!("{steps}; accepted: 1 … 10 000 000"),
        });
    }
    let n = instances.len();
    let bodies = sc.bodies.len();
    let (nq, nu, nm) = (7 * bodies, 6 * bodies, 3 * sc.constraints.len());
    if let Some(c) = controls
        && c.len() != n * steps * bodies * 6
    {
        return Err(CliError::TooLarge {
            field: "controls".into(),
            message: format!(
                "{} values; accepted: instances × steps × free bodies × 6 = {n} × {steps} × \
                 {bodies} × 6 (torque then force, in Ground)",
                c.len()
            ),
        });
    }
    let values = (n as u128) * (steps as u128 + 1) * (nq + nu + nm) as u128;
    let need = values * 8;
    if need > crate::resources::memory_available().unwrap_or(u128::MAX / 2) {
        return Err(CliError::TooLarge {
            field: "instances × steps".into(),
            message: format!(
                "{n} × {} samples would need {:.1} GiB; roll out fewer instances or steps at once",
                steps + 1,
                need as f64 / (1u64 << 30) as f64
            ),
        });
    }
    let step = interval.unwrap_or_else(|| default_interval(sc));
    if !(step > 0.0 && (step * steps as f64).is_finite()) {
        return Err(crate::Error::InvalidOption {
            option: "interval",
            value: format!("{step:?}"),
            accepted: format!(
                "a finite number > 0 (s) whose {steps} steps span a finite time; default: the \
                 scenario's integrator step (rkm: its [record] interval, else max_step)"
            ),
        }
        .into());
    }
    let times = steps + 1;
    let mut out = Rollout {
        instances: n,
        steps,
        step,
        nq,
        nu,
        nm,
        q: vec![f64::NAN; n * times * nq],
        u: vec![f64::NAN; n * times * nu],
        multipliers: vec![f64::NAN; n * times * nm],
    };
    let keys = FieldKeys::of(sc);
    let sampled: Vec<Sampled> = instances
        .iter()
        .map(|&i| sample_keyed(sc, i, &keys))
        .collect();
    for (rolling, members) in groups(&sampled) {
        let (mut batch, ids) =
            build(sc, &rolling, &members, &sampled, 0).map_err(global(instances))?;
        let unilateral = if sc.constraints.iter().any(|c| c.unilateral().is_some()) {
            let setup = UnilateralSetup::new(sc, &mut batch, &members, &sampled, 0)
                .map_err(global(instances))?;
            Some(setup)
        } else {
            assemble(sc, &mut batch)?;
            None
        };
        let mut stepper = Stepper::new(sc.simulation.options)?;
        let mut modes: Vec<Vec<ContactMode>> = unilateral
            .as_ref()
            .map(|s| vec![vec![ContactMode::Stick; s.ids.len()]; members.len()])
            .unwrap_or_default();
        // What each instance's last call left its contacts in (the next resumes from it).
        let mut previous: Vec<Option<Vec<ContactRecord>>> = vec![None; members.len()];
        let mut evaluation = Evaluation::default();
        // The multipliers each instance's last run ended with (`EventRun::multipliers`), where
        // it ran; else (the start, a failed or halted instance) they are found at its state.
        let mut ended: Vec<Option<Option<Vec<f64>>>> = vec![None; members.len()];
        // Per instance, per constraint and report slot: the row of the instance's system the
        // slot reads (None: 0), from its system's row layout, which a rollout does not change.
        let mut slot_rows: Vec<Option<Vec<[Option<usize>; 3]>>> = vec![None; members.len()];
        for k in 0..times {
            if k > 0 {
                // From time (k − 1) h to k h, as a study recording every step times its calls.
                let duration = k as f64 * step - (k - 1) as f64 * step;
                if let Some(c) = controls {
                    for (local, &j) in members.iter().enumerate() {
                        for (b, id) in ids.iter().enumerate() {
                            let at = ((j * steps + k - 1) * bodies + b) * 6;
                            batch.set_applied_torque(*id, local, [c[at], c[at + 1], c[at + 2]])?;
                            batch.set_applied_force(
                                *id,
                                local,
                                [c[at + 3], c[at + 4], c[at + 5]],
                            )?;
                        }
                    }
                }
                match &unilateral {
                    None => {
                        stepper.advance(&mut batch, duration)?;
                    }
                    Some(setup) => {
                        let contacts = |i: usize| contacts_of(&setup.ids, &setup.coefficients[i]);
                        let runs = run_batch_resuming(
                            &mut batch,
                            &contacts,
                            duration,
                            &setup.events,
                            &previous,
                        )?;
                        for (((m, last), end), run) in modes
                            .iter_mut()
                            .zip(&mut previous)
                            .zip(&mut ended)
                            .zip(runs)
                        {
                            *end = None;
                            if let Some(run) = run {
                                *m = run.contacts.iter().map(|r| r.mode).collect();
                                *last = Some(run.contacts);
                                *end = Some(run.multipliers);
                            }
                        }
                    }
                }
            }
            record(
                &batch,
                &members,
                &ids,
                k,
                times,
                &mut out,
                |batch, local, lambda| match &unilateral {
                    None => {
                        if local == 0 {
                            batch.evaluate_outputs_into(Outputs::DYNAMICS, &mut evaluation);
                        }
                        for (c, ce) in evaluation.constraints.iter().enumerate() {
                            if let Ok(m) = ce.multipliers_of(local) {
                                for (slot, v) in m.iter().take(3).enumerate() {
                                    lambda[3 * c + slot] = *v;
                                }
                            }
                        }
                    }
                    Some(setup) => {
                        // Borrowed where the run left them: no copy per instance and step.
                        let found;
                        let all = match &ended[local] {
                            Some(end) => end.as_deref(),
                            None => {
                                found = contact_multipliers(
                                    batch,
                                    local,
                                    &contacts_of(&setup.ids, &setup.coefficients[local]),
                                    &modes[local],
                                    &setup.events,
                                )
                                .map(|(m, _)| m)
                                .ok();
                                found.as_deref()
                            }
                        };
                        if slot_rows[local].is_none() {
                            slot_rows[local] = batch
                                .instance_system(local)
                                .ok()
                                .map(|system| report_rows(batch, &system));
                        }
                        if let (Some(all), Some(rows)) = (all, &slot_rows[local]) {
                            for (c, rows) in rows.iter().enumerate() {
                                for (s, row) in rows.iter().enumerate() {
                                    lambda[3 * c + s] =
                                        row.and_then(|r| all.get(r).copied()).unwrap_or(0.0);
                                }
                            }
                        }
                    }
                },
            )?;
        }
    }
    Ok(out)
}

/// Per constraint of `system`'s template and report slot (at most three), the row of `system`
/// the slot's multiplier is in: `None` where the slot reports nothing or the constraint is
/// disabled (its multipliers are 0), as `ConstraintRows::multipliers_in` reads them.
fn report_rows(batch: &Batch, system: &InstanceSystem) -> Vec<[Option<usize>; 3]> {
    batch
        .template()
        .constraints()
        .iter()
        .zip(&system.constraints)
        .map(|(slot, rows)| {
            let mut out = [None; 3];
            for (o, r) in out.iter_mut().zip(slot.constraint.report_slots()) {
                *o = r.filter(|_| rows.enabled).map(|r| rows.offset + r);
            }
            out
        })
        .collect()
}

/// Records time `k` of every member of `batch` into `out` (`multipliers` fills one instance's
/// multipliers, pre-set to NaN).
fn record(
    batch: &Batch,
    members: &[usize],
    ids: &[crate::model::BodyId],
    k: usize,
    times: usize,
    out: &mut Rollout,
    mut multipliers: impl FnMut(&Batch, usize, &mut [f64]),
) -> Result<(), CliError> {
    let (nq, nu, nm) = (out.nq, out.nu, out.nm);
    for (local, &j) in members.iter().enumerate() {
        let row = j * times + k;
        for (b, id) in ids.iter().enumerate() {
            out.q[row * nq + 7 * b..row * nq + 7 * b + 7].copy_from_slice(&batch.q(*id)?[local]);
            out.u[row * nu + 6 * b..row * nu + 6 * b + 6].copy_from_slice(&batch.u(*id)?[local]);
        }
        multipliers(batch, local, &mut out.multipliers[row * nm..(row + 1) * nm]);
    }
    Ok(())
}
