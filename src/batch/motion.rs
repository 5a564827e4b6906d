//! The motion-law columns of driven prescribed bodies (see the `motion` room): parameter accessors,
//! and the pose, velocity and acceleration columns kept equal to the law at each instance's
//! time.

use super::checks::invalid;
use super::{Batch, Column, MotionColumns, PrescribedField, checked_param, default_columns};
use crate::error::{Error, Result};
use crate::model::BodyId;
use crate::model::MotionLaw;
use crate::model::motion::motion_columns;
use crate::model::{BodyKinematics, ParamSpec, Params};
use rayon::prelude::*;

/// Parameter columns of a law for `len` instances, every value at its (checked) default.
pub(super) fn law_columns(law: &dyn MotionLaw, body: &str, len: usize) -> Result<MotionColumns> {
    let specs = law.params();
    let owner = format!("body {body:?} ({} motion)", law.kind_name());
    let (params, widths) = default_columns(&specs, &owner, len)?;
    Ok(MotionColumns {
        specs,
        params,
        widths,
    })
}

impl Batch {
    /// The law of prescribed slot `slot` and its columns, when it has one.
    pub(crate) fn law_of(&self, slot: usize) -> Option<(&dyn MotionLaw, &MotionColumns)> {
        let id = self.template.prescribed_bodies()[slot];
        let law = self.template.bodies()[id.index()].motion.as_deref()?;
        Some((law, self.prescribed[slot].motion.as_ref()?))
    }

    /// The motion of driven prescribed slot `slot` for instance `i` at time `t`; `None` for a
    /// body with the constant law.
    pub(crate) fn law_kinematics(&self, slot: usize, i: usize, t: f64) -> Option<BodyKinematics> {
        let (law, cols) = self.law_of(slot)?;
        Some(law.evaluate(&Params::of(&cols.params, i), t))
    }

    /// The motion of prescribed body `body` of instance `instance` at time `t` from its law
    /// (pose, velocity and acceleration in Ground); an error for a body with the constant law.
    pub fn motion_at(&self, body: BodyId, instance: usize, t: f64) -> Result<BodyKinematics> {
        let slot = self.prescribed_slot(body)?;
        self.check_instance(instance)?;
        self.law_kinematics(slot, instance, t)
            .ok_or_else(|| self.no_law(slot))
    }

    pub(super) fn check_not_driven(&self, slot: usize, field: &str) -> Result<()> {
        match self.law_of(slot) {
            None => Ok(()),
            Some((law, cols)) => Err(Error::DrivenBody {
                body: self.prescribed_name(slot).to_string(),
                law: law.kind_name().to_string(),
                field: field.to_string(),
                accepted: names(cols),
            }),
        }
    }

    fn prescribed_name(&self, slot: usize) -> &str {
        let id = self.template.prescribed_bodies()[slot];
        &self.template.bodies()[id.index()].name
    }

    fn no_law(&self, slot: usize) -> Error {
        Error::BadHandle {
            what: "body",
            index: self.template.prescribed_bodies()[slot].index(),
            reason: format!(
                "{:?} follows the constant law (no law of time): its pose, velocity and \
                 acceleration are set directly",
                self.prescribed_name(slot)
            ),
        }
    }

    fn no_parameter(&self, slot: usize, name: &str) -> Error {
        let (law, available) = match self.law_of(slot) {
            Some((law, cols)) => (law.kind_name(), names(cols)),
            None => (
                "constant",
                "none: its pose, velocity and acceleration are set directly".into(),
            ),
        };
        Error::UnknownMotionParameter {
            body: self.prescribed_name(slot).to_string(),
            law: law.to_string(),
            name: name.to_string(),
            available,
        }
    }

    fn motion_param_index(&self, body: BodyId, name: &str) -> Result<(usize, usize)> {
        let slot = self.prescribed_slot(body)?;
        let k = self.prescribed[slot]
            .motion
            .as_ref()
            .and_then(|m| m.specs.iter().position(|s| s.name == name))
            .ok_or_else(|| self.no_parameter(slot, name))?;
        Ok((slot, k))
    }

    /// A motion-law parameter's flat column (`width` values per instance) and its width.
    pub fn motion_param(&self, body: BodyId, name: &str) -> Result<(&[f64], usize)> {
        let (slot, k) = self.motion_param_index(body, name)?;
        let cols = self.prescribed[slot]
            .motion
            .as_ref()
            .map(|m| (m.params[k].as_slice(), m.widths[k]));
        let (column, width) = cols.ok_or_else(|| self.no_parameter(slot, name))?;
        Ok((column, width))
    }

