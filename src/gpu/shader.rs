//! WGSL sources in `shaders/` and how the kernel is assembled from them.
//!
//! The kernel is the precision prelude, then the template's layout constants, then the shader
//! files in dependency order, with the multiplier solve generated for the template's row count
//! (`gpu::solve`) after `solver.wgsl`, the constraints' own WGSL (built-in or user-defined, through
//! `Constraint::wgsl`) and the straight-line walks over the template's bodies and constraints
//! (`gpu::codegen`) spliced in before `evaluate.wgsl` (and the stepping walks before `step.wgsl`). The same files serve f32 and f64: every scalar is `real`. Kernels are
//! checked with naga before the driver sees them, and an error is reported against the piece
//! it is in, with that piece's own line numbers.

use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::layout::{Layout, OutputOrder};

/// `shaders/common.wgsl`.
pub const COMMON: &str = include_str!("../../shaders/common.wgsl");
/// `shaders/dynamics.wgsl`.
pub const DYNAMICS: &str = include_str!("../../shaders/dynamics.wgsl");
/// `shaders/solver.wgsl`.
pub const SOLVER: &str = include_str!("../../shaders/solver.wgsl");
/// `shaders/sphere_on_plane.wgsl`.
pub const SPHERE_ON_PLANE: &str = crate::constraints::sphere_on_plane::WGSL;
/// `shaders/point_on_plane.wgsl`.
pub const POINT_ON_PLANE: &str = crate::constraints::point_on_plane::WGSL;
/// `shaders/point_to_ground.wgsl`.
pub const POINT_TO_GROUND: &str = crate::constraints::point_to_ground::WGSL;
/// `shaders/motion.wgsl`.
pub const MOTION: &str = crate::motion::MOTION_WGSL;
/// `shaders/motion/tilting.wgsl`.
pub const TILTING_MOTION: &str = include_str!("../../shaders/motion/tilting.wgsl");
/// `shaders/motion/polynomial.wgsl`.
pub const POLYNOMIAL_MOTION: &str = include_str!("../../shaders/motion/polynomial.wgsl");
/// `shaders/evaluate.wgsl`.
pub const EVALUATE: &str = include_str!("../../shaders/evaluate.wgsl");
/// `shaders/step_bodies.wgsl`: the stepping kernel's per-body pieces, which the generated
/// stepping walks call.
pub const STEP_BODIES: &str = include_str!("../../shaders/step_bodies.wgsl");
/// `shaders/step.wgsl`.
pub const STEP: &str = include_str!("../../shaders/step.wgsl");
/// `shaders/trig_f64.wgsl`: sin and cos in f64 arithmetic, part of the f64 precision prelude
/// (Vulkan offers them in 16 and 32 bits only).
pub const TRIG_F64: &str = include_str!("../../shaders/trig_f64.wgsl");

/// Every shader file with its name, in assembly order (the constraint files are spliced by
/// the constraints that use them, through `Constraint::wgsl`, and the motion laws' files by the
/// laws, through `MotionLaw::wgsl`).
pub const FILES: [(&str, &str); 12] = [
    ("common.wgsl", COMMON),
    ("dynamics.wgsl", DYNAMICS),
    ("solver.wgsl", SOLVER),
    ("motion.wgsl", MOTION),
    ("motion/tilting.wgsl", TILTING_MOTION),
    ("motion/polynomial.wgsl", POLYNOMIAL_MOTION),
    ("sphere_on_plane.wgsl", SPHERE_ON_PLANE),
    ("point_on_plane.wgsl", POINT_ON_PLANE),
    ("point_to_ground.wgsl", POINT_TO_GROUND),
    ("evaluate.wgsl", EVALUATE),
    ("step_bodies.wgsl", STEP_BODIES),
    ("step.wgsl", STEP),
];

