//! The minimum-norm solve's eigen route (`cpu::solver`), taken when the certified Cholesky
//! cannot prove full rank and the system does not reduce to a smaller one of full rank (on the
//! CPU, redundant rows such as a brick's four coplanar corners are reduced to their rank first,
//! `cpu::solver`'s `solve_min_norm_reduced`, and come here only when that reduced system does
//! not certify either; the kernels come here for every system that fails the certificate): a
//! cyclic Jacobi eigen-decomposition `A = V diag(λ) Vᵀ` of the small symmetric `A = G M⁻¹ Gᵀ`, then
//! `x = Σ vₖ (vₖ · rhs) / λₖ` over the eigenvalues above `RANK_TOLERANCE · λmax` (Simbody's
//! minimum-norm multipliers, `physics.md` §1).
//!
//! Twin of `solve_min_norm_spd` in `shaders/solver.wgsl`: the same sweeps, rotations, stopping rule
//! and rank rule in the same order (the kernel's `continue` and `break` are masks here), so the CPU
//! and the kernels take the same route where both take it (up to `MAX_JACOBI_ROWS`; larger
//! systems that do not reduce go to nalgebra's `SymmetricEigen`). Jacobi suits these small matrices: it is accurate to
//! rounding on small symmetric matrices, needs no tridiagonal form and no allocation (the matrices
//! live on the stack), and ends within a fixed number of sweeps (it converges quadratically, in
//! about five). It replaced `SymmetricEigen` on heap matrices for them, which allocated at every
//! redundant solve.
//!
//! The route is written once, generic over [`Value`]: `f64` for one system (the reference
//! path, `solve_min_norm_jacobi`), and the lane path's [`Lane`] for four instances' systems at
//! once, each lane masked from its own convergence on, so that every lane gets the bits the
//! scalar route gives its system. A rotation is a chain of divisions and square roots, so one
//! system at a time is bound by their latency; four at once hide it: `BrickPush-v0` (four
//! corners, rank three, then the eigen route at every stage) ran 2.9× as fast on lanes as with
//! the scalar Jacobi, and 3.1–3.2× as fast as with `SymmetricEigen`; reduced to rank three and
//! solved by the certified Cholesky, one lane at a time, it ran 1.55× as fast again, and
//! reduced four lanes at once (`lanes::reduce`) 1.7× as fast as that
//! (`docs/performance-log.md`).

// Index loops mirror the WGSL twin's, line for line.
#![allow(clippy::needless_range_loop)]

use simba::simd::SimdPartialOrd;

use super::solver::RANK_TOLERANCE;
use crate::math::lanes::{self, Lane, LaneMask};

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
        1 => scalar::<1>(a, rhs, x),
        2 => scalar::<2>(a, rhs, x),
        3 => scalar::<3>(a, rhs, x),
        4 => scalar::<4>(a, rhs, x),
        5 => scalar::<5>(a, rhs, x),
        6 => scalar::<6>(a, rhs, x),
        _ => {
            debug_assert!(n == 0, "{n} rows for the Jacobi route");
            0
        }
    }
}

/// [`solve_min_norm_jacobi`] for `N` rows.
#[inline(always)]
fn scalar<const N: usize>(a_in: &[f64], rhs: &[f64], x: &mut [f64]) -> usize {
    let (a_in, rhs, x) = (&a_in[..N * N], &rhs[..N], &mut x[..N]);
    let a: [[f64; N]; N] = std::array::from_fn(|p| std::array::from_fn(|q| a_in[p * N + q]));
    let rhs: [f64; N] = std::array::from_fn(|i| rhs[i]);
    let mut answer = [0.0; N];
    let kept = min_norm(&a, &rhs, true, &mut answer);
    x.copy_from_slice(&answer);
    kept.iter().filter(|k| **k).count()
}

/// What the route computes with: `f64` for one system, [`Lane`] for four at once (the lane
/// path's redundant instances, `Chunk::min_norm_multipliers`), each lane with its own mask.
/// Every operation is the same IEEE operation on each lane, so a lane's answer has the bits
/// the scalar route gives its system.
pub(crate) trait Value:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    /// One boolean per system.
    type Mask: Copy
        + std::ops::BitAnd<Output = Self::Mask>
        + std::ops::BitOr<Output = Self::Mask>
        + std::ops::Not<Output = Self::Mask>;
    /// `x` for every system.
    fn splat(x: f64) -> Self;
    /// `|self|`.
    fn abs(self) -> Self;
    /// `√self`.
    fn sqrt(self) -> Self;
    /// `self ≤ other`.
    fn le(self, other: Self) -> Self::Mask;
    /// `self < other`.
    fn lt(self, other: Self) -> Self::Mask;
    /// `self > other`.
    fn gt(self, other: Self) -> Self::Mask;
    /// `x` where `mask`, else `otherwise`.
    fn select(mask: Self::Mask, x: Self, otherwise: Self) -> Self;
    /// Whether `mask` holds for any system.
    fn any(mask: Self::Mask) -> bool;
}