    /// One instance's value of a motion-law parameter.
    pub fn motion_param_value(&self, body: BodyId, name: &str, instance: usize) -> Result<&[f64]> {
        self.check_instance(instance)?;
        let (slot, k) = self.motion_param_index(body, name)?;
        let m = self.prescribed[slot].motion.as_ref();
        let column = m.map(|m| &m.params[k]);
        Ok(column
            .ok_or_else(|| self.no_parameter(slot, name))?
            .row(instance))
    }

    /// Sets a motion-law parameter for one instance, validated (directions and quaternions are
    /// normalised); the body's pose, velocity and acceleration columns follow.
    pub fn set_motion_param(
        &mut self,
        body: BodyId,
        name: &str,
        instance: usize,
        value: &[f64],
    ) -> Result<()> {
        let (slot, k) = self.motion_param_index(body, name)?;
        self.check_instance(instance)?;
        let v = self.checked_motion_value(slot, k, instance, value)?;
        if let Some(m) = self.prescribed[slot].motion.as_mut() {
            m.params[k].set_row(instance, &v, &|| name.to_string())?;
        }
        self.touch(Column::Motion { slot, param: k });
        self.refresh_motion_of(instance);
        Ok(())
    }

    /// Sets a motion-law parameter for every instance from a flat column; nothing is written
    /// unless every value is valid.
    pub fn set_motion_param_column(
        &mut self,
        body: BodyId,
        name: &str,
        values: &[f64],
    ) -> Result<()> {
        let (slot, k) = self.motion_param_index(body, name)?;
        let w = self.prescribed[slot]
            .motion
            .as_ref()
            .map_or(0, |m| m.widths[k]);
        if values.len() != w * self.len {
            return Err(Error::ColumnLength {
                field: format!("body[{}].motion.{name}", body.index()),
                got: values.len(),
                expected: w * self.len,
            });
        }
        // Checked in place, one copy of the column (as `set_param_column`).
        let mut column = values.to_vec();
        if let Some(m) = self.prescribed[slot].motion.as_ref() {
            let check = m.specs[k].check;
            for (i, chunk) in column.chunks_mut(w.max(1)).enumerate() {
                if !check.accept(chunk) {
                    let field = format!("body[{}].motion.{name}", body.index());
                    let value = format!("{:?}", &values[i * w..(i + 1) * w]);
                    return Err(invalid(field, i, value, check.accepted()));
                }
            }
        }
        if let Some(m) = self.prescribed[slot].motion.as_mut() {
            m.params[k].replace_all(column);
        }
        self.touch(Column::Motion { slot, param: k });
        self.refresh_motion_all();
        Ok(())
    }

    /// Every parameter of a driven body's law for one instance, flat in the law's order (what
    /// an RL action sets in one call); nothing is written unless every value is valid.
    pub fn set_motion_params(
        &mut self,
        body: BodyId,
        instance: usize,
        values: &[f64],
    ) -> Result<()> {
        let slot = self.prescribed_slot(body)?;
        self.check_instance(instance)?;
        let m = self.prescribed[slot]
            .motion
            .as_ref()
            .ok_or_else(|| self.no_law(slot))?;
        let total: usize = m.widths.iter().sum();
        if values.len() != total {
            return Err(Error::ColumnLength {
                field: format!("body[{}].motion", body.index()),
                got: values.len(),
                expected: total,
            });
        }
        // Every parameter is checked (and normalised where its check does so) before any is
        // written; on the stack for the usual laws, since an environment sets them every step.
        let mut stack = [0.0; 64];
        let mut heap = Vec::new();
        let checked: &mut [f64] = if total <= stack.len() {
            &mut stack[..total]
        } else {
            heap.extend_from_slice(values);
            &mut heap
        };
        checked.copy_from_slice(values);
        check_law_row(m, body, instance, values, checked)?;
        let mut params = 0;
        if let Some(m) = self.prescribed[slot].motion.as_mut() {
            let mut at = 0;
            for k in 0..m.params.len() {
                let (w, name) = (m.widths[k], m.specs[k].name);
                m.params[k].set_row(instance, &checked[at..at + w], &|| name.to_string())?;
                at += w;
            }
            params = m.params.len();
        }
        for param in 0..params {
            self.touch(Column::Motion { slot, param });
        }
        self.refresh_motion_of(instance);
        Ok(())
    }

