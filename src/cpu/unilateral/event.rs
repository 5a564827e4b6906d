//! What is done at an event (`settle`): impacts, touchdowns, the slip → stick projection, and
//! the modes determined again, each velocity change applied to the instance's `y` with the
//! work it does and the energy each contact takes.

use nalgebra::DVector;

use super::EventOptions;
use super::machine::Machine;
use super::phase::{RowSet, linear_step};
use super::stepper::{Event, EventRun};
use super::{Coefficients, ContactMode, ImpactContact, InstanceContacts, impact};
use crate::error::Result;

/// The energy scale of the impact's guard at `y` (the system last assembled there): `½ uᵀ M u`
/// of the free bodies, plus, per contact row, `½ v² / W_rr` — the energy of the relative motion,
/// which a ball at rest hit by a moving plate has while its own kinetic energy is zero.
fn energy_scale(machine: &Machine<'_>, y: &[f64], contacts: &InstanceContacts) -> f64 {
    let nq = machine.layout.nq;
    let kinetic: f64 = machine
        .system
        .mass_blocks
        .iter()
        .enumerate()
        .map(|(k, m)| {
            let u = nalgebra::Vector6::from_column_slice(&y[nq + 6 * k..nq + 6 * k + 6]);
            0.5 * u.dot(&(m * u))
        })
        .sum();
    let w = contacts.space.delassus();
    let relative: f64 = contacts
        .space
        .contacts()
        .iter()
        .flatten()
        .filter(|&&r| w[(r, r)] > 0.0)
        .map(|&r| 0.5 * contacts.velocity[r].powi(2) / w[(r, r)])
        .sum();
    kinetic + relative
}

/// Applies the impulse `π` (rows of `c`, the contact space at `y`) to `y`: `u⁺ = u⁻ − M⁻¹Gᵀπ`.
/// The impulse delivers `−π · (v⁻ + v⁺)/2 + π · c` to the free bodies: the contacts take the
/// first (their losses, which the caller books), the prescribed bodies give the second (added
/// to the driven work).
fn apply(machine: &Machine<'_>, y: &mut [f64], c: &InstanceContacts, impulse: &DVector<f64>) {
    let (nq, work) = (machine.layout.nq, machine.layout.work);
    for (k, d) in c.velocity_change(impulse).iter().enumerate() {
        y[nq + k] += d;
    }
    y[work] += machine.motion_power(c, impulse);
}

/// An impact of the contacts within `p_tol` (`near`) on the contact space `c` at `y` (what the
/// machine assembled last), with their restitution or none (`plastic`); the losses are booked
/// per contact. Returns the contacts' row velocities before it.
fn impact_at(
    machine: &mut Machine<'_>,
    y: &mut [f64],
    c: Box<InstanceContacts>,
    near: &[bool],
    plastic: bool,
    run: &mut EventRun,
    options: &EventOptions,
) -> Result<DVector<f64>> {
    let input: Vec<ImpactContact> = machine
        .coefficients
        .iter()
        .zip(near)
        .map(|(k, near)| ImpactContact {
            coefficients: Coefficients {
                restitution: if plastic { 0.0 } else { k.restitution },
                ..*k
            },
            participates: *near,
        })
        .collect();
    let energy = energy_scale(machine, y, &c);
    let out = impact(
        &c.space,
        &c.velocity,
        energy,
        &input,
        options.law,
        &machine.tol,
    )?;
    apply(machine, y, &c, &out.impulse);
    for (record, loss) in run.contacts.iter_mut().zip(&out.losses) {
        record.impact_loss += loss;
    }
    let before = c.velocity.clone();
    machine.recycle(c);
    Ok(before)
}

/// The projection at `t` that zeroes the velocities of the rows `sets` enforce (in the
/// mass-matrix norm: the least kinetic-energy change); each contact takes `π · v⁻ / 2` over its
/// rows.
fn project(
    machine: &mut Machine<'_>,
    y: &mut [f64],
    t: f64,
    sets: &[RowSet],
    run: &mut EventRun,
) -> Result<()> {
    let c = machine.contacts_at(t, y)?;
    let known = vec![None; sets.len()];
    let impulse = linear_step(&c.space, &c.velocity, sets, &known);
    apply(machine, y, &c, &impulse);
    for (record, rows) in run.contacts.iter_mut().zip(c.space.contacts()) {
        record.impact_loss += rows
            .iter()
            .map(|&row| impulse[row] * c.velocity[row] / 2.0)
            .sum::<f64>();
    }
    machine.recycle(c);
    Ok(())
}

