// The multiplier solve of one instance (physics.md §1); twin of src/cpu/solver.rs:
// u̇₀ = M⁻¹ (f − c), (G M⁻¹ Gᵀ) λ = G u̇₀ − b, u̇ = u̇₀ − M⁻¹ Gᵀ λ.
// M⁻¹ is applied in closed form per body (dynamics.wgsl). λ comes from `solve_multipliers`,
// generated per template (src/gpu/solve.rs): a certified straight-line Cholesky, and where the
// certificate fails, the minimum-norm solution below, from a cyclic Jacobi eigen-decomposition of G M⁻¹ Gᵀ
// with eigenvalues below RANK_TOLERANCE · λmax treated as zero (Jacobi: small, branch-light and
// accurate on tiny symmetric matrices, so it suits a GPU thread).
// Sizes come from the layout constants: ROWS rows, array capacities ROWS_CAP, ROWS_ROWS_CAP.

// Minimum-norm solution of the symmetric positive semi-definite system a x = rhs (ROWS × ROWS,
// row-major). `a` is destroyed.
fn solve_min_norm_spd(a: ptr<function, array<real, ROWS_ROWS_CAP>>, rhs: ptr<function, array<real, ROWS_CAP>>) -> array<real, ROWS_CAP> {
    let n = ROWS;
    var v: array<real, ROWS_ROWS_CAP>;
    for (var i = 0u; i < n; i++) {
        v[i * n + i] = 1.0;
    }
    for (var sweep = 0u; sweep < 32u; sweep++) {
        var off: real = 0.0;
        var diag: real = 0.0;
        for (var p = 0u; p < n; p++) {
            for (var q = 0u; q < n; q++) {
                let x = (*a)[p * n + q];
                if p == q {
                    diag += x * x;
                } else {
                    off += x * x;
                }
            }
        }
        if off <= REAL_EPSILON * REAL_EPSILON * diag {
            break;
        }
        for (var p = 0u; p < n; p++) {
            for (var q = p + 1u; q < n; q++) {
                let apq = (*a)[p * n + q];
                let app = (*a)[p * n + p];
                let aqq = (*a)[q * n + q];
                // An off-diagonal entry negligible next to its diagonal is zero: rotating on it
                // gains nothing, and a subnormal one (flushed to zero by GPUs) would make
                // θ = 0/0 when app = aqq.
                if abs(apq) <= 1e-3 * REAL_EPSILON * (abs(app) + abs(aqq)) || abs(apq) < 1e-30 {
                    (*a)[p * n + q] = 0.0;
                    (*a)[q * n + p] = 0.0;
                    continue;
                }
                let theta = (aqq - app) / (2.0 * apq);
                var t = 1.0 / (abs(theta) + sqrt(theta * theta + 1.0));
                if theta < 0.0 {
                    t = -t;
                }
                let c = 1.0 / sqrt(t * t + 1.0);
                let s = t * c;
                for (var k = 0u; k < n; k++) {
                    let akp = (*a)[k * n + p];
                    let akq = (*a)[k * n + q];
                    (*a)[k * n + p] = c * akp - s * akq;
                    (*a)[k * n + q] = s * akp + c * akq;
                }
                for (var k = 0u; k < n; k++) {
                    let apk = (*a)[p * n + k];
                    let aqk = (*a)[q * n + k];
                    (*a)[p * n + k] = c * apk - s * aqk;
                    (*a)[q * n + k] = s * apk + c * aqk;
                }
                for (var k = 0u; k < n; k++) {
                    let vkp = v[k * n + p];
                    let vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    var largest: real = 0.0;
    for (var k = 0u; k < n; k++) {
        largest = max(largest, abs((*a)[k * n + k]));
    }
    let threshold = RANK_TOLERANCE * largest;
    var x: array<real, ROWS_CAP>;
    for (var k = 0u; k < n; k++) {
        let value = (*a)[k * n + k];
        if value > threshold {
            var projection: real = 0.0;
            for (var i = 0u; i < n; i++) {
                projection += v[i * n + k] * (*rhs)[i];
            }
            for (var i = 0u; i < n; i++) {
                x[i] += v[i * n + k] * (projection / value);
            }
        }
    }
    return x;
}
