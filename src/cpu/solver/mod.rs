//! The multiplier solve of one instance (`physics.md` §1):
//! `u̇₀ = M⁻¹ (f − c)`, `(G M⁻¹ Gᵀ) λ = G u̇₀ − b`, `u̇ = u̇₀ − M⁻¹ Gᵀ λ`.
//!
//! `M` is block diagonal (one 6×6 block per free body), so `M⁻¹` is applied block by block with
//! Cholesky factors. The small symmetric matrix `A = G M⁻¹ Gᵀ` may be singular when rows are
//! redundant (a brick on four coplanar corners); λ is then Simbody's minimum-norm solution, found
//! from the eigen-decomposition of `A` with eigenvalues below `1e-10 · λmax` treated as zero.
//! `u̇` and the total constraint force `Gᵀλ` are unique either way.
//!
//! The eigen-decomposition is only needed when rank is in doubt. `A` is first factored by
//! Cholesky, and the factor is accepted when it *certifies* full rank under the same rule:
//! `λmin ≥ 1/‖L⁻¹‖²_F` and `λmax ≤ tr A`, so `tr A · ‖L⁻¹‖²_F < 1/RANK_TOLERANCE` proves every
//! eigenvalue is above the threshold, and the eigen route would have returned `A⁻¹ rhs` too.
//! The bound is loose by at most a factor `n²`, so only matrices within that factor of the
//! threshold (and the singular ones) take the eigen route.
//!
//! A system of lower rank (redundant rows: a brick's four corners, twelve rows of rank six, or
//! four frictionless corners, four rows of rank three) is reduced to its rank first: a pivoted
//! Cholesky factor `A ≈ B Bᵀ` leaves the `r × r` `BᵀB` with `A`'s nonzero eigenvalues, of full
//! rank as a rule, so the certified Cholesky answers it (`solve_min_norm_reduced`). The eigen
//! route proper is a cyclic Jacobi eigen-decomposition on the stack (`cpu::jacobi`, up to
//! `MAX_JACOBI_ROWS` rows) where nothing reduces (a full rank too ill-conditioned to certify)
//! and for the reduced `BᵀB` that does not certify; nalgebra's `SymmetricEigen` takes the rest.
//! The kernels take the certified Cholesky and the Jacobi route: `gpu::solve` generates the
//! certified Cholesky straight-line for the template's row count, and `shaders/solver.wgsl`'s
//! Jacobi route, `cpu::jacobi`'s twin, runs wherever the certificate fails, redundant rows
//! included (the same `A⁺ rhs` to rounding, by another route); on lavapipe the kernels compile
//! within 10 % of the Jacobi route alone with it, and faster once `M⁻¹` is in closed form too.
//! The CPU's lane path (`cpu::lanes::solve`) factors `A = U D Uᵀ`, the same factor without its
//! square roots, with the same pivots and certificate, and reduces a lane's system of lower
//! rank as this module does.
//!
//! The solve works on caller buffers (`solve_into`), so the integrators, which solve at every
//! stage of every instance, reuse one scratch allocation per instance.

use nalgebra::{DMatrix, DVector, Matrix6, SymmetricEigen};

use super::jacobi::{MAX_JACOBI_ROWS, solve_min_norm_jacobi};

/// Relative threshold under which an eigenvalue of `G M⁻¹ Gᵀ` counts as zero.
pub const RANK_TOLERANCE: f64 = 1e-10;

/// Bound on the eigen route's QR iterations, per row (the implicit QR of a symmetric
/// tridiagonal matrix converges in about two per eigenvalue).
const EIGEN_ITERATIONS_PER_ROW: usize = 1000;

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

