//! Mass properties, radii, quaternions, normals and non-finite numbers.

use super::*;

#[test]
fn non_positive_or_non_finite_mass() {
    let (mut b, ball, _) = sphere_batch(3);
    expect_invalid(b.set_mass(ball, 2, 0.0), "body[1].mass", 2, "> 0");
    expect_invalid(b.set_mass(ball, 1, -1.0), "body[1].mass", 1, "> 0");
    expect_invalid(b.set_mass(ball, 0, f64::NAN), "body[1].mass", 0, "finite");
    assert_eq!(b.mass(ball).unwrap(), &[1.0, 1.0, 1.0], "nothing stored");
    let msg = b.set_mass(ball, 2, -1.0).unwrap_err().to_string();
    assert!(
        msg.contains("body[1].mass") && msg.contains("instance 2") && msg.contains("> 0"),
        "{msg}"
    );
}

#[test]
fn inertia_not_spd_or_violating_triangle_inequality() {
    let (mut b, ball, _) = sphere_batch(2);
    expect_invalid(
        b.set_inertia(ball, 0, [1.0, 1.0, -0.5, 0.0, 0.0, 0.0]),
        "body[1].inertia",
        0,
        "positive definite",
    );
    // Eigenvalues 1 ± 2 and 1: indefinite.
    expect_invalid(
        b.set_inertia(ball, 1, [1.0, 1.0, 1.0, 2.0, 0.0, 0.0]),
        "body[1].inertia",
        1,
        "positive definite",
    );
    // SPD but Izz > Ixx + Iyy.
    expect_invalid(
        b.set_inertia(ball, 1, [1.0, 1.0, 2.5, 0.0, 0.0, 0.0]),
        "body[1].inertia",
        1,
        "triangle",
    );
    expect_invalid(
        b.set_inertia(ball, 0, [1.0, f64::INFINITY, 1.0, 0.0, 0.0, 0.0]),
        "body[1].inertia",
        0,
        "finite",
    );
    // Equality (a thin disc's Izz = Ixx + Iyy) is physical and accepted.
    b.set_inertia(ball, 0, [1.0, 1.0, 2.0, 0.0, 0.0, 0.0])
        .unwrap();
    // set_mass_properties is all-or-nothing.
    let before = b.free_body_columns(ball).unwrap().clone();
    assert!(
        b.set_mass_properties(ball, 1, 2.0, [0.0; 3], [1.0, 1.0, 3.0, 0.0, 0.0, 0.0])
            .is_err()
    );
    assert_eq!(b.free_body_columns(ball).unwrap(), &before);
}

#[test]
fn radius_must_be_positive() {
    let (mut b, _, c) = sphere_batch(2);
    expect_invalid(
        b.set_param(c, "radius", 1, &[0.0]),
        "constraint[0].radius",
        1,
        "> 0",
    );
    expect_invalid(
        b.set_param(c, "radius", 0, &[-0.2]),
        "constraint[0].radius",
        0,
        "> 0",
    );
    expect_invalid(
        b.set_param(c, "radius", 0, &[f64::NAN]),
        "constraint[0].radius",
        0,
        "finite",
    );
    assert_eq!(b.param(c, "radius").unwrap().0, &[0.1, 0.1]);
    // Bulk: one bad value rejects the column, naming the instance; nothing written.
    expect_invalid(
        b.set_param_column(c, "radius", &[0.3, -1.0]),
        "constraint[0].radius",
        1,
        "> 0",
    );
    assert_eq!(b.param(c, "radius").unwrap().0, &[0.1, 0.1]);
    b.set_param_column(c, "radius", &[0.3, 0.4]).unwrap();
    assert_eq!(b.param(c, "radius").unwrap().0, &[0.3, 0.4]);
}

