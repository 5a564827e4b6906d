// The one-contact half of event-driven stepping (stage 1 of docs/gpu-unilateral.md): the
// contact space of an instance with one unilateral contact, the derivative in its mode, the
// event test and the settling at an event — twin of src/cpu/unilateral/{machine.rs, event.rs}
// for one contact, with the laws of contact_laws.wgsl. Appended to the stepping kernel (RK4, no
// projection), whose state, derivative pieces and generated body walks it uses; the entry point
// is event_trial.wgsl's. From the host: CONTACT_ROW_X, _Y, _Z (the contact's
// rows in the template's row order), the carry offsets, EVENT_PHASE_*, MAX_BISECTIONS,
// MIN_STEP_FRACTION, STABLE_STEP_FACTOR, LOOP_BUDGET.

// The instance's contact space at a state (`InstanceContacts`): W over the contact's rows
// (symmetrised), their velocities and free accelerations a₀ = G u̇₀ − b, the separation, and
// what maps multipliers and impulses back to u.
struct Space {
    ok: bool,
    kin: array<BodyKinematics, NB_CAP>,
    w: mat3x3<real>,
    velocity: vec3<real>,
    free: vec3<real>,
    separation: real,
    // G u over the contact's rows: velocity − gu is what the planes' motion adds (`motion_power`).
    gu: vec3<real>,
    udot_free: array<real, NU_CAP>,
    minv_gt: array<real, ROWS_NU_CAP>,
}

fn contact_space(i: u32, s: State) -> Space {
    var sys = assemble_instance(i, s, BAUMGARTE_OFF);
    let mass = mass_solve(sys.inverse, sys.applied, sys.jacobian);
    var out: Space;
    out.ok = sys.status == 0u && mass.ok;
    out.kin = sys.kin;
    out.udot_free = mass.minv_x;
    out.minv_gt = mass.minv_gt;
    let a_mat = gram_matrix(sys.jacobian, mass.minv_gt);
    let rows = array<u32, 3>(CONTACT_ROW_X, CONTACT_ROW_Y, CONTACT_ROW_Z);
    let u = mobilities(s);
    for (var p = 0u; p < 3u; p++) {
        let r = rows[p];
        for (var q = 0u; q < 3u; q++) {
            out.w[q][p] = (a_mat[r * ROWS + rows[q]] + a_mat[rows[q] * ROWS + r]) * 0.5;
        }
        var g_udot: real = 0.0;
        var g_u: real = 0.0;
        for (var k = 0u; k < NU; k++) {
            g_udot += sys.jacobian[r * NU + k] * mass.minv_x[k];
            g_u += sys.jacobian[r * NU + k] * u[k];
        }
        out.free[p] = g_udot - sys.bias[r];
        out.velocity[p] = sys.rows[r].velocity_error;
        out.gu[p] = g_u;
        out.ok = out.ok && is_finite_real(out.free[p]) && is_finite_real(out.velocity[p]);
    }
    out.separation = sys.rows[CONTACT_ROW_Z].position_error;
    for (var k = 0u; k < 9u; k++) {
        out.ok = out.ok && is_finite_real(out.w[k / 3u][k % 3u]);
    }
    return out;
}

// M⁻¹ Gᵀ x for values x over the contact's rows.
fn response(c: Space, x: vec3<real>) -> array<real, NU_CAP> {
    var rows: array<real, ROWS_CAP>;
    rows[CONTACT_ROW_X] = x.x;
    rows[CONTACT_ROW_Y] = x.y;
    rows[CONTACT_ROW_Z] = x.z;
    return minv_gt_times(c.minv_gt, rows);
}

// Applies the impulse π at the space `c` of `s` (`apply`): u⁺ = u⁻ − M⁻¹ Gᵀ π, and the planes'
// motion does π · (v − G u) on the free bodies.
fn apply_impulse(s: ptr<function, State>, c: Space, impulse: vec3<real>) {
    let r = response(c, impulse);
    var du: array<real, NU_CAP>;
    for (var k = 0u; k < NU; k++) {
        du[k] = -r[k];
    }
    correct_velocity(s, du);
    (*s).work.x += dot(impulse, c.velocity - c.gu);
}

