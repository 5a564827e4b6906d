//! The evaluation kernel's outputs read back into an [`Evaluation`]: one slice of a chunk at a
//! time, columns reordered from the kernel's internal rows to the reported slots.

use super::GpuEvaluator;
use crate::batch::{Batch, status};
use crate::evaluation::Evaluation;

impl GpuEvaluator {
    /// Appends one slice's outputs. In a slice of `n` instances, the column with prefix p and
    /// width w is the instance-major slice `v[p·n .. (p + w)·n]`.
    pub(super) fn append_slice<T: Copy + Into<f64>>(
        &self,
        batch: &Batch,
        ev: &mut Evaluation,
        v: &[T],
        n: usize,
    ) {
        let nu = self.layout.nu;
        let segment = |prefix: usize, width: usize| &v[prefix * n..(prefix + width) * n];
        let f = |x: &T| -> f64 { (*x).into() };
        ev.status
            .extend(segment(self.layout.status, 1).iter().map(|x| f(x) as u32));
        ev.udot.extend(segment(self.layout.udot, nu).iter().map(f));
        ev.udot_unconstrained
            .extend(segment(self.layout.udot_unconstrained, nu).iter().map(f));
        for ((slot, place), out) in batch
            .template()
            .constraints()
            .iter()
            .zip(&self.layout.constraints)
            .zip(ev.constraints.iter_mut())
        {
            let slots = slot.constraint.report_slots();
            let rows = place.rows;
            // Internal rows → reported slots (x, y, z); absent slots are 0.
            let reorder = |prefix: usize, dst: &mut Vec<f64>| {
                for row in segment(prefix, rows).chunks_exact(rows) {
                    dst.extend(slots.iter().map(|s| s.map_or(0.0, |r| f(&row[r]))));
                }
            };
            reorder(place.prefix, &mut out.position_errors);
            reorder(place.velocity_errors(), &mut out.velocity_errors);
            reorder(place.acceleration_errors(), &mut out.acceleration_errors);
            reorder(place.multipliers(), &mut out.multipliers);
            for forces in segment(place.body_forces(), 12).chunks_exact(12) {
                for b in 0..out.body_count {
                    let mut force = [0.0; 6];
                    for (k, x) in force.iter_mut().enumerate() {
                        *x = f(&forces[6 * b + k]);
                    }
                    out.body_forces.push(force);
                }
            }
            out.power.extend(segment(place.power(), 1).iter().map(f));
            let triples = |prefix: usize| {
                segment(prefix, 3)
                    .chunks_exact(3)
                    .map(|p| [f(&p[0]), f(&p[1]), f(&p[2])])
            };
            if let Some(p) = out.contact_point.as_mut() {
                p.extend(triples(place.contact_point()));
            }
            if let Some(s) = out.separation.as_mut() {
                s.extend(segment(place.separation(), 1).iter().map(f));
            }
            if let Some(c) = out.contact_force.as_mut() {
                c.extend(triples(place.contact_force()));
            }
        }
    }

    /// As on the CPU: an instance whose state is not finite (or whose mass matrix is singular)
    /// has no solution, and its solved quantities are NaN.
    pub(super) fn finish_evaluation(&self, batch: &Batch, ev: &mut Evaluation) {
        let nu = ev.nu;
        for i in 0..ev.len {
            if ev.status[i] & (status::NONFINITE_STATE | status::SINGULAR_MASS) == 0 {
                continue;
            }
            ev.udot[i * nu..(i + 1) * nu].fill(f64::NAN);
            ev.udot_unconstrained[i * nu..(i + 1) * nu].fill(f64::NAN);
            for (c, slot) in ev
                .constraints
                .iter_mut()
                .zip(batch.template().constraints())
            {
                let w = c.width;
                for (s, row) in slot.constraint.report_slots().iter().enumerate() {
                    if row.is_some() {
                        c.acceleration_errors[i * w + s] = f64::NAN;
                        c.multipliers[i * w + s] = f64::NAN;
                    }
                }
                let b = c.body_count;
                c.body_forces[i * b..(i + 1) * b].fill([f64::NAN; 6]);
                c.power[i] = f64::NAN;
                if let Some(f) = c.contact_force.as_mut() {
                    f[i] = [f64::NAN; 3];
                }
            }
        }
    }
}
