//! What a system is: a template of bodies and constraints, instantiated N times by a batch.
//!
//! The lowest room of the crate: it names only `math` and `error`. The interfaces a template
//! holds — [`Constraint`] and [`MotionLaw`] — are defined here ([`constraint`], [`motion`]); the
//! kinds that implement them (the `constraints` and `motion` rooms, user code) depend on the
//! model, never the reverse.
//!
//! Body 0 of every template is Ground. Free bodies own 6 mobilities each, stacked in the order
//! they were added (`physics.md` §1, column order); prescribed bodies move as the user drives them
//! and own no columns.

mod broadcast;
pub mod constraint;
pub mod motion;

use std::sync::Arc;

use crate::error::{Error, Result};

pub(crate) use broadcast::InstanceColumn;
pub use broadcast::{Broadcast, What};
pub use constraint::{
    BodyKinematics, BodyLanes, Check, Constraint, ContactReport, Decoration, MAX_GPU_ROWS,
    MAX_ROWS, PREPARED_LANES, ParamLanes, ParamSpec, Params, PreparedLanes, ReportLanes,
    ReportedExtras, Row, RowLanes, RowLevel, WgslConstraint, negated_point_row_lanes,
    point_row_lanes,
};
pub use motion::{MOTION_PARAMS_CAP, MotionLaw, WgslMotion};

/// Handle of a body in a template.
///
/// A handle returned by a template ([`SystemTemplate::add_free_body`] …) remembers the body it
/// names (its name and kind), and using it with a template whose body at that index is another
/// one is an error ([`Error::BadHandle`]) rather than a silent reference to whatever body has
/// that index there. A template built again by the same code accepts the handles of the first
/// build. [`BodyId::new`] makes an untagged handle by index (accepted by every template), and
/// [`GROUND`] is valid everywhere. Two handles are equal when they name the same index.
#[derive(Debug, Clone, Copy)]
pub struct BodyId {
    index: usize,
    /// Fingerprint of the body it was made for ([`body_key`]; 0: untagged).
    key: u64,
}

impl BodyId {
    /// An untagged handle of body `index` (0 is Ground), accepted by any template that has it.
    pub const fn new(index: usize) -> Self {
        Self { index, key: 0 }
    }

    /// The body's index in its template (0: Ground).
    pub const fn index(self) -> usize {
        self.index
    }

    /// Whether this handle may name the template's body at its index, whose key is `key`.
    pub(crate) fn fits(self, key: u64) -> bool {
        self.key == 0 || self.key == key
    }
}

impl PartialEq for BodyId {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}

impl Eq for BodyId {}

impl std::hash::Hash for BodyId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.index.hash(state);
    }
}

impl PartialOrd for BodyId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BodyId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.index.cmp(&other.index)
    }
}

/// Ground, body 0 of every template.
pub const GROUND: BodyId = BodyId::new(0);