    /// Every parameter of a driven body's law for many instances in one call: row `i` of
    /// `values` (`len × width` values, `width` the law's parameters flat in its order, as
    /// [`set_motion_params`](Self::set_motion_params) takes one instance's) for each instance `i`
    /// that `apply` selects (every instance when `None`; the other rows are not read). Every
    /// selected row is checked before anything is written (the error names the lowest instance
    /// whose row is invalid); the selected instances' pose, velocity and acceleration follow.
    /// The checks and the law's motion are computed on rayon's pool for batches of 256
    /// instances or more (when the pool has several threads): the same columns, bit for bit, as `set_motion_params`
    /// called for each selected instance in turn, at a fraction of the time on several threads
    /// (what an RL environment sets for every environment at every control step).
    pub fn set_motion_params_rows(
        &mut self,
        body: BodyId,
        values: &[f64],
        apply: Option<&[bool]>,
    ) -> Result<()> {
        let slot = self.prescribed_slot(body)?;
        let m = self.prescribed[slot]
            .motion
            .as_ref()
            .ok_or_else(|| self.no_law(slot))?;
        let total: usize = m.widths.iter().sum();
        let field = |what: &str| format!("body[{}].motion{what}", body.index());
        if values.len() != total * self.len {
            return Err(Error::ColumnLength {
                field: field(""),
                got: values.len(),
                expected: total * self.len,
            });
        }
        if let Some(a) = apply
            && a.len() != self.len
        {
            return Err(Error::ColumnLength {
                field: field(" (rows to apply)"),
                got: a.len(),
                expected: self.len,
            });
        }
        let selected = |i: usize| apply.is_none_or(|a| a[i]);
        if total > 0 {
            // Checked on `values` (a quaternion or a direction normalised in a copy of its few
            // values), then written from them, normalised as they are stored: an environment
            // setting every law at every step allocates nothing here for its rows.
            let check = |(i, row): (usize, &[f64])| match selected(i) {
                true => look_at_law_row(m, body, i, row),
                false => Ok(()),
            };
            let first_error = if in_parallel(self.len) {
                values
                    .par_chunks(total)
                    .enumerate()
                    .with_min_len(PARALLEL_MIN_INSTANCES / 4)
                    .map(check)
                    .find_first(Result::is_err)
            } else {
                values
                    .chunks(total)
                    .enumerate()
                    .map(check)
                    .find(Result::is_err)
            };
            first_error.unwrap_or(Ok(()))?;
            let mut params = 0;
            if let Some(m) = self.prescribed[slot].motion.as_mut() {
                let mut at = 0;
                for k in 0..m.params.len() {
                    let (w, name, check) = (m.widths[k], m.specs[k].name, m.specs[k].check);
                    let row = |i: usize| &values[i * total + at..i * total + at + w];
                    let what = || name.to_string();
                    if check.normalises() {
                        let fill = |i: usize, out: &mut [f64]| {
                            out.copy_from_slice(row(i));
                            // Accepted: checked above.
                            check.accept(out);
                        };
                        m.params[k].set_rows_with(apply, fill, &what)?;
                    } else {
                        m.params[k].set_rows(apply, row, &what)?;
                    }
                    at += w;
                }
                params = m.params.len();
            }
            for param in 0..params {
                self.touch(Column::Motion { slot, param });
            }
        }
        self.refresh_motion_where(apply);
        Ok(())
    }

    fn checked_motion_value(
        &self,
        slot: usize,
        k: usize,
        instance: usize,
        value: &[f64],
    ) -> Result<Vec<f64>> {
        let m = self.prescribed[slot]
            .motion
            .as_ref()
            .ok_or_else(|| self.no_law(slot))?;
        let (spec, w) = (&m.specs[k], m.widths[k]);
        let body = self.template.prescribed_bodies()[slot];
        let field = || format!("body[{}].motion.{}", body.index(), spec.name);
        checked_param(spec, w, &field, instance, value)
    }

    /// Writes the law's motion at instance `i`'s time into every driven body's pose, velocity
    /// and acceleration columns.
    pub(super) fn refresh_motion_of(&mut self, i: usize) {
        for slot in 0..self.prescribed.len() {
            if let Some(k) = self.law_kinematics(slot, i, self.time[i]) {
                let (pose, velocity, acceleration) = motion_columns(&k);
                let cols = &mut self.prescribed[slot];
                cols.pose[i] = pose;
                cols.velocity[i] = velocity;
                cols.acceleration[i] = acceleration;
                for field in PrescribedField::ALL {
                    self.touch(Column::Prescribed { slot, field });
                }
            }
        }
    }

    /// [`refresh_motion_of`](Self::refresh_motion_of) for every instance.
    pub(super) fn refresh_motion_all(&mut self) {
        self.refresh_motion_where(None);
    }

    /// [`refresh_motion_of`](Self::refresh_motion_of) for every instance `apply` selects (all
    /// when `None`).
    pub(super) fn refresh_motion_where(&mut self, apply: Option<&[bool]>) {
        self.refresh_driven_span(0, self.len, |i| apply.is_none_or(|a| a[i]));
    }