/// Cholesky factor, in place, of the row-major `n × n` symmetric matrix `a`: `L` in the lower
/// triangle (the upper one is left as it was). False when a pivot is not positive and finite.
/// The kernels apply `M⁻¹` in closed form instead (`body_inverse_mass` and `inverse_mass_at`
/// in `shaders/dynamics.wgsl`, the lane path's formula).
///
/// Inlined always, as are [`cholesky_solve`] and [`inverse_factor_norm2`]: their callers pass
/// a literal `n` where they can (the 6×6 mass blocks, [`solve_min_norm_rows`]'s sizes up
/// to six), so the loops unroll and lose their bounds checks; the operations and their order,
/// hence the bits, are those of the general loops.
#[inline(always)]
fn cholesky(a: &mut [f64], n: usize) -> bool {
    let a = &mut a[..n * n];
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        // NaN is not finite, so a NaN pivot fails too.
        if !d.is_finite() || d <= 0.0 {
            return false;
        }
        let l = d.sqrt();
        a[j * n + j] = l;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / l;
        }
    }
    true
}

/// Solves `L Lᵀ x = b` in place (`b` becomes `x`) with the factor from [`cholesky`].
#[inline(always)]
fn cholesky_solve(l: &[f64], n: usize, b: &mut [f64]) {
    let (l, b) = (&l[..n * n], &mut b[..n]);
    for i in 0..n {
        for k in 0..i {
            b[i] -= l[i * n + k] * b[k];
        }
        b[i] /= l[i * n + i];
    }
    for i in (0..n).rev() {
        for k in i + 1..n {
            b[i] -= l[k * n + i] * b[k];
        }
        b[i] /= l[i * n + i];
    }
}

/// `‖L⁻¹‖²_F` for the factor from [`cholesky`], column by column of `L⁻¹` (lower triangular);
/// `y` is scratch of length `n`.
#[inline(always)]
fn inverse_factor_norm2(l: &[f64], n: usize, y: &mut [f64]) -> f64 {
    let (l, y) = (&l[..n * n], &mut y[..n]);
    let mut sum = 0.0;
    for k in 0..n {
        for i in k..n {
            let mut s = if i == k { 1.0 } else { 0.0 };
            for m in k..i {
                s -= l[i * n + m] * y[m];
            }
            y[i] = s / l[i * n + i];
            sum += y[i] * y[i];
        }
    }
    sum
}

/// The Cholesky factor of one 6×6 mass block, with its diagonal's reciprocals so that the
/// solves, which run for every column of `Gᵀ` at every derivative, multiply instead of divide.
#[derive(Debug, Clone)]
struct BlockFactor {
    /// Row-major, `L` in the lower triangle.
    l: [f64; 36],
    /// `1 / L[j][j]`.
    inv_diagonal: [f64; 6],
}

impl BlockFactor {
    fn new(block: &Matrix6<f64>) -> Option<Self> {
        let mut factor = Self {
            l: [0.0; 36],
            inv_diagonal: [0.0; 6],
        };
        factor.refactor(block).then_some(factor)
    }

    /// Factors `block` into `self` in place (no 336-byte factor built and moved per block:
    /// the event path refactors at every stage); false when it is not positive definite.
    fn refactor(&mut self, block: &Matrix6<f64>) -> bool {
        // Symmetric, so nalgebra's column-major storage reads as row-major.
        self.l.copy_from_slice(block.as_slice());
        if !cholesky(&mut self.l, 6) {
            return false;
        }
        for j in 0..6 {
            self.inv_diagonal[j] = 1.0 / self.l[j * 6 + j];
        }
        true
    }

