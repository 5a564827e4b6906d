//! Assembly (RBDL CalcAssemblyQ / CalcAssemblyQDot) and plastic impacts
//! (ComputeConstraintImpulses): tolerances reached from perturbed states, least change,
//! failures reported (not looped on), impulses against closed forms.

use nalgebra::{DMatrix, DVector};
use simbatch::assembly::{
    AssemblyOptions, apply_plastic_impacts, assemble_positions, assemble_velocities,
};
use simbatch::prelude::*;
use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

#[test]
fn position_assembly_reaches_tolerance_from_perturbed_states() {
    for kind in [
        ContactKind::RollingSphere,
        ContactKind::SlidingSphere,
        ContactKind::Point,
    ] {
        for plane in [PlaneBody::Ground, PlaneBody::Free, PlaneBody::Prescribed] {
            let (mut batch, _, c) = contact_batch(kind, plane, 50, 11).unwrap();
            // Random states violate the position constraint by up to about a metre.
            let before = batch.evaluate();
            assert!(max_abs(&before.constraint(c).unwrap().position_errors) > 0.1);
            let q_before: Vec<[f64; 7]> = batch
                .q(BodyId(batch.template().bodies().len() - 1))
                .unwrap()
                .to_vec();
            let report = assemble_positions(&mut batch, &AssemblyOptions::default()).unwrap();
            assert!(
                report.failed.is_empty(),
                "{kind:?}/{plane:?}: failed {:?}",
                report.failed
            );
            assert!(
                report.iterations.iter().all(|n| *n <= 10),
                "{:?}",
                report.iterations
            );
            let after = batch.evaluate();
            let enabled = batch.enabled(c).unwrap();
            for i in (0..50).filter(|i| enabled[*i] == 1) {
                let perr = max_abs(after.constraint(c).unwrap().position_errors_of(i));
                assert!(
                    perr <= 1e-12,
                    "{kind:?}/{plane:?} instance {i}: perr {perr:e}"
                );
            }
            // A disabled constraint is not assembled: instance 5's separation is untouched.
            assert_eq!(enabled[5], 0);
            assert_eq!(
                after.constraint(c).unwrap().position_errors_of(5),
                before.constraint(c).unwrap().position_errors_of(5)
            );
            // Least change: nothing moves that need not (velocities untouched, q moved little
            // compared with the error removed).
            let q_after = batch
                .q(BodyId(batch.template().bodies().len() - 1))
                .unwrap();
            for (a, b) in q_before.iter().zip(q_after) {
                assert!(
                    a.iter().zip(b).all(|(x, y)| (x - y).abs() < 3.0),
                    "moved too far"
                );
            }
        }
    }
}

/// Two body points held at ground points much farther apart than the points are: no
/// configuration satisfies both. Newton stops at the cap and reports; the other instance, which
/// is feasible, assembles.
#[test]
fn impossible_assembly_is_reported_not_looped_on() {
    let xyz = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    let a = t
        .add_constraint(
            PointToGround::new(body, [0.1, 0.0, 0.0], &xyz)
                .unwrap()
                .position_level(),
        )
        .unwrap();
    let b = t
        .add_constraint(
            PointToGround::new(body, [-0.1, 0.0, 0.0], &xyz)
                .unwrap()
                .position_level(),
        )
        .unwrap();
    let mut batch = Batch::new(t, 2).unwrap();
    batch
        .set_param(a, "ground_point", 0, &[0.5, 0.0, 0.0])
        .unwrap();
    batch
        .set_param(b, "ground_point", 0, &[-0.5, 0.0, 0.0])
        .unwrap();
    batch
        .set_param(a, "ground_point", 1, &[0.1, 0.02, 0.0])
        .unwrap();
    batch
        .set_param(b, "ground_point", 1, &[-0.1, 0.02, 0.0])
        .unwrap();
    let options = AssemblyOptions {
        max_iterations: 30,
        ..Default::default()
    };
    let report = assemble_positions(&mut batch, &options).unwrap();
    assert_eq!(report.failed, vec![0]);
    assert_eq!(report.iterations[0], 30);
    assert!(report.residual[0] > 0.1);
    assert!(report.residual[1] <= 1e-12);
}

