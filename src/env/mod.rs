//! Reinforcement-learning vector environments: thousands of environments stepped per call over
//! one [`Batch`], on the CPU or the GPU through the same [`Stepper`](crate::backend::Stepper).
//!
//! A [`Task`] says what one environment is (its system template, how an episode starts, how an
//! action drives it, what it observes and how it is rewarded); [`VectorEnv`] runs `N` of them:
//!
//! * [`VectorEnv::reset`] with an optional seed and mask, [`VectorEnv::step`] with the actions,
//!   both writing into caller-provided buffers (observations, rewards, terminated, truncated, and
//!   per-environment [`flags`]), so a Python caller can hand over NumPy arrays and nothing is
//!   copied twice;
//! * autoreset as Gymnasium 1.x defines it ([`AutoReset`]: next-step, same-step with the final
//!   observation in its own buffer, or disabled);
//! * per-environment randomization on every reset from the same distributions as the `simbatch`
//!   command ([`crate::sample::Scalar`]), drawn from a counter-based stream keyed by the
//!   environment's seed and episode number ([`Draws`]): environment `i` reset with seed `s` gets
//!   the seed `s + i` (Gymnasium's rule), so what it draws never depends on the number of
//!   environments, the backend, or on the other environments;
//! * an environment whose state goes non-finite is truncated and flagged
//!   ([`flags::NONFINITE`]); the others are not disturbed.
//!
//! Two tasks are built in: [`ball_on_plate::BallOnPlate`] (a rolling ball on a tilting plate,
//! `SphereOnPlaneContact` on a prescribed body) and [`brick_push::BrickPush`] (a brick standing
//! on four frictionless `PointToGround` corners, pushed across a possibly inclined floor). The README's
//! table documents their observations, actions, rewards and termination.

pub mod ball_on_plate;
pub mod ball_toss;
pub mod brick_push;
mod render;
mod vector;

use vector::parallel_envs;
pub use vector::{EnvOptions, StepOut, VectorEnv};

use crate::batch::Batch;
use crate::cpu::unilateral::UnilateralContact;
use crate::error::{Error, Result};
use crate::model::{BodyId, ConstraintId, SystemTemplate};
use crate::sample::{self, Scalar};
use crate::step::{Integrator, Stabilization, StepOptions};

/// When an environment that has ended (terminated or truncated) starts its next episode; the
/// three modes of Gymnasium 1.x's `AutoresetMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoReset {
    /// On the `step` after the one that ended it: that step ignores the environment's action,
    /// returns its reset observation, reward 0, terminated and truncated false, and sets
    /// [`flags::RESET`]. Gymnasium's default.
    #[default]
    NextStep,
    /// In the same `step` that ended it: rewards and terminated/truncated are those of the final
    /// transition, the observation row is already the next episode's first, and the final
    /// observation goes to [`StepOut::final_obs`] (with [`flags::FINAL_OBS`]).
    SameStep,
    /// Never: stepping an environment that ended is an [`Error::EnvNeedsReset`] until it is
    /// reset through [`VectorEnv::reset`] with a mask that holds it.
    Disabled,
}

impl AutoReset {
    /// Gymnasium's name of the mode (`"next_step"`, `"same_step"`, `"disabled"`).
    pub fn name(self) -> &'static str {
        match self {
            AutoReset::NextStep => "next_step",
            AutoReset::SameStep => "same_step",
            AutoReset::Disabled => "disabled",
        }
    }

    /// Parses Gymnasium's name of a mode.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "next_step" => Ok(AutoReset::NextStep),
            "same_step" => Ok(AutoReset::SameStep),
            "disabled" => Ok(AutoReset::Disabled),
            other => Err(Error::BadChoice {
                what: "autoreset mode",
                value: other.to_string(),
                accepted: "next_step, same_step, disabled",
            }),
        }
    }
}

/// Bits of the per-environment flags a step or reset writes.
pub mod flags {
    /// This row is a reset observation written by next-step autoreset (the action was ignored).
    pub const RESET: u32 = 1;
    /// The environment ended in this step and was reset in it (same-step autoreset); its final
    /// observation is in `final_obs`.
    pub const FINAL_OBS: u32 = 2;
    /// The environment's state went non-finite in this step: the episode is truncated, its
    /// observation is that of the last finite state, its reward 0.
    pub const NONFINITE: u32 = 4;
}

