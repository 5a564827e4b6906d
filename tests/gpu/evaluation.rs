//! The GPU path against the f64 CPU reference and Simbody's golden files (`physics.md` §7).
//! These run on whatever adapter wgpu finds — lavapipe (CPU Vulkan) in CI. With `CI=true` and
//! no adapter they fail; elsewhere they say so and pass.
//!
//! Tolerances, and why: f32 kernels agree with the CPU within `2e-4 · max(1, |b|)` on every
//! quantity (the contract's bound), except where rows are redundant: there λ itself is only
//! defined through a rank decision, so λ is held to `2e-3 · max(1, |b|)` while u̇ and the total
//! constraint force keep the contract's bound. f64 kernels agree within the CPU's own golden
//! bound, 1e-9. Vector quantities (forces, contact points) are compared per component relative
//! to the vector's magnitude, and the acceleration error at the solved u̇ — a residual
//! `G u̇ + k ≈ 0` — relative to the size of the terms it cancels (`golden::Report` documents
//! both).

use std::sync::Arc;

use crate::common;
use common::{device, golden_dir};

use simbatch::golden::{self, Report, compare_evaluations};
use simbatch::gpu::layout::Layout;
use simbatch::prelude::*;

const F32_TOL: f64 = 2e-4;
const F32_REDUNDANT_LAMBDA_TOL: f64 = 2e-3;
const F64_TOL: f64 = 1e-9;

use simbatch::scenarios::{ContactKind as Kind, PlaneBody, contact_batch, point_to_ground_batch};

fn random_contact_batch(
    kind: Kind,
    plane: PlaneBody,
    n: usize,
    seed: u64,
) -> (Batch, ConstraintId) {
    let (batch, _, c) = contact_batch(kind, plane, n, seed).unwrap();
    (batch, c)
}

/// The evaluation kernel for `batch` with the default options.
fn gpu_evaluator(device: &Arc<GpuDevice>, batch: &Batch, precision: Precision) -> GpuEvaluator {
    GpuEvaluator::new(device.clone(), batch, precision, GpuOptions::default()).unwrap()
}

fn gpu_evaluation(device: &Arc<GpuDevice>, batch: &Batch, precision: Precision) -> Evaluation {
    gpu_evaluator(device, batch, precision)
        .evaluate(batch)
        .unwrap()
}

/// Where rows are redundant: every quantity of `report` within `tol` but the multipliers (a
/// rank decision), which are held to `lambda_tol`.
fn assert_redundant_bounds(name: &str, report: &Report, tol: f64, lambda_tol: f64) {
    for (q, w) in &report.worst {
        let limit = if q.contains("multipliers") {
            lambda_tol
        } else {
            tol
        };
        assert!(
            w.relative <= limit,
            "{name}: {q}: {} at {}",
            w.relative,
            w.location
        );
    }
}

fn assert_report(name: &str, report: &Report) {
    println!("{name}:\n{report}");
    assert!(report.passed(), "{name}:\n{report}");
}

#[test]
fn gpu_f32_matches_cpu_on_random_instances_for_every_kind_and_plane_body() {
    let Some(device) = device() else { return };
    for (k, kind) in [Kind::RollingSphere, Kind::SlidingSphere, Kind::Point]
        .into_iter()
        .enumerate()
    {
        for (p, plane) in [
            PlaneBody::Ground,
            PlaneBody::Free,
            PlaneBody::Prescribed,
            PlaneBody::Tilting,
            PlaneBody::Polynomial,
        ]
        .into_iter()
        .enumerate()
        {
            let (batch, _) =
                random_contact_batch(kind, plane, 10_000, 1000 + 10 * k as u64 + p as u64);
            let cpu = batch.evaluate();
            let gpu = gpu_evaluation(&device, &batch, Precision::F32);
            let mut report = Report::default();
            compare_evaluations(&gpu, &cpu, F32_TOL, &mut report).unwrap();
            assert_report(&format!("{kind:?} on {plane:?} plane, f32"), &report);
        }
    }
}