    /// `L Lᵀ x = b` in place for `G` right-hand sides at once, `b[i][c]` being row `i` of
    /// column `c` ([`cholesky_solve`] at the fixed size, times the diagonal's reciprocals): each
    /// column's operations are a single column's, in its order (the same bits whatever `G`),
    /// but the columns' chains are independent, so interleaved (the compiler packs the
    /// four into one AVX2 value) they do not wait on one another's latencies as one column
    /// after another does.
    fn solve_group<const G: usize>(&self, b: &mut [[f64; G]; 6]) {
        let (l, inv) = (&self.l, &self.inv_diagonal);
        for i in 0..6 {
            for k in 0..i {
                let l_ik = l[i * 6 + k];
                let b_k = b[k];
                for (x, y) in b[i].iter_mut().zip(b_k) {
                    *x -= l_ik * y;
                }
            }
            for x in &mut b[i] {
                *x *= inv[i];
            }
        }
        for i in (0..6).rev() {
            for k in i + 1..6 {
                let l_ki = l[k * 6 + i];
                let b_k = b[k];
                for (x, y) in b[i].iter_mut().zip(b_k) {
                    *x -= l_ki * y;
                }
            }
            for x in &mut b[i] {
                *x *= inv[i];
            }
        }
    }

    /// `L Lᵀ x = b` in place for one column: [`solve_group`](Self::solve_group) of one.
    fn solve(&self, b: &mut [f64; 6]) {
        let mut column = b.map(|x| [x]);
        self.solve_group(&mut column);
        *b = column.map(|[x]| x);
    }
}

/// How many columns [`MassFactor::solve_columns_in_place`] solves at once: four f64, one AVX2
/// value.
const SOLVE_GROUP: usize = 4;

/// Factored block-diagonal mass matrix: one Cholesky factor per 6×6 block.
#[derive(Debug, Clone)]
pub struct MassFactor {
    blocks: Vec<BlockFactor>,
}

impl MassFactor {
    /// Factors every 6×6 block; `None` when one is not positive definite (or not finite).
    pub fn new(blocks: &[Matrix6<f64>]) -> Option<Self> {
        let blocks = blocks
            .iter()
            .map(BlockFactor::new)
            .collect::<Option<Vec<_>>>()?;
        Some(Self { blocks })
    }

    /// An empty factor, for [`refactor`](Self::refactor) to fill.
    pub(crate) fn empty() -> Self {
        Self { blocks: Vec::new() }
    }

    /// Factors `blocks` into `self`, reusing its allocation; false when one is not positive
    /// definite (or not finite), and `self` is then unusable until the next success.
    pub(crate) fn refactor(&mut self, blocks: &[Matrix6<f64>]) -> bool {
        let empty = BlockFactor {
            l: [0.0; 36],
            inv_diagonal: [0.0; 6],
        };
        self.blocks.resize(blocks.len(), empty);
        self.blocks
            .iter_mut()
            .zip(blocks)
            .all(|(factor, block)| factor.refactor(block))
    }

    /// `M⁻¹ x` in place for a column of `nu` values.
    fn solve_in_place(&self, x: &mut [f64]) {
        for (block, chunk) in self.blocks.iter().zip(x.chunks_exact_mut(6)) {
            if let Ok(b) = <&mut [f64; 6]>::try_from(chunk) {
                block.solve(b);
            }
        }
    }

    /// `M⁻¹ x` for each column of `x` (nu rows).
    pub fn solve(&self, x: &DMatrix<f64>) -> DMatrix<f64> {
        let mut out = x.clone();
        self.solve_columns_in_place(&mut out);
        out
    }

    /// `x ← M⁻¹ x` for each column of `x` (nu rows): [`SOLVE_GROUP`] columns at a time
    /// ([`BlockFactor::solve_group`]), each with the bits of its own
    /// [`solve_vector_in_place`](Self::solve_vector_in_place). The event path solves `M⁻¹ Gᵀ` at
    /// every assembly, and one column after another took 8 % of a bouncing-ball study.
    pub(crate) fn solve_columns_in_place(&self, x: &mut DMatrix<f64>) {
        let nu = x.nrows();
        if nu == 0 {
            return;
        }
        for group in x.as_mut_slice().chunks_mut(SOLVE_GROUP * nu) {
            // The blocks whose rows a column holds (all of them when `nu` is six per block).
            for (k, block) in self.blocks.iter().enumerate().take(nu / 6) {
                // Row-major: row `i` of every column side by side. Padding columns stay zero.
                let mut b = [[0.0; SOLVE_GROUP]; 6];
                for (c, column) in group.chunks_exact(nu).enumerate() {
                    for (i, value) in column[6 * k..6 * k + 6].iter().enumerate() {
                        b[i][c] = *value;
                    }
                }
                block.solve_group(&mut b);
                for (c, column) in group.chunks_exact_mut(nu).enumerate() {
                    for (i, value) in column[6 * k..6 * k + 6].iter_mut().enumerate() {
                        *value = b[i][c];
                    }
                }
            }
        }
    }

