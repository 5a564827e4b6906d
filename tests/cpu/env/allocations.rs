//! What a CPU environment step costs the host's allocator: no allocation per environment and
//! no buffer of environments (one of `num_envs × 23` values built at every step was 3 MB a
//! step at 8 192 environments of `BallOnPlate-v0`, found by the GPU suite's count of the GPU
//! path). Only the stepper's bookkeeping per block of 256 instances grows with the batch (a
//! dozen small vectors: slices into the batch's columns, the block's chunk; 1–3 KiB a block,
//! next to the block's hundreds of microseconds of RK4 substeps). Counted by the binary's allocator on the one thread of a one-thread
//! rayon pool, on which the whole step runs.

use crate::common::allocations::env_step_allocations;

use simbatch::env::ball_on_plate::{BallOnPlate, BallOnPlateConfig};
use simbatch::env::brick_push::{BrickPush, BrickPushConfig};
use simbatch::env::{EnvOptions, Task, VectorEnv};

/// A built-in task, built afresh for each batch size.
type MakeTask = dyn Fn() -> Box<dyn Task> + Sync;

/// Allocations (count, bytes) of one step for `n` environments of `task()`
/// ([`env_step_allocations`]); no environment is flagged.
fn per_step(task: &MakeTask, n: usize) -> (u64, u64) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| {
        let mut env = VectorEnv::new(task(), n, EnvOptions::default()).unwrap();
        let (counted, flags) = env_step_allocations(&mut env, 11);
        assert!(flags.iter().all(|f| *f == 0), "no environment flagged");
        counted
    })
}

#[test]
fn cpu_environment_steps_allocate_independently_of_num_envs() {
    let tasks: [(&str, &MakeTask); 2] = [
        ("BallOnPlate-v0", &|| {
            Box::new(BallOnPlate::new(BallOnPlateConfig::default()).unwrap())
        }),
        ("BrickPush-v0", &|| {
            Box::new(BrickPush::new(BrickPushConfig::default()).unwrap())
        }),
    ];
    for (name, task) in tasks {
        let (small, large) = (per_step(task, 256), per_step(task, 8_192));
        eprintln!(
            "{name}: allocations per step {} ({} B) at N = 256, {} ({} B) at N = 8192",
            small.0, small.1, large.0, large.1
        );
        // The stepper's bookkeeping a block of 256 instances (each block's store cuts the
        // batch's columns into pieces, and its chunk is built for it: a dozen small vectors,
        // 1–3 KiB): up to 16 allocations and 3 KiB a block more. One allocation an environment
        // would be 7 936 more, the law rows of `BallOnPlate-v0` built at every step 2.9 MB;
        // a single f64 an environment (63 KiB) would still pass.
        let blocks_more: u64 = (8_192 - 256) / 256;
        assert!(
            large.0 <= small.0 + 16 * blocks_more,
            "{name}: {large:?} against {small:?}"
        );
        assert!(
            large.1 <= small.1 + 3 * 1024 * blocks_more,
            "{name}: {large:?} against {small:?}"
        );
    }
}
