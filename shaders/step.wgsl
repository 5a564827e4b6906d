// Fused time stepping: many trial steps per dispatch with the state in registers, written back
// to the input columns at the end of the dispatch. Twin of src/cpu/integrate.rs: semi-implicit
// Euler, classic RK4 and Runge–Kutta–Merson with per-instance step control; drift controlled by
// Baumgarte terms (`launch.mode`), Simbody's projection (PROJECTION) or not at all.
//
// The host prepends INTEGRATOR (u32, one of the INTEGRATOR_* below) and PROJECTION (bool) as
// constants, so each pipeline carries only the code it runs. Extra binding: the step
// parameters. The output columns carry each instance's progress from one dispatch to the next
// (the host initialises them per call).

const INTEGRATOR_EULER: u32 = 0u;
const INTEGRATOR_RK4: u32 = 1u;
const INTEGRATOR_RKM: u32 = 2u;

// What a call asks for: `steps` accepted steps, or `duration` seconds of each instance's time.
const GOAL_STEPS: u32 = 0u;
const GOAL_DURATION: u32 = 1u;

// Twin of `StepOptions` and `Goal` (src/step.rs).
struct StepParams {
    step: real, // Euler, RK4
    accuracy: real, // RKM
    max_step: real, // RKM
    tolerance: real, // projection
    duration: real, // GOAL_DURATION
    min_step: real, // RKM: the smallest step (`min_step`), else STEP_FAILED
    violation: real, // CONSTRAINT_VIOLATED above this error at the end of the call
    steps: u32, // GOAL_STEPS
    goal: u32,
}

@group(0) @binding(3) var<storage, read> step_params: StepParams;

// Output columns (prefixes, width 1): one instance's progress through a call, the CARRY_*
// constants generated from the host's list (`gpu::layout::carry`).

// Twin of `derivative` (src/cpu/integrate.rs): free bodies follow the constrained dynamics,
// constant-law prescribed bodies their own velocity at their given acceleration (`body_rates`,
// generated); driven bodies are not integrated (their law gives their motion at every stage
// time).
fn derivative(i: u32, s: State, baumgarte: u32) -> Derivative {
    let solved = solve_instance(i, s, baumgarte);
    var d = body_rates(i, s, solved.udot);
    d.ok = d.ok && solved.status == 0u;
    // Twin of the power terms of `derivative` and `applied_power` (src/cpu/integrate.rs):
    // −λ · (G u) of the constraint forces, Σ F · v_com + T · w of the applied loads.
    let u = mobilities(s);
    var driven: real = 0.0;
    for (var r = 0u; r < ROWS; r++) {
        var gu: real = 0.0;
        for (var k = 0u; k < NU; k++) {
            gu += solved.jacobian[r * NU + k] * u[k];
        }
        driven -= solved.multipliers[r] * gu;
    }
    let applied = applied_power(i, s, solved.kin);
    d.power = vec2<real>(driven, applied);
    d.ok = d.ok && is_finite_real(driven) && is_finite_real(applied);
    return d;
}

// `s` at time `t` (a stage of a step).
fn at_time(s: State, t: real) -> State {
    var out = s;
    out.time = t;
    return out;
}

// s + h · d (`axpy`).
fn advance_state(s: State, h: real, d: Derivative) -> State {
    var out = s;
    out.work += h * d.power;
    advance_bodies(&out, h, d);
    return out;
}

// s + h · (wa · a + wb · b + wc · c).
fn combine_state(s: State, h: real, wa: real, a: Derivative, wb: real, b: Derivative, wc: real, c: Derivative) -> State {
    var out = s;
    out.work += h * (wa * a.power + wb * b.power + wc * c.power);
    combine_bodies(&out, h, wa, a, wb, b, wc, c);
    return out;
}

// One step of size h from `s`: the new state and, for RKM, the error estimate.
struct Trial {
    ok: bool,
    next: State,
    error: real,
}

