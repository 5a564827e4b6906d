// The impulse phase and the mode determination over LAW_CONTACTS contacts (twin of
// src/cpu/unilateral/{phase.rs, modes.rs}); the types, the minimum-norm solve and `linear_step`
// are contact_laws_general.wgsl's, the impact law built on `phase` contact_impact_general.wgsl's.

alias Jacobian = array<real, LAW_CONTACTS_SQ>;

// x with J x = rhs for the K × K `j` (row-major) by LU with partial pivoting, as nalgebra's
// `lu().solve`; `ok` false where a pivot is zero or the answer not finite. Every index is a loop
// counter (the same in every invocation): the pivot's row swap is a select, not a store at a
// per-invocation index, which lavapipe's vectorised invocations do not always keep apart.
struct LuSolved {
    x: PerContact,
    ok: bool,
}

fn lu_solve(j_in: Jacobian, rhs: PerContact) -> LuSolved {
    let n = LAW_CONTACTS;
    var a = j_in;
    var b = rhs;
    var out: LuSolved;
    out.ok = true;
    for (var k = 0u; k < n; k++) { loop_count += 1u;
        var p = k;
        var largest = abs(a[k * n + k]);
        for (var i = k + 1u; i < n; i++) { loop_count += 1u;
            if abs(a[i * n + k]) > largest {
                largest = abs(a[i * n + k]);
                p = i;
            }
        }
        out.ok = out.ok && largest != 0.0;
        for (var i = k + 1u; i < n; i++) { loop_count += 1u;
            let swap = i == p;
            for (var c = 0u; c < n; c++) { loop_count += 1u;
                let top = a[k * n + c];
                let other = a[i * n + c];
                a[k * n + c] = select(top, other, swap);
                a[i * n + c] = select(other, top, swap);
            }
            let top = b[k];
            let other = b[i];
            b[k] = select(top, other, swap);
            b[i] = select(other, top, swap);
        }
        if largest != 0.0 {
            for (var i = k + 1u; i < n; i++) { loop_count += 1u;
                let factor = a[i * n + k] / a[k * n + k];
                for (var c = k; c < n; c++) { loop_count += 1u;
                    a[i * n + c] -= factor * a[k * n + c];
                }
                b[i] -= factor * b[k];
            }
        }
    }
    for (var step = 0u; step < n; step++) { loop_count += 1u;
        let i = n - 1u - step;
        var sum = b[i];
        for (var c = i + 1u; c < n; c++) { loop_count += 1u;
            sum -= a[i * n + c] * out.x[c];
        }
        out.x[i] = sum / a[i * n + i];
        out.ok = out.ok && is_finite_real(out.x[i]);
    }
    return out;
}

// What `settle_directions` returns, with the sets it leaves.
struct Settled {
    impulse: Rows,
    velocity: Rows,
    settled: bool,
    sets: RowSets,
    jammed: u32,
}

