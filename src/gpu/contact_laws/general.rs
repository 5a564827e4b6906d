//! The laws of unilateral contact on the GPU for instances with several contacts and bilateral
//! rows (stage 2 of `docs/gpu-unilateral.md`): the mode determination and the impact law of
//! `shaders/contact_laws_general.wgsl` and `shaders/contact_phases_general.wgsl`, run over a
//! batch of cases by `shaders/contact_laws_general_batch.wgsl`.
//!
//! A brick on four corners, two balls on one plane or a ball beside a rail: `W` is up to
//! 3k + b rows square, singular where contacts are redundant (four coplanar corners), and the
//! sliding law makes the reduced system non-symmetric. The kernel solves every reduced system
//! by the complete orthogonal decomposition, as the CPU does its non-symmetric ones (`cod.rs`;
//! the CPU's symmetric route is a certified Cholesky or a Jacobi eigen-decomposition, which give
//! the same minimum-norm answer), prunes ties together, and settles several sliding directions
//! by Broyden steps over their angles — the CPU's `solve_modes`, `phase` and `impact` with the
//! same names in the same order. The kernel is generated per shape (contacts, bilateral rows):
//! the sizes are constants, every loop bounded by them or by the CPU's round counts.
//!
//! The contact space is in canonical order: contact `k`'s rows `(x, y, z)` are `3k, 3k + 1,
//! 3k + 2`, the bilateral rows follow. [`solve_general_contact_laws`] runs the laws on cases the
//! host gives, which is how `tests/gpu/contact_laws.rs` holds them to the CPU's answers.

use super::run::run_cases;
use super::{KINDS, impact_kind, modes_kind, offset, offsets};
use crate::contact::{Coefficients, ContactMode, ImpactLaw, Tolerances};
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::device::GpuDevice;
use crate::gpu::shader::{KernelSource, launch_constants};

/// `shaders/contact_laws_general.wgsl`.
pub const CONTACT_LAWS_GENERAL: &str = include_str!("../../../shaders/contact_laws_general.wgsl");
/// `shaders/contact_phases_general.wgsl`.
pub const CONTACT_PHASES_GENERAL: &str =
    include_str!("../../../shaders/contact_phases_general.wgsl");
/// `shaders/contact_impact_general.wgsl`.
pub const CONTACT_IMPACT_GENERAL: &str =
    include_str!("../../../shaders/contact_impact_general.wgsl");
/// `shaders/contact_laws_general_batch.wgsl`.
pub const CONTACT_LAWS_GENERAL_BATCH: &str =
    include_str!("../../../shaders/contact_laws_general_batch.wgsl");

/// Most contacts an instance may have on this path (the masks are 32-bit; the reduced systems
/// grow as (3k)², so a thread's arrays stay small).
pub const MAX_CONTACTS: usize = 8;
/// Most bilateral rows beside them.
pub const MAX_BILATERAL: usize = 12;

/// The shape of a contact space: its contacts and bilateral rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceShape {
    /// Unilateral contacts (three rows each).
    pub contacts: usize,
    /// Bilateral rows after them.
    pub bilateral: usize,
}

impl SpaceShape {
    /// The shape, or a typed error naming the field outside its range.
    pub fn new(contacts: usize, bilateral: usize) -> Result<Self> {
        if !(1..=MAX_CONTACTS).contains(&contacts) {
            return Err(Error::InvalidOption {
                option: "contacts",
                value: contacts.to_string(),
                accepted: format!("1 to {MAX_CONTACTS} contacts per instance"),
            });
        }
        if bilateral > MAX_BILATERAL {
            return Err(Error::InvalidOption {
                option: "bilateral",
                value: bilateral.to_string(),
                accepted: format!("0 to {MAX_BILATERAL} bilateral rows per instance"),
            });
        }
        Ok(Self {
            contacts,
            bilateral,
        })
    }

