//! Event-driven stepping of one instance with unilateral contacts (`unilateral.md` §2, §5, §6):
//! RK4 steps with the contact modes fixed, event functions checked at each step's end (closing,
//! with the Hermite interior minimum of the separation; liftoff and stick → slip from the mode
//! determination; slip → stick from the slip along its direction at the step start), the
//! earliest event located by bisection on real RK4 steps from the step start to `t_tol`, and at
//! the event the impact law, the touchdown or slip → stick projection and the modes determined
//! again. Every loop is bounded (steps, events, bisection).
//!
//! A reference path for one instance, f64; the batch-wide and GPU versions build on it.

use super::event::{Settling, settle};
use super::machine::Machine;
use super::pool::machine_at;
use super::{
    ContactMode, ContactRecord, EventOptions, InstanceContacts, ModeContact, UnilateralContact,
    solve_modes,
};
use crate::batch::{Batch, status};
use crate::contact::{MAX_BISECTIONS, MIN_STEP_FRACTION};
use crate::error::{Error, Result};
use crate::step::{INITIAL_ADAPTIVE_STEP, MAX_ADAPTIVE_ATTEMPTS, min_step, step_factor};

/// One located event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// When (the upper end of its bracket).
    pub time: f64,
    /// Normal speed of the fastest approaching contact before an impact (0 otherwise).
    pub approach_speed: f64,
    /// Whether some contact's mode (open, sticking, sliding) changed at it.
    pub modes_changed: bool,
}

/// What [`run_instance`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRun {
    /// Per contact.
    pub contacts: Vec<ContactRecord>,
    /// Every event, in time order.
    pub events: Vec<Event>,
    /// Steps committed (RK4, or Merson under error control; rejected trials and bisection
    /// points not counted).
    pub steps: usize,
    /// Deepest penetration of a contact into its plane at the end (m, ≥ 0).
    pub penetration: f64,
    /// The penetration exceeds `p_tol` (the constraint tolerance): [`run_batch`] flags the
    /// instance `status::CONSTRAINT_VIOLATED`.
    pub violated: bool,
    /// The multipliers at the end, per row of the instance's system (internal row order), with
    /// the contacts' modes determined again there: what [`contact_multipliers`] gives for the
    /// state and modes the run ends in, the same bits, without a second machine (a rollout
    /// records them after every step). `None` where that determination failed.
    pub multipliers: Option<Vec<f64>>,
}

/// Runs instance `i` of `batch` for `duration` with `contacts` as unilateral contacts (every
/// other enabled row bilateral), from its stored state, and stores the state it ends in. The
/// contacts' modes start as determined at the start (touching where the separation is within
/// `p_tol` and not separating faster than `v_tol`); one approaching at the start takes its
/// impact first.
pub fn run_instance(
    batch: &mut Batch,
    i: usize,
    contacts: &[UnilateralContact],
    duration: f64,
    options: &EventOptions,
) -> Result<EventRun> {
    if i >= batch.len() {
        return Err(Error::InstanceOutOfRange {
            instance: i,
            len: batch.len(),
        });
    }
    options.check(duration)?;
    for c in contacts {
        c.coefficients.check()?;
    }
    let (y, t, run) = simulate(batch, i, contacts, duration, options, None)?;
    batch.store_values(i, t, &y, 0);
    batch.touch_state_columns();
    Ok(run)
}

/// Runs every instance of `batch` for `duration`, in parallel (rayon), instance `i` with the
/// unilateral contacts `contacts(i)` (their coefficients may differ per instance), as
/// [`run_instance`] does one. Returns each instance's record, `None` for an instance that was
/// already halted (its status bits) or failed now — its state is kept and it is flagged
/// `status::STEP_FAILED`; one that ends inside a plane deeper than `p_tol` is flagged
/// `status::CONSTRAINT_VIOLATED`. Results do not depend on the thread count.
pub fn run_batch(
    batch: &mut Batch,
    contacts: &(dyn Fn(usize) -> Vec<UnilateralContact> + Sync),
    duration: f64,
    options: &EventOptions,
) -> Result<Vec<Option<EventRun>>> {
    run_batch_from(batch, contacts, duration, options, &|_| None, &|_| true)
}

