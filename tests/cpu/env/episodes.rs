//! Autoreset modes, masked resets, draws independent of the number of envs, randomization
//! statistics.

use super::*;

#[test]
fn next_step_autoreset_returns_the_next_episode_on_the_following_step() {
    let n = 6;
    let mut env = plate_env(n, short(5), AutoReset::NextStep);
    reset(&mut env, Some(11), None);
    let zero = vec![0.0f32; n * 2];
    for k in 0..4 {
        let o = step(&mut env, &zero);
        assert!(o.truncated.iter().all(|t| !t), "step {k}");
    }
    // Step 5 truncates every episode (zero tilt rates keep the ball on the plate).
    let ended = step(&mut env, &zero);
    assert!(ended.truncated.iter().all(|t| *t));
    assert!(ended.terminated.iter().all(|t| !t));
    assert!(ended.flags.iter().all(|f| *f == 0));
    // The next step resets: reset observation, reward 0, nothing ended, RESET flagged; the
    // (non-finite!) actions of resetting environments are ignored.
    let nan = vec![f32::NAN; n * 2];
    let o = step(&mut env, &nan);
    assert!(o.flags.iter().all(|f| *f == flags::RESET));
    assert!(o.reward.iter().all(|r| *r == 0.0));
    assert!(o.terminated.iter().chain(&o.truncated).all(|t| !t));
    assert_eq!(env.episodes(), &[1; 6]);
    assert_eq!(env.elapsed_steps(), &[0; 6]);
    // The reset observation is episode 1 of seed 11 + i, as a plain reset without seed gives.
    let mut other = plate_env(n, short(5), AutoReset::NextStep);
    reset(&mut other, Some(11), None);
    let episode1 = reset(&mut other, None, None);
    assert_eq!(o.obs, episode1);
    // And a fresh episode differs from the first one.
    let mut third = plate_env(n, short(5), AutoReset::NextStep);
    assert_ne!(reset(&mut third, Some(11), None), episode1);
}

#[test]
fn same_step_autoreset_matches_next_step_shifted_by_one() {
    let n = 16;
    let config = BallOnPlateConfig {
        max_episode_steps: 40,
        ..BallOnPlateConfig::default()
    };
    let mut next = plate_env(n, config.clone(), AutoReset::NextStep);
    let mut same = plate_env(n, config, AutoReset::SameStep);
    assert_eq!(
        reset(&mut next, Some(5), None),
        reset(&mut same, Some(5), None)
    );
    // Per env: 0 = in lockstep, 1 = ended (next-step's reset is due), 2 = compared, stop.
    let mut phase = vec![0u8; n];
    let mut same_reset_obs: Vec<Vec<f32>> = vec![Vec::new(); n];
    let mut ended_seen = 0;
    for k in 0..45 {
        let a = actions(&next, k);
        let on = step(&mut next, &a);
        let os = step(&mut same, &a);
        for i in 0..n {
            let row = |v: &Vec<f32>| v[i * 10..(i + 1) * 10].to_vec();
            match phase[i] {
                0 => {
                    assert_eq!(on.reward[i], os.reward[i], "env {i} step {k}");
                    assert_eq!(on.terminated[i], os.terminated[i]);
                    assert_eq!(on.truncated[i], os.truncated[i]);
                    assert_eq!(on.flags[i], 0);
                    if on.terminated[i] || on.truncated[i] {
                        // Same-step: the final observation is next-step's last one, and the
                        // observation row is already the next episode's first.
                        assert_eq!(os.flags[i], flags::FINAL_OBS);
                        assert_eq!(row(&os.final_obs), row(&on.obs), "env {i} step {k}");
                        assert_ne!(row(&os.obs), row(&on.obs));
                        same_reset_obs[i] = row(&os.obs);
                        ended_seen += 1;
                        phase[i] = 1;
                    } else {
                        assert_eq!(os.flags[i], 0);
                        assert_eq!(row(&os.obs), row(&on.obs), "env {i} step {k}");
                    }
                }
                1 => {
                    // Next-step resets one step later to the very same first observation.
                    assert_eq!(on.flags[i], flags::RESET);
                    assert_eq!(row(&on.obs), same_reset_obs[i], "env {i} step {k}");
                    phase[i] = 2;
                }
                _ => {}
            }
        }
    }
    assert!(ended_seen >= 4, "only {ended_seen} episodes ended");
}

