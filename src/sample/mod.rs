//! Parameter distributions and their counter-based sampling, shared by the `simbatch` command's
//! studies and the RL environments' per-episode randomization.
//!
//! Every draw is a pure function of `(seed, field, global instance index)`: the field's path is
//! hashed (FNV-1a) into the seed of a SplitMix64 stream keyed by the instance
//! ([`Rng::for_instance`]), so a value never depends on thread count, chunking, backend, sharding
//! or on which other fields the scenario declares.

use crate::error::{Error, Result};

pub mod truncated;

/// One scalar field of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// The same value for every instance.
    Fixed(f64),
    /// Uniform in `[lo, hi)`.
    Uniform(f64, f64),
    /// Normal with `mean` and standard deviation `std ≥ 0`.
    Normal(f64, f64),
    /// Normal with `mean` and `std ≥ 0` truncated to `[lo, hi]` (`lo < hi`).
    TruncatedNormal(f64, f64, f64, f64),
    /// `exp(N(mu, sigma))`, `sigma ≥ 0`: the log of the value is normal.
    LogNormal(f64, f64),
    /// `exp(U[ln lo, ln hi))`, `0 < lo ≤ hi`.
    LogUniform(f64, f64),
    /// One of the values, each equally likely.
    Choice(Vec<f64>),
    /// The per-instance value of a `[vars]` entry (its index).
    Var(usize),
}

/// Names of the distributions [`Scalar::distribution`] accepts.
pub const DISTRIBUTIONS: [&str; 6] = [
    "uniform",
    "normal",
    "truncated_normal",
    "lognormal",
    "log_uniform",
    "choice",
];