    /// Rows of the contact space.
    pub fn rows(&self) -> usize {
        3 * self.contacts + self.bilateral
    }

    /// The case's fields in order, with their widths.
    fn case_fields(&self) -> Vec<(&'static str, usize)> {
        let (k, r) = (self.contacts, self.rows());
        vec![
            ("DELASSUS", r * r),
            ("ROWS", r),
            ("TOLERANCES", 6),
            ("RESTITUTION", k),
            ("MU_STATIC", k),
            ("MU_DYNAMIC", k),
            ("KIND", 1),
            ("ON", 1),
            ("MODE", k),
            ("DIRECTION", 2 * k),
            ("SLIP", 2 * k),
            ("ENERGY", 1),
        ]
    }

    /// The answer's fields in order, with their widths.
    fn answer_fields(&self) -> Vec<(&'static str, usize)> {
        let (k, r) = (self.contacts, self.rows());
        vec![
            ("VALUES", r),
            ("ROWS", r),
            ("MODE", k),
            ("DIRECTION", 2 * k),
            ("LOSS", k),
            ("RESTITUTION", k),
            ("FRICTION", k),
            ("MASKS", 3),
            ("ENERGY_CHANGE", 1),
            ("FLAGS", 1),
        ]
    }

    /// The kernel's constants: the sizes, every offset, both lengths, the codes.
    pub fn constants(&self) -> String {
        let (k, r) = (self.contacts, self.rows());
        let mut w = format!(
            "const LAW_CONTACTS: u32 = {k}u;\nconst LAW_CONTACTS_SQ: u32 = {}u;\n\
             const LAW_BILATERAL: u32 = {}u;\nconst LAW_ROWS: u32 = {r}u;\n\
             const LAW_ROWS_SQ: u32 = {}u;\n",
            k * k,
            self.bilateral,
            r * r
        );
        for (prefix, fields) in [
            ("CASE", self.case_fields()),
            ("ANSWER", self.answer_fields()),
        ] {
            let (named, len) = offsets(&fields);
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
}

/// Answer flags, shared with the kernel (the case kinds are the one-contact kernel's,
/// [`super::KINDS`]).
const CODES: [(&str, u32); 5] = [
    ("FLAG_MODE_CYCLE", 1),
    ("FLAG_CLAMPED", 1),
    ("FLAG_UNCONVERGED", 2),
    ("FLAG_EXHAUSTED", 4),
    ("FLAG_BUDGET", 8),
];

/// Loop iterations a case may take on a software adapter before its answer is withheld.
///
/// Lavapipe's JIT (gallivm) ends every loop of a shader invocation once its invocations have
/// run `LP_MAX_TGSI_LOOP_ITERATIONS` = 65 535 loop iterations in all, silently. The laws'
/// heavier cases (an impact's guard runs, Broyden steps and rounds) pass that, so on such an
/// adapter each case runs in a workgroup of its own (no neighbour adds to its count), the
/// kernel counts every loop iteration it runs — loops the compiler unrolls, which the limiter
/// does not count, included, so its count is never below the limiter's — and a case whose
/// count passes this budget is answered `None`: its answer may have been cut short. The loop
/// of f64's `atan2_real` is counted at its call sites (`counted_atan2`); the margin below
/// 65 535 is a margin only.
pub const SOFTWARE_LOOP_BUDGET: u32 = 60_000;

/// The several-contact kernel's source for `shape` in `precision`.
pub fn general_kernel_source(
    precision: Precision,
    shape: SpaceShape,
    workgroup_size: u32,
    loop_budget: u32,
) -> KernelSource {
    let launch = format!(
        "{}const LOOP_BUDGET: u32 = {loop_budget}u;\n",
        launch_constants(workgroup_size)
    );
    KernelSource::from_pieces(
        precision,
        &[
            ("the contact space's constants", &shape.constants()),
            ("the launch constants", &launch),
            ("contact_common.wgsl", super::CONTACT_COMMON),
            ("contact_laws_general.wgsl", CONTACT_LAWS_GENERAL),
            ("contact_phases_general.wgsl", CONTACT_PHASES_GENERAL),
            ("contact_impact_general.wgsl", CONTACT_IMPACT_GENERAL),
            (
                "contact_laws_general_batch.wgsl",
                CONTACT_LAWS_GENERAL_BATCH,
            ),
        ],
    )
}

/// What a case asks of the laws.
#[derive(Debug, Clone, PartialEq)]
pub enum GeneralLawQuery {
    /// The modes and multipliers (`solve_modes`) at free row accelerations `free`.
    Modes {
        /// Free row accelerations `G u̇₀ − b`, one per row.
        free: Vec<f64>,
        /// Each contact's mode before.
        modes: Vec<ContactMode>,
        /// Whether each contact touches its plane.
        touching: Vec<bool>,
        /// Each contact's slip velocity in its plane axes.
        slips: Vec<[f64; 2]>,
    },
    /// An impact (`impact`) at row velocities `velocity`.
    Impact {
        /// Row velocities before, `v⁻`, one per row.
        velocity: Vec<f64>,
        /// The energy scale of the guard.
        energy: f64,
        /// Whether each contact takes part.
        participates: Vec<bool>,
        /// Poisson or Newton.
        law: ImpactLaw,
    },
}

/// One instance's contact space and question.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneralLawCase {
    /// `W = G M⁻¹ Gᵀ` over the rows in canonical order, row-major (rows × rows values).
    pub delassus: Vec<f64>,
    /// Each contact's coefficients.
    pub coefficients: Vec<Coefficients>,
    /// The instance's tolerances (`t_tol` is not used).
    pub tolerances: Tolerances,
    /// The question.
    pub query: GeneralLawQuery,
}

/// The mode determination's answer (`ModeSolution`).
#[derive(Debug, Clone, PartialEq)]
pub struct GeneralModeAnswer {
    /// `λ` per row.
    pub multipliers: Vec<f64>,
    /// `a₀ − W λ` per row.
    pub acceleration: Vec<f64>,
    /// Each contact's consistent mode.
    pub modes: Vec<ContactMode>,
    /// Contacts whose sliding normal solve was ill-posed (§3.3).
    pub painleve: Vec<bool>,
    /// The rounds ran out.
    pub mode_cycle: bool,
}

/// The impact law's answer (`ImpactOutcome`).
#[derive(Debug, Clone, PartialEq)]
pub struct GeneralImpactAnswer {
    /// Total impulse `π` per row.
    pub impulse: Vec<f64>,
    /// Row velocities after, `v⁻ − W π`.
    pub velocity: Vec<f64>,
    /// `T⁺ − T⁻`.
    pub energy_change: f64,
    /// Energy each contact took.
    pub losses: Vec<f64>,
    /// Whether each contact ends closed.
    pub closed: Vec<bool>,
    /// Restitution each contact used (0 where captured).
    pub restitution: Vec<f64>,
    /// Friction coefficient each contact used.
    pub friction: Vec<f64>,
    /// Contacts that jammed (impulsive Painlevé).
    pub jammed: Vec<bool>,
    /// The energy guard acted.
    pub energy_clamped: bool,
    /// A sliding direction did not settle.
    pub direction_unconverged: bool,
    /// A phase's rounds ran out.
    pub rounds_exhausted: bool,
}

/// The answer to one [`GeneralLawCase`].
#[derive(Debug, Clone, PartialEq)]
pub enum GeneralLawAnswer {
    /// To [`GeneralLawQuery::Modes`].
    Modes(GeneralModeAnswer),
    /// To [`GeneralLawQuery::Impact`].
    Impact(GeneralImpactAnswer),
}

/// A typed error for a case value of the wrong length.
fn check_len(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::Dimension {
            what,
            got,
            expected,
        })
    }
}

