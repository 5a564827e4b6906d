//! Small f64 helpers shared by the CPU formulas: quaternions, frames, inertia packing.
//!
//! Conventions follow `physics.md` §1: quaternions are scalar-first `[e0, e1, e2, e3]` of `R_GB`;
//! inertia is packed `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]` as tensor elements.

pub mod lanes;

use nalgebra::{Matrix3, Vector3};

/// 3-vector of f64.
pub type Vec3 = Vector3<f64>;
/// 3×3 matrix of f64.
pub type Mat3 = Matrix3<f64>;

/// Converts a `[f64; 3]` column entry to a vector.
#[inline]
pub fn vec3(a: &[f64]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

/// Rotation matrix of a scalar-first quaternion, normalising it first (as Simbody does when it
/// realises a `Rotation` from a quaternion). Returns `None` for a zero or non-finite quaternion.
pub fn rotation_from_quaternion(q: &[f64]) -> Option<Mat3> {
    let norm = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return None;
    }
    let inverse_norm = 1.0 / norm;
    let (w, x, y, z) = (
        q[0] * inverse_norm,
        q[1] * inverse_norm,
        q[2] * inverse_norm,
        q[3] * inverse_norm,
    );
    Some(Mat3::new(
        1.0 - 2.0 * (y * y + z * z),
        2.0 * (x * y - w * z),
        2.0 * (x * z + w * y),
        2.0 * (x * y + w * z),
        1.0 - 2.0 * (x * x + z * z),
        2.0 * (y * z - w * x),
        2.0 * (x * z - w * y),
        2.0 * (y * z + w * x),
        1.0 - 2.0 * (x * x + y * y),
    ))
}

/// The unit quaternion `[cos(θ/2), sin(θ/2) n]` of the rotation vector `θ n`.
pub fn quaternion_from_rotation_vector(r: [f64; 3]) -> [f64; 4] {
    let angle = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
    if angle < 1e-300 {
        return [1.0, 0.0, 0.0, 0.0];
    }
    let s = (0.5 * angle).sin() / angle;
    [(0.5 * angle).cos(), s * r[0], s * r[1], s * r[2]]
}

/// `Rot(a, θ)`: the right-hand rotation by `θ` about the unit vector `a` (Rodrigues:
/// `cos θ 1 + sin θ [a]× + (1 − cos θ) a aᵀ`).
///
/// Written element by element, as its WGSL twin in `shaders/motion.wgsl`: the matrix
/// expression built three temporaries and summed them, several times the arithmetic.
pub fn axis_rotation(a: &Vec3, angle: f64) -> Mat3 {
    let (s, c) = angle.sin_cos();
    rodrigues(a, s, c)
}

/// `Rot(a, θ)` from `s = sin θ` and `c = cos θ`, element by element, for `f64` and for lane
/// values alike ([`axis_rotation`] and its lane twin in `motion::lanes` call it, so the two
/// give the same bits per instance).
#[inline(always)]
pub fn rodrigues<T>(a: &Vector3<T>, s: T, c: T) -> Matrix3<T>
where
    T: nalgebra::Scalar
        + Copy
        + num_traits::One
        + std::ops::Add<Output = T>
        + std::ops::Sub<Output = T>
        + std::ops::Mul<Output = T>,
{
    let k = T::one() - c;
    Matrix3::new(
        c + k * a.x * a.x,
        k * a.x * a.y - s * a.z,
        k * a.x * a.z + s * a.y,
        k * a.x * a.y + s * a.z,
        c + k * a.y * a.y,
        k * a.y * a.z - s * a.x,
        k * a.x * a.z - s * a.y,
        k * a.y * a.z + s * a.x,
        c + k * a.z * a.z,
    )
}