/// How one instance's run ended: its state laid out as [`InstanceState::to_vec`](crate::batch::InstanceState::to_vec), time and
/// record.
type Ended = (Vec<f64>, f64, EventRun);

/// [`run_batch`] continuing earlier runs: instance `i` starts with its contacts in the modes,
/// and the slip → stick readiness, that `previous[i]` records (the
/// [`contacts`](EventRun::contacts) of the run that left the instance where it stands),
/// instead of determining them from its state alone. A run cut into calls (a study's
/// checkpoints, an environment's control steps) then steps as one call would, to the
/// integrator's accuracy: a contact sliding or sticking at a call's end is not taken for one
/// arriving at its start. `None` starts an instance afresh, as [`run_batch`] does.
///
/// `previous` holds one entry per instance, each with one record per contact of
/// `contacts(i)`.
pub fn run_batch_resuming(
    batch: &mut Batch,
    contacts: &(dyn Fn(usize) -> Vec<UnilateralContact> + Sync),
    duration: f64,
    options: &EventOptions,
    previous: &[Option<Vec<ContactRecord>>],
) -> Result<Vec<Option<EventRun>>> {
    check_previous(batch, contacts, previous)?;
    run_batch_from(
        batch,
        contacts,
        duration,
        options,
        &|i| previous[i].as_deref(),
        &|_| true,
    )
}

/// [`run_batch_resuming`] for the instances `selected` (one flag per instance) only: the others
/// are left as they are, their entries `None`. What the GPU's event kernel gives back (an
/// instance it withheld) runs here.
pub fn run_selected_resuming(
    batch: &mut Batch,
    selected: &[bool],
    contacts: &(dyn Fn(usize) -> Vec<UnilateralContact> + Sync),
    duration: f64,
    options: &EventOptions,
    previous: &[Option<Vec<ContactRecord>>],
) -> Result<Vec<Option<EventRun>>> {
    if selected.len() != batch.len() {
        return Err(Error::Dimension {
            what: "selected instances (one flag per instance)",
            got: selected.len(),
            expected: batch.len(),
        });
    }
    check_previous(batch, contacts, previous)?;
    run_batch_from(
        batch,
        contacts,
        duration,
        options,
        &|i| previous[i].as_deref(),
        &|i| selected[i],
    )
}

/// `previous` has one entry per instance, each with one record per contact.
fn check_previous(
    batch: &Batch,
    contacts: &(dyn Fn(usize) -> Vec<UnilateralContact> + Sync),
    previous: &[Option<Vec<ContactRecord>>],
) -> Result<()> {
    if previous.len() != batch.len() {
        return Err(Error::Dimension {
            what: "previous contact records (one entry per instance)",
            got: previous.len(),
            expected: batch.len(),
        });
    }
    for (i, records) in previous.iter().enumerate() {
        if let Some(records) = records
            && records.len() != contacts(i).len()
        {
            return Err(Error::per_contact(
                "previous contact records",
                i,
                records.len(),
                contacts(i).len(),
            ));
        }
    }
    Ok(())
}

/// [`run_batch`] and its kin: instance `i` resumes from `previous(i)`; only the instances
/// `selected` run.
fn run_batch_from<'p>(
    batch: &mut Batch,
    contacts: &(dyn Fn(usize) -> Vec<UnilateralContact> + Sync),
    duration: f64,
    options: &EventOptions,
    previous: &(dyn Fn(usize) -> Option<&'p [ContactRecord]> + Sync),
    selected: &(dyn Fn(usize) -> bool + Sync),
) -> Result<Vec<Option<EventRun>>> {
    use rayon::prelude::*;
    options.check(duration)?;
    // Coefficients built without `Coefficients::new` are refused here, before any instance
    // steps, rather than failing (or stepping with a NaN) one by one.
    (0..batch.len())
        .into_par_iter()
        .filter(|i| selected(*i))
        .try_for_each(|i| contacts(i).iter().try_for_each(|c| c.coefficients.check()))?;
    let shared: &Batch = batch;
    let outcomes: Vec<Option<Result<Ended>>> = (0..shared.len())
        .into_par_iter()
        .map(|i| {
            (selected(i) && shared.status()[i] & status::HALTED == 0)
                .then(|| simulate(shared, i, &contacts(i), duration, options, previous(i)))
        })
        .collect();
    let mut runs = Vec::with_capacity(outcomes.len());
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Some(Ok((y, t, run))) => {
                let flags = if run.violated {
                    status::CONSTRAINT_VIOLATED
                } else {
                    0
                };
                batch.store_values(i, t, &y, flags);
                runs.push(Some(run));
            }
            Some(Err(_)) => {
                let state = batch.state_of(i);
                batch.store_values(i, state.time, &state.to_vec(), status::STEP_FAILED);
                runs.push(None);
            }
            None => runs.push(None),
        }
    }
    batch.touch_state_columns();
    Ok(runs)
}

