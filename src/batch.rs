//! Batch storage: N instances of one template as structure-of-arrays columns.
//!
//! Every column is a `Vec` of `bytemuck::Pod` values (`f64`, `[f64; K]`, `u32`), one entry per
//! instance, so a column can be viewed as bytes and uploaded to a GPU buffer as it is
//! (`bytemuck::cast_slice`). Columns are grouped per body and per constraint. Every setter
//! validates what it writes and returns an [`Error`] naming the field, the instance and the
//! accepted range; a bulk setter validates the whole column before writing any of it.

use std::sync::Arc;

use nalgebra::SymmetricEigen;

use crate::constraints::ParamSpec;
use crate::error::{Error, Result};
use crate::math::{inertia_matrix, normalize_quaternion};
use crate::model::{BodyId, BodyKind, ConstraintId, SystemTemplate};

/// Bits of the per-instance status column.
pub mod status {
    /// Nothing wrong.
    pub const OK: u32 = 0;
    /// The instance's state or parameters hold a non-finite number or a zero quaternion.
    pub const NONFINITE_STATE: u32 = 1;
    /// A computed result (u̇, multipliers, forces) is not finite.
    pub const NONFINITE_RESULT: u32 = 2;
    /// A free body's mass matrix could not be factored (not positive definite).
    pub const SINGULAR_MASS: u32 = 4;
}

/// Per-instance columns of one free body.
#[derive(Debug, Clone, PartialEq)]
pub struct FreeBodyColumns {
    /// Mass `m > 0`.
    pub mass: Vec<f64>,
    /// COM offset `c` in the body frame.
    pub com: Vec<[f64; 3]>,
    /// Inertia about the COM in the body frame, `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]`.
    pub inertia: Vec<[f64; 6]>,
    /// Applied force through the COM, in Ground.
    pub applied_force: Vec<[f64; 3]>,
    /// Applied torque, in Ground.
    pub applied_torque: Vec<[f64; 3]>,
    /// Generalized coordinates `[e0, e1, e2, e3, x, y, z]`.
    pub q: Vec<[f64; 7]>,
    /// Generalized speeds `[w, v_origin]` in Ground.
    pub u: Vec<[f64; 6]>,
}

/// Per-instance columns of one prescribed body: its motion, given by the user.
#[derive(Debug, Clone, PartialEq)]
pub struct PrescribedBodyColumns {
    /// Pose `[e0, e1, e2, e3, x, y, z]` of `R_GB`, `p_GBo`.
    pub pose: Vec<[f64; 7]>,
    /// Spatial velocity `[w, v_origin]` in Ground.
    pub velocity: Vec<[f64; 6]>,
    /// Spatial acceleration `[b, a_origin]` in Ground.
    pub acceleration: Vec<[f64; 6]>,
}

/// Per-instance columns of one constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintColumns {
    /// 1 when the constraint is enabled for the instance, 0 when its rows are dropped.
    pub enabled: Vec<u32>,
    /// Baumgarte time constant `T` (used when the template enables Baumgarte on it).
    pub baumgarte_time_constant: Vec<f64>,
    /// Parameter specs, in the constraint's order.
    pub specs: Vec<ParamSpec>,
    /// Flat parameter columns (`width` values per instance), in the constraint's order.
    pub params: Vec<Vec<f64>>,
    /// Width of each parameter column.
    pub widths: Vec<usize>,
}

/// N instances of a [`SystemTemplate`] with their parameters and state.
#[derive(Debug, Clone)]
pub struct Batch {
    template: Arc<SystemTemplate>,
    len: usize,
    gravity: Vec<[f64; 3]>,
    time: Vec<f64>,
    status: Vec<u32>,
    free: Vec<FreeBodyColumns>,
    prescribed: Vec<PrescribedBodyColumns>,
    constraints: Vec<ConstraintColumns>,
}

type Accepted = &'static str;

fn finite<const K: usize>(v: [f64; K]) -> Result<[f64; K], Accepted> {
    if v.iter().all(|x| x.is_finite()) {
        Ok(v)
    } else {
        Err("finite numbers")
    }
}

fn finite_scalar(v: f64) -> Result<f64, Accepted> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err("a finite number")
    }
}

fn positive_mass(m: f64) -> Result<f64, Accepted> {
    if m.is_finite() && m > 0.0 {
        Ok(m)
    } else {
        Err("a finite number > 0")
    }
}

