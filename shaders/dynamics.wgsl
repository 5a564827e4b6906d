// Free-body equations of motion in u = (w, v_origin) (physics.md §1); twin of src/cpu/dynamics.rs.

struct MassProperties {
    mass: real,
    com: vec3<real>,
    inertia: mat3x3<real>,
}

// A free body's M⁻¹ in closed form, twin of `inverse_inertia` (src/cpu/lanes/solve.rs),
// `world_inverse_inertia` and `Chunk::inverse_mass` (src/cpu/lanes/dynamics.rs). About its COM
// the body's mass matrix is block diagonal, so with c_G = R c: b = R I⁻¹ Rᵀ (τ − c_G × f),
// a_o = f / m − b × c_G, the exact inverse of `mass_matrix` (src/cpu/dynamics.rs). R I⁻¹ Rᵀ is
// formed once per body and state, not at every use.
struct InverseMass {
    // m > 0 and I positive definite, all finite: the closed form holds (else SINGULAR_MASS).
    ok: bool,
    c_g: vec3<real>,
    inverse_mass: real,
    // I⁻¹ about the COM, in Ground: R I⁻¹ Rᵀ.
    world_inverse_inertia: mat3x3<real>,
}

// R I⁻¹ Rᵀ, symmetric: its upper triangle from R I⁻¹ and R, mirrored.
fn world_inverse_inertia(r: mat3x3<real>, inverse_inertia: mat3x3<real>) -> mat3x3<real> {
    let ri = r * inverse_inertia;
    // WGSL matrices are column-major: m[j][i] is row i, column j.
    let w00 = ri[0][0] * r[0][0] + ri[1][0] * r[1][0] + ri[2][0] * r[2][0];
    let w01 = ri[0][0] * r[0][1] + ri[1][0] * r[1][1] + ri[2][0] * r[2][1];
    let w02 = ri[0][0] * r[0][2] + ri[1][0] * r[1][2] + ri[2][0] * r[2][2];
    let w11 = ri[0][1] * r[0][1] + ri[1][1] * r[1][1] + ri[2][1] * r[2][1];
    let w12 = ri[0][1] * r[0][2] + ri[1][1] * r[1][2] + ri[2][1] * r[2][2];
    let w22 = ri[0][2] * r[0][2] + ri[1][2] * r[1][2] + ri[2][2] * r[2][2];
    return mat3x3<real>(vec3<real>(w00, w01, w02), vec3<real>(w01, w11, w12), vec3<real>(w02, w12, w22));
}

// What the closed form needs of a free body apart from its pose: 1 / m and I⁻¹ in the body's
// frame, and whether they hold. They depend on the parameters alone, so each thread forms them
// once (`load_free_body`, evaluate.wgsl), as the CPU's lanes do once per chunk.
struct BodyInverseMass {
    // m > 0 and I positive definite, all finite: the closed form holds (else SINGULAR_MASS).
    ok: bool,
    inverse_mass: real,
    inverse_inertia: mat3x3<real>,
}

// The cofactors C₀₀, C₀₁, C₀₂, C₁₁, C₁₂, C₂₂ and the determinant of the symmetric 3×3 matrix
// with diagonal (x00, x11, x22) and entries (x01, x02, x12) off it (its inverse is C / det).
// Twin of `symmetric_cofactors` (src/cpu/lanes/solve.rs), name for name.
struct SymmetricCofactors {
    c00: real,
    c01: real,
    c02: real,
    c11: real,
    c12: real,
    c22: real,
    det: real,
}

fn symmetric_cofactors(x00: real, x11: real, x22: real, x01: real, x02: real, x12: real) -> SymmetricCofactors {
    let c00 = x11 * x22 - x12 * x12;
    let c01 = x02 * x12 - x01 * x22;
    let c02 = x01 * x12 - x11 * x02;
    let c11 = x00 * x22 - x02 * x02;
    let c12 = x01 * x02 - x00 * x12;
    let c22 = x00 * x11 - x01 * x01;
    let det = x00 * c00 + x01 * c01 + x02 * c02;
    return SymmetricCofactors(c00, c01, c02, c11, c12, c22, det);
}

