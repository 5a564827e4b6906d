//! Where every column of a template lives in the GPU buffers, and the WGSL constants that tell
//! the kernel (`shaders/evaluate.wgsl` documents their meaning).
//!
//! Input and output buffers hold one segment per column, `capacity × width` values each (SoA),
//! so a column is uploaded or read back with one contiguous copy. Prefixes are in units of
//! widths: value `k` of instance `i` of a column with prefix `p` sits at
//! `p · capacity + i · width + k`.

use std::fmt::Write;

use crate::batch::{Column, FreeField, PrescribedField};
use crate::constraints::{MAX_GPU_ROWS, RowLevel};
use crate::error::{Error, Result};
use crate::model::{BodyKind, SystemTemplate};
use crate::motion::MOTION_PARAMS_CAP;

pub mod carry;
mod inputs;
mod order;
pub use inputs::{InputColumn, PARAMETER_SLOTS_CAP};
pub use order::{OUTPUT_ORDERS, OutputColumn, OutputOrder};

/// Largest number of free bodies per template on the GPU (private-memory budget per thread).
pub const MAX_FREE_BODIES: usize = 4;
/// Largest number of constraint rows per template on the GPU.
pub const MAX_ROWS: usize = 24;

/// Length of the parameter array `p` every constraint's WGSL receives (`PARAMS_CAP`).
pub const PARAMS_CAP: usize = 32;

/// A named piece of WGSL spliced into the kernel: a constraint's or a motion law's source, or a
/// piece generated per template (errors are reported against these names and their own lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgslSection {
    /// Name in error messages.
    pub name: String,
    /// The WGSL text.
    pub text: String,
}

/// Values of a constraint's body-force column: body a's (torque, force), then body b's.
pub const BODY_FORCES_WIDTH: usize = 12;
/// Where each of a constraint's fixed-width output columns starts, counted from its body
/// forces (which follow its four per-row columns), and their total width: the one description
/// the host's [`ConstraintOutput`] prefixes and the kernel's `OUT_*_AT` constants both come from.
const POWER_AT: usize = BODY_FORCES_WIDTH;
const CONTACT_POINT_AT: usize = POWER_AT + 1;
const SEPARATION_AT: usize = CONTACT_POINT_AT + 3;
const CONTACT_FORCE_AT: usize = SEPARATION_AT + 1;
const FIXED_OUTPUTS_WIDTH: usize = CONTACT_FORCE_AT + 3;

/// Output placement of one constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintOutput {
    /// Rows (internal order).
    pub rows: usize,
    /// Prefix of its first output column (position errors).
    pub prefix: usize,
    /// Prefix of its Jacobian rows (then its bias k).
    pub jacobian_prefix: usize,
}

impl ConstraintOutput {
    /// Prefix of the velocity errors.
    pub fn velocity_errors(&self) -> usize {
        self.prefix + self.rows
    }
    /// Prefix of the acceleration errors.
    pub fn acceleration_errors(&self) -> usize {
        self.prefix + 2 * self.rows
    }
    /// Prefix of the multipliers.
    pub fn multipliers(&self) -> usize {
        self.prefix + 3 * self.rows
    }
    /// Prefix of the body forces ([`BODY_FORCES_WIDTH`] values: body a's (torque, force),
    /// then body b's).
    pub fn body_forces(&self) -> usize {
        self.prefix + 4 * self.rows
    }
    /// Prefix of the power (one value).
    pub fn power(&self) -> usize {
        self.body_forces() + POWER_AT
    }
    /// Prefix of the contact point (three values).
    pub fn contact_point(&self) -> usize {
        self.body_forces() + CONTACT_POINT_AT
    }
    /// Prefix of the separation (one value).
    pub fn separation(&self) -> usize {
        self.body_forces() + SEPARATION_AT
    }
    /// Prefix of the contact force (three values, the constraint's last output column).
    pub fn contact_force(&self) -> usize {
        self.body_forces() + CONTACT_FORCE_AT
    }
    /// One past the constraint's last output column (its contact force).
    pub fn end(&self) -> usize {
        self.body_forces() + FIXED_OUTPUTS_WIDTH
    }
    /// Prefix of the bias k (after the Jacobian rows).
    pub fn bias_acceleration(&self, nu: usize) -> usize {
        self.jacobian_prefix + self.rows * nu
    }

