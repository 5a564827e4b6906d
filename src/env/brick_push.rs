//! Push a brick to a target pose across a floor that may be inclined.
//!
//! The brick is a free box standing on its four bottom corners, each held on the Ground plane
//! `z = 0` by a position-level [`PointToGround`] contact along the vertical (RBDL's
//! frictionless contact, bilateral; four coplanar points give redundant rows, solved for the
//! minimum-norm multipliers). The floor's
//! incline is modelled by tilting gravity: `g (sin θ cos φ, sin θ sin φ, −cos θ)` with incline
//! `θ` and downhill direction `φ`, so the brick slides downhill unless pushed. The action is a
//! horizontal force through the centre of mass and a torque about the vertical, given in
//! `[−1, 1]³` as fractions of `max_force` and `max_torque`, held over the control interval; viscous drag `−c v` and `−c_w ω_z`, evaluated at the start of the interval,
//! is added to it (the floor's resistance).
//!
//! | observation | meaning |
//! |---|---|
//! | `x`, `y` | brick centre in Ground (m) |
//! | `dx`, `dy` | target minus brick centre (m) |
//! | `cos_dyaw`, `sin_dyaw` | yaw error (target yaw − yaw) |
//! | `vx`, `vy` | centre velocity (m/s) |
//! | `wz` | yaw rate (rad/s) |
//! | `downhill_x`, `downhill_y` | horizontal gravity components over `|g|` |
//!
//! Reward per step: `−|Δp| − 0.1 |Δyaw| − action_cost |a|²` (`a` the normalized action), plus
//! `success_bonus` on the step that reaches the target (`|Δp| < success_distance`,
//! `|Δyaw| < success_angle`, speed < `success_speed`), which terminates the episode; leaving the
//! arena (`|x|` or `|y|` > `arena_half_size`) terminates it too.

use std::f64::consts::PI;

use nalgebra::Vector3;

use super::{
    BoxSpace, CommonSettings, Draws, EnvSpec, Task, check_common_settings, check_setting,
    fixed_setting, unknown_setting,
};
use crate::batch::Batch;
use crate::constraints::PointToGround;
use crate::error::Result;
use crate::math::rotation_from_quaternion;
use crate::model::{BodyId, ConstraintId, SystemTemplate};
use crate::sample::Scalar;
use crate::step::Stabilization;

/// Settings of [`BrickPush`]; the [`Scalar`] fields are drawn per environment and episode.
#[derive(Debug, Clone, PartialEq)]
pub struct BrickPushConfig {
    /// Half the side of the square arena (m), > 0. Default 2.
    pub arena_half_size: f64,
    /// Largest push force per axis (N), > 0: the action ±1. Default 20.
    pub max_force: f64,
    /// Largest yaw torque (N m), > 0: the action ±1. Default 2.
    pub max_torque: f64,
    /// Control interval (s), > 0. Default 0.05 (20 Hz).
    pub control_dt: f64,
    /// RK4 steps per control interval, ≥ 1. Default 5.
    pub substeps: usize,
    /// Episode length limit (steps), ≥ 1. Default 400 (20 s).
    pub max_episode_steps: u32,
    /// Gravity magnitude (m/s²), ≥ 0. Default 9.81.
    pub gravity: f64,
    /// Weight of the action penalty, ≥ 0. Default 0.001.
    pub action_cost: f64,
    /// Position tolerance of success (m), > 0. Default 0.05.
    pub success_distance: f64,
    /// Yaw tolerance of success (rad), > 0. Default 0.1.
    pub success_angle: f64,
    /// Speed below which a reached target counts (m/s), > 0. Default 0.1.
    pub success_speed: f64,
    /// Reward added on success, finite. Default 10.
    pub success_bonus: f64,
    /// Brick mass (kg), in [1e-3, 1e4]. Default log-uniform [0.5, 3].
    pub mass: Scalar,
    /// Half extents of the brick (m), each in [1e-3, 10]. Defaults uniform [0.1, 0.25],
    /// [0.05, 0.15], [0.03, 0.1].
    pub half_x: Scalar,
    /// See [`half_x`](Self::half_x).
    pub half_y: Scalar,
    /// See [`half_x`](Self::half_x).
    pub half_z: Scalar,
    /// Floor incline (degrees), in [0, 60]. Default uniform [0, 8].
    pub incline_deg: Scalar,
    /// Downhill direction in the floor plane (rad from +x), finite. Default uniform [−π, π].
    pub downhill_direction: Scalar,
    /// Linear drag coefficient (N s/m), in [0, 1e4]. Default uniform [1, 3].
    pub linear_drag: Scalar,
    /// Yaw drag coefficient (N m s), in [0, 1e4]. Default 0.05.
    pub yaw_drag: Scalar,
    /// Initial centre position (m), in ±arena_half_size. Default uniform ±1 each.
    pub start_x: Scalar,
    /// See [`start_x`](Self::start_x).
    pub start_y: Scalar,
    /// Initial yaw (rad), finite. Default uniform [−π, π].
    pub start_yaw: Scalar,
    /// Target centre position (m), in ±arena_half_size. Default uniform ±1 each.
    pub target_x: Scalar,
    /// See [`target_x`](Self::target_x).
    pub target_y: Scalar,
    /// Target yaw (rad), finite. Default uniform [−π, π].
    pub target_yaw: Scalar,
}

