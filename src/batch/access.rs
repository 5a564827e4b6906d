//! Per-field accessors of a batch: getters, checked per-instance setters and checked bulk
//! setters of body, instance and constraint columns.

use super::checks::{
    conditioned, finite, finite_scalar, invalid, pose, positive_mass, valid_inertia,
    valid_inertia_moments,
};
use super::*;
use crate::model::InstanceColumn;

/// Generates the getter, the per-instance setter and the bulk setter of a free-body column.
macro_rules! free_body_field {
    ($get:ident, $set:ident, $set_col:ident, $field:ident, $variant:ident, $ty:ty, $validate:path, $doc:literal) => {
        #[doc = concat!("Column of ", $doc, " of free body `body`, one entry per instance.")]
        pub fn $get(&self, body: BodyId) -> Result<&[$ty]> {
            Ok(self.free[self.free_slot(body)?].$field.entries())
        }

        #[doc = concat!("Sets ", $doc, " of free body `body` for one instance, validated.")]
        pub fn $set(&mut self, body: BodyId, instance: usize, value: $ty) -> Result<()> {
            let slot = self.free_slot(body)?;
            self.check_instance(instance)?;
            let v = $validate(value).map_err(|acc| {
                invalid(
                    format!("body[{}].{}", body.index(), stringify!($field)),
                    instance,
                    format!("{value:?}"),
                    acc,
                )
            })?;
            let what = || format!("body[{}].{}", body.index(), stringify!($field));
            let old = self.free[slot].$field.get(instance);
            self.free[slot].$field.put(instance, v, &what)?;
            if matches!(FreeField::$variant, FreeField::Mass | FreeField::Inertia) {
                if let Err(e) = self.check_conditioning(body, slot, instance..instance + 1) {
                    // The old value's column already had room for it; a column the write
                    // expanded is shared again.
                    self.free[slot].$field.put(instance, old, &what)?;
                    self.free[slot].$field.compact();
                    return Err(e);
                }
            }
            self.touch(Column::Free { slot, field: FreeField::$variant });
            Ok(())
        }

        #[doc = concat!("Sets ", $doc, " of free body `body` for every instance at once; nothing is written unless every value is valid.")]
        pub fn $set_col(&mut self, body: BodyId, values: &[$ty]) -> Result<()> {
            let slot = self.free_slot(body)?;
            let field = || format!("body[{}].{}", body.index(), stringify!($field));
            self.check_len(field(), values.len())?;
            let column = values
                .iter()
                .enumerate()
                .map(|(i, v)| $validate(*v).map_err(|acc| invalid(field(), i, format!("{v:?}"), acc)))
                .collect::<Result<Vec<$ty>>>()?;
            let old = self.free[slot].$field.swap_all(column);
            if matches!(FreeField::$variant, FreeField::Mass | FreeField::Inertia) {
                if let Err(e) = self.check_conditioning(body, slot, 0..self.len) {
                    self.free[slot].$field = old;
                    return Err(e);
                }
            }
            self.touch(Column::Free { slot, field: FreeField::$variant });
            Ok(())
        }
    };
}

/// Generates the accessors of a prescribed-body column.
macro_rules! prescribed_body_field {
    ($get:ident, $set:ident, $set_col:ident, $field:ident, $variant:ident, $ty:ty, $validate:path, $doc:literal) => {
        #[doc = concat!("Column of ", $doc, " of prescribed body `body`, one entry per instance.")]
        pub fn $get(&self, body: BodyId) -> Result<&[$ty]> {
            Ok(&self.prescribed[self.prescribed_slot(body)?].$field)
        }

        #[doc = concat!("Sets ", $doc, " of prescribed body `body` for one instance, validated.")]
        pub fn $set(&mut self, body: BodyId, instance: usize, value: $ty) -> Result<()> {
            let slot = self.prescribed_slot(body)?;
            self.check_not_driven(slot, stringify!($field))?;
            self.check_instance(instance)?;
            let v = $validate(value).map_err(|acc| {
                invalid(
                    format!("body[{}].{}", body.index(), stringify!($field)),
                    instance,
                    format!("{value:?}"),
                    acc,
                )
            })?;
            self.prescribed[slot].$field[instance] = v;
            self.touch(Column::Prescribed { slot, field: PrescribedField::$variant });
            Ok(())
        }

        #[doc = concat!("Sets ", $doc, " of prescribed body `body` for every instance at once; nothing is written unless every value is valid.")]
        pub fn $set_col(&mut self, body: BodyId, values: &[$ty]) -> Result<()> {
            let slot = self.prescribed_slot(body)?;
            self.check_not_driven(slot, stringify!($field))?;
            let field = || format!("body[{}].{}", body.index(), stringify!($field));
            self.check_len(field(), values.len())?;
            let column = values
                .iter()
                .enumerate()
                .map(|(i, v)| $validate(*v).map_err(|acc| invalid(field(), i, format!("{v:?}"), acc)))
                .collect::<Result<Vec<$ty>>>()?;
            self.prescribed[slot].$field = column;
            self.touch(Column::Prescribed { slot, field: PrescribedField::$variant });
            Ok(())
        }
    };
}

