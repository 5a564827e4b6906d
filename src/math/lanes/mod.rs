//! Lanes: [`LANES`] instances computed together, one f64 each in a SIMD value.
//!
//! The CPU fast path runs the same formulas as the scalar reference on [`Lane`] (nalgebra's
//! `simba` wrapper of `wide::f64x4`), so `Vector3<Lane>` and `Matrix3<Lane>` read exactly like
//! the scalar `Vec3` and `Mat3` code they mirror. Every lane operation is an IEEE operation on
//! each lane, with no reassociation, so a lane's result does not depend on which lane it ran in
//! or on its neighbours — the property that keeps results bit-identical across thread counts.
//! The dynamics' products and sums go through [`mul_add`] ([`dot3`], [`cross`], [`mul_vec`],
//! ...): one fused multiply-add where the build targets FMA, which is fewer instructions and
//! one rounding fewer than the scalar reference's product and sum, so lane results agree with
//! the reference to rounding (the lane tests hold them to 1e-12), not bit for bit.

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

pub mod avx512;
mod transpose;
pub use transpose::{
    LaneInstances, four, gather_rows, gather_values, scatter_fixed, scatter_rows, transpose_rows,
};
pub(crate) use transpose::{scatter_fixed_with, scatter_rows_with, streaming_fence};

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

