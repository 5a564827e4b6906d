//! Each instance of a study: its inputs drawn from the scenario's distributions (reproducibly,
//! from the seed and the instance index), the template they call for, and their application
//! to a batch.

use super::CliError;
use super::prescribed::PrescribedDraw;
use super::sample::{Scalar, draw, draw_keyed, field_key};
use super::scenario::{
    BodySpec, ConstraintSpec, Flag, FrictionSpec, InertiaSpec, Scenario, UnilateralSpec,
};
use crate::batch::Batch;
use crate::constraints::{PointOnPlaneContact, PointToGround, SphereOnPlaneContact};
use crate::math::quaternion_from_rotation_vector;
use crate::model::{Baumgarte, BodyId, ConstraintId, GROUND, SystemTemplate};

/// One body's draws.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyDraw {
    /// Mass.
    pub mass: f64,
    /// COM offset.
    pub com: [f64; 3],
    /// Central inertia `[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]`.
    pub inertia: [f64; 6],
    /// `[e0, e1, e2, e3, x, y, z]`.
    pub q: [f64; 7],
    /// `[w, v]` in Ground.
    pub u: [f64; 6],
}

/// One constraint's draws.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintDraw {
    /// The structural flag (rolling rows).
    pub rolling: bool,
    /// Parameter values by name (`baumgarte_time`: the Baumgarte time constant).
    pub params: Vec<(&'static str, Vec<f64>)>,
    /// A unilateral contact's `[restitution, static friction, dynamic friction]`.
    pub unilateral: Option<[f64; 3]>,
}

/// One instance's draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// Gravity.
    pub gravity: [f64; 3],
    /// Per body.
    pub bodies: Vec<BodyDraw>,
    /// Per prescribed body.
    pub prescribed: Vec<PrescribedDraw>,
    /// Per constraint.
    pub constraints: Vec<ConstraintDraw>,
    /// The random inputs, in [`input_names`] order.
    pub inputs: Vec<f64>,
    /// The `[vars]` draws, in `Scenario::vars`' order.
    pub vars: Vec<f64>,
}

/// How a draw is asked for: `take(scalar, path)`, where `path` gives the field's path (the key
/// of its random stream, `sample::stream`) only when it is needed, for a random scalar — not
/// formatted for each fixed one (that took most of a study's sampling).
pub type Take<'t> = dyn FnMut(&Scalar, &dyn Fn() -> String) -> f64 + 't;

/// The stream keys (`sample::field_key`) of a scenario's random fields: its `[vars]`, and the
/// fields [`sample`] draws, in the order it draws them — the same for every instance (draws
/// vary, structure does not: no draw decides which fields are drawn after it). With them a
/// study formats and hashes each field's path once ([`sample_keyed`]), not once per instance:
/// formatting the paths was most of sampling's time, and a study samples every instance twice
/// (the dry validation and the run); the default study's setup went from 0.26 to 0.20 s on one
/// thread (`docs/performance-log.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldKeys {
    vars: Vec<u64>,
    fields: Vec<u64>,
}

impl FieldKeys {
    /// The keys of `sc`'s random fields.
    pub fn of(sc: &Scenario) -> Self {
        let vars = sc
            .vars
            .iter()
            .map(|(name, _)| field_key(&format!("vars.{name}")))
            .collect();
        let mut fields = Vec::new();
        sample_with(sc, 0, None, None, Some(&mut fields));
        Self { vars, fields }
    }
}

/// Draws instance `index`; `names` collects the recorded input names when given, each with
/// whether it is drawn log-uniformly.
pub fn sample(sc: &Scenario, index: usize, names: Option<&mut Vec<(String, bool)>>) -> Sampled {
    sample_with(sc, index, names, None, None)
}

/// [`sample`] with the keys of `sc`'s fields hashed beforehand ([`FieldKeys::of`]): the same
/// draws. A field past the keys (not reached: the keys are `sc`'s) has its path hashed.
pub fn sample_keyed(sc: &Scenario, index: usize, keys: &FieldKeys) -> Sampled {
    sample_with(sc, index, None, Some(keys), None)
}

