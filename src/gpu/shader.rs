//! WGSL sources in `shaders/` and how the kernel is assembled from them.
//!
//! The kernel is the precision prelude, then the template's layout constants, then the shader
//! files in dependency order. The same files serve f32 and f64: every scalar is `real`.

use crate::gpu::Precision;

/// `shaders/common.wgsl`.
pub const COMMON: &str = include_str!("../../shaders/common.wgsl");
/// `shaders/dynamics.wgsl`.
pub const DYNAMICS: &str = include_str!("../../shaders/dynamics.wgsl");
/// `shaders/solver.wgsl`.
pub const SOLVER: &str = include_str!("../../shaders/solver.wgsl");
/// `shaders/sphere_on_plane.wgsl`.
pub const SPHERE_ON_PLANE: &str = include_str!("../../shaders/sphere_on_plane.wgsl");
/// `shaders/point_on_plane.wgsl`.
pub const POINT_ON_PLANE: &str = include_str!("../../shaders/point_on_plane.wgsl");
/// `shaders/point_to_ground.wgsl`.
pub const POINT_TO_GROUND: &str = include_str!("../../shaders/point_to_ground.wgsl");
/// `shaders/evaluate.wgsl`.
pub const EVALUATE: &str = include_str!("../../shaders/evaluate.wgsl");
/// `shaders/step.wgsl`.
pub const STEP: &str = include_str!("../../shaders/step.wgsl");

/// Every shader file with its name, in assembly order.
pub const FILES: [(&str, &str); 8] = [
    ("common.wgsl", COMMON),
    ("dynamics.wgsl", DYNAMICS),
    ("solver.wgsl", SOLVER),
    ("sphere_on_plane.wgsl", SPHERE_ON_PLANE),
    ("point_on_plane.wgsl", POINT_ON_PLANE),
    ("point_to_ground.wgsl", POINT_TO_GROUND),
    ("evaluate.wgsl", EVALUATE),
    ("step.wgsl", STEP),
];

/// The precision prelude: the `real` type, its epsilon, the rank tolerance of the minimum-norm
/// solve and a finiteness test that survives fast-math (f32: on the bits).
pub fn prelude(precision: Precision) -> String {
    match precision {
        Precision::F32 => "alias real = f32;\n\
             const REAL_EPSILON: real = 1.1920929e-7;\n\
             // f32 eigenvalues carry errors ~1e-7 · λmax; genuine ones of well-posed contact\n\
             // systems sit far above 1e-5 · λmax.\n\
             const RANK_TOLERANCE: real = 1e-5;\n\
             fn is_finite_real(x: real) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }\n"
            .to_string(),
        Precision::F64 => "alias real = f64;\n\
             const REAL_EPSILON: real = 2.220446049250313e-16;\n\
             const RANK_TOLERANCE: real = 1e-10;\n\
             fn is_finite_real(x: real) -> bool { return abs(x) <= 1.7976931348623157e308; }\n"
            .to_string(),
    }
}

/// The evaluation kernel's source for a template's layout constants (every file but
/// `step.wgsl`: a smaller module compiles faster, which matters on CPU Vulkan drivers).
pub fn kernel_source(precision: Precision, layout_constants: &str) -> String {
    assemble(precision, layout_constants, false)
}

/// The stepping kernel's source: the evaluation kernel plus `step.wgsl`.
pub fn stepping_source(precision: Precision, layout_constants: &str) -> String {
    assemble(precision, layout_constants, true)
}

fn assemble(precision: Precision, layout_constants: &str, stepping: bool) -> String {
    let mut s = prelude(precision);
    s.push_str(layout_constants);
    for (name, text) in FILES {
        if name == "step.wgsl" && !stepping {
            continue;
        }
        s.push_str(&format!("\n// ---- {name} ----\n"));
        s.push_str(text);
    }
    s
}
