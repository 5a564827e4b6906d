//! Batch storage: N instances of one template as structure-of-arrays columns.
//!
//! Every column is a `Vec` of `bytemuck::Pod` values (`f64`, `[f64; K]`, `u32`), one entry per
//! instance, so a column can be viewed as bytes and uploaded to a GPU buffer as it is
//! (`bytemuck::cast_slice`). Columns are grouped per body and per constraint. Every setter
//! validates what it writes and returns an [`Error`] naming the field, the instance and the
//! accepted range; a bulk setter validates the whole column before writing any of it.

mod motion;
mod state;

pub use state::InstanceState;

use std::sync::Arc;

use nalgebra::SymmetricEigen;

use crate::constraints::ParamSpec;
use crate::error::{Error, Result, try_filled};
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
    /// The integrator could not advance the instance: its adaptive step fell below the minimum
    /// step (`step::MIN_STEP`, relative to the instance's time), e.g. because the constraint
    /// error on entry is beyond what projection may correct
    /// (`max(2·tol, √tol)`) or the dynamics are too stiff for the accuracy asked. The instance
    /// keeps its last good state and is not stepped again until the user resets it (and calls
    /// [`Batch::refresh_status_of`](crate::batch::Batch::refresh_status_of)).
    pub const STEP_FAILED: u32 = 8;
    /// After the last step of a call, a constraint error (position or velocity, enabled rows)
    /// exceeds the stepper's violation tolerance (`Stepper::violation_tolerance`): the
    /// instance left its constraints and its results are not to be trusted. It is still
    /// stepped; the flag stays until the user clears it.
    pub const CONSTRAINT_VIOLATED: u32 = 16;
    /// A reported quantity (energy, force) overflowed to a non-finite value although the
    /// state is finite.
    pub const NONFINITE_OUTPUT: u32 = 32;
    /// The bits that stop an instance from being stepped further.
    pub const HALTED: u32 = NONFINITE_STATE | STEP_FAILED;

    /// A short English description of every bit set in `bits` (`"ok"` when none).
    pub fn describe(bits: u32) -> String {
        const NAMES: [(u32, &str); 6] = [
            (NONFINITE_STATE, "non-finite state"),
            (NONFINITE_RESULT, "non-finite result"),
            (SINGULAR_MASS, "singular or ill-conditioned mass matrix"),
            (
                STEP_FAILED,
                "step size below the minimum (could not advance)",
            ),
            (CONSTRAINT_VIOLATED, "constraint error beyond tolerance"),
            (NONFINITE_OUTPUT, "non-finite output"),
        ];
        let words: Vec<&str> = NAMES
            .iter()
            .filter(|(bit, _)| bits & bit != 0)
            .map(|(_, name)| *name)
            .collect();
        if bits == 0 {
            "ok".into()
        } else if words.is_empty() {
            format!("unknown status bits {bits:#x}")
        } else {
            words.join(", ")
        }
    }
}

/// A field of a free body's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FreeField {
    /// `mass` (width 1).
    Mass,
    /// `com` (width 3).
    Com,
    /// `inertia` (width 6).
    Inertia,
    /// `applied_force` (width 3).
    AppliedForce,
    /// `applied_torque` (width 3).
    AppliedTorque,
    /// `q` (width 7).
    Q,
    /// `u` (width 6).
    U,
}

impl FreeField {
    /// Every field, in storage order.
    pub const ALL: [FreeField; 7] = [
        FreeField::Mass,
        FreeField::Com,
        FreeField::Inertia,
        FreeField::AppliedForce,
        FreeField::AppliedTorque,
        FreeField::Q,
        FreeField::U,
    ];

    /// Values per instance.
    pub fn width(self) -> usize {
        [1, 3, 6, 3, 3, 7, 6][self as usize]
    }
}

/// A field of a prescribed body's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrescribedField {
    /// `pose` (width 7).
    Pose,
    /// `velocity` (width 6).
    Velocity,
    /// `acceleration` (width 6).
    Acceleration,
}

impl PrescribedField {
    /// Every field, in storage order.
    pub const ALL: [PrescribedField; 3] = [
        PrescribedField::Pose,
        PrescribedField::Velocity,
        PrescribedField::Acceleration,
    ];

    /// Values per instance.
    pub fn width(self) -> usize {
        [7, 6, 6][self as usize]
    }
}

