//! The state of one instance held apart from the batch's columns: what the integrators advance
//! and write back into the batch.

use super::Batch;
use crate::error::{Error, Result};
use crate::math::all_finite;

/// Where each part of an instance's flat state lies: the q (7 values) of every free body, the
/// pose (7) of every prescribed body, the u (6) of every free body, the velocity (6) of every
/// prescribed body, then the work `[driven, applied]` — the order of
/// [`InstanceState::to_vec`], which the integrators, [`Batch::store_values`] and the CPU lane
/// path all read through this one description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateLayout {
    /// Number of free bodies.
    pub(crate) free: usize,
    /// Number of prescribed bodies.
    pub(crate) prescribed: usize,
}

impl StateLayout {
    /// Where free slot `slot`'s q starts.
    pub(crate) fn q_at(&self, slot: usize) -> usize {
        7 * slot
    }

    /// Where prescribed slot `slot`'s pose starts.
    pub(crate) fn pose_at(&self, slot: usize) -> usize {
        7 * (self.free + slot)
    }

    /// Number of q values (free bodies' q and prescribed poses), where the u start.
    pub(crate) fn nq(&self) -> usize {
        7 * (self.free + self.prescribed)
    }

    /// Where free slot `slot`'s u starts.
    pub(crate) fn u_at(&self, slot: usize) -> usize {
        self.nq() + 6 * slot
    }

    /// Where prescribed slot `slot`'s velocity starts.
    pub(crate) fn velocity_at(&self, slot: usize) -> usize {
        self.nq() + 6 * (self.free + slot)
    }

    /// Where the work `[driven, applied]` starts.
    pub(crate) fn work_at(&self) -> usize {
        13 * (self.free + self.prescribed)
    }

    /// Number of values.
    pub(crate) fn len(&self) -> usize {
        self.work_at() + 2
    }
}

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
    /// Where each part of [`to_vec`](Self::to_vec) lies.
    pub(crate) fn layout(&self) -> StateLayout {
        StateLayout {
            free: self.q.len(),
            prescribed: self.pose.len(),
        }
    }

    /// Every value flat: q of free bodies, poses, u, prescribed velocities, work.
    pub fn to_vec(&self) -> Vec<f64> {
        let mut y = vec![0.0; self.len()];
        let l = self.layout();
        for (slot, (q, u)) in self.q.iter().zip(&self.u).enumerate() {
            y[l.q_at(slot)..][..7].copy_from_slice(q);
            y[l.u_at(slot)..][..6].copy_from_slice(u);
        }
        for (slot, (pose, velocity)) in self.pose.iter().zip(&self.velocity).enumerate() {
            y[l.pose_at(slot)..][..7].copy_from_slice(pose);
            y[l.velocity_at(slot)..][..6].copy_from_slice(velocity);
        }
        y[l.work_at()..][..2].copy_from_slice(&self.work);
        y
    }

    /// Overwrites the values from a flat vector laid out as [`to_vec`](Self::to_vec).
    pub fn set_from(&mut self, y: &[f64]) {
        let l = self.layout();
        for (slot, (q, u)) in self.q.iter_mut().zip(&mut self.u).enumerate() {
            q.copy_from_slice(&y[l.q_at(slot)..][..7]);
            u.copy_from_slice(&y[l.u_at(slot)..][..6]);
        }
        for (slot, (pose, velocity)) in self.pose.iter_mut().zip(&mut self.velocity).enumerate() {
            pose.copy_from_slice(&y[l.pose_at(slot)..][..7]);
            velocity.copy_from_slice(&y[l.velocity_at(slot)..][..6]);
        }
        self.work.copy_from_slice(&y[l.work_at()..][..2]);
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
        self.layout().len()
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

/// A part of one state column of a batch, flat (`width` values an instance), with where its
/// values lie in a flat state ([`StateLayout`]).
pub(crate) struct StateColumnRows<'a> {
    /// The values, `width` an instance.
    pub(crate) rows: &'a mut [f64],
    /// Values an instance.
    pub(crate) width: usize,
    /// Where the column's values start in a flat state.
    pub(crate) at: usize,
}

/// Instances `first..` of every state column of a batch, mutably (q and u of each free body,
/// pose and velocity of each prescribed one, the work), with their times and status bits: one
/// piece of a stepping call's store. Pieces over disjoint instances are stored on several
/// threads at once ([`Batch::state_rows_mut`]).
pub(crate) struct StateRows<'a> {
    /// The first instance the rows hold.
    pub(crate) first: usize,
    /// Each state column's rows.
    pub(crate) columns: Vec<StateColumnRows<'a>>,
    /// The instances' times.
    pub(crate) time: &'a mut [f64],
    /// The instances' status bits.
    pub(crate) status: &'a mut [u32],
}

