//! A user's own SphereOnPlaneContact, written against the public constraint interface only
//! (CPU formulas, WGSL twin, report, assembly conditions), gives the built-in's results on
//! Simbody's golden files on both paths; its optional assembly conditions (RBDL's
//! `CalcAssemblyPositionError` / `CalcAssemblyVelocityError`) steer position and velocity
//! assembly; the GPU's limits on a constraint (3 rows, 32 parameter values) are typed errors.
//!
//! The formulation deliberately differs from the built-in's where the physics allows: velocity
//! errors are the slip of the ball's material point at the contact against the plane's
//! (`v_B(C) − v_F(C)`), where the built-in differentiates the sphere centre's motion seen from F.

use crate::common;
use common::{device, golden_dir};

use std::collections::BTreeMap;
use std::sync::Arc;

use simbatch::constraints::{
    BodyKinematics, Check, Constraint, ContactReport, ParamSpec, Params, ReportedExtras, Row,
    RowLevel, WgslConstraint, plane_frame, point_row,
};
use simbatch::cpu::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use simbatch::golden::{
    self, ContactStructure, Record, Report, builtin_contact, compare_contact, compare_evaluations,
    contact_batch, contact_batch_with,
};
use simbatch::math::Vec3;
use simbatch::prelude::*;
use simbatch::scenarios::Rng;

/// Parameter indices, in `params()` order.
const PLANE_FRAME: usize = 0;
const SPHERE_CENTER: usize = 1;
const RADIUS: usize = 2;
/// Only with assembly conditions: where in the plane (x, y in P) the contact should be.
const CONTACT_XY: usize = 3;

/// A sphere on body `ball` touching a plane on body `plane`, rows `[z]` or `[z, x, y]`.
#[derive(Debug)]
struct MySphereOnPlane {
    bodies: [BodyId; 2],
    rolling: bool,
    /// Declares the assembly conditions: position — the contact sits at `contact_xy` in the
    /// plane, on it; velocity — no slip in any direction and no spin about the normal.
    assembly: bool,
}

/// Contact geometry and motion in Ground, shared by rows, report and assembly conditions.
struct Contact {
    axes: [Vec3; 3],
    /// Plane origin `P_o`.
    plane_origin: Vec3,
    /// Sphere centre `O`.
    center: Vec3,
    /// Contact point `C = O − r Pz`.
    point: Vec3,
    /// Signed distance `(O − P_o)·Pz − r`.
    height: f64,
    /// `v_B(C) − v_F(C)`: the ball's material point at C against the plane's.
    slip: Vec3,
    radius: f64,
}

fn contact(params: &Params<'_>, plane: &BodyKinematics, ball: &BodyKinematics) -> Contact {
    let (r_fp, p_fp) = plane_frame(params.get(PLANE_FRAME));
    let r_gp = plane.rotation * r_fp;
    let axes = [0, 1, 2].map(|k| r_gp.column(k).into_owned());
    let radius = params.get(RADIUS)[0];
    let plane_origin = plane.origin + plane.rotation * p_fp;
    let center = ball.origin + ball.rotation * params.vec3(SPHERE_CENTER);
    let point = center - radius * axes[2];
    let v_ball = ball.lin_vel + ball.ang_vel.cross(&(point - ball.origin));
    let v_plane = plane.lin_vel + plane.ang_vel.cross(&(point - plane.origin));
    Contact {
        axes,
        plane_origin,
        center,
        point,
        height: (center - plane_origin).dot(&axes[2]) - radius,
        slip: v_ball - v_plane,
        radius,
    }
}

/// Jacobian blocks of a point `p` (in Ground) of both bodies moving along `e`.
fn blocks(plane: &BodyKinematics, ball: &BodyKinematics, p: &Vec3, e: &Vec3) -> [[f64; 6]; 2] {
    [
        point_row(&(p - plane.origin), &(-e)),
        point_row(&(p - ball.origin), e),
    ]
}

