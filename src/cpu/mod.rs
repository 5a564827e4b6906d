//! The f64 CPU reference path: assembly of each instance's system, its solve, evaluation over a
//! batch, projection onto the constraints, and time stepping — rayon-parallel over instances.
//!
//! Each instance is computed by the same sequential code whatever the thread count, and nothing
//! is reduced across instances, so results are bit-identical with 1 thread and with many. The
//! GPU path (`gpu`) is its twin; the two never name each other, and callers reach either
//! through the backend's `Evaluator` and `Stepper`.

pub mod assembly;
mod cod;
pub mod dynamics;
pub mod evaluate;
mod evaluating;
pub mod integrate;
mod jacobi;
mod kinematics;
pub(crate) mod lanes;
pub mod solver;
pub(crate) mod stepping;
pub mod unilateral;
