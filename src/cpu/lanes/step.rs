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

use super::kept::Kept;
use super::{ALL_LANES, Chunk, LanePlan, MAX_Y, Scratch, adaptive, all_finite};
use crate::batch::{Batch, StateRows, split_at_bounds, status};
use crate::cpu::integrate::{Workspace, baumgarte_mode, derivative, project};
use crate::error::Result;
use crate::math::lanes::{
    LANES, Lane, LaneVec3, bits, normalize_quaternion, quaternion_rate, scatter_fixed, splat,
    values,
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

impl Outcome {
    /// A placeholder for a chunk's outcome, overwritten by the chunk's call.
    fn empty() -> Self {
        Self {
            time: splat(0.0),
            flags: [0; LANES],
            report: std::array::from_fn(|_| StepReport::default()),
            step_size: [0.0; LANES],
        }
    }
}

/// Chunks in a block of a stepping call on one thread.
const CHUNKS_ALONE: usize = 64;

/// Most chunks per thread in a block of a stepping call on several threads: more than alone,
/// since each block costs two forks and joins (its run, then its store), each a wake-up of
/// the pool's threads (two threads, one step of Euler a call on 10⁵ instances: 64 chunks a
/// thread 9.5e6 instance-steps/s, 256 1.0e7, 1 024 1.1–1.3e7 — with the store then still on
/// one thread; 16 steps a call 2.9e7 → 3.2e7 from 64 to 256). A block's call buffers are
/// about 180 bytes an instance of the block, and a block above the least is at most a quarter
/// of the batch: some 45 bytes an instance of the batch at most. A smaller batch's blocks stay
/// smaller ([`block_size`]).
const CHUNKS_PER_THREAD: usize = 1024;

/// Pieces per thread a block of a parallel stepping call is cut into: each builds a chunk
/// once; more than one so that a thread that finishes early takes over work.
const PIECES_PER_THREAD: usize = 4;

/// Buffers a parallel stepping call's pieces take and give back, so that each thread builds
/// about one set per call rather than one per piece.
#[derive(Default)]
struct Spares(std::sync::Mutex<Vec<Buffers>>);

impl Spares {
    /// A set given back earlier in the call, or a new one.
    fn take(&self) -> Buffers {
        let kept = self.0.lock().ok().and_then(|mut kept| kept.pop());
        kept.unwrap_or_else(Buffers::new)
    }

    /// Keeps `buffers` for a later piece.
    fn give(&self, buffers: Buffers) {
        if let Ok(mut kept) = self.0.lock() {
            kept.push(buffers);
        }
    }
}

/// Instances per block of a stepping call on a batch of `len`: [`CHUNKS_ALONE`] chunks of
/// four on one thread; on several a quarter of the batch, but at least [`CHUNKS_ALONE`] and
/// at most [`CHUNKS_PER_THREAD`] chunks per rayon thread, so that a call's buffers stay a
/// small part of what the batch holds. A call runs the blocks one after the other (each in
/// parallel over its chunks) and stores a block's states (in parallel over the same pieces)
/// before the next starts, so its outcome buffer grows with the thread count, not the batch.
fn block_size(len: usize) -> usize {
    match rayon::current_num_threads() {
        0 | 1 => CHUNKS_ALONE * LANES,
        threads => {
            let quarter = len / 4 / LANES * LANES;
            quarter.clamp(
                CHUNKS_ALONE * LANES * threads,
                CHUNKS_PER_THREAD * LANES * threads,
            )
        }
    }
}

/// Bytes a lane stepping call of a batch of `len` instances of `ny` state values allocates
/// besides the batch: one block's outcomes, states and instance list (per-thread scratch is
/// not counted).
pub(crate) fn call_bytes(len: usize, ny: usize) -> usize {
    let block = len.min(block_size(len));
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
    let block = block_size(batch.len());
    let mut active: Vec<usize> = Vec::with_capacity(batch.len().min(block));
    let mut stepped: Vec<bool> = Vec::new();
    let mut outcomes: Vec<Outcome> = Vec::new();
    // Each chunk's states, `ny` lane values a chunk: written in place, not returned in its
    // outcome (a `MAX_Y`-lane array moved per chunk was most of a one-step call's overhead).
    let mut states: Vec<Lane> = Vec::new();
    // On the caller's thread, one set of buffers for the whole call. The state buffers live
    // on the stack (here, or in each rayon job's state): boxed, RK4 ran 3–5 % slower (their
    // heap address against the stages', presumably).
    let mut own_states = States::new();
    let mut own = sequential.then(Buffers::new);
    let threads = rayon::current_num_threads().max(1);
    let spares = Spares::default();
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
        let width = ny.max(1);
        // Chunks a piece of the call holds, for its run and its store alike.
        let per = if let Some(buffers) = own.as_mut() {
            // On the caller's thread: no hand-over to the pool and wait (the same outcomes).
            let mut chunk = Chunk::new(b, plan);
            let states = &mut own_states;
            outcomes.clear();
            outcomes.extend(groups.map(|(group, y)| run(&mut chunk, buffers, states, group, y)));
            outcomes.len().max(1)
        } else {
            // A few pieces of consecutive chunks per thread, each with one chunk and buffers
            // from the call's spares: a group's call only reads what it wrote or loaded. Not
            // rayon's own splitting with a chunk and buffers built for each piece it splits
            // off: with one step a call, building them (some 60 KiB zeroed and copied) took
            // most of the time, and two threads stepped half as fast as one.
            let count = active.len().div_ceil(LANES);
            let per = count.div_ceil(PIECES_PER_THREAD * threads).max(1);
            outcomes.clear();
            outcomes.resize_with(count, Outcome::empty);
            active
                .par_chunks(LANES * per)
                .zip(states.par_chunks_mut(width * per))
                .zip(outcomes.par_chunks_mut(per))
                .for_each(|((ids, ys), outs)| {
                    let mut chunk = Chunk::new(b, plan);
                    let mut piece_states = States::new();
                    let mut buffers = spares.take();
                    let groups = ids.chunks(LANES).zip(ys.chunks_mut(width));
                    for ((group, y), out) in groups.zip(outs) {
                        *out = run(&mut chunk, &mut buffers, &mut piece_states, group, y);
                    }
                    spares.give(buffers);
                });
            per
        };
        if active.is_empty() {
            continue;
        }
        // The states go back piece by piece, each piece's rows on the thread that takes it
        // (on several threads, the others waited while one stored a block: a sixth of a
        // one-step call's samples on two threads, and the other thread idle a third of it).
        let bounds: Vec<usize> = active
            .iter()
            .step_by(LANES * per)
            .copied()
            .chain([end])
            .collect();
        let sizes = split_at_bounds(step_sizes, 1, &bounds);
        let pieces = batch.state_rows_mut(&bounds);
        let integrator = &options.integrator;
        let store = |((mut rows, sizes), ((ids, ys), outs)): Piece<'_, '_>| {
            store_piece(&mut rows, sizes, ids, ys, width, outs, integrator)
        };
        let (ids, ys) = (active.as_slice(), states.as_slice());
        let stored = if own.is_some() {
            let parts = ids.chunks(LANES * per).zip(ys.chunks(width * per));
            let parts = parts.zip(outcomes.chunks(per));
            let work = pieces.into_iter().zip(sizes).zip(parts);
            work.map(store).fold(StepReport::default(), add_reports)
        } else {
            let parts = ids.par_chunks(LANES * per).zip(ys.par_chunks(width * per));
            let parts = parts.zip(outcomes.par_chunks(per));
            let work = pieces.into_par_iter().zip(sizes).zip(parts);
            work.map(store).reduce(StepReport::default, add_reports)
        };
        report.add(&stored);
        if batch.has_driven_bodies() {
            // The block's stepped instances (`active`, increasing), as a mask of the block.
            stepped.clear();
            stepped.resize(end - start, false);
            for &i in &active {
                stepped[i - start] = true;
            }
            batch.refresh_driven_span(start, end - start, |k| stepped[k]);
        }
    }
    batch.touch_state_columns();
    Ok(report)
}

