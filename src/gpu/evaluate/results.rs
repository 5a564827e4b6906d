//! The evaluation kernel's outputs read back into an [`Evaluation`]: one slice of a chunk at a
//! time, columns reordered from the kernel's internal rows to the reported slots.

use super::GpuEvaluator;
use crate::batch::{Batch, status};
use crate::evaluation::{Evaluation, Outputs};
use crate::gpu::layout::{BODY_FORCES_WIDTH, OutputColumn};

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
    /// instances, the column with prefix p and width w is `v[p·n .. (p + w)·n]`, in the
    /// evaluator's [`OutputOrder`](crate::gpu::layout::OutputOrder) ([`OutputColumn`]).
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
        let order = self.output_order;
        let column = |prefix: usize, width: usize| OutputColumn::new(v, prefix, width, n, order);
        let f = |x: T| -> f64 { x.into() };
        let Evaluation {
            status,
            udot,
            udot_unconstrained,
            constraints,
            ..
        } = ev;
        rayon::scope(|scope| {
            scope.spawn(|_| {
                column(layout.status, 1).extend_into(status, |x| f(x) as u32);
            });
            if selected.udot {
                scope.spawn(|_| column(layout.udot, nu).extend_into(udot, f));
            }
            if selected.udot_unconstrained {
                scope.spawn(|_| {
                    column(layout.udot_unconstrained, nu).extend_into(udot_unconstrained, f)
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
                    column(prefix, rows).for_each_instance(|row| {
                        dst.extend(slots.iter().map(|s| s.map_or(0.0, |r| f(row[r]))));
                    });
                };
                let triples = move |prefix: usize, dst: &mut Vec<[f64; 3]>| {
                    column(prefix, 3).for_each_instance(|p| dst.push([f(p[0]), f(p[1]), f(p[2])]));
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
                        let values = column(place.body_forces(), BODY_FORCES_WIDTH);
                        values.for_each_instance(|forces| {
                            for b in 0..body_count {
                                dst.push(std::array::from_fn(|k| f(forces[6 * b + k])));
                            }
                        });
                    });
                }
                if selected.power {
                    let dst = &mut out.power;
                    scope.spawn(move |_| column(place.power(), 1).extend_into(dst, f));
                }
                if !selected.contact {
                    continue;
                }
                if let Some(dst) = out.contact_point.as_mut() {
                    scope.spawn(move |_| triples(place.contact_point(), dst));
                }
                if let Some(dst) = out.separation.as_mut() {
                    scope.spawn(move |_| {
                        column(place.separation(), 1).extend_into(dst, f);
                    });
                }
                if let Some(dst) = out.contact_force.as_mut() {
                    scope.spawn(move |_| triples(place.contact_force(), dst));
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