#[test]
fn gpu_f32_matches_cpu_on_point_to_ground_contacts() {
    let Some(device) = device() else { return };
    for (normals, position_level, baumgarte) in [
        (1, false, false),
        (2, true, true),
        (3, false, true),
        (3, true, false),
    ] {
        let (batch, _, _) = point_to_ground_batch(
            10_000,
            77 + normals as u64,
            normals,
            position_level,
            baumgarte,
        )
        .unwrap();
        let cpu = batch.evaluate();
        let gpu = gpu_evaluation(&device, &batch, Precision::F32);
        let mut report = Report::default();
        compare_evaluations(&gpu, &cpu, F32_TOL, &mut report).unwrap();
        assert_report(
            &format!(
                "point_to_ground normals={normals} position_level={position_level} baumgarte={baumgarte}"
            ),
            &report,
        );
    }
}

/// Redundant rows within the fallback's named-value limit (`gpu::solve::min_norm_fallback`):
/// two frictionless sphere contacts on one plane (2 rows, rank 1) and a rolling sphere with a
/// no-slip point contact at its contact point (6 rows, rank 3). Every instance's certificate
/// fails, so every λ comes from the generated Jacobi sweeps; u̇ and the total constraint force
/// keep the contract's bound, λ (a rank decision) the looser one, and the duplicated rows share
/// their force equally, as the minimum-norm solution does.
#[test]
fn redundant_rows_take_the_generated_minimum_norm_route_on_the_gpu() {
    let Some(device) = device() else { return };
    let n = 2_000;
    const RADIUS: f64 = 0.1;
    let radius = RADIUS;
    let two_spheres = move |template: &mut SystemTemplate, ball| {
        let a = template
            .add_constraint(SphereOnPlaneContact::new(GROUND, ball, false).with_radius(radius))?;
        let b = template
            .add_constraint(SphereOnPlaneContact::new(GROUND, ball, false).with_radius(radius))?;
        Ok::<_, simbatch::Error>(vec![a, b])
    };
    let sphere_and_point = move |template: &mut SystemTemplate, ball| {
        let a = template
            .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(radius))?;
        let b = template.add_constraint(
            PointOnPlaneContact::new(GROUND, ball).with_follower_point([0.0, 0.0, -radius]),
        )?;
        Ok::<_, simbatch::Error>(vec![a, b])
    };
    type Build = dyn Fn(&mut SystemTemplate, BodyId) -> simbatch::Result<Vec<ConstraintId>>;
    // (name, build, whether the ball is turned: the point contact's body point is the contact
    // point only while the ball's axes are Ground's).
    let cases: [(&str, &Build, bool); 2] = [
        ("two frictionless spheres", &two_spheres, true),
        ("rolling sphere and no-slip point", &sphere_and_point, false),
    ];
    for (name, build, turned) in cases {
        let mut template = SystemTemplate::new();
        let ball = template.add_free_body("ball");
        let constraints = build(&mut template, ball).unwrap();
        let mut batch = Batch::new(template, n).unwrap();
        for i in 0..n {
            let x = i as f64 / n as f64;
            // The ball touching the plane, turned and moving: the rows are redundant at every
            // state, the right-hand sides consistent.
            let (s, c) = (0.5 * (3.0 * x).sin(), 0.5 * (3.0 * x).cos());
            let norm = (c * c + s * s + 0.09).sqrt();
            let q = if turned {
                [c / norm, s / norm, 0.3 / norm, 0.0]
            } else {
                [1.0, 0.0, 0.0, 0.0]
            };
            batch
                .set_q(ball, i, [q[0], q[1], q[2], q[3], x, -x, radius])
                .unwrap();
            batch
                .set_u(ball, i, [x - 0.5, 0.3 * x, 1.0 - x, 0.2, -0.1 * x, 0.0])
                .unwrap();
        }
        let cpu = batch.evaluate();
        let gpu = gpu_evaluation(&device, &batch, Precision::F32);
        let mut report = Report::default();
        compare_evaluations(&gpu, &cpu, F32_REDUNDANT_LAMBDA_TOL, &mut report).unwrap();
        assert_redundant_bounds(name, &report, F32_TOL, F32_REDUNDANT_LAMBDA_TOL);
        assert_report(name, &report);
        // Duplicated rows share their force equally (the minimum-norm λ): the two constraints
        // report (λx, λy, λz) of the same sizes (a kind's row may point the other way).
        let first = gpu.constraint(constraints[0]).unwrap();
        let second = gpu.constraint(constraints[1]).unwrap();
        for i in (0..n).step_by(97) {
            let (a, b) = (
                first.multipliers_of(i).unwrap(),
                second.multipliers_of(i).unwrap(),
            );
            let scale = a.iter().chain(b).fold(1.0f64, |m, x| m.max(x.abs()));
            for k in 0..3 {
                assert!(
                    (a[k].abs() - b[k].abs()).abs() <= F32_REDUNDANT_LAMBDA_TOL * scale,
                    "{name} {i}: {a:?} vs {b:?}"
                );
            }
            assert!(
                a[2].abs() > 0.1,
                "{name} {i}: the normal rows carry load: {a:?}"
            );
        }
    }
}