/// `column` (`width` values an entry) cut at the entries `bounds` (increasing, the last at
/// most the column's length): part `k` holds entries `bounds[k]..bounds[k + 1]`.
pub(crate) fn split_at_bounds<'a, T>(
    column: &'a mut [T],
    width: usize,
    bounds: &[usize],
) -> Vec<&'a mut [T]> {
    let (Some(&lo), Some(&hi)) = (bounds.first(), bounds.last()) else {
        return Vec::new();
    };
    let mut rest = &mut column[lo * width..hi * width];
    let mut parts = Vec::with_capacity(bounds.len().saturating_sub(1));
    for w in bounds.windows(2) {
        let (part, after) = std::mem::take(&mut rest).split_at_mut((w[1] - w[0]) * width);
        parts.push(part);
        rest = after;
    }
    parts
}

/// Adds part `k` of `column` cut at `bounds` to piece `k` of `pieces`.
fn add_column<'a>(
    pieces: &mut [StateRows<'a>],
    column: &'a mut [f64],
    width: usize,
    at: usize,
    bounds: &[usize],
) {
    for (piece, rows) in pieces
        .iter_mut()
        .zip(split_at_bounds(column, width, bounds))
    {
        piece.columns.push(StateColumnRows { rows, width, at });
    }
}

impl Batch {
    /// Every state column, with times and status bits, cut at the instances `bounds`
    /// (increasing, the last at most `len`): piece `k` holds instances `bounds[k]..bounds[k + 1]`,
    /// so that a stepping call stores each piece's states on its own thread. The pieces hold
    /// the driven bodies' pose and velocity too, as a stored state does: call
    /// [`refresh_driven_span`](Self::refresh_driven_span) for the instances stored when
    /// [`has_driven_bodies`](Self::has_driven_bodies), and
    /// [`touch_state_columns`](Self::touch_state_columns) once at the end.
    pub(crate) fn state_rows_mut(&mut self, bounds: &[usize]) -> Vec<StateRows<'_>> {
        let layout = self.state_layout();
        let count = bounds.len().saturating_sub(1);
        let columns = 2 * (layout.free + layout.prescribed) + 1;
        let mut times = split_at_bounds(&mut self.time, 1, bounds).into_iter();
        let mut statuses = split_at_bounds(&mut self.status, 1, bounds).into_iter();
        let mut pieces: Vec<StateRows<'_>> = bounds[..count]
            .iter()
            .map(|&first| StateRows {
                first,
                columns: Vec::with_capacity(columns),
                time: times.next().unwrap_or_default(),
                status: statuses.next().unwrap_or_default(),
            })
            .collect();
        for (slot, cols) in self.free.iter_mut().enumerate() {
            let (q, u) = (cols.q.as_flattened_mut(), cols.u.as_flattened_mut());
            add_column(&mut pieces, q, 7, layout.q_at(slot), bounds);
            add_column(&mut pieces, u, 6, layout.u_at(slot), bounds);
        }
        for (slot, cols) in self.prescribed.iter_mut().enumerate() {
            let (pose, velocity) = (
                cols.pose.as_flattened_mut(),
                cols.velocity.as_flattened_mut(),
            );
            add_column(&mut pieces, pose, 7, layout.pose_at(slot), bounds);
            add_column(&mut pieces, velocity, 6, layout.velocity_at(slot), bounds);
        }
        let work = self.work.as_flattened_mut();
        add_column(&mut pieces, work, 2, layout.work_at(), bounds);
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two free bodies and one prescribed body, every value distinct.
    fn numbered_state() -> InstanceState {
        let mut next = 0.0;
        let mut value = || {
            next += 1.0;
            next
        };
        InstanceState {
            time: 0.5,
            q: (0..2).map(|_| std::array::from_fn(|_| value())).collect(),
            u: (0..2).map(|_| std::array::from_fn(|_| value())).collect(),
            pose: vec![std::array::from_fn(|_| value())],
            velocity: vec![std::array::from_fn(|_| value())],
            work: [value(), value()],
        }
    }

    #[test]
    fn the_layout_places_each_part_where_to_vec_puts_it() {
        let state = numbered_state();
        let (y, l) = (state.to_vec(), state.layout());
        assert_eq!((l.free, l.prescribed, l.len(), y.len()), (2, 1, 41, 41));
        // q, poses, u, velocities, work: the documented order.
        assert_eq!(&y[l.q_at(0)..][..7], &state.q[0]);
        assert_eq!(&y[l.q_at(1)..][..7], &state.q[1]);
        assert_eq!(l.pose_at(0), 14);
        assert_eq!(&y[l.pose_at(0)..][..7], &state.pose[0]);
        assert_eq!(l.u_at(0), l.nq());
        assert_eq!(&y[l.u_at(1)..][..6], &state.u[1]);
        assert_eq!(&y[l.velocity_at(0)..][..6], &state.velocity[0]);
        assert_eq!(&y[l.work_at()..], &state.work);
        let mut back = numbered_state();
        back.set_from(&vec![0.0; y.len()]);
        back.set_from(&y);
        assert_eq!(back, state);
    }
}