impl Constraint for MySphereOnPlane {
    fn kind_name(&self) -> &'static str {
        "my_sphere_on_plane"
    }

    fn bodies(&self) -> &[BodyId] {
        &self.bodies
    }

    fn params(&self) -> Vec<ParamSpec> {
        let mut p = vec![
            ParamSpec {
                name: "plane_frame",
                default: vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                check: Check::Frame,
            },
            ParamSpec {
                name: "sphere_center",
                default: vec![0.0; 3],
                check: Check::Finite,
            },
            ParamSpec {
                name: "radius",
                default: vec![1.0],
                check: Check::Positive,
            },
        ];
        if self.assembly {
            p.push(ParamSpec {
                name: "contact_xy",
                default: vec![0.0; 2],
                check: Check::Finite,
            });
        }
        p
    }

    fn row_levels(&self) -> &[RowLevel] {
        if self.rolling {
            &[RowLevel::Position, RowLevel::Velocity, RowLevel::Velocity]
        } else {
            &[RowLevel::Position]
        }
    }

    fn report_slots(&self) -> &[Option<usize>] {
        if self.rolling {
            &[Some(1), Some(2), Some(0)]
        } else {
            &[None, None, Some(0)]
        }
    }

    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let k = contact(params, plane, ball);
        let [px, py, pz] = k.axes;
        // Accelerations: the sphere centre's motion seen from the plane (physics.md §2).
        let (w_f, w_b) = (plane.ang_vel, ball.ang_vel);
        let o_b = k.center - ball.origin;
        let d = k.center - plane.origin;
        let v_o = ball.lin_vel + w_b.cross(&o_b);
        let a_o = ball.lin_acc + ball.ang_acc.cross(&o_b) + w_b.cross(&w_b.cross(&o_b));
        let d_dot = v_o - plane.lin_vel;
        let a_fo = a_o - plane.lin_acc - plane.ang_acc.cross(&d) - 2.0 * w_f.cross(&d_dot)
            + w_f.cross(&w_f.cross(&d));
        rows[0] = Row {
            jacobian: blocks(plane, ball, &k.point, &pz),
            position_error: k.height,
            velocity_error: k.slip.dot(&pz),
            acceleration_error: a_fo.dot(&pz),
        };
        if self.rolling {
            let a_fc =
                a_fo - k.radius * ((ball.ang_acc - plane.ang_acc) - w_f.cross(&w_b)).cross(&pz);
            for (row, e) in rows[1..3].iter_mut().zip([px, py]) {
                *row = Row {
                    jacobian: blocks(plane, ball, &k.point, &e),
                    position_error: 0.0,
                    velocity_error: k.slip.dot(&e),
                    acceleration_error: a_fc.dot(&e),
                };
            }
        }
    }

    fn reported_extras(&self) -> ReportedExtras {
        ReportedExtras {
            contact_point: true,
            separation: true,
            contact_force: true,
        }
    }

    fn report(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        multipliers: &[f64],
    ) -> ContactReport {
        let k = contact(params, &kinematics[0], &kinematics[1]);
        let [px, py, pz] = k.axes;
        let mut force = multipliers[0] * pz;
        if self.rolling {
            force += multipliers[1] * px + multipliers[2] * py;
        }
        ContactReport {
            contact_point: k.point.into(),
            separation: k.height,
            contact_force: (-force).into(),
        }
    }

    fn assembly_position_rows(&self) -> usize {
        if self.assembly { 3 } else { 0 }
    }

    /// On the plane, with the sphere centre over `contact_xy`: `(O − P_o)·Px − x₀`,
    /// `(O − P_o)·Py − y₀`. Moving O along Px moves these errors; rotating the plane sweeps its
    /// axes about `F_o`, hence the blocks at O.
    fn assembly_position(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        rows: &mut [Row],
    ) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let k = contact(params, plane, ball);
        let xy = params.get(CONTACT_XY);
        let offset = k.center - k.plane_origin;
        rows[0] = Row {
            jacobian: blocks(plane, ball, &k.point, &k.axes[2]),
            position_error: k.height,
            ..Row::default()
        };
        for (row, (e, target)) in rows[1..3]
            .iter_mut()
            .zip([(k.axes[0], xy[0]), (k.axes[1], xy[1])])
        {
            *row = Row {
                jacobian: blocks(plane, ball, &k.center, &e),
                position_error: offset.dot(&e) - target,
                ..Row::default()
            };
        }
    }

    fn assembly_velocity_rows(&self) -> usize {
        if self.assembly { 4 } else { 0 }
    }

    /// No slip along Pz, Px, Py and no spin about the normal: `(ω_B − ω_F)·Pz`.
    fn assembly_velocity(
        &self,
        params: &Params<'_>,
        kinematics: &[BodyKinematics],
        rows: &mut [Row],
    ) {
        let (plane, ball) = (&kinematics[0], &kinematics[1]);
        let k = contact(params, plane, ball);
        for (row, e) in rows[..3].iter_mut().zip(k.axes) {
            *row = Row {
                jacobian: blocks(plane, ball, &k.point, &e),
                velocity_error: k.slip.dot(&e),
                ..Row::default()
            };
        }
        let pz = k.axes[2];
        rows[3] = Row {
            jacobian: [
                [-pz.x, -pz.y, -pz.z, 0.0, 0.0, 0.0],
                [pz.x, pz.y, pz.z, 0.0, 0.0, 0.0],
            ],
            velocity_error: (ball.ang_vel - plane.ang_vel).dot(&pz),
            ..Row::default()
        };
    }

    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "my_sphere_on_plane.wgsl".into(),
            source: MY_SPHERE_WGSL.into(),
            evaluate: format!("my_sphere_rows(p, {}, a, b)", self.rolling),
            report: Some(format!(
                "my_sphere_report(p, {}, a, b, multipliers)",
                self.rolling
            )),
        })
    }
}

