//! Working buffers a thread keeps from one call to the next.
//!
//! A lane call's large buffers — the derivative's [`Scratch`] (some 28 KiB of lane arrays) and
//! stepping's stage arrays (18 KiB) — were allocated, built on the stack and copied to the heap
//! at every evaluation or stepping call, then freed. On a batch of a few instances that was most
//! of a call: on the 2-core AMD EPYC (Zen 3) VM an every-output evaluation of four rolling
//! spheres took 3.7–4.5 µs, the kernel itself some 0.4, and about half of the samples fell in
//! building, copying and freeing the scratch; kept, the call takes 2.2–2.6 µs
//! (`docs/performance-log.md`, 2026-12-07). A [`Kept`] buffer comes from its thread's spare when
//! there is one and goes back to it when dropped, so a thread that calls again (a
//! reinforcement-learning loop stepping its batch, a study evaluating one) builds its buffers
//! once, and keeps their 46 KiB until it ends. A thread keeps at most one spare of each kind;
//! one more buffer in use at a time on the same thread (a rayon job that steals another) is
//! built anew, and of the two the one dropped last stays.
//!
//! Reuse changes no result: every entry a call reads in these buffers it has written first in
//! the same call (the buffers' own invariant, which chunks of one call already rely on when
//! they hand the buffers on), and what a call takes for granted without writing it is set again
//! when a spare is taken ([`Keep::renew`]). `tests/cpu/determinism.rs` holds it: batches
//! evaluated and stepped after other templates have used the thread's spares give the bits they
//! give on a fresh thread.

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::thread::LocalKey;

use super::step::Stages;
use super::{MAX_BODIES, MAX_Y, Scratch};
use crate::constraints::BodyLanes;
use crate::math::lanes::splat;

/// A buffer kind that threads keep a spare of.
pub(crate) trait Keep: Sized + 'static {
    /// This kind's spare on the current thread.
    fn spare() -> &'static LocalKey<Cell<Option<Box<Self>>>>;

    /// A new buffer.
    fn fresh() -> Box<Self>;

    /// Sets again, in a spare about to be reused, what calls read without writing.
    fn renew(&mut self) {}
}

/// A buffer taken from its thread's spare (or built, when there is none) that goes back to the
/// spare of the thread that drops it.
pub(crate) struct Kept<T: Keep>(ManuallyDrop<Box<T>>);

impl<T: Keep> Kept<T> {
    /// The current thread's spare, renewed, or a fresh buffer.
    pub(crate) fn take() -> Self {
        // `try_with` fails only while the thread is being torn down: then a fresh one.
        let spare = T::spare().try_with(Cell::take).ok().flatten();
        let buffer = match spare {
            Some(mut buffer) => {
                buffer.renew();
                buffer
            }
            None => T::fresh(),
        };
        Self(ManuallyDrop::new(buffer))
    }
}

impl<T: Keep> Deref for Kept<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Keep> DerefMut for Kept<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Keep> Drop for Kept<T> {
    fn drop(&mut self) {
        // SAFETY: `self.0` is taken once, here, and never used again: `self` is being dropped.
        let buffer = unsafe { ManuallyDrop::take(&mut self.0) };
        // While the thread is being torn down the slot is gone: the buffer is freed with the
        // closure that would have kept it. A spare already there is freed by `set`.
        let _ = T::spare().try_with(move |spare| spare.set(Some(buffer)));
    }
}

thread_local! {
    /// This thread's spare [`Scratch`] (this module).
    static SPARE_SCRATCH: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

impl Keep for Scratch {
    fn spare() -> &'static LocalKey<Cell<Option<Box<Self>>>> {
        &SPARE_SCRATCH
    }

    fn fresh() -> Box<Self> {
        Self::new()
    }

    /// The kinematics as [`new`](Self::new) sets them: Ground's entry is read and never
    /// written (every other body's is written by each derivative before it is read).
    fn renew(&mut self) {
        self.kin = [BodyLanes::ground(); MAX_BODIES];
    }
}

thread_local! {
    /// This thread's spare [`Stages`] (this module).
    static SPARE_STAGES: Cell<Option<Box<Stages>>> = const { Cell::new(None) };
}

/// A step writes each stage's first `ny` values before it reads them and reads no others, so
/// a spare needs nothing set again.
impl Keep for Stages {
    fn spare() -> &'static LocalKey<Cell<Option<Box<Self>>>> {
        &SPARE_STAGES
    }

    fn fresh() -> Box<Self> {
        Box::new(Stages {
            k: [[splat(0.0); MAX_Y]; 5],
            stage: [splat(0.0); MAX_Y],
            third_order: [splat(0.0); MAX_Y],
        })
    }
}