#[test]
fn disabled_autoreset_refuses_to_step_an_ended_env_until_it_is_reset() {
    let n = 4;
    let mut env = plate_env(n, short(2), AutoReset::Disabled);
    reset(&mut env, Some(3), None);
    let zero = vec![0.0f32; n * 2];
    step(&mut env, &zero);
    let o = step(&mut env, &zero);
    assert!(o.truncated.iter().all(|t| *t));
    let err = try_step(&mut env, &zero, false).unwrap_err();
    assert_eq!(err, Error::EnvNeedsReset { env: 0 });
    assert!(err.to_string().contains("environment 0 has ended"));
    // Resetting only env 0 is not enough; env 1 is named next.
    reset(&mut env, None, Some(&[true, false, false, false]));
    let err = try_step(&mut env, &zero, false).unwrap_err();
    assert_eq!(err, Error::EnvNeedsReset { env: 1 });
    reset(&mut env, None, Some(&[false, true, true, true]));
    let o = step(&mut env, &zero);
    assert!(o.truncated.iter().all(|t| !t));
    assert_eq!(env.elapsed_steps(), &[1; 4]);
}

/// Every per-instance value of the batch a task touches, for one instance.
fn instance_bits(env: &VectorEnv, i: usize) -> Vec<u64> {
    let b = env.batch();
    let mut v = Vec::new();
    for body in b.template().free_bodies().to_vec() {
        v.extend(b.q(body).unwrap()[i].map(f64::to_bits));
        v.extend(b.u(body).unwrap()[i].map(f64::to_bits));
        v.push(b.mass(body).unwrap()[i].to_bits());
        v.extend(b.inertia(body).unwrap()[i].map(f64::to_bits));
        v.extend(b.applied_force(body).unwrap()[i].map(f64::to_bits));
    }
    for body in b.template().prescribed_bodies().to_vec() {
        v.extend(b.pose(body).unwrap()[i].map(f64::to_bits));
        v.extend(b.velocity(body).unwrap()[i].map(f64::to_bits));
        v.extend(b.acceleration(body).unwrap()[i].map(f64::to_bits));
    }
    v.extend(b.gravity()[i].map(f64::to_bits));
    v.push(b.time()[i].to_bits());
    v
}

#[test]
fn masked_reset_changes_only_the_masked_envs_bit_for_bit() {
    for mut env in [
        plate_env(8, BallOnPlateConfig::default(), AutoReset::NextStep),
        brick_env(8, BrickPushConfig::default(), AutoReset::NextStep),
    ] {
        reset(&mut env, Some(9), None);
        for k in 0..5 {
            let a = actions(&env, k);
            step(&mut env, &a);
        }
        let before: Vec<Vec<u64>> = (0..8).map(|i| instance_bits(&env, i)).collect();
        let mut obs_before = vec![0.0; 8 * env.spec().observation.dim()];
        env.observe_all(&mut obs_before);
        let mask = [false, true, false, false, true, false, false, true];
        let obs = reset(&mut env, None, Some(&mask));
        let od = env.spec().observation.dim();
        for i in 0..8 {
            let after = instance_bits(&env, i);
            let row = |v: &[f32]| v[i * od..(i + 1) * od].to_vec();
            if mask[i] {
                assert_ne!(after, before[i], "env {i} was not reset");
                assert_eq!(env.elapsed_steps()[i], 0);
                assert_eq!(env.episodes()[i], 1);
            } else {
                assert_eq!(after, before[i], "env {i} was touched");
                assert_eq!(row(&obs), row(&obs_before));
                assert_eq!(env.elapsed_steps()[i], 5);
                assert_eq!(env.episodes()[i], 0);
            }
        }
        // A bad mask length is a typed error.
        let mut o = vec![0.0; 8 * od];
        let err = env.reset(None, Some(&[true; 3]), &mut o).unwrap_err();
        assert!(matches!(
            err,
            Error::Dimension {
                what: "reset mask",
                got: 3,
                expected: 8
            }
        ));
    }
}

