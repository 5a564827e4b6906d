// The impact law over LAW_CONTACTS contacts (unilateral.md §4; twin of
// src/cpu/unilateral/impact.rs): runs of impulse phases (`phase`, contact_phases_general.wgsl)
// under the energy guard; the types and the minimum-norm solve are contact_laws_general.wgsl's.

// The phases of one run of the impact law for scale σ of the restitution part, summed.
struct ImpactRun {
    impulse: Rows,
    losses: PerContact,
    jammed: u32,
    direction_unconverged: bool,
    rounds_exhausted: bool,
    gains: bool,
}

// Adds phase `p`, which started at row velocities `start`, to `r`: each contact takes
// π · (v_start + v_end) / 2 over its rows.
fn add_phase(r: ptr<function, ImpactRun>, p: Phase, start: Rows) {
    for (var row = 0u; row < LAW_ROWS; row++) { loop_count += 1u;
        (*r).impulse[row] += p.impulse[row];
    }
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        for (var j = 0u; j < 3u; j++) { loop_count += 1u;
            let row = 3u * k + j;
            (*r).losses[k] += p.impulse[row] * (start[row] + p.velocity[row]) / 2.0;
        }
    }
    (*r).jammed |= p.jammed;
    (*r).direction_unconverged = (*r).direction_unconverged || p.direction_unconverged;
    (*r).rounds_exhausted = (*r).rounds_exhausted || p.rounds_exhausted;
}

// T⁺ − T⁻ of the impulse π at row velocities v⁻: −π · v⁻ + ½ πᵀ W π (`energy_change`).
fn energy_change(w: ptr<function, Square>, v_minus: Rows, impulse: Rows) -> real {
    return -dot_rows(impulse, v_minus) + 0.5 * dot_rows(impulse, times(w, impulse));
}

// Whether a participant of `base` approaches faster than v_tol at `v`.
fn approaching(v: Rows, participates: u32, v_tol: real) -> bool {
    var any = false;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        any = any || (has(participates, k) && v[3u * k + 2u] < -v_tol);
    }
    return any;
}

// What `impact` returns (`ImpactOutcome`); per-contact flags are masks.
struct ImpactOutcome {
    impulse: Rows,
    velocity: Rows,
    energy_change: real,
    losses: PerContact,
    closed: u32,
    restitution: PerContact,
    friction: PerContact,
    jammed: u32,
    energy_clamped: bool,
    direction_unconverged: bool,
    rounds_exhausted: bool,
}

// The coefficients of the contacts (`Coefficients`), per contact.
struct ContactCoefficients {
    restitution: PerContact,
    mu_static: PerContact,
    mu_dynamic: PerContact,
}

// The phases of one run of the impact law, in order (`impact`'s `run`): the first (Poisson's
// compression, or Newton's one phase to its goal), Poisson's expansion, the plastic correction,
// and the jam projection (`jam_projection`: every participant sticks whatever its impulse,
// infinite friction, normals still only push; by complementarity it never gains).
const STAGE_FIRST: u32 = 0u;
const STAGE_EXPANSION: u32 = 1u;
const STAGE_CORRECTION: u32 = 2u;
const STAGE_JAM: u32 = 3u;

// The runs of the energy guard: σ = 1, then σ = 0, then bisection on σ, or the jam projection
// alone when even σ = 0 gains.
const RUN_FULL: u32 = 0u;
const RUN_ZERO: u32 = 1u;
const RUN_BISECTION: u32 = 2u;
const RUN_JAM: u32 = 3u;