/// [`sample`], taking each random field's stream key from `keys` where given (in draw order)
/// and recording the keys drawn into `record` where given.
fn sample_with(
    sc: &Scenario,
    index: usize,
    mut names: Option<&mut Vec<(String, bool)>>,
    keys: Option<&FieldKeys>,
    mut record: Option<&mut Vec<u64>>,
) -> Sampled {
    let seed = sc.seed;
    let mut inputs = Vec::new();
    let vars: Vec<f64> = sc
        .vars
        .iter()
        .enumerate()
        .map(
            |(k, (name, s))| match (s, keys.and_then(|keys| keys.vars.get(k))) {
                (Scalar::Fixed(v), _) => *v,
                (_, Some(key)) => draw_keyed(s, seed, *key, index, &[]),
                (_, None) => draw(s, seed, &format!("vars.{name}"), index, &[]),
            },
        )
        .collect();
    // The next random field's place in the draw order (its key's in `keys`).
    let mut drawn = 0;
    for ((name, s), v) in sc.vars.iter().zip(&vars) {
        if s.is_random() {
            inputs.push(*v);
            if let Some(n) = names.as_deref_mut() {
                n.push((
                    name.clone(),
                    matches!(s, Scalar::LogUniform(..) | Scalar::LogNormal(..)),
                ));
            }
        }
    }
    let mut take = |s: &Scalar, path: &dyn Fn() -> String| -> f64 {
        let random = matches!(
            s,
            Scalar::Uniform(..)
                | Scalar::Normal(..)
                | Scalar::TruncatedNormal(..)
                | Scalar::LogNormal(..)
                | Scalar::LogUniform(..)
                | Scalar::Choice(_)
        );
        if !random {
            // A fixed value or a `[vars]` entry: no stream, so no path.
            return draw(s, seed, "", index, &vars);
        }
        let known = keys.and_then(|keys| keys.fields.get(drawn)).copied();
        drawn += 1;
        let v = match (known, names.as_deref_mut()) {
            (Some(key), None) => draw_keyed(s, seed, key, index, &vars),
            (_, names) => {
                let path = path();
                let key = field_key(&path);
                if let Some(record) = record.as_deref_mut() {
                    record.push(key);
                }
                let v = draw_keyed(s, seed, key, index, &vars);
                if let Some(n) = names {
                    n.push((
                        path,
                        matches!(s, Scalar::LogUniform(..) | Scalar::LogNormal(..)),
                    ));
                }
                v
            }
        };
        inputs.push(v);
        v
    };
    let take3 = |take: &mut Take, s: &[Scalar; 3], path: &dyn Fn() -> String| -> [f64; 3] {
        [0, 1, 2].map(|k| take(&s[k], &|| format!("{}.{}", path(), ["x", "y", "z"][k])))
    };
    let gravity = take3(&mut take, &sc.gravity, &|| "gravity".into());
    let bodies = sc
        .bodies
        .iter()
        .map(|b: &BodySpec| {
            let p = |f: &str| format!("{}.{f}", b.name);
            let mass = take(&b.mass, &|| p("mass"));
            let com = take3(&mut take, &b.com, &|| p("com"));
            let inertia = match &b.inertia {
                InertiaSpec::Full(i) => {
                    let names = ["ixx", "iyy", "izz", "ixy", "ixz", "iyz"];
                    [0, 1, 2, 3, 4, 5].map(|k| take(&i[k], &|| p(&format!("inertia.{}", names[k]))))
                }
                InertiaSpec::Gyration(k) => {
                    let k = take(k, &|| p("inertia.gyration"));
                    let m = mass * k * k;
                    [m, m, m, 0.0, 0.0, 0.0]
                }
                InertiaSpec::SolidSphere(r) => {
                    let r = take(r, &|| p("inertia.solid_sphere"));
                    let m = 0.4 * mass * r * r;
                    [m, m, m, 0.0, 0.0, 0.0]
                }
            };
            let position = take3(&mut take, &b.position, &|| p("position"));
            let rotation = take3(&mut take, &b.rotation, &|| p("rotation"));
            let velocity = take3(&mut take, &b.velocity, &|| p("velocity"));
            let angular = take3(&mut take, &b.angular_velocity, &|| p("angular_velocity"));
            let e = quaternion_from_rotation_vector(rotation);
            let q = [
                e[0],
                e[1],
                e[2],
                e[3],
                position[0],
                position[1],
                position[2],
            ];
            let u = [
                angular[0],
                angular[1],
                angular[2],
                velocity[0],
                velocity[1],
                velocity[2],
            ];
            BodyDraw {
                mass,
                com,
                inertia,
                q,
                u,
            }
        })
        .collect();
    let prescribed = sc.prescribed.iter().map(|p| p.draw(&mut take)).collect();
    let mut constraints = Vec::new();
    for (k, c) in sc.constraints.iter().enumerate() {
        let p = |f: &str| format!("constraint[{k}].{f}");
        let plane_frame = |take: &mut Take, incline: &Scalar, origin: &[Scalar; 3]| {
            let a = take(incline, &|| p("incline_deg")).to_radians();
            let o = take3(take, origin, &|| p("plane_origin"));
            vec![(0.5 * a).cos(), (0.5 * a).sin(), 0.0, 0.0, o[0], o[1], o[2]]
        };
        // A unilateral contact's drawn [restitution, static friction, dynamic friction].
        let coefficients = |take: &mut Take, u: &UnilateralSpec| -> [f64; 3] {
            let e = take(&u.restitution, &|| p("restitution"));
            let (mu_s, mu_d) = match &u.friction {
                FrictionSpec::Single(m) => {
                    let m = take(m, &|| p("friction"));
                    (m, m)
                }
                FrictionSpec::Split {
                    mu_static,
                    mu_dynamic,
                } => (
                    take(mu_static, &|| p("friction.static")),
                    take(mu_dynamic, &|| p("friction.dynamic")),
                ),
            };
            [e, mu_s, mu_d]
        };
        constraints.push(match c {
            ConstraintSpec::SphereOnPlane {
                rolling,
                radius,
                sphere_center,
                incline_deg,
                plane_origin,
                unilateral,
                ..
            } => {
                // A unilateral contact has the rolling rows; its mode decides which hold.
                let rolling = match (unilateral, rolling) {
                    (Some(_), _) => true,
                    (None, Flag::Fixed(b)) => *b,
                    (None, Flag::Either) => {
                        take(&Scalar::Choice(vec![0.0, 1.0]), &|| p("rolling")) == 1.0
                    }
                };
                let r = take(radius, &|| p("radius"));
                let center = take3(&mut take, sphere_center, &|| p("sphere_center"));
                let frame = plane_frame(&mut take, incline_deg, plane_origin);
                let unilateral = unilateral.as_ref().map(|u| coefficients(&mut take, u));
                ConstraintDraw {
                    rolling,
                    params: vec![
                        ("plane_frame", frame),
                        ("sphere_center", center.to_vec()),
                        ("radius", vec![r]),
                    ],
                    unilateral,
                }
            }
            ConstraintSpec::PointOnPlane {
                follower_point,
                incline_deg,
                plane_origin,
                unilateral,
                ..
            } => {
                let point = take3(&mut take, follower_point, &|| p("follower_point"));
                let frame = plane_frame(&mut take, incline_deg, plane_origin);
                let unilateral = unilateral.as_ref().map(|u| coefficients(&mut take, u));
                ConstraintDraw {
                    rolling: false,
                    params: vec![("plane_frame", frame), ("follower_point", point.to_vec())],
                    unilateral,
                }
            }
            ConstraintSpec::PointToGround {
                point,
                baumgarte_time,
                ..
            } => {
                let point = take3(&mut take, point, &|| p("point"));
                let mut params = vec![("point", point.to_vec())];
                if let Some(t) = baumgarte_time {
                    params.push(("baumgarte_time", vec![take(t, &|| p("baumgarte_time"))]));
                }
                ConstraintDraw {
                    rolling: false,
                    params,
                    unilateral: None,
                }
            }
        });
    }
    Sampled {
        gravity,
        bodies,
        prescribed,
        constraints,
        inputs,
        vars,
    }
}