// I⁻¹ by cofactors of I / s, s the mean of I's diagonal: the scaling keeps the determinant
// within range (a small body's det I underflows f32), and I is positive definite when the
// scaled leading minors are positive (Sylvester). Twin of `inverse_inertia`
// (src/cpu/lanes/solve.rs) and of `Chunk::load_body`'s 1 / m (src/cpu/lanes/load.rs).
fn body_inverse_mass(props: MassProperties) -> BodyInverseMass {
    let i = props.inertia;
    let inverse_s = 3.0 / (i[0][0] + i[1][1] + i[2][2]);
    let a = i[0][0] * inverse_s;
    let b = i[1][1] * inverse_s;
    let c = i[2][2] * inverse_s;
    let d = i[1][0] * inverse_s;
    let e = i[2][0] * inverse_s;
    let f = i[2][1] * inverse_s;
    let cof = symmetric_cofactors(a, b, c, d, e, f);
    let m = props.mass;
    let ok = a > 0.0 && cof.c22 > 0.0 && cof.det > 0.0 && is_finite_real(cof.det) && m > 0.0 && is_finite_real(m);
    let k = inverse_s / cof.det;
    let inverse_inertia = mat3x3<real>(vec3<real>(cof.c00, cof.c01, cof.c02) * k, vec3<real>(cof.c01, cof.c11, cof.c12) * k, vec3<real>(cof.c02, cof.c12, cof.c22) * k);
    return BodyInverseMass(ok, 1.0 / m, inverse_inertia);
}

// M⁻¹ of a free body at rotation R: c_G = R c and R I⁻¹ Rᵀ, once per body and state. With an
// isotropic inertia (`isotropic`: I = k 1 about the COM, a uniform ball's; the generated code
// passes a literal, `Layout::isotropic_inertia`) R I⁻¹ Rᵀ = I⁻¹ R Rᵀ = I⁻¹ exactly, so the
// product is not formed (the CPU's general formula agrees to rounding).
fn inverse_mass_at(body: BodyInverseMass, com: vec3<real>, rotation: mat3x3<real>, isotropic: bool) -> InverseMass {
    var world = body.inverse_inertia;
    if !isotropic {
        world = world_inverse_inertia(rotation, body.inverse_inertia);
    }
    return InverseMass(body.ok, rotation * com, body.inverse_mass, world);
}

// M⁻¹ (τ, f) = (b, a_o).
fn apply_inverse_mass(inv: InverseMass, tau: vec3<real>, f: vec3<real>) -> array<real, 6> {
    let b = inv.world_inverse_inertia * (tau - cross(inv.c_g, f));
    let a_o = f * inv.inverse_mass - cross(b, inv.c_g);
    return array<real, 6>(b.x, b.y, b.z, a_o.x, a_o.y, a_o.z);
}

// f − c(q, u): gravity and the applied force act through the COM, the torque is free.
// `isotropic` as for `inverse_mass_at`: I_G w = k w is parallel to w, so w × I_G w = 0.
fn applied_minus_coriolis(props: MassProperties, kin: BodyKinematics, gravity: vec3<real>, force: vec3<real>, torque: vec3<real>, isotropic: bool) -> array<real, 6> {
    let r = kin.rotation;
    let w = kin.ang_vel;
    let c_g = r * props.com;
    let m = props.mass;
    var gyroscopic = vec3<real>(0.0, 0.0, 0.0);
    if !isotropic {
        // I_G w = R (I (Rᵀ w)): three matrix-vector products, not the matrix R I Rᵀ.
        let i_g_w = r * (props.inertia * (transpose(r) * w));
        gyroscopic = cross(w, i_g_w);
    }
    let w_x_c = cross(w, cross(w, c_g));
    let coriolis_ang = gyroscopic + m * cross(c_g, w_x_c);
    let coriolis_lin = m * w_x_c;
    let f_com = m * gravity + force;
    let f_ang = cross(c_g, f_com) + torque;
    let ang = f_ang - coriolis_ang;
    let lin = f_com - coriolis_lin;
    return array<real, 6>(ang.x, ang.y, ang.z, lin.x, lin.y, lin.z);
}
