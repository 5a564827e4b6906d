//! Batch storage: N instances of one template as structure-of-arrays columns.
//!
//! Every column is a `Vec` of `bytemuck::Pod` values (`f64`, `[f64; K]`, `u32`), one entry per
//! instance, so a column can be viewed as bytes and uploaded to a GPU buffer as it is
//! (`bytemuck::cast_slice`). Columns are grouped per body and per constraint. Every setter
//! validates what it writes and returns an [`Error`] naming the field, the instance and the
//! accepted range; a bulk setter validates the whole column before writing any of it.

mod access;
mod checks;
mod columns;
mod motion;
mod state;
pub mod status;

pub use crate::model::Broadcast;
pub use checks::MAX_MASS_CONDITION;
pub use columns::{
    Column, ColumnData, ColumnView, ConstraintColumns, FreeBodyColumns, FreeField, MotionColumns,
    PrescribedBodyColumns, PrescribedField,
};
pub use state::InstanceState;
pub(crate) use state::{StateLayout, StateRows, split_at_bounds};

pub(crate) use checks::{checked_param, default_columns};
use checks::{invalid, well_conditioned};

use std::sync::Arc;

use crate::error::{Error, Result, try_filled};
use crate::model::{BodyId, BodyKind, ConstraintId, SystemTemplate};

