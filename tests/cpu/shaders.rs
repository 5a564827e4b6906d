//! Every WGSL file is validated by naga (no GPU needed): each file on its own (with the prelude,
//! representative layout constants and the files it depends on), and the whole kernel for
//! templates covering every body kind and constraint kind, in f32 and f64, every stepping
//! variant included; each is also written as SPIR-V.

use simbatch::gpu::Precision;
use simbatch::gpu::codegen;
use simbatch::gpu::layout::{Layout, OutputOrder};
use simbatch::gpu::shader::{
    self, FILES, kernel_source, launch_constants, prelude, stepping_constants, stepping_source,
};
use simbatch::gpu::solve::{
    MAX_STRAIGHT_JACOBI_ROWS, MAX_STRAIGHT_ROWS, min_norm_fallback, solve_multipliers,
};
use simbatch::model::{Baumgarte, BodyKind};
use simbatch::prelude::*;

/// Parses and validates `source` with naga and writes it as SPIR-V; panics naming `what`.
pub(crate) fn validate(source: &str, what: &str) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(source)));
    let mut validator = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    );
    let info = validator
        .validate(&module)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(source)));
    // Valid WGSL can still trip a backend (naga 30's SPIR-V writer panics on pointers to struct
    // members passed to functions): write SPIR-V, the form Vulkan drivers get, as wgpu would.
    naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None)
        .unwrap_or_else(|e| panic!("{what}: SPIR-V: {e}"));
}

fn templates() -> Vec<(&'static str, SystemTemplate)> {
    let mut out = Vec::new();
    let mut t = SystemTemplate::new();
    let b = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(GROUND, b, true))
        .unwrap();
    out.push(("rolling sphere on ground", t));
    let mut t = SystemTemplate::new();
    let p = t.add_free_body("plane");
    let b = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(p, b, false))
        .unwrap();
    out.push(("sliding sphere on free plane", t));
    let mut t = SystemTemplate::new();
    let p = t.add_prescribed_body("table");
    let b = t.add_free_body("point");
    t.add_constraint(PointOnPlaneContact::new(p, b)).unwrap();
    out.push(("point on prescribed plane", t));
    let mut t = SystemTemplate::new();
    let b = t.add_free_body("brick");
    for k in 0..4 {
        let c = t
            .add_constraint(
                PointToGround::new(b, [k as f64, 0.0, 0.0], &[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
                    .unwrap()
                    .position_level(),
            )
            .unwrap();
        t.set_baumgarte(c, Some(Baumgarte::default())).unwrap();
    }
    out.push(("brick on 4 point-to-ground contacts", t));
    let mut t = SystemTemplate::new();
    let p = t.add_driven_body("plate", simbatch::motion::TiltingMotion);
    let b = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(p, b, true))
        .unwrap();
    out.push(("ball on a tilting plate", t));
    let mut t = SystemTemplate::new();
    let p = t.add_driven_body(
        "plate",
        simbatch::motion::PolynomialMotion::new(simbatch::motion::polynomial::MAX_DEGREE).unwrap(),
    );
    let b = t.add_free_body("point");
    t.add_constraint(PointOnPlaneContact::new(p, b)).unwrap();
    out.push(("point on a quintic plate", t));
    let mut t = SystemTemplate::new();
    t.add_free_body("lonely");
    out.push(("no constraints", t));
    out
}

#[test]
fn every_shader_file_validates_on_its_own() {
    let (_, t) = &templates()[1];
    let layout = Layout::new(t).unwrap();
    let constants = layout.wgsl_constants.clone()
        + &launch_constants(64)
        + &OutputOrder::ValueMajor.wgsl_constant()
        + &stepping_constants(2, true);
    // The generated walks, input addressing and multiplier solve, which evaluate.wgsl calls
    // (the walks call the constraint files and evaluate.wgsl's one-body functions), and the
    // stepping walks, which step.wgsl calls.
    let generated: String = layout
        .constraint_sections
        .iter()
        .filter(|s| !s.name.ends_with(".wgsl"))
        .chain(&codegen::evaluation_sections(&layout))
        .map(|s| s.text.as_str())
        .collect::<String>()
        + &min_norm_fallback(layout.rows)
        + &solve_multipliers(layout.rows)
        + &simbatch::gpu::solve::dense_products(layout.rows, layout.nu);
    let stepping: String = codegen::stepping_sections(&layout)
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    for precision in [Precision::F32, Precision::F64] {
        for (k, (name, text)) in FILES.iter().enumerate() {
            // Each file may use the files before it (assembly order).
            let mut source = prelude(precision) + &constants;
            let stepping_file = *name == "step_bodies.wgsl" || *name == "step.wgsl";
            if *name == "evaluate.wgsl" || stepping_file {
                source += &generated;
            }
            if stepping_file {
                source += &stepping;
            }
            for (_, before) in &FILES[..k] {
                source += before;
            }
            source += text;
            validate(&source, &format!("{name} ({precision:?})"));
        }
    }
    assert!(shader::EVALUATE.contains("@compute"));
}

