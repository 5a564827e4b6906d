//! Reinforcement-learning vector environments: thousands of environments stepped per call over
//! one [`Batch`], on the CPU or the GPU through the same [`Stepper`].
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
pub mod brick_push;

use std::sync::Arc;

use rayon::prelude::*;

use crate::backend::Backend;
use crate::batch::{Batch, status};
use crate::error::{Error, Result, try_filled};
use crate::gpu::{GpuDevice, Precision};
use crate::integrate::{Integrator, Stabilization, StepOptions, Stepper};
use crate::model::SystemTemplate;
use crate::sample::{self, Scalar};

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
        let mut z = self.seed.wrapping_add(0x9E3779B97F4A7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        sample::draw(scalar, z ^ (z >> 31), path, self.episode as usize, &[])
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

    /// Writes environment `env`'s observation.
    fn observe(&self, batch: &Batch, env: usize, task: &[f64], obs: &mut [f32]);

    /// The reward of the transition just made with `action`, and whether the episode
    /// terminated (reached a terminal state of the task).
    fn outcome(&self, batch: &Batch, env: usize, task: &[f64], action: &[f32]) -> (f32, bool);
}

/// The names of the built-in tasks, for [`make_task`].
pub const TASK_NAMES: [&str; 2] = ["BallOnPlate-v0", "BrickPush-v0"];

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
        other => Err(Error::BadChoice {
            what: "environment",
            value: other.to_string(),
            accepted: "BallOnPlate-v0, BrickPush-v0",
        }),
    }
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

/// How a [`VectorEnv`] runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnvOptions {
    /// Autoreset mode.
    pub autoreset: AutoReset,
    /// Where the physics runs (`SIMBATCH_BACKEND` overrides; `Auto` falls back to the CPU).
    pub backend: Backend,
    /// Precision on the GPU (the CPU path is f64).
    pub precision: Precision,
}

impl Default for EnvOptions {
    fn default() -> Self {
        Self {
            autoreset: AutoReset::NextStep,
            backend: Backend::Cpu,
            precision: Precision::F32,
        }
    }
}

/// Where [`VectorEnv::step`] writes: one row per environment, every buffer the caller's.
#[derive(Debug)]
pub struct StepOut<'a> {
    /// Observations, `num_envs × obs_dim`.
    pub obs: &'a mut [f32],
    /// Rewards, `num_envs`.
    pub reward: &'a mut [f32],
    /// Whether the episode reached a terminal state, `num_envs`.
    pub terminated: &'a mut [bool],
    /// Whether the episode was cut short (time limit, or a non-finite state), `num_envs`.
    pub truncated: &'a mut [bool],
    /// Final observations, `num_envs × obs_dim`; required with [`AutoReset::SameStep`], where
    /// the rows of environments that ended are written (the others are left as they are).
    pub final_obs: Option<&'a mut [f32]>,
    /// Per-environment [`flags`], `num_envs`; optional.
    pub flags: Option<&'a mut [u32]>,
}

/// `N` environments of one task over one batch.
pub struct VectorEnv {
    task: Box<dyn Task>,
    spec: EnvSpec,
    batch: Batch,
    stepper: Stepper,
    autoreset: AutoReset,
    env_seed: Vec<u64>,
    episode: Vec<u64>,
    elapsed: Vec<u32>,
    /// Ended in the last step and not reset since (next-step and disabled modes).
    ended: Vec<bool>,
    task_values: Vec<f64>,
    actions: Vec<f32>,
}

impl std::fmt::Debug for VectorEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorEnv")
            .field("name", &self.spec.name)
            .field("num_envs", &self.len())
            .field("autoreset", &self.autoreset)
            .field("backend", &self.stepper.backend())
            .finish()
    }
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::Dimension {
            what,
            got,
            expected,
        })
    }
}

impl VectorEnv {
    /// `num_envs ≥ 1` environments of `task`, each started at episode 0 of seed 0 (environment
    /// `i` has seed `i`), as if `reset(Some(0), None)` had been called.
    pub fn new(task: Box<dyn Task>, num_envs: usize, options: EnvOptions) -> Result<Self> {
        let stepper = Stepper::with_backend(
            task.spec().step_options(),
            options.backend,
            options.precision,
        )?;
        Self::with_stepper(task, num_envs, options.autoreset, stepper)
    }

