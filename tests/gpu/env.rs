//! Vector environments on the GPU (f32) against the f64 CPU path: the same draws bit for bit,
//! the same trajectories within the f32 bound, the same autoreset bookkeeping.

use crate::common;

use simbatch::env::ball_on_plate::{BallOnPlate, BallOnPlateConfig};
use simbatch::env::brick_push::{BrickPush, BrickPushConfig};
use simbatch::env::{AutoReset, EnvOptions, StepOut, Task, VectorEnv};
use simbatch::prelude::*;
use simbatch::scenarios::Rng;

/// Largest observation difference allowed between the f32 GPU and the f64 CPU path over the
/// compared steps (40 control steps; observations are O(0.01–1) in SI units). Seen on lavapipe:
/// 3.0e-7 (BallOnPlate), 2.4e-6 (BrickPush, positions up to 2 m); the bound leaves ~40× for
/// other adapters' f32 arithmetic.
const OBS_BOUND: f32 = 1e-4;

struct Run {
    obs: Vec<Vec<f32>>,
    reward: Vec<Vec<f32>>,
    done: Vec<Vec<bool>>,
}

fn run(mut env: VectorEnv, steps: usize) -> (Vec<f32>, Run) {
    let n = env.len();
    let od = env.spec().observation.dim();
    let ad = env.spec().action.dim();
    let mut first = vec![0.0; n * od];
    env.reset(Some(2026), None, &mut first).unwrap();
    let mut r = Run {
        obs: Vec::new(),
        reward: Vec::new(),
        done: Vec::new(),
    };
    for k in 0..steps {
        let space = env.spec().action.clone();
        let mut rng = Rng::for_instance(5, k);
        let actions: Vec<f32> = (0..n * ad)
            .map(|j| {
                let c = j % ad;
                // Gentle actions, so most episodes outlast the comparison.
                (0.3 * rng.uniform(f64::from(space.low[c]), f64::from(space.high[c]))) as f32
            })
            .collect();
        let mut obs = vec![0.0; n * od];
        let mut reward = vec![0.0; n];
        let (mut te, mut tr) = (vec![false; n], vec![false; n]);
        env.step(
            &actions,
            StepOut {
                obs: &mut obs,
                reward: &mut reward,
                terminated: &mut te,
                truncated: &mut tr,
                final_obs: None,
                flags: None,
            },
        )
        .unwrap();
        r.obs.push(obs);
        r.reward.push(reward);
        r.done
            .push(te.iter().zip(&tr).map(|(a, b)| *a || *b).collect());
    }
    (first, r)
}

fn compare(make: impl Fn() -> Box<dyn Task>, name: &str) {
    let Some(device) = common::device() else {
        return;
    };
    let n = 256;
    let steps = 40;
    let cpu = VectorEnv::new(make(), n, EnvOptions::default()).unwrap();
    let gpu = VectorEnv::on_device(make(), n, AutoReset::NextStep, device, Precision::F32).unwrap();
    assert_eq!(gpu.backend(), Backend::Gpu);
    let od = cpu.spec().observation.dim();
    let (first_cpu, a) = run(cpu, steps);
    let (first_gpu, b) = run(gpu, steps);
    // Draws and initial states are made on the host: identical bits.
    assert_eq!(first_cpu, first_gpu, "{name}: reset observations");
    let mut worst = 0.0f32;
    let mut compared = 0;
    for i in 0..n {
        for k in 0..steps {
            let row = |v: &Vec<f32>| v[i * od..(i + 1) * od].to_vec();
            let (oa, ob) = (row(&a.obs[k]), row(&b.obs[k]));
            let d = oa
                .iter()
                .zip(&ob)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            worst = worst.max(d);
            assert!(
                d <= OBS_BOUND,
                "{name}: env {i} step {k}: |Δobs| {d:e}\n cpu {oa:?}\n gpu {ob:?}"
            );
            assert!((a.reward[k][i] - b.reward[k][i]).abs() <= 10.0 * OBS_BOUND);
            compared += 1;
            // Stop at the first end on either path (a threshold crossed a hair apart).
            if a.done[k][i] || b.done[k][i] {
                assert_eq!(
                    a.done[k][i], b.done[k][i],
                    "{name}: env {i} ended on one path only at step {k}"
                );
                break;
            }
        }
    }
    eprintln!("{name}: worst |Δobs| GPU f32 vs CPU f64 = {worst:e} over {compared} env-steps");
    assert!(
        compared >= n * steps / 2,
        "{name}: only {compared} env-steps compared"
    );
}

#[test]
fn ball_on_plate_gpu_matches_cpu() {
    compare(
        || Box::new(BallOnPlate::new(BallOnPlateConfig::default()).unwrap()),
        "BallOnPlate",
    );
}

#[test]
fn brick_push_gpu_matches_cpu() {
    compare(
        || Box::new(BrickPush::new(BrickPushConfig::default()).unwrap()),
        "BrickPush",
    );
}