/// The WGSL twin of [`MySphereOnPlane`]: the same names, in the same order.
const MY_SPHERE_WGSL: &str = r#"
struct MyContact {
    px: vec3<real>,
    py: vec3<real>,
    pz: vec3<real>,
    plane_origin: vec3<real>,
    center: vec3<real>,
    point: vec3<real>,
    height: real,
    slip: vec3<real>,
    radius: real,
}

fn my_contact(p: array<real, PARAMS_CAP>, plane: BodyKinematics, ball: BodyKinematics) -> MyContact {
    let r_fp = rotation_from_quaternion(vec4<real>(p[0], p[1], p[2], p[3]));
    let p_fp = vec3<real>(p[4], p[5], p[6]);
    let r_gp = plane.rotation * r_fp;
    let radius = p[10];
    let plane_origin = plane.origin + plane.rotation * p_fp;
    let center = ball.origin + ball.rotation * vec3<real>(p[7], p[8], p[9]);
    let point = center - radius * r_gp[2];
    let v_ball = ball.lin_vel + cross(ball.ang_vel, point - ball.origin);
    let v_plane = plane.lin_vel + cross(plane.ang_vel, point - plane.origin);
    return MyContact(r_gp[0], r_gp[1], r_gp[2], plane_origin, center, point,
                     dot(center - plane_origin, r_gp[2]) - radius, v_ball - v_plane, radius);
}

fn my_row(plane: BodyKinematics, ball: BodyKinematics, at: vec3<real>, e: vec3<real>,
          position_error: real, velocity_error: real, acceleration_error: real) -> Row {
    let c_f = at - plane.origin;
    let c_b = at - ball.origin;
    return Row(cross(c_f, -e), -e, cross(c_b, e), e, position_error, velocity_error, acceleration_error);
}

