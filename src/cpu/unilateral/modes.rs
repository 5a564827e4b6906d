//! The contact modes and multipliers at an instant (`unilateral.md` §3): which contacts stick,
//! slide or lift off, found by pruning from the current modes, with the sliding force law's
//! non-symmetric solve, impending slip for redundant sticking rows (§3.2) and the Painlevé
//! check (§3.3).

use nalgebra::DVector;

use super::phase::{RowSet, TIE, jams, linear_step};
use super::{Coefficients, ContactMode, ContactSpace, Tolerances};
use crate::error::{Error, Result};

/// One contact as the mode determination sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeContact {
    /// Its coefficients.
    pub coefficients: Coefficients,
    /// Its mode before this determination.
    pub mode: ContactMode,
    /// Whether it touches its plane (`s ≤ p_tol` and not separating faster than `v_tol`): only
    /// such a contact can be closed.
    pub touching: bool,
    /// Its slip velocity `v_t` in the plane axes (a contact closing while slipping faster than
    /// `v_roll` slides along it).
    pub slip: [f64; 2],
}

/// What [`solve_modes`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeSolution {
    /// Multipliers `λ` per row (Simbody's sign: `λ_z ≤ 0` pushes; a sliding contact's
    /// tangential values are `μ_d |λ_z| ŝ`, a sticking one's are within `μ_s |λ_z|`).
    pub multipliers: DVector<f64>,
    /// Row acceleration errors with these multipliers, `a₀ − W λ` (zero on enforced rows).
    pub acceleration: DVector<f64>,
    /// The consistent mode of every contact.
    pub modes: Vec<ContactMode>,
    /// Contacts whose sliding normal solve was ill-posed (Painlevé, §3.3); they are left open
    /// here, and where their free normal acceleration is negative the stepper applies a
    /// plastic impulse before determining the modes again.
    pub painleve: Vec<bool>,
    /// The rounds ran out before the modes were consistent (`mode_cycle`); the last set is
    /// returned.
    pub mode_cycle: bool,
}

/// A contact's state during the pruning.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Open,
    Stick,
    /// Sticking rows dropped, friction frozen at the static cone along `d̂` (§3.2).
    Impending([f64; 2]),
    Slide([f64; 2]),
}

