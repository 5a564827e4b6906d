//! The small dense algebra of the lane path: the certified `U D Uᵀ` solve of `G M⁻¹ Gᵀ` and the
//! inverse of a packed inertia, each on four instances at once.

// Index loops over rows mirror the reference solver (`cpu::solver`) they are held against.
#![allow(clippy::needless_range_loop)]

use simba::simd::SimdPartialOrd;

use super::MAX_M;
use crate::cpu::solver::RANK_TOLERANCE;
use crate::math::lanes::{Lane, LaneMask, LaneMat3, is_finite, mul_add, select, splat};

/// `I⁻¹` of the packed inertias `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]` per lane, by cofactors of
/// `I / s` (`s` the mean of the diagonal, which keeps the determinant within range for small
/// bodies), and the lanes where it is positive definite (Sylvester's leading minors of `I / s`).
/// Twin of `body_inverse_mass` in `shaders/dynamics.wgsl`.
pub(super) fn inverse_inertia(i: &[Lane; 6]) -> (LaneMat3, LaneMask) {
    let inverse_s = splat(3.0) / (i[0] + i[1] + i[2]);
    // Element by element rather than `map`, which the compiler left as a call.
    let [a, b, c, d, e, f] = [
        i[0] * inverse_s,
        i[1] * inverse_s,
        i[2] * inverse_s,
        i[3] * inverse_s,
        i[4] * inverse_s,
        i[5] * inverse_s,
    ];
    let ([c00, c01, c02, c11, c12, c22], det) = symmetric_cofactors([a, b, c], [d, e, f]);
    let zero = splat(0.0);
    let ok = a.simd_gt(zero) & c22.simd_gt(zero) & det.simd_gt(zero) & is_finite(det);
    let k = inverse_s / det;
    let inv = LaneMat3::new(c00, c01, c02, c01, c11, c12, c02, c12, c22) * k;
    (inv, ok)
}

/// Solves `A x = rhs` (its first `m` entries) for the symmetric `A` in `l` (`m × m`, its lower
/// triangle read, and factored in place for more than three rows), lane by lane, as the reference solver's certified
/// route (`cpu::solver`): a lane whose pivot is not positive and finite, or whose factor does
/// not certify full rank, is cleared from `ok`. Rows where `enabled` is false must be
/// decoupled with a unit pivot; they do not count in the trace or the certificate, and get
/// λ = 0.
///
/// The factor is `A = U D Uᵀ` (`U` unit lower triangular, `D` diagonal), not the reference's
/// `A = L Lᵀ`: the same factor (`L = U D^½`) without its square roots. Its pivots `D_j` are the
/// Cholesky pivots before their roots, so the pivot test is the reference's, and its
/// certificate is the reference's, `tr A · ‖L⁻¹‖²_F · RANK_TOLERANCE < 1`, through
/// `‖L⁻¹‖²_F = Σᵢ Σₖ (U⁻¹)ᵢₖ² / D_i`. The two agree to rounding. Why: on four lanes a square
/// root and the reciprocal after it stood on the solve's chain of dependent operations at every
/// pivot; without them the one-constraint kernel ran 1.02–1.08× as fast on one thread
/// (evaluations, RK4 and Euler steps; `docs/performance-log.md`, 2026-11-27 11:20–12:40).
///
/// Two or three rows, the commonest systems (a rolling sphere, a point against the ground), take
/// the closed form instead ([`solve_by_cofactors`], as the GPU's generated solve does), whose
/// chain of dependent operations is shorter still.
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
    if M == 2 || M == 3 {
        return solve_by_cofactors::<M, N>(l, rhs, enabled, trace, ok, x);
    }
    // A = U D Uᵀ, column by column: U below the diagonal of `l`, D on it; 1 / D[j] kept, so
    // the solves below multiply instead of dividing.
    let mut inverse_pivot = [zero; N];
    for j in 0..m {
        // Row j of U D, the products every entry of column j takes.
        let mut ud = [zero; N];
        let mut d = l[j][j];
        for k in 0..j {
            ud[k] = l[j][k] * l[k][k];
            d = mul_add(-l[j][k], ud[k], d);
        }
        let good = is_finite(d) & d.simd_gt(zero);
        *ok = *ok & good;
        let pivot = select(good, d, splat(1.0));
        l[j][j] = pivot;
        inverse_pivot[j] = splat(1.0) / pivot;
        for i in j + 1..m {
            let mut s = l[i][j];
            for k in 0..j {
                s = mul_add(-l[i][k], ud[k], s);
            }
            l[i][j] = s * inverse_pivot[j];
        }
    }
    // ‖L⁻¹‖²_F over the enabled rows: column k of U⁻¹ at a time (U's diagonal is 1), each
    // entry squared over its row's pivot.
    let mut column = [zero; N];
    let mut norm2 = zero;
    for k in 0..m {
        for i in k..m {
            let mut s = if i == k { splat(1.0) } else { zero };
            for n in k..i {
                s = mul_add(-l[i][n], column[n], s);
            }
            column[i] = s;
            norm2 += select(enabled[i] & enabled[k], s * s * inverse_pivot[i], zero);
        }
    }
    certify(trace, norm2, ok);
    // U y = rhs, D z = y, Uᵀ x = z, in place.
    x[..m].copy_from_slice(&rhs[..m]);
    for i in 0..m {
        for k in 0..i {
            x[i] = mul_add(-l[i][k], x[k], x[i]);
        }
    }
    for i in 0..m {
        x[i] *= inverse_pivot[i];
    }
    for i in (0..m).rev() {
        for k in i + 1..m {
            x[i] = mul_add(-l[k][i], x[k], x[i]);
        }
    }
}