fn my_sphere_rows(p: array<real, PARAMS_CAP>, rolling: bool, plane: BodyKinematics, ball: BodyKinematics) -> array<Row, 3> {
    let k = my_contact(p, plane, ball);
    let w_f = plane.ang_vel;
    let w_b = ball.ang_vel;
    let o_b = k.center - ball.origin;
    let d = k.center - plane.origin;
    let v_o = ball.lin_vel + cross(w_b, o_b);
    let a_o = ball.lin_acc + cross(ball.ang_acc, o_b) + cross(w_b, cross(w_b, o_b));
    let d_dot = v_o - plane.lin_vel;
    let a_fo = a_o - plane.lin_acc - cross(plane.ang_acc, d) - 2.0 * cross(w_f, d_dot)
        + cross(w_f, cross(w_f, d));
    var rows: array<Row, 3>;
    rows[0] = my_row(plane, ball, k.point, k.pz, k.height, dot(k.slip, k.pz), dot(a_fo, k.pz));
    if rolling {
        let a_fc = a_fo - k.radius * cross((ball.ang_acc - plane.ang_acc) - cross(w_f, w_b), k.pz);
        rows[1] = my_row(plane, ball, k.point, k.px, 0.0, dot(k.slip, k.px), dot(a_fc, k.px));
        rows[2] = my_row(plane, ball, k.point, k.py, 0.0, dot(k.slip, k.py), dot(a_fc, k.py));
    }
    return rows;
}

fn my_sphere_report(p: array<real, PARAMS_CAP>, rolling: bool, plane: BodyKinematics, ball: BodyKinematics, multipliers: vec3<real>) -> ContactReport {
    let k = my_contact(p, plane, ball);
    var force = multipliers.x * k.pz;
    if rolling {
        force += multipliers.y * k.px + multipliers.z * k.py;
    }
    return ContactReport(k.point, k.height, -force);
}
"#;

/// Spheres get the user's constraint; point contacts keep the built-in.
fn make(s: &ContactStructure<'_>) -> simbatch::Result<Arc<dyn Constraint>> {
    if s.kind == "sphere_on_plane" {
        Ok(Arc::new(MySphereOnPlane {
            bodies: [s.plane, s.body],
            rolling: s.rolling,
            assembly: false,
        }))
    } else {
        builtin_contact(s)
    }
}

/// The golden sphere records, grouped by batch structure.
fn sphere_groups(records: &[Record]) -> BTreeMap<String, Vec<&Record>> {
    let mut groups: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records {
        if r.kind().unwrap() == "sphere_on_plane" {
            groups
                .entry(golden::group_key(r).unwrap())
                .or_default()
                .push(r);
        }
    }
    groups
}

fn golden_records() -> Vec<Record> {
    let records = golden::read_dir(&golden_dir()).unwrap();
    assert!(
        records
            .iter()
            .any(|r| r.kind().ok() == Some("sphere_on_plane")),
        "no sphere_on_plane records in {}",
        golden_dir().display()
    );
    records
}

/// Simbody's numbers within the built-in's own bound (1e-9), and the built-in's evaluation to
/// rounding (1e-12), every quantity, every sphere record.
#[test]
fn custom_sphere_matches_simbody_and_the_builtin_on_the_cpu() {
    let records = golden_records();
    let mut report = Report::default();
    let mut parity = Report::default();
    let mut compared = 0;
    for group in sphere_groups(&records).values() {
        let (batch, handles) = contact_batch_with(group, &make).unwrap();
        assert_eq!(
            batch.template().constraints()[0].constraint.kind_name(),
            "my_sphere_on_plane"
        );
        let ev = batch.evaluate();
        compare_contact(group, &batch, &handles, &ev, 1e-9, &mut report).unwrap();
        let (builtin, _) = contact_batch(group).unwrap();
        compare_evaluations(&ev, &builtin.evaluate(), 1e-12, &mut parity).unwrap();
        compared += group.len();
    }
    println!("against Simbody:\n{report}\nagainst the built-in:\n{parity}");
    assert!(compared > 0);
    assert_eq!(report.records, compared);
    assert!(report.passed(), "{report}");
    assert!(parity.passed(), "{parity}");
}

