//! Shared parameters folded into the generated kernels (`Layout::fold_shared`), checked on the
//! kernel text naga reads (no GPU needed): each folded value is a constant of the bits the
//! upload gives it, and a free body whose folded inertia is isotropic gets the dynamics that
//! skip `R I⁻¹ Rᵀ` and the gyroscopic term (`Layout::isotropic_inertia`); `tests/gpu/step/`
//! runs both against the CPU.

use super::shaders::validate;
use simbatch::batch::{Column, FreeField};
use simbatch::gpu::Precision;
use simbatch::gpu::layout::Layout;
use simbatch::gpu::shader::stepping_source;

/// Shared parameter columns folded into the kernels (`Layout::fold_shared`): each value becomes
/// a constant of exactly the bits the upload gives it (`as f32` in f32 kernels, the f64 itself
/// in f64 kernels; −0.0 and an f32 subnormal included), a value beyond f32's range and the
/// state are read from the buffer instead, the kernels validate, and the layout serves a batch
/// only while it holds the folded values.
#[test]
fn shared_parameters_fold_into_constants_of_the_uploaded_bits() {
    let mut batch = simbatch::scenarios::rolling_balls(4).unwrap();
    let ball = batch.template().free_bodies()[0];
    let (mass, com) = (0.1, [-0.0, 1e-40, 0.3]);
    let inertia = [0.004, 0.0041, 0.0043, 1e-5, -2e-5, 0.0];
    for i in 0..4 {
        batch
            .set_mass_properties(ball, i, mass, com, inertia)
            .unwrap();
        batch.set_applied_force(ball, i, [1e39, 0.0, 0.0]).unwrap();
    }
    assert!(batch.share_uniform_columns() >= 3);
    let mut layout = Layout::for_batch(&batch).unwrap();
    layout.fold_shared(&batch);
    let column = |field| *layout.input(Column::Free { slot: 0, field }).unwrap();
    for field in [FreeField::Mass, FreeField::Com, FreeField::Inertia] {
        assert!(column(field).shared && column(field).folded, "{field:?}");
    }
    let force = column(FreeField::AppliedForce);
    assert!(
        force.shared && !force.folded,
        "1e39 N is beyond f32: read, not folded"
    );
    assert!(!column(FreeField::Q).folded && !column(FreeField::U).folded);
    let expected: Vec<f64> = [mass].iter().chain(&com).chain(&inertia).copied().collect();
    assert!(
        layout.folded_values.windows(expected.len()).any(|w| w
            .iter()
            .zip(&expected)
            .all(|(a, b)| a.to_bits() == b.to_bits())),
        "{:?}",
        layout.folded_values
    );

    for precision in [Precision::F32, Precision::F64] {
        let source = stepping_source(precision, &layout, 64, 1, false);
        validate(&source.text, "folded kernel");
        let force_read = format!("read_input({}u, 3u, i, 0u)", force.prefix);
        assert!(source.text.contains(&force_read), "the force is read");
        // The constants naga made of the parameter copy's fills, as bits.
        let module = naga::front::wgsl::parse_str(&source.text).unwrap();
        let (_, fill) = module
            .functions
            .iter()
            .find(|(_, f)| f.name.as_deref() == Some("cache_parameters"))
            .unwrap();
        let constants: Vec<u64> = fill
            .expressions
            .iter()
            .filter_map(|(_, e)| match e {
                naga::Expression::Literal(naga::Literal::F32(v)) => Some(u64::from(v.to_bits())),
                naga::Expression::Literal(naga::Literal::F64(v)) => Some(v.to_bits()),
                _ => None,
            })
            .collect();
        for v in &expected {
            let bits = match precision {
                Precision::F32 => u64::from((*v as f32).to_bits()),
                Precision::F64 => v.to_bits(),
            };
            assert!(
                constants.contains(&bits),
                "{precision:?}: {v:e} not folded to the uploaded bits {bits:#x}"
            );
        }
    }

    // The layout serves the batch while its folded values hold, bit for bit.
    assert!(layout.serves(&batch));
    let mut same = batch.clone();
    same.set_mass_properties(ball, 2, mass, com, inertia)
        .unwrap();
    assert!(layout.serves(&same), "the same values written again");
    let mut other = batch.clone();
    for i in 0..4 {
        other
            .set_mass_properties(ball, i, mass, [0.0, 1e-40, 0.3], inertia)
            .unwrap();
    }
    other.share_uniform_columns();
    assert!(!layout.serves(&other), "+0.0 where −0.0 was folded");
    assert!(!layout.unshared().inputs.iter().any(|c| c.folded));
    assert!(layout.unshared().folded_values.is_empty());
}

