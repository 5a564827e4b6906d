// The event machine's entry point and helpers, shared by the one-contact kernel
// (event_step.wgsl, stage 1 of docs/gpu-unilateral.md) and the several-contact one
// (event_contacts.wgsl, stage 2): twin of `simulate` (src/cpu/unilateral/stepper.rs). Each
// kernel's own file gives `Machine` with `load_machine` / `store_machine` / `put_carry`, `Space`,
// `Frozen`, `Losses`, `Values` (the multipliers over the contact's rows) and `stable_step`, and
// `trial`: one trial of the machine (the settling at the start, a step, a bisection point, or
// the step that closes a bracket and the settling there), built from the helpers here.
//
// Each instance is a state machine that resumes across dispatches (lavapipe's JIT cannot take
// an event's 200 bisection steps in one): a dispatch runs at most `launch.steps` trials — a
// plain RK4 step, one bisection point, or the settling at an event — and leaves its progress in
// the carry columns (EVENT_*, offsets from the host). The state stays in the input columns.
// On a software adapter a dispatch whose loops passed LOOP_BUDGET stores nothing but the flag
// EVENT_WITHHELD (its loops may have been cut short, `SOFTWARE_LOOP_BUDGET`), and the host runs
// that instance on the CPU.

struct EventParams {
    step: real,
    duration: real,
    max_events: u32,
    newton: u32,
    // Under error control (INTEGRATOR_RKM): the accuracy each accepted step reaches.
    accuracy: real,
}

@group(0) @binding(4) var<storage, read> event_params: EventParams;


// The least value of the cubic Hermite interpolant of s over a step at its interior critical
// points (`hermite_minimum`); a large value when it has none.
fn hermite_minimum(s_a: real, v_a: real, s_b: real, v_b: real, h: real) -> real {
    let delta = s_b - s_a;
    let c1 = h * v_a;
    let c2 = 3.0 * delta - h * (2.0 * v_a + v_b);
    let c3 = h * (v_a + v_b) - 2.0 * delta;
    let qa = 3.0 * c3;
    let qb = 2.0 * c2;
    let qc = c1;
    var least: real = 1.0;
    var none = true;
    var roots = vec2<real>(-1.0, -1.0);
    if abs(qa) < 1e-30 {
        if abs(qb) > 0.0 {
            roots.x = -qc / qb;
        }
    } else {
        let disc = qb * qb - 4.0 * qa * qc;
        if disc >= 0.0 {
            let r = sqrt(disc);
            roots = vec2<real>((-qb - r) / (2.0 * qa), (-qb + r) / (2.0 * qa));
        }
    }
    for (var k = 0u; k < 2u; k++) { loop_count += 1u;
        let t = roots[k];
        if t > 0.0 && t < 1.0 {
            let value = s_a + t * (c1 + t * (c2 + t * c3));
            if none || value < least {
                least = value;
                none = false;
            }
        }
    }
    return select(least, 1.0, none);
}

// The bracket an event is located to at time t (`bracket_at`): t_tol, or 4 ulp of t where that
// is wider (bounded here by 4 |t| ε).
fn bracket_at(m: Machine, t: real) -> real {
    return max(m.t_tol, 4.0 * abs(t) * REAL_EPSILON);
}

fn machine_time(m: Machine) -> real {
    return m.start + (m.elapsed - m.elapsed_low);
}

// Adds h to the elapsed time, compensated (as the stepping kernel's).
fn add_elapsed(m: ptr<function, Machine>, h: real) {
    let y = h - (*m).elapsed_low;
    let t = (*m).elapsed + y;
    (*m).elapsed_low = (t - (*m).elapsed) - y;
    (*m).elapsed = t;
}

// Whether an open contact closes over a step of length h from separation s_a and normal
// velocity v_a to s_b, v_b (`has_event`): it crosses its plane, or the Hermite dip inside the
// step reaches it; one starting inside the plane's band closes when it approaches faster than
// a touchdown or stops leaving.
fn closes(s_a: real, v_a: real, s_b: real, v_b: real, h: real, v_tol: real) -> bool {
    let dips = hermite_minimum(s_a, v_a, s_b, v_b, h) <= 0.0;
    if s_a > 0.0 {
        return s_b <= 0.0 || dips;
    } else if s_b <= 0.0 {
        return v_b < -v_tol || (v_a > v_tol && v_b <= v_tol);
    }
    return dips;
}

