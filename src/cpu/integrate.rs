//! Time stepping on the CPU (`physics.md` §6): semi-implicit Euler, classic RK4 and Simbody's
//! Runge–Kutta–Merson with per-instance adaptive steps; drift controlled by Simbody's
//! projection or by RBDL's Baumgarte stabilisation, chosen per batch.
//!
//! The state of an instance is `y = (q of free bodies, poses of prescribed bodies, u, prescribed
//! velocities)`. Free bodies follow `q̇ = N(q) u` (quaternion rate `½ E(e) w`, origin rate `v`)
//! and `u̇` from the constrained dynamics; prescribed bodies follow their own velocity, which
//! changes at the acceleration the user gave (constant between calls — exact for a turntable or a
//! plate tilting about its origin at a steady rate). Every instance keeps its own time and, with
//! RKM, its own step size, so instances with different histories coexist. Quaternions are
//! renormalised after every step. An instance whose state or dynamics becomes non-finite stops,
//! keeps its last finite state and is flagged in the batch's status column; the others go on.

use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

use crate::batch::InstanceState;
use crate::batch::{Batch, status};
use crate::constraints::BodyKinematics;
use crate::cpu::assembly::mass_weighted_correction;
use crate::cpu::evaluate::{BaumgarteMode, InstanceSystem};
use crate::cpu::solver::{MassFactor, solve_into, solve_scratch_len};
use crate::error::Result;
use crate::math::{quaternion_rate, vec3};

use crate::step::{
    Goal, Integrator, MAX_ADAPTIVE_ATTEMPTS, Stabilization, StepOptions, StepReport,
    duration_left_negligible, min_step, step_factor,
};

/// Runs `goal` on every instance of `batch` on the CPU (rayon over instances); `step_sizes`
/// holds each instance's RKM step size (0: not chosen yet; one per instance) and is updated.
/// Instances already
/// halted are left alone; the others' states, times, work and flags are stored in the batch.
/// This is the reference path; `cpu::stepping::run_goal` (the backend's way in) sends the
/// integrators to the lane path when the template allows.
pub(crate) fn run_goal(
    batch: &mut Batch,
    options: &StepOptions,
    goal: Goal,
    step_sizes: &mut [f64],
    violation: f64,
) -> Result<StepReport> {
    let b: &Batch = batch;
    let results: Vec<Option<Advanced>> = (0..b.len())
        .into_par_iter()
        .map(|i| {
            if b.status()[i] & status::HALTED != 0 {
                return None;
            }
            Some(advance_instance(
                b,
                i,
                options,
                goal,
                step_sizes[i],
                violation,
            ))
        })
        .collect();
    let mut report = StepReport::default();
    let mut states = Vec::with_capacity(results.len());
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Some(a) => {
                report.add(&a.report);
                step_sizes[i] = a.step_size;
                if a.flags != 0 {
                    report.flagged += 1;
                }
                states.push((a.state, a.flags));
            }
            None => states.push((batch.state_of(i), 0)),
        }
    }
    batch.store_states(&states);
    Ok(report)
}

/// Outcome of advancing one instance.
struct Advanced {
    state: InstanceState,
    step_size: f64,
    report: StepReport,
    /// Status bits to set (0: all well).
    flags: u32,
}

/// Which rows get Baumgarte terms under these options: all of them with RBDL's drift control,
/// none otherwise (projection controls drift, or nothing does).
pub(crate) fn baumgarte_mode(options: &StepOptions) -> BaumgarteMode {
    match options.stabilization {
        Stabilization::Baumgarte => BaumgarteMode::All,
        _ => BaumgarteMode::Off,
    }
}

/// Projection stops at a tenth of the tolerance, but no finer than the precision can resolve
/// (twin of `projection_target` in `shaders/step.wgsl`).
fn projection_target(tolerance: f64) -> f64 {
    (0.1 * tolerance).max(16.0 * f64::EPSILON)
}

