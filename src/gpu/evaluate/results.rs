//! The evaluation kernel's outputs read back into an [`Evaluation`]: one piece of a slice at a
//! time, in blocks of instances converted in parallel, columns reordered from the kernel's
//! internal rows to the reported slots.

use rayon::prelude::*;

use super::GpuEvaluator;
use crate::batch::{Batch, status};
use crate::evaluation::{Evaluation, EvaluationBlock, Outputs};
use crate::gpu::layout::{BODY_FORCES_WIDTH, OutputColumn};

/// Instances a rayon job of the readback's conversion converts ([`GpuEvaluator::convert_piece`]):
/// a few hundred kilobytes of f32 outputs, dozens of jobs in a 32 MiB piece.
const CONVERT_BLOCK: usize = 4096;

impl GpuEvaluator {
    /// The output segments `(prefix, width)` an evaluation of `selected` reads back (what
    /// [`convert_piece`](Self::convert_piece) reads: the status and each selected column), in
    /// the kernel's order, neighbours merged: an evaluation of u̇ and λ alone copies and maps
    /// 16 of the rolling sphere's 45 values an instance.
    pub(super) fn read_segments(&self, selected: Outputs) -> Vec<(usize, usize)> {
        let layout = &self.layout;
        let nu = layout.nu;
        let mut wanted = vec![(layout.status, 1)];
        if selected.udot {
            wanted.push((layout.udot, nu));
        }
        if selected.udot_unconstrained {
            wanted.push((layout.udot_unconstrained, nu));
        }
        for c in &layout.constraints {
            // The columns as the layout places them (the list `Layout::output_columns` takes too).
            let [
                position,
                velocity,
                acceleration,
                multipliers,
                forces,
                power,
                point,
                gap,
                force,
            ] = c.main_columns();
            let columns = [
                (selected.position_errors, position),
                (selected.velocity_errors, velocity),
                (selected.acceleration_errors, acceleration),
                (selected.multipliers, multipliers),
                (selected.body_forces, forces),
                (selected.power, power),
                (selected.contact, point),
                (selected.contact, gap),
                (selected.contact, force),
            ];
            wanted.extend(columns.into_iter().filter(|(on, _)| *on).map(|(_, c)| c));
        }
        wanted.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(wanted.len());
        for (prefix, width) in wanted {
            match merged.last_mut() {
                Some((at, w)) if *at + *w >= prefix => *w = (*w).max(prefix + width - *at),
                _ => merged.push((prefix, width)),
            }
        }
        merged
    }

    /// Converts one piece's outputs — instances `start .. start + m` of the batch, read back
    /// as a slice of `m` instances in the evaluator's [`OutputOrder`](crate::gpu::layout::OutputOrder)
    /// ([`OutputColumn`]) — into `ev`, sized by [`Evaluation::fill_for`]: the selected columns
    /// and the status, in place. The piece is cut into blocks of [`CONVERT_BLOCK`] instances,
    /// a rayon job each, every job converting all the columns of its instances: the host's
    /// conversion is most of an evaluation's time with readback (on an H100's 16-core host,
    /// 51 of 55 ms for every output of 10⁶ rolling spheres when a job converted one column
    /// of a whole slice, 2026-11-27). Each value is written once, wherever the job runs, so
    /// the result does not depend on the threads.
    pub(super) fn convert_piece<T: Copy + Into<f64> + Sync>(
        &self,
        batch: &Batch,
        ev: &mut Evaluation,
        v: &[T],
        start: usize,
        m: usize,
    ) {
        // Ordinary stores: the blocks' streaming flag is the CPU lane path's.
        ev.blocks_in(start..start + m, CONVERT_BLOCK, false)
            .into_par_iter()
            .for_each(|mut block| {
                let first = block.start - start;
                self.convert_block(batch, &mut block, v, m, first);
            });
    }

