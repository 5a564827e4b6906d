//! The vocabulary of unilateral contact (`unilateral.md` §1, §2, §8) that the CPU's event-driven
//! path (`cpu::unilateral`) and the GPU's contact laws (`gpu::contact_laws`) share: a contact's
//! coefficients, its mode, the impact law and the tolerances. Here, apart from both, so that
//! neither path depends on the other (`cpu::unilateral` re-exports them under their old names).

use crate::error::{Error, Result};
use crate::model::ConstraintId;

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
        let k = Self {
            restitution,
            mu_static,
            mu_dynamic,
        };
        k.check()?;
        Ok(k)
    }

    /// Whether these coefficients are valid (`e ∈ [0, 1]`, `μ_s ≥ μ_d ≥ 0`, all finite); a
    /// typed error naming the first that is not. The fields are public, so coefficients built
    /// without [`new`](Self::new) are checked where a run takes them: the event paths
    /// (`cpu::unilateral::run_batch` and its kin, `gpu::events::GpuEventStepper::run`) refuse
    /// invalid ones before stepping anything.
    pub fn check(&self) -> Result<()> {
        let Self {
            restitution,
            mu_static,
            mu_dynamic,
        } = *self;
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
        Ok(())
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
        /// Slip direction `ŝ`: in a run's records, the slip's direction at the start of the
        /// last step (ŝ_a, which an event inside that step is settled with), or, while the
        /// slip has not exceeded `v_roll` since the contact began to slide, the direction it
        /// began in (its impending direction).
        direction: [f64; 2],
    },
}

impl ContactMode {
    /// The mode as a number — 0 open, 1 sticking (rolling), 2 sliding — and its sliding
    /// direction (`[1, 0]` when it does not slide): how result files and the GPU kernels (the
    /// shaders' `MODE_*`) carry it.
    pub fn code(self) -> (u32, [f64; 2]) {
        match self {
            ContactMode::Open => (0, [1.0, 0.0]),
            ContactMode::Stick => (1, [1.0, 0.0]),
            ContactMode::Slide { direction } => (2, direction),
        }
    }

    /// The mode of [`code`](Self::code)'s number and direction (an unknown number: open).
    pub fn from_code(code: u32, direction: [f64; 2]) -> Self {
        match code {
            1 => ContactMode::Stick,
            2 => ContactMode::Slide { direction },
            _ => ContactMode::Open,
        }
    }
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

/// A constraint taken as a unilateral contact, with its coefficients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnilateralContact {
    /// The contact (an enabled `SphereOnPlaneContact` with rolling rows).
    pub constraint: ConstraintId,
    /// Its restitution and friction.
    pub coefficients: Coefficients,
}

/// How `cpu::unilateral::run_instance` steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventOptions {
    /// RK4 step between events (s): the longest one; an instance with a slowly sliding
    /// contact takes shorter ones, as RK4's stability for its friction needs (README "Events"), down to 1/4096 of it.
    /// With [`accuracy`](Self::accuracy), the longest adaptive step (the stability limit then
    /// stops at the minimum step instead, the trials being bounded by their count).
    pub step: f64,
    /// Error control (`unilateral.md` §6: "Error control (RKM) stays per instance"). `None`
    /// (the default): RK4 steps of [`step`](Self::step). `Some(accuracy)`, in (0, 1): each
    /// instance steps by Runge–Kutta–Merson, its own step adapted so that Simbody's error
    /// estimate — `|y₁ − ŷ| / 5` relative to `max(1, |y|)` over the free bodies' q and u, as
    /// the bilateral RKM — stays within `accuracy`; `step` is the longest step. The CPU's event
    /// path and the GPU's event kernels (built a second time for it) both control the error.
    pub accuracy: Option<f64>,
    /// Impact law.
    pub law: ImpactLaw,
    /// Constraint tolerance `ctol` the tolerances of §8 derive from.
    pub constraint_tolerance: f64,
    /// The user's floor for the capture speed `v_cap` (0: §8's default).
    pub capture_speed: f64,
    /// The user's floor for the stick speed `v_roll` (0: §8's default).
    pub roll_speed: f64,
    /// Most events per instance in one call: past it the instance's run fails
    /// (`cpu::unilateral::run_instance` returns the error, `cpu::unilateral::run_batch` flags the instance
    /// `status::STEP_FAILED` and keeps its state).
    pub max_events: usize,
}