/// Inertia about the COM: finite, symmetric positive definite, principal moments satisfying the
/// triangle inequality (each ≤ the sum of the other two, within 1e-10 relative), as Simbody's
/// `Inertia` requires of a physical body.
fn valid_inertia(i: [f64; 6]) -> Result<[f64; 6], Accepted> {
    const ACCEPTED: &str = "[Ixx, Iyy, Izz, Ixy, Ixz, Iyz] finite, positive definite, principal \
                            moments satisfying the triangle inequality (each ≤ sum of the others)";
    if !i.iter().all(|x| x.is_finite()) {
        return Err(ACCEPTED);
    }
    let moments = SymmetricEigen::new(inertia_matrix(&i)).eigenvalues;
    let largest = moments.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    let slop = 1e-10 * largest;
    if moments.iter().any(|m| *m <= 0.0) {
        return Err(ACCEPTED);
    }
    let sum: f64 = moments.iter().sum();
    if moments.iter().any(|m| *m > sum - *m + slop) {
        return Err(ACCEPTED);
    }
    Ok(i)
}

fn pose(mut p: [f64; 7]) -> Result<[f64; 7], Accepted> {
    const ACCEPTED: &str =
        "[e0, e1, e2, e3, x, y, z] finite, quaternion not zero (it is normalised)";
    if !p.iter().all(|x| x.is_finite()) || !normalize_quaternion(&mut p[..4]) {
        return Err(ACCEPTED);
    }
    Ok(p)
}

fn invalid(field: String, instance: usize, value: String, accepted: &str) -> Error {
    Error::InvalidValue {
        field,
        instance,
        value,
        accepted: accepted.to_string(),
    }
}

/// Generates the getter, the per-instance setter and the bulk setter of a free-body column.
macro_rules! free_body_field {
    ($get:ident, $set:ident, $set_col:ident, $field:ident, $ty:ty, $validate:path, $doc:literal) => {
        #[doc = concat!("Column of ", $doc, " of free body `body`, one entry per instance.")]
        pub fn $get(&self, body: BodyId) -> Result<&[$ty]> {
            Ok(&self.free[self.free_slot(body)?].$field)
        }

        #[doc = concat!("Sets ", $doc, " of free body `body` for one instance, validated.")]
        pub fn $set(&mut self, body: BodyId, instance: usize, value: $ty) -> Result<()> {
            let slot = self.free_slot(body)?;
            self.check_instance(instance)?;
            let v = $validate(value).map_err(|acc| {
                invalid(
                    format!("body[{}].{}", body.0, stringify!($field)),
                    instance,
                    format!("{value:?}"),
                    acc,
                )
            })?;
            self.free[slot].$field[instance] = v;
            Ok(())
        }

        #[doc = concat!("Sets ", $doc, " of free body `body` for every instance at once; nothing is written unless every value is valid.")]
        pub fn $set_col(&mut self, body: BodyId, values: &[$ty]) -> Result<()> {
            let slot = self.free_slot(body)?;
            let field = || format!("body[{}].{}", body.0, stringify!($field));
            self.check_len(field(), values.len())?;
            let column = values
                .iter()
                .enumerate()
                .map(|(i, v)| $validate(*v).map_err(|acc| invalid(field(), i, format!("{v:?}"), acc)))
                .collect::<Result<Vec<$ty>>>()?;
            self.free[slot].$field = column;
            Ok(())
        }
    };
}

/// Generates the accessors of a prescribed-body column.
macro_rules! prescribed_body_field {
    ($get:ident, $set:ident, $set_col:ident, $field:ident, $ty:ty, $validate:path, $doc:literal) => {
        #[doc = concat!("Column of ", $doc, " of prescribed body `body`, one entry per instance.")]
        pub fn $get(&self, body: BodyId) -> Result<&[$ty]> {
            Ok(&self.prescribed[self.prescribed_slot(body)?].$field)
        }

        #[doc = concat!("Sets ", $doc, " of prescribed body `body` for one instance, validated.")]
        pub fn $set(&mut self, body: BodyId, instance: usize, value: $ty) -> Result<()> {
            let slot = self.prescribed_slot(body)?;
            self.check_instance(instance)?;
            let v = $validate(value).map_err(|acc| {
                invalid(
                    format!("body[{}].{}", body.0, stringify!($field)),
                    instance,
                    format!("{value:?}"),
                    acc,
                )
            })?;
            self.prescribed[slot].$field[instance] = v;
            Ok(())
        }

        #[doc = concat!("Sets ", $doc, " of prescribed body `body` for every instance at once; nothing is written unless every value is valid.")]
        pub fn $set_col(&mut self, body: BodyId, values: &[$ty]) -> Result<()> {
            let slot = self.prescribed_slot(body)?;
            let field = || format!("body[{}].{}", body.0, stringify!($field));
            self.check_len(field(), values.len())?;
            let column = values
                .iter()
                .enumerate()
                .map(|(i, v)| $validate(*v).map_err(|acc| invalid(field(), i, format!("{v:?}"), acc)))
                .collect::<Result<Vec<$ty>>>()?;
            self.prescribed[slot].$field = column;
            Ok(())
        }
    };
}