    /// As [`new`](Self::new), with the physics on a GPU device already open (in `precision`).
    pub fn on_device(
        task: Box<dyn Task>,
        num_envs: usize,
        autoreset: AutoReset,
        device: Arc<GpuDevice>,
        precision: Precision,
    ) -> Result<Self> {
        let stepper = Stepper::on_gpu(task.spec().step_options(), device, precision)?;
        Self::with_stepper(task, num_envs, autoreset, stepper)
    }

    fn with_stepper(
        task: Box<dyn Task>,
        num_envs: usize,
        autoreset: AutoReset,
        stepper: Stepper,
    ) -> Result<Self> {
        if num_envs == 0 {
            return Err(Error::InvalidValue {
                field: "num_envs".into(),
                instance: 0,
                value: "0".into(),
                accepted: "an integer ≥ 1".into(),
            });
        }
        let spec = task.spec().clone();
        let template = task.template()?;
        let width = task.task_width();
        // A count that cannot fit is refused up front, naming the field; the columns are then
        // allocated fallibly as well.
        let per_env = Batch::bytes_per_instance(&template)
            + 8 * (4 + width + spec.action.dim())
            + 8 * (2 * spec.observation.dim() + 4);
        let need = (num_envs as u128).saturating_mul(per_env as u128);
        if !crate::resources::fits_in_memory(need) {
            return Err(Error::OutOfMemory {
                what: "num_envs".into(),
                count: format!("{num_envs} environments"),
                bytes: need,
                where_: "host",
            });
        }
        let batch = Batch::new(template, num_envs)?;
        let mut env = Self {
            task,
            batch,
            stepper,
            autoreset,
            env_seed: (0..num_envs as u64).collect(),
            episode: try_filled(0, num_envs, "num_envs (episodes)")?,
            elapsed: try_filled(0, num_envs, "num_envs (elapsed steps)")?,
            ended: try_filled(false, num_envs, "num_envs (ended flags)")?,
            task_values: try_filled(0.0, width * num_envs, "num_envs (task values)")?,
            actions: try_filled(0.0, num_envs * spec.action.dim(), "num_envs (actions)")?,
            spec,
        };
        for i in 0..num_envs {
            env.reset_env(i)?;
        }
        Ok(env)
    }

    /// Number of environments.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// Always false (a vector env holds at least one environment).
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// The task's spaces and timing.
    pub fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    /// The autoreset mode.
    pub fn autoreset(&self) -> AutoReset {
        self.autoreset
    }

    /// The backend the physics runs on.
    pub fn backend(&self) -> Backend {
        self.stepper.backend()
    }

    /// Why `Auto` fell back to the CPU, if it did.
    pub fn backend_note(&self) -> Option<&str> {
        self.stepper.note()
    }

    /// The batch: parameters and states of every environment (one instance each).
    pub fn batch(&self) -> &Batch {
        &self.batch
    }

    /// The batch, to change parameters or states between steps (Monte Carlo use). A change is
    /// seen by the next step; the next reset of an environment overwrites what its task sets.
    pub fn batch_mut(&mut self) -> &mut Batch {
        &mut self.batch
    }

    /// The task values of every environment (`task_width` per environment).
    pub fn task_values(&self) -> &[f64] {
        &self.task_values
    }

    /// Steps taken in each environment's current episode.
    pub fn elapsed_steps(&self) -> &[u32] {
        &self.elapsed
    }

    /// Each environment's episode number since its seed was set.
    pub fn episodes(&self) -> &[u64] {
        &self.episode
    }

    /// Each environment's seed.
    pub fn seeds(&self) -> &[u64] {
        &self.env_seed
    }

