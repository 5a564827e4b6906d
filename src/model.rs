//! What a system is: a template of bodies and constraints, instantiated N times by a
//! [`Batch`](crate::batch::Batch).
//!
//! Body 0 of every template is Ground. Free bodies own 6 mobilities each, stacked in the order
//! they were added (`physics.md` §1, column order); prescribed bodies move as the user drives them
//! and own no columns.

use std::sync::Arc;

use crate::constraints::Constraint;
use crate::error::{Error, Result};

/// Handle of a body in a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyId(pub usize);

/// Ground, body 0 of every template.
pub const GROUND: BodyId = BodyId(0);

/// Handle of a constraint in a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConstraintId(pub usize);

/// How a body moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// The inertial frame; never moves.
    Ground,
    /// Six degrees of freedom: q = (quaternion of R_GB, p_GBo), u = (w_GB, v_GBo) in Ground.
    Free,
    /// Pose, velocity and acceleration given per instance (a turntable, a tilting plate).
    Prescribed,
}

/// A body of a template.
#[derive(Debug, Clone)]
pub struct Body {
    /// User-chosen name, used in error messages.
    pub name: String,
    /// How it moves.
    pub kind: BodyKind,
    /// Index among the bodies of the same kind (free bodies: the block of u it owns).
    pub slot: usize,
}

/// Baumgarte stabilisation of a constraint's rows (RBDL, `physics.md` §4): `b ← b − 2α ė − β² e`
/// with `α = β = 1/T`. The time constant `T` is a per-instance column of the batch; this holds its
/// default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baumgarte {
    /// Default time constant `T > 0` for new instances, in seconds.
    pub time_constant: f64,
}

impl Default for Baumgarte {
    fn default() -> Self {
        Self { time_constant: 0.1 }
    }
}

/// A constraint placed in a template.
#[derive(Debug, Clone)]
pub struct ConstraintSlot {
    /// The constraint's formulas and parameter layout.
    pub constraint: Arc<dyn Constraint>,
    /// Baumgarte stabilisation, if enabled for this constraint.
    pub baumgarte: Option<Baumgarte>,
}

/// Bodies and constraints, instantiated N times by a batch.
#[derive(Debug, Clone)]
pub struct SystemTemplate {
    bodies: Vec<Body>,
    constraints: Vec<ConstraintSlot>,
    free_bodies: Vec<BodyId>,
    prescribed_bodies: Vec<BodyId>,
}

impl Default for SystemTemplate {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemTemplate {
    /// An empty template holding Ground only.
    pub fn new() -> Self {
        Self {
            bodies: vec![Body {
                name: "ground".into(),
                kind: BodyKind::Ground,
                slot: 0,
            }],
            constraints: Vec::new(),
            free_bodies: Vec::new(),
            prescribed_bodies: Vec::new(),
        }
    }

    /// Adds a free (6-dof) body.
    pub fn add_free_body(&mut self, name: impl Into<String>) -> BodyId {
        let id = BodyId(self.bodies.len());
        self.bodies.push(Body {
            name: name.into(),
            kind: BodyKind::Free,
            slot: self.free_bodies.len(),
        });
        self.free_bodies.push(id);
        id
    }

    /// Adds a prescribed body, whose pose, velocity and acceleration are per-instance inputs.
    pub fn add_prescribed_body(&mut self, name: impl Into<String>) -> BodyId {
        let id = BodyId(self.bodies.len());
        self.bodies.push(Body {
            name: name.into(),
            kind: BodyKind::Prescribed,
            slot: self.prescribed_bodies.len(),
        });
        self.prescribed_bodies.push(id);
        id
    }

    /// Adds a constraint. Its bodies must exist and be distinct, and at least one must be free
    /// (a constraint between bodies that cannot move has no rows to solve for).
    pub fn add_constraint(
        &mut self,
        constraint: impl Constraint + 'static,
    ) -> Result<ConstraintId> {
        self.add_constraint_arc(Arc::new(constraint))
    }