// The length of a trial's step from its start `c` (`simulate`): a bisection point halves the
// bracket, or is its upper end once the bracket is closed (`closing`); a step is the
// scenario's, shortened to what RK4 integrates a slowly sliding contact's friction stably with
// (at least MIN_STEP_FRACTION of it) and to what is left of the call.
fn step_length(c: Space, m: Machine, frozen: Frozen, multipliers: Values, t: real, left: real, closing: ptr<function, bool>) -> real {
    if m.phase == EVENT_PHASE_BISECT {
        *closing = m.hi - m.lo <= bracket_at(m, t + m.hi) || m.bisections >= MAX_BISECTIONS;
        return select(0.5 * (m.lo + m.hi), m.hi, *closing);
    }
    let stable = stable_step(c, m, frozen, multipliers);
    var h = event_params.step;
    // Under error control at least the minimum step (its trials are bounded by
    // MAX_ADAPTIVE_ATTEMPTS), else at least MIN_STEP_FRACTION of the scenario's step.
    var floor = event_params.step * MIN_STEP_FRACTION;
    if ADAPTIVE {
        floor = min_step_at(t);
    }
    if stable >= 0.0 {
        h = min(h, max(stable, floor));
    }
    if ADAPTIVE {
        // The step the last accepted one proposed, within that limit.
        h = min(m.proposed, h);
    }
    return min(h, left);
}

// Error control (`EventOptions::accuracy`): the kernel built with INTEGRATOR_RKM takes
// Runge–Kutta–Merson steps, each accepted where its error estimate is within the accuracy, as
// the CPU's `simulate` does under error control.
const ADAPTIVE: bool = INTEGRATOR == INTEGRATOR_RKM;

// The smallest step under error control at time t (`min_step`).
fn min_step_at(t: real) -> real {
    return EVENT_MIN_STEP * max(abs(t), 1.0);
}

// A step trial under error control (`simulate`): counted against MAX_ADAPTIVE_ATTEMPTS; false
// (the instance fails) past it.
fn count_attempt(m: ptr<function, Machine>) -> bool {
    (*m).attempts += 1u;
    if (*m).attempts > MAX_ADAPTIVE_ATTEMPTS {
        (*m).status |= STEP_FAILED;
        return false;
    }
    return true;
}

// A step trial under error control whose stages left the finite numbers: the next trial takes a
// quarter of the step where that is not below the minimum (true), as the CPU retries.
fn shorter_after_failure(m: ptr<function, Machine>, h: real, t: real) -> bool {
    if ADAPTIVE && (*m).phase == EVENT_PHASE_STEP && h / 4.0 >= min_step_at(t) {
        (*m).proposed = h / 4.0;
        return true;
    }
    return false;
}

// What error control makes of a step trial's error (`simulate`): within the accuracy, the step
// stands (TRIAL_ACCEPTED) and proposes the next, at most the scenario's step; beyond it, the
// next trial takes it again shorter (TRIAL_REJECTED), or, shorter than the minimum step, the
// instance fails (TRIAL_FAILED, flagged STEP_FAILED).
const TRIAL_ACCEPTED: u32 = 0u;
const TRIAL_REJECTED: u32 = 1u;
const TRIAL_FAILED: u32 = 2u;

fn control_step(m: ptr<function, Machine>, h: real, error: real, t: real) -> u32 {
    let accuracy = event_params.accuracy;
    if error > accuracy {
        let shorter = h * step_factor(accuracy, error, 0.1, 0.9);
        if shorter < min_step_at(t) {
            (*m).status |= STEP_FAILED;
            return TRIAL_FAILED;
        }
        (*m).proposed = shorter;
        return TRIAL_REJECTED;
    }
    (*m).proposed = min(h * step_factor(accuracy, error, 1.0, 5.0), event_params.step);
    return TRIAL_ACCEPTED;
}

// The state of stage `k` of a step of length h from y at time t, from the stages' derivatives
// so far (`Machine::trial`): RK4's (1–3) or, under error control, Merson's (1–4; stage 4's
// state is the third-order ŷ the error is measured against).
fn stage_state(y: State, t: real, h: real, k: u32, k1: Derivative, k2: Derivative, k3: Derivative, k4: Derivative) -> State {
    if ADAPTIVE {
        if k == 1u {
            return at_time(advance_state(y, h / 3.0, k1), t + h / 3.0);
        } else if k == 2u {
            return at_time(combine_state(y, h / 6.0, 1.0, k1, 1.0, k2, 0.0, k2), t + h / 3.0);
        } else if k == 3u {
            return at_time(combine_state(y, h / 8.0, 1.0, k1, 3.0, k3, 0.0, k3), t + h / 2.0);
        }
        return at_time(combine_state(y, h, 0.5, k1, -1.5, k3, 2.0, k4), t + h);
    }
    if k == 1u {
        return at_time(advance_state(y, h / 2.0, k1), t + h / 2.0);
    } else if k == 2u {
        return at_time(advance_state(y, h / 2.0, k2), t + h / 2.0);
    }
    return at_time(advance_state(y, h, k3), t + h);
}

// The stages a step takes: RK4's four, Merson's five under error control.
const STEP_STAGES: u32 = select(4u, 5u, ADAPTIVE);

