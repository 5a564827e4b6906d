// The laws of unilateral contact (unilateral.md §3, §4) for an instance with one contact: its
// rows (x, y, z) are the whole contact space, W = G M⁻¹ Gᵀ is 3×3 and positive definite (one
// free body). Twin of src/cpu/unilateral/{phase.rs, modes.rs, impact.rs}, same names and order;
// what the CPU does over lists of contacts is done here for the one contact. Simbody's sign:
// an impulse π changes the row velocities by −W π, λ_z ≤ 0 and π_z ≤ 0 push.
//
// Infinite friction (the impact's last resort, `jam_projection`) is the flag `infinite`
// rather than μ = ∞: WGSL has no infinity literal. The codes, constants and tolerances shared
// with the several-contact laws are contact_common.wgsl's.

// One contact's rows in a linear step: which (SET_*), the sliding direction and coefficient, and
// a known normal value (an expander's).
struct RowSet {
    kind: u32,
    direction: vec2<real>,
    mu: real,
    known: bool,
    normal: real,
}

// Whether sliding along `direction` with `mu` leaves the normal row an effective mass
// W_zz − μ (W_zx d_x + W_zy d_y) of at most PAINLEVE · W_zz (`jams`, §3.3).
fn jams(w: mat3x3<real>, direction: vec2<real>, mu: real) -> bool {
    let a_eff = w[2][2] - mu * (w[0][2] * direction.x + w[1][2] * direction.y);
    return a_eff <= PAINLEVE * w[2][2];
}

// A sliding set along `direction` (any, if the impulse was zero: `slide`).
fn slide_set(direction: vec2<real>, mu: real) -> RowSet {
    var d = direction;
    if !(is_finite_real(d.x) && is_finite_real(d.y)) {
        d = vec2<real>(1.0, 0.0);
    }
    return RowSet(SET_SLIDE, d, mu, false, 0.0);
}

// x with W x = rhs for the 3×3 symmetric positive definite W: Cholesky, and where a pivot is not
// positive (W singular: not a one-free-body contact) zero, as the minimum-norm answer of a
// vanishing system.
fn solve_delassus(w: mat3x3<real>, rhs: vec3<real>) -> vec3<real> {
    let d0 = w[0][0];
    if !(d0 > 0.0) {
        return vec3<real>(0.0);
    }
    let p0 = 1.0 / sqrt(d0);
    let l10 = w[0][1] * p0;
    let l20 = w[0][2] * p0;
    let d1 = w[1][1] - l10 * l10;
    if !(d1 > 0.0) {
        return vec3<real>(0.0);
    }
    let p1 = 1.0 / sqrt(d1);
    let l21 = (w[1][2] - l20 * l10) * p1;
    let d2 = w[2][2] - l20 * l20 - l21 * l21;
    if !(d2 > 0.0) {
        return vec3<real>(0.0);
    }
    let p2 = 1.0 / sqrt(d2);
    let y0 = rhs.x * p0;
    let y1 = (rhs.y - l10 * y0) * p1;
    let y2 = (rhs.z - l20 * y0 - l21 * y1) * p2;
    let x2 = y2 * p2;
    let x1 = (y1 - l21 * x2) * p1;
    let x0 = (y0 - l10 * x1 - l20 * x2) * p0;
    return vec3<real>(x0, x1, x2);
}

// The values π (impulses or multipliers) with `target − W π` zero on the rows `s` enforces
// (`linear_step`): all three of a sticking contact (its tangential two when its normal value
// is known), the normal one of a sliding contact, whose tangential value is −μ π_z d̂.
fn linear_step(w: mat3x3<real>, goal: vec3<real>, s: RowSet) -> vec3<real> {
    var value = vec3<real>(0.0);
    if s.kind == SET_OFF {
        if s.known {
            value.z = s.normal;
        }
        return value;
    }
    if s.kind == SET_STICK {
        if !s.known {
            return solve_delassus(w, goal);
        }
        value.z = s.normal;
        let rest = goal - w * value;
        let a = mat2x2<real>(w[0].xy, w[1].xy);
        let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
        if !(abs(det) > 0.0) {
            return value;
        }
        value.x = (a[1][1] * rest.x - a[1][0] * rest.y) / det;
        value.y = (a[0][0] * rest.y - a[0][1] * rest.x) / det;
        return value;
    }
    let d = s.direction;
    if s.known {
        let p = s.normal;
        return vec3<real>(s.mu * abs(p) * d.x, s.mu * abs(p) * d.y, p);
    }
    let a = w[2][2] - s.mu * (w[0][2] * d.x + w[1][2] * d.y);
    let x = goal.z / a;
    if !is_finite_real(x) {
        return value;
    }
    return vec3<real>(-s.mu * d.x * x, -s.mu * d.y * x, x);
}