    /// As [`add_constraint`](Self::add_constraint), for a shared constraint object.
    pub fn add_constraint_arc(&mut self, constraint: Arc<dyn Constraint>) -> Result<ConstraintId> {
        let index = self.constraints.len();
        let bodies = constraint.bodies();
        if bodies.is_empty() || bodies.len() > 2 {
            return Err(Error::Template(format!(
                "constraint {index} ({}) must act on 1 or 2 bodies, got {}",
                constraint.kind_name(),
                bodies.len()
            )));
        }
        for b in bodies {
            if b.0 >= self.bodies.len() {
                return Err(Error::Template(format!(
                    "constraint {index} ({}) names body {} but the template has {} bodies",
                    constraint.kind_name(),
                    b.0,
                    self.bodies.len()
                )));
            }
        }
        if bodies.len() == 2 && bodies[0] == bodies[1] {
            return Err(Error::Template(format!(
                "constraint {index} ({}) connects body {} to itself",
                constraint.kind_name(),
                bodies[0].0
            )));
        }
        if !bodies
            .iter()
            .any(|b| self.bodies[b.0].kind == BodyKind::Free)
        {
            return Err(Error::Template(format!(
                "constraint {index} ({}) acts only on Ground or prescribed bodies; at least one \
                 of its bodies must be free",
                constraint.kind_name()
            )));
        }
        let rows = constraint.row_levels().len();
        if rows == 0 || rows > crate::constraints::MAX_ROWS {
            return Err(Error::Template(format!(
                "constraint {index} ({}) declares {rows} rows; accepted 1..={}",
                constraint.kind_name(),
                crate::constraints::MAX_ROWS
            )));
        }
        for (what, n) in [
            ("position", constraint.assembly_position_rows()),
            ("velocity", constraint.assembly_velocity_rows()),
        ] {
            if n > crate::constraints::MAX_ROWS {
                return Err(Error::Template(format!(
                    "constraint {index} ({}) declares {n} {what} assembly rows; accepted 0..={}",
                    constraint.kind_name(),
                    crate::constraints::MAX_ROWS
                )));
            }
        }
        for slot in constraint.report_slots().iter().flatten() {
            if *slot >= rows {
                return Err(Error::Template(format!(
                    "constraint {index} ({}) reports row {slot} but has only {rows} rows",
                    constraint.kind_name()
                )));
            }
        }
        self.constraints.push(ConstraintSlot {
            constraint,
            baumgarte: None,
        });
        Ok(ConstraintId(index))
    }

    /// Enables Baumgarte stabilisation on a constraint (`None` disables it). The time constant
    /// given becomes the default of the per-instance column; it must be finite and positive.
    pub fn set_baumgarte(&mut self, c: ConstraintId, baumgarte: Option<Baumgarte>) -> Result<()> {
        let n = self.constraints.len();
        let slot = self
            .constraints
            .get_mut(c.0)
            .ok_or_else(|| Error::BadHandle {
                what: "constraint",
                index: c.0,
                reason: format!("the template has {n} constraints"),
            })?;
        if let Some(b) = baumgarte
            && !(b.time_constant.is_finite() && b.time_constant > 0.0)
        {
            return Err(Error::Template(format!(
                "constraint {}: Baumgarte time constant {} not accepted; accepted: finite, > 0",
                c.0, b.time_constant
            )));
        }
        slot.baumgarte = baumgarte;
        Ok(())
    }

    /// All bodies, Ground first.
    pub fn bodies(&self) -> &[Body] {
        &self.bodies
    }

    /// One body.
    pub fn body(&self, id: BodyId) -> Result<&Body> {
        self.bodies.get(id.0).ok_or_else(|| Error::BadHandle {
            what: "body",
            index: id.0,
            reason: format!("the template has {} bodies", self.bodies.len()),
        })
    }

    /// Free bodies in column order.
    pub fn free_bodies(&self) -> &[BodyId] {
        &self.free_bodies
    }

    /// Prescribed bodies in slot order.
    pub fn prescribed_bodies(&self) -> &[BodyId] {
        &self.prescribed_bodies
    }

    /// All constraints.
    pub fn constraints(&self) -> &[ConstraintSlot] {
        &self.constraints
    }

    /// One constraint.
    pub fn constraint(&self, id: ConstraintId) -> Result<&ConstraintSlot> {
        self.constraints.get(id.0).ok_or_else(|| Error::BadHandle {
            what: "constraint",
            index: id.0,
            reason: format!("the template has {} constraints", self.constraints.len()),
        })
    }

    /// Number of mobilities per instance (6 per free body).
    pub fn nu(&self) -> usize {
        6 * self.free_bodies.len()
    }

    /// Number of generalized coordinates per instance (7 per free body).
    pub fn nq(&self) -> usize {
        7 * self.free_bodies.len()
    }

    /// Largest number of constraint rows per instance (all constraints enabled).
    pub fn max_rows(&self) -> usize {
        self.constraints
            .iter()
            .map(|c| c.constraint.row_levels().len())
            .sum()
    }
}