// The friction-loss integral (one contact).
alias Losses = real;

// The multipliers over the contact space's rows.
alias Values = vec3<real>;

fn integrate_losses(start: Losses, h: real, k1: Losses, k2: Losses, k3: Losses, k4: Losses) -> Losses {
    return start + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
}

// start + h (wa a + wb b + wc c): a Merson stage's or end's friction loss (`combine_state`'s
// twin for the loss integral).
fn combine_losses(start: Losses, h: real, wa: real, a: Losses, wb: real, b: Losses, wc: real, c: Losses) -> Losses {
    return start + h * (wa * a + wb * b + wc * c);
}

// The sliding direction frozen at a step's start and whether the friction follows the slip at
// the step's stages (`simulate`'s `frozen` and `Machine::follows`).
struct Frozen {
    direction: vec2<real>,
    follows: bool,
}

// At a step's start `c`: a sliding contact is armed once its slip exceeds v_roll; the friction
// keeps the mode's direction below it, and follows the slip at the stages only above it. The
// mode keeps ŝ_a, the direction an event inside the step is settled with (the CPU's `simulate`).
fn step_start(m: ptr<function, Machine>, c: Space) -> Frozen {
    var out = Frozen((*m).direction, true);
    if (*m).mode == MODE_SLIDE {
        let speed = hypot2(c.velocity.xy);
        if speed > (*m).tol.v_roll {
            (*m).armed = true;
            out.direction = c.velocity.xy / speed;
            (*m).direction = out.direction;
        }
        out.follows = speed > (*m).tol.v_roll;
    }
    return out;
}

// How deep the contact is inside its plane (≥ 0).
fn deepest_penetration(c: Space) -> real {
    return max(0.0, -c.separation);
}

// ẏ with the contact in its mode (`derivative_parts_at`): the rates of the bodies and the work,
// the friction loss's rate λ · v, and λ.
struct EventDerivative {
    d: Derivative,
    loss: real,
    multipliers: vec3<real>,
}

fn event_derivative(i: u32, s: State, c: Space, m: Machine, frozen: Frozen) -> EventDerivative {
    var rowset = RowSet(SET_OFF, frozen.direction, m.mu_dynamic, false, 0.0);
    if m.mode == MODE_STICK {
        rowset.kind = SET_STICK;
    } else if m.mode == MODE_SLIDE {
        rowset.kind = SET_SLIDE;
        let speed = hypot2(c.velocity.xy);
        let slip = c.velocity.xy / speed;
        if frozen.follows && speed >= m.tol.v_roll && dot(slip, frozen.direction) > 0.0 {
            rowset.direction = slip;
        }
    }
    let multipliers = linear_step(c.w, c.free, rowset);
    let correction = response(c, multipliers);
    var udot: array<real, NU_CAP>;
    for (var k = 0u; k < NU; k++) {
        udot[k] = c.udot_free[k] - correction[k];
    }
    var out: EventDerivative;
    out.d = body_rates(i, s, udot);
    out.loss = dot(multipliers, c.velocity);
    out.multipliers = multipliers;
    out.d.power = vec2<real>(dot(multipliers, c.velocity - c.gu), applied_power(i, s, c.kin));
    out.d.ok = out.d.ok && c.ok && is_finite_real(out.loss) && is_finite_real(out.d.power.x) && is_finite_real(out.d.power.y);
    return out;
}

// The longest step RK4 takes the sliding friction stably with (`stable_step`): 2 / κ with
// κ = ‖W_TT‖∞ μ_d N / max(|v_t|, v_roll), for a contact whose friction follows its slip.
fn stable_step(c: Space, m: Machine, frozen: Frozen, multipliers: vec3<real>) -> real {
    if m.mode != MODE_SLIDE || !frozen.follows {
        return -1.0;
    }
    let speed = hypot2(c.velocity.xy);
    let rate = m.mu_dynamic * max(-multipliers.z, 0.0) / max(speed, m.tol.v_roll);
    if rate <= 0.0 {
        return -1.0;
    }
    let norm = max(abs(c.w[0][0]) + abs(c.w[1][0]), abs(c.w[0][1]) + abs(c.w[1][1]));
    return STABLE_STEP_FACTOR / (norm * rate);
}

