//! The CPU half of a stepping call: the lane path (`cpu::lanes`) for every integrator on the
//! templates it takes, the reference path (`cpu::integrate`) for everything else. The backend's
//! `Stepper` is the public way in.

use crate::batch::{Batch, InstanceState};
use crate::cpu::{integrate, lanes};
use crate::error::Result;
use crate::step::{Goal, StepOptions, StepReport};

/// Runs `goal` on every instance of `batch` not halted; `step_sizes` holds each instance's step
/// size (RKM's control, or the fixed step) and is updated. See `integrate::run_goal`. With
/// `use_lanes` false every instance takes the reference path.
pub(crate) fn run_goal(
    batch: &mut Batch,
    options: &StepOptions,
    goal: Goal,
    step_sizes: &mut [f64],
    violation: f64,
    use_lanes: bool,
) -> Result<StepReport> {
    let plan = use_lanes.then(|| lanes::step::plan_for(batch)).flatten();
    match plan {
        Some(plan) => lanes::step::run_goal(batch, &plan, options, goal, step_sizes, violation),
        None => integrate::run_goal(batch, options, goal, step_sizes, violation),
    }
}

/// Bytes a stepping call on `batch` allocates besides the batch's columns (outcome buffers;
/// per-thread scratch is not counted): per block on the lane path, per instance on the
/// reference path.
pub(crate) fn call_bytes(batch: &Batch, use_lanes: bool) -> usize {
    let plan = lanes::step::plan_for(batch).filter(|_| use_lanes);
    if let Some(plan) = plan {
        lanes::step::call_bytes(batch.len(), plan.ny())
    } else {
        batch.len() * InstanceState::bytes_for(batch)
    }
}