    /// `M⁻¹ x` for a vector.
    pub fn solve_vector(&self, x: &DVector<f64>) -> DVector<f64> {
        let mut out = x.clone();
        self.solve_vector_in_place(&mut out);
        out
    }

    /// `x ← M⁻¹ x` for a vector.
    pub(crate) fn solve_vector_in_place(&self, x: &mut DVector<f64>) {
        self.solve_in_place(x.as_mut_slice());
    }
}

/// The full-rank solve of the symmetric `a x = rhs` (`a` row-major in `work[..n²]`, destroyed),
/// or false when Cholesky fails or cannot certify rank `n` (see the module doc); `scratch` holds
/// at least `n` values. Inlined always: [`solve_min_norm_rows`] calls it with `n` a literal for
/// sizes up to six (every instance with at most two contacts, or one body's worth of rows),
/// see [`cholesky`]'s doc.
#[inline(always)]
fn solve_certified_full_rank(
    work: &mut [f64],
    n: usize,
    rhs: &[f64],
    x: &mut [f64],
    scratch: &mut [f64],
) -> bool {
    let (work, rhs, x) = (&mut work[..n * n], &rhs[..n], &mut x[..n]);
    let trace: f64 = (0..n).map(|k| work[k * n + k]).sum();
    if !cholesky(work, n) {
        return false;
    }
    // A non-finite bound (overflow, NaN) fails the certificate.
    let bound = trace * inverse_factor_norm2(work, n, scratch) * RANK_TOLERANCE;
    if !bound.is_finite() || bound >= 1.0 {
        return false;
    }
    x.copy_from_slice(rhs);
    cholesky_solve(work, n, x);
    true
}

/// Minimum-norm solution `x` of the symmetric positive semi-definite `a x = rhs`, `a` row-major
/// `n × n` (symmetrised here); returns the numerical rank. Cholesky when it certifies full rank,
/// the eigen route otherwise (module doc). `work` is scratch of at least `n² + n` values.
/// `solve_min_norm_spd` in `shaders/solver.wgsl` is the eigen route alone (`cpu::jacobi`).
pub(crate) fn solve_min_norm_rows(
    a: &[f64],
    n: usize,
    rhs: &[f64],
    x: &mut [f64],
    work: &mut [f64],
) -> usize {
    if n == 0 {
        return 0;
    }
    let (factor, scratch) = work[..n * n + n].split_at_mut(n * n);
    // Symmetrise so rounding in G M⁻¹ Gᵀ cannot leave a skew part.
    for r in 0..n {
        for c in 0..n {
            factor[r * n + c] = 0.5 * (a[r * n + c] + a[c * n + r]);
        }
    }
    let certified = match n {
        1 => solve_certified_full_rank(factor, 1, rhs, x, scratch),
        2 => solve_certified_full_rank(factor, 2, rhs, x, scratch),
        3 => solve_certified_full_rank(factor, 3, rhs, x, scratch),
        4 => solve_certified_full_rank(factor, 4, rhs, x, scratch),
        5 => solve_certified_full_rank(factor, 5, rhs, x, scratch),
        6 => solve_certified_full_rank(factor, 6, rhs, x, scratch),
        _ => solve_certified_full_rank(factor, n, rhs, x, scratch),
    };
    if certified {
        return n;
    }
    // A non-finite system has no answer (NaN, which every caller flags).
    if !a[..n * n].iter().chain(&rhs[..n]).all(|v| v.is_finite()) {
        x[..n].fill(f64::NAN);
        return 0;
    }
    if let Some(rank) = solve_min_norm_reduced(a, n, rhs, x) {
        return rank;
    }
    if n <= MAX_JACOBI_ROWS {
        return solve_min_norm_jacobi(a, n, rhs, x);
    }
    let (x_eig, rank) = solve_min_norm_eigen(
        &DMatrix::from_row_slice(n, n, a),
        &DVector::from_column_slice(rhs),
    );
    x[..n].copy_from_slice(x_eig.as_slice());
    rank
}

