//! # simbatch
//!
//! Thousands to millions of small, independent constrained rigid-body systems at once, with
//! Simbody's constraint semantics. This crate holds the model ([`model`]), the structure-of-arrays
//! batch storage ([`batch`]), one module per constraint kind ([`constraints`]), the f64 CPU
//! reference path ([`cpu`]: dynamics, multiplier solver, evaluation, assembly, integrators), its
//! GPU twin ([`gpu`]) and one API over both ([`backend`]). The README's module map gives the
//! order in which modules may name each other. The physics contract is `physics.md` (at the
//! repository root); every formula here cites its section.
//!
//! ```
//! use simbatch::prelude::*;
//!
//! let mut template = SystemTemplate::new();
//! let ball = template.add_free_body("ball");
//! let contact = template
//!     .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
//!     .unwrap();
//! let mut batch = Batch::new(template, 1000).unwrap();
//! for i in 0..batch.len() {
//!     batch.set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1]).unwrap();
//! }
//! let ev = batch.evaluate();
//! // A ball resting on level ground: λz = −m g.
//! let lambda = ev.constraint(contact).unwrap().multipliers_of(0).unwrap();
//! assert!((lambda[2] + 9.81).abs() < 1e-12);
//! ```

#![warn(missing_docs)]
// Library code returns typed errors; `unwrap`/`expect` are for tests only.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod backend;
pub mod batch;
#[cfg(feature = "cli")]
pub mod cli;
pub mod constraints;
pub mod contact;
pub mod cpu;
pub mod custom;
pub mod env;
pub mod error;
pub mod evaluation;
#[cfg(feature = "golden")]
pub mod golden;
pub mod gpu;
pub mod math;
pub mod model;
pub mod motion;
pub mod render;
pub mod resources;
pub mod sample;
pub mod scenarios;
pub mod step;

pub use error::{Error, Result};

/// The crate's version (what `simbatch --version` and Python's `simbatch.__version__` say).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The names most programs need.
pub mod prelude {
    pub use crate::backend::{Backend, Evaluator, Stepper};
    pub use crate::batch::InstanceState;
    pub use crate::batch::{Batch, status};
    pub use crate::constraints::{
        Constraint, PointOnPlaneContact, PointToGround, RowLevel, SphereOnPlaneContact,
    };
    pub use crate::cpu::evaluate::InstanceSystem;
    pub use crate::error::{Error, Result};
    pub use crate::evaluation::{ConstraintEvaluation, Evaluation, OutputStores, Outputs};
    pub use crate::gpu::{GpuDevice, GpuEvaluator, GpuOptions, GpuStepper, Precision};
    pub use crate::model::{Baumgarte, BodyId, BodyKind, ConstraintId, GROUND, SystemTemplate};
    pub use crate::step::{Integrator, Stabilization, StepOptions, StepReport};
}
