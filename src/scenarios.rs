//! Reproducible random batches of every built-in constraint kind, for parity tests, benchmarks
//! and demonstrations.
//!
//! States are deliberately *not* consistent with the constraints (as in the golden files), so
//! every term of the error formulas shows; parameters are drawn in physically ordinary ranges
//! (masses 0.5–5 kg, inertias 0.2–0.3 kg m² with small products, radii 5–30 cm). Each instance's
//! draws depend only on `(seed, instance)`, never on the batch size.

use nalgebra::Vector3;

use crate::batch::Batch;
use crate::constraints::{PointOnPlaneContact, PointToGround, SphereOnPlaneContact};
use crate::error::Result;
use crate::math::rotation_from_quaternion;
use crate::model::{Baumgarte, BodyId, ConstraintId, GROUND, SystemTemplate};
use crate::motion::{PolynomialMotion, TiltingMotion};

pub use crate::sample::Rng;

/// What carries the plane of a contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaneBody {
    /// The plane is fixed to Ground.
    Ground,
    /// The plane is on a second free body.
    Free,
    /// The plane is on a prescribed body with the constant law (pose, velocity and
    /// acceleration given).
    Prescribed,
    /// The plane is on a body driven by a random [`TiltingMotion`] (the instance's time random
    /// in [0, 2] s).
    Tilting,
    /// The plane is on a body driven by a random cubic [`PolynomialMotion`] (the instance's
    /// time random in [0, 2] s).
    Polynomial,
}

impl PlaneBody {
    /// Every plane body, in declaration order.
    pub const ALL: [PlaneBody; 5] = [
        PlaneBody::Ground,
        PlaneBody::Free,
        PlaneBody::Prescribed,
        PlaneBody::Tilting,
        PlaneBody::Polynomial,
    ];
}

/// Random parameters of a [`TiltingMotion`] (a plate tilting by up to ~0.3 rad at up to
/// ~4 rad/s, shaking by up to 5 cm), flat in the law's order.
pub fn random_tilting(r: &mut Rng) -> Vec<f64> {
    let mut v = Vec::with_capacity(28);
    v.extend(r.vec3(1.0));
    v.extend(r.vec3(1.0));
    v.extend([r.uniform(0.05, 0.3), r.uniform(0.05, 0.3)]);
    v.extend([r.uniform(1.0, 4.0), r.uniform(1.0, 4.0)]);
    v.extend([r.uniform(0.0, 6.3), r.uniform(0.0, 6.3)]);
    v.extend(&r.pose(1.0)[..4]);
    v.extend(r.vec3(0.3));
    v.extend([
        r.uniform(0.0, 0.05),
        r.uniform(0.0, 0.05),
        r.uniform(0.0, 0.05),
    ]);
    v.extend([
        r.uniform(1.0, 4.0),
        r.uniform(1.0, 4.0),
        r.uniform(1.0, 4.0),
    ]);
    v.extend([
        r.uniform(0.0, 6.3),
        r.uniform(0.0, 6.3),
        r.uniform(0.0, 6.3),
    ]);
    v
}

/// Random parameters of a cubic [`PolynomialMotion`] (over |t − t0| ≤ 2 s: rates up to
/// ~4 rad/s and ~2 m/s), flat in the law's order.
pub fn random_polynomial(r: &mut Rng) -> Vec<f64> {
    let mut v = vec![r.uniform(0.0, 1.0)];
    v.extend(&r.pose(1.0)[..4]);
    // Coefficients of τ⁰..τ³: positions of x, y, z (m), then the three angles (rad).
    for _ in 0..3 {
        v.extend([
            r.uniform(-0.3, 0.3),
            r.uniform(-0.3, 0.3),
            r.uniform(-0.3, 0.3),
            r.uniform(-0.1, 0.1),
        ]);
    }
    for _ in 0..3 {
        v.extend([
            r.uniform(-0.5, 0.5),
            r.uniform(-0.5, 0.5),
            r.uniform(-0.5, 0.5),
            r.uniform(-0.1, 0.1),
        ]);
    }
    v
}

/// Which plane contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactKind {
    /// `SphereOnPlaneContact` with rolling.
    RollingSphere,
    /// `SphereOnPlaneContact` without rolling.
    SlidingSphere,
    /// `PointOnPlaneContact`.
    Point,
}

