//! An [`Evaluation`]'s columns cut into blocks of consecutive instances ([`EvaluationBlock`]):
//! what the CPU paths write in place, one block per rayon job, so no instance's results are
//! copied twice; and whether the lane path writes them with streaming stores.

use super::{Evaluation, OutputStores, Outputs};
use crate::batch::status;
use crate::math::lanes::streaming_pays;
use crate::model::SystemTemplate;

/// Splits `v` into `count` consecutive slices of `block · width` values (the last one shorter,
/// empty ones when `width` is 0).
fn split_blocks<T>(mut v: &mut [T], width: usize, block: usize, count: usize) -> Vec<&mut [T]> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let take = (block * width).min(v.len());
        let (head, tail) = std::mem::take(&mut v).split_at_mut(take);
        out.push(head);
        v = tail;
    }
    out
}

/// The entries of instances `range` of a column `width` values an instance wide (all of an
/// empty, unselected column).
fn part<'a, T>(v: &'a mut [T], width: usize, range: &std::ops::Range<usize>) -> &'a mut [T] {
    if v.is_empty() {
        return v;
    }
    &mut v[range.start * width..range.end * width]
}

/// [`split_blocks`] of the instances `range` of a column ([`part`]).
fn split_part<'a, T>(
    v: &'a mut [T],
    width: usize,
    range: &std::ops::Range<usize>,
    block: usize,
    count: usize,
) -> Vec<&'a mut [T]> {
    split_blocks(part(v, width, range), width, block, count)
}

/// As [`split_blocks`], for the instances `range` of an optional column.
fn split_optional<'a, T>(
    v: &'a mut Option<Vec<T>>,
    range: &std::ops::Range<usize>,
    block: usize,
    count: usize,
) -> Vec<Option<&'a mut [T]>> {
    match v {
        Some(v) => split_part(v, 1, range, block, count)
            .into_iter()
            .map(Some)
            .collect(),
        None => (0..count).map(|_| None).collect(),
    }
}

/// One constraint's columns for a run of consecutive instances (see [`EvaluationBlock`]).
#[derive(Debug)]
pub(crate) struct ConstraintBlock<'a> {
    pub(crate) width: usize,
    pub(crate) body_count: usize,
    pub(crate) position_errors: &'a mut [f64],
    pub(crate) velocity_errors: &'a mut [f64],
    pub(crate) acceleration_errors: &'a mut [f64],
    pub(crate) multipliers: &'a mut [f64],
    pub(crate) body_forces: &'a mut [[f64; 6]],
    pub(crate) power: &'a mut [f64],
    pub(crate) contact_point: Option<&'a mut [[f64; 3]]>,
    pub(crate) separation: Option<&'a mut [f64]>,
    pub(crate) contact_force: Option<&'a mut [[f64; 3]]>,
}

/// The output size above which the CPU's lane path writes an evaluation with streaming stores
/// where [`OutputStores::Auto`] streams at all ([`Evaluation::streams`]). On the Zen 5 VM, one
/// thread, every output of rolling spheres (352 bytes an instance) streamed against cached
/// stores: 3.5 MB (10⁴ instances, which the caches hold) 0.97×, 7 MB 1.32–1.37×, 14 MB 1.56×,
/// 35 MB 1.52×, 352 MB 1.46–1.56×. 6 MiB sits between the sizes where streaming lost and won
/// there; a larger last-level cache moves the crossover, not the sign far from it.
pub(crate) const STREAMING_BYTES: usize = 6 << 20;

/// Every column of an [`Evaluation`] for the instances `start .. start + len`: what the CPU
/// path writes in place, one block per rayon job, so no instance's results are copied twice.
#[derive(Debug)]
pub(crate) struct EvaluationBlock<'a> {
    /// What to write; the columns of the others are empty slices.
    pub(crate) outputs: Outputs,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) nu: usize,
    pub(crate) status: &'a mut [u32],
    pub(crate) udot: &'a mut [f64],
    pub(crate) udot_unconstrained: &'a mut [f64],
    pub(crate) constraints: Vec<ConstraintBlock<'a>>,
    /// Whether the lane path writes its full chunks with streaming stores (chosen by the size
    /// of the whole evaluation's outputs, [`Evaluation::streams`]; `math::lanes::transpose`).
    pub(crate) streaming: bool,
}

impl Evaluation {
    /// Sizes this evaluation for `len` instances of `template` with every column `outputs`
    /// selects at its full length (the others empty), for a backend that writes instances in
    /// place through [`blocks`](Self::blocks).
    ///
    /// Columns that already have their length keep their (stale) values: every backend writing
    /// through blocks writes every entry of a selected column, so clearing them first would
    /// only cost a pass over memory (new entries are zeros).
    pub(crate) fn fill_for(&mut self, template: &SystemTemplate, len: usize, outputs: Outputs) {
        self.shape_for(template, outputs);
        self.len = len;
        let nu = self.nu;
        let size = |v: &mut Vec<f64>, on: bool, n: usize| {
            if on { v.resize(n, 0.0) } else { v.clear() }
        };
        self.status.resize(len, status::OK);
        size(&mut self.udot, outputs.udot, len * nu);
        size(
            &mut self.udot_unconstrained,
            outputs.udot_unconstrained,
            len * nu,
        );
        for c in &mut self.constraints {
            let w = c.width;
            size(&mut c.position_errors, outputs.position_errors, len * w);
            size(&mut c.velocity_errors, outputs.velocity_errors, len * w);
            size(
                &mut c.acceleration_errors,
                outputs.acceleration_errors,
                len * w,
            );
            size(&mut c.multipliers, outputs.multipliers, len * w);
            size(&mut c.power, outputs.power, len);
            if outputs.body_forces {
                c.body_forces.resize(len * c.body_count, [0.0; 6]);
            } else {
                c.body_forces.clear();
            }
            if let Some(v) = c.contact_point.as_mut() {
                v.resize(len, [0.0; 3]);
            }
            if let Some(v) = c.separation.as_mut() {
                v.resize(len, 0.0);
            }
            if let Some(v) = c.contact_force.as_mut() {
                v.resize(len, [0.0; 3]);
            }
        }
    }