// Whether the step from (a) to (b) of length h holds an event (`has_event`): the open contact
// closes (its separation, or the Hermite dip inside the step), the armed sliding contact's slip
// along its step-start direction falls to v_roll, or the modes determined at b differ.
fn has_event(a: Space, b: Space, h: real, m: Machine, frozen: Frozen) -> bool {
    let v_tol = m.tol.v_tol;
    if m.mode == MODE_OPEN {
        let s_a = a.separation;
        let v_a = a.velocity.z;
        let s_b = b.separation;
        let v_b = b.velocity.z;
        if closes(s_a, v_a, s_b, v_b, h, v_tol) {
            return true;
        }
    }
    if m.mode == MODE_SLIDE && m.armed && dot(b.velocity.xy, frozen.direction) <= m.tol.v_roll {
        return true;
    }
    let determined = solve_modes(b.w, b.free, m.mode, m.direction, m.mode != MODE_OPEN, b.velocity.xy, m.mu_static, m.mu_dynamic, m.tol);
    return determined.mode != m.mode;
}

// The energy scale of an impact's guard (`energy_scale`): the free bodies' kinetic energy plus
// ½ v² / W_rr per contact row.
fn energy_scale(i: u32, s: State, c: Space) -> real {
    var relative: real = 0.0;
    for (var r = 0u; r < 3u; r++) {
        if c.w[r][r] > 0.0 {
            relative += 0.5 * c.velocity[r] * c.velocity[r] / c.w[r][r];
        }
    }
    return kinetic_energy(i, s, c.kin) + relative;
}

// The rows a projection holds for the mode (`held`): all three when sticking, the normal one
// (no friction) when sliding, none when open.
fn held(mode: u32, direction: vec2<real>) -> RowSet {
    var rowset = RowSet(SET_OFF, direction, 0.0, false, 0.0);
    if mode == MODE_STICK {
        rowset.kind = SET_STICK;
    } else if mode == MODE_SLIDE {
        rowset.kind = SET_SLIDE;
    }
    return rowset;
}

