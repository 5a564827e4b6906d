//! The solver's tests: the certified Cholesky, the reduced and eigen routes, held to `A⁺ rhs`
//! built from a known spectrum.

use super::*;

#[test]
fn a_non_finite_system_has_no_answer_and_ends() {
    for bad in [f64::NAN, f64::INFINITY] {
        let mut a = DMatrix::from_row_slice(3, 3, &[2.0, 1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
        a[(1, 2)] = bad;
        let (x, rank) = solve_min_norm_spd(&a, &DVector::from_vec(vec![1.0, 1.0, 0.0]));
        assert!(x.iter().all(|v| v.is_nan()), "{bad}: {x}");
        assert_eq!(rank, 0);
    }
}

#[test]
fn min_norm_of_duplicated_row_splits_evenly() {
    // Two identical rows: A = [[1, 1], [1, 1]], rhs = [2, 2] → min-norm x = [1, 1].
    let a = DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 1.0, 1.0]);
    let (x, rank) = solve_min_norm_spd(&a, &DVector::from_vec(vec![2.0, 2.0]));
    assert_eq!(rank, 1);
    assert!((x[0] - 1.0).abs() < 1e-14 && (x[1] - 1.0).abs() < 1e-14);
}

/// A symmetric PSD matrix `Q diag(eigenvalues) Qᵀ` with a random orthogonal `Q`
/// ([`eigenvector_basis`]).
pub(crate) fn with_eigenvalues(eigenvalues: &[f64], seed: u64) -> DMatrix<f64> {
    let q = eigenvector_basis(eigenvalues.len(), seed);
    &q * DMatrix::from_diagonal(&DVector::from_column_slice(eigenvalues)) * q.transpose()
}

/// The random orthogonal `Q` of [`with_eigenvalues`] for `n` and `seed`.
pub(crate) fn eigenvector_basis(n: usize, seed: u64) -> DMatrix<f64> {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let random = DMatrix::from_fn(n, n, |_, _| next());
    random.qr().q()
}

#[test]
fn cholesky_route_agrees_with_the_eigen_route_on_full_rank_matrices() {
    // Sizes 1 to 15, condition numbers up to 1e6.
    for n in 1..=15 {
        for (seed, spread) in [(1u64, 1.0f64), (2, 1e3), (3, 1e6)] {
            let eigenvalues: Vec<f64> = (0..n)
                .map(|k| spread.powf(-(k as f64) / (n.max(2) - 1) as f64))
                .collect();
            let a = with_eigenvalues(&eigenvalues, seed + 10 * n as u64);
            let rhs = DVector::from_fn(n, |k, _| (k as f64 * 0.7).sin() + 0.3);
            let (x, rank) = solve_min_norm_spd(&a, &rhs);
            let (x_eig, rank_eig) = solve_min_norm_eigen(&a, &rhs);
            assert_eq!((rank, rank_eig), (n, n));
            let scale = x_eig.norm();
            assert!((&x - &x_eig).norm() <= 1e-15 * spread * 100.0 * scale);
            assert!((&a * &x - &rhs).norm() <= 1e-13 * spread * rhs.norm());
        }
    }
}

#[test]
fn cholesky_route_never_certifies_a_matrix_the_eigen_rule_calls_singular() {
    // One eigenvalue just under the threshold, one just over (kept), at several sizes:
    // the rank must be the eigen rule's, whichever route answers.
    for n in 2..=8 {
        for (small, expected) in [(0.5 * RANK_TOLERANCE, n - 1), (50.0 * RANK_TOLERANCE, n)] {
            let mut eigenvalues = vec![1.0; n];
            eigenvalues[n - 1] = small;
            let a = with_eigenvalues(&eigenvalues, 7 + n as u64);
            let rhs = DVector::from_element(n, 1.0);
            let (x, rank) = solve_min_norm_spd(&a, &rhs);
            let (x_eig, rank_eig) = solve_min_norm_eigen(&a, &rhs);
            assert_eq!(rank, expected, "n = {n}, smallest eigenvalue {small:e}");
            assert_eq!(rank_eig, expected);
            assert!((&x - &x_eig).norm() <= 1e-6 * x_eig.norm());
        }
    }
}