/// N instances of a [`SystemTemplate`] with their parameters and state.
///
/// Cloning gives an independent batch with a new [`uid`](Batch::uid).
#[derive(Debug)]
pub struct Batch {
    uid: u64,
    template: Arc<SystemTemplate>,
    len: usize,
    gravity: Broadcast<[f64; 3]>,
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
                mass: Broadcast::shared(len, &[1.0]),
                com: Broadcast::shared(len, &[[0.0; 3]]),
                inertia: Broadcast::shared(len, &[[1.0, 1.0, 1.0, 0.0, 0.0, 0.0]]),
                applied_force: Broadcast::shared(len, &[[0.0; 3]]),
                applied_torque: Broadcast::shared(len, &[[0.0; 3]]),
                q: try_filled([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], len, &filled("q"))?,
                u: try_filled([0.0; 6], len, &filled("u"))?,
            });
        }
        let mut prescribed = Vec::with_capacity(template.prescribed_bodies().len());
        for id in template.prescribed_bodies() {
            let body = &template.bodies()[id.index()];
            let motion = match &body.motion {
                None => None,
                Some(law) => Some(motion::law_columns(law.as_ref(), &body.name, len)?),
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
            let (params, widths) = default_columns(&specs, &owner, len)?;
            let t = slot.baumgarte.unwrap_or_default().time_constant;
            constraints.push(ConstraintColumns {
                enabled: Broadcast::shared(len, &[1]),
                baumgarte_time_constant: Broadcast::shared(len, &[t]),
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
            gravity: Broadcast::shared(len, &[[0.0, 0.0, -9.81]]),
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

    /// Stores once every broadcast column (gravity, mass properties, applied loads, enabled
    /// flags, Baumgarte time constants, constraint and motion-law parameters) whose instances all hold the same value, bit for bit —
    /// as after writing one value to every instance one at a time. Values do not change, so
    /// no column version changes either. Returns how many columns became shared. Stepping
    /// calls this at the start of every call; builders that fill instances one by one call
    /// it when done.
    pub fn share_uniform_columns(&mut self) -> usize {
        fn share<T: bytemuck::Pod>(c: &mut Broadcast<T>) -> usize {
            usize::from(!c.is_shared() && c.share_if_uniform())
        }
        let mut count = share(&mut self.gravity);
        for c in &mut self.free {
            count += share(&mut c.mass)
                + share(&mut c.com)
                + share(&mut c.inertia)
                + share(&mut c.applied_force)
                + share(&mut c.applied_torque);
        }
        for c in &mut self.constraints {
            count += share(&mut c.enabled) + share(&mut c.baumgarte_time_constant);
            count += c.params.iter_mut().map(share).sum::<usize>();
        }
        for m in self.prescribed.iter_mut().filter_map(|p| p.motion.as_mut()) {
            count += m.params.iter_mut().map(share).sum::<usize>();
        }
        count
    }

    /// Host bytes the batch's columns hold now: shared ([`Broadcast`]) columns count once
    /// (with any read-side expansion [`Broadcast::as_slice`] made), per-instance ones N times.
    pub fn bytes(&self) -> usize {
        let f = std::mem::size_of::<f64>();
        let n = self.len;
        let mut total = self.gravity.bytes() + n * (f + 4 + 2 * f);
        for c in &self.free {
            total += c.mass.bytes()
                + c.com.bytes()
                + c.inertia.bytes()
                + c.applied_force.bytes()
                + c.applied_torque.bytes()
                + n * (7 + 6) * f;
        }
        for c in &self.prescribed {
            total += n * (7 + 6 + 6) * f;
            if let Some(m) = &c.motion {
                total += m.params.iter().map(Broadcast::bytes).sum::<usize>();
            }
        }
        for c in &self.constraints {
            total += c.enabled.bytes()
                + c.baumgarte_time_constant.bytes()
                + c.params.iter().map(Broadcast::bytes).sum::<usize>();
        }
        total
    }

    /// Host bytes one instance of `template` takes in a batch's columns when every column is
    /// per-instance: the most a batch of N instances needs is N times this, before any
    /// evaluation output (what a new batch is checked against; shared columns take less, see
    /// [`bytes`](Self::bytes)).
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
        self.touch_state_columns();
    }

    /// Stores instance `i`'s state from flat values `y` laid out as
    /// [`InstanceState::to_vec`], with its time and the status bits to set. Call
    /// [`touch_state_columns`](Self::touch_state_columns) once after the last.
    pub(crate) fn store_values(&mut self, i: usize, time: f64, y: &[f64], flags: u32) {
        self.time[i] = time;
        let l = self.state_layout();
        for (slot, cols) in self.free.iter_mut().enumerate() {
            cols.q[i].copy_from_slice(&y[l.q_at(slot)..][..7]);
            cols.u[i].copy_from_slice(&y[l.u_at(slot)..][..6]);
        }
        for (slot, cols) in self.prescribed.iter_mut().enumerate() {
            cols.pose[i].copy_from_slice(&y[l.pose_at(slot)..][..7]);
            cols.velocity[i].copy_from_slice(&y[l.velocity_at(slot)..][..6]);
        }
        self.work[i].copy_from_slice(&y[l.work_at()..][..2]);
        self.status[i] |= flags;
        self.refresh_motion_of(i);
    }

    /// A state column's values, flat (`width` an instance), for storing read-back states a
    /// column at a time: q and u of a free body, pose and velocity of a prescribed one, the
    /// work; `None` for any other column. Then [`clock_columns_mut`](Self::clock_columns_mut),
    /// and [`touch_state_columns`](Self::touch_state_columns) once at the end.
    pub(crate) fn state_column_mut(&mut self, column: Column) -> Option<&mut [f64]> {
        match column {
            Column::Free { slot, field } => self.free.get_mut(slot).and_then(|c| match field {
                FreeField::Q => Some(c.q.as_flattened_mut()),
                FreeField::U => Some(c.u.as_flattened_mut()),
                _ => None,
            }),
            Column::Prescribed { slot, field } => {
                self.prescribed.get_mut(slot).and_then(|c| match field {
                    PrescribedField::Pose => Some(c.pose.as_flattened_mut()),
                    PrescribedField::Velocity => Some(c.velocity.as_flattened_mut()),
                    _ => None,
                })
            }
            Column::Work => Some(self.work.as_flattened_mut()),
            _ => None,
        }
    }

    /// The time and status columns, for storing read-back clocks and flags a block of instances
    /// at a time (with the state columns, [`state_column_mut`](Self::state_column_mut)); then
    /// [`refresh_driven_span`](Self::refresh_driven_span) for the instances stored so, when
    /// [`has_driven_bodies`](Self::has_driven_bodies).
    pub(crate) fn clock_columns_mut(&mut self) -> (&mut [f64], &mut [u32]) {
        (&mut self.time, &mut self.status)
    }

    /// Whether a prescribed body follows a motion law (its pose and velocity come from the law
    /// at each instance's time).
    pub(crate) fn has_driven_bodies(&self) -> bool {
        self.prescribed.iter().any(|c| c.motion.is_some())
    }

    /// Marks every state column changed (time, work, q, u, poses, velocities and driven
    /// accelerations), for the GPU's upload tracking.
    pub(crate) fn touch_state_columns(&mut self) {
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

    /// Gravity as stored: indexing it per instance never expands a shared value (unlike
    /// [`gravity`](Self::gravity), which gives one entry per instance).
    pub fn gravity_column(&self) -> &Broadcast<[f64; 3]> {
        &self.gravity
    }

    pub(crate) fn free_columns(&self) -> &[FreeBodyColumns] {
        &self.free
    }

    /// Where each part of an instance's flat state lies ([`InstanceState::to_vec`]).
    pub(crate) fn state_layout(&self) -> StateLayout {
        StateLayout {
            free: self.free.len(),
            prescribed: self.prescribed.len(),
        }
    }

    pub(crate) fn prescribed_columns(&self) -> &[PrescribedBodyColumns] {
        &self.prescribed
    }

    pub(crate) fn all_constraint_columns(&self) -> &[ConstraintColumns] {
        &self.constraints
    }
}
