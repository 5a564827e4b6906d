//! Lanes: [`LANES`] instances computed together, one f64 each in a SIMD value.
//!
//! The CPU fast path runs the same formulas as the scalar reference on [`Lane`] (nalgebra's
//! `simba` wrapper of `wide::f64x4`; in a build for AVX-512, eight lanes: `wide8::Lane8`), so
//! `Vector3<Lane>` and `Matrix3<Lane>` read exactly like the scalar `Vec3` and `Mat3` code they
//! mirror. Every lane operation is an IEEE operation on
//! each lane, with no reassociation, so a lane's result does not depend on which lane it ran in
//! or on its neighbours — the property that keeps results bit-identical across thread counts.
//! The dynamics' products and sums go through [`mul_add`] ([`dot3`], [`cross`], [`mul_vec`],
//! ...): one fused multiply-add where the build targets FMA, which is fewer instructions and
//! one rounding fewer than the scalar reference's product and sum, so lane results agree with
//! the reference to rounding (the lane tests hold them to 1e-12), not bit for bit.

use nalgebra::{Matrix3, Vector3};
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
use simba::simd::SimdComplexField;
use simba::simd::{SimdBool, SimdPartialOrd, SimdValue};

/// Instances per lane value: four (one AVX2 register), or eight in a build for AVX-512
/// (`RUSTFLAGS="-C target-cpu=x86-64-v4"`, one AVX-512 register), which on the 2-core Zen 5
/// VM evaluated 1.25–1.4× as many rolling spheres a second on one thread
/// (`docs/performance-log.md`, 2026-11-28 16:00). The lanes' results are the same bits either
/// way: each lane runs the same IEEE operations.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
pub const LANES: usize = 4;
/// Instances per lane value (see the four-lane build's doc).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
pub const LANES: usize = 8;

/// [`LANES`] f64, one per instance.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
pub type Lane = simba::simd::WideF64x4;
/// [`LANES`] f64, one per instance.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
pub type Lane = wide8::Lane8;

/// Per-lane booleans (masks) of [`Lane`] comparisons.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
pub type LaneMask = simba::simd::WideBoolF64x4;
/// Per-lane booleans (masks) of [`Lane`] comparisons.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
pub type LaneMask = wide8::Mask8;

/// A 3-vector per lane.
pub type LaneVec3 = Vector3<Lane>;

/// A 3×3 matrix per lane.
pub type LaneMat3 = Matrix3<Lane>;

/// `[$e; LANES]` with `$l` bound to each lane's index in turn, written out element by element:
/// a literal array, which the compiler keeps in registers, where `std::array::from_fn` and an
/// array's `map` (a `try_map` call each) stayed calls in the eight-lane build.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
macro_rules! lane_array {
    (|$l:ident| $e:expr) => {{
        [
            { let $l = 0usize; $e },
            { let $l = 1usize; $e },
            { let $l = 2usize; $e },
            { let $l = 3usize; $e },
        ]
    }};
}
/// `[$e; LANES]` with `$l` bound to each lane's index (see the four-lane build's doc).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
macro_rules! lane_array {
    (|$l:ident| $e:expr) => {{
        [
            { let $l = 0usize; $e },
            { let $l = 1usize; $e },
            { let $l = 2usize; $e },
            { let $l = 3usize; $e },
            { let $l = 4usize; $e },
            { let $l = 5usize; $e },
            { let $l = 6usize; $e },
            { let $l = 7usize; $e },
        ]
    }};
}
pub(crate) use lane_array;

pub mod avx512;
mod transpose;
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
pub mod wide8;
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
pub use transpose::four;
pub use transpose::{
    LaneInstances, gather_rows, gather_values, scatter_fixed, scatter_rows, transpose_rows,
};
pub(crate) use transpose::{
    scatter_fixed_with, scatter_rows_with, streaming_fence, streaming_pays,
};

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

/// `|x|` per lane.
#[inline(always)]
pub fn abs(x: Lane) -> Lane {
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    return x.simd_abs();
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return x.abs();
}

/// `√x` per lane.
#[inline(always)]
pub fn sqrt(x: Lane) -> Lane {
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    return x.simd_sqrt();
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return x.sqrt();
}

