// The several-contact half of event-driven stepping (stage 2 of docs/gpu-unilateral.md): the
// contact space of an instance with several unilateral contacts and bilateral rows, the
// derivative in their modes, the event test and the settling at an event — twin of
// src/cpu/unilateral/{machine.rs, event.rs}, same names and order, over lists of LAW_CONTACTS
// contacts, with the laws of contact_laws_general.wgsl, contact_phases_general.wgsl and
// contact_impact_general.wgsl. Appended to the stepping kernel (RK4, no projection), whose state,
// derivative pieces and generated body walks it uses; the trial and the entry point are
// event_trial.wgsl's.
//
// From the host: SPACE_ROWS (the template row of each row of the contact space in canonical
// order: contact k's x, y, z at 3k, 3k + 1, 3k + 2, the bilateral rows after), ASSEMBLY_LOOPS
// (a bound on the loop iterations of one assembly and derivative, which the stepping kernel's
// code does not count itself), the carry offsets, EVENT_PHASE_*, MAX_BISECTIONS,
// MIN_STEP_FRACTION, STABLE_STEP_FACTOR, LOOP_BUDGET.

// The instance's contact space at a state (`InstanceContacts`) in canonical row order: W
// (symmetrised), the row velocities and free accelerations a₀ = G u̇₀ − b, each contact's
// separation, and what maps multipliers and impulses back to u.
struct Space {
    ok: bool,
    kin: array<BodyKinematics, NB_CAP>,
    w: Square,
    velocity: Rows,
    free: Rows,
    separation: PerContact,
    // G u over the rows: velocity − gu is what the planes' motion adds (`motion_power`).
    gu: Rows,
    udot_free: array<real, NU_CAP>,
    minv_gt: array<real, ROWS_NU_CAP>,
}

fn contact_space(i: u32, s: State) -> Space {
    loop_count += ASSEMBLY_LOOPS;
    var sys = assemble_instance(i, s, BAUMGARTE_OFF);
    let mass = mass_solve(sys.inverse, sys.applied, sys.jacobian);
    var out: Space;
    out.ok = sys.status == 0u && mass.ok;
    out.kin = sys.kin;
    out.udot_free = mass.minv_x;
    out.minv_gt = mass.minv_gt;
    let a_mat = gram_matrix(sys.jacobian, mass.minv_gt);
    let rows = SPACE_ROWS;
    let u = mobilities(s);
    for (var p = 0u; p < LAW_ROWS; p++) { loop_count += 1u;
        let r = rows[p];
        for (var q = 0u; q < LAW_ROWS; q++) { loop_count += 1u;
            let c = rows[q];
            let w = (a_mat[r * ROWS + c] + a_mat[c * ROWS + r]) * 0.5;
            out.w[p * LAW_ROWS + q] = w;
            out.ok = out.ok && is_finite_real(w);
        }
        var g_udot: real = 0.0;
        var g_u: real = 0.0;
        for (var k = 0u; k < NU; k++) { loop_count += 1u;
            g_udot += sys.jacobian[r * NU + k] * mass.minv_x[k];
            g_u += sys.jacobian[r * NU + k] * u[k];
        }
        // A disabled bilateral row is a zero row of G and W: it holds nothing (the CPU leaves
        // it out), and its errors are not the contact space's.
        let on = sys.enabled[r] != 0u;
        out.free[p] = select(0.0, g_udot - sys.bias[r], on);
        out.velocity[p] = select(0.0, sys.rows[r].velocity_error, on);
        out.gu[p] = select(0.0, g_u, on);
        out.ok = out.ok && is_finite_real(out.free[p]) && is_finite_real(out.velocity[p]);
    }
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        out.separation[k] = sys.rows[rows[3u * k + 2u]].position_error;
    }
    return out;
}

// M⁻¹ Gᵀ x for values x over the contact space's rows.
fn response(c: Space, x: Rows) -> array<real, NU_CAP> {
    var values: array<real, ROWS_CAP>;
    let rows = SPACE_ROWS;
    for (var p = 0u; p < LAW_ROWS; p++) { loop_count += 1u;
        values[rows[p]] = x[p];
    }
    return minv_gt_times(c.minv_gt, values);
}