/// The rows a projection holds for `modes`: all three of a sticking contact, the normal one of
/// a sliding contact (no friction: a projection is not a collision), none of an open one.
fn held(modes: &[ContactMode]) -> Vec<RowSet> {
    modes
        .iter()
        .map(|m| match *m {
            ContactMode::Stick => RowSet::Stick,
            ContactMode::Slide { direction } => RowSet::Slide { direction, mu: 0.0 },
            ContactMode::Open => RowSet::Off,
        })
        .collect()
}

/// Where [`settle`] runs: what makes a contact near its plane, and whether mode changes count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settling {
    /// A run's start from a state not left by a run (drawn, set by the user): a contact within
    /// `p_tol` of its plane is near, and the modes found are where the run begins, not changes.
    Start,
    /// A run resuming from the records of the call before (`run_batch_resuming`): the state is
    /// that call's last step end, not an event, so an open contact is near only once it has
    /// reached its plane (`s ≤ 0`). Within `p_tol` above it, it stays open until the stepping's
    /// closing event (`s ↓ 0`, `unilateral.md` §2), as in a run not cut there: a call boundary
    /// (a study's record interval, a rollout's step) must not capture a ball at the apex of a
    /// small bounce, nor take its next impact early. Likewise a sliding contact has slowed
    /// only if its slip has, tested along its own direction as a step's start tests it.
    Resume,
    /// An event located by the stepping.
    Event,
}