impl Default for BrickPushConfig {
    fn default() -> Self {
        Self {
            arena_half_size: 2.0,
            max_force: 20.0,
            max_torque: 2.0,
            control_dt: 0.05,
            substeps: 5,
            max_episode_steps: 400,
            gravity: 9.81,
            action_cost: 0.001,
            success_distance: 0.05,
            success_angle: 0.1,
            success_speed: 0.1,
            success_bonus: 10.0,
            mass: Scalar::LogUniform(0.5, 3.0),
            half_x: Scalar::Uniform(0.1, 0.25),
            half_y: Scalar::Uniform(0.05, 0.15),
            half_z: Scalar::Uniform(0.03, 0.1),
            incline_deg: Scalar::Uniform(0.0, 8.0),
            downhill_direction: Scalar::Uniform(-PI, PI),
            linear_drag: Scalar::Uniform(1.0, 3.0),
            yaw_drag: Scalar::Fixed(0.05),
            start_x: Scalar::Uniform(-1.0, 1.0),
            start_y: Scalar::Uniform(-1.0, 1.0),
            start_yaw: Scalar::Uniform(-PI, PI),
            target_x: Scalar::Uniform(-1.0, 1.0),
            target_y: Scalar::Uniform(-1.0, 1.0),
            target_yaw: Scalar::Uniform(-PI, PI),
        }
    }
}

impl BrickPushConfig {
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
    pub const SETTINGS: [&'static str; 26] = [
        "arena_half_size",
        "max_force",
        "max_torque",
        "control_dt",
        "substeps",
        "max_episode_steps",
        "gravity",
        "action_cost",
        "success_distance",
        "success_angle",
        "success_speed",
        "success_bonus",
        "mass",
        "half_x",
        "half_y",
        "half_z",
        "incline_deg",
        "downhill_direction",
        "linear_drag",
        "yaw_drag",
        "start_x",
        "start_y",
        "start_yaw",
        "target_x",
        "target_y",
        "target_yaw",
    ];