    /// Its output columns `(prefix, width)` as the kernel stores them, the four per-row ones
    /// and the fixed-width ones (not the Jacobian rows and bias: [`Layout::output_columns`]).
    pub(crate) fn main_columns(&self) -> [(usize, usize); 9] {
        let n = self.rows;
        [
            (self.prefix, n),
            (self.velocity_errors(), n),
            (self.acceleration_errors(), n),
            (self.multipliers(), n),
            (self.body_forces(), BODY_FORCES_WIDTH),
            (self.power(), 1),
            (self.contact_point(), 3),
            (self.separation(), 1),
            (self.contact_force(), 3),
        ]
    }
}

/// How the kernels treat one body of the template, and where its input columns start: what
/// `gpu::codegen` unrolls the kernels' walks over the bodies from.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyPlacement {
    /// Its name in the template (in the generated code's comments).
    pub name: String,
    /// Ground, free or prescribed.
    pub kind: BodyKind,
    /// Index among the bodies of its kind (a free body owns `u[6 slot .. 6 slot + 6]`).
    pub slot: usize,
    /// Prefix of its first input column (a free body's mass, a prescribed body's pose; 0 for
    /// Ground and driven bodies).
    pub prefix: usize,
    /// A driven body's law of time (`None`: Ground, a free body, or a prescribed body whose
    /// pose, velocity and acceleration are input columns).
    pub motion: Option<MotionPlacement>,
}

/// A driven body's motion law on the GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct MotionPlacement {
    /// The law's kind name.
    pub law: String,
    /// `(prefix, width)` of each parameter column, in [`MotionLaw::params`](crate::motion::MotionLaw::params) order.
    pub params: Vec<(usize, usize)>,
    /// Its WGSL expression of type `BodyKinematics` in `p`, `t` and `i` (`MotionLaw::wgsl`).
    pub evaluate: String,
}

/// How the kernels treat one constraint of the template, and where its input columns start:
/// what `gpu::codegen` unrolls the kernels' walks over the constraints from.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintPlacement {
    /// Its kind name.
    pub kind: String,
    /// Its bodies a and b (b repeats a for a one-body constraint).
    pub bodies: [usize; 2],
    /// Its rows.
    pub rows: usize,
    /// Its first row among the template's rows.
    pub first_row: usize,
    /// Prefix of its first input column (the enabled flag; `CONSTRAINT_*_AT` from there).
    pub prefix: usize,
    /// Whether the template asks for Baumgarte terms on its rows.
    pub baumgarte: bool,
    /// `(prefix, width)` of each parameter column, in `Constraint::params` order.
    pub params: Vec<(usize, usize)>,
    /// Its WGSL rows expression (`Constraint::wgsl`), of type `array<Row, 3>`.
    pub evaluate: String,
    /// Its WGSL report expression, of type `ContactReport` (`None`: zeros).
    pub report: Option<String>,
}

