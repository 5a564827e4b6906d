// The vocabulary the unilateral contact laws share, one contact (contact_laws.wgsl) or several
// (contact_laws_general.wgsl): row-set and mode codes, `phase.rs`'s and `impact.rs`'s
// constants, the tolerances of unilateral.md §8, and the small helpers both twins use.

// Loop iterations this invocation has run: the several-contact laws and the event kernels count
// every loop they run (`SOFTWARE_LOOP_BUDGET` in src/gpu/contact_laws/general.rs says why).
var<private> loop_count: u32;

// A contact's rows in a linear step (`RowSet`).
const SET_OFF: u32 = 0u;
const SET_STICK: u32 = 1u;
const SET_SLIDE: u32 = 2u;

// A contact's mode (`ContactMode`): open, sticking, sliding along a direction.
const MODE_OPEN: u32 = 0u;
const MODE_STICK: u32 = 1u;
const MODE_SLIDE: u32 = 2u;
// The mode determination's extra state: sticking rows dropped, friction at the static cone.
const MODE_IMPENDING: u32 = 3u;

// `phase.rs`'s and `impact.rs`'s constants; the direction and gain tolerances are widened to what f32 resolves.
const MAX_DIRECTION_ITERATIONS: u32 = 50u;
const PAINLEVE: real = 1e-8;
const GUARD_STEPS: u32 = 50u;
const PI_REAL: real = 3.141592653589793;
const TAU_REAL: real = 6.283185307179586;

// The residual slip angle at which a sliding direction counts as settled: the CPU's 1e-12 in
// f64; in f32, what its rounding resolves of an end slip `slip` that is a difference of row
// velocities of size `scale` (a slow end slip's angle is known only to eps · scale / slip).
fn direction_tolerance(scale: real, slip: real) -> real {
    if REAL_EPSILON > 1e-10 {
        return 64.0 * REAL_EPSILON * (1.0 + scale / slip);
    }
    return 1e-12;
}

fn gain_tolerance() -> real {
    return max(1e-12, 4096.0 * REAL_EPSILON);
}

// The tolerances of unilateral.md §8 for one instance (`Tolerances`).
struct ContactTolerances {
    p_tol: real,
    v_tol: real,
    v_cap: real,
    v_roll: real,
    f_tol: real,
    a_tol: real,
}

fn hypot2(v: vec2<real>) -> real {
    return sqrt(v.x * v.x + v.y * v.y);
}

// `a` wrapped into (−π, π] (`wrap_angle`).
fn wrap_angle(a: real) -> real {
    let r = a - TAU_REAL * floor(a / TAU_REAL);
    return select(r, r - TAU_REAL, r > PI_REAL);
}
