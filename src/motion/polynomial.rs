//! A polynomial in time per coordinate: three translations of the origin in Ground and three
//! gimbal angles.
//!
//! ```text
//! τ = t − t0
//! p_GFo(t)_i = Σ_k position[i][k] τ^k                  (i = x, y, z)
//! R_GF(t)    = Rot(x, θ1) · Rot(y, θ2) · Rot(z, θ3) · R0,   θj(t) = Σ_k angles[j][k] τ^k
//! ```
//! The rotations are body-fixed X-Y-Z (a gimbal: each axis in the frame the previous ones
//! reached); velocity and acceleration follow from `motion::RotationChain`.
//! Degrees 0 to [`MAX_DEGREE`] (a quintic covers minimum-jerk moves). Twin:
//! `shaders/motion/polynomial.wgsl`.

use super::lanes::{self, RotationChainLanes};
use super::{CoordinateAxis, MotionLaw, RotationChain, WgslMotion};
use crate::error::{Error, Result};
use crate::math::lanes::{Lane, rotation_from_quaternion as rotation_from_quaternion_lanes};
use crate::math::rotation_from_quaternion;
use crate::model::{BodyKinematics, BodyLanes, Check, ParamLanes, ParamSpec, Params};

/// Highest degree of [`PolynomialMotion`].
pub const MAX_DEGREE: usize = 5;

/// A polynomial law of degree `degree` (see the module documentation). Parameters, in order:
/// `t0` (×1) (s), `base_rotation` (×4) (quaternion `R0`), `position` (×3 (degree + 1))
/// (coefficients of x, then y, then z, each from τ⁰ up), `angles` (×3 (degree + 1)) (rad,
/// likewise for θ1, θ2, θ3). Defaults: at rest at the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolynomialMotion {
    degree: usize,
}

impl PolynomialMotion {
    /// A law of the given degree (0 to [`MAX_DEGREE`]).
    pub fn new(degree: usize) -> Result<Self> {
        if degree > MAX_DEGREE {
            return Err(Error::InvalidValue {
                field: "polynomial.degree".into(),
                instance: 0,
                value: degree.to_string(),
                accepted: format!("an integer in 0..={MAX_DEGREE}"),
            });
        }
        Ok(Self { degree })
    }

    /// The degree.
    pub fn degree(&self) -> usize {
        self.degree
    }
}

/// `(p(τ), p'(τ), p''(τ))` of `Σ c[k] τ^k` (Horner).
pub fn polynomial(c: &[f64], tau: f64) -> (f64, f64, f64) {
    let (mut p, mut d, mut dd) = (0.0, 0.0, 0.0);
    for &ck in c.iter().rev() {
        dd = dd * tau + 2.0 * d;
        d = d * tau + p;
        p = p * tau + ck;
    }
    (p, d, dd)
}

impl MotionLaw for PolynomialMotion {
    fn kind_name(&self) -> &'static str {
        "polynomial"
    }

    fn params(&self) -> Vec<ParamSpec> {
        let n = 3 * (self.degree + 1);
        vec![
            ParamSpec {
                name: "t0",
                default: vec![0.0],
                check: Check::Finite,
            },
            ParamSpec {
                name: "base_rotation",
                default: vec![1.0, 0.0, 0.0, 0.0],
                check: Check::Quaternion,
            },
            ParamSpec {
                name: "position",
                default: vec![0.0; n],
                check: Check::Finite,
            },
            ParamSpec {
                name: "angles",
                default: vec![0.0; n],
                check: Check::Finite,
            },
        ]
    }

    fn evaluate(&self, p: &Params<'_>, t: f64) -> BodyKinematics {
        let tau = t - p.get(0)[0];
        let w = self.degree + 1;
        let (position, angles) = (p.get(2), p.get(3));
        let mut chain = RotationChain::new();
        for (j, axis) in [CoordinateAxis::X, CoordinateAxis::Y, CoordinateAxis::Z]
            .into_iter()
            .enumerate()
        {
            let (angle, rate, accel) = polynomial(&angles[j * w..(j + 1) * w], tau);
            chain.then_about(axis, angle, rate, accel);
        }
        let base = rotation_from_quaternion(p.get(1)).unwrap_or_default();
        chain.body_kinematics(&base, |i| polynomial(&position[i * w..(i + 1) * w], tau))
    }

    fn evaluate_lanes(&self, p: &ParamLanes<'_>, t: Lane) -> BodyLanes {
        let tau = t - p.value(0, 0);
        let w = self.degree + 1;
        let mut chain = RotationChainLanes::new();
        for (j, axis) in [CoordinateAxis::X, CoordinateAxis::Y, CoordinateAxis::Z]
            .into_iter()
            .enumerate()
        {
            let (angle, rate, accel) = lanes::polynomial(w, |k| p.value(3, j * w + k), tau);
            chain.then_about(axis, angle, rate, accel);
        }
        let base = rotation_from_quaternion_lanes(&p.array::<4>(1));
        chain.body_kinematics(&base, |i| {
            lanes::polynomial(w, |k| p.value(2, i * w + k), tau)
        })
    }

    fn wgsl(&self) -> Option<WgslMotion> {
        Some(WgslMotion {
            file: "motion/polynomial.wgsl".into(),
            source: include_str!("../../shaders/motion/polynomial.wgsl").into(),
            evaluate: format!("polynomial_motion(p, t, {}u)", self.degree),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horner_derivatives() {
        // 1 + 2τ + 3τ² + 4τ³ at τ = 0.5.
        let (p, d, dd) = polynomial(&[1.0, 2.0, 3.0, 4.0], 0.5);
        assert!((p - (1.0 + 1.0 + 0.75 + 0.5)).abs() < 1e-15);
        assert!((d - (2.0 + 3.0 + 3.0)).abs() < 1e-15);
        assert!((dd - (6.0 + 12.0)).abs() < 1e-15);
    }

    #[test]
    fn degree_is_bounded() {
        assert!(PolynomialMotion::new(MAX_DEGREE).is_ok());
        assert!(PolynomialMotion::new(MAX_DEGREE + 1).is_err());
    }
}
