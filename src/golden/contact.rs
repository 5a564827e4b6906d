//! Contact records (sphere or point on a plane): batches built from them, and comparisons.

use super::{Record, Report, to_numbers};
use std::sync::Arc;

use nalgebra::DVector;
use serde_json::Value;

use crate::batch::Batch;
use crate::constraints::{Constraint, PointOnPlaneContact, SphereOnPlaneContact};
use crate::error::{Error, Result};
use crate::evaluation::Evaluation;
use crate::model::{BodyId, ConstraintId, GROUND, SystemTemplate};

/// Handles of a batch built from contact records.
#[derive(Debug, Clone, Copy)]
pub struct ContactHandles {
    /// Plane body (Ground or a free body).
    pub plane: BodyId,
    /// Sphere or follower body.
    pub body: BodyId,
    /// The contact constraint.
    pub constraint: ConstraintId,
}

pub(super) fn set_free_body(
    batch: &mut Batch,
    body: BodyId,
    i: usize,
    r: &Record,
    key: &str,
) -> Result<()> {
    let loc = |e: Error| r.err(e.to_string());
    batch
        .set_mass_properties(
            body,
            i,
            r.number(&[key, "mass"])?,
            r.array(&[key, "com"])?,
            r.array(&[key, "inertia_com"])?,
        )
        .map_err(loc)?;
    let rot: [f64; 4] = r.array(&[key, "rotation"])?;
    let pos: [f64; 3] = r.array(&[key, "position"])?;
    let w: [f64; 3] = r.array(&[key, "ang_vel"])?;
    let v: [f64; 3] = r.array(&[key, "lin_vel"])?;
    batch
        .set_q(
            body,
            i,
            [rot[0], rot[1], rot[2], rot[3], pos[0], pos[1], pos[2]],
        )
        .map_err(loc)?;
    batch
        .set_u(body, i, [w[0], w[1], w[2], v[0], v[1], v[2]])
        .map_err(loc)?;
    Ok(())
}

/// Sets a prescribed (constant-law) body's pose, velocity and acceleration from a record's
/// `plane` (`rotation`, `position`, `ang_vel`, `lin_vel`, `ang_acc`, `lin_acc`, all in Ground).
pub(super) fn set_prescribed_motion(
    batch: &mut Batch,
    body: BodyId,
    i: usize,
    r: &Record,
) -> Result<()> {
    let loc = |e: Error| r.err(e.to_string());
    let (pose, velocity, acceleration) = motion_of(r.field(&["plane"])?)
        .ok_or_else(|| r.err("plane: rotation, position, ang_vel, lin_vel, ang_acc, lin_acc"))?;
    batch.set_pose(body, i, pose).map_err(loc)?;
    batch.set_velocity(body, i, velocity).map_err(loc)?;
    batch.set_acceleration(body, i, acceleration).map_err(loc)?;
    Ok(())
}

/// A prescribed body's motion as the golden files store it: `{rotation, position, ang_vel,
/// lin_vel, ang_acc, lin_acc}` → pose, velocity, acceleration columns.
#[allow(clippy::type_complexity)]
pub(super) fn motion_of(v: &Value) -> Option<([f64; 7], [f64; 6], [f64; 6])> {
    let get = |key: &str, n: usize| to_numbers(v.get(key)?).filter(|x| x.len() == n);
    let (rot, pos) = (get("rotation", 4)?, get("position", 3)?);
    let (w, vel) = (get("ang_vel", 3)?, get("lin_vel", 3)?);
    let (b, a) = (get("ang_acc", 3)?, get("lin_acc", 3)?);
    Some((
        [rot[0], rot[1], rot[2], rot[3], pos[0], pos[1], pos[2]],
        [w[0], w[1], w[2], vel[0], vel[1], vel[2]],
        [b[0], b[1], b[2], a[0], a[1], a[2]],
    ))
}

