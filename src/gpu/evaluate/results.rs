//! The evaluation kernel's outputs read back into an [`Evaluation`]: one slice of a chunk at a
//! time, columns reordered from the kernel's internal rows to the reported slots.

use super::GpuEvaluator;
use crate::batch::{Batch, status};
use crate::evaluation::{Evaluation, Outputs};
use crate::gpu::layout::BODY_FORCES_WIDTH;

impl GpuEvaluator {
    /// The output segments `(prefix, width)` an evaluation of `selected` reads back (what
    /// [`append_slice`](Self::append_slice) reads: the status and each selected column), in
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
            let per_row = [
                (selected.position_errors, c.prefix),
                (selected.velocity_errors, c.velocity_errors()),
                (selected.acceleration_errors, c.acceleration_errors()),
                (selected.multipliers, c.multipliers()),
            ];
            for (on, prefix) in per_row {
                if on {
                    wanted.push((prefix, c.rows));
                }
            }
            // Widths from the layout's own placement: each column ends where the next starts;
            // the contact point, separation and contact force sit side by side, last.
            if selected.body_forces {
                wanted.push((c.body_forces(), c.power() - c.body_forces()));
            }
            if selected.power {
                wanted.push((c.power(), c.contact_point() - c.power()));
            }
            if selected.contact {
                wanted.push((c.contact_point(), c.end() - c.contact_point()));
            }
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

    /// Appends one slice's `selected` outputs (and the status); the others are not converted,
    /// which is most of the host's time in an evaluation of u̇ and λ alone. Each column is
    /// converted by a rayon task of its own (the host's share of an evaluation with readback:
    /// on lavapipe it took about half of every-output evaluation's time); a column's values
    /// are appended in order, so the result does not depend on the threads. In a slice of `n`
    /// instances, the column with prefix p and width w is the instance-major slice
    /// `v[p·n .. (p + w)·n]`.
    pub(super) fn append_slice<T: Copy + Into<f64> + Sync>(
        &self,
        batch: &Batch,
        ev: &mut Evaluation,
        selected: Outputs,
        v: &[T],
        n: usize,
    ) {
        let layout = &self.layout;
        let nu = layout.nu;
        let segment = |prefix: usize, width: usize| &v[prefix * n..(prefix + width) * n];
        let f = |x: &T| -> f64 { (*x).into() };
        let Evaluation {
            status,
            udot,
            udot_unconstrained,
            constraints,
            ..
        } = ev;
        rayon::scope(|scope| {
            scope.spawn(|_| {
                status.extend(segment(layout.status, 1).iter().map(|x| f(x) as u32));
            });
            if selected.udot {
                scope.spawn(|_| udot.extend(segment(layout.udot, nu).iter().map(f)));
            }
            if selected.udot_unconstrained {
                scope.spawn(|_| {
                    let column = segment(layout.udot_unconstrained, nu);
                    udot_unconstrained.extend(column.iter().map(f));
                });
            }
            for ((slot, place), out) in batch
                .template()
                .constraints()
                .iter()
                .zip(&layout.constraints)
                .zip(constraints.iter_mut())
            {
                let slots = slot.constraint.report_slots();
                let rows = place.rows;
                // Internal rows → reported slots (x, y, z); absent slots are 0.
                let reorder = move |prefix: usize, dst: &mut Vec<f64>| {
                    for row in segment(prefix, rows).chunks_exact(rows) {
                        dst.extend(slots.iter().map(|s| s.map_or(0.0, |r| f(&row[r]))));
                    }
                };
                let triples = move |prefix: usize| {
                    segment(prefix, 3)
                        .chunks_exact(3)
                        .map(move |p| [f(&p[0]), f(&p[1]), f(&p[2])])
                };
                let body_count = out.body_count;
                if selected.position_errors {
                    let dst = &mut out.position_errors;
                    scope.spawn(move |_| reorder(place.prefix, dst));
                }
                if selected.velocity_errors {
                    let dst = &mut out.velocity_errors;
                    scope.spawn(move |_| reorder(place.velocity_errors(), dst));
                }
                if selected.acceleration_errors {
                    let dst = &mut out.acceleration_errors;
                    scope.spawn(move |_| reorder(place.acceleration_errors(), dst));
                }
                if selected.multipliers {
                    let dst = &mut out.multipliers;
                    scope.spawn(move |_| reorder(place.multipliers(), dst));
                }
                if selected.body_forces {
                    let dst = &mut out.body_forces;
                    scope.spawn(move |_| {
                        let values = segment(place.body_forces(), BODY_FORCES_WIDTH);
                        for forces in values.chunks_exact(BODY_FORCES_WIDTH) {
                            for b in 0..body_count {
                                let mut force = [0.0; 6];
                                for (k, x) in force.iter_mut().enumerate() {
                                    *x = f(&forces[6 * b + k]);
                                }
                                dst.push(force);
                            }
                        }
                    });
                }
                if selected.power {
                    let dst = &mut out.power;
                    scope.spawn(move |_| dst.extend(segment(place.power(), 1).iter().map(f)));
                }
                if !selected.contact {
                    continue;
                }
                if let Some(dst) = out.contact_point.as_mut() {
                    scope.spawn(move |_| dst.extend(triples(place.contact_point())));
                }
                if let Some(dst) = out.separation.as_mut() {
                    scope.spawn(move |_| {
                        dst.extend(segment(place.separation(), 1).iter().map(f));
                    });
                }
                if let Some(dst) = out.contact_force.as_mut() {
                    scope.spawn(move |_| dst.extend(triples(place.contact_force())));
                }
            }
        });
    }

    /// As on the CPU: an instance whose state is not finite (or whose mass matrix is singular)
    /// has no solution, and its solved quantities are NaN (in the `selected` outputs, the ones
    /// [`append_slice`](Self::append_slice) filled).
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
