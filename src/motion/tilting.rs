//! The tilting plate of the golden files (`tilt_trajectories.jsonl`, `plane_motion.kind =
//! "tilting"`): two pins and a sinusoidal translation.
//!
//! ```text
//! R_GF(t) = Rot(axis1, θ1(t)) · Rot(axis2, θ2(t)) · R0      θk(t) = Ak sin(ωk t + φk)
//! p_GFo(t)_i = offset_i + amplitude_i sin(rate_i t + phase_i)       (i = x, y, z in Ground)
//! ```
//! so, with `a2' = Rot(axis1, θ1) axis2`: `w_F = θ̇1 axis1 + θ̇2 a2'`,
//! `b_F = θ̈1 axis1 + θ̈2 a2' + θ̇1 θ̇2 (axis1 × a2')`, `v_F = ṗ`, `a_F = p̈` (the sines'
//! derivatives). `t` is the instance's own time. Twin: `shaders/motion/tilting.wgsl`.

use super::lanes::{self, RotationChainLanes};
use super::{MotionLaw, RotationChain, WgslMotion, sine};
use crate::math::lanes::{Lane, rotation_from_quaternion as rotation_from_quaternion_lanes};
use crate::math::rotation_from_quaternion;
use crate::model::{BodyKinematics, BodyLanes, Check, ParamLanes, ParamSpec, Params};

/// The sum-of-sines tilt and translation law (see the module documentation). Parameters, in
/// order (28 values): `axis1` (×3), `axis2` (×3) (directions, normalised), `angle_amplitude` (×2)
/// (rad), `angle_rate` (×2) (rad/s), `angle_phase` (×2) (rad), `base_rotation` (×4) (quaternion
/// `R0`), `origin_offset` (×3), `origin_amplitude` (×3) (m), `origin_rate` (×3) (rad/s),
/// `origin_phase` (×3) (rad). Defaults: axes x and y, every amplitude 0 (a plate at rest at the
/// origin).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TiltingMotion;

/// Parameter names of [`TiltingMotion`], in order.
pub const TILTING_PARAMS: [&str; 10] = [
    "axis1",
    "axis2",
    "angle_amplitude",
    "angle_rate",
    "angle_phase",
    "base_rotation",
    "origin_offset",
    "origin_amplitude",
    "origin_rate",
    "origin_phase",
];

impl MotionLaw for TiltingMotion {
    fn kind_name(&self) -> &'static str {
        "tilting"
    }

    fn params(&self) -> Vec<ParamSpec> {
        let spec = |name, default: &[f64], check| ParamSpec {
            name,
            default: default.to_vec(),
            check,
        };
        vec![
            spec("axis1", &[1.0, 0.0, 0.0], Check::Direction),
            spec("axis2", &[0.0, 1.0, 0.0], Check::Direction),
            spec("angle_amplitude", &[0.0; 2], Check::Finite),
            spec("angle_rate", &[0.0; 2], Check::Finite),
            spec("angle_phase", &[0.0; 2], Check::Finite),
            spec("base_rotation", &[1.0, 0.0, 0.0, 0.0], Check::Quaternion),
            spec("origin_offset", &[0.0; 3], Check::Finite),
            spec("origin_amplitude", &[0.0; 3], Check::Finite),
            spec("origin_rate", &[0.0; 3], Check::Finite),
            spec("origin_phase", &[0.0; 3], Check::Finite),
        ]
    }

    fn evaluate(&self, p: &Params<'_>, t: f64) -> BodyKinematics {
        let (amplitude, rate, phase) = (p.get(2), p.get(3), p.get(4));
        let mut chain = RotationChain::new();
        for (k, axis) in [p.vec3(0), p.vec3(1)].iter().enumerate() {
            let (angle, angle_rate, angle_acc) = sine(amplitude[k], rate[k], phase[k], t);
            chain.then(axis, angle, angle_rate, angle_acc);
        }
        let base = rotation_from_quaternion(p.get(5)).unwrap_or_default();
        let (offset, o_amp, o_rate, o_phase) = (p.get(6), p.get(7), p.get(8), p.get(9));
        chain.body_kinematics(&base, |i| {
            let (x, v, a) = sine(o_amp[i], o_rate[i], o_phase[i], t);
            (offset[i] + x, v, a)
        })
    }

    fn evaluate_lanes(&self, p: &ParamLanes<'_>, t: Lane) -> BodyLanes {
        let value = |k, i| p.value(k, i);
        let mut chain = RotationChainLanes::new();
        for (k, axis) in [p.vec3(0), p.vec3(1)].iter().enumerate() {
            let (angle, angle_rate, angle_acc) =
                lanes::sine(value(2, k), value(3, k), value(4, k), t);
            chain.then(axis, angle, angle_rate, angle_acc);
        }
        let base = rotation_from_quaternion_lanes(&p.array::<4>(5));
        chain.body_kinematics(&base, |i| {
            let (x, v, a) = lanes::sine(value(7, i), value(8, i), value(9, i), t);
            (value(6, i) + x, v, a)
        })
    }

    fn wgsl(&self) -> Option<WgslMotion> {
        Some(WgslMotion {
            file: "motion/tilting.wgsl".into(),
            source: include_str!("../../shaders/motion/tilting.wgsl").into(),
            evaluate: "tilting_motion(p, t)".into(),
        })
    }
}
