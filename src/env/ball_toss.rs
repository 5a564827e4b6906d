//! Toss a ball at a target on the ground: it bounces (restitution), skids and rolls (friction)
//! before it comes to rest, all exactly, on the unilateral-contact path
//! ([`cpu::unilateral`](crate::cpu::unilateral): events located per environment, impacts with
//! friction, Zeno capture).
//!
//! An episode is one toss. The ball is held at rest at `release_height` above the ground origin;
//! the action, in `[−1, 1]⁴`, sets its velocity (`vx`, `vy`, `vz` as fractions of `max_speed`)
//! and its spin about the horizontal axis across the throw (`spin`, a fraction of `max_spin`;
//! positive is topspin), and the ball then flies, bounces and rolls for `control_dt` seconds.
//! The restitution and the friction are drawn per episode and observed, so a policy has to read
//! the surface before it throws.
//!
//! | observation | meaning |
//! |---|---|
//! | `target_x`, `target_y` | target point on the ground (m) |
//! | `restitution`, `friction` | this episode's coefficients (friction: static = dynamic) |
//! | `ball_x`, `ball_y` | ball centre over the ground (m) |
//! | `ball_vx`, `ball_vy` | ball centre velocity along the ground (m/s) |
//!
//! Reward: `1 − d / target_range − action_cost · |a|²`, with `d` the distance along the ground
//! from the ball centre to the target after the toss. Every episode terminates after its one
//! step.

use super::{
    BoxSpace, CommonSettings, Draws, EnvSpec, Task, check_common_settings, check_setting,
    fixed_setting, reset_solid_ball, unknown_setting,
};
use crate::batch::Batch;
use crate::constraints::SphereOnPlaneContact;
use crate::cpu::unilateral::{Coefficients, UnilateralContact};
use crate::error::Result;
use crate::model::{BodyId, ConstraintId, GROUND, SystemTemplate};
use crate::sample::Scalar;
use crate::step::Stabilization;

/// Settings of [`BallToss`]; the [`Scalar`] fields are drawn per environment and episode.
#[derive(Debug, Clone, PartialEq)]
pub struct BallTossConfig {
    /// Fastest toss along each axis (m/s), > 0: the action ±1. Default 6.
    pub max_speed: f64,
    /// Fastest spin (rad/s), ≥ 0: the action ±1. Default 60.
    pub max_spin: f64,
    /// Height of the ball's lowest point at release (m), in [0, 100]. Default 1.
    pub release_height: f64,
    /// Distance scale of the reward (m), > 0: the reward is 0 this far from the target. Default
    /// 4.
    pub target_range: f64,
    /// Simulated time per toss (s), > 0. Default 2.5.
    pub control_dt: f64,
    /// Steps of the event-driven integrator per toss (between events), ≥ 1. Default 2 500.
    pub substeps: usize,
    /// Episode length limit (steps), ≥ 1. Default 1 (every toss terminates anyway).
    pub max_episode_steps: u32,
    /// Gravity (m/s², along −z), ≥ 0. Default 9.81.
    pub gravity: f64,
    /// Weight of the action penalty, ≥ 0. Default 0.
    pub action_cost: f64,
    /// Ball radius (m), in [1e-3, 1]. Default 0.05.
    pub ball_radius: Scalar,
    /// Ball mass (kg), in [1e-6, 1e6]. Default 0.2.
    pub ball_mass: Scalar,
    /// Target point (m), within `target_range` of the origin. Default uniform [1, 3].
    pub target_x: Scalar,
    /// See [`target_x`](Self::target_x). Default uniform [−1, 1].
    pub target_y: Scalar,
    /// Coefficient of restitution, in [0, 1]. Default uniform [0.3, 0.8].
    pub restitution: Scalar,
    /// Friction coefficient (static = dynamic), in [0, 2]. Default uniform [0.1, 0.6].
    pub friction: Scalar,
}

impl Default for BallTossConfig {
    fn default() -> Self {
        Self {
            max_speed: 6.0,
            max_spin: 60.0,
            release_height: 1.0,
            target_range: 4.0,
            control_dt: 2.5,
            substeps: 2500,
            max_episode_steps: 1,
            gravity: 9.81,
            action_cost: 0.0,
            ball_radius: Scalar::Fixed(0.05),
            ball_mass: Scalar::Fixed(0.2),
            target_x: Scalar::Uniform(1.0, 3.0),
            target_y: Scalar::Uniform(-1.0, 1.0),
            restitution: Scalar::Uniform(0.3, 0.8),
            friction: Scalar::Uniform(0.1, 0.6),
        }
    }
}