/// Fingerprint of a body (FNV-1a of its kind and name; never 0), carried by its handles.
fn body_key(body: &Body) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let kind = match body.kind {
        BodyKind::Ground => 0u8,
        BodyKind::Free => 1,
        BodyKind::Prescribed => 2,
    };
    for b in std::iter::once(kind).chain(body.name.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

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
    /// A prescribed body's law of time (`None`: its pose, velocity and acceleration are
    /// per-instance inputs, the acceleration held constant over a stepping call).
    pub motion: Option<Arc<dyn MotionLaw>>,
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
    /// `body_key` of each body, computed once: a handle is checked against it on every lookup,
    /// which environments make for every instance on every step.
    body_keys: Vec<u64>,
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
        let ground = Body {
            name: "ground".into(),
            kind: BodyKind::Ground,
            slot: 0,
            motion: None,
        };
        Self {
            body_keys: vec![body_key(&ground)],
            bodies: vec![ground],
            constraints: Vec::new(),
            free_bodies: Vec::new(),
            prescribed_bodies: Vec::new(),
        }
    }

    /// Adds a free (6-dof) body.
    pub fn add_free_body(&mut self, name: impl Into<String>) -> BodyId {
        let body = Body {
            name: name.into(),
            kind: BodyKind::Free,
            slot: self.free_bodies.len(),
            motion: None,
        };
        let id = BodyId {
            index: self.bodies.len(),
            key: body_key(&body),
        };
        self.bodies.push(body);
        self.body_keys.push(id.key);
        self.free_bodies.push(id);
        id
    }

    /// Adds a prescribed body whose pose, velocity and acceleration are per-instance inputs
    /// (the *constant* law: a stepping call holds the acceleration and integrates pose and
    /// velocity from it — exact for constant-acceleration motion such as a steady turntable).
    pub fn add_prescribed_body(&mut self, name: impl Into<String>) -> BodyId {
        self.push_prescribed(name.into(), None)
    }

    /// Adds a prescribed body that follows a law of time (see the `motion` room), evaluated at every
    /// stage time of the integrators; its parameters are per-instance columns of the batch
    /// (`Batch::set_motion_param`).
    pub fn add_driven_body(
        &mut self,
        name: impl Into<String>,
        law: impl MotionLaw + 'static,
    ) -> BodyId {
        self.push_prescribed(name.into(), Some(Arc::new(law)))
    }

    /// As [`add_driven_body`](Self::add_driven_body), for a shared law object.
    pub fn add_driven_body_arc(
        &mut self,
        name: impl Into<String>,
        law: Arc<dyn MotionLaw>,
    ) -> BodyId {
        self.push_prescribed(name.into(), Some(law))
    }

    fn push_prescribed(&mut self, name: String, motion: Option<Arc<dyn MotionLaw>>) -> BodyId {
        let body = Body {
            name,
            kind: BodyKind::Prescribed,
            slot: self.prescribed_bodies.len(),
            motion,
        };
        let id = BodyId {
            index: self.bodies.len(),
            key: body_key(&body),
        };
        self.bodies.push(body);
        self.body_keys.push(id.key);
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
            if b.index >= self.bodies.len() {
                return Err(Error::Template(format!(
                    "constraint {index} ({}) names body {} but the template has {} bodies",
                    constraint.kind_name(),
                    b.index,
                    self.bodies.len()
                )));
            }
            if !b.fits(self.body_keys[b.index]) {
                return Err(Error::Template(format!(
                    "constraint {index} ({}) names body {} with a handle made by another \
                     template",
                    constraint.kind_name(),
                    b.index
                )));
            }
        }
        if bodies.len() == 2 && bodies[0] == bodies[1] {
            return Err(Error::Template(format!(
                "constraint {index} ({}) connects body {} to itself",
                constraint.kind_name(),
                bodies[0].index()
            )));
        }
        if !bodies
            .iter()
            .any(|b| self.bodies[b.index()].kind == BodyKind::Free)
        {
            return Err(Error::Template(format!(
                "constraint {index} ({}) acts only on Ground or prescribed bodies; at least one \
                 of its bodies must be free",
                constraint.kind_name()
            )));
        }
        let rows = constraint.row_levels().len();
        if rows == 0 || rows > MAX_ROWS {
            return Err(Error::Template(format!(
                "constraint {index} ({}) declares {rows} rows; accepted 1..={}",
                constraint.kind_name(),
                MAX_ROWS
            )));
        }
        for (what, n) in [
            ("position", constraint.assembly_position_rows()),
            ("velocity", constraint.assembly_velocity_rows()),
        ] {
            if n > MAX_ROWS {
                return Err(Error::Template(format!(
                    "constraint {index} ({}) declares {n} {what} assembly rows; accepted 0..={}",
                    constraint.kind_name(),
                    MAX_ROWS
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
        let body = self.bodies.get(id.index).ok_or_else(|| Error::BadHandle {
            what: "body",
            index: id.index,
            reason: format!("the template has {} bodies", self.bodies.len()),
        })?;
        if !id.fits(self.body_keys[id.index]) {
            return Err(Error::BadHandle {
                what: "body",
                index: id.index,
                reason: format!(
                    "the handle was made by another template for another body; this \
                     template's body {} is {:?} ({:?}) (use the handles this template's \
                     add_*_body returned, or BodyId::new(index))",
                    id.index, body.name, body.kind
                ),
            });
        }
        Ok(body)
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
