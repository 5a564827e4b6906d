//! Where every column of a template lives in the GPU buffers, and the WGSL constants that tell
//! the kernel (`shaders/evaluate.wgsl` documents their meaning).
//!
//! Input and output buffers hold one segment per column, `capacity × width` values each (SoA),
//! so a column is uploaded or read back with one contiguous copy. Prefixes are in units of
//! widths: value `k` of instance `i` of a column with prefix `p` sits at
//! `p · capacity + i · width + k`.

use std::fmt::Write;

use crate::batch::{Column, FreeField, PrescribedField};
use crate::constraints::RowLevel;
use crate::error::{Error, Result};
use crate::model::{BodyKind, SystemTemplate};

/// Largest number of free bodies per template on the GPU (private-memory budget per thread).
pub const MAX_FREE_BODIES: usize = 4;
/// Largest number of constraint rows per template on the GPU.
pub const MAX_ROWS: usize = 24;

/// Constraint kinds the kernel implements (`C_KIND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuConstraintKind {
    /// `sphere_on_plane`.
    SphereOnPlane = 0,
    /// `point_on_plane`.
    PointOnPlane = 1,
    /// `point_to_ground`.
    PointToGround = 2,
}

/// One input column: what it is, its width and its prefix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputColumn {
    /// The batch column.
    pub column: Column,
    /// Values per instance.
    pub width: usize,
    /// Prefix in the input buffer.
    pub prefix: usize,
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
    /// Sum of input widths (values per instance in the input buffer).
    pub input_width: usize,
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
}

fn kind_of(name: &str, index: usize) -> Result<GpuConstraintKind> {
    match name {
        "sphere_on_plane" => Ok(GpuConstraintKind::SphereOnPlane),
        "point_on_plane" => Ok(GpuConstraintKind::PointOnPlane),
        "point_to_ground" => Ok(GpuConstraintKind::PointToGround),
        other => Err(Error::Gpu(format!(
            "constraint {index} ({other}) has no GPU implementation; GPU kinds: sphere_on_plane, \
             point_on_plane, point_to_ground"
        ))),
    }
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
    /// Lays out a template; errors when the GPU kernel cannot run it.
    pub fn new(template: &SystemTemplate) -> Result<Self> {
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
                });
                *prefix += width;
            };
        push(Column::Gravity, 3, &mut inputs, &mut prefix);
        let mut body_in = vec![0; template.bodies().len()];
        for (slot, body) in template.free_bodies().iter().enumerate() {
            body_in[body.0] = prefix;
            for field in FreeField::ALL {
                push(
                    Column::Free { slot, field },
                    field.width(),
                    &mut inputs,
                    &mut prefix,
                );
            }
        }
        for (slot, body) in template.prescribed_bodies().iter().enumerate() {
            body_in[body.0] = prefix;
            for field in PrescribedField::ALL {
                push(
                    Column::Prescribed { slot, field },
                    field.width(),
                    &mut inputs,
                    &mut prefix,
                );
            }
        }
        let mut c_kind = Vec::new();
        let mut c_flags = Vec::new();
        let mut c_body_a = Vec::new();
        let mut c_body_b = Vec::new();
        let mut c_rows = Vec::new();
        let mut c_row_offset = Vec::new();
        let mut c_in = Vec::new();
        let mut rows_total = 0;
        for (index, slot) in template.constraints().iter().enumerate() {
            let c = &slot.constraint;
            let kind = kind_of(c.kind_name(), index)?;
            let levels = c.row_levels();
            let rows = levels.len();
            let mut flags = 0;
            match kind {
                GpuConstraintKind::SphereOnPlane if rows == 3 => flags |= 1,
                GpuConstraintKind::PointToGround if levels[0] == RowLevel::Position => flags |= 1,
                _ => {}
            }
            if slot.baumgarte.is_some() {
                flags |= 2;
            }
            let bodies = c.bodies();
            c_kind.push(kind as usize);
            c_flags.push(flags);
            c_body_a.push(bodies[0].0);
            c_body_b.push(bodies.get(1).unwrap_or(&bodies[0]).0);
            c_rows.push(rows);
            c_row_offset.push(rows_total);
            c_in.push(prefix);
            rows_total += rows;
            push(Column::Enabled(index), 1, &mut inputs, &mut prefix);
            push(Column::Baumgarte(index), 1, &mut inputs, &mut prefix);
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
        let _ = writeln!(w, "const NC: u32 = {}u;", c_kind.len());
        let _ = writeln!(w, "const NU: u32 = {nu}u;");
        let _ = writeln!(w, "const ROWS: u32 = {rows_total}u;");
        let _ = writeln!(w, "const NB_CAP: u32 = {}u;", cap(bodies.len()));
        let _ = writeln!(w, "const NF_CAP: u32 = {}u;", cap(nf));
        let _ = writeln!(w, "const NC_CAP: u32 = {}u;", cap(c_kind.len()));
        let _ = writeln!(w, "const NU_CAP: u32 = {}u;", cap(nu));
        let _ = writeln!(w, "const ROWS_CAP: u32 = {}u;", cap(rows_total));
        let _ = writeln!(w, "const ROWS_NU_CAP: u32 = {}u;", cap(rows_total * nu));
        let _ = writeln!(
            w,
            "const ROWS_ROWS_CAP: u32 = {}u;",
            cap(rows_total * rows_total)
        );
        let _ = writeln!(w, "const MASS_CAP: u32 = {}u;", cap(36 * nf));
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
        w += &wgsl_array(
            "FREE_BODY",
            &template
                .free_bodies()
                .iter()
                .map(|b| b.0)
                .collect::<Vec<_>>(),
        );
        let _ = writeln!(w, "const GRAVITY_IN: u32 = 0u;");
        w += &wgsl_array("C_KIND", &c_kind);
        w += &wgsl_array("C_FLAGS", &c_flags);
        w += &wgsl_array("C_BODY_A", &c_body_a);
        w += &wgsl_array("C_BODY_B", &c_body_b);
        w += &wgsl_array("C_ROWS", &c_rows);
        w += &wgsl_array("C_ROW_OFFSET", &c_row_offset);
        w += &wgsl_array("C_IN", &c_in);
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

        Ok(Self {
            inputs,
            input_width,
            output_main_width,
            output_width,
            nu,
            rows: rows_total,
            status,
            udot,
            udot_unconstrained,
            constraints,
            wgsl_constants: w,
        })
    }
}
