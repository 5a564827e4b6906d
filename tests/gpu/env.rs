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

fn run(mut env: VectorEnv, steps: usize) -> (Vec<f32>, Run, bool) {
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
    let on_gpu = env.unilateral_on_gpu();
    (first, r, on_gpu)
}

fn compare(make: impl Fn() -> Box<dyn Task>, name: &str) {
    compare_in(make, name, Precision::F32, OBS_BOUND, (256, 40));
}

/// `make`'s task on the GPU in `precision` against the CPU, `n` environments for `steps`
/// control steps, observations within `bound`.
fn compare_in(
    make: impl Fn() -> Box<dyn Task>,
    name: &str,
    precision: Precision,
    bound: f32,
    (n, steps): (usize, usize),
) {
    let Some(device) = common::device() else {
        return;
    };
    if precision == Precision::F64 && !device.supports_f64 {
        return;
    }
    let cpu = VectorEnv::new(make(), n, EnvOptions::default()).unwrap();
    let gpu = VectorEnv::on_device(make(), n, AutoReset::NextStep, device, precision).unwrap();
    assert_eq!(gpu.backend(), Backend::Gpu);
    let od = cpu.spec().observation.dim();
    let (first_cpu, a, _) = run(cpu, steps);
    let (first_gpu, b, events_on_gpu) = run(gpu, steps);
    if name == "BallToss" {
        assert!(events_on_gpu, "BallToss stepped on the CPU's event path");
    }
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
                d <= bound,
                "{name}: env {i} step {k}: |Δobs| {d:e}\n cpu {oa:?}\n gpu {ob:?}"
            );
            assert!((a.reward[k][i] - b.reward[k][i]).abs() <= 10.0 * bound);
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
    eprintln!(
        "{name}: worst |Δobs| GPU {precision:?} vs CPU f64 = {worst:e} over {compared} env-steps"
    );
    // Episodes of one step (BallToss: a throw) end at every step.
    let episode = make().spec().max_episode_steps as usize;
    assert!(
        compared >= n * steps.min(episode.max(1)) / 2,
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

/// BallToss bounces and rolls on the unilateral contact: on a GPU backend it steps on the event
/// kernel (`gpu::events`), and in f64 gives the CPU's transitions to the observations' f32
/// rounding. Each step is a whole throw (2.5 s of flight, bounces and rolling: thousands of
/// event-kernel trials), so few environments and steps on lavapipe.
#[test]
fn ball_toss_gpu_event_kernel_matches_cpu() {
    use simbatch::env::ball_toss::{BallToss, BallTossConfig};
    compare_in(
        || Box::new(BallToss::new(BallTossConfig::default()).unwrap()),
        "BallToss",
        Precision::F64,
        1e-5,
        (24, 3),
    );
}
