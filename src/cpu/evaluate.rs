//! The f64 CPU reference path: per-instance assembly, solve and reporting (`cpu::evaluating`
//! runs it over a batch, next to the lane path).
//!
//! Each instance is computed by the same sequential code whatever the thread count, and nothing
//! is reduced across instances, so results are bit-identical with 1 thread and with many.

use crate::batch::{Batch, ConstraintColumns, InstanceState, status};
use crate::constraints::{BodyKinematics, ContactReport, Params, Row, RowLevel};
use crate::cpu::dynamics::{Loads, MassProperties, applied_minus_coriolis, energy, mass_matrix};
use crate::cpu::solver::{MassFactor, Solution, solve};
use crate::error::{Error, Result};
use crate::evaluation::EvaluationBlock;
use crate::math::{Vec3, all_finite};
use crate::model::{BodyKind, ConstraintSlot};
use nalgebra::{DMatrix, DVector, Matrix6};

/// Rows of one constraint in one instance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConstraintRows {
    /// Whether the constraint is enabled for this instance (disabled rows are not in G).
    pub enabled: bool,
    /// First row in G when enabled.
    pub offset: usize,
    /// The rows as the constraint evaluated them (also when disabled).
    pub rows: Vec<Row>,
}

impl ConstraintRows {
    /// This constraint's multipliers (internal row order) out of `all`, the instance's
    /// multipliers per row of G: zeros when the constraint is disabled or `all` is short.
    pub fn multipliers_in(&self, all: &[f64]) -> Vec<f64> {
        (0..self.rows.len())
            .map(|r| {
                if self.enabled {
                    all.get(self.offset + r).copied().unwrap_or(0.0)
                } else {
                    0.0
                }
            })
            .collect()
    }
}

/// Everything assembled for one instance, before and independent of the solve.
#[derive(Debug, Clone)]
pub struct InstanceSystem {
    /// Instance index.
    pub instance: usize,
    /// Status bits found while assembling (see [`status`]).
    pub status: u32,
    /// Kinematics of every body, indexed by `BodyId` (free bodies' accelerations are 0).
    pub kinematics: Vec<BodyKinematics>,
    /// 6×6 mass matrix of each free body, in column order.
    pub mass_blocks: Vec<Matrix6<f64>>,
    /// `f − c(q, u)` (nu).
    pub applied: DVector<f64>,
    /// Constraint Jacobian G (m × nu), enabled rows only, constraints in template order.
    pub jacobian: DMatrix<f64>,
    /// `k = aerr(u̇ = 0)` (m).
    pub bias_acceleration: DVector<f64>,
    /// The solver's right-hand side `b = −k`, with Baumgarte terms where enabled (m).
    pub bias: DVector<f64>,
    /// Position errors of the enabled rows (0 on non-holonomic rows).
    pub position_errors: DVector<f64>,
    /// Velocity errors of the enabled rows.
    pub velocity_errors: DVector<f64>,
    /// Per constraint, its rows.
    pub constraints: Vec<ConstraintRows>,
}

/// Makes `v` `len` zeros, reusing its allocation when the length already fits.
fn zeroed_vector(v: &mut DVector<f64>, len: usize) {
    if v.len() == len {
        v.as_mut_slice().fill(0.0);
    } else {
        *v = DVector::zeros(len);
    }
}

impl InstanceSystem {
    /// A system with nothing in it, for [`Batch::assemble_into`] to fill.
    pub(crate) fn empty() -> Self {
        Self {
            instance: 0,
            status: status::OK,
            kinematics: Vec::new(),
            mass_blocks: Vec::new(),
            applied: DVector::zeros(0),
            jacobian: DMatrix::zeros(0, 0),
            bias_acceleration: DVector::zeros(0),
            bias: DVector::zeros(0),
            position_errors: DVector::zeros(0),
            velocity_errors: DVector::zeros(0),
            constraints: Vec::new(),
        }
    }

    /// Number of enabled rows.
    pub fn rows(&self) -> usize {
        self.jacobian.nrows()
    }