/// The multipliers of instance `i` at its stored state, per row of its system (internal row
/// order, as [`InstanceSystem`](crate::cpu::evaluate::InstanceSystem)'s rows), and the modes they belong to, with its unilateral
/// contacts starting from `modes` (as a run left them: [`ContactRecord::mode`]). A contact
/// farther than `p_tol` from its plane is open whatever `modes` says; the modes of the others
/// are determined again at this state, so the forces are those of the modes found — zero on an
/// open contact. What a picture's force arrows show between events.
pub fn contact_multipliers(
    batch: &Batch,
    i: usize,
    contacts: &[UnilateralContact],
    modes: &[ContactMode],
    options: &EventOptions,
) -> Result<(Vec<f64>, Vec<ContactMode>)> {
    if i >= batch.len() {
        return Err(Error::InstanceOutOfRange {
            instance: i,
            len: batch.len(),
        });
    }
    options.check(0.0)?;
    if modes.len() != contacts.len() {
        return Err(Error::Dimension {
            what: "contact modes",
            got: modes.len(),
            expected: contacts.len(),
        });
    }
    let (mut machine, y) = machine_at(batch, i, contacts, options)?;
    let at = machine.contacts_at(machine.state.time, &y)?;
    let found = multipliers_at(&machine, &at, modes);
    machine.recycle(at);
    found
}

/// [`contact_multipliers`] with the contact space `at` of `machine`'s present state.
fn multipliers_at(
    machine: &Machine<'_>,
    at: &InstanceContacts,
    modes: &[ContactMode],
) -> Result<(Vec<f64>, Vec<ContactMode>)> {
    let input: Vec<ModeContact> = at
        .space
        .contacts()
        .iter()
        .zip(modes.iter().zip(&at.separation))
        .zip(&machine.coefficients)
        .map(|((rows, (mode, s)), k)| ModeContact {
            coefficients: *k,
            mode: *mode,
            touching: !matches!(mode, ContactMode::Open) && *s <= machine.tol.p_tol,
            slip: [at.velocity[rows[0]], at.velocity[rows[1]]],
        })
        .collect();
    let solution = solve_modes(&at.space, &at.free_acceleration, &input, &machine.tol)?;
    Ok((
        solution.multipliers.iter().copied().collect(),
        solution.modes,
    ))
}

