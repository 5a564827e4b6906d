//! The reduction of redundant rows (`cpu::solver::solve_min_norm_reduced`) on four systems at
//! once: `BrickPush-v0`'s four frictionless corners are four rows of rank three at every stage,
//! and reduced one lane at a time their solve was half of its time.
//!
//! The operations are the reference's, in its order and unfused (no [`mul_add`]), each lane
//! pivoting on its own rows (the pivot's column picked by selects), so a lane gets the bits the
//! reference gives its system (`lanes::tests` holds them to it). Where the lanes would part
//! ways — ranks that differ, a full rank, a `BᵀB` that fails the certificate in some lane (the
//! reference then takes its Jacobi route) — the function hands the systems back and the caller
//! reduces them lane by lane as before.
//!
//! [`mul_add`]: crate::math::lanes::mul_add

// Index loops mirror the reference's loops, which these must match operation for operation.
#![allow(clippy::needless_range_loop)]

use simba::simd::SimdPartialOrd;

use crate::cpu::jacobi::MAX_JACOBI_ROWS;
use crate::cpu::solver::{RANK_TOLERANCE, REDUCTION_PIVOT};
use crate::math::lanes::{Lane, LaneMask, bits, is_finite, select, splat, sqrt};

/// Most rows of the reduced system (the reference's bound).
const R: usize = MAX_JACOBI_ROWS;

/// The minimum-norm `x` of `a x = rhs` for the lanes `active`, `a` of lower rank, as
/// `solve_min_norm_reduced` finds it in each lane; `None` where the active lanes do not all
/// take that route to the same rank with a certified `BᵀB` (their `x` is then found lane by
/// lane). The other lanes' entries are meaningless. Every active lane's values are finite.
#[inline(always)]
pub(super) fn reduced_lanes<const N: usize>(
    a: &[[Lane; N]; N],
    rhs: &[Lane; N],
    active: LaneMask,
) -> Option<[Lane; N]> {
    let on = bits(active);
    // The Schur complement left by the columns taken so far, symmetrised.
    let mut schur = [[splat(0.0); N]; N];
    for i in 0..N {
        for j in 0..N {
            schur[i][j] = splat(0.5) * (a[i][j] + a[j][i]);
        }
    }
    let mut largest = splat(0.0);
    for j in 0..N {
        largest = select(schur[j][j].simd_gt(largest), schur[j][j], largest);
    }
    let mut b = [[splat(0.0); R]; N];
    let mut rank = 0;
    for _ in 0..N {
        // Each lane's pivot, the first largest diagonal entry, and its column.
        let mut value = splat(0.0);
        let mut column: [Lane; N] = std::array::from_fn(|i| schur[i][0]);
        for j in 0..N {
            let larger = schur[j][j].simd_gt(value);
            value = select(larger, schur[j][j], value);
            for i in 0..N {
                column[i] = select(larger, schur[i][j], column[i]);
            }
        }
        let stop = bits(value.simd_le(splat(REDUCTION_PIVOT) * largest)) & on;
        if stop == on {
            break;
        }
        if stop != 0 || rank == R {
            return None; // The lanes' ranks differ, or exceed the reduced system's bound.
        }
        let root = sqrt(value);
        for i in 0..N {
            b[i][rank] = column[i] / root;
        }
        for i in 0..N {
            for j in 0..N {
                schur[i][j] -= b[i][rank] * b[j][rank];
            }
        }
        rank += 1;
    }
    if rank == N {
        return None; // Nothing to reduce: the reference decides on `a`'s own eigenvalues.
    }
    let mut x = [splat(0.0); N];
    if rank == 0 {
        return Some(x);
    }
    // BᵀB and Bᵀ rhs, summed as the reference's iterator sums (from −0).
    let mut gram = [[splat(0.0); R]; R];
    let mut projected = [splat(0.0); R];
    for p in 0..rank {
        for q in 0..rank {
            let mut sum = splat(-0.0);
            for i in 0..N {
                sum += b[i][p] * b[i][q];
            }
            gram[p][q] = sum;
        }
        let mut sum = splat(-0.0);
        for i in 0..N {
            sum += b[i][p] * rhs[i];
        }
        projected[p] = sum;
    }
    let twice = match rank {
        1 => certified_twice::<1>(&gram, &projected, active),
        2 => certified_twice::<2>(&gram, &projected, active),
        3 => certified_twice::<3>(&gram, &projected, active),
        4 => certified_twice::<4>(&gram, &projected, active),
        5 => certified_twice::<5>(&gram, &projected, active),
        _ => certified_twice::<6>(&gram, &projected, active),
    }?;
    for i in 0..N {
        let mut sum = splat(-0.0);
        for p in 0..rank {
            sum += b[i][p] * twice[p];
        }
        x[i] = sum;
    }
    Some(x)
}