/// The modes and multipliers of one instance whose free row acceleration errors are
/// `free = G u̇₀ − b` (what the rows would do with no contact force).
pub fn solve_modes(
    space: &ContactSpace,
    free: &DVector<f64>,
    contacts: &[ModeContact],
    tol: &Tolerances,
) -> Result<ModeSolution> {
    if free.len() != space.rows() {
        return Err(Error::Dimension {
            what: "free row accelerations",
            got: free.len(),
            expected: space.rows(),
        });
    }
    if contacts.len() != space.contacts().len() {
        return Err(Error::Dimension {
            what: "mode contacts",
            got: contacts.len(),
            expected: space.contacts().len(),
        });
    }
    let w = space.delassus();
    let mut states: Vec<State> = contacts
        .iter()
        .map(|c| match (c.touching, c.mode) {
            (false, _) | (_, ContactMode::Open) => State::Open,
            (true, ContactMode::Stick) => State::Stick,
            (true, ContactMode::Slide { direction }) => State::Slide(direction),
        })
        .collect();
    let mut painleve = vec![false; contacts.len()];
    let rounds = 4 * contacts.len() + 12;
    for round in 0..=rounds {
        let sets: Vec<RowSet> = states
            .iter()
            .zip(contacts)
            .map(|(s, c)| match *s {
                State::Open => RowSet::Off,
                State::Stick => RowSet::Stick,
                State::Impending(direction) => RowSet::Slide {
                    direction,
                    mu: c.coefficients.mu_static,
                },
                State::Slide(direction) => RowSet::Slide {
                    direction,
                    mu: c.coefficients.mu_dynamic,
                },
            })
            .collect();
        // Painlevé: a sliding normal row whose effective mass is not positive.
        let mut ill_posed = false;
        for (i, (rows, set)) in space.contacts().iter().zip(&sets).enumerate() {
            if let RowSet::Slide { direction, mu } = *set
                && jams(w, rows, direction, mu)
            {
                painleve[i] = true;
                states[i] = State::Open;
                ill_posed = true;
            }
        }
        if ill_posed {
            continue;
        }
        let multipliers = linear_step(space, free, &sets, &[]);
        let acceleration = free - w * &multipliers;

        let mut violations: Vec<(usize, f64, State)> = Vec::new();
        for (i, (rows, c)) in space.contacts().iter().zip(contacts).enumerate() {
            let [x, y, z] = *rows;
            let (normal, tangential) = (multipliers[z], multipliers[x].hypot(multipliers[y]));
            match states[i] {
                State::Stick => {
                    let excess = tangential - c.coefficients.mu_static * normal.abs();
                    // The larger of the two violations decides (as in an impulse phase).
                    if normal > tol.f_tol && normal >= excess {
                        violations.push((i, normal, State::Open));
                    } else if excess > tol.f_tol {
                        let d = [multipliers[x] / tangential, multipliers[y] / tangential];
                        violations.push((i, excess, State::Impending(d)));
                    }
                }
                State::Impending(_) | State::Slide(_) => {
                    if normal > tol.f_tol {
                        violations.push((i, normal, State::Open));
                    }
                }
                State::Open => {
                    if c.touching && !painleve[i] && acceleration[z] < -tol.a_tol {
                        let speed = c.slip[0].hypot(c.slip[1]);
                        let closing = if speed > tol.v_roll {
                            State::Slide([c.slip[0] / speed, c.slip[1] / speed])
                        } else {
                            State::Stick
                        };
                        let needed = -acceleration[z] / w[(z, z)].max(f64::MIN_POSITIVE);
                        violations.push((i, needed, closing));
                    }
                }
            }
        }
        if violations.is_empty() {
            // An impending contact slides only if it then accelerates along its direction.
            let mut started = false;
            for (rows, state) in space.contacts().iter().zip(states.iter_mut()) {
                if let State::Impending(d) = *state {
                    let along = acceleration[rows[0]] * d[0] + acceleration[rows[1]] * d[1];
                    if along > tol.a_tol {
                        *state = State::Slide(d);
                        started = true;
                    }
                }
            }
            if !started || round == rounds {
                return Ok(finish(multipliers, acceleration, &states, painleve, false));
            }
            continue;
        }
        if round == rounds {
            return Ok(finish(multipliers, acceleration, &states, painleve, true));
        }
        let worst = violations.iter().fold(0.0f64, |m, v| m.max(v.1));
        for (i, size, state) in violations {
            if size >= worst * (1.0 - TIE) {
                states[i] = state;
            }
        }
    }
    // Every round was spent on Painlevé exits: nothing is enforced any more.
    let sets = vec![RowSet::Off; contacts.len()];
    let multipliers = linear_step(space, free, &sets, &[]);
    let acceleration = free - w * &multipliers;
    Ok(finish(
        multipliers,
        acceleration,
        &vec![State::Open; contacts.len()],
        painleve,
        true,
    ))
}

/// The public answer from the pruning's states.
fn finish(
    multipliers: DVector<f64>,
    acceleration: DVector<f64>,
    states: &[State],
    painleve: Vec<bool>,
    mode_cycle: bool,
) -> ModeSolution {
    let modes = states
        .iter()
        .map(|s| match *s {
            State::Open => ContactMode::Open,
            State::Stick | State::Impending(_) => ContactMode::Stick,
            State::Slide(direction) => ContactMode::Slide { direction },
        })
        .collect();
    ModeSolution {
        multipliers,
        acceleration,
        modes,
        painleve,
        mode_cycle,
    }
}
