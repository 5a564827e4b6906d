//! WGSL generated per template: the kernels' walks over the template's bodies and constraints,
//! unrolled into straight-line code with every body index, mobility column, input prefix and
//! flag spelled as a literal.
//!
//! `shaders/evaluate.wgsl` and `shaders/step.wgsl` hold the physics as functions of one body or
//! one constraint (`add_free_body`, `add_constraint_rows`, `free_body_rates`, …). The code
//! generated here calls them once per body or constraint of the template, and calls each
//! constraint's and motion law's own WGSL expression (`Constraint::wgsl`, `MotionLaw::wgsl`)
//! directly, from a function of its own. The kernels therefore carry no table of the template
//! and no loop or switch over its bodies or constraints: what the template does not have is not
//! in the text (no Ground branch, no prescribed-body load in a template without one), and the
//! shader compiler sees constants where the table-driven kernels had lookups. Offsets inside a
//! body's or a constraint's columns stay the layout's named constants (`FREE_Q_AT`,
//! `CONSTRAINT_ENABLED_AT`, …), so host and kernel keep one description of them.

use std::fmt::Write;

use super::layout::{BodyPlacement, Layout, WgslSection};
use crate::model::BodyKind;

/// The pieces every kernel of `layout` gets: per driven body its law's parameter loads and
/// motion, per constraint its parameter loads, rows and report, then the walks the evaluation
/// kernel (and the stepping kernel through it) calls: `load_state`, `load_free_bodies`, `assemble_bodies`,
/// `assemble_rows`, `store_constraint_outputs`.
pub fn evaluation_sections(layout: &Layout) -> Vec<WgslSection> {
    let mut sections = Vec::new();
    for (b, body) in layout.bodies.iter().enumerate() {
        let Some(motion) = &body.motion else {
            continue;
        };
        let mut text = params_function(
            &format!("motion_params_{b}"),
            "MOTION_PARAMS_CAP",
            &motion.params,
        );
        let _ = write!(
            text,
            "// Motion of {} of instance i at time t.\n\
             fn prescribed_motion_{b}(i: u32, t: real) -> BodyKinematics {{\n    \
             let p = motion_params_{b}(i);\n    return {};\n}}\n",
            describe(body, b),
            motion.evaluate
        );
        sections.push(WgslSection {
            name: format!(
                "generated motion of body {:?} ({}, `MotionLaw::wgsl`)",
                body.name, motion.law
            ),
            text,
        });
    }
    for (c, placement) in layout.placements.iter().enumerate() {
        let mut text = params_function(
            &format!("constraint_params_{c}"),
            "PARAMS_CAP",
            &placement.params,
        );
        let _ = write!(
            text,
            "// Rows of constraint {c} ({}) of instance i.\n\
             fn constraint_rows_{c}(i: u32, a: BodyKinematics, b: BodyKinematics) -> array<Row, 3> {{\n    \
             let p = constraint_params_{c}(i);\n    return {};\n}}\n",
            placement.kind, placement.evaluate
        );
        let report = match &placement.report {
            Some(report) => format!("let p = constraint_params_{c}(i);\n    return {report};"),
            None => "return ContactReport();".into(),
        };
        let _ = write!(
            text,
            "// Report of constraint {c} of instance i given its multipliers.\n\
             fn constraint_report_{c}(i: u32, a: BodyKinematics, b: BodyKinematics, multipliers: vec3<real>) -> ContactReport {{\n    \
             {report}\n}}\n"
        );
        sections.push(WgslSection {
            name: format!(
                "generated constraint {c} ({}, `Constraint::wgsl`)",
                placement.kind
            ),
            text,
        });
    }
    sections.push(WgslSection {
        name: "generated walks over the bodies and constraints (evaluation)".into(),
        text: [
            load_state(layout),
            load_free_bodies(layout),
            assemble_bodies(layout),
            assemble_rows(layout),
            store_constraint_outputs(layout),
        ]
        .concat(),
    });
    sections
}