// Twin of `try_step` (src/cpu/integrate.rs). The stages run in one loop around one `derivative`
// call, as the CPU's stages call one closure `f(y, t)`: shader compilers inline every call, and
// four or five inlined copies of the dynamics compiled three to four times slower on lavapipe.
// RK4 keeps two derivatives, not four: the last stage's (the next stage starts from it) and
// the running sum k1 + 2 k2 + 2 k3 + k4, which halves what a thread holds across the stages.
fn try_step(i: u32, state: State, h: real, baumgarte: u32) -> Trial {
    var out: Trial;
    out.error = 0.0;
    out.ok = true;
    let t = state.time;
    var stages = 5u;
    if INTEGRATOR == INTEGRATOR_EULER {
        stages = 1u;
    } else if INTEGRATOR == INTEGRATOR_RK4 {
        stages = 4u;
    }
    var k1: Derivative;
    var k2: Derivative;
    var k3: Derivative;
    var k4: Derivative;
    var k5: Derivative;
    // RK4: the last stage's derivative and the stages' running sum.
    var last: Derivative;
    var sum: Derivative;
    var y5 = state;
    for (var stage = 0u; stage < stages; stage++) {
        // The stage's state and time: the CPU's arguments of `f`.
        var y = state;
        var tt = t;
        if INTEGRATOR == INTEGRATOR_RK4 {
            if stage == 1u {
                y = advance_state(state, h / 2.0, last);
                tt = t + h / 2.0;
            } else if stage == 2u {
                y = advance_state(state, h / 2.0, last);
                tt = t + h / 2.0;
            } else if stage == 3u {
                y = advance_state(state, h, last);
                tt = t + h;
            }
        } else if INTEGRATOR == INTEGRATOR_RKM {
            if stage == 1u {
                y = advance_state(state, h / 3.0, k1);
                tt = t + h / 3.0;
            } else if stage == 2u {
                y = combine_state(state, h / 6.0, 1.0, k1, 1.0, k2, 0.0, k2);
                tt = t + h / 3.0;
            } else if stage == 3u {
                y = combine_state(state, h / 8.0, 1.0, k1, 3.0, k3, 0.0, k3);
                tt = t + 0.5 * h;
            } else if stage == 4u {
                y = combine_state(state, h, 0.5, k1, -1.5, k3, 2.0, k4);
                tt = t + h;
                y5 = at_time(y, tt);
            }
        }
        let k = derivative(i, at_time(y, tt), baumgarte);
        if !k.ok {
            // The CPU's `?`: a failed stage ends the trial.
            out.ok = false;
            out.next = state;
            return out;
        }
        if INTEGRATOR == INTEGRATOR_RK4 {
            if stage == 0u {
                sum = k;
            } else {
                var w: real = 2.0;
                if stage == 3u {
                    w = 1.0;
                }
                sum.power += w * k.power;
                accumulate_rates(&sum, w, k);
            }
            last = k;
        } else if stage == 0u {
            k1 = k;
        } else if stage == 1u {
            k2 = k;
        } else if stage == 2u {
            k3 = k;
        } else if stage == 3u {
            k4 = k;
        } else {
            k5 = k;
        }
    }
    var next = state;
    if INTEGRATOR == INTEGRATOR_EULER {
        next.work += h * k1.power;
        euler_bodies(&next, state, h, k1);
    } else if INTEGRATOR == INTEGRATOR_RK4 {
        next.work += h / 6.0 * sum.power;
        rk4_bodies(&next, h, sum);
    } else {
        next = combine_state(state, h / 6.0, 1.0, k1, 4.0, k4, 1.0, k5);
        out.error = merson_error(next, y5);
    }
    next.time = t + h;
    out.ok = normalize_state(&next) && is_finite_real(out.error);
    out.next = next;
    return out;
}

// Largest |error| of the enabled position-level rows (`position`) or of the enabled rows with a
// velocity error, and the mass-weighted minimum-norm correction δu = −M⁻¹ Gᵀ (G M⁻¹ Gᵀ)⁺ e
// over those rows: twin of `rows_of` and `correction` (src/cpu/integrate.rs). Rows not selected
// stay zero, which the minimum-norm solve treats as absent.
struct Correction {
    ok: bool,
    error: real,
    du: array<real, NU_CAP>,
}

fn projection_correction(i: u32, s: State, position: bool) -> Correction {
    var row_level = ROW_LEVEL;
    var sys = assemble_instance(i, s, BAUMGARTE_OFF);
    var out: Correction;
    out.ok = sys.status == 0u;
    out.error = 0.0;
    var g: array<real, ROWS_NU_CAP>;
    var e: array<real, ROWS_CAP>;
    var used: array<u32, ROWS_CAP>;
    for (var r = 0u; r < ROWS; r++) {
        var wanted = row_level[r] != 2u;
        if position {
            wanted = row_level[r] == 0u;
        }
        if sys.enabled[r] == 0u || !wanted {
            continue;
        }
        used[r] = 1u;
        if position {
            e[r] = sys.rows[r].position_error;
        } else {
            e[r] = sys.rows[r].velocity_error;
        }
        out.error = max(out.error, abs(e[r]));
        for (var k = 0u; k < NU; k++) {
            g[r * NU + k] = sys.jacobian[r * NU + k];
        }
    }
    let mass = mass_solve(sys.inverse, sys.applied, g);
    out.ok = out.ok && mass.ok;
    let minv_gt = mass.minv_gt;
    let a_mat = gram_matrix(g, minv_gt);
    let x = solve_multipliers(a_mat, e, used);
    let du = minv_gt_times(minv_gt, x);
    for (var k = 0u; k < NU; k++) {
        out.du[k] = -du[k];
        out.ok = out.ok && is_finite_real(out.du[k]);
    }
    return out;
}