/// Checks that `c` has `shape`'s sizes.
fn check_case(shape: SpaceShape, c: &GeneralLawCase) -> Result<()> {
    let (k, r) = (shape.contacts, shape.rows());
    check_len("law case delassus", c.delassus.len(), r * r)?;
    check_len("law case coefficients", c.coefficients.len(), k)?;
    match &c.query {
        GeneralLawQuery::Modes {
            free,
            modes,
            touching,
            slips,
        } => {
            check_len("law case free accelerations", free.len(), r)?;
            check_len("law case modes", modes.len(), k)?;
            check_len("law case touching", touching.len(), k)?;
            check_len("law case slips", slips.len(), k)
        }
        GeneralLawQuery::Impact {
            velocity,
            participates,
            ..
        } => {
            check_len("law case velocities", velocity.len(), r)?;
            check_len("law case participants", participates.len(), k)
        }
    }
}

/// A mask of `flags` (bit k: contact k).
fn mask(flags: &[bool]) -> f64 {
    flags
        .iter()
        .enumerate()
        .fold(0u32, |m, (k, on)| if *on { m | 1 << k } else { m }) as f64
}

/// The case's values in the shape's case order.
fn case_values(c: &GeneralLawCase) -> Vec<f64> {
    let mut v = c.delassus.clone();
    let k = c.coefficients.len();
    let (rows, kind, on, modes, energy) = match &c.query {
        GeneralLawQuery::Modes {
            free,
            modes,
            touching,
            slips,
        } => (
            free,
            modes_kind(),
            mask(touching),
            Some((modes, slips)),
            0.0,
        ),
        GeneralLawQuery::Impact {
            velocity,
            energy,
            participates,
            law,
        } => (
            velocity,
            impact_kind(*law),
            mask(participates),
            None,
            *energy,
        ),
    };
    let t = &c.tolerances;
    v.extend(rows);
    v.extend([t.p_tol, t.v_tol, t.v_cap, t.v_roll, t.f_tol, t.a_tol]);
    v.extend(c.coefficients.iter().map(|x| x.restitution));
    v.extend(c.coefficients.iter().map(|x| x.mu_static));
    v.extend(c.coefficients.iter().map(|x| x.mu_dynamic));
    v.extend([kind, on]);
    match modes {
        Some((modes, slips)) => {
            let codes: Vec<(u32, [f64; 2])> = modes.iter().map(|m| m.code()).collect();
            v.extend(codes.iter().map(|(code, _)| f64::from(*code)));
            v.extend(codes.iter().flat_map(|(_, d)| *d));
            v.extend(slips.iter().flatten());
        }
        None => v.extend(std::iter::repeat_n(0.0, 5 * k)),
    }
    v.push(energy);
    v
}

