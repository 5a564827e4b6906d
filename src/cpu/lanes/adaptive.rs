//! Simbody's adaptive Runge–Kutta–Merson on lanes: the twin of `cpu::integrate`'s RKM, four
//! instances at a time, each lane with its own step size.
//!
//! Every pass of the loop makes one attempt on every lane that is not done: the five stages run
//! on lanes with each lane's own `h` (and stage times), and each lane then takes the reference's
//! decisions on its own error — reject and shrink, accept and grow, refuse a step whose
//! constraint error is too large to project, project, fail — in the reference's order and with
//! its formulas. A lane that rejects retries at its new size on the next pass while the others
//! move on, so an instance's sequence of steps, and its result, do not depend on its chunk.
//! Projection runs the reference projection on the lane that needs it, as for the fixed-step
//! integrators.

use simba::simd::{SimdPartialOrd, SimdValue};

use super::step::{Buffers, Outcome, Stages, States, derivative_or_reference, finish_step};
use super::{Chunk, MAX_Y};
use crate::batch::status;
use crate::cpu::integrate::project;
use crate::math::lanes::{LANES, Lane, LaneMask, abs, lanes, splat, values};
use crate::step::{
    Goal, Integrator, MAX_ADAPTIVE_ATTEMPTS, Stabilization, StepOptions, StepReport,
    duration_left_negligible, min_step, step_factor,
};

/// One RKM attempt of sizes `h` (per lane) from `y` at `time` into `next`: the lanes (of
/// `active`) whose stages and state are finite, and each lane's error estimate (Simbody's
/// `|y₁ − ŷ| / 5` relative to `max(1, |y₁|)`, its largest over the state proper).
#[allow(clippy::too_many_arguments)]
fn try_step(
    chunk: &Chunk<'_>,
    y: &[Lane; MAX_Y],
    time: Lane,
    h: Lane,
    options: &StepOptions,
    active: u32,
    next: &mut [Lane; MAX_Y],
    buffers: &mut Buffers,
) -> (u32, Lane) {
    let ny = chunk.plan.ny();
    let Buffers {
        stages,
        work,
        scratch,
    } = buffers;
    let Stages {
        k,
        stage,
        third_order,
    } = &mut **stages;
    let mut f = |yy: &[Lane], tt: Lane, out: &mut [Lane; MAX_Y], active: u32| {
        derivative_or_reference(chunk, yy, tt, options, active, out, work, scratch)
    };
    let (two, three, four, five, six, eight) = (
        splat(2.0),
        splat(3.0),
        splat(4.0),
        splat(5.0),
        splat(6.0),
        splat(8.0),
    );
    let (third, half) = (h / three, h / splat(2.0));
    let mut good = f(y, time, &mut k[0], active);
    for j in 0..ny {
        stage[j] = y[j] + third * k[0][j];
    }
    good &= f(stage, time + third, &mut k[1], good);
    for j in 0..ny {
        stage[j] = y[j] + h / six * (k[0][j] + k[1][j]);
    }
    good &= f(stage, time + third, &mut k[2], good);
    for j in 0..ny {
        stage[j] = y[j] + h / eight * (k[0][j] + three * k[2][j]);
    }
    good &= f(stage, time + half, &mut k[3], good);
    for j in 0..ny {
        third_order[j] = y[j] + h * (splat(0.5) * k[0][j] - splat(1.5) * k[2][j] + two * k[3][j]);
    }
    good &= f(third_order, time + h, &mut k[4], good);
    let mut error = splat(0.0);
    for j in 0..ny {
        next[j] = y[j] + h / six * (k[0][j] + four * k[3][j] + k[4][j]);
    }
    // Over the state proper, not the work integrals; `fold(0, f64::max)` skips a NaN, as here.
    for j in 0..ny - 2 {
        let e = abs((next[j] - third_order[j]) / five) / abs(next[j]).simd_max(splat(1.0));
        error = e.select(e.simd_gt(error), error);
    }
    (good & finish_step(chunk, next), error)
}

/// Each lane's scalar bookkeeping between attempts.
#[derive(Debug, Clone)]
struct Control {
    /// The controller's step size.
    h: f64,
    /// Time advanced in this call (its own accumulator: at a large time `t + h` may round to
    /// `t`).
    elapsed: f64,
    accepted: usize,
    report: StepReport,
    flags: u32,
    /// Finished (goal reached) or failed: no more attempts.
    done: bool,
}

