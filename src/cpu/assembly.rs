//! Getting states that satisfy the constraints, and plastic impacts (`physics.md` §4).
//!
//! * [`assemble_positions`] — RBDL's `CalcAssemblyQ`: weighted least-change Newton on the
//!   position errors. Each iteration moves the free bodies by
//!   `δu = −W⁻¹ Gₚᵀ (Gₚ W⁻¹ Gₚᵀ)⁺ e` (a velocity-space displacement; quaternions updated to first
//!   order and renormalised) until `‖e‖∞` and `‖δu‖∞` are below the tolerance, at most
//!   `max_iterations` times; instances that do not converge are reported, never looped on.
//! * [`assemble_velocities`] — `CalcAssemblyQDot`: the u closest to the current one with every
//!   velocity error zero, `u ← u − W⁻¹ Gᵀ (G W⁻¹ Gᵀ)⁺ verr(u)`. By default `W = M`, the mass
//!   matrix: the change of least kinetic energy, i.e. the plastic impulse that enforces the
//!   constraints (a solid ball launched at `v₀` without spin onto a rolling contact leaves at
//!   `5/7 v₀`, as a real ball does). RBDL's diagonal weights (its default: all 1) remain an
//!   option; they are not physical (the same ball would leave at `0.0099 v₀` with unit weights).
//! * [`apply_plastic_impacts`] — RBDL's `ComputeConstraintImpulses`: with desired post-impact
//!   row velocities `v⁺` (default 0), `Λ = (G M⁻¹ Gᵀ)⁺ (v⁺ − verr(u⁻))`, `u⁺ = u⁻ + M⁻¹ Gᵀ Λ`;
//!   Λ is the physical impulse (RBDL's sign), reported per constraint.
//!
//! Position assembly weights W are per mobility (length nu, > 0; default 1, as RBDL). Only enabled constraints take part;
//! position assembly uses holonomic rows, velocity assembly and impacts every row with a velocity
//! error — except that a constraint declaring an assembly condition
//! ([`Constraint::assembly_position_rows`](crate::constraints::Constraint::assembly_position_rows),
//! `assembly_velocity_rows`) is assembled on that condition instead (RBDL's optional
//! `CalcAssemblyPositionError` / `CalcAssemblyVelocityError` of a `CustomConstraint`).

use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

use crate::batch::InstanceState;
use crate::batch::{Batch, status};
use crate::constraints::{BodyKinematics, Params, Row, RowLevel};
use crate::cpu::evaluate::{BaumgarteMode, InstanceSystem, scatter_jacobian};
use crate::cpu::solver::{MassFactor, solve_min_norm_spd};
use crate::error::{Error, Result};
use crate::math::{quaternion_rate, vec3};

/// Settings of position assembly.
#[derive(Debug, Clone, PartialEq)]
pub struct AssemblyOptions {
    /// Stop when the largest position error and the largest correction are below it (1e-12).
    pub tolerance: f64,
    /// Newton iterations at most (100).
    pub max_iterations: usize,
    /// Weight per mobility (nu values > 0); `None`: all 1.
    pub weights: Option<Vec<f64>>,
}

impl Default for AssemblyOptions {
    fn default() -> Self {
        Self {
            tolerance: 1e-12,
            max_iterations: 100,
            weights: None,
        }
    }
}

/// What an assembly did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssemblyReport {
    /// Newton iterations per instance (0 when already assembled).
    pub iterations: Vec<u32>,
    /// Instances that did not reach the tolerance (their state is left where Newton stopped).
    pub failed: Vec<usize>,
    /// Largest remaining error per instance.
    pub residual: Vec<f64>,
}

/// Physical impulses of an impact, per constraint in reported order (`width` per instance).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImpactReport {
    /// Per constraint: the impulse Λ per reported slot (0 for absent slots and disabled rows).
    pub impulses: Vec<Vec<f64>>,
}

fn weights_of(options_weights: &Option<Vec<f64>>, nu: usize) -> Result<Vec<f64>> {
    match options_weights {
        None => Ok(vec![1.0; nu]),
        Some(w) => {
            if w.len() != nu {
                return Err(Error::Dimension {
                    what: "assembly weights",
                    got: w.len(),
                    expected: nu,
                });
            }
            if let Some(k) = w.iter().position(|x| !(x.is_finite() && *x > 0.0)) {
                return Err(Error::InvalidValue {
                    field: format!("weights[{k}]"),
                    instance: 0,
                    value: format!("{:?}", w[k]),
                    accepted: "finite numbers > 0".into(),
                });
            }
            Ok(w.clone())
        }
    }
}

