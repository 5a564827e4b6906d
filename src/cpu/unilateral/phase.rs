//! The linear step both contact laws share, and the impulse phase `S(v_s, π_E)` of
//! `unilateral.md` §4.2.

use nalgebra::{DMatrix, DVector};

use super::ContactSpace;
use crate::cpu::cod::solve_min_norm_general;
use crate::cpu::solver::solve_min_norm_rows;

/// Most corrections of a sliding contact's friction direction in one phase (§4.2).
pub(crate) const MAX_DIRECTION_ITERATIONS: usize = 50;
/// Two unit directions closer than this count as the same.
const DIRECTION_TOLERANCE: f64 = 1e-12;
/// `A_eff ≤ PAINLEVE · W_zz` makes a sliding contact's normal solve ill-posed (§3.3).
pub(crate) const PAINLEVE: f64 = 1e-8;
/// Violations within this fraction of the worst are pruned together (symmetric contacts).
pub(crate) const TIE: f64 = 1e-9;

/// How one contact's rows `(x, y, z)` enter a linear step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowSet {
    /// No row: the contact carries no impulse (or force) of its own.
    Off,
    /// All three rows enforced (zero velocity, or acceleration), their values unknown.
    Stick,
    /// The normal row enforced; the tangential value is tied to the normal one,
    /// `π_t = −μ π_z d̂` (`= μ |π_z| d̂`, since `π_z ≤ 0` pushes).
    Slide {
        /// Unit direction `d̂` of the tangential value in the plane axes.
        direction: [f64; 2],
        /// The friction coefficient that ties it.
        mu: f64,
    },
}

/// One unknown of a linear step: a combination of rows (`π += x · Σ c_j e_j`).
type Column = ([usize; 3], [f64; 3], usize);

/// What [`linear_step`] builds on each call, kept per thread: the event-driven stepper takes a
/// linear step at every RK4 stage, event test and impulse phase of every instance, and these
/// buffers were a fifth of its allocations.
#[derive(Default)]
struct Scratch {
    columns: Vec<Column>,
    equations: Vec<usize>,
    /// The reduced matrix, row-major (the symmetric solver's layout).
    a: Vec<f64>,
    rhs: Vec<f64>,
    x: Vec<f64>,
    work: Vec<f64>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// The values `π` (impulses or multipliers, one per row, known parts included) such that
/// `target − W π` is zero on every enforced row: bilateral rows, all three rows of a sticking
/// contact, the normal row of a sliding one. A contact with a known normal value (`known[i]`,
/// an expander) keeps it: when sticking only its tangential rows are enforced, when sliding
/// its tangential value is `μ |π_z| d̂`. `known` may be shorter than `sets`, even empty: the
/// contacts past its end are unknown. The minimum-norm solution is returned when rows are
/// redundant.
pub(crate) fn linear_step(
    space: &ContactSpace,
    target: &DVector<f64>,
    sets: &[RowSet],
    known: &[Option<f64>],
) -> DVector<f64> {
    let mut value = DVector::zeros(0);
    linear_step_into(space, target, sets, known, &mut value);
    value
}

/// [`linear_step`] into `value`, whose buffer is reused (the event path takes one at every
/// derivative).
pub(crate) fn linear_step_into(
    space: &ContactSpace,
    target: &DVector<f64>,
    sets: &[RowSet],
    known: &[Option<f64>],
    value: &mut DVector<f64>,
) {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => linear_step_in(space, target, sets, known, &mut scratch, value),
        // Not reentrant today; were it ever, a fresh scratch keeps it correct.
        Err(_) => linear_step_in(space, target, sets, known, &mut Scratch::default(), value),
    })
}