// What `settle_directions` returns, with the row set it leaves.
struct Settled {
    impulse: vec3<real>,
    velocity: vec3<real>,
    settled: bool,
    rows: RowSet,
    jammed: bool,
}

// The linear step with a sliding contact's direction moved to its end-of-phase slip while that
// slip is faster than v_roll (`settle_directions`): secant steps on h(φ) = angle(v̂(φ)) − φ
// (Broyden's method in one dimension), the first a full step d̂ ← v̂, each at most π/2 long.
fn settle_directions(w: mat3x3<real>, v_s: vec3<real>, start: RowSet, jammed: bool, v_roll: real) -> Settled {
    var s = start;
    var out = Settled(vec3<real>(0.0), v_s, true, start, jammed);
    var have_state = false;
    var old_phi: real = 0.0;
    var old_h: real = 0.0;
    var jacobian: real = -1.0;
    for (var iteration = 0u; iteration <= MAX_DIRECTION_ITERATIONS; iteration++) {
        let impulse = linear_step(w, v_s, s);
        let velocity = v_s - w * impulse;
        out.impulse = impulse;
        out.velocity = velocity;
        out.rows = s;
        let slipping = s.kind == SET_SLIDE && hypot2(velocity.xy) > v_roll;
        var phi: real = 0.0;
        var h: real = 0.0;
        if slipping {
            phi = atan2_real(s.direction.y, s.direction.x);
            h = wrap_angle(atan2_real(velocity.y, velocity.x) - phi);
        }
        let moved = v_s - velocity;
        let scale = max(max(abs(v_s.x), abs(v_s.y)), abs(v_s.z)) + max(max(abs(moved.x), abs(moved.y)), abs(moved.z));
        out.settled = !slipping || abs(h) <= direction_tolerance(scale, hypot2(velocity.xy));
        if out.settled || iteration == MAX_DIRECTION_ITERATIONS {
            return out;
        }
        if have_state {
            let dphi = wrap_angle(phi - old_phi);
            let dh = h - old_h;
            if dphi * dphi > 0.0 {
                jacobian += (dh - jacobian * dphi) / dphi;
            }
        } else {
            jacobian = -1.0;
        }
        var step = -h / jacobian;
        if !is_finite_real(step) {
            step = h * 0.5;
        }
        if abs(step) > 0.5 * PI_REAL {
            step *= 0.5 * PI_REAL / abs(step);
        }
        let sc = sin_cos_real(phi + step);
        let direction = vec2<real>(sc.y, sc.x);
        if !s.known && jams(w, direction, s.mu) {
            out.jammed = true;
            s = RowSet(SET_STICK, s.direction, s.mu, s.known, s.normal);
        } else {
            s.direction = direction;
        }
        have_state = true;
        old_phi = phi;
        old_h = h;
    }
    return out;
}

// One impulse phase S(v_s, π_E) (`phase`, §4.2).
struct Phase {
    impulse: vec3<real>,
    velocity: vec3<real>,
    rows: RowSet,
    jammed: bool,
    direction_unconverged: bool,
    rounds_exhausted: bool,
}

// The contact of a phase (`PhaseContact`): its coefficient (or `infinite`), whether it takes
// part, and an expander's known normal impulse.
struct PhaseContact {
    mu: real,
    infinite: bool,
    participates: bool,
    known: bool,
    known_normal: real,
}

