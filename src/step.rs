//! What a stepping call asks for and what it reports, shared by the CPU integrators
//! (`integrate`) and the GPU stepping kernel (`gpu::step`): the integrator and drift-control
//! options, the goal of a call, and the bounds that make every call end (`physics.md` §6).
//! `Stepper` (in `integrate`) runs them on either backend.

use crate::error::{Error, Result};

/// How to advance the state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Integrator {
    /// Semi-implicit (symplectic) Euler: `u ← u + h u̇(q, u)`, then `q ← q + h N(q) u`.
    SemiImplicitEuler {
        /// Step size `h > 0`.
        step: f64,
    },
    /// Classic fourth-order Runge–Kutta with a fixed step.
    Rk4 {
        /// Step size `h > 0`.
        step: f64,
    },
    /// Simbody's Runge–Kutta–Merson: 5 stages, 4th-order solution, error estimate
    /// `|y₁ − ŷ| / 5`, per-instance step control to a relative `accuracy`.
    RungeKuttaMerson {
        /// Relative accuracy in (0, 1) (Simbody's default 1e-3).
        accuracy: f64,
        /// Largest step allowed.
        max_step: f64,
    },
}

/// How constraint drift is controlled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stabilization {
    /// Nothing: the constraints hold at the acceleration level only.
    None,
    /// Simbody: after each step, project q onto the position constraints (Newton, ≤ 20
    /// iterations, minimum-norm) and u onto the velocity constraints (≤ 7), whenever an error
    /// exceeds `tolerance`. No Baumgarte terms.
    Projection {
        /// Constraint tolerance (Simbody: accuracy / 10).
        tolerance: f64,
    },
    /// RBDL: Baumgarte terms on every constraint, with its per-instance time constant
    /// (`Batch::set_baumgarte_time_constant`); no projection.
    Baumgarte,
}

/// Integrator and drift control.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepOptions {
    /// The integrator.
    pub integrator: Integrator,
    /// The drift control.
    pub stabilization: Stabilization,
}

impl StepOptions {
    /// Simbody's defaults: RKM at accuracy 1e-3, projection to accuracy / 10.
    pub fn simbody(accuracy: f64) -> Self {
        Self {
            integrator: Integrator::RungeKuttaMerson {
                accuracy,
                max_step: 0.1,
            },
            stabilization: Stabilization::Projection {
                tolerance: accuracy / 10.0,
            },
        }
    }

    /// Checks every setting, naming the one out of range.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, value: f64, accepted: &str| Error::InvalidValue {
            field: field.to_string(),
            instance: 0,
            value: format!("{value:?}"),
            accepted: accepted.to_string(),
        };
        match self.integrator {
            Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step } => {
                if !(step.is_finite() && step > 0.0) {
                    return Err(bad(
                        "integrator.step",
                        step,
                        "a finite number > 0 (seconds)",
                    ));
                }
            }
            Integrator::RungeKuttaMerson { accuracy, max_step } => {
                if !(accuracy > 0.0 && accuracy < 1.0) {
                    return Err(bad("integrator.accuracy", accuracy, "a number in (0, 1)"));
                }
                if !(max_step.is_finite() && max_step >= MIN_STEP) {
                    return Err(bad(
                        "integrator.max_step",
                        max_step,
                        "a finite number ≥ 1e-12 (seconds, the minimum step)",
                    ));
                }
            }
        }
        if let Stabilization::Projection { tolerance } = self.stabilization
            && !(tolerance.is_finite() && tolerance > 0.0)
        {
            return Err(bad(
                "stabilization.tolerance",
                tolerance,
                "a finite number > 0",
            ));
        }
        Ok(())
    }

    /// The violation tolerance these options imply: the projection tolerance, else
    /// [`DEFAULT_VIOLATION_TOLERANCE`] (see `Stepper::violation_tolerance`).
    pub fn violation_tolerance(&self) -> f64 {
        match self.stabilization {
            Stabilization::Projection { tolerance } => tolerance,
            _ => DEFAULT_VIOLATION_TOLERANCE,
        }
    }
}

/// What a call to `Stepper::step` or `Stepper::advance` did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// Accepted steps, summed over instances.
    pub steps: u64,
    /// Rejected RKM attempts (error too large, or projection refused), summed.
    pub rejected: u64,
    /// Projections applied (position or velocity), summed.
    pub projections: u64,
    /// Instances flagged during this call (non-finite, step failed or constraint violated; see
    /// [`Batch::status`](crate::batch::Batch::status) for which).
    pub flagged: usize,
}