/// [`solve_sized`] for `M` = 2 or 3 rows in closed form: `x = adj(A) rhs / det A` from the
/// cofactors `C` of the symmetric `A` (its lower triangle read; `l` is left as it was). Twin of
/// the GPU's generated solve for two and three rows (`gpu::solve`), name for name. The
/// tests are the factor's, by other means: the Cholesky pivots are the ratios of the leading
/// minors (`a₀₀`, `C₂₂` for three rows, `det A`), so they are positive exactly when the minors
/// are, and `‖L⁻¹‖²_F = tr A⁻¹ = Σᵢ Cᵢᵢ / det A` over the enabled rows (a disabled row is
/// decoupled, so `A⁻¹` is block diagonal and its enabled block is the enabled rows' inverse).
/// A disabled row's λ is 0: its cofactors off the diagonal are exact zeros and its right-hand
/// side is 0. Why: one division, and no chain of pivots, each waiting on the one before
/// (rolling spheres evaluated 1.03–1.04× as fast on one thread as with `U D Uᵀ`). `det A`
/// grows as the cube of the entries and leaves f64's range first (entries beyond about 1e102
/// or below 1e-102): such a lane fails the pivot test and takes the minimum-norm route, whose
/// answer is the same to rounding.
#[inline(always)]
fn solve_by_cofactors<const M: usize, const N: usize>(
    l: &[[Lane; N]; N],
    rhs: &[Lane; N],
    enabled: &[LaneMask; N],
    trace: Lane,
    ok: &mut LaneMask,
    x: &mut [Lane; N],
) {
    let zero = splat(0.0);
    let on = |k: usize, v: Lane| select(enabled[k], v, zero);
    let (x00, x11, x01) = (l[0][0], l[1][1], l[1][0]);
    if M == 2 {
        let det = x00 * x11 - x01 * x01;
        let good = is_finite(det) & x00.simd_gt(zero) & det.simd_gt(zero);
        *ok = *ok & good;
        let inverse_det = splat(1.0) / select(good, det, splat(1.0));
        let norm2 = (on(0, x11) + on(1, x00)) * inverse_det;
        certify(trace, norm2, ok);
        let (r0, r1) = (rhs[0], rhs[1]);
        x[0] = (x11 * r0 - x01 * r1) * inverse_det;
        x[1] = (x00 * r1 - x01 * r0) * inverse_det;
        return;
    }
    let (x22, x02, x12) = (l[2][2], l[2][0], l[2][1]);
    let ([c00, c01, c02, c11, c12, c22], det) =
        symmetric_cofactors([x00, x11, x22], [x01, x02, x12]);
    let good = is_finite(det) & x00.simd_gt(zero) & c22.simd_gt(zero) & det.simd_gt(zero);
    *ok = *ok & good;
    let inverse_det = splat(1.0) / select(good, det, splat(1.0));
    let norm2 = (on(0, c00) + on(1, c11) + on(2, c22)) * inverse_det;
    certify(trace, norm2, ok);
    let (r0, r1, r2) = (rhs[0], rhs[1], rhs[2]);
    x[0] = (c00 * r0 + c01 * r1 + c02 * r2) * inverse_det;
    x[1] = (c01 * r0 + c11 * r1 + c12 * r2) * inverse_det;
    x[2] = (c02 * r0 + c12 * r1 + c22 * r2) * inverse_det;
}

