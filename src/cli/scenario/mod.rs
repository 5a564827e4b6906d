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
//! A scalar field is a number, `"$var"`, or a distribution (`{ uniform = [lo, hi] }`,
//! `{ normal = [mean, std] }`, `{ truncated_normal = [mean, std, lo, hi] }`,
//! `{ lognormal = [mu, sigma] }`, `{ log_uniform = [lo, hi] }`, `{ choice = [a, b, …] }`).
//! Every key, with its default and accepted range — unilateral contacts, prescribed bodies and
//! `point_to_ground` included — is in `docs/scenario-format.md`, which a test holds to this
//! reader's keys.

use toml::{Spanned, Value};

mod constraints;
mod parser;
mod simulation;
mod var_ranges;

pub(super) use parser::Parser;
use parser::{Located, Raw};
pub use var_ranges::VarRange;

use super::CliError;
use super::prescribed::PrescribedSpec;
use super::sample::Scalar;
use crate::backend::Backend;
use crate::gpu::Precision;
use crate::step::StepOptions;

/// The most samples per instance a scenario may ask for (`duration / record.interval`): each
/// is a stepping call over every instance (and an evaluation when events are recorded).
pub const MAX_RECORD_SAMPLES: usize = 10_000_000;

/// The embedded default study (`simbatch run` with no file).
pub const DEFAULT_SCENARIO: &str = include_str!("../default.toml");

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

/// A unilateral contact's coefficients (`contact = "unilateral"`), each drawable per instance.
#[derive(Debug, Clone, PartialEq)]
pub struct UnilateralSpec {
    /// Coefficient of restitution `e ∈ [0, 1]` (default 0).
    pub restitution: Scalar,
    /// Friction (default 0).
    pub friction: FrictionSpec,
}

/// `friction = μ` or `friction = { static = μs, dynamic = μd }`.
#[derive(Debug, Clone, PartialEq)]
pub enum FrictionSpec {
    /// One coefficient for sticking and sliding.
    Single(Scalar),
    /// `μ_s ≥ μ_d ≥ 0`.
    Split {
        /// Static.
        mu_static: Scalar,
        /// Dynamic.
        mu_dynamic: Scalar,
    },
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
        /// `contact = "unilateral"`: restitution and friction (`None`: bilateral).
        unilateral: Option<UnilateralSpec>,
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
        /// `contact = "unilateral"`: restitution and friction (`None`: bilateral, Simbody's
        /// no-slip contact).
        unilateral: Option<UnilateralSpec>,
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

    /// Whether lift-off events apply (bilateral plane contacts).
    pub fn has_normal_force(&self) -> bool {
        !matches!(self, ConstraintSpec::PointToGround { .. }) && self.unilateral().is_none()
    }

    /// The unilateral contact's coefficients, if `contact = "unilateral"`.
    pub fn unilateral(&self) -> Option<&UnilateralSpec> {
        match self {
            ConstraintSpec::SphereOnPlane { unilateral, .. }
            | ConstraintSpec::PointOnPlane { unilateral, .. } => unilateral.as_ref(),
            ConstraintSpec::PointToGround { .. } => None,
        }
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
    /// The ranges of the keys that use an unbounded `[vars]` entry, held per instance
    /// ([`Scenario::check_var_draws`]).
    pub var_ranges: Vec<VarRange>,
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

impl Scenario {
    /// Reads and checks a scenario; `file` names it in errors.
    pub fn parse(file: &str, source: &str) -> Result<Scenario, CliError> {
        let loc = Located { file, source };
        let raw: Raw = toml::from_str(source).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let (field, message) = parser::toml_error(source, span.clone(), e.message());
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
            defined: Vec::new(),
            var_ranges: Vec::new(),
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
            p.defined.push((s.clone(), value.span()));
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
                        "does not apply to a prescribed body (its motion is given by `prescribed`); \
                         accepted fields: name, prescribed",
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
        simulation::baumgarte_notes(&loc, &raw, &constraints, &simulation);
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
            var_ranges: p.var_ranges,
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
