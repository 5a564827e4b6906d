//! Every WGSL file is validated by naga (no GPU needed): each file on its own (with the prelude,
//! representative layout constants and the files it depends on), and the whole kernel for
//! templates covering every body kind and constraint kind, in f32 and f64.

use simbatch::gpu::Precision;
use simbatch::gpu::layout::Layout;
use simbatch::gpu::shader::{self, FILES, kernel_source, prelude, stepping_source};
use simbatch::model::Baumgarte;
use simbatch::prelude::*;

fn validate(source: &str, what: &str) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(source)));
    let mut validator = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    );
    if let Err(e) = validator.validate(&module) {
        panic!("{what}: {}", e.emit_to_string(source));
    }
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
    t.add_free_body("lonely");
    out.push(("no constraints", t));
    out
}

#[test]
fn every_shader_file_validates_on_its_own() {
    let (_, t) = &templates()[1];
    let constants = Layout::new(t).unwrap().wgsl_constants;
    for precision in [Precision::F32, Precision::F64] {
        for (k, (name, text)) in FILES.iter().enumerate() {
            // Each file may use the files before it (assembly order).
            let mut source = prelude(precision) + &constants;
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
            validate(
                &kernel_source(precision, &layout.wgsl_constants),
                &format!("{name} ({precision:?})"),
            );
            validate(
                &stepping_source(precision, &layout.wgsl_constants),
                &format!("{name}, stepping ({precision:?})"),
            );
        }
    }
}

#[test]
fn a_broken_shader_is_reported_not_accepted() {
    let (_, t) = &templates()[0];
    let layout = Layout::new(t).unwrap();
    let broken = kernel_source(Precision::F32, &layout.wgsl_constants).replace(
        "let r_p = body.rotation * point;",
        "let r_p = body.rotation * true;",
    );
    assert!(
        naga::front::wgsl::parse_str(&broken).is_err() || {
            let m = naga::front::wgsl::parse_str(&broken).unwrap();
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&m)
            .is_err()
        }
    );
}