/// A box of `low.len()` values, each in `[low[k], high[k]]` (infinite bounds allowed).
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSpace {
    /// Lower bounds.
    pub low: Vec<f32>,
    /// Upper bounds.
    pub high: Vec<f32>,
}

impl BoxSpace {
    /// Number of values.
    pub fn dim(&self) -> usize {
        self.low.len()
    }

    /// A box with the same bounds `[low, high]` on every one of `dim` values.
    pub fn uniform(dim: usize, low: f32, high: f32) -> Self {
        Self {
            low: vec![low; dim],
            high: vec![high; dim],
        }
    }
}

/// What a task declares about its environments.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    /// The environment's name (e.g. `"BallOnPlate-v0"`).
    pub name: &'static str,
    /// Observation space of one environment.
    pub observation: BoxSpace,
    /// Action space of one environment; actions are clipped into it.
    pub action: BoxSpace,
    /// Name of each observation value, in order.
    pub observation_names: Vec<&'static str>,
    /// Name of each action value, in order.
    pub action_names: Vec<&'static str>,
    /// Seconds of simulated time per `step` (the control interval).
    pub control_dt: f64,
    /// RK4 steps per control interval.
    pub substeps: usize,
    /// Steps after which an episode is truncated.
    pub max_episode_steps: u32,
    /// Drift control of the physics.
    pub stabilization: Stabilization,
}

impl EnvSpec {
    /// The stepper options: classic RK4 at `control_dt / substeps`, with the task's drift
    /// control.
    pub fn step_options(&self) -> StepOptions {
        StepOptions {
            integrator: Integrator::Rk4 {
                step: self.control_dt / self.substeps as f64,
            },
            stabilization: self.stabilization,
        }
    }
}

/// The random draws of one environment's episode: every value is a pure function of the
/// environment's seed, the episode number and the field's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draws {
    /// The environment's seed (`s + i` after a reset with seed `s`).
    pub seed: u64,
    /// The episode number since that seed was set (0 for the first episode).
    pub episode: u64,
}

impl Draws {
    /// Draws `scalar` for the field `path` of this episode.
    pub fn draw(&self, path: &str, scalar: &Scalar) -> f64 {
        // The seed goes through SplitMix64's finalizer so that neighbouring seeds (s + i) give
        // unrelated streams; the episode is the stream's counter.
        sample::draw(
            scalar,
            sample::mixed_seed(self.seed),
            path,
            self.episode as usize,
            &[],
        )
    }
}

/// One kind of environment. [`VectorEnv`] calls it for every environment; implementations keep
/// no per-environment state of their own (it lives in the batch and in the task values), so a
/// task is shared by all environments and all threads.
pub trait Task: Send + Sync {
    /// Spaces, timing and physics options.
    fn spec(&self) -> &EnvSpec;

    /// The system every environment simulates.
    fn template(&self) -> Result<SystemTemplate>;

    /// Values per environment the task keeps beside the batch (targets, drawn settings that the
    /// physics does not hold).
    fn task_width(&self) -> usize;

    /// Starts a new episode of environment `env`: draws its parameters and initial state from
    /// `draws` and writes *every* per-instance column the task uses (so nothing of the previous
    /// episode survives) and its task values. States must satisfy the constraints (the batch is
    /// not assembled, so a masked reset leaves the other environments bit for bit as they were).
    fn reset_env(
        &self,
        batch: &mut Batch,
        env: usize,
        draws: &Draws,
        task: &mut [f64],
    ) -> Result<()>;

    /// Sets the controls of environment `env` for the next control interval from its action,
    /// already checked finite and clipped into the action space.
    fn apply_action(
        &self,
        batch: &mut Batch,
        env: usize,
        action: &[f32],
        task: &[f64],
    ) -> Result<()>;

    /// Sets the controls of every environment that `stepped` selects (true: it steps in this
    /// control interval) from its row of `actions` (`num_envs × act_dim`, checked finite and
    /// clipped) and of `tasks` (`num_envs × task_width`). The default calls
    /// [`apply_action`](Self::apply_action) for each in turn; a task whose controls cost more
    /// than a few column writes overrides it to compute them for all environments at once, on
    /// rayon's pool (`BallOnPlate-v0`: its plate's motion law, checked and evaluated for every
    /// environment at every control step). An override must leave the batch as the default
    /// does, bit for bit.
    fn apply_actions(
        &self,
        batch: &mut Batch,
        actions: &[f32],
        tasks: &[f64],
        stepped: &[bool],
    ) -> Result<()> {
        let (ad, width) = (self.spec().action.dim(), self.task_width());
        for (i, _) in stepped.iter().enumerate().filter(|(_, s)| **s) {
            let action = &actions[i * ad..(i + 1) * ad];
            self.apply_action(batch, i, action, &tasks[i * width..(i + 1) * width])?;
        }
        Ok(())
    }

