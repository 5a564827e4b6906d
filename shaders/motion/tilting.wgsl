// The tilting plate (`plane_motion.kind = "tilting"`): twin of src/motion/tilting.rs.
// p: axis1 [0..3], axis2 [3..6], angle_amplitude [6..8], angle_rate [8..10], angle_phase
// [10..12], base_rotation [12..16], origin_offset [16..19], origin_amplitude [19..22],
// origin_rate [22..25], origin_phase [25..28].

fn tilting_motion(p: array<real, MOTION_PARAMS_CAP>, t: real) -> BodyKinematics {
    var chain = rotation_chain();
    let axis1 = vec3<real>(p[0], p[1], p[2]);
    let axis2 = vec3<real>(p[3], p[4], p[5]);
    let first = sine(p[6], p[8], p[10], t);
    chain = rotation_chain_then(chain, axis1, first.x, first.y, first.z);
    let second = sine(p[7], p[9], p[11], t);
    chain = rotation_chain_then(chain, axis2, second.x, second.y, second.z);
    let base = rotation_from_quaternion(vec4<real>(p[12], p[13], p[14], p[15]));
    var coordinates: mat3x3<real>;
    for (var i = 0u; i < 3u; i++) {
        let x = sine(p[19u + i], p[22u + i], p[25u + i], t);
        coordinates[i] = vec3<real>(p[16u + i] + x.x, x.y, x.z);
    }
    return rotation_chain_body_kinematics(chain, base, coordinates);
}