    /// Starts a new episode in the environments of `mask` (all when `None`) and writes every
    /// environment's current observation into `obs` (`num_envs × obs_dim`). With `seed = s`,
    /// environment `i` gets the seed `s + i` and its episode count restarts at 0; without, its
    /// episode count advances, so each reset draws a fresh episode. Environments outside the
    /// mask are not touched (their rows get their current observation).
    pub fn reset(
        &mut self,
        seed: Option<u64>,
        mask: Option<&[bool]>,
        obs: &mut [f32],
    ) -> Result<()> {
        let seeds: Option<Vec<u64>> =
            seed.map(|s| (0..self.len() as u64).map(|i| s.wrapping_add(i)).collect());
        self.reset_with_seeds(seeds.as_deref(), mask, obs)
    }

    /// As [`reset`](Self::reset) with one seed per environment (`num_envs` values; only those
    /// of masked environments are used), as Gymnasium's `reset(seed=[...])`.
    pub fn reset_with_seeds(
        &mut self,
        seeds: Option<&[u64]>,
        mask: Option<&[bool]>,
        obs: &mut [f32],
    ) -> Result<()> {
        let n = self.len();
        check_len(
            "observation buffer",
            obs.len(),
            n * self.spec.observation.dim(),
        )?;
        if let Some(m) = mask {
            check_len("reset mask", m.len(), n)?;
        }
        if let Some(s) = seeds {
            check_len("seeds", s.len(), n)?;
        }
        for i in 0..n {
            if mask.is_some_and(|m| !m[i]) {
                continue;
            }
            match seeds {
                Some(s) => {
                    self.env_seed[i] = s[i];
                    self.episode[i] = 0;
                }
                None => self.episode[i] += 1,
            }
            self.reset_env(i)?;
        }
        self.observe_all(obs);
        Ok(())
    }

