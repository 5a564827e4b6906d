// Simbody's SphereOnPlaneContact (physics.md §2); twin of src/constraints/sphere_on_plane.rs.
// Bodies: a = plane body F, b = ball body B. Internal rows [z] or [z, x, y] when rolling.

fn sphere_on_plane_evaluate(
    plane_frame_rotation: mat3x3<real>,
    plane_frame_origin: vec3<real>,
    sphere_center: vec3<real>,
    radius: real,
    enforce_rolling: bool,
    plane: BodyKinematics,
    ball: BodyKinematics,
) -> array<Row, 3> {
    let r = radius;
    let r_gp = plane.rotation * plane_frame_rotation;
    let px = r_gp[0];
    let py = r_gp[1];
    let pz = r_gp[2];
    let h = dot(plane.rotation * plane_frame_origin, pz);
    let w_f = plane.ang_vel;
    let b_f = plane.ang_acc;
    let w_b = ball.ang_vel;
    let b_b = ball.ang_acc;

    let o_b = ball.rotation * sphere_center;
    let p_go = ball.origin + o_b;
    let v_go = ball.lin_vel + cross(w_b, o_b);
    let a_go = ball.lin_acc + cross(b_b, o_b) + cross(w_b, cross(w_b, o_b));
    let d = p_go - plane.origin;
    let d_dot = v_go - plane.lin_vel;
    let d_ddot = a_go - plane.lin_acc;
    let v_fo = d_dot - cross(w_f, d);
    let a_fo = d_ddot - cross(b_f, d) - 2.0 * cross(w_f, d_dot) + cross(w_f, cross(w_f, d));

    let position_error = dot(d, pz) - h - r;
    let c_b = o_b - r * pz; // p_BC
    let c_f = d - r * pz; // p_FC

    var rows: array<Row, 3>;
    rows[0] = two_body_row(c_f, c_b, pz, position_error, dot(v_fo, pz), dot(a_fo, pz));
    if enforce_rolling {
        let v_fc = v_fo - r * cross(w_b - w_f, pz);
        let b_fb = (b_b - b_f) - cross(w_f, w_b);
        let a_fc = a_fo - r * cross(b_fb, pz);
        rows[1] = two_body_row(c_f, c_b, px, 0.0, dot(px, v_fc), dot(px, a_fc));
        rows[2] = two_body_row(c_f, c_b, py, 0.0, dot(py, v_fc), dot(py, a_fc));
    }
    return rows;
}

// contact_force = force_on_sphere_in_ground = R_GP (−λ); multipliers in internal order.
fn sphere_on_plane_report(
    plane_frame_rotation: mat3x3<real>,
    plane_frame_origin: vec3<real>,
    sphere_center: vec3<real>,
    radius: real,
    enforce_rolling: bool,
    plane: BodyKinematics,
    ball: BodyKinematics,
    multipliers: vec3<real>,
) -> ContactReport {
    let r_gp = plane.rotation * plane_frame_rotation;
    let px = r_gp[0];
    let py = r_gp[1];
    let pz = r_gp[2];
    let p_gpo = plane.origin + plane.rotation * plane_frame_origin;
    let center = ball.origin + ball.rotation * sphere_center;
    var f = multipliers.x * pz;
    if enforce_rolling {
        f += multipliers.y * px + multipliers.z * py;
    }
    return ContactReport(center - radius * pz, dot(center - p_gpo, pz) - radius, -f);
}

// The constraint interface's entry points (src/constraints/mod.rs, `WgslConstraint`): the
// parameters flattened in `params()` order (`p[PARAMS_CAP]`), plane_frame [e0 e1 e2 e3 x y z], sphere_center,
// radius.
fn sphere_on_plane_rows(p: array<real, PARAMS_CAP>, enforce_rolling: bool, plane: BodyKinematics, ball: BodyKinematics) -> array<Row, 3> {
    let frame_rotation = rotation_from_quaternion(vec4<real>(p[0], p[1], p[2], p[3]));
    let frame_origin = vec3<real>(p[4], p[5], p[6]);
    let sphere_center = vec3<real>(p[7], p[8], p[9]);
    return sphere_on_plane_evaluate(frame_rotation, frame_origin, sphere_center, p[10], enforce_rolling, plane, ball);
}

fn sphere_on_plane_report_params(p: array<real, PARAMS_CAP>, enforce_rolling: bool, plane: BodyKinematics, ball: BodyKinematics, multipliers: vec3<real>) -> ContactReport {
    let frame_rotation = rotation_from_quaternion(vec4<real>(p[0], p[1], p[2], p[3]));
    let frame_origin = vec3<real>(p[4], p[5], p[6]);
    let sphere_center = vec3<real>(p[7], p[8], p[9]);
    return sphere_on_plane_report(frame_rotation, frame_origin, sphere_center, p[10], enforce_rolling, plane, ball, multipliers);
}
