//! Prescribed motion as a law of time (`physics.md` §1, §6).
//!
//! A prescribed body has no equations of motion: its pose, spatial velocity and spatial
//! acceleration are given. They may be given two ways:
//!
//! * **constant** (no law, `SystemTemplate::add_prescribed_body`): pose, velocity and
//!   acceleration are per-instance inputs; a stepping call holds the acceleration constant and
//!   integrates pose and velocity from it. Exact for constant-acceleration motion (a turntable
//!   spinning steadily about a fixed axis), first order in the call interval otherwise.
//! * **a law of time** ([`MotionLaw`], `SystemTemplate::add_driven_body`): a function
//!   `t ↦ (R_GF, p_GFo, w_F, v_F, b_F, a_F)` in closed form, with per-instance parameters held
//!   in SoA columns of the batch like a constraint's. The integrators evaluate it at every stage
//!   time, on the CPU and in the GPU kernel (Simbody evaluates a `Motion` at every stage), so a
//!   tilting or shaking plate is integrated to the integrator's own order.
//!
//! Built-in laws: [`TiltingMotion`] (the sum-of-sines tilt and translation of the golden files'
//! `tilting_plate`) and [`PolynomialMotion`] (a polynomial in `t − t0` per coordinate: three
//! translations and three gimbal angles). A user law implements [`MotionLaw`] in Rust and, to
//! run on the GPU, gives its WGSL twin through [`MotionLaw::wgsl`] — the same mechanism as a
//! custom constraint.
//!
//! On the CPU fast path a law is evaluated for a chunk's lanes at once
//! ([`MotionLaw::evaluate_lanes`]); the built-in laws do it with the lane twins of their
//! helpers ([`lanes`]), which give each lane the scalar law's bits.
//!
//! Every law returns [`BodyKinematics`]: `lin_acc` is the acceleration of the origin,
//! `d²p_GFo/dt²` (Simbody's `getBodyAcceleration`), not the spatial-algebra `a − w × v`.

pub mod lanes;
pub mod polynomial;
pub mod tilting;

use crate::math::{Mat3, Vec3, axis_rotation};
use crate::model::BodyKinematics;

pub use crate::model::motion::{MOTION_PARAMS_CAP, MotionLaw, WgslMotion, motion_columns};

pub use polynomial::PolynomialMotion;
pub use tilting::TiltingMotion;

/// `shaders/motion.wgsl`: the WGSL twin of [`RotationChain`], spliced into every kernel.
pub const MOTION_WGSL: &str = include_str!("../../shaders/motion.wgsl");

/// A rotation built as a chain of rotations about axes, each fixed in the frame the chain has
/// reached (a gimbal, or the tilting plate's two pins), with its angular velocity and
/// acceleration in Ground.
///
/// With `a_k' = R_1 ⋯ R_{k−1} a_k`: `w = Σ θ̇_k a_k'` and
/// `b = Σ θ̈_k a_k' + Σ θ̇_k (w_{<k} × a_k')`, where `w_{<k}` is the angular velocity of the
/// links before `k` (`d a_k'/dt = w_{<k} × a_k'`). Twin: `RotationChain` in
/// `shaders/motion.wgsl`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RotationChain {
    /// `R_1 ⋯ R_k`.
    pub rotation: Mat3,
    /// Angular velocity in Ground.
    pub ang_vel: Vec3,
    /// Angular acceleration in Ground.
    pub ang_acc: Vec3,
}

impl Default for RotationChain {
    fn default() -> Self {
        Self::new()
    }
}

impl RotationChain {
    /// The identity, at rest.
    pub fn new() -> Self {
        Self {
            rotation: Mat3::identity(),
            ang_vel: Vec3::zeros(),
            ang_acc: Vec3::zeros(),
        }
    }

    /// Appends a rotation by `angle` about the unit `axis` (in the frame reached so far), with
    /// angular rate `rate` and angular acceleration `accel`.
    pub fn then(&mut self, axis: &Vec3, angle: f64, rate: f64, accel: f64) {
        let axis_in_ground = self.rotation * axis;
        self.ang_acc += accel * axis_in_ground + rate * self.ang_vel.cross(&axis_in_ground);
        self.ang_vel += rate * axis_in_ground;
        self.rotation *= axis_rotation(axis, angle);
    }