// The linear step with every sliding contact's direction moved towards its end-of-phase slip
// while that slip is faster than v_roll (`settle_directions`): Broyden steps on the sliding
// contacts' angles φ, h(φ) = angle(v̂(φ)) − φ, the first a full step d̂ ← v̂, each at most π/2
// long, restarted when the set of slipping contacts changes.
//
// The CPU keeps the slipping contacts' angles and Jacobian in lists of their own; here every
// contact has its place (indices are loop counters, the same in every invocation, see
// `lu_solve`), a contact not slipping holding h = 0 and an identity row and column of the
// Jacobian estimate. That system's solution is the CPU's (its blocks are decoupled, and the
// Broyden update leaves those rows and columns as they are).
fn settle_directions(w: ptr<function, Square>, v_s: Rows, start: RowSets, known: u32, normals: PerContact, jammed_in: u32, v_roll: real) -> Settled {
    var out: Settled;
    out.sets = start;
    out.jammed = jammed_in;
    var have_state = false;
    var old_slipping = 0u;
    var old_phi: PerContact;
    var old_h: PerContact;
    var jacobian: Jacobian;
    let scale_in = largest_magnitude(v_s);
    for (var iteration = 0u; iteration <= MAX_DIRECTION_ITERATIONS; iteration++) { loop_count += 1u;
        let impulse = linear_step(w, v_s, out.sets, known, normals);
        let velocity = minus(v_s, times(w, impulse));
        out.impulse = impulse;
        out.velocity = velocity;
        let scale = scale_in + largest_magnitude(minus(v_s, velocity));
        var slipping = 0u;
        var phi: PerContact;
        var h: PerContact;
        var settled = true;
        for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
            let s = out.sets[k];
            let slip = pair(velocity, k);
            if s.kind == SET_SLIDE && hypot2(slip) > v_roll {
                slipping |= bit(k);
                phi[k] = counted_atan2(s.direction.y, s.direction.x);
                h[k] = wrap_angle(counted_atan2(slip.y, slip.x) - phi[k]);
                settled = settled && abs(h[k]) <= direction_tolerance(scale, hypot2(slip));
            }
        }
        out.settled = settled;
        if settled || iteration == MAX_DIRECTION_ITERATIONS {
            break;
        }
        if have_state && old_slipping == slipping {
            var dphi: PerContact;
            var dh: PerContact;
            var norm: real = 0.0;
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                if has(slipping, k) {
                    dphi[k] = wrap_angle(phi[k] - old_phi[k]);
                    dh[k] = h[k] - old_h[k];
                    norm += dphi[k] * dphi[k];
                }
            }
            if norm > 0.0 {
                for (var r = 0u; r < LAW_CONTACTS; r++) { loop_count += 1u;
                    var j_dphi: real = 0.0;
                    for (var c = 0u; c < LAW_CONTACTS; c++) { loop_count += 1u;
                        j_dphi += jacobian[r * LAW_CONTACTS + c] * dphi[c];
                    }
                    let correction = (dh[r] - j_dphi) / norm;
                    for (var c = 0u; c < LAW_CONTACTS; c++) { loop_count += 1u;
                        jacobian[r * LAW_CONTACTS + c] += correction * dphi[c];
                    }
                }
            }
        } else {
            for (var r = 0u; r < LAW_CONTACTS; r++) { loop_count += 1u;
                for (var c = 0u; c < LAW_CONTACTS; c++) { loop_count += 1u;
                    jacobian[r * LAW_CONTACTS + c] = select(real(0.0), select(real(1.0), real(-1.0), has(slipping, r)), r == c);
                }
            }
        }
        var minus_h: PerContact;
        for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
            minus_h[k] = -h[k];
        }
        let solved = lu_solve(jacobian, minus_h);
        var step = solved.x;
        var longest: real = 0.0;
        for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
            if !solved.ok {
                step[k] = h[k] * 0.5;
            }
            longest = max(longest, abs(step[k]));
        }
        if longest > 0.5 * PI_REAL {
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                step[k] *= 0.5 * PI_REAL / longest;
            }
        }
        for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
            if has(slipping, k) {
                let sc = sin_cos_real(phi[k] + step[k]);
                let direction = vec2<real>(sc.y, sc.x);
                let mu = out.sets[k].mu;
                if !has(known, k) && jams(w, k, direction, mu) {
                    out.jammed |= bit(k);
                    out.sets[k].kind = SET_STICK;
                } else {
                    out.sets[k].direction = direction;
                }
            }
        }
        have_state = true;
        old_slipping = slipping;
        old_phi = phi;
        old_h = h;
    }
    return out;
}

// The contacts of a phase (`PhaseContact`): per contact its coefficient, and masks of those that
// take part, whose friction is infinite (the guard's jam projection), and whose normal impulse
// is known (an expander's, `normals[k]`).
struct PhaseContacts {
    mu: PerContact,
    participates: u32,
    infinite: u32,
    known: u32,
    normals: PerContact,
}

// One impulse phase S(v_s, π_E) (`phase`, §4.2).
struct Phase {
    impulse: Rows,
    velocity: Rows,
    sets: RowSets,
    jammed: u32,
    direction_unconverged: bool,
    rounds_exhausted: bool,
}

