//! Scenario files: what a Monte Carlo study declares, read from TOML and checked before any
//! work, every mistake reported with file, line, column, the field and what is accepted.
//!
//! ```toml
//! name = "balls-on-inclines"
//! instances = 1000
//! seed = 7
//! gravity = [0.0, 0.0, -9.81]
//!
//! [vars]                                  # per-instance draws that several fields share
//! radius = { uniform = [0.05, 0.2] }
//!
//! [[body]]
//! name = "ball"
//! mass = { log_uniform = [0.5, 5.0] }
//! com = [{ normal = [0.0, 0.002] }, 0.0, 0.0]
//! inertia = { solid_sphere = "$radius" }  # or { gyration = k }, or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz]
//! position = [0.0, 0.0, "$radius"]        # body origin in Ground
//! rotation = [0.0, 0.0, 0.0]              # rotation vector (rad)
//! velocity = [0.0, 0.0, 0.0]              # origin velocity in Ground
//! angular_velocity = [0.0, 0.0, 0.0]      # in Ground
//!
//! [[constraint]]
//! kind = "sphere_on_plane"                # sphere_on_plane | point_on_plane | point_to_ground
//! plane = "ground"
//! body = "ball"
//! rolling = { choice = [true, false] }
//! radius = "$radius"
//! incline_deg = { uniform = [0.0, 30.0] } # plane frame: rotated about Ground x
//!
//! [simulation]
//! integrator = "rk4"                      # euler | rk4 | rkm
//! step = 1e-3                             # euler, rk4 (rkm: accuracy, max_step)
//! stabilization = "projection"            # none | projection | baumgarte
//! duration = 1.0
//! assemble = true
//! backend = "auto"                        # auto | cpu | gpu
//! precision = "f64"                       # f32 | f64 (GPU only)
//!
//! [record]
//! interval = 0.05                         # time-series and event sampling interval
//! series_instances = 8                    # instances 0..8 get time series
//! events = true                           # lift-off time of plane contacts
//! ```
//!
//! A scalar field is a number, `"$var"`, or one of `{ uniform = [lo, hi] }`,
//! `{ normal = [mean, std] }`, `{ log_uniform = [lo, hi] }`, `{ choice = [a, b, …] }`.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::{Spanned, Value};

use super::CliError;
use super::prescribed::PrescribedSpec;
use super::sample::Scalar;
use crate::backend::Backend;
use crate::gpu::Precision;
use crate::integrate::{Integrator, Stabilization, StepOptions};

/// The most samples per instance a scenario may ask for (`duration / record.interval`): each
/// is a stepping call over every instance (and an evaluation when events are recorded).
pub const MAX_RECORD_SAMPLES: usize = 10_000_000;

/// The embedded default study (`simbatch run` with no file).
pub const DEFAULT_SCENARIO: &str = include_str!("default.toml");

/// What an instance's body is, and how it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct BodySpec {
    /// Name, as constraints refer to it.
    pub name: String,
    /// Mass (> 0 once drawn).
    pub mass: Scalar,
    /// COM offset in the body frame.
    pub com: [Scalar; 3],
    /// Central inertia.
    pub inertia: InertiaSpec,
    /// Body origin in Ground.
    pub position: [Scalar; 3],
    /// Rotation vector (axis × angle, rad) of the body frame in Ground.
    pub rotation: [Scalar; 3],
    /// Velocity of the origin in Ground.
    pub velocity: [Scalar; 3],
    /// Angular velocity in Ground.
    pub angular_velocity: [Scalar; 3],
}

/// How a body's central inertia is given.
#[derive(Debug, Clone, PartialEq)]
pub enum InertiaSpec {
    /// `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]`.
    Full([Scalar; 6]),
    /// Isotropic `m k²` with radius of gyration `k`.
    Gyration(Scalar),
    /// A uniform solid sphere of radius `r`: isotropic `2/5 m r²`.
    SolidSphere(Scalar),
}

/// A structural yes/no (it changes the rows): fixed, or drawn with equal odds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// The same for every instance.
    Fixed(bool),
    /// Half the instances each way, drawn per instance.
    Either,
}