#[test]
fn zero_quaternions_are_rejected_and_others_normalised() {
    let (mut b, ball, c) = sphere_batch(2);
    expect_invalid(
        b.set_q(ball, 0, [0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]),
        "body[1].q",
        0,
        "quaternion not zero",
    );
    expect_invalid(
        b.set_param(c, "plane_frame", 1, &[0.0; 7]),
        "constraint[0].plane_frame",
        1,
        "quaternion not zero",
    );
    b.set_q(ball, 1, [2.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0])
        .unwrap();
    assert_eq!(b.q(ball).unwrap()[1], [1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
    let mut t = SystemTemplate::new();
    let table = t.add_prescribed_body("table");
    let ball2 = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(table, ball2, false))
        .unwrap();
    let mut b2 = Batch::new(t, 1).unwrap();
    expect_invalid(
        b2.set_pose(table, 0, [0.0; 7]),
        "body[1].pose",
        0,
        "quaternion not zero",
    );
    expect_invalid(
        b2.set_velocity(table, 0, [f64::NAN; 6]),
        "body[1].velocity",
        0,
        "finite",
    );
}

#[test]
fn normals_must_be_unit_orthogonal_and_at_most_three() {
    let b = BodyId::new(1);
    assert!(matches!(
        PointToGround::new(b, [0.0; 3], &[]),
        Err(Error::Template(_))
    ));
    let four = [
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [1.0, 0.0, 0.0],
    ];
    let e = PointToGround::new(b, [0.0; 3], &four)
        .unwrap_err()
        .to_string();
    assert!(e.contains("4 normals") && e.contains("1 to 3"), "{e}");
    let e = PointToGround::new(b, [0.0; 3], &[[1.0, 0.1, 0.0]])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unit"), "{e}");
    assert!(PointToGround::new(b, [0.0; 3], &[[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]).is_err());
    assert!(PointToGround::new(b, [f64::NAN, 0.0, 0.0], &[[1.0, 0.0, 0.0]]).is_err());

    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    let c = t
        .add_constraint(
            PointToGround::new(body, [0.0; 3], &[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]).unwrap(),
        )
        .unwrap();
    let mut batch = Batch::new(t, 2).unwrap();
    expect_invalid(
        batch.set_param(c, "normals", 1, &[0.0, 0.0, 2.0, 1.0, 0.0, 0.0]),
        "constraint[0].normals",
        1,
        "unit",
    );
    expect_invalid(
        batch.set_param(c, "normals", 0, &[0.0, 0.0, 1.0, 0.0, 0.6, 0.8]),
        "constraint[0].normals",
        0,
        "orthogonal",
    );
    assert!(matches!(
        batch.set_param(c, "normals", 0, &[0.0, 0.0, 1.0]),
        Err(Error::ColumnLength {
            expected: 6,
            got: 3,
            ..
        })
    ));
    batch
        .set_param(c, "normals", 0, &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0])
        .unwrap();
}

#[test]
fn non_finite_numbers_are_rejected_everywhere() {
    let (mut b, ball, c) = sphere_batch(1);
    expect_invalid(
        b.set_gravity(0, [0.0, f64::NAN, 0.0]),
        "gravity",
        0,
        "finite",
    );
    expect_invalid(b.set_time(0, f64::INFINITY), "time", 0, "finite");
    expect_invalid(
        b.set_com(ball, 0, [f64::NAN, 0.0, 0.0]),
        "body[1].com",
        0,
        "finite",
    );
    expect_invalid(
        b.set_u(ball, 0, [0.0, 0.0, 0.0, f64::NEG_INFINITY, 0.0, 0.0]),
        "body[1].u",
        0,
        "finite",
    );
    expect_invalid(
        b.set_applied_force(ball, 0, [f64::NAN; 3]),
        "body[1].applied_force",
        0,
        "finite",
    );
    expect_invalid(
        b.set_applied_torque(ball, 0, [f64::NAN; 3]),
        "body[1].applied_torque",
        0,
        "finite",
    );
    expect_invalid(
        b.set_param(c, "sphere_center", 0, &[0.0, f64::NAN, 0.0]),
        "constraint[0].sphere_center",
        0,
        "finite",
    );
    expect_invalid(
        b.set_baumgarte_time_constant(c, 0, 0.0),
        "constraint[0].baumgarte_time_constant",
        0,
        "> 0",
    );
}
