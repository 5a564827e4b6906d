//! Parameter distributions and their counter-based sampling, shared by the `simbatch` command's
//! studies and the RL environments' per-episode randomization.
//!
//! Every draw is a pure function of `(seed, field, global instance index)`: the field's path is
//! hashed (FNV-1a) into the seed of a SplitMix64 stream keyed by the instance
//! ([`Rng::for_instance`]), so a value never depends on thread count, chunking, backend, sharding
//! or on which other fields the scenario declares.

use crate::error::{Error, Result};
use crate::scenarios::Rng;

/// One scalar field of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// The same value for every instance.
    Fixed(f64),
    /// Uniform in `[lo, hi)`.
    Uniform(f64, f64),
    /// Normal with `mean` and standard deviation `std ≥ 0`.
    Normal(f64, f64),
    /// `exp(U[ln lo, ln hi))`, `0 < lo ≤ hi`.
    LogUniform(f64, f64),
    /// One of the values, each equally likely.
    Choice(Vec<f64>),
    /// The per-instance value of a `[vars]` entry (its index).
    Var(usize),
}

impl Scalar {
    /// Whether the value varies between instances (recorded in the results when it does).
    pub fn is_random(&self) -> bool {
        !matches!(self, Scalar::Fixed(_))
    }

    /// The value for one instance: `rng` is this field's stream for the instance, `vars` the
    /// instance's `[vars]` values.
    pub fn draw(&self, rng: &mut Rng, vars: &[f64]) -> f64 {
        match self {
            Scalar::Fixed(v) => *v,
            Scalar::Uniform(lo, hi) => rng.uniform(*lo, *hi),
            Scalar::Normal(mean, std) => mean + std * standard_normal(rng),
            Scalar::LogUniform(lo, hi) => rng.uniform(lo.ln(), hi.ln()).exp(),
            Scalar::Choice(values) => {
                values[((rng.unit() * values.len() as f64) as usize).min(values.len() - 1)]
            }
            Scalar::Var(k) => vars[*k],
        }
    }
}

impl Scalar {
    /// The closed range every draw lies in (`±∞` for a normal); `None` for [`Scalar::Var`],
    /// whose values come from elsewhere.
    pub fn support(&self) -> Option<(f64, f64)> {
        match self {
            Scalar::Fixed(v) => Some((*v, *v)),
            Scalar::Uniform(lo, hi) | Scalar::LogUniform(lo, hi) => Some((*lo, *hi)),
            Scalar::Normal(mean, std) if *std == 0.0 => Some((*mean, *mean)),
            Scalar::Normal(..) => Some((f64::NEG_INFINITY, f64::INFINITY)),
            Scalar::Choice(values) => Some(
                values
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                        (lo.min(*v), hi.max(*v))
                    }),
            ),
            Scalar::Var(_) => None,
        }
    }

    /// Checks that the distribution is well formed (finite arguments, `lo ≤ hi`, `std ≥ 0`,
    /// `0 < lo` for log-uniform, a non-empty choice, no `$var`) and that every value it can
    /// draw lies in `[lo, hi]`; the error names `field` and the accepted range.
    pub fn check(&self, field: &str, lo: f64, hi: f64) -> Result<()> {
        let well_formed = match self {
            Scalar::Fixed(v) => v.is_finite(),
            Scalar::Uniform(a, b) => a.is_finite() && b.is_finite() && a <= b,
            Scalar::Normal(m, s) => m.is_finite() && s.is_finite() && *s >= 0.0,
            Scalar::LogUniform(a, b) => a.is_finite() && b.is_finite() && *a > 0.0 && a <= b,
            Scalar::Choice(values) => !values.is_empty() && values.iter().all(|v| v.is_finite()),
            Scalar::Var(_) => false,
        };
        let inside = self.support().is_some_and(|(a, b)| a >= lo && b <= hi);
        if well_formed && inside {
            Ok(())
        } else {
            Err(Error::InvalidValue {
                field: field.to_string(),
                instance: 0,
                value: format!("{self:?}"),
                accepted: format!(
                    "a fixed number, uniform(lo ≤ hi), normal(mean, std ≥ 0), log_uniform(0 < lo ≤ hi) \
                     or a non-empty choice, every possible value in [{lo}, {hi}]"
                ),
            })
        }
    }
}

/// Box–Muller on two uniforms (the first in (0, 1], so the logarithm is finite).
fn standard_normal(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - rng.unit();
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// FNV-1a of a field path: the key that separates one field's stream from another's.
pub fn field_key(path: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in path.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The stream of field `path` for global instance `index` under `seed`.
pub fn stream(seed: u64, path: &str, index: usize) -> Rng {
    Rng::for_instance(seed ^ field_key(path), index)
}

/// Draws `scalar` for field `path` of global instance `index`.
pub fn draw(scalar: &Scalar, seed: u64, path: &str, index: usize, vars: &[f64]) -> f64 {
    match scalar {
        Scalar::Fixed(v) => *v,
        Scalar::Var(k) => vars[*k],
        _ => scalar.draw(&mut stream(seed, path, index), vars),
    }
}
