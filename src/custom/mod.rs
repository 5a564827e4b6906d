//! Constraints written the way a user writes one: with the public [`Constraint`] interface only
//! (CPU formulas in Rust, their WGSL twin returned by [`Constraint::wgsl`]), shipped as examples
//! and tested on both paths.
//!
//! - [`DistanceRod`]: holonomic; a body point keeps its distance to a fixed point in Ground.
//! - [`KnifeEdge`]: a body point stays on the ground plane (holonomic) and cannot slip sideways
//!   along a body-fixed direction (nonholonomic, a Chaplygin sleigh's blade).
//!
//! [`Constraint`]: crate::constraints::Constraint
//! [`Constraint::wgsl`]: crate::constraints::Constraint::wgsl

pub mod distance_rod;
pub mod knife_edge;

pub use distance_rod::DistanceRod;
pub use knife_edge::KnifeEdge;
