//! Pictures of environments (Gymnasium's `render_mode="rgb_array"`): one environment's current
//! state drawn by the library's renderer ([`crate::render`]) from a fixed camera on the task's
//! workspace ([`Task::view`](super::Task::view)), as an H × W × 3 RGB image. A unilateral
//! task's contacts show their modes by colour and their forces as the modes give them.

use super::VectorEnv;
use crate::cpu::unilateral::{ContactMode, EventOptions, contact_multipliers};
use crate::error::{Error, Result};
use crate::render::{
    Canvas, RenderOptions, Renderer, Scene, Track, capture, capture_with, contact_states,
    up_from_gravity,
};

impl VectorEnv {
    /// Environment `env` now, as a `width × height` RGB picture (rows top to bottom).
    pub fn render(&self, env: usize, width: usize, height: usize) -> Result<Canvas> {
        if env >= self.len() {
            return Err(Error::InstanceOutOfRange {
                instance: env,
                len: self.len(),
            });
        }
        let batch = self.batch();
        let width_values = self.task().task_width();
        let values = &self.task_values()[env * width_values..(env + 1) * width_values];
        let frame = match self.task().unilateral_contacts(env, values) {
            Some(contacts) => {
                let options = EventOptions::default();
                // Touching contacts are found at this state (open ones stay open).
                let modes = vec![ContactMode::Stick; contacts.len()];
                let (multipliers, found) =
                    contact_multipliers(batch, env, &contacts, &modes, &options)
                        .unwrap_or_else(|_| (Vec::new(), modes.clone()));
                let states =
                    contact_states(batch.template().constraints().len(), &contacts, &found);
                capture_with(batch, env, &multipliers, &states)?
            }
            None => capture(batch, env)?,
        };
        let scene = Scene {
            up: up_from_gravity(batch.gravity_column()[env]),
            tracks: vec![Track {
                instance: env,
                inputs: Vec::new(),
                frames: vec![frame],
            }],
        };
        let options = RenderOptions {
            width,
            height,
            view: Some(self.task().view()),
            ..RenderOptions::default()
        };
        Renderer::new(&scene, options)?.frame(0)
    }
}
