//! What comes back from a stepping call: the state columns the kernel advanced and each
//! instance's carry (status, accepted and rejected steps, elapsed time, step size), turned into
//! the batch's states and the call's report.

use rayon::prelude::*;

use super::kernel::{KernelSettings, RKM};
#[cfg(doc)]
use crate::batch::InstanceState;
use crate::batch::{Batch, Column, FreeField, PrescribedField, status};
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::buffers::{Staging, read_back_into, submit_round, within_error_scope};
use crate::gpu::device::GpuDevice;
use crate::gpu::evaluate::Chunk;
use crate::gpu::layout::carry::{
    CARRY_ACCEPTED, CARRY_COLUMNS, CARRY_ELAPSED, CARRY_ELAPSED_LOW, CARRY_FINISHED,
    CARRY_PROJECTIONS, CARRY_REJECTED, CARRY_STATUS, CARRY_STEP_SIZE,
};
use crate::gpu::layout::{InputColumn, Layout};
use crate::step::{Goal, StepReport};

/// The state columns the kernel writes, in readback order: q and u of every free body, pose and
/// velocity of every prescribed body without a law (a driven body's columns are the host's,
/// from its law), the work column.
pub(crate) fn state_columns(batch: &Batch) -> Vec<(Column, usize)> {
    let mut cols = Vec::new();
    for slot in 0..batch.template().free_bodies().len() {
        cols.push((
            Column::Free {
                slot,
                field: FreeField::Q,
            },
            7,
        ));
        cols.push((
            Column::Free {
                slot,
                field: FreeField::U,
            },
            6,
        ));
    }
    for slot in 0..batch.template().prescribed_bodies().len() {
        if batch.prescribed_columns()[slot].motion.is_some() {
            continue;
        }
        cols.push((
            Column::Prescribed {
                slot,
                field: PrescribedField::Pose,
            },
            7,
        ));
        cols.push((
            Column::Prescribed {
                slot,
                field: PrescribedField::Velocity,
            },
            6,
        ));
    }
    cols.push((Column::Work, 2));
    cols
}

/// Where the state columns lie in `layout`'s input (each per instance, never shared): what a
/// stepping kernel writes and its host reads back.
pub(crate) fn state_inputs<'a>(
    layout: &'a Layout,
    columns: &[(Column, usize)],
) -> Result<Vec<&'a InputColumn>> {
    columns
        .iter()
        .map(|(column, _)| {
            layout.input(*column).filter(|c| !c.shared).ok_or_else(|| {
                Error::Gpu(format!(
                    "state column {column:?} not per instance in the layout"
                ))
            })
        })
        .collect()
}

/// Reads one chunk's progress back into `out`, in f64, through `staging`: its carry
/// (`carry_width` values an instance, column after column, from `carry`), then its state
/// `columns` (at `inputs`, from [`state_inputs`]) from its input buffer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_chunk(
    device: &GpuDevice,
    staging: &Staging,
    precision: Precision,
    layout: &Layout,
    chunk: &Chunk,
    carry: &wgpu::Buffer,
    carry_width: usize,
    columns: &[(Column, usize)],
    inputs: &[&InputColumn],
    out: &mut Vec<f64>,
) -> Result<()> {
    let bytes = precision.bytes() as u64;
    let count = chunk.count as u64;
    let mut ranges = vec![(carry, 0, carry_width as u64 * count * bytes)];
    for ((_, w), input) in columns.iter().zip(inputs) {
        let first = input.offset(layout.varying_width, chunk.count, 0);
        ranges.push((
            &chunk.input,
            first as u64 * bytes,
            *w as u64 * count * bytes,
        ));
    }
    read_back_into(device, staging, &ranges, out, |view, out| {
        extend_f64(precision, view, out)
    })
}

/// Appends one mapped piece of a chunk's readback to `out`, in f64.
pub(crate) fn extend_f64(precision: Precision, view: &[u8], out: &mut Vec<f64>) {
    match precision {
        // On every core, straight into `out`'s spare capacity (rayon's indexed extend).
        Precision::F32 => out.par_extend(
            bytemuck::cast_slice::<u8, f32>(view)
                .par_iter()
                .with_min_len(PARALLEL_VALUES)
                .map(|x| *x as f64),
        ),
        Precision::F64 => out.extend_from_slice(bytemuck::cast_slice::<u8, f64>(view)),
    }
}

