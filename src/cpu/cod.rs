//! Minimum-norm solutions of square systems that may be non-symmetric and singular, by the
//! complete orthogonal decomposition (`unilateral.md` §3.1: a sliding contact's friction makes
//! its rows' system non-symmetric, and a brick's four coplanar corners make it singular).
//!
//! Column-pivoted Householder QR finds the rank (`A P = Q [R₁; 0]`, `R₁` the first `r` rows,
//! pivots below `RANK_TOLERANCE` of the first taken as zero), then a QR of `R₁ᵀ = Q₂ R₂` gives
//! the minimum-norm `y = Q₂ R₂⁻ᵀ (Qᵀ b)₁..r` and `x = P y`. Only orthogonal transformations
//! touch the system, so the answer is as accurate as the data allow.
//!
//! Why not nalgebra's SVD: with `eps = f64::EPSILON` its bidiagonal iteration can stop on a
//! wrong decomposition of a rank-deficient matrix (`U Σ Vᵀ` off by O(‖A‖); nalgebra issues
//! #1072, #1172). It did so on a brick sliding on four corners, whose normal rows then went
//! unenforced.

use nalgebra::{DMatrix, DVector};

use super::solver::RANK_TOLERANCE;

/// The minimum-norm least-squares solution of the square system `a x = rhs` (exact when the
/// system is consistent) and the rank found; NaN (rank 0) when the system is not finite.
pub(crate) fn solve_min_norm_general(
    a: &DMatrix<f64>,
    rhs: &DVector<f64>,
) -> (DVector<f64>, usize) {
    let n = rhs.len();
    let finite = a.iter().chain(rhs.iter()).all(|x| x.is_finite());
    if !finite || a.nrows() != n || a.ncols() != n {
        return (DVector::from_element(n, f64::NAN), 0);
    }
    let mut r = a.clone();
    let mut c = rhs.clone();
    let mut order: Vec<usize> = (0..n).collect();
    let mut rank = 0;
    let mut first = 0.0;
    for k in 0..n {
        // Pivot: the remaining column with the largest norm below row k.
        let column_norm =
            |r: &DMatrix<f64>, j: usize| (k..n).map(|i| r[(i, j)].powi(2)).sum::<f64>().sqrt();
        let (j, norm) = (k..n)
            .map(|j| (j, column_norm(&r, j)))
            .fold((k, -1.0), |best, x| if x.1 > best.1 { x } else { best });
        if k == 0 {
            first = norm;
        }
        if norm <= RANK_TOLERANCE * first || norm == 0.0 {
            break;
        }
        r.swap_columns(k, j);
        order.swap(k, j);
        // The reflector I − 2 v vᵀ / (vᵀ v) that maps the pivot column onto ∓‖·‖ e_k (the sign
        // that avoids cancellation), applied to the rest of R and to c.
        let alpha = if r[(k, k)] > 0.0 { -norm } else { norm };
        let v: Vec<f64> = (k..n)
            .map(|i| r[(i, k)] - if i == k { alpha } else { 0.0 })
            .collect();
        let vv: f64 = v.iter().map(|x| x * x).sum();
        if vv > 0.0 {
            // Column-major: column `col` from row k is one contiguous run.
            for col in k..n {
                reflect(&v, vv, &mut r.as_mut_slice()[col * n + k..(col + 1) * n]);
            }
            reflect(&v, vv, &mut c.as_mut_slice()[k..]);
        }
        rank = k + 1;
    }
    let mut x = DVector::zeros(n);
    if rank == 0 {
        return (x, 0);
    }
    // R₁ y = c₁ with R₁ = Q₂'s R₂ᵀ Q₂ᵀ: y = Q₂ w, R₂ᵀ w = c₁ (R₁ᵀ has full column rank).
    let qr = r.rows(0, rank).transpose().qr();
    let w = qr
        .r()
        .transpose()
        .solve_lower_triangular(&c.rows(0, rank).clone_owned());
    let Some(w) = w else {
        return (DVector::from_element(n, f64::NAN), 0);
    };
    let y = qr.q() * w;
    for (i, &column) in order.iter().enumerate() {
        x[column] = y[i];
    }
    (x, rank)
}