// `phase`: every participant starts sticking; the linear step is solved with the sliding
// contacts' directions settled; then the worst violation is pruned (a pulling normal → off, an
// impulse outside the cone → sliding along it, an off contact penetrating faster than v_tol →
// sticking), ties together, at most 4k + 4 rounds.
fn phase(w: ptr<function, Square>, v_s: Rows, c: PhaseContacts, v_roll: real, v_tol: real) -> Phase {
    let known = c.known & c.participates;
    var out: Phase;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        let mu = select(c.mu[k], 0.0, has(c.infinite, k));
        out.sets[k] = RowSet(select(SET_OFF, SET_STICK, has(c.participates, k)), vec2<real>(1.0, 0.0), mu);
    }
    let rounds = 4u * LAW_CONTACTS + 4u;
    for (var round = 0u; round <= rounds; round++) { loop_count += 1u;
        let settled = settle_directions(w, v_s, out.sets, known, c.normals, out.jammed, v_roll);
        out.sets = settled.sets;
        out.jammed = settled.jammed;
        out.direction_unconverged = out.direction_unconverged || !settled.settled;
        let impulse = settled.impulse;
        let velocity = settled.velocity;
        out.impulse = impulse;
        out.velocity = velocity;
        let tolerance = 1e-10 * max(largest_magnitude(impulse), 1e-30);
        var sizes: PerContact;
        var next = out.sets;
        var violated = 0u;
        for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
            let x = 3u * k;
            let z = x + 2u;
            let s = out.sets[k];
            let mu = s.mu;
            let tangential = hypot2(pair(impulse, k));
            let along = pair(impulse, k) / tangential;
            let frictional = !has(c.infinite, k) && !has(out.jammed, k);
            if !has(c.participates, k) {
                // Takes no part: keeps its zero impulse.
            } else if s.kind == SET_STICK && !has(known, k) {
                // An infinite coefficient or a jammed contact has no cone.
                let excess = select(0.0, tangential - mu * abs(impulse[z]), frictional);
                // The larger of the two violations decides.
                if impulse[z] > tolerance && impulse[z] >= excess {
                    // Sticking pulls: a contact that arrived approaching slides, else it opens.
                    var after = RowSet(SET_OFF, s.direction, mu);
                    if v_s[z] < -v_tol && frictional && tangential > 0.0 {
                        let sliding = slide_set(along, mu);
                        if !jams(w, k, sliding.direction, mu) {
                            after = sliding;
                        }
                    }
                    next[k] = after;
                    sizes[k] = impulse[z];
                    violated |= bit(k);
                } else if excess > tolerance {
                    let sliding = slide_set(along, mu);
                    if jams(w, k, sliding.direction, mu) {
                        out.jammed |= bit(k);
                    } else {
                        next[k] = sliding;
                        sizes[k] = excess;
                        violated |= bit(k);
                    }
                }
            } else if s.kind == SET_SLIDE && !has(known, k) {
                if impulse[z] > tolerance {
                    next[k] = RowSet(SET_OFF, s.direction, mu);
                    sizes[k] = impulse[z];
                    violated |= bit(k);
                }
            } else if s.kind == SET_OFF && !has(known, k) {
                if velocity[z] < -v_tol {
                    next[k] = RowSet(SET_STICK, s.direction, mu);
                    sizes[k] = -velocity[z] / max((*w)[z * LAW_ROWS + z], 1e-30);
                    violated |= bit(k);
                }
            } else if s.kind == SET_STICK && !has(c.infinite, k) {
                // A known normal: the cone is μ |π_z|.
                let excess = tangential - mu * abs(c.normals[k]);
                if excess > tolerance {
                    next[k] = slide_set(along, mu);
                    sizes[k] = excess;
                    violated |= bit(k);
                }
            }
        }
        out.rounds_exhausted = violated != 0u;
        if violated == 0u || round == rounds {
            break;
        }
        var worst: real = 0.0;
        for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
            if has(violated, k) {
                worst = max(worst, sizes[k]);
            }
        }
        for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
            if has(violated, k) && sizes[k] >= worst * (1.0 - TIE) {
                out.sets[k] = next[k];
            }
        }
    }
    return out;
}

// The contacts as the mode determination sees them (`ModeContact`): the modes before (MODE_*)
// and sliding directions, which touch their planes (a mask), their slip velocities.
struct ModeContacts {
    modes: array<u32, LAW_CONTACTS>,
    directions: array<vec2<real>, LAW_CONTACTS>,
    touching: u32,
    slips: array<vec2<real>, LAW_CONTACTS>,
}

// What `solve_modes` returns (`ModeSolution`).
struct ModeSolution {
    multipliers: Rows,
    acceleration: Rows,
    modes: array<u32, LAW_CONTACTS>,
    directions: array<vec2<real>, LAW_CONTACTS>,
    painleve: u32,
    mode_cycle: bool,
}

// The public answer from the pruning's states (`finish`): impending is sticking.
fn finish_modes(multipliers: Rows, acceleration: Rows, states: array<u32, LAW_CONTACTS>, directions: array<vec2<real>, LAW_CONTACTS>, painleve: u32, mode_cycle: bool) -> ModeSolution {
    var out = ModeSolution(multipliers, acceleration, states, directions, painleve, mode_cycle);
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        out.modes[k] = select(states[k], MODE_STICK, states[k] == MODE_IMPENDING);
    }
    return out;
}