impl Scalar {
    /// The distribution `kind` with its numbers, as scenario files (`{uniform = [lo, hi]}`) and
    /// the Python settings (`{"uniform": [lo, hi]}`) write it — the one parser of that syntax:
    /// `uniform = [lo, hi]` (lo ≤ hi), `normal = [mean, std]` (std ≥ 0), `truncated_normal =
    /// [mean, std, lo, hi]` (std ≥ 0, lo < hi), `lognormal = [mu, sigma]` (the log's mean and
    /// std, sigma ≥ 0), `log_uniform = [lo, hi]` (0 < lo ≤ hi), `choice = [v, ...]` (at least
    /// one value); every number finite. The error message shows the value and ends with what
    /// is accepted.
    pub fn distribution(kind: &str, numbers: &[f64]) -> std::result::Result<Scalar, String> {
        if !numbers.iter().all(|x| x.is_finite()) {
            return Err(format!("{kind} = {numbers:?}; accepted: finite numbers"));
        }
        let pair = |what: &str| -> std::result::Result<(f64, f64), String> {
            match numbers {
                [a, b] => Ok((*a, *b)),
                _ => Err(format!(
                    "{kind} takes [{what}], got {} values; accepted: two numbers",
                    numbers.len()
                )),
            }
        };
        match kind {
            "uniform" => {
                let (lo, hi) = pair("lo, hi")?;
                if lo > hi {
                    return Err(format!("uniform = [{lo}, {hi}]; accepted: lo ≤ hi"));
                }
                Ok(Scalar::Uniform(lo, hi))
            }
            "normal" => {
                let (mean, std) = pair("mean, std")?;
                if std < 0.0 {
                    return Err(format!("normal = [{mean}, {std}]; accepted: std ≥ 0"));
                }
                Ok(Scalar::Normal(mean, std))
            }
            "truncated_normal" => {
                let [mean, std, lo, hi] = <[f64; 4]>::try_from(numbers).map_err(|_| {
                    format!(
                        "truncated_normal takes [mean, std, lo, hi], got {} values; accepted: \
                         four numbers",
                        numbers.len()
                    )
                })?;
                if std < 0.0 || lo >= hi {
                    return Err(format!(
                        "truncated_normal = [{mean}, {std}, {lo}, {hi}]; accepted: std ≥ 0 and \
                         lo < hi"
                    ));
                }
                Ok(Scalar::TruncatedNormal(mean, std, lo, hi))
            }
            "lognormal" => {
                let (mu, sigma) = pair("mu, sigma")?;
                if sigma < 0.0 {
                    return Err(format!("lognormal = [{mu}, {sigma}]; accepted: sigma ≥ 0"));
                }
                Ok(Scalar::LogNormal(mu, sigma))
            }
            "log_uniform" => {
                let (lo, hi) = pair("lo, hi")?;
                if !(lo > 0.0 && lo <= hi) {
                    return Err(format!("log_uniform = [{lo}, {hi}]; accepted: 0 < lo ≤ hi"));
                }
                Ok(Scalar::LogUniform(lo, hi))
            }
            "choice" if numbers.is_empty() => {
                Err("choice = []; accepted: at least one value".into())
            }
            "choice" => Ok(Scalar::Choice(numbers.to_vec())),
            other => Err(format!(
                "unknown distribution {other:?}; accepted: {}",
                DISTRIBUTIONS.join(", ")
            )),
        }
    }
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
            // rand_distr's samplers on the counter-based stream (`Rng` is a `RngCore`).
            Scalar::Normal(mean, std) => rand_distr::Normal::new(*mean, *std)
                .map_or(f64::NAN, |d| rand_distr::Distribution::sample(&d, rng)),
            Scalar::LogNormal(mu, sigma) => rand_distr::LogNormal::new(*mu, *sigma)
                .map_or(f64::NAN, |d| rand_distr::Distribution::sample(&d, rng)),
            Scalar::TruncatedNormal(mean, std, lo, hi) if *std == 0.0 => mean.clamp(*lo, *hi),
            Scalar::TruncatedNormal(mean, std, lo, hi) => {
                let z = truncated::standard(rng, (lo - mean) / std, (hi - mean) / std);
                (mean + std * z).clamp(*lo, *hi)
            }
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
            Scalar::TruncatedNormal(mean, std, lo, hi) if *std == 0.0 => {
                let v = mean.clamp(*lo, *hi);
                Some((v, v))
            }
            Scalar::TruncatedNormal(_, _, lo, hi) => Some((*lo, *hi)),
            Scalar::LogNormal(mu, sigma) if *sigma == 0.0 => Some((mu.exp(), mu.exp())),
            Scalar::LogNormal(..) => Some((0.0, f64::INFINITY)),
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
            Scalar::TruncatedNormal(m, s, a, b) => {
                [m, s, a, b].iter().all(|x| x.is_finite()) && *s >= 0.0 && a < b
            }
            Scalar::LogNormal(m, s) => m.is_finite() && s.is_finite() && *s >= 0.0,
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
                    "a fixed number, uniform(lo ≤ hi), normal(mean, std ≥ 0), \
                     truncated_normal(mean, std ≥ 0, lo < hi), lognormal(mu, sigma ≥ 0), \
                     log_uniform(0 < lo ≤ hi) or a non-empty choice, every possible value in \
                     [{lo}, {hi}]"
                ),
            })
        }
    }
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function (Stafford's mix 13): a bijection of 64-bit words in which
/// neighbouring inputs give unrelated outputs.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed `seed` mixed so that neighbouring seeds (`s + i`) give unrelated streams.
pub fn mixed_seed(seed: u64) -> u64 {
    mix64(seed.wrapping_add(GOLDEN_GAMMA))
}

/// SplitMix64 keyed by `(seed, instance)`: a small counter-based generator, the one random
/// source of the crate (studies, environments, random test systems).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream of instance `instance` under `seed`.
    pub fn for_instance(seed: u64, instance: usize) -> Self {
        let mut r = Rng(seed ^ (instance as u64).wrapping_mul(0xD1B54A32D192ED03));
        r.next_u64();
        r
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        mix64(self.0)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// A vector with components uniform in `[−s, s)`.
    pub fn vec3(&mut self, s: f64) -> [f64; 3] {
        [
            self.uniform(-s, s),
            self.uniform(-s, s),
            self.uniform(-s, s),
        ]
    }

    /// A random pose `[e0, e1, e2, e3, x, y, z]` with the origin within `s` of zero.
    pub fn pose(&mut self, s: f64) -> [f64; 7] {
        let p = self.vec3(s);
        let mut q = [0.0; 4];
        while q.iter().map(|x| x * x).sum::<f64>() < 1e-3 {
            q = [
                self.uniform(-1.0, 1.0),
                self.uniform(-1.0, 1.0),
                self.uniform(-1.0, 1.0),
                self.uniform(-1.0, 1.0),
            ];
        }
        [q[0], q[1], q[2], q[3], p[0], p[1], p[2]]
    }

    /// A valid inertia: diagonal in [0.2, 0.3], products within ±0.02 (triangle inequality holds).
    pub fn inertia(&mut self) -> [f64; 6] {
        [
            self.uniform(0.2, 0.3),
            self.uniform(0.2, 0.3),
            self.uniform(0.2, 0.3),
            self.uniform(-0.02, 0.02),
            self.uniform(-0.02, 0.02),
            self.uniform(-0.02, 0.02),
        ]
    }
}

impl rand_core::RngCore for Rng {
    fn next_u32(&mut self) -> u32 {
        (Rng::next_u64(self) >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        Rng::next_u64(self)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        rand_core::impls::fill_bytes_via_next(self, dst)
    }
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
    stream_keyed(seed, field_key(path), index)
}

/// [`stream`] for the field whose path has the key `key` ([`field_key`]).
pub fn stream_keyed(seed: u64, key: u64, index: usize) -> Rng {
    Rng::for_instance(seed ^ key, index)
}

/// Draws `scalar` for field `path` of global instance `index`.
pub fn draw(scalar: &Scalar, seed: u64, path: &str, index: usize, vars: &[f64]) -> f64 {
    match scalar {
        Scalar::Fixed(v) => *v,
        Scalar::Var(k) => vars[*k],
        _ => scalar.draw(&mut stream(seed, path, index), vars),
    }
}

/// [`draw`] for the field whose path has the key `key` ([`field_key`]): the same value, for a
/// caller that hashed the path once for every instance.
pub fn draw_keyed(scalar: &Scalar, seed: u64, key: u64, index: usize, vars: &[f64]) -> f64 {
    match scalar {
        Scalar::Fixed(v) => *v,
        Scalar::Var(k) => vars[*k],
        _ => scalar.draw(&mut stream_keyed(seed, key, index), vars),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distribution_parser_accepts_and_refuses_with_the_accepted_range() {
        assert_eq!(
            Scalar::distribution("uniform", &[1.0, 2.0]),
            Ok(Scalar::Uniform(1.0, 2.0))
        );
        assert_eq!(
            Scalar::distribution("normal", &[0.0, 0.0]),
            Ok(Scalar::Normal(0.0, 0.0))
        );
        assert_eq!(
            Scalar::distribution("log_uniform", &[0.5, 0.5]),
            Ok(Scalar::LogUniform(0.5, 0.5))
        );
        assert_eq!(
            Scalar::distribution("choice", &[3.0]),
            Ok(Scalar::Choice(vec![3.0]))
        );
        assert_eq!(
            Scalar::distribution("truncated_normal", &[1.0, 2.0, 0.0, 3.0]),
            Ok(Scalar::TruncatedNormal(1.0, 2.0, 0.0, 3.0))
        );
        assert_eq!(
            Scalar::distribution("lognormal", &[0.0, 0.5]),
            Ok(Scalar::LogNormal(0.0, 0.5))
        );
        for (kind, numbers, accepted) in [
            ("uniform", &[2.0, 1.0][..], "accepted: lo ≤ hi"),
            ("uniform", &[1.0][..], "accepted: two numbers"),
            ("normal", &[0.0, -1.0][..], "accepted: std ≥ 0"),
            ("log_uniform", &[0.0, 1.0][..], "accepted: 0 < lo ≤ hi"),
            (
                "truncated_normal",
                &[0.0, 1.0, 2.0, 2.0][..],
                "accepted: std ≥ 0 and lo < hi",
            ),
            (
                "truncated_normal",
                &[0.0, 1.0][..],
                "accepted: four numbers",
            ),
            ("lognormal", &[0.0, -1.0][..], "accepted: sigma ≥ 0"),
            ("choice", &[][..], "accepted: at least one value"),
            (
                "uniform",
                &[0.0, f64::INFINITY][..],
                "accepted: finite numbers",
            ),
            (
                "gamma",
                &[1.0, 2.0][..],
                "accepted: uniform, normal, truncated_normal, lognormal, log_uniform, choice",
            ),
        ] {
            let message = Scalar::distribution(kind, numbers).unwrap_err();
            assert!(
                message.contains(kind) && message.ends_with(accepted),
                "{message}"
            );
        }
    }
}