    /// `aerr(u̇) = G u̇ + k` for the enabled rows.
    pub fn acceleration_errors(&self, udot: &DVector<f64>) -> Result<DVector<f64>> {
        if udot.len() != self.jacobian.ncols() {
            return Err(Error::Dimension {
                what: "udot",
                got: udot.len(),
                expected: self.jacobian.ncols(),
            });
        }
        Ok(&self.jacobian * udot + &self.bias_acceleration)
    }

    /// Solves for u̇ and λ; `Err` when the instance is not finite or its mass matrix is singular.
    pub fn solve(&self) -> Result<Solution> {
        if self.status != status::OK {
            return Err(Error::NonFinite {
                instance: self.instance,
                status: self.status,
            });
        }
        let factor = MassFactor::new(&self.mass_blocks).ok_or(Error::NonFinite {
            instance: self.instance,
            status: status::SINGULAR_MASS,
        })?;
        Ok(solve(&factor, &self.applied, &self.jacobian, &self.bias))
    }
}

/// One constraint's outputs for one instance, before scattering into columns.
struct ConstraintInstanceOutput {
    position_errors: [f64; crate::constraints::MAX_ROWS],
    velocity_errors: [f64; crate::constraints::MAX_ROWS],
    acceleration_errors: [f64; crate::constraints::MAX_ROWS],
    multipliers: [f64; crate::constraints::MAX_ROWS],
    body_forces: [[f64; 6]; 2],
    power: f64,
    report: ContactReport,
}

struct InstanceOutput {
    status: u32,
    udot: Vec<f64>,
    udot_unconstrained: Vec<f64>,
    constraints: Vec<ConstraintInstanceOutput>,
}

/// Which constraints get Baumgarte terms in the bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BaumgarteMode {
    /// Those the template enables (plain evaluation).
    Template,
    /// Every constraint, each with its per-instance time constant (RBDL-mode stepping).
    All,
    /// None (Simbody-mode stepping, where projection controls drift).
    Off,
}

/// Adds a row's Jacobian blocks (one per constraint body) into a G row: `add(column, value)`
/// for each entry on a free body (mobility `6·slot + k`); blocks on Ground and prescribed bodies
/// do not enter G.
pub(crate) fn scatter_jacobian(
    template: &crate::model::SystemTemplate,
    bodies: &[crate::model::BodyId],
    blocks: &[[f64; 6]; 2],
    mut add: impl FnMut(usize, f64),
) {
    for (block, body) in blocks.iter().zip(bodies) {
        let b = &template.bodies()[body.index()];
        if b.kind == BodyKind::Free {
            for (k, value) in block.iter().enumerate() {
                add(6 * b.slot + k, *value);
            }
        }
    }
}

impl Batch {
    /// Evaluates constraint `slot` of instance `i` into `rows` (resized to its row count) with
    /// the given kinematics of every body, with the generic row-level rules applied: no position
    /// error on non-holonomic rows, no velocity error on acceleration-level rows. `body_kin` is
    /// scratch for the constraint's own bodies. Returns whether it is enabled for the instance.
    fn constraint_rows_into(
        &self,
        i: usize,
        (slot, cols): (&ConstraintSlot, &ConstraintColumns),
        kin: &[BodyKinematics],
        body_kin: &mut Vec<BodyKinematics>,
        rows: &mut Vec<Row>,
    ) -> bool {
        let c = &slot.constraint;
        let params = Params::of(&cols.params, i);
        body_kin.clear();
        body_kin.extend(c.bodies().iter().map(|b| kin[b.index()]));
        let levels = c.row_levels();
        rows.clear();
        rows.resize(levels.len(), Row::default());
        c.evaluate(&params, body_kin, rows);
        for (row, level) in rows.iter_mut().zip(levels) {
            if *level != RowLevel::Position {
                row.position_error = 0.0;
            }
            if *level == RowLevel::Acceleration {
                row.velocity_error = 0.0;
            }
        }
        cols.enabled[i] != 0
    }