/// Generates the accessors of a per-instance column.
macro_rules! instance_field {
    ($get:ident, $set:ident, $set_col:ident, $field:ident, $ty:ty, $validate:path, $doc:literal) => {
        #[doc = concat!("Column of ", $doc, ", one entry per instance.")]
        pub fn $get(&self) -> &[$ty] {
            &self.$field
        }

        #[doc = concat!("Sets ", $doc, " for one instance, validated.")]
        pub fn $set(&mut self, instance: usize, value: $ty) -> Result<()> {
            self.check_instance(instance)?;
            let v = $validate(value).map_err(|acc| {
                invalid(stringify!($field).to_string(), instance, format!("{value:?}"), acc)
            })?;
            self.$field[instance] = v;
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
            self.$field = column;
            Ok(())
        }
    };
}

impl Batch {
    /// `len` instances of `template`, every parameter at its default: free bodies of unit mass
    /// and unit inertia at the Ground origin at rest, prescribed bodies at rest at the origin,
    /// gravity `(0, 0, −9.81)`, every constraint enabled with its template defaults.
    pub fn new(template: SystemTemplate, len: usize) -> Result<Self> {
        Self::from_shared(Arc::new(template), len)
    }

    /// As [`new`](Self::new), sharing a template between batches.
    pub fn from_shared(template: Arc<SystemTemplate>, len: usize) -> Result<Self> {
        let free = template
            .free_bodies()
            .iter()
            .map(|_| FreeBodyColumns {
                mass: vec![1.0; len],
                com: vec![[0.0; 3]; len],
                inertia: vec![[1.0, 1.0, 1.0, 0.0, 0.0, 0.0]; len],
                applied_force: vec![[0.0; 3]; len],
                applied_torque: vec![[0.0; 3]; len],
                q: vec![[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]; len],
                u: vec![[0.0; 6]; len],
            })
            .collect();
        let prescribed = template
            .prescribed_bodies()
            .iter()
            .map(|_| PrescribedBodyColumns {
                pose: vec![[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]; len],
                velocity: vec![[0.0; 6]; len],
                acceleration: vec![[0.0; 6]; len],
            })
            .collect();
        let mut constraints = Vec::with_capacity(template.constraints().len());
        for (index, slot) in template.constraints().iter().enumerate() {
            let specs = slot.constraint.params();
            let mut params = Vec::with_capacity(specs.len());
            let mut widths = Vec::with_capacity(specs.len());
            for spec in &specs {
                let mut default = spec.default.clone();
                if default.is_empty() || !spec.check.accept(&mut default) {
                    return Err(Error::Template(format!(
                        "constraint {index} ({}): default {} = {:?} not accepted; accepted: {}",
                        slot.constraint.kind_name(),
                        spec.name,
                        spec.default,
                        spec.check.accepted()
                    )));
                }
                widths.push(default.len());
                params.push(default.repeat(len));
            }
            let t = slot.baumgarte.unwrap_or_default().time_constant;
            constraints.push(ConstraintColumns {
                enabled: vec![1; len],
                baumgarte_time_constant: vec![t; len],
                specs,
                params,
                widths,
            });
        }
        Ok(Self {
            template,
            len,
            gravity: vec![[0.0, 0.0, -9.81]; len],
            time: vec![0.0; len],
            status: vec![status::OK; len],
            free,
            prescribed,
            constraints,
        })
    }

    /// Number of instances.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the batch holds no instance.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The template every instance follows.
    pub fn template(&self) -> &SystemTemplate {
        &self.template
    }

    /// The shared template.
    pub fn template_arc(&self) -> &Arc<SystemTemplate> {
        &self.template
    }

    /// Status bits per instance (see [`status`]), as left by the last
    /// [`refresh_status`](Self::refresh_status).
    pub fn status(&self) -> &[u32] {
        &self.status
    }

