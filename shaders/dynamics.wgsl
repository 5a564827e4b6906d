// Free-body equations of motion in u = (w, v_origin) (physics.md §1); twin of src/cpu/dynamics.rs.

struct MassProperties {
    mass: real,
    com: vec3<real>,
    inertia: mat3x3<real>,
}

fn cross_matrix(a: vec3<real>) -> mat3x3<real> {
    // Columns of [a]×.
    return mat3x3<real>(vec3<real>(0.0, a.z, -a.y), vec3<real>(-a.z, 0.0, a.x), vec3<real>(a.y, -a.x, 0.0));
}

// M = [[I_G − m S S, m S], [−m S, m·1]], row-major 6×6.
fn mass_matrix(props: MassProperties, rotation: mat3x3<real>) -> array<real, 36> {
    let c_g = rotation * props.com;
    let s = cross_matrix(c_g);
    let m = props.mass;
    let i_g = rotation * props.inertia * transpose(rotation);
    let top_left = i_g - m * s * s;
    let top_right = m * s;
    var mm: array<real, 36>;
    for (var r = 0u; r < 3u; r++) {
        for (var c = 0u; c < 3u; c++) {
            mm[r * 6u + c] = top_left[c][r];
            mm[r * 6u + c + 3u] = top_right[c][r];
            mm[(r + 3u) * 6u + c] = -top_right[c][r];
        }
        mm[(r + 3u) * 6u + r + 3u] = m;
    }
    return mm;
}

// f − c(q, u): gravity and the applied force act through the COM, the torque is free.
fn applied_minus_coriolis(props: MassProperties, kin: BodyKinematics, gravity: vec3<real>, force: vec3<real>, torque: vec3<real>) -> array<real, 6> {
    let r = kin.rotation;
    let w = kin.ang_vel;
    let c_g = r * props.com;
    let m = props.mass;
    let i_g = r * props.inertia * transpose(r);
    let w_x_c = cross(w, cross(w, c_g));
    let coriolis_ang = cross(w, i_g * w) + m * cross(c_g, w_x_c);
    let coriolis_lin = m * w_x_c;
    let f_com = m * gravity + force;
    let f_ang = cross(c_g, f_com) + torque;
    let ang = f_ang - coriolis_ang;
    let lin = f_com - coriolis_lin;
    return array<real, 6>(ang.x, ang.y, ang.z, lin.x, lin.y, lin.z);
}