impl BallTossConfig {
    /// The settings every task has, as one group.
    fn common(&mut self) -> CommonSettings<'_> {
        CommonSettings {
            control_dt: &mut self.control_dt,
            substeps: &mut self.substeps,
            max_episode_steps: &mut self.max_episode_steps,
            gravity: &mut self.gravity,
            action_cost: &mut self.action_cost,
        }
    }

    /// The names [`set`](Self::set) takes.
    pub const SETTINGS: [&'static str; 15] = [
        "max_speed",
        "max_spin",
        "release_height",
        "target_range",
        "control_dt",
        "substeps",
        "max_episode_steps",
        "gravity",
        "action_cost",
        "ball_radius",
        "ball_mass",
        "target_x",
        "target_y",
        "restitution",
        "friction",
    ];

    /// Sets the field named `field`: a distribution for the per-episode fields, a number
    /// (`Scalar::Fixed`) for the others. Values are checked by [`validate`](Self::validate).
    pub fn set(&mut self, field: &str, value: Scalar) -> Result<()> {
        if self.common().set(field, &value)? {
            return Ok(());
        }
        let fixed = |v: &Scalar| fixed_setting(field, v);
        match field {
            "max_speed" => self.max_speed = fixed(&value)?,
            "max_spin" => self.max_spin = fixed(&value)?,
            "release_height" => self.release_height = fixed(&value)?,
            "target_range" => self.target_range = fixed(&value)?,
            "ball_radius" => self.ball_radius = value,
            "ball_mass" => self.ball_mass = value,
            "target_x" => self.target_x = value,
            "target_y" => self.target_y = value,
            "restitution" => self.restitution = value,
            "friction" => self.friction = value,
            _ => return Err(unknown_setting(field, &Self::SETTINGS)),
        }
        Ok(())
    }

    /// Checks every setting and that every value a distribution can draw is accepted.
    pub fn validate(&self) -> Result<()> {
        let (s, w, h, r) = (
            self.max_speed,
            self.max_spin,
            self.release_height,
            self.target_range,
        );
        check_setting("max_speed", s, s > 0.0, "a finite number > 0 (m/s)")?;
        check_setting("max_spin", w, w >= 0.0, "a finite number ≥ 0 (rad/s)")?;
        check_setting(
            "release_height",
            h,
            (0.0..=100.0).contains(&h),
            "a number in [0, 100] (m)",
        )?;
        check_setting("target_range", r, r > 0.0, "a finite number > 0 (m)")?;
        check_common_settings(
            self.control_dt,
            self.substeps,
            self.max_episode_steps,
            self.gravity,
            self.action_cost,
        )?;
        self.ball_radius.check("ball_radius", 1e-3, 1.0)?;
        self.ball_mass.check("ball_mass", 1e-6, 1e6)?;
        self.target_x.check("target_x", -r, r)?;
        self.target_y.check("target_y", -r, r)?;
        self.restitution.check("restitution", 0.0, 1.0)?;
        self.friction.check("friction", 0.0, 2.0)
    }
}

/// The ball-toss task (`BallToss-v0`).
#[derive(Debug, Clone)]
pub struct BallToss {
    config: BallTossConfig,
    spec: EnvSpec,
    ball: BodyId,
    contact: ConstraintId,
}

/// The ball and its contact with the ground, in the order [`BallToss::template`] creates them.
fn build_template() -> Result<(SystemTemplate, BodyId, ConstraintId)> {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let contact = t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true))?;
    Ok((t, ball, contact))
}

impl BallToss {
    /// The task with validated settings.
    pub fn new(config: BallTossConfig) -> Result<Self> {
        config.validate()?;
        let (_, ball, contact) = build_template()?;
        let inf = f32::INFINITY;
        let r = config.target_range as f32;
        let spec = EnvSpec {
            name: "BallToss-v0",
            observation: BoxSpace {
                low: vec![-r, -r, 0.0, 0.0, -inf, -inf, -inf, -inf],
                high: vec![r, r, 1.0, 2.0, inf, inf, inf, inf],
            },
            action: BoxSpace::uniform(4, -1.0, 1.0),
            observation_names: vec![
                "target_x",
                "target_y",
                "restitution",
                "friction",
                "ball_x",
                "ball_y",
                "ball_vx",
                "ball_vy",
            ],
            action_names: vec!["vx", "vy", "vz", "spin"],
            control_dt: config.control_dt,
            substeps: config.substeps,
            max_episode_steps: config.max_episode_steps,
            stabilization: Stabilization::None,
        };
        Ok(Self {
            config,
            spec,
            ball,
            contact,
        })
    }

