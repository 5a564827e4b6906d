// Simbody's PointOnPlaneContact (physics.md §3); twin of src/constraints/point_on_plane.rs.
// Bodies: a = surface body S, b = follower body B. Internal rows [z, x, y].

fn point_on_plane_evaluate(
    plane_frame_rotation: mat3x3<real>,
    plane_frame_origin: vec3<real>,
    follower_point: vec3<real>,
    surface: BodyKinematics,
    follower: BodyKinematics,
) -> array<Row, 3> {
    let r_gp = surface.rotation * plane_frame_rotation;
    let px = r_gp[0];
    let py = r_gp[1];
    let pz = r_gp[2];
    let h = dot(surface.rotation * plane_frame_origin, pz);
    let w_s = surface.ang_vel;
    let b_s = surface.ang_acc;
    let w_b = follower.ang_vel;
    let b_b = follower.ang_acc;

    let f_b = follower.rotation * follower_point;
    let p_gf = follower.origin + f_b;
    let v_gf = follower.lin_vel + cross(w_b, f_b);
    let a_gf = follower.lin_acc + cross(b_b, f_b) + cross(w_b, cross(w_b, f_b));
    let s = p_gf - surface.origin;
    let v_gc = surface.lin_vel + cross(w_s, s);
    let a_gc = surface.lin_acc + cross(b_s, s) + cross(w_s, cross(w_s, s));
    let v_sf = v_gf - v_gc;
    let a_sf = (a_gf - a_gc) - 2.0 * cross(w_s, v_sf);

    let position_error = dot(s, pz) - h;
    var rows: array<Row, 3>;
    rows[0] = two_body_row(s, f_b, pz, position_error, dot(pz, v_sf), dot(pz, a_sf));
    rows[1] = two_body_row(s, f_b, px, 0.0, dot(px, v_sf), dot(px, a_sf));
    rows[2] = two_body_row(s, f_b, py, 0.0, dot(py, v_sf), dot(py, a_sf));
    return rows;
}

// contact_point = follower point in Ground; contact_force = force_on_follower_point = −(λx, λy, λz).
fn point_on_plane_report(
    plane_frame_rotation: mat3x3<real>,
    plane_frame_origin: vec3<real>,
    follower_point: vec3<real>,
    surface: BodyKinematics,
    follower: BodyKinematics,
    multipliers: vec3<real>,
) -> ContactReport {
    let pz = (surface.rotation * plane_frame_rotation)[2];
    let p_gf = follower.origin + follower.rotation * follower_point;
    let p_gpo = surface.origin + surface.rotation * plane_frame_origin;
    return ContactReport(p_gf, dot(p_gf - p_gpo, pz), -vec3<real>(multipliers.y, multipliers.z, multipliers.x));
}

// The constraint interface's entry points (src/constraints/mod.rs, `WgslConstraint`): the
// parameters flattened in `params()` order, plane_frame [e0 e1 e2 e3 x y z], follower_point.
fn point_on_plane_rows(p: array<real, PARAMS_CAP>, surface: BodyKinematics, follower: BodyKinematics) -> array<Row, 3> {
    let frame_rotation = rotation_from_quaternion(vec4<real>(p[0], p[1], p[2], p[3]));
    let frame_origin = vec3<real>(p[4], p[5], p[6]);
    return point_on_plane_evaluate(frame_rotation, frame_origin, vec3<real>(p[7], p[8], p[9]), surface, follower);
}

fn point_on_plane_report_params(p: array<real, PARAMS_CAP>, surface: BodyKinematics, follower: BodyKinematics, multipliers: vec3<real>) -> ContactReport {
    let frame_rotation = rotation_from_quaternion(vec4<real>(p[0], p[1], p[2], p[3]));
    let frame_origin = vec3<real>(p[4], p[5], p[6]);
    return point_on_plane_report(frame_rotation, frame_origin, vec3<real>(p[7], p[8], p[9]), surface, follower, multipliers);
}