/// A batch of `n` random instances of one plane contact; about one instance in 97 has the
/// constraint disabled. Returns the batch, the body carrying the sphere/point and the contact.
pub fn contact_batch(
    kind: ContactKind,
    plane: PlaneBody,
    n: usize,
    seed: u64,
) -> Result<(Batch, BodyId, ConstraintId)> {
    let mut t = SystemTemplate::new();
    let p = match plane {
        PlaneBody::Ground => GROUND,
        PlaneBody::Free => t.add_free_body("plane"),
        PlaneBody::Prescribed => t.add_prescribed_body("plane"),
        PlaneBody::Tilting => t.add_driven_body("plane", TiltingMotion),
        PlaneBody::Polynomial => t.add_driven_body("plane", PolynomialMotion::new(3)?),
    };
    let b = t.add_free_body("body");
    let c = match kind {
        ContactKind::RollingSphere => t.add_constraint(SphereOnPlaneContact::new(p, b, true))?,
        ContactKind::SlidingSphere => t.add_constraint(SphereOnPlaneContact::new(p, b, false))?,
        ContactKind::Point => t.add_constraint(PointOnPlaneContact::new(p, b))?,
    };
    let mut batch = Batch::new(t, n)?;
    for i in 0..n {
        let mut r = Rng::for_instance(seed, i);
        batch.set_gravity(i, r.vec3(10.0))?;
        let mut bodies = vec![b];
        if plane == PlaneBody::Free {
            bodies.push(p);
        }
        for body in bodies {
            batch.set_mass_properties(body, i, r.uniform(0.5, 5.0), r.vec3(0.1), r.inertia())?;
            batch.set_q(body, i, r.pose(1.0))?;
            let (w, v) = (r.vec3(3.0), r.vec3(2.0));
            batch.set_u(body, i, [w[0], w[1], w[2], v[0], v[1], v[2]])?;
            batch.set_applied_force(body, i, r.vec3(1.0))?;
            batch.set_applied_torque(body, i, r.vec3(0.3))?;
        }
        match plane {
            PlaneBody::Prescribed => {
                batch.set_pose(p, i, r.pose(1.0))?;
                let (w, v, bb, a) = (r.vec3(2.0), r.vec3(1.0), r.vec3(3.0), r.vec3(3.0));
                batch.set_velocity(p, i, [w[0], w[1], w[2], v[0], v[1], v[2]])?;
                batch.set_acceleration(p, i, [bb[0], bb[1], bb[2], a[0], a[1], a[2]])?;
            }
            PlaneBody::Tilting => {
                batch.set_time(i, r.uniform(0.0, 2.0))?;
                batch.set_motion_params(p, i, &random_tilting(&mut r))?;
            }
            PlaneBody::Polynomial => {
                batch.set_time(i, r.uniform(0.0, 2.0))?;
                batch.set_motion_params(p, i, &random_polynomial(&mut r))?;
            }
            _ => {}
        }
        batch.set_param(c, "plane_frame", i, &r.pose(0.3))?;
        match kind {
            ContactKind::Point => batch.set_param(c, "follower_point", i, &r.vec3(0.3))?,
            _ => {
                batch.set_param(c, "sphere_center", i, &r.vec3(0.2))?;
                batch.set_param(c, "radius", i, &[r.uniform(0.05, 0.3)])?;
            }
        }
        if i % 97 == 5 {
            batch.set_enabled(c, i, false)?;
        }
    }
    Ok((batch, b, c))
}

