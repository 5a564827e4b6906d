//! The motion-law interface: a prescribed body's pose, velocity and acceleration as a function
//! of time (`physics.md` §1, §6). The laws themselves live in the `motion` room; the interface
//! lives with the model because a template's driven bodies hold their law.

use std::fmt::Debug;

#[cfg(doc)]
use crate::math::lanes::LANES;
use crate::math::lanes::{Lane, values};
use crate::math::quaternion_from_rotation;
use crate::model::constraint::{BodyKinematics, BodyLanes, ParamLanes, ParamSpec, Params};

/// Most parameter values (summed over its parameters) a law may have on the GPU
/// (`MOTION_PARAMS_CAP` in the kernels).
pub const MOTION_PARAMS_CAP: usize = 48;

/// A law of time for a prescribed body: its pose, velocity and acceleration at any `t`, from
/// per-instance parameters.
///
/// Implementations must be pure functions of `(params, t)` and consistent: the velocity the
/// time derivative of the pose, the acceleration that of the velocity (the library's tests
/// check the built-in laws by finite differences; do the same for yours).
pub trait MotionLaw: Send + Sync + Debug {
    /// Short name of the law, e.g. `tilting`.
    fn kind_name(&self) -> &'static str;

    /// Per-instance parameters (columns of the batch, checked when written).
    fn params(&self) -> Vec<ParamSpec>;

    /// The body's motion at time `t`, all in Ground: `rotation` = `R_GF`, `origin` = `p_GFo`,
    /// `ang_vel` = `w_F`, `lin_vel` = `ṗ_GFo`, `ang_acc` = `b_F`, `lin_acc` = `p̈_GFo`.
    fn evaluate(&self, params: &Params<'_>, t: f64) -> BodyKinematics;

    /// [`evaluate`](Self::evaluate) for [`LANES`] instances at once, lane `l` at the time in
    /// lane `l` of `t`: the CPU fast path calls this at every stage. The default runs
    /// `evaluate` lane by lane, so every law works on the fast path; the built-in laws
    /// override it with the same formulas on [`Lane`] values. An override must give, in each
    /// lane, what `evaluate` gives for that lane's instance (to rounding), and nothing in one
    /// lane may depend on another.
    fn evaluate_lanes(&self, params: &ParamLanes<'_>, t: Lane) -> BodyLanes {
        let times = values(t);
        let mut out = BodyLanes::ground();
        for (l, t) in times.into_iter().enumerate() {
            out.set_lane(l, &self.evaluate(&params.lane(l), t));
        }
        out
    }

    /// The WGSL twin of [`evaluate`](Self::evaluate); `None`: the law runs on the CPU only and
    /// building a GPU kernel for its template is an error naming it. Its loops must end by
    /// their own bounds, as a constraint's must ([`WgslConstraint`](crate::model::WgslConstraint)).
    fn wgsl(&self) -> Option<WgslMotion> {
        None
    }
}

/// A law's GPU code: a WGSL source and an expression of type `BodyKinematics`.
///
/// In the expression, `p` is an `array<real, MOTION_PARAMS_CAP>` holding this instance's
/// parameters flattened in [`MotionLaw::params`] order and `t` the time (`real`). Besides the
/// types of [`WgslConstraint`](crate::model::constraint::WgslConstraint), the source may use
/// `shaders/motion.wgsl`: `axis_rotation(a, θ) -> mat3x3<real>`, `struct RotationChain`,
/// `rotation_chain() -> RotationChain`, `rotation_chain_then(chain, axis, θ, θ̇, θ̈)` and, about a
/// coordinate axis `k` (0, 1, 2) of the frame reached, `rotation_chain_then_about(chain, k, θ, θ̇, θ̈)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgslMotion {
    /// Name of the source in error messages; sources with the same name are spliced once.
    pub file: String,
    /// WGSL declarations the expression uses (names should carry the law's prefix).
    pub source: String,
    /// Expression of type `BodyKinematics`.
    pub evaluate: String,
}

/// A law's motion at one time as batch columns: pose `[e0, e1, e2, e3, x, y, z]` (e0 ≥ 0),
/// velocity `[w, v]`, acceleration `[b, a]`.
pub fn motion_columns(k: &BodyKinematics) -> ([f64; 7], [f64; 6], [f64; 6]) {
    let q = quaternion_from_rotation(&k.rotation);
    let o = &k.origin;
    (
        [q[0], q[1], q[2], q[3], o.x, o.y, o.z],
        [
            k.ang_vel.x,
            k.ang_vel.y,
            k.ang_vel.z,
            k.lin_vel.x,
            k.lin_vel.y,
            k.lin_vel.z,
        ],
        [
            k.ang_acc.x,
            k.ang_acc.y,
            k.ang_acc.z,
            k.lin_acc.x,
            k.lin_acc.y,
            k.lin_acc.z,
        ],
    )
}