/// Advances one chunk by `goal` with RKM, lane `l` starting from step size `sizes[l]` (0: not
/// chosen yet), writes the lanes' states into `y_out` (`ny` lane values) and returns their
/// flags, reports and step sizes: lane by lane, `cpu::integrate::advance_instance` for RKM.
#[allow(clippy::too_many_arguments)]
pub(super) fn advance(
    chunk: &Chunk<'_>,
    options: &StepOptions,
    goal: Goal,
    sizes: [f64; LANES],
    violation: f64,
    buffers: &mut Buffers,
    states: &mut States,
    y_out: &mut [Lane],
) -> Outcome {
    let Integrator::RungeKuttaMerson { accuracy, max_step } = options.integrator else {
        unreachable!("the fixed-step integrators step in `step::advance`")
    };
    let States { y, next } = states;
    let mut time = chunk.gather_state_into(y);
    let mut control = sizes.map(|size| Control {
        h: if size > 0.0 {
            size
        } else {
            max_step.min(crate::step::INITIAL_ADAPTIVE_STEP)
        },
        elapsed: 0.0,
        accepted: 0,
        report: StepReport::default(),
        flags: 0,
        done: false,
    });
    // Bounded: every pass makes an attempt on each lane not done, and each lane's attempts are
    // bounded by MAX_ADAPTIVE_ATTEMPTS and by its step size's floor.
    loop {
        let times = values(time);
        let mut attempt = 0u32;
        let mut this_h = [0.0; LANES];
        let mut floor = [0.0; LANES];
        for (l, c) in control.iter_mut().enumerate() {
            if c.done {
                continue;
            }
            let remaining = match goal {
                Goal::Steps(n) if c.accepted >= n => {
                    c.done = true;
                    continue;
                }
                Goal::Steps(_) => None,
                Goal::Duration(d) => {
                    let left = d - c.elapsed;
                    if duration_left_negligible(left, d, f64::EPSILON) {
                        c.done = true;
                        continue;
                    }
                    Some(left)
                }
            };
            this_h[l] = c.h.min(max_step);
            if let Some(left) = remaining
                && this_h[l] > left
            {
                this_h[l] = left;
            }
            floor[l] = min_step(times[l]);
            if c.report.steps + c.report.rejected >= MAX_ADAPTIVE_ATTEMPTS {
                c.flags |= status::STEP_FAILED;
                c.done = true;
                continue;
            }
            attempt |= 1 << l;
        }
        if attempt == 0 {
            break;
        }
        // Lanes not attempting step by a harmless size; their results are not used.
        let h = lanes(std::array::from_fn(|l| {
            if attempt & (1 << l) != 0 {
                this_h[l]
            } else {
                max_step.min(crate::step::INITIAL_ADAPTIVE_STEP)
            }
        }));
        let (good, error) = try_step(chunk, y, time, h, options, attempt, next, buffers);
        let error = values(error);
        let next_time = time + h;
        // The error test first, lane by lane (reference order); `passed`: lanes that go on to
        // the projection test.
        let mut passed = 0u32;
        for (l, c) in control.iter_mut().enumerate() {
            if attempt & (1 << l) == 0 {
                continue;
            }
            if good & (1 << l) == 0 {
                if this_h[l] / 4.0 >= floor[l] {
                    // A trial stage failed (e.g. a huge trial step): retry smaller.
                    c.h = this_h[l] / 4.0;
                    c.report.rejected += 1;
                } else {
                    c.flags |= status::NONFINITE_STATE;
                    c.done = true;
                }
                continue;
            }
            let e = error[l];
            if e > accuracy {
                c.report.rejected += 1;
                c.h = this_h[l] * step_factor(accuracy, e, 0.1, 0.9);
                if c.h < floor[l] {
                    c.flags |= status::STEP_FAILED;
                    c.done = true;
                }
                continue;
            }
            c.h = (this_h[l] * step_factor(accuracy, e, 1.0, 5.0)).min(max_step);
            passed |= 1 << l;
        }
        let mut accept = passed;
        if let Stabilization::Projection { tolerance } = options.stabilization
            && passed != 0
        {
            let (perr, verr) = chunk.constraint_errors(next, next_time, &mut buffers.scratch);
            let (perr, verr) = (values(perr), values(verr));
            for (l, c) in control.iter_mut().enumerate() {
                if passed & (1 << l) == 0 || !(perr[l] > tolerance || verr[l] > tolerance) {
                    continue;
                }
                // Simbody refuses to project an error this large: the step was too long.
                if perr[l].max(verr[l]) > (2.0 * tolerance).max(tolerance.sqrt()) {
                    accept &= !(1 << l);
                    c.report.rejected += 1;
                    c.h = this_h[l] / 2.0;
                    if c.h < floor[l] {
                        // The error was there on entry: no step can remove it.
                        c.flags |= status::STEP_FAILED | status::CONSTRAINT_VIOLATED;
                        c.done = true;
                    }
                    continue;
                }
                let mut state = chunk.instance_state(next, next_time, l);
                let projected = project(
                    chunk.batch,
                    chunk.instances[l],
                    &mut state,
                    tolerance,
                    &mut buffers.work,
                );
                match projected {
                    Some(n) if state.is_finite() => {
                        c.report.projections += n;
                        chunk.set_instance_state(next, l, &state);
                    }
                    projected => {
                        // As the reference: projections count once applied, and a projected
                        // state that is not finite stops the instance.
                        if let Some(n) = projected {
                            c.report.projections += n;
                        }
                        accept &= !(1 << l);
                        c.flags |= status::NONFINITE_STATE;
                        c.done = true;
                    }
                }
            }
        }
        let keep = LaneMask::from(std::array::from_fn::<bool, LANES, _>(|l| {
            accept & (1 << l) != 0
        }));
        for j in 0..chunk.plan.ny() {
            y[j] = next[j].select(keep, y[j]);
        }
        time = next_time.select(keep, time);
        for (l, c) in control.iter_mut().enumerate() {
            if accept & (1 << l) != 0 {
                c.elapsed += this_h[l];
                c.accepted += 1;
                c.report.steps += 1;
            }
        }
    }
    // Off its constraints after the call: flagged, never reported as fine (NaN errors count).
    let checked = control
        .iter()
        .enumerate()
        .filter(|(_, c)| c.accepted > 0 && c.flags == 0)
        .fold(0u32, |m, (l, _)| m | 1 << l);
    if checked != 0 {
        let (perr, verr) = chunk.constraint_errors(y, time, &mut buffers.scratch);
        for (l, c) in control.iter_mut().enumerate() {
            let worst = perr.extract(l).max(verr.extract(l));
            if checked & (1 << l) != 0 && (worst.is_nan() || worst > violation) {
                c.flags |= status::CONSTRAINT_VIOLATED;
            }
        }
    }
    y_out.copy_from_slice(&y[..y_out.len()]);
    Outcome {
        time,
        flags: control.each_ref().map(|c| c.flags),
        report: control.each_ref().map(|c| c.report.clone()),
        step_size: control.each_ref().map(|c| c.h),
    }
}
