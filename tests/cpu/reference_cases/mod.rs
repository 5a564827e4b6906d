//! Closed-form and RBDL cases of `reference-cases.md` (sections A and B: `closed_form`, `rbdl`), on
//! the CPU f64 path. Numbers below are copied from that file; λ uses Simbody's sign (λ = −λ_rbdl).

use nalgebra::{DVector, Matrix3, Rotation3, UnitQuaternion, Vector3};
use simbatch::constraints::point_to_ground::{body_frame_force, root_frame_wrench};
use simbatch::math::{quaternion_rate, rotation_from_quaternion};
use simbatch::model::Baumgarte;
use simbatch::prelude::*;

fn assert_close(what: &str, got: f64, expected: f64, tol: f64) {
    assert!(
        (got - expected).abs() <= tol * expected.abs().max(1.0),
        "{what}: got {got:.15e}, expected {expected:.15e}"
    );
}

fn assert_all_close(what: &str, got: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(got.len(), expected.len(), "{what}: length");
    for (k, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_close(&format!("{what}[{k}]"), *g, *e, tol);
    }
}

fn quat_of(r: &Matrix3<f64>) -> [f64; 4] {
    let q = UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(*r));
    [q.w, q.i, q.j, q.k]
}

fn axis_angle_quat(axis: [f64; 3], angle: f64) -> [f64; 4] {
    let a = Vector3::from(axis).normalize() * (angle / 2.0).sin();
    [(angle / 2.0).cos(), a.x, a.y, a.z]
}

fn pose(q: [f64; 4], p: [f64; 3]) -> [f64; 7] {
    [q[0], q[1], q[2], q[3], p[0], p[1], p[2]]
}

fn solid_sphere_inertia(m: f64, r: f64) -> [f64; 6] {
    let i = 0.4 * m * r * r;
    [i, i, i, 0.0, 0.0, 0.0]
}

mod closed_form;
mod rbdl;