/// [`linear_step`] in `scratch`'s buffers, into `value`.
fn linear_step_in(
    space: &ContactSpace,
    target: &DVector<f64>,
    sets: &[RowSet],
    known: &[Option<f64>],
    scratch: &mut Scratch,
    value: &mut DVector<f64>,
) {
    let w = space.delassus();
    super::system::shape_vector(value, space.rows());
    value.as_mut_slice().fill(0.0);
    let Scratch {
        columns,
        equations,
        a,
        rhs,
        x,
        work,
    } = scratch;
    columns.clear();
    equations.clear();
    for &r in space.bilateral() {
        columns.push(([r, r, r], [1.0, 0.0, 0.0], 1));
        equations.push(r);
    }
    let mut symmetric = true;
    let mut any_known = false;
    for (k, (rows, set)) in space.contacts().iter().zip(sets).enumerate() {
        let [x, y, z] = *rows;
        let normal = known.get(k).copied().flatten();
        any_known |= normal.is_some();
        match (*set, normal) {
            (RowSet::Off, Some(p)) => value[z] = p,
            (RowSet::Off, None) => {}
            (RowSet::Stick, None) => {
                for r in [x, y, z] {
                    columns.push(([r, r, r], [1.0, 0.0, 0.0], 1));
                    equations.push(r);
                }
            }
            (RowSet::Stick, Some(p)) => {
                value[z] = p;
                for r in [x, y] {
                    columns.push(([r, r, r], [1.0, 0.0, 0.0], 1));
                    equations.push(r);
                }
            }
            (RowSet::Slide { direction: d, mu }, None) => {
                columns.push(([z, x, y], [1.0, -mu * d[0], -mu * d[1]], 3));
                equations.push(z);
                symmetric = false;
            }
            (RowSet::Slide { direction: d, mu }, Some(p)) => {
                value[z] = p;
                value[x] = mu * p.abs() * d[0];
                value[y] = mu * p.abs() * d[1];
            }
        }
    }
    let n = columns.len();
    if n == 0 {
        return;
    }
    // With nothing known, `value` is zero and the target is what is left.
    let rest_known;
    let rest = if any_known {
        rest_known = target - w * &*value;
        &rest_known
    } else {
        target
    };
    let entry = |e: usize, k: usize| -> f64 {
        let (rows, coefficients, count) = &columns[k];
        (0..*count)
            .map(|j| coefficients[j] * w[(equations[e], rows[j])])
            .sum()
    };
    rhs.clear();
    rhs.extend(equations.iter().map(|&e| rest[e]));
    if !symmetric {
        let a = DMatrix::from_fn(n, n, entry);
        let rhs = DVector::from_column_slice(rhs);
        // The solver iterates on its input; a non-finite one has no answer.
        if !a.iter().chain(rhs.iter()).all(|x| x.is_finite()) {
            value.fill(f64::NAN);
            return;
        }
        let x = solve_min_norm_general(&a, &rhs).0;
        add_columns(value, columns, x.as_slice());
        return;
    }
    a.clear();
    a.extend((0..n * n).map(|at| entry(at / n, at % n)));
    if !a.iter().chain(rhs.iter()).all(|x| x.is_finite()) {
        value.fill(f64::NAN);
        return;
    }
    x.clear();
    x.resize(n, 0.0);
    work.clear();
    work.resize(n * n + n, 0.0);
    solve_min_norm_rows(a, n, rhs, x, work);
    add_columns(value, columns, x);
}

/// `value += Σ_k x_k · column_k`.
fn add_columns(value: &mut DVector<f64>, columns: &[Column], x: &[f64]) {
    for (k, (rows, coefficients, count)) in columns.iter().enumerate() {
        for j in 0..*count {
            value[rows[j]] += x[k] * coefficients[j];
        }
    }
}

/// One contact of an impulse phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PhaseContact {
    /// Friction coefficient for the whole impact.
    pub(crate) mu: f64,
    /// Whether it takes part (close enough to its plane).
    pub(crate) participates: bool,
    /// The known normal impulse of an expander (Poisson's second phase).
    pub(crate) known_normal: Option<f64>,
}

/// What [`phase`] returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Phase {
    /// `π` of the phase over every row, known normal impulses included.
    pub(crate) impulse: DVector<f64>,
    /// Row velocities at the phase's end, `v_s − W π`.
    pub(crate) velocity: DVector<f64>,
    /// How each contact ended the phase.
    pub(crate) sets: Vec<RowSet>,
    /// Contacts that stick although their impulse leaves the cone, because sliding along it
    /// would make their normal effective mass `W_zz − μ W_zt d̂` non-positive (impulsive
    /// Painlevé: the friction impulse would grow without bound, so the contact jams).
    pub(crate) jammed: Vec<bool>,
    /// A sliding direction did not settle within [`MAX_DIRECTION_ITERATIONS`].
    pub(crate) direction_unconverged: bool,
    /// The pruning rounds ran out before every contact was consistent.
    pub(crate) rounds_exhausted: bool,
}