impl StepReport {
    /// Adds the counts of `other` (a later part of the same call).
    pub fn add(&mut self, other: &StepReport) {
        self.steps += other.steps;
        self.rejected += other.rejected;
        self.projections += other.projections;
        self.flagged += other.flagged;
    }
}

/// The most steps one call may need per instance (`duration / step`, `duration / max_step` for
/// RKM, or `n`): a call asking for more is refused up front rather than running for days.
pub const MAX_FIXED_STEPS_PER_CALL: f64 = 1e9;

/// Checks a duration to advance by, and that the fixed step (if any) reaches it in at most
/// [`MAX_FIXED_STEPS_PER_CALL`] steps.
pub(crate) fn check_duration(duration: f64, options: &StepOptions) -> Result<()> {
    if !(duration.is_finite() && duration >= 0.0) {
        return Err(Error::InvalidValue {
            field: "duration".into(),
            instance: 0,
            value: format!("{duration:?}"),
            accepted: "a finite number ≥ 0 (seconds)".into(),
        });
    }
    if let Integrator::SemiImplicitEuler { step }
    | Integrator::Rk4 { step }
    | Integrator::RungeKuttaMerson { max_step: step, .. } = options.integrator
        && duration / step > MAX_FIXED_STEPS_PER_CALL
    {
        return Err(Error::InvalidValue {
            field: "duration".into(),
            instance: 0,
            value: format!("{duration:?} ({:e} steps of {step:e} s)", duration / step),
            accepted: format!(
                "at most {MAX_FIXED_STEPS_PER_CALL:e} steps per call: advance in parts, or \
                 take a larger (maximum) step"
            ),
        });
    }
    Ok(())
}

/// The smallest adaptive (RKM) step, relative to `max(1, |t|)` seconds: an instance whose step
/// control asks for less stops with [`status::STEP_FAILED`](crate::batch::status::STEP_FAILED) instead of halving forever. Fixed
/// steps are the user's and are not bounded by it.
pub const MIN_STEP: f64 = 1e-12;

/// The violation tolerance used when drift control is not projection (Baumgarte or none): an
/// instance whose position or velocity error exceeds it after a call is flagged
/// [`status::CONSTRAINT_VIOLATED`](crate::batch::status::CONSTRAINT_VIOLATED). With projection the projection tolerance is used.
pub const DEFAULT_VIOLATION_TOLERANCE: f64 = 1e-3;

/// The most RKM trial steps (accepted and rejected) one instance may take in one call; an
/// instance that needs more (a step size stuck near [`MIN_STEP`] over a long duration) stops
/// with [`status::STEP_FAILED`](crate::batch::status::STEP_FAILED), so every call ends.
pub const MAX_ADAPTIVE_ATTEMPTS: u64 = 10_000_000;

/// The RKM step-size factor `0.9 (accuracy / error)^¼` clamped to `[lo, hi]` (Simbody's
/// control; `hi` when the error is 0): the CPU's twin of `step_factor` in `shaders/step.wgsl`,
/// shared by the bilateral RKM (`cpu::integrate`, `cpu::lanes::adaptive`) and the event path
/// under error control (`cpu::unilateral`).
pub(crate) fn step_factor(accuracy: f64, error: f64, lo: f64, hi: f64) -> f64 {
    if error <= 0.0 {
        return hi;
    }
    (0.9 * (accuracy / error).powf(0.25)).clamp(lo, hi)
}

/// The first trial step of an RKM run (the call's longest step when that is shorter).
pub(crate) const INITIAL_ADAPTIVE_STEP: f64 = 1e-3;

/// The minimum RKM step at time `t`.
pub(crate) fn min_step(t: f64) -> f64 {
    MIN_STEP * t.abs().max(1.0)
}

/// What a call asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Goal {
    /// This many accepted steps per instance.
    Steps(usize),
    /// This many seconds of each instance's own time.
    Duration(f64),
}

/// A duration goal is met when less than this fraction of it (at least of 1 s) is left; the
/// GPU kernel uses the same rule with its own epsilon (`shaders/step.wgsl`).
pub(crate) fn duration_left_negligible(left: f64, duration: f64, epsilon: f64) -> bool {
    left <= 64.0 * epsilon * duration.max(1.0)
}
