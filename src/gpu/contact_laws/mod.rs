//! The laws of unilateral contact (`unilateral.md` §3, §4) on the GPU, for instances with one
//! contact: the mode determination and the impact law of `shaders/contact_laws.wgsl`, run over a
//! batch of cases by `shaders/contact_laws_batch.wgsl`.
//!
//! This is the first stage of the GPU twin of the event-driven path (`docs/gpu-unilateral.md`):
//! the laws an event settles with, written as the CPU's (`cpu::unilateral`'s `solve_modes` and
//! `impact`) with the same names in the same order, for the contact space of one contact — `W`
//! 3×3 and positive definite, as it is for one free body touching one plane. Every loop is
//! bounded as on the CPU (pruning rounds, direction iterations, the energy guard's bisection).
//! The stepping kernel that locates events will call the same functions; until it exists,
//! [`solve_contact_laws`] runs them on cases given by the host, which is how
//! `tests/gpu/contact_laws.rs` holds them to the CPU's answers.
//!
//! Case and answer offsets come from one description here ([`CASE_FIELDS`],
//! [`ANSWER_FIELDS`]), emitted as the kernel's constants.

use crate::contact::{Coefficients, ContactMode, ImpactLaw, Tolerances};
use crate::error::Result;
use crate::gpu::Precision;
use crate::gpu::device::GpuDevice;
use crate::gpu::shader::{KernelSource, launch_constants};
use run::run_cases;

pub mod general;
mod run;

/// `shaders/contact_laws.wgsl`.
pub const CONTACT_LAWS: &str = include_str!("../../../shaders/contact_laws.wgsl");
/// `shaders/contact_common.wgsl`: what the one-contact and the several-contact laws share
/// (codes, constants, tolerances, small helpers); every laws kernel has it before its laws.
pub const CONTACT_COMMON: &str = include_str!("../../../shaders/contact_common.wgsl");
/// `shaders/contact_laws_batch.wgsl`.
pub const CONTACT_LAWS_BATCH: &str = include_str!("../../../shaders/contact_laws_batch.wgsl");

/// A case's values in the kernel's input, in order, with their widths.
pub const CASE_FIELDS: [(&str, usize); 11] = [
    ("DELASSUS", 9),
    ("ROWS", 3),
    ("TOLERANCES", 6),
    ("COEFFICIENTS", 3),
    ("KIND", 1),
    ("ON", 1),
    ("MODE", 1),
    ("DIRECTION", 2),
    ("SLIP", 2),
    ("ENERGY", 1),
    ("PAD", 1),
];

/// An answer's values in the kernel's output, in order, with their widths.
pub const ANSWER_FIELDS: [(&str, usize); 9] = [
    ("VALUES", 3),
    ("ROWS", 3),
    ("MODE", 1),
    ("DIRECTION", 2),
    ("ENERGY_CHANGE", 1),
    ("LOSS", 1),
    ("RESTITUTION", 1),
    ("FRICTION", 1),
    ("FLAGS", 1),
];

/// Case kinds, shared with both laws kernels (the one-contact and the several-contact one).
pub(super) const KINDS: [(&str, u32); 3] =
    [("KIND_MODES", 0), ("KIND_POISSON", 1), ("KIND_NEWTON", 2)];

/// The case kind of a mode determination, as the host writes it.
pub(super) fn modes_kind() -> f64 {
    f64::from(KINDS[0].1)
}

/// The case kind of an impact under `law`, as the host writes it.
pub(super) fn impact_kind(law: ImpactLaw) -> f64 {
    f64::from(match law {
        ImpactLaw::Poisson => KINDS[1].1,
        ImpactLaw::Newton => KINDS[2].1,
    })
}

/// Answer flags, shared with the kernel.
const CODES: [(&str, u32); 7] = [
    ("FLAG_PAINLEVE", 1),
    ("FLAG_MODE_CYCLE", 2),
    ("FLAG_CLOSED", 1),
    ("FLAG_JAMMED", 2),
    ("FLAG_CLAMPED", 4),
    ("FLAG_UNCONVERGED", 8),
    ("FLAG_EXHAUSTED", 16),
];

/// Each field's offset in a record of `fields` (names and widths, in order), and the length.
pub(super) fn offsets(fields: &[(&str, usize)]) -> (Vec<(String, usize)>, usize) {
    let mut at = 0;
    let mut out = Vec::new();
    for (name, width) in fields {
        out.push((name.to_string(), at));
        at += width;
    }
    (out, at)
}

