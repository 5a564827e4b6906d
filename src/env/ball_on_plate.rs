//! A ball rolling on a tilting plate: keep it near a target point.
//!
//! The plate is a *prescribed* body pivoting about its centre (the Ground origin), driven by a
//! quadratic [`PolynomialMotion`]; the ball is a free solid sphere held on the plate's top face
//! by a rolling [`SphereOnPlaneContact`] (bilateral: the ball does not bounce or lift off). The
//! action, in `[−1, 1]²`, is the commanded tilt rate of the plate about Ground's x and y axes as
//! a fraction of `max_tilt_rate`. Each action sets the plate's law for the coming interval —
//! gimbal angles `θ(τ) = w τ + ½ (w_cmd − w) τ² / dt` from the current pose and angular
//! velocity `w` (`τ` = time since the action) — so the angular velocity ramps linearly to the
//! command over one control interval, pose and velocity stay continuous (finite contact
//! forces, velocity constraints held throughout), and the integrator evaluates the law at
//! every stage time.
//!
//! | observation | meaning |
//! |---|---|
//! | `ball_x`, `ball_y` | ball centre relative to the plate centre, plate frame (m) |
//! | `ball_vx`, `ball_vy` | ball centre velocity relative to the plate, plate frame (m/s) |
//! | `normal_x`, `normal_y` | plate normal's x and y components in Ground (tilt) |
//! | `tilt_rate_x`, `tilt_rate_y` | plate angular velocity about Ground x and y (rad/s) |
//! | `target_x`, `target_y` | target point, plate frame (m) |
//!
//! Reward per step: `1 − d / half_size − action_cost · |a|²` (`a` the normalized action), with `d` the
//! in-plane distance from the ball centre to the target. Terminated when the ball centre leaves
//! the plate (`|x|` or `|y|` > `half_size`) or the plate tilts more than `max_tilt` from level;
//! truncated after `max_episode_steps`.

use std::sync::{Mutex, TryLockError};

use nalgebra::Vector3;
use rayon::prelude::*;

use super::{
    BoxSpace, CommonSettings, Draws, EnvSpec, Task, check_common_settings, check_setting,
    fixed_setting, parallel_envs, reset_solid_ball, unknown_setting,
};
use crate::batch::Batch;
use crate::constraints::SphereOnPlaneContact;
use crate::error::{Error, Result};
use crate::math::{quaternion_from_rotation_vector, rotation_from_quaternion};
use crate::model::{BodyId, ConstraintId, SystemTemplate};
use crate::motion::PolynomialMotion;
use crate::sample::Scalar;
use crate::step::Stabilization;

/// Settings of [`BallOnPlate`]; the [`Scalar`] fields are drawn per environment and episode.
#[derive(Debug, Clone, PartialEq)]
pub struct BallOnPlateConfig {
    /// Half the side of the square plate (m), in (0, 10]. Default 0.15.
    pub half_size: f64,
    /// Largest commanded tilt rate (rad/s), > 0: the action ±1. Default 2.
    pub max_tilt_rate: f64,
    /// Tilt from level (rad) beyond which the episode terminates, in (0, π/2). Default 0.35.
    pub max_tilt: f64,
    /// Control interval (s), > 0. Default 0.02 (50 Hz).
    pub control_dt: f64,
    /// RK4 steps per control interval, ≥ 1. Default 4.
    pub substeps: usize,
    /// Episode length limit (steps), ≥ 1. Default 500 (10 s).
    pub max_episode_steps: u32,
    /// Gravity (m/s², along −z of Ground), ≥ 0. Default 9.81.
    pub gravity: f64,
    /// Weight of the action penalty, ≥ 0. Default 0.01.
    pub action_cost: f64,
    /// Ball radius (m), in [1e-4, half_size]. Default uniform [0.015, 0.03].
    pub ball_radius: Scalar,
    /// Ball mass (kg), in [1e-6, 1e6]. Default log-uniform [0.02, 0.2].
    pub ball_mass: Scalar,
    /// Initial ball position on the plate, plate frame (m), in ±half_size. Default uniform
    /// ±0.08 each.
    pub start_x: Scalar,
    /// See [`start_x`](Self::start_x).
    pub start_y: Scalar,
    /// Target point, plate frame (m), in ±half_size. Default uniform ±0.08 each.
    pub target_x: Scalar,
    /// See [`target_x`](Self::target_x).
    pub target_y: Scalar,
    /// Initial tilt about Ground x (rad, rotation-vector component), in ±max_tilt/√2. Default
    /// uniform ±0.05.
    pub initial_tilt_x: Scalar,
    /// Initial tilt about Ground y; see [`initial_tilt_x`](Self::initial_tilt_x).
    pub initial_tilt_y: Scalar,
}