impl EventOptions {
    /// The checks every run makes before any work, on either path: a step and a constraint
    /// tolerance finite and > 0, an accuracy (when given) in (0, 1), a duration finite and ≥ 0.
    pub fn check(&self, duration: f64) -> Result<()> {
        for (what, v) in [
            ("event step", self.step),
            ("constraint tolerance", self.constraint_tolerance),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::BadChoice {
                    what,
                    value: v.to_string(),
                    accepted: "a finite number > 0",
                });
            }
        }
        if let Some(a) = self.accuracy
            && !(a > 0.0 && a < 1.0)
        {
            return Err(Error::BadChoice {
                what: "event accuracy",
                value: a.to_string(),
                accepted: "a number in (0, 1), or None for fixed RK4 steps",
            });
        }
        if !duration.is_finite() || duration < 0.0 {
            return Err(Error::BadChoice {
                what: "duration",
                value: duration.to_string(),
                accepted: "a finite number ≥ 0",
            });
        }
        Ok(())
    }
}

impl Default for EventOptions {
    fn default() -> Self {
        Self {
            step: 1e-3,
            accuracy: None,
            law: ImpactLaw::Poisson,
            constraint_tolerance: 1e-4,
            capture_speed: 0.0,
            roll_speed: 0.0,
            max_events: 100_000,
        }
    }
}

/// What happened to one contact during a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactRecord {
    /// Its mode at the end.
    pub mode: ContactMode,
    /// Impacts it took part in while approaching.
    pub impacts: u32,
    /// Time of its first impact.
    pub first_impact: Option<f64>,
    /// Time of its last mode change.
    pub last_mode_change: Option<f64>,
    /// Energy it took in impacts and projections.
    pub impact_loss: f64,
    /// Energy its force took while closed, `∫ λ · v dt` over its rows: sliding friction's
    /// `∫ μ_d |λ_z| |v_t| dt` (§7), integrated with the state.
    pub friction_loss: f64,
    /// Whether, at the end, its slip has exceeded `v_roll` since its last mode change (only
    /// then may slip → stick fire, §2's hysteresis). With `mode`, what a later call resumes
    /// from (`cpu::unilateral::run_batch_resuming`).
    pub armed: bool,
}

impl ContactRecord {
    /// The record of a run cut into two calls, this one's and `later`'s (resumed from it): the
    /// later mode and slip readiness, the impacts and losses of both, the first impact of
    /// either and the last mode change of either. What a study keeps across its record
    /// intervals.
    pub fn then(self, later: ContactRecord) -> ContactRecord {
        ContactRecord {
            mode: later.mode,
            impacts: self.impacts + later.impacts,
            first_impact: self.first_impact.or(later.first_impact),
            last_mode_change: later.last_mode_change.or(self.last_mode_change),
            impact_loss: self.impact_loss + later.impact_loss,
            friction_loss: self.friction_loss + later.friction_loss,
            armed: later.armed,
        }
    }
}

/// Most bisection steps locating one event.
pub const MAX_BISECTIONS: usize = 200;

/// The shortest step, as a fraction of [`EventOptions::step`], that the sliding friction's
/// stability limit may ask for (`cpu::unilateral`'s stable step).
pub const MIN_STEP_FRACTION: f64 = 1.0 / 4096.0;

/// `h κ` at most for the sliding friction law (the event path's stable step): inside RK4's
/// stability interval on the negative real axis (2.785). The linearised rates are real (the
/// eigenvalues of `W_TT D`, `D` the sliding contacts' `μ_d N (I − ŝŝᵀ) / |v_t|` blocks, are
/// those of the symmetric `D^½ W_TT D^½`) and `κ` bounds them from above; 2.5 was no faster
/// on the default-sized unilateral study and doubled its largest energy error at h = 5 ms.
pub const STABLE_STEP_FACTOR: f64 = 2.0;

#[cfg(test)]
mod tests {
    use super::ContactMode;

    #[test]
    fn a_mode_survives_its_code() {
        for mode in [
            ContactMode::Open,
            ContactMode::Stick,
            ContactMode::Slide {
                direction: [0.6, -0.8],
            },
        ] {
            let (code, direction) = mode.code();
            assert_eq!(ContactMode::from_code(code, direction), mode);
        }
        assert_eq!(ContactMode::Stick.code().0, 1);
        assert_eq!(ContactMode::from_code(7, [1.0, 0.0]), ContactMode::Open);
    }
}