/// A constraint of the template, with its per-instance parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstraintSpec {
    /// Simbody's `SphereOnPlaneContact` with the plane frame rotated by `incline_deg` about
    /// Ground x and placed at `plane_origin` (in the plane body's frame).
    SphereOnPlane {
        /// Plane body (`None`: Ground).
        plane: Option<usize>,
        /// Ball body.
        body: usize,
        /// Rolling rows.
        rolling: Flag,
        /// Sphere radius.
        radius: Scalar,
        /// Sphere centre in the ball's frame.
        sphere_center: [Scalar; 3],
        /// Plane incline about x, degrees.
        incline_deg: Scalar,
        /// Plane origin in the plane body's frame.
        plane_origin: [Scalar; 3],
    },
    /// Simbody's `PointOnPlaneContact`.
    PointOnPlane {
        /// Plane body (`None`: Ground).
        plane: Option<usize>,
        /// Follower body.
        body: usize,
        /// Follower point in the follower's frame.
        follower_point: [Scalar; 3],
        /// Plane incline about x, degrees.
        incline_deg: Scalar,
        /// Plane origin in the plane body's frame.
        plane_origin: [Scalar; 3],
    },
    /// RBDL's point-to-ground contact.
    PointToGround {
        /// The body.
        body: usize,
        /// Contact point in the body frame.
        point: [Scalar; 3],
        /// Ground normals (unit, orthogonal), one row each.
        normals: Vec<[f64; 3]>,
        /// Baumgarte time constant (`None`: no Baumgarte).
        baumgarte_time: Option<Scalar>,
    },
}

impl ConstraintSpec {
    /// Kind name as written in scenarios.
    pub fn kind(&self) -> &'static str {
        match self {
            ConstraintSpec::SphereOnPlane { .. } => "sphere_on_plane",
            ConstraintSpec::PointOnPlane { .. } => "point_on_plane",
            ConstraintSpec::PointToGround { .. } => "point_to_ground",
        }
    }

    /// Whether lift-off events apply (plane contacts).
    pub fn has_normal_force(&self) -> bool {
        !matches!(self, ConstraintSpec::PointToGround { .. })
    }
}

/// Time stepping and where it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulation {
    /// Integrator and drift control.
    pub options: StepOptions,
    /// Simulated time per instance.
    pub duration: f64,
    /// Assemble positions and velocities onto the constraints after sampling.
    pub assemble: bool,
    /// Where it runs.
    pub backend: Backend,
    /// GPU precision.
    pub precision: Precision,
}

/// What is recorded besides the final values.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordSpec {
    /// Sampling interval of time series and events (`None`: final values only).
    pub interval: Option<f64>,
    /// Instances with a global index below this get time series.
    pub series_instances: usize,
    /// Record lift-off times of plane contacts.
    pub events: bool,
}

