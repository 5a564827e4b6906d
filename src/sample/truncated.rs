//! The standard normal's distribution function and its inverse, for sampling a normal
//! truncated to `[lo, hi]` by inversion (one uniform per draw, exact to rounding, no loop),
//! with Robert's exponential-proposal rejection only where the interval lies so far in a tail
//! that its probability underflows.

use rand_distr::{Distribution, Exp1};

use super::Rng;

/// `Φ(x)`, the standard normal distribution function (through `erfc`, accurate in both tails).
pub fn phi(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// `Φ⁻¹(p)` for `p ∈ (0, 1)`: Acklam's rational approximation (relative error 1.15e-9),
/// refined by one Halley step on [`phi`] to full double precision.
pub fn phi_inverse(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const LOW: f64 = 0.02425;
    let x = if p < LOW {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    // Halley's step on Φ(x) − p.
    let e = phi(x) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (0.5 * x * x).exp();
    x - u / (1.0 + 0.5 * x * u)
}

/// Most proposals of the tail sampler before it settles for the interval's mean-like point.
const MAX_PROPOSALS: usize = 10_000;

/// A standard normal truncated to `[a, b]` (`a < b`, either may be infinite).
pub fn standard(rng: &mut Rng, a: f64, b: f64) -> f64 {
    // Work in the lower half, where Φ keeps its relative precision.
    if a > 0.0 {
        return -standard(rng, -b, -a);
    }
    let (pa, pb) = (phi(a), phi(b));
    if pb - pa > 1e-300 {
        let u = pa + (pb - pa) * rng.unit();
        return phi_inverse(u).clamp(a, b);
    }
    // b ≪ 0: the interval's probability underflows. Sample −x from the upper tail beyond −b
    // (Robert 1995: a translated exponential proposal, accepted with exp(−(z − λ)²/2)).
    let (lo, hi) = (-b, -a);
    let lambda = 0.5 * (lo + (lo * lo + 4.0).sqrt());
    for _ in 0..MAX_PROPOSALS {
        let e: f64 = Exp1.sample(rng);
        let z = lo + e / lambda;
        if z <= hi && rng.unit() <= (-0.5 * (z - lambda) * (z - lambda)).exp() {
            return -z;
        }
    }
    // Bounded: the conditional mean's first-order value.
    -(lo + 1.0 / lo).min(hi)
}