/// The offset of field `name` in a record of `fields`.
pub(super) fn offset(fields: &[(&str, usize)], name: &str) -> usize {
    offsets(fields)
        .0
        .into_iter()
        .find(|(n, _)| n == name)
        .map_or(usize::MAX, |(_, at)| at)
}

/// The value of code `name` in [`CODES`].
fn code(name: &str) -> u32 {
    CODES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| *v)
}

/// The kernel's constants: every offset, both lengths, the codes.
pub fn layout_constants() -> String {
    let mut w = String::new();
    for (prefix, fields) in [("CASE", &CASE_FIELDS[..]), ("ANSWER", &ANSWER_FIELDS[..])] {
        let (named, len) = offsets(fields);
        for (name, at) in named {
            w.push_str(&format!("const {prefix}_{name}: u32 = {at}u;\n"));
        }
        w.push_str(&format!("const {prefix}_LEN: u32 = {len}u;\n"));
    }
    for (name, value) in KINDS.iter().chain(&CODES) {
        w.push_str(&format!("const {name}: u32 = {value}u;\n"));
    }
    w
}

/// The batch kernel's source in `precision` for `workgroup_size` invocations per workgroup.
pub fn kernel_source(precision: Precision, workgroup_size: u32) -> KernelSource {
    KernelSource::from_pieces(
        precision,
        &[
            ("the contact laws' layout constants", &layout_constants()),
            ("the launch constants", &launch_constants(workgroup_size)),
            ("contact_common.wgsl", CONTACT_COMMON),
            ("contact_laws.wgsl", CONTACT_LAWS),
            ("contact_laws_batch.wgsl", CONTACT_LAWS_BATCH),
        ],
    )
}

/// What a case asks of the laws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LawQuery {
    /// The contact's mode and multipliers (`solve_modes`) at free row accelerations `free`
    /// (`G u̇₀ − b`).
    Modes {
        /// Free row accelerations `(x, y, z)`.
        free: [f64; 3],
        /// The mode before.
        mode: ContactMode,
        /// Whether the contact touches its plane.
        touching: bool,
        /// Its slip velocity in the plane axes.
        slip: [f64; 2],
    },
    /// An impact (`impact`) at row velocities `velocity`.
    Impact {
        /// Row velocities before, `v⁻`.
        velocity: [f64; 3],
        /// The energy scale of the guard.
        energy: f64,
        /// Whether the contact takes part.
        participates: bool,
        /// Poisson or Newton.
        law: ImpactLaw,
    },
}

/// One contact's situation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LawCase {
    /// `W = G M⁻¹ Gᵀ` over the rows `(x, y, z)`, symmetric positive definite.
    pub delassus: [[f64; 3]; 3],
    /// Its coefficients.
    pub coefficients: Coefficients,
    /// The instance's tolerances (`t_tol` is not used).
    pub tolerances: Tolerances,
    /// The question.
    pub query: LawQuery,
}

/// The mode determination's answer (the one-contact `ModeSolution`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeAnswer {
    /// `λ` per row.
    pub multipliers: [f64; 3],
    /// `a₀ − W λ`.
    pub acceleration: [f64; 3],
    /// The consistent mode.
    pub mode: ContactMode,
    /// The sliding normal solve was ill-posed (§3.3).
    pub painleve: bool,
    /// The rounds ran out.
    pub mode_cycle: bool,
}

/// The impact law's answer (the one-contact `ImpactOutcome`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImpactAnswer {
    /// Total impulse `π` per row.
    pub impulse: [f64; 3],
    /// Row velocities after, `v⁻ − W π`.
    pub velocity: [f64; 3],
    /// `T⁺ − T⁻`.
    pub energy_change: f64,
    /// Energy the contact took.
    pub loss: f64,
    /// It ends closed.
    pub closed: bool,
    /// Restitution used (0 when captured).
    pub restitution: f64,
    /// Friction coefficient used.
    pub friction: f64,
    /// It jammed (impulsive Painlevé).
    pub jammed: bool,
    /// The energy guard acted.
    pub energy_clamped: bool,
    /// A sliding direction did not settle.
    pub direction_unconverged: bool,
    /// A phase's rounds ran out.
    pub rounds_exhausted: bool,
}