#[test]
fn env_draws_and_trajectories_do_not_depend_on_the_number_of_envs() {
    for make in [
        |n| plate_env(n, BallOnPlateConfig::default(), AutoReset::NextStep),
        |n| brick_env(n, BrickPushConfig::default(), AutoReset::NextStep),
    ] {
        let mut small: VectorEnv = make(5);
        let mut large: VectorEnv = make(37);
        let od = small.spec().observation.dim();
        let ad = small.spec().action.dim();
        let o_small = reset(&mut small, Some(123), None);
        let o_large = reset(&mut large, Some(123), None);
        assert_eq!(o_small[..], o_large[..5 * od]);
        for k in 0..30 {
            let a_large = actions(&large, k);
            let a_small = a_large[..5 * ad].to_vec();
            let s = step(&mut small, &a_small);
            let l = step(&mut large, &a_large);
            assert_eq!(s.obs[..], l.obs[..5 * od], "step {k}");
            assert_eq!(s.reward[..], l.reward[..5]);
            assert_eq!(s.terminated[..], l.terminated[..5]);
            assert_eq!(s.truncated[..], l.truncated[..5]);
        }
        // A masked reset with a seed gives env i the seed s + i whatever the mask.
        let mut m = vec![false; 37];
        m[3] = true;
        reset(&mut large, Some(1000), Some(&m));
        assert_eq!(large.seeds()[3], 1003);
        assert_eq!(large.seeds()[4], 127);
    }
}

#[test]
fn randomization_follows_the_declared_distributions() {
    let n = 4000;
    let config = BallOnPlateConfig {
        ball_radius: Scalar::Uniform(0.02, 0.04),
        ball_mass: Scalar::LogUniform(0.05, 0.5),
        initial_tilt_x: Scalar::Uniform(-0.1, 0.1),
        initial_tilt_y: Scalar::Fixed(0.0),
        ..BallOnPlateConfig::default()
    };
    let task = BallOnPlate::new(config).unwrap();
    let (ball, contact) = (task.ball(), task.contact());
    let mut env = VectorEnv::new(Box::new(task), n, EnvOptions::default()).unwrap();
    let mean_var = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (
            m,
            v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64,
        )
    };
    for episode in 0..2 {
        let obs = reset(&mut env, if episode == 0 { Some(42) } else { None }, None);
        let batch = env.batch();
        let radius = batch.param(contact, "radius").unwrap().0.to_vec();
        let log_mass: Vec<f64> = batch.mass(ball).unwrap().iter().map(|m| m.ln()).collect();
        let tilt_x: Vec<f64> = (0..n).map(|i| -f64::from(obs[i * 10 + 5]).asin()).collect();
        let start_x: Vec<f64> = (0..n).map(|i| f64::from(obs[i * 10])).collect();
        let target_y: Vec<f64> = env.task_values().chunks(2).map(|t| t[1]).collect();
        let sd = |var: f64| (var / n as f64).sqrt();
        // uniform [0.02, 0.04]: mean 0.03, variance 0.02²/12
        let (m, v) = mean_var(&radius);
        assert!(
            (m - 0.03).abs() < 4.0 * sd(0.02f64.powi(2) / 12.0),
            "radius mean {m}"
        );
        assert!(
            (v / (0.02f64.powi(2) / 12.0) - 1.0).abs() < 0.1,
            "radius var {v}"
        );
        assert!(radius.iter().all(|r| (0.02..0.04).contains(r)));
        // log-uniform: ln m uniform on [ln 0.05, ln 0.5]
        let (lo, hi) = (0.05f64.ln(), 0.5f64.ln());
        let (m, v) = mean_var(&log_mass);
        let var_u = (hi - lo).powi(2) / 12.0;
        assert!(
            (m - 0.5 * (lo + hi)).abs() < 4.0 * sd(var_u),
            "ln mass mean {m}"
        );
        assert!((v / var_u - 1.0).abs() < 0.1);
        // uniform ±0.1 tilt about x: the normal's y component is −sin(tilt_x) (no tilt about y).
        let (m, v) = mean_var(&tilt_x);
        assert!(m.abs() < 4.0 * sd(0.2f64.powi(2) / 12.0), "tilt mean {m}");
        assert!(
            (v / (0.2f64.powi(2) / 12.0) - 1.0).abs() < 0.1,
            "tilt var {v}"
        );
        // The ball starts where drawn: uniform ±0.08 in the plate frame.
        let (m, v) = mean_var(&start_x);
        assert!(m.abs() < 4.0 * sd(0.16f64.powi(2) / 12.0));
        assert!((v / (0.16f64.powi(2) / 12.0) - 1.0).abs() < 0.1);
        let (m, _) = mean_var(&target_y);
        assert!(m.abs() < 4.0 * sd(0.16f64.powi(2) / 12.0));
        // Draws of different fields are uncorrelated.
        let (mr, vr) = mean_var(&radius);
        let (ms, vs) = mean_var(&start_x);
        let cov = radius
            .iter()
            .zip(&start_x)
            .map(|(a, b)| (a - mr) * (b - ms))
            .sum::<f64>()
            / n as f64;
        assert!((cov / (vr * vs).sqrt()).abs() < 4.0 / (n as f64).sqrt());
    }
}