    /// One block of a piece of `m` instances (values `v`): its instances `first ..
    /// first + block.len` of the piece.
    fn convert_block<T: Copy + Into<f64>>(
        &self,
        batch: &Batch,
        block: &mut EvaluationBlock<'_>,
        v: &[T],
        m: usize,
        first: usize,
    ) {
        let layout = &self.layout;
        let nu = layout.nu;
        let (order, count, selected) = (self.output_order, block.len, block.outputs);
        let column = |prefix: usize, width: usize| {
            OutputColumn::new(v, prefix, width, m, order).part(first, count)
        };
        let f = |x: T| -> f64 { x.into() };
        column(layout.status, 1).write_into(block.status, |x| f(x) as u32);
        if selected.udot {
            column(layout.udot, nu).write_into(block.udot, f);
        }
        if selected.udot_unconstrained {
            column(layout.udot_unconstrained, nu).write_into(block.udot_unconstrained, f);
        }
        for ((slot, place), out) in batch
            .template()
            .constraints()
            .iter()
            .zip(&layout.constraints)
            .zip(block.constraints.iter_mut())
        {
            let slots = slot.constraint.report_slots();
            let (rows, w) = (place.rows, out.width);
            // Internal rows → reported slots (x, y, z); absent slots are 0.
            let reorder = |prefix: usize, dst: &mut [f64]| {
                let mut places = dst.chunks_exact_mut(w.max(1));
                column(prefix, rows).for_each_instance(|row| {
                    if let Some(place) = places.next() {
                        for (d, s) in place.iter_mut().zip(slots) {
                            *d = s.map_or(0.0, |r| f(row[r]));
                        }
                    }
                });
            };
            let triples = |prefix: usize, dst: &mut [[f64; 3]]| {
                let mut places = dst.iter_mut();
                column(prefix, 3).for_each_instance(|p| {
                    if let Some(place) = places.next() {
                        *place = [f(p[0]), f(p[1]), f(p[2])];
                    }
                });
            };
            if selected.position_errors {
                reorder(place.prefix, out.position_errors);
            }
            if selected.velocity_errors {
                reorder(place.velocity_errors(), out.velocity_errors);
            }
            if selected.acceleration_errors {
                reorder(place.acceleration_errors(), out.acceleration_errors);
            }
            if selected.multipliers {
                reorder(place.multipliers(), out.multipliers);
            }
            if selected.body_forces {
                let bodies = out.body_count;
                let mut places = out.body_forces.chunks_exact_mut(bodies.max(1));
                column(place.body_forces(), BODY_FORCES_WIDTH).for_each_instance(|forces| {
                    if let Some(place) = places.next() {
                        for (b, body) in place.iter_mut().enumerate() {
                            *body = std::array::from_fn(|k| f(forces[6 * b + k]));
                        }
                    }
                });
            }
            if selected.power {
                column(place.power(), 1).write_into(out.power, f);
            }
            if !selected.contact {
                continue;
            }
            if let Some(dst) = out.contact_point.as_deref_mut() {
                triples(place.contact_point(), dst);
            }
            if let Some(dst) = out.separation.as_deref_mut() {
                column(place.separation(), 1).write_into(dst, f);
            }
            if let Some(dst) = out.contact_force.as_deref_mut() {
                triples(place.contact_force(), dst);
            }
        }
    }

    /// As on the CPU: an instance whose state is not finite (or whose mass matrix is singular)
    /// has no solution, and its solved quantities are NaN (in the `selected` outputs, the ones
    /// [`convert_piece`](Self::convert_piece) filled).
    pub(super) fn finish_evaluation(&self, batch: &Batch, ev: &mut Evaluation, selected: Outputs) {
        let nu = ev.nu;
        for i in 0..ev.len {
            if ev.status[i] & (status::NONFINITE_STATE | status::SINGULAR_MASS) == 0 {
                continue;
            }
            if selected.udot {
                ev.udot[i * nu..(i + 1) * nu].fill(f64::NAN);
            }
            if selected.udot_unconstrained {
                ev.udot_unconstrained[i * nu..(i + 1) * nu].fill(f64::NAN);
            }
            for (c, slot) in ev
                .constraints
                .iter_mut()
                .zip(batch.template().constraints())
            {
                let w = c.width;
                for (s, row) in slot.constraint.report_slots().iter().enumerate() {
                    if row.is_some() {
                        if selected.acceleration_errors {
                            c.acceleration_errors[i * w + s] = f64::NAN;
                        }
                        if selected.multipliers {
                            c.multipliers[i * w + s] = f64::NAN;
                        }
                    }
                }
                let b = c.body_count;
                if selected.body_forces {
                    c.body_forces[i * b..(i + 1) * b].fill([f64::NAN; 6]);
                }
                if selected.power {
                    c.power[i] = f64::NAN;
                }
                if let (true, Some(f)) = (selected.contact, c.contact_force.as_mut()) {
                    f[i] = [f64::NAN; 3];
                }
            }
        }
    }
}
