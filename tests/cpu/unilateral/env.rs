//! `BallToss-v0`: a vector environment on the unilateral-contact path. A ball dropped straight
//! down (action 0) comes to rest where it was released, so its reward is the closed form
//! `1 − |target| / range`; a throw lands downrange; episodes are reproducible from the seed and
//! independent of the other environments; each environment bounces with its own coefficients.

use simbatch::env::ball_toss::{BallToss, BallTossConfig};
use simbatch::env::{EnvOptions, StepOut, Task, VectorEnv, flags};

fn toss_env(n: usize) -> VectorEnv {
    VectorEnv::new(
        Box::new(BallToss::new(BallTossConfig::default()).unwrap()),
        n,
        EnvOptions::default(),
    )
    .unwrap()
}

/// One step: observations, rewards, terminated, flags.
fn step(env: &mut VectorEnv, actions: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<bool>, Vec<u32>) {
    let n = env.len();
    let od = env.spec().observation.dim();
    let (mut obs, mut reward) = (vec![0.0; n * od], vec![0.0; n]);
    let (mut terminated, mut truncated, mut fl) = (vec![false; n], vec![false; n], vec![0; n]);
    env.step(
        actions,
        StepOut {
            obs: &mut obs,
            reward: &mut reward,
            terminated: &mut terminated,
            truncated: &mut truncated,
            final_obs: None,
            flags: Some(&mut fl),
        },
    )
    .unwrap();
    (obs, reward, terminated, fl)
}

#[test]
fn a_dropped_ball_rests_where_released_and_a_throw_lands_downrange() {
    let n = 6;
    let mut env = toss_env(n);
    let od = env.spec().observation.dim();
    assert_eq!(
        env.spec().observation_names[..4],
        ["target_x", "target_y", "restitution", "friction"]
    );
    let mut first = vec![0.0; n * od];
    env.reset(Some(11), None, &mut first).unwrap();
    // Dropped straight down without spin: it bounces in place and ends at the origin.
    let (obs, reward, terminated, fl) = step(&mut env, &vec![0.0; n * 4]);
    for i in 0..n {
        let o = &obs[i * od..(i + 1) * od];
        assert!(terminated[i] && fl[i] & flags::NONFINITE == 0);
        assert_eq!(
            &o[..4],
            &first[i * od..i * od + 4],
            "the episode's target and surface"
        );
        assert!(
            o[4].abs() < 1e-9 && o[5].abs() < 1e-9,
            "env {i} rests at the origin: {o:?}"
        );
        let expected = 1.0 - f64::from(o[0]).hypot(f64::from(o[1])) / 4.0;
        assert!((f64::from(reward[i]) - expected).abs() < 1e-6, "env {i}");
    }
    // The next step starts the next episode (Gymnasium's next-step autoreset).
    let (_, _, _, fl) = step(&mut env, &vec![0.0; n * 4]);
    assert!(fl.iter().all(|f| f & flags::RESET != 0));
    // Thrown forward at 3 m/s with topspin: it lands and rolls on downrange, within a bounce
    // and roll of where a drag-free flight would land, never behind the release point.
    let throw: Vec<f32> = (0..n).flat_map(|_| [0.5, 0.0, 0.0, 0.5]).collect();
    let (obs, reward, _, _) = step(&mut env, &throw);
    for i in 0..n {
        let o = &obs[i * od..(i + 1) * od];
        let flight = 3.0 * (2.0 * 1.0 / 9.81f64).sqrt();
        assert!(f64::from(o[4]) > flight, "env {i}: ended at {}", o[4]);
        assert!(o[5].abs() < 1e-9, "no sideways motion");
        let d = (f64::from(o[4]) - f64::from(o[0])).hypot(f64::from(o[5]) - f64::from(o[1]));
        assert!((f64::from(reward[i]) - (1.0 - d / 4.0)).abs() < 1e-6);
    }
}

#[test]
fn episodes_are_reproducible_and_each_environment_has_its_own_surface() {
    let run = |n: usize| {
        let mut env = toss_env(n);
        let mut obs = vec![0.0; n * env.spec().observation.dim()];
        env.reset(Some(5), None, &mut obs).unwrap();
        let throw: Vec<f32> = (0..n)
            .flat_map(|i| [0.3 + 0.05 * i as f32, 0.1, 0.4, -0.3])
            .collect();
        step(&mut env, &throw)
    };
    let (a, b) = (run(4), run(4));
    assert_eq!(a, b, "same seed, same episode, bit for bit");
    let od = 8;
    let surfaces: Vec<(f32, f32)> = (0..4).map(|i| (a.0[i * od + 2], a.0[i * od + 3])).collect();
    for (k, s) in surfaces.iter().enumerate() {
        assert!(
            (0.3..=0.8).contains(&s.0) && (0.1..=0.6).contains(&s.1),
            "{s:?}"
        );
        assert!(
            surfaces[k + 1..].iter().all(|t| t != s),
            "drawn per environment"
        );
    }
    // The task exposes its contacts with the drawn coefficients.
    let task = BallToss::new(BallTossConfig::default()).unwrap();
    let contacts = task.unilateral_contacts(0, &[1.0, 0.0, 0.5, 0.3]).unwrap();
    assert_eq!(contacts.len(), 1);
    assert_eq!(contacts[0].coefficients.restitution, 0.5);
    assert_eq!(contacts[0].coefficients.mu_dynamic, 0.3);
}

#[test]
fn ball_toss_settings_are_checked() {
    let mut config = BallTossConfig::default();
    assert!(
        config
            .set("restitution", simbatch::sample::Scalar::Uniform(0.5, 1.5))
            .is_ok()
    );
    assert!(BallToss::new(config).is_err(), "restitution draws beyond 1");
    let mut config = BallTossConfig::default();
    assert!(
        config
            .set("max_speed", simbatch::sample::Scalar::Fixed(-1.0))
            .is_ok()
    );
    let err = BallToss::new(config).unwrap_err().to_string();
    assert!(err.contains("max_speed"), "{err}");
    assert!(
        BallTossConfig::default()
            .set("wind", simbatch::sample::Scalar::Fixed(1.0))
            .is_err()
    );
}