/// Generates the accessors of a per-instance column.
macro_rules! instance_field {
    ($get:ident, $set:ident, $set_col:ident, $field:ident, $variant:ident, $ty:ty, $validate:path, $doc:literal) => {
        #[doc = concat!("Column of ", $doc, ", one entry per instance.")]
        pub fn $get(&self) -> &[$ty] {
            self.$field.entries()
        }

        #[doc = concat!("Sets ", $doc, " for one instance, validated.")]
        pub fn $set(&mut self, instance: usize, value: $ty) -> Result<()> {
            self.check_instance(instance)?;
            let v = $validate(value).map_err(|acc| {
                invalid(stringify!($field).to_string(), instance, format!("{value:?}"), acc)
            })?;
            self.$field.put(instance, v, &|| stringify!($field).to_string())?;
            self.touch(Column::$variant);
            if matches!(Column::$variant, Column::Time) {
                self.refresh_motion_of(instance);
            }
            Ok(())
        }

        #[doc = concat!("Sets ", $doc, " for every instance at once; nothing is written unless every value is valid.")]
        pub fn $set_col(&mut self, values: &[$ty]) -> Result<()> {
            self.check_len(stringify!($field).to_string(), values.len())?;
            let column = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    $validate(*v).map_err(|acc| {
                        invalid(stringify!($field).to_string(), i, format!("{v:?}"), acc)
                    })
                })
                .collect::<Result<Vec<$ty>>>()?;
            self.$field.swap_all(column);
            self.touch(Column::$variant);
            if matches!(Column::$variant, Column::Time) {
                self.refresh_motion_all();
            }
            Ok(())
        }
    };
}

impl Batch {
    pub(super) fn constraint_columns(&self, c: ConstraintId) -> Result<&ConstraintColumns> {
        self.template.constraint(c)?;
        Ok(&self.constraints[c.0])
    }

    instance_field!(
        gravity,
        set_gravity,
        set_gravity_column,
        gravity,
        Gravity,
        [f64; 3],
        finite,
        "the gravity vector in Ground"
    );
    instance_field!(
        work,
        set_work,
        set_work_column,
        work,
        Work,
        [f64; 2],
        finite,
        "the work done on the free bodies since it was last set, `[driven, applied]`: by the \
         constraint forces (the prescribed bodies' work; constraints between free bodies are \
         workless) and by the applied forces and torques (gravity is in the energy), integrated \
         with the state by every stepper, so `energy change − driven − applied` is the \
         integration error"
    );
    instance_field!(
        time,
        set_time,
        set_time_column,
        time,
        Time,
        f64,
        finite_scalar,
        "the instance's time"
    );

