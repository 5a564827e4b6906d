//! The physics of both built-in tasks against closed forms: a ball on a tilted plate, a brick
//! on an incline and pushed on level ground.

use super::*;

#[test]
fn a_ball_on_a_fixed_tilt_rolls_down_at_five_sevenths_g_sin_theta() {
    // The plate tilted by θ about x and held there (zero tilt-rate actions, plate at rest).
    let theta = 0.1;
    let g = 9.81;
    let config = BallOnPlateConfig {
        initial_tilt_x: Scalar::Fixed(theta),
        initial_tilt_y: Scalar::Fixed(0.0),
        start_x: Scalar::Fixed(0.01),
        start_y: Scalar::Fixed(-0.02),
        max_episode_steps: 1000,
        half_size: 1.0,
        ..BallOnPlateConfig::default()
    };
    let mut env = plate_env(3, config, AutoReset::NextStep);
    let obs0 = reset(&mut env, Some(1), None);
    let zero = vec![0.0f32; 6];
    let dt = env.spec().control_dt;
    let a = 5.0 / 7.0 * g * theta.sin();
    let task = BallOnPlate::new(BallOnPlateConfig::default()).unwrap();
    for k in 1..=20 {
        let o = step(&mut env, &zero);
        let t = k as f64 * dt;
        for i in 0..3 {
            // A rotation θ about +x tips the plate's +y axis up: the ball rolls towards −y.
            let (p, v, n) = task.ball_in_plate_frame(env.batch(), i).unwrap();
            let expected_y = -0.02 - 0.5 * a * t * t;
            assert!((p.x - 0.01).abs() < 1e-9, "x {}", p.x);
            assert!((p.y - expected_y).abs() < 1e-9, "y {} vs {expected_y}", p.y);
            assert!((v.y + a * t).abs() < 1e-9, "vy {} vs {}", v.y, -a * t);
            assert!((n.y + theta.sin()).abs() < 1e-12);
            assert_eq!(o.obs[i * 10 + 1], p.y as f32);
            assert!(!o.terminated[i]);
        }
    }
    assert_eq!(obs0[1], -0.02f32);
}

#[test]
fn tilting_the_plate_moves_the_ball_consistently_with_the_constraints() {
    // Random tilt-rate actions: the contact stays satisfied (projection at 1e-6) and the plate
    // reaches the commanded rates at the end of each interval — exactly in its gimbal rates,
    // to within the gimbal's coupling (second order in the interval's tilt increment) in
    // Ground's x and y components.
    let mut env = plate_env(32, BallOnPlateConfig::default(), AutoReset::Disabled);
    reset(&mut env, Some(8), None);
    let task = BallOnPlate::new(BallOnPlateConfig::default()).unwrap();
    let contact = task.contact();
    let mut alive = [true; 32];
    let mut worst: f64 = 0.0;
    for k in 0..25 {
        let a = actions(&env, k);
        let mut mask = vec![false; 32];
        let o = step(&mut env, &a);
        let ev = env.batch().evaluate();
        for i in 0..32 {
            if !alive[i] {
                continue;
            }
            let w = env.batch().velocity(task.plate()).unwrap()[i];
            for j in 0..2 {
                let commanded = 2.0 * f64::from(a[2 * i + j]).clamp(-1.0, 1.0);
                let coupling = (4.0f64 * 0.02).powi(2);
                assert!(
                    (w[j] - commanded).abs() < coupling,
                    "env {i}: ω {} vs {commanded}",
                    w[j]
                );
                worst = worst.max((w[j] - commanded).abs());
            }
            let c = ev.constraint(contact).unwrap();
            assert!(
                c.position_errors_of(i)
                    .unwrap()
                    .iter()
                    .all(|e| e.abs() < 1e-6)
            );
            assert!(
                c.velocity_errors_of(i)
                    .unwrap()
                    .iter()
                    .all(|e| e.abs() < 1e-6)
            );
            if o.terminated[i] || o.truncated[i] {
                mask[i] = true;
            }
        }
        for (i, m) in mask.iter().enumerate() {
            if *m {
                alive[i] = false;
            }
        }
        if mask.iter().any(|m| *m) {
            reset(&mut env, None, Some(&mask));
        }
    }
    println!("worst Ground-rate gap to the command: {worst:.3e} rad/s");
}