/// Buffer layout of a template.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Input columns in buffer order.
    pub inputs: Vec<InputColumn>,
    /// Sum of input widths (values per instance, every column counted).
    pub input_width: usize,
    /// Sum of the per-instance columns' widths (values per instance in the input buffer).
    pub varying_width: usize,
    /// Values of the shared columns (stored once per chunk, after the per-instance ones).
    pub shared_width: usize,
    /// The values the kernels hold as constants: those of the [`folded`](InputColumn::folded)
    /// columns, one after another in input order ([`Layout::fold_shared`]).
    pub folded_values: Vec<f64>,
    /// Sum of output widths without the Jacobian region.
    pub output_main_width: usize,
    /// Sum of all output widths.
    pub output_width: usize,
    /// Mobilities per instance.
    pub nu: usize,
    /// Total rows per instance.
    pub rows: usize,
    /// Prefix of the status column.
    pub status: usize,
    /// Prefix of u̇.
    pub udot: usize,
    /// Prefix of the unconstrained u̇.
    pub udot_unconstrained: usize,
    /// Per constraint, in template order: where its outputs go.
    pub constraints: Vec<ConstraintOutput>,
    /// Per body, in template order: how the kernels treat it and where its inputs are.
    pub bodies: Vec<BodyPlacement>,
    /// Per constraint, in template order: its bodies, rows and inputs, and its WGSL.
    pub placements: Vec<ConstraintPlacement>,
    /// WGSL constant declarations for the kernel.
    pub wgsl_constants: String,
    /// The constraints' and motion laws' WGSL sources (each once) and the generated input
    /// addressing (`input_at`). The code walking the template's bodies and constraints is
    /// generated from [`bodies`](Self::bodies) and [`placements`](Self::placements) by
    /// `gpu::codegen`.
    pub constraint_sections: Vec<WgslSection>,
}

/// Offsets of a constraint's columns from its prefix: enabled flag, Baumgarte time constant,
/// then its parameters (`CONSTRAINT_*_AT` in the kernels).
const CONSTRAINT_ENABLED_AT: usize = 0;
const CONSTRAINT_BAUMGARTE_AT: usize = 1;
const CONSTRAINT_PARAMS_AT: usize = 2;

/// WGSL constants `{PREFIX}_{FIELD}_AT`: the offset (in widths) of each field's column from its
/// body's prefix, in the order [`Layout::new`] pushes them, so the kernels never spell an
/// offset themselves.
fn field_offsets(prefix: &str, fields: &[(&str, usize)]) -> String {
    let mut out = String::new();
    let mut at = 0;
    for (name, width) in fields {
        let _ = writeln!(out, "const {prefix}_{name}_AT: u32 = {at}u;");
        at += width;
    }
    out
}

/// The body fields' offset constants (free and prescribed bodies).
fn body_field_offsets() -> String {
    let free: Vec<(&str, usize)> = FreeField::ALL
        .iter()
        .map(|f| {
            let name = match f {
                FreeField::Mass => "MASS",
                FreeField::Com => "COM",
                FreeField::Inertia => "INERTIA",
                FreeField::AppliedForce => "APPLIED_FORCE",
                FreeField::AppliedTorque => "APPLIED_TORQUE",
                FreeField::Q => "Q",
                FreeField::U => "U",
            };
            (name, f.width())
        })
        .collect();
    let prescribed: Vec<(&str, usize)> = PrescribedField::ALL
        .iter()
        .map(|f| {
            let name = match f {
                PrescribedField::Pose => "POSE",
                PrescribedField::Velocity => "VELOCITY",
                PrescribedField::Acceleration => "ACCELERATION",
            };
            (name, f.width())
        })
        .collect();
    field_offsets("FREE", &free) + &field_offsets("PRESCRIBED", &prescribed)
}

fn wgsl_array(name: &str, values: &[usize]) -> String {
    let items: Vec<String> = if values.is_empty() {
        vec!["0u".into()]
    } else {
        values.iter().map(|v| format!("{v}u")).collect()
    };
    format!(
        "const {name} = array<u32, {}>({});\n",
        items.len(),
        items.join(", ")
    )
}