#[test]
fn whole_kernels_validate_for_every_body_and_constraint_kind() {
    for (name, t) in templates() {
        let layout = Layout::new(&t).unwrap();
        for precision in [Precision::F32, Precision::F64] {
            for order in [OutputOrder::InstanceMajor, OutputOrder::ValueMajor] {
                let kernel = kernel_source(precision, &layout, 64, order);
                kernel.check().unwrap();
                assert!(kernel.text.contains(&order.wgsl_constant()));
                validate(&kernel.text, &format!("{name} ({precision:?}, {order:?})"));
            }
            for integrator in 0..3 {
                for projection in [false, true] {
                    validate(
                        &stepping_source(precision, &layout, 64, integrator, projection).text,
                        &format!(
                            "{name}, stepping {integrator}, projection {projection} ({precision:?})"
                        ),
                    );
                }
            }
        }
    }
    // Any workgroup size the adapter allows: the size is the only thing that changes.
    let layout = Layout::new(&templates()[0].1).unwrap();
    for size in [1, 7, 256, 1024] {
        let kernel = kernel_source(Precision::F32, &layout, size, OutputOrder::ValueMajor);
        assert!(kernel.text.contains(&launch_constants(size)));
        validate(&kernel.text, &format!("workgroup size {size}"));
        validate(
            &stepping_source(Precision::F32, &layout, size, 1, true).text,
            &format!("stepping, workgroup size {size}"),
        );
    }
}

#[test]
fn the_generated_multiplier_solve_validates_for_every_row_count() {
    for rows in 0..=MAX_STRAIGHT_ROWS + 1 {
        let solve = solve_multipliers(rows);
        // Straight-line up to the limit (no loop, no runtime index), the Jacobi route beyond:
        // the closed form by cofactors for two and three rows, the Cholesky factor otherwise.
        let straight = (1..=MAX_STRAIGHT_ROWS).contains(&rows);
        let closed_form = rows == 2 || rows == 3;
        assert_eq!(solve.contains("let det = "), closed_form, "{rows} rows");
        assert_eq!(
            solve.contains("let p0 = "),
            straight && !closed_form,
            "{rows} rows"
        );
        assert!(!solve.contains("for ("), "{rows} rows: {solve}");
        // The fallback: named values (no array indexed at run time) up to its own limit.
        let fallback = min_norm_fallback(rows);
        let named = (1..=MAX_STRAIGHT_JACOBI_ROWS).contains(&rows);
        assert_eq!(fallback.contains("var a0_0 = a[0];"), named, "{rows} rows");
        assert_eq!(
            fallback.contains("solve_min_norm_spd"),
            !named,
            "{rows} rows"
        );
        for precision in [Precision::F32, Precision::F64] {
            let cap = rows.max(1);
            let source = prelude(precision)
                + &format!(
                    "const ROWS: u32 = {rows}u;\nconst ROWS_CAP: u32 = {cap}u;\n\
                     const ROWS_ROWS_CAP: u32 = {}u;\n",
                    cap * cap
                )
                + shader::SOLVER
                + &min_norm_fallback(rows)
                + &solve;
            validate(
                &source,
                &format!("solve_multipliers, {rows} rows ({precision:?})"),
            );
        }
    }
}

#[test]
fn a_broken_shader_is_reported_against_its_own_file_and_line() {
    let (_, t) = &templates()[0];
    let layout = Layout::new(t).unwrap();
    let mut kernel = kernel_source(Precision::F32, &layout, 64, OutputOrder::InstanceMajor);
    let line = "    let o_b = ball.rotation * sphere_center;";
    assert!(kernel.text.contains(line));
    kernel.text = kernel
        .text
        .replace(line, "    let o_b: vec3<real> = ball.rotation * true;");
    let expected_line = shader::SPHERE_ON_PLANE
        .lines()
        .position(|l| l == line)
        .unwrap()
        + 1;
    match kernel.check() {
        Err(Error::Wgsl { file, line, .. }) => {
            assert_eq!(file, "sphere_on_plane.wgsl");
            assert_eq!(line, expected_line);
        }
        other => panic!("expected a WGSL error in sphere_on_plane.wgsl, got {other:?}"),
    }
}