impl Default for BallOnPlateConfig {
    fn default() -> Self {
        Self {
            half_size: 0.15,
            max_tilt_rate: 2.0,
            max_tilt: 0.35,
            control_dt: 0.02,
            substeps: 4,
            max_episode_steps: 500,
            gravity: 9.81,
            action_cost: 0.01,
            ball_radius: Scalar::Uniform(0.015, 0.03),
            ball_mass: Scalar::LogUniform(0.02, 0.2),
            start_x: Scalar::Uniform(-0.08, 0.08),
            start_y: Scalar::Uniform(-0.08, 0.08),
            target_x: Scalar::Uniform(-0.08, 0.08),
            target_y: Scalar::Uniform(-0.08, 0.08),
            initial_tilt_x: Scalar::Uniform(-0.05, 0.05),
            initial_tilt_y: Scalar::Uniform(-0.05, 0.05),
        }
    }
}

impl BallOnPlateConfig {
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
    pub const SETTINGS: [&'static str; 16] = [
        "half_size",
        "max_tilt_rate",
        "max_tilt",
        "control_dt",
        "substeps",
        "max_episode_steps",
        "gravity",
        "action_cost",
        "ball_radius",
        "ball_mass",
        "start_x",
        "start_y",
        "target_x",
        "target_y",
        "initial_tilt_x",
        "initial_tilt_y",
    ];

    /// Sets the field named `field`: a distribution for the per-episode fields, a number
    /// (`Scalar::Fixed`) for the others. Values are checked by [`validate`](Self::validate).
    pub fn set(&mut self, field: &str, value: Scalar) -> Result<()> {
        if self.common().set(field, &value)? {
            return Ok(());
        }
        let fixed = |v: &Scalar| fixed_setting(field, v);
        match field {
            "half_size" => self.half_size = fixed(&value)?,
            "max_tilt_rate" => self.max_tilt_rate = fixed(&value)?,
            "max_tilt" => self.max_tilt = fixed(&value)?,
            "ball_radius" => self.ball_radius = value,
            "ball_mass" => self.ball_mass = value,
            "start_x" => self.start_x = value,
            "start_y" => self.start_y = value,
            "target_x" => self.target_x = value,
            "target_y" => self.target_y = value,
            "initial_tilt_x" => self.initial_tilt_x = value,
            "initial_tilt_y" => self.initial_tilt_y = value,
            _ => return Err(unknown_setting(field, &Self::SETTINGS)),
        }
        Ok(())
    }

    /// Checks every setting and that every value a distribution can draw is accepted.
    pub fn validate(&self) -> Result<()> {
        let h = self.half_size;
        check_setting(
            "half_size",
            h,
            h > 0.0 && h <= 10.0,
            "a number in (0, 10] (m)",
        )?;
        let r = self.max_tilt_rate;
        check_setting("max_tilt_rate", r, r > 0.0, "a finite number > 0 (rad/s)")?;
        let t = self.max_tilt;
        let half_pi = std::f64::consts::FRAC_PI_2;
        check_setting(
            "max_tilt",
            t,
            t > 0.0 && t < half_pi,
            "a number in (0, π/2) (rad)",
        )?;
        check_common_settings(
            self.control_dt,
            self.substeps,
            self.max_episode_steps,
            self.gravity,
            self.action_cost,
        )?;
        self.ball_radius.check("ball_radius", 1e-4, h)?;
        self.ball_mass.check("ball_mass", 1e-6, 1e6)?;
        self.start_x.check("start_x", -h, h)?;
        self.start_y.check("start_y", -h, h)?;
        self.target_x.check("target_x", -h, h)?;
        self.target_y.check("target_y", -h, h)?;
        let tilt = t / std::f64::consts::SQRT_2;
        self.initial_tilt_x.check("initial_tilt_x", -tilt, tilt)?;
        self.initial_tilt_y.check("initial_tilt_y", -tilt, tilt)
    }
}

