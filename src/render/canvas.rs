//! An RGB image in memory and the 2-D marks drawn over a rendered scene: antialiased segments,
//! discs and arrows, filled rectangles, and text in the built-in bitmap font.

use super::font::{GLYPH, glyph};

/// An sRGB colour.
pub type Rgb = [u8; 3];

/// A `width × height` RGB image, rows top to bottom, 3 bytes a pixel (what PNG, GIF and
/// Gymnasium's `rgb_array` take).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    /// A canvas filled with `background`.
    pub fn new(width: usize, height: usize, background: Rgb) -> Self {
        let mut pixels = Vec::with_capacity(width * height * 3);
        for _ in 0..width * height {
            pixels.extend_from_slice(&background);
        }
        Self {
            width,
            height,
            pixels,
        }
    }

    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The pixels, `height × width × 3` bytes, row-major.
    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    /// The pixels, consumed.
    pub fn into_pixels(self) -> Vec<u8> {
        self.pixels
    }

    /// The colour at `(x, y)`, `None` outside.
    pub fn get(&self, x: usize, y: usize) -> Option<Rgb> {
        (x < self.width && y < self.height).then(|| {
            let k = 3 * (y * self.width + x);
            [self.pixels[k], self.pixels[k + 1], self.pixels[k + 2]]
        })
    }

    /// Sets `(x, y)`; nothing outside.
    pub fn set(&mut self, x: usize, y: usize, c: Rgb) {
        if x < self.width && y < self.height {
            let k = 3 * (y * self.width + x);
            self.pixels[k..k + 3].copy_from_slice(&c);
        }
    }

    /// Blends `c` over `(x, y)` with opacity `alpha ∈ [0, 1]` (integer pixel coordinates that
    /// may fall outside).
    pub fn blend(&mut self, x: i64, y: i64, c: Rgb, alpha: f64) {
        if x < 0 || y < 0 || alpha <= 0.0 {
            return;
        }
        let (x, y) = (x as usize, y as usize);
        if let Some(old) = self.get(x, y) {
            let a = alpha.min(1.0);
            let mix = |o: u8, n: u8| (f64::from(o) * (1.0 - a) + f64::from(n) * a).round() as u8;
            self.set(
                x,
                y,
                [mix(old[0], c[0]), mix(old[1], c[1]), mix(old[2], c[2])],
            );
        }
    }

    /// Copies `other` with its top-left corner at `(x, y)` (clipped).
    pub fn paste(&mut self, other: &Canvas, x: usize, y: usize) {
        for row in 0..other.height {
            for col in 0..other.width {
                if let Some(c) = other.get(col, row) {
                    self.set(x + col, y + row, c);
                }
            }
        }
    }

    /// Fills the rectangle `[x0, x1) × [y0, y1)`, blended with `alpha`.
    pub fn fill_rect(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb, alpha: f64) {
        for y in y0.max(0)..y1.min(self.height as i64) {
            for x in x0.max(0)..x1.min(self.width as i64) {
                self.blend(x, y, c, alpha);
            }
        }
    }

    /// An antialiased segment of `width` pixels from `a` to `b` (pixel coordinates, the centre of
    /// pixel `(x, y)` at `(x + 0.5, y + 0.5)`).
    pub fn segment(&mut self, a: [f64; 2], b: [f64; 2], width: f64, c: Rgb) {
        if !(a.iter().chain(&b).all(|v| v.is_finite())) {
            return;
        }
        let half = 0.5 * width.max(0.5);
        let pad = half + 1.0;
        let x0 = (a[0].min(b[0]) - pad).floor().max(0.0) as i64;
        let x1 = (a[0].max(b[0]) + pad).ceil().min(self.width as f64) as i64;
        let y0 = (a[1].min(b[1]) - pad).floor().max(0.0) as i64;
        let y1 = (a[1].max(b[1]) + pad).ceil().min(self.height as f64) as i64;
        let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
        let len2 = dx * dx + dy * dy;
        for y in y0..y1 {
            for x in x0..x1 {
                let (px, py) = (x as f64 + 0.5 - a[0], y as f64 + 0.5 - a[1]);
                let s = if len2 > 0.0 {
                    ((px * dx + py * dy) / len2).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                let d = (px - s * dx).hypot(py - s * dy);
                self.blend(x, y, c, (half + 0.5 - d).clamp(0.0, 1.0));
            }
        }
    }

    /// A filled antialiased disc of `radius` pixels centred at `center`.
    pub fn disc(&mut self, center: [f64; 2], radius: f64, c: Rgb, alpha: f64) {
        if !(center[0].is_finite() && center[1].is_finite() && radius.is_finite()) {
            return;
        }
        let x0 = (center[0] - radius - 1.0).floor().max(0.0) as i64;
        let x1 = (center[0] + radius + 1.0).ceil().min(self.width as f64) as i64;
        let y0 = (center[1] - radius - 1.0).floor().max(0.0) as i64;
        let y1 = (center[1] + radius + 1.0).ceil().min(self.height as f64) as i64;
        for y in y0..y1 {
            for x in x0..x1 {
                let d = (x as f64 + 0.5 - center[0]).hypot(y as f64 + 0.5 - center[1]);
                self.blend(x, y, c, alpha * (radius + 0.5 - d).clamp(0.0, 1.0));
            }
        }
    }

    /// An arrow from `a` to `b` with a head of `head` pixels.
    pub fn arrow(&mut self, a: [f64; 2], b: [f64; 2], width: f64, head: f64, c: Rgb) {
        self.segment(a, b, width, c);
        let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
        let len = dx.hypot(dy);
        if len < 1e-9 {
            return;
        }
        let (ux, uy) = (dx / len, dy / len);
        let h = head.min(0.6 * len);
        for side in [-1.0, 1.0] {
            let tip = [
                b[0] - h * (ux * 0.87 - side * uy * 0.5),
                b[1] - h * (uy * 0.87 + side * ux * 0.5),
            ];
            self.segment(b, tip, width, c);
        }
    }

    /// Width in pixels of `text` at `scale`.
    pub fn text_width(text: &str, scale: usize) -> usize {
        text.chars().count() * (GLYPH.0 + 1) * scale
    }

    /// `text` with its top-left corner at `(x, y)`, each font pixel `scale × scale`.
    pub fn text(&mut self, x: i64, y: i64, text: &str, scale: usize, c: Rgb) {
        let s = scale.max(1) as i64;
        for (k, ch) in text.chars().enumerate() {
            let Some(rows) = glyph(ch) else { continue };
            let gx = x + k as i64 * (GLYPH.0 as i64 + 1) * s;
            for (r, bits) in rows.iter().enumerate() {
                for col in 0..GLYPH.0 {
                    if bits & (1 << (GLYPH.0 - 1 - col)) != 0 {
                        let px = gx + col as i64 * s;
                        let py = y + r as i64 * s;
                        self.fill_rect(px, py, px + s, py + s, c, 1.0);
                    }
                }
            }
        }
    }

    /// `text` on a translucent white box (a label that stays legible over the scene).
    pub fn label(&mut self, x: i64, y: i64, text: &str, scale: usize, c: Rgb) {
        let w = Self::text_width(text, scale) as i64;
        let h = (GLYPH.1 * scale) as i64;
        let pad = scale as i64 * 2;
        self.fill_rect(
            x - pad,
            y - pad,
            x + w + pad,
            y + h + pad,
            [255, 255, 255],
            0.75,
        );
        self.text(x, y, text, scale, c);
    }
}