// Largest |position error| and |velocity error| of the enabled rows: twin of
// `constraint_errors` (src/cpu/integrate.rs).
fn constraint_errors(i: u32, s: State) -> vec2<real> {
    var sys = assemble_instance(i, s, BAUMGARTE_OFF);
    var out = vec2<real>(0.0, 0.0);
    for (var r = 0u; r < ROWS; r++) {
        if sys.enabled[r] != 0u {
            out = max(out, vec2<real>(abs(sys.rows[r].position_error), abs(sys.rows[r].velocity_error)));
        }
    }
    return out;
}

// Twin of `projection_target` (src/cpu/integrate.rs): a tenth of the tolerance, but no finer than
// the precision can resolve.
fn projection_target(tolerance: real) -> real {
    return max(0.1 * tolerance, 16.0 * REAL_EPSILON);
}

// Simbody's projection: Newton on the position rows (≤ 20 iterations), then the velocity rows
// (≤ 7); twin of `project` (src/cpu/integrate.rs). Returns the projections applied (0 to 2), or
// 3 when a correction could not be computed. The two phases share one loop, so the correction
// (an assembly and a solve) is compiled once.
const PROJECTION_FAILED: u32 = 3u;
const POSITION_ITERATIONS: u32 = 20u;
const VELOCITY_ITERATIONS: u32 = 7u;

fn project(i: u32, s: ptr<function, State>, tolerance: real) -> u32 {
    let goal = projection_target(tolerance);
    var applied = 0u;
    var velocity = 0u;
    var position = true;
    var it = 0u;
    for (var round = 0u; round < POSITION_ITERATIONS + VELOCITY_ITERATIONS; round++) {
        if position && it == POSITION_ITERATIONS {
            position = false;
            it = 0u;
        }
        let c = projection_correction(i, *s, position);
        if !c.ok {
            return PROJECTION_FAILED;
        }
        if c.error <= goal {
            if !position {
                break;
            }
            position = false;
            it = 0u;
            continue;
        }
        it += 1u;
        if position {
            displace(s, c.du);
        } else {
            correct_velocity(s, c.du);
        }
        if position {
            applied = 1u;
        } else {
            velocity = 1u;
        }
    }
    return applied + velocity;
}

// The step-size factor 0.9 (accuracy / error)^¼ clamped to [lo, hi] (Simbody's RKM control).
// The fourth root as two square roots: Vulkan has no f64 `pow`.
fn step_factor(accuracy: real, error: real, lo: real, hi: real) -> real {
    if error <= 0.0 {
        return hi;
    }
    return clamp(0.9 * sqrt(sqrt(accuracy / error)), lo, hi);
}

