// One trial of the several-contact machine (stage 2 of docs/gpu-unilateral.md): twin of
// `simulate`'s loop (src/cpu/unilateral/stepper.rs) with `has_event` (machine.rs) and `settle`
// (event.rs), over the pieces of event_contacts.wgsl.
//
// A trial is one loop of stages, each around one assembly of the contact space and at most one
// call of one law: a step's stages 0 to STEP_STAGES − 1 are the RK4 stages, or Merson's under
// error control (the step's start first; a linear step for the multipliers), and stage
// STEP_STAGES the event test at its end (the modes determined again); a settling's stages
// SETTLE_STAGE to SETTLE_STAGE + 4 are its parts (an impact, a projection, the modes determined
// again).
// So the kernel holds one copy of the assembly, of `linear_step`, of `solve_modes` and of
// `impact`: lavapipe's JIT compiles a copy per call site, and its compile time grows faster than
// the code (a brick's kernel with a copy per use took some 400 s to build, 170 s like this). The
// settling at an event is a trial of its own (`EVENT_PHASE_SETTLE`), after the trial that
// closed the bracket: on a software adapter each runs in its own dispatch, under its own loop
// budget.

const LAW_NONE: u32 = 0u;
const LAW_LINEAR: u32 = 1u;
const LAW_MODES: u32 = 2u;
const LAW_IMPACT: u32 = 3u;

// The first settling stage, after a step's stages and its event test; the settling's parts.
const SETTLE_STAGE: u32 = STEP_STAGES + 1u;
const SETTLE_PARTS: u32 = 5u;

