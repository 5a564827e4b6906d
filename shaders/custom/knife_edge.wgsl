// A knife edge at body point P on the plane z = 0, no slip along body-fixed l; twin of
// src/custom/knife_edge.rs. p: point (3), lateral (3).

fn knife_edge_rows(p: array<real, PARAMS_CAP>, body: BodyKinematics) -> array<Row, 3> {
    let w = body.ang_vel;
    let b = body.ang_acc;
    let r_p = body.rotation * vec3<real>(p[0], p[1], p[2]);
    let x_p = body.origin + r_p;
    let v_p = body.lin_vel + cross(w, r_p);
    let a_p = body.lin_acc + cross(b, r_p) + cross(w, cross(w, r_p));
    let ez = vec3<real>(0.0, 0.0, 1.0);
    let zero = vec3<real>(0.0, 0.0, 0.0);
    var rows: array<Row, 3>;
    rows[0] = Row(cross(r_p, ez), ez, zero, zero, x_p.z, v_p.z, a_p.z);
    let l = body.rotation * vec3<real>(p[3], p[4], p[5]);
    rows[1] = Row(cross(r_p, l), l, zero, zero, 0.0, dot(l, v_p), dot(l, a_p) + dot(cross(w, l), v_p));
    return rows;
}
