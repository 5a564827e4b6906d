//! The constraint interface: what a template's constraint is, whatever its kind.
//!
//! Every constraint — built-in (the `constraints` room holds one file per kind) or user-defined —
//! is a [`Constraint`]: it declares its rows (each position-, velocity- or acceleration-level,
//! `physics.md` §5), its per-instance parameters (SoA columns of the batch) and, per instance,
//! fills Jacobian blocks, position errors, velocity errors and the acceleration bias. The solver
//! assembles these without knowing which kind produced them. The interface lives with the model
//! because a template holds its constraints: the kinds depend on the model, never the reverse.
//!
//! Sign conventions (`physics.md` §1): `aerr(u̇) = G u̇ + k`, `k = aerr(u̇ = 0)` with prescribed
//! bodies keeping their prescribed accelerations; the solver's bias is `b = −k`.

use std::fmt::Debug;

use crate::math::lanes::{LANES, Lane};
use crate::math::{Mat3, Vec3, all_finite, normalize_quaternion, vec3};
use crate::model::{BodyId, Broadcast};
use simba::simd::SimdValue;

pub mod decoration;
mod lanes;
pub use decoration::{Decoration, PLANE_HALF_WIDTH, POINT_RADIUS};
pub use lanes::{
    BodyLanes, PREPARED_LANES, ParamLanes, PreparedLanes, ReportLanes, RowLanes,
    negated_point_row_lanes, point_row_lanes,
};

/// Largest number of rows of one constraint on the GPU (`array<Row, 3>`).
pub const MAX_GPU_ROWS: usize = 3;

/// Most rows one constraint may declare.
pub const MAX_ROWS: usize = 6;

/// What a row constrains (RBDL's `CustomConstraint` tags, `physics.md` §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowLevel {
    /// Holonomic: a position error exists and its derivatives give the velocity and acceleration
    /// errors.
    Position,
    /// Nonholonomic: a velocity error, no position error.
    Velocity,
    /// Acceleration only: neither position nor velocity error.
    Acceleration,
}

/// Accepted values of a parameter, checked whenever it is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Check {
    /// Any finite numbers.
    Finite,
    /// One finite number > 0.
    Positive,
    /// A frame `[e0, e1, e2, e3, x, y, z]`: a non-zero finite quaternion (normalised when stored)
    /// and a finite origin.
    Frame,
    /// `width / 3` vectors, each of unit length and mutually orthogonal (within 1e-9).
    UnitOrthogonal,
    /// A direction: a non-zero finite 3-vector (normalised when stored).
    Direction,
    /// A rotation: a non-zero finite quaternion `[e0, e1, e2, e3]` (normalised when stored).
    Quaternion,
}

impl Check {
    /// Human-readable accepted range, used in error messages.
    pub fn accepted(&self) -> &'static str {
        match self {
            Check::Finite => "finite numbers",
            Check::Positive => "a finite number > 0",
            Check::Frame => {
                "[e0, e1, e2, e3, x, y, z]: finite, quaternion not zero (it is normalised)"
            }
            Check::UnitOrthogonal => {
                "finite unit vectors (|n| = 1 ± 1e-9), mutually orthogonal (|ni·nj| ≤ 1e-9)"
            }
            Check::Direction => "a finite 3-vector, not zero (it is normalised)",
            Check::Quaternion => "[e0, e1, e2, e3]: finite, not zero (it is normalised)",
        }
    }

    /// Whether an accepted value is changed when stored (a quaternion or a direction is
    /// normalised); the other checks only look.
    pub fn normalises(&self) -> bool {
        matches!(self, Check::Frame | Check::Direction | Check::Quaternion)
    }

    /// Whether `values` are accepted as they are, for a check that does not
    /// [normalise](Self::normalises); `None` for one that does (its values must go through
    /// [`accept`](Self::accept), which may change them).
    pub fn holds(&self, values: &[f64]) -> Option<bool> {
        if self.normalises() {
            return None;
        }
        if !all_finite(values) {
            return Some(false);
        }
        Some(match self {
            Check::Positive => values.iter().all(|v| *v > 0.0),
            Check::UnitOrthogonal => {
                values.len().is_multiple_of(3)
                    && values.chunks(3).enumerate().all(|(i, n)| {
                        let n = vec3(n);
                        (n.norm() - 1.0).abs() <= 1e-9
                            && values
                                .chunks(3)
                                .skip(i + 1)
                                .all(|m| n.dot(&vec3(m)).abs() <= 1e-9)
                    })
            }
            _ => true,
        })
    }

    /// Checks `values` and normalises them where the check says so; `false` when they are not
    /// accepted, in which case `values` is left in an unspecified state (callers check a copy).
    pub fn accept(&self, values: &mut [f64]) -> bool {
        if let Some(holds) = self.holds(values) {
            return holds;
        }
        if !all_finite(values) {
            return false;
        }
        match self {
            Check::Frame => values.len() == 7 && normalize_quaternion(&mut values[..4]),
            Check::Quaternion => values.len() == 4 && normalize_quaternion(values),
            Check::Direction => {
                let n = (values.iter().map(|x| x * x).sum::<f64>()).sqrt();
                if values.len() == 3 && n.is_finite() && n > 0.0 {
                    values.iter_mut().for_each(|x| *x /= n);
                    true
                } else {
                    false
                }
            }
            // Every other check only looks: answered by `holds` above.
            Check::Finite | Check::Positive | Check::UnitOrthogonal => true,
        }
    }
}