#[test]
fn redundant_support_assembles() {
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    for (x, y) in [(-0.2, -0.3), (-0.2, 0.3), (0.2, -0.3), (0.2, 0.3)] {
        t.add_constraint(
            PointToGround::new(brick, [x, y, -0.1], &[[0.0, 0.0, 1.0]])
                .unwrap()
                .position_level(),
        )
        .unwrap();
    }
    let mut batch = Batch::new(t, 1).unwrap();
    // Tilted and lifted: four errors, three independent.
    let q = [0.999, 0.03, -0.02, 0.01, 0.0, 0.0, 0.13];
    batch.set_q(brick, 0, q).unwrap();
    let report = assemble_positions(&mut batch, &AssemblyOptions::default()).unwrap();
    assert!(report.failed.is_empty(), "{report:?}");
    let ev = batch.evaluate();
    for c in &ev.constraints {
        assert!(c.position_errors[0].abs() <= 1e-12);
    }
}

#[test]
fn velocity_assembly_is_the_least_weighted_change() {
    let (mut batch, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 40, 5).unwrap();
    let weights = [1.0, 2.0, 3.0, 1.5, 0.5, 1.0, 2.0, 1.0, 1.0, 4.0, 1.0, 0.7];
    let before: Vec<Vec<f64>> = (0..40)
        .map(|i| batch.instance_state(i).unwrap().u.concat())
        .collect();
    let systems: Vec<InstanceSystem> = (0..40).map(|i| batch.instance_system(i).unwrap()).collect();
    let report = assemble_velocities(&mut batch, Some(&weights)).unwrap();
    assert!(report.failed.is_empty());
    for i in 0..40 {
        let after = batch.instance_state(i).unwrap().u.concat();
        let du = DVector::from_iterator(12, after.iter().zip(&before[i]).map(|(a, b)| a - b));
        let sys = &systems[i];
        // All velocity errors gone …
        let verr = batch.instance_system(i).unwrap().velocity_errors;
        assert!(max_abs(verr.as_slice()) < 1e-12, "instance {i}: {verr}");
        if sys.rows() == 0 {
            assert!(du.norm() == 0.0);
            continue;
        }
        // … by a change W-orthogonal to every motion that keeps the errors: W δu ∈ range(Gᵀ).
        let g: DMatrix<f64> = sys.jacobian.clone();
        let w_du = DVector::from_iterator(12, du.iter().zip(&weights).map(|(d, w)| d * w));
        let gt = g.transpose();
        let projection = &gt * (&g * &gt).try_inverse().unwrap() * &g;
        assert!(
            (&projection * &w_du - &w_du).norm() < 1e-9 * w_du.norm().max(1.0),
            "instance {i}"
        );
    }
    // Bad weights are named.
    let e = assemble_velocities(&mut batch, Some(&[1.0; 3])).unwrap_err();
    assert!(matches!(
        e,
        Error::Dimension {
            expected: 12,
            got: 3,
            ..
        }
    ));
    let mut bad = weights;
    bad[4] = -1.0;
    let e = assemble_velocities(&mut batch, Some(&bad))
        .unwrap_err()
        .to_string();
    assert!(e.contains("weights[4]"), "{e}");
}