    /// Every constraint's rows of instance `i` (see
    /// [`constraint_rows_into`](Self::constraint_rows_into)), with whether it is enabled.
    fn constraint_rows(&self, i: usize, kin: &[BodyKinematics]) -> Vec<(bool, Vec<Row>)> {
        let mut body_kin = Vec::new();
        self.template()
            .constraints()
            .iter()
            .zip(self.all_constraint_columns())
            .map(|constraint| {
                let mut rows = Vec::new();
                let enabled =
                    self.constraint_rows_into(i, constraint, kin, &mut body_kin, &mut rows);
                (enabled, rows)
            })
            .collect()
    }

    /// Assembles instance `i`: kinematics, mass matrices, `f − c`, G, k, b and errors.
    pub fn instance_system(&self, i: usize) -> Result<InstanceSystem> {
        if i >= self.len() {
            return Err(Error::InstanceOutOfRange {
                instance: i,
                len: self.len(),
            });
        }
        Ok(self.assemble(i))
    }

    fn assemble(&self, i: usize) -> InstanceSystem {
        self.assemble_with(i, &self.state_of(i), BaumgarteMode::Template)
    }

    /// Assembles instance `i` at `state` (parameters from the columns).
    pub(crate) fn assemble_with(
        &self,
        i: usize,
        state: &InstanceState,
        baumgarte: BaumgarteMode,
    ) -> InstanceSystem {
        let mut sys = InstanceSystem::empty();
        self.assemble_into(i, state, baumgarte, &mut sys, &mut Vec::new());
        sys
    }

    /// As [`assemble_with`](Self::assemble_with), into `sys`, whose allocations are reused when
    /// its shapes already fit (the integrators assemble the same instance at every stage).
    /// `body_kin` is scratch.
    pub(crate) fn assemble_into(
        &self,
        i: usize,
        state: &InstanceState,
        baumgarte: BaumgarteMode,
        sys: &mut InstanceSystem,
        body_kin: &mut Vec<BodyKinematics>,
    ) {
        let template = self.template();
        let nu = template.nu();
        sys.instance = i;
        let mut st = self.kinematics_into(i, state, None, &mut sys.kinematics);
        let gravity = Vec3::from(self.gravity_column()[i]);

        sys.mass_blocks.clear();
        zeroed_vector(&mut sys.applied, nu);
        for (slot, (body, cols)) in template
            .free_bodies()
            .iter()
            .zip(self.free_columns())
            .enumerate()
        {
            let props = MassProperties::from_columns(cols.mass[i], &cols.com[i], &cols.inertia[i]);
            let kin = &sys.kinematics[body.index()];
            let loads = Loads {
                gravity,
                force: Vec3::from(cols.applied_force[i]),
                torque: Vec3::from(cols.applied_torque[i]),
            };
            sys.mass_blocks.push(mass_matrix(&props, &kin.rotation));
            sys.applied
                .fixed_rows_mut::<6>(6 * slot)
                .copy_from(&applied_minus_coriolis(&props, kin, &loads));
        }

        let count = template.constraints().len();
        sys.constraints.truncate(count);
        sys.constraints.resize_with(count, ConstraintRows::default);
        let mut m = 0;
        for (out, constraint) in sys.constraints.iter_mut().zip(
            template
                .constraints()
                .iter()
                .zip(self.all_constraint_columns()),
        ) {
            out.enabled =
                self.constraint_rows_into(i, constraint, &sys.kinematics, body_kin, &mut out.rows);
            out.offset = m;
            if out.enabled {
                m += out.rows.len();
            }
        }
        if sys.jacobian.shape() == (m, nu) {
            sys.jacobian.as_mut_slice().fill(0.0);
        } else {
            sys.jacobian = DMatrix::zeros(m, nu);
        }
        zeroed_vector(&mut sys.bias_acceleration, m);
        zeroed_vector(&mut sys.bias, m);
        zeroed_vector(&mut sys.position_errors, m);
        zeroed_vector(&mut sys.velocity_errors, m);
        for (out, (slot, cols)) in sys.constraints.iter().zip(
            template
                .constraints()
                .iter()
                .zip(self.all_constraint_columns()),
        ) {
            if !out.enabled {
                continue;
            }
            let bodies = slot.constraint.bodies();
            // α = β = 1/T: b ← b − 2α ė − β² e (physics.md §4).
            let with_baumgarte = match baumgarte {
                BaumgarteMode::Template => slot.baumgarte.is_some(),
                BaumgarteMode::All => true,
                BaumgarteMode::Off => false,
            };
            let inv_t = with_baumgarte.then(|| 1.0 / cols.baumgarte_time_constant[i]);
            for (r, row) in out.rows.iter().enumerate() {
                let at = out.offset + r;
                scatter_jacobian(template, bodies, &row.jacobian, |k, value| {
                    sys.jacobian[(at, k)] += value
                });
                sys.bias_acceleration[at] = row.acceleration_error;
                sys.position_errors[at] = row.position_error;
                sys.velocity_errors[at] = row.velocity_error;
                sys.bias[at] = -row.acceleration_error;
                if let Some(a) = inv_t {
                    sys.bias[at] -= 2.0 * a * row.velocity_error + a * a * row.position_error;
                }
            }
        }
        if !all_finite(sys.jacobian.as_slice())
            || !all_finite(sys.bias.as_slice())
            || !all_finite(sys.applied.as_slice())
        {
            st |= status::NONFINITE_STATE;
        }
        sys.status = st;
    }