/// The enabled rows of `sys` with a position error (`position`) or a velocity error, as
/// (G rows, errors). Shared by assembly, impacts and the stepper's projection.
pub(crate) fn select_rows(
    batch: &Batch,
    sys: &InstanceSystem,
    position: bool,
) -> (DMatrix<f64>, DVector<f64>) {
    let mut rows = Vec::new();
    for (slot, block) in batch.template().constraints().iter().zip(&sys.constraints) {
        if !block.enabled {
            continue;
        }
        for (r, level) in slot.constraint.row_levels().iter().enumerate() {
            let wanted = if position {
                *level == RowLevel::Position
            } else {
                *level != RowLevel::Acceleration
            };
            if wanted {
                rows.push(block.offset + r);
            }
        }
    }
    let g = DMatrix::from_fn(rows.len(), sys.jacobian.ncols(), |r, c| {
        sys.jacobian[(rows[r], c)]
    });
    let e = DVector::from_iterator(
        rows.len(),
        rows.iter().map(|r| {
            if position {
                sys.position_errors[*r]
            } else {
                sys.velocity_errors[*r]
            }
        }),
    );
    (g, e)
}

/// The rows assembly drives to zero for instance `sys`, as (G rows, errors): per enabled
/// constraint its assembly condition when it declares one
/// ([`Constraint::assembly_position_rows`](crate::constraints::Constraint::assembly_position_rows)
/// / `assembly_velocity_rows`), else its own rows as [`select_rows`] picks them.
fn assembly_rows(
    batch: &Batch,
    sys: &InstanceSystem,
    position: bool,
) -> (DMatrix<f64>, DVector<f64>) {
    let template = batch.template();
    let nu = sys.jacobian.ncols();
    let mut g: Vec<f64> = Vec::new();
    let mut errors = Vec::new();
    for ((slot, block), cols) in template
        .constraints()
        .iter()
        .zip(&sys.constraints)
        .zip(batch.all_constraint_columns())
    {
        if !block.enabled {
            continue;
        }
        let c = &slot.constraint;
        let count = if position {
            c.assembly_position_rows()
        } else {
            c.assembly_velocity_rows()
        };
        if count > 0 {
            let params = Params::of(&cols.params, sys.instance);
            let kinematics: Vec<BodyKinematics> = c
                .bodies()
                .iter()
                .map(|b| sys.kinematics[b.index()])
                .collect();
            let mut rows = vec![Row::default(); count];
            if position {
                c.assembly_position(&params, &kinematics, &mut rows);
            } else {
                c.assembly_velocity(&params, &kinematics, &mut rows);
            }
            for row in &rows {
                let start = g.len();
                g.resize(start + nu, 0.0);
                scatter_jacobian(template, c.bodies(), &row.jacobian, |k, value| {
                    g[start + k] += value
                });
                errors.push(if position {
                    row.position_error
                } else {
                    row.velocity_error
                });
            }
        } else {
            for (r, level) in c.row_levels().iter().enumerate() {
                let wanted = if position {
                    *level == RowLevel::Position
                } else {
                    *level != RowLevel::Acceleration
                };
                if wanted {
                    let at = block.offset + r;
                    g.extend(sys.jacobian.row(at).iter());
                    errors.push(if position {
                        sys.position_errors[at]
                    } else {
                        sys.velocity_errors[at]
                    });
                }
            }
        }
    }
    (
        DMatrix::from_row_slice(errors.len(), nu, &g),
        DVector::from_vec(errors),
    )
}

/// The mass-weighted minimum-norm correction `δu = −M⁻¹ Gᵀ (G M⁻¹ Gᵀ)⁺ e`: the least change of
/// kinetic energy that removes the errors `e` (shared by velocity assembly and the stepper's
/// projection).
pub(crate) fn mass_weighted_correction(
    g: &DMatrix<f64>,
    e: &DVector<f64>,
    factor: &MassFactor,
) -> DVector<f64> {
    let minv_gt = factor.solve(&g.transpose());
    let a = g * &minv_gt;
    let (x, _) = solve_min_norm_spd(&a, e);
    -(minv_gt * x)
}

/// `δu = −W⁻¹ Gᵀ (G W⁻¹ Gᵀ)⁺ e`.
fn weighted_correction(g: &DMatrix<f64>, e: &DVector<f64>, w: &[f64]) -> DVector<f64> {
    let winv_gt = DMatrix::from_fn(g.ncols(), g.nrows(), |r, c| g[(c, r)] / w[r]);
    let a = g * &winv_gt;
    let (x, _) = solve_min_norm_spd(&a, e);
    -(winv_gt * x)
}