impl Layout {
    /// Every output column `(prefix, width)` as the kernel stores them (its `store` calls'
    /// `prefix` and `width`), in prefix order: they tile `0 .. output_width`. An instance-major
    /// readback of part of a slice copies each column on its own (its rows are `width` wide).
    pub fn output_columns(&self) -> Vec<(usize, usize)> {
        let nu = self.nu;
        let mut columns = vec![
            (self.status, 1),
            (self.udot, nu),
            (self.udot_unconstrained, nu),
        ];
        for c in &self.constraints {
            columns.extend(c.main_columns());
        }
        for c in &self.constraints {
            columns.push((c.jacobian_prefix, c.rows * nu));
            columns.push((c.bias_acceleration(nu), c.rows));
        }
        columns.retain(|&(_, w)| w > 0);
        columns.sort_unstable();
        columns
    }

    /// Lays out a template with every column per instance; errors when the GPU kernel cannot
    /// run it.
    pub fn new(template: &SystemTemplate) -> Result<Self> {
        Self::with_shared(template, &|_| false)
    }

    /// Lays out a template, storing once the columns for which `shared` is true; errors when
    /// the GPU kernel cannot run it.
    pub fn with_shared(template: &SystemTemplate, shared: &dyn Fn(Column) -> bool) -> Result<Self> {
        let nf = template.free_bodies().len();
        if nf > MAX_FREE_BODIES {
            return Err(Error::Gpu(format!(
                "the template has {nf} free bodies; the GPU kernel accepts at most {MAX_FREE_BODIES}"
            )));
        }
        let nu = template.nu();
        let mut inputs = Vec::new();
        let mut prefix = 0;
        let push =
            |column: Column, width: usize, inputs: &mut Vec<InputColumn>, prefix: &mut usize| {
                inputs.push(InputColumn {
                    column,
                    width,
                    prefix: *prefix,
                    shared: false,
                    folded: false,
                    at: 0,
                });
                *prefix += width;
            };
        push(Column::Gravity, 3, &mut inputs, &mut prefix);
        let time_in = prefix;
        push(Column::Time, 1, &mut inputs, &mut prefix);
        let work_in = prefix;
        push(Column::Work, 2, &mut inputs, &mut prefix);
        let mut body_in = vec![0; template.bodies().len()];
        for (slot, body) in template.free_bodies().iter().enumerate() {
            body_in[body.index()] = prefix;
            for field in FreeField::ALL {
                push(
                    Column::Free { slot, field },
                    field.width(),
                    &mut inputs,
                    &mut prefix,
                );
            }
        }
        let mut sections: Vec<WgslSection> = vec![WgslSection {
            name: "motion.wgsl".into(),
            text: crate::motion::MOTION_WGSL.into(),
        }];
        let mut motions = vec![None; template.bodies().len()];
        for (slot, body) in template.prescribed_bodies().iter().enumerate() {
            body_in[body.index()] = prefix;
            let b = &template.bodies()[body.index()];
            let Some(law) = &b.motion else {
                for field in PrescribedField::ALL {
                    push(
                        Column::Prescribed { slot, field },
                        field.width(),
                        &mut inputs,
                        &mut prefix,
                    );
                }
                continue;
            };
            // A driven body: only its law's parameters (its pose, velocity and acceleration
            // columns are the host's outputs of the law, never read by the kernels).
            let name = law.kind_name();
            let wgsl = law.wgsl().ok_or_else(|| {
                Error::Gpu(format!(
                    "body {:?} follows the {name} motion law, which has no WGSL (`MotionLaw::wgsl`), so it cannot run on the GPU",
                    b.name
                ))
            })?;
            let widths: Vec<usize> = law.params().iter().map(|p| p.default.len()).collect();
            let total: usize = widths.iter().sum();
            if total > MOTION_PARAMS_CAP {
                return Err(Error::Gpu(format!(
                    "body {:?}: the {name} motion law has {total} parameter values; the GPU passes at most {MOTION_PARAMS_CAP}",
                    b.name
                )));
            }
            if !sections.iter().any(|s| s.name == wgsl.file) {
                sections.push(WgslSection {
                    name: wgsl.file.clone(),
                    text: wgsl.source.clone(),
                });
            }
            let mut params = Vec::new();
            for (k, w) in widths.iter().enumerate() {
                params.push((prefix, *w));
                push(
                    Column::Motion { slot, param: k },
                    *w,
                    &mut inputs,
                    &mut prefix,
                );
            }
            motions[body.index()] = Some(MotionPlacement {
                law: name.to_string(),
                params,
                evaluate: wgsl.evaluate.clone(),
            });
        }
        let mut placements = Vec::new();
        let mut row_level = Vec::new();
        let mut rows_total = 0;
        for (index, slot) in template.constraints().iter().enumerate() {
            let c = &slot.constraint;
            let name = c.kind_name();
            let wgsl = c.wgsl().ok_or_else(|| {
                Error::Gpu(format!(
                    "constraint {index} ({name}) has no WGSL (`Constraint::wgsl`), so it cannot run on the GPU"
                ))
            })?;
            let levels = c.row_levels();
            let rows = levels.len();
            if rows > MAX_GPU_ROWS {
                return Err(Error::Gpu(format!(
                    "constraint {index} ({name}) has {rows} rows; on the GPU a constraint has at most {MAX_GPU_ROWS}"
                )));
            }
            let widths: Vec<usize> = c.params().iter().map(|p| p.default.len()).collect();
            let total: usize = widths.iter().sum();
            if total > PARAMS_CAP {
                return Err(Error::Gpu(format!(
                    "constraint {index} ({name}) has {total} parameter values; the GPU passes at most {PARAMS_CAP}"
                )));
            }
            if !sections.iter().any(|s| s.name == wgsl.file) {
                sections.push(WgslSection {
                    name: wgsl.file.clone(),
                    text: wgsl.source.clone(),
                });
            }
            let bodies = c.bodies();
            row_level.extend(levels.iter().map(|l| match l {
                RowLevel::Position => 0,
                RowLevel::Velocity => 1,
                RowLevel::Acceleration => 2,
            }));
            let constraint_prefix = prefix;
            // In the order of the CONSTRAINT_*_AT offsets.
            debug_assert_eq!((CONSTRAINT_ENABLED_AT, CONSTRAINT_BAUMGARTE_AT), (0, 1));
            push(Column::Enabled(index), 1, &mut inputs, &mut prefix);
            push(Column::Baumgarte(index), 1, &mut inputs, &mut prefix);
            debug_assert_eq!(prefix - constraint_prefix, CONSTRAINT_PARAMS_AT);
            let mut params = Vec::new();
            for (k, w) in widths.iter().enumerate() {
                params.push((prefix, *w));
                push(Column::Param(index, k), *w, &mut inputs, &mut prefix);
            }
            placements.push(ConstraintPlacement {
                kind: name.to_string(),
                bodies: [
                    bodies[0].index(),
                    bodies.get(1).unwrap_or(&bodies[0]).index(),
                ],
                rows,
                first_row: rows_total,
                prefix: constraint_prefix,
                baumgarte: slot.baumgarte.is_some(),
                params,
                evaluate: wgsl.evaluate.clone(),
                report: wgsl.report.clone(),
            });
            rows_total += rows;
        }
        let input_width = prefix;
        if rows_total > MAX_ROWS {
            return Err(Error::Gpu(format!(
                "the template has {rows_total} constraint rows; the GPU kernel accepts at most {MAX_ROWS}"
            )));
        }

        let (status, udot, udot_unconstrained) = (0, 1, 1 + nu);
        let mut out = 1 + 2 * nu;
        let mut constraints = Vec::new();
        for c in &placements {
            constraints.push(ConstraintOutput {
                rows: c.rows,
                prefix: out,
                jacobian_prefix: 0,
            });
            out += 4 * c.rows + FIXED_OUTPUTS_WIDTH;
        }
        let output_main_width = out;
        for c in &mut constraints {
            c.jacobian_prefix = out;
            out += c.rows * nu + c.rows;
        }
        let output_width = out;

        let bodies: Vec<BodyPlacement> = template
            .bodies()
            .iter()
            .enumerate()
            .map(|(index, b)| BodyPlacement {
                name: b.name.clone(),
                kind: b.kind,
                slot: b.slot,
                prefix: body_in[index],
                motion: motions[index].take(),
            })
            .collect();
        let mut w = String::new();
        let cap = |n: usize| n.max(1);
        let _ = writeln!(w, "const NB: u32 = {}u;", bodies.len());
        let _ = writeln!(w, "const NF: u32 = {nf}u;");
        let _ = writeln!(w, "const NU: u32 = {nu}u;");
        let _ = writeln!(w, "const ROWS: u32 = {rows_total}u;");
        let _ = writeln!(w, "const NB_CAP: u32 = {}u;", cap(bodies.len()));
        let _ = writeln!(w, "const NF_CAP: u32 = {}u;", cap(nf));
        let _ = writeln!(w, "const PARAMS_CAP: u32 = {PARAMS_CAP}u;");
        let _ = writeln!(w, "const NU_CAP: u32 = {}u;", cap(nu));
        let _ = writeln!(w, "const ROWS_CAP: u32 = {}u;", cap(rows_total));
        let _ = writeln!(w, "const ROWS_NU_CAP: u32 = {}u;", cap(rows_total * nu));
        let _ = writeln!(
            w,
            "const ROWS_ROWS_CAP: u32 = {}u;",
            cap(rows_total * rows_total)
        );
        let _ = writeln!(w, "const GRAVITY_IN: u32 = 0u;");
        let _ = writeln!(w, "const TIME_IN: u32 = {time_in}u;");
        let _ = writeln!(w, "const WORK_IN: u32 = {work_in}u;");
        w += &body_field_offsets();
        let _ = writeln!(
            w,
            "const CONSTRAINT_ENABLED_AT: u32 = {CONSTRAINT_ENABLED_AT}u;"
        );
        let _ = writeln!(
            w,
            "const CONSTRAINT_BAUMGARTE_AT: u32 = {CONSTRAINT_BAUMGARTE_AT}u;"
        );
        let _ = writeln!(w, "const MOTION_PARAMS_CAP: u32 = {MOTION_PARAMS_CAP}u;");
        w += &wgsl_array("ROW_LEVEL", &row_level);
        let _ = writeln!(w, "const OUT_STATUS: u32 = {status}u;");
        let _ = writeln!(w, "const OUT_UDOT: u32 = {udot}u;");
        let _ = writeln!(w, "const OUT_UDOT0: u32 = {udot_unconstrained}u;");
        let _ = writeln!(
            w,
            "const OUT_BODY_FORCES_WIDTH: u32 = {BODY_FORCES_WIDTH}u;"
        );
        let _ = writeln!(w, "const OUT_POWER_AT: u32 = {POWER_AT}u;");
        let _ = writeln!(w, "const OUT_CONTACT_POINT_AT: u32 = {CONTACT_POINT_AT}u;");
        let _ = writeln!(w, "const OUT_SEPARATION_AT: u32 = {SEPARATION_AT}u;");
        let _ = writeln!(w, "const OUT_CONTACT_FORCE_AT: u32 = {CONTACT_FORCE_AT}u;");

        // (The state columns the stepping kernel writes are per-instance columns, never shared.)
        for c in &mut inputs {
            c.shared = shared(c.column);
        }
        let mut layout = Self {
            inputs,
            input_width,
            varying_width: 0,
            shared_width: 0,
            folded_values: Vec::new(),
            output_main_width,
            output_width,
            nu,
            rows: rows_total,
            status,
            udot,
            udot_unconstrained,
            constraints,
            bodies,
            placements,
            wgsl_constants: w,
            constraint_sections: sections,
        };
        layout.place_inputs();
        Ok(layout)
    }
}
