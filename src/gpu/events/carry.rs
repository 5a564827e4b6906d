//! The event kernel's carry: each instance's machine, column after column (the layout the
//! kernel's `EVENT_*` constants come from), written at a call's start and read at its end.

use super::GpuEventRuns;
use crate::batch::status;
use crate::contact::{
    Coefficients, ContactMode, ContactRecord, EventOptions, MAX_BISECTIONS, MIN_STEP_FRACTION,
    STABLE_STEP_FACTOR, Tolerances,
};
use crate::gpu::Precision;
use crate::step::{INITIAL_ADAPTIVE_STEP, MAX_ADAPTIVE_ATTEMPTS, MIN_STEP};

/// The carry columns of one instance's machine with one contact, in order, with their widths
/// (the one-contact kernel's `EVENT_*` offsets; [`CarryLayout`] gives them for any count).
pub const EVENT_CARRY: [(&str, usize); 25] = [
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
    ("PROPOSED", 1),
    ("ATTEMPTS", 1),
    ("COEFFICIENTS", 3),
    ("TOLERANCES", 7),
    ("PENETRATION", 1),
    ("LOOPS", 1),
];

/// The columns of [`EVENT_CARRY`] that hold values per contact (their width is per contact).
const PER_CONTACT: [&str; 10] = [
    "MODE",
    "DIRECTION",
    "ARMED",
    "FRICTION_LOSS",
    "IMPACTS",
    "FIRST_IMPACT",
    "LAST_MODE_CHANGE",
    "RECORDS",
    "IMPACT_LOSS",
    "COEFFICIENTS",
];

/// The carry of an instance with `contacts` contacts: [`EVENT_CARRY`]'s columns, those per
/// contact [`contacts`](Self::contacts) times as wide (contact `k`'s value at `+k`; a column of
/// width `w` per contact holds its `j`-th part at `+j · contacts + k`, except DIRECTION, whose
/// two components are at `+2k`, `+2k + 1`). With one contact it is [`EVENT_CARRY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarryLayout {
    contacts: usize,
    columns: Vec<(&'static str, usize)>,
}

impl CarryLayout {
    /// The layout for `contacts` contacts.
    pub fn new(contacts: usize) -> Self {
        let columns = EVENT_CARRY
            .iter()
            .map(|&(name, w)| {
                let per = PER_CONTACT.contains(&name);
                (name, if per { w * contacts } else { w })
            })
            .collect();
        Self { contacts, columns }
    }

    /// Contacts per instance.
    pub fn contacts(&self) -> usize {
        self.contacts
    }

    /// Where column `name` starts (`usize::MAX` for a name not in the layout).
    pub fn offset(&self, name: &str) -> usize {
        let mut at = 0;
        for (n, w) in &self.columns {
            if *n == name {
                return at;
            }
            at += w;
        }
        usize::MAX
    }

    /// Values per instance.
    pub fn width(&self) -> usize {
        self.columns.iter().map(|(_, w)| w).sum()
    }

    /// The kernel's carry offsets, phases and event constants.
    fn constants(&self, loop_budget: u32) -> String {
        let mut w = String::new();
        for (name, _) in &self.columns {
            w.push_str(&format!(
                "const EVENT_{name}: u32 = {}u;\n",
                self.offset(name)
            ));
        }
        w.push_str(&format!("const EVENT_COLUMNS: u32 = {}u;\n", self.width()));
        for (name, value) in PHASES {
            w.push_str(&format!("const EVENT_PHASE_{name}: u32 = {value}u;\n"));
        }
        w.push_str(&format!("const MAX_BISECTIONS: u32 = {MAX_BISECTIONS}u;\n"));
        w.push_str(&format!("const EVENT_WITHHELD: u32 = {EVENT_WITHHELD}u;\n"));
        w.push_str(&format!("const LOOP_BUDGET: u32 = {loop_budget}u;\n"));
        w.push_str(&format!(
            "const MIN_STEP_FRACTION: real = {MIN_STEP_FRACTION:e};\n"
        ));
        w.push_str(&format!(
            "const STABLE_STEP_FACTOR: real = {STABLE_STEP_FACTOR:e};\n"
        ));
        w.push_str(&format!("const EVENT_MIN_STEP: real = {MIN_STEP:e};\n"));
        w.push_str(&format!(
            "const MAX_ADAPTIVE_ATTEMPTS: u32 = {}u;\n",
            u32::try_from(MAX_ADAPTIVE_ATTEMPTS).unwrap_or(u32::MAX)
        ));
        w
    }
}

/// Machine phases: settle at the start, step, bisect a bracket, done, settle at an event (the
/// several-contact kernel; the one-contact kernel settles in the trial that closes the bracket),
/// and settle at the start of a call that resumes from the records of the call before (an open
/// contact is near its plane only once it has reached it: the CPU's `Settling::Resume`).
pub(super) const PHASES: [(&str, u32); 6] = [
    ("START", 0),
    ("STEP", 1),
    ("BISECT", 2),
    ("DONE", 3),
    ("SETTLE", 4),
    ("RESUME", 5),
];

/// The value of phase `name`, one of [`PHASES`]' names (`u32::MAX`, no phase, for another).
pub(super) fn phase(name: &str) -> u32 {
    PHASES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(u32::MAX, |(_, v)| *v)
}

