//! The impact law (`unilateral.md` §4): Poisson's two phases by default — compression to zero
//! normal approach under the implicit Coulomb law, then expansion by `e` times the compression
//! impulse with friction acting again, then a plastic correction if a contact still approaches —
//! or Newton's one phase as an option; an energy guard; the energy each contact took.

use nalgebra::DVector;

use super::phase::{Phase, PhaseContact, phase};
use super::{Coefficients, ContactSpace, ImpactLaw, Tolerances};
use crate::error::{Error, Result};

/// Bisection steps of the energy guard (§4.3, step 5).
const GUARD_STEPS: usize = 50;
/// Relative kinetic-energy gain the guard tolerates (rounding).
const GAIN_TOLERANCE: f64 = 1e-12;

/// One contact as an impact sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImpactContact {
    /// Its coefficients.
    pub coefficients: Coefficients,
    /// Whether it takes part: its separation is within `p_tol` (impacting or resting on its
    /// plane). Contacts farther away keep a zero impulse.
    pub participates: bool,
}

/// What an impact did.
#[derive(Debug, Clone, PartialEq)]
pub struct ImpactOutcome {
    /// Total impulse `π` per row (Simbody's sign: the physical impulse on the sphere or
    /// follower is `−π`; `u⁺ = u⁻ − M⁻¹ Gᵀ π`).
    pub impulse: DVector<f64>,
    /// Row velocities after the impact, `v⁻ − W π`.
    pub velocity: DVector<f64>,
    /// `T⁺ − T⁻ = −π · v⁻ + ½ πᵀ W π` (≤ 0 up to rounding).
    pub energy_change: f64,
    /// Energy each contact took, `Σ_phases π_i · (v_i,start + v_i,end) / 2` (their sum is
    /// `T⁻ − T⁺` when no bilateral row works).
    pub losses: Vec<f64>,
    /// Whether each contact ends closed: it took part and separates no faster than `v_tol`.
    pub closed: Vec<bool>,
    /// Restitution each contact used (`0` where captured, §4.1).
    pub restitution: Vec<f64>,
    /// Friction coefficient each contact used: `μ_s` if it arrived slipping no faster than
    /// `v_roll`, else `μ_d`.
    pub friction: Vec<f64>,
    /// Contacts that stuck although their impulse left the cone, because sliding would have
    /// made their normal effective mass non-positive (impulsive Painlevé: they jam).
    pub jammed: Vec<bool>,
    /// The energy guard scaled the expansion down (or, if even no expansion gained, replaced
    /// the impact by a plastic one in which every participant sticks).
    pub energy_clamped: bool,
    /// A sliding direction did not settle (the phase's iteration bound was reached).
    pub direction_unconverged: bool,
    /// A phase's pruning rounds ran out.
    pub rounds_exhausted: bool,
}

