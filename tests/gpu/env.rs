//! Vector environments on the GPU (f32) against the f64 CPU path: the same draws bit for bit,
//! the same trajectories within the f32 bound, the same autoreset bookkeeping.

use crate::common;

use simbatch::cpu::unilateral::{Coefficients, UnilateralContact};
use simbatch::env::ball_on_plate::{BallOnPlate, BallOnPlateConfig};
use simbatch::env::brick_push::{BrickPush, BrickPushConfig};
use simbatch::env::{AutoReset, BoxSpace, Draws, EnvOptions, EnvSpec, StepOut, Task, VectorEnv};
use simbatch::prelude::*;
use simbatch::sample::Scalar;
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
    let refused = common::refuses_f64_several_contacts(&device);
    let cpu = VectorEnv::new(make(), n, EnvOptions::default()).unwrap();
    let gpu = VectorEnv::on_device(make(), n, AutoReset::NextStep, device, precision).unwrap();
    assert_eq!(gpu.backend(), Backend::Gpu);
    let od = cpu.spec().observation.dim();
    let (first_cpu, a, _) = run(cpu, steps);
    let (first_gpu, b, events_on_gpu) = run(gpu, steps);
    if name == "BallPair" && precision == Precision::F64 && refused {
        // Two contacts in f64 on NVIDIA: the CPU's event path (`UnilateralRunner`'s note).
        assert!(
            !events_on_gpu,
            "{name}: the f64 several-contact kernel ran on NVIDIA"
        );
    } else if name == "BallToss" || name == "BallPair" {
        assert!(events_on_gpu, "{name} stepped on the CPU's event path");
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

/// Two balls tossed side by side, each on its own unilateral contact with Ground (a test task):
/// the action sets both balls' velocity along x and z, the restitution and friction are drawn per
/// episode (the same for both), and an episode lasts four steps, so each step resumes the
/// contacts' modes from the last.
struct BallPair {
    spec: EnvSpec,
    balls: [BodyId; 2],
    contacts: [ConstraintId; 2],
}

impl BallPair {
    fn template() -> (SystemTemplate, [BodyId; 2], [ConstraintId; 2]) {
        let mut t = SystemTemplate::new();
        let balls = [t.add_free_body("left"), t.add_free_body("right")];
        let contacts = balls.map(|b| {
            t.add_constraint(SphereOnPlaneContact::new(GROUND, b, true))
                .unwrap()
        });
        (t, balls, contacts)
    }

    fn new() -> Self {
        let (_, balls, contacts) = Self::template();
        let inf = f32::INFINITY;
        Self {
            spec: EnvSpec {
                name: "BallPair-test",
                observation: BoxSpace {
                    low: vec![-inf; 8],
                    high: vec![inf; 8],
                },
                action: BoxSpace::uniform(2, -1.0, 1.0),
                observation_names: vec!["x0", "z0", "vx0", "vz0", "x1", "z1", "vx1", "vz1"],
                action_names: vec!["vx", "vz"],
                control_dt: 0.4,
                substeps: 400,
                max_episode_steps: 4,
                stabilization: Stabilization::None,
            },
            balls,
            contacts,
        }
    }
}

impl Task for BallPair {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn template(&self) -> Result<SystemTemplate> {
        Ok(Self::template().0)
    }

    fn task_width(&self) -> usize {
        2
    }

    fn reset_env(
        &self,
        batch: &mut Batch,
        env: usize,
        draws: &Draws,
        task: &mut [f64],
    ) -> Result<()> {
        task[0] = draws.draw("restitution", &Scalar::Uniform(0.3, 0.9));
        task[1] = draws.draw("friction", &Scalar::Uniform(0.1, 0.6));
        for (k, (ball, contact)) in self.balls.iter().zip(&self.contacts).enumerate() {
            let height = draws.draw(["height0", "height1"][k], &Scalar::Uniform(0.1, 0.5));
            let x = [-0.3, 0.3][k];
            batch.set_q(*ball, env, [1.0, 0.0, 0.0, 0.0, x, 0.0, height + 0.05])?;
            batch.set_u(*ball, env, [0.0; 6])?;
            let moment = 0.4 * 0.2 * 0.05 * 0.05;
            batch.set_mass_properties(
                *ball,
                env,
                0.2,
                [0.0; 3],
                [moment, moment, moment, 0.0, 0.0, 0.0],
            )?;
            batch.set_param(*contact, "radius", env, &[0.05])?;
            batch.set_enabled(*contact, env, true)?;
        }
        batch.set_gravity(env, [0.0, 0.0, -9.81])
    }

    fn apply_action(
        &self,
        batch: &mut Batch,
        env: usize,
        action: &[f32],
        _task: &[f64],
    ) -> Result<()> {
        for (k, ball) in self.balls.iter().enumerate() {
            let mut u = batch.u(*ball)?[env];
            u[3] += 2.0 * f64::from(action[0]) * [1.0, -1.0][k];
            u[5] += 2.0 * f64::from(action[1]).abs();
            batch.set_u(*ball, env, u)?;
        }
        Ok(())
    }

    fn observe(&self, batch: &Batch, env: usize, _task: &[f64], obs: &mut [f32]) {
        for (k, ball) in self.balls.iter().enumerate() {
            let q = batch.q(*ball).map(|q| q[env]).unwrap_or([f64::NAN; 7]);
            let u = batch.u(*ball).map(|u| u[env]).unwrap_or([f64::NAN; 6]);
            for (o, x) in obs[4 * k..4 * k + 4]
                .iter_mut()
                .zip([q[4], q[6], u[3], u[5]])
            {
                *o = x as f32;
            }
        }
    }

    fn outcome(&self, batch: &Batch, env: usize, _task: &[f64], _action: &[f32]) -> (f32, bool) {
        let x = |b: BodyId| batch.q(b).map(|q| q[env][4]).unwrap_or(f64::NAN);
        (-(x(self.balls[0]) + x(self.balls[1])).abs() as f32, false)
    }

    fn unilateral_contacts(&self, _env: usize, task: &[f64]) -> Option<Vec<UnilateralContact>> {
        let coefficients = Coefficients::new(task[0], task[1], task[1]).ok()?;
        Some(
            self.contacts
                .iter()
                .map(|c| UnilateralContact {
                    constraint: *c,
                    coefficients,
                })
                .collect(),
        )
    }
}

/// A task with two unilateral contacts per environment steps on the several-contact event
/// kernel through `VectorEnv` (`backend::UnilateralRunner`), resuming each step from the last
/// one's contact records, and in f64 gives the CPU's transitions to the observations' f32
/// rounding.
#[test]
fn a_task_with_two_unilateral_contacts_steps_on_the_several_contact_kernel() {
    compare_in(
        || Box::new(BallPair::new()),
        "BallPair",
        Precision::F64,
        1e-5,
        (16, 4),
    );
}
