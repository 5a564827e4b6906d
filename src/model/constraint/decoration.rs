//! Decorative geometry: what a picture of a constraint shows, in Ground, for one instance —
//! Simbody's `DecorativeGeometry` for the built-in kinds (a plane as a square, a sphere of its
//! radius, a follower point as a small ball), plus the contact point and the force there. Plain
//! data with no effect on the physics; the renderer (`render`) draws it without knowing kinds.

use crate::math::{Mat3, Vec3};

/// Half-width of a drawn plane when nothing says otherwise (Simbody's default decoration).
pub const PLANE_HALF_WIDTH: f64 = 1.0;

/// Radius of the ball that marks a follower point or a body station (Simbody's default).
pub const POINT_RADIUS: f64 = 0.05;

/// One piece of decorative geometry, in Ground.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decoration {
    /// A plane through `origin` with axes `Px, Py, Pz` (unit, `Pz` its normal), drawn as a
    /// square of `half_width` along `Px` and `Py`.
    Plane {
        /// A point of the plane (the plane frame's origin).
        origin: [f64; 3],
        /// `Px, Py, Pz` in Ground.
        axes: [[f64; 3]; 3],
        /// Half-width of the drawn square.
        half_width: f64,
    },
    /// A sphere fixed on a body: its centre, radius and the body's rotation `R_GB` (columns: the
    /// body axes in Ground), so a picture can mark the spin.
    Sphere {
        /// Centre in Ground.
        center: [f64; 3],
        /// Radius.
        radius: f64,
        /// Body axes in Ground (`R_GB`'s columns).
        axes: [[f64; 3]; 3],
    },
    /// A point fixed on a body (a follower point, an RBDL contact point): a small ball.
    Point {
        /// Position in Ground.
        position: [f64; 3],
        /// Radius of the ball drawn there ([`POINT_RADIUS`]).
        radius: f64,
    },
    /// The contact point.
    ContactPoint {
        /// Position in Ground.
        position: [f64; 3],
    },
    /// The force the constraint applies at `point` on its moving body (the sphere, the follower,
    /// the body point), in Ground.
    Force {
        /// Point of application in Ground.
        point: [f64; 3],
        /// Force in Ground (N).
        force: [f64; 3],
    },
}

/// The columns of a rotation as arrays (the axes of the frame in Ground).
pub fn axes_of(rotation: &Mat3) -> [[f64; 3]; 3] {
    [0, 1, 2].map(|k| {
        let c = rotation.column(k);
        [c[0], c[1], c[2]]
    })
}

/// A vector as an array.
pub fn array(v: &Vec3) -> [f64; 3] {
    [v[0], v[1], v[2]]
}
