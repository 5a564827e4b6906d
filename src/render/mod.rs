//! Pictures of instances: what a study's "show me instance 4711" and an environment's
//! `render()` draw. [`scene`] captures, per instance and time, every body's pose and every
//! constraint's decorative geometry (Simbody's: the plane as a translucent square, the sphere
//! with a spin marker, a follower point as a small ball; plus the contact point, the contact
//! force and, for unilateral contacts, the mode by colour); [`draw`] turns a scene into RGB
//! images with a fixed camera per panel ([`camera`]) on a [`Canvas`]. No GPU and no window:
//! pictures are computed on the CPU, so they work on any machine, in CI and in notebooks.
//! Encoding (PNG, GIF, the HTML player) is the command's business (`cli::render`).

pub mod camera;
pub mod canvas;
pub mod draw;
mod font;
mod raycast;
pub mod scene;

pub use camera::Camera;
pub use canvas::{Canvas, Rgb};
pub use draw::{Layout, RenderOptions, Renderer, state_colour};
pub use scene::{
    BodyPose, ConstraintPicture, ContactState, InstanceFrame, Scene, Track, capture, capture_with,
    contact_states, up_from_gravity,
};