#[test]
fn gpu_jacobians_and_bias_match_cpu() {
    let Some(device) = device() else { return };
    let (batch, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Free, 2000, 5);
    let mut e = gpu_evaluator(&device, &batch, Precision::F32);
    let (_, jac) = e.evaluate_with_jacobians(&batch).unwrap();
    let nu = batch.template().nu();
    let mut report = Report::default();
    for i in 0..batch.len() {
        let sys = batch.instance_system(i).unwrap();
        if sys.rows() == 0 {
            continue;
        }
        let g: Vec<f64> = sys.jacobian.transpose().as_slice().to_vec();
        report.check_slice(
            "G",
            &format!("instance {i}"),
            &jac.jacobian[0][i * 3 * nu..(i + 1) * 3 * nu],
            &g,
            F32_TOL,
        );
        report.check_slice(
            "k",
            &format!("instance {i}"),
            &jac.bias_acceleration[0][i * 3..(i + 1) * 3],
            sys.bias_acceleration.as_slice(),
            F32_TOL,
        );
    }
    report.records = batch.len();
    assert_report("G and k", &report);
}

/// Simbody's golden files through the GPU: f32 within the contract's f32 bound, f64 within the
/// CPU's.
#[test]
fn gpu_matches_simbody_golden_files() {
    let Some(device) = device() else { return };
    let records = golden::read_dir(&golden_dir()).unwrap();
    let mut groups: std::collections::BTreeMap<String, Vec<&golden::Record>> = Default::default();
    for r in &records {
        groups
            .entry(golden::group_key(r).unwrap())
            .or_default()
            .push(r);
    }
    let mut precisions = vec![(Precision::F32, F32_TOL)];
    if device.supports_f64 {
        precisions.push((Precision::F64, F64_TOL));
    }
    for (precision, tol) in precisions {
        let mut report = Report::default();
        for group in groups.values() {
            match group[0].kind().unwrap() {
                "sphere_on_plane" | "point_on_plane" => {
                    let (batch, handles) = golden::contact_batch(group).unwrap();
                    let ev = gpu_evaluation(&device, &batch, precision);
                    golden::compare_contact(group, &batch, &handles, &ev, tol, &mut report)
                        .unwrap();
                }
                "brick_on_corners" => {
                    let (batch, handles) = golden::brick_batch(group).unwrap();
                    let ev = gpu_evaluation(&device, &batch, precision);
                    // Redundant rows: u̇ to the bound, λ (a rank decision) to the looser one.
                    let mut udot_report = Report::default();
                    golden::compare_brick(group, &handles, &ev, tol, &mut udot_report).unwrap();
                    let lambda_tol = if precision == Precision::F32 {
                        F32_REDUNDANT_LAMBDA_TOL
                    } else {
                        tol
                    };
                    let mut lambda_report = Report::default();
                    golden::compare_brick(group, &handles, &ev, lambda_tol, &mut lambda_report)
                        .unwrap();
                    assert_redundant_bounds(
                        &format!("{precision:?}"),
                        &udot_report,
                        tol,
                        lambda_tol,
                    );
                    report.merge(lambda_report);
                }
                _ => {}
            }
        }
        assert_report(&format!("golden files on the GPU, {precision:?}"), &report);
    }
}