/// Sets a contact's per-instance parameters from a record: the plane frame, then the follower
/// point (`point`) or the sphere centre and radius.
pub(super) fn set_contact_params(
    batch: &mut Batch,
    constraint: ConstraintId,
    i: usize,
    r: &Record,
    point: bool,
) -> Result<()> {
    let loc = |e: Error| r.err(e.to_string());
    batch
        .set_param(constraint, "plane_frame", i, &plane_frame(r)?)
        .map_err(loc)?;
    if point {
        batch
            .set_param(
                constraint,
                "follower_point",
                i,
                &r.numbers(&["follower_point"])?,
            )
            .map_err(loc)?;
    } else {
        batch
            .set_param(
                constraint,
                "sphere_center",
                i,
                &r.numbers(&["sphere_center"])?,
            )
            .map_err(loc)?;
        batch
            .set_param(constraint, "radius", i, &[r.number(&["radius"])?])
            .map_err(loc)?;
    }
    Ok(())
}

pub(super) fn plane_frame(r: &Record) -> Result<[f64; 7]> {
    let rot: [f64; 4] = r.array(&["plane_frame", "rotation"])?;
    let o: [f64; 3] = r.array(&["plane_frame", "origin"])?;
    Ok([rot[0], rot[1], rot[2], rot[3], o[0], o[1], o[2]])
}

/// Builds one batch from `sphere_on_plane` or `point_on_plane` records of the same structure
/// (kind, `rolling`, `plane_body`), with the built-in constraints.
pub fn contact_batch(records: &[&Record]) -> Result<(Batch, ContactHandles)> {
    contact_batch_with(records, &builtin_contact)
}

/// What a contact record asks for, handed to the constraint maker of [`contact_batch_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContactStructure<'a> {
    /// `sphere_on_plane` or `point_on_plane`.
    pub kind: &'a str,
    /// Body carrying the plane (Ground or a free body).
    pub plane: BodyId,
    /// Body carrying the sphere or the follower point.
    pub body: BodyId,
    /// Whether the record enforces rolling (spheres only).
    pub rolling: bool,
}

/// The built-in constraint for a contact record.
pub fn builtin_contact(s: &ContactStructure<'_>) -> Result<Arc<dyn Constraint>> {
    Ok(match s.kind {
        "sphere_on_plane" => Arc::new(SphereOnPlaneContact::new(s.plane, s.body, s.rolling)),
        "point_on_plane" => Arc::new(PointOnPlaneContact::new(s.plane, s.body)),
        other => {
            return Err(Error::Template(format!(
                "kind {other:?} is not a contact record"
            )));
        }
    })
}

