//! `simbatch render STUDY_DIR --instances 3,4711 --out FILE`: replays chosen instances of a
//! study from its manifest ([`replay`](super::replay)) and writes what `FILE`'s extension
//! asks for — an animated GIF (`.gif`), one self-contained HTML page with a 3-D player
//! (`.html`: orbit controls, time slider, play/pause, each instance's inputs beside it; no
//! network), or one frame (`.png`, at `--time`). Pictures come from the library's renderer
//! ([`crate::render`]); this room only reads the study and encodes files.

mod html;

use std::path::{Path, PathBuf};

use super::CliError;
use super::replay::{frame_times, replay};
use super::scenario::Scenario;
use crate::render::{Layout, RenderOptions, Renderer, Scene};

/// Frames an animation takes when no `--interval` is given.
pub const DEFAULT_FRAMES: usize = 100;

/// The `render` command's arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// A study's output directory (the one holding its manifest.json).
    pub study: PathBuf,
    /// Instances to show, by global index, e.g. `3,4711`.
    #[arg(long, value_delimiter = ',', required = true)]
    pub instances: Vec<usize>,
    /// Output file: `.gif` (animation), `.html` (3-D player), `.png` (the frame at --time).
    #[arg(long)]
    pub out: PathBuf,
    /// Time between frames in seconds (default: the study's duration / 100).
    #[arg(long)]
    pub interval: Option<f64>,
    /// Time of the frame a `.png` shows, in seconds (default: the end of the study).
    #[arg(long)]
    pub time: Option<f64>,
    /// `panels` (one per instance, side by side) or `overlay` (all in one view).
    #[arg(long, default_value = "panels")]
    pub layout: String,
    /// Image size `WIDTHxHEIGHT` in pixels (GIF and PNG).
    #[arg(long, default_value = "640x480")]
    pub size: String,
    /// Playback speed: simulated seconds per second of animation.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
}

/// What the output file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Animated GIF.
    Gif,
    /// Self-contained HTML player.
    Html,
    /// One PNG frame.
    Png,
}

impl Format {
    /// The format `path`'s extension names.
    pub fn of(path: &Path) -> Result<Self, CliError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("gif") => Ok(Self::Gif),
            Some("html") | Some("htm") => Ok(Self::Html),
            Some("png") => Ok(Self::Png),
            _ => Err(CliError::Render(format!(
                "--out {}: accepted: a file ending in .gif, .html or .png",
                path.display()
            ))),
        }
    }
}

/// Parses `WIDTHxHEIGHT`.
pub fn parse_size(size: &str) -> Result<(usize, usize), CliError> {
    let bad = || {
        CliError::Render(format!(
            "--size {size}: accepted: WIDTHxHEIGHT in pixels, each 16 … {}",
            crate::render::draw::MAX_SIDE
        ))
    };
    let (w, h) = size.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: usize = w.trim().parse().map_err(|_| bad())?;
    let h: usize = h.trim().parse().map_err(|_| bad())?;
    let side = 16..=crate::render::draw::MAX_SIDE;
    if !side.contains(&w) || !side.contains(&h) {
        return Err(bad());
    }
    Ok((w, h))
}

/// The scenario a study ran, from its manifest (`scenario.text`).
pub fn study_scenario(dir: &Path) -> Result<Scenario, CliError> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|source| CliError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let manifest: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| CliError::Render(format!("{}: not a study manifest: {e}", path.display())))?;
    let source = manifest["scenario"]["text"].as_str().ok_or_else(|| {
        CliError::Render(format!(
            "{}: no scenario.text; accepted: the manifest.json of `simbatch run` or `merge`",
            path.display()
        ))
    })?;
    let file = manifest["scenario"]["file"]
        .as_str()
        .unwrap_or("<manifest>");
    let mut scenario = Scenario::parse(file, source)?;
    // A run with --instances N replays as it ran.
    if let Some(n) = manifest["instances"].as_u64() {
        scenario.instances = n as usize;
    }
    Ok(scenario)
}