    /// Sets the field named `field`: a distribution for the per-episode fields, a number
    /// (`Scalar::Fixed`) for the others. Values are checked by [`validate`](Self::validate).
    pub fn set(&mut self, field: &str, value: Scalar) -> Result<()> {
        if self.common().set(field, &value)? {
            return Ok(());
        }
        let fixed = |v: &Scalar| fixed_setting(field, v);
        match field {
            "arena_half_size" => self.arena_half_size = fixed(&value)?,
            "max_force" => self.max_force = fixed(&value)?,
            "max_torque" => self.max_torque = fixed(&value)?,
            "success_distance" => self.success_distance = fixed(&value)?,
            "success_angle" => self.success_angle = fixed(&value)?,
            "success_speed" => self.success_speed = fixed(&value)?,
            "success_bonus" => self.success_bonus = fixed(&value)?,
            "mass" => self.mass = value,
            "half_x" => self.half_x = value,
            "half_y" => self.half_y = value,
            "half_z" => self.half_z = value,
            "incline_deg" => self.incline_deg = value,
            "downhill_direction" => self.downhill_direction = value,
            "linear_drag" => self.linear_drag = value,
            "yaw_drag" => self.yaw_drag = value,
            "start_x" => self.start_x = value,
            "start_y" => self.start_y = value,
            "start_yaw" => self.start_yaw = value,
            "target_x" => self.target_x = value,
            "target_y" => self.target_y = value,
            "target_yaw" => self.target_yaw = value,
            _ => return Err(unknown_setting(field, &Self::SETTINGS)),
        }
        Ok(())
    }

    /// Checks every setting and that every value a distribution can draw is accepted.
    pub fn validate(&self) -> Result<()> {
        let a = self.arena_half_size;
        check_setting("arena_half_size", a, a > 0.0, "a finite number > 0 (m)")?;
        let positive = [
            ("max_force", self.max_force, "(N)"),
            ("max_torque", self.max_torque, "(N m)"),
            ("success_distance", self.success_distance, "(m)"),
            ("success_angle", self.success_angle, "(rad)"),
            ("success_speed", self.success_speed, "(m/s)"),
        ];
        for (field, value, unit) in positive {
            check_setting(
                field,
                value,
                value > 0.0,
                &format!("a finite number > 0 {unit}"),
            )?;
        }
        check_common_settings(
            self.control_dt,
            self.substeps,
            self.max_episode_steps,
            self.gravity,
            self.action_cost,
        )?;
        let b = self.success_bonus;
        check_setting("success_bonus", b, true, "a finite number")?;
        let inf = f64::INFINITY;
        self.mass.check("mass", 1e-3, 1e4)?;
        self.half_x.check("half_x", 1e-3, 10.0)?;
        self.half_y.check("half_y", 1e-3, 10.0)?;
        self.half_z.check("half_z", 1e-3, 10.0)?;
        self.incline_deg.check("incline_deg", 0.0, 60.0)?;
        self.downhill_direction
            .check("downhill_direction", -inf, inf)?;
        self.linear_drag.check("linear_drag", 0.0, 1e4)?;
        self.yaw_drag.check("yaw_drag", 0.0, 1e4)?;
        self.start_x.check("start_x", -a, a)?;
        self.start_y.check("start_y", -a, a)?;
        self.start_yaw.check("start_yaw", -inf, inf)?;
        self.target_x.check("target_x", -a, a)?;
        self.target_y.check("target_y", -a, a)?;
        self.target_yaw.check("target_yaw", -inf, inf)
    }
}

/// The brick-pushing task (`BrickPush-v0`).
#[derive(Debug, Clone)]
pub struct BrickPush {
    config: BrickPushConfig,
    spec: EnvSpec,
    brick: BodyId,
    corners: [ConstraintId; 4],
}

/// Task values per environment: target x, y, yaw, linear drag, yaw drag.
const TASK_WIDTH: usize = 5;

/// The corner signs `(±x, ±y)` of the four contacts, in template order.
const CORNERS: [[f64; 2]; 4] = [[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]];

fn build_template() -> Result<(SystemTemplate, BodyId, [ConstraintId; 4])> {
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let mut corners = [ConstraintId(0); 4];
    for (k, c) in corners.iter_mut().enumerate() {
        let [sx, sy] = CORNERS[k];
        *c = t.add_constraint(
            PointToGround::new(brick, [sx, sy, -1.0], &[[0.0, 0.0, 1.0]])?.position_level(),
        )?;
    }
    Ok((t, brick, corners))
}

/// `a − b` wrapped into (−π, π].
fn angle_difference(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(2.0 * PI);
    if d > PI { d - 2.0 * PI } else { d }
}

