// A polynomial in τ = t − t0 per coordinate: twin of src/motion/polynomial.rs.
// p: t0 [0], base_rotation [1..5], position [5 .. 5 + 3w] (x, y, z, each from τ⁰ up), angles
// [5 + 3w .. 5 + 6w] (θ1 about x, θ2 about y, θ3 about z, body-fixed), w = degree + 1.

// (p(τ), p'(τ), p''(τ)) of the `w` coefficients of p from index `first` (Horner).
fn polynomial_eval(p: array<real, MOTION_PARAMS_CAP>, first: u32, w: u32, tau: real) -> vec3<real> {
    var value: real = 0.0;
    var d: real = 0.0;
    var dd: real = 0.0;
    for (var k = 0u; k < w; k++) {
        let c = p[first + w - 1u - k];
        dd = dd * tau + 2.0 * d;
        d = d * tau + value;
        value = value * tau + c;
    }
    return vec3<real>(value, d, dd);
}

fn polynomial_motion(p: array<real, MOTION_PARAMS_CAP>, t: real, degree: u32) -> BodyKinematics {
    let w = degree + 1u;
    let tau = t - p[0];
    var chain = rotation_chain();
    for (var j = 0u; j < 3u; j++) {
        let angle = polynomial_eval(p, 5u + 3u * w + j * w, w, tau);
        chain = rotation_chain_then_about(chain, j, angle.x, angle.y, angle.z);
    }
    let base = rotation_from_quaternion(vec4<real>(p[1], p[2], p[3], p[4]));
    var coordinates: mat3x3<real>;
    for (var i = 0u; i < 3u; i++) {
        coordinates[i] = polynomial_eval(p, 5u + i * w, w, tau);
    }
    return rotation_chain_body_kinematics(chain, base, coordinates);
}
