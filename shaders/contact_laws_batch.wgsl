// The one-contact laws (contact_laws.wgsl) over a batch of cases, one per invocation: the kernel
// of `gpu::contact_laws`. Every offset (CASE_*, ANSWER_*, their lengths) and code (KIND_*,
// FLAG_*) is a constant the host prepends from its layout description (src/gpu/contact_laws.rs).

@group(0) @binding(0) var<storage, read> cases: array<real>;
@group(0) @binding(1) var<storage, read_write> answers: array<real>;
// x: the number of cases in this dispatch.
@group(0) @binding(2) var<uniform> law_launch: vec4<u32>;

fn case3(at: u32) -> vec3<real> {
    return vec3<real>(cases[at], cases[at + 1u], cases[at + 2u]);
}

fn case2(at: u32) -> vec2<real> {
    return vec2<real>(cases[at], cases[at + 1u]);
}

fn put3(at: u32, v: vec3<real>) {
    answers[at] = v.x;
    answers[at + 1u] = v.y;
    answers[at + 2u] = v.z;
}

fn flag(on: bool, bit: u32) -> u32 {
    return select(0u, bit, on);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn contact_laws_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= law_launch.x {
        return;
    }
    let c = i * CASE_LEN;
    let a = i * ANSWER_LEN;
    // W row-major; symmetric, so its rows are also the columns mat3x3 takes.
    let w = mat3x3<real>(case3(c + CASE_DELASSUS), case3(c + CASE_DELASSUS + 3u), case3(c + CASE_DELASSUS + 6u));
    let rows = case3(c + CASE_ROWS);
    let tol = ContactTolerances(
        cases[c + CASE_TOLERANCES],
        cases[c + CASE_TOLERANCES + 1u],
        cases[c + CASE_TOLERANCES + 2u],
        cases[c + CASE_TOLERANCES + 3u],
        cases[c + CASE_TOLERANCES + 4u],
        cases[c + CASE_TOLERANCES + 5u],
    );
    let restitution = cases[c + CASE_COEFFICIENTS];
    let mu_static = cases[c + CASE_COEFFICIENTS + 1u];
    let mu_dynamic = cases[c + CASE_COEFFICIENTS + 2u];
    let kind = u32(cases[c + CASE_KIND]);
    let on = cases[c + CASE_ON] != 0.0;
    if kind == KIND_MODES {
        let s = solve_modes(w, rows, u32(cases[c + CASE_MODE]), case2(c + CASE_DIRECTION), on, case2(c + CASE_SLIP), mu_static, mu_dynamic, tol);
        put3(a + ANSWER_VALUES, s.multipliers);
        put3(a + ANSWER_ROWS, s.acceleration);
        answers[a + ANSWER_MODE] = real(s.mode);
        answers[a + ANSWER_DIRECTION] = s.direction.x;
        answers[a + ANSWER_DIRECTION + 1u] = s.direction.y;
        answers[a + ANSWER_FLAGS] = real(flag(s.painleve, FLAG_PAINLEVE) | flag(s.mode_cycle, FLAG_MODE_CYCLE));
        return;
    }
    let o = impact(w, rows, cases[c + CASE_ENERGY], on, restitution, mu_static, mu_dynamic, kind == KIND_NEWTON, tol);
    put3(a + ANSWER_VALUES, o.impulse);
    put3(a + ANSWER_ROWS, o.velocity);
    answers[a + ANSWER_ENERGY_CHANGE] = o.energy_change;
    answers[a + ANSWER_LOSS] = o.loss;
    answers[a + ANSWER_RESTITUTION] = o.restitution;
    answers[a + ANSWER_FRICTION] = o.friction;
    answers[a + ANSWER_FLAGS] = real(flag(o.closed, FLAG_CLOSED) | flag(o.jammed, FLAG_JAMMED)
        | flag(o.energy_clamped, FLAG_CLAMPED) | flag(o.direction_unconverged, FLAG_UNCONVERGED)
        | flag(o.rounds_exhausted, FLAG_EXHAUSTED));
}