// `phase`: the participant starts sticking; the worst violation is pruned (a pulling normal →
// off, an impulse outside the cone → sliding along it, an off contact penetrating faster than
// v_tol → sticking), at most 4 + 4 rounds.
fn phase(w: mat3x3<real>, v_s: vec3<real>, c: PhaseContact, v_roll: real, v_tol: real) -> Phase {
    let known = c.known && c.participates;
    let mu = select(c.mu, 0.0, c.infinite);
    var s = RowSet(select(SET_OFF, SET_STICK, c.participates), vec2<real>(1.0, 0.0), mu, known, c.known_normal);
    var out = Phase(vec3<real>(0.0), v_s, s, false, false, false);
    let rounds = 8u;
    for (var round = 0u; round <= rounds; round++) {
        let settled = settle_directions(w, v_s, s, out.jammed, v_roll);
        s = settled.rows;
        out.jammed = settled.jammed;
        out.direction_unconverged = out.direction_unconverged || !settled.settled;
        let impulse = settled.impulse;
        let velocity = settled.velocity;
        out.impulse = impulse;
        out.velocity = velocity;
        out.rows = s;
        let scale = max(max(abs(impulse.x), abs(impulse.y)), max(abs(impulse.z), 1e-30));
        let tolerance = 1e-10 * scale;
        var violated = false;
        var next = s;
        if c.participates {
            let tangential = hypot2(impulse.xy);
            let along = impulse.xy / tangential;
            let frictional = !c.infinite && !out.jammed;
            if s.kind == SET_STICK && !known {
                let excess = select(0.0, tangential - mu * abs(impulse.z), frictional);
                if impulse.z > tolerance && impulse.z >= excess {
                    // Sticking pulls: a contact that arrived approaching slides, else it opens.
                    next = RowSet(SET_OFF, s.direction, mu, known, s.normal);
                    if v_s.z < -v_tol && frictional && tangential > 0.0 {
                        let sliding = slide_set(along, mu);
                        if !jams(w, sliding.direction, mu) {
                            next = sliding;
                        }
                    }
                    violated = true;
                } else if excess > tolerance {
                    let sliding = slide_set(along, mu);
                    if jams(w, sliding.direction, mu) {
                        out.jammed = true;
                    } else {
                        next = sliding;
                        violated = true;
                    }
                }
            } else if s.kind == SET_SLIDE && !known {
                if impulse.z > tolerance {
                    next = RowSet(SET_OFF, s.direction, mu, known, s.normal);
                    violated = true;
                }
            } else if s.kind == SET_OFF && !known {
                if velocity.z < -v_tol {
                    next = RowSet(SET_STICK, s.direction, mu, known, s.normal);
                    violated = true;
                }
            } else if s.kind == SET_STICK && known {
                let excess = tangential - mu * abs(s.normal);
                if excess > tolerance {
                    next = slide_set(along, mu);
                    next.known = true;
                    next.normal = s.normal;
                    violated = true;
                }
            }
        }
        if !violated || round == rounds {
            out.rounds_exhausted = violated;
            return out;
        }
        s = next;
    }
    return out;
}

// What `impact` returns for the one contact (`ImpactOutcome`).
struct ImpactOutcome {
    impulse: vec3<real>,
    velocity: vec3<real>,
    energy_change: real,
    loss: real,
    closed: bool,
    restitution: real,
    friction: real,
    jammed: bool,
    energy_clamped: bool,
    direction_unconverged: bool,
    rounds_exhausted: bool,
}

// The phases of one run of the impact law for scale σ of the restitution part, summed.
struct ImpactRun {
    impulse: vec3<real>,
    loss: real,
    jammed: bool,
    direction_unconverged: bool,
    rounds_exhausted: bool,
    gains: bool,
}

// Adds phase `p`, which started at row velocities `start`, to `r` (the sums of `impact`).
fn add_phase(r: ptr<function, ImpactRun>, p: Phase, start: vec3<real>) {
    (*r).impulse += p.impulse;
    (*r).loss += dot(p.impulse, (start + p.velocity) * 0.5);
    (*r).jammed = (*r).jammed || p.jammed;
    (*r).direction_unconverged = (*r).direction_unconverged || p.direction_unconverged;
    (*r).rounds_exhausted = (*r).rounds_exhausted || p.rounds_exhausted;
}

// T⁺ − T⁻ of the impulse π at row velocities v⁻: −π · v⁻ + ½ πᵀ W π (`energy_change`).
fn energy_change(w: mat3x3<real>, v_minus: vec3<real>, impulse: vec3<real>) -> real {
    return -dot(impulse, v_minus) + 0.5 * dot(impulse, w * impulse);
}

