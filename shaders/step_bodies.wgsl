// The stepping kernel's per-body pieces: a body's rates and powers, its part of each
// integrator's update, its projection moves and its write-back. The generated stepping walks
// (src/gpu/codegen.rs `stepping_sections`) call them once per integrated body; `step.wgsl`
// (twin of src/cpu/integrate.rs) calls the walks. Twins of the per-body loops of
// `derivative`, `axpy`, the integrators' updates, `displace` and the state's write-back.

// ẏ of a State: quaternion and origin rates, angular and linear accelerations, and the power
// on the free bodies (constraint forces, applied loads).
struct Derivative {
    ok: bool,
    power: vec2<real>,
    quaternion: array<vec4<real>, NB_CAP>,
    origin: array<vec3<real>, NB_CAP>,
    ang_vel: array<vec3<real>, NB_CAP>,
    lin_vel: array<vec3<real>, NB_CAP>,
}

// Free body b's rates at (q, w, v): q̇ from w, ṗ = v, (ẇ, v̇) from its block of u̇ (from `column`).
fn free_body_rates(d: ptr<function, Derivative>, b: u32, column: u32, q: vec4<real>, w: vec3<real>, v: vec3<real>, udot: array<real, NU_CAP>) {
    (*d).quaternion[b] = quaternion_rate(q, w);
    (*d).origin[b] = v;
    (*d).ang_vel[b] = vec3<real>(udot[column], udot[column + 1u], udot[column + 2u]);
    (*d).lin_vel[b] = vec3<real>(udot[column + 3u], udot[column + 4u], udot[column + 5u]);
    (*d).ok = (*d).ok && finite3((*d).ang_vel[b]) && finite3((*d).lin_vel[b]);
}

// A constant-law prescribed body's rates (input columns from prefix p): its own velocity, at its
// given acceleration.
fn prescribed_body_rates(d: ptr<function, Derivative>, i: u32, b: u32, p: u32, q: vec4<real>, w: vec3<real>, v: vec3<real>) {
    (*d).quaternion[b] = quaternion_rate(q, w);
    (*d).origin[b] = v;
    (*d).ang_vel[b] = load3(p + PRESCRIBED_ACCELERATION_AT, 6u, i, 0u);
    (*d).lin_vel[b] = load3(p + PRESCRIBED_ACCELERATION_AT, 6u, i, 3u);
    (*d).ok = (*d).ok && finite3((*d).ang_vel[b]) && finite3((*d).lin_vel[b]);
}

// A free body's u (w, v) into u from `column`.
fn put_mobilities(u: ptr<function, array<real, NU_CAP>>, column: u32, w: vec3<real>, v: vec3<real>) {
    for (var k = 0u; k < 3u; k++) {
        (*u)[column + k] = w[k];
        (*u)[column + 3u + k] = v[k];
    }
}

// F · v_com + T · w of the applied loads on a free body (input columns from prefix p) with
// rotation R, at (w, v).
fn free_applied_power(i: u32, p: u32, rotation: mat3x3<real>, w: vec3<real>, v: vec3<real>) -> real {
    let v_com = v + cross(w, rotation * load3(p + FREE_COM_AT, 3u, i, 0u));
    return dot(load3(p + FREE_APPLIED_FORCE_AT, 3u, i, 0u), v_com) + dot(load3(p + FREE_APPLIED_TORQUE_AT, 3u, i, 0u), w);
}

// ½ (m |v_com|² + wᵀ I_G w) of a free body (input columns from prefix p) with rotation R, at
// (w, v): ½ uᵀ M u of its mass matrix about its origin.
fn free_kinetic_energy(i: u32, p: u32, rotation: mat3x3<real>, w: vec3<real>, v: vec3<real>) -> real {
    let v_com = v + cross(w, rotation * load3(p + FREE_COM_AT, 3u, i, 0u));
    let inertia = inertia_matrix(load3(p + FREE_INERTIA_AT, 6u, i, 0u), load3(p + FREE_INERTIA_AT, 6u, i, 3u));
    // wᵀ I_G w = (Rᵀ w)ᵀ I (Rᵀ w).
    let w_body = transpose(rotation) * w;
    return 0.5 * (load(p + FREE_MASS_AT, 1u, i, 0u) * dot(v_com, v_com) + dot(w_body, inertia * w_body));
}

// Body k's part of `advance_state` (`advance_bodies`, generated, calls it per integrated body).
fn advance_body(s: ptr<function, State>, k: u32, h: real, d: Derivative) {
    (*s).quaternion[k] += h * d.quaternion[k];
    (*s).origin[k] += h * d.origin[k];
    (*s).ang_vel[k] += h * d.ang_vel[k];
    (*s).lin_vel[k] += h * d.lin_vel[k];
}

// Body k's part of `combine_state` (`combine_bodies`, generated).
fn combine_body(s: ptr<function, State>, k: u32, h: real, wa: real, a: Derivative, wb: real, b: Derivative, wc: real, c: Derivative) {
    (*s).quaternion[k] += h * (wa * a.quaternion[k] + wb * b.quaternion[k] + wc * c.quaternion[k]);
    (*s).origin[k] += h * (wa * a.origin[k] + wb * b.origin[k] + wc * c.origin[k]);
    (*s).ang_vel[k] += h * (wa * a.ang_vel[k] + wb * b.ang_vel[k] + wc * c.ang_vel[k]);
    (*s).lin_vel[k] += h * (wa * a.lin_vel[k] + wb * b.lin_vel[k] + wc * c.lin_vel[k]);
}

