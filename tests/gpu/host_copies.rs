//! What a GPU step costs the host (issue 20): the state comes back through a staging buffer
//! into vectors the stepper keeps and from there straight into the batch's columns, and
//! uploads are converted straight into wgpu's staging memory, so the host allocations of a step
//! do not grow with the number of instances. Counted by the binary's allocator
//! (`common::allocations`), per thread: the tests here run their steps on one thread (a
//! one-thread rayon pool for the environments), so every allocation of the step is seen and
//! none of another test's. The CPU path's count is `tests/cpu/env/allocations.rs`.

use crate::common;
use crate::common::allocations::{allocations, env_step_allocations};

use simbatch::env::ball_on_plate::{BallOnPlate, BallOnPlateConfig};
use simbatch::env::{AutoReset, VectorEnv};
use simbatch::prelude::*;

/// Host allocations per step at a small and a large batch must be the same but for a fixed
/// allowance: wgpu's own bookkeeping varies a little between submits, and a readback of more
/// than 1 MiB takes up to `STAGING_ROUNDS` rounds through a staging buffer a quarter of its
/// size where a small one's takes one (each round a submit, a map and a wait: about 30 of
/// wgpu's allocations, 8 KiB). A per-instance allocation would show as thousands.
fn assert_independent_of_n(what: &str, small: (u64, u64), large: (u64, u64), n: usize) {
    eprintln!(
        "{what}: host allocations per step {} ({} B) at N = 256, {} ({} B) at N = {n}",
        small.0, small.1, large.0, large.1
    );
    let rounds = simbatch::gpu::buffers::STAGING_ROUNDS - 1;
    assert!(
        large.0 <= small.0 + 16 + 32 * rounds,
        "{what}: {} allocations per step at N = {n} against {} at 256",
        large.0,
        small.0
    );
    assert!(
        large.1 <= small.1 + (16 + 10 * rounds) * 1024,
        "{what}: {} bytes allocated per step at N = {n} against {} at 256",
        large.1,
        small.1
    );
}

/// The stepper on the GPU: after a warm-up call (pipelines, buffers, scratch), a call of four
/// RK4 steps allocates on the host the same at N = 256 and N = 16 384.
#[test]
fn gpu_steps_allocate_on_the_host_independently_of_the_batch_size() {
    let Some(device) = common::device() else {
        return;
    };
    let options = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let per_step = |n: usize| {
        let mut batch = simbatch::scenarios::rolling_balls(n).unwrap();
        let mut stepper = Stepper::on_gpu(options, device.clone(), Precision::F32).unwrap();
        stepper.step(&mut batch, 4).unwrap();
        stepper.step(&mut batch, 4).unwrap();
        let counted = allocations(|| {
            for _ in 0..3 {
                stepper.step(&mut batch, 4).unwrap();
            }
        });
        // The state stayed on the device: no column went up again (only the carry's reset).
        let gpu = stepper.evaluator().gpu_evaluator().unwrap();
        assert_eq!(gpu.last_upload_bytes(), 0);
        assert!(batch.status().iter().all(|s| *s == status::OK));
        assert!((batch.time()[n - 1] - 0.02).abs() < 1e-12);
        (counted.0 / 3, counted.1 / 3)
    };
    let n = 16_384;
    assert_independent_of_n("Stepper::step (GPU)", per_step(256), per_step(n), n);
}

/// A vector environment on the GPU: actions in, observations, rewards and flags out into the
/// caller's arrays; the step's host allocations do not grow with the number of environments.
#[test]
fn gpu_environment_steps_allocate_on_the_host_independently_of_num_envs() {
    let Some(device) = common::device() else {
        return;
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let per_step = |n: usize| {
        pool.install(|| {
            let task = Box::new(BallOnPlate::new(BallOnPlateConfig::default()).unwrap());
            let mut env =
                VectorEnv::on_device(task, n, AutoReset::NextStep, device.clone(), Precision::F32)
                    .unwrap();
            env_step_allocations(&mut env, 7).0
        })
    };
    let n = 8_192;
    assert_independent_of_n("VectorEnv::step (GPU)", per_step(256), per_step(n), n);
}