// One thread per instance, at most `launch.steps` trial steps per dispatch: twin of
// `advance_instance` (src/cpu/integrate.rs). An instance whose dynamics or state stops being finite
// keeps its last finite state and is flagged; one that reached its goal does nothing more.
@compute @workgroup_size(WORKGROUP_SIZE)
fn step_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= launch.count {
        return;
    }
    let p = step_params;
    let baumgarte = (launch.mode >> 8u) & 255u;
    var status = u32(output[CARRY_STATUS * launch.capacity + i]);
    var finished = output[CARRY_FINISHED * launch.capacity + i] != 0.0;
    if status != 0u || finished {
        return;
    }
    cache_parameters(i);
    load_free_bodies(i);
    var accepted = u32(output[CARRY_ACCEPTED * launch.capacity + i]);
    var elapsed = output[CARRY_ELAPSED * launch.capacity + i];
    var elapsed_low = output[CARRY_ELAPSED_LOW * launch.capacity + i];
    var h = output[CARRY_STEP_SIZE * launch.capacity + i];
    var rejected = u32(output[CARRY_REJECTED * launch.capacity + i]);
    var projections = u32(output[CARRY_PROJECTIONS * launch.capacity + i]);
    let adaptive = INTEGRATOR == INTEGRATOR_RKM;
    if h <= 0.0 {
        h = min(p.max_step, 0.001);
    }
    var state = load_state(i);
    let start_time = state.time;
    var attempts = 0u;
    loop {
        var left: real = 0.0;
        if p.goal == GOAL_STEPS {
            if accepted >= p.steps {
                finished = true;
                break;
            }
        } else {
            left = p.duration - (elapsed - elapsed_low);
            if left <= 64.0 * REAL_EPSILON * max(p.duration, 1.0) {
                finished = true;
                break;
            }
        }
        if attempts >= launch.steps {
            break;
        }
        attempts += 1u;
        var this_h = p.step;
        if adaptive {
            this_h = min(h, p.max_step);
        }
        if p.goal == GOAL_DURATION && this_h > left {
            this_h = left;
        }
        // The instance's time: its start plus the compensated elapsed sum (not a running f32
        // sum of steps), so a law of time is evaluated where the host's f64 time is.
        state.time = start_time + (elapsed - elapsed_low);
        // Every retry below shrinks h; below the minimum the instance stops, flagged.
        let trial = try_step(i, state, this_h, baumgarte);
        var next = trial.next;
        if !trial.ok {
            if adaptive && this_h / 4.0 >= p.min_step {
                // An RKM trial stage failed (e.g. a huge trial step): retry smaller.
                h = this_h / 4.0;
                rejected += 1u;
                continue;
            }
            status = NONFINITE_STATE;
            break;
        }
        if adaptive {
            if trial.error > p.accuracy {
                rejected += 1u;
                h = this_h * step_factor(p.accuracy, trial.error, 0.1, 0.9);
                if h < p.min_step {
                    status = STEP_FAILED;
                    break;
                }
                continue;
            }
            h = min(this_h * step_factor(p.accuracy, trial.error, 1.0, 5.0), p.max_step);
        }
        if PROJECTION {
            let errors = constraint_errors(i, next);
            let worst = max(errors.x, errors.y);
            if worst > p.tolerance {
                // Simbody refuses to project an error this large: the step was too long.
                if adaptive && worst > max(2.0 * p.tolerance, sqrt(p.tolerance)) {
                    rejected += 1u;
                    h = this_h / 2.0;
                    if h < p.min_step {
                        // Even a vanishing step leaves the error beyond the limit: it was
                        // there on entry, and no step can remove it.
                        status = STEP_FAILED | CONSTRAINT_VIOLATED;
                        break;
                    }
                    continue;
                }
                let n = project(i, &next, p.tolerance);
                if n == PROJECTION_FAILED {
                    status = NONFINITE_STATE;
                    break;
                }
                projections += n;
                // Twin of the CPU's finiteness check after projection: a flagged instance keeps
                // its last finite state, never a non-finite one.
                if !normalize_state(&next) {
                    status = NONFINITE_STATE;
                    break;
                }
            }
        }
        state = next;
        accepted += 1u;
        // Compensated sum: thousands of f32 steps keep the elapsed time to a few ulps.
        let y = this_h - elapsed_low;
        let t = elapsed + y;
        elapsed_low = (t - elapsed) - y;
        elapsed = t;
    }
    state.time = start_time + (elapsed - elapsed_low);
    if finished && accepted > 0u {
        // Twin of the check after `advance_instance` (src/cpu/integrate.rs).
        let errors = constraint_errors(i, state);
        if !(max(errors.x, errors.y) <= p.violation) {
            status |= CONSTRAINT_VIOLATED;
        }
    }
    store_state(i, state);
    if finished || status != 0u {
        // Its last dispatch of the call: its time, as the host will have it (to f32 rounding
        // of the compensated sum). Not before: later dispatches start from the call's start.
        input[input_at(TIME_IN, 1u, i)] = state.time;
    }
    output[CARRY_STATUS * launch.capacity + i] = real(status);
    output[CARRY_ACCEPTED * launch.capacity + i] = real(accepted);
    output[CARRY_ELAPSED * launch.capacity + i] = elapsed;
    output[CARRY_ELAPSED_LOW * launch.capacity + i] = elapsed_low;
    output[CARRY_STEP_SIZE * launch.capacity + i] = h;
    output[CARRY_FINISHED * launch.capacity + i] = real(select(0u, 1u, finished));
    output[CARRY_REJECTED * launch.capacity + i] = real(rejected);
    output[CARRY_PROJECTIONS * launch.capacity + i] = real(projections);
}