    /// Writes environment `env`'s observation.
    fn observe(&self, batch: &Batch, env: usize, task: &[f64], obs: &mut [f32]);

    /// The reward of the transition just made with `action`, and whether the episode
    /// terminated (reached a terminal state of the task).
    fn outcome(&self, batch: &Batch, env: usize, task: &[f64], action: &[f32]) -> (f32, bool);

    /// The unilateral contacts of environment `env`, with its coefficients, for a task whose
    /// contacts bounce, slide and lift off: its environments are then stepped event-driven
    /// instead of by the backend's stepper — on a GPU backend by the event kernels when the
    /// task is within their reach ([`backend::UnilateralRunner`](crate::backend::UnilateralRunner)),
    /// else on the CPU ([`cpu::unilateral::run_batch`](crate::cpu::unilateral::run_batch)). Every
    /// environment names the same constraints, in the same order. `None` (the default): every
    /// constraint is bilateral.
    fn unilateral_contacts(&self, env: usize, task: &[f64]) -> Option<Vec<UnilateralContact>> {
        let _ = (env, task);
        None
    }

    /// The workspace a picture of one environment shows, `(centre, radius)` in Ground: the
    /// fixed camera of [`VectorEnv::render`] frames it, and planes are drawn to cover it. The
    /// default is a ball of 1.2 m around the origin (a plate or patch of ground of Simbody's
    /// default half-width 1).
    fn view(&self) -> ([f64; 3], f64) {
        ([0.0, 0.0, 0.0], 1.2)
    }
}

/// The names of the built-in tasks, for [`make_task`].
pub const TASK_NAMES: [&str; 3] = ["BallOnPlate-v0", "BrickPush-v0", "BallToss-v0"];

/// A built-in task by name ([`TASK_NAMES`]) with its default settings changed by `settings`
/// (field name and value, as the tasks' `Config::set` take them).
pub fn make_task(name: &str, settings: &[(String, Scalar)]) -> Result<Box<dyn Task>> {
    match name {
        "BallOnPlate-v0" => {
            let mut config = ball_on_plate::BallOnPlateConfig::default();
            for (field, value) in settings {
                config.set(field, value.clone())?;
            }
            Ok(Box::new(ball_on_plate::BallOnPlate::new(config)?))
        }
        "BrickPush-v0" => {
            let mut config = brick_push::BrickPushConfig::default();
            for (field, value) in settings {
                config.set(field, value.clone())?;
            }
            Ok(Box::new(brick_push::BrickPush::new(config)?))
        }
        "BallToss-v0" => {
            let mut config = ball_toss::BallTossConfig::default();
            for (field, value) in settings {
                config.set(field, value.clone())?;
            }
            Ok(Box::new(ball_toss::BallToss::new(config)?))
        }
        other => Err(Error::BadChoice {
            what: "environment",
            value: other.to_string(),
            accepted: "BallOnPlate-v0, BrickPush-v0, BallToss-v0",
        }),
    }
}

/// The per-episode columns of a solid ball (uniform, COM at its centre) and its
/// `SphereOnPlaneContact` that every ball task writes on reset, so nothing of the previous
/// episode survives: at rest, `mass` and `radius` (inertia `2/5 m r²`), no applied force or
/// torque, sphere centre at the ball's origin, plane frame = the plane body's frame, contact
/// enabled, gravity `−gravity` along Ground z. The caller sets the pose.
pub(crate) fn reset_solid_ball(
    batch: &mut Batch,
    env: usize,
    ball: BodyId,
    contact: ConstraintId,
    mass: f64,
    radius: f64,
    gravity: f64,
) -> Result<()> {
    batch.set_u(ball, env, [0.0; 6])?;
    let moment = 0.4 * mass * radius * radius;
    batch.set_mass_properties(
        ball,
        env,
        mass,
        [0.0; 3],
        [moment, moment, moment, 0.0, 0.0, 0.0],
    )?;
    batch.set_applied_force(ball, env, [0.0; 3])?;
    batch.set_applied_torque(ball, env, [0.0; 3])?;
    batch.set_param(contact, "radius", env, &[radius])?;
    batch.set_param(contact, "sphere_center", env, &[0.0; 3])?;
    batch.set_param(
        contact,
        "plane_frame",
        env,
        &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    )?;
    batch.set_enabled(contact, env, true)?;
    batch.set_gravity(env, [0.0, 0.0, -gravity])
}