/// A batch of `n` random bodies with one RBDL point contact along `normals` (1–3) random
/// orthonormal world directions; rows position-level if asked, Baumgarte if asked. Position
/// errors stay within 5 cm and time constants in [0.05, 0.5] s — drift Baumgarte is meant for.
pub fn point_to_ground_batch(
    n: usize,
    seed: u64,
    normals: usize,
    position_level: bool,
    baumgarte: bool,
) -> Result<(Batch, BodyId, ConstraintId)> {
    let mut t = SystemTemplate::new();
    let b = t.add_free_body("body");
    let axes = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
    let mut c = PointToGround::new(b, [0.0, 0.0, -0.1], &axes[..normals.clamp(1, 3)])?;
    if position_level {
        c = c.position_level();
    }
    let id = t.add_constraint(c)?;
    if baumgarte {
        t.set_baumgarte(id, Some(Baumgarte { time_constant: 0.1 }))?;
    }
    let mut batch = Batch::new(t, n)?;
    for i in 0..n {
        let mut r = Rng::for_instance(seed, i);
        batch.set_gravity(i, r.vec3(10.0))?;
        batch.set_mass_properties(b, i, r.uniform(0.5, 5.0), r.vec3(0.1), r.inertia())?;
        let q = r.pose(1.0);
        batch.set_q(b, i, q)?;
        let (w, v) = (r.vec3(3.0), r.vec3(2.0));
        batch.set_u(b, i, [w[0], w[1], w[2], v[0], v[1], v[2]])?;
        let point = r.vec3(0.3);
        batch.set_param(id, "point", i, &point)?;
        let rot = rotation_from_quaternion(&q[..4]).unwrap_or_default();
        let x_p = Vector3::new(q[4], q[5], q[6]) + rot * Vector3::from(point);
        let off = r.vec3(0.05);
        batch.set_param(
            id,
            "ground_point",
            i,
            &[x_p.x + off[0], x_p.y + off[1], x_p.z + off[2]],
        )?;
        if baumgarte {
            batch.set_baumgarte_time_constant(id, i, r.uniform(0.05, 0.5))?;
        }
        let frame = rotation_from_quaternion(&r.pose(0.0)[..4]).unwrap_or_default();
        let flat: Vec<f64> = (0..normals.clamp(1, 3))
            .flat_map(|k| frame.column(k).iter().copied().collect::<Vec<_>>())
            .collect();
        batch.set_param(id, "normals", i, &flat)?;
    }
    Ok((batch, b, id))
}

/// The benchmark ball (MuJoCo's reference system): N balls of 1 kg and 10 cm rolling on Ground
/// along x at 0.5–1.1 m/s, consistent with the rolling constraint.
pub fn rolling_balls(n: usize) -> Result<Batch> {
    let (m, r) = (1.0, 0.1);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(r))?;
    let mut b = Batch::new(t, n)?;
    let k = 0.4 * m * r * r;
    for i in 0..n {
        let v = 0.5 + (i % 7) as f64 * 0.1;
        b.set_mass_properties(ball, i, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0])?;
        b.set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, r])?;
        // Rolling along x: w = (n × v) / r.
        b.set_u(ball, i, [0.0, v / r, 0.0, v, 0.0, 0.0])?;
    }
    b.share_uniform_columns();
    Ok(b)
}

/// The unilateral benchmark ball: N balls of 1 kg and 10 cm dropped onto Ground's plane
/// (unilateral contact) from 0.05–0.5 m, moving sideways at up to 2 m/s and spinning, with
/// restitution 0.3–0.9 and friction 0.2–0.6 drawn per ball (a deterministic sequence): they
/// bounce, and their impacts' friction sets them rolling (at 0.8 s about 60 % still bounce and
/// the rest roll). The batch, the contact and each ball's coefficients.
pub fn bouncing_balls(
    n: usize,
) -> Result<(Batch, ConstraintId, Vec<crate::contact::Coefficients>)> {
    let (m, r) = (1.0, 0.1);
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let contact = t.add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(r))?;
    let mut b = Batch::new(t, n)?;
    let k = 0.4 * m * r * r;
    let mut coefficients = Vec::with_capacity(n);
    // Fractions in [0, 1) from the golden ratio's sequence: spread, repeatable.
    let spread = |i: usize, salt: f64| ((i as f64 + salt) * 0.618_033_988_749_895).fract();
    for i in 0..n {
        let height = 0.05 + 0.45 * spread(i, 0.1);
        b.set_mass_properties(ball, i, m, [0.0; 3], [k, k, k, 0.0, 0.0, 0.0])?;
        b.set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, r + height])?;
        let v = 2.0 * spread(i, 0.3);
        b.set_u(
            ball,
            i,
            [0.0, 10.0 * spread(i, 0.7) - 5.0, 0.0, v, 0.0, 0.0],
        )?;
        let mu = 0.2 + 0.4 * spread(i, 0.5);
        coefficients.push(crate::contact::Coefficients::with_friction(
            0.3 + 0.6 * spread(i, 0.9),
            mu,
        )?);
    }
    b.share_uniform_columns();
    Ok((b, contact, coefficients))
}

