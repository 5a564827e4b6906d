// Shared types and helpers of every simbatch kernel; twin of src/math.rs and the types of
// src/constraints/mod.rs. `real` (f32 or f64), `REAL_EPSILON`, `RANK_TOLERANCE` and
// `is_finite_real` come from the prelude the host puts in front of these files.

struct BodyKinematics {
    rotation: mat3x3<real>,
    origin: vec3<real>,
    ang_vel: vec3<real>,
    lin_vel: vec3<real>,
    ang_acc: vec3<real>,
    lin_acc: vec3<real>,
}

// One constraint row: Jacobian blocks (angular, linear) on the constraint's bodies a and b,
// and the row's errors; `acceleration_error` at the accelerations in the kinematics (the bias k
// when free bodies' accelerations are 0).
struct Row {
    jac_a_ang: vec3<real>,
    jac_a_lin: vec3<real>,
    jac_b_ang: vec3<real>,
    jac_b_lin: vec3<real>,
    position_error: real,
    velocity_error: real,
    acceleration_error: real,
}

struct ContactReport {
    contact_point: vec3<real>,
    separation: real,
    contact_force: vec3<real>,
}

fn ground_kinematics() -> BodyKinematics {
    let zero = vec3<real>(0.0, 0.0, 0.0);
    let identity = mat3x3<real>(vec3<real>(1.0, 0.0, 0.0), vec3<real>(0.0, 1.0, 0.0), vec3<real>(0.0, 0.0, 1.0));
    return BodyKinematics(identity, zero, zero, zero, zero, zero);
}

// Rotation of a scalar-first quaternion (q.x = e0), normalised first as Simbody does.
fn rotation_from_quaternion(q: vec4<real>) -> mat3x3<real> {
    let inverse_norm = 1.0 / length(q);
    let w = q.x * inverse_norm;
    let x = q.y * inverse_norm;
    let y = q.z * inverse_norm;
    let z = q.w * inverse_norm;
    // mat3x3 takes columns.
    return mat3x3<real>(
        vec3<real>(1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y)),
        vec3<real>(2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x)),
        vec3<real>(2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y)),
    );
}

// The symmetric inertia tensor from [Ixx, Iyy, Izz, Ixy, Ixz, Iyz].
fn inertia_matrix(d: vec3<real>, p: vec3<real>) -> mat3x3<real> {
    return mat3x3<real>(vec3<real>(d.x, p.x, p.y), vec3<real>(p.x, d.y, p.z), vec3<real>(p.y, p.z, d.z));
}

// A row on a two-body contact at a point reached by `c_a` from body a's origin and `c_b` from
// body b's origin, along `e`: body b gets [(c_b × e), e], body a the negated [(c_a × e), e].
fn two_body_row(c_a: vec3<real>, c_b: vec3<real>, e: vec3<real>, position_error: real, velocity_error: real, acceleration_error: real) -> Row {
    return Row(-cross(c_a, e), -e, cross(c_b, e), e, position_error, velocity_error, acceleration_error);
}

// Quaternion rate ė = ½ E(e) w for w in Ground (physics.md §1); e.x = e0. Twin of
// `quaternion_rate` in src/math.rs.
fn quaternion_rate(e: vec4<real>, w: vec3<real>) -> vec4<real> {
    return 0.5 * vec4<real>(
        -e.y * w.x - e.z * w.y - e.w * w.z,
        e.x * w.x + e.w * w.y - e.z * w.z,
        -e.w * w.x + e.x * w.y + e.y * w.z,
        e.z * w.x - e.y * w.y + e.x * w.z,
    );
}
