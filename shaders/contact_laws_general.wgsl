// The laws of unilateral contact (unilateral.md §3, §4) for an instance with several contacts
// and bilateral rows (stage 2 of docs/gpu-unilateral.md): twin of
// src/cpu/unilateral/{phase.rs, modes.rs, impact.rs} and of the minimum-norm solve of
// src/cpu/cod.rs, same names and order, over lists of LAW_CONTACTS contacts. Simbody's sign: an
// impulse π changes the row velocities by −W π, λ_z ≤ 0 and π_z ≤ 0 push.
//
// Sizes come from the host: LAW_CONTACTS contacts (K) and LAW_BILATERAL bilateral rows; the
// contact space has LAW_ROWS = 3K + LAW_BILATERAL rows in canonical order — contact k's slip and
// normal rows (x, y, z) at 3k, 3k + 1, 3k + 2, the bilateral rows after them — and W is
// LAW_ROWS × LAW_ROWS, row-major. Per-contact flags are bit masks (bit k: contact k).
// Infinite friction (the impact's last resort) is the flag `infinite`, not μ = ∞. The codes,
// constants and tolerances shared with the one-contact laws are contact_common.wgsl's.

// `atan2_real` with the iterations of its loop (two, in f64's `trig_f64.wgsl`) counted.
fn counted_atan2(y: real, x: real) -> real {
    loop_count += 2u;
    return atan2_real(y, x);
}

alias Rows = array<real, LAW_ROWS>;
alias Square = array<real, LAW_ROWS_SQ>;
alias PerContact = array<real, LAW_CONTACTS>;

// `phase.rs`'s tie: violations within this fraction of the worst are pruned together.
const TIE: real = 1e-9;

// One contact's rows in a linear step: which (SET_*), the sliding direction and coefficient.
// A known normal value (an expander's) is passed beside the sets, as the CPU's `known`.
struct RowSet {
    kind: u32,
    direction: vec2<real>,
    mu: real,
}

alias RowSets = array<RowSet, LAW_CONTACTS>;

fn bit(k: u32) -> u32 {
    return 1u << k;
}

fn has(mask: u32, k: u32) -> bool {
    return (mask & (1u << k)) != 0u;
}

// Contact k's tangential pair of `v`.
fn pair(v: Rows, k: u32) -> vec2<real> {
    return vec2<real>(v[3u * k], v[3u * k + 1u]);
}

// W v.
fn times(w: ptr<function, Square>, v: Rows) -> Rows {
    var out: Rows;
    for (var r = 0u; r < LAW_ROWS; r++) { loop_count += 1u;
        var sum: real = 0.0;
        for (var c = 0u; c < LAW_ROWS; c++) { loop_count += 1u;
            sum += (*w)[r * LAW_ROWS + c] * v[c];
        }
        out[r] = sum;
    }
    return out;
}

fn dot_rows(a: Rows, b: Rows) -> real {
    var sum: real = 0.0;
    for (var r = 0u; r < LAW_ROWS; r++) { loop_count += 1u;
        sum += a[r] * b[r];
    }
    return sum;
}

fn minus(a: Rows, b: Rows) -> Rows {
    var out: Rows;
    for (var r = 0u; r < LAW_ROWS; r++) { loop_count += 1u;
        out[r] = a[r] - b[r];
    }
    return out;
}

fn largest_magnitude(v: Rows) -> real {
    var m: real = 0.0;
    for (var r = 0u; r < LAW_ROWS; r++) { loop_count += 1u;
        m = max(m, abs(v[r]));
    }
    return m;
}

