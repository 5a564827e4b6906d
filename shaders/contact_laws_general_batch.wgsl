// The several-contact laws (contact_laws_general.wgsl, contact_phases_general.wgsl) over a batch
// of cases, one per invocation: the kernel of `gpu::contact_laws::general`. Every size
// (LAW_*), offset (CASE_*, ANSWER_*, their lengths) and code (KIND_*, FLAG_*) is a constant the
// host prepends from its description of the shape (src/gpu/contact_laws/general.rs).

@group(0) @binding(0) var<storage, read> cases: array<real>;
@group(0) @binding(1) var<storage, read_write> answers: array<real>;
// x: the number of cases in this dispatch.
@group(0) @binding(2) var<uniform> law_launch: vec4<u32>;

fn case_rows(at: u32) -> Rows {
    var v: Rows;
    for (var r = 0u; r < LAW_ROWS; r++) { loop_count += 1u;
        v[r] = cases[at + r];
    }
    return v;
}

fn case_per_contact(at: u32) -> PerContact {
    var v: PerContact;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        v[k] = cases[at + k];
    }
    return v;
}

fn put_rows(at: u32, v: Rows) {
    for (var r = 0u; r < LAW_ROWS; r++) { loop_count += 1u;
        answers[at + r] = v[r];
    }
}

fn put_per_contact(at: u32, v: PerContact) {
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        answers[at + k] = v[k];
    }
}

fn flag(on: bool, bit: u32) -> u32 {
    return select(0u, bit, on);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn contact_laws_general_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= law_launch.x {
        return;
    }
    let c = i * CASE_LEN;
    let a = i * ANSWER_LEN;
    var w: Square;
    for (var e = 0u; e < LAW_ROWS_SQ; e++) { loop_count += 1u;
        w[e] = cases[c + CASE_DELASSUS + e];
    }
    let rows = case_rows(c + CASE_ROWS);
    let tol = ContactTolerances(
        cases[c + CASE_TOLERANCES],
        cases[c + CASE_TOLERANCES + 1u],
        cases[c + CASE_TOLERANCES + 2u],
        cases[c + CASE_TOLERANCES + 3u],
        cases[c + CASE_TOLERANCES + 4u],
        cases[c + CASE_TOLERANCES + 5u],
    );
    let k = ContactCoefficients(
        case_per_contact(c + CASE_RESTITUTION),
        case_per_contact(c + CASE_MU_STATIC),
        case_per_contact(c + CASE_MU_DYNAMIC),
    );
    let kind = u32(cases[c + CASE_KIND]);
    let on = u32(cases[c + CASE_ON]);
    if kind == KIND_MODES {
        var contacts: ModeContacts;
        contacts.touching = on;
        for (var j = 0u; j < LAW_CONTACTS; j++) { loop_count += 1u;
            contacts.modes[j] = u32(cases[c + CASE_MODE + j]);
            contacts.directions[j] = vec2<real>(cases[c + CASE_DIRECTION + 2u * j], cases[c + CASE_DIRECTION + 2u * j + 1u]);
            contacts.slips[j] = vec2<real>(cases[c + CASE_SLIP + 2u * j], cases[c + CASE_SLIP + 2u * j + 1u]);
        }
        let s = solve_modes(&w, rows, contacts, k, tol);
        put_rows(a + ANSWER_VALUES, s.multipliers);
        put_rows(a + ANSWER_ROWS, s.acceleration);
        for (var j = 0u; j < LAW_CONTACTS; j++) { loop_count += 1u;
            answers[a + ANSWER_MODE + j] = real(s.modes[j]);
            answers[a + ANSWER_DIRECTION + 2u * j] = s.directions[j].x;
            answers[a + ANSWER_DIRECTION + 2u * j + 1u] = s.directions[j].y;
        }
        answers[a + ANSWER_MASKS] = real(s.painleve);
        answers[a + ANSWER_FLAGS] = real(flag(s.mode_cycle, FLAG_MODE_CYCLE) | flag(loop_count > LOOP_BUDGET, FLAG_BUDGET));
        return;
    }
    let o = impact(&w, rows, cases[c + CASE_ENERGY], on, k, kind == KIND_NEWTON, tol);
    put_rows(a + ANSWER_VALUES, o.impulse);
    put_rows(a + ANSWER_ROWS, o.velocity);
    put_per_contact(a + ANSWER_LOSS, o.losses);
    put_per_contact(a + ANSWER_RESTITUTION, o.restitution);
    put_per_contact(a + ANSWER_FRICTION, o.friction);
    answers[a + ANSWER_MASKS + 1u] = real(o.closed);
    answers[a + ANSWER_MASKS + 2u] = real(o.jammed);
    answers[a + ANSWER_ENERGY_CHANGE] = o.energy_change;
    answers[a + ANSWER_FLAGS] = real(flag(o.energy_clamped, FLAG_CLAMPED)
        | flag(o.direction_unconverged, FLAG_UNCONVERGED) | flag(o.rounds_exhausted, FLAG_EXHAUSTED)
        | flag(loop_count > LOOP_BUDGET, FLAG_BUDGET));
}
