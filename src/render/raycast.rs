//! The ray caster behind [`Renderer`](super::Renderer): per pixel, the nearest sphere (shaded,
//! with its body's spin marker) and, over it, the translucent planes the ray crosses before it,
//! farthest first, each with its grid and edge.

use super::camera::Camera;
use super::canvas::Rgb;
use super::draw::{BACKGROUND, PLANE, PLANE_LINE};
use crate::math::Vec3;

/// A sphere to cast rays at: centre, radius, its body's axes (for the spin marker), colour.
pub(super) type Ball = (Vec3, f64, Option<[Vec3; 3]>, Rgb);

/// A round grid step near `x` (1, 2 or 5 × 10^k).
pub(super) fn nice_step(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    let m = x / p;
    p * if m < 1.5 {
        1.0
    } else if m < 3.5 {
        2.0
    } else if m < 7.5 {
        5.0
    } else {
        10.0
    }
}

/// The colour seen through pixel coordinates `(x, y)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn shade(
    cam: &Camera,
    x: f64,
    y: f64,
    spheres: &[Ball],
    planes: &[(Vec3, [Vec3; 3])],
    hw: f64,
    grid: f64,
    light: &Vec3,
) -> [f64; 3] {
    let d = cam.ray(x, y);
    let e = cam.eye;
    let mut colour = BACKGROUND.map(f64::from);
    let mut nearest = f64::INFINITY;
    for (c, r, axes, base) in spheres {
        // |e + t d − c|² = r²
        let oc = e - c;
        let b = oc.dot(&d);
        let disc = b * b - (oc.norm_squared() - r * r);
        if disc < 0.0 {
            continue;
        }
        let t = -b - disc.sqrt();
        if t <= 0.0 || t >= nearest {
            continue;
        }
        nearest = t;
        let n = (oc + d * t) / *r;
        let diffuse = n.dot(light).max(0.0);
        let mut base = base.map(f64::from);
        if let Some([bx, by, bz]) = axes {
            // The spin marker: a white cap around the body's y axis and dark great circles in
            // its x–y and y–z planes, fixed in the body, so rolling and spinning show.
            if n.dot(by) > 0.8 {
                base = [245.0, 245.0, 245.0];
            } else if n.dot(bz).abs() < 0.07 || n.dot(bx).abs() < 0.07 {
                base = base.map(|v| 0.35 * v);
            }
        }
        let spec = n.dot(&(light - d).normalize()).max(0.0).powi(24) * 60.0;
        colour = base.map(|v| (v * (0.35 + 0.65 * diffuse) + spec).min(255.0));
    }
    // Translucent planes over what lies behind them, farthest first.
    let mut hits: Vec<(f64, f64, f64)> = Vec::new();
    for (o, [px, py, pz]) in planes {
        let denom = d.dot(pz);
        if denom.abs() < 1e-12 {
            continue;
        }
        let t = (o - e).dot(pz) / denom;
        if t <= 0.0 || t >= nearest {
            continue;
        }
        let p = e + d * t - o;
        let (u, v) = (p.dot(px), p.dot(py));
        if u.abs() <= hw && v.abs() <= hw {
            hits.push((t, u, v));
        }
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (t, u, v) in hits {
        let edge = hw - u.abs().max(v.abs()) < 0.012 * hw;
        // Grid lines a fixed fraction of a pixel wide at this depth.
        let line = 1.2 / cam.scale_at(t * d.dot(&cam.forward));
        let on_grid = |w: f64| {
            let m = (w / grid).rem_euclid(1.0);
            m * grid < line || (1.0 - m) * grid < line
        };
        let (c, a) = if edge {
            (PLANE_LINE, 0.85)
        } else if on_grid(u) || on_grid(v) {
            (PLANE_LINE, 0.45)
        } else {
            (PLANE, 0.4)
        };
        for k in 0..3 {
            colour[k] = colour[k] * (1.0 - a) + f64::from(c[k]) * a;
        }
    }
    colour
}