    /// [`refresh_motion_of`](Self::refresh_motion_of) for the instances `first + k`,
    /// `k < count`, that `selected(k)` picks, the laws evaluated on rayon's pool for spans of
    /// 256 instances or more: each instance's columns are its own law at its own time, so the
    /// same bits as one instance at a time. What a stepping call does after storing a block of
    /// states (one instance at a time on the caller's thread, this was a quarter of a
    /// `BallOnPlate-v0` step on two threads, the other thread waiting).
    pub(crate) fn refresh_driven_span(
        &mut self,
        first: usize,
        count: usize,
        selected: impl Fn(usize) -> bool + Sync,
    ) {
        let parallel = in_parallel(count);
        let span = first..first + count;
        for slot in 0..self.prescribed.len() {
            let (template, time) = (&self.template, &self.time);
            let cols = &mut self.prescribed[slot];
            let id = template.prescribed_bodies()[slot];
            let law = template.bodies()[id.index()].motion.as_deref();
            let (Some(law), Some(motion)) = (law, cols.motion.as_ref()) else {
                continue;
            };
            let refresh = |(k, ((pose, velocity), acceleration)): MotionRow<'_>| {
                if selected(k) {
                    let i = first + k;
                    let kinematics = law.evaluate(&Params::of(&motion.params, i), time[i]);
                    (*pose, *velocity, *acceleration) = motion_columns(&kinematics);
                }
            };
            let pose = &mut cols.pose[span.clone()];
            let velocity = &mut cols.velocity[span.clone()];
            let acceleration = &mut cols.acceleration[span.clone()];
            if parallel {
                pose.par_iter_mut()
                    .zip(velocity.par_iter_mut())
                    .zip(acceleration.par_iter_mut())
                    .enumerate()
                    .with_min_len(PARALLEL_MIN_INSTANCES / 4)
                    .for_each(refresh);
            } else {
                pose.iter_mut()
                    .zip(velocity.iter_mut())
                    .zip(acceleration.iter_mut())
                    .enumerate()
                    .for_each(refresh);
            }
            for field in PrescribedField::ALL {
                self.touch(Column::Prescribed { slot, field });
            }
        }
    }
}

/// One instance's entries of a driven body's pose, velocity and acceleration columns, with its
/// index in the span refreshed.
type MotionRow<'c> = (
    usize,
    ((&'c mut [f64; 7], &'c mut [f64; 6]), &'c mut [f64; 6]),
);

/// Batches from this many instances check and refresh their motion laws on rayon's pool (when
/// it has more than one thread): below, handing the work out costs more than the laws do (a
/// polynomial law with gimbal turns is a few hundred nanoseconds an instance).
const PARALLEL_MIN_INSTANCES: usize = 256;

fn in_parallel(len: usize) -> bool {
    len >= PARALLEL_MIN_INSTANCES && rayon::current_num_threads() > 1
}

/// Checks (and normalises where a check does so) one instance's parameters of law columns
/// `m`, flat in the law's order, in place; an error shows the values `given`.
fn check_law_row(
    m: &MotionColumns,
    body: BodyId,
    instance: usize,
    given: &[f64],
    row: &mut [f64],
) -> Result<()> {
    let mut at = 0;
    for (spec, &w) in m.specs.iter().zip(&m.widths) {
        if !spec.check.accept(&mut row[at..at + w]) {
            return Err(refused(spec, body, instance, &given[at..at + w]));
        }
        at += w;
    }
    Ok(())
}

/// Checks one instance's parameters of law columns `m`, flat in the law's order, without
/// changing them: a check that normalises runs on a copy of its values (on the stack, for the
/// few values of a quaternion, frame or direction).
fn look_at_law_row(m: &MotionColumns, body: BodyId, instance: usize, row: &[f64]) -> Result<()> {
    let mut at = 0;
    for (spec, &w) in m.specs.iter().zip(&m.widths) {
        let values = &row[at..at + w];
        let accepted = spec.check.holds(values).unwrap_or_else(|| {
            let mut copy = [0.0; 8];
            match copy.get_mut(..w) {
                Some(copy) => {
                    copy.copy_from_slice(values);
                    spec.check.accept(copy)
                }
                None => spec.check.accept(&mut values.to_vec()),
            }
        });
        if !accepted {
            return Err(refused(spec, body, instance, values));
        }
        at += w;
    }
    Ok(())
}

/// The error for law parameter `spec` of `body` refused at `instance`, showing the values
/// `given`.
fn refused(spec: &ParamSpec, body: BodyId, instance: usize, given: &[f64]) -> Error {
    invalid(
        format!("body[{}].motion.{}", body.index(), spec.name),
        instance,
        format!("{given:?}"),
        spec.check.accepted(),
    )
}

fn names(cols: &MotionColumns) -> String {
    cols.specs
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}