/// One per-instance parameter of a constraint: a column of `width` f64 per instance.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    /// Name, as used by `Batch::param` and in errors.
    pub name: &'static str,
    /// Value given to new instances; its length is the column's width.
    pub default: Vec<f64>,
    /// Accepted values.
    pub check: Check,
}

/// Pose and motion of one body in Ground, as a constraint sees it.
///
/// For free bodies the accelerations are whatever the caller is evaluating at: zero when the
/// engine computes the bias `k`, the actual `u̇` when it checks acceleration errors directly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BodyKinematics {
    /// `R_GB`.
    pub rotation: Mat3,
    /// `p_GBo`.
    pub origin: Vec3,
    /// `w_GB` in Ground.
    pub ang_vel: Vec3,
    /// Velocity of the body origin in Ground.
    pub lin_vel: Vec3,
    /// `b_GB` in Ground.
    pub ang_acc: Vec3,
    /// Acceleration of the body origin in Ground.
    pub lin_acc: Vec3,
}

impl BodyKinematics {
    /// Ground: identity pose, at rest.
    pub fn ground() -> Self {
        Self {
            rotation: Mat3::identity(),
            origin: Vec3::zeros(),
            ang_vel: Vec3::zeros(),
            lin_vel: Vec3::zeros(),
            ang_acc: Vec3::zeros(),
            lin_acc: Vec3::zeros(),
        }
    }
}

/// Per-instance parameter values of one constraint, in the order of
/// [`Constraint::params`].
#[derive(Debug, Clone, Copy)]
pub struct Params<'a> {
    source: ParamSource<'a>,
    instance: usize,
}

/// Where a [`Params`] view reads: flat per-instance columns, or a batch's broadcast columns.
#[derive(Debug, Clone, Copy)]
enum ParamSource<'a> {
    Flat {
        columns: &'a [Vec<f64>],
        widths: &'a [usize],
    },
    Columns(&'a [Broadcast<f64>]),
}

impl<'a> Params<'a> {
    /// A view of instance `instance` over flat parameter columns of the given widths.
    pub fn new(columns: &'a [Vec<f64>], widths: &'a [usize], instance: usize) -> Self {
        Self {
            source: ParamSource::Flat { columns, widths },
            instance,
        }
    }

    /// A view of instance `instance` over [`Broadcast`] columns (a batch's own storage: a
    /// parameter every instance shares is stored once).
    pub fn of(columns: &'a [Broadcast<f64>], instance: usize) -> Self {
        Self {
            source: ParamSource::Columns(columns),
            instance,
        }
    }

    /// Parameter `k` of this instance.
    #[inline]
    pub fn get(&self, k: usize) -> &'a [f64] {
        match self.source {
            ParamSource::Flat { columns, widths } => {
                let w = widths[k];
                &columns[k][self.instance * w..(self.instance + 1) * w]
            }
            ParamSource::Columns(columns) => columns[k].row(self.instance),
        }
    }

    /// Parameter `k` as a 3-vector (its first three values).
    #[inline]
    pub fn vec3(&self, k: usize) -> Vec3 {
        vec3(self.get(k))
    }
}

