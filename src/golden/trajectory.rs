//! Trajectory records: batches stepped over Simbody's samples, and comparisons.

use super::contact::{motion_of, set_contact_params, set_free_body};
use super::{Record, Report, read_dir, to_numbers};
use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::batch::Batch;
use crate::constraints::{PointOnPlaneContact, SphereOnPlaneContact};
use crate::error::{Error, Result};
use crate::model::{BodyId, ConstraintId, GROUND, SystemTemplate};

/// Handles of a batch built from trajectory records.
#[derive(Debug, Clone, Copy)]
pub struct TrajectoryHandles {
    /// The moving body.
    pub body: BodyId,
    /// The prescribed plane body, if the case has one: the turntable (constant law) or the
    /// tilting plate (driven by [`TiltingMotion`](crate::motion::TiltingMotion)).
    pub table: Option<BodyId>,
    /// The contact.
    pub constraint: ConstraintId,
}

/// Builds one batch from `trajectory` records of the same `case` (`rolling_sphere`,
/// `sliding_sphere`, `no_slip_point`, `turntable`, `tilting_plate`), each instance at its first
/// sample.
pub fn trajectory_batch(records: &[&Record]) -> Result<(Batch, TrajectoryHandles)> {
    let first = records
        .first()
        .ok_or_else(|| Error::Template("no records to build a batch from".into()))?;
    let case = first.text(&["case"])?.to_string();
    let mut template = SystemTemplate::new();
    let table = match case.as_str() {
        "turntable" => Some(template.add_prescribed_body("turntable")),
        "tilting_plate" => {
            let kind = first.text(&["plane_motion", "kind"])?;
            if kind != "tilting" {
                return Err(first.err(format!("plane_motion.kind {kind:?}; accepted: tilting")));
            }
            Some(template.add_driven_body("plate", crate::motion::TiltingMotion))
        }
        _ => None,
    };
    let plane = table.unwrap_or(GROUND);
    let body = template.add_free_body("body");
    let constraint = match case.as_str() {
        "rolling_sphere" | "turntable" | "tilting_plate" => {
            template.add_constraint(SphereOnPlaneContact::new(plane, body, true))?
        }
        "sliding_sphere" => {
            template.add_constraint(SphereOnPlaneContact::new(plane, body, false))?
        }
        "no_slip_point" => template.add_constraint(PointOnPlaneContact::new(plane, body))?,
        other => {
            return Err(first.err(format!(
                "trajectory case {other:?}; accepted: rolling_sphere, sliding_sphere, no_slip_point, turntable, tilting_plate"
            )));
        }
    };
    let mut batch = Batch::new(template, records.len())?;
    for (i, r) in records.iter().enumerate() {
        let loc = |e: Error| r.err(e.to_string());
        batch.set_gravity(i, r.array(&["gravity"])?).map_err(loc)?;
        set_free_body(&mut batch, body, i, r, "body")?;
        set_contact_params(&mut batch, constraint, i, r, case == "no_slip_point")?;
        if case == "tilting_plate" {
            if let Some(plate) = table {
                for name in crate::motion::tilting::TILTING_PARAMS {
                    let value = r.numbers(&["plane_motion", name])?;
                    batch
                        .set_motion_param(plate, name, i, &value)
                        .map_err(loc)?;
                }
            }
        } else if let Some(table) = table {
            // Steady rotation about `axis_in_ground` through the initial frame's origin.
            let rot: [f64; 4] = r.array(&["plane_motion", "initial_frame", "rotation"])?;
            let o: [f64; 3] = r.array(&["plane_motion", "initial_frame", "origin"])?;
            let axis: [f64; 3] = r.array(&["plane_motion", "axis_in_ground"])?;
            let rate = r.number(&["plane_motion", "rate"])?;
            batch
                .set_pose(table, i, [rot[0], rot[1], rot[2], rot[3], o[0], o[1], o[2]])
                .map_err(loc)?;
            batch
                .set_velocity(
                    table,
                    i,
                    [
                        rate * axis[0],
                        rate * axis[1],
                        rate * axis[2],
                        0.0,
                        0.0,
                        0.0,
                    ],
                )
                .map_err(loc)?;
        }
    }
    Ok((
        batch,
        TrajectoryHandles {
            body,
            table,
            constraint,
        },
    ))
}