impl BrickPush {
    /// The task with validated settings.
    pub fn new(config: BrickPushConfig) -> Result<Self> {
        config.validate()?;
        let (_, brick, corners) = build_template()?;
        let inf = f32::INFINITY;
        let spec = EnvSpec {
            name: "BrickPush-v0",
            observation: BoxSpace {
                low: vec![
                    -inf, -inf, -inf, -inf, -1.0, -1.0, -inf, -inf, -inf, -1.0, -1.0,
                ],
                high: vec![inf, inf, inf, inf, 1.0, 1.0, inf, inf, inf, 1.0, 1.0],
            },
            action: BoxSpace::uniform(3, -1.0, 1.0),
            observation_names: vec![
                "x",
                "y",
                "dx",
                "dy",
                "cos_dyaw",
                "sin_dyaw",
                "vx",
                "vy",
                "wz",
                "downhill_x",
                "downhill_y",
            ],
            action_names: vec!["force_x", "force_y", "torque_z"],
            control_dt: config.control_dt,
            substeps: config.substeps,
            max_episode_steps: config.max_episode_steps,
            stabilization: Stabilization::Projection { tolerance: 1e-6 },
        };
        Ok(Self {
            config,
            spec,
            brick,
            corners,
        })
    }

    /// The settings.
    pub fn config(&self) -> &BrickPushConfig {
        &self.config
    }

    /// The brick body.
    pub fn brick(&self) -> BodyId {
        self.brick
    }

    /// The four corner contacts.
    pub fn corners(&self) -> [ConstraintId; 4] {
        self.corners
    }

    /// The brick's yaw (rotation about Ground z, rad).
    pub fn yaw(&self, batch: &Batch, env: usize) -> f64 {
        let q = batch.q(self.brick).map(|q| q[env]).unwrap_or([f64::NAN; 7]);
        match rotation_from_quaternion(&q[..4]) {
            Some(r) => r[(1, 0)].atan2(r[(0, 0)]),
            None => f64::NAN,
        }
    }

    /// Position error, yaw error and speed of environment `env`.
    fn errors(&self, batch: &Batch, env: usize, task: &[f64]) -> (f64, f64, f64) {
        let q = batch.q(self.brick).map(|q| q[env]).unwrap_or([f64::NAN; 7]);
        let u = batch.u(self.brick).map(|u| u[env]).unwrap_or([f64::NAN; 6]);
        let distance = ((task[0] - q[4]).powi(2) + (task[1] - q[5]).powi(2)).sqrt();
        let yaw_error = angle_difference(task[2], self.yaw(batch, env));
        let speed = Vector3::new(u[3], u[4], u[5]).norm();
        (distance, yaw_error, speed)
    }
}

impl Task for BrickPush {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    /// The arena (of `arena_half_size`).
    fn view(&self) -> ([f64; 3], f64) {
        ([0.0, 0.0, 0.0], 1.2 * self.config.arena_half_size)
    }

    fn template(&self) -> Result<SystemTemplate> {
        Ok(build_template()?.0)
    }

    fn task_width(&self) -> usize {
        TASK_WIDTH
    }