/// One constraint row, as evaluated for one instance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Row {
    /// Jacobian blocks `(angular, linear)` on each of the constraint's bodies, in the order of
    /// [`Constraint::bodies`] (`G_e` of `physics.md`); only free bodies' blocks enter G, but all
    /// are used to report forces on every body, Ground included.
    pub jacobian: [[f64; 6]; 2],
    /// Position error (0 for velocity- and acceleration-level rows).
    pub position_error: f64,
    /// Velocity error (0 for acceleration-level rows).
    pub velocity_error: f64,
    /// `aerr` at the accelerations held in the kinematics (the bias `k` when free bodies' are 0).
    pub acceleration_error: f64,
}

/// Extra per-constraint outputs after the multipliers are known (all in Ground unless said).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ContactReport {
    /// Contact point in Ground.
    pub contact_point: [f64; 3],
    /// Signed separation, valid when the constraint is disabled.
    pub separation: f64,
    /// The kind's own force accessor (see [`ReportedExtras`]).
    pub contact_force: [f64; 3],
}

/// Which of [`ContactReport`]'s fields a constraint kind fills, and what `contact_force` means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportedExtras {
    /// `contact_point` is meaningful.
    pub contact_point: bool,
    /// `separation` is meaningful.
    pub separation: bool,
    /// `contact_force` is meaningful; its meaning is documented by the kind.
    pub contact_force: bool,
}

impl ReportedExtras {
    /// Contact point, separation and contact force: what a contact with a plane reports.
    pub const ALL: Self = Self {
        contact_point: true,
        separation: true,
        contact_force: true,
    };
}

/// A constraint kind: the formulas, the rows and the parameters.
///
/// Implementations must be pure functions of their inputs (determinism across threads and
/// backends depends on it).
pub trait Constraint: Send + Sync + Debug {
    /// Short name of the kind, e.g. `sphere_on_plane`.
    fn kind_name(&self) -> &'static str;

    /// Bodies the constraint acts on (1 or 2), in the order of [`Row::jacobian`]'s blocks.
    fn bodies(&self) -> &[BodyId];

    /// Per-instance parameters.
    fn params(&self) -> Vec<ParamSpec>;

    /// Level of each row, in internal row order.
    fn row_levels(&self) -> &[RowLevel];

    /// How rows are reported: entry `s` of the reported triple/vector comes from internal row
    /// `report_slots()[s]`, or is 0 when `None` (e.g. slip of a sliding sphere is not reported).
    fn report_slots(&self) -> &[Option<usize>];