// Applies the impulse π at the space `c` of `s` (`apply`): u⁺ = u⁻ − M⁻¹ Gᵀ π, and the planes'
// motion does π · (v − G u) on the free bodies.
fn apply_impulse(s: ptr<function, State>, c: Space, impulse: Rows) {
    let r = response(c, impulse);
    var du: array<real, NU_CAP>;
    for (var k = 0u; k < NU; k++) { loop_count += 1u;
        du[k] = -r[k];
    }
    correct_velocity(s, du);
    (*s).work.x += dot_rows(impulse, minus(c.velocity, c.gu));
}

// The friction-loss integrals, one per contact.
alias Losses = PerContact;

// The multipliers over the contact space's rows.
alias Values = Rows;

fn integrate_losses(start: Losses, h: real, k1: Losses, k2: Losses, k3: Losses, k4: Losses) -> Losses {
    var out: Losses;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        out[k] = start[k] + h / 6.0 * (k1[k] + 2.0 * k2[k] + 2.0 * k3[k] + k4[k]);
    }
    return out;
}

// start + h (wa a + wb b + wc c) per contact: a Merson stage's or end's friction losses
// (`combine_state`'s twin for the loss integrals).
fn combine_losses(start: Losses, h: real, wa: real, a: Losses, wb: real, b: Losses, wc: real, c: Losses) -> Losses {
    var out: Losses;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        out[k] = start[k] + h * (wa * a[k] + wb * b[k] + wc * c[k]);
    }
    return out;
}

// Per contact the sliding direction frozen at a step's start, and a mask of the contacts whose
// friction follows the slip at the step's stages (`simulate`'s `frozen` and `Machine::follows`).
struct Frozen {
    directions: array<vec2<real>, LAW_CONTACTS>,
    follows: u32,
}

// At a step's start `c`: a sliding contact is armed once its slip exceeds v_roll; its friction
// keeps the mode's direction below it, and follows the slip at the stages only above it. The
// mode keeps ŝ_a, the direction an event inside the step is settled with (the CPU's `simulate`).
fn step_start(m: ptr<function, Machine>, c: Space) -> Frozen {
    var out: Frozen;
    out.directions = (*m).direction;
    out.follows = 0u;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        if (*m).mode[k] != MODE_SLIDE {
            out.follows |= bit(k);
            continue;
        }
        let slip = pair(c.velocity, k);
        let speed = hypot2(slip);
        if speed > (*m).tol.v_roll {
            (*m).armed |= bit(k);
            out.directions[k] = slip / speed;
            (*m).direction[k] = out.directions[k];
            out.follows |= bit(k);
        }
    }
    return out;
}

// How deep the deepest contact is inside its plane (≥ 0).
fn deepest_penetration(c: Space) -> real {
    var deepest: real = 0.0;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        deepest = max(deepest, -c.separation[k]);
    }
    return deepest;
}

// ẏ with the contacts in their modes (`derivative_parts_at`): the rates of the bodies and the
// work, each contact's friction-loss rate λ · v over its rows, and λ.
struct EventDerivative {
    d: Derivative,
    loss: Losses,
    multipliers: Rows,
}

// The row sets of the derivative (`parts_into`): a sliding contact slides along its slip while
// that is at least v_roll, the friction follows it and it is not reversed against the frozen
// direction; else along the frozen direction.
fn derivative_sets(c: Space, m: Machine, frozen: Frozen) -> RowSets {
    var sets: RowSets;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        sets[k] = RowSet(SET_OFF, frozen.directions[k], m.k.mu_dynamic[k]);
        if m.mode[k] == MODE_STICK {
            sets[k].kind = SET_STICK;
        } else if m.mode[k] == MODE_SLIDE {
            sets[k].kind = SET_SLIDE;
            let v = pair(c.velocity, k);
            let speed = hypot2(v);
            let slip = v / speed;
            if has(frozen.follows, k) && speed >= m.tol.v_roll && dot(slip, frozen.directions[k]) > 0.0 {
                sets[k].direction = slip;
            }
        }
    }
    return sets;
}

// The derivative's rest once the multipliers λ are known (`parts_into` after its linear step).
fn derivative_from(i: u32, s: State, c: Space, multipliers: Rows) -> EventDerivative {
    let correction = response(c, multipliers);
    var udot: array<real, NU_CAP>;
    for (var k = 0u; k < NU; k++) { loop_count += 1u;
        udot[k] = c.udot_free[k] - correction[k];
    }
    var out: EventDerivative;
    out.d = body_rates(i, s, udot);
    var finite = true;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        let x = 3u * k;
        out.loss[k] = multipliers[x] * c.velocity[x] + multipliers[x + 1u] * c.velocity[x + 1u] + multipliers[x + 2u] * c.velocity[x + 2u];
        finite = finite && is_finite_real(out.loss[k]);
    }
    out.multipliers = multipliers;
    out.d.power = vec2<real>(dot_rows(multipliers, minus(c.velocity, c.gu)), applied_power(i, s, c.kin));
    out.d.ok = out.d.ok && c.ok && finite && is_finite_real(out.d.power.x) && is_finite_real(out.d.power.y);
    return out;
}

