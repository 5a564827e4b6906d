//! The CPU half of an evaluation: the lane path (`cpu::lanes`) on the templates it takes, the
//! reference path (`cpu::evaluate`) for every other template and for any instance the lane
//! formulas cannot answer. Results are written in place into the [`Evaluation`]'s columns, one
//! block of consecutive instances per rayon job. The backend's `Evaluator` is the public way in.

use rayon::prelude::*;

use crate::batch::Batch;
use crate::cpu::lanes::{self, LanePlan};
use crate::evaluation::{Evaluation, EvaluationBlock, OutputStores, Outputs};
use crate::math::lanes::LANES;

/// Instances per rayon job (a multiple of [`LANES`], so chunks never straddle two jobs).
const BLOCK: usize = 64 * LANES;

/// Which code evaluates a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// The lane path where the template allows it (the default).
    Lanes,
    /// The reference path for every instance.
    Reference,
    /// The lane path without its one-constraint kernel (`lanes::single`), which the tests hold
    /// to it bit for bit.
    #[cfg(test)]
    GeneralLanes,
}

impl Batch {
    /// Evaluates every instance on the CPU in f64, in parallel (rayon's global pool).
    ///
    /// A non-finite instance is flagged in [`Evaluation::status`] and its outputs are NaN; the
    /// others are unaffected. Results do not depend on the thread count, bit for bit.
    pub fn evaluate(&self) -> Evaluation {
        let mut out = Evaluation::default();
        self.evaluate_into(&mut out);
        out
    }

    /// As [`evaluate`](Self::evaluate), into `out`, whose allocations are reused.
    pub fn evaluate_into(&self, out: &mut Evaluation) {
        self.evaluate_with(out, Outputs::ALL, OutputStores::Auto, Path::Lanes, true);
    }

    /// As [`evaluate_into`](Self::evaluate_into), computing and storing only the outputs
    /// `outputs` selects (the other columns are left empty): u̇ and λ alone
    /// ([`Outputs::DYNAMICS`]) skip most of the per-instance writes. The selected columns are
    /// the same bits as with every output selected.
    pub fn evaluate_outputs_into(&self, outputs: Outputs, out: &mut Evaluation) {
        self.evaluate_with(out, outputs, OutputStores::Auto, Path::Lanes, true);
    }

    /// As [`evaluate_outputs_into`](Self::evaluate_outputs_into), writing the outputs with
    /// `stores` instead of [`OutputStores::Auto`]'s choice: the same bits, at the speed this
    /// CPU gives the stores.
    pub fn evaluate_stored_into(
        &self,
        outputs: Outputs,
        stores: OutputStores,
        out: &mut Evaluation,
    ) {
        self.evaluate_with(out, outputs, stores, Path::Lanes, true);
    }

    /// As [`evaluate`](Self::evaluate), on one thread (the reference for determinism tests and
    /// single-core benchmarks).
    pub fn evaluate_sequential(&self) -> Evaluation {
        let mut out = Evaluation::default();
        self.evaluate_with(
            &mut out,
            Outputs::ALL,
            OutputStores::Auto,
            Path::Lanes,
            false,
        );
        out
    }

    /// As [`evaluate`](Self::evaluate), every instance on the per-instance reference path
    /// (dynamic matrices, the generic min-norm solver): what the lane path is tested against.
    /// It agrees with [`evaluate`](Self::evaluate) to rounding (1e-12 relative).
    pub fn evaluate_reference(&self) -> Evaluation {
        let mut out = Evaluation::default();
        self.evaluate_with(
            &mut out,
            Outputs::ALL,
            OutputStores::Auto,
            Path::Reference,
            true,
        );
        out
    }

    /// The general lane path's evaluation (`Path::GeneralLanes`), with `outputs`.
    #[cfg(test)]
    pub(crate) fn evaluate_general_lanes(&self, outputs: Outputs) -> Evaluation {
        let mut out = Evaluation::default();
        self.evaluate_with(
            &mut out,
            outputs,
            OutputStores::Auto,
            Path::GeneralLanes,
            true,
        );
        out
    }

    /// The lane path's evaluation with `outputs`, its stores streaming or not as `streaming`
    /// says whatever the size and the CPU (`Evaluation::streams` decides otherwise).
    #[cfg(test)]
    pub(crate) fn evaluate_lanes_streaming(&self, outputs: Outputs, streaming: bool) -> Evaluation {
        let mut out = Evaluation::default();
        out.fill_for(self.template(), self.len(), outputs);
        self.evaluate_filled(&mut out, Path::Lanes, true, streaming);
        out
    }

    fn evaluate_with(
        &self,
        out: &mut Evaluation,
        outputs: Outputs,
        stores: OutputStores,
        path: Path,
        parallel: bool,
    ) {
        out.fill_for(self.template(), self.len(), outputs);
        let streaming = out.streams(stores);
        self.evaluate_filled(out, path, parallel, streaming);
    }

    /// Evaluates into `out`, sized for this batch already, on `path`.
    fn evaluate_filled(&self, out: &mut Evaluation, path: Path, parallel: bool, streaming: bool) {
        let plan = match path {
            Path::Lanes => LanePlan::new(self.template()),
            Path::Reference => None,
            #[cfg(test)]
            Path::GeneralLanes => LanePlan::new(self.template()).map(LanePlan::without_single),
        };
        let mut blocks = out.blocks(BLOCK, streaming);
        // One block, or one thread in the pool: on the caller's thread, without handing the
        // work to the pool and waiting for it (two context switches a call; the same results,
        // which do not depend on the threads).
        let parallel = parallel && blocks.len() > 1 && rayon::current_num_threads() > 1;
        match &plan {
            Some(plan) => {
                // A chunk and scratch per rayon job, not per block.
                let init = || lanes::evaluate::Buffers::new(self, plan);
                let run = |buffers: &mut lanes::evaluate::Buffers<'_>,
                           block: &mut EvaluationBlock<'_>| {
                    lanes::evaluate::evaluate_block(buffers, block)
                };
                if parallel {
                    blocks.par_iter_mut().for_each_init(init, run);
                } else {
                    let mut buffers = init();
                    blocks.iter_mut().for_each(|block| run(&mut buffers, block));
                }
            }
            None => {
                let run = |block: &mut EvaluationBlock<'_>| {
                    for k in 0..block.len {
                        self.evaluate_instance_into(block, k);
                    }
                };
                if parallel {
                    blocks.par_iter_mut().for_each(run);
                } else {
                    blocks.iter_mut().for_each(run);
                }
            }
        }
    }
}