/// Host↔kernel offsets come from one description: every `*_AT` constant the layout generates
/// equals the distance of that field's column from its body's (or constraint's) first column,
/// and no shader spells an offset from a prefix itself (`p + 16u`, `c_in[c] + 1u`).
#[test]
fn buffer_offsets_are_generated_never_written_in_wgsl() {
    use simbatch::batch::{Column, FreeField, PrescribedField};
    let (_, t) = templates().remove(2); // a point on a prescribed (constant-law) plane
    let layout = Layout::new(&t).unwrap();
    let constant = |name: &str| -> usize {
        let line = layout
            .wgsl_constants
            .lines()
            .find(|l| l.starts_with(&format!("const {name}: u32 = ")))
            .unwrap_or_else(|| panic!("{name} not generated"));
        line.trim_end_matches("u;")
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let prefix = |c: Column| layout.inputs.iter().find(|i| i.column == c).unwrap().prefix;
    let free = |field| Column::Free { slot: 0, field };
    let prescribed = |field| Column::Prescribed { slot: 0, field };
    for (name, field) in [
        ("FREE_MASS_AT", FreeField::Mass),
        ("FREE_COM_AT", FreeField::Com),
        ("FREE_INERTIA_AT", FreeField::Inertia),
        ("FREE_APPLIED_FORCE_AT", FreeField::AppliedForce),
        ("FREE_APPLIED_TORQUE_AT", FreeField::AppliedTorque),
        ("FREE_Q_AT", FreeField::Q),
        ("FREE_U_AT", FreeField::U),
    ] {
        assert_eq!(
            constant(name),
            prefix(free(field)) - prefix(free(FreeField::Mass)),
            "{name}"
        );
    }
    for (name, field) in [
        ("PRESCRIBED_POSE_AT", PrescribedField::Pose),
        ("PRESCRIBED_VELOCITY_AT", PrescribedField::Velocity),
        ("PRESCRIBED_ACCELERATION_AT", PrescribedField::Acceleration),
    ] {
        let first = prescribed(PrescribedField::Pose);
        assert_eq!(
            constant(name),
            prefix(prescribed(field)) - prefix(first),
            "{name}"
        );
    }
    let enabled = prefix(Column::Enabled(0));
    assert_eq!(constant("CONSTRAINT_ENABLED_AT"), 0);
    assert_eq!(
        constant("CONSTRAINT_BAUMGARTE_AT"),
        prefix(Column::Baumgarte(0)) - enabled
    );
    for (name, text) in FILES {
        for (k, line) in text.lines().enumerate() {
            for pattern in [
                "(p + ",
                "qp = p + ",
                "up = p + ",
                "body_in[b] + ",
                "c_in[c] + ",
            ] {
                if let Some(at) = line.find(pattern) {
                    let rest = &line[at + pattern.len()..];
                    assert!(
                        !rest.starts_with(|c: char| c.is_ascii_digit()),
                        "{name}:{}: an offset written in WGSL: {}",
                        k + 1,
                        line.trim()
                    );
                }
            }
        }
    }
}

/// The kernels are generated per template: no table of the template, no loop or switch over its
/// bodies or constraints; one call per body and constraint with its index, column and prefix as
/// literals, and only the kinds the template has.
#[test]
fn kernels_walk_the_template_in_straight_line_code() {
    for (name, t) in templates() {
        let layout = Layout::new(&t).unwrap();
        let kernel = stepping_source(Precision::F32, &layout, 64, 1, true).text;
        for absent in [
            "switch",
            "< NB;",
            "< NC;",
            "BODY_KIND",
            "C_BODY_A",
            "C_ROWS",
        ] {
            assert!(!kernel.contains(absent), "{name}: {absent:?} in the kernel");
        }
        // Calls, not the definition.
        let calls = |f: &str| {
            kernel.matches(&format!("{f}(")).count() - kernel.matches(&format!("fn {f}(")).count()
        };
        let kinds = |k: BodyKind| t.bodies().iter().filter(|b| b.kind == k).count();
        let driven = t.bodies().iter().filter(|b| b.motion.is_some()).count();
        assert_eq!(calls("add_free_body"), kinds(BodyKind::Free), "{name}");
        assert_eq!(
            calls("add_prescribed_body"),
            kinds(BodyKind::Prescribed) - driven,
            "{name}"
        );
        assert_eq!(calls("add_driven_body"), driven, "{name}");
        assert_eq!(
            calls("add_constraint_rows"),
            t.constraints().len(),
            "{name}"
        );
        // Each integrated body once per update; Ground and driven bodies never.
        let integrated = kinds(BodyKind::Free) + kinds(BodyKind::Prescribed) - driven;
        for f in [
            "load_body_state",
            "store_body_state",
            "rk4_body",
            "normalize_body",
        ] {
            assert_eq!(calls(f), integrated, "{name}: {f}");
        }
    }
    // The brick's four corner contacts, one-body constraints on the brick (body 1, mobilities
    // from column 0): literal rows, prefixes and columns, the brick's block once.
    let (_, t) = templates().remove(3);
    assert_eq!(t.constraints().len(), 4);
    let layout = Layout::new(&t).unwrap();
    let text: String = codegen::evaluation_sections(&layout)
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    for (c, placement) in layout.placements.iter().enumerate() {
        let call = format!(
            "add_constraint_rows(&out, i, constraint_rows_{c}(i, kin[1u], kin[1u]), {}u, {}u, {}u, 0u, NO_COLUMN, true, baumgarte);",
            placement.rows, placement.first_row, placement.prefix
        );
        assert!(text.contains(&call), "{call}\n{text}");
    }
}

/// Each kernel thread's private copy of its parameter columns (`cache_parameters`): every input
/// column but the state (time, work, poses, velocities), in layout order, up to
/// `PARAMETER_SLOTS_CAP` values; a template with more (bricks on four corners) caches what fits,
/// reads the rest from the input buffer, and still validates.
#[test]
fn kernels_cache_every_parameter_column_up_to_the_cap() {
    use simbatch::batch::{Column, FreeField, PrescribedField};
    use simbatch::gpu::layout::PARAMETER_SLOTS_CAP;
    // The parameters, named one by one: what the kernels read and never advance (the match is
    // exhaustive, so a column kind added later has to be placed here).
    let parameter = |c: Column| match c {
        Column::Gravity | Column::Enabled(_) | Column::Baumgarte(_) | Column::Param(..) => true,
        Column::Motion { .. } => true,
        Column::Free { field, .. } => matches!(
            field,
            FreeField::Mass
                | FreeField::Com
                | FreeField::Inertia
                | FreeField::AppliedForce
                | FreeField::AppliedTorque
        ),
        Column::Prescribed { field, .. } => field == PrescribedField::Acceleration,
        Column::Time | Column::Work => false,
    };
    let state = |c: Column| !parameter(c);
    let (bricks, _, _) = simbatch::scenarios::sliding_bricks(4).unwrap();
    let batches = [
        (
            "rolling balls",
            simbatch::scenarios::rolling_balls(4).unwrap(),
        ),
        ("sliding bricks", bricks),
    ];
    let mut capped = false;
    for (name, batch) in &batches {
        let layout = Layout::for_batch(batch).unwrap();
        // The columns that fit, in order, as the kernel should cache them.
        let (mut slots, mut cached) = (0, Vec::new());
        for c in layout.inputs.iter().filter(|c| !state(c.column)) {
            if slots + c.width <= PARAMETER_SLOTS_CAP {
                cached.push(c);
                slots += c.width;
            } else {
                capped = true;
            }
        }
        let source = stepping_source(Precision::F32, &layout, 64, 1, false);
        assert!(
            source
                .text
                .contains(&format!("const PARAMETER_SLOTS: u32 = {slots}u;")),
            "{name}: {slots} slots"
        );
        // One fill per cached value, from that column.
        let fills: Vec<&str> = source
            .text
            .lines()
            .filter(|l| l.trim_start().starts_with("parameters["))
            .collect();
        assert_eq!(fills.len(), slots, "{name}");
        let mut at = 0;
        for c in &cached {
            for k in 0..c.width {
                let expected = format!(
                    "parameters[{at}u] = read_input({}u, {}u, i, {k}u);",
                    c.prefix, c.width
                );
                assert_eq!(fills[at].trim(), expected, "{name}");
                at += 1;
            }
        }
        // No state column is ever served from the copy.
        for c in layout.inputs.iter().filter(|c| state(c.column)) {
            let read = format!("read_input({}u, {}u,", c.prefix, c.width);
            assert!(
                !fills.iter().any(|l| l.contains(&read)),
                "{name}: state column {:?} cached",
                c.column
            );
        }
        validate(&source.text, name);
    }
    assert!(capped, "the bricks' parameters should pass the cap");
}

/// The output columns the readback copies one by one (instance-major pieces) tile the kernel's
/// outputs: no gap, no overlap, and every prefix the host reads is a column's.
#[test]
fn output_columns_tile_the_outputs() {
    for (name, t) in templates() {
        let layout = Layout::new(&t).unwrap();
        let columns = layout.output_columns();
        let mut at = 0;
        for &(prefix, width) in &columns {
            assert_eq!(prefix, at, "{name}: a gap or an overlap at {at}");
            assert!(width > 0, "{name}");
            at += width;
        }
        assert_eq!(at, layout.output_width, "{name}");
        let starts = |p: usize| columns.iter().any(|&(q, _)| q == p);
        assert!(starts(layout.status) && starts(layout.udot) && starts(layout.udot_unconstrained));
        for c in &layout.constraints {
            for p in [
                c.prefix,
                c.multipliers(),
                c.body_forces(),
                c.power(),
                c.contact_point(),
                c.separation(),
                c.contact_force(),
                c.jacobian_prefix,
                c.bias_acceleration(layout.nu),
            ] {
                assert!(starts(p), "{name}: no column starts at {p}");
            }
        }
    }
}
