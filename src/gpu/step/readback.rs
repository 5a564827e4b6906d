//! What comes back from a stepping call: the state columns the kernel advanced and each
//! instance's carry (status, accepted and rejected steps, elapsed time, step size), turned into
//! the batch's states and the call's report.

use super::kernel::{
    CARRY_ACCEPTED, CARRY_COLUMNS, CARRY_ELAPSED, CARRY_ELAPSED_LOW, CARRY_FINISHED,
    CARRY_PROJECTIONS, CARRY_REJECTED, CARRY_STATUS, CARRY_STEP_SIZE, KernelSettings, RKM,
};
use crate::batch::{Batch, Column, FreeField, InstanceState, PrescribedField, status};
use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::evaluate::Chunk;
use crate::step::{Goal, StepReport};

/// The state columns the kernel writes, in readback order: q and u of every free body, pose and
/// velocity of every prescribed body without a law (a driven body's columns are the host's,
/// from its law), the work column.
pub(super) fn state_columns(batch: &Batch) -> Vec<(Column, usize)> {
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

/// Values of one chunk as read back, in f64: the carry columns, then the state columns.
pub(super) fn to_f64(precision: Precision, view: &[u8]) -> Vec<f64> {
    match precision {
        Precision::F32 => bytemuck::cast_slice::<u8, f32>(view)
            .iter()
            .map(|x| *x as f64)
            .collect(),
        Precision::F64 => bytemuck::cast_slice::<u8, f64>(view).to_vec(),
    }
}

/// What a stepping call brings back: each instance's state with the status bits to set, the
/// call's report, and whether every instance ended.
pub(super) struct Gathered {
    pub states: Vec<(InstanceState, u32)>,
    pub report: StepReport,
    pub every_instance_ended: bool,
}

/// The chunks' read-back values as states (with the status bits to set) and the call's report;
/// also updates each RKM instance's step size. The flag says whether every instance ended (it
/// arrived or stopped), so the time column the kernel wrote is the batch's.
pub(super) fn gather_states(
    batch: &Batch,
    chunks: &[Chunk],
    values: &[Option<Vec<f64>>],
    goal: Goal,
    settings: &KernelSettings,
    step_sizes: &mut [f64],
) -> Result<Gathered> {
    let mut states = Vec::with_capacity(batch.len());
    let mut every_instance_ended = true;
    let mut report = StepReport::default();
    for (chunk, v) in chunks.iter().zip(values) {
        let v = v
            .as_ref()
            .ok_or_else(|| Error::Gpu("a chunk was not read back".into()))?;
        let count = chunk.count;
        for local in 0..count {
            let i = chunk.start + local;
            let carry = |col: usize| v[col * count + local];
            let mut state = batch.state_of(i);
            if batch.status()[i] & status::HALTED != 0 {
                states.push((state, 0));
                continue;
            }
            read_state(batch, &mut state, v, CARRY_COLUMNS * count, count, local);
            every_instance_ended &= carry(CARRY_FINISHED) != 0.0 || carry(CARRY_STATUS) != 0.0;
            let accepted = carry(CARRY_ACCEPTED) as u64;
            let mut flags = carry(CARRY_STATUS) as u32;
            if flags == 0 && carry(CARRY_FINISHED) == 0.0 {
                // Stopped by the attempt cap: an instance that cannot arrive.
                flags = status::STEP_FAILED;
            }
            let arrived = carry(CARRY_FINISHED) != 0.0;
            // Time in f64 on the host: exact multiples of a fixed step, the goal itself when a
            // duration was reached, else the kernel's compensated sum.
            state.time += match goal {
                Goal::Duration(d) if arrived => d,
                _ if settings.fixed_step > 0.0 => accepted as f64 * settings.fixed_step,
                _ => carry(CARRY_ELAPSED) - carry(CARRY_ELAPSED_LOW),
            };
            if settings.integrator == RKM {
                step_sizes[i] = carry(CARRY_STEP_SIZE);
            }
            report.steps += accepted;
            report.rejected += carry(CARRY_REJECTED) as u64;
            report.projections += carry(CARRY_PROJECTIONS) as u64;
            report.flagged += usize::from(flags != 0);
            states.push((state, flags));
        }
    }
    Ok(Gathered {
        states,
        report,
        every_instance_ended,
    })
}

/// Copies instance `local`'s state columns (in [`state_columns`] order, starting at `at`, each
/// column `count` instances long) into `state`.
fn read_state(
    batch: &Batch,
    state: &mut InstanceState,
    v: &[f64],
    mut at: usize,
    count: usize,
    local: usize,
) {
    let mut take = |dst: &mut [f64]| {
        let w = dst.len();
        dst.copy_from_slice(&v[at + w * local..at + w * local + w]);
        at += w * count;
    };
    for slot in 0..state.q.len() {
        take(&mut state.q[slot]);
        take(&mut state.u[slot]);
    }
    for slot in 0..state.pose.len() {
        if batch.prescribed_columns()[slot].motion.is_some() {
            continue;
        }
        take(&mut state.pose[slot]);
        take(&mut state.velocity[slot]);
    }
    take(&mut state.work);
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