/// Minimum-norm solution of the symmetric positive semi-definite system `a x = rhs`.
/// Returns the solution and the numerical rank.
pub fn solve_min_norm_spd(a: &DMatrix<f64>, rhs: &DVector<f64>) -> (DVector<f64>, usize) {
    let n = a.nrows();
    let mut x = DVector::zeros(n);
    let mut work = vec![0.0; n * n + n];
    // Symmetrised inside, so the column-major storage may be read as row-major.
    let rank = solve_min_norm_rows(a.as_slice(), n, rhs.as_slice(), x.as_mut_slice(), &mut work);
    (x, rank)
}

/// Relative pivot under which [`solve_min_norm_reduced`]'s factor stops: the eigenvalues it
/// leaves out are at most `n` times this times `λmax`, far below `RANK_TOLERANCE · λmax`.
pub(crate) const REDUCTION_PIVOT: f64 = 1e-13;

/// Most rows [`solve_min_norm_reduced`] takes (its buffers live on the stack): eight corners'.
const MAX_REDUCED_ROWS: usize = 24;

/// The eigen route for rows of lower rank (a brick's four corners: twelve rows, rank six; its
/// four frictionless corners: four rows, rank three), through a smaller eigen problem with the
/// same eigenvalues. A pivoted Cholesky factor `A ≈ B Bᵀ` (`B` `n × r`, stopped once every
/// pivot left is below `REDUCTION_PIVOT` of the largest diagonal, so the part left out is far
/// below the rank rule's threshold) has `BᵀB` (`r × r`) with `A`'s nonzero eigenvalues: with
/// `BᵀB = V Λ Vᵀ`, `A⁺ = B V Λ⁻² Vᵀ Bᵀ`, so `x = B (BᵀB)⁺ (BᵀB)⁺ Bᵀ rhs`, each `(BᵀB)⁺` this module's
/// minimum-norm solve with its rank rule on `BᵀB`'s eigenvalues (the certified Cholesky where
/// `BᵀB` has full rank, as it mostly has, else the Jacobi route). The same answer and rank
/// as nalgebra's eigen-decomposition of `A` to rounding, for a fraction of its time (the sliding
/// bricks of `scenarios::sliding_bricks` ran 1.58× as fast); `None` (the caller takes `A`'s own
/// decomposition) when the factor has all `n` columns (nothing to reduce: `A` is of full rank
/// but too ill-conditioned for the certificate, and the rank rule needs its eigenvalues), when
/// the rank exceeds `MAX_JACOBI_ROWS` or the rows `MAX_REDUCED_ROWS`. `a` row-major, every
/// value finite.
pub(crate) fn solve_min_norm_reduced(
    a: &[f64],
    n: usize,
    rhs: &[f64],
    x: &mut [f64],
) -> Option<usize> {
    // Up to six rows (the lane path's systems) compiled for the row count, loops unrolled and
    // buffers no larger than the system; the same operations in the same order, so the bits.
    match n {
        1 => reduced::<1>(a, 1, rhs, x),
        2 => reduced::<2>(a, 2, rhs, x),
        3 => reduced::<3>(a, 3, rhs, x),
        4 => reduced::<4>(a, 4, rhs, x),
        5 => reduced::<5>(a, 5, rhs, x),
        6 => reduced::<6>(a, 6, rhs, x),
        _ if n <= MAX_REDUCED_ROWS => reduced::<MAX_REDUCED_ROWS>(a, n, rhs, x),
        _ => None,
    }
}

