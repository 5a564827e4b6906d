//! An instance's contacts in contact space, read from the engine's own assembled rows: the bridge
//! between a template's constraints and the contact laws.

use nalgebra::{DMatrix, DVector};

use super::ContactSpace;
use crate::batch::status;
use crate::cpu::evaluate::InstanceSystem;
use crate::cpu::solver::MassFactor;
use crate::error::{Error, Result};
use crate::model::{ConstraintId, SystemTemplate};

/// One instance's rows as the contact laws see them, with what an impact or a mode
/// determination needs and what turns their answers back into `u`.
#[derive(Debug, Clone)]
pub struct InstanceContacts {
    /// `W = G M⁻¹ Gᵀ`, the contacts' `(x, y, z)` rows and every other enabled row (bilateral).
    pub space: ContactSpace,
    /// Row velocities: the velocity errors `v` (for a contact, its slip and normal speed).
    pub velocity: DVector<f64>,
    /// Free row accelerations `a₀ = G u̇₀ − b`: what the rows would do with no constraint force.
    pub free_acceleration: DVector<f64>,
    /// Separation `s` of each contact: its normal row's position error (> 0 apart).
    pub separation: Vec<f64>,
    /// `M⁻¹ Gᵀ` (nu × m): `u` changes by `−M⁻¹ Gᵀ π` under the impulse `π`.
    response: DMatrix<f64>,
    /// `u̇₀ = M⁻¹ (f − c)`.
    udot_free: DVector<f64>,
}

impl InstanceContacts {
    /// The contact space of `system` (an instance of `template`) with the constraints in
    /// `contacts` as unilateral contacts. Each must be enabled and report three rows in
    /// `(x, y, z)` order (slip along `Px`, `Py`, and the normal: a `SphereOnPlaneContact` with
    /// rolling rows); every other enabled row is bilateral.
    pub fn new(
        system: &InstanceSystem,
        template: &SystemTemplate,
        contacts: &[ConstraintId],
    ) -> Result<Self> {
        if system.status != status::OK {
            return Err(Error::NonFinite {
                instance: system.instance,
                status: system.status,
            });
        }
        let factor = MassFactor::new(&system.mass_blocks).ok_or(Error::NonFinite {
            instance: system.instance,
            status: status::SINGULAR_MASS,
        })?;
        let g = &system.jacobian;
        let response = factor.solve(&g.transpose());
        let w = g * &response;
        let w = (&w + w.transpose()) * 0.5;
        let mut contact_rows = Vec::with_capacity(contacts.len());
        for id in contacts {
            let slot = template.constraint(*id)?;
            let rows = system
                .constraints
                .get(id.0)
                .ok_or_else(|| Error::BadHandle {
                    what: "constraint",
                    index: id.0,
                    reason: "not in this instance's system".into(),
                })?;
            if !rows.enabled {
                return Err(Error::BadHandle {
                    what: "constraint",
                    index: id.0,
                    reason: "a unilateral contact must be enabled in the instance".into(),
                });
            }
            let slots = slot.constraint.report_slots();
            match slots {
                [Some(x), Some(y), Some(z)] => {
                    contact_rows.push([rows.offset + x, rows.offset + y, rows.offset + z])
                }
                _ => {
                    return Err(Error::BadHandle {
                        what: "constraint",
                        index: id.0,
                        reason: format!(
                            "{} does not have the three rows (slip x, slip y, normal) a \
                             unilateral contact needs",
                            slot.constraint.kind_name()
                        ),
                    });
                }
            }
        }
        let named: Vec<usize> = contact_rows.iter().flatten().copied().collect();
        let bilateral = (0..g.nrows()).filter(|r| !named.contains(r)).collect();
        let separation = contact_rows
            .iter()
            .map(|rows| system.position_errors[rows[2]])
            .collect();
        let udot_free = factor.solve_vector(&system.applied);
        let free_acceleration = g * &udot_free - &system.bias;
        Ok(Self {
            space: ContactSpace::new(w, contact_rows, bilateral)?,
            velocity: system.velocity_errors.clone(),
            free_acceleration,
            separation,
            response,
            udot_free,
        })
    }

    /// The change of `u` under the impulse `π` (per row): `−M⁻¹ Gᵀ π`.
    pub fn velocity_change(&self, impulse: &DVector<f64>) -> DVector<f64> {
        -(&self.response * impulse)
    }

    /// `u̇ = u̇₀ − M⁻¹ Gᵀ λ` for the multipliers `λ` (per row).
    pub fn udot(&self, multipliers: &DVector<f64>) -> DVector<f64> {
        &self.udot_free - &self.response * multipliers
    }
}
