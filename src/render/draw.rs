//! Draws a [`Scene`]: a small ray caster for the solids (spheres and points shaded, planes as
//! translucent squares with a grid, so what lies beneath a plane shows through it tinted) and
//! 2-D marks over them (body frames, contact points, force arrows, labels). One fixed camera per
//! panel, fitted to its instances' whole motion, so the motion is seen against a still view.

use super::camera::Camera;
use super::canvas::{Canvas, Rgb};
use super::raycast::{Ball, nice_step, shade};
use super::scene::{
    ContactState, Scene, centroid, constraint_points, decoration_finite, finite, moving_points,
};
use crate::constraints::Decoration;
use crate::error::{Error, Result};
use crate::math::Vec3;

/// How several instances share the picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One panel per instance, side by side.
    Panels,
    /// Every instance in one panel, each in its own colour.
    Overlay,
}

/// Picture settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RenderOptions {
    /// Image width in pixels.
    pub width: usize,
    /// Image height in pixels.
    pub height: usize,
    /// Panels or overlay.
    pub layout: Layout,
    /// Rays per pixel along each axis (1: fast, 2: smooth edges).
    pub samples: usize,
    /// Draw the time stamp and labels.
    pub labels: bool,
    /// A fixed view `(centre, radius)` in Ground for every panel, with planes drawn to cover
    /// it (an environment's workspace); `None`: each panel is fitted to its instances' motion.
    pub view: Option<([f64; 3], f64)>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            width: 640,
            height: 480,
            layout: Layout::Panels,
            samples: 2,
            labels: true,
            view: None,
        }
    }
}

/// Largest image side accepted, in pixels.
pub const MAX_SIDE: usize = 8192;

/// Instance colours (shaded on the spheres), in track order.
pub const PALETTE: [Rgb; 8] = [
    [200, 60, 50],
    [50, 110, 200],
    [60, 160, 80],
    [190, 120, 30],
    [140, 70, 170],
    [30, 150, 160],
    [170, 60, 120],
    [110, 110, 110],
];

pub(super) const BACKGROUND: Rgb = [246, 246, 244];
pub(super) const PLANE: Rgb = [150, 175, 205];
pub(super) const PLANE_LINE: Rgb = [70, 90, 120];

/// The colour of a contact state's marks.
pub fn state_colour(state: ContactState) -> Rgb {
    match state {
        ContactState::Bilateral => [20, 20, 20],
        ContactState::Open => [150, 150, 150],
        ContactState::Stick => [30, 150, 60],
        ContactState::Slide => [230, 120, 0],
        ContactState::Disabled => [190, 190, 190],
    }
}

/// One panel: its tracks, camera, plane size and where it sits in the image.
#[derive(Debug, Clone)]
struct Panel {
    tracks: Vec<usize>,
    camera: Camera,
    half_width: f64,
    point_radius: f64,
    /// Per track and constraint, the centre of the motion the constraint's plane carries (its
    /// sphere's or point's path; else the track's): planes are drawn centred beneath it.
    centres: Vec<Vec<Vec3>>,
    origin: (usize, usize),
}

/// Draws the frames of one scene with fixed cameras.
#[derive(Debug, Clone)]
pub struct Renderer<'a> {
    scene: &'a Scene,
    options: RenderOptions,
    panels: Vec<Panel>,
    /// Metres of arrow per newton.
    force_scale: f64,
    /// The largest force drawn (N).
    force_max: f64,
}