    /// Acceleration errors of every row of instance `i` (enabled or not), evaluated directly from
    /// the constraint formulas with free-body accelerations `udot` — the check on `G u̇ + k`.
    /// One vector per constraint, internal row order.
    pub fn acceleration_errors_at(&self, i: usize, udot: &[f64]) -> Result<Vec<Vec<f64>>> {
        if i >= self.len() {
            return Err(Error::InstanceOutOfRange {
                instance: i,
                len: self.len(),
            });
        }
        let nu = self.template().nu();
        if udot.len() != nu {
            return Err(Error::Dimension {
                what: "udot",
                got: udot.len(),
                expected: nu,
            });
        }
        let (kin, _) = self.kinematics(i, Some(udot));
        Ok(self
            .constraint_rows(i, &kin)
            .into_iter()
            .map(|(_, rows)| rows.iter().map(|r| r.acceleration_error).collect())
            .collect())
    }

    /// Total energy of instance `i`: `Σ ½ uᵀ M u − m g · p_com` over free bodies.
    pub fn energy(&self, i: usize) -> Result<f64> {
        if i >= self.len() {
            return Err(Error::InstanceOutOfRange {
                instance: i,
                len: self.len(),
            });
        }
        let (kin, _) = self.kinematics(i, None);
        let gravity = Vec3::from(self.gravity_column()[i]);
        Ok(self
            .template()
            .free_bodies()
            .iter()
            .zip(self.free_columns())
            .map(|(body, cols)| {
                let props =
                    MassProperties::from_columns(cols.mass[i], &cols.com[i], &cols.inertia[i]);
                energy(&props, &kin[body.index()], &gravity)
            })
            .sum())
    }

