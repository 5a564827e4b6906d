// Helpers of the prescribed-motion laws: twin of `RotationChain`, `sine` (src/motion/mod.rs)
// and `axis_rotation` (src/math.rs).

// Rot(a, θ) = cos θ 1 + sin θ [a]× + (1 − cos θ) a aᵀ, a a unit vector.
fn axis_rotation(a: vec3<real>, angle: real) -> mat3x3<real> {
    let sc = sin_cos_real(angle);
    let s = sc.x;
    let c = sc.y;
    let k = 1.0 - c;
    // mat3x3 takes columns.
    return mat3x3<real>(
        vec3<real>(c + k * a.x * a.x, k * a.x * a.y + s * a.z, k * a.x * a.z - s * a.y),
        vec3<real>(k * a.x * a.y - s * a.z, c + k * a.y * a.y, k * a.y * a.z + s * a.x),
        vec3<real>(k * a.x * a.z + s * a.y, k * a.y * a.z - s * a.x, c + k * a.z * a.z),
    );
}

struct RotationChain {
    rotation: mat3x3<real>,
    ang_vel: vec3<real>,
    ang_acc: vec3<real>,
}

fn rotation_chain() -> RotationChain {
    let zero = vec3<real>(0.0, 0.0, 0.0);
    let identity = mat3x3<real>(vec3<real>(1.0, 0.0, 0.0), vec3<real>(0.0, 1.0, 0.0), vec3<real>(0.0, 0.0, 1.0));
    return RotationChain(identity, zero, zero);
}

// Appends a rotation by `angle` about the unit `axis` (in the frame reached so far), with rate
// `rate` and acceleration `accel`: b += θ̈ a' + θ̇ (w × a'), w += θ̇ a'.
fn rotation_chain_then(chain: RotationChain, axis: vec3<real>, angle: real, rate: real, accel: real) -> RotationChain {
    let axis_in_ground = chain.rotation * axis;
    var out = chain;
    out.ang_acc = chain.ang_acc + accel * axis_in_ground + rate * cross(chain.ang_vel, axis_in_ground);
    out.ang_vel = chain.ang_vel + rate * axis_in_ground;
    out.rotation = chain.rotation * axis_rotation(axis, angle);
    return out;
}

// `rotation_chain_then` about coordinate axis `axis` (0, 1, 2: x, y, z) of the frame reached so
// far: that axis in Ground is a column of the rotation, which turns only the next two columns
// (i, j): R_i' = cos θ R_i + sin θ R_j, R_j' = cos θ R_j − sin θ R_i. Twin of
// `RotationChain::then_about`.
fn rotation_chain_then_about(chain: RotationChain, axis: u32, angle: real, rate: real, accel: real) -> RotationChain {
    var out = chain;
    let i = (axis + 1u) % 3u;
    let j = (axis + 2u) % 3u;
    let axis_in_ground = out.rotation[axis];
    out.ang_acc = chain.ang_acc + accel * axis_in_ground + rate * cross(chain.ang_vel, axis_in_ground);
    out.ang_vel = chain.ang_vel + rate * axis_in_ground;
    let sc = sin_cos_real(angle);
    let s = sc.x;
    let c = sc.y;
    let r_i = out.rotation[i];
    let r_j = out.rotation[j];
    out.rotation[i] = c * r_i + s * r_j;
    out.rotation[j] = c * r_j - s * r_i;
    return out;
}

// The kinematics of a body rotated by `chain` after `base`, whose origin coordinate k moves as
// `coordinates[k]` = (x, ẋ, ẍ) (Ground axes): twin of `RotationChain::body_kinematics`.
fn rotation_chain_body_kinematics(chain: RotationChain, base: mat3x3<real>, coordinates: mat3x3<real>) -> BodyKinematics {
    let motion = transpose(coordinates);
    return BodyKinematics(chain.rotation * base, motion[0], chain.ang_vel, motion[1], chain.ang_acc, motion[2]);
}

// (value, d/dt, d²/dt²) of amplitude · sin(rate · t + phase).
fn sine(amplitude: real, rate: real, phase: real, t: real) -> vec3<real> {
    let sc = sin_cos_real(rate * t + phase);
    let s = sc.x;
    let c = sc.y;
    return vec3<real>(amplitude * s, amplitude * rate * c, -amplitude * rate * rate * s);
}
