//! A chunk's load: what stays fixed over a call — gravity, each free body's mass properties and
//! loads, each constraint's prepared parameters, enabled flag and Baumgarte time constant —
//! gathered from the batch's columns into lanes once per call (what every instance shares, once
//! per rayon job).

use simba::simd::{SimdPartialOrd, SimdValue};

use super::solve::inverse_inertia;
use super::{ALL_LANES, Chunk};
use crate::constraints::ParamLanes;
use crate::math::lanes::{
    LANES, Lane, LaneInstances, LaneMask, LaneMat3, LaneVec3, bits, is_finite, lane_array, splat,
};
use crate::model::Broadcast;

/// The rows of `instances` in a broadcast column of `N`-value rows, one lane value each: one
/// branch on its form, then one bounds check per lane, or one in all when the lanes hold
/// consecutive instances ([`LaneInstances::rows`]).
#[inline(always)]
fn gather<const N: usize>(column: &Broadcast<[f64; N]>, instances: &LaneInstances) -> [Lane; N] {
    let stored = column.stored();
    if column.is_shared() {
        stored[0].map(splat)
    } else {
        instances.rows(stored)
    }
}

/// The entries of `instances` in a broadcast column of single values, one per lane.
#[inline(always)]
fn gather_one(column: &Broadcast<f64>, instances: &LaneInstances) -> Lane {
    let stored = column.stored();
    if column.is_shared() {
        splat(stored[0])
    } else {
        instances.values(stored)
    }
}

/// A 3-vector per lane from a column of 3-vectors.
#[inline(always)]
fn gather_vec3(column: &Broadcast<[f64; 3]>, instances: &LaneInstances) -> LaneVec3 {
    let [x, y, z] = gather(column, instances);
    LaneVec3::new(x, y, z)
}

/// How many instances ahead of the chunk it evaluates the one-constraint evaluation kernel
/// (`single.rs`) asks the caches for the inputs it will load ([`Chunk::prefetch_single`]), in
/// a build of eight lanes. There the kernel's compute per chunk is long enough that a chunk's
/// loads, issued as the kernel reaches them, no longer overlap the arithmetic before them:
/// without this, the eight-lane build evaluated a large batch (10⁵–10⁶ rolling spheres, every
/// parameter drawn, one thread) at 0.9× the four-lane one, with it at 1.25× (every output) and
/// 1.4× (u̇ and λ); 16, 32, 64 and 128 ahead measured alike, 16 best (`docs/performance-log.md`,
/// 2026-11-28 16:00). The four-lane build gained 3–6 %, within the VM's spread, so it does not
/// prefetch (`None`).
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
pub(super) const PREFETCH_AHEAD: Option<usize> = Some(16);
/// See the eight-lane build's doc: the four-lane build does not prefetch.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
pub(super) const PREFETCH_AHEAD: Option<usize> = None;

