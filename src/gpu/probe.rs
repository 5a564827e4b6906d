//! Stage-dropping variants of the GPU kernels, for finding where a kernel's time goes on
//! hardware (`simbatch bench --gpu-probe`).
//!
//! Profilers such as Nsight Compute do not see Vulkan compute pipelines, so the way to locate a
//! slow stage is to time the kernel without it. A probe rewrites the assembled kernel text
//! before it is built: [`Probe::NoFallback`] leaves out the multiplier solve's eigen fallback
//! (the one place that indexes an array at run time), [`Probe::NoSolve`] the solve itself,
//! [`Probe::NoDynamics`] the whole derivative (a stepping kernel then moves every state by zero
//! rates: the integrator, loads and stores alone), [`Probe::NoCache`] the thread's private copy
//! of the parameter columns (every use reads the input buffer). The differences between the
//! timings are what each stage costs. (The output columns' order, which a `value-major` probe
//! timed on an H100 before it was adopted, is now an option: `GpuOptions::output_order`.)
//!
//! **The results of a probed kernel are wrong by design** (all but `no-cache`'s). A probe is
//! process-wide and off unless [`set`] turns it on; only the bench command does, and it prints
//! that it did.

use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{Error, Result};

/// A stage left out of the kernels (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The multiplier solve keeps its certified Cholesky and drops the eigen fallback (a lane
    /// whose certificate fails returns its right-hand side).
    NoFallback,
    /// No multiplier solve: λ = 0, so u̇ = u̇₀.
    NoSolve,
    /// No constraint rows and no solve: zero rows, λ = 0.
    NoRows,
    /// No derivative: every rate is zero (stepping kernels only).
    NoDynamics,
    /// No private copy of the parameter columns: `load` reads every value from the input
    /// buffer at every use (what the kernels did before `cache_parameters`; its results are
    /// the right ones, the probe times what the copy saves — and, the copy holding the folded
    /// shared parameters, what folding saves; `--gpu-unfolded` times folding alone).
    NoCache,
}

/// The names [`Probe::from_str`] accepts.
pub const PROBES: &str = "no-fallback, no-solve, no-rows, no-dynamics, no-cache";

impl FromStr for Probe {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "no-fallback" => Ok(Self::NoFallback),
            "no-solve" => Ok(Self::NoSolve),
            "no-rows" => Ok(Self::NoRows),
            "no-dynamics" => Ok(Self::NoDynamics),
            "no-cache" => Ok(Self::NoCache),
            _ => Err(Error::BadChoice {
                what: "gpu probe",
                value: s.to_string(),
                accepted: PROBES,
            }),
        }
    }
}

impl Probe {
    /// Its name, as [`Probe::from_str`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoFallback => "no-fallback",
            Self::NoSolve => "no-solve",
            Self::NoRows => "no-rows",
            Self::NoDynamics => "no-dynamics",
            Self::NoCache => "no-cache",
        }
    }

    /// The text replacements that make the variant: `(what the kernel says, what it says
    /// instead)`. A kernel without a piece (an evaluation kernel has no `derivative`) keeps it.
    fn edits(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::NoFallback => &[("return min_norm_fallback(a, rhs);", "return rhs;")],
            Self::NoSolve => &[(
                "let multipliers = solve_multipliers(a_mat, rhs_rows, sys.enabled);",
                "let multipliers = array<real, ROWS_CAP>();",
            )],
            Self::NoRows => &[
                (
                    "let rows = assemble_rows(i, bodies.kin, baumgarte);",
                    "var rows: AssembledRows;",
                ),
                (
                    "let multipliers = solve_multipliers(a_mat, rhs_rows, sys.enabled);",
                    "let multipliers = array<real, ROWS_CAP>();",
                ),
            ],
            Self::NoDynamics => &[(
                "fn derivative(i: u32, s: State, baumgarte: u32) -> Derivative {",
                "fn derivative(i: u32, s: State, baumgarte: u32) -> Derivative { var zero_rates: Derivative; zero_rates.ok = true; return zero_rates; }\n\
                 fn derivative_probed_out(i: u32, s: State, baumgarte: u32) -> Derivative {",
            )],
            Self::NoCache => &[(
                "    if slot != 0xffffffffu {\n        return parameters[slot + k];",
                "    if false {\n        return parameters[slot + k];",
            )],
        }
    }
}

/// 0: none; else 1 + the probe's index.
static PROBE: AtomicU8 = AtomicU8::new(0);

/// Turns a probe on (every kernel built after this in the process is the variant) or off.
pub fn set(probe: Option<Probe>) {
    let code = match probe {
        None => 0,
        Some(Probe::NoFallback) => 1,
        Some(Probe::NoSolve) => 2,
        Some(Probe::NoDynamics) => 3,
        Some(Probe::NoRows) => 4,
        Some(Probe::NoCache) => 5,
    };
    PROBE.store(code, Ordering::SeqCst);
}

/// The probe that is on, if any.
pub fn current() -> Option<Probe> {
    match PROBE.load(Ordering::SeqCst) {
        1 => Some(Probe::NoFallback),
        2 => Some(Probe::NoSolve),
        3 => Some(Probe::NoDynamics),
        4 => Some(Probe::NoRows),
        5 => Some(Probe::NoCache),
        _ => None,
    }
}

/// `text` as the probe that is on makes it.
pub(crate) fn apply(text: &mut String) {
    if let Some(probe) = current() {
        for (from, to) in probe.edits() {
            *text = text.replace(from, to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every probe's edits find their place in the rolling ball's stepping kernel, and the
    /// variant still validates (the probe stays off for the rest of the process).
    #[test]
    fn every_probe_edits_the_stepping_kernel_and_validates() {
        let batch = crate::scenarios::rolling_balls(4).unwrap();
        let layout = crate::gpu::layout::Layout::for_batch(&batch).unwrap();
        for probe in [
            Probe::NoFallback,
            Probe::NoSolve,
            Probe::NoRows,
            Probe::NoDynamics,
            Probe::NoCache,
        ] {
            let mut source = crate::gpu::shader::stepping_source(
                crate::gpu::Precision::F32,
                &layout,
                64,
                1,
                false,
            );
            for (from, _) in probe.edits() {
                assert!(source.text.contains(from), "{}: {from}", probe.name());
            }
            let before = source.text.clone();
            for (from, to) in probe.edits() {
                source.text = source.text.replace(from, to);
            }
            assert_ne!(before, source.text);
            source.check().unwrap();
            assert_eq!(probe.name().parse::<Probe>().unwrap(), probe);
        }
        assert!("no-such".parse::<Probe>().is_err());
        assert_eq!(current(), None);
    }
}