/// The answer to `c` from its values `a` in the shape's answer order.
fn answer_of(shape: SpaceShape, c: &GeneralLawCase, a: &[f64]) -> GeneralLawAnswer {
    let fields = shape.answer_fields();
    let (k, r) = (shape.contacts, shape.rows());
    let at = |name: &str| offset(&fields, name);
    let take = |name: &str, n: usize| a[at(name)..at(name) + n].to_vec();
    let bits = |m: f64| {
        (0..k)
            .map(|i| (m as u32) & (1 << i) != 0)
            .collect::<Vec<_>>()
    };
    let masks = take("MASKS", 3);
    let flags = a[at("FLAGS")] as u32;
    let flag = |name: &str| {
        let bit = CODES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v);
        flags & bit != 0
    };
    match c.query {
        GeneralLawQuery::Modes { .. } => {
            let (m, d) = (at("MODE"), at("DIRECTION"));
            let modes = (0..k)
                .map(|i| ContactMode::from_code(a[m + i] as u32, [a[d + 2 * i], a[d + 2 * i + 1]]))
                .collect();
            GeneralLawAnswer::Modes(GeneralModeAnswer {
                multipliers: take("VALUES", r),
                acceleration: take("ROWS", r),
                modes,
                painleve: bits(masks[0]),
                mode_cycle: flag("FLAG_MODE_CYCLE"),
            })
        }
        GeneralLawQuery::Impact { .. } => GeneralLawAnswer::Impact(GeneralImpactAnswer {
            impulse: take("VALUES", r),
            velocity: take("ROWS", r),
            energy_change: a[at("ENERGY_CHANGE")],
            losses: take("LOSS", k),
            closed: bits(masks[1]),
            restitution: take("RESTITUTION", k),
            friction: take("FRICTION", k),
            jammed: bits(masks[2]),
            energy_clamped: flag("FLAG_CLAMPED"),
            direction_unconverged: flag("FLAG_UNCONVERGED"),
            rounds_exhausted: flag("FLAG_EXHAUSTED"),
        }),
    }
}