/// The cofactors `[C₀₀, C₀₁, C₀₂, C₁₁, C₁₂, C₂₂]` and the determinant of the symmetric 3×3
/// matrix with diagonal `[x₀₀, x₁₁, x₂₂]` and entries `[x₀₁, x₀₂, x₁₂]` off it (its inverse is
/// `C / det`). Shared by [`inverse_inertia`] and [`solve_by_cofactors`].
#[inline(always)]
fn symmetric_cofactors(diagonal: [Lane; 3], off: [Lane; 3]) -> ([Lane; 6], Lane) {
    let ([x00, x11, x22], [x01, x02, x12]) = (diagonal, off);
    let c00 = x11 * x22 - x12 * x12;
    let c01 = x02 * x12 - x01 * x22;
    let c02 = x01 * x12 - x11 * x02;
    let c11 = x00 * x22 - x02 * x02;
    let c12 = x01 * x02 - x00 * x12;
    let c22 = x00 * x11 - x01 * x01;
    let det = x00 * c00 + x01 * c01 + x02 * c02;
    ([c00, c01, c02, c11, c12, c22], det)
}

/// Clears from `ok` the lanes whose bound `tr A · ‖L⁻¹‖²_F · RANK_TOLERANCE` is not finite and
/// below 1 (the reference solver's certificate, `cpu::solver`).
#[inline(always)]
fn certify(trace: Lane, norm2: Lane, ok: &mut LaneMask) {
    let bound = trace * norm2 * splat(RANK_TOLERANCE);
    *ok = *ok & is_finite(bound) & bound.simd_lt(splat(1.0));
}

#[cfg(test)]
mod tests {
    //! The lanes' solve (the closed form for two and three rows, `U D Uᵀ` for the others)
    //! against the reference solver's Cholesky route and against closed forms of its
    //! certificate.

    use super::*;
    use crate::cpu::solver::solve_min_norm_rows;
    use crate::math::lanes::{LANES, bits, lanes, values};
    use crate::sample::Rng;

    /// Four systems, one per lane: `a[l]` row-major `m × m`, `rhs[l]`; every row enabled.
    /// Returns `x` per lane and the lanes left in `ok`.
    fn solve_lanes(m: usize, a: &[Vec<f64>; 4], rhs: &[Vec<f64>; 4]) -> ([Vec<f64>; 4], u32) {
        solve_lanes_enabled(m, a, rhs, &[[true; 4]; MAX_M])
    }