fn max_abs(v: &DVector<f64>) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// RBDL's `CalcAssemblyQ` on every instance (see the module documentation).
pub fn assemble_positions(batch: &mut Batch, options: &AssemblyOptions) -> Result<AssemblyReport> {
    if !(options.tolerance.is_finite() && options.tolerance > 0.0) {
        return Err(Error::InvalidValue {
            field: "tolerance".into(),
            instance: 0,
            value: format!("{:?}", options.tolerance),
            accepted: "a finite number > 0".into(),
        });
    }
    let w = weights_of(&options.weights, batch.template().nu())?;
    let b: &Batch = batch;
    let results: Vec<(InstanceState, u32, bool, f64)> = (0..b.len())
        .into_par_iter()
        .map(|i| {
            let mut state = b.state_of(i);
            for iteration in 0..=options.max_iterations {
                let sys = b.assemble_with(i, &state, BaumgarteMode::Off);
                if sys.status != status::OK {
                    return (b.state_of(i), iteration as u32, false, f64::NAN);
                }
                let (g, e) = assembly_rows(b, &sys, true);
                let error = max_abs(&e);
                let du = weighted_correction(&g, &e, &w);
                if (error <= options.tolerance && max_abs(&du) <= options.tolerance)
                    || iteration == options.max_iterations
                {
                    let converged = error <= options.tolerance;
                    return (state, iteration as u32, converged, error);
                }
                for (k, q) in state.q.iter_mut().enumerate() {
                    let dq = quaternion_rate(&q[..4], &vec3(&du.as_slice()[6 * k..6 * k + 3]));
                    for j in 0..4 {
                        q[j] += dq[j];
                    }
                    for j in 0..3 {
                        q[4 + j] += du[6 * k + 3 + j];
                    }
                }
                if !state.normalize_quaternions() || !state.is_finite() {
                    return (b.state_of(i), iteration as u32, false, f64::NAN);
                }
            }
            unreachable!("the loop returns at max_iterations")
        })
        .collect();
    let mut report = AssemblyReport::default();
    let mut states = Vec::with_capacity(results.len());
    for (i, (state, iterations, converged, residual)) in results.into_iter().enumerate() {
        report.iterations.push(iterations);
        report.residual.push(residual);
        if !converged {
            report.failed.push(i);
        }
        states.push((state, 0));
    }
    batch.store_states(&states);
    Ok(report)
}

/// `CalcAssemblyQDot` on every instance: velocity errors of every enabled row become 0 with the
/// least change of u in the metric chosen by `weights`:
///
/// * `None` (the default, and the physical choice): the mass matrix, so the change has the least
///   kinetic energy — the plastic impulse that enforces the constraints;
/// * `Some(w)`: RBDL's diagonal weights, one per mobility (`nu` values > 0; RBDL's own default
///   is all 1).
///
/// Linear, so one correction suffices; the residual is reported, and an instance whose mass
/// matrix cannot be factored is reported failed and left unchanged.
pub fn assemble_velocities(batch: &mut Batch, weights: Option<&[f64]>) -> Result<AssemblyReport> {
    let w = match weights {
        Some(w) => Some(weights_of(&Some(w.to_vec()), batch.template().nu())?),
        None => None,
    };
    let b: &Batch = batch;
    let results: Vec<(InstanceState, f64)> = (0..b.len())
        .into_par_iter()
        .map(|i| {
            let mut state = b.state_of(i);
            let sys = b.assemble_with(i, &state, BaumgarteMode::Off);
            if sys.status != status::OK {
                return (state, f64::NAN);
            }
            let (g, e) = assembly_rows(b, &sys, false);
            let du = match &w {
                Some(w) => weighted_correction(&g, &e, w),
                None => match MassFactor::new(&sys.mass_blocks) {
                    Some(factor) => mass_weighted_correction(&g, &e, &factor),
                    None => return (state, f64::NAN),
                },
            };
            let before = state.clone();
            for (k, u) in state.u.iter_mut().enumerate() {
                for j in 0..6 {
                    u[j] += du[6 * k + j];
                }
            }
            if !state.is_finite() {
                return (before, f64::NAN);
            }
            let after = b.assemble_with(i, &state, BaumgarteMode::Off);
            let (_, e) = assembly_rows(b, &after, false);
            (state, max_abs(&e))
        })
        .collect();
    let mut report = AssemblyReport::default();
    let mut states = Vec::with_capacity(results.len());
    for (i, (state, residual)) in results.into_iter().enumerate() {
        report.iterations.push(1);
        report.residual.push(residual);
        if residual.is_nan() || residual > 1e-9 {
            report.failed.push(i);
        }
        states.push((state, 0));
    }
    batch.store_states(&states);
    Ok(report)
}