// The guard's last resort (`jam_projection`): a plastic impact with infinite friction.
fn jam_projection(w: mat3x3<real>, v_minus: vec3<real>, base: PhaseContact, tol: ContactTolerances) -> Phase {
    var jam = base;
    jam.infinite = true;
    return phase(w, v_minus, jam, tol.v_roll, tol.v_tol);
}

// One run of the impact law (`impact`'s `run`): Poisson's compression then expansion by
// σ e times the compression impulse (`newton`: one phase to the Newton goal), a plastic
// correction if the contact still approaches, the jam projection if even that fails.
fn impact_run(w: mat3x3<real>, v_minus: vec3<real>, energy: real, base: PhaseContact, restitution: real, newton: bool, sigma: real, tol: ContactTolerances) -> ImpactRun {
    var r = ImpactRun(vec3<real>(0.0), 0.0, false, false, false, false);
    var end = v_minus;
    if !newton {
        let compression = phase(w, v_minus, base, tol.v_roll, tol.v_tol);
        add_phase(&r, compression, v_minus);
        end = compression.velocity;
        let normal = compression.impulse.z;
        if base.participates && restitution > 0.0 && normal < 0.0 {
            var known = base;
            known.known = true;
            known.known_normal = sigma * restitution * normal;
            let expansion = phase(w, compression.velocity, known, tol.v_roll, tol.v_tol);
            add_phase(&r, expansion, compression.velocity);
            end = expansion.velocity;
        }
    } else {
        var goal = v_minus;
        if base.participates && v_minus.z < -tol.v_tol {
            goal.z *= 1.0 + sigma * restitution;
        }
        var one = phase(w, goal, base, tol.v_roll, tol.v_tol);
        // The phase ran to the Newton goal; its real end is v⁻ − W π.
        one.velocity = v_minus - w * one.impulse;
        add_phase(&r, one, v_minus);
        end = one.velocity;
    }
    if base.participates && end.z < -tol.v_tol {
        let correction = phase(w, end, base, tol.v_roll, tol.v_tol);
        let still = correction.rounds_exhausted || correction.velocity.z < -tol.v_tol;
        add_phase(&r, correction, end);
        if still {
            add_phase(&r, jam_projection(w, correction.velocity, base, tol), correction.velocity);
        }
    }
    r.gains = energy_change(w, v_minus, r.impulse) > gain_tolerance() * abs(energy);
    return r;
}

// The impact of the contact at row velocities v⁻ with energy scale `energy` (`impact`, §4): the
// friction coefficient is μ_s if it arrives slipping no faster than v_roll, else μ_d; it is
// captured (e = 0) when e |v_n⁻| ≤ v_cap; the energy guard scales the expansion down by
// bisection, or replaces the impact by the jam projection if even none gains.
fn impact(w: mat3x3<real>, v_minus: vec3<real>, energy: real, participates: bool, restitution_in: real, mu_static: real, mu_dynamic: real, newton: bool, tol: ContactTolerances) -> ImpactOutcome {
    let slip = hypot2(v_minus.xy);
    let friction = select(mu_dynamic, mu_static, slip <= tol.v_roll);
    let captured = restitution_in * abs(v_minus.z) <= tol.v_cap;
    let restitution = select(restitution_in, 0.0, captured);
    let base = PhaseContact(friction, false, participates, false, 0.0);
    var r = impact_run(w, v_minus, energy, base, restitution, newton, 1.0, tol);
    var energy_clamped = false;
    if r.gains {
        energy_clamped = true;
        let at_zero = impact_run(w, v_minus, energy, base, restitution, newton, 0.0, tol);
        if at_zero.gains {
            r = ImpactRun(vec3<real>(0.0), 0.0, false, false, false, false);
            add_phase(&r, jam_projection(w, v_minus, base, tol), v_minus);
        } else {
            r = at_zero;
            var lo: real = 0.0;
            var hi: real = 1.0;
            for (var k = 0u; k < GUARD_STEPS; k++) {
                let mid = 0.5 * (lo + hi);
                let trial = impact_run(w, v_minus, energy, base, restitution, newton, mid, tol);
                if trial.gains {
                    hi = mid;
                } else {
                    lo = mid;
                    r = trial;
                }
            }
        }
    }
    let velocity = v_minus - w * r.impulse;
    return ImpactOutcome(
        r.impulse,
        velocity,
        energy_change(w, v_minus, r.impulse),
        r.loss,
        participates && velocity.z <= tol.v_tol,
        restitution,
        friction,
        r.jammed,
        energy_clamped,
        r.direction_unconverged,
        r.rounds_exhausted,
    );
}