impl Value for f64 {
    type Mask = bool;
    fn splat(x: f64) -> Self {
        x
    }
    fn abs(self) -> Self {
        f64::abs(self)
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn le(self, other: Self) -> bool {
        self <= other
    }
    fn lt(self, other: Self) -> bool {
        self < other
    }
    fn gt(self, other: Self) -> bool {
        self > other
    }
    fn select(mask: bool, x: Self, otherwise: Self) -> Self {
        if mask { x } else { otherwise }
    }
    fn any(mask: bool) -> bool {
        mask
    }
}

impl Value for Lane {
    type Mask = LaneMask;
    fn splat(x: f64) -> Self {
        lanes::splat(x)
    }
    fn abs(self) -> Self {
        lanes::abs(self)
    }
    fn sqrt(self) -> Self {
        lanes::sqrt(self)
    }
    fn le(self, other: Self) -> LaneMask {
        self.simd_le(other)
    }
    fn lt(self, other: Self) -> LaneMask {
        self.simd_lt(other)
    }
    fn gt(self, other: Self) -> LaneMask {
        self.simd_gt(other)
    }
    fn select(mask: LaneMask, x: Self, otherwise: Self) -> Self {
        lanes::select(mask, x, otherwise)
    }
    fn any(mask: LaneMask) -> bool {
        lanes::bits(mask) != 0
    }
}

/// The route on the systems `active` selects (the others' `x` is left as it is): `a`
/// symmetrised, its cyclic Jacobi sweeps, then `x = Σ vₖ (vₖ · rhs) / λₖ`; returns, per
/// eigenvalue slot, the systems that kept it (the rank is their count). A system stops
/// rotating at its own convergence, as the scalar route's loop ends, so its bits do not depend
/// on the systems beside it. `a[p][q]` is the WGSL twin's `a[p * n + q]`.
#[inline(always)]
pub(crate) fn min_norm<T: Value, const N: usize>(
    a_in: &[[T; N]; N],
    rhs: &[T; N],
    active: T::Mask,
    x: &mut [T; N],
) -> [T::Mask; N] {
    let (zero, one, eps) = (T::splat(0.0), T::splat(1.0), T::splat(f64::EPSILON));
    let mut a = [[zero; N]; N];
    let mut v = [[zero; N]; N];
    // Symmetrise so rounding in G M⁻¹ Gᵀ cannot leave a skew part.
    for p in 0..N {
        for q in 0..N {
            a[p][q] = T::splat(0.5) * (a_in[p][q] + a_in[q][p]);
        }
    }
    for i in 0..N {
        v[i][i] = one;
    }
    let mut rotating = active;
    for _sweep in 0..SWEEPS {
        let mut off = zero;
        let mut diag = zero;
        for p in 0..N {
            for q in 0..N {
                let x = a[p][q];
                if p == q {
                    diag = diag + x * x;
                } else {
                    off = off + x * x;
                }
            }
        }
        rotating = rotating & !off.le(eps * eps * diag);
        if !T::any(rotating) {
            break;
        }
        for p in 0..N {
            for q in p + 1..N {
                let apq = a[p][q];
                let app = a[p][p];
                let aqq = a[q][q];
                // An off-diagonal entry negligible next to its diagonal is zero: rotating on it
                // gains nothing, and a subnormal one (flushed to zero by GPUs) would make
                // θ = 0/0 when app = aqq.
                let negligible = apq.abs().le(T::splat(1e-3) * eps * (app.abs() + aqq.abs()))
                    | apq.abs().lt(T::splat(1e-30));
                let zeroed = rotating & negligible;
                a[p][q] = T::select(zeroed, zero, a[p][q]);
                a[q][p] = T::select(zeroed, zero, a[q][p]);
                let rotate = rotating & !negligible;
                if !T::any(rotate) {
                    continue;
                }
                let theta = (aqq - app) / (T::splat(2.0) * apq);
                let t = one / (theta.abs() + (theta * theta + one).sqrt());
                let t = T::select(theta.lt(zero), -t, t);
                let c = one / (t * t + one).sqrt();
                let s = t * c;
                for k in 0..N {
                    let akp = a[k][p];
                    let akq = a[k][q];
                    a[k][p] = T::select(rotate, c * akp - s * akq, akp);
                    a[k][q] = T::select(rotate, s * akp + c * akq, akq);
                }
                for k in 0..N {
                    let apk = a[p][k];
                    let aqk = a[q][k];
                    a[p][k] = T::select(rotate, c * apk - s * aqk, apk);
                    a[q][k] = T::select(rotate, s * apk + c * aqk, aqk);
                }
                for k in 0..N {
                    let vkp = v[k][p];
                    let vkq = v[k][q];
                    v[k][p] = T::select(rotate, c * vkp - s * vkq, vkp);
                    v[k][q] = T::select(rotate, s * vkp + c * vkq, vkq);
                }
            }
        }
    }
    let mut largest = zero;
    for k in 0..N {
        let d = a[k][k].abs();
        largest = T::select(d.gt(largest), d, largest);
    }
    let threshold = T::splat(RANK_TOLERANCE) * largest;
    let mut sum = [zero; N];
    let mut kept = [active & !active; N];
    for k in 0..N {
        let value = a[k][k];
        let keep = active & value.gt(threshold);
        kept[k] = keep;
        let mut projection = zero;
        for i in 0..N {
            projection = projection + v[i][k] * rhs[i];
        }
        for i in 0..N {
            sum[i] = T::select(keep, sum[i] + v[i][k] * (projection / value), sum[i]);
        }
    }
    for i in 0..N {
        x[i] = T::select(active, sum[i], x[i]);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::solver::tests::with_eigenvalues;
    use crate::math::lanes::LANES;
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

    /// Four systems at once on lane values give each system the scalar route's bits, whatever
    /// the others beside it need (sizes and ranks mixed per lane, so their sweeps end at
    /// different times), and leave the lanes not asked for as they were.
    #[test]
    fn four_systems_on_lanes_have_the_scalar_routes_bits() {
        fn check<const N: usize>() {
            let ranks = [N, 1, N - N / 2, N.saturating_sub(1).max(1)];
            let systems: Vec<([[f64; N]; N], [f64; N])> = (0..LANES)
                .map(|l| {
                    let eigenvalues: Vec<f64> = (0..N)
                        .map(|k| {
                            if k < ranks[l % 4] {
                                3f64.powf(-(k as f64) - l as f64)
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    let a = with_eigenvalues(&eigenvalues, 77 * N as u64 + l as u64);
                    (
                        std::array::from_fn(|p| std::array::from_fn(|q| a[(p, q)])),
                        std::array::from_fn(|i| (0.9 * i as f64 - l as f64).cos()),
                    )
                })
                .collect();
            let a: [[Lane; N]; N] = std::array::from_fn(|p| {
                std::array::from_fn(|q| lanes::lanes(std::array::from_fn(|l| systems[l].0[p][q])))
            });
            let rhs: [Lane; N] =
                std::array::from_fn(|i| lanes::lanes(std::array::from_fn(|l| systems[l].1[i])));
            for asked in [0b1111u32, 0b0101, 0b1000] {
                let active = LaneMask::from(std::array::from_fn(|l| asked & (1 << l) != 0));
                let mut x = [lanes::splat(-7.0); N];
                let kept = min_norm(&a, &rhs, active, &mut x);
                for (l, (a_l, rhs_l)) in systems.iter().enumerate() {
                    let lane = |v: Lane| lanes::values(v)[l];
                    if asked & (1 << l) == 0 {
                        assert!(
                            x.iter().all(|v| lane(*v) == -7.0),
                            "N = {N}, lane {l} moved"
                        );
                        continue;
                    }
                    let mut expected = [0.0; N];
                    let scalar_kept = min_norm(a_l, rhs_l, true, &mut expected);
                    for i in 0..N {
                        assert_eq!(
                            lane(x[i]).to_bits(),
                            expected[i].to_bits(),
                            "N = {N}, lane {l}"
                        );
                    }
                    let rank = kept
                        .iter()
                        .filter(|k| lanes::bits(**k) & (1 << l) != 0)
                        .count();
                    assert_eq!(rank, scalar_kept.iter().filter(|k| **k).count());
                    assert_eq!(rank, ranks[l], "N = {N}, lane {l}");
                }
            }
        }
        check::<1>();
        check::<2>();
        check::<3>();
        check::<4>();
        check::<5>();
        check::<6>();
    }
}
