//! The minimum-norm solve's eigen route (`cpu::solver`), taken when the certified Cholesky
//! cannot prove full rank (redundant rows, such as a brick on four coplanar corners): a cyclic
//! Jacobi eigen-decomposition `A = V diag(λ) Vᵀ` of the small symmetric `A = G M⁻¹ Gᵀ`, then
//! `x = Σ vₖ (vₖ · rhs) / λₖ` over the eigenvalues above `RANK_TOLERANCE · λmax` (Simbody's
//! minimum-norm multipliers, `physics.md` §1).
//!
//! Twin of `solve_min_norm_spd` in `shaders/solver.wgsl`, line for line: the same sweeps,
//! rotations, stopping rule and rank rule, so the CPU and the kernels take the same route when
//! rows are redundant (up to `MAX_JACOBI_ROWS`; larger systems take nalgebra's
//! `SymmetricEigen`). Jacobi suits these small matrices: it is accurate to rounding on small
//! symmetric matrices, needs no tridiagonal form and no allocation (the matrices live on the
//! stack), and ends within a fixed number of sweeps (it converges quadratically, in about five).
//! It replaced `SymmetricEigen` on heap matrices for them, which allocated at every redundant
//! solve.

// Index loops mirror the WGSL twin's, line for line.
#![allow(clippy::needless_range_loop)]

use super::solver::RANK_TOLERANCE;

/// Most sweeps over the off-diagonal pairs (the kernels' bound too).
const SWEEPS: usize = 32;

/// Largest row count the Jacobi route takes. Up to six rows it is compiled for its row count
/// and beats nalgebra's heap matrices; from a few more rows on, Jacobi's sweeps (about five,
/// each of `n²/2` rotations of `3n` pairs) cost more than a tridiagonal QR, and a study of
/// bricks tossed on eight corners ran 5 % slower with Jacobi up to 24 rows.
pub(crate) const MAX_JACOBI_ROWS: usize = 6;

/// Minimum-norm solution `x` (its first `n` values) of the symmetric positive semi-definite
/// `a x = rhs`, `a` row-major `n × n` (symmetrised here), `n ≤ MAX_JACOBI_ROWS`, every value
/// finite; returns the numerical rank. Compiled for each row count: loops unrolled, no bounds
/// checks (a brick's four corners took about half the instructions of a runtime size).
pub(crate) fn solve_min_norm_jacobi(a: &[f64], n: usize, rhs: &[f64], x: &mut [f64]) -> usize {
    match n {
        1 => jacobi::<1>(a, rhs, x),
        2 => jacobi::<2>(a, rhs, x),
        3 => jacobi::<3>(a, rhs, x),
        4 => jacobi::<4>(a, rhs, x),
        5 => jacobi::<5>(a, rhs, x),
        6 => jacobi::<6>(a, rhs, x),
        _ => {
            debug_assert!(n == 0, "{n} rows for the Jacobi route");
            0
        }
    }
}