/// What [`derivative`] reuses from one stage to the next: the assembled system and the mass
/// factor keep their allocations, since every stage of an instance has the same shapes.
pub(crate) struct Workspace {
    sys: InstanceSystem,
    body_kin: Vec<BodyKinematics>,
    factor: MassFactor,
    scratch: Vec<f64>,
}

impl Workspace {
    /// Empty buffers; the first stage sizes them.
    pub(crate) fn new() -> Self {
        Self {
            sys: InstanceSystem::empty(),
            body_kin: Vec::new(),
            factor: MassFactor::empty(),
            scratch: Vec::new(),
        }
    }
}

/// `ẏ` at `state`: `(q̇, pose rates, u̇, prescribed accelerations)`; `None` when the dynamics
/// cannot be solved (non-finite state, singular mass matrix).
pub(crate) fn derivative(
    batch: &Batch,
    i: usize,
    state: &InstanceState,
    options: &StepOptions,
    work: &mut Workspace,
) -> Option<Vec<f64>> {
    let Workspace {
        sys,
        body_kin,
        factor,
        scratch,
    } = work;
    batch.assemble_into(i, state, baumgarte_mode(options), sys, body_kin);
    if sys.status != status::OK || !factor.refactor(&sys.mass_blocks) {
        return None;
    }
    let (m, nu) = sys.jacobian.shape();
    let split = nq(state);
    let mut dy = vec![0.0; state.len()];
    for ((q, u), rate) in state
        .q
        .iter()
        .zip(&state.u)
        .chain(state.pose.iter().zip(&state.velocity))
        .zip(dy[..split].chunks_exact_mut(7))
    {
        rate[..4].copy_from_slice(&quaternion_rate(&q[..4], &vec3(&u[0..3])));
        rate[4..].copy_from_slice(&u[3..6]);
    }
    let need = nu + m + solve_scratch_len(m, nu);
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (udot_unconstrained, rest) = scratch.split_at_mut(nu);
    let (multipliers, rest) = rest.split_at_mut(m);
    let (udot, accelerations) = dy[split..].split_at_mut(nu);
    solve_into(
        factor,
        sys.applied.as_slice(),
        &sys.jacobian,
        sys.bias.as_slice(),
        udot_unconstrained,
        udot,
        multipliers,
        rest,
    );
    // Constant-law bodies move at their given acceleration; driven bodies are not integrated
    // (their law gives pose and velocity at every stage time): zero rates.
    for (cols, acc) in batch
        .prescribed_columns()
        .iter()
        .zip(accelerations.chunks_exact_mut(6))
    {
        if cols.motion.is_some() {
            acc.fill(0.0);
        } else {
            acc.copy_from_slice(&cols.acceleration[i]);
        }
    }
    for (slot, cols) in batch.prescribed_columns().iter().enumerate() {
        if cols.motion.is_some() {
            let at = 7 * (state.q.len() + slot);
            dy[at..at + 7].fill(0.0);
        }
    }
    // Power on the free bodies: of the constraint forces −Gᵀλ, and of the applied loads.
    let n = dy.len();
    let u_flat = |k: usize| state.u[k / 6][k % 6];
    let mut driven = 0.0;
    for (r, lambda) in multipliers.iter().enumerate() {
        let gu: f64 = (0..nu).map(|k| sys.jacobian[(r, k)] * u_flat(k)).sum();
        driven -= lambda * gu;
    }
    dy[n - 2] = driven;
    dy[n - 1] = applied_power(batch, i, state);
    if dy.iter().all(|x| x.is_finite()) {
        Some(dy)
    } else {
        None
    }
}