/// The carry status bit of an instance the kernel stopped because a dispatch of it passed the
/// loop budget (a software adapter's, `SOFTWARE_LOOP_BUDGET`): the host runs it on the CPU.
/// Above every `batch::status` bit.
pub const EVENT_WITHHELD: u32 = 1 << 10;

/// Values per instance in the one-contact carry.
pub fn carry_width() -> usize {
    CarryLayout::new(1).width()
}

/// The one-contact kernel's constants for a contact whose rows `(x, y, z)` are the template's
/// rows `rows`.
pub fn event_constants(rows: [usize; 3]) -> String {
    let mut w = CarryLayout::new(1).constants(u32::MAX);
    for (axis, row) in ["X", "Y", "Z"].iter().zip(rows) {
        w.push_str(&format!("const CONTACT_ROW_{axis}: u32 = {row}u;\n"));
    }
    w
}

/// The several-contact kernel's constants: the carry for `contacts` contacts, the template row
/// of each row of the contact space in canonical order (`space_rows`), the loop bound of one
/// assembly and derivative, and the loop budget.
pub fn general_event_constants(
    contacts: usize,
    space_rows: &[usize],
    assembly_loops: u32,
    loop_budget: u32,
) -> String {
    let mut w = CarryLayout::new(contacts).constants(loop_budget);
    let rows: Vec<String> = space_rows.iter().map(|r| format!("{r}u")).collect();
    w.push_str(&format!(
        "const SPACE_ROWS = array<u32, {}>({});\n",
        space_rows.len(),
        rows.join(", ")
    ));
    w.push_str(&format!("const ASSEMBLY_LOOPS: u32 = {assembly_loops}u;\n"));
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

/// One instance's machine at a call's start into `values` (`carry.width()` of them): a halted
/// instance stays halted, one with a disabled contact fails (as on the CPU), each contact's mode
/// and slip → stick readiness come from `records` (the last call's; `None`: afresh, in phase
/// `START`; given: phase `RESUME`), error control's first step is the scenario's `step` or
/// `INITIAL_ADAPTIVE_STEP`, the shorter (as the CPU's `simulate` starts each call), the rest
/// starts at zero.
#[allow(clippy::too_many_arguments)]
pub(super) fn initial_values(
    carry: &CarryLayout,
    values: &mut [f64],
    status_bits: u32,
    enabled: bool,
    time: f64,
    step: f64,
    coefficients: &[Coefficients],
    tol: &Tolerances,
    records: Option<&[ContactRecord]>,
) {
    values.iter_mut().for_each(|v| *v = 0.0);
    let n = carry.contacts();
    let mut set = |name: &str, at: usize, x: f64| values[carry.offset(name) + at] = x;
    if status_bits & status::HALTED != 0 {
        set("STATUS", 0, status::HALTED as f64);
    } else if !enabled {
        set("STATUS", 0, status::STEP_FAILED as f64);
    }
    set("START", 0, time);
    set("PROPOSED", 0, step.min(INITIAL_ADAPTIVE_STEP));
    let resumes = records.is_some();
    set(
        "PHASE",
        0,
        f64::from(phase(if resumes { "RESUME" } else { "START" })),
    );
    for (c, k) in coefficients.iter().enumerate().take(n) {
        let record = records.and_then(|r| r.get(c));
        let (code, direction) = record.map_or(ContactMode::Open, |r| r.mode).code();
        set("MODE", c, f64::from(code));
        set("DIRECTION", 2 * c, direction[0]);
        set("DIRECTION", 2 * c + 1, direction[1]);
        set(
            "ARMED",
            c,
            f64::from(u8::from(record.is_some_and(|r| r.armed))),
        );
        for (j, x) in [k.restitution, k.mu_static, k.mu_dynamic]
            .into_iter()
            .enumerate()
        {
            set("COEFFICIENTS", j * n + c, x);
        }
    }
    let t = [
        tol.p_tol, tol.v_tol, tol.v_cap, tol.v_roll, tol.f_tol, tol.a_tol, tol.t_tol,
    ];
    for (j, x) in t.into_iter().enumerate() {
        set("TOLERANCES", j, x);
    }
}

/// The run a finished machine records (`value(name, k)`: value `k` of its carry column `name`).
pub(super) fn run_of(carry: &CarryLayout, value: &impl Fn(&str, usize) -> f64) -> GpuEventRuns {
    let contacts = (0..carry.contacts())
        .map(|c| {
            let records = value("RECORDS", c) as u32;
            let direction = [value("DIRECTION", 2 * c), value("DIRECTION", 2 * c + 1)];
            ContactRecord {
                mode: ContactMode::from_code(value("MODE", c) as u32, direction),
                impacts: value("IMPACTS", c) as u32,
                first_impact: (records & 1 != 0).then(|| value("FIRST_IMPACT", c)),
                last_mode_change: (records & 2 != 0).then(|| value("LAST_MODE_CHANGE", c)),
                impact_loss: value("IMPACT_LOSS", c),
                friction_loss: value("FRICTION_LOSS", c),
                armed: value("ARMED", c) != 0.0,
            }
        })
        .collect();
    GpuEventRuns {
        contacts,
        events: value("EVENTS", 0) as usize,
        steps: value("STEPS", 0) as usize,
        penetration: value("PENETRATION", 0),
        violated: value("STATUS", 0) as u32 & status::CONSTRAINT_VIOLATED != 0,
        most_loop_iterations: value("LOOPS", 0) as u64,
    }
}
