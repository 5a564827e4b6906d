// The event kernel's per-instance machine (event_step.wgsl): its state in the carry columns,
// loaded at a dispatch's start and stored at its end. Offsets (EVENT_*) come from the host's
// carry layout (src/gpu/events/carry.rs).

// One instance's machine (the carry columns).
struct Machine {
    status: u32,
    phase: u32,
    start: real,
    elapsed: real,
    elapsed_low: real,
    mode: u32,
    direction: vec2<real>,
    armed: bool,
    friction_loss: real,
    impacts: u32,
    first_impact: real,
    last_mode_change: real,
    // bit 0: first_impact set, bit 1: last_mode_change set.
    records: u32,
    impact_loss: real,
    events: u32,
    steps: u32,
    lo: real,
    hi: real,
    bisections: u32,
    // Under error control (INTEGRATOR_RKM): the step the last accepted one proposed, and the
    // call's trial steps so far (accepted and rejected, bounded by MAX_ADAPTIVE_ATTEMPTS).
    proposed: real,
    attempts: u32,
    restitution: real,
    mu_static: real,
    mu_dynamic: real,
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
    m.mode = u32(carry(EVENT_MODE, i));
    m.direction = vec2<real>(carry(EVENT_DIRECTION, i), carry(EVENT_DIRECTION + 1u, i));
    m.armed = carry(EVENT_ARMED, i) != 0.0;
    m.friction_loss = carry(EVENT_FRICTION_LOSS, i);
    m.impacts = u32(carry(EVENT_IMPACTS, i));
    m.first_impact = carry(EVENT_FIRST_IMPACT, i);
    m.last_mode_change = carry(EVENT_LAST_MODE_CHANGE, i);
    m.records = u32(carry(EVENT_RECORDS, i));
    m.impact_loss = carry(EVENT_IMPACT_LOSS, i);
    m.events = u32(carry(EVENT_EVENTS, i));
    m.steps = u32(carry(EVENT_STEPS, i));
    m.lo = carry(EVENT_LO, i);
    m.hi = carry(EVENT_HI, i);
    m.bisections = u32(carry(EVENT_BISECTIONS, i));
    m.proposed = carry(EVENT_PROPOSED, i);
    m.attempts = u32(carry(EVENT_ATTEMPTS, i));
    m.restitution = carry(EVENT_COEFFICIENTS, i);
    m.mu_static = carry(EVENT_COEFFICIENTS + 1u, i);
    m.mu_dynamic = carry(EVENT_COEFFICIENTS + 2u, i);
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
    put_carry(EVENT_MODE, i, real(m.mode));
    put_carry(EVENT_DIRECTION, i, m.direction.x);
    put_carry(EVENT_DIRECTION + 1u, i, m.direction.y);
    put_carry(EVENT_ARMED, i, real(select(0u, 1u, m.armed)));
    put_carry(EVENT_FRICTION_LOSS, i, m.friction_loss);
    put_carry(EVENT_IMPACTS, i, real(m.impacts));
    put_carry(EVENT_FIRST_IMPACT, i, m.first_impact);
    put_carry(EVENT_LAST_MODE_CHANGE, i, m.last_mode_change);
    put_carry(EVENT_RECORDS, i, real(m.records));
    put_carry(EVENT_IMPACT_LOSS, i, m.impact_loss);
    put_carry(EVENT_EVENTS, i, real(m.events));
    put_carry(EVENT_STEPS, i, real(m.steps));
    put_carry(EVENT_LO, i, m.lo);
    put_carry(EVENT_HI, i, m.hi);
    put_carry(EVENT_BISECTIONS, i, real(m.bisections));
    put_carry(EVENT_PROPOSED, i, m.proposed);
    put_carry(EVENT_ATTEMPTS, i, real(m.attempts));
    put_carry(EVENT_PENETRATION, i, m.penetration);
}