// What `solve_modes` returns for the one contact (`ModeSolution`).
struct ModeSolution {
    multipliers: vec3<real>,
    acceleration: vec3<real>,
    mode: u32,
    direction: vec2<real>,
    painleve: bool,
    mode_cycle: bool,
}

// The mode and multipliers of the contact with free row accelerations `free` = G u̇₀ − b
// (`solve_modes`, §3): pruning from its mode before (`mode`, `direction`), with the sliding
// law's normal solve, impending slip at the static cone (§3.2) and the Painlevé check (§3.3).
fn solve_modes(w: mat3x3<real>, free: vec3<real>, mode: u32, direction: vec2<real>, touching: bool, slip: vec2<real>, mu_static: real, mu_dynamic: real, tol: ContactTolerances) -> ModeSolution {
    var state = MODE_OPEN;
    var d = direction;
    if touching && mode == MODE_STICK {
        state = MODE_STICK;
    } else if touching && mode == MODE_SLIDE {
        state = MODE_SLIDE;
    }
    var painleve = false;
    let rounds = 4u + 12u;
    for (var round = 0u; round <= rounds; round++) {
        var s = RowSet(SET_OFF, d, 0.0, false, 0.0);
        if state == MODE_STICK {
            s.kind = SET_STICK;
        } else if state == MODE_IMPENDING {
            s = RowSet(SET_SLIDE, d, mu_static, false, 0.0);
        } else if state == MODE_SLIDE {
            s = RowSet(SET_SLIDE, d, mu_dynamic, false, 0.0);
        }
        // Painlevé: a sliding normal row whose effective mass is not positive.
        if s.kind == SET_SLIDE && jams(w, s.direction, s.mu) {
            painleve = true;
            state = MODE_OPEN;
            continue;
        }
        let multipliers = linear_step(w, free, s);
        let acceleration = free - w * multipliers;
        let normal = multipliers.z;
        let tangential = hypot2(multipliers.xy);
        var violated = false;
        var next = state;
        var next_d = d;
        if state == MODE_STICK {
            let excess = tangential - mu_static * abs(normal);
            if normal > tol.f_tol && normal >= excess {
                violated = true;
                next = MODE_OPEN;
            } else if excess > tol.f_tol {
                violated = true;
                next = MODE_IMPENDING;
                next_d = multipliers.xy / tangential;
            }
        } else if state == MODE_IMPENDING || state == MODE_SLIDE {
            if normal > tol.f_tol {
                violated = true;
                next = MODE_OPEN;
            }
        } else if touching && !painleve && acceleration.z < -tol.a_tol {
            violated = true;
            let speed = hypot2(slip);
            if speed > tol.v_roll {
                next = MODE_SLIDE;
                next_d = slip / speed;
            } else {
                next = MODE_STICK;
            }
        }
        if !violated {
            // An impending contact slides only if it then accelerates along its direction.
            var started = false;
            if state == MODE_IMPENDING && dot(acceleration.xy, d) > tol.a_tol {
                state = MODE_SLIDE;
                started = true;
            }
            if !started || round == rounds {
                return ModeSolution(multipliers, acceleration, mode_of(state), d, painleve, false);
            }
            continue;
        }
        if round == rounds {
            return ModeSolution(multipliers, acceleration, mode_of(state), d, painleve, true);
        }
        state = next;
        d = next_d;
    }
    // Every round was spent on Painlevé exits: nothing is enforced any more.
    return ModeSolution(vec3<real>(0.0), free, MODE_OPEN, d, painleve, true);
}

// The public mode of a pruning state (`finish`): impending is sticking.
fn mode_of(state: u32) -> u32 {
    return select(state, MODE_STICK, state == MODE_IMPENDING);
}