/// The same on the GPU (f32): the user's WGSL, spliced into the kernel, meets the built-in's
/// f32 bound against Simbody (2e-4) and agrees with the built-in's kernel within the same
/// bound (the formulas round differently in f32; ill-conditioned instances amplify that to
/// ~4e-5 in u̇).
#[test]
fn custom_sphere_matches_simbody_and_the_builtin_on_the_gpu() {
    let Some(device) = device() else { return };
    let records = golden_records();
    let mut report = Report::default();
    let mut parity = Report::default();
    for group in sphere_groups(&records).values() {
        let (batch, handles) = contact_batch_with(group, &make).unwrap();
        let mut gpu = GpuEvaluator::new(
            device.clone(),
            &batch,
            Precision::F32,
            GpuOptions::default(),
        )
        .unwrap();
        let ev = gpu.evaluate(&batch).unwrap();
        compare_contact(group, &batch, &handles, &ev, 2e-4, &mut report).unwrap();
        let (builtin, _) = contact_batch(group).unwrap();
        let mut builtin_gpu = GpuEvaluator::new(
            device.clone(),
            &builtin,
            Precision::F32,
            GpuOptions::default(),
        )
        .unwrap();
        let reference = builtin_gpu.evaluate(&builtin).unwrap();
        compare_evaluations(&ev, &reference, 2e-4, &mut parity).unwrap();
    }
    println!("GPU f32 against Simbody:\n{report}\nagainst the built-in's kernel:\n{parity}");
    assert!(report.records > 0);
    assert!(report.passed(), "{report}");
    assert!(parity.passed(), "{parity}");
}

/// Balls near tilted planes (on Ground and on a free plane body), with a rolling contact that
/// declares assembly conditions, or not.
fn balls(n: usize, assembly: bool, free_plane: bool, seed: u64) -> (Batch, BodyId, ConstraintId) {
    let mut t = SystemTemplate::new();
    let plane = if free_plane {
        t.add_free_body("plate")
    } else {
        GROUND
    };
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(MySphereOnPlane {
            bodies: [plane, ball],
            rolling: true,
            assembly,
        })
        .unwrap();
    let mut b = Batch::new(t, n).unwrap();
    for i in 0..n {
        let mut r = Rng::for_instance(seed, i);
        let mut u = |lo: f64, hi: f64| lo + (hi - lo) * r.unit();
        let frame = [
            1.0,
            u(-0.3, 0.3),
            u(-0.3, 0.3),
            u(-0.3, 0.3),
            u(-1.0, 1.0),
            u(-1.0, 1.0),
            u(-0.5, 0.5),
        ];
        b.set_param(c, "plane_frame", i, &frame).unwrap();
        b.set_param(c, "radius", i, &[u(0.1, 0.5)]).unwrap();
        b.set_param(
            c,
            "sphere_center",
            i,
            &[u(-0.1, 0.1), u(-0.1, 0.1), u(-0.1, 0.1)],
        )
        .unwrap();
        if assembly {
            b.set_param(c, "contact_xy", i, &[u(-0.5, 0.5), u(-0.5, 0.5)])
                .unwrap();
        }
        b.set_q(
            ball,
            i,
            [
                1.0,
                u(-0.5, 0.5),
                u(-0.5, 0.5),
                u(-0.5, 0.5),
                u(-1.0, 1.0),
                u(-1.0, 1.0),
                u(0.0, 1.0),
            ],
        )
        .unwrap();
        b.set_u(
            ball,
            i,
            [
                u(-2.0, 2.0),
                u(-2.0, 2.0),
                u(-2.0, 2.0),
                u(-1.0, 1.0),
                u(-1.0, 1.0),
                u(-1.0, 1.0),
            ],
        )
        .unwrap();
        if free_plane {
            b.set_q(
                plane,
                i,
                [
                    1.0,
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                    u(-0.2, 0.2),
                ],
            )
            .unwrap();
            b.set_u(
                plane,
                i,
                [
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                    u(-1.0, 1.0),
                ],
            )
            .unwrap();
        }
    }
    (b, ball, c)
}