/// Rows of lower rank, two to sixteen of them, of rank up to six (a brick's twelve rows of
/// rank six, its four frictionless corners' four of rank three): the reduced route's rank
/// is the eigen route's, and both answers are `A⁺ rhs` to rounding times the condition of
/// the part kept (measured: the reduced route's error about the eigen route's, 4e-8 at a
/// condition of 2e8), with eigenvalues spread over eight decades and one just under or
/// just over the rank rule's threshold; a system of full rank, or of rank above six, it
/// hands back.
#[test]
fn the_reduced_route_is_the_eigen_route_for_rows_of_low_rank() {
    let spectra: [&[f64]; 6] = [
        &[],
        &[2.0],
        &[1.0, 0.3, 1e-3],
        &[5.0, 1.0, 1.0, 1.0, 1e-2, 1e-6],
        &[1.0, 1.0, 0.5 * RANK_TOLERANCE],
        &[1.0, 0.2, 50.0 * RANK_TOLERANCE],
    ];
    for n in 2..=16 {
        for (k, spectrum) in spectra.iter().enumerate() {
            if spectrum.len() >= n {
                continue; // Not of lower rank: nothing to reduce.
            }
            let mut eigenvalues = spectrum.to_vec();
            eigenvalues.resize(n, 0.0);
            let a = with_eigenvalues(&eigenvalues, 31 + 7 * n as u64 + k as u64);
            let rhs = DVector::from_fn(n, |i, _| (i as f64 * 0.9).sin() + 0.2);
            let mut x = vec![0.0; n];
            let rank = solve_min_norm_reduced(a.as_slice(), n, rhs.as_slice(), &mut x)
                .expect("rank within the Jacobi route's size");
            let (x_eig, rank_eig) = solve_min_norm_eigen(&a, &rhs);
            assert_eq!(rank, rank_eig, "n = {n}, spectrum {spectrum:?}");
            // Against A⁺ rhs from A's own construction, to rounding times the condition
            // of the part kept (as the eigen route's answer is).
            let kept: Vec<f64> = spectrum
                .iter()
                .copied()
                .filter(|l| *l > RANK_TOLERANCE * spectrum[0])
                .collect();
            let pseudo: Vec<f64> = eigenvalues
                .iter()
                .map(|l| if kept.contains(l) { 1.0 / l } else { 0.0 })
                .collect();
            let q = eigenvector_basis(n, 31 + 7 * n as u64 + k as u64);
            let exact =
                &q * DMatrix::from_diagonal(&DVector::from_vec(pseudo)) * q.transpose() * &rhs;
            let condition = kept.first().map_or(1.0, |l| l / kept[kept.len() - 1]);
            let x = DVector::from_vec(x);
            let scale = exact.norm().max(1e-300);
            for (route, answer) in [("reduced", &x), ("eigen", &x_eig)] {
                let error = (answer - &exact).norm() / scale;
                assert!(
                    error <= 1e-14 * condition.max(1.0) * n as f64,
                    "{route}, n = {n}, spectrum {spectrum:?}: {error:e}"
                );
            }
            // And through the public solve, which takes it.
            let (y, rank_spd) = solve_min_norm_spd(&a, &rhs);
            assert_eq!((rank_spd, &y), (rank, &x));
        }
        let a = with_eigenvalues(&vec![1.0; n], 5 + n as u64);
        let mut x = vec![0.0; n];
        assert!(solve_min_norm_reduced(a.as_slice(), n, &vec![1.0; n], &mut x).is_none());
    }
}