/// Replays the chosen instances of the study in `args.study` and writes `args.out`; returns
/// the number of frames replayed (a PNG shows one of them).
pub fn render_study(args: &RenderArgs) -> Result<usize, CliError> {
    let format = Format::of(&args.out)?;
    let (width, height) = parse_size(&args.size)?;
    let layout = match args.layout.as_str() {
        "panels" => Layout::Panels,
        "overlay" => Layout::Overlay,
        other => {
            return Err(CliError::Render(format!(
                "--layout {other}: accepted: panels, overlay"
            )));
        }
    };
    if !(args.speed.is_finite() && args.speed > 0.0) {
        return Err(CliError::Render(format!(
            "--speed {}: accepted: a number > 0",
            args.speed
        )));
    }
    let sc = study_scenario(&args.study)?;
    let duration = sc.simulation.duration;
    // The camera is fitted to the whole motion, so a single frame is taken among all of them.
    let mut times = frame_times(
        duration,
        args.interval
            .unwrap_or(duration / DEFAULT_FRAMES as f64)
            .max(f64::MIN_POSITIVE),
    )?;
    let mut shown = 0;
    if format == Format::Png {
        let t = args.time.unwrap_or(duration);
        if !(0.0..=duration).contains(&t) {
            return Err(CliError::Render(format!(
                "--time {t}: accepted: 0 … {duration} s (the study's duration)"
            )));
        }
        shown = times.partition_point(|x| *x < t);
        if times.get(shown) != Some(&t) {
            times.insert(shown, t);
        }
    }
    let scene = replay(&sc, &args.instances, &times)?;
    let options = RenderOptions {
        width,
        height,
        layout,
        ..RenderOptions::default()
    };
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| CliError::Io {
            path: parent.display().to_string(),
            source,
        })?;
    }
    match format {
        Format::Png => write_png(&args.out, &scene, options, shown)?,
        Format::Gif => write_gif(&args.out, &scene, options, &times, args.speed)?,
        Format::Html => {
            let page = html::page(&scene, &sc.name, args.speed, layout);
            write_file(&args.out, page.as_bytes())?;
        }
    }
    Ok(times.len())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(|source| CliError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn encode_error(path: &Path) -> impl Fn(String) -> CliError + '_ {
    move |e| CliError::Render(format!("{}: {e}", path.display()))
}

/// Frame `k` of `scene` as a PNG file.
pub fn write_png(
    path: &Path,
    scene: &Scene,
    options: RenderOptions,
    k: usize,
) -> Result<(), CliError> {
    let canvas = Renderer::new(scene, options)?.frame(k)?;
    let err = encode_error(path);
    let mut bytes = Vec::new();
    {
        let mut encoder =
            png::Encoder::new(&mut bytes, canvas.width() as u32, canvas.height() as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(|e| err(e.to_string()))?;
        writer
            .write_image_data(canvas.pixels())
            .map_err(|e| err(e.to_string()))?;
    }
    write_file(path, &bytes)
}

/// Every frame of `scene` as an animated GIF that loops, each frame shown for its share of
/// the simulated time divided by `speed` (at least 2 centiseconds, what viewers honour).
pub fn write_gif(
    path: &Path,
    scene: &Scene,
    options: RenderOptions,
    times: &[f64],
    speed: f64,
) -> Result<(), CliError> {
    let renderer = Renderer::new(scene, options)?;
    let err = encode_error(path);
    let mut bytes = Vec::new();
    {
        let (w, h) = (options.width as u16, options.height as u16);
        let mut encoder =
            gif::Encoder::new(&mut bytes, w, h, &[]).map_err(|e| err(e.to_string()))?;
        encoder
            .set_repeat(gif::Repeat::Infinite)
            .map_err(|e| err(e.to_string()))?;
        for k in 0..renderer.frames() {
            let canvas = renderer.frame(k)?;
            let mut frame = gif::Frame::from_rgb_speed(w, h, canvas.pixels(), 10);
            let dt = match (times.get(k), times.get(k + 1)) {
                (Some(a), Some(b)) => b - a,
                _ => times
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .next_back()
                    .unwrap_or(0.1),
            };
            frame.delay = ((100.0 * dt / speed).round() as u16).max(2);
            encoder
                .write_frame(&frame)
                .map_err(|e| err(e.to_string()))?;
        }
    }
    write_file(path, &bytes)
}