    free_body_field!(
        mass,
        set_mass,
        set_mass_column,
        mass,
        Mass,
        f64,
        positive_mass,
        "the mass"
    );
    free_body_field!(
        com,
        set_com,
        set_com_column,
        com,
        Com,
        [f64; 3],
        finite,
        "the COM offset (body frame)"
    );
    free_body_field!(
        inertia,
        set_inertia,
        set_inertia_column,
        inertia,
        Inertia,
        [f64; 6],
        valid_inertia,
        "the inertia about the COM ([Ixx, Iyy, Izz, Ixy, Ixz, Iyz], body frame)"
    );
    free_body_field!(
        applied_force,
        set_applied_force,
        set_applied_force_column,
        applied_force,
        AppliedForce,
        [f64; 3],
        finite,
        "the applied force through the COM (Ground)"
    );
    free_body_field!(
        applied_torque,
        set_applied_torque,
        set_applied_torque_column,
        applied_torque,
        AppliedTorque,
        [f64; 3],
        finite,
        "the applied torque (Ground)"
    );
    free_body_field!(
        q,
        set_q,
        set_q_column,
        q,
        Q,
        [f64; 7],
        pose,
        "q = [e0, e1, e2, e3, x, y, z] (the quaternion is normalised)"
    );
    free_body_field!(
        u,
        set_u,
        set_u_column,
        u,
        U,
        [f64; 6],
        finite,
        "u = [w, v_origin] in Ground"
    );

    prescribed_body_field!(
        pose,
        set_pose,
        set_pose_column,
        pose,
        Pose,
        [f64; 7],
        pose,
        "the pose [e0, e1, e2, e3, x, y, z] (the quaternion is normalised)"
    );
    prescribed_body_field!(
        velocity,
        set_velocity,
        set_velocity_column,
        velocity,
        Velocity,
        [f64; 6],
        finite,
        "the spatial velocity [w, v_origin] in Ground"
    );
    prescribed_body_field!(
        acceleration,
        set_acceleration,
        set_acceleration_column,
        acceleration,
        Acceleration,
        [f64; 6],
        finite,
        "the spatial acceleration [b, a_origin] in Ground"
    );

    /// Sets the mass properties of a free body for one instance; nothing is written unless all
    /// three are valid.
    pub fn set_mass_properties(
        &mut self,
        body: BodyId,
        instance: usize,
        mass: f64,
        com: [f64; 3],
        inertia: [f64; 6],
    ) -> Result<()> {
        let slot = self.free_slot(body)?;
        self.check_instance(instance)?;
        let field = |f: &str| format!("body[{}].{f}", body.index());
        let mass = positive_mass(mass)
            .map_err(|a| invalid(field("mass"), instance, format!("{mass:?}"), a))?;
        let com =
            finite(com).map_err(|a| invalid(field("com"), instance, format!("{com:?}"), a))?;
        let (inertia, moments) = valid_inertia_moments(inertia)
            .map_err(|a| invalid(field("inertia"), instance, format!("{inertia:?}"), a))?;
        conditioned(mass, &moments).map_err(|(kappa, a)| {
            invalid(
                field("inertia"),
                instance,
                format!("{inertia:?} with mass {mass:?} (mass-matrix condition {kappa:.3e})"),
                &a,
            )
        })?;
        let cols = &mut self.free[slot];
        cols.mass.put(instance, mass, &|| field("mass"))?;
        cols.com.put(instance, com, &|| field("com"))?;
        cols.inertia.put(instance, inertia, &|| field("inertia"))?;
        for field in [FreeField::Mass, FreeField::Com, FreeField::Inertia] {
            self.touch(Column::Free { slot, field });
        }
        Ok(())
    }

    /// Enabled flags of a constraint (1 = enabled).
    pub fn enabled(&self, c: ConstraintId) -> Result<&[u32]> {
        Ok(self.constraint_columns(c)?.enabled.entries())
    }

    /// Enables or disables a constraint for one instance; a disabled constraint drops its rows.
    pub fn set_enabled(&mut self, c: ConstraintId, instance: usize, enabled: bool) -> Result<()> {
        self.constraint_columns(c)?;
        self.check_instance(instance)?;
        let what = || format!("constraint[{}].enabled", c.0);
        self.constraints[c.0]
            .enabled
            .put(instance, u32::from(enabled), &what)?;
        self.touch(Column::Enabled(c.0));
        Ok(())
    }