/// The benchmark stick: N uniform 1 m sticks standing on their tips (a no-slip point on Ground),
/// tilted 0.1–0.6 rad and falling.
pub fn standing_sticks(n: usize) -> Result<Batch> {
    let (m, l) = (1.0, 1.0);
    let mut t = SystemTemplate::new();
    let stick = t.add_free_body("stick");
    t.add_constraint(
        PointOnPlaneContact::new(GROUND, stick).with_follower_point([0.0, 0.0, -l / 2.0]),
    )?;
    let mut b = Batch::new(t, n)?;
    let i_t = m * l * l / 12.0;
    for i in 0..n {
        let tilt = 0.1 + (i % 11) as f64 * 0.05;
        b.set_mass_properties(stick, i, m, [0.0; 3], [i_t, i_t, 1e-3, 0.0, 0.0, 0.0])?;
        let (s, c) = ((tilt / 2.0).sin(), (tilt / 2.0).cos());
        // Tilted about y; the tip at the origin.
        b.set_q(
            stick,
            i,
            [
                c,
                0.0,
                s,
                0.0,
                0.5 * l * tilt.sin(),
                0.0,
                0.5 * l * tilt.cos(),
            ],
        )?;
    }
    b.share_uniform_columns();
    Ok(b)
}

/// The unilateral benchmark brick: N bricks of 2 kg, 0.4 × 0.3 × 0.1 m, on their four bottom
/// corners (four unilateral `point_on_plane` contacts with Ground's plane), tilted up to 0.1 rad
/// about x and y so that their corners land one after another, their lowest corner 0–5 mm above
/// the plane, sliding along x at up to 1 m/s and turning about z, with restitution 0.1–0.5 and
/// friction 0.2–0.8 drawn per brick (the same at its four corners; a deterministic sequence):
/// the lowest corner lands within 32 ms and the others as the brick rocks down onto them, then
/// they slide and stick (21 of the first 24 rest by 0.5 s). The batch, the corners' contacts
/// and each brick's coefficients (one per corner).
pub fn sliding_bricks(
    n: usize,
) -> Result<(
    Batch,
    Vec<ConstraintId>,
    Vec<Vec<crate::contact::Coefficients>>,
)> {
    let (m, half) = (2.0, [0.2, 0.15, 0.05]);
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let corners = [(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)]
        .map(|(x, y)| Vector3::new(x * half[0], y * half[1], -half[2]));
    let mut contacts = Vec::with_capacity(corners.len());
    for p in &corners {
        let corner = PointOnPlaneContact::new(GROUND, brick).with_follower_point([p.x, p.y, p.z]);
        contacts.push(t.add_constraint(corner)?);
    }
    let mut b = Batch::new(t, n)?;
    // A solid box's principal moments m (b² + c²) / 3 with half-widths a, b, c.
    let moment = |u: f64, v: f64| m * (u * u + v * v) / 3.0;
    let inertia = [
        moment(half[1], half[2]),
        moment(half[0], half[2]),
        moment(half[0], half[1]),
        0.0,
        0.0,
        0.0,
    ];
    let spread = |i: usize, salt: f64| ((i as f64 + salt) * 0.618_033_988_749_895).fract();
    let mut coefficients = Vec::with_capacity(n);
    for i in 0..n {
        let (ax, ay) = (0.2 * spread(i, 0.2) - 0.1, 0.2 * spread(i, 0.4) - 0.1);
        let norm = (1.0 + 0.25 * (ax * ax + ay * ay)).sqrt();
        let quaternion = [1.0 / norm, 0.5 * ax / norm, 0.5 * ay / norm, 0.0];
        let rotation = rotation_from_quaternion(&quaternion).unwrap_or_default();
        let lowest = corners
            .iter()
            .map(|p| (rotation * p).z)
            .fold(f64::INFINITY, f64::min);
        let height = 0.005 * spread(i, 0.6) - lowest;
        b.set_mass_properties(brick, i, m, [0.0; 3], inertia)?;
        let [q0, q1, q2, q3] = quaternion;
        b.set_q(brick, i, [q0, q1, q2, q3, 0.0, 0.0, height])?;
        b.set_u(
            brick,
            i,
            [
                0.0,
                0.0,
                4.0 * spread(i, 0.8) - 2.0,
                spread(i, 0.3),
                0.0,
                0.0,
            ],
        )?;
        let mu = 0.2 + 0.6 * spread(i, 0.5);
        let per = crate::contact::Coefficients::with_friction(0.1 + 0.4 * spread(i, 0.9), mu)?;
        coefficients.push(vec![per; contacts.len()]);
    }
    b.share_uniform_columns();
    Ok((b, contacts, coefficients))
}