    /// [`then`](Self::then) about coordinate axis `axis` of the frame reached so far (a
    /// gimbal's): that axis in Ground is a column of the rotation, and the rotation turns only
    /// the other two columns, `R_i' = cos θ R_i + sin θ R_j`, `R_j' = cos θ R_j − sin θ R_i`
    /// (`(i, j)` the next two axes in cyclic order), where a general axis takes a 3×3 product.
    /// Twin: `rotation_chain_then_about` in `shaders/motion.wgsl`.
    pub fn then_about(&mut self, axis: CoordinateAxis, angle: f64, rate: f64, accel: f64) {
        let k = axis as usize;
        let (i, j) = ((k + 1) % 3, (k + 2) % 3);
        let axis_in_ground: Vec3 = self.rotation.column(k).into_owned();
        self.ang_acc += accel * axis_in_ground + rate * self.ang_vel.cross(&axis_in_ground);
        self.ang_vel += rate * axis_in_ground;
        let (s, c) = angle.sin_cos();
        let (r_i, r_j): (Vec3, Vec3) = (
            self.rotation.column(i).into(),
            self.rotation.column(j).into(),
        );
        self.rotation.set_column(i, &(c * r_i + s * r_j));
        self.rotation.set_column(j, &(c * r_j - s * r_i));
    }

    /// The kinematics of a body rotated by this chain after `base` (`R = R_chain · base`),
    /// whose origin moves along `coordinate(k) -> (x, ẋ, ẍ)` for k = 0, 1, 2 (Ground axes).
    pub fn body_kinematics(
        &self,
        base: &Mat3,
        mut coordinate: impl FnMut(usize) -> (f64, f64, f64),
    ) -> BodyKinematics {
        let mut origin = Vec3::zeros();
        let mut lin_vel = Vec3::zeros();
        let mut lin_acc = Vec3::zeros();
        for k in 0..3 {
            (origin[k], lin_vel[k], lin_acc[k]) = coordinate(k);
        }
        BodyKinematics {
            rotation: self.rotation * base,
            origin,
            ang_vel: self.ang_vel,
            lin_vel,
            ang_acc: self.ang_acc,
            lin_acc,
        }
    }
}

/// A coordinate axis of a frame, for [`RotationChain::then_about`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinateAxis {
    /// The frame's x axis.
    X = 0,
    /// The frame's y axis.
    Y = 1,
    /// The frame's z axis.
    Z = 2,
}

/// `(sin, d/dt, d²/dt²)` of `amplitude · sin(rate · t + phase)`.
#[inline]
pub fn sine(amplitude: f64, rate: f64, phase: f64, t: f64) -> (f64, f64, f64) {
    let (s, c) = (rate * t + phase).sin_cos();
    (
        amplitude * s,
        amplitude * rate * c,
        -amplitude * rate * rate * s,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::{quaternion_from_rotation, rotation_from_quaternion};

    #[test]
    fn quaternion_round_trip() {
        for r in [
            [0.3, -0.2, 0.9],
            [3.1, 0.0, 0.0],
            [0.0, -3.1, 0.1],
            [0.0, 0.05, 3.13],
            [0.0, 0.0, 0.0],
        ] {
            let q0 = crate::math::quaternion_from_rotation_vector(r);
            let m = rotation_from_quaternion(&q0).unwrap_or_default();
            let q = quaternion_from_rotation(&m);
            let sign = if q0[0] < 0.0 { -1.0 } else { 1.0 };
            for k in 0..4 {
                assert!(
                    (q[k] - sign * q0[k]).abs() < 1e-14,
                    "{r:?}: {q:?} vs {q0:?}"
                );
            }
        }
    }

    #[test]
    fn chain_of_one_axis_is_a_steady_spin() {
        let axis = Vec3::new(0.0, 0.6, 0.8);
        let mut c = RotationChain::new();
        c.then(&axis, 0.7, 2.0, 3.0);
        assert!((c.ang_vel - 2.0 * axis).norm() < 1e-15);
        assert!((c.ang_acc - 3.0 * axis).norm() < 1e-15);
        assert!((c.rotation - axis_rotation(&axis, 0.7)).norm() < 1e-15);
    }
}
