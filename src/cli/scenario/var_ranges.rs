//! Per-instance checks of unbounded `[vars]` draws against the keys that use them.
//!
//! A key with a range (a mass > 0, a restitution in [0, 1]) that reads `"$var"` is checked at
//! parse time against the var's distribution when that distribution is bounded. A `normal` or
//! `lognormal` entry is not refused there — another key may want its tails, and most draws may
//! be in range — so each such use is kept as a [`VarRange`] and every instance's draw is held
//! to it before the engine sees the value. The error then names what the user wrote: the key,
//! its line, the var, the var's distribution and its line, and the value this instance drew,
//! where the engine alone could only name its own field and the value.

use super::Scenario;
use crate::cli::CliError;

/// One use of an unbounded `[vars]` entry by a key with a range.
#[derive(Debug, Clone, PartialEq)]
pub struct VarRange {
    /// The var's index in [`Scenario::vars`].
    pub var: usize,
    /// The key that uses it, e.g. `constraint[0].radius`.
    pub field: String,
    /// The key's value: line and column (1-based) in the scenario's text.
    pub at: (usize, usize),
    /// The line (1-based) of the var's entry in `[vars]`.
    pub var_line: usize,
    /// The accepted values, `lo < x ≤ hi` when `lo_open`, else `lo ≤ x ≤ hi`.
    pub lo: f64,
    /// The accepted values' upper end (∞ for none).
    pub hi: f64,
    /// Whether `lo` itself is refused (a key that must be > 0).
    pub lo_open: bool,
    /// What the key accepts, for the message.
    pub accepted: String,
}

impl VarRange {
    /// Whether `x` is an accepted value (a NaN never is).
    pub fn admits(&self, x: f64) -> bool {
        let above = if self.lo_open {
            x > self.lo
        } else {
            x >= self.lo
        };
        above && x <= self.hi
    }
}

impl Scenario {
    /// Holds instance `instance`'s `[vars]` draws (`vars`, in [`Scenario::vars`]' order) to
    /// the ranges of the keys that use them; the first draw out of range is a
    /// [`CliError::Sample`] naming the key and its place, the var and its distribution, and
    /// the value drawn.
    pub fn check_var_draws(&self, instance: usize, vars: &[f64]) -> Result<(), CliError> {
        for r in &self.var_ranges {
            let (Some((name, entry)), Some(&x)) = (self.vars.get(r.var), vars.get(r.var)) else {
                continue;
            };
            if r.admits(x) {
                continue;
            }
            return Err(CliError::Sample {
                file: self.file.clone(),
                instance,
                message: format!(
                    "{} (line {}, column {}): \"${name}\" drew {x} from vars.{name} = {} \
                     (line {}); accepted: {}",
                    r.field,
                    r.at.0,
                    r.at.1,
                    super::parser::describe(entry),
                    r.var_line,
                    r.accepted
                ),
            });
        }
        Ok(())
    }
}
