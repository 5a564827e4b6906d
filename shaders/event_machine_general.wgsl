// The several-contact event kernel's per-instance machine (event_contacts.wgsl): its state in
// the carry columns, loaded at a dispatch's start and stored at its end. Offsets (EVENT_*) come
// from the host's carry layout (src/gpu/events/carry.rs); a per-contact column holds contact k's
// value at +k (DIRECTION: its two components at +2k; COEFFICIENTS: restitution at +k, μ_s at
// +K + k, μ_d at +2K + k).

// One instance's machine (the carry columns); per-contact flags are masks (bit k: contact k).
struct Machine {
    status: u32,
    phase: u32,
    start: real,
    elapsed: real,
    elapsed_low: real,
    mode: array<u32, LAW_CONTACTS>,
    direction: array<vec2<real>, LAW_CONTACTS>,
    armed: u32,
    friction_loss: PerContact,
    impacts: array<u32, LAW_CONTACTS>,
    first_impact: PerContact,
    last_mode_change: PerContact,
    // Bit k: contact k's first_impact set; bit 16 + k: its last_mode_change set.
    records: u32,
    impact_loss: PerContact,
    events: u32,
    steps: u32,
    lo: real,
    hi: real,
    bisections: u32,
    // Under error control (INTEGRATOR_RKM): the step the last accepted one proposed, and the
    // call's trial steps so far (accepted and rejected, bounded by MAX_ADAPTIVE_ATTEMPTS).
    proposed: real,
    attempts: u32,
    k: ContactCoefficients,
    tol: ContactTolerances,
    t_tol: real,
    penetration: real,
}

fn carry(column: u32, i: u32) -> real {
    return output[column * launch.capacity + i];
}

fn put_carry(column: u32, i: u32, value: real) {
    output[column * launch.capacity + i] = value;
}

fn load_machine(i: u32) -> Machine {
    var m: Machine;
    m.status = u32(carry(EVENT_STATUS, i));
    m.phase = u32(carry(EVENT_PHASE, i));
    m.start = carry(EVENT_START, i);
    m.elapsed = carry(EVENT_ELAPSED, i);
    m.elapsed_low = carry(EVENT_ELAPSED_LOW, i);
    m.armed = 0u;
    m.records = 0u;
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        m.mode[k] = u32(carry(EVENT_MODE + k, i));
        m.direction[k] = vec2<real>(carry(EVENT_DIRECTION + 2u * k, i), carry(EVENT_DIRECTION + 2u * k + 1u, i));
        m.armed |= select(0u, bit(k), carry(EVENT_ARMED + k, i) != 0.0);
        m.friction_loss[k] = carry(EVENT_FRICTION_LOSS + k, i);
        m.impacts[k] = u32(carry(EVENT_IMPACTS + k, i));
        m.first_impact[k] = carry(EVENT_FIRST_IMPACT + k, i);
        m.last_mode_change[k] = carry(EVENT_LAST_MODE_CHANGE + k, i);
        let records = u32(carry(EVENT_RECORDS + k, i));
        m.records |= select(0u, bit(k), (records & 1u) != 0u) | select(0u, bit(16u + k), (records & 2u) != 0u);
        m.impact_loss[k] = carry(EVENT_IMPACT_LOSS + k, i);
        m.k.restitution[k] = carry(EVENT_COEFFICIENTS + k, i);
        m.k.mu_static[k] = carry(EVENT_COEFFICIENTS + LAW_CONTACTS + k, i);
        m.k.mu_dynamic[k] = carry(EVENT_COEFFICIENTS + 2u * LAW_CONTACTS + k, i);
    }
    m.events = u32(carry(EVENT_EVENTS, i));
    m.steps = u32(carry(EVENT_STEPS, i));
    m.lo = carry(EVENT_LO, i);
    m.hi = carry(EVENT_HI, i);
    m.bisections = u32(carry(EVENT_BISECTIONS, i));
    m.proposed = carry(EVENT_PROPOSED, i);
    m.attempts = u32(carry(EVENT_ATTEMPTS, i));
    let t = EVENT_TOLERANCES;
    m.tol = ContactTolerances(carry(t, i), carry(t + 1u, i), carry(t + 2u, i), carry(t + 3u, i), carry(t + 4u, i), carry(t + 5u, i));
    m.t_tol = carry(t + 6u, i);
    m.penetration = carry(EVENT_PENETRATION, i);
    return m;
}

// What changes during a dispatch back to the carry (coefficients and tolerances stay).
fn store_machine(i: u32, m: Machine) {
    put_carry(EVENT_STATUS, i, real(m.status));
    put_carry(EVENT_PHASE, i, real(m.phase));
    put_carry(EVENT_ELAPSED, i, m.elapsed);
    put_carry(EVENT_ELAPSED_LOW, i, m.elapsed_low);
    for (var k = 0u; k < LAW_CONTACTS; k++) { loop_count += 1u;
        put_carry(EVENT_MODE + k, i, real(m.mode[k]));
        put_carry(EVENT_DIRECTION + 2u * k, i, m.direction[k].x);
        put_carry(EVENT_DIRECTION + 2u * k + 1u, i, m.direction[k].y);
        put_carry(EVENT_ARMED + k, i, real(select(0u, 1u, has(m.armed, k))));
        put_carry(EVENT_FRICTION_LOSS + k, i, m.friction_loss[k]);
        put_carry(EVENT_IMPACTS + k, i, real(m.impacts[k]));
        put_carry(EVENT_FIRST_IMPACT + k, i, m.first_impact[k]);
        put_carry(EVENT_LAST_MODE_CHANGE + k, i, m.last_mode_change[k]);
        let records = select(0u, 1u, has(m.records, k)) | select(0u, 2u, has(m.records, 16u + k));
        put_carry(EVENT_RECORDS + k, i, real(records));
        put_carry(EVENT_IMPACT_LOSS + k, i, m.impact_loss[k]);
    }
    put_carry(EVENT_EVENTS, i, real(m.events));
    put_carry(EVENT_STEPS, i, real(m.steps));
    put_carry(EVENT_LO, i, m.lo);
    put_carry(EVENT_HI, i, m.hi);
    put_carry(EVENT_BISECTIONS, i, real(m.bisections));
    put_carry(EVENT_PROPOSED, i, m.proposed);
    put_carry(EVENT_ATTEMPTS, i, real(m.attempts));
    put_carry(EVENT_PENETRATION, i, m.penetration);
}