/// A checked scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Where it came from (`<default>` for the embedded study).
    pub file: String,
    /// Its text, as read (kept for the manifest and its hash).
    pub source: String,
    /// Study name.
    pub name: String,
    /// Instances in the whole study (all shards).
    pub instances: usize,
    /// Seed of every draw.
    pub seed: u64,
    /// Gravity in Ground.
    pub gravity: [Scalar; 3],
    /// `[vars]`: names and distributions, drawn first per instance.
    pub vars: Vec<(String, Scalar)>,
    /// Free bodies.
    pub bodies: Vec<BodySpec>,
    /// Prescribed bodies (`[[body]]` with `prescribed = …`), after the free ones in the
    /// constraints' body indices.
    pub prescribed: Vec<PrescribedSpec>,
    /// Constraints.
    pub constraints: Vec<ConstraintSpec>,
    /// Time stepping.
    pub simulation: Simulation,
    /// Recording.
    pub record: RecordSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<String>,
    instances: Spanned<i64>,
    seed: Option<Spanned<i64>>,
    gravity: Option<Spanned<Value>>,
    #[serde(default)]
    vars: BTreeMap<String, Spanned<Value>>,
    #[serde(default)]
    body: Vec<RawBody>,
    #[serde(default)]
    constraint: Vec<RawConstraint>,
    simulation: Spanned<RawSimulation>,
    record: Option<RawRecord>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBody {
    name: Spanned<String>,
    mass: Option<Spanned<Value>>,
    com: Option<Spanned<Value>>,
    inertia: Option<Spanned<Value>>,
    prescribed: Option<Spanned<Value>>,
    position: Option<Spanned<Value>>,
    rotation: Option<Spanned<Value>>,
    velocity: Option<Spanned<Value>>,
    angular_velocity: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstraint {
    kind: Spanned<String>,
    body: Spanned<String>,
    plane: Option<Spanned<String>>,
    rolling: Option<Spanned<Value>>,
    radius: Option<Spanned<Value>>,
    sphere_center: Option<Spanned<Value>>,
    incline_deg: Option<Spanned<Value>>,
    plane_origin: Option<Spanned<Value>>,
    follower_point: Option<Spanned<Value>>,
    point: Option<Spanned<Value>>,
    normals: Option<Spanned<Value>>,
    baumgarte_time: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSimulation {
    integrator: Option<Spanned<String>>,
    step: Option<Spanned<f64>>,
    accuracy: Option<Spanned<f64>>,
    max_step: Option<Spanned<f64>>,
    stabilization: Option<Spanned<String>>,
    tolerance: Option<Spanned<f64>>,
    duration: Spanned<f64>,
    assemble: Option<bool>,
    backend: Option<Spanned<String>>,
    precision: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord {
    interval: Option<Spanned<f64>>,
    series_instances: Option<Spanned<i64>>,
    events: Option<bool>,
}

/// Turns byte spans into `file:line:column` errors.
struct Located<'a> {
    file: &'a str,
    source: &'a str,
}

impl Located<'_> {
    fn at(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> CliError {
        let before = &self.source[..span.start.min(self.source.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        CliError::Scenario {
            file: self.file.to_string(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }
}

const SCALAR_ACCEPTED: &str = "a number, \"$var\", or one of {uniform = [lo, hi]}, \
    {normal = [mean, std]}, {log_uniform = [lo, hi]}, {choice = [a, b, ...]}";

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

impl Scenario {
    /// Reads and checks a scenario; `file` names it in errors.
    pub fn parse(file: &str, source: &str) -> Result<Scenario, CliError> {
        let loc = Located { file, source };
        let raw: Raw = toml::from_str(source).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let message = e.message().to_string();
            let field = message
                .split('`')
                .nth(1)
                .filter(|_| message.contains("field"))
                .unwrap_or("")
                .to_string();
            loc.at(span, field, message)
        })?;

        let instances = usize::try_from(*raw.instances.get_ref())
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                loc.at(
                    raw.instances.span(),
                    "instances",
                    format!("got {}; accepted: an integer ≥ 1", raw.instances.get_ref()),
                )
            })?;
        let seed = match &raw.seed {
            None => 0,
            Some(s) => u64::try_from(*s.get_ref()).map_err(|_| {
                loc.at(
                    s.span(),
                    "seed",
                    format!("got {}; accepted: an integer ≥ 0", s.get_ref()),
                )
            })?,
        };

        let var_names: Vec<String> = raw.vars.keys().cloned().collect();
        let mut p = Parser {
            loc: &loc,
            vars: &var_names,
        };
        let mut vars = Vec::new();
        for (name, value) in &raw.vars {
            let field = format!("vars.{name}");
            let s = p.scalar(value, &field)?;
            if let Scalar::Var(_) = s {
                return Err(loc.at(
                    value.span(),
                    field,
                    "a var cannot refer to another var; accepted: a number or a distribution",
                ));
            }
            vars.push((name.clone(), s));
        }

        let gravity = match &raw.gravity {
            Some(g) => p.vec3(g, "gravity")?,
            None => [Scalar::Fixed(0.0), Scalar::Fixed(0.0), Scalar::Fixed(-9.81)],
        };

        let mut bodies: Vec<BodySpec> = Vec::new();
        let mut prescribed: Vec<PrescribedSpec> = Vec::new();
        for (k, b) in raw.body.iter().enumerate() {
            let name = b.name.get_ref().clone();
            let field = |f: &str| format!("body[{k}].{f}");
            if name.is_empty()
                || name == "ground"
                || bodies.iter().any(|o| o.name == name)
                || prescribed.iter().any(|o| o.name == name)
            {
                return Err(loc.at(
                    b.name.span(),
                    field("name"),
                    format!("{name:?}; accepted: a non-empty name other than \"ground\", unique among bodies"),
                ));
            }
            let zero = || [Scalar::Fixed(0.0), Scalar::Fixed(0.0), Scalar::Fixed(0.0)];
            let opt3 = |p: &mut Parser, v: &Option<Spanned<Value>>, f: &str| match v {
                Some(v) => p.vec3(v, &field(f)),
                None => Ok(zero()),
            };
            if let Some(motion) = &b.prescribed {
                let free_fields = [
                    ("mass", &b.mass),
                    ("com", &b.com),
                    ("inertia", &b.inertia),
                    ("position", &b.position),
                    ("rotation", &b.rotation),
                    ("velocity", &b.velocity),
                    ("angular_velocity", &b.angular_velocity),
                ];
                if let Some((f, Some(v))) = free_fields.iter().find(|(_, v)| v.is_some()) {
                    return Err(loc.at(
                        v.span(),
                        field(f),
                        "does not apply to a prescribed body (its motion is given by                          `prescribed`); accepted fields: name, prescribed",
                    ));
                }
                prescribed.push(super::prescribed::parse(
                    &mut p,
                    name,
                    motion,
                    &field("prescribed"),
                )?);
                continue;
            }
            let required = |v: &Option<Spanned<Value>>, f: &str| {
                v.clone().ok_or_else(|| {
                    loc.at(
                        b.name.span(),
                        field(f),
                        "missing; a free body needs mass and inertia (or `prescribed = { kind \
                         = … }` for a driven body)",
                    )
                })
            };
            let mass = p.positive(&required(&b.mass, "mass")?, &field("mass"))?;
            let inertia = p.inertia(&required(&b.inertia, "inertia")?, &field("inertia"))?;
            bodies.push(BodySpec {
                name,
                mass,
                com: opt3(&mut p, &b.com, "com")?,
                inertia,
                position: opt3(&mut p, &b.position, "position")?,
                rotation: opt3(&mut p, &b.rotation, "rotation")?,
                velocity: opt3(&mut p, &b.velocity, "velocity")?,
                angular_velocity: opt3(&mut p, &b.angular_velocity, "angular_velocity")?,
            });
        }
        if bodies.is_empty() {
            return Err(loc.at(
                0..0,
                "body",
                "no [[body]]; accepted: at least one free body",
            ));
        }

        let mut constraints = Vec::new();
        for (k, c) in raw.constraint.iter().enumerate() {
            constraints.push(p.constraint(k, c, &bodies, &prescribed)?);
        }

        let simulation = p.simulation(&raw.simulation)?;
        let record = match &raw.record {
            None => RecordSpec {
                interval: None,
                series_instances: 0,
                events: false,
            },
            Some(r) => {
                let interval = match &r.interval {
                    None => None,
                    Some(i) => {
                        let v = *i.get_ref();
                        if !(v.is_finite() && v > 0.0 && v <= simulation.duration) {
                            return Err(loc.at(
                                i.span(),
                                "record.interval",
                                format!(
                                    "got {v}; accepted: a number in (0, simulation.duration = {}]",
                                    simulation.duration
                                ),
                            ));
                        }
                        let samples = (simulation.duration / v).ceil();
                        if samples > MAX_RECORD_SAMPLES as f64 {
                            return Err(loc.at(
                                i.span(),
                                "record.interval",
                                format!(
                                    "got {v}: {samples:e} samples per instance over \
                                     simulation.duration = {}; accepted: an interval ≥ \
                                     duration / {MAX_RECORD_SAMPLES:e} = {:e}",
                                    simulation.duration,
                                    simulation.duration / MAX_RECORD_SAMPLES as f64
                                ),
                            ));
                        }
                        Some(v)
                    }
                };
                let series_instances = match &r.series_instances {
                    None => 0,
                    Some(s) => usize::try_from(*s.get_ref()).map_err(|_| {
                        loc.at(
                            s.span(),
                            "record.series_instances",
                            format!("got {}; accepted: an integer ≥ 0", s.get_ref()),
                        )
                    })?,
                };
                if series_instances > 0 && interval.is_none() {
                    return Err(loc.at(
                        r.series_instances.as_ref().map_or(0..0, |s| s.span()),
                        "record.series_instances",
                        "time series need record.interval; accepted: set record.interval, or series_instances = 0",
                    ));
                }
                RecordSpec {
                    interval,
                    series_instances,
                    events: r.events.unwrap_or(false),
                }
            }
        };

        Ok(Scenario {
            file: file.to_string(),
            source: source.to_string(),
            name: raw.name.unwrap_or_else(|| "study".into()),
            instances,
            seed,
            gravity,
            vars,
            bodies,
            prescribed,
            constraints,
            simulation,
            record,
        })
    }

    /// FNV-1a of the scenario text: shards of one study agree on it.
    pub fn hash(&self) -> String {
        format!("{:016x}", super::sample::field_key(&self.source))
    }
}

/// Checks scenario values, locating every error (shared with `prescribed.rs`).
pub(super) struct Parser<'a> {
    loc: &'a Located<'a>,
    vars: &'a [String],
}

impl Parser<'_> {
    /// An error at `span` naming `field`.
    pub(super) fn at(&self, span: Range<usize>, field: String, message: String) -> CliError {
        self.loc.at(span, field, message)
    }

    fn scalar(&mut self, v: &Spanned<Value>, field: &str) -> Result<Scalar, CliError> {
        self.scalar_value(v.get_ref(), v.span(), field)
    }

    pub(super) fn scalar_value(
        &mut self,
        v: &Value,
        span: Range<usize>,
        field: &str,
    ) -> Result<Scalar, CliError> {
        let bad = |msg: String| self.loc.at(span.clone(), field, msg);
        if let Some(x) = number(v) {
            if !x.is_finite() {
                return Err(bad(format!("got {x}; accepted: finite numbers")));
            }
            return Ok(Scalar::Fixed(x));
        }
        match v {
            Value::String(s) => {
                let name = s.strip_prefix('$').unwrap_or("");
                match self.vars.iter().position(|v| v == name) {
                    Some(k) => Ok(Scalar::Var(k)),
                    None => Err(bad(format!(
                        "{s:?} names no [vars] entry; accepted: {SCALAR_ACCEPTED}; vars declared: {:?}",
                        self.vars
                    ))),
                }
            }
            Value::Table(t) if t.len() == 1 => {
                let Some((kind, args)) = t.iter().next() else {
                    return Err(self.loc.at(span, field, SCALAR_ACCEPTED));
                };
                let numbers: Option<Vec<f64>> = args
                    .as_array()
                    .map(|a| a.iter().map(number).collect::<Option<Vec<f64>>>())
                    .unwrap_or(None);
                let Some(numbers) = numbers.filter(|n| n.iter().all(|x| x.is_finite())) else {
                    return Err(bad(format!(
                        "{kind} takes an array of finite numbers; accepted: {SCALAR_ACCEPTED}"
                    )));
                };
                let pair = |what: &str| -> Result<(f64, f64), CliError> {
                    if numbers.len() == 2 {
                        Ok((numbers[0], numbers[1]))
                    } else {
                        Err(bad(format!(
                            "{kind} takes [{what}], got {} values",
                            numbers.len()
                        )))
                    }
                };
                match kind.as_str() {
                    "uniform" => {
                        let (lo, hi) = pair("lo, hi")?;
                        if lo > hi {
                            return Err(bad(format!("uniform = [{lo}, {hi}]; accepted: lo ≤ hi")));
                        }
                        Ok(Scalar::Uniform(lo, hi))
                    }
                    "normal" => {
                        let (mean, std) = pair("mean, std")?;
                        if std < 0.0 {
                            return Err(bad(format!(
                                "normal = [{mean}, {std}]; accepted: std ≥ 0"
                            )));
                        }
                        Ok(Scalar::Normal(mean, std))
                    }
                    "log_uniform" => {
                        let (lo, hi) = pair("lo, hi")?;
                        if !(lo > 0.0 && lo <= hi) {
                            return Err(bad(format!(
                                "log_uniform = [{lo}, {hi}]; accepted: 0 < lo ≤ hi"
                            )));
                        }
                        Ok(Scalar::LogUniform(lo, hi))
                    }
                    "choice" => {
                        if numbers.is_empty() {
                            return Err(bad("choice = []; accepted: at least one value".into()));
                        }
                        Ok(Scalar::Choice(numbers))
                    }
                    other => Err(bad(format!(
                        "unknown distribution {other:?}; accepted: {SCALAR_ACCEPTED}"
                    ))),
                }
            }
            _ => Err(bad(format!("accepted: {SCALAR_ACCEPTED}"))),
        }
    }

    /// A scalar whose every possible value is > 0.
    fn positive(&mut self, v: &Spanned<Value>, field: &str) -> Result<Scalar, CliError> {
        let s = self.scalar(v, field)?;
        let ok = match &s {
            Scalar::Fixed(x) => *x > 0.0,
            Scalar::Uniform(lo, _) => *lo > 0.0,
            Scalar::LogUniform(..) | Scalar::Var(_) => true,
            Scalar::Normal(..) => false,
            Scalar::Choice(c) => c.iter().all(|x| *x > 0.0),
        };
        if ok {
            Ok(s)
        } else {
            Err(self.loc.at(
                v.span(),
                field,
                format!(
                    "{} can be ≤ 0; accepted: values > 0 (a positive number, uniform with lo > 0, \
                     log_uniform, or choice of positives)",
                    match &s {
                        Scalar::Fixed(x) => format!("{x}"),
                        Scalar::Uniform(lo, hi) => format!("uniform = [{lo}, {hi}]"),
                        Scalar::Normal(m, sd) => format!("normal = [{m}, {sd}] (unbounded)"),
                        Scalar::Choice(c) => format!("choice = {c:?}"),
                        other => format!("{other:?}"),
                    }
                ),
            ))
        }
    }

    fn vector<const K: usize>(
        &mut self,
        v: &Spanned<Value>,
        field: &str,
    ) -> Result<[Scalar; K], CliError> {
        let Some(items) = v.get_ref().as_array().filter(|a| a.len() == K) else {
            return Err(self.loc.at(
                v.span(),
                field,
                format!("accepted: an array of {K} scalars ({SCALAR_ACCEPTED})"),
            ));
        };
        let mut out = Vec::with_capacity(K);
        for (k, item) in items.iter().enumerate() {
            out.push(self.scalar_value(item, v.span(), &format!("{field}[{k}]"))?);
        }
        out.try_into().map_err(|_| {
            self.loc.at(
                v.span(),
                field,
                format!("accepted: an array of {K} scalars ({SCALAR_ACCEPTED})"),
            )
        })
    }

    fn vec3(&mut self, v: &Spanned<Value>, field: &str) -> Result<[Scalar; 3], CliError> {
        self.vector::<3>(v, field)
    }

    fn inertia(&mut self, v: &Spanned<Value>, field: &str) -> Result<InertiaSpec, CliError> {
        const ACCEPTED: &str = "[Ixx, Iyy, Izz, Ixy, Ixz, Iyz], {gyration = k} (isotropic m k²) or {solid_sphere = r} (2/5 m r²)";
        match v.get_ref() {
            Value::Array(_) => Ok(InertiaSpec::Full(self.vector::<6>(v, field)?)),
            Value::Table(t) if t.len() == 1 => {
                let Some((kind, arg)) = t.iter().next() else {
                    return Err(self.loc.at(v.span(), field, ACCEPTED));
                };
                let inner = Spanned::new(v.span(), arg.clone());
                let f = format!("{field}.{kind}");
                match kind.as_str() {
                    "gyration" => Ok(InertiaSpec::Gyration(self.positive(&inner, &f)?)),
                    "solid_sphere" => Ok(InertiaSpec::SolidSphere(self.positive(&inner, &f)?)),
                    other => Err(self.loc.at(
                        v.span(),
                        field,
                        format!("{other:?}; accepted: {ACCEPTED}"),
                    )),
                }
            }
            _ => Err(self
                .loc
                .at(v.span(), field, format!("accepted: {ACCEPTED}"))),
        }
    }

    /// A body by name: an index into the free bodies, then (when `plane`) the prescribed ones
    /// after them; `None` for Ground (when `plane`).
    fn body_ref(
        &self,
        name: &Spanned<String>,
        bodies: &[BodySpec],
        prescribed: &[PrescribedSpec],
        field: &str,
        ground: bool,
    ) -> Result<Option<usize>, CliError> {
        if ground && name.get_ref() == "ground" {
            return Ok(None);
        }
        let driven = prescribed.iter().position(|b| &b.name == name.get_ref());
        match bodies.iter().position(|b| &b.name == name.get_ref()) {
            Some(k) => Ok(Some(k)),
            None if ground && driven.is_some() => Ok(driven.map(|k| bodies.len() + k)),
            None => {
                let mut names: Vec<&str> = bodies.iter().map(|b| b.name.as_str()).collect();
                if ground {
                    names.extend(prescribed.iter().map(|b| b.name.as_str()));
                } else if driven.is_some() {
                    return Err(self.loc.at(
                        name.span(),
                        field,
                        format!(
                            "{:?} is a prescribed body; accepted: a free body's name {names:?}                              (a prescribed body can only carry the plane)",
                            name.get_ref()
                        ),
                    ));
                }
                Err(self.loc.at(
                    name.span(),
                    field,
                    format!(
                        "{:?} is not a body; accepted: {}{names:?}",
                        name.get_ref(),
                        if ground {
                            "\"ground\" or one of "
                        } else {
                            "one of "
                        }
                    ),
                ))
            }
        }
    }

    fn constraint(
        &mut self,
        k: usize,
        c: &RawConstraint,
        bodies: &[BodySpec],
        prescribed: &[PrescribedSpec],
    ) -> Result<ConstraintSpec, CliError> {
        let field = |f: &str| format!("constraint[{k}].{f}");
        let kind = c.kind.get_ref().as_str();
        let allowed: &[&str] = match kind {
            "sphere_on_plane" => &[
                "rolling",
                "radius",
                "sphere_center",
                "incline_deg",
                "plane_origin",
                "plane",
            ],
            "point_on_plane" => &["follower_point", "incline_deg", "plane_origin", "plane"],
            "point_to_ground" => &["point", "normals", "baumgarte_time"],
            other => {
                return Err(self.loc.at(
                    c.kind.span(),
                    field("kind"),
                    format!(
                        "{other:?}; accepted: sphere_on_plane, point_on_plane, point_to_ground"
                    ),
                ));
            }
        };
        let present: [(&str, Option<Range<usize>>); 10] = [
            ("plane", c.plane.as_ref().map(Spanned::span)),
            ("rolling", c.rolling.as_ref().map(Spanned::span)),
            ("radius", c.radius.as_ref().map(Spanned::span)),
            ("sphere_center", c.sphere_center.as_ref().map(Spanned::span)),
            ("incline_deg", c.incline_deg.as_ref().map(Spanned::span)),
            ("plane_origin", c.plane_origin.as_ref().map(Spanned::span)),
            (
                "follower_point",
                c.follower_point.as_ref().map(Spanned::span),
            ),
            ("point", c.point.as_ref().map(Spanned::span)),
            ("normals", c.normals.as_ref().map(Spanned::span)),
            (
                "baumgarte_time",
                c.baumgarte_time.as_ref().map(Spanned::span),
            ),
        ];
        for (name, span) in present {
            if let Some(span) = span
                && !allowed.contains(&name)
            {
                return Err(self.loc.at(
                    span,
                    field(name),
                    format!(
                        "does not apply to {kind}; accepted fields: kind, body, {}",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let body = self
            .body_ref(&c.body, bodies, prescribed, &field("body"), false)?
            .ok_or_else(|| {
                self.loc.at(
                    c.body.span(),
                    field("body"),
                    "\"ground\"; accepted: a free body's name",
                )
            })?;
        let plane = match &c.plane {
            Some(p) => self.body_ref(p, bodies, prescribed, &field("plane"), true)?,
            None => None,
        };
        if plane == Some(body) {
            return Err(self.loc.at(
                c.plane.as_ref().map_or(0..0, |p| p.span()),
                field("plane"),
                "the plane and the body are the same; accepted: \"ground\" or another body",
            ));
        }
        let zero3 = || [Scalar::Fixed(0.0), Scalar::Fixed(0.0), Scalar::Fixed(0.0)];
        let opt3 = |p: &mut Self, v: &Option<Spanned<Value>>, f: &str| match v {
            Some(v) => p.vec3(v, &field(f)),
            None => Ok(zero3()),
        };
        let incline = match &c.incline_deg {
            Some(v) => self.scalar(v, &field("incline_deg"))?,
            None => Scalar::Fixed(0.0),
        };
        Ok(match kind {
            "sphere_on_plane" => {
                let rolling = match &c.rolling {
                    None => Flag::Fixed(false),
                    Some(v) => match v.get_ref() {
                        Value::Boolean(b) => Flag::Fixed(*b),
                        Value::Table(t)
                            if t.len() == 1
                                && t.get("choice").and_then(Value::as_array).is_some_and(|a| {
                                    a.len() == 2
                                        && a.iter()
                                            .filter_map(Value::as_bool)
                                            .collect::<Vec<_>>()
                                            .len()
                                            == 2
                                        && a[0] != a[1]
                                }) =>
                        {
                            Flag::Either
                        }
                        _ => {
                            return Err(self.loc.at(
                                v.span(),
                                field("rolling"),
                                "accepted: true, false, or {choice = [true, false]}",
                            ));
                        }
                    },
                };
                let radius = match &c.radius {
                    Some(v) => self.positive(v, &field("radius"))?,
                    None => {
                        return Err(self.loc.at(
                            c.kind.span(),
                            field("radius"),
                            "missing; accepted: a scalar > 0",
                        ));
                    }
                };
                ConstraintSpec::SphereOnPlane {
                    plane,
                    body,
                    rolling,
                    radius,
                    sphere_center: opt3(self, &c.sphere_center, "sphere_center")?,
                    incline_deg: incline,
                    plane_origin: opt3(self, &c.plane_origin, "plane_origin")?,
                }
            }
            "point_on_plane" => ConstraintSpec::PointOnPlane {
                plane,
                body,
                follower_point: opt3(self, &c.follower_point, "follower_point")?,
                incline_deg: incline,
                plane_origin: opt3(self, &c.plane_origin, "plane_origin")?,
            },
            _ => {
                const ACCEPTED: &str =
                    "an array of 1 to 3 unit vectors [x, y, z], mutually orthogonal";
                let normals = match &c.normals {
                    None => vec![[0.0, 0.0, 1.0]],
                    Some(v) => {
                        let parsed: Option<Vec<[f64; 3]>> = v.get_ref().as_array().and_then(|a| {
                            a.iter()
                                .map(|n| {
                                    let xs: Option<Vec<f64>> =
                                        n.as_array()?.iter().map(number).collect();
                                    xs.and_then(|xs| <[f64; 3]>::try_from(xs).ok())
                                })
                                .collect()
                        });
                        match parsed.filter(|n| (1..=3).contains(&n.len())) {
                            Some(n) => n,
                            None => {
                                return Err(self.loc.at(
                                    v.span(),
                                    field("normals"),
                                    format!("accepted: {ACCEPTED}"),
                                ));
                            }
                        }
                    }
                };
                if let Err(e) = crate::constraints::PointToGround::new(
                    crate::model::BodyId::new(1),
                    [0.0; 3],
                    &normals,
                ) {
                    return Err(self.loc.at(
                        c.normals.as_ref().map_or(c.kind.span(), |n| n.span()),
                        field("normals"),
                        format!("{e}; accepted: {ACCEPTED}"),
                    ));
                }
                ConstraintSpec::PointToGround {
                    body,
                    point: opt3(self, &c.point, "point")?,
                    normals,
                    baumgarte_time: match &c.baumgarte_time {
                        Some(v) => Some(self.positive(v, &field("baumgarte_time"))?),
                        None => None,
                    },
                }
            }
        })
    }

    fn simulation(&mut self, s: &Spanned<RawSimulation>) -> Result<Simulation, CliError> {
        let loc = self.loc;
        let raw = s.get_ref();
        let positive =
            |v: &Option<Spanned<f64>>, name: &str, default: Option<f64>| -> Result<f64, CliError> {
                match v {
                    Some(x) if x.get_ref().is_finite() && *x.get_ref() > 0.0 => Ok(*x.get_ref()),
                    Some(x) => Err(loc.at(
                        x.span(),
                        format!("simulation.{name}"),
                        format!("got {}; accepted: a finite number > 0", x.get_ref()),
                    )),
                    None => default.ok_or_else(|| {
                        loc.at(
                            s.span(),
                            format!("simulation.{name}"),
                            "missing; accepted: a finite number > 0",
                        )
                    }),
                }
            };
        let duration = positive(&Some(raw.duration.clone()), "duration", None)?;
        let integrator_name = raw
            .integrator
            .as_ref()
            .map_or("rkm", |i| i.get_ref().as_str());
        let integrator = match integrator_name {
            "euler" => Integrator::SemiImplicitEuler {
                step: positive(&raw.step, "step", None)?,
            },
            "rk4" => Integrator::Rk4 {
                step: positive(&raw.step, "step", None)?,
            },
            "rkm" => {
                let accuracy = positive(&raw.accuracy, "accuracy", Some(1e-3))?;
                if accuracy >= 1.0 {
                    return Err(loc.at(
                        raw.accuracy.as_ref().map_or(0..0, |a| a.span()),
                        "simulation.accuracy",
                        format!("got {accuracy}; accepted: a number in (0, 1)"),
                    ));
                }
                Integrator::RungeKuttaMerson {
                    accuracy,
                    max_step: positive(&raw.max_step, "max_step", Some(duration))?,
                }
            }
            other => {
                return Err(loc.at(
                    raw.integrator.as_ref().map_or(0..0, |i| i.span()),
                    "simulation.integrator",
                    format!("{other:?}; accepted: euler, rk4, rkm"),
                ));
            }
        };
        for (name, v, applies) in [
            ("step", &raw.step, integrator_name != "rkm"),
            ("accuracy", &raw.accuracy, integrator_name == "rkm"),
            ("max_step", &raw.max_step, integrator_name == "rkm"),
        ] {
            if let Some(v) = v
                && !applies
            {
                return Err(loc.at(v.span(), format!("simulation.{name}"), format!("does not apply to integrator {integrator_name:?}; accepted: step (euler, rk4), accuracy and max_step (rkm)")));
            }
        }
        let default_tolerance = match integrator {
            Integrator::RungeKuttaMerson { accuracy, .. } => accuracy / 10.0,
            _ => 1e-6,
        };
        let stabilization = match raw
            .stabilization
            .as_ref()
            .map_or("projection", |x| x.get_ref().as_str())
        {
            "none" => Stabilization::None,
            "projection" => Stabilization::Projection {
                tolerance: positive(&raw.tolerance, "tolerance", Some(default_tolerance))?,
            },
            "baumgarte" => Stabilization::Baumgarte,
            other => {
                return Err(loc.at(
                    raw.stabilization.as_ref().map_or(0..0, |x| x.span()),
                    "simulation.stabilization",
                    format!("{other:?}; accepted: none, projection, baumgarte"),
                ));
            }
        };
        let options = StepOptions {
            integrator,
            stabilization,
        };
        options
            .validate()
            .map_err(|e| loc.at(s.span(), "simulation", e.to_string()))?;
        let (step, field, span) = match integrator {
            Integrator::SemiImplicitEuler { step } | Integrator::Rk4 { step } => {
                (step, "simulation.step", raw.step.as_ref().map(|x| x.span()))
            }
            Integrator::RungeKuttaMerson { max_step, .. } => (
                max_step,
                "simulation.max_step",
                raw.max_step.as_ref().map(|x| x.span()),
            ),
        };
        if duration / step > crate::integrate::MAX_FIXED_STEPS_PER_CALL {
            return Err(loc.at(
                span.unwrap_or(0..0),
                field,
                format!(
                    "got {step}: at least {:e} steps per instance over duration = {duration}; \
                     accepted: a step ≥ duration / {:e}",
                    duration / step,
                    crate::integrate::MAX_FIXED_STEPS_PER_CALL
                ),
            ));
        }
        let backend = match &raw.backend {
            None => Backend::Auto,
            Some(b) => b.get_ref().parse().map_err(|_| {
                loc.at(
                    b.span(),
                    "simulation.backend",
                    format!("{:?}; accepted: auto, cpu, gpu", b.get_ref()),
                )
            })?,
        };
        let precision = match &raw.precision {
            None => Precision::F32,
            Some(p) => p.get_ref().parse().map_err(|_| {
                loc.at(
                    p.span(),
                    "simulation.precision",
                    format!("{:?}; accepted: f32, f64", p.get_ref()),
                )
            })?,
        };
        Ok(Simulation {
            options,
            duration,
            assemble: raw.assemble.unwrap_or(true),
            backend,
            precision,
        })
    }
}
