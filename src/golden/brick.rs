//! Brick records (point-to-ground contacts at a brick's corners): batches and comparisons.

use super::contact::{plane_frame, set_free_body};
use super::{Record, Report, to_numbers};
use crate::batch::Batch;
use crate::constraints::PointOnPlaneContact;
use crate::error::{Error, Result};
use crate::evaluation::Evaluation;
use crate::model::{BodyId, ConstraintId, GROUND, SystemTemplate};

/// Handles of a batch built from brick records.
#[derive(Debug, Clone)]
pub struct BrickHandles {
    /// The brick.
    pub brick: BodyId,
    /// One point-on-plane contact per corner.
    pub corners: Vec<ConstraintId>,
}

/// Builds one batch from `brick_on_corners` records with the same number of corners.
pub fn brick_batch(records: &[&Record]) -> Result<(Batch, BrickHandles)> {
    let first = records
        .first()
        .ok_or_else(|| Error::Template("no records to build a batch from".into()))?;
    if first.text(&["plane_body"])? != "ground" {
        return Err(
            first.err("brick_on_corners: only plane_body = ground is defined by the format")
        );
    }
    let n_corners = first
        .field(&["follower_points"])?
        .as_array()
        .map_or(0, Vec::len);
    let mut template = SystemTemplate::new();
    let brick = template.add_free_body("brick");
    let corners = (0..n_corners)
        .map(|_| template.add_constraint(PointOnPlaneContact::new(GROUND, brick)))
        .collect::<Result<Vec<_>>>()?;
    let mut batch = Batch::new(template, records.len())?;
    for (i, r) in records.iter().enumerate() {
        let loc = |e: Error| r.err(e.to_string());
        batch.set_gravity(i, r.array(&["gravity"])?).map_err(loc)?;
        set_free_body(&mut batch, brick, i, r, "body")?;
        batch
            .set_applied_force(brick, i, r.array(&["applied_force"])?)
            .map_err(loc)?;
        batch
            .set_applied_torque(brick, i, r.array(&["applied_torque"])?)
            .map_err(loc)?;
        let points = r
            .field(&["follower_points"])?
            .as_array()
            .cloned()
            .unwrap_or_default();
        if points.len() != n_corners {
            return Err(r.err(format!(
                "{} follower points, expected {n_corners}",
                points.len()
            )));
        }
        let frame = plane_frame(r)?;
        for (c, p) in corners.iter().zip(&points) {
            let p = to_numbers(p).ok_or_else(|| r.err("follower point is not numbers"))?;
            batch.set_param(*c, "plane_frame", i, &frame).map_err(loc)?;
            batch.set_param(*c, "follower_point", i, &p).map_err(loc)?;
        }
    }
    Ok((batch, BrickHandles { brick, corners }))
}

/// Compares a brick batch's evaluation with the records (u̇, minimum-norm multipliers and
/// velocity errors per corner, `(x, y, z)` order).
pub fn compare_brick(
    records: &[&Record],
    handles: &BrickHandles,
    evaluation: &Evaluation,
    tol: f64,
    report: &mut Report,
) -> Result<()> {
    for (i, r) in records.iter().enumerate() {
        let loc = r.location();
        report.check_slice(
            "brick udot",
            &loc,
            evaluation.udot_of(i)?,
            &r.numbers(&["expect", "udot"])?,
            tol,
        );
        let lambdas = r
            .field(&["expect", "multipliers"])?
            .as_array()
            .cloned()
            .unwrap_or_default();
        let verrs = r
            .field(&["expect", "velocity_errors"])?
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (k, c) in handles.corners.iter().enumerate() {
            let ce = evaluation.constraint(*c)?;
            let at = format!("{loc} corner {k}");
            let l = lambdas
                .get(k)
                .and_then(to_numbers)
                .ok_or_else(|| r.err("multipliers entry"))?;
            report.check_slice(
                "brick multipliers (min-norm)",
                &at,
                ce.multipliers_of(i)?,
                &l,
                tol,
            );
            let v = verrs
                .get(k)
                .and_then(to_numbers)
                .ok_or_else(|| r.err("velocity_errors entry"))?;
            report.check_slice(
                "brick velocity_errors",
                &at,
                ce.velocity_errors_of(i)?,
                &v,
                tol,
            );
        }
        report.records += 1;
    }
    Ok(())
}
