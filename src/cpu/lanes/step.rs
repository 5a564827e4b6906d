//! Time stepping on lanes: semi-implicit Euler and RK4 here, Simbody's adaptive RKM in
//! [`adaptive`](super::adaptive) (each lane with its own step size), with Simbody's projection
//! or Baumgarte terms, four instances at a time — the twin of `cpu::integrate`.
//!
//! The update formulas are the reference's, in the same order, on [`Lane`] values. A lane whose
//! derivative the lane formulas cannot answer gets the reference derivative for that stage;
//! projection, when a lane needs it, runs the reference projection on that lane alone (rare:
//! only when an error exceeds the tolerance). A lane that fails stops at its last good state and
//! is flagged, as on the reference path; the other lanes go on.

// Index loops over rows, lanes and slots mirror the reference formulas they are held against.
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;
use simba::simd::{SimdPartialOrd, SimdValue};

use super::{ALL_LANES, Chunk, LanePlan, MAX_Y, Scratch, adaptive, all_finite};
use crate::batch::{Batch, status};
use crate::cpu::integrate::{Workspace, baumgarte_mode, derivative, project};
use crate::error::Result;
use crate::math::lanes::{
    LANES, Lane, LaneVec3, bits, normalize_quaternion, quaternion_rate, splat,
};
use crate::step::{
    Goal, Integrator, Stabilization, StepOptions, StepReport, duration_left_negligible,
};

/// The lane plan for stepping `batch` (with any integrator), or `None` when the reference path
/// must run it (a template the lane path does not take).
pub(crate) fn plan_for(batch: &Batch) -> Option<LanePlan> {
    LanePlan::new(batch.template())
}

/// What one chunk's call produced, lane by lane (its states go to the block's state buffer).
pub(super) struct Outcome {
    pub(super) time: Lane,
    pub(super) flags: [u32; LANES],
    pub(super) report: [StepReport; LANES],
    /// Each lane's step size after the call (RKM's control; the fixed step otherwise).
    pub(super) step_size: [f64; LANES],
}

/// Chunks per thread in a block of a stepping call.
const CHUNKS_PER_THREAD: usize = 64;

/// Instances per block of a stepping call: 64 chunks of four per rayon thread. A call runs the
/// blocks one after the other (each in parallel over its chunks) and stores a block's states
/// before the next starts, so its outcome buffer grows with the thread count, not the batch.
fn block_size() -> usize {
    CHUNKS_PER_THREAD * LANES * rayon::current_num_threads().max(1)
}

/// Bytes a lane stepping call of a batch of `len` instances of `ny` state values allocates
/// besides the batch: one block's outcomes, states and instance list (per-thread scratch is
/// not counted).
pub(crate) fn call_bytes(len: usize, ny: usize) -> usize {
    let block = len.min(block_size());
    let chunk = std::mem::size_of::<Outcome>() + ny * std::mem::size_of::<Lane>();
    block.div_ceil(LANES) * chunk + block * std::mem::size_of::<usize>()
}

