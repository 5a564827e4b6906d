//! Prescribed bodies in scenario files: a `[[body]]` with `prescribed = { kind = …, … }` moves
//! by a motion law (`crate::motion`) instead of its own dynamics; every number is a scalar
//! (fixed, `"$var"` or a distribution), drawn per instance.
//!
//! ```toml
//! [[body]]
//! name = "plate"
//! prescribed = { kind = "tilting",                       # the golden files' tilting plate
//!                axis1 = [1.0, 0.0, 0.0], axis2 = [0.0, 1.0, 0.0],
//!                angle_amplitude = [0.2, { uniform = [0.0, 0.1] }],   # rad
//!                angle_rate = [3.0, 2.0], angle_phase = [0.0, 1.0],   # rad/s, rad
//!                base_rotation = [0.0, 0.0, 0.0],                     # rotation vector R0
//!                origin_offset = [0.0, 0.0, 0.0], origin_amplitude = [0.0, 0.0, 0.01],
//!                origin_rate = [0.0, 0.0, 5.0], origin_phase = [0.0, 0.0, 0.0] }
//! # or kind = "polynomial": t0, base_rotation, position = [[x0, x1, …], [y…], [z…]],
//! #    angles = [[θ1…], [θ2…], [θ3…]] (coefficients of (t − t0)^k, degree ≤ 5)
//! # or kind = "constant": position, rotation, velocity, angular_velocity, acceleration,
//! #    angular_acceleration (the acceleration held, pose and velocity integrated)
//! ```
//! Omitted fields take the law's defaults (axes x and y, everything else 0).

use std::sync::Arc;

use toml::{Spanned, Value};

use super::CliError;
use super::sample::Scalar;
use super::scenario::Parser;
use crate::math::quaternion_from_rotation_vector;
use crate::motion::polynomial::MAX_DEGREE;
use crate::motion::{MotionLaw, PolynomialMotion, TiltingMotion};

/// How a prescribed body of a scenario moves: a law kind and its per-instance fields, each a
/// list of scalars, in the order the law takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct MotionSpec {
    /// `constant`, `tilting` or `polynomial`.
    pub kind: &'static str,
    /// Polynomial degree (0 for the other kinds).
    pub degree: usize,
    /// `(field, scalars)`; rotations are rotation vectors (3 scalars).
    pub fields: Vec<(&'static str, Vec<Scalar>)>,
}

/// A prescribed body of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct PrescribedSpec {
    /// Name, as constraints refer to it (`plane = …`).
    pub name: String,
    /// Its motion.
    pub motion: MotionSpec,
}

/// One instance's draw of a prescribed body.
#[derive(Debug, Clone, PartialEq)]
pub enum PrescribedDraw {
    /// Pose, velocity and acceleration columns (the constant law).
    Constant {
        /// `[e0, e1, e2, e3, x, y, z]`.
        pose: [f64; 7],
        /// `[w, v]` in Ground.
        velocity: [f64; 6],
        /// `[b, a]` in Ground.
        acceleration: [f64; 6],
    },
    /// The law's parameters, flat in its order.
    Law(Vec<f64>),
}

/// Fields of each kind: name, width, default value per entry.
fn fields_of(kind: &str, degree: usize) -> Option<Vec<(&'static str, usize, Vec<f64>)>> {
    let z = |n: usize| vec![0.0; n];
    Some(match kind {
        "constant" => [
            "position",
            "rotation",
            "velocity",
            "angular_velocity",
            "acceleration",
            "angular_acceleration",
        ]
        .into_iter()
        .map(|f| (f, 3, z(3)))
        .collect(),
        "tilting" => vec![
            ("axis1", 3, vec![1.0, 0.0, 0.0]),
            ("axis2", 3, vec![0.0, 1.0, 0.0]),
            ("angle_amplitude", 2, z(2)),
            ("angle_rate", 2, z(2)),
            ("angle_phase", 2, z(2)),
            ("base_rotation", 3, z(3)),
            ("origin_offset", 3, z(3)),
            ("origin_amplitude", 3, z(3)),
            ("origin_rate", 3, z(3)),
            ("origin_phase", 3, z(3)),
        ],
        "polynomial" => vec![
            ("t0", 1, z(1)),
            ("base_rotation", 3, z(3)),
            ("position", 3 * (degree + 1), z(3 * (degree + 1))),
            ("angles", 3 * (degree + 1), z(3 * (degree + 1))),
        ],
        _ => return None,
    })
}

const KINDS: &str = "constant, tilting, polynomial";

