//! The vocabulary of unilateral contact (`unilateral.md` §1, §2, §8) that the CPU's event-driven
//! path (`cpu::unilateral`) and the GPU's contact laws (`gpu::contact_laws`) share: a contact's
//! coefficients, its mode, the impact law and the tolerances. Here, apart from both, so that
//! neither path depends on the other (`cpu::unilateral` re-exports them under their old names).

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

/// Which restitution law an impact follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImpactLaw {
    /// Two-phase Poisson (Simbody's `performSimultaneousImpact`): the expansion impulse is `e`
    /// times the compression impulse, normal by normal. The default.
    #[default]
    Poisson,
    /// One phase to the Newton target `v_n⁺ ≥ −e v_n⁻` at the impacting contacts.
    Newton,
}