/// `(BᵀB)⁻¹ (BᵀB)⁻¹ Bᵀrhs` through the certified Cholesky route of `solve_min_norm_rows`
/// (`K` rows of `gram`, `projected`), or `None` when a lane of `active` fails its certificate.
/// The reference factors `BᵀB` for each of its two solves; one factor gives the same bits.
#[inline(always)]
fn certified_twice<const K: usize>(
    gram: &[[Lane; R]; R],
    projected: &[Lane; R],
    active: LaneMask,
) -> Option<[Lane; R]> {
    let mut l = [[splat(0.0); K]; K];
    for r in 0..K {
        for c in 0..K {
            l[r][c] = splat(0.5) * (gram[r][c] + gram[c][r]);
        }
    }
    let mut trace = splat(-0.0);
    for k in 0..K {
        trace += l[k][k];
    }
    // `cholesky`: the factor in the lower triangle, each pivot positive and finite.
    let mut ok = active;
    for j in 0..K {
        let mut d = l[j][j];
        for k in 0..j {
            d -= l[j][k] * l[j][k];
        }
        ok = ok & is_finite(d) & d.simd_gt(splat(0.0));
        let root = sqrt(d);
        l[j][j] = root;
        for i in j + 1..K {
            let mut s = l[i][j];
            for k in 0..j {
                s -= l[i][k] * l[j][k];
            }
            l[i][j] = s / root;
        }
    }
    // `inverse_factor_norm2`: ‖L⁻¹‖²_F column by column.
    let mut norm2 = splat(0.0);
    let mut y = [splat(0.0); K];
    for k in 0..K {
        for i in k..K {
            let mut s = splat(if i == k { 1.0 } else { 0.0 });
            for m in k..i {
                s -= l[i][m] * y[m];
            }
            y[i] = s / l[i][i];
            norm2 += y[i] * y[i];
        }
    }
    let bound = trace * norm2 * splat(RANK_TOLERANCE);
    ok = ok & is_finite(bound) & bound.simd_lt(splat(1.0));
    if bits(ok) != bits(active) {
        return None;
    }
    let mut x = [splat(0.0); R];
    x[..K].copy_from_slice(&projected[..K]);
    for _ in 0..2 {
        // `cholesky_solve`: L Lᵀ x = b in place.
        for i in 0..K {
            for k in 0..i {
                x[i] -= l[i][k] * x[k];
            }
            x[i] /= l[i][i];
        }
        for i in (0..K).rev() {
            for k in i + 1..K {
                x[i] -= l[k][i] * x[k];
            }
            x[i] /= l[i][i];
        }
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::solver::solve_min_norm_reduced;
    use crate::cpu::solver::tests::with_eigenvalues;
    use crate::math::lanes::{LANES, from_fn, values};

    /// One seed per lane: `first`, `first + 1`, ...
    fn seeds(first: u64) -> [u64; LANES] {
        std::array::from_fn(|l| first + l as u64)
    }

    /// Each lane's `x` must be the reference's bits for its own system: four systems of one
    /// spectrum in four random bases (so the lanes pivot on different rows), ranks 1 to 3 in
    /// up to six rows; lanes of different ranks, or with a `BᵀB` whose certificate fails (an
    /// eigenvalue kept by the factor but under the rank rule), are handed back.
    fn lanes_of<const N: usize>(spectrum: &[f64], seeds: [u64; LANES]) -> Option<Vec<[f64; N]>> {
        let systems: Vec<_> = seeds
            .iter()
            .map(|seed| {
                let mut eigenvalues = spectrum.to_vec();
                eigenvalues.resize(N, 0.0);
                with_eigenvalues(&eigenvalues, *seed)
            })
            .collect();
        let a: [[Lane; N]; N] =
            std::array::from_fn(|i| std::array::from_fn(|k| from_fn(|l| systems[l][(i, k)])));
        let rhs: [Lane; N] = std::array::from_fn(|i| from_fn(|l| (i as f64 + l as f64).cos()));
        let x = reduced_lanes(&a, &rhs, is_finite(splat(0.0)))?;
        let x = x.map(values);
        Some(
            (0..LANES)
                .map(|l| std::array::from_fn(|i| x[i][l]))
                .collect(),
        )
    }

    fn check<const N: usize>() {
        let spectra: [&[f64]; 4] = [&[2.0], &[1.0, 0.3], &[1.0, 0.3, 1e-3], &[5.0, 1.0, 1e-6]];
        let mut pivots_differ = false;
        for (k, spectrum) in spectra.iter().enumerate() {
            if spectrum.len() >= N {
                continue;
            }
            let seeds = std::array::from_fn(|l| 100 * N as u64 + 10 * k as u64 + l as u64);
            let x = lanes_of::<N>(spectrum, seeds).expect("the lanes reduce alike");
            let mut first_pivot = Vec::new();
            for (l, x) in x.iter().enumerate() {
                let mut eigenvalues = spectrum.to_vec();
                eigenvalues.resize(N, 0.0);
                let a = with_eigenvalues(&eigenvalues, seeds[l]);
                let rhs: Vec<f64> = (0..N).map(|i| (i as f64 + l as f64).cos()).collect();
                let mut reference = vec![0.0; N];
                // Row-major: `a` is symmetric, so its column-major storage reads the same.
                let rank = solve_min_norm_reduced(a.as_slice(), N, &rhs, &mut reference);
                assert_eq!(rank, Some(spectrum.len()), "N = {N}, spectrum {spectrum:?}");
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(x), bits(&reference), "N = {N}, lane {l}, {spectrum:?}");
                first_pivot.push((0..N).fold(0, |p, j| if a[(j, j)] > a[(p, p)] { j } else { p }));
            }
            pivots_differ |= first_pivot.iter().any(|p| *p != first_pivot[0]);
        }
        assert!(pivots_differ || N < 3, "N = {N}: every lane pivoted alike");
    }

    #[test]
    fn lanes_reduce_to_the_reference_bits_each_on_its_own_pivots() {
        check::<2>();
        check::<3>();
        check::<4>();
        check::<5>();
        check::<6>();
    }

    #[test]
    fn lanes_that_would_part_ways_are_handed_back() {
        // Lane 0 of rank 1, the others of rank 2.
        let systems = [&[1.0][..], &[1.0, 0.5], &[1.0, 0.5], &[1.0, 0.5]].map(|spectrum| {
            let mut eigenvalues = spectrum.to_vec();
            eigenvalues.resize(4, 0.0);
            with_eigenvalues(&eigenvalues, 7)
        });
        let a: [[Lane; 4]; 4] = std::array::from_fn(|i| {
            std::array::from_fn(|k| from_fn(|l| systems[l.min(3)][(i, k)]))
        });
        let rhs = [splat(1.0); 4];
        let all = is_finite(splat(0.0));
        assert!(reduced_lanes(&a, &rhs, all).is_none());
        // Lane 0 alone is answered (the others are not active).
        let first = LaneMask::from(std::array::from_fn(|l| l == 0));
        assert!(reduced_lanes(&a, &rhs, first).is_some());
        // An eigenvalue the factor keeps but the rank rule drops: BᵀB is not certified.
        assert!(lanes_of::<4>(&[1.0, 1.0, 0.5 * RANK_TOLERANCE], seeds(1)).is_none());
        // Full rank: nothing to reduce.
        assert!(lanes_of::<3>(&[1.0, 0.5, 0.2], seeds(1)).is_none());
    }
}
