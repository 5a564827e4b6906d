//! Assembly (RBDL CalcAssemblyQ / CalcAssemblyQDot) and plastic impacts
//! (ComputeConstraintImpulses): tolerances reached from perturbed states, least change,
//! failures reported (not looped on), impulses against closed forms.

use nalgebra::{DMatrix, DVector};
use simbatch::cpu::assembly::{
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
                .q(BodyId::new(batch.template().bodies().len() - 1))
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
                let perr = max_abs(after.constraint(c).unwrap().position_errors_of(i).unwrap());
                assert!(
                    perr <= 1e-12,
                    "{kind:?}/{plane:?} instance {i}: perr {perr:e}"
                );
            }
            // A disabled constraint is not assembled: instance 5's separation is untouched.
            assert_eq!(enabled[5], 0);
            assert_eq!(
                after.constraint(c).unwrap().position_errors_of(5).unwrap(),
                before.constraint(c).unwrap().position_errors_of(5).unwrap()
            );
            // Least change: nothing moves that need not (velocities untouched, q moved little
            // compared with the error removed).
            let q_after = batch
                .q(BodyId::new(batch.template().bodies().len() - 1))
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
    assert!(ev.constraint(c).unwrap().velocity_errors_of(0).unwrap()[2].abs() < 1e-12);
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
        let verr = ev.constraint(c).unwrap().velocity_errors_of(i).unwrap();
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

/// A solid ball of radius 0.1 launched at 1 m/s without spin onto a rolling contact: the
/// default (mass-matrix) velocity assembly is the plastic impulse at the contact, which leaves it
/// rolling at 5/7 v₀ (angular momentum about the contact point is conserved). Unit weights
/// (RBDL's default, still available) would give 0.0099 m/s.
#[test]
fn velocity_assembly_defaults_to_the_least_kinetic_energy_change() {
    let (m, r, v0) = (2.0, 0.1, 1.0);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(r))
        .unwrap();
    let mut batch = Batch::new(t, 2).unwrap();
    let inertia = 0.4 * m * r * r;
    for i in 0..2 {
        batch
            .set_mass_properties(
                ball,
                i,
                m,
                [0.0; 3],
                [inertia, inertia, inertia, 0.0, 0.0, 0.0],
            )
            .unwrap();
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, r])
            .unwrap();
        batch.set_u(ball, i, [0.0, 0.0, 0.0, v0, 0.0, 0.0]).unwrap();
    }
    let mut unit = batch.clone();
    let report = assemble_velocities(&mut batch, None).unwrap();
    assert!(report.failed.is_empty(), "{report:?}");
    for i in 0..2 {
        let u = batch.u(ball).unwrap()[i];
        assert!((u[3] - 5.0 / 7.0 * v0).abs() < 1e-12, "{u:?}");
        assert!((u[1] - 5.0 / 7.0 * v0 / r).abs() < 1e-10, "{u:?}");
        for k in [0, 2, 4, 5] {
            assert!(u[k].abs() < 1e-12, "{u:?}");
        }
    }
    // RBDL's unit weights remain available, and give the unphysical answer the issue measured.
    assemble_velocities(&mut unit, Some(&[1.0; 6])).unwrap();
    let u = unit.u(ball).unwrap()[0];
    assert!((u[3] - 0.0099).abs() < 1e-4, "{u:?}");
}

/// Skew matrix `[a]×`.
fn skew(a: [f64; 3]) -> nalgebra::Matrix3<f64> {
    nalgebra::Matrix3::new(0.0, -a[2], a[1], a[2], 0.0, -a[0], -a[1], a[0], 0.0)
}