// The longest step RK4 takes the sliding friction stably with (`stable_step`): 2 / (‖W_TT‖∞ κ)
// with κ the largest μ_d N / max(|v_t|, v_roll) of the sliding contacts whose friction follows
// their slip, W_TT over every sliding contact's tangential rows; −1 for none.
fn stable_step(c: Space, m: Machine, frozen: Frozen, multipliers: Rows) -> real {
    var rate: real = 0.0;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        if m.mode[k] != MODE_SLIDE || !has(frozen.follows, k) {
            continue;
        }
        let speed = hypot2(pair(c.velocity, k));
        let normal = max(-multipliers[3u * k + 2u], 0.0);
        rate = max(rate, m.k.mu_dynamic[k] * normal / max(speed, m.tol.v_roll));
    }
    if rate <= 0.0 {
        return -1.0;
    }
    var norm: real = 0.0;
    for (var a = 0u; a < 3u * LAW_CONTACTS; a++) { loop_count += 1u;
        if a % 3u == 2u || m.mode[a / 3u] != MODE_SLIDE {
            continue;
        }
        var sum: real = 0.0;
        for (var b = 0u; b < 3u * LAW_CONTACTS; b++) { loop_count += 1u;
            if b % 3u != 2u && m.mode[b / 3u] == MODE_SLIDE {
                sum += abs(c.w[a * LAW_ROWS + b]);
            }
        }
        norm = max(norm, sum);
    }
    return STABLE_STEP_FACTOR / (norm * rate);
}

// The first half of `has_event` for the step from (a) to (b) of length h: an open contact
// closes (its separation, or the Hermite dip inside the step), or an armed sliding contact's slip
// along its step-start direction falls to v_roll. Returns 1 for an event; 2 when the modes
// determined at b must be compared with the modes to know (the second half, in `trial`).
fn event_before_modes(a: Space, b: Space, h: real, m: Machine, frozen: Frozen) -> u32 {
    let v_tol = m.tol.v_tol;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        let z = 3u * k + 2u;
        if m.mode[k] == MODE_OPEN {
            let s_a = a.separation[k];
            let v_a = a.velocity[z];
            let s_b = b.separation[k];
            let v_b = b.velocity[z];
            if closes(s_a, v_a, s_b, v_b, h, v_tol) {
                return 1u;
            }
        } else if m.mode[k] == MODE_SLIDE && has(m.armed, k) && dot(pair(b.velocity, k), frozen.directions[k]) <= m.tol.v_roll {
            return 1u;
        }
    }
    return 2u;
}

fn closed_mask(m: Machine) -> u32 {
    var closed = 0u;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        closed |= select(0u, bit(k), m.mode[k] != MODE_OPEN);
    }
    return closed;
}

fn modes_differ(a: array<u32, LAW_CONTACTS>, b: array<u32, LAW_CONTACTS>) -> bool {
    var differ = false;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        differ = differ || a[k] != b[k];
    }
    return differ;
}

// The energy scale of an impact's guard (`energy_scale`): the free bodies' kinetic energy plus
// ½ v² / W_rr per contact row.
fn energy_scale(i: u32, s: State, c: Space) -> real {
    var relative: real = 0.0;
    for (var r = 0u; r < 3u * LAW_CONTACTS; r++) { loop_count += 1u;
        let d = c.w[r * LAW_ROWS + r];
        if d > 0.0 {
            relative += 0.5 * c.velocity[r] * c.velocity[r] / d;
        }
    }
    return kinetic_energy(i, s, c.kin) + relative;
}

// The rows a projection holds for the modes (`held`): all three of a sticking contact, the
// normal one of a sliding contact (no friction: a projection is not a collision), none of an
// open one.
fn held(m: Machine) -> RowSets {
    var sets: RowSets;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        sets[k] = RowSet(SET_OFF, m.direction[k], 0.0);
        if m.mode[k] == MODE_STICK {
            sets[k].kind = SET_STICK;
        } else if m.mode[k] == MODE_SLIDE {
            sets[k].kind = SET_SLIDE;
        }
    }
    return sets;
}

