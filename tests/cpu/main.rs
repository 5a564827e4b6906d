//! The CPU test suite, one binary (each test binary links the whole crate, so one binary per
//! suite keeps CI's link time down, as wgpu's tests do): conformance with Simbody and RBDL,
//! time stepping, assembly, custom constraints, motion laws, environments, validation,
//! unilateral contact,
//! shaders (naga) and the `simbatch` command. A few tests here also run on a GPU when one is
//! found (`common::device`); the GPU suite proper is `tests/gpu/`.
//!
//! Run one module with `cargo test --release --test cpu stepping::`.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod assembly;
mod cli;
mod custom;
mod custom_sphere;
mod determinism;
mod env;
mod folding;
mod generated_solve;
mod golden;
mod lane_evaluation;
mod lanes;
mod motion;
mod reference_cases;
mod render;
mod shaders;
mod stepping;
mod trajectories;
mod unilateral;
mod validation;
