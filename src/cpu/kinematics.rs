//! The kinematics of every body of an instance, from a state: free bodies from their q and u,
//! driven bodies from their law at the state's time, other prescribed bodies from their columns.

use crate::batch::{Batch, InstanceState, status};
use crate::math::{Vec3, all_finite, rotation_from_quaternion, vec3};
use crate::model::{BodyKind, BodyKinematics};

impl Batch {
    /// Kinematics of every body of instance `i`, with the given free-body accelerations
    /// (`None`: zero). Also returns status bits for non-finite state.
    pub(crate) fn kinematics(&self, i: usize, udot: Option<&[f64]>) -> (Vec<BodyKinematics>, u32) {
        self.kinematics_of(i, &self.state_of(i), udot)
    }

    /// As [`kinematics`](Self::kinematics), for a state held apart from the columns.
    pub(crate) fn kinematics_of(
        &self,
        i: usize,
        state: &InstanceState,
        udot: Option<&[f64]>,
    ) -> (Vec<BodyKinematics>, u32) {
        let mut kin = Vec::with_capacity(self.template().bodies().len());
        let st = self.kinematics_into(i, state, udot, &mut kin);
        (kin, st)
    }

    /// As [`kinematics_of`](Self::kinematics_of), into `kin` (cleared; its allocation reused).
    pub(crate) fn kinematics_into(
        &self,
        i: usize,
        state: &InstanceState,
        udot: Option<&[f64]>,
        kin: &mut Vec<BodyKinematics>,
    ) -> u32 {
        let template = self.template();
        let mut st = status::OK;
        let gravity = self.gravity_column()[i];
        if !all_finite(&gravity) || !state.time.is_finite() {
            st |= status::NONFINITE_STATE;
        }
        kin.clear();
        kin.extend(template.bodies().iter().map(|body| match body.kind {
            BodyKind::Ground => BodyKinematics::ground(),
            BodyKind::Free => {
                let (q, u) = (&state.q[body.slot], &state.u[body.slot]);
                let rotation = rotation_from_quaternion(&q[..4]);
                if rotation.is_none() || !all_finite(q) || !all_finite(u) {
                    st |= status::NONFINITE_STATE;
                }
                let acc = udot.map(|a| &a[6 * body.slot..6 * body.slot + 6]);
                BodyKinematics {
                    rotation: rotation.unwrap_or_default(),
                    origin: vec3(&q[4..7]),
                    ang_vel: vec3(&u[0..3]),
                    lin_vel: vec3(&u[3..6]),
                    ang_acc: acc.map_or_else(Vec3::zeros, |a| vec3(&a[0..3])),
                    lin_acc: acc.map_or_else(Vec3::zeros, |a| vec3(&a[3..6])),
                }
            }
            BodyKind::Prescribed => {
                // A driven body follows its law at the state's own time (every stage time of
                // an integrator); the state's pose and velocity of it are not used.
                if let Some(k) = self.law_kinematics(body.slot, i, state.time) {
                    let values = [k.origin, k.ang_vel, k.lin_vel, k.ang_acc, k.lin_acc];
                    if !values.iter().all(|v| v.iter().all(|x| x.is_finite()))
                        || !k.rotation.iter().all(|x| x.is_finite())
                    {
                        st |= status::NONFINITE_STATE;
                    }
                    return k;
                }
                let acc = &self.prescribed_columns()[body.slot].acceleration[i];
                let (pose, vel) = (&state.pose[body.slot], &state.velocity[body.slot]);
                let rotation = rotation_from_quaternion(&pose[..4]);
                if rotation.is_none() || !all_finite(pose) || !all_finite(vel) || !all_finite(acc) {
                    st |= status::NONFINITE_STATE;
                }
                BodyKinematics {
                    rotation: rotation.unwrap_or_default(),
                    origin: vec3(&pose[4..7]),
                    ang_vel: vec3(&vel[0..3]),
                    lin_vel: vec3(&vel[3..6]),
                    ang_acc: vec3(&acc[0..3]),
                    lin_acc: vec3(&acc[3..6]),
                }
            }
        }));
        st
    }
}
