//! Replaying chosen instances of a study: every instance's inputs are drawn from (seed, field,
//! instance index) alone, so any instance can be simulated again from the study's manifest
//! exactly as the study ran it, without having been recorded — same draws, same preparation
//! (assembly, lifting out of planes), same stepping from checkpoint to checkpoint on the f64
//! CPU path. Frames between checkpoints are taken on a copy that steps on to them, so the
//! replayed trajectory through the checkpoints, and the final state, are the study's own (bit
//! for bit when the study ran on the CPU).

use super::CliError;
use super::instances::{input_names, sample};
use super::scenario::{MAX_RECORD_SAMPLES, Scenario};
use super::study::{assemble, build, checkpoint, checkpoint_count};
use super::unilateral::{UnilateralSetup, contacts_of};
use crate::backend::Stepper;
use crate::batch::Batch;
use crate::cpu::unilateral::{
    ContactMode, ContactRecord, EventOptions, UnilateralContact, contact_multipliers,
    run_batch_resuming,
};
use crate::render::{InstanceFrame, Scene, Track, capture, capture_with, contact_states};

/// Most frames one replay takes.
pub const MAX_FRAMES: usize = MAX_RECORD_SAMPLES;

/// Frame times `0, h, 2h, …` and the duration.
pub fn frame_times(duration: f64, interval: f64) -> Result<Vec<f64>, CliError> {
    if !(interval.is_finite() && interval > 0.0) {
        return Err(CliError::Render(format!(
            "--interval {interval}: accepted: a time > 0 in seconds"
        )));
    }
    let count = (duration / interval - 1e-9).ceil().max(0.0);
    if count > MAX_FRAMES as f64 {
        return Err(CliError::Render(format!(
            "--interval {interval}: {count} frames over {duration} s; accepted: at most \
             {MAX_FRAMES} frames (a longer interval)"
        )));
    }
    let count = count as usize;
    let mut times: Vec<f64> = (0..count).map(|k| k as f64 * interval).collect();
    times.push(duration);
    Ok(times)
}

/// The first of `instances` (global indices) the study `sc` does not have, as the value given
/// and what is accepted; `None` when every index is in range and at least one is given.
pub fn instances_out_of_range(sc: &Scenario, instances: &[usize]) -> Option<(String, String)> {
    if instances.is_empty() {
        return Some(("none".into(), "indices such as 3,4711".into()));
    }
    let bad = instances.iter().find(|i| **i >= sc.instances)?;
    Some((
        bad.to_string(),
        format!(
            "0 … {} (the study has {})",
            sc.instances - 1,
            super::output::counted(sc.instances as u64, "instance")
        ),
    ))
}

/// Checks the `--instances` of `simbatch render` against the study's count; an index given
/// twice is refused too (the picture would draw the same instance twice, side by side).
pub fn check_instances(sc: &Scenario, instances: &[usize]) -> Result<(), CliError> {
    let mut first = std::collections::HashMap::with_capacity(instances.len());
    for (k, i) in instances.iter().enumerate() {
        if let Some(j) = first.insert(*i, k) {
            return Err(CliError::Render(format!(
                "--instances: instance {i} is given twice (entries {j} and {k}); accepted: \
                 distinct indices"
            )));
        }
    }
    match instances_out_of_range(sc, instances) {
        Some((value, accepted)) if instances.is_empty() => Err(CliError::Render(format!(
            "--instances: {value} given; accepted: {accepted}"
        ))),
        Some((value, accepted)) => Err(CliError::Render(format!(
            "--instances {value}: accepted: {accepted}"
        ))),
        None => Ok(()),
    }
}

/// How one instance moves on.
enum Mover {
    Bilateral(Stepper),
    Unilateral {
        contacts: Vec<UnilateralContact>,
        events: EventOptions,
        modes: Vec<ContactMode>,
        /// What the last call left the contacts in (the next resumes from it, as a study's
        /// calls do).
        records: Option<Vec<ContactRecord>>,
    },
}

impl Mover {
    /// Steps `batch` (one instance) on by `duration`, as the study does.
    fn advance(&mut self, batch: &mut Batch, duration: f64) -> Result<(), CliError> {
        match self {
            Mover::Bilateral(stepper) => {
                stepper.advance(batch, duration)?;
            }
            Mover::Unilateral {
                contacts,
                events,
                modes,
                records,
            } => {
                let previous = [records.take()];
                let runs =
                    run_batch_resuming(batch, &|_| contacts.clone(), duration, events, &previous)?;
                if let Some(Some(run)) = runs.into_iter().next() {
                    *modes = run.contacts.iter().map(|r| r.mode).collect();
                    *records = Some(run.contacts);
                }
            }
        }
        Ok(())
    }

