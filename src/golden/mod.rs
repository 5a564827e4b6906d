//! Reference data in the golden-file format (Simbody's output, one JSON record per line; see
//! `tests/data/golden/README.md`): reading, building batches from records, and comparing.
//!
//! Records are grouped by structure (kind, rolling, plane body, corner count) so that each group
//! is one batch of many instances — the same path users take. Comparisons use the precision
//! contract's relative bound `|a − b| ≤ tol · max(1, |b|)` and keep the worst error per quantity.

mod brick;
mod contact;
mod report;
mod trajectory;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::evaluation::Evaluation;

pub use brick::{BrickHandles, brick_batch, compare_brick};
pub use contact::{
    ContactHandles, ContactStructure, builtin_contact, compare_contact, contact_batch,
    contact_batch_with,
};
pub use report::{Report, Worst};
pub use trajectory::{
    TrajectoryHandles, check_trajectories, compare_trajectories, trajectory_batch,
    trajectory_records,
};

/// One line of a golden file.
#[derive(Debug, Clone)]
pub struct Record {
    /// File it came from.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// The parsed JSON object.
    pub value: Value,
}

impl Record {
    /// `file:line`, for messages.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    fn err(&self, message: impl Into<String>) -> Error {
        Error::Data {
            file: self.file.clone(),
            line: self.line,
            message: message.into(),
        }
    }

    fn field(&self, path: &[&str]) -> Result<&Value> {
        let mut v = &self.value;
        for p in path {
            v = v
                .get(p)
                .ok_or_else(|| self.err(format!("missing field {}", path.join("."))))?;
        }
        Ok(v)
    }

    fn number(&self, path: &[&str]) -> Result<f64> {
        self.field(path)?
            .as_f64()
            .ok_or_else(|| self.err(format!("{} is not a number", path.join("."))))
    }

    fn numbers(&self, path: &[&str]) -> Result<Vec<f64>> {
        let v = self.field(path)?;
        to_numbers(v)
            .ok_or_else(|| self.err(format!("{} is not an array of numbers", path.join("."))))
    }

    fn array<const K: usize>(&self, path: &[&str]) -> Result<[f64; K]> {
        let v = self.numbers(path)?;
        v.as_slice().try_into().map_err(|_| {
            self.err(format!(
                "{} has {} numbers, expected {K}",
                path.join("."),
                v.len()
            ))
        })
    }

    fn text(&self, path: &[&str]) -> Result<&str> {
        self.field(path)?
            .as_str()
            .ok_or_else(|| self.err(format!("{} is not a string", path.join("."))))
    }

    /// The record's `kind`.
    pub fn kind(&self) -> Result<&str> {
        self.text(&["kind"])
    }
}

pub(crate) fn to_numbers(v: &Value) -> Option<Vec<f64>> {
    v.as_array()?.iter().map(Value::as_f64).collect()
}

/// Reads every record of one JSON-lines file.
pub fn read_jsonl(path: &Path) -> Result<Vec<Record>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error::Data {
        file: file.clone(),
        line: 0,
        message: e.to_string(),
    })?;
    parse_jsonl(&file, &text)
}

/// Parses the text of a `.jsonl` golden file; `file` names it in errors and records.
pub fn parse_jsonl(file: &str, text: &str) -> Result<Vec<Record>> {
    let file = file.to_string();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l)
                .map(|value| Record {
                    file: file.clone(),
                    line: n + 1,
                    value,
                })
                .map_err(|e| Error::Data {
                    file: file.clone(),
                    line: n + 1,
                    message: e.to_string(),
                })
        })
        .collect()
}

/// Reads every `*.jsonl` file of a directory, in file-name order.
pub fn read_dir(dir: &Path) -> Result<Vec<Record>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::Data {
        file: dir.display().to_string(),
        line: 0,
        message: format!("cannot read the golden directory: {e}"),
    })?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        out.extend(read_jsonl(&p)?);
    }
    Ok(out)
}

/// Groups records by structure: the key names the batch they can share.
pub fn group_key(r: &Record) -> Result<String> {
    let kind = r.kind()?;
    Ok(match kind {
        "sphere_on_plane" | "point_on_plane" => format!(
            "{kind}/{}/rolling={}",
            r.text(&["plane_body"])?,
            r.value
                .get("rolling")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        ),
        "brick_on_corners" => format!(
            "{kind}/{}/corners={}",
            r.text(&["plane_body"])?,
            r.field(&["follower_points"])?
                .as_array()
                .map_or(0, Vec::len)
        ),
        other => other.to_string(),
    })
}