/// `S(v_s, π_E)` (§4.2): the impulse of one phase under the implicit Coulomb law. Every
/// participant starts sticking; the linear step is solved with sliding contacts' directions
/// corrected towards their end-of-phase slip; then the worst violation is pruned (a pulling
/// normal → off, an impulse outside the cone → sliding along it, an off contact penetrating
/// faster than `v_tol` → sticking), ties together, at most `4k + 4` rounds.
pub(crate) fn phase(
    space: &ContactSpace,
    v_s: &DVector<f64>,
    contacts: &[PhaseContact],
    v_roll: f64,
    v_tol: f64,
) -> Phase {
    let w = space.delassus();
    let known: Vec<Option<f64>> = contacts
        .iter()
        .map(|c| c.known_normal.filter(|_| c.participates))
        .collect();
    let mut sets: Vec<RowSet> = contacts
        .iter()
        .map(|c| {
            if c.participates {
                RowSet::Stick
            } else {
                RowSet::Off
            }
        })
        .collect();
    let mut direction_unconverged = false;
    let mut jammed = vec![false; contacts.len()];
    let rounds = 4 * contacts.len() + 4;
    let mut round = 0;
    loop {
        let (impulse, velocity, settled) =
            settle_directions(space, v_s, &mut sets, &known, &mut jammed, v_roll);
        direction_unconverged |= !settled;
        let scale = impulse.amax().max(f64::MIN_POSITIVE);
        let tolerance = 1e-10 * scale;
        let mut violations: Vec<(usize, f64, RowSet)> = Vec::new();
        for (i, (rows, contact)) in space.contacts().iter().zip(contacts).enumerate() {
            if !contact.participates {
                continue;
            }
            let [x, y, z] = *rows;
            let tangential = impulse[x].hypot(impulse[y]);
            let along = |t: f64| [impulse[x] / t, impulse[y] / t];
            match (sets[i], known[i]) {
                (RowSet::Stick, None) => {
                    // An infinite coefficient (the guard's last resort) or a jammed contact
                    // has no cone.
                    let excess = if contact.mu.is_finite() && !jammed[i] {
                        tangential - contact.mu * impulse[z].abs()
                    } else {
                        0.0
                    };
                    // The larger of the two violations decides: a frictionless contact's
                    // sticking impulse may pull only because its tangential rows are held.
                    if impulse[z] > tolerance && impulse[z] >= excess {
                        // Sticking pulls. A contact that arrived approaching needs a push, so
                        // it is its tangential rows that pull it: it slides; else it opens.
                        let frictional = contact.mu.is_finite() && !jammed[i];
                        let set = if v_s[z] < -v_tol && frictional && tangential > 0.0 {
                            slide(along(tangential), contact.mu)
                        } else {
                            RowSet::Off
                        };
                        match set {
                            RowSet::Slide { direction, mu } if jams(w, rows, direction, mu) => {
                                violations.push((i, impulse[z], RowSet::Off));
                            }
                            _ => violations.push((i, impulse[z], set)),
                        }
                    } else if excess > tolerance {
                        let set = slide(along(tangential), contact.mu);
                        match set {
                            RowSet::Slide { direction, mu } if jams(w, rows, direction, mu) => {
                                jammed[i] = true;
                            }
                            _ => violations.push((i, excess, set)),
                        }
                    }
                }
                (RowSet::Slide { .. }, None) if impulse[z] > tolerance => {
                    violations.push((i, impulse[z], RowSet::Off));
                }
                (RowSet::Off, None) if velocity[z] < -v_tol => {
                    let needed = -velocity[z] / w[(z, z)].max(f64::MIN_POSITIVE);
                    violations.push((i, needed, RowSet::Stick));
                }
                (RowSet::Stick, Some(p)) => {
                    let excess = tangential - contact.mu * p.abs();
                    if excess > tolerance {
                        violations.push((i, excess, slide(along(tangential), contact.mu)));
                    }
                }
                _ => {}
            }
        }
        let worst = violations.iter().fold(0.0f64, |m, v| m.max(v.1));
        if violations.is_empty() || round == rounds {
            return Phase {
                impulse,
                velocity,
                sets,
                jammed,
                direction_unconverged,
                rounds_exhausted: !violations.is_empty(),
            };
        }
        for (i, size, set) in violations {
            if size >= worst * (1.0 - TIE) {
                sets[i] = set;
            }
        }
        round += 1;
    }
}

/// Whether sliding along `direction` with `mu` leaves the normal row an effective mass
/// `W_zz − μ (W_zx d_x + W_zy d_y)` of at most [`PAINLEVE`] `W_zz` (§3.3).
pub(crate) fn jams(w: &DMatrix<f64>, rows: &[usize; 3], direction: [f64; 2], mu: f64) -> bool {
    let [x, y, z] = *rows;
    let a_eff = w[(z, z)] - mu * (w[(z, x)] * direction[0] + w[(z, y)] * direction[1]);
    a_eff <= PAINLEVE * w[(z, z)]
}