// A trial: the settling at the start (`EVENT_PHASE_START`, `EVENT_PHASE_RESUME`) or at an event
// (`EVENT_PHASE_SETTLE`), a step (committed, or the start of a bracket), one bisection point, or
// the step that closes a bracket. False when the instance is done or stopped.
fn trial(i: u32, s: ptr<function, State>, m: ptr<function, Machine>) -> bool {
    let y = *s;
    let t = y.time;
    let tol = (*m).tol;
    let left = event_params.duration - ((*m).elapsed - (*m).elapsed_low);
    let resumed = (*m).phase == EVENT_PHASE_RESUME;
    let starting = (*m).phase == EVENT_PHASE_START || resumed;
    let settling = starting || (*m).phase == EVENT_PHASE_SETTLE;
    let bisecting = (*m).phase == EVENT_PHASE_BISECT;
    let finishing = !settling && !bisecting && left <= 64.0 * REAL_EPSILON * max(event_params.duration, 1.0);
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
    // The settling's state (`settle`).
    var settle_time = t;
    var near = 0u;
    var slowed = 0u;
    var approach_speed: real = 0.0;
    // How close to its plane each contact counts as touching it: within p_tol, or, resuming
    // from the call before (a step's end, not an event), an open contact only once it has
    // reached its plane (the CPU's `Settling::Resume`).
    var band: PerContact;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        band[k] = select(tol.p_tol, 0.0, resumed && (*m).mode[k] == MODE_OPEN);
    }
    var stage = select(0u, SETTLE_STAGE, settling);
    for (var round = 0u; round < SETTLE_STAGE; round++) { loop_count += 1u;
        var y_k = *s;
        if stage > 0u && stage < STEP_STAGES {
            y_k = stage_state(y, t, h, stage, k1.d, k2.d, k3.d, k4.d);
            if stage == 4u {
                y5 = y_k;
            }
        } else if stage == STEP_STAGES {
            y_k = y_b;
        }
        let c = contact_space(i, y_k);
        if !c.ok {
            // A stage of a step under error control that left the finite numbers: shorter.
            if stage > 0u && stage < STEP_STAGES && shorter_after_failure(m, h, t) {
                return true;
            }
            (*m).status |= NONFINITE_STATE;
            return false;
        }
        if finishing {
            (*m).penetration = deepest_penetration(c);
            if (*m).penetration > tol.p_tol {
                (*m).status |= CONSTRAINT_VIOLATED;
            }
            (*m).phase = EVENT_PHASE_DONE;
            return false;
        }
        // The stage's law and its inputs.
        var law = LAW_NONE;
        var goal = c.velocity;
        var sets = held(*m);
        var plastic = false;
        var start_modes = (*m).mode;
        var start_directions = (*m).direction;
        var touching = 0u;
        let part = stage - SETTLE_STAGE;
        if stage < STEP_STAGES {
            if stage == 0u {
                a = c;
                frozen = step_start(m, c);
            }
            law = LAW_LINEAR;
            goal = c.free;
            sets = derivative_sets(c, *m, frozen);
        } else if stage == STEP_STAGES {
            if event_before_modes(a, c, h, *m, frozen) == 1u {
                event = true;
            } else {
                law = LAW_MODES;
                touching = closed_mask(*m);
            }
        } else if part == 0u {
            // Impacts of the near contacts approaching faster than v_tol; a touching open one
            // slower than that is stopped plastically.
            var approaching = 0u;
            var touching_open = false;
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                let v_z = c.velocity[3u * k + 2u];
                if c.separation[k] <= band[k] {
                    near |= bit(k);
                    if v_z < -tol.v_tol {
                        approaching |= bit(k);
                        (*m).impacts[k] += 1u;
                        if !has((*m).records, k) {
                            (*m).first_impact[k] = settle_time;
                            (*m).records |= bit(k);
                        }
                        approach_speed = max(approach_speed, -v_z);
                    }
                    touching_open = touching_open || ((*m).mode[k] == MODE_OPEN && abs(v_z) <= tol.v_tol);
                }
            }
            if approaching != 0u || touching_open {
                law = LAW_IMPACT;
                plastic = approaching == 0u;
            }
        } else if part == 1u {
            // Slip → stick: a sliding contact slowed to v_roll (or reversed) loses its slip. One
            // leaving its plane faster than v_tol is neither slowed nor held.
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                let leaving = c.velocity[3u * k + 2u] > tol.v_tol;
                // Resuming, along the slip's own direction while it exceeds v_roll, as a
                // step's start tests it; at an event also a slip within v_roll, armed or not
                // (the CPU's `settle`).
                let slip = pair(c.velocity, k);
                let speed = hypot2(slip);
                let along = select((*m).direction[k], slip / speed, resumed && speed > tol.v_roll);
                let slowing = (has((*m).armed, k) && dot(slip, along) <= tol.v_roll) || (!starting && speed <= tol.v_roll);
                if (*m).mode[k] == MODE_SLIDE && !leaving && slowing {
                    slowed |= bit(k);
                    sets[k].kind = SET_STICK;
                } else if leaving {
                    sets[k].kind = SET_OFF;
                }
            }
            if slowed != 0u {
                law = LAW_LINEAR;
            }
        } else if part == 2u {
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                if has(slowed, k) {
                    (*m).mode[k] = MODE_STICK;
                    (*m).armed &= ~bit(k);
                    (*m).last_mode_change[k] = settle_time;
                    (*m).records |= bit(16u + k);
                }
                // A near contact the projection set approaching gets a plastic touchdown.
                if has(near, k) && c.velocity[3u * k + 2u] < -tol.v_tol {
                    law = LAW_IMPACT;
                    plastic = true;
                }
            }
        } else if part == 3u {
            // The modes, determined again, from the touching contacts' modes (an open one that
            // touches starts sliding or sticking as its slip says).
            law = LAW_MODES;
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                if c.separation[k] <= band[k] && c.velocity[3u * k + 2u] <= tol.v_tol {
                    touching |= bit(k);
                    if start_modes[k] == MODE_OPEN {
                        let slip = pair(c.velocity, k);
                        let speed = hypot2(slip);
                        if speed > tol.v_roll {
                            start_modes[k] = MODE_SLIDE;
                            start_directions[k] = slip / speed;
                        } else {
                            start_modes[k] = MODE_STICK;
                        }
                    }
                } else {
                    start_modes[k] = MODE_OPEN;
                }
            }
        } else if part == 4u {
            // The closed contacts projected to rest on their rows.
            if closed_mask(*m) != 0u {
                law = LAW_LINEAR;
            }
        }
        // The one call of each law.
        var w = c.w;
        var values: Rows;
        var determined: ModeSolution;
        var losses: PerContact;
        if law == LAW_LINEAR {
            var normals: PerContact;
            values = linear_step(&w, goal, sets, 0u, normals);
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                let x = 3u * k;
                losses[k] = values[x] * c.velocity[x] / 2.0 + values[x + 1u] * c.velocity[x + 1u] / 2.0 + values[x + 2u] * c.velocity[x + 2u] / 2.0;
            }
        } else if law == LAW_MODES {
            var input: ModeContacts;
            input.modes = start_modes;
            input.directions = start_directions;
            input.touching = touching;
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                input.slips[k] = pair(c.velocity, k);
            }
            determined = solve_modes(&w, c.free, input, (*m).k, tol);
        } else if law == LAW_IMPACT {
            var k = (*m).k;
            if plastic {
                var zero: PerContact;
                k.restitution = zero;
            }
            let o = impact(&w, c.velocity, energy_scale(i, *s, c), near, k, event_params.newton != 0u, tol);
            values = o.impulse;
            losses = o.losses;
        }
        // What the stage does with the answer.
        if stage < STEP_STAGES {
            let dk = derivative_from(i, y_k, c, values);
            if !dk.d.ok {
                if stage > 0u && shorter_after_failure(m, h, t) {
                    return true;
                }
                (*m).status |= NONFINITE_STATE;
                return false;
            }
            if stage == 0u {
                k1 = dk;
                h = step_length(c, *m, frozen, dk.multipliers, t, left, &closing);
                if ADAPTIVE && (*m).phase == EVENT_PHASE_STEP && !count_attempt(m) {
                    return false;
                }
            } else if stage == 1u {
                k2 = dk;
            } else if stage == 2u {
                k3 = dk;
            } else if stage + 1u < STEP_STAGES {
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
                if ADAPTIVE && !closing && (*m).phase == EVENT_PHASE_STEP {
                    let verdict = control_step(m, h, error, t);
                    if verdict == TRIAL_REJECTED {
                        return true;
                    } else if verdict == TRIAL_FAILED {
                        return false;
                    }
                }
                if closing {
                    // The bracket is closed: commit its upper end; the next trial settles there.
                    *s = y_b;
                    (*m).friction_loss = loss_b;
                    add_elapsed(m, h);
                    (*m).steps += 1u;
                    (*m).phase = EVENT_PHASE_SETTLE;
                    return true;
                }
            }
            stage += 1u;
            continue;
        }
        if stage == STEP_STAGES {
            event = event || modes_differ(determined.modes, (*m).mode);
            break;
        }
        if law == LAW_LINEAR || law == LAW_IMPACT {
            apply_impulse(s, c, values);
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                (*m).impact_loss[k] += losses[k];
            }
        }
        if part == 3u {
            for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
                if determined.modes[k] != (*m).mode[k] {
                    (*m).armed &= ~bit(k);
                    if !starting {
                        (*m).last_mode_change[k] = settle_time;
                        (*m).records |= bit(16u + k);
                    }
                }
                (*m).mode[k] = determined.modes[k];
                if determined.modes[k] == MODE_SLIDE {
                    (*m).direction[k] = determined.directions[k];
                }
            }
        }
        stage += 1u;
        if stage == SETTLE_STAGE + SETTLE_PARTS {
            break;
        }
    }
    if settling {
        // Settled (at the start, or where a bracket closed).
        if !starting || approach_speed > 0.0 {
            (*m).events += 1u;
        }
        (*m).phase = EVENT_PHASE_STEP;
        if !starting && (*m).events > event_params.max_events {
            (*m).status |= STEP_FAILED;
            return false;
        }
        return true;
    }
    return after_step(s, m, y_b, loss_b, h, event);
}