// The modes and multipliers with free row accelerations `free` = G u̇₀ − b (`solve_modes`, §3):
// pruning from the modes before, with the sliding law's normal solve, impending slip at the
// static cone (§3.2), the Painlevé check (§3.3), and ties pruned together.
fn solve_modes(w: ptr<function, Square>, free: Rows, c: ModeContacts, k: ContactCoefficients, tol: ContactTolerances) -> ModeSolution {
    var states: array<u32, LAW_CONTACTS>;
    var directions = c.directions;
    for (var i = 0u; i < LAW_CONTACTS; i++) { loop_count += 1u;
        states[i] = MODE_OPEN;
        if has(c.touching, i) && (c.modes[i] == MODE_STICK || c.modes[i] == MODE_SLIDE) {
            states[i] = c.modes[i];
        }
    }
    var painleve = 0u;
    var none: PerContact;
    let rounds = 4u * LAW_CONTACTS + 12u;
    // One round past `rounds` is the way out when every round was spent on Painlevé exits:
    // nothing is enforced any more. (One call of `linear_step` in the loop: one copy in the
    // kernel.)
    for (var round = 0u; round <= rounds + 1u; round++) { loop_count += 1u;
        let exhausted = round > rounds;
        var sets: RowSets;
        var ill_posed = false;
        for (var i = 0u; i < LAW_CONTACTS; i++) { loop_count += 1u;
            if exhausted {
                states[i] = MODE_OPEN;
            }
            sets[i] = RowSet(SET_OFF, directions[i], 0.0);
            if states[i] == MODE_STICK {
                sets[i].kind = SET_STICK;
            } else if states[i] == MODE_IMPENDING {
                sets[i] = RowSet(SET_SLIDE, directions[i], k.mu_static[i]);
            } else if states[i] == MODE_SLIDE {
                sets[i] = RowSet(SET_SLIDE, directions[i], k.mu_dynamic[i]);
            }
            // Painlevé: a sliding normal row whose effective mass is not positive.
            if sets[i].kind == SET_SLIDE && jams(w, i, sets[i].direction, sets[i].mu) {
                painleve |= bit(i);
                states[i] = MODE_OPEN;
                ill_posed = true;
            }
        }
        if ill_posed {
            continue;
        }
        let multipliers = linear_step(w, free, sets, 0u, none);
        let acceleration = minus(free, times(w, multipliers));
        if exhausted {
            return finish_modes(multipliers, acceleration, states, directions, painleve, true);
        }
        var sizes: PerContact;
        var next = states;
        var next_directions = directions;
        var violated = 0u;
        for (var i = 0u; i < LAW_CONTACTS; i++) { loop_count += 1u;
            let z = 3u * i + 2u;
            let normal = multipliers[z];
            let tangential = hypot2(pair(multipliers, i));
            if states[i] == MODE_STICK {
                let excess = tangential - k.mu_static[i] * abs(normal);
                if normal > tol.f_tol && normal >= excess {
                    next[i] = MODE_OPEN;
                    sizes[i] = normal;
                    violated |= bit(i);
                } else if excess > tol.f_tol {
                    next[i] = MODE_IMPENDING;
                    next_directions[i] = pair(multipliers, i) / tangential;
                    sizes[i] = excess;
                    violated |= bit(i);
                }
            } else if states[i] == MODE_IMPENDING || states[i] == MODE_SLIDE {
                if normal > tol.f_tol {
                    next[i] = MODE_OPEN;
                    sizes[i] = normal;
                    violated |= bit(i);
                }
            } else if has(c.touching, i) && !has(painleve, i) && acceleration[z] < -tol.a_tol {
                let speed = hypot2(c.slips[i]);
                if speed > tol.v_roll {
                    next[i] = MODE_SLIDE;
                    next_directions[i] = c.slips[i] / speed;
                } else {
                    next[i] = MODE_STICK;
                }
                sizes[i] = -acceleration[z] / max((*w)[z * LAW_ROWS + z], 1e-30);
                violated |= bit(i);
            }
        }
        if violated == 0u {
            // An impending contact slides only if it then accelerates along its direction.
            var started = false;
            for (var i = 0u; i < LAW_CONTACTS; i++) { loop_count += 1u;
                if states[i] == MODE_IMPENDING && dot(pair(acceleration, i), directions[i]) > tol.a_tol {
                    states[i] = MODE_SLIDE;
                    started = true;
                }
            }
            if !started || round == rounds {
                return finish_modes(multipliers, acceleration, states, directions, painleve, false);
            }
            continue;
        }
        if round == rounds {
            return finish_modes(multipliers, acceleration, states, directions, painleve, true);
        }
        var worst: real = 0.0;
        for (var i = 0u; i < LAW_CONTACTS; i++) { loop_count += 1u;
            if has(violated, i) {
                worst = max(worst, sizes[i]);
            }
        }
        for (var i = 0u; i < LAW_CONTACTS; i++) { loop_count += 1u;
            if has(violated, i) && sizes[i] >= worst * (1.0 - TIE) {
                states[i] = next[i];
                directions[i] = next_directions[i];
            }
        }
    }
    var zero: Rows;
    return finish_modes(zero, free, states, directions, painleve, true);
}
