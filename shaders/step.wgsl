// Fused time stepping: many substeps per dispatch with the state in registers, written back to
// the input columns at the end. Twin of the fixed-step integrators of src/integrate.rs
// (semi-implicit Euler, classic RK4); drift control by Baumgarte or none (projection and RKM run
// on the CPU path). Extra binding: the step size.

@group(0) @binding(3) var<storage, read> step_size: array<real>;

const INTEGRATOR_EULER: u32 = 0u;
const INTEGRATOR_RK4: u32 = 1u;
// `launch.mode` bit: this dispatch continues an earlier one of the same call.
const CONTINUING: u32 = 0x10000u;

// ẏ of a State: quaternion and origin rates, angular and linear accelerations.
struct Derivative {
    ok: bool,
    quaternion: array<vec4<real>, NB_CAP>,
    origin: array<vec3<real>, NB_CAP>,
    ang_vel: array<vec3<real>, NB_CAP>,
    lin_vel: array<vec3<real>, NB_CAP>,
}

// Twin of `derivative` (src/integrate.rs): free bodies follow the constrained dynamics,
// prescribed bodies their own velocity at their given (constant) acceleration.
fn derivative(i: u32, s: State, baumgarte: u32) -> Derivative {
    var body_kind = BODY_KIND;
    var body_slot = BODY_SLOT;
    var body_in = BODY_IN;
    let solved = solve_instance(i, s, baumgarte);
    var udot = solved.udot;
    var d: Derivative;
    d.ok = solved.status == 0u;
    for (var b = 0u; b < NB; b++) {
        if body_kind[b] == 0u {
            continue;
        }
        d.quaternion[b] = quaternion_rate(s.quaternion[b], s.ang_vel[b]);
        d.origin[b] = s.lin_vel[b];
        if body_kind[b] == 1u {
            let k = 6u * body_slot[b];
            d.ang_vel[b] = vec3<real>(udot[k], udot[k + 1u], udot[k + 2u]);
            d.lin_vel[b] = vec3<real>(udot[k + 3u], udot[k + 4u], udot[k + 5u]);
        } else {
            d.ang_vel[b] = load3(body_in[b] + 13u, 6u, i, 0u);
            d.lin_vel[b] = load3(body_in[b] + 13u, 6u, i, 3u);
        }
        d.ok = d.ok && finite3(d.ang_vel[b]) && finite3(d.lin_vel[b]);
    }
    return d;
}

// s + h · d.
fn advance_state(s: State, h: real, d: Derivative) -> State {
    var out = s;
    for (var b = 0u; b < NB; b++) {
        out.quaternion[b] += h * d.quaternion[b];
        out.origin[b] += h * d.origin[b];
        out.ang_vel[b] += h * d.ang_vel[b];
        out.lin_vel[b] += h * d.lin_vel[b];
    }
    return out;
}

// Renormalises the quaternions; false when a value is not finite or a quaternion is zero.
fn normalize_state(s: ptr<function, State>) -> bool {
    var body_kind = BODY_KIND;
    var ok = true;
    for (var b = 0u; b < NB; b++) {
        if body_kind[b] == 0u {
            continue;
        }
        let q = (*s).quaternion[b];
        ok = ok && finite_quaternion(q) && finite3((*s).origin[b]) && finite3((*s).ang_vel[b]) && finite3((*s).lin_vel[b]);
        (*s).quaternion[b] = q / length(q);
    }
    return ok;
}

// Writes the state back to the input columns (q, u of free bodies; poses, velocities of
// prescribed ones).
fn store_state(i: u32, s: State) {
    var body_kind = BODY_KIND;
    var body_in = BODY_IN;
    for (var b = 0u; b < NB; b++) {
        let p = body_in[b];
        var qp = p + 16u;
        var up = p + 23u;
        if body_kind[b] == 0u {
            continue;
        } else if body_kind[b] == 2u {
            qp = p;
            up = p + 7u;
        }
        let o = qp * launch.capacity + i * 7u;
        let q = s.quaternion[b];
        input[o] = q.x;
        input[o + 1u] = q.y;
        input[o + 2u] = q.z;
        input[o + 3u] = q.w;
        input[o + 4u] = s.origin[b].x;
        input[o + 5u] = s.origin[b].y;
        input[o + 6u] = s.origin[b].z;
        let v = up * launch.capacity + i * 6u;
        input[v] = s.ang_vel[b].x;
        input[v + 1u] = s.ang_vel[b].y;
        input[v + 2u] = s.ang_vel[b].z;
        input[v + 3u] = s.lin_vel[b].x;
        input[v + 4u] = s.lin_vel[b].y;
        input[v + 5u] = s.lin_vel[b].z;
    }
}

// One thread per instance: `launch.steps` substeps of size step_size[0]. An instance whose
// dynamics or state stops being finite keeps its last finite state; the output columns are
// the status (prefix 0) and the number of substeps completed in this call (prefix 1).
@compute @workgroup_size(64)
fn step_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= launch.count {
        return;
    }
    let h = step_size[0];
    let integrator = launch.mode & 255u;
    let baumgarte = (launch.mode >> 8u) & 255u;
    var status = 0u;
    var done = 0u;
    // Later dispatches of the same call continue the count, and leave flagged instances alone.
    if (launch.mode & CONTINUING) != 0u {
        status = u32(output[i]);
        done = u32(output[launch.capacity + i]);
        if status != 0u {
            return;
        }
    }
    var state = load_state(i);
    for (var n = 0u; n < launch.steps; n++) {
        var next: State;
        if integrator == INTEGRATOR_EULER {
            // u first, then q with the new u (semi-implicit).
            let d = derivative(i, state, baumgarte);
            if !d.ok {
                status = NONFINITE_STATE;
                break;
            }
            next = state;
            for (var b = 0u; b < NB; b++) {
                next.ang_vel[b] += h * d.ang_vel[b];
                next.lin_vel[b] += h * d.lin_vel[b];
                next.quaternion[b] += h * quaternion_rate(state.quaternion[b], next.ang_vel[b]);
                next.origin[b] += h * next.lin_vel[b];
            }
        } else {
            let k1 = derivative(i, state, baumgarte);
            let k2 = derivative(i, advance_state(state, 0.5 * h, k1), baumgarte);
            let k3 = derivative(i, advance_state(state, 0.5 * h, k2), baumgarte);
            let k4 = derivative(i, advance_state(state, h, k3), baumgarte);
            if !(k1.ok && k2.ok && k3.ok && k4.ok) {
                status = NONFINITE_STATE;
                break;
            }
            next = state;
            for (var b = 0u; b < NB; b++) {
                next.quaternion[b] += h / 6.0 * (k1.quaternion[b] + 2.0 * k2.quaternion[b] + 2.0 * k3.quaternion[b] + k4.quaternion[b]);
                next.origin[b] += h / 6.0 * (k1.origin[b] + 2.0 * k2.origin[b] + 2.0 * k3.origin[b] + k4.origin[b]);
                next.ang_vel[b] += h / 6.0 * (k1.ang_vel[b] + 2.0 * k2.ang_vel[b] + 2.0 * k3.ang_vel[b] + k4.ang_vel[b]);
                next.lin_vel[b] += h / 6.0 * (k1.lin_vel[b] + 2.0 * k2.lin_vel[b] + 2.0 * k3.lin_vel[b] + k4.lin_vel[b]);
            }
        }
        if !normalize_state(&next) {
            status = NONFINITE_STATE;
            break;
        }
        state = next;
        done += 1u;
    }
    store_state(i, state);
    store(0u, 1u, i, 0u, real(status));
    store(1u, 1u, i, 0u, real(done));
}