// What happens at an event, or at the start (`settle`): an impact or plastic touchdown, the
// slip → stick projection, a plastic touchdown of a contact that projection rowset approaching,
// the mode determined again, and the closed rows projected to rest. Its parts run in one loop
// around one assembly, so the kernel holds one copy of it. False when a state is not finite
// (the next assembly would find it too).
fn settle(i: u32, s: ptr<function, State>, m: ptr<function, Machine>, t: real, initial: bool, resumed: bool) -> bool {
    let tol = (*m).tol;
    // How close to its plane the contact counts as touching it: within p_tol, or, resuming from
    // the call before (a step's end, not an event), an open contact only once it has reached
    // its plane (the CPU's `Settling::Resume`).
    let band = select(tol.p_tol, 0.0, resumed && (*m).mode == MODE_OPEN);
    var near = false;
    var approach_speed: real = 0.0;
    var changed = false;
    var slowed = false;
    for (var part = 0u; part < 5u; part++) {
        let c = contact_space(i, *s);
        if !c.ok {
            return false;
        }
        var impact_plastic = false;
        var impacts = false;
        var projection = RowSet(SET_OFF, (*m).direction, 0.0, false, 0.0);
        var projects = false;
        if part == 0u {
            near = c.separation <= band;
            let approaching = near && c.velocity.z < -tol.v_tol;
            let touching_open = near && (*m).mode == MODE_OPEN && abs(c.velocity.z) <= tol.v_tol;
            if approaching || touching_open {
                impacts = true;
                impact_plastic = !approaching;
                if approaching {
                    (*m).impacts += 1u;
                    if ((*m).records & 1u) == 0u {
                        (*m).first_impact = t;
                        (*m).records |= 1u;
                    }
                    approach_speed = max(approach_speed, -c.velocity.z);
                }
            }
        } else if part == 1u {
            // Slip → stick: a sliding contact slowed to v_roll loses its slip; one leaving its
            // plane faster than v_tol is neither slowed nor held.
            let leaving = c.velocity.z > tol.v_tol;
            // Resuming, along the slip's own direction while it exceeds v_roll, as a step's
            // start tests it; at an event also a slip within v_roll, armed or not (the CPU's
            // `settle`).
            let speed = hypot2(c.velocity.xy);
            let along = select((*m).direction, c.velocity.xy / speed, resumed && speed > tol.v_roll);
            let slowing = ((*m).armed && dot(c.velocity.xy, along) <= tol.v_roll) || (!initial && speed <= tol.v_roll);
            slowed = (*m).mode == MODE_SLIDE && !leaving && slowing;
            if slowed {
                projects = true;
                projection.kind = SET_STICK;
            }
        } else if part == 2u {
            if slowed {
                (*m).mode = MODE_STICK;
                (*m).armed = false;
                changed = true;
                (*m).last_mode_change = t;
                (*m).records |= 2u;
            }
            // A near contact the projection rowset approaching gets a plastic touchdown.
            if near && c.velocity.z < -tol.v_tol {
                impacts = true;
                impact_plastic = true;
                changed = true;
            }
        } else if part == 3u {
            // The mode, determined again.
            let touching = c.separation <= band && c.velocity.z <= tol.v_tol;
            var start = (*m).mode;
            var start_direction = (*m).direction;
            if !touching {
                start = MODE_OPEN;
            } else if start == MODE_OPEN {
                let speed = hypot2(c.velocity.xy);
                if speed > tol.v_roll {
                    start = MODE_SLIDE;
                    start_direction = c.velocity.xy / speed;
                } else {
                    start = MODE_STICK;
                }
            }
            let determined = solve_modes(c.w, c.free, start, start_direction, touching, c.velocity.xy, (*m).mu_static, (*m).mu_dynamic, tol);
            if determined.mode != (*m).mode {
                (*m).armed = false;
                if !initial {
                    changed = true;
                    (*m).last_mode_change = t;
                    (*m).records |= 2u;
                }
            }
            (*m).mode = determined.mode;
            if determined.mode == MODE_SLIDE {
                (*m).direction = determined.direction;
            }
            // The closed rows projected to rest (next part).
        } else if part == 4u {
            if (*m).mode != MODE_OPEN {
                projects = true;
                projection = held((*m).mode, (*m).direction);
            }
        }
        if impacts {
            let restitution = select((*m).restitution, 0.0, impact_plastic);
            let o = impact(c.w, c.velocity, energy_scale(i, *s, c), near, restitution, (*m).mu_static, (*m).mu_dynamic, event_params.newton != 0u, tol);
            apply_impulse(s, c, o.impulse);
            (*m).impact_loss += o.loss;
        }
        if projects {
            let impulse = linear_step(c.w, c.velocity, projection);
            apply_impulse(s, c, impulse);
            (*m).impact_loss += dot(impulse, c.velocity) / 2.0;
        }
    }
    if !initial || approach_speed > 0.0 {
        (*m).events += 1u;
    }
    return true;
}

