//! What a picture shows: per instance and frame, the pose of every body and the decorative
//! geometry of every constraint ([`Decoration`]) with its contact state, captured from a batch.
//! Plain data (the HTML player gets it as JSON), independent of how it is drawn; with the
//! points the frames' motion passes through and the finiteness checks a drawing fits its
//! cameras and planes by.

use crate::batch::Batch;
use crate::constraints::{BodyKinematics, Decoration, Params};
use crate::cpu::unilateral::{ContactMode, UnilateralContact};
use crate::error::Result;
use crate::math::Vec3;
use crate::model::BodyKind;
use crate::model::constraint::decoration::{array, axes_of};

/// What a constraint is doing, for its colour in a picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactState {
    /// A bilateral constraint (always enforced).
    Bilateral,
    /// A unilateral contact, separated.
    Open,
    /// A unilateral contact, rolling or sticking.
    Stick,
    /// A unilateral contact, sliding.
    Slide,
    /// Disabled in this instance.
    Disabled,
}

impl ContactState {
    /// The name shown in legends and the HTML player.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bilateral => "bilateral",
            Self::Open => "open",
            Self::Stick => "rolling",
            Self::Slide => "sliding",
            Self::Disabled => "disabled",
        }
    }
}

/// The pose of one body (every body but Ground).
#[derive(Debug, Clone, PartialEq)]
pub struct BodyPose {
    /// The body's name in the template.
    pub name: String,
    /// Whether it is a free body (else prescribed).
    pub free: bool,
    /// Origin in Ground.
    pub origin: [f64; 3],
    /// Body axes in Ground (`R_GB`'s columns).
    pub axes: [[f64; 3]; 3],
}

/// One constraint in one frame.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintPicture {
    /// The kind's name (`sphere_on_plane`, …).
    pub kind: &'static str,
    /// Its state.
    pub state: ContactState,
    /// Its decorative geometry (empty for a custom constraint without any).
    pub decorations: Vec<Decoration>,
}

/// One instance at one time.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceFrame {
    /// Simulation time.
    pub time: f64,
    /// The instance's status bits (0: fine; see `batch::status`).
    pub status: u32,
    /// Every body but Ground, in template order.
    pub bodies: Vec<BodyPose>,
    /// Every constraint, in template order.
    pub constraints: Vec<ConstraintPicture>,
}

/// One instance over the frames of a scene.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// The instance's global index (in a study) or its index in the batch.
    pub instance: usize,
    /// Its inputs, shown beside it (name, value).
    pub inputs: Vec<(String, f64)>,
    /// Its frames, one per scene time.
    pub frames: Vec<InstanceFrame>,
}

/// Everything a picture or an animation shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    /// The scene's vertical in Ground (against gravity), for the camera.
    pub up: [f64; 3],
    /// The instances shown, each with the same number of frames.
    pub tracks: Vec<Track>,
}

/// Captures instance `i` of `batch` at its stored state with its bilateral constraint forces
/// (the multipliers the evaluation solves for; zero where the state cannot be solved).
pub fn capture(batch: &Batch, i: usize) -> Result<InstanceFrame> {
    let system = batch.instance_system(i)?;
    let multipliers = system
        .solve()
        .map(|s| s.multipliers.iter().copied().collect::<Vec<f64>>())
        .unwrap_or_else(|_| vec![0.0; system.jacobian.nrows()]);
    let states: Vec<ContactState> = system
        .constraints
        .iter()
        .map(|c| {
            if c.enabled {
                ContactState::Bilateral
            } else {
                ContactState::Disabled
            }
        })
        .collect();
    capture_with(batch, i, &multipliers, &states)
}

/// Captures instance `i` of `batch` at its stored state with the given multipliers (per row of
/// its system, internal order: what `cpu::unilateral::contact_multipliers` gives) and states
/// (one per constraint).
pub fn capture_with(
    batch: &Batch,
    i: usize,
    multipliers: &[f64],
    states: &[ContactState],
) -> Result<InstanceFrame> {
    let system = batch.instance_system(i)?;
    let template = batch.template();
    let bodies = template
        .bodies()
        .iter()
        .zip(&system.kinematics)
        .filter(|(b, _)| b.kind != BodyKind::Ground)
        .map(|(b, k)| BodyPose {
            name: b.name.clone(),
            free: b.kind == BodyKind::Free,
            origin: array(&k.origin),
            axes: axes_of(&k.rotation),
        })
        .collect();
    let mut constraints = Vec::with_capacity(template.constraints().len());
    let mut kin: Vec<BodyKinematics> = Vec::with_capacity(2);
    for (k, ((slot, cols), rows)) in template
        .constraints()
        .iter()
        .zip(batch.all_constraint_columns())
        .zip(&system.constraints)
        .enumerate()
    {
        let c = &slot.constraint;
        kin.clear();
        kin.extend(c.bodies().iter().map(|b| system.kinematics[b.index()]));
        let lambda = rows.multipliers_in(multipliers);
        let state = if rows.enabled {
            states.get(k).copied().unwrap_or(ContactState::Bilateral)
        } else {
            ContactState::Disabled
        };
        constraints.push(ConstraintPicture {
            kind: c.kind_name(),
            state,
            decorations: c.decorations(&Params::of(&cols.params, i), &kin, &lambda),
        });
    }
    Ok(InstanceFrame {
        time: batch.time()[i],
        status: batch.status()[i] | system.status,
        bodies,
        constraints,
    })
}