/// The precision prelude: the `real` type, its epsilon, the rank tolerance of the minimum-norm
/// solve, a finiteness test that survives fast-math (f32: on the bits), `sin_cos_real` and
/// `atan2_real` (the built-ins in f32, `shaders/trig_f64.wgsl` in f64), and the status bits of
/// [`status`](crate::batch::status), so host and kernels share one definition.
pub fn prelude(precision: Precision) -> String {
    use crate::batch::status;
    let real = match precision {
        Precision::F32 => {
            "alias real = f32;\n\
             const REAL_EPSILON: real = 1.1920929e-7;\n\
             // f32 eigenvalues carry errors ~1e-7 · λmax; genuine ones of well-posed contact\n\
             // systems sit far above 1e-5 · λmax.\n\
             const RANK_TOLERANCE: real = 1e-5;\n\
             fn is_finite_real(x: real) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }\n\
             fn sin_cos_real(x: real) -> vec2<real> { return vec2<real>(sin(x), cos(x)); }\n\
             fn atan2_real(y: real, x: real) -> real { return atan2(y, x); }\n"
            .to_string()
        }
        Precision::F64 => {
            "alias real = f64;\n\
             const REAL_EPSILON: real = 2.220446049250313e-16;\n\
             const RANK_TOLERANCE: real = 1e-10;\n\
             fn is_finite_real(x: real) -> bool { return abs(x) <= 1.7976931348623157e308; }\n"
            .to_string()
                + TRIG_F64
        }
    };
    format!(
        "{real}const NONFINITE_STATE: u32 = {}u;\nconst NONFINITE_RESULT: u32 = {}u;\n\
         const SINGULAR_MASS: u32 = {}u;\nconst STEP_FAILED: u32 = {}u;\n\
         const CONSTRAINT_VIOLATED: u32 = {}u;\n",
        status::NONFINITE_STATE,
        status::NONFINITE_RESULT,
        status::SINGULAR_MASS,
        status::STEP_FAILED,
        status::CONSTRAINT_VIOLATED,
    )
}

/// A kernel's source with the place of every piece in it, to report errors against the piece.
#[derive(Debug, Clone)]
pub struct KernelSource {
    /// The whole WGSL text.
    pub text: String,
    /// `(name, first line, line count)` of every piece, lines 1-based in `text`.
    pub pieces: Vec<(String, usize, usize)>,
}

impl KernelSource {
    fn new(precision: Precision) -> Self {
        let mut k = Self {
            text: String::new(),
            pieces: Vec::new(),
        };
        k.push("the precision prelude", &prelude(precision));
        k
    }

    /// The precision prelude followed by `pieces` (name, text), in order: a kernel that is not
    /// a template's (`gpu::contact_laws`).
    pub fn from_pieces(precision: Precision, pieces: &[(&str, &str)]) -> Self {
        let mut k = Self::new(precision);
        for (name, text) in pieces {
            k.push(name, text);
        }
        k
    }

    /// Appends piece `name` (a kernel built on another: the event kernel on the stepping one).
    pub(crate) fn append(&mut self, name: &str, text: &str) {
        self.push(name, text);
    }

    fn push(&mut self, name: &str, text: &str) {
        let first = self.text.lines().count() + 1;
        let mut piece = text.to_string();
        if !piece.ends_with('\n') {
            piece.push('\n');
        }
        self.pieces
            .push((name.to_string(), first, piece.lines().count()));
        self.text.push_str(&piece);
    }

    /// Parses and validates the kernel with naga; an error names the piece, its own line and
    /// column, and quotes the line.
    pub fn check(&self) -> Result<()> {
        let locate = |offset: Option<usize>, message: String| -> Error {
            let Some(offset) = offset else {
                return Error::Gpu(format!("kernel does not compile: {message}"));
            };
            let offset = offset.min(self.text.len());
            let line = self.text[..offset].matches('\n').count() + 1;
            let line_start = self.text[..offset].rfind('\n').map_or(0, |p| p + 1);
            let column = self.text[line_start..offset].chars().count() + 1;
            let quoted = self.text.lines().nth(line - 1).unwrap_or("").trim_end();
            let message = format!("{message}\n    | {quoted}");
            match self
                .pieces
                .iter()
                .find(|(_, first, count)| line >= *first && line < first + count)
            {
                Some((name, first, _)) => Error::Wgsl {
                    file: name.clone(),
                    line: line - first + 1,
                    column,
                    message,
                },
                None => Error::Gpu(format!("kernel does not compile at line {line}: {message}")),
            }
        };
        let module = naga::front::wgsl::parse_str(&self.text).map_err(|e| {
            let offset = e.location(&self.text).map(|l| l.offset as usize);
            locate(offset, e.message().to_string())
        })?;
        let mut validator = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        );
        validator.validate(&module).map_err(|e| {
            let offset = e.location(&self.text).map(|l| l.offset as usize);
            let mut message = e.as_inner().to_string();
            let mut source = std::error::Error::source(e.as_inner());
            while let Some(inner) = source {
                message.push_str(&format!(": {inner}"));
                source = inner.source();
            }
            locate(offset, message)
        })?;
        Ok(())
    }
}

