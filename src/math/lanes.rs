//! Lanes: [`LANES`] instances computed together, one f64 each in a SIMD value.
//!
//! The CPU fast path runs the same formulas as the scalar reference on [`Lane`] (nalgebra's
//! `simba` wrapper of `wide::f64x4`), so `Vector3<Lane>` and `Matrix3<Lane>` read exactly like
//! the scalar `Vec3` and `Mat3` code they mirror. Every lane operation is the IEEE operation of
//! the scalar code on each lane (no fused multiply-add, no reassociation), so a lane's result
//! does not depend on which lane it ran in or on its neighbours — the property that keeps results
//! bit-identical across thread counts.

use nalgebra::{Matrix3, Vector3};
use simba::simd::{SimdBool, SimdComplexField, SimdPartialOrd, SimdValue};

/// Instances per lane value.
pub const LANES: usize = 4;

/// Four f64, one per instance.
pub type Lane = simba::simd::WideF64x4;

/// Per-lane booleans (masks) of [`Lane`] comparisons.
pub type LaneMask = simba::simd::WideBoolF64x4;

/// A 3-vector per lane.
pub type LaneVec3 = Vector3<Lane>;

/// A 3×3 matrix per lane.
pub type LaneMat3 = Matrix3<Lane>;

/// Every lane `x`.
#[inline(always)]
pub fn splat(x: f64) -> Lane {
    Lane::splat(x)
}

/// The lanes of `a`.
#[inline(always)]
pub fn lanes(a: [f64; LANES]) -> Lane {
    Lane::from(a)
}

/// The values of `x`, lane by lane.
#[inline(always)]
pub fn values(x: Lane) -> [f64; LANES] {
    x.into()
}

/// `value(l)` in lane `l`.
#[inline(always)]
pub fn from_fn(mut value: impl FnMut(usize) -> f64) -> Lane {
    lanes(std::array::from_fn(&mut value))
}

/// Values `0..N` of four rows, one row per lane, as `N` lane values: the transpose that gathers
/// a chunk's per-instance columns. Written out (no closures) so that it inlines wherever it is
/// used; one bounds check per row.
#[inline(always)]
pub fn transpose_rows<const N: usize>(rows: [&[f64]; LANES]) -> [Lane; N] {
    let [a, b, c, d] = rows;
    let (a, b, c, d) = (&a[..N], &b[..N], &c[..N], &d[..N]);
    let mut out = [splat(0.0); N];
    for j in 0..N {
        out[j] = lanes([a[j], b[j], c[j], d[j]]);
    }
    out
}

/// Entry `i` of `column` for each instance `i` of `instances`, one per lane.
#[inline(always)]
pub fn gather_values(column: &[f64], instances: &[usize; LANES]) -> Lane {
    let [a, b, c, d] = *instances;
    lanes([column[a], column[b], column[c], column[d]])
}

/// Rows `instances` of a column of `N`-value rows, as `N` lane values.
#[inline(always)]
pub fn gather_rows<const N: usize>(column: &[[f64; N]], instances: &[usize; LANES]) -> [Lane; N] {
    let [a, b, c, d] = *instances;
    transpose_rows([&column[a], &column[b], &column[c], &column[d]])
}

/// The 3-vector `v(l)` in lane `l`.
#[inline(always)]
pub fn vec3_from_fn(mut v: impl FnMut(usize) -> [f64; 3]) -> LaneVec3 {
    let a: [[f64; 3]; LANES] = std::array::from_fn(&mut v);
    LaneVec3::new(
        from_fn(|l| a[l][0]),
        from_fn(|l| a[l][1]),
        from_fn(|l| a[l][2]),
    )
}

/// Lane `l` of a 3-vector.
#[inline(always)]
pub fn vec3_lane(v: &LaneVec3, l: usize) -> crate::math::Vec3 {
    crate::math::Vec3::new(v.x.extract(l), v.y.extract(l), v.z.extract(l))
}

/// Lane `l` of a 3×3 matrix.
#[inline(always)]
pub fn mat3_lane(m: &LaneMat3, l: usize) -> crate::math::Mat3 {
    m.map(|x| x.extract(l))
}

/// Every lane of a scalar 3-vector.
#[inline(always)]
pub fn splat_vec3(v: &crate::math::Vec3) -> LaneVec3 {
    v.map(splat)
}

/// Every lane of a scalar 3×3 matrix.
#[inline(always)]
pub fn splat_mat3(m: &crate::math::Mat3) -> LaneMat3 {
    m.map(splat)
}