/// Runs `goal` on every instance not halted, in chunks of [`LANES`] (rayon over chunks, one
/// block of instances at a time), and stores the states: `cpu::integrate::run_goal` for the
/// fixed-step integrators here, RKM in `adaptive`. An instance's result does not depend on its
/// chunk or block.
pub(crate) fn run_goal(
    batch: &mut Batch,
    plan: &LanePlan,
    options: &StepOptions,
    goal: Goal,
    step_sizes: &mut [f64],
    violation: f64,
) -> Result<StepReport> {
    // One thread in the pool, or one chunk: the call runs on the caller's thread, without
    // handing each block to the pool and waiting for it (from outside the pool, a wake-up and
    // a wait per block of 256 instances: Euler 1.5e7 → 1.9e7 steps/s on one thread).
    let sequential = rayon::current_num_threads() == 1 || batch.len() <= LANES;
    let ny = plan.ny();
    let mut report = StepReport::default();
    let mut values = [0.0; MAX_Y];
    let block = block_size();
    let mut active: Vec<usize> = Vec::with_capacity(batch.len().min(block));
    let mut outcomes: Vec<Outcome> = Vec::new();
    // Each chunk's states, `ny` lane values a chunk: written in place, not returned in its
    // outcome (a `MAX_Y`-lane array moved per chunk was most of a one-step call's overhead).
    let mut states: Vec<Lane> = Vec::new();
    // On the caller's thread, one set of buffers for the whole call. The state buffers live
    // on the stack (here, or in each rayon job's state): boxed, RK4 ran 3–5 % slower (their
    // heap address against the stages', presumably).
    let mut own_states = States::new();
    let mut own = sequential.then(Buffers::new);
    for start in (0..batch.len()).step_by(block) {
        let end = (start + block).min(batch.len());
        active.clear();
        active.extend((start..end).filter(|&i| batch.status()[i] & status::HALTED == 0));
        states.resize(active.len().div_ceil(LANES) * ny, splat(0.0));
        let b: &Batch = batch;
        let run = |chunk: &mut Chunk<'_>,
                   buffers: &mut Buffers,
                   own_states: &mut States,
                   group: &[usize],
                   y_out: &mut [Lane]| {
            let instances = std::array::from_fn(|l| group[l.min(group.len() - 1)]);
            chunk.load(instances);
            match options.integrator {
                Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step } => advance(
                    chunk, options, goal, step, violation, buffers, own_states, y_out,
                ),
                Integrator::RungeKuttaMerson { .. } => {
                    let sizes = instances.map(|i| step_sizes[i]);
                    adaptive::advance(
                        chunk, options, goal, sizes, violation, buffers, own_states, y_out,
                    )
                }
            }
        };
        let groups = active.chunks(LANES).zip(states.chunks_mut(ny.max(1)));
        if let Some(buffers) = own.as_mut() {
            // On the caller's thread: no hand-over to the pool and wait (the same outcomes).
            let mut chunk = Chunk::new(b, plan);
            let states = &mut own_states;
            outcomes.clear();
            outcomes.extend(groups.map(|(group, y)| run(&mut chunk, buffers, states, group, y)));
        } else {
            // Buffers and chunk per rayon job, not per group of instances: a group's call
            // only reads what it wrote or loaded.
            active
                .par_chunks(LANES)
                .zip(states.par_chunks_mut(ny.max(1)))
                .map_init(
                    || (Chunk::new(b, plan), (Buffers::new(), States::new())),
                    |(chunk, (buffers, states)), (group, y)| run(chunk, buffers, states, group, y),
                )
                .collect_into_vec(&mut outcomes);
        }
        let chunks = active.chunks(LANES).zip(states.chunks(ny.max(1)));
        for ((chunk, y), outcome) in chunks.zip(&outcomes) {
            for (l, &i) in chunk.iter().enumerate() {
                for (v, x) in values[..ny].iter_mut().zip(y) {
                    *v = x.extract(l);
                }
                batch.store_values(i, outcome.time.extract(l), &values[..ny], outcome.flags[l]);
                report.add(&outcome.report[l]);
                if outcome.flags[l] != 0 {
                    report.flagged += 1;
                }
                // RKM's control carries over to the next call; a fixed step is only recorded
                // (as on the reference path).
                match options.integrator {
                    Integrator::RungeKuttaMerson { .. } => step_sizes[i] = outcome.step_size[l],
                    _ if step_sizes[i] <= 0.0 => step_sizes[i] = outcome.step_size[l],
                    _ => {}
                }
            }
        }
    }
    batch.touch_state_columns();
    Ok(report)
}

/// `ẏ` at `y` for the lanes in `active`, the reference derivative where the lane formulas
/// cannot answer; returns the lanes with a derivative.
#[allow(clippy::too_many_arguments)]
pub(super) fn derivative_or_reference(
    chunk: &Chunk<'_>,
    y: &[Lane],
    time: Lane,
    options: &StepOptions,
    active: u32,
    dy: &mut [Lane],
    work: &mut Workspace,
    scratch: &mut Scratch,
) -> u32 {
    let mut good = chunk.derivative(y, time, baumgarte_mode(options), dy, scratch);
    for l in 0..LANES {
        if active & !good & (1 << l) == 0 {
            continue;
        }
        let state = chunk.instance_state(y, time, l);
        if let Some(d) = derivative(chunk.batch, chunk.instances[l], &state, options, work) {
            for (x, value) in dy.iter_mut().zip(d) {
                x.replace(l, value);
            }
            good |= 1 << l;
        }
    }
    good & active
}

