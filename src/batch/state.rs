//! The state of one instance held apart from the batch's columns: what the integrators advance
//! and write back into the batch.

use super::Batch;
use crate::error::{Error, Result};
use crate::math::all_finite;

/// The state of one instance, apart from the batch: what integrators advance.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceState {
    /// Time.
    pub time: f64,
    /// `q` of each free body (column order).
    pub q: Vec<[f64; 7]>,
    /// `u` of each free body.
    pub u: Vec<[f64; 6]>,
    /// Pose of each prescribed body.
    pub pose: Vec<[f64; 7]>,
    /// Spatial velocity of each prescribed body.
    pub velocity: Vec<[f64; 6]>,
    /// Work done on the free bodies since it was last reset: `[driven, applied]` — by the
    /// constraint forces (the prescribed bodies' work, constraints between free bodies being
    /// workless) and by the applied forces and torques (gravity is in the potential energy).
    pub work: [f64; 2],
}

impl InstanceState {
    /// Every value flat: q of free bodies, poses, u, prescribed velocities, work.
    pub fn to_vec(&self) -> Vec<f64> {
        let mut y = Vec::with_capacity(self.len());
        self.q.iter().for_each(|x| y.extend_from_slice(x));
        self.pose.iter().for_each(|x| y.extend_from_slice(x));
        self.u.iter().for_each(|x| y.extend_from_slice(x));
        self.velocity.iter().for_each(|x| y.extend_from_slice(x));
        y.extend_from_slice(&self.work);
        y
    }

    /// Overwrites the values from a flat vector laid out as [`to_vec`](Self::to_vec).
    pub fn set_from(&mut self, y: &[f64]) {
        let mut k = 0;
        for x in self.q.iter_mut().chain(self.pose.iter_mut()) {
            x.copy_from_slice(&y[k..k + 7]);
            k += 7;
        }
        for x in self.u.iter_mut().chain(self.velocity.iter_mut()) {
            x.copy_from_slice(&y[k..k + 6]);
            k += 6;
        }
        self.work.copy_from_slice(&y[k..k + 2]);
    }

    /// Normalises every quaternion; `false` when one is zero or not finite.
    pub fn normalize_quaternions(&mut self) -> bool {
        self.q
            .iter_mut()
            .chain(self.pose.iter_mut())
            .all(|x| crate::math::normalize_quaternion(&mut x[..4]))
    }

    /// Number of values in [`to_vec`](Self::to_vec).
    pub fn len(&self) -> usize {
        7 * (self.q.len() + self.pose.len()) + 6 * (self.u.len() + self.velocity.len()) + 2
    }

    /// True when the state holds no body.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when every value is finite.
    pub fn is_finite(&self) -> bool {
        self.time.is_finite()
            && self.q.iter().chain(&self.pose).all(|x| all_finite(x))
            && self.u.iter().chain(&self.velocity).all(|x| all_finite(x))
            && all_finite(&self.work)
    }
}

impl InstanceState {
    /// Bytes one state of `batch`'s template holds, heap included: what a stepping call keeps
    /// per instance besides the batch's columns (the CPU path holds one per instance per call).
    pub fn bytes_for(batch: &Batch) -> usize {
        let template = batch.template();
        let (free, prescribed) = (
            template.free_bodies().len(),
            template.prescribed_bodies().len(),
        );
        std::mem::size_of::<(InstanceState, u32)>() + (free + prescribed) * (7 + 6) * 8
    }
}

impl Batch {
    /// The state of instance `i` as held in the columns.
    pub fn instance_state(&self, i: usize) -> Result<InstanceState> {
        if i >= self.len() {
            return Err(Error::InstanceOutOfRange {
                instance: i,
                len: self.len(),
            });
        }
        Ok(self.state_of(i))
    }

    pub(crate) fn state_of(&self, i: usize) -> InstanceState {
        InstanceState {
            time: self.time()[i],
            q: self.free_columns().iter().map(|c| c.q[i]).collect(),
            u: self.free_columns().iter().map(|c| c.u[i]).collect(),
            pose: self
                .prescribed_columns()
                .iter()
                .map(|c| c.pose[i])
                .collect(),
            velocity: self
                .prescribed_columns()
                .iter()
                .map(|c| c.velocity[i])
                .collect(),
            work: self.work()[i],
        }
    }
}