/// The contact geometry and motion of instance `i`, through the constraint's own `report` and
/// kinematics (the test reads them back the way a user would).
fn contact_of(batch: &Batch, c: ConstraintId, i: usize) -> Contact {
    let sys = batch.instance_system(i).unwrap();
    let slot = &batch.template().constraints()[c.0];
    let kin: Vec<BodyKinematics> = slot
        .constraint
        .bodies()
        .iter()
        .map(|b| sys.kinematics[b.index()])
        .collect();
    let columns: Vec<Vec<f64>> = slot
        .constraint
        .params()
        .iter()
        .map(|p| batch.param(c, p.name).unwrap().0.to_vec())
        .collect();
    let widths: Vec<usize> = slot
        .constraint
        .params()
        .iter()
        .map(|p| p.default.len())
        .collect();
    contact(&Params::new(&columns, &widths, i), &kin[0], &kin[1])
}

/// Position assembly on the declared condition puts the contact exactly where `contact_xy`
/// says, on the plane — the closed form `O = P_o + x₀ Px + y₀ Py + r Pz` — where assembly on
/// the constraint's own rows only closes the gap to the plane, leaving the contact near where
/// it started. Velocity assembly on the
/// declared condition also stops the spin about the normal, which the own rows leave alone.
#[test]
fn assembly_conditions_steer_position_and_velocity_assembly() {
    for free_plane in [false, true] {
        let n = 200;
        let (mut declared, _, c) = balls(n, true, free_plane, 5);
        let (mut own, _, c_own) = balls(n, false, free_plane, 5);
        let before: Vec<Contact> = (0..n).map(|i| contact_of(&own, c_own, i)).collect();

        let report = assemble_positions(&mut declared, &AssemblyOptions::default()).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let report = assemble_positions(&mut own, &AssemblyOptions::default()).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let mut worst_declared = 0.0f64;
        let mut worst_own = 0.0f64;
        let mut own_elsewhere = 0;
        let (xy, _) = declared.param(c, "contact_xy").unwrap();
        for i in 0..n {
            let k = contact_of(&declared, c, i);
            let target = [xy[2 * i], xy[2 * i + 1]];
            let expected = k.plane_origin
                + target[0] * k.axes[0]
                + target[1] * k.axes[1]
                + k.radius * k.axes[2];
            worst_declared = worst_declared.max((k.center - expected).amax());
            // Own rows: only the height is closed; the contact stays near where it started.
            let k_own = contact_of(&own, c_own, i);
            worst_own = worst_own.max(k_own.height.abs());
            let offset = k_own.center - k_own.plane_origin;
            let in_plane = [offset.dot(&k_own.axes[0]), offset.dot(&k_own.axes[1])];
            let start = before[i].center - before[i].plane_origin;
            let start = [start.dot(&before[i].axes[0]), start.dot(&before[i].axes[1])];
            let moved = (in_plane[0] - start[0]).hypot(in_plane[1] - start[1]);
            let off_target = (in_plane[0] - target[0]).hypot(in_plane[1] - target[1]);
            if off_target > 1e-3 && moved < off_target {
                own_elsewhere += 1;
            }
        }
        println!(
            "free plane {free_plane}: declared condition {worst_declared:.1e} from the closed form; own rows: height {worst_own:.1e}, {own_elsewhere}/{n} contacts left nearer their start than the target"
        );
        assert!(worst_declared <= 1e-10, "{worst_declared}");
        assert!(worst_own <= 1e-10, "{worst_own}");
        assert!(own_elsewhere >= n * 9 / 10, "{own_elsewhere}/{n}");

        let report = assemble_velocities(&mut declared, None).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let report = assemble_velocities(&mut own, None).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let mut worst_slip = 0.0f64;
        let mut worst_spin = 0.0f64;
        let mut own_spin = 0.0f64;
        for i in 0..n {
            let spin = |b: &Batch, c: ConstraintId| {
                let sys = b.instance_system(i).unwrap();
                let bodies = b.template().constraints()[c.0].constraint.bodies().to_vec();
                let k = contact_of(b, c, i);
                (sys.kinematics[bodies[1].index()].ang_vel
                    - sys.kinematics[bodies[0].index()].ang_vel)
                    .dot(&k.axes[2])
            };
            worst_slip = worst_slip
                .max(contact_of(&declared, c, i).slip.amax())
                .max(contact_of(&own, c_own, i).slip.amax());
            worst_spin = worst_spin.max(spin(&declared, c).abs());
            own_spin = own_spin.max(spin(&own, c_own).abs());
        }
        println!(
            "free plane {free_plane}: slip {worst_slip:.1e}; spin about the normal {worst_spin:.1e} declared, up to {own_spin:.2} on own rows"
        );
        assert!(worst_slip <= 1e-10, "{worst_slip}");
        assert!(worst_spin <= 1e-10, "{worst_spin}");
        assert!(
            own_spin > 0.1,
            "the own rows should leave the spin: {own_spin}"
        );
    }
}

