// RBDL's ContactConstraint (physics.md §4); twin of src/constraints/point_to_ground.rs.
// One body (a); rows along 1 to 3 world normals.

fn point_to_ground_evaluate(
    point: vec3<real>,
    normals: array<vec3<real>, 3>,
    normal_count: u32,
    position_level: bool,
    ground_point: vec3<real>,
    body: BodyKinematics,
) -> array<Row, 3> {
    let w = body.ang_vel;
    let b = body.ang_acc;
    let r_p = body.rotation * point;
    let x_p = body.origin + r_p;
    let v_p = body.lin_vel + cross(w, r_p);
    let a_p = body.lin_acc + cross(b, r_p) + cross(w, cross(w, r_p));
    let zero = vec3<real>(0.0, 0.0, 0.0);
    var rows: array<Row, 3>;
    for (var i = 0u; i < normal_count; i++) {
        let n = normals[i];
        var position_error: real = 0.0;
        if position_level {
            position_error = dot(n, x_p - ground_point);
        }
        rows[i] = Row(cross(r_p, n), n, zero, zero, position_error, dot(n, v_p), dot(n, a_p));
    }
    return rows;
}

// contact_point = x_p; contact_force = physical force on the body, −Σ n_i λ_i, in Ground.
fn point_to_ground_report(
    point: vec3<real>,
    normals: array<vec3<real>, 3>,
    normal_count: u32,
    body: BodyKinematics,
    multipliers: vec3<real>,
) -> ContactReport {
    let x_p = body.origin + body.rotation * point;
    var force = vec3<real>(0.0, 0.0, 0.0);
    for (var i = 0u; i < normal_count; i++) {
        force -= multipliers[i] * normals[i];
    }
    return ContactReport(x_p, 0.0, force);
}

// The constraint interface's entry points (src/constraints/mod.rs, `WgslConstraint`): the
// parameters flattened in `params()` order, point, normals (3 per row), ground_point.
fn point_to_ground_normals(p: array<real, PARAMS_CAP>, normal_count: u32) -> array<vec3<real>, 3> {
    var q = p;
    var normals: array<vec3<real>, 3>;
    for (var k = 0u; k < normal_count; k++) {
        normals[k] = vec3<real>(q[3u + 3u * k], q[4u + 3u * k], q[5u + 3u * k]);
    }
    return normals;
}

fn point_to_ground_rows(p: array<real, PARAMS_CAP>, normal_count: u32, position_level: bool, body: BodyKinematics) -> array<Row, 3> {
    var q = p;
    let g = 3u + 3u * normal_count;
    let ground_point = vec3<real>(q[g], q[g + 1u], q[g + 2u]);
    return point_to_ground_evaluate(vec3<real>(p[0], p[1], p[2]), point_to_ground_normals(p, normal_count), normal_count, position_level, ground_point, body);
}

fn point_to_ground_report_params(p: array<real, PARAMS_CAP>, normal_count: u32, body: BodyKinematics, multipliers: vec3<real>) -> ContactReport {
    return point_to_ground_report(vec3<real>(p[0], p[1], p[2]), point_to_ground_normals(p, normal_count), normal_count, body, multipliers);
}