/// [`solve_min_norm_reduced`] with buffers for up to `CAP ≥ n` rows.
#[inline(always)]
fn reduced<const CAP: usize>(a: &[f64], n: usize, rhs: &[f64], x: &mut [f64]) -> Option<usize> {
    const R: usize = MAX_JACOBI_ROWS;
    // The Schur complement left by the columns taken so far, symmetrised; on the stack.
    let mut schur = [[0.0f64; CAP]; CAP];
    for i in 0..n {
        for j in 0..n {
            schur[i][j] = 0.5 * (a[i * n + j] + a[j * n + i]);
        }
    }
    let largest = (0..n).fold(0.0f64, |m, j| m.max(schur[j][j]));
    let mut b = [[0.0f64; R]; CAP];
    let mut rank = 0;
    for _ in 0..n {
        let (pivot, value) = (0..n).fold((0, 0.0f64), |(p, v), j| {
            let d = schur[j][j];
            if d > v { (j, d) } else { (p, v) }
        });
        if value <= REDUCTION_PIVOT * largest {
            break;
        }
        if rank == R {
            return None;
        }
        let root = value.sqrt();
        for i in 0..n {
            b[i][rank] = schur[i][pivot] / root;
        }
        for i in 0..n {
            for j in 0..n {
                schur[i][j] -= b[i][rank] * b[j][rank];
            }
        }
        rank += 1;
    }
    if rank == n {
        return None;
    }
    x[..n].fill(0.0);
    if rank == 0 {
        return Some(0);
    }
    // BᵀB and Bᵀ rhs.
    let mut gram = [0.0f64; R * R];
    let mut projected = [0.0f64; R];
    for p in 0..rank {
        for q in 0..rank {
            gram[p * rank + q] = (0..n).map(|i| b[i][p] * b[i][q]).sum();
        }
        projected[p] = (0..n).map(|i| b[i][p] * rhs[i]).sum();
    }
    // BᵀB is mostly of full rank: the certified Cholesky answers, else the Jacobi route.
    // (Sharing one factor between the two solves measured no faster: each solve is compiled
    // for its row count, and the factor is of a few rows.)
    let (mut once, mut twice) = ([0.0f64; R], [0.0f64; R]);
    let mut work = [0.0f64; R * R + R];
    let gram = &gram[..rank * rank];
    let found = solve_min_norm_rows(gram, rank, &projected[..rank], &mut once, &mut work);
    solve_min_norm_rows(gram, rank, &once[..rank], &mut twice, &mut work);
    for i in 0..n {
        x[i] = (0..rank).map(|p| b[i][p] * twice[p]).sum();
    }
    Some(found)
}

/// The eigen route of [`solve_min_norm_spd`] for systems of more than `MAX_JACOBI_ROWS` rows
/// (smaller ones take `cpu::jacobi`'s, which the tests hold to this one): `Σ vₖ (vₖ · rhs) / λₖ`
/// over nalgebra's eigenvalues above `RANK_TOLERANCE · λmax`.
fn solve_min_norm_eigen(a: &DMatrix<f64>, rhs: &DVector<f64>) -> (DVector<f64>, usize) {
    let n = a.nrows();
    // The eigen solver iterates until its off-diagonal vanishes, which a NaN or an infinity
    // never does: a non-finite system has no answer (NaN, which every caller flags), and the
    // iterations are bounded all the same.
    let no_answer = || (DVector::from_element(n, f64::NAN), 0);
    if !a.iter().chain(rhs.iter()).all(|x| x.is_finite()) {
        return no_answer();
    }
    let Some(eig) = SymmetricEigen::try_new(
        (a + a.transpose()) * 0.5,
        f64::EPSILON,
        EIGEN_ITERATIONS_PER_ROW * n.max(1),
    ) else {
        return no_answer();
    };
    let largest = eig.eigenvalues.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let threshold = RANK_TOLERANCE * largest;
    let mut x = DVector::zeros(n);
    let mut rank = 0;
    for (k, value) in eig.eigenvalues.iter().enumerate() {
        if *value > threshold {
            rank += 1;
            let v = eig.eigenvectors.column(k);
            x.axpy(v.dot(rhs) / value, &v, 1.0);
        }
    }
    (x, rank)
}