/// Lanes where `x` is finite (neither NaN nor infinite).
#[inline(always)]
pub fn is_finite(x: Lane) -> LaneMask {
    // |x| ≤ MAX is false for NaN and ±∞.
    abs(x).simd_le(splat(f64::MAX))
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

/// `a b + c` per lane as one fused multiply-add (a single rounding) where the build targets FMA
/// — x86-64-v3 and later, this repository's build (`.cargo/config.toml`), and aarch64 — else a
/// product and a sum. The lane formulas take their products' sums through it ([`dot3`], [`cross`],
/// [`mul_vec`] and the dynamics' sums), which cut a rolling-sphere evaluation by about a
/// tenth of its instructions (`docs/performance-log.md`). Their results then differ from the
/// reference path's unfused ones by rounding only; they are the same bits across thread counts
/// and chunks, and across builds for the same target features.
#[inline(always)]
pub fn mul_add(a: Lane, b: Lane, c: Lane) -> Lane {
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    return simba::simd::WideF64x4(a.0.mul_add(b.0, c.0));
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return a.mul_add(b, c);
}

/// `a · b` of 3-vectors per lane: `a_z b_z + (a_y b_y + a_x b_x)`, fused ([`mul_add`]).
#[inline(always)]
pub fn dot3(a: &LaneVec3, b: &LaneVec3) -> Lane {
    mul_add(a.z, b.z, mul_add(a.y, b.y, a.x * b.x))
}

/// `a × b` per lane, each component one product and one fused multiply-subtract
/// ([`mul_add`]).
#[inline(always)]
pub fn cross(a: &LaneVec3, b: &LaneVec3) -> LaneVec3 {
    LaneVec3::new(
        mul_add(a.y, b.z, -(a.z * b.y)),
        mul_add(a.z, b.x, -(a.x * b.z)),
        mul_add(a.x, b.y, -(a.y * b.x)),
    )
}

/// `m v` per lane, written out with fused sums ([`mul_add`]); nalgebra's generic product
/// compiled, for lane values, to a column loop that tests every lane of β for zero.
#[inline(always)]
pub fn mul_vec(m: &LaneMat3, v: &LaneVec3) -> LaneVec3 {
    LaneVec3::new(
        mul_add(m.m13, v.z, mul_add(m.m12, v.y, m.m11 * v.x)),
        mul_add(m.m23, v.z, mul_add(m.m22, v.y, m.m21 * v.x)),
        mul_add(m.m33, v.z, mul_add(m.m32, v.y, m.m31 * v.x)),
    )
}

/// `mᵀ v` per lane: entry `i` is column `i` of `m` dotted with `v`, fused as [`mul_vec`].
#[inline(always)]
pub fn tr_mul_vec(m: &LaneMat3, v: &LaneVec3) -> LaneVec3 {
    mul_vec(&m.transpose(), v)
}

/// `a b` per lane: column `j` is [`mul_vec`]`(a, b_j)`.
#[inline(always)]
pub fn mul_mat(a: &LaneMat3, b: &LaneMat3) -> LaneMat3 {
    let column = |x: Lane, y: Lane, z: Lane| mul_vec(a, &LaneVec3::new(x, y, z));
    let c0 = column(b.m11, b.m21, b.m31);
    let c1 = column(b.m12, b.m22, b.m32);
    let c2 = column(b.m13, b.m23, b.m33);
    LaneMat3::new(c0.x, c1.x, c2.x, c0.y, c1.y, c2.y, c0.z, c1.z, c2.z)
}

/// `R_GB` from a quaternion per lane, normalised first: the lane twin of
/// [`rotation_from_quaternion`](crate::math::rotation_from_quaternion), same operations in the
/// same order. Lanes with a zero or non-finite quaternion come out non-finite (the caller
/// checks), where the scalar function returns `None`.
#[inline(always)]
pub fn rotation_from_quaternion(q: &[Lane; 4]) -> LaneMat3 {
    let inverse_norm = splat(1.0) / sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    let (w, x, y, z) = (
        q[0] * inverse_norm,
        q[1] * inverse_norm,
        q[2] * inverse_norm,
        q[3] * inverse_norm,
    );
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

/// The identity in every lane, entry by entry: nalgebra's `identity` (`from_diagonal_element`)
/// stayed a call, which took a twentieth of a small batch's evaluation call (building a chunk
/// and the kinematics' Ground entries).
#[inline(always)]
pub fn identity3() -> LaneMat3 {
    let (one, zero) = (splat(1.0), splat(0.0));
    LaneMat3::new(one, zero, zero, zero, one, zero, zero, zero, one)
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
    let norm = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    let ok = is_finite(norm) & norm.simd_gt(splat(0.0));
    let inverse_norm = splat(1.0) / norm;
    for e in q.iter_mut() {
        *e *= inverse_norm;
    }
    ok
}

#[cfg(test)]
mod tests;