/// Runs the several-contact laws on `cases`, every one of `shape`, in `precision` on `device`,
/// in chunks within the adapter's limits; answers in case order. A case whose sizes are not the
/// shape's is refused with a typed error naming the value. F64 needs `SHADER_F64`.
///
/// On a software adapter (lavapipe) a case is answered `None` when it ran more loop iterations
/// than [`SOFTWARE_LOOP_BUDGET`]: lavapipe may have cut its loops short, so the caller must
/// answer it another way (the CPU's laws). On hardware every case is answered.
pub fn solve_general_contact_laws(
    device: &GpuDevice,
    precision: Precision,
    shape: SpaceShape,
    cases: &[GeneralLawCase],
) -> Result<Vec<Option<GeneralLawAnswer>>> {
    // Its fields are public: a shape built without `new` is checked here.
    SpaceShape::new(shape.contacts, shape.bilateral)?;
    for c in cases {
        check_case(shape, c)?;
    }
    let case_len: usize = shape.case_fields().iter().map(|f| f.1).sum();
    let answer_len: usize = shape.answer_fields().iter().map(|f| f.1).sum();
    let (workgroup, budget) = if device.info.device_type == wgpu::DeviceType::Cpu {
        (1, SOFTWARE_LOOP_BUDGET)
    } else {
        (device.default_workgroup_size(), u32::MAX)
    };
    let source = general_kernel_source(precision, shape, workgroup, budget);
    let values = run_cases(
        device,
        precision,
        &source,
        ("contact_laws_general_main", workgroup),
        (case_len, answer_len),
        cases.len(),
        |k| case_values(&cases[k]),
    )?;
    let flags = offset(&shape.answer_fields(), "FLAGS");
    let budget_flag = CODES
        .iter()
        .find(|(name, _)| *name == "FLAG_BUDGET")
        .map_or(0, |(_, bit)| *bit);
    Ok(cases
        .iter()
        .zip(values.chunks_exact(answer_len))
        .map(|(c, a)| {
            let cut_short = (a[flags] as u32) & budget_flag != 0;
            (!cut_short).then(|| answer_of(shape, c, a))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_validates_for_every_shape_and_precision() {
        for (contacts, bilateral) in [(1, 0), (2, 0), (4, 0), (2, 3)] {
            let shape = SpaceShape::new(contacts, bilateral).unwrap();
            for precision in [Precision::F32, Precision::F64] {
                if let Err(e) =
                    general_kernel_source(precision, shape, 64, SOFTWARE_LOOP_BUDGET).check()
                {
                    panic!("{contacts} contacts, {bilateral} bilateral, {precision:?}: {e}");
                }
            }
        }
    }

    #[test]
    fn shapes_outside_the_range_are_refused() {
        assert!(SpaceShape::new(0, 0).is_err());
        assert!(SpaceShape::new(MAX_CONTACTS + 1, 0).is_err());
        assert!(SpaceShape::new(2, MAX_BILATERAL + 1).is_err());
        assert_eq!(SpaceShape::new(4, 2).unwrap().rows(), 14);
    }
}
