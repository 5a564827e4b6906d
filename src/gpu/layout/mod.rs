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

mod inputs;
pub use inputs::InputColumn;

/// Largest number of free bodies per template on the GPU (private-memory budget per thread).
pub const MAX_FREE_BODIES: usize = 4;
/// Largest number of constraint rows per template on the GPU.
pub const MAX_ROWS: usize = 24;

/// Length of the parameter array `p` every constraint's WGSL receives (`PARAMS_CAP`).
pub const PARAMS_CAP: usize = 32;

/// A named piece of WGSL spliced into the kernel: a constraint's source, or the generated
/// dispatch of one constraint (errors are reported against these names and their own lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgslSection {
    /// Name in error messages.
    pub name: String,
    /// The WGSL text.
    pub text: String,
}

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
    /// Prefix of the body forces (width 12: body a's (torque, force), then body b's).
    pub fn body_forces(&self) -> usize {
        self.prefix + 4 * self.rows
    }
    /// Prefix of the power.
    pub fn power(&self) -> usize {
        self.body_forces() + 12
    }
    /// Prefix of the contact point.
    pub fn contact_point(&self) -> usize {
        self.power() + 1
    }
    /// Prefix of the separation.
    pub fn separation(&self) -> usize {
        self.contact_point() + 3
    }
    /// Prefix of the contact force.
    pub fn contact_force(&self) -> usize {
        self.separation() + 1
    }
    /// Prefix of the bias k (after the Jacobian rows).
    pub fn bias_acceleration(&self, nu: usize) -> usize {
        self.jacobian_prefix + self.rows * nu
    }
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
    /// Per constraint, in template order.
    pub constraints: Vec<ConstraintOutput>,
    /// WGSL constant declarations for the kernel.
    pub wgsl_constants: String,
    /// The constraints' WGSL sources (each once) and, per constraint, the generated code that
    /// loads its parameters and calls its expressions (`evaluate_constraint`,
    /// `report_constraint`).
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
        let mut body_driven = vec![0; template.bodies().len()];
        let mut motion_cases = String::new();
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
            body_driven[body.index()] = 1;
            let mut loads = String::new();
            let mut at = 0;
            for (k, w) in widths.iter().enumerate() {
                for j in 0..*w {
                    let _ = writeln!(loads, "    p[{at}] = load({prefix}u, {w}u, i, {j}u);");
                    at += 1;
                }
                push(
                    Column::Motion { slot, param: k },
                    *w,
                    &mut inputs,
                    &mut prefix,
                );
            }
            sections.push(WgslSection {
                name: format!("generated parameters of the motion of body {:?} ({name})", b.name),
                text: format!(
                    "fn motion_params_{slot}(i: u32) -> array<real, MOTION_PARAMS_CAP> {{\n    var p: array<real, MOTION_PARAMS_CAP>;\n{loads}    return p;\n}}\n"
                ),
            });
            let _ = writeln!(
                motion_cases,
                "        case {}u: {{\n            let p = motion_params_{slot}(i);\n            return {};\n        }}",
                body.index(),
                wgsl.evaluate
            );
        }
        sections.push(WgslSection {
            name: "generated motion dispatch (the `MotionLaw::wgsl` expressions)".into(),
            text: format!(
                "// Motion of driven body b of instance i at time t (generated per template).\n\
                 fn prescribed_motion(b: u32, i: u32, t: real) -> BodyKinematics {{\n    switch b {{\n{motion_cases}        default: {{\n            return ground_kinematics();\n        }}\n    }}\n}}\n"
            ),
        });
        let mut c_flags = Vec::new();
        let mut dispatch: Vec<(String, String, String)> = Vec::new();
        let mut c_body_a = Vec::new();
        let mut c_body_b = Vec::new();
        let mut c_rows = Vec::new();
        let mut c_row_offset = Vec::new();
        let mut c_in = Vec::new();
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
            // Loads of the flattened parameters: column k starts at the parameters' offset plus
            // the widths before it.
            let mut loads = String::new();
            let (mut q, mut at) = (prefix + CONSTRAINT_PARAMS_AT, 0);
            for w in &widths {
                for j in 0..*w {
                    let _ = writeln!(loads, "    p[{at}] = load({q}u, {w}u, i, {j}u);");
                    at += 1;
                }
                q += w;
            }
            dispatch.push((
                loads,
                wgsl.evaluate.clone(),
                wgsl.report
                    .clone()
                    .unwrap_or_else(|| "ContactReport()".to_string()),
            ));
            // Bit 1: Baumgarte terms (bit 0 is no longer used).
            let flags = if slot.baumgarte.is_some() { 2 } else { 0 };
            let bodies = c.bodies();
            c_flags.push(flags);
            c_body_a.push(bodies[0].index());
            c_body_b.push(bodies.get(1).unwrap_or(&bodies[0]).index());
            c_rows.push(rows);
            row_level.extend(levels.iter().map(|l| match l {
                RowLevel::Position => 0,
                RowLevel::Velocity => 1,
                RowLevel::Acceleration => 2,
            }));
            c_row_offset.push(rows_total);
            c_in.push(prefix);
            rows_total += rows;
            // In the order of the CONSTRAINT_*_AT offsets.
            debug_assert_eq!((CONSTRAINT_ENABLED_AT, CONSTRAINT_BAUMGARTE_AT), (0, 1));
            push(Column::Enabled(index), 1, &mut inputs, &mut prefix);
            push(Column::Baumgarte(index), 1, &mut inputs, &mut prefix);
            debug_assert_eq!(prefix - c_in[c_in.len() - 1], CONSTRAINT_PARAMS_AT);
            for (k, spec) in c.params().iter().enumerate() {
                push(
                    Column::Param(index, k),
                    spec.default.len(),
                    &mut inputs,
                    &mut prefix,
                );
            }
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
        for rows in &c_rows {
            constraints.push(ConstraintOutput {
                rows: *rows,
                prefix: out,
                jacobian_prefix: 0,
            });
            out += 4 * rows + 20;
        }
        let output_main_width = out;
        for c in &mut constraints {
            c.jacobian_prefix = out;
            out += c.rows * nu + c.rows;
        }
        let output_width = out;

        let bodies = template.bodies();
        let mut w = String::new();
        let cap = |n: usize| n.max(1);
        let _ = writeln!(w, "const NB: u32 = {}u;", bodies.len());
        let _ = writeln!(w, "const NF: u32 = {nf}u;");
        let nc = template.constraints().len();
        let _ = writeln!(w, "const NC: u32 = {nc}u;");
        let _ = writeln!(w, "const NU: u32 = {nu}u;");
        let _ = writeln!(w, "const ROWS: u32 = {rows_total}u;");
        let _ = writeln!(w, "const NB_CAP: u32 = {}u;", cap(bodies.len()));
        let _ = writeln!(w, "const NF_CAP: u32 = {}u;", cap(nf));
        let _ = writeln!(w, "const NC_CAP: u32 = {}u;", cap(nc));
        let _ = writeln!(w, "const PARAMS_CAP: u32 = {PARAMS_CAP}u;");
        let _ = writeln!(w, "const NU_CAP: u32 = {}u;", cap(nu));
        let _ = writeln!(w, "const ROWS_CAP: u32 = {}u;", cap(rows_total));
        let _ = writeln!(w, "const ROWS_NU_CAP: u32 = {}u;", cap(rows_total * nu));
        let _ = writeln!(
            w,
            "const ROWS_ROWS_CAP: u32 = {}u;",
            cap(rows_total * rows_total)
        );
        let kinds: Vec<usize> = bodies
            .iter()
            .map(|b| match b.kind {
                BodyKind::Ground => 0,
                BodyKind::Free => 1,
                BodyKind::Prescribed => 2,
            })
            .collect();
        w += &wgsl_array("BODY_KIND", &kinds);
        w += &wgsl_array(
            "BODY_SLOT",
            &bodies.iter().map(|b| b.slot).collect::<Vec<_>>(),
        );
        w += &wgsl_array("BODY_IN", &body_in);
        w += &wgsl_array("BODY_DRIVEN", &body_driven);
        let _ = writeln!(w, "const TIME_IN: u32 = {time_in}u;");
        w += &body_field_offsets();
        let _ = writeln!(
            w,
            "const CONSTRAINT_ENABLED_AT: u32 = {CONSTRAINT_ENABLED_AT}u;"
        );
        let _ = writeln!(
            w,
            "const CONSTRAINT_BAUMGARTE_AT: u32 = {CONSTRAINT_BAUMGARTE_AT}u;"
        );
        let _ = writeln!(w, "const WORK_IN: u32 = {work_in}u;");
        let _ = writeln!(w, "const MOTION_PARAMS_CAP: u32 = {MOTION_PARAMS_CAP}u;");
        w += &wgsl_array(
            "FREE_BODY",
            &template
                .free_bodies()
                .iter()
                .map(|b| b.index())
                .collect::<Vec<_>>(),
        );
        let _ = writeln!(w, "const GRAVITY_IN: u32 = 0u;");
        w += &wgsl_array("C_FLAGS", &c_flags);
        w += &wgsl_array("C_BODY_A", &c_body_a);
        w += &wgsl_array("C_BODY_B", &c_body_b);
        w += &wgsl_array("C_ROWS", &c_rows);
        w += &wgsl_array("C_ROW_OFFSET", &c_row_offset);
        w += &wgsl_array("C_IN", &c_in);
        w += &wgsl_array("ROW_LEVEL", &row_level);
        w += &wgsl_array(
            "C_OUT",
            &constraints.iter().map(|c| c.prefix).collect::<Vec<_>>(),
        );
        w += &wgsl_array(
            "C_JAC",
            &constraints
                .iter()
                .map(|c| c.jacobian_prefix)
                .collect::<Vec<_>>(),
        );
        let _ = writeln!(w, "const OUT_STATUS: u32 = {status}u;");
        let _ = writeln!(w, "const OUT_UDOT: u32 = {udot}u;");
        let _ = writeln!(w, "const OUT_UDOT0: u32 = {udot_unconstrained}u;");

        // Per constraint: its parameter loader and its cases of the two dispatch functions.
        for (c, (loads, _, _)) in dispatch.iter().enumerate() {
            let name = template.constraints()[c].constraint.kind_name();
            sections.push(WgslSection {
                name: format!("generated parameters of constraint {c} ({name})"),
                text: format!(
                    "fn constraint_params_{c}(i: u32) -> array<real, PARAMS_CAP> {{\n    var p: array<real, PARAMS_CAP>;\n{loads}    return p;\n}}\n"
                ),
            });
        }
        let mut evaluate = String::from(
            "// Rows of constraint c of instance i (`Constraint::wgsl`, generated per template).\n\
             fn evaluate_constraint(c: u32, i: u32, a: BodyKinematics, b: BodyKinematics) -> array<Row, 3> {\n    switch c {\n",
        );
        let mut report = String::from(
            "// Report of constraint c of instance i given its multipliers (generated per template).\n\
             fn report_constraint(c: u32, i: u32, a: BodyKinematics, b: BodyKinematics, multipliers: vec3<real>) -> ContactReport {\n    switch c {\n",
        );
        for (c, (_, eval, rep)) in dispatch.iter().enumerate() {
            let _ = writeln!(
                evaluate,
                "        case {c}u: {{\n            let p = constraint_params_{c}(i);\n            return {eval};\n        }}"
            );
            let _ = writeln!(
                report,
                "        case {c}u: {{\n            let p = constraint_params_{c}(i);\n            return {rep};\n        }}"
            );
        }
        evaluate +=
            "        default: {\n            return array<Row, 3>();\n        }\n    }\n}\n";
        report += "        default: {\n            return ContactReport();\n        }\n    }\n}\n";
        sections.push(WgslSection {
            name: "generated constraint dispatch (the `evaluate` expressions)".into(),
            text: evaluate,
        });
        sections.push(WgslSection {
            name: "generated constraint dispatch (the `report` expressions)".into(),
            text: report,
        });

        // (The state columns the stepping kernel writes are per-instance columns, never shared.)
        for c in &mut inputs {
            c.shared = shared(c.column);
        }
        let mut layout = Self {
            inputs,
            input_width,
            varying_width: 0,
            shared_width: 0,
            output_main_width,
            output_width,
            nu,
            rows: rows_total,
            status,
            udot,
            udot_unconstrained,
            constraints,
            wgsl_constants: w,
            constraint_sections: sections,
        };
        layout.place_inputs();
        Ok(layout)
    }
}