impl<'a> Renderer<'a> {
    /// A renderer for `scene`: cameras fitted to each panel's whole motion, planes sized to it,
    /// force arrows scaled so the largest is a third of the scene.
    pub fn new(scene: &'a Scene, options: RenderOptions) -> Result<Self> {
        for (what, v) in [
            ("render width", options.width),
            ("render height", options.height),
        ] {
            if !(16..=MAX_SIDE).contains(&v) {
                return Err(Error::BadChoice {
                    what,
                    value: v.to_string(),
                    accepted: "16 to 8192 pixels",
                });
            }
        }
        if !(1..=4).contains(&options.samples) {
            return Err(Error::BadChoice {
                what: "render samples",
                value: options.samples.to_string(),
                accepted: "1 to 4 rays per pixel along each axis",
            });
        }
        if scene.tracks.is_empty() {
            return Err(Error::BadChoice {
                what: "instances to render",
                value: "none".into(),
                accepted: "at least one instance",
            });
        }
        let groups: Vec<Vec<usize>> = match options.layout {
            Layout::Overlay => vec![(0..scene.tracks.len()).collect()],
            Layout::Panels => (0..scene.tracks.len()).map(|k| vec![k]).collect(),
        };
        let cols = (groups.len() as f64).sqrt().ceil().max(1.0) as usize;
        let rows = groups.len().div_ceil(cols);
        let (pw, ph) = (options.width / cols, options.height / rows);
        if pw < 16 || ph < 16 {
            return Err(Error::BadChoice {
                what: "instances to render",
                value: format!(
                    "{} panels in {}×{}",
                    groups.len(),
                    options.width,
                    options.height
                ),
                accepted: "panels of at least 16×16 pixels (a larger image or fewer instances)",
            });
        }
        let up = Vec3::from(scene.up);
        let mut panels = Vec::with_capacity(groups.len());
        let mut force_max = 0.0f64;
        let mut scene_radius = 0.0f64;
        for (g, tracks) in groups.into_iter().enumerate() {
            let mut all = Vec::new();
            let mut centres = Vec::new();
            let mut radius_max = 0.0f64;
            for &t in &tracks {
                let mut pts = Vec::new();
                moving_points(&scene.tracks[t].frames, &mut pts);
                pts.retain(finite);
                let track_centre = centroid(&pts).unwrap_or_else(Vec3::zeros);
                let count = scene.tracks[t]
                    .frames
                    .first()
                    .map_or(0, |f| f.constraints.len());
                centres.push(
                    (0..count)
                        .map(|k| {
                            centroid(&constraint_points(&scene.tracks[t].frames, k))
                                .unwrap_or(track_centre)
                        })
                        .collect::<Vec<_>>(),
                );
                all.extend(pts);
                for f in &scene.tracks[t].frames {
                    for c in &f.constraints {
                        for d in &c.decorations {
                            match d {
                                Decoration::Sphere { radius, .. } => {
                                    radius_max = radius_max.max(*radius)
                                }
                                Decoration::Force { force, .. } => {
                                    let n = Vec3::from(*force).norm();
                                    if n.is_finite() {
                                        force_max = force_max.max(n);
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                }
            }
            // The planes' reach: how far each plane's sphere or point goes along it from the
            // centre it is drawn at.
            let mut reach = 0.0f64;
            for (&t, centres) in tracks.iter().zip(&centres) {
                let frames = &scene.tracks[t].frames;
                for (k, centre) in centres.iter().enumerate() {
                    let Some(n) = frames
                        .first()
                        .and_then(|f| f.constraints.get(k))
                        .and_then(|c| {
                            c.decorations.iter().find_map(|d| match d {
                                Decoration::Plane { axes, .. } => Some(Vec3::from(axes[2])),
                                _ => None,
                            })
                        })
                    else {
                        continue;
                    };
                    let mut pts = constraint_points(frames, k);
                    if pts.is_empty() {
                        pts.clone_from(&all);
                    }
                    for p in &pts {
                        let off = p - centre;
                        let along = (off - n * n.dot(&off)).norm() + radius_max;
                        if along.is_finite() {
                            reach = reach.max(along);
                        }
                    }
                }
            }
            let (lo, hi) = all.iter().fold(
                (Vec3::repeat(f64::INFINITY), Vec3::repeat(f64::NEG_INFINITY)),
                |(lo, hi), p| (lo.inf(p), hi.sup(p)),
            );
            let extent = if all.is_empty() {
                1.0
            } else {
                0.5 * (hi - lo).norm()
            };
            // Simbody's square of half-width 1, unless that hides the motion (it reaches past
            // the square, or the square dwarfs it).
            let wanted = 1.2 * reach;
            let half_width = if wanted > 1.0 || (extent < 0.2 && wanted < 1.0) {
                wanted.max(2.0 * radius_max).max(0.6 * extent).max(1e-3)
            } else {
                1.0
            };
            let mid = if all.is_empty() {
                Vec3::zeros()
            } else {
                0.5 * (lo + hi)
            };
            let mut radius = extent.max(0.75 * half_width).max(1e-3);
            let (mut mid, mut half_width) = (mid, half_width);
            if let Some((centre, r)) = options
                .view
                .filter(|(c, r)| c.iter().all(|x| x.is_finite()) && r.is_finite() && *r > 0.0)
            {
                (mid, radius, half_width) = (Vec3::from(centre), r, r);
                // Planes stay put under the fixed view, not under the motion.
                centres.iter_mut().flatten().for_each(|c| *c = mid);
            }
            scene_radius = scene_radius.max(radius);
            let (r, c) = (g / cols, g % cols);
            panels.push(Panel {
                tracks,
                camera: Camera::fit(mid, radius, up, pw, ph),
                half_width,
                point_radius: crate::model::constraint::POINT_RADIUS.max(0.012 * radius),
                centres,
                origin: (c * pw, r * ph),
            });
        }
        let force_scale = if force_max > 0.0 {
            0.35 * scene_radius / force_max
        } else {
            0.0
        };
        Ok(Self {
            scene,
            options,
            panels,
            force_scale,
            force_max,
        })
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.scene
            .tracks
            .iter()
            .map(|t| t.frames.len())
            .min()
            .unwrap_or(0)
    }

    /// The camera of the panel showing track `track` (for tests and for placing marks).
    pub fn camera_of(&self, track: usize) -> Option<&Camera> {
        self.panels
            .iter()
            .find(|p| p.tracks.contains(&track))
            .map(|p| &p.camera)
    }

    /// Where the panel of track `track` sits in the image (top-left pixel).
    pub fn panel_origin(&self, track: usize) -> Option<(usize, usize)> {
        self.panels
            .iter()
            .find(|p| p.tracks.contains(&track))
            .map(|p| p.origin)
    }

    /// The drawn half-width of the planes in the panel of track `track`.
    pub fn plane_half_width(&self, track: usize) -> Option<f64> {
        self.panels
            .iter()
            .find(|p| p.tracks.contains(&track))
            .map(|p| p.half_width)
    }

    /// Frame `k` as an image.
    pub fn frame(&self, k: usize) -> Result<Canvas> {
        let frames = self.frames();
        if k >= frames {
            return Err(Error::BadChoice {
                what: "frame",
                value: k.to_string(),
                accepted: "an index below the scene's frame count",
            });
        }
        let mut canvas = Canvas::new(self.options.width, self.options.height, BACKGROUND);
        for panel in &self.panels {
            let picture = self.panel(panel, k);
            canvas.paste(&picture, panel.origin.0, panel.origin.1);
        }
        if self.options.labels {
            let time = self.scene.tracks[0].frames[k].time;
            canvas.label(8, 8, &format!("t = {time:.3} s"), 2, [20, 20, 20]);
            self.legend(&mut canvas, k);
        }
        Ok(canvas)
    }

    fn legend(&self, canvas: &mut Canvas, k: usize) {
        let mut states: Vec<ContactState> = Vec::new();
        for t in &self.scene.tracks {
            for c in &t.frames[k].constraints {
                if !c.decorations.is_empty() && !states.contains(&c.state) {
                    states.push(c.state);
                }
            }
        }
        let mut y = canvas.height() as i64 - 14;
        if self.force_max > 0.0 {
            let text = format!("arrows: contact force, longest {:.3} N", self.force_max);
            canvas.label(8, y, &text, 1, [40, 40, 40]);
            y -= 14;
        }
        for s in states {
            canvas.fill_rect(8, y, 15, y + 7, state_colour(s), 1.0);
            canvas.label(20, y, s.name(), 1, [40, 40, 40]);
            y -= 14;
        }
    }

    fn panel(&self, panel: &Panel, k: usize) -> Canvas {
        let cam = &panel.camera;
        let mut canvas = Canvas::new(cam.width, cam.height, BACKGROUND);
        let mut spheres: Vec<Ball> = Vec::new();
        let mut planes: Vec<(Vec3, [Vec3; 3])> = Vec::new();
        for (slot, &t) in panel.tracks.iter().enumerate() {
            let colour = PALETTE[t % PALETTE.len()];
            let frame = &self.scene.tracks[t].frames[k];
            for (k, c) in frame.constraints.iter().enumerate() {
                let centre = panel.centres[slot]
                    .get(k)
                    .copied()
                    .unwrap_or_else(Vec3::zeros);
                for d in &c.decorations {
                    if !decoration_finite(d) {
                        // A non-finite instance draws nothing of it (its label says flagged).
                        continue;
                    }
                    match d {
                        Decoration::Sphere {
                            center,
                            radius,
                            axes,
                        } => spheres.push((
                            Vec3::from(*center),
                            *radius,
                            Some(axes.map(Vec3::from)),
                            colour,
                        )),
                        Decoration::Point { position, .. } => {
                            spheres.push((Vec3::from(*position), panel.point_radius, None, colour))
                        }
                        Decoration::Plane { origin, axes, .. } => {
                            let axes = axes.map(Vec3::from);
                            let o = Vec3::from(*origin);
                            let off = centre - o;
                            let n = axes[2];
                            // Centred beneath the motion, in the plane.
                            planes.push((o + off - n * n.dot(&off), axes));
                        }
                        _ => {}
                    }
                }
            }
        }
        let light = (-cam.forward + cam.up * 0.9 - cam.right * 0.5).normalize();
        let s = self.options.samples;
        let hw = panel.half_width;
        let grid = nice_step(hw / 4.0);
        for py in 0..cam.height {
            for px in 0..cam.width {
                let mut acc = [0.0f64; 3];
                for sy in 0..s {
                    for sx in 0..s {
                        let x = px as f64 + (sx as f64 + 0.5) / s as f64;
                        let y = py as f64 + (sy as f64 + 0.5) / s as f64;
                        let c = shade(cam, x, y, &spheres, &planes, hw, grid, &light);
                        for a in 0..3 {
                            acc[a] += c[a];
                        }
                    }
                }
                let n = (s * s) as f64;
                canvas.set(px, py, acc.map(|v| (v / n).round().clamp(0.0, 255.0) as u8));
            }
        }
        self.marks(panel, k, &mut canvas);
        canvas
    }

    /// Body frames, contact points, force arrows and the panel's label.
    fn marks(&self, panel: &Panel, k: usize, canvas: &mut Canvas) {
        let cam = &panel.camera;
        let axis_len = 0.12 * panel.half_width.max(4.0 * panel.point_radius);
        // Each free body's path so far, in its instance's colour (lightened): small bodies far
        // apart are still seen to move.
        for &t in &panel.tracks {
            let track = &self.scene.tracks[t];
            let c = PALETTE[t % PALETTE.len()];
            let light = c.map(|v| ((u16::from(v) + 2 * 246) / 3) as u8);
            let bodies = track.frames[k].bodies.len();
            for b in 0..bodies {
                let mut prev: Option<[f64; 2]> = None;
                for f in &track.frames[..=k] {
                    let p = f
                        .bodies
                        .get(b)
                        .filter(|p| p.free)
                        .and_then(|p| cam.project(&Vec3::from(p.origin)))
                        .map(|(p, _)| p);
                    if let (Some(a), Some(b)) = (prev, p) {
                        canvas.segment(a, b, 1.5, light);
                    }
                    prev = p;
                }
            }
        }
        for &t in &panel.tracks {
            let frame = &self.scene.tracks[t].frames[k];
            let inside_sphere = |p: &Vec3| {
                frame.constraints.iter().any(|c| {
                    c.decorations.iter().any(|d| match d {
                        Decoration::Sphere { center, radius, .. } => {
                            (Vec3::from(*center) - p).norm() < *radius
                        }
                        _ => false,
                    })
                })
            };
            for b in &frame.bodies {
                let o = Vec3::from(b.origin);
                if inside_sphere(&o) {
                    continue;
                }
                let Some((a, _)) = cam.project(&o) else {
                    continue;
                };
                for (axis, colour) in
                    b.axes
                        .iter()
                        .zip([[210, 40, 40], [40, 160, 40], [40, 60, 210]])
                {
                    if let Some((e, _)) = cam.project(&(o + Vec3::from(*axis) * axis_len)) {
                        canvas.segment(a, e, 2.0, colour);
                    }
                }
            }
            for c in &frame.constraints {
                let colour = state_colour(c.state);
                if matches!(c.state, ContactState::Open | ContactState::Disabled) {
                    // Nothing touches: no contact point, no force.
                    continue;
                }
                for d in &c.decorations {
                    match d {
                        Decoration::ContactPoint { position } => {
                            if let Some((p, _)) = cam.project(&Vec3::from(*position)) {
                                canvas.disc(p, 3.5, colour, 1.0);
                            }
                        }
                        Decoration::Force { point, force } => {
                            let f = Vec3::from(*force);
                            if !finite(&f) || f.norm() * self.force_scale < 1e-9 {
                                continue;
                            }
                            let a = Vec3::from(*point);
                            let b = a + f * self.force_scale;
                            if let (Some((pa, _)), Some((pb, _))) =
                                (cam.project(&a), cam.project(&b))
                            {
                                canvas.arrow(pa, pb, 2.0, 9.0, colour);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if self.options.labels {
            let mut y = 30;
            for &t in &panel.tracks {
                let track = &self.scene.tracks[t];
                let flagged = if track.frames[k].status != 0 {
                    " flagged"
                } else {
                    ""
                };
                let text = format!("#{}{flagged}", track.instance);
                let x = cam.width as i64 - Canvas::text_width(&text, 2) as i64 - 10;
                canvas.label(x, y, &text, 2, PALETTE[t % PALETTE.len()]);
                y += 22;
            }
        }
    }
}
