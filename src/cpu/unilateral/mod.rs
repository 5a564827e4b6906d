//! Unilateral contact with Coulomb friction and restitution in *contact space* (`unilateral.md`):
//! the per-instance laws an event-driven stepper applies at an instant — the impact law (§4) and
//! the determination of the contact modes with their multipliers (§3) — written on the Delassus
//! matrix `W = G M⁻¹ Gᵀ` of the instance's rows and on row velocities or accelerations, so they
//! hold for any bodies and any contact kind.
//!
//! Every contact owns three rows `(x, y, z)`: two tangential (slip of the contact point along the
//! plane axes `Px`, `Py`) and the normal one (`Pz`, the separation's rate). Simbody's sign is
//! kept: an impulse `π` changes the row velocities by `Δv = −W π` and the physical impulse on the
//! sphere or follower is `−π`, so a pushing normal impulse has `π_z ≤ 0`; multipliers likewise
//! (`λ_z ≤ 0` pushes, `N = −λ_z`). Rows of bilateral constraints in the same instance are
//! enforced throughout.
//!
//! Both laws come down to the same linear step (`phase.rs`): each contact contributes its rows
//! according to a [`RowSet`] — none (open), all three (sticking), or the normal one with the
//! friction tied to it along a fixed direction (sliding: `π_t = −μ π_z d̂`, a non-symmetric
//! system) — and the system is solved for the minimum-norm answer (redundant rows, such as a
//! brick's four coplanar corners, have many). Modes are then pruned one violation at a time,
//! worst first and ties together (PLUS's successive pruning), within a bound on the rounds.
//!
//! [`InstanceContacts`] reads an instance's contact space from the engine's own assembled rows
//! (a `SphereOnPlaneContact` with rolling rows is a unilateral contact's `(x, y, z)`), and maps
//! impulses and multipliers back to `u` and `u̇`.
//!
//! What is here is instantaneous: the stepper that locates events and calls these laws per
//! instance is built on top of it.

mod event;
mod impact;
mod machine;
mod modes;
mod phase;
mod stepper;
mod system;

pub use impact::{ImpactContact, ImpactLaw, ImpactOutcome, impact};
pub use modes::{ModeContact, ModeSolution, solve_modes};
pub use phase::RowSet;
pub use stepper::{
    ContactRecord, Event, EventOptions, EventRun, UnilateralContact, contact_multipliers,
    run_batch, run_batch_resuming, run_instance,
};
pub use system::InstanceContacts;

use nalgebra::DMatrix;

use crate::error::{Error, Result};

/// Friction and restitution of one contact in one instance (`unilateral.md` §1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coefficients {
    /// Newton/Poisson coefficient of restitution `e ∈ [0, 1]`.
    pub restitution: f64,
    /// Static friction `μ_s` (while sticking), `μ_s ≥ μ_d`.
    pub mu_static: f64,
    /// Dynamic friction `μ_d ≥ 0` (while sliding).
    pub mu_dynamic: f64,
}

impl Coefficients {
    /// Checked coefficients: `e ∈ [0, 1]`, `μ_s ≥ μ_d ≥ 0`, all finite.
    pub fn new(restitution: f64, mu_static: f64, mu_dynamic: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&restitution) {
            return Err(Error::BadChoice {
                what: "restitution",
                value: restitution.to_string(),
                accepted: "a number in [0, 1]",
            });
        }
        if !mu_dynamic.is_finite() || mu_dynamic < 0.0 {
            return Err(Error::BadChoice {
                what: "dynamic friction",
                value: mu_dynamic.to_string(),
                accepted: "a finite number ≥ 0",
            });
        }
        if !mu_static.is_finite() || mu_static < mu_dynamic {
            return Err(Error::BadChoice {
                what: "static friction",
                value: mu_static.to_string(),
                accepted: "a finite number ≥ the dynamic friction",
            });
        }
        Ok(Self {
            restitution,
            mu_static,
            mu_dynamic,
        })
    }

    /// One friction coefficient for both regimes.
    pub fn with_friction(restitution: f64, mu: f64) -> Result<Self> {
        Self::new(restitution, mu, mu)
    }
}

/// The mode of one contact (`unilateral.md` §2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ContactMode {
    /// Apart (or touching without force): no row enforced.
    Open,
    /// Sticking (rolling, for a sphere): all three rows enforced, friction from the solve within
    /// the static cone.
    Stick,
    /// Sliding along the unit tangential direction `(x, y)` in the plane axes: the normal row is
    /// enforced and friction is `λ_t = μ_d |λ_z| ŝ`.
    Slide {
        /// Slip direction `ŝ`.
        direction: [f64; 2],
    },
}

/// The tolerances of `unilateral.md` §8, for one instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Proximity: a contact with separation `s ≤ p_tol` takes part in impacts (m).
    pub p_tol: f64,
    /// Impact versus touchdown, and allowed penetration speed in an impact (m/s).
    pub v_tol: f64,
    /// Plastic capture: a contact with `e |v_n⁻| ≤ v_cap` ends its impact at rest (m/s).
    pub v_cap: f64,
    /// Slip speed below which a contact counts as sticking (m/s).
    pub v_roll: f64,
    /// Force margin for liftoff and for leaving the friction cone (N).
    pub f_tol: f64,
    /// Acceleration an impending contact must reach to start sliding (m/s²).
    pub a_tol: f64,
    /// Smallest event bracket (s); at time `t` the bracket is `max(t_tol, 4 ulp(t))`.
    pub t_tol: f64,
}