// The impact of the contacts `participates` at row velocities v⁻ with energy scale `energy`
// (`impact`, §4): a contact's friction coefficient is μ_s if it arrives slipping no faster than
// v_roll, else μ_d; it is captured (e = 0) when e |v_n⁻| ≤ v_cap. A run is Poisson's compression
// then expansion by σ e times each contact's compression impulse (`newton`: one phase to the
// Newton goal), a plastic correction if a contact still approaches, the jam projection if even
// that fails. The energy guard scales the expansion down by bisection on σ, or replaces the
// impact by the jam projection if even σ = 0 gains.
//
// The CPU's nested calls (runs of phases) are one loop here around one call of `phase`, which
// keeps one copy of the phase (and of its minimum-norm solve) in the kernel: lavapipe's compile
// time grows with every inlined copy.
fn impact(w: ptr<function, Square>, v_minus: Rows, energy: real, participates: u32, k: ContactCoefficients, newton: bool, tol: ContactTolerances) -> ImpactOutcome {
    var base: PhaseContacts;
    base.participates = participates;
    var restitution: PerContact;
    var friction: PerContact;
    for (var c = 0u; c < LAW_CONTACTS; c++) { loop_count += 1u;
        let slip = hypot2(pair(v_minus, c));
        friction[c] = select(k.mu_dynamic[c], k.mu_static[c], slip <= tol.v_roll);
        let captured = k.restitution[c] * abs(v_minus[3u * c + 2u]) <= tol.v_cap;
        restitution[c] = select(k.restitution[c], 0.0, captured);
    }
    base.mu = friction;
    var run = RUN_FULL;
    var sigma: real = 1.0;
    var lo: real = 0.0;
    var hi: real = 1.0;
    var bisections = 0u;
    var energy_clamped = false;
    var r: ImpactRun;
    var chosen: ImpactRun;
    var stage = STAGE_FIRST;
    var start = v_minus;
    var expanding = base;
    // At most (3 + GUARD_STEPS) runs of at most four phases.
    let most = 4u * (3u + GUARD_STEPS);
    for (var count = 0u; count < most; count++) { loop_count += 1u;
        var contacts = base;
        var goal = start;
        if stage == STAGE_FIRST && newton {
            for (var c = 0u; c < LAW_CONTACTS; c++) { loop_count += 1u;
                let z = 3u * c + 2u;
                if has(base.participates, c) && v_minus[z] < -tol.v_tol {
                    goal[z] *= 1.0 + sigma * restitution[c];
                }
            }
        } else if stage == STAGE_EXPANSION {
            contacts = expanding;
        } else if stage == STAGE_JAM {
            contacts.infinite = ~0u;
        }
        var p = phase(w, goal, contacts, tol.v_roll, tol.v_tol);
        if stage == STAGE_FIRST && newton {
            // The phase ran to the Newton goal; its real end is v⁻ − W π.
            p.velocity = minus(v_minus, times(w, p.impulse));
        }
        add_phase(&r, p, start);
        var run_ends = false;
        if stage == STAGE_FIRST && !newton {
            expanding = base;
            for (var c = 0u; c < LAW_CONTACTS; c++) { loop_count += 1u;
                let normal = p.impulse[3u * c + 2u];
                if has(base.participates, c) && restitution[c] > 0.0 && normal < 0.0 {
                    expanding.known |= bit(c);
                    expanding.normals[c] = sigma * restitution[c] * normal;
                }
            }
            stage = select(STAGE_CORRECTION, STAGE_EXPANSION, expanding.known != 0u);
        } else if stage == STAGE_FIRST || stage == STAGE_EXPANSION {
            stage = STAGE_CORRECTION;
        } else if stage == STAGE_CORRECTION {
            let still = p.rounds_exhausted || approaching(p.velocity, base.participates, tol.v_tol);
            stage = STAGE_JAM;
            run_ends = !still;
        } else {
            run_ends = true;
        }
        start = p.velocity;
        // A correction only if a contact still approaches at the end of the first phases.
        if stage == STAGE_CORRECTION && !approaching(start, base.participates, tol.v_tol) {
            run_ends = true;
        }
        if run_ends {
        // The run is over: the guard decides.
        r.gains = energy_change(w, v_minus, r.impulse) > gain_tolerance() * abs(energy);
        var done = false;
        if run == RUN_FULL {
            chosen = r;
            done = !r.gains;
            energy_clamped = r.gains;
            run = RUN_ZERO;
            sigma = 0.0;
        } else if run == RUN_ZERO {
            if r.gains {
                run = RUN_JAM;
            } else {
                chosen = r;
                run = RUN_BISECTION;
                sigma = 0.5 * (lo + hi);
            }
        } else if run == RUN_BISECTION {
            if r.gains {
                hi = sigma;
            } else {
                lo = sigma;
                chosen = r;
            }
            bisections++;
            done = bisections == GUARD_STEPS;
            sigma = 0.5 * (lo + hi);
        } else {
            chosen = r;
            done = true;
        }
        if done {
            break;
        }
        r = ImpactRun();
        start = v_minus;
        stage = select(STAGE_FIRST, STAGE_JAM, run == RUN_JAM);
        }
    }
    var out: ImpactOutcome;
    out.impulse = chosen.impulse;
    out.velocity = minus(v_minus, times(w, chosen.impulse));
    out.energy_change = energy_change(w, v_minus, chosen.impulse);
    out.losses = chosen.losses;
    for (var c = 0u; c < LAW_CONTACTS; c++) { loop_count += 1u;
        if has(participates, c) && out.velocity[3u * c + 2u] <= tol.v_tol {
            out.closed |= bit(c);
        }
    }
    out.restitution = restitution;
    out.friction = friction;
    out.jammed = chosen.jammed;
    out.energy_clamped = energy_clamped;
    out.direction_unconverged = chosen.direction_unconverged;
    out.rounds_exhausted = chosen.rounds_exhausted;
    return out;
}