    fn evaluate_instance(&self, i: usize) -> InstanceOutput {
        let system = self.assemble(i);
        let nu = self.template().nu();
        let mut st = system.status;
        let solution = if st == status::OK {
            match MassFactor::new(&system.mass_blocks) {
                Some(f) => Some(solve(&f, &system.applied, &system.jacobian, &system.bias)),
                None => {
                    st |= status::SINGULAR_MASS;
                    None
                }
            }
        } else {
            None
        };
        let (udot, udot_unconstrained, multipliers) = match &solution {
            Some(s) => (
                s.udot.clone(),
                s.udot_unconstrained.clone(),
                s.multipliers.clone(),
            ),
            None => {
                let nan = DVector::from_element(nu, f64::NAN);
                (
                    nan.clone(),
                    nan,
                    DVector::from_element(system.rows(), f64::NAN),
                )
            }
        };
        let aerr = system
            .acceleration_errors(&udot)
            .unwrap_or_else(|_| DVector::from_element(system.rows(), f64::NAN));

        let template = self.template();
        let mut constraints = Vec::with_capacity(system.constraints.len());
        for ((slot, cols), block) in template
            .constraints()
            .iter()
            .zip(self.all_constraint_columns())
            .zip(&system.constraints)
        {
            let c = &slot.constraint;
            let n_rows = block.rows.len();
            let mut lambda = [0.0; crate::constraints::MAX_ROWS];
            let mut acc = [0.0; crate::constraints::MAX_ROWS];
            if block.enabled {
                for r in 0..n_rows {
                    lambda[r] = multipliers[block.offset + r];
                    acc[r] = aerr[block.offset + r];
                }
            }
            let mut out = ConstraintInstanceOutput {
                position_errors: [0.0; crate::constraints::MAX_ROWS],
                velocity_errors: [0.0; crate::constraints::MAX_ROWS],
                acceleration_errors: [0.0; crate::constraints::MAX_ROWS],
                multipliers: [0.0; crate::constraints::MAX_ROWS],
                body_forces: [[0.0; 6]; 2],
                power: 0.0,
                report: ContactReport::default(),
            };
            for (s, row) in c.report_slots().iter().enumerate() {
                if let Some(r) = *row {
                    out.position_errors[s] = block.rows[r].position_error;
                    out.velocity_errors[s] = block.rows[r].velocity_error;
                    out.acceleration_errors[s] = acc[r];
                    out.multipliers[s] = lambda[r];
                }
            }
            for (r, row) in block.rows.iter().enumerate() {
                out.power -= lambda[r] * row.velocity_error;
                for (j, jac) in row.jacobian.iter().enumerate().take(c.bodies().len()) {
                    for (force, g) in out.body_forces[j].iter_mut().zip(jac) {
                        *force += lambda[r] * g;
                    }
                }
            }
            let params = Params::of(&cols.params, i);
            let body_kin: Vec<BodyKinematics> = c
                .bodies()
                .iter()
                .map(|b| system.kinematics[b.index()])
                .collect();
            out.report = c.report(&params, &body_kin, &lambda[..n_rows]);
            constraints.push(out);
        }
        if st == status::OK
            && !(all_finite(udot.as_slice())
                && all_finite(multipliers.as_slice())
                && constraints.iter().all(|c| c.power.is_finite()))
        {
            st |= status::NONFINITE_RESULT;
        }
        InstanceOutput {
            status: st,
            udot: udot.as_slice().to_vec(),
            udot_unconstrained: udot_unconstrained.as_slice().to_vec(),
            constraints,
        }
    }

    /// Evaluates instance `block.start + k` on the reference path and writes its results into
    /// entry `k` of `block`.
    pub(crate) fn evaluate_instance_into(&self, block: &mut EvaluationBlock<'_>, k: usize) {
        let out = self.evaluate_instance(block.start + k);
        let (nu, selected) = (block.nu, block.outputs);
        block.status[k] = out.status;
        if selected.udot {
            block.udot[k * nu..(k + 1) * nu].copy_from_slice(&out.udot);
        }
        if selected.udot_unconstrained {
            block.udot_unconstrained[k * nu..(k + 1) * nu].copy_from_slice(&out.udot_unconstrained);
        }
        for (col, o) in block.constraints.iter_mut().zip(&out.constraints) {
            let (w, b) = (col.width, col.body_count);
            for (on, column, values) in [
                (
                    selected.position_errors,
                    &mut *col.position_errors,
                    &o.position_errors,
                ),
                (
                    selected.velocity_errors,
                    &mut *col.velocity_errors,
                    &o.velocity_errors,
                ),
                (
                    selected.acceleration_errors,
                    &mut *col.acceleration_errors,
                    &o.acceleration_errors,
                ),
                (selected.multipliers, &mut *col.multipliers, &o.multipliers),
            ] {
                if on {
                    column[k * w..(k + 1) * w].copy_from_slice(&values[..w]);
                }
            }
            if selected.body_forces {
                col.body_forces[k * b..(k + 1) * b].copy_from_slice(&o.body_forces[..b]);
            }
            if selected.power {
                col.power[k] = o.power;
            }
            if let Some(v) = col.contact_point.as_deref_mut() {
                v[k] = o.report.contact_point;
            }
            if let Some(v) = col.separation.as_deref_mut() {
                v[k] = o.report.separation;
            }
            if let Some(v) = col.contact_force.as_deref_mut() {
                v[k] = o.report.contact_force;
            }
        }
    }
}