/// Values a rayon job of the readback's conversion and stores takes at least.
const PARALLEL_VALUES: usize = 1 << 15;

/// What a stepping call reports, and whether every instance ended (it arrived or stopped), so
/// the time column the kernel wrote is the batch's.
pub(super) struct Stored {
    pub report: StepReport,
    pub every_instance_ended: bool,
}

/// Stores the chunks' read-back values (`values[k]`: chunk `k`'s carry columns, then its state
/// `columns` ([`state_columns`]), each `width` values an instance, instance after instance)
/// straight into the batch's columns, a column at a time, ORs each instance's flags into its
/// status and makes the call's report; also updates each RKM instance's step size. Instances
/// flagged before the call are left as they were (which ones, into `halted`, the caller's
/// scratch kept across calls: a call allocates nothing on the host per instance).
#[allow(clippy::too_many_arguments)]
pub(super) fn store_states(
    batch: &mut Batch,
    chunks: &[Chunk],
    values: &[Vec<f64>],
    columns: &[(Column, usize)],
    halted: &mut Vec<bool>,
    goal: Goal,
    settings: &KernelSettings,
    step_sizes: &mut [f64],
) -> Result<Stored> {
    let state_width: usize = columns.iter().map(|(_, w)| w).sum();
    let mut every_instance_ended = true;
    let mut report = StepReport::default();
    for (chunk, v) in chunks.iter().zip(values) {
        let (start, count) = (chunk.start, chunk.count);
        if v.len() != (CARRY_COLUMNS + state_width) * count {
            return Err(Error::Gpu(format!(
                "a chunk read back {} values, expected {}",
                v.len(),
                (CARRY_COLUMNS + state_width) * count
            )));
        }
        // Which instances were flagged before the call (the flags stored below are this
        // call's): they keep their state.
        halted.clear();
        halted.extend(
            batch.status()[start..start + count]
                .iter()
                .map(|s| s & status::HALTED != 0),
        );
        let any_halted = halted.iter().any(|h| *h);
        let mut at = CARRY_COLUMNS * count;
        for &(column, w) in columns {
            let read = &v[at..at + w * count];
            at += w * count;
            let stored = batch
                .state_column_mut(column)
                .and_then(|c| c.get_mut(start * w..(start + count) * w))
                .ok_or_else(|| Error::Gpu(format!("state column {column:?} missing")))?;
            // Blocks of instances on every core.
            let block = PARALLEL_VALUES.div_ceil(w.max(1)) * w.max(1);
            let blocks = stored.par_chunks_mut(block).zip(read.par_chunks(block));
            blocks.enumerate().for_each(|(b, (stored, read))| {
                if !any_halted {
                    stored.copy_from_slice(read);
                    return;
                }
                let halted = &halted[b * block / w.max(1)..];
                let instances = stored.chunks_exact_mut(w).zip(read.chunks_exact(w));
                for ((dst, src), h) in instances.zip(halted) {
                    if !h {
                        dst.copy_from_slice(src);
                    }
                }
            });
        }
        // Time, flags and step sizes, blocks of instances on every core.
        let block = PARALLEL_VALUES;
        let carry = |col: usize, local: usize| v[col * count + local];
        let (times, statuses) = batch.clock_columns_mut();
        let clocks = times[start..start + count]
            .par_chunks_mut(block)
            .zip(statuses[start..start + count].par_chunks_mut(block))
            .zip(step_sizes[start..start + count].par_chunks_mut(block))
            .enumerate();
        let (ended, part) = clocks
            .map(|(b, ((times, statuses), sizes))| {
                let mut report = StepReport::default();
                let mut ended = true;
                let first = b * block;
                for (j, ((time, flags_stored), size)) in times
                    .iter_mut()
                    .zip(statuses.iter_mut())
                    .zip(sizes.iter_mut())
                    .enumerate()
                {
                    let local = first + j;
                    if halted[local] {
                        continue;
                    }
                    let carry = |col: usize| carry(col, local);
                    ended &= carry(CARRY_FINISHED) != 0.0 || carry(CARRY_STATUS) != 0.0;
                    let accepted = carry(CARRY_ACCEPTED) as u64;
                    let mut flags = carry(CARRY_STATUS) as u32;
                    if flags == 0 && carry(CARRY_FINISHED) == 0.0 {
                        // Stopped by the attempt cap: an instance that cannot arrive.
                        flags = status::STEP_FAILED;
                    }
                    let arrived = carry(CARRY_FINISHED) != 0.0;
                    // Time in f64 on the host: exact multiples of a fixed step, the goal
                    // itself when a duration was reached, else the kernel's compensated sum.
                    *time += match goal {
                        Goal::Duration(d) if arrived => d,
                        _ if settings.fixed_step > 0.0 => accepted as f64 * settings.fixed_step,
                        _ => carry(CARRY_ELAPSED) - carry(CARRY_ELAPSED_LOW),
                    };
                    if settings.integrator == RKM {
                        *size = carry(CARRY_STEP_SIZE);
                    }
                    *flags_stored |= flags;
                    report.steps += accepted;
                    report.rejected += carry(CARRY_REJECTED) as u64;
                    report.projections += carry(CARRY_PROJECTIONS) as u64;
                    report.flagged += usize::from(flags != 0);
                }
                (ended, report)
            })
            .reduce(
                || (true, StepReport::default()),
                |(a, mut ra), (b, rb)| {
                    ra.add(&rb);
                    (a && b, ra)
                },
            );
        every_instance_ended &= ended;
        report.add(&part);
        // Driven bodies: their laws at the new times.
        if batch.has_driven_bodies() {
            batch.refresh_driven_span(start, halted.len(), |local| !halted[local]);
        }
    }
    batch.touch_state_columns();
    Ok(Stored {
        report,
        every_instance_ended,
    })
}