/// Names of the recorded random inputs, in [`Sampled::inputs`] order (the same for every
/// instance: draws vary, structure does not).
pub fn input_names(sc: &Scenario) -> Vec<String> {
    input_kinds(sc).into_iter().map(|(n, _)| n).collect()
}

/// The random inputs in [`input_names`] order, each with whether it is drawn log-uniformly
/// (its plots then use a log axis).
pub fn input_kinds(sc: &Scenario) -> Vec<(String, bool)> {
    let mut names = Vec::new();
    sample(sc, 0, Some(&mut names));
    names
}

/// Builds the template of one structural variant (`rolling[k]` per constraint).
pub(super) fn template(
    sc: &Scenario,
    rolling: &[bool],
) -> Result<(SystemTemplate, Vec<BodyId>, Vec<ConstraintId>), CliError> {
    let mut t = SystemTemplate::new();
    let bodies: Vec<BodyId> = sc
        .bodies
        .iter()
        .map(|b| t.add_free_body(b.name.clone()))
        .collect();
    // Constraints index free bodies, then prescribed ones.
    let mut all = bodies.clone();
    for p in &sc.prescribed {
        all.push(match p.law()? {
            Some(law) => t.add_driven_body_arc(p.name.clone(), law),
            None => t.add_prescribed_body(p.name.clone()),
        });
    }
    let body = |k: &Option<usize>| k.map_or(GROUND, |k| all[k]);
    let mut ids = Vec::new();
    for (c, rolling) in sc.constraints.iter().zip(rolling) {
        ids.push(match c {
            ConstraintSpec::SphereOnPlane { plane, body: b, .. } => {
                t.add_constraint(SphereOnPlaneContact::new(body(plane), bodies[*b], *rolling))?
            }
            ConstraintSpec::PointOnPlane { plane, body: b, .. } => {
                t.add_constraint(PointOnPlaneContact::new(body(plane), bodies[*b]))?
            }
            ConstraintSpec::PointToGround {
                body: b,
                normals,
                baumgarte_time,
                ..
            } => {
                let id = t.add_constraint(PointToGround::new(bodies[*b], [0.0; 3], normals)?)?;
                if baumgarte_time.is_some() {
                    t.set_baumgarte(id, Some(Baumgarte::default()))?;
                }
                id
            }
        });
    }
    Ok((t, bodies, ids))
}