/// [`solve_min_norm_jacobi`] for `n = N` rows; `a[p][q]` is the WGSL twin's `a[p * n + q]`.
#[inline(always)]
fn jacobi<const N: usize>(a_in: &[f64], rhs: &[f64], x: &mut [f64]) -> usize {
    let (n, eps) = (N, f64::EPSILON);
    let (a_in, rhs, x) = (&a_in[..n * n], &rhs[..n], &mut x[..n]);
    let mut a = [[0.0; N]; N];
    let mut v = [[0.0; N]; N];
    // Symmetrise so rounding in G M⁻¹ Gᵀ cannot leave a skew part.
    for p in 0..n {
        for q in 0..n {
            a[p][q] = 0.5 * (a_in[p * n + q] + a_in[q * n + p]);
        }
    }
    for i in 0..n {
        v[i][i] = 1.0;
    }
    for _sweep in 0..SWEEPS {
        let mut off = 0.0;
        let mut diag = 0.0;
        for p in 0..n {
            for q in 0..n {
                let x = a[p][q];
                if p == q {
                    diag += x * x;
                } else {
                    off += x * x;
                }
            }
        }
        if off <= eps * eps * diag {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p][q];
                let app = a[p][p];
                let aqq = a[q][q];
                // An off-diagonal entry negligible next to its diagonal is zero: rotating on it
                // gains nothing, and a subnormal one (flushed to zero by GPUs) would make
                // θ = 0/0 when app = aqq.
                if apq.abs() <= 1e-3 * eps * (app.abs() + aqq.abs()) || apq.abs() < 1e-30 {
                    a[p][q] = 0.0;
                    a[q][p] = 0.0;
                    continue;
                }
                let theta = (aqq - app) / (2.0 * apq);
                let mut t = 1.0 / (theta.abs() + (theta * theta + 1.0).sqrt());
                if theta < 0.0 {
                    t = -t;
                }
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k][p];
                    let akq = a[k][q];
                    a[k][p] = c * akp - s * akq;
                    a[k][q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[p][k];
                    let aqk = a[q][k];
                    a[p][k] = c * apk - s * aqk;
                    a[q][k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let vkp = v[k][p];
                    let vkq = v[k][q];
                    v[k][p] = c * vkp - s * vkq;
                    v[k][q] = s * vkp + c * vkq;
                }
            }
        }
    }
    let mut largest = 0.0f64;
    for k in 0..n {
        largest = largest.max(a[k][k].abs());
    }
    let threshold = RANK_TOLERANCE * largest;
    x.fill(0.0);
    let mut rank = 0;
    for k in 0..n {
        let value = a[k][k];
        if value > threshold {
            rank += 1;
            let mut projection = 0.0;
            for i in 0..n {
                projection += v[i][k] * rhs[i];
            }
            for i in 0..n {
                x[i] += v[i][k] * (projection / value);
            }
        }
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::solver::tests::with_eigenvalues;
    use nalgebra::{DMatrix, DVector, SymmetricEigen};

    /// The same sum over nalgebra's eigen-decomposition: the oracle.
    fn by_nalgebra(a: &DMatrix<f64>, rhs: &DVector<f64>) -> (DVector<f64>, usize) {
        let eig = SymmetricEigen::new((a + a.transpose()) * 0.5);
        let largest = eig.eigenvalues.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let mut x = DVector::zeros(a.nrows());
        let mut rank = 0;
        for (k, value) in eig.eigenvalues.iter().enumerate() {
            if *value > RANK_TOLERANCE * largest {
                rank += 1;
                let v = eig.eigenvectors.column(k);
                x.axpy(v.dot(rhs) / value, &v, 1.0);
            }
        }
        (x, rank)
    }

    /// Every size the route takes, full rank and rank-deficient (eigenvalues of 1 to 1e-4 and
    /// exact zeros, right-hand sides outside the range too): the same rank as nalgebra's
    /// decomposition and the same minimum-norm answer to 1e-11 of its size; and the answer is
    /// the pseudo-inverse's, `A x` the projection of `rhs` on the range.
    #[test]
    fn jacobi_gives_nalgebras_minimum_norm_answer_at_every_size_and_rank() {
        for n in 1..=MAX_JACOBI_ROWS {
            for (case, rank) in [n, n - n / 2, 1, n.saturating_sub(1).max(1)]
                .into_iter()
                .enumerate()
            {
                let eigenvalues: Vec<f64> = (0..n)
                    .map(|k| {
                        if k < rank {
                            10f64.powf(-4.0 * k as f64 / n as f64)
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let a = with_eigenvalues(&eigenvalues, 1000 * n as u64 + case as u64);
                let rhs = DVector::from_fn(n, |k, _| (1.7 * k as f64 + case as f64).sin());
                let mut x = vec![f64::NAN; n];
                let found =
                    solve_min_norm_jacobi(a.transpose().as_slice(), n, rhs.as_slice(), &mut x);
                let (expected, expected_rank) = by_nalgebra(&a, &rhs);
                assert_eq!((found, expected_rank), (rank, rank), "n = {n}, rank {rank}");
                let x = DVector::from_vec(x);
                assert!(
                    (&x - &expected).norm() <= 1e-11 * expected.norm(),
                    "n = {n}, rank {rank}: {}",
                    (&x - &expected).norm() / expected.norm()
                );
                // A x = A A⁺ rhs, the projection of rhs on A's range (orthogonal to the rest).
                let residual = &a * &x - &rhs;
                assert!(
                    (&a * &residual).norm() <= 1e-10 * rhs.norm(),
                    "n = {n}, rank {rank}"
                );
            }
        }
    }
}