// The minimum-norm least-squares x of the n × n system a x = rhs (`a` row-major with stride n,
// destroyed) by the complete orthogonal decomposition (`solve_min_norm_general`): column-pivoted
// Householder QR finds the rank (pivots below RANK_TOLERANCE of the first are zero), a QR of
// R₁ᵀ gives x. Symmetric or not, singular or not: a brick's four coplanar corners make W
// singular and sliding makes the reduced system non-symmetric.
fn solve_min_norm_general(a: ptr<function, Square>, n: u32, rhs: Rows) -> Rows {
    var c = rhs;
    var order: array<u32, LAW_ROWS>;
    for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i < n {
        order[i] = i;
    }
}
    var rank = 0u;
    var first: real = 0.0;
    var v: Rows;
    for (var k = 0u; k < n; k++) { loop_count += 1u;
        // Pivot: the remaining column with the largest norm below row k.
        var j = k;
        var norm: real = -1.0;
        for (var col = k; col < n; col++) { loop_count += 1u;
            var sum: real = 0.0;
            for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= k && i < n {
                sum += (*a)[i * n + col] * (*a)[i * n + col];
            }
}
            let this_norm = sqrt(sum);
            if this_norm > norm {
                j = col;
                norm = this_norm;
            }
        }
        if k == 0u {
            first = norm;
        }
        if norm <= RANK_TOLERANCE * first || norm == 0.0 {
            break;
        }
        for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i < n {
            let t = (*a)[i * n + k];
            (*a)[i * n + k] = (*a)[i * n + j];
            (*a)[i * n + j] = t;
        }
}
        let swapped = order[k];
        order[k] = order[j];
        order[j] = swapped;
        // The reflector I − 2 v vᵀ / (vᵀ v) mapping the pivot column onto ∓‖·‖ e_k.
        let alpha = select(norm, -norm, (*a)[k * n + k] > 0.0);
        var vv: real = 0.0;
        for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= k && i < n {
            v[i] = (*a)[i * n + k] - select(0.0, alpha, i == k);
            vv += v[i] * v[i];
        }
}
        if vv > 0.0 {
            for (var col = k; col < n; col++) { loop_count += 1u;
                var s: real = 0.0;
                for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= k && i < n {
                    s += v[i] * (*a)[i * n + col];
                }
}
                s = 2.0 * s / vv;
                for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= k && i < n {
                    (*a)[i * n + col] -= s * v[i];
                }
}
            }
            var s: real = 0.0;
            for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= k && i < n {
                s += v[i] * c[i];
            }
}
            s = 2.0 * s / vv;
            for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= k && i < n {
                c[i] -= s * v[i];
            }
}
        }
        rank = k + 1u;
    }
    var x: Rows;
    if rank == 0u {
        return x;
    }
    // R₁ y = c₁ with R₁ᵀ = Q₂ R₂ (n × rank, full column rank): y = Q₂ w, R₂ᵀ w = c₁. B = R₁ᵀ is
    // read in place, B(i, j) = a[j n + i], and reduced by Householder reflectors kept where B's
    // column j lies below its diagonal (their first entries and R₂'s diagonal apart): no second
    // matrix, so a thread's private memory stays small.
    var diagonal: Rows;
    var norms: Rows;
    for (var col = 0u; col < rank; col++) { loop_count += 1u;
        var sum: real = 0.0;
        for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= col && i < n {
            sum += (*a)[col * n + i] * (*a)[col * n + i];
        }
}
        let norm = sqrt(sum);
        let alpha = select(norm, -norm, (*a)[col * n + col] > 0.0);
        (*a)[col * n + col] -= alpha;
        var vv: real = 0.0;
        for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= col && i < n {
            vv += (*a)[col * n + i] * (*a)[col * n + i];
        }
}
        norms[col] = vv;
        diagonal[col] = alpha;
        if vv > 0.0 {
            for (var other = col + 1u; other < rank; other++) { loop_count += 1u;
                var s: real = 0.0;
                for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= col && i < n {
                    s += (*a)[col * n + i] * (*a)[other * n + i];
                }
}
                s = 2.0 * s / vv;
                for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= col && i < n {
                    (*a)[other * n + i] -= s * (*a)[col * n + i];
                }
}
            }
        } else {
            diagonal[col] = (*a)[col * n + col] + alpha;
        }
    }
    // R₂ᵀ w = c₁: R₂(j, i) = B(j, i) = a[i n + j] above the diagonal, `diagonal` on it.
    var y: Rows;
    for (var i = 0u; i < rank; i++) { loop_count += 1u;
        var sum = c[i];
        for (var j = 0u; j < LAW_ROWS; j++) { loop_count += 1u;
 if j < i {
            sum -= (*a)[i * n + j] * y[j];
        }
}
        y[i] = sum / diagonal[i];
    }
    // y ← Q₂ [w; 0]: the reflectors applied last to first.
    for (var step = 0u; step < rank; step++) { loop_count += 1u;
        let col = rank - 1u - step;
        let vv = norms[col];
        if vv > 0.0 {
            var s: real = 0.0;
            for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= col && i < n {
                s += (*a)[col * n + i] * y[i];
            }
}
            s = 2.0 * s / vv;
            for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i >= col && i < n {
                y[i] -= s * (*a)[col * n + i];
            }
}
        }
    }
    for (var i = 0u; i < LAW_ROWS; i++) { loop_count += 1u;
 if i < n {
        x[order[i]] = y[i];
    }
}
    return x;
}

