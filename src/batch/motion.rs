//! The motion-law columns of driven prescribed bodies (see the `motion` room): parameter accessors,
//! and the pose, velocity and acceleration columns kept equal to the law at each instance's
//! time.

use super::checks::invalid;
use super::{Batch, Column, MotionColumns, PrescribedField, checked_param, default_columns};
use crate::error::{Error, Result};
use crate::model::BodyId;
use crate::model::MotionLaw;
use crate::model::motion::motion_columns;
use crate::model::{BodyKinematics, Params};

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
        let mut at = 0;
        for (k, w) in m.widths.iter().enumerate() {
            let spec = &m.specs[k];
            if !spec.check.accept(&mut checked[at..at + w]) {
                return Err(invalid(
                    format!("body[{}].motion.{}", body.index(), spec.name),
                    instance,
                    format!("{:?}", &values[at..at + w]),
                    spec.check.accepted(),
                ));
            }
            at += w;
        }
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
        if self.prescribed.iter().all(|p| p.motion.is_none()) {
            return;
        }
        for i in 0..self.len {
            self.refresh_motion_of(i);
        }
    }
}

fn names(cols: &MotionColumns) -> String {
    cols.specs
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}
