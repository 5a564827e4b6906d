//! The batch's columns: what they are named ([`Column`]), their per-body and per-constraint
//! groups, and their change tracking (a version per column, which the GPU upload reads).

use super::Batch;
use crate::error::Result;
use crate::model::Broadcast;
use crate::model::{BodyId, ConstraintId, ParamSpec};

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

/// What [`Batch::column_data`] returns: a column's stored values and how to read them.
#[derive(Debug, Clone, Copy)]
pub struct ColumnView<'a> {
    /// The stored values: one row when `shared`, `len · width` values otherwise.
    pub data: ColumnData<'a>,
    /// Values per instance.
    pub width: usize,
    /// Whether every instance shares the one stored row.
    pub shared: bool,
}

/// Per-instance columns of one free body. The parameters are [`Broadcast`] columns (stored
/// once while every instance shares them); the state `q`, `u` is per instance.
#[derive(Debug, Clone, PartialEq)]
pub struct FreeBodyColumns {
    /// Mass `m > 0`.
    pub mass: Broadcast<f64>,
    /// COM offset `c` in the body frame.
    pub com: Broadcast<[f64; 3]>,
    /// Inertia about the COM in the body frame, `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]`.
    pub inertia: Broadcast<[f64; 6]>,
    /// Applied force through the COM, in Ground.
    pub applied_force: Broadcast<[f64; 3]>,
    /// Applied torque, in Ground.
    pub applied_torque: Broadcast<[f64; 3]>,
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
    /// Parameter columns (`width` values per instance; [`Broadcast`]: stored once while every
    /// instance shares a value).
    pub params: Vec<Broadcast<f64>>,
    /// Width of each parameter column.
    pub widths: Vec<usize>,
}

/// Per-instance columns of one constraint ([`Broadcast`]: stored once while every instance
/// shares a value).
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintColumns {
    /// 1 when the constraint is enabled for the instance, 0 when its rows are dropped.
    pub enabled: Broadcast<u32>,
    /// Baumgarte time constant `T` (used when the template enables Baumgarte on it).
    pub baumgarte_time_constant: Broadcast<f64>,
    /// Parameter specs, in the constraint's order.
    pub specs: Vec<ParamSpec>,
    /// Parameter columns (`width` values per instance), in the constraint's order.
    pub params: Vec<Broadcast<f64>>,
    /// Width of each parameter column.
    pub widths: Vec<usize>,
}

impl Batch {
    /// Index of a column in the change-tracking table (`None` when the column does not exist).
    pub(super) fn column_index(&self, column: Column) -> Option<usize> {
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

    pub(super) fn touch(&mut self, column: Column) {
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

    /// A column's stored values, flat, with its width and whether it is shared; `None` when
    /// the column does not exist. A shared ([`Broadcast`]) column stores one row (`width`
    /// values) for every instance; any other stores `len · width` values.
    pub fn column_data(&self, column: Column) -> Option<ColumnView<'_>> {
        use bytemuck::cast_slice;
        fn view<'c, T: bytemuck::Pod>(
            c: &'c Broadcast<T>,
            data: impl Fn(&'c [T]) -> ColumnData<'c>,
            width: usize,
        ) -> ColumnView<'c> {
            ColumnView {
                data: data(c.stored()),
                width,
                shared: c.is_shared(),
            }
        }
        let per_instance = |data, width| ColumnView {
            data,
            width,
            shared: false,
        };
        Some(match column {
            Column::Gravity => view(&self.gravity, |v| ColumnData::F64(cast_slice(v)), 3),
            Column::Time => per_instance(ColumnData::F64(&self.time), 1),
            Column::Work => per_instance(ColumnData::F64(cast_slice(&self.work)), 2),
            Column::Free { slot, field } => {
                let c = self.free.get(slot)?;
                let w = field.width();
                match field {
                    FreeField::Mass => view(&c.mass, ColumnData::F64, w),
                    FreeField::Com => view(&c.com, |v| ColumnData::F64(cast_slice(v)), w),
                    FreeField::Inertia => view(&c.inertia, |v| ColumnData::F64(cast_slice(v)), w),
                    FreeField::AppliedForce => {
                        view(&c.applied_force, |v| ColumnData::F64(cast_slice(v)), w)
                    }
                    FreeField::AppliedTorque => {
                        view(&c.applied_torque, |v| ColumnData::F64(cast_slice(v)), w)
                    }
                    FreeField::Q => per_instance(ColumnData::F64(cast_slice(&c.q)), w),
                    FreeField::U => per_instance(ColumnData::F64(cast_slice(&c.u)), w),
                }
            }
            Column::Prescribed { slot, field } => {
                let c = self.prescribed.get(slot)?;
                let data: &[f64] = match field {
                    PrescribedField::Pose => cast_slice(&c.pose),
                    PrescribedField::Velocity => cast_slice(&c.velocity),
                    PrescribedField::Acceleration => cast_slice(&c.acceleration),
                };
                per_instance(ColumnData::F64(data), field.width())
            }
            Column::Enabled(c) => view(&self.constraints.get(c)?.enabled, ColumnData::U32, 1),
            Column::Baumgarte(c) => view(
                &self.constraints.get(c)?.baumgarte_time_constant,
                ColumnData::F64,
                1,
            ),
            Column::Param(c, k) => {
                let cols = self.constraints.get(c)?;
                view(cols.params.get(k)?, ColumnData::F64, cols.widths[k])
            }
            Column::Motion { slot, param } => {
                let cols = self.prescribed.get(slot)?.motion.as_ref()?;
                view(cols.params.get(param)?, ColumnData::F64, cols.widths[param])
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
}