    /// Whether an evaluation writing these outputs with `stores` streams them past the caches:
    /// always or never as [`OutputStores::Streamed`] and [`OutputStores::Cached`] say; for
    /// [`OutputStores::Auto`], when they are larger than [`STREAMING_BYTES`], as the
    /// per-instance columns of a large batch are, on a CPU where streaming stores pay
    /// ([`streaming_pays`]).
    pub(crate) fn streams(&self, stores: OutputStores) -> bool {
        match stores {
            OutputStores::Auto => self.output_bytes() > STREAMING_BYTES && streaming_pays(),
            OutputStores::Cached => false,
            OutputStores::Streamed => true,
        }
    }

    /// Bytes of the selected `f64` output columns (the status column aside).
    pub(crate) fn output_bytes(&self) -> usize {
        let mut values = self.udot.len() + self.udot_unconstrained.len();
        for c in &self.constraints {
            values += c.position_errors.len()
                + c.velocity_errors.len()
                + c.acceleration_errors.len()
                + c.multipliers.len()
                + c.power.len()
                + c.body_forces.len() * 6
                + c.contact_point.as_ref().map_or(0, |v| v.len() * 3)
                + c.separation.as_ref().map_or(0, Vec::len)
                + c.contact_force.as_ref().map_or(0, |v| v.len() * 3);
        }
        values * std::mem::size_of::<f64>()
    }

    /// The columns of a [`fill_for`](Self::fill_for)-sized evaluation cut into blocks of
    /// `block` consecutive instances (`block > 0`; the last block may be shorter).
    /// `streaming`: whether the lane path writes them with streaming stores ([`streams`](Self::streams)).
    pub(crate) fn blocks(&mut self, block: usize, streaming: bool) -> Vec<EvaluationBlock<'_>> {
        self.blocks_in(0..self.len, block, streaming)
    }

    /// As [`blocks`](Self::blocks), for the instances `range` only (within `0 .. len`): the
    /// first block starts at `range.start`.
    pub(crate) fn blocks_in(
        &mut self,
        range: std::ops::Range<usize>,
        block: usize,
        streaming: bool,
    ) -> Vec<EvaluationBlock<'_>> {
        let block = block.max(1);
        let (nu, outputs) = (self.nu, self.outputs);
        let range = range.start.min(self.len)..range.end.min(self.len);
        let count = range.len().div_ceil(block);
        let mut per_constraint: Vec<std::vec::IntoIter<ConstraintBlock<'_>>> = self
            .constraints
            .iter_mut()
            .map(|c| {
                let (w, bodies) = (c.width, c.body_count);
                let split = |v, width| split_part(v, width, &range, block, count);
                let columns = split(&mut c.position_errors, w)
                    .into_iter()
                    .zip(split(&mut c.velocity_errors, w))
                    .zip(split(&mut c.acceleration_errors, w))
                    .zip(split(&mut c.multipliers, w))
                    .zip(split_part(&mut c.body_forces, bodies, &range, block, count))
                    .zip(split(&mut c.power, 1))
                    .zip(split_optional(&mut c.contact_point, &range, block, count))
                    .zip(split_optional(&mut c.separation, &range, block, count))
                    .zip(split_optional(&mut c.contact_force, &range, block, count));
                columns
                    .map(|((((((((p, v), a), m), f), power), point), sep), force)| {
                        ConstraintBlock {
                            width: w,
                            body_count: bodies,
                            position_errors: p,
                            velocity_errors: v,
                            acceleration_errors: a,
                            multipliers: m,
                            body_forces: f,
                            power,
                            contact_point: point,
                            separation: sep,
                            contact_force: force,
                        }
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
            })
            .collect();
        split_part(&mut self.status, 1, &range, block, count)
            .into_iter()
            .zip(split_part(&mut self.udot, nu, &range, block, count))
            .zip(split_part(
                &mut self.udot_unconstrained,
                nu,
                &range,
                block,
                count,
            ))
            .enumerate()
            .map(
                |(b, ((status, udot), udot_unconstrained))| EvaluationBlock {
                    outputs,
                    start: range.start + b * block,
                    len: status.len(),
                    nu,
                    status,
                    udot,
                    udot_unconstrained,
                    constraints: per_constraint
                        .iter_mut()
                        .filter_map(Iterator::next)
                        .collect(),
                    streaming,
                },
            )
            .collect()
    }
}