/// The number of a setting that is not drawn per episode (`Scalar::Fixed`).
pub(crate) fn fixed_setting(field: &str, value: &Scalar) -> Result<f64> {
    match value {
        Scalar::Fixed(v) => Ok(*v),
        other => Err(Error::InvalidValue {
            field: field.to_string(),
            instance: 0,
            value: format!("{other:?}"),
            accepted: "a number (this setting is not drawn per episode)".into(),
        }),
    }
}

/// A whole-number setting (`Scalar::Fixed` holding an integer in `[lo, hi]`).
pub(crate) fn integer_setting(field: &str, value: &Scalar, lo: u64, hi: u64) -> Result<u64> {
    let v = fixed_setting(field, value)?;
    if v.fract() == 0.0 && v >= lo as f64 && v <= hi as f64 {
        Ok(v as u64)
    } else {
        Err(Error::InvalidValue {
            field: field.to_string(),
            instance: 0,
            value: format!("{v:?}"),
            accepted: format!("an integer in [{lo}, {hi}]"),
        })
    }
}

/// Checks a fixed setting, naming it and its accepted range.
pub(crate) fn check_setting(field: &str, value: f64, ok: bool, accepted: &str) -> Result<()> {
    if ok && value.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidValue {
            field: field.to_string(),
            instance: 0,
            value: format!("{value:?}"),
            accepted: accepted.to_string(),
        })
    }
}

/// The settings every task has — control interval, substeps, episode limit, gravity, action
/// cost — borrowed from a task's config, so that one `set` and one check serve every task.
pub(crate) struct CommonSettings<'a> {
    pub control_dt: &'a mut f64,
    pub substeps: &'a mut usize,
    pub max_episode_steps: &'a mut u32,
    pub gravity: &'a mut f64,
    pub action_cost: &'a mut f64,
}

impl CommonSettings<'_> {
    /// Sets `field` when it is one of these settings (`Ok(true)`); `Ok(false)` otherwise.
    pub(crate) fn set(&mut self, field: &str, value: &Scalar) -> Result<bool> {
        match field {
            "control_dt" => *self.control_dt = fixed_setting(field, value)?,
            "substeps" => *self.substeps = integer_setting(field, value, 1, 10_000)? as usize,
            "max_episode_steps" => {
                *self.max_episode_steps =
                    integer_setting(field, value, 1, u64::from(u32::MAX))? as u32
            }
            "gravity" => *self.gravity = fixed_setting(field, value)?,
            "action_cost" => *self.action_cost = fixed_setting(field, value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Checks the settings every task has: control interval, substeps, episode limit, gravity and
/// action cost.
pub(crate) fn check_common_settings(
    control_dt: f64,
    substeps: usize,
    max_episode_steps: u32,
    gravity: f64,
    action_cost: f64,
) -> Result<()> {
    let dt = control_dt;
    check_setting("control_dt", dt, dt > 0.0, "a finite number > 0 (s)")?;
    let whole = "an integer ≥ 1";
    check_setting("substeps", substeps as f64, substeps >= 1, whole)?;
    let steps = max_episode_steps;
    check_setting("max_episode_steps", f64::from(steps), steps >= 1, whole)?;
    let g = gravity;
    check_setting("gravity", g, g >= 0.0, "a finite number ≥ 0 (m/s²)")?;
    let c = action_cost;
    check_setting("action_cost", c, c >= 0.0, "a finite number ≥ 0")
}

/// The error for a setting name a config does not have.
pub(crate) fn unknown_setting(field: &str, accepted: &[&str]) -> Error {
    Error::InvalidValue {
        field: field.to_string(),
        instance: 0,
        value: "(a setting name)".into(),
        accepted: format!("one of the settings {}", accepted.join(", ")),
    }
}
