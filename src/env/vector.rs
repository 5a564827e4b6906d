//! [`VectorEnv`]: N copies of a task stepped together on one batch, with Gymnasium's
//! autoreset semantics, observation and reward buffers reused between steps.

use std::sync::Arc;

use rayon::prelude::*;

use super::*;
use crate::backend::{Backend, Stepper, UnilateralRunner};
use crate::batch::{Batch, status};
use crate::cpu::unilateral::{ContactRecord, EventOptions, run_batch_resuming};
use crate::error::{Error, Result, try_filled};
use crate::gpu::{GpuDevice, Precision};

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
    /// Scratch of `step`: the environments that start their next episode in it (kept, so a
    /// step allocates nothing per environment).
    starting: Vec<bool>,
    /// Scratch of `step`: the environments that step in it (the complement of `starting`).
    stepped: Vec<bool>,
    task_values: Vec<f64>,
    actions: Vec<f32>,
    /// Per environment with unilateral contacts, what its last step left them in (modes, slip
    /// readiness): the next step resumes from it; `None` after a reset.
    contact_records: Vec<Option<Vec<ContactRecord>>>,
    /// On a GPU backend, the runner of the GPU's event kernels (`backend::UnilateralRunner`:
    /// one contact or several, withheld environments on the CPU in the same step), built on the
    /// first step; `None` on the CPU, or when the task is outside the kernels' reach.
    events_gpu: Option<UnilateralRunner>,
    /// Whether the first step has decided where the unilateral contacts step.
    events_gpu_decided: bool,
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

/// Fewest environments whose per-step host work (observations, rewards) is spread over
/// rayon's pool: below it, or with one thread in the pool, it runs on the caller's thread. A
/// hand-over to the pool costs a wake-up and a wait (tens of µs): at N = 16 on the 2-core VM
/// the hand-over was most of a step, and the loop on the caller's thread took
/// `BallOnPlate-v0` from 2.3–3.6e5 to 4.1–4.5e5 env-steps/s (N = 32: 3.7–3.9e5 → 4.5e5); at
/// N = 64 the two were within the VM's noise, and at 256 the pool was faster.
const PARALLEL_MIN_ENVS: usize = 64;

/// One environment's outcome columns in a step, with its index: observation, reward,
/// terminated, truncated and elapsed steps.
type EnvRow<'a> = (
    usize,
    (
        (((&'a mut [f32], &'a mut f32), &'a mut bool), &'a mut bool),
        &'a mut u32,
    ),
);