/// Normalises every quaternion of `y` (free bodies' and prescribed poses'); the lanes where
/// all could be and every value is finite (the reference's `normalize_quaternions() &&
/// is_finite()` after a step).
pub(super) fn finish_step(chunk: &Chunk<'_>, y: &mut [Lane]) -> u32 {
    let plan = chunk.plan;
    let mut ok = all_finite(&y[..plan.ny()]);
    // The free bodies' q, then the prescribed bodies' poses: consecutive in the state.
    for body in 0..plan.free + plan.prescribed {
        let q = &mut y[7 * body..7 * body + 4];
        let mut e = [q[0], q[1], q[2], q[3]];
        ok = ok & normalize_quaternion(&mut e);
        q.copy_from_slice(&e);
    }
    bits(ok)
}

/// The stage derivatives and stage states of one step, kept across the steps of a call (RKM
/// uses five derivatives and keeps its third-order solution `ŷ` apart).
pub(super) struct Stages {
    pub(super) k: [[Lane; MAX_Y]; 5],
    pub(super) stage: [Lane; MAX_Y],
    pub(super) third_order: [Lane; MAX_Y],
}

/// Everything a chunk's call works in, reused from chunk to chunk.
pub(super) struct Buffers {
    pub(super) stages: Box<Stages>,
    pub(super) work: Workspace,
    pub(super) scratch: Box<Scratch>,
}

/// A chunk's state and trial state during a call, reused from chunk to chunk rather than
/// zeroed for each (5 KiB of stores per chunk of four; with the state array its outcome used
/// to carry, most of a one-step call's overhead): a chunk writes their first `ny` values
/// before it reads them, and reads no others.
pub(super) struct States {
    pub(super) y: [Lane; MAX_Y],
    pub(super) next: [Lane; MAX_Y],
}

impl States {
    fn new() -> Self {
        Self {
            y: [splat(0.0); MAX_Y],
            next: [splat(0.0); MAX_Y],
        }
    }
}

impl Buffers {
    fn new() -> Self {
        Self {
            stages: Box::new(Stages {
                k: [[splat(0.0); MAX_Y]; 5],
                stage: [splat(0.0); MAX_Y],
                third_order: [splat(0.0); MAX_Y],
            }),
            work: Workspace::new(),
            scratch: Scratch::new(),
        }
    }
}

/// One step of size `h` from `y` into `next`; returns the lanes (of `active`) that made it.
#[allow(clippy::too_many_arguments)]
fn try_step(
    chunk: &Chunk<'_>,
    y: &[Lane; MAX_Y],
    time: Lane,
    h: f64,
    options: &StepOptions,
    active: u32,
    next: &mut [Lane; MAX_Y],
    (stages, work, scratch): (&mut Stages, &mut Workspace, &mut Scratch),
) -> u32 {
    let plan = chunk.plan;
    let Stages { k, stage, .. } = stages;
    let (ny, nq) = (plan.ny(), plan.nq());
    let mut f = |yy: &[Lane], tt: Lane, out: &mut [Lane; MAX_Y], active: u32| {
        derivative_or_reference(chunk, yy, tt, options, active, out, work, scratch)
    };
    let mut good;
    match options.integrator {
        Integrator::SemiImplicitEuler { .. } => {
            let k = &mut k[0];
            good = f(y, time, k, active);
            let hh = splat(h);
            // u first, then q with the new u.
            for j in nq..ny {
                next[j] = y[j] + hh * k[j];
            }
            // Every body's q (free bodies, then prescribed poses, consecutive in the state)
            // with its new velocity (free bodies' u, then prescribed velocities, likewise
            // consecutive), as the reference: a driven body's entries move too, unused, and its
            // law gives its stored pose.
            for body in 0..plan.free + plan.prescribed {
                let q = &y[7 * body..7 * body + 4];
                let u: [Lane; 6] = std::array::from_fn(|k| next[nq + 6 * body + k]);
                let w = LaneVec3::new(u[0], u[1], u[2]);
                let rate = quaternion_rate(&[q[0], q[1], q[2], q[3]], &w);
                for k in 0..4 {
                    next[7 * body + k] = y[7 * body + k] + hh * rate[k];
                }
                for k in 0..3 {
                    next[7 * body + 4 + k] = y[7 * body + 4 + k] + hh * u[3 + k];
                }
            }
        }
        Integrator::Rk4 { .. } => {
            let (half, full) = (splat(h / 2.0), splat(h));
            let t_half = time + splat(h / 2.0);
            good = f(y, time, &mut k[0], active);
            for (step, (from, to)) in [(half, (0, 1)), (half, (1, 2)), (full, (2, 3))] {
                for j in 0..ny {
                    stage[j] = y[j] + step * k[from][j];
                }
                let t = if to == 3 { time + splat(h) } else { t_half };
                good &= f(stage, t, &mut k[to], good);
            }
            let (sixth, two) = (splat(h / 6.0), splat(2.0));
            for j in 0..ny {
                next[j] = y[j] + sixth * (k[0][j] + two * k[1][j] + two * k[2][j] + k[3][j]);
            }
        }
        Integrator::RungeKuttaMerson { .. } => unreachable!("RKM steps in `adaptive::advance`"),
    }
    good & finish_step(chunk, next)
}