/// Parameters of the plate's law ([`PolynomialMotion`] of degree 2: start time, base
/// quaternion, three position and three gimbal-angle polynomials of three coefficients).
const LAW_WIDTH: usize = 23;

/// The plate's quadratic law from time `t0`: base rotation `base` (the pose at `t0`), gimbal
/// angles about x, y, z with rates `w` and accelerations `b` at `t0` (the chain starts at the
/// identity, so these are Ground components there), origin fixed at the Ground origin.
fn plate_law(t0: f64, base: &[f64], w: [f64; 3], b: [f64; 3]) -> [f64; LAW_WIDTH] {
    let mut law = [0.0; LAW_WIDTH];
    law[0] = t0;
    law[1..5].copy_from_slice(&base[..4]);
    // law[5..14]: the position polynomials, all zero.
    for k in 0..3 {
        law[14 + 3 * k..17 + 3 * k].copy_from_slice(&[0.0, w[k], 0.5 * b[k]]);
    }
    law
}

/// The ball-on-a-tilting-plate task (`BallOnPlate-v0`).
#[derive(Debug, Clone)]
pub struct BallOnPlate {
    config: BallOnPlateConfig,
    spec: EnvSpec,
    plate: BodyId,
    ball: BodyId,
    contact: ConstraintId,
    /// The laws `apply_actions` computes, kept between steps.
    laws: LawRows,
}

/// Room for the plate laws of every environment (`num_envs × LAW_WIDTH`), kept by the task so
/// a control step allocates nothing for them. Behind a lock because a task is shared: a call
/// that finds it taken (another vector of environments stepping at the same time) uses rows
/// of its own. A clone starts with no room.
#[derive(Debug, Default)]
struct LawRows(Mutex<Vec<f64>>);

impl Clone for LawRows {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// The plate, the ball and the contact of the task's template, in the order
/// [`BallOnPlate::template`] creates them.
fn build_template() -> Result<(SystemTemplate, BodyId, BodyId, ConstraintId)> {
    let mut t = SystemTemplate::new();
    let plate = t.add_driven_body("plate", PolynomialMotion::new(2)?);
    let ball = t.add_free_body("ball");
    let contact = t.add_constraint(SphereOnPlaneContact::new(plate, ball, true))?;
    Ok((t, plate, ball, contact))
}

impl BallOnPlate {
    /// The plate's law for the next control interval from `t0`, at pose `pose` and angular
    /// velocity `w` (the first three of the velocity), for a clipped `action`: the angular
    /// velocity ramps to the commanded tilt rates over the interval, with no spin about z.
    fn commanded_law(
        &self,
        t0: f64,
        pose: &[f64; 7],
        w: &[f64; 6],
        action: &[f32],
    ) -> [f64; LAW_WIDTH] {
        let dt = self.config.control_dt;
        let rate = self.config.max_tilt_rate;
        let b = [
            (rate * f64::from(action[0]) - w[0]) / dt,
            (rate * f64::from(action[1]) - w[1]) / dt,
            -w[2] / dt,
        ];
        plate_law(t0, &pose[..4], [w[0], w[1], w[2]], b)
    }