#[test]
fn plastic_impact_stops_the_contact_point_with_the_closed_form_impulse() {
    // A ball (COM at the centre) falls onto level ground at 2 m/s: the sliding contact (normal
    // only) takes Λ = m · 2; with a desired rebound of 1 m/s, Λ = m · 3.
    let (m, r) = (1.7, 0.1);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, false).with_radius(r))
        .unwrap();
    let mut batch = Batch::new(t, 2).unwrap();
    for i in 0..2 {
        let k = 0.4 * m * r * r;
        batch
            .set_mass_properties(ball, i, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0])
            .unwrap();
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, r])
            .unwrap();
        batch
            .set_u(ball, i, [3.0, -1.0, 0.5, 0.4, 0.2, -2.0])
            .unwrap();
    }
    let targets = vec![vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]; // instance 1 rebounds at 1 m/s
    let report = apply_plastic_impacts(&mut batch, Some(&targets)).unwrap();
    assert!(
        (report.impulses[0][2] - m * 2.0).abs() < 1e-12,
        "{:?}",
        report.impulses
    );
    assert!((report.impulses[0][5] - m * 3.0).abs() < 1e-12);
    let u = batch.u(ball).unwrap();
    assert!((u[0][5] - 0.0).abs() < 1e-12 && (u[1][5] - 1.0).abs() < 1e-12);
    // A frictionless normal impulse at the centre changes neither spin nor tangential velocity.
    assert_eq!(&u[0][..5], &[3.0, -1.0, 0.5, 0.4, 0.2]);
    let ev = batch.evaluate();
    assert!(ev.constraint(c).unwrap().velocity_errors_of(0)[2].abs() < 1e-12);
}

#[test]
fn rolling_impact_leaves_the_contact_point_at_rest_and_takes_energy() {
    let (mut batch, _, c) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Ground, 30, 9).unwrap();
    assemble_positions(&mut batch, &AssemblyOptions::default()).unwrap();
    let energy: Vec<f64> = (0..30).map(|i| batch.energy(i).unwrap()).collect();
    apply_plastic_impacts(&mut batch, None).unwrap();
    let ev = batch.evaluate();
    let enabled = batch.enabled(c).unwrap().to_vec();
    for i in 0..30 {
        let verr = ev.constraint(c).unwrap().velocity_errors_of(i);
        if enabled[i] == 1 {
            assert!(max_abs(verr) < 1e-12, "instance {i}: {verr:?}");
            assert!(
                batch.energy(i).unwrap() <= energy[i] + 1e-12,
                "a plastic impact cannot add energy"
            );
        }
    }
}

#[test]
fn impact_on_four_redundant_corners() {
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let mut corners = Vec::new();
    for (x, y) in [(-0.2, -0.3), (-0.2, 0.3), (0.2, -0.3), (0.2, 0.3)] {
        corners.push(
            t.add_constraint(PointToGround::new(brick, [x, y, -0.1], &[[0.0, 0.0, 1.0]]).unwrap())
                .unwrap(),
        );
    }
    let mut batch = Batch::new(t, 1).unwrap();
    batch
        .set_mass_properties(brick, 0, 2.0, [0.0; 3], [0.1, 0.2, 0.3, 0.0, 0.0, 0.0])
        .unwrap();
    batch
        .set_q(brick, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1])
        .unwrap();
    // Falling flat at 1.5 m/s, with a small tumble and a slide.
    batch
        .set_u(brick, 0, [0.2, -0.1, 0.3, 0.5, 0.0, -1.5])
        .unwrap();
    let report = apply_plastic_impacts(&mut batch, None).unwrap();
    let total: f64 = report.impulses.iter().map(|v| v[0]).sum();
    let u = batch.u(brick).unwrap()[0];
    // Normal motion of every corner stops: no vertical velocity, no tilting rates; the slide and
    // the spin about the normal go on.
    assert!(
        u[5].abs() < 1e-12 && u[0].abs() < 1e-12 && u[1].abs() < 1e-12,
        "{u:?}"
    );
    assert!((u[2] - 0.3).abs() < 1e-12 && (u[3] - 0.5).abs() < 1e-12);
    // The total impulse is unique even though the split is not: m · 1.5.
    assert!((total - 3.0).abs() < 1e-12, "total {total}");
}