/// A sliding set along `direction` (a unit vector, or any if the impulse was zero).
fn slide(direction: [f64; 2], mu: f64) -> RowSet {
    let direction = if direction.iter().all(|d| d.is_finite()) {
        direction
    } else {
        [1.0, 0.0]
    };
    RowSet::Slide { direction, mu }
}

/// The linear step with every sliding contact's direction moved towards its end-of-phase slip
/// `v̂_e,t` while that slip is faster than `v_roll`, until none moves (at most
/// [`MAX_DIRECTION_ITERATIONS`] times; false then). The fixed point is §4.2's (`d̂ = v̂_e,t`).
/// The spec moves `d̂` halfway each time, which converges at about half the residual per
/// iteration at best, and not at all where the slip swings back past `d̂` (a corner with a long
/// lever arm) or where contacts pull each other's slip around. Here the sliding contacts' angles
/// `φ` take Broyden steps on `h(φ) = angle(v̂(φ)) − φ` (starting from the full step `d̂ ← v̂`,
/// steps at most π/2 long, restarted when the set of slipping contacts changes): a single
/// contact settles in a few iterations, and coupled ones mostly do too.
fn settle_directions(
    space: &ContactSpace,
    v_s: &DVector<f64>,
    sets: &mut [RowSet],
    known: &[Option<f64>],
    jammed: &mut [bool],
    v_roll: f64,
) -> (DVector<f64>, DVector<f64>, bool) {
    let w = space.delassus();
    // Broyden's state: the slipping contacts, their angles, residuals and Jacobian estimate.
    let mut state: Option<Broyden> = None;
    let mut iteration = 0;
    loop {
        let impulse = linear_step(space, v_s, sets, known);
        let velocity = v_s - w * &impulse;
        let mut active = Vec::new();
        let (mut phi, mut h) = (Vec::new(), Vec::new());
        for (i, (rows, set)) in space.contacts().iter().zip(sets.iter()).enumerate() {
            let RowSet::Slide { direction: d, .. } = *set else {
                continue;
            };
            let (sx, sy) = (velocity[rows[0]], velocity[rows[1]]);
            if sx.hypot(sy) <= v_roll {
                continue;
            }
            let angle = d[1].atan2(d[0]);
            active.push(i);
            phi.push(angle);
            h.push(wrap_angle(sy.atan2(sx) - angle));
        }
        let settled = h.iter().all(|r| r.abs() <= DIRECTION_TOLERANCE);
        if settled || iteration == MAX_DIRECTION_ITERATIONS {
            return (impulse, velocity, settled);
        }
        let (phi, h) = (DVector::from_vec(phi), DVector::from_vec(h));
        let n = active.len();
        let jacobian = match state.take() {
            Some((old_active, old_phi, old_h, mut j)) if old_active == active => {
                let dphi = DVector::from_fn(n, |k, _| wrap_angle(phi[k] - old_phi[k]));
                let dh = &h - &old_h;
                let norm = dphi.norm_squared();
                if norm > 0.0 {
                    let correction = (dh - &j * &dphi) / norm;
                    j += correction * dphi.transpose();
                }
                j
            }
            _ => -DMatrix::identity(n, n),
        };
        let mut step = jacobian
            .clone()
            .lu()
            .solve(&(-&h))
            .filter(|s| s.iter().all(|x| x.is_finite()))
            .unwrap_or_else(|| &h * 0.5);
        let longest = step.amax();
        if longest > std::f64::consts::FRAC_PI_2 {
            step *= std::f64::consts::FRAC_PI_2 / longest;
        }
        for (k, &i) in active.iter().enumerate() {
            let RowSet::Slide { mu, .. } = sets[i] else {
                continue;
            };
            let angle = phi[k] + step[k];
            let direction = [angle.cos(), angle.sin()];
            sets[i] = if known[i].is_none() && jams(w, &space.contacts()[i], direction, mu) {
                jammed[i] = true;
                RowSet::Stick
            } else {
                RowSet::Slide { direction, mu }
            };
        }
        state = Some((active, phi, h, jacobian));
        iteration += 1;
    }
}

/// Broyden's state in [`settle_directions`]: the slipping contacts, their angles and residual
/// angles, and the Jacobian estimate.
type Broyden = (Vec<usize>, DVector<f64>, DVector<f64>, DMatrix<f64>);

/// `a` wrapped into `(−π, π]`.
fn wrap_angle(a: f64) -> f64 {
    use std::f64::consts::{PI, TAU};
    let r = a.rem_euclid(TAU);
    if r > PI { r - TAU } else { r }
}