    /// Re-checks every instance's state (time, q, u, prescribed motion) and records
    /// [`status::NONFINITE_STATE`] where something is not finite or a quaternion is zero; other
    /// bits are cleared. Returns the number of flagged instances. Instances are independent: one
    /// flagged instance changes nothing for the others.
    pub fn refresh_status(&mut self) -> usize {
        let mut flagged = 0;
        for i in 0..self.len {
            let mut ok = self.time[i].is_finite() && self.gravity[i].iter().all(|x| x.is_finite());
            for cols in &self.free {
                ok &= cols.q[i].iter().all(|x| x.is_finite())
                    && cols.u[i].iter().all(|x| x.is_finite())
                    && cols.q[i][..4].iter().any(|x| *x != 0.0);
            }
            for cols in &self.prescribed {
                ok &= cols.pose[i].iter().all(|x| x.is_finite())
                    && cols.velocity[i].iter().all(|x| x.is_finite())
                    && cols.acceleration[i].iter().all(|x| x.is_finite());
            }
            self.status[i] = if ok {
                status::OK
            } else {
                status::NONFINITE_STATE
            };
            flagged += usize::from(!ok);
        }
        flagged
    }

    fn check_instance(&self, instance: usize) -> Result<()> {
        if instance < self.len {
            Ok(())
        } else {
            Err(Error::InstanceOutOfRange {
                instance,
                len: self.len,
            })
        }
    }

    fn check_len(&self, field: String, got: usize) -> Result<()> {
        if got == self.len {
            Ok(())
        } else {
            Err(Error::ColumnLength {
                field,
                got,
                expected: self.len,
            })
        }
    }

    fn free_slot(&self, body: BodyId) -> Result<usize> {
        let b = self.template.body(body)?;
        if b.kind == BodyKind::Free {
            Ok(b.slot)
        } else {
            Err(Error::BadHandle {
                what: "body",
                index: body.0,
                reason: format!("it is {:?}, not a free body", b.kind),
            })
        }
    }

    fn prescribed_slot(&self, body: BodyId) -> Result<usize> {
        let b = self.template.body(body)?;
        if b.kind == BodyKind::Prescribed {
            Ok(b.slot)
        } else {
            Err(Error::BadHandle {
                what: "body",
                index: body.0,
                reason: format!("it is {:?}, not a prescribed body", b.kind),
            })
        }
    }

    fn constraint_columns(&self, c: ConstraintId) -> Result<&ConstraintColumns> {
        self.template.constraint(c)?;
        Ok(&self.constraints[c.0])
    }

    instance_field!(
        gravity,
        set_gravity,
        set_gravity_column,
        gravity,
        [f64; 3],
        finite,
        "the gravity vector in Ground"
    );
    instance_field!(
        time,
        set_time,
        set_time_column,
        time,
        f64,
        finite_scalar,
        "the instance's time"
    );

    free_body_field!(
        mass,
        set_mass,
        set_mass_column,
        mass,
        f64,
        positive_mass,
        "the mass"
    );
    free_body_field!(
        com,
        set_com,
        set_com_column,
        com,
        [f64; 3],
        finite,
        "the COM offset (body frame)"
    );
    free_body_field!(
        inertia,
        set_inertia,
        set_inertia_column,
        inertia,
        [f64; 6],
        valid_inertia,
        "the inertia about the COM ([Ixx, Iyy, Izz, Ixy, Ixz, Iyz], body frame)"
    );
    free_body_field!(
        applied_force,
        set_applied_force,
        set_applied_force_column,
        applied_force,
        [f64; 3],
        finite,
        "the applied force through the COM (Ground)"
    );
    free_body_field!(
        applied_torque,
        set_applied_torque,
        set_applied_torque_column,
        applied_torque,
        [f64; 3],
        finite,
        "the applied torque (Ground)"
    );
    free_body_field!(
        q,
        set_q,
        set_q_column,
        q,
        [f64; 7],
        pose,
        "q = [e0, e1, e2, e3, x, y, z] (the quaternion is normalised)"
    );
    free_body_field!(
        u,
        set_u,
        set_u_column,
        u,
        [f64; 6],
        finite,
        "u = [w, v_origin] in Ground"
    );

