//! The GPU test suite, one binary: evaluation against the CPU and Simbody's golden files, the
//! fused stepping kernels, and the environments on the GPU. With `CI=true` a missing adapter
//! fails every test (CI installs lavapipe); elsewhere they say so and pass.
//!
//! Run one module with `cargo test --release --test gpu step::`.

#[path = "../common/mod.rs"]
mod common;

mod check;
mod contact_laws;
mod contact_laws_general;
mod env;
mod evaluation;
mod event_studies;
mod events;
mod events_bilateral;
mod events_closed_form;
mod events_general;
mod events_pairs;
mod host_copies;
mod output_order;
mod pipeline_cache;
mod shaders;
mod step;