/// Advances one chunk by `goal` with the fixed step `step`; its states end in `y_out` (`ny`
/// lane values).
#[allow(clippy::too_many_arguments)]
fn advance(
    chunk: &Chunk<'_>,
    options: &StepOptions,
    goal: Goal,
    step: f64,
    violation: f64,
    buffers: &mut Buffers,
    states: &mut States,
    y_out: &mut [Lane],
) -> Outcome {
    let Buffers {
        stages,
        work,
        scratch,
    } = buffers;
    let States { y, next } = states;
    let mut time = chunk.gather_state_into(y);
    let mut flags = [0u32; LANES];
    let mut report: [StepReport; LANES] = std::array::from_fn(|_| StepReport::default());
    let mut active = ALL_LANES;
    let mut elapsed = 0.0f64;
    let mut accepted = 0usize;
    let fail = |flags: &mut [u32; LANES], lanes: u32, bits_: u32| {
        for (l, f) in flags.iter_mut().enumerate() {
            if lanes & (1 << l) != 0 {
                *f |= bits_;
            }
        }
    };
    while active != 0 {
        let this_h = match goal {
            Goal::Steps(n) if accepted >= n => break,
            Goal::Steps(_) => step,
            Goal::Duration(d) => {
                let left = d - elapsed;
                if duration_left_negligible(left, d, f64::EPSILON) {
                    break;
                }
                step.min(left)
            }
        };
        let buffers = (&mut **stages, &mut *work, &mut **scratch);
        let mut good = try_step(chunk, y, time, this_h, options, active, next, buffers);
        fail(&mut flags, active & !good, status::NONFINITE_STATE);
        let next_time = time + splat(this_h);
        if let Stabilization::Projection { tolerance } = options.stabilization
            && good != 0
        {
            let (perr, verr) = chunk.constraint_errors(next, next_time, scratch);
            let tol = splat(tolerance);
            let over = bits(perr.simd_gt(tol) | verr.simd_gt(tol)) & good;
            for l in 0..LANES {
                if over & (1 << l) == 0 {
                    continue;
                }
                let mut state = chunk.instance_state(next, next_time, l);
                // As the reference: projections count once applied, and a projected state
                // that is not finite stops the instance.
                let projected =
                    project(chunk.batch, chunk.instances[l], &mut state, tolerance, work);
                if let Some(n) = projected {
                    report[l].projections += n;
                }
                match projected {
                    Some(_) if state.is_finite() => {
                        chunk.set_instance_state(next, l, &state);
                    }
                    _ => {
                        good &= !(1 << l);
                        fail(&mut flags, 1 << l, status::NONFINITE_STATE);
                    }
                }
            }
        }
        let keep = crate::math::lanes::LaneMask::from(std::array::from_fn::<bool, LANES, _>(|l| {
            good & (1 << l) != 0
        }));
        for j in 0..chunk.plan.ny() {
            y[j] = next[j].select(keep, y[j]);
        }
        time = next_time.select(keep, time);
        for (l, r) in report.iter_mut().enumerate() {
            if good & (1 << l) != 0 {
                r.steps += 1;
            }
        }
        active = good;
        elapsed += this_h;
        accepted += 1;
    }
    // Off its constraints after the call: flagged, never reported as fine.
    if accepted > 0 && active != 0 {
        let (perr, verr) = chunk.constraint_errors(y, time, scratch);
        for l in 0..LANES {
            let worst = perr.extract(l).max(verr.extract(l));
            if active & (1 << l) != 0 && (worst.is_nan() || worst > violation) {
                flags[l] |= status::CONSTRAINT_VIOLATED;
            }
        }
    }
    y_out.copy_from_slice(&y[..y_out.len()]);
    Outcome {
        time,
        flags,
        report,
        step_size: [step; LANES],
    }
}