/// Power of the applied forces (through the COM) and torques on the free bodies:
/// `Σ F · v_com + T · w`, `v_com = v + w × R c`. A body with no applied force or torque adds
/// nothing and is skipped (its `R` from the quaternion took a square root and a division at
/// every derivative of the event path): the same sum, `0 · x` being a zero that leaves it as
/// it was for every finite `x` (a non-finite `u` fails the derivative on its other entries).
pub(crate) fn applied_power(batch: &Batch, i: usize, state: &InstanceState) -> f64 {
    let mut p = 0.0;
    for (cols, (q, u)) in batch
        .free_columns()
        .iter()
        .zip(state.q.iter().zip(&state.u))
    {
        let (force, torque) = (&cols.applied_force[i], &cols.applied_torque[i]);
        if force.iter().chain(torque).all(|x| *x == 0.0) {
            continue;
        }
        let rotation = crate::math::rotation_from_quaternion(&q[..4]).unwrap_or_default();
        let w = vec3(&u[0..3]);
        let v_com = vec3(&u[3..6]) + w.cross(&(rotation * vec3(&cols.com[i])));
        p += vec3(force).dot(&v_com) + vec3(torque).dot(&w);
    }
    p
}

fn axpy(y: &[f64], h: f64, k: &[f64]) -> Vec<f64> {
    y.iter().zip(k).map(|(a, b)| a + h * b).collect()
}

fn with_values(state: &InstanceState, y: &[f64], t: f64) -> InstanceState {
    let mut s = state.clone();
    s.set_from(y);
    s.time = t;
    s
}

/// Number of q values (free and prescribed bodies), the split point of `y`.
fn nq(state: &InstanceState) -> usize {
    state.layout().nq()
}

/// One step of size `h` from `state`. Returns the new state and, for RKM, the error norm.
fn try_step(
    batch: &Batch,
    i: usize,
    state: &InstanceState,
    h: f64,
    options: &StepOptions,
    work: &mut Workspace,
) -> Option<(InstanceState, f64)> {
    let y = state.to_vec();
    let t = state.time;
    // One state for every stage, overwritten in place.
    let mut stage = state.clone();
    let mut f = |yy: &[f64], tt: f64| {
        stage.set_from(yy);
        stage.time = tt;
        derivative(batch, i, &stage, options, work)
    };
    let (mut next, error) = match options.integrator {
        Integrator::SemiImplicitEuler { .. } => {
            let k = f(&y, t)?;
            let split = nq(state);
            // u first, then q with the new u.
            let mut y1 = y.clone();
            for j in split..y.len() {
                y1[j] = y[j] + h * k[j];
            }
            let moved = with_values(state, &y1, t);
            let mut k_q = Vec::with_capacity(split);
            for (q, u) in moved
                .q
                .iter()
                .zip(&moved.u)
                .chain(moved.pose.iter().zip(&moved.velocity))
            {
                k_q.extend_from_slice(&quaternion_rate(&q[..4], &vec3(&u[0..3])));
                k_q.extend_from_slice(&u[3..6]);
            }
            for j in 0..split {
                y1[j] = y[j] + h * k_q[j];
            }
            (with_values(state, &y1, t + h), 0.0)
        }
        Integrator::Rk4 { .. } => {
            let k1 = f(&y, t)?;
            let k2 = f(&axpy(&y, h / 2.0, &k1), t + h / 2.0)?;
            let k3 = f(&axpy(&y, h / 2.0, &k2), t + h / 2.0)?;
            let k4 = f(&axpy(&y, h, &k3), t + h)?;
            let y1: Vec<f64> = (0..y.len())
                .map(|j| y[j] + h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j]))
                .collect();
            (with_values(state, &y1, t + h), 0.0)
        }
        Integrator::RungeKuttaMerson { .. } => {
            let k1 = f(&y, t)?;
            let k2 = f(&axpy(&y, h / 3.0, &k1), t + h / 3.0)?;
            let y3: Vec<f64> = (0..y.len())
                .map(|j| y[j] + h / 6.0 * (k1[j] + k2[j]))
                .collect();
            let k3 = f(&y3, t + h / 3.0)?;
            let y4: Vec<f64> = (0..y.len())
                .map(|j| y[j] + h / 8.0 * (k1[j] + 3.0 * k3[j]))
                .collect();
            let k4 = f(&y4, t + h / 2.0)?;
            let y5: Vec<f64> = (0..y.len())
                .map(|j| y[j] + h * (0.5 * k1[j] - 1.5 * k3[j] + 2.0 * k4[j]))
                .collect();
            let k5 = f(&y5, t + h)?;
            let y1: Vec<f64> = (0..y.len())
                .map(|j| y[j] + h / 6.0 * (k1[j] + 4.0 * k4[j] + k5[j]))
                .collect();
            // ŷ = y5 (third order); Simbody's estimate |y₁ − ŷ| / 5, relative to max(1, |y|),
            // over the state proper (not the work integrals).
            let error = (0..y.len() - 2)
                .map(|j| ((y1[j] - y5[j]) / 5.0).abs() / y1[j].abs().max(1.0))
                .fold(0.0f64, f64::max);
            (with_values(state, &y1, t + h), error)
        }
    };
    if !next.normalize_quaternions() || !next.is_finite() {
        return None;
    }
    Some((next, error))
}