/// Integrates a trajectory batch with `stepper` through every sample time of its records and
/// compares quaternions (up to sign), positions, velocities, the energy (not for the turntable,
/// whose table's kinetic energy simbatch does not model) and the turntable's rotation, each
/// within `tol` absolute (energy: relative to max(1, |E|)).
#[allow(clippy::needless_range_loop)] // `k` indexes every record's samples at once
pub fn compare_trajectories(
    records: &[&Record],
    batch: &mut Batch,
    handles: &TrajectoryHandles,
    stepper: &mut crate::backend::Stepper,
    tol: f64,
    report: &mut Report,
) -> Result<()> {
    let samples: Vec<Vec<Value>> = records
        .iter()
        .map(|r| {
            r.field(&["samples"])
                .map(|s| s.as_array().cloned().unwrap_or_default())
        })
        .collect::<Result<_>>()?;
    let n_samples = samples.iter().map(Vec::len).min().unwrap_or(0);
    let quat_close = |report: &mut Report, what: &str, loc: &str, got: &[f64], expected: &[f64]| {
        // Simbody keeps e0 ≥ 0: compare with whichever sign is nearer.
        let plus: f64 = got
            .iter()
            .zip(expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let minus: f64 = got
            .iter()
            .zip(expected)
            .map(|(a, b)| (a + b).abs())
            .fold(0.0, f64::max);
        let g: Vec<f64> = if plus <= minus {
            got.to_vec()
        } else {
            got.iter().map(|x| -x).collect()
        };
        report.check_slice(what, loc, &g, expected, tol);
    };
    for k in 0..n_samples {
        if k > 0 {
            let dt = samples[0][k]["t"].as_f64().unwrap_or(0.0) - batch.time()[0];
            stepper.advance(batch, dt)?;
        }
        for (i, r) in records.iter().enumerate() {
            let s = &samples[i][k];
            let t = s["t"].as_f64().unwrap_or(f64::NAN);
            let loc = format!("{} t={t}", r.location());
            let num = |key: &str| to_numbers(&s[key]).unwrap_or_default();
            report.check("time", || loc.clone(), batch.time()[i], t, tol);
            let q = batch.q(handles.body)?[i];
            let u = batch.u(handles.body)?[i];
            quat_close(
                report,
                "trajectory rotation",
                &loc,
                &q[..4],
                &num("rotation"),
            );
            report.check_slice("trajectory position", &loc, &q[4..7], &num("position"), tol);
            report.check_slice("trajectory ang_vel", &loc, &u[..3], &num("ang_vel"), tol);
            report.check_slice("trajectory lin_vel", &loc, &u[3..6], &num("lin_vel"), tol);
            let case = r.text(&["case"])?;
            if let (Some(table), "turntable") = (handles.table, case) {
                let pose = batch.pose(table)?[i];
                quat_close(
                    report,
                    "turntable rotation",
                    &loc,
                    &pose[..4],
                    &num("plane_rotation"),
                );
            } else {
                // The free body's energy (the tilting plate's records hold the ball's alone).
                let e = s["energy"].as_f64().unwrap_or(f64::NAN);
                report.check(
                    "trajectory energy",
                    || loc.clone(),
                    batch.energy(i)?,
                    e,
                    tol,
                );
            }
            if let (Some(plate), Some(expected)) = (handles.table, s.get("plane")) {
                // The plate's motion as the batch reports it (from its law at the instance's
                // time) against Simbody's realized plate.
                let (pose, velocity, acceleration) = motion_of(expected)
                    .ok_or_else(|| r.err("sample plane: rotation, position, ang_vel, …"))?;
                let got = batch.pose(plate)?[i];
                quat_close(report, "plate rotation", &loc, &got[..4], &pose[..4]);
                report.check_slice("plate position", &loc, &got[4..], &pose[4..], tol);
                let got = batch.velocity(plate)?[i];
                report.check_slice("plate velocity", &loc, &got, &velocity, tol);
                let got = batch.acceleration(plate)?[i];
                report.check_slice("plate acceleration", &loc, &got, &acceleration, tol);
            }
            if let Some(expected) = s.get("udot").and_then(to_numbers) {
                // Forward dynamics at the integrated state: its error follows the state's.
                let got = batch.instance_system(i)?.solve()?.udot;
                report.check_slice("trajectory udot", &loc, got.as_slice(), &expected, tol);
            }
            if batch.status()[i] != crate::batch::status::OK {
                report.check("status", || loc.clone(), batch.status()[i] as f64, 0.0, 0.0);
            }
        }
    }
    report.records += records.len();
    Ok(())
}

/// Checks every trajectory record: one batch per case, each integrated by a fresh stepper from
/// `make_stepper` (CPU or GPU) through every sample time and compared as
/// [`compare_trajectories`] does.
pub fn check_trajectories(
    records: &[Record],
    mut make_stepper: impl FnMut() -> Result<crate::backend::Stepper>,
    tol: f64,
) -> Result<Report> {
    let mut groups: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records {
        groups
            .entry(r.text(&["case"])?.to_string())
            .or_default()
            .push(r);
    }
    let mut report = Report::default();
    for group in groups.values() {
        let (mut batch, handles) = trajectory_batch(group)?;
        let mut stepper = make_stepper()?;
        compare_trajectories(group, &mut batch, &handles, &mut stepper, tol, &mut report)?;
    }
    Ok(report)
}

/// The trajectory records to test against: every `kind = "trajectory"` record of the
/// `*.jsonl` files in `$SIMBATCH_GOLDEN_DIR` when set, else in `default_dir`
/// (`trajectories.jsonl`, `tilt_trajectories.jsonl`, and any other file of that kind).
pub fn trajectory_records(default_dir: &Path) -> Result<Vec<Record>> {
    let dir = std::env::var_os("SIMBATCH_GOLDEN_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| default_dir.to_path_buf());
    Ok(read_dir(&dir)?
        .into_iter()
        .filter(|r| r.kind().ok() == Some("trajectory"))
        .collect())
}