/// Values of an instance's flat state ([`InstanceState::to_vec`]).
pub(crate) fn state_len(batch: &Batch) -> usize {
    let t = batch.template();
    13 * (t.free_bodies().len() + t.prescribed_bodies().len()) + 2
}

/// Lays instance `i`'s read-back state (chunk-local index `local`; the state columns start at
/// `at`, each column `count` instances long) out flat in `y`, as
/// [`InstanceState::to_vec`]: q of the free bodies, poses, u, prescribed velocities, work. A
/// driven body keeps its pose and velocity (the batch sets them from its law).
pub(crate) fn read_state(
    batch: &Batch,
    i: usize,
    y: &mut [f64],
    v: &[f64],
    mut at: usize,
    count: usize,
    local: usize,
) {
    let (free, prescribed) = (batch.free_columns(), batch.prescribed_columns());
    let (nf, np) = (free.len(), prescribed.len());
    // Where each block starts in `y`.
    let (q_at, pose_at, u_at, velocity_at) = (0, 7 * nf, 7 * (nf + np), 7 * (nf + np) + 6 * nf);
    let work_at = velocity_at + 6 * np;
    let mut take = |dst: &mut [f64]| {
        let w = dst.len();
        dst.copy_from_slice(&v[at + w * local..at + w * local + w]);
        at += w * count;
    };
    for slot in 0..nf {
        take(&mut y[q_at + 7 * slot..q_at + 7 * slot + 7]);
        take(&mut y[u_at + 6 * slot..u_at + 6 * slot + 6]);
    }
    for (slot, cols) in prescribed.iter().enumerate() {
        let pose = pose_at + 7 * slot..pose_at + 7 * slot + 7;
        let velocity = velocity_at + 6 * slot..velocity_at + 6 * slot + 6;
        if cols.motion.is_some() {
            y[pose].copy_from_slice(&cols.pose[i]);
            y[velocity].copy_from_slice(&cols.velocity[i]);
            continue;
        }
        take(&mut y[pose]);
        take(&mut y[velocity]);
    }
    take(&mut y[work_at..work_at + 2]);
}