    /// Fills one [`Row`] per entry of [`row_levels`](Self::row_levels) for one instance.
    /// `kinematics` follows [`bodies`](Self::bodies).
    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]);

    /// Values [`evaluate_lanes`](Self::evaluate_lanes) needs that depend on the parameters
    /// alone (a plane frame's rotation, say), computed once per call for the lanes' instances
    /// and passed back at every evaluation of the call. The default prepares nothing.
    fn prepare_lanes(&self, _params: &ParamLanes<'_>, _prepared: &mut PreparedLanes) {}

    /// [`evaluate`](Self::evaluate) for [`LANES`] instances at once: the CPU fast path calls
    /// this. The default runs [`evaluate`](Self::evaluate) lane by lane, so every constraint
    /// works on the fast path; the built-in kinds override it with the same formulas on
    /// [`Lane`] values. An override must give, in each lane, what `evaluate` gives for that
    /// lane's instance (to rounding), and nothing in one lane may depend on another.
    fn evaluate_lanes(
        &self,
        params: &ParamLanes<'_>,
        _prepared: &PreparedLanes,
        kinematics: &[BodyLanes],
        rows: &mut [RowLanes],
    ) {
        let mut scalar_rows = [Row::default(); MAX_ROWS];
        let rows_here = rows.len().min(MAX_ROWS);
        let mut kin = [BodyKinematics::ground(); 2];
        for l in 0..LANES {
            for (k, body) in kin.iter_mut().zip(kinematics) {
                *k = body.lane(l);
            }
            let bodies = kinematics.len().min(2);
            self.evaluate(
                &params.lane(l),
                &kin[..bodies],
                &mut scalar_rows[..rows_here],
            );
            for (row, scalar) in rows.iter_mut().zip(&scalar_rows[..rows_here]) {
                row.set_lane(l, scalar);
            }
        }
    }

    /// Which extra outputs [`report`](Self::report) fills.
    fn reported_extras(&self) -> ReportedExtras {
        ReportedExtras::default()
    }

    /// Extra outputs given the multipliers (internal row order; zeros when disabled).
    fn report(
        &self,
        _params: &Params<'_>,
        _kinematics: &[BodyKinematics],
        _multipliers: &[f64],
    ) -> ContactReport {
        ContactReport::default()
    }

    /// [`report`](Self::report) for [`LANES`] instances at once (the CPU fast path's
    /// evaluation calls this), with what [`prepare_lanes`](Self::prepare_lanes) prepared.
    /// `multipliers` are in internal row order, zeros where the constraint is disabled. The
    /// default runs [`report`](Self::report) lane by lane; an override must give, in each lane,
    /// what `report` gives for that lane's instance (to rounding).
    fn report_lanes(
        &self,
        params: &ParamLanes<'_>,
        _prepared: &PreparedLanes,
        kinematics: &[BodyLanes],
        multipliers: &[Lane],
    ) -> ReportLanes {
        let mut out = ReportLanes::default();
        let mut kin = [BodyKinematics::ground(); 2];
        let mut lambda = [0.0; MAX_ROWS];
        let rows = multipliers.len().min(MAX_ROWS);
        for l in 0..LANES {
            for (k, body) in kin.iter_mut().zip(kinematics) {
                *k = body.lane(l);
            }
            for (x, m) in lambda.iter_mut().zip(&multipliers[..rows]) {
                *x = m.extract(l);
            }
            let bodies = kinematics.len().min(2);
            let report = self.report(&params.lane(l), &kin[..bodies], &lambda[..rows]);
            out.set_lane(l, &report);
        }
        out
    }

    /// Rows of the optional position-level assembly condition (RBDL's
    /// `CalcAssemblyPositionError` and its Jacobian), at most [`MAX_ROWS`]. When not 0,
    /// `assemble_positions` (the CPU assembly) drives these rows' position
    /// errors to zero in place of the constraint's own [`RowLevel::Position`] rows — how a
    /// velocity-level constraint such as rolling states where its contact should be. 0 (the
    /// default): the constraint's own position rows are used. Time stepping and projection always
    /// use the constraint's own rows.
    fn assembly_position_rows(&self) -> usize {
        0
    }

    /// Fills `jacobian` (the derivative of each error with respect to the free bodies'
    /// mobilities, as in [`Row::jacobian`]) and `position_error` of each of the
    /// [`assembly_position_rows`](Self::assembly_position_rows) rows; other fields are ignored.
    fn assembly_position(
        &self,
        _params: &Params<'_>,
        _kinematics: &[BodyKinematics],
        _rows: &mut [Row],
    ) {
    }

    /// Rows of the optional velocity-level assembly condition (RBDL's
    /// `CalcAssemblyVelocityError` and its Jacobian), at most [`MAX_ROWS`]. When not 0,
    /// `assemble_velocities` (the CPU assembly) zeroes these rows' velocity
    /// errors in place of the constraint's own rows with a velocity error. 0 (the default): the
    /// constraint's own rows are used.
    fn assembly_velocity_rows(&self) -> usize {
        0
    }

    /// Fills `jacobian` and `velocity_error` of each of the
    /// [`assembly_velocity_rows`](Self::assembly_velocity_rows) rows; other fields are ignored.
    /// The velocity error must be affine in the free bodies' velocities with that Jacobian.
    fn assembly_velocity(
        &self,
        _params: &Params<'_>,
        _kinematics: &[BodyKinematics],
        _rows: &mut [Row],
    ) {
    }

    /// What a picture of this constraint shows for one instance, in Ground (`render` draws it):
    /// its surfaces, its points, the contact point and the force for the given multipliers
    /// (internal row order; zeros when disabled or separated). The default shows nothing of the
    /// constraint itself, and a picture then shows its bodies as frames.
    fn decorations(
        &self,
        _params: &Params<'_>,
        _kinematics: &[BodyKinematics],
        _multipliers: &[f64],
    ) -> Vec<Decoration> {
        Vec::new()
    }

    /// The WGSL twin of [`evaluate`](Self::evaluate) (and of [`report`](Self::report)), which
    /// the GPU path splices into its kernels; `None`: the constraint runs on the CPU only, and
    /// building a GPU kernel for its template is an error naming it.
    fn wgsl(&self) -> Option<WgslConstraint> {
        None
    }
}