/// Scratch values [`solve_into`] needs for `m` rows and `nu` mobilities.
pub(crate) fn solve_scratch_len(m: usize, nu: usize) -> usize {
    m * nu + 2 * (m * m + m)
}

/// The solve on caller buffers: `udot_unconstrained` and `udot` hold `nu` values, `multipliers`
/// `m`, `scratch` at least [`solve_scratch_len`]; returns the rank. [`solve`] and the
/// integrators' derivative both come here, so evaluation and stepping share their arithmetic.
/// Twin of `solve_instance` in `shaders/evaluate.wgsl`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn solve_into(
    mass: &MassFactor,
    applied: &[f64],
    g: &DMatrix<f64>,
    b: &[f64],
    udot_unconstrained: &mut [f64],
    udot: &mut [f64],
    multipliers: &mut [f64],
    scratch: &mut [f64],
) -> usize {
    let (m, nu) = g.shape();
    // u̇₀ = M⁻¹ (f − c).
    udot_unconstrained.copy_from_slice(applied);
    mass.solve_in_place(udot_unconstrained);
    udot.copy_from_slice(udot_unconstrained);
    let (minv_gt, rest) = scratch.split_at_mut(m * nu);
    let (rows, work) = rest.split_at_mut(m * m + m);
    let (a_mat, rhs) = rows.split_at_mut(m * m);
    // Y = M⁻¹ Gᵀ, column r (= M⁻¹ times row r of G) at r·nu. With nu = 0 (rows on Ground and
    // prescribed bodies only) the columns are empty, A = 0, and the eigen route gives λ = 0.
    for r in 0..m {
        let column = &mut minv_gt[r * nu..(r + 1) * nu];
        for (k, value) in column.iter_mut().enumerate() {
            *value = g[(r, k)];
        }
        mass.solve_in_place(column);
    }
    // (G M⁻¹ Gᵀ) λ = G u̇₀ − b.
    for r in 0..m {
        for q in 0..m {
            a_mat[r * m + q] = (0..nu).map(|k| g[(r, k)] * minv_gt[q * nu + k]).sum();
        }
        let g_udot: f64 = (0..nu).map(|k| g[(r, k)] * udot_unconstrained[k]).sum();
        rhs[r] = g_udot - b[r];
    }
    let rank = solve_min_norm_rows(a_mat, m, rhs, multipliers, work);
    // u̇ = u̇₀ − M⁻¹ Gᵀ λ.
    for (k, value) in udot.iter_mut().enumerate() {
        *value -= (0..m)
            .map(|r| minv_gt[r * nu + k] * multipliers[r])
            .sum::<f64>();
    }
    rank
}

/// Solves for u̇ and λ given the factored mass matrix, `f − c`, G (m × nu) and b.
pub fn solve(
    mass: &MassFactor,
    applied: &DVector<f64>,
    g: &DMatrix<f64>,
    b: &DVector<f64>,
) -> Solution {
    let (m, nu) = g.shape();
    let mut udot_unconstrained = DVector::zeros(nu);
    let mut udot = DVector::zeros(nu);
    let mut multipliers = DVector::zeros(m);
    let rank = solve_into(
        mass,
        applied.as_slice(),
        g,
        b.as_slice(),
        udot_unconstrained.as_mut_slice(),
        udot.as_mut_slice(),
        multipliers.as_mut_slice(),
        &mut vec![0.0; solve_scratch_len(m, nu)],
    );
    Solution {
        udot_unconstrained,
        udot,
        multipliers,
        rank,
    }
}

#[cfg(test)]
pub(crate) mod tests;