    /// Enables or disables a constraint for every instance at once.
    pub fn set_enabled_column(&mut self, c: ConstraintId, enabled: &[bool]) -> Result<()> {
        self.constraint_columns(c)?;
        self.check_len(format!("constraint[{}].enabled", c.0), enabled.len())?;
        self.constraints[c.0]
            .enabled
            .swap_all(enabled.iter().map(|e| u32::from(*e)).collect());
        self.touch(Column::Enabled(c.0));
        Ok(())
    }

    /// Baumgarte time constants of a constraint (used where the template enables Baumgarte).
    pub fn baumgarte_time_constant(&self, c: ConstraintId) -> Result<&[f64]> {
        Ok(self
            .constraint_columns(c)?
            .baumgarte_time_constant
            .entries())
    }

    /// Sets the Baumgarte time constant `T > 0` of a constraint for one instance.
    pub fn set_baumgarte_time_constant(
        &mut self,
        c: ConstraintId,
        instance: usize,
        t: f64,
    ) -> Result<()> {
        self.constraint_columns(c)?;
        self.check_instance(instance)?;
        if !(t.is_finite() && t > 0.0) {
            return Err(invalid(
                format!("constraint[{}].baumgarte_time_constant", c.0),
                instance,
                format!("{t:?}"),
                "a finite number > 0 (seconds)",
            ));
        }
        let what = || format!("constraint[{}].baumgarte_time_constant", c.0);
        self.constraints[c.0]
            .baumgarte_time_constant
            .put(instance, t, &what)?;
        self.touch(Column::Baumgarte(c.0));
        Ok(())
    }

    pub(super) fn param_index(&self, c: ConstraintId, name: &str) -> Result<usize> {
        let cols = self.constraint_columns(c)?;
        cols.specs
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| Error::UnknownParameter {
                constraint: c.0,
                kind: self.template.constraints()[c.0]
                    .constraint
                    .kind_name()
                    .to_string(),
                name: name.to_string(),
                available: cols
                    .specs
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// A constraint parameter's flat column (`width` values per instance) and its width.
    pub fn param(&self, c: ConstraintId, name: &str) -> Result<(&[f64], usize)> {
        let k = self.param_index(c, name)?;
        let cols = &self.constraints[c.0];
        Ok((cols.params[k].as_slice(), cols.widths[k]))
    }

    /// One instance's value of a constraint parameter.
    pub fn param_value(&self, c: ConstraintId, name: &str, instance: usize) -> Result<&[f64]> {
        self.check_instance(instance)?;
        let k = self.param_index(c, name)?;
        Ok(self.constraints[c.0].params[k].row(instance))
    }

    /// Sets a constraint parameter for one instance, validated (plane frames are normalised).
    pub fn set_param(
        &mut self,
        c: ConstraintId,
        name: &str,
        instance: usize,
        value: &[f64],
    ) -> Result<()> {
        let k = self.param_index(c, name)?;
        self.check_instance(instance)?;
        let cols = &self.constraints[c.0];
        let w = cols.widths[k];
        let field = || format!("constraint[{}].{name}", c.0);
        let v = checked_param(&cols.specs[k], w, &field, instance, value)?;
        self.constraints[c.0].params[k].set_row(instance, &v, &field)?;
        self.touch(Column::Param(c.0, k));
        Ok(())
    }

    /// Sets a constraint parameter for every instance from a flat column (`width` values per
    /// instance); nothing is written unless every value is valid.
    pub fn set_param_column(&mut self, c: ConstraintId, name: &str, values: &[f64]) -> Result<()> {
        let k = self.param_index(c, name)?;
        let cols = &self.constraints[c.0];
        let (w, check) = (cols.widths[k], cols.specs[k].check);
        let field = format!("constraint[{}].{name}", c.0);
        if values.len() != w * self.len {
            return Err(Error::ColumnLength {
                field,
                got: values.len(),
                expected: w * self.len,
            });
        }
        let mut column = values.to_vec();
        for (i, chunk) in column.chunks_mut(w).enumerate() {
            if !check.accept(chunk) {
                return Err(invalid(
                    field.clone(),
                    i,
                    format!("{:?}", &values[i * w..(i + 1) * w]),
                    check.accepted(),
                ));
            }
        }
        self.constraints[c.0].params[k].replace_all(column);
        self.touch(Column::Param(c.0, k));
        Ok(())
    }
}