/// The walks only the stepping kernel calls (`shaders/step.wgsl`): the rates and powers of the
/// derivative, the state's renormalisation, error estimate, Euler update, projection updates
/// and write-back.
pub fn stepping_sections(layout: &Layout) -> Vec<WgslSection> {
    let moving: Vec<(usize, &BodyPlacement)> = layout
        .bodies
        .iter()
        .enumerate()
        .filter(|(_, body)| integrated(body))
        .collect();
    let free: Vec<(usize, &BodyPlacement)> = layout
        .bodies
        .iter()
        .enumerate()
        .filter(|(_, body)| body.kind == BodyKind::Free)
        .collect();
    let mut w = String::new();

    let _ = writeln!(
        w,
        "// ẏ of the integrated bodies at s given u̇: twin of the body loop of `derivative`.\n\
         fn body_rates(i: u32, s: State, udot: array<real, NU_CAP>) -> Derivative {{\n    \
         var d: Derivative;\n    d.ok = true;"
    );
    for (b, body) in &moving {
        let _ = writeln!(w, "    // {}", describe(body, *b));
        if body.kind == BodyKind::Free {
            let _ = writeln!(
                w,
                "    free_body_rates(&d, {b}u, {}u, s.quaternion[{b}u], s.ang_vel[{b}u], s.lin_vel[{b}u], udot);",
                6 * body.slot
            );
        } else {
            let _ = writeln!(
                w,
                "    prescribed_body_rates(&d, i, {b}u, {}u, s.quaternion[{b}u], s.ang_vel[{b}u], s.lin_vel[{b}u]);",
                body.prefix
            );
        }
    }
    w += "    return d;\n}\n\n";

    let _ = writeln!(
        w,
        "// u of the free bodies (the mobilities G acts on).\n\
         fn mobilities(s: State) -> array<real, NU_CAP> {{\n    var u: array<real, NU_CAP>;"
    );
    for (b, body) in &free {
        let _ = writeln!(
            w,
            "    put_mobilities(&u, {}u, s.ang_vel[{b}u], s.lin_vel[{b}u]);",
            6 * body.slot
        );
    }
    w += "    return u;\n}\n\n";

    let _ = writeln!(
        w,
        "// Σ F · v_com + T · w of the applied loads on the free bodies.\n\
         fn applied_power(i: u32, s: State, kin: array<BodyKinematics, NB_CAP>) -> real {{\n    \
         var power: real = 0.0;"
    );
    for (b, body) in &free {
        let _ = writeln!(
            w,
            "    power += free_applied_power(i, {}u, kin[{b}u].rotation, s.ang_vel[{b}u], s.lin_vel[{b}u]);",
            body.prefix
        );
    }
    w += "    return power;\n}\n\n";

    let _ = writeln!(
        w,
        "// ½ uᵀ M u of the free bodies (the event kernel's energy scale of an impact).\n\
         fn kinetic_energy(i: u32, s: State, kin: array<BodyKinematics, NB_CAP>) -> real {{\n    \
         var energy: real = 0.0;"
    );
    for (b, body) in &free {
        let _ = writeln!(
            w,
            "    energy += free_kinetic_energy(i, {}u, kin[{b}u].rotation, s.ang_vel[{b}u], s.lin_vel[{b}u]);",
            body.prefix
        );
    }
    w += "    return energy;\n}\n\n";

    let _ = writeln!(
        w,
        "// Renormalises the quaternions; false when a value is not finite or a quaternion is zero.\n\
         fn normalize_state(s: ptr<function, State>) -> bool {{\n    var ok = true;"
    );
    for (b, _) in &moving {
        let _ = writeln!(w, "    ok = normalize_body(s, {b}u) && ok;");
    }
    w += "    return ok;\n}\n\n";

    let _ = writeln!(
        w,
        "// Simbody's RKM error estimate between y₁ (a) and ŷ (b) over the integrated bodies.\n\
         fn merson_error(a: State, b: State) -> real {{\n    var e: real = 0.0;"
    );
    for (b, _) in &moving {
        let _ = writeln!(w, "    e = max(e, merson_body_error(a, b, {b}u));");
    }
    w += "    return e;\n}\n\n";

    // The state updates of the integrators, body by body.
    for (signature, call, what) in [
        (
            "advance_bodies(s: ptr<function, State>, h: real, d: Derivative)",
            "advance_body(s, {b}u, h, d)",
            "`advance_state`",
        ),
        (
            "combine_bodies(s: ptr<function, State>, h: real, wa: real, a: Derivative, wb: real, b: Derivative, wc: real, c: Derivative)",
            "combine_body(s, {b}u, h, wa, a, wb, b, wc, c)",
            "`combine_state`",
        ),
        (
            "accumulate_rates(sum: ptr<function, Derivative>, w: real, d: Derivative)",
            "accumulate_body_rates(sum, {b}u, w, d)",
            "RK4's running sum of its stages",
        ),
        (
            "rk4_bodies(s: ptr<function, State>, h: real, sum: Derivative)",
            "rk4_body(s, {b}u, h, sum)",
            "the RK4 update",
        ),
        (
            "euler_bodies(next: ptr<function, State>, state: State, h: real, k1: Derivative)",
            "euler_body(next, {b}u, h, state.quaternion[{b}u], k1.ang_vel[{b}u], k1.lin_vel[{b}u])",
            "the semi-implicit Euler update",
        ),
    ] {
        let _ = writeln!(
            w,
            "// The integrated bodies' part of {what}.\nfn {signature} {{"
        );
        for (b, _) in &moving {
            let _ = writeln!(w, "    {};", call.replace("{b}", &b.to_string()));
        }
        w += "}\n\n";
    }

    for (name, helper, what) in [
        (
            "displace",
            "displace_body",
            "q moved by the velocity-space displacement du",
        ),
        ("correct_velocity", "correct_body_velocity", "u moved by du"),
    ] {
        let _ = writeln!(
            w,
            "// Projection: the free bodies' {what}.\n\
             fn {name}(s: ptr<function, State>, du: array<real, NU_CAP>) {{"
        );
        for (b, body) in &free {
            let _ = writeln!(w, "    {helper}(s, {b}u, {}u, du);", 6 * body.slot);
        }
        w += "}\n\n";
    }

    let _ = writeln!(
        w,
        "// Writes the state back to the input columns (q, u of free bodies; poses, velocities of\n\
         // prescribed ones; a driven body's motion is the host's to write).\n\
         fn store_state(i: u32, s: State) {{\n    store_work(i, s.work);"
    );
    for (b, body) in &moving {
        let (pose, velocity) = state_columns(body);
        let _ = writeln!(
            w,
            "    store_body_state(i, {pose}, {velocity}, s.quaternion[{b}u], s.origin[{b}u], s.ang_vel[{b}u], s.lin_vel[{b}u]);"
        );
    }
    w += "}\n";

    vec![WgslSection {
        name: "generated walks over the bodies (stepping)".into(),
        text: w,
    }]
}