// Body k's part of the running sum of RK4's stages, sum + w · d (`accumulate_rates`,
// generated). Added stage by stage, k1 + 2 k2 + 2 k3 + k4 is summed in the order the CPU's
// expression sums it, so the update below is the CPU's to the rounding.
fn accumulate_body_rates(sum: ptr<function, Derivative>, k: u32, w: real, d: Derivative) {
    (*sum).quaternion[k] += w * d.quaternion[k];
    (*sum).origin[k] += w * d.origin[k];
    (*sum).ang_vel[k] += w * d.ang_vel[k];
    (*sum).lin_vel[k] += w * d.lin_vel[k];
}

// Body k's part of the classic RK4 update, y + h/6 (k1 + 2 k2 + 2 k3 + k4), from the stages'
// running sum (`rk4_bodies`, generated).
fn rk4_body(s: ptr<function, State>, k: u32, h: real, sum: Derivative) {
    (*s).quaternion[k] += h / 6.0 * sum.quaternion[k];
    (*s).origin[k] += h / 6.0 * sum.origin[k];
    (*s).ang_vel[k] += h / 6.0 * sum.ang_vel[k];
    (*s).lin_vel[k] += h / 6.0 * sum.lin_vel[k];
}

// Renormalises body b's quaternion; false when a value of its state is not finite or the
// quaternion is zero (`normalize_state`, generated, calls it per integrated body).
fn normalize_body(s: ptr<function, State>, b: u32) -> bool {
    let q = (*s).quaternion[b];
    let ok = finite_quaternion(q) && finite3((*s).origin[b]) && finite3((*s).ang_vel[b]) && finite3((*s).lin_vel[b]);
    (*s).quaternion[b] = q * (1.0 / length(q));
    return ok;
}

// max |a − b| / max(1, |a|) / 5 over body b's values: its part of Simbody's RKM error estimate
// between the 4th-order y₁ (a) and the 3rd-order ŷ (b) (`merson_error`, generated).
fn merson_body_error(a: State, b: State, k: u32) -> real {
    let dq = abs(a.quaternion[k] - b.quaternion[k]) / 5.0 / max(abs(a.quaternion[k]), vec4<real>(1.0));
    let dp = abs(a.origin[k] - b.origin[k]) / 5.0 / max(abs(a.origin[k]), vec3<real>(1.0));
    let dw = abs(a.ang_vel[k] - b.ang_vel[k]) / 5.0 / max(abs(a.ang_vel[k]), vec3<real>(1.0));
    let dv = abs(a.lin_vel[k] - b.lin_vel[k]) / 5.0 / max(abs(a.lin_vel[k]), vec3<real>(1.0));
    var e = max(max(dq.x, dq.y), max(dq.z, dq.w));
    e = max(e, max(max(dp.x, dp.y), max(max(dp.z, dw.x), max(dw.y, dw.z))));
    return max(e, max(dv.x, max(dv.y, dv.z)));
}

// Semi-implicit Euler on body b from quaternion q with accelerations (ang_acc, lin_acc): u first,
// then q with the new u (`euler_bodies`, generated).
fn euler_body(next: ptr<function, State>, b: u32, h: real, q: vec4<real>, ang_acc: vec3<real>, lin_acc: vec3<real>) {
    (*next).ang_vel[b] += h * ang_acc;
    (*next).lin_vel[b] += h * lin_acc;
    (*next).quaternion[b] += h * quaternion_rate(q, (*next).ang_vel[b]);
    (*next).origin[b] += h * (*next).lin_vel[b];
}

// Projection updates of free body b (its block of du from `column`; `displace` and
// `correct_velocity`, generated). Twin of `displace`: q moved by the velocity-space displacement
// δu (first order).
fn displace_body(s: ptr<function, State>, b: u32, column: u32, du: array<real, NU_CAP>) {
    let dw = vec3<real>(du[column], du[column + 1u], du[column + 2u]);
    (*s).quaternion[b] += quaternion_rate((*s).quaternion[b], dw);
    (*s).origin[b] += vec3<real>(du[column + 3u], du[column + 4u], du[column + 5u]);
    (*s).quaternion[b] = normalize((*s).quaternion[b]);
}

fn correct_body_velocity(s: ptr<function, State>, b: u32, column: u32, du: array<real, NU_CAP>) {
    (*s).ang_vel[b] += vec3<real>(du[column], du[column + 1u], du[column + 2u]);
    (*s).lin_vel[b] += vec3<real>(du[column + 3u], du[column + 4u], du[column + 5u]);
}

// The work (driven, applied) back to its input column.
fn store_work(i: u32, work: vec2<real>) {
    let w = input_at(WORK_IN, 2u, i);
    input[w] = work.x;
    input[w + 1u] = work.y;
}

// Three values to the input buffer from index `at`.
fn store_input3(at: u32, x: vec3<real>) {
    input[at] = x.x;
    input[at + 1u] = x.y;
    input[at + 2u] = x.z;
}

// A body's pose (q, origin) to the column at `pose` and velocity (w, v) to the column at
// `velocity` (`store_state`, generated).
fn store_body_state(i: u32, pose: u32, velocity: u32, q: vec4<real>, origin: vec3<real>, w: vec3<real>, v: vec3<real>) {
    let o = input_at(pose, 7u, i);
    input[o] = q.x;
    input[o + 1u] = q.y;
    input[o + 2u] = q.z;
    input[o + 3u] = q.w;
    store_input3(o + 4u, origin);
    let u = input_at(velocity, 6u, i);
    store_input3(u, w);
    store_input3(u + 3u, v);
}