/// Checks every evaluation record (contacts and bricks) on the CPU f64 path; other kinds
/// (trajectories) are counted as skipped.
pub fn check_records_cpu(records: &[Record], tol: f64) -> Result<Report> {
    let mut groups: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records {
        groups.entry(group_key(r)?).or_default().push(r);
    }
    let mut report = Report::default();
    for (key, group) in groups {
        let kind = group[0].kind()?;
        match kind {
            "sphere_on_plane" | "point_on_plane" => {
                let (batch, handles) = contact_batch(&group)?;
                let ev = batch.evaluate();
                compare_contact(&group, &batch, &handles, &ev, tol, &mut report)?;
            }
            "brick_on_corners" => {
                let (batch, handles) = brick_batch(&group)?;
                let ev = batch.evaluate();
                compare_brick(&group, &handles, &ev, tol, &mut report)?;
            }
            _ => {
                *report.skipped.entry(key).or_default() += group.len();
            }
        }
    }
    Ok(report)
}

/// Compares two evaluations of the same batch quantity by quantity (e.g. GPU against the CPU
/// reference), with `|a − b| ≤ tol · max(1, |b|)`; `b` is the reference. Instances the
/// reference flags are compared on their status only.
pub fn compare_evaluations(
    got: &Evaluation,
    reference: &Evaluation,
    tol: f64,
    report: &mut Report,
) -> Result<()> {
    if got.len != reference.len
        || got.nu != reference.nu
        || got.constraints.len() != reference.constraints.len()
    {
        return Err(Error::Dimension {
            what: "evaluations to compare",
            got: got.len,
            expected: reference.len,
        });
    }
    let nu = reference.nu;
    for i in 0..reference.len {
        let loc = || format!("instance {i}");
        report.check(
            "status",
            loc,
            got.status[i] as f64,
            reference.status[i] as f64,
            0.0,
        );
        if reference.status[i] != crate::batch::status::OK {
            continue;
        }
        report.check_slice("udot", &loc(), got.udot_of(i)?, reference.udot_of(i)?, tol);
        report.check_slice(
            "udot_unconstrained",
            &loc(),
            &got.udot_unconstrained[i * nu..(i + 1) * nu],
            &reference.udot_unconstrained[i * nu..(i + 1) * nu],
            tol,
        );
        for (k, (a, b)) in got
            .constraints
            .iter()
            .zip(&reference.constraints)
            .enumerate()
        {
            let at = format!("instance {i} constraint {k}");
            report.check_slice(
                "position_errors",
                &at,
                a.position_errors_of(i)?,
                b.position_errors_of(i)?,
                tol,
            );
            report.check_slice(
                "velocity_errors",
                &at,
                a.velocity_errors_of(i)?,
                b.velocity_errors_of(i)?,
                tol,
            );
            // A residual G u̇ + k ≈ 0: its rounding scales with the terms; |u̇| stands for them.
            let scale = reference
                .udot_of(i)?
                .iter()
                .fold(0.0f64, |m, x| m.max(x.abs()));
            for (k, (x, y)) in a
                .acceleration_errors_of(i)?
                .iter()
                .zip(b.acceleration_errors_of(i)?)
                .enumerate()
            {
                report.check_scaled(
                    "acceleration_errors (scale |u̇|)",
                    || format!("{at}[{k}]"),
                    *x,
                    *y,
                    scale,
                    tol,
                );
            }
            report.check_slice(
                "multipliers",
                &at,
                a.multipliers_of(i)?,
                b.multipliers_of(i)?,
                tol,
            );
            for (fa, fb) in a.body_forces_of(i)?.iter().zip(b.body_forces_of(i)?) {
                report.check_vector("body_forces (scale ‖F‖)", &at, fa, fb, tol);
            }
            report.check("power", || at.clone(), a.power[i], b.power[i], tol);
            if let (Some(x), Some(y)) = (&a.contact_point, &b.contact_point) {
                report.check_vector("contact_point (scale ‖p‖)", &at, &x[i], &y[i], tol);
            }
            if let (Some(x), Some(y)) = (&a.separation, &b.separation) {
                report.check("separation", || at.clone(), x[i], y[i], tol);
            }
            if let (Some(x), Some(y)) = (&a.contact_force, &b.contact_force) {
                report.check_vector("contact_force (scale ‖F‖)", &at, &x[i], &y[i], tol);
            }
        }
    }
    report.records += reference.len;
    Ok(())
}