    /// A fresh mover like this one, for a copy of the batch.
    fn fork(&self, sc: &Scenario) -> Result<Self, CliError> {
        Ok(match self {
            Mover::Bilateral(_) => Mover::Bilateral(Stepper::new(sc.simulation.options)?),
            Mover::Unilateral {
                contacts,
                events,
                modes,
                records,
            } => Mover::Unilateral {
                contacts: contacts.clone(),
                events: *events,
                modes: modes.clone(),
                records: records.clone(),
            },
        })
    }

    /// The picture of the batch's one instance now.
    fn capture(&self, batch: &Batch) -> Result<InstanceFrame, CliError> {
        Ok(match self {
            Mover::Bilateral(_) => capture(batch, 0)?,
            Mover::Unilateral {
                contacts,
                events,
                modes,
                ..
            } => {
                let (multipliers, found) = contact_multipliers(batch, 0, contacts, modes, events)
                    .unwrap_or_else(|_| (Vec::new(), modes.clone()));
                // Bilateral constraints beside the contacts keep their state.
                let states = contact_states(batch.template().constraints().len(), contacts, &found);
                capture_with(batch, 0, &multipliers, &states)?
            }
        })
    }
}

/// Replays `instances` (global indices) of the study `sc` and captures each at `times` (sorted,
/// within `[0, duration]`).
pub fn replay(sc: &Scenario, instances: &[usize], times: &[f64]) -> Result<Scene, CliError> {
    check_instances(sc, instances)?;
    let duration = sc.simulation.duration;
    if let Some(t) = times.iter().find(|t| !(0.0..=duration).contains(*t)) {
        return Err(CliError::Render(format!(
            "time {t}: accepted: 0 … {duration} s (the study's duration)"
        )));
    }
    if times.windows(2).any(|w| w[1] < w[0]) {
        return Err(CliError::Render("frame times must be sorted".into()));
    }
    let names = input_names(sc);
    let mut tracks = Vec::with_capacity(instances.len());
    let mut up = [0.0, 0.0, 1.0];
    for &index in instances {
        let sampled = vec![sample(sc, index, None)];
        up = crate::render::up_from_gravity(sampled[0].gravity);
        let rolling: Vec<bool> = sampled[0].constraints.iter().map(|c| c.rolling).collect();
        let (mut batch, _) = build(sc, &rolling, &[0], &sampled, index)?;
        let mut mover = if sc.constraints.iter().any(|c| c.unilateral().is_some()) {
            let setup = UnilateralSetup::new(sc, &mut batch, &[0], &sampled, index)?;
            Mover::Unilateral {
                contacts: contacts_of(&setup.ids, &setup.coefficients[0]),
                events: setup.events,
                // Touching contacts are found at the first picture.
                modes: vec![ContactMode::Stick; setup.ids.len()],
                records: None,
            }
        } else {
            assemble(sc, &mut batch)?;
            Mover::Bilateral(Stepper::new(sc.simulation.options)?)
        };
        let mut frames = Vec::with_capacity(times.len());
        let mut pending = times.iter().copied().peekable();
        while pending.next_if(|t| *t <= 0.0).is_some() {
            frames.push(mover.capture(&batch)?);
        }
        let count = checkpoint_count(sc);
        let mut elapsed = 0.0;
        for k in 1..=count {
            let t = checkpoint(sc, k, count);
            // Frames before this checkpoint: a copy steps on to them.
            if pending.peek().is_some_and(|f| *f < t) {
                let mut copy = batch.clone();
                let mut fork = mover.fork(sc)?;
                let mut at = elapsed;
                while let Some(f) = pending.next_if(|f| *f < t) {
                    if f > at {
                        fork.advance(&mut copy, f - at)?;
                        at = f;
                    }
                    frames.push(fork.capture(&copy)?);
                }
            }
            mover.advance(&mut batch, t - elapsed)?;
            elapsed = t;
            while pending.next_if(|f| *f <= t).is_some() {
                frames.push(mover.capture(&batch)?);
            }
        }
        tracks.push(Track {
            instance: index,
            inputs: names
                .iter()
                .cloned()
                .zip(sampled[0].inputs.clone())
                .collect(),
            frames,
        });
    }
    Ok(Scene { up, tracks })
}
