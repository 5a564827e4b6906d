// sin and cos in f64 kernels. Vulkan's GLSL.std.450 Sin, Cos and Pow take 16- and 32-bit floats
// only: on an f64 value lavapipe returns 0, 1 and 0, and other drivers may refuse it or work in
// f32. So f64 kernels compute them here in f64 arithmetic: x reduced by π/2 (five 21-bit parts
// of π/2, so n · part is exact for |n| < 2³¹), then fdlibm's polynomials on [−π/4, π/4]. Within
// a few 1e-16 of libm for |x| < 2³¹ · π/2 (3.4e9 rad) where the driver keeps the order of the
// reduction's subtractions (lavapipe), NaN beyond. A driver may fold the parts into one rounded
// π/2 (WGSL's "Reassociation and Fusion" rules allow it, and naga marks no operation
// NoContraction; NVIDIA 580 on an H200 was seen to): the reduced angle is then off by
// n · 6.1e-17, about |x| · 3.9e-17 (4e-15 at 100 rad). f32 kernels use the built-ins: the
// precision prelude defines `sin_cos_real` for them.

const PIO2_1: f64 = 1.57079601287841797e+00;
const PIO2_2: f64 = 3.13916416416759603e-07;
const PIO2_3: f64 = 6.22337468017541973e-14;
const PIO2_4: f64 = -2.50827915849015253e-20;
const PIO2_5: f64 = 3.52156136256810525e-27;
const TWO_OVER_PI: f64 = 6.36619772367581382433e-01;
const SIN_COS_RANGE: f64 = 3.3732594e9;

// sin(r), |r| ≤ π/4 (fdlibm __kernel_sin).
fn kernel_sin(r: f64) -> f64 {
    let z = r * r;
    let p = -1.66666666666666324348e-01 + z * (8.33333333332248946124e-03 + z * (-1.98412698298579493134e-04
        + z * (2.75573137070700676789e-06 + z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10))));
    return r + r * z * p;
}

// cos(r), |r| ≤ π/4 (fdlibm __kernel_cos).
fn kernel_cos(r: f64) -> f64 {
    let z = r * r;
    let p = 4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * (2.48015872894767294178e-05
        + z * (-2.75573143513906633035e-07 + z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11))));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + z * z * p);
}

// (sin x, cos x); NaN for a non-finite x or |x| beyond `SIN_COS_RANGE`.
fn sin_cos_real(x: f64) -> vec2<f64> {
    if !(abs(x) < SIN_COS_RANGE) {
        let nan = (x - x) / (x - x);
        return vec2<f64>(nan, nan);
    }
    // k = x · 2/π rounded half away from zero, in f64 (`floor` of the magnitude): not through
    // a conversion to i32 of values up to 2³¹, which lavapipe on an AMD Zen 3 VM (AVX2, no
    // AVX-512; 2026-12-07) got wrong at 3.3e9 rad, where the Xeon's and Zen 5's lavapipe did
    // not. The quadrant k mod 4 (in [0, 4) for a negative k too) is exact: k / 4, its floor
    // and 4 times it are.
    let half: f64 = 0.5;
    let one: f64 = 1.0;
    let k = select(-one, one, x >= 0.0) * floor(abs(x) * TWO_OVER_PI + half);
    let quadrant = i32(k - 4.0 * floor(k * 0.25));
    let r = (((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3) - k * PIO2_4 - k * PIO2_5;
    let s = kernel_sin(r);
    let c = kernel_cos(r);
    switch quadrant {
        case 0: { return vec2<f64>(s, c); }
        case 1: { return vec2<f64>(c, -s); }
        case 2: { return vec2<f64>(-s, -c); }
        default: { return vec2<f64>(-c, s); }
    }
}

// atan2(y, x) in f64: the f32 built-in's angle (GLSL.std.450 Atan2 is 16/32-bit only), refined
// by two Newton steps on x sin θ − y cos θ = 0 (quadratic convergence: ~1e-7 → ~1e-14 → a few
// ulp). The vector is scaled to unit size first so that f32 neither overflows nor underflows.
// 0 at (0, 0), as the built-in; NaN for a non-finite input.
fn atan2_real(y: f64, x: f64) -> f64 {
    let size = max(abs(x), abs(y));
    if size == 0.0 {
        return 0.0;
    }
    let ys = y / size;
    let xs = x / size;
    var theta = f64(atan2(f32(ys), f32(xs)));
    for (var k = 0u; k < 2u; k++) {
        let sc = sin_cos_real(theta);
        let slope = xs * sc.y + ys * sc.x;
        if slope > 0.0 {
            theta -= (xs * sc.x - ys * sc.y) / slope;
        }
    }
    return theta;
}