/// What happens at an event (or at a run's start, [`Settling`]): impacts of near contacts
/// approaching faster than `v_tol` (a touching contact slower than that is stopped
/// plastically), the slip → stick projection of sliding contacts that have slowed to `v_roll`
/// (at an event, any sliding contact whose slip is within `v_roll`),
/// a plastic touchdown of any near contact that projection set approaching, the modes
/// determined again, and the closed contacts' velocities projected to rest on their rows;
/// recorded in `run`.
pub(super) fn settle(
    machine: &mut Machine<'_>,
    y: &mut [f64],
    t: f64,
    modes: &mut [ContactMode],
    run: &mut EventRun,
    options: &EventOptions,
    at: Settling,
) -> Result<()> {
    let tol = machine.tol;
    let initial = at != Settling::Event;
    // How close to its plane each contact counts as touching it (see `Settling::Resume`).
    let band: Vec<f64> = modes
        .iter()
        .map(|m| match (at, m) {
            (Settling::Resume, ContactMode::Open) => 0.0,
            _ => tol.p_tol,
        })
        .collect();
    let c = machine.contacts_at(t, y)?;
    let rows = c.space.contacts().to_vec();
    let near: Vec<bool> = c
        .separation
        .iter()
        .zip(&band)
        .map(|(s, b)| s <= b)
        .collect();
    let approaching: Vec<bool> = rows
        .iter()
        .zip(&near)
        .map(|(r, near)| *near && c.velocity[r[2]] < -tol.v_tol)
        .collect();
    let touching_open = rows
        .iter()
        .zip(&near)
        .zip(modes.iter())
        .any(|((r, near), m)| {
            *near && *m == ContactMode::Open && c.velocity[r[2]].abs() <= tol.v_tol
        });
    let mut approach_speed = 0.0f64;
    let mut changed = false;
    if approaching.iter().any(|a| *a) || touching_open {
        let plastic = !approaching.iter().any(|a| *a);
        let before = impact_at(machine, y, c, &near, plastic, run, options)?;
        for (k, record) in run.contacts.iter_mut().enumerate() {
            if approaching[k] {
                record.impacts += 1;
                record.first_impact.get_or_insert(t);
                approach_speed = approach_speed.max(-before[rows[k][2]]);
            }
        }
    } else {
        machine.recycle(c);
    }
    // Slip → stick: a sliding contact slowed to v_roll (or reversed) loses its slip. A contact
    // separating faster than v_tol (as an impact throws some off) has left its plane: it is
    // neither slowed nor held by the projection, whatever its mode was before the event.
    let c = machine.contacts_at(t, y)?;
    let leaving: Vec<bool> = rows.iter().map(|r| c.velocity[r[2]] > tol.v_tol).collect();
    let slowed: Vec<bool> = rows
        .iter()
        .zip(modes.iter())
        .zip(machine.armed.iter().zip(&leaving))
        .map(|((r, m), (armed, leaving))| match m {
            ContactMode::Slide { direction } if !*leaving => {
                let (sx, sy) = (c.velocity[r[0]], c.velocity[r[1]]);
                let speed = sx.hypot(sy);
                // An armed contact (its slip has exceeded v_roll since its last switch) is
                // tested along ŝ_a (§2 item 4). At an event that is the mode's direction, which
                // the step's start set to its slip (`simulate`). Resuming, the state is a step's
                // end, so the slip is tested as the next step's start tests it: along its own
                // direction while it exceeds v_roll. The direction the mode was found with may
                // lie a right angle behind a turning brick's corner: tested along that, a corner
                // sliding at a metre a second read as slowed and was stopped.
                let along = if at == Settling::Resume && speed > tol.v_roll {
                    [sx / speed, sy / speed]
                } else {
                    *direction
                };
                // At an event every contact is classified again (§2 item 5), and a slip within
                // v_roll is at rest within the band, armed or not. An unarmed contact keeps the
                // direction it started to slide in. Once another contact's projection has turned
                // its slip, friction along that direction does work on the slip: a brick coming
                // to rest on four corners was kept creeping by it, in a cycle of events every
                // 2 ms.
                (*armed && sx * along[0] + sy * along[1] <= tol.v_roll)
                    || (at == Settling::Event && speed <= tol.v_roll)
            }
            _ => false,
        })
        .collect();
    machine.recycle(c);
    if slowed.iter().any(|s| *s) {
        let sets: Vec<RowSet> = held(modes)
            .into_iter()
            .zip(slowed.iter().zip(&leaving))
            .map(|(set, (slowed, leaving))| match set {
                _ if *leaving => RowSet::Off,
                _ if *slowed => RowSet::Stick,
                set => set,
            })
            .collect();
        project(machine, y, t, &sets, run)?;
        for (k, m) in modes.iter_mut().enumerate() {
            if slowed[k] {
                *m = ContactMode::Stick;
                machine.armed[k] = false;
                changed = true;
                run.contacts[k].last_mode_change = Some(t);
            }
        }
    }
    // The projection holds the contacts that stay and moves the bodies: a near contact it set
    // approaching gets a plastic touchdown, as one arriving slowly would (closing it silently
    // would let it sink into its plane).
    let c = machine.contacts_at(t, y)?;
    let pushed = rows
        .iter()
        .zip(&near)
        .any(|(r, near)| *near && c.velocity[r[2]] < -tol.v_tol);
    if pushed {
        impact_at(machine, y, c, &near, true, run, options)?;
        changed = true;
    } else {
        machine.recycle(c);
    }
    // The modes, determined again.
    let c = machine.contacts_at(t, y)?;
    let touching: Vec<bool> = rows
        .iter()
        .zip(c.separation.iter().zip(&band))
        .map(|(r, (s, b))| s <= b && c.velocity[r[2]] <= tol.v_tol)
        .collect();
    let start: Vec<ContactMode> = modes
        .iter()
        .zip(&touching)
        .zip(&rows)
        .map(|((m, touching), r)| match (*m, *touching) {
            (_, false) => ContactMode::Open,
            (ContactMode::Open, true) => {
                let (sx, sy) = (c.velocity[r[0]], c.velocity[r[1]]);
                let speed = sx.hypot(sy);
                if speed > tol.v_roll {
                    ContactMode::Slide {
                        direction: [sx / speed, sy / speed],
                    }
                } else {
                    ContactMode::Stick
                }
            }
            (m, true) => m,
        })
        .collect();
    let determined = machine.modes_of(&c, &start, &touching)?;
    machine.recycle(c);
    for (k, (old, new)) in modes.iter_mut().zip(determined).enumerate() {
        // The modes found at the start are where the run begins, not a change.
        if std::mem::discriminant(old) != std::mem::discriminant(&new) {
            machine.armed[k] = false;
            if !initial {
                changed = true;
                run.contacts[k].last_mode_change = Some(t);
            }
        }
        *old = new;
    }
    // A contact closes with what its touchdown left of its normal speed (up to v_tol), and a
    // sticking one with its slip (up to v_roll): held at the acceleration level only, that
    // speed would carry it into (or off) its plane for as long as it stays closed. The
    // projection zeroes them.
    if modes.iter().any(|m| *m != ContactMode::Open) {
        project(machine, y, t, &held(modes), run)?;
    }
    if !initial || approach_speed > 0.0 {
        run.events.push(Event {
            time: t,
            approach_speed,
            modes_changed: changed,
        });
    }
    Ok(())
}