#[test]
fn a_brick_slides_down_a_frictionless_incline_at_g_sin_theta() {
    let theta_deg: f64 = 6.0;
    let config = BrickPushConfig {
        incline_deg: Scalar::Fixed(theta_deg),
        downhill_direction: Scalar::Fixed(0.3),
        linear_drag: Scalar::Fixed(0.0),
        yaw_drag: Scalar::Fixed(0.0),
        start_x: Scalar::Fixed(0.0),
        start_y: Scalar::Fixed(0.0),
        ..BrickPushConfig::default()
    };
    let task = BrickPush::new(config.clone()).unwrap();
    let brick = task.brick();
    let corners = task.corners();
    let mut env = brick_env(4, config, AutoReset::NextStep);
    reset(&mut env, Some(2), None);
    let yaw0: Vec<f64> = (0..4).map(|i| task.yaw(env.batch(), i)).collect();
    let zero = vec![0.0f32; 12];
    let a = 9.81 * theta_deg.to_radians().sin();
    let dt = env.spec().control_dt;
    for k in 1..=10 {
        step(&mut env, &zero);
        let t = k as f64 * dt;
        let d = 0.5 * a * t * t;
        for (i, yaw0) in yaw0.iter().enumerate() {
            let q = env.batch().q(brick).unwrap()[i];
            assert!((q[4] - d * 0.3f64.cos()).abs() < 1e-9, "x {}", q[4]);
            assert!((q[5] - d * 0.3f64.sin()).abs() < 1e-9, "y {}", q[5]);
            assert!((task.yaw(env.batch(), i) - yaw0).abs() < 1e-9);
        }
    }
    // The four corners carry the weight's normal component, shared as minimum-norm λ.
    let ev = env.batch().evaluate();
    for i in 0..4 {
        let m = env.batch().mass(brick).unwrap()[i];
        let total: f64 = corners
            .iter()
            .map(|c| ev.constraint(*c).unwrap().multipliers_of(i).unwrap()[0])
            .sum();
        let normal = m * 9.81 * theta_deg.to_radians().cos();
        assert!(
            (total.abs() - normal).abs() < 1e-9 * normal,
            "Σλ {total} vs {normal}"
        );
    }
}

#[test]
fn a_constant_push_on_level_ground_gives_uniform_acceleration_and_success_ends_the_episode() {
    let config = BrickPushConfig {
        incline_deg: Scalar::Fixed(0.0),
        linear_drag: Scalar::Fixed(0.0),
        yaw_drag: Scalar::Fixed(0.0),
        mass: Scalar::Fixed(2.0),
        start_x: Scalar::Fixed(0.0),
        start_y: Scalar::Fixed(0.0),
        start_yaw: Scalar::Fixed(0.0),
        target_x: Scalar::Fixed(0.3125),
        target_y: Scalar::Fixed(0.0),
        target_yaw: Scalar::Fixed(0.0),
        ..BrickPushConfig::default()
    };
    let task = BrickPush::new(config.clone()).unwrap();
    let brick = task.brick();
    let mut env = brick_env(1, config, AutoReset::NextStep);
    reset(&mut env, Some(0), None);
    // 5 N (a quarter of the 20 N range) for 0.5 s: a = 2.5 m/s², x = 0.3125 m, v = 1.25 m/s.
    for _ in 0..10 {
        let o = step(&mut env, &[0.25, 0.0, 0.0]);
        assert!(!o.terminated[0]);
    }
    let q = env.batch().q(brick).unwrap()[0];
    let u = env.batch().u(brick).unwrap()[0];
    assert!((q[4] - 0.3125).abs() < 1e-12 && (u[3] - 1.25).abs() < 1e-12);
    // From the start again: 10 N for 0.25 s, then −10 N for 0.25 s (bang-bang) stops the
    // brick exactly on the target, 0.15625 + 0.15625 m away.
    reset(&mut env, Some(0), None);
    for _ in 0..5 {
        step(&mut env, &[0.5, 0.0, 0.0]);
    }
    let mut last = None;
    for _ in 0..5 {
        last = Some(step(&mut env, &[-0.5, 0.0, 0.0]));
    }
    let o = last.unwrap();
    let q = env.batch().q(brick).unwrap()[0];
    assert!((q[4] - 0.3125).abs() < 1e-12, "x {}", q[4]);
    assert!(o.terminated[0], "reaching the target at rest terminates");
    assert!(o.reward[0] > 9.0, "success bonus, reward {}", o.reward[0]);
}
