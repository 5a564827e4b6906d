//! Typed errors of the library.
//!
//! Every error that comes from user input names the field, the instance (where there is one) and
//! the accepted range, so a user randomising thousands of parameters can find the bad draw.

use thiserror::Error;

/// Errors returned by simbatch.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// A parameter or state value is outside its accepted range.
    #[error("invalid {field} for instance {instance}: got {value}; accepted: {accepted}")]
    InvalidValue {
        /// Qualified field name, e.g. `body[1].mass` or `constraint[0].radius`.
        field: String,
        /// Instance index in the batch.
        instance: usize,
        /// The offending value, formatted.
        value: String,
        /// What the field accepts.
        accepted: String,
    },
    /// An instance index is past the end of the batch.
    #[error("instance {instance} out of range: the batch holds {len} instances")]
    InstanceOutOfRange {
        /// Requested instance.
        instance: usize,
        /// Number of instances in the batch.
        len: usize,
    },
    /// An evaluation's output was read that its selection of outputs (`evaluation::Outputs`)
    /// left out, so it was not computed.
    #[error(
        "output {output} was not selected for this evaluation (select it in the evaluator's Outputs)"
    )]
    OutputNotSelected {
        /// The output's name, as the field of `Outputs`.
        output: &'static str,
    },
    /// A bulk write or read got a column of the wrong length.
    #[error("column {field}: got {got} values, expected {expected}")]
    ColumnLength {
        /// Qualified field name.
        field: String,
        /// Number of values given.
        got: usize,
        /// Number of values expected.
        expected: usize,
    },
    /// The system template is inconsistent.
    #[error("invalid template: {0}")]
    Template(String),
    /// A body or constraint handle does not fit the template or the operation.
    #[error("{what} {index} is not valid here: {reason}")]
    BadHandle {
        /// `body` or `constraint`.
        what: &'static str,
        /// The index of the handle.
        index: usize,
        /// Why it does not fit.
        reason: String,
    },
    /// A named parameter does not exist on that constraint.
    #[error("constraint {constraint} ({kind}) has no parameter {name:?}; it has: {available}")]
    UnknownParameter {
        /// Constraint index.
        constraint: usize,
        /// Constraint kind name.
        kind: String,
        /// The requested name.
        name: String,
        /// Comma-separated list of existing parameter names.
        available: String,
    },
    /// A vector handed to a per-instance computation has the wrong size.
    #[error("{what}: got {got} values, expected {expected}")]
    Dimension {
        /// What the vector is.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The expected length.
        expected: usize,
    },
    /// A reference-data file could not be read or does not have the expected format.
    #[error("{file}:{line}: {message}")]
    Data {
        /// File path.
        file: String,
        /// 1-based line number (0 when the whole file is concerned).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// No GPU adapter could be found or opened (the text says why, without repeating this).
    #[error("no GPU adapter: {0}")]
    NoGpuAdapter(String),
    /// A size that comes from the user does not fit in memory (host or GPU).
    #[error(
        "{what}: {count} would need about {} of {where_} memory, which could not be \
         allocated; use fewer (split the work, e.g. `--shard` for studies)",
        human_bytes(*bytes)
    )]
    OutOfMemory {
        /// What was being allocated, e.g. `batch of 1000000000 instances`.
        what: String,
        /// The count asked for, as written by the user.
        count: String,
        /// Bytes it would need.
        bytes: u128,
        /// `host` or `GPU`.
        where_: &'static str,
    },
    /// The GPU backend failed or cannot run this template.
    #[error("GPU: {0}")]
    Gpu(String),
    /// A backend or precision name is not known.
    #[error("{what} {value:?} not accepted; accepted: {accepted}")]
    BadChoice {
        /// What was being chosen (`backend`, `precision`).
        what: &'static str,
        /// The given value.
        value: String,
        /// The accepted values.
        accepted: &'static str,
    },
    /// An option (not an instance's value) is out of its accepted range.
    #[error("invalid {option}: got {value}; accepted: {accepted}")]
    InvalidOption {
        /// The option's name, e.g. `GpuOptions::workgroup_size`.
        option: &'static str,
        /// The given value.
        value: String,
        /// The accepted values, for this adapter where they depend on it.
        accepted: String,
    },
    /// A WGSL source spliced into a kernel (a constraint's, or code generated from its
    /// expressions) does not compile; `file`, `line` and `column` point into that source.
    #[error("{file}:{line}:{column}: {message}")]
    Wgsl {
        /// The source's name (`WgslConstraint::file`, or the generated section).
        file: String,
        /// 1-based line within that source.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What naga says, with the offending line.
        message: String,
    },
    /// An environment of a vector env ended (terminated or truncated) with autoreset disabled,
    /// and was stepped before being reset.
    #[error(
        "environment {env} has ended (terminated or truncated) and autoreset is disabled: \
         reset it (reset with it in the mask) before stepping"
    )]
    EnvNeedsReset {
        /// The environment's index.
        env: usize,
    },
    /// A driven prescribed body's pose, velocity or acceleration was written: they come from
    /// its motion law.
    #[error(
        "body {body:?} follows the {law} motion law, so its {field} is computed from the law at \
         each instance's time; set the law's parameters instead (accepted: {accepted})"
    )]
    DrivenBody {
        /// The body's name.
        body: String,
        /// The law's kind name.
        law: String,
        /// The field written.
        field: String,
        /// The law's parameter names.
        accepted: String,
    },
    /// A prescribed body's motion law has no parameter of that name, or the body has no law.
    #[error("body {body:?} ({law}) has no motion parameter {name:?}; it has: {available}")]
    UnknownMotionParameter {
        /// The body's name.
        body: String,
        /// The law's kind name (`constant` when it has none).
        law: String,
        /// The name asked for.
        name: String,
        /// The names it has.
        available: String,
    },
    /// The instance's state or result is not finite (see `batch::status`).
    #[error("instance {instance} is not finite (status bits {status:#x})")]
    NonFinite {
        /// Instance index.
        instance: usize,
        /// Its status bits.
        status: u32,
    },
}

/// `1.5 GiB`-style text for a byte count.
pub fn human_bytes(bytes: u128) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A vector of `len` copies of `value`, allocated fallibly: a size that does not fit is an
/// [`Error::OutOfMemory`] naming `what`, never an abort.
pub fn try_filled<T: Clone>(value: T, len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        what: what.to_string(),
        count: len.to_string(),
        bytes: len as u128 * std::mem::size_of::<T>() as u128,
        where_: "host",
    })?;
    v.resize(len, value);
    Ok(v)
}

impl Error {
    /// An instance's per-contact list (coefficients, previous records) of the wrong length:
    /// [`Error::InvalidValue`] naming the list and the instance.
    pub(crate) fn per_contact(field: &str, instance: usize, got: usize, expected: usize) -> Self {
        Error::InvalidValue {
            field: format!("{field} (one per contact)"),
            instance,
            value: format!("{got} entries"),
            accepted: format!("exactly {expected}, one per unilateral contact"),
        }
    }
}

/// Result alias used throughout simbatch.
pub type Result<T, E = Error> = std::result::Result<T, E>;