/// The impact of one instance at row velocities `v_minus` and kinetic energy `kinetic_energy`
/// (used by the energy guard's relative test), with `law`.
pub fn impact(
    space: &ContactSpace,
    v_minus: &DVector<f64>,
    kinetic_energy: f64,
    contacts: &[ImpactContact],
    law: ImpactLaw,
    tol: &Tolerances,
) -> Result<ImpactOutcome> {
    if v_minus.len() != space.rows() {
        return Err(Error::Dimension {
            what: "impact row velocities",
            got: v_minus.len(),
            expected: space.rows(),
        });
    }
    if contacts.len() != space.contacts().len() {
        return Err(Error::Dimension {
            what: "impact contacts",
            got: contacts.len(),
            expected: space.contacts().len(),
        });
    }
    if !v_minus.iter().all(|v| v.is_finite()) || !kinetic_energy.is_finite() {
        return Err(Error::BadChoice {
            what: "impact state",
            value: "non-finite velocities or energy".into(),
            accepted: "finite row velocities and kinetic energy",
        });
    }
    let w = space.delassus();
    let mut friction = Vec::with_capacity(contacts.len());
    let mut restitution = Vec::with_capacity(contacts.len());
    for (rows, c) in space.contacts().iter().zip(contacts) {
        let [x, y, z] = *rows;
        let slip = v_minus[x].hypot(v_minus[y]);
        let k = &c.coefficients;
        friction.push(if slip <= tol.v_roll {
            k.mu_static
        } else {
            k.mu_dynamic
        });
        let captured = k.restitution * v_minus[z].abs() <= tol.v_cap;
        restitution.push(if captured { 0.0 } else { k.restitution });
    }
    let base: Vec<PhaseContact> = contacts
        .iter()
        .zip(&friction)
        .map(|(c, mu)| PhaseContact {
            mu: *mu,
            participates: c.participates,
            known_normal: None,
        })
        .collect();

    // The phases for a given scale σ of the restitution part: (π, v_start, v_end) each.
    let run = |sigma: f64| -> (Vec<(Phase, DVector<f64>)>, bool) {
        let mut phases = Vec::new();
        let end = match law {
            ImpactLaw::Poisson => {
                let compression = phase(space, v_minus, &base, tol.v_roll, tol.v_tol);
                let v_c = compression.velocity.clone();
                let known: Vec<PhaseContact> = base
                    .iter()
                    .zip(space.contacts())
                    .zip(&restitution)
                    .map(|((b, rows), e)| {
                        let normal = compression.impulse[rows[2]];
                        let expands = b.participates && *e > 0.0 && normal < 0.0;
                        PhaseContact {
                            known_normal: expands.then_some(sigma * e * normal),
                            ..*b
                        }
                    })
                    .collect();
                phases.push((compression, v_minus.clone()));
                if known.iter().any(|c| c.known_normal.is_some()) {
                    let expansion = phase(space, &v_c, &known, tol.v_roll, tol.v_tol);
                    let v_e = expansion.velocity.clone();
                    phases.push((expansion, v_c));
                    v_e
                } else {
                    v_c
                }
            }
            ImpactLaw::Newton => {
                let mut target = v_minus.clone();
                for ((rows, b), e) in space.contacts().iter().zip(&base).zip(&restitution) {
                    let z = rows[2];
                    if b.participates && v_minus[z] < -tol.v_tol {
                        target[z] *= 1.0 + sigma * e;
                    }
                }
                let mut one = phase(space, &target, &base, tol.v_roll, tol.v_tol);
                // The phase ran to the Newton target; its real end is v⁻ − W π.
                one.velocity = v_minus - w * &one.impulse;
                let end = one.velocity.clone();
                phases.push((one, v_minus.clone()));
                end
            }
        };
        // Correction: a contact that still approaches gets one more plastic phase.
        let approaching = space
            .contacts()
            .iter()
            .zip(&base)
            .any(|(rows, b)| b.participates && end[rows[2]] < -tol.v_tol);
        if approaching {
            let correction = phase(space, &end, &base, tol.v_roll, tol.v_tol);
            let still =
                correction.rounds_exhausted
                    || space.contacts().iter().zip(&base).any(|(rows, b)| {
                        b.participates && correction.velocity[rows[2]] < -tol.v_tol
                    });
            if still {
                // The frictional pruning found no consistent set: stop every participant as a
                // plastic impact with infinite friction would.
                let v = correction.velocity.clone();
                phases.push((correction, end));
                phases.push(jam_projection(space, &v, &base, tol));
            } else {
                phases.push((correction, end));
            }
        }
        let total = phases
            .iter()
            .fold(DVector::zeros(space.rows()), |sum, (p, _)| sum + &p.impulse);
        let gains = energy_change(w, v_minus, &total) > GAIN_TOLERANCE * kinetic_energy.abs();
        (phases, gains)
    };

    let (mut phases, gains) = run(1.0);
    let mut energy_clamped = false;
    if gains {
        energy_clamped = true;
        let (mut lo, mut hi) = (0.0, 1.0);
        let (at_zero, zero_gains) = run(0.0);
        if zero_gains {
            phases = vec![jam_projection(space, v_minus, &base, tol)];
        } else {
            phases = at_zero;
            for _ in 0..GUARD_STEPS {
                let mid = 0.5 * (lo + hi);
                let (trial, trial_gains) = run(mid);
                if trial_gains {
                    hi = mid;
                } else {
                    lo = mid;
                    phases = trial;
                }
            }
        }
    }

    let mut impulse = DVector::zeros(space.rows());
    let mut losses = vec![0.0; contacts.len()];
    let mut direction_unconverged = false;
    let mut rounds_exhausted = false;
    let mut jammed = vec![false; contacts.len()];
    for (p, start) in &phases {
        for (j, p) in jammed.iter_mut().zip(&p.jammed) {
            *j |= *p;
        }
        impulse += &p.impulse;
        direction_unconverged |= p.direction_unconverged;
        rounds_exhausted |= p.rounds_exhausted;
        for (loss, rows) in losses.iter_mut().zip(space.contacts()) {
            for &r in rows {
                *loss += p.impulse[r] * (start[r] + p.velocity[r]) / 2.0;
            }
        }
    }
    let velocity = v_minus - w * &impulse;
    let closed = space
        .contacts()
        .iter()
        .zip(contacts)
        .map(|(rows, c)| c.participates && velocity[rows[2]] <= tol.v_tol)
        .collect();
    Ok(ImpactOutcome {
        energy_change: energy_change(w, v_minus, &impulse),
        impulse,
        velocity,
        losses,
        closed,
        restitution,
        friction,
        jammed,
        energy_clamped,
        direction_unconverged,
        rounds_exhausted,
    })
}

/// `T⁺ − T⁻` of the impulse `π` at row velocities `v⁻`: `−π · v⁻ + ½ πᵀ W π`.
fn energy_change(
    w: &nalgebra::DMatrix<f64>,
    v_minus: &DVector<f64>,
    impulse: &DVector<f64>,
) -> f64 {
    -impulse.dot(v_minus) + 0.5 * impulse.dot(&(w * impulse))
}

/// The guard's last resort: a plastic impact in which every participant sticks whatever its
/// impulse (infinite friction; normals still only push). By complementarity its energy change
/// is `−½ πᵀ W π ≤ 0`, so it never gains.
fn jam_projection(
    space: &ContactSpace,
    v_minus: &DVector<f64>,
    base: &[PhaseContact],
    tol: &Tolerances,
) -> (Phase, DVector<f64>) {
    let jam: Vec<PhaseContact> = base
        .iter()
        .map(|c| PhaseContact {
            mu: f64::INFINITY,
            ..*c
        })
        .collect();
    (
        phase(space, v_minus, &jam, tol.v_roll, tol.v_tol),
        v_minus.clone(),
    )
}
