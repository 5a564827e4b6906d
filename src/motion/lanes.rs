//! The lane twins of the laws' helpers ([`RotationChain`](super::RotationChain), `sine`,
//! [`polynomial`](super::polynomial::polynomial), `axis_rotation`): [`LANES`] instances at once,
//! for [`MotionLaw::evaluate_lanes`](crate::model::MotionLaw::evaluate_lanes) on the CPU fast
//! path.
//!
//! Each reads as its scalar twin, with the same operations in the same order and no fused
//! multiply-adds, so a lane gives the scalar law's bits for its instance (a test holds them to
//! it). The sines and cosines are the scalar `sin_cos` of each lane: what the laws cost after
//! the rotations are vectorised is mostly these.

use super::CoordinateAxis;
use crate::math::lanes::{LANES, Lane, LaneMat3, LaneVec3, lanes, splat, values};
use crate::math::rodrigues;
use crate::model::BodyLanes;

/// `(sin x, cos x)` lane by lane (the scalar `sin_cos` of each).
#[inline(always)]
pub fn sin_cos(x: Lane) -> (Lane, Lane) {
    let x = values(x);
    let mut s = [0.0; LANES];
    let mut c = [0.0; LANES];
    for l in 0..LANES {
        (s[l], c[l]) = x[l].sin_cos();
    }
    (lanes(s), lanes(c))
}

/// `m v` in the order of nalgebra's generic product (columns scaled and summed in turn,
/// unfused), as the scalar laws compute it.
#[inline(always)]
fn mul_vec(m: &LaneMat3, v: &LaneVec3) -> LaneVec3 {
    LaneVec3::new(
        m.m11 * v.x + m.m12 * v.y + m.m13 * v.z,
        m.m21 * v.x + m.m22 * v.y + m.m23 * v.z,
        m.m31 * v.x + m.m32 * v.y + m.m33 * v.z,
    )
}

/// `a b`, a column at a time by [`mul_vec`].
#[inline(always)]
fn mul_mat(a: &LaneMat3, b: &LaneMat3) -> LaneMat3 {
    let c0 = mul_vec(a, &LaneVec3::new(b.m11, b.m21, b.m31));
    let c1 = mul_vec(a, &LaneVec3::new(b.m12, b.m22, b.m32));
    let c2 = mul_vec(a, &LaneVec3::new(b.m13, b.m23, b.m33));
    LaneMat3::new(c0.x, c1.x, c2.x, c0.y, c1.y, c2.y, c0.z, c1.z, c2.z)
}

/// `a × b`, unfused, as nalgebra's `cross`.
#[inline(always)]
fn cross(a: &LaneVec3, b: &LaneVec3) -> LaneVec3 {
    LaneVec3::new(
        a.y * b.z - a.z * b.y,
        a.z * b.x - a.x * b.z,
        a.x * b.y - a.y * b.x,
    )
}

/// The lane twin of `math::axis_rotation`: `Rot(a, θ)` by the same [`rodrigues`].
#[inline(always)]
pub fn axis_rotation(a: &LaneVec3, angle: Lane) -> LaneMat3 {
    let (s, c) = sin_cos(angle);
    rodrigues(a, s, c)
}

/// The lane twin of `motion::sine`: `(x, ẋ, ẍ)` of `amplitude · sin(rate · t + phase)`.
#[inline(always)]
pub fn sine(amplitude: Lane, rate: Lane, phase: Lane, t: Lane) -> (Lane, Lane, Lane) {
    let (s, c) = sin_cos(rate * t + phase);
    (
        amplitude * s,
        amplitude * rate * c,
        -amplitude * rate * rate * s,
    )
}

/// The lane twin of `polynomial::polynomial`: `(p(τ), p'(τ), p''(τ))` of `Σ c(k) τ^k` for
/// `k < count` (Horner, from the highest coefficient down).
#[inline(always)]
pub fn polynomial(count: usize, mut c: impl FnMut(usize) -> Lane, tau: Lane) -> (Lane, Lane, Lane) {
    let zero = splat(0.0);
    let two = splat(2.0);
    let (mut p, mut d, mut dd) = (zero, zero, zero);
    for k in (0..count).rev() {
        dd = dd * tau + two * d;
        d = d * tau + p;
        p = p * tau + c(k);
    }
    (p, d, dd)
}

/// The lane twin of [`RotationChain`](super::RotationChain).
#[derive(Debug, Clone, Copy)]
pub struct RotationChainLanes {
    /// `R_1 ⋯ R_k`.
    pub rotation: LaneMat3,
    /// Angular velocity in Ground.
    pub ang_vel: LaneVec3,
    /// Angular acceleration in Ground.
    pub ang_acc: LaneVec3,
}

impl Default for RotationChainLanes {
    fn default() -> Self {
        Self::new()
    }
}

impl RotationChainLanes {
    /// The identity, at rest, in every lane.
    pub fn new() -> Self {
        let zero = splat(0.0);
        Self {
            rotation: LaneMat3::from_diagonal_element(splat(1.0)),
            ang_vel: LaneVec3::new(zero, zero, zero),
            ang_acc: LaneVec3::new(zero, zero, zero),
        }
    }

    /// The twin of [`RotationChain::then`](super::RotationChain::then).
    #[inline(always)]
    pub fn then(&mut self, axis: &LaneVec3, angle: Lane, rate: Lane, accel: Lane) {
        let axis_in_ground = mul_vec(&self.rotation, axis);
        self.ang_acc += axis_in_ground * accel + cross(&self.ang_vel, &axis_in_ground) * rate;
        self.ang_vel += axis_in_ground * rate;
        self.rotation = mul_mat(&self.rotation, &axis_rotation(axis, angle));
    }

    /// The twin of [`RotationChain::then_about`](super::RotationChain::then_about).
    #[inline(always)]
    pub fn then_about(&mut self, axis: CoordinateAxis, angle: Lane, rate: Lane, accel: Lane) {
        let k = axis as usize;
        let (i, j) = ((k + 1) % 3, (k + 2) % 3);
        let axis_in_ground: LaneVec3 = self.rotation.column(k).into_owned();
        self.ang_acc += axis_in_ground * accel + cross(&self.ang_vel, &axis_in_ground) * rate;
        self.ang_vel += axis_in_ground * rate;
        let (s, c) = sin_cos(angle);
        let r_i: LaneVec3 = self.rotation.column(i).into_owned();
        let r_j: LaneVec3 = self.rotation.column(j).into_owned();
        self.rotation.set_column(i, &(r_i * c + r_j * s));
        self.rotation.set_column(j, &(r_j * c - r_i * s));
    }

    /// The twin of [`RotationChain::body_kinematics`](super::RotationChain::body_kinematics).
    #[inline(always)]
    pub fn body_kinematics(
        &self,
        base: &LaneMat3,
        mut coordinate: impl FnMut(usize) -> (Lane, Lane, Lane),
    ) -> BodyLanes {
        let zero = splat(0.0);
        let mut origin = LaneVec3::new(zero, zero, zero);
        let mut lin_vel = origin;
        let mut lin_acc = origin;
        for k in 0..3 {
            (origin[k], lin_vel[k], lin_acc[k]) = coordinate(k);
        }
        BodyLanes {
            rotation: mul_mat(&self.rotation, base),
            origin,
            ang_vel: self.ang_vel,
            lin_vel,
            ang_acc: self.ang_acc,
            lin_acc,
        }
    }
}