/// One piece of a block's store: its rows of the batch and of the step sizes, with its
/// instances, states and outcomes.
type Piece<'r, 'a> = (
    (StateRows<'r>, &'r mut [f64]),
    ((&'a [usize], &'a [Lane]), &'a [Outcome]),
);

/// The sum of two parts of a call's report.
fn add_reports(mut a: StepReport, b: StepReport) -> StepReport {
    a.add(&b);
    a
}

/// Stores a piece's chunks — instances `ids`, four a chunk, their states `states` (`width`
/// lane values a chunk) and outcomes — into its rows of the batch (`rows`) and of the step
/// sizes (`sizes`, from the same first instance), and returns their report. A chunk of four
/// consecutive instances goes a state column at a time by one transpose ([`scatter_fixed`],
/// the width a constant); any other lane by lane: what [`Batch::store_values`] stores, except
/// for the driven bodies' refresh, which the caller makes.
fn store_piece(
    rows: &mut StateRows<'_>,
    sizes: &mut [f64],
    ids: &[usize],
    states: &[Lane],
    width: usize,
    outcomes: &[Outcome],
    integrator: &Integrator,
) -> StepReport {
    let mut report = StepReport::default();
    let first = rows.first;
    for ((group, y), outcome) in ids.chunks(LANES).zip(states.chunks(width)).zip(outcomes) {
        let consecutive = group.len() == LANES && group[LANES - 1] == group[0] + LANES - 1;
        if consecutive {
            let at = group[0] - first;
            for c in &mut rows.columns {
                let y = &y[c.at..];
                match c.width {
                    7 => scatter_fixed::<7>(c.rows, 0, at, &y[..7]),
                    6 => scatter_fixed::<6>(c.rows, 0, at, &y[..6]),
                    2 => scatter_fixed::<2>(c.rows, 0, at, &y[..2]),
                    w => {
                        for (l, row) in c.rows[at * w..(at + LANES) * w].chunks_mut(w).enumerate() {
                            for (v, x) in row.iter_mut().zip(y) {
                                *v = x.extract(l);
                            }
                        }
                    }
                }
            }
            rows.time[at..at + LANES].copy_from_slice(&values(outcome.time));
        } else {
            for (l, &i) in group.iter().enumerate() {
                let at = i - first;
                for c in &mut rows.columns {
                    let row = &mut c.rows[at * c.width..(at + 1) * c.width];
                    for (v, x) in row.iter_mut().zip(&y[c.at..]) {
                        *v = x.extract(l);
                    }
                }
                rows.time[at] = outcome.time.extract(l);
            }
        }
        for (l, &i) in group.iter().enumerate() {
            let at = i - first;
            rows.status[at] |= outcome.flags[l];
            report.add(&outcome.report[l]);
            if outcome.flags[l] != 0 {
                report.flagged += 1;
            }
            // RKM's control carries over to the next call; a fixed step is only recorded
            // (as on the reference path).
            match integrator {
                Integrator::RungeKuttaMerson { .. } => sizes[at] = outcome.step_size[l],
                _ if sizes[at] <= 0.0 => sizes[at] = outcome.step_size[l],
                _ => {}
            }
        }
    }
    report
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
    /// The thread's kept stage arrays ([`kept`](super::kept)).
    pub(super) stages: Kept<Stages>,
    pub(super) work: Workspace,
    /// The thread's kept scratch.
    pub(super) scratch: Kept<Scratch>,
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
            stages: Kept::take(),
            work: Workspace::new(),
            scratch: Kept::take(),
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