/// Largest position error (enabled holonomic rows) and velocity error (enabled rows) at `state`.
fn constraint_errors(
    batch: &Batch,
    i: usize,
    state: &InstanceState,
    work: &mut Workspace,
) -> (f64, f64) {
    let sys = &mut work.sys;
    batch.assemble_into(i, state, BaumgarteMode::Off, sys, &mut work.body_kin);
    let perr = sys
        .position_errors
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()));
    let verr = sys
        .velocity_errors
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()));
    (perr, verr)
}

/// The enabled holonomic (`position`) or velocity-error rows at `state`, with M⁻¹ factored
/// into `work.factor` (for mass-weighted, least-kinetic-energy corrections).
fn rows_of(
    batch: &Batch,
    i: usize,
    state: &InstanceState,
    position: bool,
    work: &mut Workspace,
) -> Option<(DMatrix<f64>, DVector<f64>)> {
    batch.assemble_into(
        i,
        state,
        BaumgarteMode::Off,
        &mut work.sys,
        &mut work.body_kin,
    );
    if !work.factor.refactor(&work.sys.mass_blocks) {
        return None;
    }
    Some(crate::cpu::assembly::select_rows(
        batch, &work.sys, position,
    ))
}

/// Moves the free bodies' q by a velocity-space displacement δu (first order), renormalised.
fn displace(state: &mut InstanceState, du: &DVector<f64>) {
    for (k, q) in state.q.iter_mut().enumerate() {
        let dw = vec3(&du.as_slice()[6 * k..6 * k + 3]);
        let dq = quaternion_rate(&q[..4], &dw);
        for j in 0..4 {
            q[j] += dq[j];
        }
        for j in 0..3 {
            q[4 + j] += du[6 * k + 3 + j];
        }
    }
    state.normalize_quaternions();
}

/// Simbody's projection; returns the number of projections applied, or `None` if it failed.
pub(crate) fn project(
    batch: &Batch,
    i: usize,
    state: &mut InstanceState,
    tolerance: f64,
    work: &mut Workspace,
) -> Option<u64> {
    let mut applied = 0;
    for _ in 0..20 {
        let (g, perr) = rows_of(batch, i, state, true, work)?;
        if perr.iter().all(|e| e.abs() <= projection_target(tolerance)) {
            break;
        }
        displace(state, &mass_weighted_correction(&g, &perr, &work.factor));
        applied = 1;
    }
    let mut velocity = 0;
    for _ in 0..7 {
        let (g, verr) = rows_of(batch, i, state, false, work)?;
        if verr.iter().all(|e| e.abs() <= projection_target(tolerance)) {
            break;
        }
        let du = mass_weighted_correction(&g, &verr, &work.factor);
        for (k, u) in state.u.iter_mut().enumerate() {
            for j in 0..6 {
                u[j] += du[6 * k + j];
            }
        }
        velocity = 1;
    }
    Some(applied + velocity)
}