/// An off-centre COM, a full inertia and an initial spin: the default velocity assembly must
/// equal an independent KKT solve of `min ½ (u − u₀)ᵀ M (u − u₀)` s.t. the contact point is at
/// rest, with M built here from `KE = ½ m |v_o + w × c|² + ½ wᵀ I_c w`, and must conserve the
/// angular momentum about the contact point (the impulse acts there).
#[test]
fn velocity_assembly_with_an_offset_com_matches_an_independent_kkt_solve() {
    let (m, r) = (1.3, 0.15);
    let com_body = [0.03, -0.02, 0.01];
    let ic = [0.012, 0.015, 0.011, 0.001, -0.0005, 0.0008];
    // Rotated ball frame: the COM offset in Ground is R c.
    let angle: f64 = 0.7;
    let axis = nalgebra::Unit::new_normalize(nalgebra::Vector3::new(0.3, -0.5, 0.8));
    let rot = nalgebra::UnitQuaternion::from_axis_angle(&axis, angle);
    let qv = rot.quaternion();
    let u0 = [0.4, -1.1, 2.0, 1.2, -0.6, 0.3];
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(r))
        .unwrap();
    let mut batch = Batch::new(t, 1).unwrap();
    batch.set_mass_properties(ball, 0, m, com_body, ic).unwrap();
    batch
        .set_q(ball, 0, [qv.w, qv.i, qv.j, qv.k, 0.2, -0.1, r])
        .unwrap();
    batch.set_u(ball, 0, u0).unwrap();
    assemble_velocities(&mut batch, None).unwrap();
    let u = batch.u(ball).unwrap()[0];

    // Independent: M = Jᵀ diag(I_c(Ground), m 1) J with J (w, v_o) = (w, v_o − [c]× w).
    let rm = rot.to_rotation_matrix().into_inner();
    let ib = nalgebra::Matrix3::new(
        ic[0], ic[3], ic[4], ic[3], ic[1], ic[5], ic[4], ic[5], ic[2],
    );
    let ig = rm * ib * rm.transpose();
    let c = rm * nalgebra::Vector3::from(com_body);
    let cx = skew([c.x, c.y, c.z]);
    let mut j = DMatrix::<f64>::identity(6, 6);
    j.view_mut((3, 0), (3, 3)).copy_from(&(-cx));
    let mut d = DMatrix::<f64>::zeros(6, 6);
    d.view_mut((0, 0), (3, 3)).copy_from(&ig);
    d.view_mut((3, 3), (3, 3))
        .copy_from(&(nalgebra::Matrix3::identity() * m));
    let mass = j.transpose() * d * &j;
    // Contact point P = o − r ẑ (the sphere centre is the body origin): v_P = v_o + w × (−r ẑ)
    // = v_o + r [ẑ]× w.
    let mut g = DMatrix::<f64>::zeros(3, 6);
    g.view_mut((0, 0), (3, 3))
        .copy_from(&(skew([0.0, 0.0, 1.0]) * r));
    g.view_mut((0, 3), (3, 3))
        .copy_from(&nalgebra::Matrix3::identity());
    let mut kkt = DMatrix::<f64>::zeros(9, 9);
    kkt.view_mut((0, 0), (6, 6)).copy_from(&mass);
    kkt.view_mut((0, 6), (6, 3)).copy_from(&g.transpose());
    kkt.view_mut((6, 0), (3, 6)).copy_from(&g);
    let mut rhs = DVector::<f64>::zeros(9);
    rhs.rows_mut(0, 6)
        .copy_from(&(&mass * DVector::from_row_slice(&u0)));
    let x = kkt.lu().solve(&rhs).unwrap();
    for k in 0..6 {
        assert!((u[k] - x[k]).abs() < 1e-10, "u[{k}] = {} vs {}", u[k], x[k]);
    }
    // Angular momentum about the contact point, before and after: H_P = I_c w + m (c_G − P) × v_com
    // with c_G − P = c + r ẑ.
    let momentum = |u: &[f64]| {
        let w = nalgebra::Vector3::new(u[0], u[1], u[2]);
        let v_com = nalgebra::Vector3::new(u[3], u[4], u[5]) + w.cross(&c);
        ig * w + (c + nalgebra::Vector3::new(0.0, 0.0, r)).cross(&v_com) * m
    };
    let (before, after) = (momentum(&u0), momentum(&u));
    assert!(
        (before - after).norm() < 1e-12 * before.norm().max(1.0),
        "{before} vs {after}"
    );
    // And the contact point is at rest.
    let verr = batch.instance_system(0).unwrap().velocity_errors;
    assert!(max_abs(verr.as_slice()) < 1e-12, "{verr}");
}
