//! The vector-environment API against closed forms (CPU, f64), one file per part: autoreset
//! modes, masks, seeding and randomization statistics (`episodes`); the physics of both built-in
//! tasks (`physics`); non-finite isolation, input errors, tasks by name and seeds (`settings`).
//! The helpers every part uses are here.

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

mod allocations;
mod episodes;
mod physics;
mod settings;