// One trial of the machine: the settling at the start (the modes there, and the impact of a
// contact approaching), a step (committed, or the start of a bracket), one bisection point, or
// the step that ends a bracket and the settling after it. The RK4 stages, the step's start and
// its end share one assembly and one derivative in one loop, and both settlings one call, so the
// kernel holds one copy of each (lavapipe compiles a copy per call site). False when the
// instance is done or stopped.
fn trial(i: u32, s: ptr<function, State>, m: ptr<function, Machine>) -> bool {
    let y = *s;
    let t = y.time;
    let left = event_params.duration - ((*m).elapsed - (*m).elapsed_low);
    let resumed = (*m).phase == EVENT_PHASE_RESUME;
    let starting = (*m).phase == EVENT_PHASE_START || resumed;
    let bisecting = (*m).phase == EVENT_PHASE_BISECT;
    if !starting && !bisecting && left <= 64.0 * REAL_EPSILON * max(event_params.duration, 1.0) {
        let end = contact_space(i, y);
        (*m).penetration = deepest_penetration(end);
        if (*m).penetration > (*m).tol.p_tol {
            (*m).status |= CONSTRAINT_VIOLATED;
        }
        (*m).phase = EVENT_PHASE_DONE;
        return false;
    }
    var a: Space;
    var frozen: Frozen;
    var k1: EventDerivative;
    var k2: EventDerivative;
    var k3: EventDerivative;
    // Under error control, Merson's fourth stage and third-order end ŷ.
    var k4: EventDerivative;
    var y5 = y;
    var h: real = 0.0;
    var closing = false;
    var y_b = y;
    var loss_b: Losses;
    var event = false;
    // A step's stages (STEP_STAGES), then the event test at its end (stage STEP_STAGES).
    for (var k = 0u; k <= STEP_STAGES; k++) { loop_count += 1u;
        if starting {
            break;
        }
        var y_k = y;
        if k == STEP_STAGES {
            y_k = y_b;
        } else if k > 0u {
            y_k = stage_state(y, t, h, k, k1.d, k2.d, k3.d, k4.d);
            if k == 4u {
                y5 = y_k;
            }
        }
        let c = contact_space(i, y_k);
        if !c.ok {
            // A stage of a step under error control that left the finite numbers: shorter.
            if k > 0u && k < STEP_STAGES && shorter_after_failure(m, h, t) {
                return true;
            }
            (*m).status |= NONFINITE_STATE;
            return false;
        }
        if k == STEP_STAGES {
            event = has_event(a, c, h, *m, frozen);
            break;
        }
        if k == 0u {
            a = c;
            frozen = step_start(m, c);
        }
        let dk = event_derivative(i, y_k, c, *m, frozen);
        if !dk.d.ok {
            if k > 0u && shorter_after_failure(m, h, t) {
                return true;
            }
            (*m).status |= NONFINITE_STATE;
            return false;
        }
        if k == 0u {
            k1 = dk;
            h = step_length(c, *m, frozen, dk.multipliers, t, left, &closing);
            if ADAPTIVE && (*m).phase == EVENT_PHASE_STEP && !count_attempt(m) {
                return false;
            }
        } else if k == 1u {
            k2 = dk;
        } else if k == 2u {
            k3 = dk;
        } else if k + 1u < STEP_STAGES {
            k4 = dk;
        } else {
            var next: State;
            var error: real = 0.0;
            if !step_end(y, t, h, (*m).friction_loss, k1, k2, k3, k4, dk, y5, &next, &loss_b, &error) {
                if shorter_after_failure(m, h, t) {
                    return true;
                }
                (*m).status |= NONFINITE_STATE;
                return false;
            }
            y_b = next;
            if closing {
                break;
            }
            if ADAPTIVE && (*m).phase == EVENT_PHASE_STEP {
                let verdict = control_step(m, h, error, t);
                if verdict == TRIAL_REJECTED {
                    return true;
                } else if verdict == TRIAL_FAILED {
                    return false;
                }
            }
        }
    }
    if starting || closing {
        if closing {
            // The bracket is closed: commit its upper end and settle there.
            *s = y_b;
            (*m).friction_loss = loss_b;
            add_elapsed(m, h);
            (*m).steps += 1u;
        }
        (*m).phase = EVENT_PHASE_STEP;
        if !settle(i, s, m, t + h, starting, resumed) {
            (*m).status |= NONFINITE_STATE;
            return false;
        }
        if !starting && (*m).events > event_params.max_events {
            (*m).status |= STEP_FAILED;
            return false;
        }
        return true;
    }
    return after_step(s, m, y_b, loss_b, h, event);
}

