//! The vector-environment API: autoreset modes, masks, seeding, randomization statistics,
//! non-finite isolation, input errors, and the physics of both built-in tasks against closed
//! forms (CPU, f64).

use simbatch::env::ball_on_plate::{BallOnPlate, BallOnPlateConfig};
use simbatch::env::brick_push::{BrickPush, BrickPushConfig};
use simbatch::env::{AutoReset, EnvOptions, StepOut, Task, VectorEnv, flags};
use simbatch::prelude::*;
use simbatch::sample::Scalar;
use simbatch::scenarios::Rng;

/// Everything one step returns, owned.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    obs: Vec<f32>,
    reward: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    final_obs: Vec<f32>,
    flags: Vec<u32>,
}

fn step(env: &mut VectorEnv, actions: &[f32]) -> Outcome {
    try_step(env, actions, true).unwrap()
}

/// One step into fresh buffers; `with_final` passes the final-observation buffer.
fn try_step(env: &mut VectorEnv, actions: &[f32], with_final: bool) -> Result<Outcome> {
    let n = env.len();
    let od = env.spec().observation.dim();
    let mut o = Outcome {
        obs: vec![0.0; n * od],
        reward: vec![0.0; n],
        terminated: vec![false; n],
        truncated: vec![false; n],
        final_obs: vec![f32::NAN; n * od],
        flags: vec![0; n],
    };
    env.step(
        actions,
        StepOut {
            obs: &mut o.obs,
            reward: &mut o.reward,
            terminated: &mut o.terminated,
            truncated: &mut o.truncated,
            final_obs: with_final.then_some(&mut o.final_obs[..]),
            flags: Some(&mut o.flags),
        },
    )?;
    Ok(o)
}

fn reset(env: &mut VectorEnv, seed: Option<u64>, mask: Option<&[bool]>) -> Vec<f32> {
    let mut obs = vec![0.0; env.len() * env.spec().observation.dim()];
    env.reset(seed, mask, &mut obs).unwrap();
    obs
}

fn plate_env(n: usize, config: BallOnPlateConfig, autoreset: AutoReset) -> VectorEnv {
    VectorEnv::new(
        Box::new(BallOnPlate::new(config).unwrap()),
        n,
        EnvOptions {
            autoreset,
            ..EnvOptions::default()
        },
    )
    .unwrap()
}

fn brick_env(n: usize, config: BrickPushConfig, autoreset: AutoReset) -> VectorEnv {
    VectorEnv::new(
        Box::new(BrickPush::new(config).unwrap()),
        n,
        EnvOptions {
            autoreset,
            ..EnvOptions::default()
        },
    )
    .unwrap()
}

/// Reproducible actions in the action space (slightly beyond it, to exercise clipping).
fn actions(env: &VectorEnv, step: usize) -> Vec<f32> {
    let space = &env.spec().action;
    let mut rng = Rng::for_instance(77, step);
    (0..env.len())
        .flat_map(|_| {
            (0..space.dim())
                .map(|k| {
                    (1.1 * rng.uniform(f64::from(space.low[k]), f64::from(space.high[k]))) as f32
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A short-episode plate config, so truncation comes quickly.
fn short(steps: u32) -> BallOnPlateConfig {
    BallOnPlateConfig {
        max_episode_steps: steps,
        ..BallOnPlateConfig::default()
    }
}

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