/// `a b + c` per lane as one fused multiply-add (a single rounding) where the build targets FMA
/// — x86-64-v3 and later, this repository's build (`.cargo/config.toml`), and aarch64 — else a
/// product and a sum. The lane formulas take their products' sums through it ([`dot3`], [`cross`],
/// [`mul_vec`] and the dynamics' sums), which cut a rolling-sphere evaluation by about a
/// tenth of its instructions (`docs/performance-log.md`). Their results then differ from the
/// reference path's unfused ones by rounding only; they are the same bits across thread counts
/// and chunks, and across builds for the same target features.
#[inline(always)]
pub fn mul_add(a: Lane, b: Lane, c: Lane) -> Lane {
    simba::simd::WideF64x4(a.0.mul_add(b.0, c.0))
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

    #[test]
    fn fused_products_are_the_lane_by_lane_fused_formulas() {
        // What a fused multiply-add gives where the build has FMA, a product and a sum where
        // it has not: the lane helpers must be that, lane by lane and bit for bit.
        let fused = |a: f64, b: f64, c: f64| {
            // wide fuses with x86's FMA and with aarch64's NEON.
            if cfg!(any(
                target_feature = "fma",
                all(target_arch = "aarch64", target_feature = "neon")
            )) {
                a.mul_add(b, c)
            } else {
                a * b + c
            }
        };
        // Values of mixed signs and magnitudes, so that every rounding shows.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            (unit - 0.5) * 10f64.powi((state % 7) as i32 - 3)
        };
        let same = |x: Lane, expected: [f64; LANES]| {
            assert_eq!(values(x).map(f64::to_bits), expected.map(f64::to_bits));
        };
        for _ in 0..50 {
            let a = LaneMat3::from_fn(|_, _| from_fn(|_| next()));
            let b = LaneMat3::from_fn(|_, _| from_fn(|_| next()));
            let v = LaneVec3::from_fn(|_, _| from_fn(|_| next()));
            let w = LaneVec3::from_fn(|_, _| from_fn(|_| next()));
            let at = |m: &LaneMat3, i: usize, j: usize, l: usize| m[(i, j)].extract(l);
            let row_dot = |m: &LaneMat3, i: usize, x: &LaneVec3, l: usize| {
                let x = vec3_lane(x, l);
                fused(
                    at(m, i, 2, l),
                    x.z,
                    fused(at(m, i, 1, l), x.y, at(m, i, 0, l) * x.x),
                )
            };
            let (av, atv, ab) = (mul_vec(&a, &v), tr_mul_vec(&a, &v), mul_mat(&a, &b));
            let (d, c) = (dot3(&v, &w), cross(&v, &w));
            for i in 0..3 {
                same(av[i], std::array::from_fn(|l| row_dot(&a, i, &v, l)));
                let at_lane = |l| mat3_lane(&a, l).transpose();
                same(
                    atv[i],
                    std::array::from_fn(|l| {
                        let (m, x) = (at_lane(l), vec3_lane(&v, l));
                        fused(m[(i, 2)], x.z, fused(m[(i, 1)], x.y, m[(i, 0)] * x.x))
                    }),
                );
                for j in 0..3 {
                    let bj = LaneVec3::new(b[(0, j)], b[(1, j)], b[(2, j)]);
                    same(ab[(i, j)], std::array::from_fn(|l| row_dot(&a, i, &bj, l)));
                }
            }
            same(
                d,
                std::array::from_fn(|l| {
                    let (x, y) = (vec3_lane(&v, l), vec3_lane(&w, l));
                    fused(x.z, y.z, fused(x.y, y.y, x.x * y.x))
                }),
            );
            for l in 0..LANES {
                let (x, y) = (vec3_lane(&v, l), vec3_lane(&w, l));
                let expected = [
                    fused(x.y, y.z, -(x.z * y.y)),
                    fused(x.z, y.x, -(x.x * y.z)),
                    fused(x.x, y.y, -(x.y * y.x)),
                ];
                let got: [f64; 3] = vec3_lane(&c, l).into();
                assert_eq!(got.map(f64::to_bits), expected.map(f64::to_bits));
                // And within rounding of the exact cross product.
                let exact = x.cross(&y);
                assert!((vec3_lane(&c, l) - exact).norm() <= 1e-15 * (x.norm() * y.norm()));
            }
        }
    }

    /// Distinct values, NaNs and signed zeros among them, so that a moved bit shows.
    fn value(row: usize, j: usize) -> f64 {
        match (row + 3 * j) % 7 {
            0 => -0.0,
            1 => f64::from_bits(0x7ff8_0000_0000_0001 + j as u64),
            _ => row as f64 * 100.0 + j as f64 + 0.25,
        }
    }

    fn transposed<const N: usize>() {
        // Rows at the very end of their slices: a read past a row would panic or show.
        let rows: Vec<Vec<f64>> = (0..LANES)
            .map(|r| (0..N).map(|j| value(r, j)).collect())
            .collect();
        let out: [Lane; N] = transpose_rows([&rows[0], &rows[1], &rows[2], &rows[3]]);
        for (j, x) in out.iter().enumerate() {
            let got = values(*x).map(f64::to_bits);
            let want: [u64; LANES] = std::array::from_fn(|l| value(l, j).to_bits());
            assert_eq!(got, want, "value {j} of rows of {N}");
        }
        let column: Vec<[f64; N]> = (0..LANES)
            .map(|r| std::array::from_fn(|j| value(r, j)))
            .collect();
        let gathered: [Lane; N] = gather_rows(&column, &[3, 1, 1, 0]);
        for (j, x) in gathered.iter().enumerate() {
            let want = [3, 1, 1, 0].map(|r| value(r, j).to_bits());
            assert_eq!(values(*x).map(f64::to_bits), want);
        }
    }

    /// A chunk's instances gather the same bits whether they are consecutive (one bounds
    /// check, one load for a column of single values) or not, from every form of column.
    #[test]
    fn lane_instances_gather_the_same_bits_by_either_route() {
        let rows = 9;
        let column: Vec<[f64; 7]> = (0..rows)
            .map(|r| std::array::from_fn(|j| value(r, j)))
            .collect();
        let flat: Vec<f64> = column.as_flattened().to_vec();
        let single: Vec<f64> = (0..rows).map(|r| value(r, 2)).collect();
        let bits = |x: &[Lane]| -> Vec<[u64; LANES]> {
            x.iter().map(|v| values(*v).map(f64::to_bits)).collect()
        };
        for lanes in [
            [0, 1, 2, 3],
            [5, 6, 7, 8],
            [3, 1, 1, 0],
            [7, 8, 8, 8],
            [2, 3, 4, 4],
        ] {
            let instances = LaneInstances::new(lanes);
            let consecutive = lanes.iter().enumerate().all(|(l, &i)| i == lanes[0] + l);
            assert_eq!(instances.is_run(), consecutive, "{lanes:?}");
            assert_eq!(instances.lanes(), lanes);
            assert_eq!(instances[3], lanes[3]);
            let want: [Lane; 7] = gather_rows(&column, &lanes);
            assert_eq!(bits(&instances.rows(&column)), bits(&want), "{lanes:?}");
            assert_eq!(
                bits(&instances.strided::<7>(&flat, 7)),
                bits(&want),
                "{lanes:?}"
            );
            assert_eq!(
                bits(&instances.strided::<4>(&flat, 7)),
                bits(&want[..4]),
                "{lanes:?}"
            );
            for j in 0..7 {
                let got = instances.strided_value(&flat, 7, j);
                assert_eq!(bits(&[got]), bits(&want[j..=j]), "{lanes:?} value {j}");
            }
            let one = gather_values(&single, &lanes);
            assert_eq!(
                bits(&[instances.values(&single)]),
                bits(&[one]),
                "{lanes:?}"
            );
            assert_eq!(
                bits(&[instances.strided_value(&single, 1, 0)]),
                bits(&[one])
            );
        }
    }

    #[test]
    #[should_panic]
    fn a_run_past_the_column_end_panics() {
        let column: Vec<[f64; 3]> = vec![[1.0; 3]; 6];
        let _: [Lane; 3] = LaneInstances::new([3, 4, 5, 6]).rows(&column);
    }

    /// `scatter_fixed::<W>` of `n` values at `offset` into rows 1..5 of a column of six rows:
    /// exactly those values of those rows change, bit for bit (whole rows of one or three
    /// values take the full-width stores of `avx::tile`); and the same with streaming stores,
    /// the column starting 16-byte aligned and 8 bytes past that: for each width one of the two
    /// puts rows 1..5 where the 16-byte stores take them (`avx::tile_streaming` for whole rows
    /// of one or three values, `avx::scatter_streaming` for an even count at an even place),
    /// the other where one `movnti` a value does.
    fn scattered_fixed<const W: usize>(offset: usize, n: usize) {
        for (streaming, shift) in [(false, 0), (true, 0), (true, 1)] {
            scattered_fixed_with::<W>(offset, n, streaming, shift);
        }
    }

    fn scattered_fixed_with<const W: usize>(
        offset: usize,
        n: usize,
        streaming: bool,
        shift: usize,
    ) {
        let x: Vec<Lane> = (0..n).map(|j| from_fn(|l| value(l, j))).collect();
        // The column from the buffer's first 16-byte aligned value, `shift` values on.
        let mut buffer = vec![1.5; 6 * W + 2];
        let aligned = buffer.as_ptr().cast::<u8>().align_offset(16) / 8;
        let column = &mut buffer[aligned + shift..aligned + shift + 6 * W];
        assert_eq!(
            column.as_ptr().cast::<u8>().align_offset(16),
            if shift == 0 { 0 } else { 8 }
        );
        scatter_fixed_with::<W>(column, offset, 1, &x, streaming);
        streaming_fence();
        for (r, row) in column.chunks_exact(W).enumerate() {
            for (k, v) in row.iter().enumerate() {
                let written = (1..1 + LANES).contains(&r) && (offset..offset + n).contains(&k);
                let want = if written {
                    value(r - 1, k - offset)
                } else {
                    1.5
                };
                assert_eq!(
                    v.to_bits(),
                    want.to_bits(),
                    "row {r} value {k} of rows of {W} (streaming {streaming}, shift {shift})"
                );
            }
        }
    }

    #[test]
    fn fixed_scatters_move_bits_only() {
        scattered_fixed::<1>(0, 1);
        scattered_fixed::<2>(0, 2);
        scattered_fixed::<2>(1, 1);
        scattered_fixed::<3>(0, 3);
        scattered_fixed::<3>(0, 2);
        scattered_fixed::<3>(1, 2);
        scattered_fixed::<4>(0, 4);
        scattered_fixed::<6>(0, 6);
        scattered_fixed::<6>(0, 5);
        scattered_fixed::<7>(0, 7);
        scattered_fixed::<12>(0, 12);
        scattered_fixed::<12>(6, 6);
    }

    #[test]
    fn transposes_move_bits_only() {
        transposed::<1>();
        transposed::<2>();
        transposed::<3>();
        transposed::<6>();
        transposed::<7>();
        let column: Vec<f64> = (0..5).map(|r| value(r, 2)).collect();
        let x = gather_values(&column, &[4, 0, 2, 2]);
        assert_eq!(
            values(x).map(f64::to_bits),
            [4, 0, 2, 2].map(|r| value(r, 2).to_bits())
        );
        for (width, offset, n) in [
            (1, 0, 1),
            (3, 0, 3),
            (6, 0, 6),
            (7, 2, 5),
            (7, 1, 4),
            (5, 4, 1),
        ] {
            let x: Vec<Lane> = (0..n).map(|j| from_fn(|l| value(l, j))).collect();
            let mut block = vec![1.5; LANES * width];
            scatter_rows(&mut block, width, offset, &x);
            for (l, row) in block.chunks_exact(width).enumerate() {
                for (k, v) in row.iter().enumerate() {
                    let want = if (offset..offset + n).contains(&k) {
                        value(l, k - offset)
                    } else {
                        1.5
                    };
                    assert_eq!(
                        v.to_bits(),
                        want.to_bits(),
                        "row {l} value {k}: width {width}, offset {offset}"
                    );
                }
            }
        }
    }
}