    prescribed_body_field!(
        pose,
        set_pose,
        set_pose_column,
        pose,
        [f64; 7],
        pose,
        "the pose [e0, e1, e2, e3, x, y, z] (the quaternion is normalised)"
    );
    prescribed_body_field!(
        velocity,
        set_velocity,
        set_velocity_column,
        velocity,
        [f64; 6],
        finite,
        "the spatial velocity [w, v_origin] in Ground"
    );
    prescribed_body_field!(
        acceleration,
        set_acceleration,
        set_acceleration_column,
        acceleration,
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
        let field = |f: &str| format!("body[{}].{f}", body.0);
        let mass = positive_mass(mass)
            .map_err(|a| invalid(field("mass"), instance, format!("{mass:?}"), a))?;
        let com =
            finite(com).map_err(|a| invalid(field("com"), instance, format!("{com:?}"), a))?;
        let inertia = valid_inertia(inertia)
            .map_err(|a| invalid(field("inertia"), instance, format!("{inertia:?}"), a))?;
        let cols = &mut self.free[slot];
        cols.mass[instance] = mass;
        cols.com[instance] = com;
        cols.inertia[instance] = inertia;
        Ok(())
    }

    /// Enabled flags of a constraint (1 = enabled).
    pub fn enabled(&self, c: ConstraintId) -> Result<&[u32]> {
        Ok(&self.constraint_columns(c)?.enabled)
    }

    /// Enables or disables a constraint for one instance; a disabled constraint drops its rows.
    pub fn set_enabled(&mut self, c: ConstraintId, instance: usize, enabled: bool) -> Result<()> {
        self.constraint_columns(c)?;
        self.check_instance(instance)?;
        self.constraints[c.0].enabled[instance] = u32::from(enabled);
        Ok(())
    }

    /// Enables or disables a constraint for every instance at once.
    pub fn set_enabled_column(&mut self, c: ConstraintId, enabled: &[bool]) -> Result<()> {
        self.constraint_columns(c)?;
        self.check_len(format!("constraint[{}].enabled", c.0), enabled.len())?;
        self.constraints[c.0].enabled = enabled.iter().map(|e| u32::from(*e)).collect();
        Ok(())
    }

    /// Baumgarte time constants of a constraint (used where the template enables Baumgarte).
    pub fn baumgarte_time_constant(&self, c: ConstraintId) -> Result<&[f64]> {
        Ok(&self.constraint_columns(c)?.baumgarte_time_constant)
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
        self.constraints[c.0].baumgarte_time_constant[instance] = t;
        Ok(())
    }

    fn param_index(&self, c: ConstraintId, name: &str) -> Result<usize> {
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
        Ok((&cols.params[k], cols.widths[k]))
    }

    /// One instance's value of a constraint parameter.
    pub fn param_value(&self, c: ConstraintId, name: &str, instance: usize) -> Result<&[f64]> {
        self.check_instance(instance)?;
        let (col, w) = self.param(c, name)?;
        Ok(&col[instance * w..(instance + 1) * w])
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
        let (w, check) = (cols.widths[k], cols.specs[k].check);
        let field = format!("constraint[{}].{name}", c.0);
        if value.len() != w {
            return Err(Error::ColumnLength {
                field,
                got: value.len(),
                expected: w,
            });
        }
        let mut v = value.to_vec();
        if !check.accept(&mut v) {
            return Err(invalid(
                field,
                instance,
                format!("{value:?}"),
                check.accepted(),
            ));
        }
        self.constraints[c.0].params[k][instance * w..(instance + 1) * w].copy_from_slice(&v);
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
        self.constraints[c.0].params[k] = column;
        Ok(())
    }

    /// All columns of a free body (read-only), for bulk export or GPU upload.
    pub fn free_body_columns(&self, body: BodyId) -> Result<&FreeBodyColumns> {
        Ok(&self.free[self.free_slot(body)?])
    }

    /// All columns of a prescribed body (read-only).
    pub fn prescribed_body_columns(&self, body: BodyId) -> Result<&PrescribedBodyColumns> {
        Ok(&self.prescribed[self.prescribed_slot(body)?])
    }

    /// All columns of a constraint (read-only).
    pub fn constraint_columns_of(&self, c: ConstraintId) -> Result<&ConstraintColumns> {
        self.constraint_columns(c)
    }

    pub(crate) fn free_columns(&self) -> &[FreeBodyColumns] {
        &self.free
    }

    pub(crate) fn prescribed_columns(&self) -> &[PrescribedBodyColumns] {
        &self.prescribed
    }

    pub(crate) fn all_constraint_columns(&self) -> &[ConstraintColumns] {
        &self.constraints
    }
}
