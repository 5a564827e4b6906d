//! The small dense algebra of the lane path: the certified Cholesky solve of `G M⁻¹ Gᵀ` and the
//! inverse of a packed inertia, each on four instances at once.

// Index loops over rows mirror the reference solver (`cpu::solver`) they are held against.
#![allow(clippy::needless_range_loop)]

use simba::simd::{SimdComplexField, SimdPartialOrd};

use super::MAX_M;
use crate::cpu::solver::RANK_TOLERANCE;
use crate::math::lanes::{Lane, LaneMask, LaneMat3, is_finite, mul_add, select, splat};

/// `I⁻¹` of the packed inertias `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]` per lane, by cofactors of
/// `I / s` (`s` the mean of the diagonal, which keeps the determinant within range for small
/// bodies), and the lanes where it is positive definite (Sylvester's leading minors of `I / s`).
/// Twin of `body_inverse_mass` in `shaders/dynamics.wgsl`.
pub(super) fn inverse_inertia(i: &[Lane; 6]) -> (LaneMat3, LaneMask) {
    let s = (i[0] + i[1] + i[2]) / splat(3.0);
    // Element by element rather than `map`, which the compiler left as a call.
    let [a, b, c, d, e, f] = [i[0] / s, i[1] / s, i[2] / s, i[3] / s, i[4] / s, i[5] / s];
    let (c00, c01, c02) = (b * c - f * f, e * f - d * c, d * f - b * e);
    let (c11, c12, c22) = (a * c - e * e, d * e - a * f, a * b - d * d);
    let det = a * c00 + d * c01 + e * c02;
    let zero = splat(0.0);
    let ok = a.simd_gt(zero) & c22.simd_gt(zero) & det.simd_gt(zero) & is_finite(det);
    let k = splat(1.0) / (det * s);
    let inv = LaneMat3::new(c00, c01, c02, c01, c11, c12, c02, c12, c22) * k;
    (inv, ok)
}

/// Solves `L Lᵀ x = rhs` (its first `m` entries) for the symmetric `l` (`m × m`, its lower triangle read and factored
/// in place), lane by lane, as
/// the reference solver's certified Cholesky route: a lane whose pivot is not positive and
/// finite, or whose factor does not certify full rank, is cleared from `ok`. Rows where
/// `enabled` is false must be decoupled with a unit pivot; they do not count in the trace or
/// the certificate, and get λ = 0.
///
/// Dispatches on `m` to a copy compiled for that size, whose loops the compiler unrolls and
/// whose bounds checks it removes.
pub(super) fn solve_certified(
    l: &mut [[Lane; MAX_M]; MAX_M],
    m: usize,
    rhs: &[Lane; MAX_M],
    enabled: &[LaneMask; MAX_M],
    ok: &mut LaneMask,
    x: &mut [Lane; MAX_M],
) {
    match m {
        0 => {}
        1 => solve_sized::<1, MAX_M>(l, rhs, enabled, ok, x),
        2 => solve_sized::<2, MAX_M>(l, rhs, enabled, ok, x),
        3 => solve_sized::<3, MAX_M>(l, rhs, enabled, ok, x),
        4 => solve_sized::<4, MAX_M>(l, rhs, enabled, ok, x),
        5 => solve_sized::<5, MAX_M>(l, rhs, enabled, ok, x),
        6 => solve_sized::<6, MAX_M>(l, rhs, enabled, ok, x),
        7 => solve_sized::<7, MAX_M>(l, rhs, enabled, ok, x),
        8 => solve_sized::<8, MAX_M>(l, rhs, enabled, ok, x),
        9 => solve_sized::<9, MAX_M>(l, rhs, enabled, ok, x),
        10 => solve_sized::<10, MAX_M>(l, rhs, enabled, ok, x),
        11 => solve_sized::<11, MAX_M>(l, rhs, enabled, ok, x),
        _ => solve_sized::<MAX_M, MAX_M>(l, rhs, enabled, ok, x),
    }
}

/// [`solve_certified`] for `m = M`, on arrays of `N ≥ M` rows (the general path's
/// `MAX_M`-row scratch, or a one-constraint kernel's own `M`-row arrays).
#[inline(always)]
pub(super) fn solve_sized<const M: usize, const N: usize>(
    l: &mut [[Lane; N]; N],
    rhs: &[Lane; N],
    enabled: &[LaneMask; N],
    ok: &mut LaneMask,
    x: &mut [Lane; N],
) {
    let m = M;
    let zero = splat(0.0);
    let mut trace = zero;
    for k in 0..m {
        trace += select(enabled[k], l[k][k], zero);
    }
    // 1 / L[j][j]: the solves below multiply instead of dividing.
    let mut inverse_pivot = [zero; N];
    for j in 0..m {
        let mut d = l[j][j];
        for k in 0..j {
            d = mul_add(-l[j][k], l[j][k], d);
        }
        let good = is_finite(d) & d.simd_gt(zero);
        *ok = *ok & good;
        let pivot = select(good, d, splat(1.0)).simd_sqrt();
        l[j][j] = pivot;
        inverse_pivot[j] = splat(1.0) / pivot;
        for i in j + 1..m {
            let mut s = l[i][j];
            for k in 0..j {
                s = mul_add(-l[i][k], l[j][k], s);
            }
            l[i][j] = s * inverse_pivot[j];
        }
    }
    // ‖L⁻¹‖²_F over the enabled rows, column by column of L⁻¹.
    let mut column = [zero; N];
    let mut norm2 = zero;
    for k in 0..m {
        for i in k..m {
            let mut s = if i == k { splat(1.0) } else { zero };
            for n in k..i {
                s = mul_add(-l[i][n], column[n], s);
            }
            column[i] = s * inverse_pivot[i];
            norm2 += select(enabled[i] & enabled[k], column[i] * column[i], zero);
        }
    }
    let bound = trace * norm2 * splat(RANK_TOLERANCE);
    *ok = *ok & is_finite(bound) & bound.simd_lt(splat(1.0));
    x[..m].copy_from_slice(&rhs[..m]);
    for i in 0..m {
        for k in 0..i {
            x[i] = mul_add(-l[i][k], x[k], x[i]);
        }
        x[i] *= inverse_pivot[i];
    }
    for i in (0..m).rev() {
        for k in i + 1..m {
            x[i] = mul_add(-l[k][i], x[k], x[i]);
        }
        x[i] *= inverse_pivot[i];
    }
}