#[test]
fn normal_draws_have_the_declared_mean_and_spread() {
    let n = 4000;
    let config = BrickPushConfig {
        start_yaw: Scalar::Normal(0.3, 0.5),
        mass: Scalar::Choice(vec![1.0, 2.0, 4.0]),
        ..BrickPushConfig::default()
    };
    let task = BrickPush::new(config.clone()).unwrap();
    let brick = task.brick();
    let mut env = brick_env(n, config, AutoReset::NextStep);
    reset(&mut env, Some(7), None);
    let yaw: Vec<f64> = (0..n).map(|i| task.yaw(env.batch(), i)).collect();
    let m = yaw.iter().sum::<f64>() / n as f64;
    let sd = (yaw.iter().map(|y| (y - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    assert!((m - 0.3).abs() < 4.0 * 0.5 / (n as f64).sqrt(), "mean {m}");
    assert!((sd / 0.5 - 1.0).abs() < 0.06, "sd {sd}");
    // A choice draws each value about equally often, and nothing else.
    let masses = env.batch().mass(brick).unwrap();
    for value in [1.0, 2.0, 4.0] {
        let count = masses.iter().filter(|m| **m == value).count() as f64;
        let p = 1.0 / 3.0;
        assert!((count / n as f64 - p).abs() < 4.0 * (p * (1.0 - p) / n as f64).sqrt());
    }
    assert!(masses.iter().all(|m| [1.0, 2.0, 4.0].contains(m)));
}

/// `BallOnPlate-v0` with the trait's default `apply_actions`: its `apply_action` for one
/// environment after another, the reference the task's own all-at-once controls are held to.
struct OneAtATime(BallOnPlate);

impl Task for OneAtATime {
    fn spec(&self) -> &simbatch::env::EnvSpec {
        self.0.spec()
    }
    fn template(&self) -> Result<SystemTemplate> {
        self.0.template()
    }
    fn task_width(&self) -> usize {
        self.0.task_width()
    }
    fn reset_env(
        &self,
        batch: &mut Batch,
        env: usize,
        draws: &simbatch::env::Draws,
        task: &mut [f64],
    ) -> Result<()> {
        self.0.reset_env(batch, env, draws, task)
    }
    fn apply_action(
        &self,
        batch: &mut Batch,
        env: usize,
        action: &[f32],
        task: &[f64],
    ) -> Result<()> {
        self.0.apply_action(batch, env, action, task)
    }
    fn observe(&self, batch: &Batch, env: usize, task: &[f64], obs: &mut [f32]) {
        self.0.observe(batch, env, task, obs)
    }
    fn outcome(&self, batch: &Batch, env: usize, task: &[f64], action: &[f32]) -> (f32, bool) {
        self.0.outcome(batch, env, task, action)
    }
}

#[test]
fn plate_controls_set_all_at_once_match_one_environment_at_a_time() {
    // Past the parallel thresholds (256 instances), on three threads; short episodes, so that
    // next-step autoresets leave environments out of some steps' controls.
    let n = 300;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    pool.install(|| {
        let options = EnvOptions {
            autoreset: AutoReset::NextStep,
            ..EnvOptions::default()
        };
        let task = || BallOnPlate::new(short(4)).unwrap();
        let mut all = VectorEnv::new(Box::new(task()), n, options).unwrap();
        let mut one = VectorEnv::new(Box::new(OneAtATime(task())), n, options).unwrap();
        assert_eq!(
            reset(&mut all, Some(9), None),
            reset(&mut one, Some(9), None)
        );
        let mut skipped = 0;
        for k in 0..9 {
            let a = actions(&all, k);
            let (x, y) = (step(&mut all, &a), step(&mut one, &a));
            let bits = |o: &Outcome| {
                let floats = o.obs.iter().chain(&o.reward).chain(&o.final_obs);
                let f: Vec<u32> = floats.map(|v| v.to_bits()).collect();
                (
                    f,
                    o.terminated.clone(),
                    o.truncated.clone(),
                    o.flags.clone(),
                )
            };
            assert!(bits(&x) == bits(&y), "step {k}");
            skipped += x.flags.iter().filter(|f| **f & flags::RESET != 0).count();
            for i in 0..n {
                assert!(
                    instance_bits(&all, i) == instance_bits(&one, i),
                    "step {k}, env {i}"
                );
            }
        }
        assert!(
            skipped > 0,
            "some steps reset environments instead of controlling them"
        );
    });
}