/// Whether the integrators advance the body's state: free bodies and prescribed bodies without
/// a law (at their given acceleration); Ground never moves, a driven body follows its law.
fn integrated(body: &BodyPlacement) -> bool {
    match body.kind {
        BodyKind::Ground => false,
        BodyKind::Free => true,
        BodyKind::Prescribed => body.motion.is_none(),
    }
}

/// The input prefixes of an integrated body's pose (q) and velocity (u) columns, as WGSL.
fn state_columns(body: &BodyPlacement) -> (String, String) {
    let p = body.prefix;
    match body.kind {
        BodyKind::Free => (format!("{p}u + FREE_Q_AT"), format!("{p}u + FREE_U_AT")),
        _ => (
            format!("{p}u + PRESCRIBED_POSE_AT"),
            format!("{p}u + PRESCRIBED_VELOCITY_AT"),
        ),
    }
}

/// `body 1 "ball" (free)`, for the generated code's comments (the name escaped as a Rust
/// string, so it cannot end the comment's line).
fn describe(body: &BodyPlacement, b: usize) -> String {
    let kind = match (body.kind, &body.motion) {
        (BodyKind::Ground, _) => "Ground".to_string(),
        (BodyKind::Free, _) => format!("free, slot {}", body.slot),
        (BodyKind::Prescribed, None) => "prescribed".to_string(),
        (BodyKind::Prescribed, Some(m)) => format!("driven by the {} law", m.law),
    };
    format!("body {b} {:?} ({kind})", body.name)
}

/// `fn name(i) -> array<real, cap>`: the parameter columns `(prefix, width)` of instance i,
/// flattened in order.
fn params_function(name: &str, cap: &str, params: &[(usize, usize)]) -> String {
    let mut loads = String::new();
    let mut at = 0;
    for (prefix, width) in params {
        for j in 0..*width {
            let _ = writeln!(loads, "    p[{at}] = load({prefix}u, {width}u, i, {j}u);");
            at += 1;
        }
    }
    format!(
        "fn {name}(i: u32) -> array<real, {cap}> {{\n    var p: array<real, {cap}>;\n{loads}    return p;\n}}\n"
    )
}

fn load_state(layout: &Layout) -> String {
    let mut w = String::from(
        "// The state as held in the input columns: twin of `InstanceState` (src/cpu/evaluate.rs).\n\
         // Ground's and driven bodies' entries stay zero, unused.\n\
         fn load_state(i: u32) -> State {\n    var s = load_clock(i);\n",
    );
    for (b, body) in layout.bodies.iter().enumerate() {
        if integrated(body) {
            let (pose, velocity) = state_columns(body);
            let _ = writeln!(w, "    // {}", describe(body, b));
            let _ = writeln!(w, "    load_body_state(&s, {b}u, {pose}, {velocity}, i);");
        }
    }
    w + "    return s;\n}\n\n"
}