/// A constraint's GPU code: a WGSL source and two expressions the kernel evaluates per instance.
///
/// The kernel prepends `alias real = f32;` (or `f64`) and provides, from
/// `shaders/common.wgsl` and `shaders/dynamics.wgsl`: `struct BodyKinematics { rotation:
/// mat3x3<real>, origin, ang_vel, lin_vel, ang_acc, lin_acc: vec3<real> }`, `struct Row {
/// jac_a_ang, jac_a_lin, jac_b_ang, jac_b_lin: vec3<real>, position_error, velocity_error,
/// acceleration_error: real }`, `struct ContactReport { contact_point: vec3<real>, separation:
/// real, contact_force: vec3<real> }`, `rotation_from_quaternion(vec4<real>) -> mat3x3<real>`
/// and `two_body_row(c_a, c_b, e, position_error, velocity_error, acceleration_error) -> Row`.
///
/// In the expressions, `p` is an `array<real, N>` holding this instance's parameters flattened
/// in [`Constraint::params`] order (N = the sum of their widths, at least 1), `a` and `b` are
/// the `BodyKinematics` of [`Constraint::bodies`] (`b` repeats `a` for one-body constraints)
/// and, in `report`, `multipliers` is a `vec3<real>` in internal row order. The rows follow the
/// same conventions as [`Row`] on the CPU: `jac_a_*`/`jac_b_*` are the blocks on `a` and `b`,
/// and the acceleration error is evaluated at the accelerations in the kinematics. On the GPU a
/// constraint has at most 3 rows.
///
/// Every loop in the source must end by its own bound (a constant trip count, or a counter
/// against a fixed limit): the kernels are built without naga's hidden loop counters
/// (`gpu::cache`), which cost the stepping kernels a factor of 7–11 on an H100, so a loop
/// that never ends is undefined behaviour for the driver rather than a hang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgslConstraint {
    /// Name of the source in error messages (e.g. `knife_edge.wgsl`); sources with the same
    /// name are spliced once per kernel, so it must identify the source.
    pub file: String,
    /// WGSL declarations (functions, constants, structs) the expressions use. Names should
    /// carry the constraint's prefix to stay clear of the engine's own.
    pub source: String,
    /// Expression of type `array<Row, 3>`: the rows (unused entries are ignored).
    pub evaluate: String,
    /// Expression of type `ContactReport`, or `None` to report zeros.
    pub report: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_accept_and_reject() {
        assert!(Check::Positive.accept(&mut [0.1]));
        assert!(!Check::Positive.accept(&mut [0.0]));
        assert!(!Check::Positive.accept(&mut [f64::NAN]));
        assert!(!Check::Finite.accept(&mut [1.0, f64::INFINITY]));
        let mut f = [2.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0];
        assert!(Check::Frame.accept(&mut f));
        assert_eq!(f[0], 1.0);
        assert!(!Check::Frame.accept(&mut [0.0; 7]));
        assert!(Check::UnitOrthogonal.accept(&mut [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]));
        assert!(!Check::UnitOrthogonal.accept(&mut [1.0, 0.0, 0.0, 0.6, 0.8, 0.0]));
        assert!(!Check::UnitOrthogonal.accept(&mut [1.1, 0.0, 0.0]));
        assert!(!Check::UnitOrthogonal.accept(&mut [1.0, 0.0, 0.0, 0.0]));
    }

    /// `holds` answers as `accept` does for the checks that only look, leaves the values
    /// alone, and declines for the ones that normalise.
    #[test]
    fn holds_is_accept_without_the_write() {
        let rows: [&[f64]; 8] = [
            &[0.1],
            &[0.0],
            &[f64::NAN, 1.0],
            &[1.0, 0.0, 0.0],
            &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            &[1.0, 0.0, 0.0, 0.6, 0.8, 0.0],
            &[0.0, 0.6, 0.8, 1.0, 0.0, 0.0, 0.0, 0.8, -0.6],
            &[2.0, 0.0, 0.0, 0.0],
        ];
        let checks = [
            Check::Finite,
            Check::Positive,
            Check::Frame,
            Check::UnitOrthogonal,
            Check::Direction,
            Check::Quaternion,
        ];
        for check in checks {
            for row in rows {
                let mut copy = row.to_vec();
                let accepted = check.accept(&mut copy);
                match check.holds(row) {
                    Some(holds) => {
                        assert!(!check.normalises());
                        assert_eq!(holds, accepted, "{check:?} {row:?}");
                        if accepted {
                            assert_eq!(copy, row, "{check:?} {row:?}");
                        }
                    }
                    None => assert!(check.normalises()),
                }
            }
        }
    }
}