/// Writes lane `l` of `v` from a scalar 3-vector.
#[inline(always)]
pub fn set_vec3_lane(v: &mut LaneVec3, l: usize, x: &crate::math::Vec3) {
    for k in 0..3 {
        v[k].replace(l, x[k]);
    }
}

/// Writes lane `l` of `m` from a scalar 3×3 matrix.
#[inline(always)]
pub fn set_mat3_lane(m: &mut LaneMat3, l: usize, x: &crate::math::Mat3) {
    for k in 0..9 {
        m[k].replace(l, x[k]);
    }
}

/// Lanes where `x` is finite (neither NaN nor infinite).
#[inline(always)]
pub fn is_finite(x: Lane) -> LaneMask {
    // |x| ≤ MAX is false for NaN and ±∞.
    x.simd_abs().simd_le(splat(f64::MAX))
}

/// Bit `l` set where lane `l` of `mask` is true.
#[inline(always)]
pub fn bits(mask: LaneMask) -> u32 {
    mask.bitmask() as u32
}

/// `x` where `mask`, else `otherwise`.
#[inline(always)]
pub fn select(mask: LaneMask, x: Lane, otherwise: Lane) -> Lane {
    x.select(mask, otherwise)
}

/// `R_GB` from a quaternion per lane, normalised first: the lane twin of
/// [`rotation_from_quaternion`](crate::math::rotation_from_quaternion), same operations in the
/// same order. Lanes with a zero or non-finite quaternion come out non-finite (the caller
/// checks), where the scalar function returns `None`.
#[inline(always)]
pub fn rotation_from_quaternion(q: &[Lane; 4]) -> LaneMat3 {
    let norm = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).simd_sqrt();
    let (w, x, y, z) = (q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm);
    let (one, two) = (splat(1.0), splat(2.0));
    LaneMat3::new(
        one - two * (y * y + z * z),
        two * (x * y - w * z),
        two * (x * z + w * y),
        two * (x * y + w * z),
        one - two * (x * x + z * z),
        two * (y * z - w * x),
        two * (x * z - w * y),
        two * (y * z + w * x),
        one - two * (x * x + y * y),
    )
}

/// `q̇ = ½ E(e) w`: the lane twin of [`quaternion_rate`](crate::math::quaternion_rate).
#[inline(always)]
pub fn quaternion_rate(e: &[Lane; 4], w: &LaneVec3) -> [Lane; 4] {
    let half = splat(0.5);
    [
        half * (-e[1] * w.x - e[2] * w.y - e[3] * w.z),
        half * (e[0] * w.x + e[3] * w.y - e[2] * w.z),
        half * (-e[3] * w.x + e[0] * w.y + e[1] * w.z),
        half * (e[2] * w.x - e[1] * w.y + e[0] * w.z),
    ]
}

/// Normalises a quaternion per lane: the lane twin of
/// [`normalize_quaternion`](crate::math::normalize_quaternion); the mask says where it could
/// (norm finite and > 0).
#[inline(always)]
pub fn normalize_quaternion(q: &mut [Lane; 4]) -> LaneMask {
    let norm = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).simd_sqrt();
    let ok = is_finite(norm) & norm.simd_gt(splat(0.0));
    for e in q.iter_mut() {
        *e /= norm;
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_rotation_and_rate_equal_the_scalar_functions_bit_for_bit() {
        let qs = [
            [0.6, 0.2, -0.5, 0.4],
            [1.0, 0.0, 0.0, 0.0],
            [0.1, -0.7, 0.3, 0.2],
            [2.0, 1.0, -1.0, 0.5],
        ];
        let q: [Lane; 4] = std::array::from_fn(|k| from_fn(|l| qs[l][k]));
        let w = vec3_from_fn(|l| [0.3 * l as f64, -1.2, 0.7 + l as f64]);
        let r = rotation_from_quaternion(&q);
        let rate = quaternion_rate(&q, &w);
        for (l, q) in qs.iter().enumerate() {
            let scalar = crate::math::rotation_from_quaternion(q).unwrap();
            assert_eq!(mat3_lane(&r, l), scalar);
            let scalar_rate = crate::math::quaternion_rate(q, &vec3_lane(&w, l));
            assert_eq!(rate.map(|x| x.extract(l)), scalar_rate);
        }
        let mut bad = [splat(0.0), splat(0.0), splat(0.0), from_fn(|l| l as f64)];
        bad[0].replace(3, f64::NAN);
        assert_eq!(bits(normalize_quaternion(&mut bad)), 0b0110);
        assert_eq!(
            bits(is_finite(lanes([1.0, f64::INFINITY, f64::NAN, -3.0]))),
            0b1001
        );
    }
}