/// RBDL's `ComputeConstraintImpulses` on every instance. `targets`, when given, holds per
/// constraint the desired post-impact velocity of each reported slot (`width` values per
/// instance, as [`ConstraintEvaluation`](crate::evaluation::ConstraintEvaluation) lays them out);
/// absent: 0 (a plastic impact). Updates u and returns the physical impulses.
pub fn apply_plastic_impacts(
    batch: &mut Batch,
    targets: Option<&[Vec<f64>]>,
) -> Result<ImpactReport> {
    let template = batch.template().clone();
    let widths: Vec<usize> = template
        .constraints()
        .iter()
        .map(|c| c.constraint.report_slots().len())
        .collect();
    if let Some(t) = targets {
        if t.len() != widths.len() {
            return Err(Error::Dimension {
                what: "impact targets (constraints)",
                got: t.len(),
                expected: widths.len(),
            });
        }
        for (k, (v, w)) in t.iter().zip(&widths).enumerate() {
            if v.len() != w * batch.len() {
                return Err(Error::ColumnLength {
                    field: format!("impact targets of constraint {k}"),
                    got: v.len(),
                    expected: w * batch.len(),
                });
            }
            if let Some(at) = v.iter().position(|x| !x.is_finite()) {
                return Err(Error::InvalidValue {
                    field: format!("impact targets of constraint {k}[{}]", at % w.max(&1)),
                    instance: at / w.max(&1),
                    value: format!("{:?}", v[at]),
                    accepted: "finite post-impact velocities".into(),
                });
            }
        }
    }
    let b: &Batch = batch;
    let results: Vec<(InstanceState, Vec<Vec<f64>>, bool)> = (0..b.len())
        .into_par_iter()
        .map(|i| {
            let mut state = b.state_of(i);
            let mut impulses: Vec<Vec<f64>> = widths.iter().map(|w| vec![0.0; *w]).collect();
            let sys = b.assemble_with(i, &state, BaumgarteMode::Off);
            let Some(factor) = (sys.status == status::OK)
                .then(|| MassFactor::new(&sys.mass_blocks))
                .flatten()
            else {
                return (state, impulses, false);
            };
            // Enabled rows with a velocity error, their desired velocities and where they report.
            let mut rows = Vec::new();
            let mut desired = Vec::new();
            let mut place = Vec::new();
            for (c, (slot, block)) in template
                .constraints()
                .iter()
                .zip(&sys.constraints)
                .enumerate()
            {
                if !block.enabled {
                    continue;
                }
                let slots = slot.constraint.report_slots();
                for (r, level) in slot.constraint.row_levels().iter().enumerate() {
                    if *level == RowLevel::Acceleration {
                        continue;
                    }
                    let s = slots.iter().position(|x| *x == Some(r));
                    let target = match (targets, s) {
                        (Some(t), Some(s)) => t[c][i * widths[c] + s],
                        _ => 0.0,
                    };
                    rows.push(block.offset + r);
                    desired.push(target);
                    place.push((c, s));
                }
            }
            let g = DMatrix::from_fn(rows.len(), sys.jacobian.ncols(), |r, c| {
                sys.jacobian[(rows[r], c)]
            });
            let verr =
                DVector::from_iterator(rows.len(), rows.iter().map(|r| sys.velocity_errors[*r]));
            let minv_gt = factor.solve(&g.transpose());
            let a = &g * &minv_gt;
            let (lambda, _) = solve_min_norm_spd(&a, &(DVector::from_vec(desired) - verr));
            let du = &minv_gt * &lambda;
            for (k, u) in state.u.iter_mut().enumerate() {
                for j in 0..6 {
                    u[j] += du[6 * k + j];
                }
            }
            for (value, (c, s)) in lambda.iter().zip(place) {
                if let Some(s) = s {
                    impulses[c][s] = *value;
                }
            }
            let ok = state.is_finite();
            (if ok { state } else { b.state_of(i) }, impulses, !ok)
        })
        .collect();
    let mut report = ImpactReport {
        impulses: widths
            .iter()
            .map(|w| Vec::with_capacity(w * b.len()))
            .collect(),
    };
    let mut states = Vec::with_capacity(results.len());
    for (state, impulses, failed) in results {
        for (dst, src) in report.impulses.iter_mut().zip(impulses) {
            dst.extend(src);
        }
        states.push((state, if failed { status::NONFINITE_STATE } else { 0 }));
    }
    batch.store_states(&states);
    Ok(report)
}