/// A constraint with 4 rows or 33 parameter values runs on the CPU and is refused by the GPU
/// layout with an error naming the limit (no adapter needed).
#[test]
fn gpu_limits_on_a_constraint_are_typed_errors() {
    #[derive(Debug)]
    struct Wide {
        bodies: [BodyId; 1],
        rows: usize,
        values: usize,
    }
    impl Constraint for Wide {
        fn kind_name(&self) -> &'static str {
            "wide"
        }
        fn bodies(&self) -> &[BodyId] {
            &self.bodies
        }
        fn params(&self) -> Vec<ParamSpec> {
            vec![ParamSpec {
                name: "values",
                default: vec![0.0; self.values],
                check: Check::Finite,
            }]
        }
        fn row_levels(&self) -> &[RowLevel] {
            const ALL: &[RowLevel; 6] = &[RowLevel::Acceleration; 6];
            &ALL[..self.rows]
        }
        fn report_slots(&self) -> &[Option<usize>] {
            &[]
        }
        fn evaluate(&self, _: &Params<'_>, _: &[BodyKinematics], rows: &mut [Row]) {
            for (k, row) in rows.iter_mut().enumerate() {
                row.jacobian[0][k] = 1.0;
            }
        }
        fn wgsl(&self) -> Option<WgslConstraint> {
            Some(WgslConstraint {
                file: "wide.wgsl".into(),
                source: String::new(),
                evaluate: "array<Row, 3>()".into(),
                report: None,
            })
        }
    }
    for (rows, values, limit) in [(4, 1, "at most 3"), (1, 33, "at most 32")] {
        let mut t = SystemTemplate::new();
        let body = t.add_free_body("body");
        t.add_constraint(Wide {
            bodies: [body],
            rows,
            values,
        })
        .unwrap();
        let batch = Batch::new(t, 4).unwrap();
        assert_eq!(batch.evaluate().flagged(), 0, "runs on the CPU");
        match simbatch::gpu::layout::Layout::new(batch.template()) {
            Err(e @ simbatch::Error::Gpu(_)) => {
                let message = e.to_string();
                assert!(message.contains(limit), "{message}");
                assert!(message.contains("wide"), "{message}");
            }
            other => panic!("expected a GPU limit error, got {other:?}"),
        }
    }
    // Assembly conditions are bounded on every path.
    #[derive(Debug)]
    struct TooManyAssemblyRows([BodyId; 1]);
    impl Constraint for TooManyAssemblyRows {
        fn kind_name(&self) -> &'static str {
            "too_many_assembly_rows"
        }
        fn bodies(&self) -> &[BodyId] {
            &self.0
        }
        fn params(&self) -> Vec<ParamSpec> {
            Vec::new()
        }
        fn row_levels(&self) -> &[RowLevel] {
            &[RowLevel::Position]
        }
        fn report_slots(&self) -> &[Option<usize>] {
            &[]
        }
        fn evaluate(&self, _: &Params<'_>, _: &[BodyKinematics], _: &mut [Row]) {}
        fn assembly_position_rows(&self) -> usize {
            7
        }
    }
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    let e = t.add_constraint(TooManyAssemblyRows([body])).unwrap_err();
    assert!(
        e.to_string()
            .contains("7 position assembly rows; accepted 0..=6"),
        "{e}"
    );
}