/// Whether the host work of `n` environments goes to rayon's pool ([`PARALLEL_MIN_ENVS`]).
pub(super) fn parallel_envs(n: usize) -> bool {
    n >= PARALLEL_MIN_ENVS && rayon::current_num_threads() > 1
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
            starting: try_filled(false, num_envs, "num_envs (step scratch)")?,
            stepped: try_filled(false, num_envs, "num_envs (step scratch)")?,
            task_values: try_filled(0.0, width * num_envs, "num_envs (task values)")?,
            actions: try_filled(0.0, num_envs * spec.action.dim(), "num_envs (actions)")?,
            contact_records: try_filled(None, num_envs, "num_envs (contact records)")?,
            events_gpu: None,
            events_gpu_decided: false,
            spec,
        };
        for i in 0..num_envs {
            env.reset_env(i)?;
        }
        Ok(env)
    }

    /// The task.
    pub fn task(&self) -> &dyn Task {
        &*self.task
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

    /// Whether the task's unilateral contacts step on the GPU's event kernels (`gpu::events`):
    /// on a GPU backend, for a task within their reach (one contact, or up to 8 contacts beside
    /// up to 12 bilateral rows), from the first step on; an environment the kernel withholds
    /// (a software adapter's loop budget) runs that step on the CPU. Otherwise they step on the
    /// CPU's event path (f64), whatever the backend.
    pub fn unilateral_on_gpu(&self) -> bool {
        self.events_gpu.is_some()
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
        let mut pending = std::mem::take(&mut self.starting);
        pending.clear();
        match self.autoreset {
            AutoReset::NextStep => pending.extend_from_slice(&self.ended),
            _ => pending.resize(n, false),
        }
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

        let mut stepped = std::mem::take(&mut self.stepped);
        stepped.clear();
        stepped.extend(pending.iter().map(|p| !p));
        let applied =
            self.task
                .apply_actions(&mut self.batch, &self.actions, &self.task_values, &stepped);
        self.stepped = stepped;
        applied?;
        let width = self.task.task_width();
        if self
            .task
            .unilateral_contacts(0, &self.task_values[..width])
            .is_some()
        {
            // Contacts that bounce and slide: event-driven on the CPU, each environment with its
            // own coefficients. An environment that fails is flagged and truncated below.
            let (task, values) = (&*self.task, &self.task_values);
            let contacts = |i: usize| {
                task.unilateral_contacts(i, &values[i * width..(i + 1) * width])
                    .unwrap_or_default()
            };
            let options = EventOptions {
                step: self.spec.control_dt / self.spec.substeps as f64,
                ..EventOptions::default()
            };
            // On a GPU backend, the event kernels where the task is within their reach; the
            // CPU's event path otherwise. Decided once, on the first step: a task outside the
            // kernels' reach stays on the CPU; any other error is the caller's.
            if !self.events_gpu_decided
                && let Some((device, precision, gpu_options)) = self.stepper.evaluator().gpu_setup()
            {
                let ids: Vec<_> = contacts(0).iter().map(|c| c.constraint).collect();
                let runner =
                    UnilateralRunner::gpu(device, &self.batch, &ids, precision, gpu_options)?;
                if let Some(note) = runner.note() {
                    log::warn!("simbatch: {}: {note}", self.spec.name);
                }
                self.events_gpu = runner.on_gpu().then_some(runner);
            }
            self.events_gpu_decided = true;
            if let Some(runner) = &mut self.events_gpu {
                let n = self.batch.len();
                let mut coefficients = Vec::with_capacity(n);
                for i in 0..n {
                    coefficients.push(contacts(i).iter().map(|c| c.coefficients).collect());
                }
                let call = runner.run(
                    &mut self.batch,
                    &coefficients,
                    self.spec.control_dt,
                    &options,
                    &self.contact_records,
                )?;
                self.contact_records = call.records;
            } else {
                let runs = run_batch_resuming(
                    &mut self.batch,
                    &contacts,
                    self.spec.control_dt,
                    &options,
                    &self.contact_records,
                )?;
                for (last, run) in self.contact_records.iter_mut().zip(runs) {
                    *last = run.map(|run| run.contacts);
                }
            }
        } else {
            self.stepper.step(&mut self.batch, self.spec.substeps)?;
        }

        // Outcomes of the environments that were stepped.
        let task = &*self.task;
        let batch = &self.batch;
        let task_values = &self.task_values;
        let clipped = &self.actions;
        let max_steps = self.spec.max_episode_steps;
        let elapsed = &mut self.elapsed;
        let outcome = |(i, ((((obs, reward), terminated), truncated), elapsed)): EnvRow<'_>| {
            if pending[i] {
                return;
            }
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
        };
        if parallel_envs(n) {
            out.obs
                .par_chunks_mut(od)
                .zip(out.reward.par_iter_mut())
                .zip(out.terminated.par_iter_mut())
                .zip(out.truncated.par_iter_mut())
                .zip(elapsed.par_iter_mut())
                .enumerate()
                .for_each(outcome);
        } else {
            out.obs
                .chunks_mut(od)
                .zip(out.reward.iter_mut())
                .zip(out.terminated.iter_mut())
                .zip(out.truncated.iter_mut())
                .zip(elapsed.iter_mut())
                .enumerate()
                .for_each(outcome);
        }

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
        self.starting = pending;
        Ok(())
    }

    /// Writes every environment's current observation.
    pub fn observe_all(&self, obs: &mut [f32]) {
        let od = self.spec.observation.dim();
        let width = self.task.task_width();
        let observe = |(i, row): (usize, &mut [f32])| {
            self.task.observe(
                &self.batch,
                i,
                &self.task_values[i * width..(i + 1) * width],
                row,
            )
        };
        if parallel_envs(self.len()) {
            obs.par_chunks_mut(od).enumerate().for_each(observe);
        } else {
            obs.chunks_mut(od).enumerate().for_each(observe);
        }
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
        self.contact_records[i] = None;
        Ok(())
    }
}