    /// The settings.
    pub fn config(&self) -> &BallTossConfig {
        &self.config
    }

    /// The ball body (free).
    pub fn ball(&self) -> BodyId {
        self.ball
    }

    /// The ball's contact with the ground (unilateral).
    pub fn contact(&self) -> ConstraintId {
        self.contact
    }
}

impl Task for BallToss {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn template(&self) -> Result<SystemTemplate> {
        Ok(build_template()?.0)
    }

    /// Target x, y, restitution, friction.
    fn task_width(&self) -> usize {
        4
    }

    fn reset_env(
        &self,
        batch: &mut Batch,
        env: usize,
        draws: &Draws,
        task: &mut [f64],
    ) -> Result<()> {
        let c = &self.config;
        let radius = draws.draw("ball_radius", &c.ball_radius);
        let mass = draws.draw("ball_mass", &c.ball_mass);
        task[0] = draws.draw("target_x", &c.target_x);
        task[1] = draws.draw("target_y", &c.target_y);
        task[2] = draws.draw("restitution", &c.restitution);
        task[3] = draws.draw("friction", &c.friction);
        let height = c.release_height + radius;
        batch.set_q(self.ball, env, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, height])?;
        reset_solid_ball(batch, env, self.ball, self.contact, mass, radius, c.gravity)
    }

    fn apply_action(
        &self,
        batch: &mut Batch,
        env: usize,
        action: &[f32],
        _task: &[f64],
    ) -> Result<()> {
        let c = &self.config;
        let v = [0, 1, 2].map(|k| c.max_speed * f64::from(action[k]));
        // Spin about the horizontal axis across the throw, z × v̂ (topspin positive; Gy for a
        // throw straight up or down).
        let along = v[0].hypot(v[1]);
        let axis = if along > 0.0 {
            [-v[1] / along, v[0] / along]
        } else {
            [0.0, 1.0]
        };
        let spin = c.max_spin * f64::from(action[3]);
        batch.set_u(
            self.ball,
            env,
            [spin * axis[0], spin * axis[1], 0.0, v[0], v[1], v[2]],
        )
    }

    fn observe(&self, batch: &Batch, env: usize, task: &[f64], obs: &mut [f32]) {
        let q = batch.q(self.ball).map(|q| q[env]).unwrap_or([f64::NAN; 7]);
        let u = batch.u(self.ball).map(|u| u[env]).unwrap_or([f64::NAN; 6]);
        let values = [task[0], task[1], task[2], task[3], q[4], q[5], u[3], u[4]];
        for (o, x) in obs.iter_mut().zip(values) {
            *o = x as f32;
        }
    }

    fn outcome(&self, batch: &Batch, env: usize, task: &[f64], action: &[f32]) -> (f32, bool) {
        let Ok(q) = batch.q(self.ball).map(|q| q[env]) else {
            return (0.0, true);
        };
        let distance = (q[4] - task[0]).hypot(q[5] - task[1]);
        let effort = action.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
        let reward = 1.0 - distance / self.config.target_range - self.config.action_cost * effort;
        (reward as f32, true)
    }

    /// From the release point to the far side of the targets' range, up to the release height.
    fn view(&self) -> ([f64; 3], f64) {
        let range = self.config.target_range;
        let height = self.config.release_height;
        (
            [0.5 * range, 0.0, 0.25 * height],
            (0.6 * range).max(0.6 * height).max(1.0),
        )
    }

    fn unilateral_contacts(&self, _env: usize, task: &[f64]) -> Option<Vec<UnilateralContact>> {
        // The draws are checked against [0, 1] and [0, 2] by `validate`.
        let coefficients = Coefficients::with_friction(task[2], task[3]).ok()?;
        Some(vec![UnilateralContact {
            constraint: self.contact,
            coefficients,
        }])
    }
}