/// `x ← (I − 2 v vᵀ / vv) x`.
fn reflect(v: &[f64], vv: f64, x: &mut [f64]) {
    let s = 2.0 * v.iter().zip(x.iter()).map(|(a, b)| a * b).sum::<f64>() / vv;
    for (x, v) in x.iter_mut().zip(v) {
        *x -= s * v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream of numbers in [−1, 1] (no dependency on a random crate).
    fn numbers(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        }
    }

    /// A⁺ b for A = B C (B n×r, C r×n, both of rank r) by the textbook formula
    /// `A⁺ = Cᵀ (C Cᵀ)⁻¹ (Bᵀ B)⁻¹ Bᵀ`, with Cholesky solves: an answer computed without any
    /// orthogonal decomposition.
    fn pseudo_inverse_times(
        b: &DMatrix<f64>,
        c: &DMatrix<f64>,
        rhs: &DVector<f64>,
    ) -> DVector<f64> {
        let btb = (b.transpose() * b)
            .cholesky()
            .expect("B has full column rank");
        let cct = (c * c.transpose()).cholesky().expect("C has full row rank");
        c.transpose() * cct.solve(&btb.solve(&(b.transpose() * rhs)))
    }

    #[test]
    fn rank_deficient_non_symmetric_systems_get_the_pseudo_inverse_answer() {
        for (n, r, seed) in [
            (4, 3, 1),
            (6, 4, 2),
            (9, 5, 3),
            (12, 11, 4),
            (3, 1, 5),
            (12, 2, 6),
        ] {
            let mut next = numbers(seed);
            let b = DMatrix::from_fn(n, r, |_, _| next());
            let c = DMatrix::from_fn(r, n, |_, _| next());
            let a = &b * &c;
            // Consistent and inconsistent right-hand sides.
            for rhs in [
                &b * DVector::from_fn(r, |_, _| next()),
                DVector::from_fn(n, |_, _| next()),
            ] {
                let (x, rank) = solve_min_norm_general(&a, &rhs);
                let expected = pseudo_inverse_times(&b, &c, &rhs);
                assert_eq!(rank, r, "n = {n}");
                let error = (&x - &expected).norm() / expected.norm().max(1.0);
                assert!(error < 1e-10, "n = {n}, r = {r}: {error:e}");
            }
        }
    }

    #[test]
    fn full_rank_systems_are_solved_exactly() {
        let mut next = numbers(9);
        let a = DMatrix::from_fn(7, 7, |i, j| next() + if i == j { 3.0 } else { 0.0 });
        let rhs = DVector::from_fn(7, |_, _| next());
        let (x, rank) = solve_min_norm_general(&a, &rhs);
        let expected = a.clone().lu().solve(&rhs).expect("regular");
        assert_eq!(rank, 7);
        assert!((&x - &expected).norm() < 1e-13 * expected.norm());
    }

    /// The normal rows of a brick sliding on four coplanar corners (`OLOLOLOL` in a study of
    /// tossed bricks): rank 3, consistent. nalgebra's SVD with `eps = f64::EPSILON` left a
    /// residual of 4.6 here (the brick sank into its plane at 1 m/s²).
    #[test]
    fn a_brick_sliding_on_four_corners_keeps_its_normal_rows() {
        let a = DMatrix::from_column_slice(
            4,
            4,
            &[
                3.385421540688095,
                1.7557256834892025,
                1.0522967234499054,
                -0.5773991337489882,
                1.7838917147133444,
                3.357849670420026,
                -0.5503689705568153,
                1.0235889851498665,
                1.090917092891067,
                -0.5169812286306066,
                3.3250881934996204,
                1.7171898719779475,
                -0.5098331694076339,
                1.0833650183221222,
                1.7242006911631826,
                3.317398878892939,
            ],
        );
        let rhs = DVector::from_column_slice(&[
            -8.23818868921539,
            -8.237583000746076,
            -8.238644823802671,
            -8.238039135333358,
        ]);
        let (x, rank) = solve_min_norm_general(&a, &rhs);
        assert_eq!(rank, 3);
        assert!((&a * &x - &rhs).norm() < 1e-12 * rhs.norm());
        // Minimum norm: no part along the corners' null pattern, which (1, −1, −1, 1)
        // spans on the left; on the right, a null vector of `a` from its cofactors.
        let null = {
            let mut v = DVector::zeros(4);
            for k in 0..4 {
                let minor = a.clone().remove_row(3).remove_column(k);
                v[k] = if k % 2 == 0 { 1.0 } else { -1.0 } * minor.determinant();
            }
            v.normalize()
        };
        assert!((&a * &null).norm() < 1e-12);
        assert!(x.dot(&null).abs() < 1e-12 * x.norm());
    }

    #[test]
    fn a_non_finite_system_has_no_answer() {
        let mut a = DMatrix::identity(3, 3);
        a[(1, 2)] = f64::NAN;
        let (x, rank) = solve_min_norm_general(&a, &DVector::from_element(3, 1.0));
        assert_eq!(rank, 0);
        assert!(x.iter().all(|v| v.is_nan()));
        let (x, rank) = solve_min_norm_general(&DMatrix::zeros(2, 2), &DVector::zeros(2));
        assert_eq!((rank, x.norm()), (0, 0.0));
    }
}