#[test]
fn gpu_f64_matches_cpu_to_the_cpu_bound() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        eprintln!("adapter has no SHADER_F64; f64 parity not run");
        return;
    }
    let (batch, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Prescribed, 3000, 9);
    let cpu = batch.evaluate();
    let gpu = gpu_evaluation(&device, &batch, Precision::F64);
    let mut report = Report::default();
    compare_evaluations(&gpu, &cpu, F64_TOL, &mut report).unwrap();
    assert_report("f64 rolling sphere on prescribed plane", &report);
}

/// A batch larger than the binding limit is split into chunks; results are bit-identical to one
/// chunk (the kernel is the same per instance) and match the CPU.
#[test]
fn chunked_batches_give_the_same_results() {
    let Some(device) = device() else { return };
    let (batch, _) = random_contact_batch(Kind::Point, PlaneBody::Free, 5000, 21);
    // The binding holds 700 instances' per-instance columns and one row of the shared ones;
    // each instance's outputs are wider than its inputs, so a chunk's outputs take several
    // slices of at most the binding size.
    let layout = Layout::for_batch(&batch).unwrap();
    assert!(layout.shared_width > 0 && layout.output_width > layout.varying_width);
    let per_instance = (layout.varying_width * 4) as u64;
    let small = GpuOptions {
        max_binding_bytes: Some(per_instance * 700 + layout.shared_width as u64 * 4),
        ..GpuOptions::default()
    };
    let mut chunked = GpuEvaluator::new(device.clone(), &batch, Precision::F32, small).unwrap();
    let a = chunked.evaluate(&batch).unwrap();
    assert_eq!(chunked.chunk_capacity(), 700);
    assert_eq!(chunked.chunk_count(), 8);
    let per_slice =
        (per_instance * 700 + layout.shared_width as u64 * 4) as usize / (layout.output_width * 4);
    assert_eq!(
        chunked.slice_count(),
        7 * 700usize.div_ceil(per_slice) + 100usize.div_ceil(per_slice)
    );
    let whole = gpu_evaluation(&device, &batch, Precision::F32);
    assert_eq!(a, whole, "chunking must not change a single bit");
    // Reusing an evaluation's allocations, also across batch sizes and templates, changes nothing.
    let mut reused = whole.clone();
    let (other, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Ground, 123, 2);
    GpuEvaluator::new(
        device.clone(),
        &other,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap()
    .evaluate_into(&other, &mut reused)
    .unwrap();
    assert_eq!(reused, gpu_evaluation(&device, &other, Precision::F32));
    chunked.evaluate_into(&batch, &mut reused).unwrap();
    assert_eq!(reused, whole);
    let mut report = Report::default();
    compare_evaluations(&a, &batch.evaluate(), F32_TOL, &mut report).unwrap();
    assert_report("chunked", &report);
}

/// Buffers persist: a second call uploads nothing, a changed column alone is re-sent, and the
/// results follow the change.
#[test]
fn only_changed_columns_are_uploaded() {
    let Some(device) = device() else { return };
    let (mut batch, c) = random_contact_batch(Kind::RollingSphere, PlaneBody::Ground, 1000, 3);
    let mut e = gpu_evaluator(&device, &batch, Precision::F32);
    e.evaluate(&batch).unwrap();
    let full = e.last_upload_bytes();
    assert!(full > 0);
    e.evaluate(&batch).unwrap();
    assert_eq!(e.last_upload_bytes(), 0);
    batch.set_param(c, "radius", 10, &[0.25]).unwrap();
    let ev = e.evaluate(&batch).unwrap();
    assert_eq!(
        e.last_upload_bytes(),
        1000 * 4,
        "only the radius column moves"
    );
    let mut report = Report::default();
    compare_evaluations(&ev, &batch.evaluate(), F32_TOL, &mut report).unwrap();
    assert_report("after a change", &report);
}

#[test]
fn non_finite_instance_is_flagged_and_isolated_on_the_gpu() {
    let Some(device) = device() else { return };
    let (mut batch, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Ground, 200, 4);
    let ball = BodyId::new(1);
    batch
        .set_u(ball, 17, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    let cpu = batch.evaluate();
    let gpu = gpu_evaluation(&device, &batch, Precision::F32);
    assert_ne!(gpu.status[17], status::OK);
    assert!(gpu.udot_of(17).unwrap().iter().all(|x| x.is_nan()));
    assert_eq!(gpu.flagged(), 1);
    let mut report = Report::default();
    compare_evaluations(&gpu, &cpu, F32_TOL, &mut report).unwrap_or(());
    for i in (0..200).filter(|i| *i != 17) {
        assert_eq!(gpu.status[i], status::OK);
    }
}

#[test]
fn evaluator_backends_and_env_override() {
    assert_eq!("CPU".parse::<Backend>().unwrap(), Backend::Cpu);
    assert!(matches!(
        "tpu".parse::<Backend>(),
        Err(Error::BadChoice {
            what: "backend",
            ..
        })
    ));
    let (batch, _) = random_contact_batch(Kind::SlidingSphere, PlaneBody::Ground, 100, 8);
    let mut cpu = Evaluator::new(Backend::Cpu).unwrap();
    assert_eq!(cpu.evaluate(&batch).unwrap(), batch.evaluate());
    if device().is_some() {
        let mut gpu = Evaluator::new(Backend::Gpu).unwrap();
        assert_eq!(gpu.backend(), Backend::Gpu);
        let mut report = Report::default();
        compare_evaluations(
            &gpu.evaluate(&batch).unwrap(),
            &batch.evaluate(),
            F32_TOL,
            &mut report,
        )
        .unwrap();
        assert_report("Evaluator(Gpu)", &report);
        // A selection of outputs keeps the full evaluation's bits for what it selects and
        // leaves the rest empty, refusing to read it.
        let full = gpu.evaluate(&batch).unwrap();
        gpu.set_outputs(Outputs::DYNAMICS);
        let selected = gpu.evaluate(&batch).unwrap();
        assert_eq!(selected.outputs, Outputs::DYNAMICS);
        assert_eq!(selected.status, full.status);
        assert_eq!(selected.udot, full.udot);
        assert!(selected.udot_unconstrained.is_empty());
        let (s, f) = (&selected.constraints[0], &full.constraints[0]);
        assert_eq!(s.multipliers, f.multipliers);
        assert!(s.position_errors.is_empty() && s.body_forces.is_empty());
        assert!(s.contact_point.is_none() && s.separation.is_none());
        assert!(matches!(
            s.position_errors_of(0),
            Err(Error::OutputNotSelected {
                output: "position_errors"
            })
        ));
        gpu.set_outputs(Outputs::ALL);
        // Auto takes a hardware GPU and passes over a software one (lavapipe) with a note.
        let auto = Evaluator::new(Backend::Auto).unwrap();
        let software = simbatch::backend::is_software(&device().unwrap());
        if software {
            assert_eq!(auto.backend(), Backend::Cpu);
            assert!(
                auto.note().unwrap().contains("software"),
                "{:?}",
                auto.note()
            );
            assert!(gpu.note().unwrap().contains("software rasterizer"));
        } else {
            assert_eq!(auto.backend(), Backend::Gpu);
        }
    }
}

/// Every column of `e` as bits, in a fixed order, with whether `outputs` selects it (the
/// contact columns under `contact`).
fn selected_columns(e: &Evaluation, outputs: &Outputs) -> Vec<(bool, Vec<u64>)> {
    let b = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let flat = |v: &[[f64; 3]]| v.iter().flatten().copied().collect::<Vec<_>>();
    let mut out = vec![
        (outputs.udot, b(&e.udot)),
        (outputs.udot_unconstrained, b(&e.udot_unconstrained)),
    ];
    for c in &e.constraints {
        let forces: Vec<f64> = c.body_forces.iter().flatten().copied().collect();
        let mut contact = c.contact_point.as_deref().map(flat).unwrap_or_default();
        contact.extend(c.separation.clone().unwrap_or_default());
        contact.extend(c.contact_force.as_deref().map(flat).unwrap_or_default());
        out.extend([
            (outputs.position_errors, b(&c.position_errors)),
            (outputs.velocity_errors, b(&c.velocity_errors)),
            (outputs.acceleration_errors, b(&c.acceleration_errors)),
            (outputs.multipliers, b(&c.multipliers)),
            (outputs.body_forces, b(&forces)),
            (outputs.power, b(&c.power)),
            (outputs.contact, b(&contact)),
        ]);
    }
    out
}

/// The GPU reads back and converts only the selected outputs: each selection fills exactly its
/// columns, with the full evaluation's bits (a non-finite instance's NaNs included), leaves the
/// others empty, and a reused result keeps nothing stale from a wider call.
#[test]
fn selected_outputs_on_the_gpu_are_the_full_evaluations_bits() {
    let Some(device) = device() else { return };
    let (mut batch, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Ground, 150, 6);
    batch
        .set_u(BodyId::new(1), 9, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    let mut gpu = gpu_evaluator(&device, &batch, Precision::F32);
    // The reference and the other state read back every output whatever the selection.
    let full = gpu.evaluate_with_jacobians(&batch).unwrap().0;
    assert_eq!(full.flagged(), 1);
    let single = |set: fn(&mut Outputs)| {
        let mut o = Outputs::NONE;
        set(&mut o);
        o
    };
    let selections = [
        single(|o| o.udot = true),
        single(|o| o.udot_unconstrained = true),
        single(|o| o.position_errors = true),
        single(|o| o.velocity_errors = true),
        single(|o| o.acceleration_errors = true),
        single(|o| o.multipliers = true),
        single(|o| o.body_forces = true),
        single(|o| o.power = true),
        single(|o| o.contact = true),
        Outputs::DYNAMICS,
        Outputs::NONE,
        Outputs::ALL,
    ];
    // Before each selection the staging buffer is filled with another state's every output,
    // so a selected column left out of the readback cannot pass on the last call's values.
    let body = BodyId::new(1);
    let u: Vec<[f64; 6]> = (0..batch.len())
        .map(|i| batch.instance_state(i).unwrap().u[0])
        .collect();
    let mut out = Evaluation::default();
    for outputs in selections {
        for (i, u) in u.iter().enumerate() {
            batch.set_u(body, i, u.map(|x| 2.0 * x + 0.5)).unwrap();
        }
        let other = gpu.evaluate_with_jacobians(&batch).unwrap().0;
        assert_ne!(other.udot, full.udot);
        for (i, u) in u.iter().enumerate() {
            batch.set_u(body, i, *u).unwrap();
        }
        gpu.evaluate_outputs_into(&batch, outputs, &mut out)
            .unwrap();
        assert_eq!(out.outputs, outputs);
        // Only the status and the selected columns moved: the rolling sphere's u̇ and u̇₀ are
        // 6 values, its λ and each per-row output 3, its body forces 12, its contact report 7.
        let values = 1 + [
            (outputs.udot, 6),
            (outputs.udot_unconstrained, 6),
            (outputs.position_errors, 3),
            (outputs.velocity_errors, 3),
            (outputs.acceleration_errors, 3),
            (outputs.multipliers, 3),
            (outputs.body_forces, 12),
            (outputs.power, 1),
            (outputs.contact, 7),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, w)| w)
        .sum::<u64>();
        assert_eq!(
            gpu.last_readback_bytes(),
            values * 4 * batch.len() as u64,
            "{outputs:?}"
        );
        assert_eq!(out.status, full.status, "{outputs:?}: status");
        // The non-finite instance has no solution: NaN in what is selected, as on the CPU.
        if outputs.udot {
            assert!(out.udot_of(9).unwrap().iter().all(|x| x.is_nan()));
        }
        if outputs.multipliers {
            let lambda = out.constraints[0].multipliers_of(9).unwrap();
            assert!(lambda.iter().all(|x| x.is_nan()));
        }
        let want = selected_columns(&full, &Outputs::ALL);
        for (k, ((on, got), (_, want))) in selected_columns(&out, &outputs)
            .iter()
            .zip(&want)
            .enumerate()
        {
            if *on {
                assert_eq!(got, want, "{outputs:?}: column {k}");
            } else {
                assert!(got.is_empty(), "{outputs:?}: column {k} left empty");
            }
        }
    }
}
