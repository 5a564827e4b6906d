// A massless rod between body point P and Ground point A; twin of src/custom/distance_rod.rs.
// p: point (3), anchor (3), length (1).

fn distance_rod_rows(p: array<real, PARAMS_CAP>, body: BodyKinematics) -> array<Row, 3> {
    let w = body.ang_vel;
    let b = body.ang_acc;
    let r_p = body.rotation * vec3<real>(p[0], p[1], p[2]);
    let x_p = body.origin + r_p;
    let v_p = body.lin_vel + cross(w, r_p);
    let a_p = body.lin_acc + cross(b, r_p) + cross(w, cross(w, r_p));
    let e = x_p - vec3<real>(p[3], p[4], p[5]);
    let d = length(e);
    let n = e / d;
    let n_v = dot(n, v_p);
    let zero = vec3<real>(0.0, 0.0, 0.0);
    var rows: array<Row, 3>;
    rows[0] = Row(cross(r_p, n), n, zero, zero, d - p[6], n_v, dot(n, a_p) + (dot(v_p, v_p) - n_v * n_v) / d);
    return rows;
}