/// Parses `prescribed = { kind = …, … }` of body `name`.
pub(super) fn parse(
    p: &mut Parser<'_>,
    name: String,
    v: &Spanned<Value>,
    field: &str,
) -> Result<PrescribedSpec, CliError> {
    let span = v.span();
    let at = |p: &Parser<'_>, f: String, msg: String| p.at(span.clone(), f, msg);
    let Value::Table(t) = v.get_ref() else {
        return Err(at(
            p,
            field.into(),
            format!("accepted: a table {{ kind = {KINDS}, … }}"),
        ));
    };
    let kind: &'static str = match t.get("kind").and_then(Value::as_str) {
        Some("constant") => "constant",
        Some("tilting") => "tilting",
        Some("polynomial") => "polynomial",
        other => {
            return Err(at(
                p,
                format!("{field}.kind"),
                format!("{other:?}; accepted: {KINDS}"),
            ));
        }
    };
    // Polynomial coefficient lists set the degree: the longest list.
    let mut degree = 0;
    if kind == "polynomial" {
        for key in ["position", "angles"] {
            if let Some(Value::Array(axes)) = t.get(key) {
                for axis in axes {
                    let n = axis.as_array().map_or(1, Vec::len);
                    degree = degree.max(n.saturating_sub(1));
                }
            }
        }
        if degree > MAX_DEGREE {
            return Err(at(
                p,
                format!("{field}.position/angles"),
                format!(
                    "{} coefficients per coordinate; accepted: at most {} (degree ≤ {MAX_DEGREE})",
                    degree + 1,
                    MAX_DEGREE + 1
                ),
            ));
        }
    }
    let specs = fields_of(kind, degree).unwrap_or_default();
    for key in t.keys() {
        if key != "kind" && !specs.iter().any(|(f, _, _)| f == key) {
            let names: Vec<&str> = specs.iter().map(|(f, _, _)| *f).collect();
            return Err(at(
                p,
                format!("{field}.{key}"),
                format!(
                    "does not apply to kind = {kind:?}; accepted: kind, {}",
                    names.join(", ")
                ),
            ));
        }
    }
    let mut fields = Vec::with_capacity(specs.len());
    for (f, width, default) in specs {
        let path = format!("{field}.{f}");
        let values = match t.get(f) {
            None => default.into_iter().map(Scalar::Fixed).collect(),
            Some(value) if kind == "polynomial" && (f == "position" || f == "angles") => {
                polynomial_coefficients(p, value, degree, span.clone(), &path)?
            }
            Some(Value::Array(items)) if items.len() == width => {
                let mut out = Vec::with_capacity(width);
                for (k, item) in items.iter().enumerate() {
                    out.push(p.scalar_value(item, span.clone(), &format!("{path}[{k}]"))?);
                }
                out
            }
            Some(value) if width == 1 => vec![p.scalar_value(value, span.clone(), &path)?],
            Some(_) => {
                return Err(at(
                    p,
                    path,
                    format!("accepted: an array of {width} scalars"),
                ));
            }
        };
        fields.push((f, values));
    }
    Ok(PrescribedSpec {
        name,
        motion: MotionSpec {
            kind,
            degree,
            fields,
        },
    })
}

/// `[[c0, c1, …], [..], [..]]` (one list per coordinate, padded with zeros to `degree + 1`).
fn polynomial_coefficients(
    p: &mut Parser<'_>,
    value: &Value,
    degree: usize,
    span: std::ops::Range<usize>,
    path: &str,
) -> Result<Vec<Scalar>, CliError> {
    let accepted = "accepted: three arrays of coefficients [[x0, x1, …], [y0, …], [z0, …]] \
                    of (t − t0)^0, (t − t0)^1, …";
    let axes = match value.as_array() {
        Some(a) if a.len() == 3 => a,
        _ => return Err(p.at(span, path.to_string(), accepted.to_string())),
    };
    let mut out = Vec::with_capacity(3 * (degree + 1));
    for (j, axis) in axes.iter().enumerate() {
        let Some(items) = axis.as_array() else {
            return Err(p.at(span, format!("{path}[{j}]"), accepted.to_string()));
        };
        for k in 0..=degree {
            out.push(match items.get(k) {
                Some(item) => p.scalar_value(item, span.clone(), &format!("{path}[{j}][{k}]"))?,
                None => Scalar::Fixed(0.0),
            });
        }
    }
    Ok(out)
}

impl PrescribedSpec {
    /// The motion law of the template (`None`: the constant law).
    pub fn law(&self) -> crate::Result<Option<Arc<dyn MotionLaw>>> {
        Ok(match self.motion.kind {
            "tilting" => Some(Arc::new(TiltingMotion)),
            "polynomial" => Some(Arc::new(PolynomialMotion::new(self.motion.degree)?)),
            _ => None,
        })
    }

    /// Draws one instance with `take(scalar, path)` (paths `name.field[k]`).
    pub fn draw(&self, take: &mut super::instances::Take) -> PrescribedDraw {
        let mut values: Vec<(&str, Vec<f64>)> = Vec::with_capacity(self.motion.fields.len());
        for (f, scalars) in &self.motion.fields {
            let drawn = scalars
                .iter()
                .enumerate()
                .map(|(k, s)| take(s, &|| format!("{}.{f}[{k}]", self.name)))
                .collect();
            values.push((f, drawn));
        }
        let get = |f: &str| -> [f64; 3] {
            let v = values
                .iter()
                .find(|(n, _)| *n == f)
                .map(|(_, v)| v.as_slice());
            let v = v.unwrap_or(&[0.0; 3]);
            [v[0], v[1], v[2]]
        };
        if self.motion.kind == "constant" {
            let (p, r) = (get("position"), get("rotation"));
            let e = quaternion_from_rotation_vector(r);
            let (v, w) = (get("velocity"), get("angular_velocity"));
            let (a, b) = (get("acceleration"), get("angular_acceleration"));
            return PrescribedDraw::Constant {
                pose: [e[0], e[1], e[2], e[3], p[0], p[1], p[2]],
                velocity: [w[0], w[1], w[2], v[0], v[1], v[2]],
                acceleration: [b[0], b[1], b[2], a[0], a[1], a[2]],
            };
        }
        // The law's flat parameters; base rotations are drawn as rotation vectors.
        let mut flat = Vec::new();
        for (f, v) in &values {
            if *f == "base_rotation" {
                flat.extend(quaternion_from_rotation_vector([v[0], v[1], v[2]]));
            } else {
                flat.extend(v);
            }
        }
        PrescribedDraw::Law(flat)
    }
}