/// Rank-deficient `A = B Bᵀ` against the textbook `A⁺ = B (Bᵀ B)⁻² Bᵀ` (Cholesky solves,
/// no eigen decomposition): the eigen route keeps its answer where an iterative
/// decomposition could stop early on exact zero eigenvalues (as nalgebra's SVD does).
#[test]
fn the_eigen_route_gives_the_pseudo_inverse_answer_on_rank_deficient_matrices() {
    for (n, r, seed) in [(4, 3, 1u64), (6, 4, 2), (12, 9, 3), (12, 3, 4), (3, 1, 5)] {
        let b = with_eigenvalues(&vec![1.0; n], seed)
            .columns(0, r)
            .into_owned()
            * DMatrix::from_fn(r, r, |i, j| {
                if i <= j {
                    1.0 + (i + 2 * j) as f64 * 0.1
                } else {
                    0.0
                }
            });
        let a = &b * b.transpose();
        let rhs = DVector::from_fn(n, |k, _| (k as f64 * 1.3).cos());
        let btb = (b.transpose() * &b)
            .cholesky()
            .expect("B has full column rank");
        let expected = &b * btb.solve(&btb.solve(&(b.transpose() * &rhs)));
        let (x, rank) = solve_min_norm_spd(&a, &rhs);
        assert_eq!(rank, r, "n = {n}");
        assert!(
            (&x - &expected).norm() <= 1e-10 * expected.norm(),
            "n = {n}, r = {r}"
        );
    }
}

#[test]
fn mass_factor_inverts_each_block() {
    let block = |s: f64| {
        let b = Matrix6::from_fn(|r, c| ((r * 7 + c * 3) as f64 * s).sin());
        b * b.transpose() + Matrix6::identity() * 0.5
    };
    let blocks = [block(0.3), block(1.1)];
    let factor = MassFactor::new(&blocks).expect("SPD blocks");
    let x = DVector::from_fn(12, |k, _| k as f64 - 4.5);
    let y = factor.solve_vector(&x);
    for (j, b) in blocks.iter().enumerate() {
        let back = b * y.fixed_rows::<6>(6 * j);
        assert!((back - x.fixed_rows::<6>(6 * j)).norm() < 1e-12);
    }
    // One to nine columns: whole groups of four and a partial one, each column with the bits
    // of its own solve.
    for count in 1..=9 {
        let columns = DMatrix::from_fn(12, count, |r, c| ((r + 2 * c) as f64 * 0.37).sin());
        let solved = factor.solve(&columns);
        for c in 0..count {
            let single = factor.solve_vector(&columns.column(c).into_owned());
            assert_eq!(solved.column(c), single.column(0), "column {c} of {count}");
        }
    }
    // Columns shorter than the blocks: the blocks they hold, as `solve_vector` does, no panic.
    let short = DMatrix::from_fn(6, 5, |r, c| (r * c) as f64 - 2.0);
    let solved = factor.solve(&short);
    for c in 0..5 {
        let single = factor.solve_vector(&short.column(c).into_owned());
        assert_eq!(solved.column(c), single.column(0), "short column {c}");
    }
    let mut singular = blocks;
    singular[1][(2, 2)] = -1.0;
    assert!(MassFactor::new(&singular).is_none());
}

#[test]
fn rows_without_free_mobilities_get_zero_multipliers() {
    // A constraint between Ground and a prescribed body: m = 2 rows, nu = 0.
    let solution = solve(
        &MassFactor::new(&[]).expect("no blocks"),
        &DVector::zeros(0),
        &DMatrix::zeros(2, 0),
        &DVector::from_vec(vec![1.0, -2.0]),
    );
    assert_eq!(solution.multipliers, DVector::zeros(2));
    assert_eq!((solution.rank, solution.udot.len()), (0, 0));
}

#[test]
fn full_rank_matches_direct_solve() {
    let a = DMatrix::from_row_slice(3, 3, &[4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0]);
    let rhs = DVector::from_vec(vec![1.0, -2.0, 0.5]);
    let (x, rank) = solve_min_norm_spd(&a, &rhs);
    assert_eq!(rank, 3);
    assert!((&a * x - rhs).norm() < 1e-14);
}