    /// [`solve_lanes`] with `enabled[row][lane]`. Where a lane value holds more than four
    /// lanes (eight, in a build for AVX-512), lane `l` solves system `l mod 4`, and every copy
    /// must give its system's bits.
    fn solve_lanes_enabled(
        m: usize,
        a: &[Vec<f64>; 4],
        rhs: &[Vec<f64>; 4],
        enabled: &[[bool; 4]; MAX_M],
    ) -> ([Vec<f64>; 4], u32) {
        let mut l = [[splat(0.0); MAX_M]; MAX_M];
        let mut b = [splat(0.0); MAX_M];
        for i in 0..m {
            for j in 0..m {
                l[i][j] = lanes(std::array::from_fn(|k| a[k % 4][i * m + j]));
            }
            b[i] = lanes(std::array::from_fn(|k| rhs[k % 4][i]));
        }
        let on: [LaneMask; MAX_M] =
            std::array::from_fn(|r| LaneMask::from(std::array::from_fn(|k| enabled[r][k % 4])));
        let mut ok = LaneMask::from([true; LANES]);
        let mut x = [splat(0.0); MAX_M];
        solve_certified(&mut l, m, &b, &on, &mut ok, &mut x);
        let ok = bits(ok);
        for k in (0..LANES).skip(4) {
            assert_eq!(ok >> k & 1, ok >> (k % 4) & 1, "lane {k}");
            for i in 0..m {
                let (copy, first) = (values(x[i])[k], values(x[i])[k % 4]);
                assert_eq!(copy.to_bits(), first.to_bits(), "lane {k}, row {i}");
            }
        }
        let x = std::array::from_fn(|k| (0..m).map(|i| values(x[i])[k]).collect());
        (x, ok & 0b1111)
    }