/// `load_free_bodies(i)`: every free body's per-call values (`load_free_body`), which each
/// entry point forms once after `cache_parameters`, not at every evaluation of the dynamics.
fn load_free_bodies(layout: &Layout) -> String {
    let mut w = String::from(
        "// The free bodies' mass properties, loads and inverses of instance i, once per thread:\n\
         // twin of `Chunk::load_body` (src/cpu/lanes/load.rs).\n\
         fn load_free_bodies(i: u32) {\n",
    );
    for (b, body) in layout.bodies.iter().enumerate() {
        if body.kind == BodyKind::Free {
            let _ = writeln!(
                w,
                "    load_free_body(i, {}u, {}u); // {}",
                body.slot,
                body.prefix,
                describe(body, b)
            );
        }
    }
    w + "}\n\n"
}

fn assemble_bodies(layout: &Layout) -> String {
    let mut w = String::from(
        "// Kinematics of every body, M⁻¹ and f − c of the free ones: the bodies' half of\n\
         // `assemble_with` (src/cpu/evaluate.rs).\n\
         fn assemble_bodies(i: u32, state: State, gravity: vec3<real>) -> AssembledBodies {\n    \
         var out: AssembledBodies;\n",
    );
    for (b, body) in layout.bodies.iter().enumerate() {
        let _ = writeln!(w, "    // {}", describe(body, b));
        let pieces = format!(
            "state.quaternion[{b}u], state.origin[{b}u], state.ang_vel[{b}u], state.lin_vel[{b}u]"
        );
        let _ = match (body.kind, &body.motion) {
            (BodyKind::Ground, _) => writeln!(w, "    out.kin[{b}u] = ground_kinematics();"),
            (BodyKind::Free, _) => writeln!(
                w,
                "    add_free_body(&out, gravity, {b}u, {}u, {pieces}, {});",
                body.slot,
                layout.isotropic_inertia(body.slot)
            ),
            (BodyKind::Prescribed, None) => writeln!(
                w,
                "    add_prescribed_body(&out, i, {b}u, {}u, {pieces});",
                body.prefix
            ),
            (BodyKind::Prescribed, Some(_)) => writeln!(
                w,
                "    add_driven_body(&out, {b}u, prescribed_motion_{b}(i, state.time));"
            ),
        };
    }
    w + "    return out;\n}\n\n"
}

/// The column of body b's first mobility in G, or `NO_COLUMN` for a body without mobilities.
fn mobility_column(layout: &Layout, b: usize) -> String {
    let body = &layout.bodies[b];
    match body.kind {
        BodyKind::Free => format!("{}u", 6 * body.slot),
        _ => "NO_COLUMN".into(),
    }
}

fn assemble_rows(layout: &Layout) -> String {
    let mut w = String::from(
        "// Every constraint's rows, G and the bias: the rows' half of `assemble_with`.\n\
         fn assemble_rows(i: u32, kin: array<BodyKinematics, NB_CAP>, baumgarte: u32) -> AssembledRows {\n    \
         var out: AssembledRows;\n",
    );
    for (c, placement) in layout.placements.iter().enumerate() {
        let [a, b] = placement.bodies;
        // A one-body constraint names its body twice; its block goes into G once.
        let column_b = if b == a {
            "NO_COLUMN".into()
        } else {
            mobility_column(layout, b)
        };
        let _ = writeln!(
            w,
            "    add_constraint_rows(&out, i, constraint_rows_{c}(i, kin[{a}u], kin[{b}u]), {}u, {}u, {}u, {}, {column_b}, {}, baumgarte);",
            placement.rows,
            placement.first_row,
            placement.prefix,
            mobility_column(layout, a),
            placement.baumgarte
        );
    }
    w + "    return out;\n}\n\n"
}

fn store_constraint_outputs(layout: &Layout) -> String {
    let mut w = String::from(
        "// Every constraint's outputs; returns NONFINITE_RESULT when a multiplier is not finite.\n\
         fn store_constraint_outputs(i: u32, solved: ptr<function, Solved>) -> u32 {\n    \
         var status = 0u;\n",
    );
    for (c, (placement, out)) in layout
        .placements
        .iter()
        .zip(&layout.constraints)
        .enumerate()
    {
        let [a, b] = placement.bodies;
        let (n, o) = (placement.rows, out.prefix);
        let _ = writeln!(
            w,
            "    let multipliers_{c} = store_constraint_rows(i, solved, {n}u, {}u, {o}u, {}u);\n    \
             store_contact_report(i, {o}u, {n}u, constraint_report_{c}(i, (*solved).kin[{a}u], (*solved).kin[{b}u], multipliers_{c}));\n    \
             if !finite3(multipliers_{c}) {{\n        status |= NONFINITE_RESULT;\n    }}",
            placement.first_row, out.jacobian_prefix
        );
    }
    w + "    return status;\n}\n"
}
