//! The multiplier solve of one instance (`physics.md` §1):
//! `u̇₀ = M⁻¹ (f − c)`, `(G M⁻¹ Gᵀ) λ = G u̇₀ − b`, `u̇ = u̇₀ − M⁻¹ Gᵀ λ`.
//!
//! `M` is block diagonal (one 6×6 block per free body), so `M⁻¹` is applied block by block with
//! Cholesky factors. The small symmetric matrix `A = G M⁻¹ Gᵀ` may be singular when rows are
//! redundant (a brick on four coplanar corners); λ is then Simbody's minimum-norm solution, found
//! from the eigen-decomposition of `A` with eigenvalues below `1e-10 · λmax` treated as zero.
//! `u̇` and the total constraint force `Gᵀλ` are unique either way.

use nalgebra::{Cholesky, DMatrix, DVector, Matrix6, SymmetricEigen, U6};

/// Relative threshold under which an eigenvalue of `G M⁻¹ Gᵀ` counts as zero.
pub const RANK_TOLERANCE: f64 = 1e-10;

/// Result of the solve.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// `M⁻¹ (f − c)`.
    pub udot_unconstrained: DVector<f64>,
    /// Constrained `u̇`.
    pub udot: DVector<f64>,
    /// Multipliers λ (Simbody's sign: the physical force is `−Gᵀλ`), internal row order.
    pub multipliers: DVector<f64>,
    /// Numerical rank of `G M⁻¹ Gᵀ`.
    pub rank: usize,
}

/// Factored block-diagonal mass matrix.
#[derive(Debug, Clone)]
pub struct MassFactor {
    blocks: Vec<Cholesky<f64, U6>>,
}

impl MassFactor {
    /// Factors every 6×6 block; `None` when one is not positive definite (or not finite).
    pub fn new(blocks: &[Matrix6<f64>]) -> Option<Self> {
        let blocks = blocks
            .iter()
            .map(|b| Cholesky::new(*b))
            .collect::<Option<Vec<_>>>()?;
        Some(Self { blocks })
    }

    /// `M⁻¹ x` for each column of `x` (nu rows).
    pub fn solve(&self, x: &DMatrix<f64>) -> DMatrix<f64> {
        let mut out = x.clone();
        for (j, chol) in self.blocks.iter().enumerate() {
            for col in 0..x.ncols() {
                let mut v = out.fixed_view_mut::<6, 1>(6 * j, col);
                let s = chol.solve(&v.clone_owned());
                v.copy_from(&s);
            }
        }
        out
    }

    /// `M⁻¹ x` for a vector.
    pub fn solve_vector(&self, x: &DVector<f64>) -> DVector<f64> {
        let mut out = x.clone();
        for (j, chol) in self.blocks.iter().enumerate() {
            let mut v = out.fixed_rows_mut::<6>(6 * j);
            let s = chol.solve(&v.clone_owned());
            v.copy_from(&s);
        }
        out
    }
}

/// Minimum-norm solution of the symmetric positive semi-definite system `a x = rhs`.
/// Returns the solution and the numerical rank.
pub fn solve_min_norm_spd(a: &DMatrix<f64>, rhs: &DVector<f64>) -> (DVector<f64>, usize) {
    let n = a.nrows();
    if n == 0 {
        return (DVector::zeros(0), 0);
    }
    // Symmetrise so rounding in G M⁻¹ Gᵀ cannot leave a skew part for the eigensolver.
    let sym = (a + a.transpose()) * 0.5;
    let eig = SymmetricEigen::new(sym);
    let largest = eig.eigenvalues.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let threshold = RANK_TOLERANCE * largest;
    let mut x = DVector::zeros(n);
    let mut rank = 0;
    for (k, value) in eig.eigenvalues.iter().enumerate() {
        if *value > threshold {
            rank += 1;
            let v = eig.eigenvectors.column(k);
            x += v * (v.dot(rhs) / value);
        }
    }
    (x, rank)
}

/// Solves for u̇ and λ given the factored mass matrix, `f − c`, G (m × nu) and b.
pub fn solve(
    mass: &MassFactor,
    applied: &DVector<f64>,
    g: &DMatrix<f64>,
    b: &DVector<f64>,
) -> Solution {
    let udot_unconstrained = mass.solve_vector(applied);
    if g.nrows() == 0 {
        return Solution {
            udot: udot_unconstrained.clone(),
            udot_unconstrained,
            multipliers: DVector::zeros(0),
            rank: 0,
        };
    }
    let minv_gt = mass.solve(&g.transpose());
    let a = g * &minv_gt;
    let rhs = g * &udot_unconstrained - b;
    let (multipliers, rank) = solve_min_norm_spd(&a, &rhs);
    let udot = &udot_unconstrained - &minv_gt * &multipliers;
    Solution {
        udot_unconstrained,
        udot,
        multipliers,
        rank,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_norm_of_duplicated_row_splits_evenly() {
        // Two identical rows: A = [[1, 1], [1, 1]], rhs = [2, 2] → min-norm x = [1, 1].
        let a = DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 1.0, 1.0]);
        let (x, rank) = solve_min_norm_spd(&a, &DVector::from_vec(vec![2.0, 2.0]));
        assert_eq!(rank, 1);
        assert!((x[0] - 1.0).abs() < 1e-14 && (x[1] - 1.0).abs() < 1e-14);
    }

    #[test]
    fn full_rank_matches_direct_solve() {
        let a = DMatrix::from_row_slice(3, 3, &[4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0]);
        let rhs = DVector::from_vec(vec![1.0, -2.0, 0.5]);
        let (x, rank) = solve_min_norm_spd(&a, &rhs);
        assert_eq!(rank, 3);
        assert!((&a * x - rhs).norm() < 1e-14);
    }
}