impl Tolerances {
    /// The f64 defaults for constraint tolerance `ctol`, gravity magnitude `gravity`, the mass
    /// `mass` of the contacting body and the user's floors for `v_cap` and `v_roll` (0 for
    /// none).
    pub fn f64(ctol: f64, gravity: f64, mass: f64, v_cap: f64, v_roll: f64) -> Self {
        Self::with_scales(ctol, gravity, mass, v_cap, v_roll, 1e-9, 1e-9)
    }

    /// The f32 defaults (the GPU's): wider force, acceleration and time margins.
    pub fn f32(ctol: f64, gravity: f64, mass: f64, v_cap: f64, v_roll: f64) -> Self {
        Self::with_scales(ctol, gravity, mass, v_cap, v_roll, 1e-5, 1e-6)
    }

    fn with_scales(
        ctol: f64,
        gravity: f64,
        mass: f64,
        v_cap: f64,
        v_roll: f64,
        relative: f64,
        t_tol: f64,
    ) -> Self {
        let v_tol = 2.0 * ctol;
        let weight = mass * gravity;
        Self {
            p_tol: ctol,
            v_tol,
            v_cap: v_cap.max(v_tol).max(20.0 * gravity * t_tol),
            v_roll: v_roll.max(2.0 * ctol),
            f_tol: if weight > 0.0 {
                relative * weight
            } else {
                relative
            },
            a_tol: relative * gravity.max(1.0),
            t_tol,
        }
    }

    /// The event bracket width at time `t`: `max(t_tol, 4 ulp(t))`.
    pub fn bracket_at(&self, t: f64) -> f64 {
        let ulp = f64::from_bits(t.abs().to_bits() + 1) - t.abs();
        self.t_tol.max(4.0 * ulp)
    }
}

/// An instance's rows as the contact laws see them: `W = G M⁻¹ Gᵀ` over every row, the rows of
/// each contact in `(x, y, z)` order and the rows of bilateral constraints (always enforced).
/// Rows named by neither take no part.
#[derive(Debug, Clone, PartialEq)]
pub struct ContactSpace {
    w: DMatrix<f64>,
    contacts: Vec<[usize; 3]>,
    bilateral: Vec<usize>,
}

impl ContactSpace {
    /// Checks that `w` is square, finite and symmetric (to 1e-12 relative), and that every row
    /// index is in range and named once.
    pub fn new(w: DMatrix<f64>, contacts: Vec<[usize; 3]>, bilateral: Vec<usize>) -> Result<Self> {
        let n = w.nrows();
        if w.ncols() != n {
            return Err(Error::Dimension {
                what: "contact space W columns",
                got: w.ncols(),
                expected: n,
            });
        }
        let scale = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let symmetric =
            (0..n).all(|i| (0..i).all(|j| (w[(i, j)] - w[(j, i)]).abs() <= 1e-12 * scale));
        if !symmetric {
            return Err(not_a_delassus(n));
        }
        Self::built(w, contacts, bilateral)
    }

    /// A contact space built by [`InstanceContacts`]: `w` symmetric by construction (its two
    /// triangles averaged), so the symmetry test of [`new`](Self::new) is left out — this runs
    /// at every RK4 stage and event test of the event path, where that test took a fortieth
    /// of the time. Finiteness and the rows are checked here, for both.
    pub(crate) fn built(
        w: DMatrix<f64>,
        contacts: Vec<[usize; 3]>,
        bilateral: Vec<usize>,
    ) -> Result<Self> {
        let n = w.nrows();
        debug_assert!(
            !w.iter().all(|x| x.is_finite())
                || (0..n).all(|i| (0..i).all(|j| w[(i, j)] == w[(j, i)]))
        );
        if w.ncols() != n || !w.iter().all(|x| x.is_finite()) {
            return Err(not_a_delassus(n));
        }
        check_rows(n, &contacts, &bilateral)?;
        Ok(Self {
            w,
            contacts,
            bilateral,
        })
    }

    /// `W`, the contacts' rows and the bilateral rows, for their buffers to be reused.
    pub(crate) fn into_parts(self) -> (DMatrix<f64>, Vec<[usize; 3]>, Vec<usize>) {
        (self.w, self.contacts, self.bilateral)
    }

    /// `W`.
    pub fn delassus(&self) -> &DMatrix<f64> {
        &self.w
    }

    /// Rows `(x, y, z)` of each contact.
    pub fn contacts(&self) -> &[[usize; 3]] {
        &self.contacts
    }

    /// Rows of bilateral constraints.
    pub fn bilateral(&self) -> &[usize] {
        &self.bilateral
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.w.nrows()
    }
}

/// The refusal of an `n × n` matrix that is not a finite symmetric `W`.
fn not_a_delassus(n: usize) -> Error {
    Error::BadChoice {
        what: "contact space W",
        value: format!("{n}×{n} matrix"),
        accepted: "a finite symmetric matrix G M⁻¹ Gᵀ",
    }
}

/// Every row of `contacts` and `bilateral` is below `n` and named once.
fn check_rows(n: usize, contacts: &[[usize; 3]], bilateral: &[usize]) -> Result<()> {
    // On the stack for the usual few rows (this runs at every stage of the event path).
    let (mut small, mut large) = ([false; 64], Vec::new());
    let seen: &mut [bool] = if n <= small.len() {
        &mut small[..n]
    } else {
        large.resize(n, false);
        &mut large
    };
    for &r in contacts.iter().flatten().chain(bilateral.iter()) {
        if r >= n || seen[r] {
            return Err(Error::BadHandle {
                what: "contact space row",
                index: r,
                reason: format!("rows must be < {n} and named once"),
            });
        }
        seen[r] = true;
    }
    Ok(())
}