/// Writes instance draws into a batch (`local` = position in the batch).
pub(super) fn apply(
    batch: &mut Batch,
    bodies: &[BodyId],
    ids: &[ConstraintId],
    local: usize,
    s: &Sampled,
) -> crate::Result<()> {
    batch.set_gravity(local, s.gravity)?;
    for (id, b) in bodies.iter().zip(&s.bodies) {
        batch.set_mass_properties(*id, local, b.mass, b.com, b.inertia)?;
        batch.set_q(*id, local, b.q)?;
        batch.set_u(*id, local, b.u)?;
    }
    let driven = batch.template().prescribed_bodies().to_vec();
    for (id, d) in driven.iter().zip(&s.prescribed) {
        match d {
            PrescribedDraw::Constant {
                pose,
                velocity,
                acceleration,
            } => {
                batch.set_pose(*id, local, *pose)?;
                batch.set_velocity(*id, local, *velocity)?;
                batch.set_acceleration(*id, local, *acceleration)?;
            }
            PrescribedDraw::Law(values) => batch.set_motion_params(*id, local, values)?,
        }
    }
    for (id, c) in ids.iter().zip(&s.constraints) {
        for (name, values) in &c.params {
            if *name == "baumgarte_time" {
                batch.set_baumgarte_time_constant(*id, local, values[0])?;
            } else {
                batch.set_param(*id, name, local, values)?;
            }
        }
    }
    Ok(())
}