/// [`run_instance`]'s stepping, on the batch's stored state: the final `y`, time and record.
fn simulate(
    batch: &Batch,
    i: usize,
    contacts: &[UnilateralContact],
    duration: f64,
    options: &EventOptions,
    previous: Option<&[ContactRecord]>,
) -> Result<Ended> {
    let (mut machine, mut y) = machine_at(batch, i, contacts, options)?;
    let layout = machine.layout;
    let mut run = EventRun {
        contacts: vec![
            ContactRecord {
                mode: ContactMode::Open,
                impacts: 0,
                first_impact: None,
                last_mode_change: None,
                impact_loss: 0.0,
                friction_loss: 0.0,
                armed: false,
            };
            contacts.len()
        ],
        events: Vec::new(),
        steps: 0,
        penetration: 0.0,
        violated: false,
        multipliers: None,
    };
    let mut t = machine.state.time;
    let t_end = t + duration;
    let mut modes = vec![ContactMode::Open; contacts.len()];
    if let Some(previous) = previous {
        for ((mode, armed), record) in modes.iter_mut().zip(&mut machine.armed).zip(previous) {
            (*mode, *armed) = (record.mode, record.armed);
        }
    }
    let at = if previous.is_some() {
        Settling::Resume
    } else {
        Settling::Start
    };
    settle(&mut machine, &mut y, t, &mut modes, &mut run, options, at)?;
    let mut start = None;
    // Error control (`EventOptions::accuracy`): the step proposed for the next trial, from
    // the bilateral RKM's first guess, and the trials taken (bounded).
    let adaptive = options.accuracy;
    let mut proposed = options.step.min(INITIAL_ADAPTIVE_STEP);
    let mut attempts = 0u64;
    while t < t_end {
        // The previous step's end, when no event intervened, is this step's start.
        let a = match start.take() {
            Some(a) => a,
            None => machine.contacts_at(t, &y)?,
        };
        // A sliding contact whose slip has exceeded v_roll may stick again from now on.
        for ((rows, mode), armed) in a
            .space
            .contacts()
            .iter()
            .zip(&modes)
            .zip(&mut machine.armed)
        {
            if matches!(mode, ContactMode::Slide { .. })
                && a.velocity[rows[0]].hypot(a.velocity[rows[1]]) > machine.tol.v_roll
            {
                *armed = true;
            }
        }
        let frozen: Vec<Option<[f64; 2]>> = a
            .space
            .contacts()
            .iter()
            .zip(&modes)
            .map(|(rows, mode)| match *mode {
                // The slip's direction once it exceeds v_roll; below, the direction the mode
                // was found with (a contact that starts sliding from rest: its impending
                // direction). A slip that small is mostly what the last steps' rounding and
                // the friction's own turning left in it: taken as the friction's direction, step
                // after step, it fed back faster than any step resolves (`Machine::stable_step`)
                // and set a brick sliding from rest on four corners yawing.
                ContactMode::Slide { direction } => {
                    let (sx, sy) = (a.velocity[rows[0]], a.velocity[rows[1]]);
                    let speed = sx.hypot(sy);
                    Some(if speed > machine.tol.v_roll {
                        [sx / speed, sy / speed]
                    } else {
                        direction
                    })
                }
                _ => None,
            })
            .collect();
        // The mode keeps ŝ_a: an event inside this step is settled with the direction its
        // slowing was located along (§2 item 4), not where the slip pointed when the mode was
        // found — a spinning brick's corner turns a right angle in a quarter second, and
        // tested along its old direction at a neighbour's impact it read as slowed.
        for (mode, frozen) in modes.iter_mut().zip(&frozen) {
            if let (ContactMode::Slide { direction }, Some(frozen)) = (mode, frozen) {
                *direction = *frozen;
            }
        }
        // A sliding contact's friction follows its slip at this step's stages only if the
        // slip already exceeds v_roll at its start (`Machine::follows`).
        for ((rows, mode), follows) in a
            .space
            .contacts()
            .iter()
            .zip(&modes)
            .zip(&mut machine.follows)
        {
            *follows = !matches!(mode, ContactMode::Slide { .. })
                || a.velocity[rows[0]].hypot(a.velocity[rows[1]]) > machine.tol.v_roll;
        }
        // The first stage, shared by the step and every bisection point: `a` is what the
        // machine assembled last (the previous step's end, or just now).
        let (k1, multipliers) = machine.derivative_parts_at(&a, &y, &modes, &frozen);
        // A slowly sliding contact's friction is stiff: the step stays within RK4's stability
        // (`Machine::stable_step`), and at least MIN_STEP_FRACTION of the scenario's step, so
        // a call has a bounded number of steps — under error control, whose trials
        // MAX_ADAPTIVE_ATTEMPTS bounds, at least the minimum step (its longest step may be
        // the whole run, and a fraction of it no limit at all).
        let stable = machine.stable_step(&a, &modes, &multipliers);
        let floor = match adaptive {
            Some(_) => min_step(t),
            None => options.step * MIN_STEP_FRACTION,
        };
        let longest = options.step.min(stable.max(floor));
        // With error control, the step the last accepted one proposed, within that limit;
        // a trial whose error exceeds the accuracy is taken again shorter.
        let mut h = adaptive
            .map_or(longest, |_| proposed.min(longest))
            .min(t_end - t);
        let y_b = loop {
            let controlled = adaptive.is_some();
            if controlled {
                attempts += 1;
                if attempts > MAX_ADAPTIVE_ATTEMPTS {
                    return Err(Error::BadChoice {
                        what: "event accuracy",
                        value: format!("more than {MAX_ADAPTIVE_ATTEMPTS} steps by t = {t}"),
                        accepted: "an accuracy the instance reaches within MAX_ADAPTIVE_ATTEMPTS steps",
                    });
                }
            }
            let (y_b, error) = match machine.trial(controlled, t, &y, &k1, h, &modes, &frozen) {
                Ok(trial) => trial,
                // A trial whose stages left the finite numbers (a long trial step): shorter,
                // as the bilateral RKM retries.
                Err(Error::NonFinite { .. }) if controlled && h / 4.0 >= min_step(t) => {
                    h /= 4.0;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some(accuracy) = adaptive else {
                break y_b;
            };
            if error > accuracy {
                // As the bilateral RKM: shrink by 0.1–0.9; below the floor no step can reach
                // the accuracy, and the run fails (the batch flags the instance).
                let shorter = h * step_factor(accuracy, error, 0.1, 0.9);
                if shorter < min_step(t) {
                    return Err(Error::BadChoice {
                        what: "event accuracy",
                        value: format!(
                            "{accuracy}: not reached with a step ≥ {:e} at t = {t}",
                            min_step(t)
                        ),
                        accepted: "an accuracy the instance reaches with a step above MIN_STEP",
                    });
                }
                h = shorter;
                continue;
            }
            proposed = (h * step_factor(accuracy, error, 1.0, 5.0)).min(options.step);
            break y_b;
        };
        let (event, b) = machine.has_event(&a, t + h, &y_b, h, &modes, &frozen)?;
        if !event {
            y = y_b;
            t += h;
            run.steps += 1;
            start = Some(b);
            // The step start's buffers serve the next contact space (no allocation per step).
            machine.recycle(a);
            continue;
        }
        machine.recycle(b);
        // Bisection on real steps from the step start: the event lies in (lo, hi].
        let (mut lo, mut hi, mut y_hi) = (0.0, h, y_b);
        for _ in 0..MAX_BISECTIONS {
            if hi - lo <= machine.tol.bracket_at(t + hi) {
                break;
            }
            let mid = 0.5 * (lo + hi);
            let (y_mid, _) = machine.trial(adaptive.is_some(), t, &y, &k1, mid, &modes, &frozen)?;
            let (event, at_mid) = machine.has_event(&a, t + mid, &y_mid, mid, &modes, &frozen)?;
            machine.recycle(at_mid);
            if event {
                hi = mid;
                y_hi = y_mid;
            } else {
                lo = mid;
            }
        }
        y = y_hi;
        t += hi;
        run.steps += 1;
        machine.recycle(a);
        settle(
            &mut machine,
            &mut y,
            t,
            &mut modes,
            &mut run,
            options,
            Settling::Event,
        )?;
        if run.events.len() > options.max_events {
            return Err(Error::BadChoice {
                what: "event count",
                value: format!("more than {} events by t = {t}", options.max_events),
                accepted: "at most EventOptions::max_events per call",
            });
        }
    }
    let losses = &y[layout.losses..layout.poses];
    for (((record, mode), loss), armed) in run
        .contacts
        .iter_mut()
        .zip(&modes)
        .zip(losses)
        .zip(&machine.armed)
    {
        record.mode = *mode;
        record.friction_loss = *loss;
        record.armed = *armed;
    }
    // The deepest penetration at the end: beyond p_tol the instance broke its contacts.
    // The last step's end, when no event followed it, is this state's contact space.
    let end = match start.take() {
        Some(b) => b,
        None => machine.contacts_at(t, &y)?,
    };
    run.penetration = end.separation.iter().fold(0.0f64, |m, s| m.max(-s));
    run.violated = run.penetration > machine.tol.p_tol;
    run.multipliers = multipliers_at(&machine, &end, &modes).ok().map(|(m, _)| m);
    // Left to the machine, whose buffers the next machine on this thread takes (`pool.rs`).
    machine.recycle(end);
    // As `InstanceState::to_vec`: q, poses, u, prescribed velocities, work.
    let state: Vec<f64> = [
        0..layout.nq,
        layout.poses..layout.velocities,
        layout.nq..layout.losses,
        layout.velocities..layout.work,
        layout.work..layout.len,
    ]
    .into_iter()
    .flat_map(|range| y[range].iter().copied())
    .collect();
    Ok((state, t, run))
}