/// Names one column of a batch, for change tracking and bulk export (GPU upload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Column {
    /// Gravity (width 3).
    Gravity,
    /// Work done on the free bodies, `[driven, applied]` (width 2).
    Work,
    /// Time (width 1).
    Time,
    /// A free body's field; `slot` is its index among free bodies.
    Free {
        /// Index among free bodies.
        slot: usize,
        /// Which field.
        field: FreeField,
    },
    /// A prescribed body's field; `slot` is its index among prescribed bodies.
    Prescribed {
        /// Index among prescribed bodies.
        slot: usize,
        /// Which field.
        field: PrescribedField,
    },
    /// A constraint's enabled flags (width 1, u32).
    Enabled(usize),
    /// A constraint's Baumgarte time constants (width 1).
    Baumgarte(usize),
    /// Parameter `k` of constraint `c`: `Param(c, k)`.
    Param(usize, usize),
    /// Parameter `param` of the motion law of prescribed body `slot`.
    Motion {
        /// Index among prescribed bodies.
        slot: usize,
        /// Index among the law's parameters.
        param: usize,
    },
}

/// A column's values, flat (`width` per instance).
#[derive(Debug, Clone, Copy)]
pub enum ColumnData<'a> {
    /// f64 values.
    F64(&'a [f64]),
    /// u32 values (enabled flags).
    U32(&'a [u32]),
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
    /// The parameters of the body's motion law; `None` for the constant law. With a law, the
    /// three columns above are outputs: the law at each instance's time, refreshed whenever the
    /// time or a parameter changes.
    pub motion: Option<MotionColumns>,
}

/// Per-instance parameter columns of a prescribed body's motion law.
#[derive(Debug, Clone, PartialEq)]
pub struct MotionColumns {
    /// Parameter specs, in the law's order.
    pub specs: Vec<ParamSpec>,
    /// Flat parameter columns (`width` values per instance).
    pub params: Vec<Vec<f64>>,
    /// Width of each parameter column.
    pub widths: Vec<usize>,
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
///
/// Cloning gives an independent batch with a new [`uid`](Batch::uid).
#[derive(Debug)]
pub struct Batch {
    uid: u64,
    template: Arc<SystemTemplate>,
    len: usize,
    gravity: Vec<[f64; 3]>,
    time: Vec<f64>,
    status: Vec<u32>,
    free: Vec<FreeBodyColumns>,
    prescribed: Vec<PrescribedBodyColumns>,
    constraints: Vec<ConstraintColumns>,
    /// Change counter per column (see [`Batch::column_version`]).
    versions: Vec<u64>,
    /// Next value of the change counter.
    next_version: u64,
    /// Index of each constraint's first column in `versions`.
    constraint_column_base: Vec<usize>,
    /// Index of each prescribed body's first motion-parameter column in `versions`.
    motion_column_base: Vec<usize>,
    /// `[driven, applied]` work done on the free bodies (see [`Batch::work`]).
    work: Vec<[f64; 2]>,
    /// Index of the work column in `versions`.
    work_index: usize,
}

static NEXT_UID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn new_uid() -> u64 {
    NEXT_UID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Clone for Batch {
    fn clone(&self) -> Self {
        Self {
            uid: new_uid(),
            template: self.template.clone(),
            len: self.len,
            gravity: self.gravity.clone(),
            time: self.time.clone(),
            status: self.status.clone(),
            free: self.free.clone(),
            prescribed: self.prescribed.clone(),
            constraints: self.constraints.clone(),
            versions: self.versions.clone(),
            next_version: self.next_version,
            constraint_column_base: self.constraint_column_base.clone(),
            motion_column_base: self.motion_column_base.clone(),
            work: self.work.clone(),
            work_index: self.work_index,
        }
    }
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

/// The largest condition number `max(m, I₁)/min(m, I₃)` of a free body's central mass matrix
/// (mass and principal moments, SI units) the batch accepts. Beyond it f64 keeps fewer than 4
/// significant digits through `M⁻¹` and the motion (spin rates ~ √(m/I) larger than the
/// translation) is too stiff for any step size a study would use: a 2 kg ball given an inertia
/// of 1e-14 (condition 2e14) leaves its rolling constraint. A solid 5 µm sphere sits at about
/// 1e12; use smaller units (mm, g) for bodies that small.
pub const MAX_MASS_CONDITION: f64 = 1e12;

/// Checks the conditioning of a free body's central mass matrix `diag(I_c, m 1)`; on failure
/// gives the condition number and what is accepted.
fn well_conditioned(mass: f64, inertia: &[f64; 6]) -> Result<(), (f64, String)> {
    let moments = SymmetricEigen::new(inertia_matrix(inertia)).eigenvalues;
    let largest = moments.iter().fold(mass, |a, b| a.max(*b));
    let smallest = moments.iter().fold(mass, |a, b| a.min(*b));
    let kappa = largest / smallest;
    if kappa <= MAX_MASS_CONDITION {
        Ok(())
    } else {
        Err((
            kappa,
            format!(
                "mass and principal moments of inertia within a factor {MAX_MASS_CONDITION:e} \
                 of each other (SI units; use smaller units for microscopic bodies)"
            ),
        ))
    }
}

fn pose(mut p: [f64; 7]) -> Result<[f64; 7], Accepted> {
    const ACCEPTED: &str =
        "[e0, e1, e2, e3, x, y, z] finite, quaternion not zero (it is normalised)";
    if !p.iter().all(|x| x.is_finite()) || !normalize_quaternion(&mut p[..4]) {
        return Err(ACCEPTED);
    }
    Ok(p)
}

/// Parameter columns for `len` instances of the parameters `specs` (a constraint's or a motion
/// law's), every value at its checked default; `owner` names them in errors.
pub(crate) fn default_columns(
    specs: &[ParamSpec],
    owner: &str,
    len: usize,
    filled: &dyn Fn(&str) -> String,
) -> Result<(Vec<Vec<f64>>, Vec<usize>)> {
    let mut params = Vec::with_capacity(specs.len());
    let mut widths = Vec::with_capacity(specs.len());
    for spec in specs {
        let mut default = spec.default.clone();
        if default.is_empty() || !spec.check.accept(&mut default) {
            return Err(Error::Template(format!(
                "{owner}: default {} = {:?} not accepted; accepted: {}",
                spec.name,
                spec.default,
                spec.check.accepted()
            )));
        }
        let mut column = Vec::new();
        column
            .try_reserve_exact(default.len() * len)
            .map_err(|_| Error::OutOfMemory {
                what: filled(spec.name),
                count: len.to_string(),
                bytes: (default.len() * 8) as u128 * len as u128,
                where_: "host",
            })?;
        for _ in 0..len {
            column.extend_from_slice(&default);
        }
        widths.push(default.len());
        params.push(column);
    }
    Ok((params, widths))
}

/// One instance's value of a parameter (`width` values), checked by `spec` (and normalised
/// where the check says so); errors name `field`.
pub(crate) fn checked_param(
    spec: &ParamSpec,
    width: usize,
    field: String,
    instance: usize,
    value: &[f64],
) -> Result<Vec<f64>> {
    if value.len() != width {
        return Err(Error::ColumnLength {
            field,
            got: value.len(),
            expected: width,
        });
    }
    let mut v = value.to_vec();
    if !spec.check.accept(&mut v) {
        return Err(invalid(
            field,
            instance,
            format!("{value:?}"),
            spec.check.accepted(),
        ));
    }
    Ok(v)
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
    ($get:ident, $set:ident, $set_col:ident, $field:ident, $variant:ident, $ty:ty, $validate:path, $doc:literal) => {
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
                    format!("body[{}].{}", body.index(), stringify!($field)),
                    instance,
                    format!("{value:?}"),
                    acc,
                )
            })?;
            let old = std::mem::replace(&mut self.free[slot].$field[instance], v);
            if matches!(FreeField::$variant, FreeField::Mass | FreeField::Inertia) {
                if let Err(e) = self.check_conditioning(body, slot, instance..instance + 1) {
                    self.free[slot].$field[instance] = old;
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
            let old = std::mem::replace(&mut self.free[slot].$field, column);
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
            &self.$field
        }

        #[doc = concat!("Sets ", $doc, " for one instance, validated.")]
        pub fn $set(&mut self, instance: usize, value: $ty) -> Result<()> {
            self.check_instance(instance)?;
            let v = $validate(value).map_err(|acc| {
                invalid(stringify!($field).to_string(), instance, format!("{value:?}"), acc)
            })?;
            self.$field[instance] = v;
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
            self.$field = column;
            self.touch(Column::$variant);
            if matches!(Column::$variant, Column::Time) {
                self.refresh_motion_all();
            }
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
        // Sizes come from users: refuse up front what cannot be addressed, and allocate every
        // column fallibly, so a huge count is a typed error rather than an abort.
        let what = format!("batch of {len} instances");
        let per_instance = Self::bytes_per_instance(&template) as u128;
        if !crate::resources::fits_in_memory((len as u128).saturating_mul(per_instance)) {
            return Err(Error::OutOfMemory {
                what,
                count: len.to_string(),
                bytes: (len as u128).saturating_mul(per_instance),
                where_: "host",
            });
        }
        let filled = |w: &str| format!("{what} ({w})");
        let mut free = Vec::with_capacity(template.free_bodies().len());
        for _ in template.free_bodies() {
            free.push(FreeBodyColumns {
                mass: try_filled(1.0, len, &filled("mass"))?,
                com: try_filled([0.0; 3], len, &filled("com"))?,
                inertia: try_filled([1.0, 1.0, 1.0, 0.0, 0.0, 0.0], len, &filled("inertia"))?,
                applied_force: try_filled([0.0; 3], len, &filled("applied_force"))?,
                applied_torque: try_filled([0.0; 3], len, &filled("applied_torque"))?,
                q: try_filled([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], len, &filled("q"))?,
                u: try_filled([0.0; 6], len, &filled("u"))?,
            });
        }
        let mut prescribed = Vec::with_capacity(template.prescribed_bodies().len());
        for id in template.prescribed_bodies() {
            let body = &template.bodies()[id.index()];
            let motion = match &body.motion {
                None => None,
                Some(law) => Some(motion::law_columns(law.as_ref(), &body.name, len, &filled)?),
            };
            prescribed.push(PrescribedBodyColumns {
                pose: try_filled([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], len, &filled("pose"))?,
                velocity: try_filled([0.0; 6], len, &filled("velocity"))?,
                acceleration: try_filled([0.0; 6], len, &filled("acceleration"))?,
                motion,
            });
        }
        let mut constraints = Vec::with_capacity(template.constraints().len());
        for (index, slot) in template.constraints().iter().enumerate() {
            let specs = slot.constraint.params();
            let owner = format!("constraint {index} ({})", slot.constraint.kind_name());
            let (params, widths) = default_columns(&specs, &owner, len, &filled)?;
            let t = slot.baumgarte.unwrap_or_default().time_constant;
            constraints.push(ConstraintColumns {
                enabled: try_filled(1, len, &filled("enabled"))?,
                baumgarte_time_constant: try_filled(t, len, &filled("baumgarte_time_constant"))?,
                specs,
                params,
                widths,
            });
        }
        let base = 2 + 7 * free.len() + 3 * prescribed.len();
        let mut constraint_column_base = Vec::with_capacity(constraints.len());
        let mut n_columns = base;
        for c in &constraints {
            constraint_column_base.push(n_columns);
            n_columns += 2 + c.params.len();
        }
        let mut motion_column_base = Vec::with_capacity(prescribed.len());
        for p in &prescribed {
            motion_column_base.push(n_columns);
            n_columns += p.motion.as_ref().map_or(0, |m| m.params.len());
        }
        let work_index = n_columns;
        n_columns += 1;
        let mut batch = Self {
            uid: new_uid(),
            versions: vec![1; n_columns],
            next_version: 2,
            constraint_column_base,
            template,
            len,
            gravity: try_filled([0.0, 0.0, -9.81], len, &filled("gravity"))?,
            time: try_filled(0.0, len, &filled("time"))?,
            status: try_filled(status::OK, len, &filled("status"))?,
            free,
            prescribed,
            constraints,
            motion_column_base,
            work: try_filled([0.0; 2], len, &filled("work"))?,
            work_index,
        };
        batch.refresh_motion_all();
        Ok(batch)
    }

    /// Host bytes one instance of `template` takes in a batch's columns (what a batch of N
    /// instances needs is N times this, before any evaluation output).
    pub fn bytes_per_instance(template: &SystemTemplate) -> usize {
        let free = template.free_bodies().len() * 8 * (1 + 3 + 6 + 3 + 3 + 7 + 6);
        let prescribed: usize = template
            .prescribed_bodies()
            .iter()
            .map(|b| {
                let law = template.bodies()[b.index()].motion.as_ref();
                8 * (7 + 6 + 6)
                    + law.map_or(0, |l| {
                        l.params()
                            .iter()
                            .map(|p| 8 * p.default.len())
                            .sum::<usize>()
                    })
            })
            .sum();
        let constraints: usize = template
            .constraints()
            .iter()
            .map(|c| {
                4 + 8
                    + c.constraint
                        .params()
                        .iter()
                        .map(|p| 8 * p.default.len())
                        .sum::<usize>()
            })
            .sum();
        8 * 3 + 8 + 4 + 16 + free + prescribed + constraints
    }

    /// Identity of this batch, unique within the process (clones get a new one). Backends that
    /// keep copies of columns use it with [`column_version`](Self::column_version).
    pub fn uid(&self) -> u64 {
        self.uid
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
            let ok = self.instance_state_finite(i);
            self.status[i] = if ok {
                status::OK
            } else {
                status::NONFINITE_STATE
            };
            flagged += usize::from(!ok);
        }
        flagged
    }

    /// As [`refresh_status`](Self::refresh_status) for one instance, e.g. after resetting it:
    /// returns whether it is now clear of flags. The other instances are not looked at.
    pub fn refresh_status_of(&mut self, instance: usize) -> Result<bool> {
        self.check_instance(instance)?;
        let ok = self.instance_state_finite(instance);
        self.status[instance] = if ok {
            status::OK
        } else {
            status::NONFINITE_STATE
        };
        Ok(ok)
    }

    /// Whether instance `i`'s time, gravity, free-body state and prescribed motion are finite
    /// with non-zero quaternions.
    fn instance_state_finite(&self, i: usize) -> bool {
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
        ok
    }

    /// Checks the mass-matrix conditioning of free body `body` (slot `slot`) over `instances`,
    /// naming the first instance out of range.
    fn check_conditioning(
        &self,
        body: BodyId,
        slot: usize,
        instances: std::ops::Range<usize>,
    ) -> Result<()> {
        let cols = &self.free[slot];
        for i in instances {
            if let Err((kappa, accepted)) = well_conditioned(cols.mass[i], &cols.inertia[i]) {
                return Err(invalid(
                    format!("body[{}].inertia", body.index()),
                    i,
                    format!(
                        "{:?} with mass {:?} (mass-matrix condition {kappa:.3e})",
                        cols.inertia[i], cols.mass[i]
                    ),
                    &accepted,
                ));
            }
        }
        Ok(())
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
                index: body.index(),
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
                index: body.index(),
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
        let inertia = valid_inertia(inertia)
            .map_err(|a| invalid(field("inertia"), instance, format!("{inertia:?}"), a))?;
        well_conditioned(mass, &inertia).map_err(|(kappa, a)| {
            invalid(
                field("inertia"),
                instance,
                format!("{inertia:?} with mass {mass:?} (mass-matrix condition {kappa:.3e})"),
                &a,
            )
        })?;
        let cols = &mut self.free[slot];
        cols.mass[instance] = mass;
        cols.com[instance] = com;
        cols.inertia[instance] = inertia;
        for field in [FreeField::Mass, FreeField::Com, FreeField::Inertia] {
            self.touch(Column::Free { slot, field });
        }
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
        self.touch(Column::Enabled(c.0));
        Ok(())
    }

    /// Enables or disables a constraint for every instance at once.
    pub fn set_enabled_column(&mut self, c: ConstraintId, enabled: &[bool]) -> Result<()> {
        self.constraint_columns(c)?;
        self.check_len(format!("constraint[{}].enabled", c.0), enabled.len())?;
        self.constraints[c.0].enabled = enabled.iter().map(|e| u32::from(*e)).collect();
        self.touch(Column::Enabled(c.0));
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
        self.touch(Column::Baumgarte(c.0));
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
        let w = cols.widths[k];
        let field = format!("constraint[{}].{name}", c.0);
        let v = checked_param(&cols.specs[k], w, field, instance, value)?;
        self.constraints[c.0].params[k][instance * w..(instance + 1) * w].copy_from_slice(&v);
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
        self.constraints[c.0].params[k] = column;
        self.touch(Column::Param(c.0, k));
        Ok(())
    }

    /// Index of a column in the change-tracking table (`None` when the column does not exist).
    fn column_index(&self, column: Column) -> Option<usize> {
        let nf = self.free.len();
        match column {
            Column::Gravity => Some(0),
            Column::Work => Some(self.work_index),
            Column::Time => Some(1),
            Column::Free { slot, field } => (slot < nf).then(|| 2 + 7 * slot + field as usize),
            Column::Prescribed { slot, field } => {
                (slot < self.prescribed.len()).then(|| 2 + 7 * nf + 3 * slot + field as usize)
            }
            Column::Enabled(c) => self.constraint_column_base.get(c).copied(),
            Column::Baumgarte(c) => self.constraint_column_base.get(c).map(|b| b + 1),
            Column::Param(c, k) => {
                let n = self.constraints.get(c)?.params.len();
                (k < n).then(|| self.constraint_column_base[c] + 2 + k)
            }
            Column::Motion { slot, param } => {
                let n = self.prescribed.get(slot)?.motion.as_ref()?.params.len();
                (param < n).then(|| self.motion_column_base[slot] + param)
            }
        }
    }

    fn touch(&mut self, column: Column) {
        if let Some(k) = self.column_index(column) {
            self.versions[k] = self.next_version;
            self.next_version += 1;
        }
    }

    /// Change counter of a column: it grows every time the column is written, so a consumer
    /// that remembers the version it copied (the GPU backend) re-uploads only changed columns.
    /// `None` when the column does not exist in this batch.
    pub fn column_version(&self, column: Column) -> Option<u64> {
        self.column_index(column).map(|k| self.versions[k])
    }

    /// A column's values, flat, with its width; `None` when the column does not exist.
    pub fn column_data(&self, column: Column) -> Option<(ColumnData<'_>, usize)> {
        use bytemuck::cast_slice;
        Some(match column {
            Column::Gravity => (ColumnData::F64(cast_slice(&self.gravity)), 3),
            Column::Time => (ColumnData::F64(&self.time), 1),
            Column::Work => (ColumnData::F64(cast_slice(&self.work)), 2),
            Column::Free { slot, field } => {
                let c = self.free.get(slot)?;
                let data: &[f64] = match field {
                    FreeField::Mass => &c.mass,
                    FreeField::Com => cast_slice(&c.com),
                    FreeField::Inertia => cast_slice(&c.inertia),
                    FreeField::AppliedForce => cast_slice(&c.applied_force),
                    FreeField::AppliedTorque => cast_slice(&c.applied_torque),
                    FreeField::Q => cast_slice(&c.q),
                    FreeField::U => cast_slice(&c.u),
                };
                (ColumnData::F64(data), field.width())
            }
            Column::Prescribed { slot, field } => {
                let c = self.prescribed.get(slot)?;
                let data: &[f64] = match field {
                    PrescribedField::Pose => cast_slice(&c.pose),
                    PrescribedField::Velocity => cast_slice(&c.velocity),
                    PrescribedField::Acceleration => cast_slice(&c.acceleration),
                };
                (ColumnData::F64(data), field.width())
            }
            Column::Enabled(c) => (ColumnData::U32(&self.constraints.get(c)?.enabled), 1),
            Column::Baumgarte(c) => (
                ColumnData::F64(&self.constraints.get(c)?.baumgarte_time_constant),
                1,
            ),
            Column::Param(c, k) => {
                let cols = self.constraints.get(c)?;
                (ColumnData::F64(cols.params.get(k)?), cols.widths[k])
            }
            Column::Motion { slot, param } => {
                let cols = self.prescribed.get(slot)?.motion.as_ref()?;
                (ColumnData::F64(cols.params.get(param)?), cols.widths[param])
            }
        })
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

    /// Writes integrated states back (q, u, prescribed poses and velocities, time) and ORs each
    /// instance's `flags` (see [`status`]) into its status; a failed instance is given its last
    /// good state.
    pub(crate) fn store_states(&mut self, states: &[(InstanceState, u32)]) {
        for (i, (state, flags)) in states.iter().enumerate() {
            self.time[i] = state.time;
            self.work[i] = state.work;
            for (cols, (q, u)) in self.free.iter_mut().zip(state.q.iter().zip(&state.u)) {
                cols.q[i] = *q;
                cols.u[i] = *u;
            }
            for (cols, (p, v)) in self
                .prescribed
                .iter_mut()
                .zip(state.pose.iter().zip(&state.velocity))
            {
                cols.pose[i] = *p;
                cols.velocity[i] = *v;
            }
            self.status[i] |= *flags;
            // Driven bodies: the law at the new time, in f64 whichever backend stepped.
            self.refresh_motion_of(i);
        }
        self.touch(Column::Time);
        self.touch(Column::Work);
        for slot in 0..self.free.len() {
            self.touch(Column::Free {
                slot,
                field: FreeField::Q,
            });
            self.touch(Column::Free {
                slot,
                field: FreeField::U,
            });
        }
        for slot in 0..self.prescribed.len() {
            self.touch(Column::Prescribed {
                slot,
                field: PrescribedField::Pose,
            });
            self.touch(Column::Prescribed {
                slot,
                field: PrescribedField::Velocity,
            });
            if self.prescribed[slot].motion.is_some() {
                self.touch(Column::Prescribed {
                    slot,
                    field: PrescribedField::Acceleration,
                });
            }
        }
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