    /// `B Bᵀ + s 1` for a random `m × (m + 2)` matrix `B`.
    fn random_spd(r: &mut Rng, m: usize, s: f64) -> Vec<f64> {
        let b: Vec<f64> = (0..m * (m + 2)).map(|_| r.uniform(-1.0, 1.0)).collect();
        let mut a = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                let dot: f64 = (0..m + 2)
                    .map(|k| b[i * (m + 2) + k] * b[j * (m + 2) + k])
                    .sum();
                a[i * m + j] = dot + if i == j { s } else { 0.0 };
            }
        }
        a
    }

    /// `Q diag(e) Qᵀ` (row-major), `Q` the product of rotations by `angle`, `2 angle`, … in the
    /// planes of rows (0, 1), (1, 2), …: a full matrix with eigenvalues `e`.
    fn rotated_diagonal(e: &[f64], angle: f64) -> Vec<f64> {
        let m = e.len();
        let mut q = vec![0.0; m * m];
        for i in 0..m {
            q[i * m + i] = 1.0;
        }
        for p in 0..m.saturating_sub(1) {
            let (c, s) = (
                (angle * (p + 1) as f64).cos(),
                (angle * (p + 1) as f64).sin(),
            );
            for row in 0..m {
                let (x, y) = (q[row * m + p], q[row * m + p + 1]);
                q[row * m + p] = c * x - s * y;
                q[row * m + p + 1] = s * x + c * y;
            }
        }
        let mut a = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                a[i * m + j] = (0..m).map(|k| q[i * m + k] * e[k] * q[j * m + k]).sum();
            }
        }
        a
    }

    #[test]
    fn the_solve_agrees_with_the_reference_cholesky_route() {
        let mut r = Rng::for_instance(17, 0);
        for m in 1..=MAX_M {
            for _ in 0..8 {
                // Lane 0 well-conditioned, the others more and more weakly so.
                let a: [Vec<f64>; 4] =
                    std::array::from_fn(|k| random_spd(&mut r, m, [1.0, 1e-2, 1e-4, 1e-6][k]));
                let rhs: [Vec<f64>; 4] =
                    std::array::from_fn(|_| (0..m).map(|_| r.uniform(-1.0, 1.0)).collect());
                let (x, ok) = solve_lanes(m, &a, &rhs);
                for k in 0..4 {
                    let mut reference = vec![0.0; m];
                    let mut work = vec![0.0; m * m + m];
                    let rank = solve_min_norm_rows(&a[k], m, &rhs[k], &mut reference, &mut work);
                    assert_eq!(rank, m, "m = {m}, lane {k}");
                    assert!(
                        ok & (1 << k) != 0,
                        "m = {m}, lane {k}: certified by the reference"
                    );
                    let scale = reference.iter().fold(1.0_f64, |s, v| s.max(v.abs()));
                    for i in 0..m {
                        let error = (x[k][i] - reference[i]).abs() / scale;
                        // Rounding grows with the condition, up to about 1e5 here.
                        assert!(error < 1e-10, "m = {m}, lane {k}, row {i}: {error:e}");
                        if k == 0 {
                            assert!(error < 1e-13, "m = {m}, row {i}: {error:e}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_certificate_is_the_references_bound() {
        // Eigenvalues (1, …, 1, ε): tr A · tr A⁻¹ = (m − 1 + ε)(m − 1 + 1/ε), and
        // tr A⁻¹ = ‖L⁻¹‖²_F, so the bound tr A · ‖L⁻¹‖²_F · 1e-10 is in closed form. ε is set
        // for a bound of 0.5 (certified) or 2 (not), and far either side; every size takes
        // the closed form (two and three rows) or the factor (the others).
        for m in 2..=6 {
            let k = (m - 1) as f64;
            for (target, certified) in [(0.5, true), (2.0, false), (1e-2, true), (1e2, false)] {
                let eps = k / (target / RANK_TOLERANCE);
                let bound = (k + eps) * (k + 1.0 / eps) * RANK_TOLERANCE;
                assert_eq!(bound < 1.0, certified, "m = {m}, ε = {eps:e}");
                let mut e = vec![1.0; m];
                e[m - 1] = eps;
                let a: [Vec<f64>; 4] =
                    std::array::from_fn(|l| rotated_diagonal(&e, [0.0, 0.3, 1.1, 2.5][l]));
                let rhs: [Vec<f64>; 4] = std::array::from_fn(|_| vec![1.0; m]);
                let (_, ok) = solve_lanes(m, &a, &rhs);
                let expected = if certified { 0b1111 } else { 0 };
                assert_eq!(ok, expected, "m = {m}, bound {bound:e}");
            }
        }
    }

    #[test]
    fn a_determinant_out_of_range_fails_and_one_in_range_does_not() {
        let mut r = Rng::for_instance(29, 0);
        let base = random_spd(&mut r, 3, 0.5);
        let scales = [1e90, 1e-90, 1e110, 1e-110];
        let a: [Vec<f64>; 4] =
            std::array::from_fn(|k| base.iter().map(|v| v * scales[k]).collect());
        let rhs: [Vec<f64>; 4] = std::array::from_fn(|_| vec![0.3, -0.7, 0.2]);
        let (x, ok) = solve_lanes(3, &a, &rhs);
        assert_eq!(
            ok, 0b0011,
            "the first two lanes certified, the last two not"
        );
        for k in 0..2 {
            let mut reference = vec![0.0; 3];
            let mut work = vec![0.0; 12];
            solve_min_norm_rows(&a[k], 3, &rhs[k], &mut reference, &mut work);
            for i in 0..3 {
                let error = (x[k][i] - reference[i]).abs() / reference[i].abs();
                assert!(error < 1e-12, "scale {:e}, row {i}: {error:e}", scales[k]);
            }
        }
    }

    #[test]
    fn pivots_that_are_not_positive_and_finite_fail() {
        let a = [
            vec![1.0, 2.0, 2.0, 1.0],   // second pivot −3, first positive
            vec![-1.0, 0.0, 0.0, -1.0], // first pivot negative, det A positive
            vec![1.0, 1.0, 1.0, 1.0],   // singular: second pivot 0
            vec![1.0, f64::NAN, f64::NAN, 1.0],
        ];
        let rhs: [Vec<f64>; 4] = std::array::from_fn(|_| vec![1.0, 1.0]);
        let (_, ok) = solve_lanes(2, &a, &rhs);
        assert_eq!(ok, 0);
        // Three rows: each leading minor in turn negative while the other two are positive,
        // then an infinity.
        let a = [
            vec![-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0],
            vec![1.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, -1.0],
            vec![2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, -5.0],
            vec![f64::INFINITY, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        ];
        let rhs: [Vec<f64>; 4] = std::array::from_fn(|_| vec![1.0; 3]);
        let (_, ok) = solve_lanes(3, &a, &rhs);
        assert_eq!(ok, 0);
        // Four rows (the factor): the third pivot negative in lane 0 only.
        let mut a: [Vec<f64>; 4] = std::array::from_fn(|_| rotated_diagonal(&[1.0; 4], 0.4));
        a[0][2 * 4 + 2] = -3.0;
        let rhs: [Vec<f64>; 4] = std::array::from_fn(|_| vec![1.0; 4]);
        let (_, ok) = solve_lanes(4, &a, &rhs);
        assert_eq!(ok, 0b1110);
    }

    #[test]
    fn disabled_rows_get_zero_and_leave_the_others_as_without_them() {
        // Three rows (the closed form) and five (the factor); row 1 disabled in lanes 1 and 3.
        // The enabled rows' scale is 1e-12: were the disabled row's unit pivot counted in the
        // trace, the bound would be about 1e12 · ‖L⁻¹‖²_F · 1e-10 ≫ 1.
        let mut r = Rng::for_instance(3, 0);
        for m in [3, 5] {
            let n = m - 1;
            let full: Vec<f64> = random_spd(&mut r, n, 0.5)
                .iter()
                .map(|v| v * 1e-12)
                .collect();
            let rows: Vec<usize> = (0..m).filter(|&i| i != 1).collect();
            let right: Vec<f64> = (0..n).map(|_| r.uniform(-1.0, 1.0)).collect();
            // Disabled: a unit pivot, no coupling, zero right-hand side. Enabled: coupled.
            let system = |on: bool| {
                let mut a = vec![0.0; m * m];
                let mut rhs = vec![0.0; m];
                for i in 0..n {
                    for j in 0..n {
                        a[rows[i] * m + rows[j]] = full[i * n + j];
                    }
                    rhs[rows[i]] = right[i];
                }
                a[m + 1] = if on { 2e-12 } else { 1.0 };
                if on {
                    (a[1], a[m], rhs[1]) = (0.3e-12, 0.3e-12, -0.2);
                }
                (a, rhs)
            };
            let a: [Vec<f64>; 4] = std::array::from_fn(|k| system(k % 2 == 0).0);
            let rhs: [Vec<f64>; 4] = std::array::from_fn(|k| system(k % 2 == 0).1);
            let mut enabled = [[true; 4]; MAX_M];
            enabled[1] = [true, false, true, false];
            let (x, ok) = solve_lanes_enabled(m, &a, &rhs, &enabled);
            assert_eq!(ok, 0b1111, "m = {m}");
            let mut reference = vec![0.0; n];
            let mut work = vec![0.0; n * n + n];
            solve_min_norm_rows(&full, n, &right, &mut reference, &mut work);
            let scale = reference.iter().fold(0.0_f64, |s, v| s.max(v.abs()));
            for k in [1, 3] {
                assert_eq!(x[k][1], 0.0, "m = {m}, lane {k}");
                for (i, &row) in rows.iter().enumerate() {
                    let error = (x[k][row] - reference[i]).abs() / scale;
                    assert!(error < 1e-13, "m = {m}, lane {k}, row {row}: {error:e}");
                }
            }
            // Enabled, the middle row couples: the answer differs.
            assert!((x[0][0] - reference[0]).abs() > 1e-3 * scale, "m = {m}");
        }
    }
}