/// After the states are stored: the GPU already holds exactly these values, so they are marked
/// uploaded — not a driven body's pose and velocity, which the host has just set from its law,
/// and the time column only when every instance ended (the kernel writes it then).
pub(super) fn mark_resident(
    batch: &Batch,
    chunks: &mut [Chunk],
    layout_inputs: &[crate::gpu::layout::InputColumn],
    columns: &[(Column, usize)],
    every_instance_ended: bool,
) {
    let driven = |c: &Column| match c {
        Column::Prescribed { slot, .. } => batch.prescribed_columns()[*slot].motion.is_some(),
        _ => false,
    };
    for chunk in chunks {
        for (k, col) in layout_inputs.iter().enumerate() {
            let written = (col.column == Column::Time && every_instance_ended)
                || columns.iter().any(|(c, _)| *c == col.column);
            if !driven(&col.column) && written {
                chunk.uploaded[k] = batch.column_version(col.column).unwrap_or(0);
            }
        }
    }
}

/// What [`run_rounds`] dispatches and reads back: the kernel, each chunk's bind group and
/// carry buffer, and the readback's layout.
pub(crate) struct Rounds<'a> {
    /// The kernel's name in errors and in wgpu's labels.
    pub(crate) label: &'static str,
    pub(crate) pipeline: &'a wgpu::ComputePipeline,
    /// Per chunk of the evaluator: its bind group and its carry buffer.
    pub(crate) chunks: Vec<(&'a wgpu::BindGroup, &'a wgpu::Buffer)>,
    pub(crate) staging: &'a Staging,
    /// Carry values per instance.
    pub(crate) carry_width: usize,
    /// The state columns read back after the carry ([`state_columns`]).
    pub(crate) columns: &'a [(Column, usize)],
    pub(crate) workgroup: usize,
    /// Dispatches in the first round; each later round doubles them up to `most_dispatches`.
    pub(crate) dispatches: usize,
    pub(crate) most_dispatches: usize,
    /// Rounds after which instances still running are an error (the kernel's trials bound
    /// them, so this is never reached by a kernel that makes progress).
    pub(crate) most_rounds: usize,
}

/// Submits rounds of dispatches over the chunks whose instances are still running, reading
/// back each such chunk's carry and state columns into `readback[k]` after each round
/// ([`read_chunk`]), until `running(values, count)` says no instance of any chunk is; within a
/// validation error scope that is popped whatever the loop returns. The stepping and the event
/// kernels share it.
pub(crate) fn run_rounds(
    device: &GpuDevice,
    precision: Precision,
    layout: &Layout,
    chunks: &[Chunk],
    rounds: Rounds<'_>,
    readback: &mut Vec<Vec<f64>>,
    running: impl Fn(&[f64], usize) -> bool,
) -> Result<()> {
    let inputs = state_inputs(layout, rounds.columns)?;
    readback.resize_with(chunks.len(), Vec::new);
    let mut pending = vec![true; chunks.len()];
    let mut dispatches = rounds.dispatches.clamp(1, rounds.most_dispatches);
    let label = rounds.label;
    let filter = wgpu::ErrorFilter::Validation;
    let (ran, invalid) = within_error_scope(&device.device, filter, || {
        let mut round = 0;
        while pending.iter().any(|p| *p) {
            round += 1;
            if round > rounds.most_rounds {
                return Err(Error::Gpu(format!(
                    "{label}: instances still running after {} rounds of dispatches, more than \
                     their trials allow",
                    rounds.most_rounds
                )));
            }
            let live = chunks.iter().zip(&rounds.chunks).zip(&pending);
            let groups = live
                .filter(|(_, p)| **p)
                .map(|((chunk, (group, _)), _)| (*group, chunk.count));
            submit_round(
                device,
                label,
                rounds.pipeline,
                groups,
                dispatches,
                rounds.workgroup,
            );
            for (k, (chunk, (_, carry))) in chunks.iter().zip(&rounds.chunks).enumerate() {
                if !pending[k] {
                    continue;
                }
                let values = &mut readback[k];
                read_chunk(
                    device,
                    rounds.staging,
                    precision,
                    layout,
                    chunk,
                    carry,
                    rounds.carry_width,
                    rounds.columns,
                    &inputs,
                    values,
                )?;
                pending[k] = running(values, chunk.count);
            }
            dispatches = (dispatches * 2).min(rounds.most_dispatches);
        }
        Ok(())
    });
    match invalid {
        Some(e) => Err(Error::Gpu(format!("{label} failed: {e}"))),
        None => ran,
    }
}
