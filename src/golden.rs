//! Reference data in the golden-file format (Simbody's output, one JSON record per line; see
//! `tests/data/golden/README.md`): reading, building batches from records, and comparing.
//!
//! Records are grouped by structure (kind, rolling, plane body, corner count) so that each group
//! is one batch of many instances — the same path users take. Comparisons use the precision
//! contract's relative bound `|a − b| ≤ tol · max(1, |b|)` and keep the worst error per quantity.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use nalgebra::DVector;
use serde_json::Value;

use crate::batch::Batch;
use crate::constraints::{Constraint, PointOnPlaneContact, SphereOnPlaneContact};
use crate::error::{Error, Result};
use crate::evaluate::Evaluation;
use crate::model::{BodyId, ConstraintId, GROUND, SystemTemplate};

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

fn to_numbers(v: &Value) -> Option<Vec<f64>> {
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

/// Worst error seen for one quantity.
#[derive(Debug, Clone, PartialEq)]
pub struct Worst {
    /// `|a − b| / max(1, |b|)`.
    pub relative: f64,
    /// `|a − b|`.
    pub absolute: f64,
    /// Where (`file:line`, component).
    pub location: String,
    /// Number of values compared.
    pub count: usize,
}

/// Outcome of a comparison: worst error per quantity and every failure.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Worst error per quantity.
    pub worst: BTreeMap<String, Worst>,
    /// Failures (`quantity at location: got a, expected b`), at most 50 kept.
    pub failures: Vec<String>,
    /// Number of failures (all of them).
    pub failure_count: usize,
    /// Records compared.
    pub records: usize,
    /// Records skipped, per kind (kinds this check does not cover, e.g. trajectories).
    pub skipped: BTreeMap<String, usize>,
}

impl Report {
    /// Compares one value with `|got − expected| ≤ tol · max(1, |expected|)`. A NaN fails.
    pub fn check(
        &mut self,
        quantity: &str,
        location: impl Fn() -> String,
        got: f64,
        expected: f64,
        tol: f64,
    ) {
        let absolute = (got - expected).abs();
        let relative = absolute / expected.abs().max(1.0);
        let ok = relative <= tol;
        let entry = self.worst.entry(quantity.to_string()).or_insert(Worst {
            relative: 0.0,
            absolute: 0.0,
            location: String::new(),
            count: 0,
        });
        entry.count += 1;
        if relative > entry.relative || relative.is_nan() {
            entry.relative = relative;
            entry.absolute = absolute;
            entry.location = location();
        }
        if !ok {
            self.failure_count += 1;
            if self.failures.len() < 50 {
                self.failures.push(format!(
                    "{quantity} at {}: got {got:e}, expected {expected:e} (relative error {relative:e} > {tol:e})",
                    location()
                ));
            }
        }
    }

    /// As [`check`](Self::check) with an explicit scale: `|got − expected| ≤ tol · max(1, |expected|,
    /// scale)`. For residuals that are differences of large terms (the acceleration error at the
    /// solved u̇ is `G u̇ + k ≈ 0`), rounding scales with the terms, not with the ≈ 0 result.
    pub fn check_scaled(
        &mut self,
        quantity: &str,
        location: impl Fn() -> String,
        got: f64,
        expected: f64,
        scale: f64,
        tol: f64,
    ) {
        let s = expected.abs().max(1.0).max(scale.abs());
        // Compare (got/s) with (expected/s) under the plain rule, whose scale is then ≤ 1.
        self.check(quantity, location, got / s, expected / s, tol);
    }

    /// Compares a vector component by component, each relative to the vector's magnitude:
    /// `|got_k − expected_k| ≤ tol · max(1, ‖expected‖)`. A small component of a large force
    /// carries the rounding of the whole force, so the magnitude is the honest scale.
    pub fn check_vector(
        &mut self,
        quantity: &str,
        location: &str,
        got: &[f64],
        expected: &[f64],
        tol: f64,
    ) {
        let norm = expected.iter().map(|x| x * x).sum::<f64>().sqrt();
        for (k, (g, e)) in got.iter().zip(expected).enumerate() {
            self.check_scaled(quantity, || format!("{location}[{k}]"), *g, *e, norm, tol);
        }
    }

    /// Compares two slices element by element (lengths must agree).
    pub fn check_slice(
        &mut self,
        quantity: &str,
        location: &str,
        got: &[f64],
        expected: &[f64],
        tol: f64,
    ) {
        if got.len() != expected.len() {
            self.failure_count += 1;
            self.failures.push(format!(
                "{quantity} at {location}: got {} values, expected {}",
                got.len(),
                expected.len()
            ));
            return;
        }
        for (k, (g, e)) in got.iter().zip(expected).enumerate() {
            self.check(quantity, || format!("{location}[{k}]"), *g, *e, tol);
        }
    }

    /// True when nothing failed and something was compared.
    pub fn passed(&self) -> bool {
        self.failure_count == 0 && self.records > 0
    }

    /// Adds another report's findings to this one.
    pub fn merge(&mut self, other: Report) {
        for (q, w) in other.worst {
            match self.worst.get_mut(&q) {
                Some(mine) => {
                    mine.count += w.count;
                    if w.relative > mine.relative {
                        mine.relative = w.relative;
                        mine.absolute = w.absolute;
                        mine.location = w.location;
                    }
                }
                None => {
                    self.worst.insert(q, w);
                }
            }
        }
        for f in other.failures {
            if self.failures.len() < 50 {
                self.failures.push(f);
            }
        }
        self.failure_count += other.failure_count;
        self.records += other.records;
        for (k, n) in other.skipped {
            *self.skipped.entry(k).or_default() += n;
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} records compared, {} failures",
            self.records, self.failure_count
        )?;
        for (kind, n) in &self.skipped {
            writeln!(f, "  skipped {n} records of kind {kind}")?;
        }
        writeln!(
            f,
            "  {:<40} {:>8} {:>12} {:>12}  worst at",
            "quantity", "values", "rel. error", "abs. error"
        )?;
        for (q, w) in &self.worst {
            writeln!(
                f,
                "  {q:<40} {:>8} {:>12.3e} {:>12.3e}  {}",
                w.count, w.relative, w.absolute, w.location
            )?;
        }
        for fail in &self.failures {
            writeln!(f, "  FAIL {fail}")?;
        }
        Ok(())
    }
}

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

fn set_free_body(batch: &mut Batch, body: BodyId, i: usize, r: &Record, key: &str) -> Result<()> {
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
fn set_prescribed_motion(batch: &mut Batch, body: BodyId, i: usize, r: &Record) -> Result<()> {
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
fn motion_of(v: &Value) -> Option<([f64; 7], [f64; 6], [f64; 6])> {
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
fn set_contact_params(
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

fn plane_frame(r: &Record) -> Result<[f64; 7]> {
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
    stepper: &mut crate::integrate::Stepper,
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
    mut make_stepper: impl FnMut() -> Result<crate::integrate::Stepper>,
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
