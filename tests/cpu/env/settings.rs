//! Non-finite isolation, typed errors for bad actions, buffers and settings, tasks made by name,
//! per-env seeds.

use super::*;

#[test]
fn a_non_finite_env_is_truncated_and_flagged_and_the_others_are_untouched() {
    let n = 5;
    let mut a = plate_env(n, BallOnPlateConfig::default(), AutoReset::NextStep);
    let mut b = plate_env(n, BallOnPlateConfig::default(), AutoReset::NextStep);
    reset(&mut a, Some(4), None);
    reset(&mut b, Some(4), None);
    let ball = a.batch().template().free_bodies()[0];
    // Env 2 of `a` gets an absurd spin that overflows the integration.
    a.batch_mut()
        .set_u(ball, 2, [1e300, 1e300, 1e300, 0.0, 0.0, 0.0])
        .unwrap();
    let act = actions(&a, 0);
    let oa = step(&mut a, &act);
    let ob = step(&mut b, &act);
    assert!(oa.truncated[2] && !oa.terminated[2]);
    assert_eq!(oa.flags[2], flags::NONFINITE);
    assert_eq!(oa.reward[2], 0.0);
    // Its observation is that of its last finite state.
    assert!(oa.obs[20..30].iter().all(|x| x.is_finite()));
    for i in [0, 1, 3, 4] {
        assert_eq!(oa.obs[i * 10..(i + 1) * 10], ob.obs[i * 10..(i + 1) * 10]);
        assert_eq!(oa.reward[i], ob.reward[i]);
        assert_eq!(oa.flags[i], 0);
    }
    // The next step resets it (next-step autoreset) and it runs normally again.
    let oa = step(&mut a, &act);
    assert_eq!(oa.flags[2], flags::RESET);
    assert_eq!(a.batch().status()[2], status::OK);
    let oa = step(&mut a, &act);
    assert_eq!(oa.flags[2], 0);
    assert!(oa.obs[20..30].iter().all(|x| x.is_finite()));
}

#[test]
fn bad_actions_buffers_and_settings_are_typed_errors() {
    let mut env = plate_env(3, BallOnPlateConfig::default(), AutoReset::SameStep);
    let mut act = vec![0.0f32; 6];
    act[3] = f32::INFINITY;
    let err = try_step(&mut env, &act, true).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("actions[1] (tilt_rate_y)") && msg.contains("instance 1"),
        "{msg}"
    );
    // Nothing moved.
    assert_eq!(env.elapsed_steps(), &[0, 0, 0]);
    let err = try_step(&mut env, &[0.0; 5], true).unwrap_err();
    assert!(matches!(
        err,
        Error::Dimension {
            what: "action buffer",
            got: 5,
            expected: 6
        }
    ));
    // Same-step needs the final-observation buffer.
    let err = try_step(&mut env, &[0.0; 6], false).unwrap_err();
    assert!(
        err.to_string().contains("final observation buffer"),
        "{err}"
    );

    let bad = BallOnPlateConfig {
        start_x: Scalar::Uniform(-0.2, 0.2),
        ..BallOnPlateConfig::default()
    };
    let msg = BallOnPlate::new(bad).unwrap_err().to_string();
    assert!(
        msg.contains("start_x") && msg.contains("[-0.15, 0.15]"),
        "{msg}"
    );
    let bad = BrickPushConfig {
        mass: Scalar::Normal(1.0, 0.1),
        ..BrickPushConfig::default()
    };
    let msg = BrickPush::new(bad).unwrap_err().to_string();
    assert!(msg.contains("mass"), "{msg}");
    let bad = BrickPushConfig {
        control_dt: 0.0,
        ..BrickPushConfig::default()
    };
    assert!(
        BrickPush::new(bad)
            .unwrap_err()
            .to_string()
            .contains("control_dt")
    );
    assert!(
        VectorEnv::new(
            Box::new(BrickPush::new(BrickPushConfig::default()).unwrap()),
            0,
            EnvOptions::default()
        )
        .unwrap_err()
        .to_string()
        .contains("num_envs")
    );
    assert_eq!(AutoReset::parse("same_step").unwrap(), AutoReset::SameStep);
    assert!(AutoReset::parse("sometimes").is_err());
    let task = BallOnPlate::new(BallOnPlateConfig::default()).unwrap();
    assert_eq!(
        task.spec().observation_names.len(),
        task.spec().observation.dim()
    );
}

#[test]
fn tasks_are_made_by_name_with_settings_checked() {
    let settings = vec![
        ("max_episode_steps".to_string(), Scalar::Fixed(7.0)),
        ("ball_radius".to_string(), Scalar::Choice(vec![0.02, 0.03])),
    ];
    let task = simbatch::env::make_task("BallOnPlate-v0", &settings).unwrap();
    assert_eq!(task.spec().max_episode_steps, 7);
    assert_eq!(task.spec().name, "BallOnPlate-v0");
    let task = simbatch::env::make_task("BrickPush-v0", &[]).unwrap();
    assert_eq!(task.spec().action.dim(), 3);
    let msg = |name: &str, s: Vec<(String, Scalar)>| match simbatch::env::make_task(name, &s) {
        Ok(_) => panic!("{name} {s:?} accepted"),
        Err(e) => e.to_string(),
    };
    let m = msg(
        "BallOnPlate-v0",
        vec![("radius".into(), Scalar::Fixed(0.1))],
    );
    assert!(m.contains("radius") && m.contains("ball_radius"), "{m}");
    let m = msg(
        "BrickPush-v0",
        vec![("substeps".into(), Scalar::Fixed(2.5))],
    );
    assert!(m.contains("substeps") && m.contains("an integer"), "{m}");
    let m = msg(
        "BrickPush-v0",
        vec![("max_force".into(), Scalar::Uniform(1.0, 2.0))],
    );
    assert!(
        m.contains("max_force") && m.contains("not drawn per episode"),
        "{m}"
    );
    let m = msg("CartPole-v1", vec![]);
    assert!(
        m.contains("CartPole-v1") && m.contains("BallOnPlate-v0"),
        "{m}"
    );
}

#[test]
fn per_env_seeds_pick_each_envs_stream() {
    // reset_with_seeds gives env i exactly the stream reset(seed) would give env j with
    // s + j = seeds[i].
    let mut a = plate_env(4, BallOnPlateConfig::default(), AutoReset::NextStep);
    let mut b = plate_env(4, BallOnPlateConfig::default(), AutoReset::NextStep);
    let mut obs = vec![0.0; 40];
    a.reset_with_seeds(Some(&[13, 12, 11, 10]), None, &mut obs)
        .unwrap();
    let ob = reset(&mut b, Some(10), None);
    for i in 0..4 {
        assert_eq!(obs[i * 10..(i + 1) * 10], ob[(3 - i) * 10..(4 - i) * 10]);
    }
}