    /// Advances every environment by one control interval with `actions`
    /// (`num_envs × act_dim`; finite, clipped into the action space) and writes the outcome
    /// into `out`, resetting environments as the [`AutoReset`] mode says. Checks every buffer
    /// and action before anything changes.
    pub fn step(&mut self, actions: &[f32], out: StepOut<'_>) -> Result<()> {
        let n = self.len();
        let od = self.spec.observation.dim();
        let ad = self.spec.action.dim();
        check_len("action buffer", actions.len(), n * ad)?;
        check_len("observation buffer", out.obs.len(), n * od)?;
        check_len("reward buffer", out.reward.len(), n)?;
        check_len("terminated buffer", out.terminated.len(), n)?;
        check_len("truncated buffer", out.truncated.len(), n)?;
        if let Some(f) = &out.flags {
            check_len("flags buffer", f.len(), n)?;
        }
        match (&out.final_obs, self.autoreset) {
            (Some(f), _) => check_len("final observation buffer", f.len(), n * od)?,
            (None, AutoReset::SameStep) => {
                check_len("final observation buffer (same-step autoreset)", 0, n * od)?
            }
            (None, _) => {}
        }
        if self.autoreset == AutoReset::Disabled
            && let Some(env) = self.ended.iter().position(|e| *e)
        {
            return Err(Error::EnvNeedsReset { env });
        }
        // Environments that start their next episode in this step (next-step autoreset).
        let pending: Vec<bool> = match self.autoreset {
            AutoReset::NextStep => self.ended.clone(),
            _ => vec![false; n],
        };
        let action = &self.spec.action;
        for i in 0..n {
            let row = &actions[i * ad..(i + 1) * ad];
            let clipped = &mut self.actions[i * ad..(i + 1) * ad];
            if pending[i] {
                clipped.fill(0.0);
                continue;
            }
            for k in 0..ad {
                let a = row[k];
                if !a.is_finite() {
                    return Err(Error::InvalidValue {
                        field: format!("actions[{k}] ({})", self.spec.action_names[k]),
                        instance: i,
                        value: format!("{a:?}"),
                        accepted: format!(
                            "a finite number (clipped into [{}, {}])",
                            action.low[k], action.high[k]
                        ),
                    });
                }
                clipped[k] = a.clamp(action.low[k], action.high[k]);
            }
        }

        let width = self.task.task_width();
        for (i, pending) in pending.iter().enumerate() {
            if !pending {
                self.task.apply_action(
                    &mut self.batch,
                    i,
                    &self.actions[i * ad..(i + 1) * ad],
                    &self.task_values[i * width..(i + 1) * width],
                )?;
            }
        }
        self.stepper.step(&mut self.batch, self.spec.substeps)?;

        // Outcomes of the environments that were stepped.
        let task = &*self.task;
        let batch = &self.batch;
        let task_values = &self.task_values;
        let clipped = &self.actions;
        let max_steps = self.spec.max_episode_steps;
        let elapsed = &mut self.elapsed;
        out.obs
            .par_chunks_mut(od)
            .zip(out.reward.par_iter_mut())
            .zip(out.terminated.par_iter_mut())
            .zip(out.truncated.par_iter_mut())
            .zip(elapsed.par_iter_mut())
            .enumerate()
            .filter(|(i, _)| !pending[*i])
            .for_each(|(i, ((((obs, reward), terminated), truncated), elapsed))| {
                let tv = &task_values[i * width..(i + 1) * width];
                task.observe(batch, i, tv, obs);
                *elapsed += 1;
                if batch.status()[i] & status::HALTED != 0 {
                    *reward = 0.0;
                    *terminated = false;
                    *truncated = true;
                } else {
                    let (r, t) = task.outcome(batch, i, tv, &clipped[i * ad..(i + 1) * ad]);
                    *reward = r;
                    *terminated = t;
                    *truncated = !t && *elapsed >= max_steps;
                }
            });

        let mut flags_out = out.flags;
        let mut final_obs = out.final_obs;
        for i in 0..n {
            let mut f = 0;
            if pending[i] {
                self.next_episode(i, &mut out.obs[i * od..(i + 1) * od])?;
                out.reward[i] = 0.0;
                out.terminated[i] = false;
                out.truncated[i] = false;
                f |= flags::RESET;
            } else {
                if self.batch.status()[i] & status::NONFINITE_STATE != 0 {
                    f |= flags::NONFINITE;
                }
                let done = out.terminated[i] || out.truncated[i];
                match self.autoreset {
                    AutoReset::SameStep if done => {
                        if let Some(fo) = final_obs.as_deref_mut() {
                            fo[i * od..(i + 1) * od]
                                .copy_from_slice(&out.obs[i * od..(i + 1) * od]);
                        }
                        self.next_episode(i, &mut out.obs[i * od..(i + 1) * od])?;
                        f |= flags::FINAL_OBS;
                    }
                    AutoReset::SameStep => {}
                    AutoReset::NextStep | AutoReset::Disabled => self.ended[i] = done,
                }
            }
            if let Some(fl) = flags_out.as_deref_mut() {
                fl[i] = f;
            }
        }
        Ok(())
    }

    /// Writes every environment's current observation.
    pub fn observe_all(&self, obs: &mut [f32]) {
        let od = self.spec.observation.dim();
        let width = self.task.task_width();
        obs.par_chunks_mut(od).enumerate().for_each(|(i, row)| {
            self.task.observe(
                &self.batch,
                i,
                &self.task_values[i * width..(i + 1) * width],
                row,
            )
        });
    }

    /// Autoreset: starts environment `i`'s next episode and writes its first observation.
    fn next_episode(&mut self, i: usize, obs: &mut [f32]) -> Result<()> {
        self.episode[i] += 1;
        self.reset_env(i)?;
        let width = self.task.task_width();
        let task = &self.task_values[i * width..(i + 1) * width];
        self.task.observe(&self.batch, i, task, obs);
        Ok(())
    }

    /// Starts environment `i`'s episode `episode[i]` of seed `env_seed[i]`.
    fn reset_env(&mut self, i: usize) -> Result<()> {
        let draws = Draws {
            seed: self.env_seed[i],
            episode: self.episode[i],
        };
        let width = self.task.task_width();
        self.task.reset_env(
            &mut self.batch,
            i,
            &draws,
            &mut self.task_values[i * width..(i + 1) * width],
        )?;
        self.batch.set_time(i, 0.0)?;
        self.batch.refresh_status_of(i)?;
        self.stepper.reset_step_size(i);
        self.elapsed[i] = 0;
        self.ended[i] = false;
        Ok(())
    }
}
