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
mod pool;
mod stepper;
mod system;

pub use impact::{ImpactContact, ImpactOutcome, impact};
pub use modes::{ModeContact, ModeSolution, solve_modes};
pub use phase::RowSet;
pub use stepper::{
    Event, EventRun, contact_multipliers, run_batch, run_batch_resuming, run_instance,
    run_selected_resuming,
};
pub use system::InstanceContacts;

pub use crate::contact::{
    Coefficients, ContactMode, ContactRecord, EventOptions, ImpactLaw, Tolerances,
    UnilateralContact,
};

use nalgebra::DMatrix;

use crate::error::{Error, Result};

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
        let space = Self {
            w,
            contacts,
            bilateral,
        };
        space.check_finite_and_rows()?;
        Ok(space)
    }

    /// The checks of a space that [`InstanceContacts`] filled in place: `w` is symmetric by
    /// construction (its two triangles averaged, exactly equal), so the symmetry test of
    /// [`new`](Self::new) is left out — this runs at every RK4 stage and event test of the
    /// event path, where that test took a fortieth of the time. Finiteness and the rows are
    /// checked, as `new` checks them.
    pub(crate) fn check_built(&self) -> Result<()> {
        let w = &self.w;
        let n = w.nrows();
        debug_assert!(
            !w.iter().all(|x| x.is_finite())
                || (0..n).all(|i| (0..i).all(|j| w[(i, j)] == w[(j, i)]))
        );
        self.check_finite_and_rows()
    }

    /// `w` square and finite, and every row index in range and named once.
    fn check_finite_and_rows(&self) -> Result<()> {
        let w = &self.w;
        let n = w.nrows();
        // Over the storage without stopping early, which the compiler vectorizes (nalgebra's
        // entry iterator, with its stride arithmetic per entry, took a sixth of a brick study).
        let finite = w.as_slice().iter().fold(true, |all, x| all & x.is_finite());
        if w.ncols() != n || !finite {
            return Err(not_a_delassus(n));
        }
        check_rows(n, &self.contacts, &self.bilateral)
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