/// [`contact_batch`] with the constraint made by `make` — how a user's own implementation of
/// a contact is checked against Simbody's numbers. The constraint must take the built-in's
/// parameters by the same names (`plane_frame`, and `sphere_center` + `radius` or
/// `follower_point`) and report in the same row order.
pub fn contact_batch_with(
    records: &[&Record],
    make: &dyn Fn(&ContactStructure<'_>) -> Result<Arc<dyn Constraint>>,
) -> Result<(Batch, ContactHandles)> {
    let first = records
        .first()
        .ok_or_else(|| Error::Template("no records to build a batch from".into()))?;
    let kind = first.kind()?.to_string();
    let plane_body = first.text(&["plane_body"])?.to_string();
    let rolling = first
        .value
        .get("rolling")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut template = SystemTemplate::new();
    let plane = match plane_body.as_str() {
        "ground" => GROUND,
        "free" => template.add_free_body("plane"),
        "prescribed" => template.add_prescribed_body("plane"),
        other => {
            return Err(first.err(format!(
                "plane_body {other:?}; accepted: ground, free, prescribed"
            )));
        }
    };
    let body = template.add_free_body("body");
    if kind != "sphere_on_plane" && kind != "point_on_plane" {
        return Err(first.err(format!("kind {kind:?} is not a contact record")));
    }
    let constraint = template.add_constraint_arc(make(&ContactStructure {
        kind: &kind,
        plane,
        body,
        rolling,
    })?)?;
    let mut batch = Batch::new(template, records.len())?;
    for (i, r) in records.iter().enumerate() {
        let loc = |e: Error| r.err(e.to_string());
        batch.set_gravity(i, r.array(&["gravity"])?).map_err(loc)?;
        match plane_body.as_str() {
            "free" => set_free_body(&mut batch, plane, i, r, "plane")?,
            "prescribed" => set_prescribed_motion(&mut batch, plane, i, r)?,
            _ => {}
        }
        set_free_body(&mut batch, body, i, r, "body")?;
        set_contact_params(&mut batch, constraint, i, r, kind == "point_on_plane")?;
    }
    Ok((
        batch,
        ContactHandles {
            plane,
            body,
            constraint,
        },
    ))
}

/// Compares a batch built by [`contact_batch`] and its evaluation with the records' `expect`.
///
/// `evaluation` may come from any backend; the Jacobian, bias and probe quantities are taken
/// from the CPU assembly of the same batch.
pub fn compare_contact(
    records: &[&Record],
    batch: &Batch,
    handles: &ContactHandles,
    evaluation: &Evaluation,
    tol: f64,
    report: &mut Report,
) -> Result<()> {
    let ce = evaluation.constraint(handles.constraint)?;
    for (i, r) in records.iter().enumerate() {
        let loc = r.location();
        let point = r.kind()? == "point_on_plane";
        // Simbody 3.7 returns the point contact's accessors in (z, x, y) order (golden README).
        let order: [usize; 3] = if point { [1, 2, 0] } else { [0, 1, 2] };
        let reorder = |v: Vec<f64>| -> Vec<f64> { order.iter().map(|k| v[*k]).collect() };

        let sys = batch.instance_system(i)?;
        let q: Vec<f64> = batch
            .template()
            .free_bodies()
            .iter()
            .flat_map(|b| batch.q(*b).map(|c| c[i].to_vec()).unwrap_or_default())
            .collect();
        let u: Vec<f64> = batch
            .template()
            .free_bodies()
            .iter()
            .flat_map(|b| batch.u(*b).map(|c| c[i].to_vec()).unwrap_or_default())
            .collect();
        report.check_slice("q", &loc, &q, &r.numbers(&["expect", "q"])?, tol);
        report.check_slice("u", &loc, &u, &r.numbers(&["expect", "u"])?, tol);
        report.check_slice(
            "perr_vector",
            &loc,
            &sys.position_errors.as_slice()[..1],
            &r.numbers(&["expect", "perr_vector"])?,
            tol,
        );
        report.check_slice(
            "verr_vector",
            &loc,
            sys.velocity_errors.as_slice(),
            &r.numbers(&["expect", "verr_vector"])?,
            tol,
        );
        let g_rows = r
            .field(&["expect", "G"])?
            .as_array()
            .ok_or_else(|| r.err("expect.G is not an array"))?;
        let mut g_expected = Vec::new();
        for row in g_rows {
            g_expected.extend(to_numbers(row).ok_or_else(|| r.err("expect.G row is not numbers"))?);
        }
        let g_got: Vec<f64> = sys.jacobian.transpose().as_slice().to_vec(); // row-major
        report.check_slice("G", &loc, &g_got, &g_expected, tol);
        report.check_slice(
            "bias_acceleration",
            &loc,
            sys.bias_acceleration.as_slice(),
            &r.numbers(&["expect", "bias_acceleration"])?,
            tol,
        );
        let probe = DVector::from_vec(r.numbers(&["udot_probe"])?);
        let aerr_probe = sys.acceleration_errors(&probe)?;
        let expected_probe = r.numbers(&["expect", "aerr_probe_vector"])?;
        report.check_slice(
            "aerr_probe_vector (G u̇ + k)",
            &loc,
            aerr_probe.as_slice(),
            &expected_probe,
            tol,
        );
        let direct = batch.acceleration_errors_at(i, probe.as_slice())?;
        report.check_slice(
            "aerr_probe_vector (formula)",
            &loc,
            &direct[handles.constraint.0],
            &expected_probe,
            tol,
        );

        report.check_slice(
            "udot",
            &loc,
            evaluation.udot_of(i)?,
            &r.numbers(&["expect", "udot"])?,
            tol,
        );
        let solution = sys.solve()?;
        report.check_slice(
            "multipliers_vector",
            &loc,
            solution.multipliers.as_slice(),
            &r.numbers(&["expect", "multipliers_vector"])?,
            tol,
        );
        report.check(
            "power",
            || loc.clone(),
            ce.power[i],
            r.number(&["expect", "power"])?,
            tol,
        );
        report.check(
            "position_error",
            || loc.clone(),
            ce.position_errors_of(i)?[2],
            r.number(&["expect", "position_error"])?,
            tol,
        );
        report.check_slice(
            "velocity_errors",
            &loc,
            ce.velocity_errors_of(i)?,
            &reorder(r.numbers(&["expect", "velocity_errors"])?),
            tol,
        );
        // A residual G u̇ + k ≈ 0: its rounding scales with |k|.
        let k_scale = sys
            .bias_acceleration
            .iter()
            .fold(0.0f64, |m, x| m.max(x.abs()));
        let aerr_expected = reorder(r.numbers(&["expect", "acceleration_errors"])?);
        for (k, (g, e)) in ce
            .acceleration_errors_of(i)?
            .iter()
            .zip(&aerr_expected)
            .enumerate()
        {
            report.check_scaled(
                "acceleration_errors (scale |k|)",
                || format!("{loc}[{k}]"),
                *g,
                *e,
                k_scale,
                tol,
            );
        }
        let multipliers = reorder(r.numbers(&["expect", "multipliers"])?);
        report.check_slice(
            "multipliers",
            &loc,
            ce.multipliers_of(i)?,
            &multipliers,
            tol,
        );
        let forces = r
            .field(&["expect", "constraint_body_forces_in_ground"])?
            .as_array()
            .ok_or_else(|| r.err("constraint_body_forces_in_ground is not an array"))?;
        for (j, (got, exp)) in ce.body_forces_of(i)?.iter().zip(forces).enumerate() {
            let pair = exp
                .as_array()
                .ok_or_else(|| r.err("body force entry is not [torque, force]"))?;
            let mut e = Vec::new();
            for part in pair {
                e.extend(to_numbers(part).ok_or_else(|| r.err("body force is not numbers"))?);
            }
            report.check_slice(
                "constraint_body_forces_in_ground",
                &format!("{loc} body {j}"),
                got,
                &e,
                tol,
            );
        }
        let contact_force = ce
            .contact_force
            .as_ref()
            .map(|c| c[i].to_vec())
            .unwrap_or_default();
        if point {
            // Documented value of the unimplemented getForceOnFollowerPoint: −multipliers.
            let expected: Vec<f64> = multipliers.iter().map(|m| -m).collect();
            report.check_slice(
                "force_on_follower_point",
                &loc,
                &contact_force,
                &expected,
                tol,
            );
        } else {
            report.check_slice(
                "force_on_sphere_in_ground",
                &loc,
                &contact_force,
                &r.numbers(&["expect", "force_on_sphere_in_ground"])?,
                tol,
            );
            let cp = ce
                .contact_point
                .as_ref()
                .map(|c| c[i].to_vec())
                .unwrap_or_default();
            report.check_slice(
                "contact_point_in_ground",
                &loc,
                &cp,
                &r.numbers(&["expect", "contact_point_in_ground"])?,
                tol,
            );
            let sep = ce.separation.as_ref().map_or(f64::NAN, |s| s[i]);
            report.check(
                "separation",
                || loc.clone(),
                sep,
                r.number(&["expect", "separation"])?,
                tol,
            );
        }
        report.records += 1;
    }
    Ok(())
}