    /// The task with validated settings.
    pub fn new(config: BallOnPlateConfig) -> Result<Self> {
        config.validate()?;
        let (_, plate, ball, contact) = build_template()?;
        let inf = f32::INFINITY;
        let h = config.half_size as f32;
        let spec = EnvSpec {
            name: "BallOnPlate-v0",
            observation: BoxSpace {
                low: vec![-inf, -inf, -inf, -inf, -1.0, -1.0, -inf, -inf, -h, -h],
                high: vec![inf, inf, inf, inf, 1.0, 1.0, inf, inf, h, h],
            },
            action: BoxSpace::uniform(2, -1.0, 1.0),
            observation_names: vec![
                "ball_x",
                "ball_y",
                "ball_vx",
                "ball_vy",
                "normal_x",
                "normal_y",
                "tilt_rate_x",
                "tilt_rate_y",
                "target_x",
                "target_y",
            ],
            action_names: vec!["tilt_rate_x", "tilt_rate_y"],
            control_dt: config.control_dt,
            substeps: config.substeps,
            max_episode_steps: config.max_episode_steps,
            stabilization: Stabilization::Projection { tolerance: 1e-6 },
        };
        Ok(Self {
            config,
            spec,
            plate,
            ball,
            contact,
            laws: LawRows::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &BallOnPlateConfig {
        &self.config
    }

    /// The plate body (prescribed).
    pub fn plate(&self) -> BodyId {
        self.plate
    }

    /// The ball body (free).
    pub fn ball(&self) -> BodyId {
        self.ball
    }

    /// The rolling contact.
    pub fn contact(&self) -> ConstraintId {
        self.contact
    }

    /// The ball centre and its velocity relative to the plate, both in the plate frame, and the
    /// plate normal in Ground.
    pub fn ball_in_plate_frame(
        &self,
        batch: &Batch,
        env: usize,
    ) -> Option<(Vector3<f64>, Vector3<f64>, Vector3<f64>)> {
        let pose = batch.pose(self.plate).ok()?[env];
        let plate_velocity = batch.velocity(self.plate).ok()?[env];
        let q = batch.q(self.ball).ok()?[env];
        let u = batch.u(self.ball).ok()?[env];
        let rotation = rotation_from_quaternion(&pose[..4])?;
        let plate_origin = Vector3::new(pose[4], pose[5], pose[6]);
        let w = Vector3::new(plate_velocity[0], plate_velocity[1], plate_velocity[2]);
        let v_origin = Vector3::new(plate_velocity[3], plate_velocity[4], plate_velocity[5]);
        let offset = Vector3::new(q[4], q[5], q[6]) - plate_origin;
        let v_ball = Vector3::new(u[3], u[4], u[5]);
        let position = rotation.transpose() * offset;
        let velocity = rotation.transpose() * (v_ball - (v_origin + w.cross(&offset)));
        Some((position, velocity, rotation * Vector3::z()))
    }
}

impl Task for BallOnPlate {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    /// The plate (of `half_size`) and a little around it.
    fn view(&self) -> ([f64; 3], f64) {
        ([0.0, 0.0, 0.0], 1.2 * self.config.half_size)
    }

    fn template(&self) -> Result<SystemTemplate> {
        Ok(build_template()?.0)
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
        let c = &self.config;
        let radius = draws.draw("ball_radius", &c.ball_radius);
        let mass = draws.draw("ball_mass", &c.ball_mass);
        let start = [
            draws.draw("start_x", &c.start_x),
            draws.draw("start_y", &c.start_y),
        ];
        task[0] = draws.draw("target_x", &c.target_x);
        task[1] = draws.draw("target_y", &c.target_y);
        let tilt = [
            draws.draw("initial_tilt_x", &c.initial_tilt_x),
            draws.draw("initial_tilt_y", &c.initial_tilt_y),
            0.0,
        ];
        let e = quaternion_from_rotation_vector(tilt);
        let rotation = rotation_from_quaternion(&e).ok_or_else(|| crate::Error::InvalidValue {
            field: "initial_tilt".into(),
            instance: env,
            value: format!("{tilt:?}"),
            accepted: "finite tilt angles (rad)".into(),
        })?;
        // The plate at rest at its initial tilt, pivoting about the Ground origin.
        let t0 = batch.time()[env];
        batch.set_motion_params(self.plate, env, &plate_law(t0, &e, [0.0; 3], [0.0; 3]))?;
        // The ball at rest on the plate: centre one radius above the face; this state satisfies
        // the contact's position and (rolling) velocity conditions exactly.
        let centre = rotation * Vector3::new(start[0], start[1], radius);
        batch.set_q(
            self.ball,
            env,
            [1.0, 0.0, 0.0, 0.0, centre.x, centre.y, centre.z],
        )?;
        reset_solid_ball(batch, env, self.ball, self.contact, mass, radius, c.gravity)
    }

    fn apply_action(
        &self,
        batch: &mut Batch,
        env: usize,
        action: &[f32],
        _task: &[f64],
    ) -> Result<()> {
        let (w, pose) = (
            batch.velocity(self.plate)?[env],
            batch.pose(self.plate)?[env],
        );
        let law = self.commanded_law(batch.time()[env], &pose, &w, action);
        batch.set_motion_params(self.plate, env, &law)
    }

    /// Every stepped environment's law at once: the laws computed (and then checked and
    /// evaluated by [`Batch::set_motion_params_rows`]) on rayon's pool for large batches, the
    /// same bits as [`apply_action`](Task::apply_action) for each in turn.
    fn apply_actions(
        &self,
        batch: &mut Batch,
        actions: &[f32],
        _tasks: &[f64],
        stepped: &[bool],
    ) -> Result<()> {
        let n = stepped.len();
        let ad = self.spec.action.dim();
        let (velocity, pose) = (batch.velocity(self.plate)?, batch.pose(self.plate)?);
        let time = batch.time();
        let mut own = Vec::new();
        let mut kept = match self.laws.0.try_lock() {
            Ok(kept) => Some(kept),
            Err(TryLockError::Poisoned(kept)) => Some(kept.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        let laws = kept.as_deref_mut().unwrap_or(&mut own);
        // Rows `apply` does not select are not read: whatever they hold from an earlier step.
        if laws.len() != n * LAW_WIDTH {
            laws.clear();
            laws.try_reserve_exact(n * LAW_WIDTH)
                .map_err(|_| Error::OutOfMemory {
                    what: "num_envs (plate laws)".into(),
                    count: n.to_string(),
                    bytes: (n * LAW_WIDTH * 8) as u128,
                    where_: "host",
                })?;
            laws.resize(n * LAW_WIDTH, 0.0);
        }
        let law_of = |(i, law): (usize, &mut [f64])| {
            if stepped[i] {
                let action = &actions[i * ad..(i + 1) * ad];
                law.copy_from_slice(&self.commanded_law(time[i], &pose[i], &velocity[i], action));
            }
        };
        if parallel_envs(n) {
            laws.par_chunks_mut(LAW_WIDTH)
                .enumerate()
                .with_min_len(64)
                .for_each(law_of);
        } else {
            laws.chunks_mut(LAW_WIDTH).enumerate().for_each(law_of);
        }
        batch.set_motion_params_rows(self.plate, laws, Some(stepped))
    }

    fn observe(&self, batch: &Batch, env: usize, task: &[f64], obs: &mut [f32]) {
        let w = batch
            .velocity(self.plate)
            .map(|v| v[env])
            .unwrap_or([f64::NAN; 6]);
        let (p, v, n) = self.ball_in_plate_frame(batch, env).unwrap_or((
            Vector3::repeat(f64::NAN),
            Vector3::repeat(f64::NAN),
            Vector3::repeat(f64::NAN),
        ));
        let values = [p.x, p.y, v.x, v.y, n.x, n.y, w[0], w[1], task[0], task[1]];
        for (o, x) in obs.iter_mut().zip(values) {
            *o = x as f32;
        }
    }

    fn outcome(&self, batch: &Batch, env: usize, task: &[f64], action: &[f32]) -> (f32, bool) {
        let c = &self.config;
        let Some((p, _, n)) = self.ball_in_plate_frame(batch, env) else {
            return (0.0, true);
        };
        let distance = ((p.x - task[0]).powi(2) + (p.y - task[1]).powi(2)).sqrt();
        let effort = action.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
        let reward = 1.0 - distance / c.half_size - c.action_cost * effort;
        let off_plate = p.x.abs() > c.half_size || p.y.abs() > c.half_size;
        let too_steep = n.z.clamp(-1.0, 1.0).acos() > c.max_tilt;
        (reward as f32, off_plate || too_steep)
    }
}
