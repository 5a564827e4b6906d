//! A fixed perspective camera: where it looks from, what is up, and how a point of Ground lands
//! on a pixel (and which ray a pixel sees).

use crate::math::Vec3;

/// A pinhole camera looking from `eye` at `target`, `up` the vertical of the picture, with a
/// vertical field of view `fov` (radians), over an image of `width × height` pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Camera {
    /// Eye position in Ground.
    pub eye: Vec3,
    /// Unit view direction.
    pub forward: Vec3,
    /// Unit right axis of the picture.
    pub right: Vec3,
    /// Unit up axis of the picture.
    pub up: Vec3,
    /// Focal length in pixels.
    pub focal: f64,
    /// Image width in pixels.
    pub width: usize,
    /// Image height in pixels.
    pub height: usize,
}

/// Vertical field of view of a fitted camera (35°).
pub const FIELD_OF_VIEW: f64 = 35.0 * std::f64::consts::PI / 180.0;

impl Camera {
    /// A camera at `eye` looking at `target`; `up` need not be orthogonal to the view but must
    /// not be parallel to it (then any perpendicular is taken).
    pub fn look_at(
        eye: Vec3,
        target: Vec3,
        up: Vec3,
        fov: f64,
        width: usize,
        height: usize,
    ) -> Self {
        let forward = (target - eye)
            .try_normalize(1e-300)
            .unwrap_or_else(|| -Vec3::z());
        let mut right = forward.cross(&up);
        if right.norm() < 1e-9 {
            let seed = if forward.x.abs() < 0.9 {
                Vec3::x()
            } else {
                Vec3::y()
            };
            right = forward.cross(&seed);
        }
        let right = right.normalize();
        let up = right.cross(&forward);
        let focal = 0.5 * height as f64 / (0.5 * fov).tan();
        Self {
            eye,
            forward,
            right,
            up,
            focal,
            width,
            height,
        }
    }

    /// The fixed camera that shows a ball of `radius` around `center` whole, looking down at it
    /// obliquely from the front right; `up` is the scene's vertical (against gravity).
    pub fn fit(center: Vec3, radius: f64, up: Vec3, width: usize, height: usize) -> Self {
        let up = up.try_normalize(1e-300).unwrap_or_else(Vec3::z);
        // A horizontal direction, then the view from 35° above the horizon, 30° to the side.
        let seed = if up.x.abs() < 0.9 {
            Vec3::x()
        } else {
            Vec3::y()
        };
        let east = (seed - up * up.dot(&seed)).normalize();
        let north = up.cross(&east);
        let (el, az) = (35f64.to_radians(), (-60f64).to_radians());
        let back = (east * az.cos() + north * az.sin()) * el.cos() + up * el.sin();
        let aspect = (width as f64 / height.max(1) as f64).min(1.0);
        let half = 0.5 * FIELD_OF_VIEW;
        let radius = if radius.is_finite() && radius > 0.0 {
            radius
        } else {
            1.0
        };
        let distance = 1.1 * radius / (half.tan() * aspect).atan().sin();
        Self::look_at(
            center + back * distance,
            center,
            up,
            FIELD_OF_VIEW,
            width,
            height,
        )
    }

    /// Pixel coordinates of `p` (x right, y down; the centre of pixel `(i, j)` is at
    /// `(i + 0.5, j + 0.5)`) and its depth along the view; `None` behind the eye.
    pub fn project(&self, p: &Vec3) -> Option<([f64; 2], f64)> {
        let d = p - self.eye;
        let z = d.dot(&self.forward);
        if z <= 1e-9 {
            return None;
        }
        let x = 0.5 * self.width as f64 + self.focal * d.dot(&self.right) / z;
        let y = 0.5 * self.height as f64 - self.focal * d.dot(&self.up) / z;
        Some(([x, y], z))
    }

    /// The unit direction of the ray through pixel coordinates `(x, y)`.
    pub fn ray(&self, x: f64, y: f64) -> Vec3 {
        let dx = (x - 0.5 * self.width as f64) / self.focal;
        let dy = (0.5 * self.height as f64 - y) / self.focal;
        (self.forward + self.right * dx + self.up * dy).normalize()
    }

    /// Pixels per metre at depth `z`.
    pub fn scale_at(&self, z: f64) -> f64 {
        self.focal / z
    }
}