// The Merson step of length h from y at time t (`Machine::trial` under error control): y₁ =
// y + h/6 (k1 + 4 k4 + k5) (quaternions renormalised) into `next`, and the error estimate
// between y₁ and the third-order ŷ (`y5`, before the renormalisation, as the CPU's); false
// when either is not finite.
fn rkm_end(y: State, t: real, h: real, k1: Derivative, k4: Derivative, k5: Derivative, y5: State, next: ptr<function, State>, error: ptr<function, real>) -> bool {
    *next = combine_state(y, h / 6.0, 1.0, k1, 4.0, k4, 1.0, k5);
    *error = merson_error(*next, y5);
    (*next).time = t + h;
    return normalize_state(next) && is_finite_real(*error);
}

// The RK4 step of length h from y at time t with the stages' derivatives (quaternions
// renormalised); false when it is not finite.
fn rk4_end(y: State, t: real, h: real, k1: Derivative, k2: Derivative, k3: Derivative, k4: Derivative, next: ptr<function, State>) -> bool {
    // k1 + 2 k2 + 2 k3 + k4, summed left to right as the stepping kernel's running sum.
    var sum = k1;
    sum.power += 2.0 * k2.power;
    accumulate_rates(&sum, 2.0, k2);
    sum.power += 2.0 * k3.power;
    accumulate_rates(&sum, 2.0, k3);
    sum.power += k4.power;
    accumulate_rates(&sum, 1.0, k4);
    *next = y;
    (*next).work += h / 6.0 * sum.power;
    rk4_bodies(next, h, sum);
    (*next).time = t + h;
    return normalize_state(next);
}

// The end of a step of length h from y at time t, after its last stage's derivative `last`:
// RK4's from k1–k3, or under error control Merson's from k1, k4 and the third-order ŷ (`y5`),
// with its error estimate into `error`; the end state into `y_b` and its friction losses into
// `loss_b`. False when the end is not finite (then `y_b` is not to be used).
fn step_end(y: State, t: real, h: real, friction_loss: Losses, k1: EventDerivative, k2: EventDerivative, k3: EventDerivative, k4: EventDerivative, last: EventDerivative, y5: State, y_b: ptr<function, State>, loss_b: ptr<function, Losses>, error: ptr<function, real>) -> bool {
    if ADAPTIVE {
        *loss_b = combine_losses(friction_loss, h / 6.0, 1.0, k1.loss, 4.0, k4.loss, 1.0, last.loss);
        return rkm_end(y, t, h, k1.d, k4.d, last.d, y5, y_b, error);
    }
    *loss_b = integrate_losses(friction_loss, h, k1.loss, k2.loss, k3.loss, last.loss);
    return rk4_end(y, t, h, k1.d, k2.d, k3.d, last.d, y_b);
}

// The end of a trial that neither settled nor closed a bracket: a bisection point narrows the
// bracket (`event`: the event lies before h); a step without an event is committed (its end
// y_b, the friction losses there); a step with one starts a bracket in (0, h].
fn after_step(s: ptr<function, State>, m: ptr<function, Machine>, y_b: State, loss_b: Losses, h: real, event: bool) -> bool {
    if (*m).phase == EVENT_PHASE_BISECT {
        if event {
            (*m).hi = h;
        } else {
            (*m).lo = h;
        }
        (*m).bisections += 1u;
        return true;
    }
    if !event {
        *s = y_b;
        (*m).friction_loss = loss_b;
        add_elapsed(m, h);
        (*m).steps += 1u;
        return true;
    }
    // An event inside this step: bisect on real steps from its start, in (0, h].
    (*m).phase = EVENT_PHASE_BISECT;
    (*m).lo = 0.0;
    (*m).hi = h;
    (*m).bisections = 0u;
    return true;
}

// One thread per instance, at most `launch.steps` trials per dispatch (one on a software
// adapter for the several-contact kernel, so a dispatch past the budget loses one trial).
@compute @workgroup_size(WORKGROUP_SIZE)
fn event_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= launch.count {
        return;
    }
    var m = load_machine(i);
    if m.status != 0u || m.phase == EVENT_PHASE_DONE {
        return;
    }
    cache_parameters(i);
    load_free_bodies(i);
    let status_before = m.status;
    var s = load_state(i);
    s.time = machine_time(m);
    for (var k = 0u; k < launch.steps; k++) { loop_count += 1u;
        if !trial(i, &s, &m) {
            break;
        }
        s.time = machine_time(m);
    }
    // The most loop iterations a dispatch of this instance ran (how near it came to the budget).
    put_carry(EVENT_LOOPS, i, max(carry(EVENT_LOOPS, i), real(loop_count)));
    if loop_count > LOOP_BUDGET {
        // Past the budget some loop may have been cut short: nothing of this dispatch is kept
        // (the stores below have no loops, so they are whole).
        put_carry(EVENT_STATUS, i, real(status_before | EVENT_WITHHELD));
        return;
    }
    if m.status == 0u {
        store_state(i, s);
        if m.phase == EVENT_PHASE_DONE {
            input[input_at(TIME_IN, 1u, i)] = s.time;
        }
    }
    store_machine(i, m);
}
