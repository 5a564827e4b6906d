//! The event kernel's carry: each instance's machine, column after column (the layout the
//! kernel's `EVENT_*` constants come from), written at a call's start and read at its end.

use super::GpuEventRun;
use crate::batch::status;
use crate::contact::{
    Coefficients, ContactMode, ContactRecord, EventOptions, MAX_BISECTIONS, MIN_STEP_FRACTION,
    STABLE_STEP_FACTOR, Tolerances,
};
use crate::gpu::Precision;

/// The carry columns of one instance's machine, in order, with their widths (the kernel's
/// `EVENT_*` offsets are generated from this list).
pub const EVENT_CARRY: [(&str, usize); 23] = [
    ("STATUS", 1),
    ("PHASE", 1),
    ("START", 1),
    ("ELAPSED", 1),
    ("ELAPSED_LOW", 1),
    ("MODE", 1),
    ("DIRECTION", 2),
    ("ARMED", 1),
    ("FRICTION_LOSS", 1),
    ("IMPACTS", 1),
    ("FIRST_IMPACT", 1),
    ("LAST_MODE_CHANGE", 1),
    ("RECORDS", 1),
    ("IMPACT_LOSS", 1),
    ("EVENTS", 1),
    ("STEPS", 1),
    ("LO", 1),
    ("HI", 1),
    ("BISECTIONS", 1),
    ("COEFFICIENTS", 3),
    ("TOLERANCES", 7),
    ("PENETRATION", 1),
    ("PAD", 1),
];

/// Machine phases: settle at the start, step, bisect a bracket, done.
pub(super) const PHASES: [(&str, u32); 4] = [("START", 0), ("STEP", 1), ("BISECT", 2), ("DONE", 3)];

pub(super) fn carry_offset(name: &str) -> usize {
    let mut at = 0;
    for (n, w) in EVENT_CARRY {
        if n == name {
            return at;
        }
        at += w;
    }
    usize::MAX
}

/// Values per instance in the carry.
pub fn carry_width() -> usize {
    EVENT_CARRY.iter().map(|(_, w)| w).sum()
}

/// The kernel's constants for a contact whose rows `(x, y, z)` are the template's rows `rows`.
pub fn event_constants(rows: [usize; 3]) -> String {
    let mut w = String::new();
    for (name, _) in EVENT_CARRY {
        w.push_str(&format!(
            "const EVENT_{name}: u32 = {}u;\n",
            carry_offset(name)
        ));
    }
    w.push_str(&format!("const EVENT_COLUMNS: u32 = {}u;\n", carry_width()));
    for (name, value) in PHASES {
        w.push_str(&format!("const EVENT_PHASE_{name}: u32 = {value}u;\n"));
    }
    for (axis, row) in ["X", "Y", "Z"].iter().zip(rows) {
        w.push_str(&format!("const CONTACT_ROW_{axis}: u32 = {row}u;\n"));
    }
    w.push_str(&format!("const MAX_BISECTIONS: u32 = {MAX_BISECTIONS}u;\n"));
    w.push_str(&format!(
        "const MIN_STEP_FRACTION: real = {MIN_STEP_FRACTION:e};\n"
    ));
    w.push_str(&format!(
        "const STABLE_STEP_FACTOR: real = {STABLE_STEP_FACTOR:e};\n"
    ));
    w
}

/// The §8 tolerances of an instance under gravity of magnitude `gravity` with a body of `mass`,
/// for `precision` (the CPU's own `Tolerances::f64` or `f32`).
pub(super) fn tolerances(
    precision: Precision,
    options: &EventOptions,
    gravity: f64,
    mass: f64,
) -> Tolerances {
    let (ctol, cap, roll) = (
        options.constraint_tolerance,
        options.capture_speed,
        options.roll_speed,
    );
    match precision {
        Precision::F64 => Tolerances::f64(ctol, gravity, mass, cap, roll),
        Precision::F32 => Tolerances::f32(ctol, gravity, mass, cap, roll),
    }
}

/// One instance's machine at a call's start into `values` ([`carry_width`] of them): a halted
/// instance stays halted, one whose contact is disabled fails (as on the CPU), the mode and
/// slip → stick readiness come from `record` (the last call's), the rest starts at zero.
pub(super) fn initial_values(
    values: &mut [f64],
    status_bits: u32,
    enabled: bool,
    time: f64,
    k: Coefficients,
    tol: &Tolerances,
    record: Option<ContactRecord>,
) {
    values.iter_mut().for_each(|v| *v = 0.0);
    let mut set = |name: &str, at: usize, x: f64| values[carry_offset(name) + at] = x;
    if status_bits & status::HALTED != 0 {
        set("STATUS", 0, status::HALTED as f64);
    } else if !enabled {
        set("STATUS", 0, status::STEP_FAILED as f64);
    }
    set("START", 0, time);
    let (code, direction) = record.map_or(ContactMode::Open, |r| r.mode).code();
    set("MODE", 0, f64::from(code));
    set("DIRECTION", 0, direction[0]);
    set("DIRECTION", 1, direction[1]);
    set(
        "ARMED",
        0,
        f64::from(u8::from(record.is_some_and(|r| r.armed))),
    );
    for (j, x) in [k.restitution, k.mu_static, k.mu_dynamic]
        .into_iter()
        .enumerate()
    {
        set("COEFFICIENTS", j, x);
    }
    let t = [
        tol.p_tol, tol.v_tol, tol.v_cap, tol.v_roll, tol.f_tol, tol.a_tol, tol.t_tol,
    ];
    for (j, x) in t.into_iter().enumerate() {
        set("TOLERANCES", j, x);
    }
}

/// The run a finished machine records (`carry(name, k)`: value `k` of its carry column
/// `name`).
pub(super) fn run_of(carry: &impl Fn(&str, usize) -> f64) -> GpuEventRun {
    let records = carry("RECORDS", 0) as u32;
    let direction = [carry("DIRECTION", 0), carry("DIRECTION", 1)];
    let mode = ContactMode::from_code(carry("MODE", 0) as u32, direction);
    GpuEventRun {
        contact: ContactRecord {
            mode,
            impacts: carry("IMPACTS", 0) as u32,
            first_impact: (records & 1 != 0).then(|| carry("FIRST_IMPACT", 0)),
            last_mode_change: (records & 2 != 0).then(|| carry("LAST_MODE_CHANGE", 0)),
            impact_loss: carry("IMPACT_LOSS", 0),
            friction_loss: carry("FRICTION_LOSS", 0),
            armed: carry("ARMED", 0) != 0.0,
        },
        events: carry("EVENTS", 0) as usize,
        steps: carry("STEPS", 0) as usize,
        penetration: carry("PENETRATION", 0),
        violated: carry("STATUS", 0) as u32 & status::CONSTRAINT_VIOLATED != 0,
    }
}