fn advance_instance(
    batch: &Batch,
    i: usize,
    options: &StepOptions,
    goal: Goal,
    step_size: f64,
    violation: f64,
) -> Advanced {
    let mut state = batch.state_of(i);
    let mut work = Workspace::new();
    let mut report = StepReport::default();
    // Progress is counted in its own accumulator: at a large absolute time `t + h` may round
    // to `t`, and a loop on the difference of times would never end.
    let mut elapsed = 0.0f64;
    let (fixed, accuracy, max_step) = match options.integrator {
        Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step } => {
            (Some(step), 0.0, step)
        }
        Integrator::RungeKuttaMerson { accuracy, max_step } => (None, accuracy, max_step),
    };
    let mut h = if step_size > 0.0 {
        step_size
    } else {
        fixed.unwrap_or(max_step.min(crate::step::INITIAL_ADAPTIVE_STEP))
    };
    let mut accepted = 0usize;
    let failed = |state: InstanceState, report: StepReport, h: f64, flags: u32| Advanced {
        state,
        step_size: h,
        report,
        flags,
    };
    loop {
        let remaining = match goal {
            Goal::Steps(n) if accepted >= n => break,
            Goal::Steps(_) => None,
            Goal::Duration(d) => {
                let left = d - elapsed;
                if duration_left_negligible(left, d, f64::EPSILON) {
                    break;
                }
                Some(left)
            }
        };
        let mut this_h = match fixed {
            Some(step) => step,
            None => h.min(max_step),
        };
        if let Some(left) = remaining
            && this_h > left
        {
            this_h = left;
        }
        // Every retry below shrinks h; below the minimum the instance stops, flagged.
        let floor = min_step(state.time);
        if fixed.is_none() && report.steps + report.rejected >= MAX_ADAPTIVE_ATTEMPTS {
            return failed(state, report, h, status::STEP_FAILED);
        }
        let Some((mut next, error)) = try_step(batch, i, &state, this_h, options, &mut work) else {
            if fixed.is_none() && this_h / 4.0 >= floor {
                // An RKM trial stage failed (e.g. a huge trial step): retry smaller.
                h = this_h / 4.0;
                report.rejected += 1;
                continue;
            }
            return failed(state, report, h, status::NONFINITE_STATE);
        };
        if fixed.is_none() {
            if error > accuracy {
                report.rejected += 1;
                h = this_h * step_factor(accuracy, error, 0.1, 0.9);
                if h < floor {
                    return failed(state, report, h, status::STEP_FAILED);
                }
                continue;
            }
            h = (this_h * step_factor(accuracy, error, 1.0, 5.0)).min(max_step);
        }
        if let Stabilization::Projection { tolerance } = options.stabilization {
            let (perr, verr) = constraint_errors(batch, i, &next, &mut work);
            if perr > tolerance || verr > tolerance {
                // Simbody refuses to project an error this large: the step was too long.
                if fixed.is_none() && perr.max(verr) > (2.0 * tolerance).max(tolerance.sqrt()) {
                    report.rejected += 1;
                    h = this_h / 2.0;
                    if h < floor {
                        // Even a vanishing step leaves the error beyond the limit: it was there
                        // on entry, and no step can remove it.
                        return failed(
                            state,
                            report,
                            h,
                            status::STEP_FAILED | status::CONSTRAINT_VIOLATED,
                        );
                    }
                    continue;
                }
                match project(batch, i, &mut next, tolerance, &mut work) {
                    Some(n) => report.projections += n,
                    None => return failed(state, report, h, status::NONFINITE_STATE),
                }
            }
        }
        if !next.is_finite() {
            return failed(state, report, h, status::NONFINITE_STATE);
        }
        state = next;
        elapsed += this_h;
        accepted += 1;
        report.steps += 1;
    }
    // Off its constraints after the call: flagged, never reported as fine (NaN errors count).
    let mut flags = 0;
    if accepted > 0 {
        let (perr, verr) = constraint_errors(batch, i, &state, &mut work);
        let worst = perr.max(verr);
        if worst.is_nan() || worst > violation {
            flags |= status::CONSTRAINT_VIOLATED;
        }
    }
    Advanced {
        state,
        step_size: h,
        report,
        flags,
    }
}
