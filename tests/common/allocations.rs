//! The test binary's allocator: the system's, counting each thread's allocations, so a test can
//! say what a call allocates on its thread ([`allocations`]) — none of another test's, which
//! run on threads of their own. Counting is a thread-local `Cell` update an allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use simbatch::env::{StepOut, VectorEnv};

/// The system allocator, counting this thread's allocations (count, bytes).
struct Counting;

thread_local! {
    static ALLOCATED: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

fn count(bytes: usize) {
    // `try_with`: a thread being torn down has no counter left; its allocations are not ours.
    let _ = ALLOCATED.try_with(|c| {
        let (n, b) = c.get();
        c.set((n + 1, b + bytes as u64));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; counting touches only a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// This thread's allocations (count, bytes) while `f` runs.
pub fn allocations(f: impl FnOnce()) -> (u64, u64) {
    let (n0, b0) = ALLOCATED.with(Cell::get);
    f();
    let (n1, b1) = ALLOCATED.with(Cell::get);
    (n1 - n0, b1 - b0)
}

/// This thread's allocations (count, bytes) in one `env.step`, averaged over three steps after
/// three of warm-up (pipelines, buffers and scratch; columns that every environment sets alike,
/// shared again between steps, keep their room from their second expansion on), after a reset
/// with `seed`, with actions that differ between environments as a policy's do (equal ones
/// would make a driven plate's law column uniform). Every observation is finite; the flags of
/// the last step are returned with the count.
pub fn env_step_allocations(env: &mut VectorEnv, seed: u64) -> ((u64, u64), Vec<u32>) {
    let n = env.len();
    let (od, ad) = (env.spec().observation.dim(), env.spec().action.dim());
    let mut obs = vec![0.0f32; n * od];
    env.reset(Some(seed), None, &mut obs).unwrap();
    let actions: Vec<f32> = (0..n * ad).map(|j| 0.05 * (j % 7) as f32 - 0.15).collect();
    let mut reward = vec![0.0f32; n];
    let (mut terminated, mut truncated) = (vec![false; n], vec![false; n]);
    let mut flags = vec![0u32; n];
    let mut step = |env: &mut VectorEnv| {
        let out = StepOut {
            obs: &mut obs,
            reward: &mut reward,
            terminated: &mut terminated,
            truncated: &mut truncated,
            final_obs: None,
            flags: Some(&mut flags),
        };
        env.step(&actions, out).unwrap();
    };
    for _ in 0..3 {
        step(env);
    }
    let counted = allocations(|| {
        for _ in 0..3 {
            step(env);
        }
    });
    assert!(obs.iter().all(|x| x.is_finite()));
    ((counted.0 / 3, counted.1 / 3), flags)
}