/// The unit quaternion `[e0, e1, e2, e3]` of a rotation matrix, with `e0 ≥ 0` (Simbody's sign;
/// Shepperd's method: the largest of the four candidates is taken, so no division is small).
pub fn quaternion_from_rotation(r: &Mat3) -> [f64; 4] {
    let trace = r[(0, 0)] + r[(1, 1)] + r[(2, 2)];
    let candidates = [trace, r[(0, 0)], r[(1, 1)], r[(2, 2)]];
    let k = (0..4)
        .max_by(|a, b| candidates[*a].total_cmp(&candidates[*b]))
        .unwrap_or(0);
    let mut q = match k {
        0 => {
            let s = 2.0 * (1.0 + trace).sqrt();
            [
                0.25 * s,
                (r[(2, 1)] - r[(1, 2)]) / s,
                (r[(0, 2)] - r[(2, 0)]) / s,
                (r[(1, 0)] - r[(0, 1)]) / s,
            ]
        }
        1 => {
            let s = 2.0 * (1.0 + r[(0, 0)] - r[(1, 1)] - r[(2, 2)]).sqrt();
            [
                (r[(2, 1)] - r[(1, 2)]) / s,
                0.25 * s,
                (r[(0, 1)] + r[(1, 0)]) / s,
                (r[(0, 2)] + r[(2, 0)]) / s,
            ]
        }
        2 => {
            let s = 2.0 * (1.0 - r[(0, 0)] + r[(1, 1)] - r[(2, 2)]).sqrt();
            [
                (r[(0, 2)] - r[(2, 0)]) / s,
                (r[(0, 1)] + r[(1, 0)]) / s,
                0.25 * s,
                (r[(1, 2)] + r[(2, 1)]) / s,
            ]
        }
        _ => {
            let s = 2.0 * (1.0 - r[(0, 0)] - r[(1, 1)] + r[(2, 2)]).sqrt();
            [
                (r[(1, 0)] - r[(0, 1)]) / s,
                (r[(0, 2)] + r[(2, 0)]) / s,
                (r[(1, 2)] + r[(2, 1)]) / s,
                0.25 * s,
            ]
        }
    };
    if q[0] < 0.0 {
        q.iter_mut().for_each(|e| *e = -*e);
    }
    normalize_quaternion(&mut q);
    q
}

/// Normalises a quaternion in place; `false` (and nothing written) when it is zero or not finite.
pub fn normalize_quaternion(q: &mut [f64]) -> bool {
    let norm = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return false;
    }
    let inverse_norm = 1.0 / norm;
    for e in q.iter_mut().take(4) {
        *e *= inverse_norm;
    }
    true
}

/// The symmetric inertia tensor from its packed `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]` form.
pub fn inertia_matrix(i: &[f64]) -> Mat3 {
    Mat3::new(i[0], i[3], i[4], i[3], i[1], i[5], i[4], i[5], i[2])
}

/// Cross-product matrix `[a]×`, so that `[a]× b = a × b`.
#[inline]
pub fn cross_matrix(a: &Vec3) -> Mat3 {
    Mat3::new(0.0, -a.z, a.y, a.z, 0.0, -a.x, -a.y, a.x, 0.0)
}

/// Quaternion rate `ė = ½ E(e) w` for an angular velocity `w` expressed in Ground (`physics.md` §1).
pub fn quaternion_rate(e: &[f64], w: &Vec3) -> [f64; 4] {
    [
        0.5 * (-e[1] * w.x - e[2] * w.y - e[3] * w.z),
        0.5 * (e[0] * w.x + e[3] * w.y - e[2] * w.z),
        0.5 * (-e[3] * w.x + e[0] * w.y + e[1] * w.z),
        0.5 * (e[2] * w.x - e[1] * w.y + e[0] * w.z),
    ]
}

/// True when every value is finite.
#[inline]
pub fn all_finite(v: &[f64]) -> bool {
    v.iter().all(|x| x.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_of_quarter_turn_about_z() {
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let r = rotation_from_quaternion(&[h, 0.0, 0.0, h]).unwrap();
        let x = r * Vec3::x();
        assert!((x - Vec3::y()).norm() < 1e-15);
    }

    #[test]
    fn quaternion_rate_matches_finite_difference_of_rotation() {
        // R(t) = exp([w]× t) R0  ⇒  dR/dt = [w]× R0.
        let q = [0.6, 0.2, -0.5, 0.4];
        let mut q = q;
        normalize_quaternion(&mut q);
        let w = Vec3::new(0.3, -1.2, 0.7);
        let qd = quaternion_rate(&q, &w);
        let h = 1e-6;
        let qp: Vec<f64> = (0..4).map(|k| q[k] + h * qd[k]).collect();
        let qm: Vec<f64> = (0..4).map(|k| q[k] - h * qd[k]).collect();
        let dr = (rotation_from_quaternion(&qp).unwrap() - rotation_from_quaternion(&qm).unwrap())
            / (2.0 * h);
        let expected = cross_matrix(&w) * rotation_from_quaternion(&q).unwrap();
        assert!((dr - expected).norm() < 1e-8, "{dr} vs {expected}");
    }
}