/// The answer to one [`LawCase`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LawAnswer {
    /// To [`LawQuery::Modes`].
    Modes(ModeAnswer),
    /// To [`LawQuery::Impact`].
    Impact(ImpactAnswer),
}

/// The case's values in [`CASE_FIELDS`] order.
fn case_values(c: &LawCase) -> Vec<f64> {
    let mut v: Vec<f64> = c.delassus.iter().flatten().copied().collect();
    let (rows, kind, on, mode, direction, slip, energy) = match c.query {
        LawQuery::Modes {
            free,
            mode,
            touching,
            slip,
        } => {
            let (code, direction) = mode.code();
            (
                free,
                modes_kind(),
                touching,
                f64::from(code),
                direction,
                slip,
                0.0,
            )
        }
        LawQuery::Impact {
            velocity,
            energy,
            participates,
            law,
        } => (
            velocity,
            impact_kind(law),
            participates,
            0.0,
            [1.0, 0.0],
            [0.0; 2],
            energy,
        ),
    };
    let t = &c.tolerances;
    let k = &c.coefficients;
    v.extend(rows);
    v.extend([t.p_tol, t.v_tol, t.v_cap, t.v_roll, t.f_tol, t.a_tol]);
    v.extend([k.restitution, k.mu_static, k.mu_dynamic]);
    v.extend([kind, if on { 1.0 } else { 0.0 }, mode]);
    v.extend(direction);
    v.extend(slip);
    v.extend([energy, 0.0]);
    v
}

/// The answer to `c` from its values `a` ([`ANSWER_FIELDS`] order).
fn answer_of(c: &LawCase, a: &[f64]) -> LawAnswer {
    let at = |name: &str| offset(&ANSWER_FIELDS, name);
    let three = |name: &str| {
        let k = at(name);
        [a[k], a[k + 1], a[k + 2]]
    };
    let flags = a[at("FLAGS")] as u32;
    let set = |name: &str| flags & code(name) != 0;
    match c.query {
        LawQuery::Modes { .. } => {
            let d = at("DIRECTION");
            let mode = ContactMode::from_code(a[at("MODE")] as u32, [a[d], a[d + 1]]);
            LawAnswer::Modes(ModeAnswer {
                multipliers: three("VALUES"),
                acceleration: three("ROWS"),
                mode,
                painleve: set("FLAG_PAINLEVE"),
                mode_cycle: set("FLAG_MODE_CYCLE"),
            })
        }
        LawQuery::Impact { .. } => LawAnswer::Impact(ImpactAnswer {
            impulse: three("VALUES"),
            velocity: three("ROWS"),
            energy_change: a[at("ENERGY_CHANGE")],
            loss: a[at("LOSS")],
            closed: set("FLAG_CLOSED"),
            restitution: a[at("RESTITUTION")],
            friction: a[at("FRICTION")],
            jammed: set("FLAG_JAMMED"),
            energy_clamped: set("FLAG_CLAMPED"),
            direction_unconverged: set("FLAG_UNCONVERGED"),
            rounds_exhausted: set("FLAG_EXHAUSTED"),
        }),
    }
}

/// Runs the one-contact laws on `cases` in `precision` on `device`, in chunks within the
/// adapter's binding and dispatch limits; answers in case order. F64 needs an adapter with
/// `SHADER_F64`.
pub fn solve_contact_laws(
    device: &GpuDevice,
    precision: Precision,
    cases: &[LawCase],
) -> Result<Vec<LawAnswer>> {
    let (_, case_len) = offsets(&CASE_FIELDS);
    let (_, answer_len) = offsets(&ANSWER_FIELDS);
    let source = kernel_source(precision, device.default_workgroup_size());
    let values = run_cases(
        device,
        precision,
        &source,
        ("contact_laws_main", device.default_workgroup_size()),
        (case_len, answer_len),
        cases.len(),
        |k| case_values(&cases[k]),
    )?;
    Ok(cases
        .iter()
        .zip(values.chunks_exact(answer_len))
        .map(|(c, a)| answer_of(c, a))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_validates_in_both_precisions() {
        for precision in [Precision::F32, Precision::F64] {
            if let Err(e) = kernel_source(precision, 64).check() {
                panic!("{precision:?}: {e}");
            }
        }
    }
}