// The values π (impulses or multipliers, one per row, known parts included) with `goal − W π`
// zero on every enforced row (`linear_step`): the bilateral rows, all three rows of a sticking
// contact (its tangential two when its normal value is known: bit k of `known`, the value
// `normals[k]`), the normal row of a sliding one, whose tangential value is −μ π_z d̂ (μ |π_z| d̂
// when π_z is known). One unknown per column (a combination of rows); the minimum-norm solution
// when rows are redundant.
fn linear_step(w: ptr<function, Square>, goal: Rows, sets: RowSets, known: u32, normals: PerContact) -> Rows {
    var value: Rows;
    var column_rows: array<vec3<u32>, LAW_ROWS>;
    var column_coefficients: array<vec3<real>, LAW_ROWS>;
    var column_count: array<u32, LAW_ROWS>;
    var equations: array<u32, LAW_ROWS>;
    var n = 0u;
    for (var j = 0u; j < LAW_BILATERAL; j++) { loop_count += 1u;
        let r = 3u * LAW_CONTACTS + j;
        column_rows[n] = vec3<u32>(r);
        column_coefficients[n] = vec3<real>(1.0, 0.0, 0.0);
        column_count[n] = 1u;
        equations[n] = r;
        n++;
    }
    var symmetric = true;
    var any_known = false;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        let x = 3u * k;
        let z = x + 2u;
        let s = sets[k];
        let is_known = has(known, k);
        let normal = normals[k];
        any_known = any_known || is_known;
        if s.kind == SET_OFF {
            if is_known {
                value[z] = normal;
            }
        } else if s.kind == SET_STICK {
            if is_known {
                value[z] = normal;
            }
            let last = select(z, x + 1u, is_known);
            for (var r = x; r <= last; r++) { loop_count += 1u;
                column_rows[n] = vec3<u32>(r);
                column_coefficients[n] = vec3<real>(1.0, 0.0, 0.0);
                column_count[n] = 1u;
                equations[n] = r;
                n++;
            }
        } else if !is_known {
            column_rows[n] = vec3<u32>(z, x, x + 1u);
            column_coefficients[n] = vec3<real>(1.0, -s.mu * s.direction.x, -s.mu * s.direction.y);
            column_count[n] = 3u;
            equations[n] = z;
            n++;
            symmetric = false;
        } else {
            value[z] = normal;
            value[x] = s.mu * abs(normal) * s.direction.x;
            value[x + 1u] = s.mu * abs(normal) * s.direction.y;
        }
    }
    if n == 0u {
        return value;
    }
    var rest = goal;
    if any_known {
        rest = minus(goal, times(w, value));
    }
    var a: Square;
    var rhs: Rows;
    for (var e = 0u; e < n; e++) { loop_count += 1u;
        rhs[e] = rest[equations[e]];
        for (var col = 0u; col < n; col++) { loop_count += 1u;
            var sum: real = 0.0;
            for (var j = 0u; j < column_count[col]; j++) { loop_count += 1u;
                sum += column_coefficients[col][j] * (*w)[equations[e] * LAW_ROWS + column_rows[col][j]];
            }
            a[e * n + col] = sum;
        }
    }
    if symmetric {
        // Symmetrised, so rounding in W cannot leave a skew part (`solve_min_norm_rows`).
        for (var r = 0u; r < n; r++) { loop_count += 1u;
            for (var col = 0u; col < LAW_ROWS; col++) { loop_count += 1u;
 if col >= r + 1u && col < n {
                let mean = 0.5 * (a[r * n + col] + a[col * n + r]);
                a[r * n + col] = mean;
                a[col * n + r] = mean;
            }
}
        }
    }
    let x = solve_min_norm_general(&a, n, rhs);
    for (var col = 0u; col < n; col++) { loop_count += 1u;
        for (var j = 0u; j < column_count[col]; j++) { loop_count += 1u;
            value[column_rows[col][j]] += x[col] * column_coefficients[col][j];
        }
    }
    return value;
}

// Whether sliding along `direction` with `mu` leaves contact k's normal row an effective mass
// W_zz − μ (W_zx d_x + W_zy d_y) of at most PAINLEVE · W_zz (`jams`, §3.3).
fn jams(w: ptr<function, Square>, k: u32, direction: vec2<real>, mu: real) -> bool {
    let x = 3u * k;
    let z = x + 2u;
    let w_zz = (*w)[z * LAW_ROWS + z];
    let a_eff = w_zz - mu * ((*w)[z * LAW_ROWS + x] * direction.x + (*w)[z * LAW_ROWS + x + 1u] * direction.y);
    return a_eff <= PAINLEVE * w_zz;
}

// A sliding set along `direction` (any, if the impulse was zero: `slide`).
fn slide_set(direction: vec2<real>, mu: real) -> RowSet {
    var d = direction;
    if !(is_finite_real(d.x) && is_finite_real(d.y)) {
        d = vec2<real>(1.0, 0.0);
    }
    return RowSet(SET_SLIDE, d, mu);
}