/// Asks the caches for the 64-byte lines that hold entries `from..from + count` of a column of
/// `width` values an entry (nothing past the column's end). A hint: it never faults, and it
/// changes no value.
#[inline(always)]
fn prefetch_entries<T>(column: &[T], from: usize, count: usize, width: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let len = column.len();
        let (Some(start), Some(end)) = (from.checked_mul(width), from.checked_add(count)) else {
            return;
        };
        if start >= len {
            return;
        }
        let end = end.saturating_mul(width).min(len);
        let mut line = column[start..].as_ptr() as usize & !63;
        let stop = column[..end].as_ptr_range().end as usize;
        while line < stop {
            // SAFETY: a prefetch is a hint about an address inside `column`'s allocation
            // (rounded down to its line); it reads nothing into the program and never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (column, from, count, width);
}

/// [`prefetch_entries`] of a broadcast column's entries, where it holds one per instance.
#[inline(always)]
fn prefetch_column<T: bytemuck::Pod>(column: &Broadcast<T>, from: usize, width: usize) {
    if !column.is_shared() {
        prefetch_entries(column.stored(), from, LANES, width);
    }
}

impl Chunk<'_> {
    /// Asks the caches for what [`load_single`](Self::load_single) and the one-constraint
    /// kernel will read of instances `from..from + LANES` ([`PREFETCH_AHEAD`]): q, u and time,
    /// the free body's mass properties and loads, gravity, and the constraint's enabled flag,
    /// Baumgarte time constant and parameters, each where it varies per instance.
    #[inline(always)]
    pub(super) fn prefetch_single(&self, from: usize) {
        let batch = self.batch;
        if let Some(cols) = batch.free_columns().first() {
            prefetch_entries(&cols.q, from, LANES, 1);
            prefetch_entries(&cols.u, from, LANES, 1);
            prefetch_column(&cols.mass, from, 1);
            prefetch_column(&cols.com, from, 1);
            prefetch_column(&cols.inertia, from, 1);
            prefetch_column(&cols.applied_force, from, 1);
            prefetch_column(&cols.applied_torque, from, 1);
        }
        prefetch_entries(batch.time(), from, LANES, 1);
        prefetch_column(batch.gravity_column(), from, 1);
        if let Some(c) = batch.all_constraint_columns().first() {
            prefetch_column(&c.enabled, from, 1);
            prefetch_column(&c.baumgarte_time_constant, from, 1);
            for (params, width) in c.params.iter().zip(&c.widths) {
                prefetch_column(params, from, *width);
            }
        }
    }

    /// Gathers instances `instances` of the batch: everything that stays fixed over a call.
    /// What every instance shares is gathered (and prepared) on the first load only: the
    /// values are the same bits for every instance.
    pub(crate) fn load(&mut self, instances: [usize; LANES]) {
        let plan = self.plan;
        let again = self.begin_load(instances);
        let instances = self.instances;
        for law in &mut self.laws.get_mut()[..plan.prescribed] {
            law.forget();
        }
        let mut reference_only = 0;
        for k in 0..plan.free {
            reference_only |= self.load_body(k, again);
        }
        for (slot, cols) in self.batch.prescribed_columns().iter().enumerate() {
            if !plan.driven[slot] {
                self.accelerations[slot] = instances.rows(&cols.acceleration);
            }
        }
        for k in 0..plan.constraints.len() {
            self.load_constraint(k, again);
        }
        self.reference_only = reference_only;
    }

    /// [`load`](Self::load) for a template of one free body and one constraint, no prescribed
    /// body (`LanePlan::single`): the same steps without the loops over the plan.
    #[inline(always)]
    pub(super) fn load_single(&mut self, instances: [usize; LANES]) {
        let again = self.begin_load(instances);
        self.reference_only = self.load_body(0, again);
        self.load_constraint(0, again);
    }

    /// The start of a load: the instances, and gravity unless it is shared and gathered
    /// already. Returns whether a load ran before.
    #[inline(always)]
    fn begin_load(&mut self, instances: [usize; LANES]) -> bool {
        let again = std::mem::replace(&mut self.loaded, true);
        self.instances = LaneInstances::new(instances);
        if !(again && self.shared.gravity) {
            self.gravity = gather_vec3(self.batch.gravity_column(), &self.instances);
        }
        again
    }

    /// Gathers free body `k`'s mass properties and loads (unless shared and gathered already);
    /// returns the lanes whose mass properties the closed form refuses.
    #[inline(always)]
    fn load_body(&mut self, k: usize, again: bool) -> u32 {
        if again && self.shared.bodies[k] {
            return self.shared.body_reference_only[k];
        }
        let (Some(body), Some(cols)) = (self.bodies.get_mut(k), self.batch.free_columns().get(k))
        else {
            return ALL_LANES; // Not reached: the plan's free bodies are the batch's.
        };
        let instances = &self.instances;
        let mass = gather_one(&cols.mass, instances);
        let packed = gather(&cols.inertia, instances);
        let (inverse_inertia, ok) = inverse_inertia(&packed);
        let [a, b, c, d, e, f] = packed;
        let refused = !bits(ok & mass.simd_gt(splat(0.0)) & is_finite(mass)) & ALL_LANES;
        // Field by field: the body is updated in place, not built and copied.
        body.mass = mass;
        body.inverse_mass = splat(1.0) / mass;
        body.com = gather_vec3(&cols.com, instances);
        body.inertia = LaneMat3::new(a, d, e, d, b, f, e, f, c);
        body.inverse_inertia = inverse_inertia;
        body.force = gather_vec3(&cols.applied_force, instances);
        body.torque = gather_vec3(&cols.applied_torque, instances);
        self.shared.body_reference_only[k] = refused;
        refused
    }

    /// Prepares constraint `k` ([`Constraint::prepare_lanes`]) and gathers its enabled flag
    /// and Baumgarte time constant onto its rows, unless every instance shares them and they
    /// were gathered already.
    ///
    /// [`Constraint::prepare_lanes`]: crate::model::Constraint::prepare_lanes
    #[inline(always)]
    fn load_constraint(&mut self, k: usize, again: bool) {
        let (batch, instances) = (self.batch, self.instances);
        if again && self.shared.constraints[k] {
            return;
        }
        let c = &self.plan.constraints[k];
        let cols = &batch.all_constraint_columns()[k];
        let params = ParamLanes::of(&cols.params, instances);
        let constraint = &batch.template().constraints()[k].constraint;
        constraint.prepare_lanes(&params, &mut self.prepared[k]);
        let enabled = cols.enabled.stored();
        let on = if cols.enabled.is_shared() {
            LaneMask::splat(enabled[0] != 0)
        } else {
            let lanes = instances.lanes();
            LaneMask::from(lane_array!(|l| enabled[lanes[l]] != 0))
        };
        let inv_t = splat(1.0) / gather_one(&cols.baumgarte_time_constant, &instances);
        for r in c.offset..c.offset + c.rows {
            self.enabled[r] = on;
            self.inverse_time_constant[r] = inv_t;
        }
    }
}