/// The state of every constraint of a template with `count` constraints: bilateral, except the
/// unilateral `contacts`, each in its mode from `modes` (as a run or
/// [`contact_multipliers`](crate::cpu::unilateral::contact_multipliers) found them).
pub fn contact_states(
    count: usize,
    contacts: &[UnilateralContact],
    modes: &[ContactMode],
) -> Vec<ContactState> {
    let mut states = vec![ContactState::Bilateral; count];
    for (c, mode) in contacts.iter().zip(modes) {
        if let Some(s) = states.get_mut(c.constraint.0) {
            *s = match mode {
                ContactMode::Open => ContactState::Open,
                ContactMode::Stick => ContactState::Stick,
                ContactMode::Slide { .. } => ContactState::Slide,
            };
        }
    }
    states
}

/// The scene's vertical from gravity (`−g`), `+z` when there is none.
pub fn up_from_gravity(gravity: [f64; 3]) -> [f64; 3] {
    let n = gravity.iter().map(|g| g * g).sum::<f64>().sqrt();
    if n > 0.0 && n.is_finite() {
        gravity.map(|g| -g / n)
    } else {
        [0.0, 0.0, 1.0]
    }
}

/// Points a track's moving things pass through (body origins, sphere surfaces, points).
pub(super) fn moving_points(frames: &[InstanceFrame], out: &mut Vec<Vec3>) {
    for f in frames {
        for b in &f.bodies {
            out.push(Vec3::from(b.origin));
        }
        for c in &f.constraints {
            for d in &c.decorations {
                match d {
                    Decoration::Sphere { center, radius, .. } => {
                        let c = Vec3::from(*center);
                        for a in 0..3 {
                            let mut e = Vec3::zeros();
                            e[a] = *radius;
                            out.push(c + e);
                            out.push(c - e);
                        }
                    }
                    Decoration::Point { position, .. } => out.push(Vec3::from(*position)),
                    _ => {}
                }
            }
        }
    }
}

/// Where constraint `k`'s sphere or point goes over the frames.
pub(super) fn constraint_points(frames: &[InstanceFrame], k: usize) -> Vec<Vec3> {
    frames
        .iter()
        .filter_map(|f| f.constraints.get(k))
        .flat_map(|c| c.decorations.iter())
        .filter_map(|d| match d {
            Decoration::Sphere { center, .. } => Some(Vec3::from(*center)),
            Decoration::Point { position, .. } => Some(Vec3::from(*position)),
            _ => None,
        })
        .filter(finite)
        .collect()
}

/// The mean of `points` (`None` when there are none).
pub(super) fn centroid(points: &[Vec3]) -> Option<Vec3> {
    (!points.is_empty()).then(|| points.iter().sum::<Vec3>() / points.len() as f64)
}

/// Whether every coordinate of `v` is finite.
pub(super) fn finite(v: &Vec3) -> bool {
    v.iter().all(|x| x.is_finite())
}

/// Whether every number of a decoration is finite (the ray caster takes only those).
pub(super) fn decoration_finite(d: &Decoration) -> bool {
    let all = |v: &[f64]| v.iter().all(|x| x.is_finite());
    match d {
        Decoration::Plane {
            origin,
            axes,
            half_width,
        } => all(origin) && axes.iter().all(|a| all(a)) && half_width.is_finite(),
        Decoration::Sphere {
            center,
            radius,
            axes,
        } => all(center) && radius.is_finite() && *radius > 0.0 && axes.iter().all(|a| all(a)),
        Decoration::Point { position, radius } => all(position) && radius.is_finite(),
        Decoration::ContactPoint { position } => all(position),
        Decoration::Force { point, force } => all(point) && all(force),
    }
}