/// The layout of `batch` (its shared columns folded when `fold`, as `GpuOptions::fold_shared`
/// does by default) and the call its f32 stepping kernel's `assemble_bodies` makes for the ball.
fn ball_call(batch: &simbatch::batch::Batch, fold: bool) -> (Layout, String) {
    let mut layout = Layout::for_batch(batch).unwrap();
    if fold {
        layout.fold_shared(batch);
    }
    let source = stepping_source(Precision::F32, &layout, 64, 1, false);
    validate(&source.text, "isotropic kernel");
    let call = source
        .text
        .lines()
        .find(|l| l.trim_start().starts_with("add_free_body(&out"))
        .unwrap()
        .trim()
        .to_string();
    (layout, call)
}

/// A free body's inertia is treated as isotropic (`add_free_body(…, true)`: `R I⁻¹ Rᵀ = I⁻¹`,
/// no gyroscopic term) exactly when the kernel holds it as the constants `[k, k, k, 0, 0, 0]`:
/// a shared, folded, uniform ball's (−0.0 products included). Unequal moments in the last bit,
/// a product of inertia, a per-instance inertia or folding turned off give the general
/// dynamics.
#[test]
fn only_a_folded_isotropic_inertia_skips_the_rotation_of_the_inertia() {
    let balls = |inertia: &dyn Fn(usize) -> [f64; 6]| {
        let mut batch = simbatch::scenarios::rolling_balls(4).unwrap();
        let ball = batch.template().free_bodies()[0];
        for i in 0..4 {
            batch
                .set_mass_properties(ball, i, 0.7, [0.01, -0.02, 0.005], inertia(i))
                .unwrap();
        }
        batch.share_uniform_columns();
        batch
    };
    let inertia = Column::Free {
        slot: 0,
        field: FreeField::Inertia,
    };
    let k: f64 = 0.0028;
    let next = f64::from_bits(k.to_bits() + 1);
    for (what, batch, fold, isotropic) in [
        ("k 1", balls(&|_| [k, k, k, 0.0, 0.0, 0.0]), true, true),
        (
            "−0.0 products",
            balls(&|_| [k, k, k, -0.0, 0.0, -0.0]),
            true,
            true,
        ),
        (
            "Izz one ulp off",
            balls(&|_| [k, k, next, 0.0, 0.0, 0.0]),
            true,
            false,
        ),
        (
            "Iyz ≠ 0",
            balls(&|_| [k, k, k, 0.0, 0.0, 1e-9]),
            true,
            false,
        ),
        (
            "not folded",
            balls(&|_| [k, k, k, 0.0, 0.0, 0.0]),
            false,
            false,
        ),
        (
            "per instance",
            balls(&|i| [k, k, k, 0.0, 0.0, 0.0].map(|v| v * (1.0 + i as f64))),
            true,
            false,
        ),
    ] {
        let (layout, call) = ball_call(&batch, fold);
        assert_eq!(layout.isotropic_inertia(0), isotropic, "{what}");
        assert!(
            call.ends_with(&format!(", {isotropic});")),
            "{what}: {call}"
        );
        let folded = layout.folded_row(inertia);
        assert_eq!(folded.is_some(), fold && what != "per instance", "{what}");
    }
    // The template has one free body: no slot 1 to call isotropic.
    let (layout, _) = ball_call(&balls(&|_| [k, k, k, 0.0, 0.0, 0.0]), true);
    assert!(!layout.isotropic_inertia(1));
}