    fn reset_env(
        &self,
        batch: &mut Batch,
        env: usize,
        draws: &Draws,
        task: &mut [f64],
    ) -> Result<()> {
        let c = &self.config;
        let mass = draws.draw("mass", &c.mass);
        let half = [
            draws.draw("half_x", &c.half_x),
            draws.draw("half_y", &c.half_y),
            draws.draw("half_z", &c.half_z),
        ];
        let incline = draws.draw("incline_deg", &c.incline_deg).to_radians();
        let direction = draws.draw("downhill_direction", &c.downhill_direction);
        let start = [
            draws.draw("start_x", &c.start_x),
            draws.draw("start_y", &c.start_y),
            draws.draw("start_yaw", &c.start_yaw),
        ];
        task[0] = draws.draw("target_x", &c.target_x);
        task[1] = draws.draw("target_y", &c.target_y);
        task[2] = draws.draw("target_yaw", &c.target_yaw);
        task[3] = draws.draw("linear_drag", &c.linear_drag);
        task[4] = draws.draw("yaw_drag", &c.yaw_drag);

        // A uniform box about its centre: I_xx = m (b² + c²) / 3 with half extents a, b, c.
        let [a, b, h] = half;
        let inertia = [
            mass * (b * b + h * h) / 3.0,
            mass * (a * a + h * h) / 3.0,
            mass * (a * a + b * b) / 3.0,
            0.0,
            0.0,
            0.0,
        ];
        batch.set_mass_properties(self.brick, env, mass, [0.0; 3], inertia)?;
        // Standing on its corners: centre at height h, yawed about z, at rest.
        let (s, co) = (0.5 * start[2]).sin_cos();
        batch.set_q(self.brick, env, [co, 0.0, 0.0, s, start[0], start[1], h])?;
        batch.set_u(self.brick, env, [0.0; 6])?;
        batch.set_applied_force(self.brick, env, [0.0; 3])?;
        batch.set_applied_torque(self.brick, env, [0.0; 3])?;
        for (k, contact) in self.corners.iter().enumerate() {
            let [sx, sy] = CORNERS[k];
            batch.set_param(*contact, "point", env, &[sx * a, sy * b, -h])?;
            batch.set_param(*contact, "normals", env, &[0.0, 0.0, 1.0])?;
            batch.set_param(*contact, "ground_point", env, &[0.0; 3])?;
            batch.set_enabled(*contact, env, true)?;
        }
        let g = c.gravity;
        batch.set_gravity(
            env,
            [
                g * incline.sin() * direction.cos(),
                g * incline.sin() * direction.sin(),
                -g * incline.cos(),
            ],
        )?;
        Ok(())
    }

    fn apply_action(
        &self,
        batch: &mut Batch,
        env: usize,
        action: &[f32],
        task: &[f64],
    ) -> Result<()> {
        let u = batch.u(self.brick)?[env];
        let (drag, yaw_drag) = (task[3], task[4]);
        let (f, t) = (self.config.max_force, self.config.max_torque);
        let force = [
            f * f64::from(action[0]) - drag * u[3],
            f * f64::from(action[1]) - drag * u[4],
            0.0,
        ];
        let torque = [0.0, 0.0, t * f64::from(action[2]) - yaw_drag * u[2]];
        batch.set_applied_force(self.brick, env, force)?;
        batch.set_applied_torque(self.brick, env, torque)
    }

    fn observe(&self, batch: &Batch, env: usize, task: &[f64], obs: &mut [f32]) {
        let q = batch.q(self.brick).map(|q| q[env]).unwrap_or([f64::NAN; 7]);
        let u = batch.u(self.brick).map(|u| u[env]).unwrap_or([f64::NAN; 6]);
        let g = batch.gravity_column()[env];
        let g_norm = (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]).sqrt();
        let downhill = if g_norm > 0.0 {
            [g[0] / g_norm, g[1] / g_norm]
        } else {
            [0.0, 0.0]
        };
        let dyaw = angle_difference(task[2], self.yaw(batch, env));
        let values = [
            q[4],
            q[5],
            task[0] - q[4],
            task[1] - q[5],
            dyaw.cos(),
            dyaw.sin(),
            u[3],
            u[4],
            u[2],
            downhill[0],
            downhill[1],
        ];
        for (o, x) in obs.iter_mut().zip(values) {
            *o = x as f32;
        }
    }

    fn outcome(&self, batch: &Batch, env: usize, task: &[f64], action: &[f32]) -> (f32, bool) {
        let c = &self.config;
        let (distance, yaw_error, speed) = self.errors(batch, env, task);
        let q = batch.q(self.brick).map(|q| q[env]).unwrap_or([f64::NAN; 7]);
        let effort = action.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
        let success = distance < c.success_distance
            && yaw_error.abs() < c.success_angle
            && speed < c.success_speed;
        let outside = !(q[4].abs() <= c.arena_half_size && q[5].abs() <= c.arena_half_size);
        let mut reward = -distance - 0.1 * yaw_error.abs() - c.action_cost * effort;
        if success {
            reward += c.success_bonus;
        }
        (reward as f32, success || outside)
    }
}