/// The evaluation kernel for a template's layout (every file but `step.wgsl`: a smaller module
/// compiles faster, which matters on CPU Vulkan drivers), with `workgroup_size` invocations per
/// workgroup (`GpuDevice::workgroup_size`), storing its output columns in `order`.
pub fn kernel_source(
    precision: Precision,
    layout: &Layout,
    workgroup_size: u32,
    order: OutputOrder,
) -> KernelSource {
    assemble(precision, layout, workgroup_size, order, None)
}

/// `INTEGRATOR` of a stepping kernel (`shaders/step.wgsl`'s `INTEGRATOR_*`): semi-implicit
/// Euler.
pub(crate) const INTEGRATOR_EULER: u32 = 0;
/// `INTEGRATOR` of a stepping kernel: classic RK4.
pub(crate) const INTEGRATOR_RK4: u32 = 1;
/// `INTEGRATOR` of a stepping kernel: Runge–Kutta–Merson under error control.
pub(crate) const INTEGRATOR_RKM: u32 = 2;

/// The constants that choose a stepping variant: `INTEGRATOR` (0 semi-implicit Euler, 1 RK4,
/// 2 RKM) and `PROJECTION`. Plain constants rather than pipeline overrides: the compiler drops
/// the variants not taken.
pub fn stepping_constants(integrator: u32, projection: bool) -> String {
    format!(
        "const INTEGRATOR: u32 = {integrator}u;\nconst PROJECTION: bool = {projection};\n{}",
        crate::gpu::layout::carry::carry_constants()
    )
}

/// The constants of how a kernel is launched: `WORKGROUP_SIZE`, the entry points'
/// `@workgroup_size` (a plain constant: the kernel text, and so the pipeline cache's key,
/// carries it).
pub fn launch_constants(workgroup_size: u32) -> String {
    format!("const WORKGROUP_SIZE: u32 = {workgroup_size}u;\n")
}

/// The stepping kernel for one variant: the evaluation kernel plus `step_bodies.wgsl`, the
/// generated stepping walks and `step.wgsl`. Its outputs (the carry columns) are of width 1,
/// the same in either [`OutputOrder`]: it is built instance-major.
pub fn stepping_source(
    precision: Precision,
    layout: &Layout,
    workgroup_size: u32,
    integrator: u32,
    projection: bool,
) -> KernelSource {
    assemble(
        precision,
        layout,
        workgroup_size,
        OutputOrder::InstanceMajor,
        Some((integrator, projection)),
    )
}

fn assemble(
    precision: Precision,
    layout: &Layout,
    workgroup_size: u32,
    order: OutputOrder,
    stepping: Option<(u32, bool)>,
) -> KernelSource {
    let mut k = KernelSource::new(precision);
    k.push("the layout constants", &layout.wgsl_constants);
    k.push("the launch constants", &launch_constants(workgroup_size));
    k.push("the output order", &order.wgsl_constant());
    if let Some((integrator, projection)) = stepping {
        k.push(
            "the stepping constants",
            &stepping_constants(integrator, projection),
        );
    }
    for (name, text) in [
        ("common.wgsl", COMMON),
        ("dynamics.wgsl", DYNAMICS),
        ("solver.wgsl", SOLVER),
    ] {
        k.push(name, text);
    }
    k.push(
        "the generated minimum-norm fallback",
        &crate::gpu::solve::min_norm_fallback(layout.rows),
    );
    k.push(
        "the generated multiplier solve",
        &crate::gpu::solve::solve_multipliers(layout.rows),
    );
    k.push(
        "the generated dense products",
        &crate::gpu::solve::dense_products(layout.rows, layout.nu),
    );
    for section in &layout.constraint_sections {
        k.push(&section.name, &section.text);
    }
    for section in crate::gpu::codegen::evaluation_sections(layout) {
        k.push(&section.name, &section.text);
    }
    k.push("evaluate.wgsl", EVALUATE);
    if stepping.is_some() {
        k.push("step_bodies.wgsl", STEP_BODIES);
        for section in crate::gpu::codegen::stepping_sections(layout) {
            k.push(&section.name, &section.text);
        }
        k.push("step.wgsl", STEP);
    }
    crate::gpu::probe::apply(&mut k.text);
    k
}
