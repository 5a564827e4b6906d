//! The `render` command and the study plots: replayed instances equal to the study's results,
//! the GIF and PNG files, the HTML player in headless Chromium, and distinct tick labels.

use std::path::{Path, PathBuf};
use std::process::Command;

use simbatch::cli::plots::axes::{tick_label, tick_labels, unit_of};

use super::scratch;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_simbatch"))
}

fn run_study(dir: &Path, scenario: Option<&str>, instances: usize) -> PathBuf {
    let out = dir.join("study");
    let mut cmd = bin();
    cmd.arg("run");
    if let Some(s) = scenario {
        cmd.arg(s);
    }
    let status = cmd
        .args([
            "--instances",
            &instances.to_string(),
            "--backend",
            "cpu",
            "-q",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    out
}

/// The final state of `instance` in a study's results.csv, by column name.
fn result_row(study: &Path, instance: usize) -> std::collections::HashMap<String, f64> {
    let text = std::fs::read_to_string(study.join("results.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|r| r[0] == instance.to_string())
        .unwrap();
    header
        .iter()
        .zip(row)
        .map(|(h, v)| (h.to_string(), v.parse::<f64>().unwrap_or(f64::NAN)))
        .collect()
}

#[test]
fn a_replayed_instance_ends_where_the_study_left_it_bit_for_bit() {
    let dir = scratch("replay");
    for (scenario, instances, chosen) in [
        (None, 40, vec![3usize, 17, 38]),
        (
            Some(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/scenarios/bouncing_balls.toml"
            )),
            12,
            vec![5usize, 11],
        ),
    ] {
        let study = run_study(&dir, scenario, instances);
        let sc = simbatch::cli::render::study_scenario(&study).unwrap();
        let d = sc.simulation.duration;
        // Frames between checkpoints are taken on a copy: the main run stays the study's.
        let times = simbatch::cli::replay::frame_times(d, d / 7.0).unwrap();
        let scene = simbatch::cli::replay::replay(&sc, &chosen, &times).unwrap();
        assert_eq!(scene.tracks.len(), chosen.len());
        for (track, &i) in scene.tracks.iter().zip(&chosen) {
            assert_eq!(track.instance, i);
            assert_eq!(track.frames.len(), times.len());
            let last = track.frames.last().unwrap();
            let row = result_row(&study, i);
            for (k, axis) in ["x", "y", "z"].iter().enumerate() {
                assert_eq!(
                    last.bodies[0].origin[k],
                    row[&format!("ball.{axis}")],
                    "instance {i} ball.{axis}"
                );
            }
            assert_eq!(last.time, row["time"]);
            // The inputs shown are the study's draws.
            for (name, value) in &track.inputs {
                assert_eq!(*value, row[name], "instance {i} input {name}");
            }
        }
        std::fs::remove_dir_all(&study).unwrap();
    }
}

#[test]
fn render_writes_a_gif_with_its_frames_a_png_and_refuses_bad_requests() {
    let dir = scratch("files");
    let study = run_study(&dir, None, 8);
    let gif_path = dir.join("anim.gif");
    let status = bin()
        .args(["render"])
        .arg(&study)
        .args([
            "--instances",
            "2,5",
            "--interval",
            "0.1",
            "--size",
            "120x80",
            "--out",
        ])
        .arg(&gif_path)
        .status()
        .unwrap();
    assert!(status.success());
    // The default study lasts 0.5 s: frames at 0, 0.1, …, 0.5.
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options
        .read_info(std::fs::File::open(&gif_path).unwrap())
        .unwrap();
    assert_eq!((decoder.width(), decoder.height()), (120, 80));
    let mut frames = 0;
    while let Some(frame) = decoder.read_next_frame().unwrap() {
        assert_eq!(frame.delay, 10, "0.1 s a frame at speed 1");
        frames += 1;
    }
    assert_eq!(frames, 6);
    let png_path = dir.join("frame.png");
    let status = bin()
        .args(["render"])
        .arg(&study)
        .args([
            "--instances",
            "3",
            "--time",
            "0.25",
            "--size",
            "100x90",
            "--out",
        ])
        .arg(&png_path)
        .status()
        .unwrap();
    assert!(status.success());
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let reader = decoder.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (100, 90));
    for (args, needle) in [
        (vec!["--instances", "8", "--out", "x.gif"], "--instances 8"),
        (
            vec!["--instances", "1,0,1", "--out", "x.gif"],
            "--instances: instance 1 is given twice (entries 0 and 2); accepted: distinct indices",
        ),
        (
            vec!["--instances", "1", "--out", "x.bmp"],
            ".gif, .html or .png",
        ),
        (
            vec!["--instances", "1", "--out", "x.png", "--time", "9"],
            "--time 9",
        ),
        (
            vec!["--instances", "1", "--out", "x.gif", "--size", "10x10"],
            "--size",
        ),
        (
            vec!["--instances", "1", "--out", "x.gif", "--layout", "grid"],
            "--layout grid",
        ),
        (
            vec!["--instances", "1", "--out", "x.gif", "--interval", "0"],
            "--interval",
        ),
    ] {
        let out = bin()
            .arg("render")
            .arg(&study)
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = bin()
        .args(["render", "/nonexistent-study", "--instances", "1", "--out"])
        .arg(dir.join("y.gif"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("manifest.json"));
}

/// Headless Chromium, required on CI (`.ci/run` installs it), else the test says it is missing.
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join(name))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and no chromium: install Debian's chromium package (.ci/run does)"
        );
        eprintln!("no chromium on PATH: the HTML player was not opened");
    }
    found
}

#[test]
fn the_html_player_shows_the_scene_in_headless_chromium() {
    let dir = scratch("html");
    let study = run_study(&dir, None, 6);
    let page = dir.join("player.html");
    let status = bin()
        .arg("render")
        .arg(&study)
        .args(["--instances", "1,4", "--out"])
        .arg(&page)
        .status()
        .unwrap();
    assert!(status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "self-contained"
    );
    assert!(html.contains("instance") && html.contains("\"tracks\""));
    let Some(chrome) = chromium() else { return };
    let shot = dir.join("shot.png");
    let out = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1200,720",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        shot.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let (mut blue_ball, mut plane) = (0, 0);
    for p in buf[..info.buffer_size()].chunks(px) {
        let (r, g, b) = (p[0] as i32, p[1] as i32, p[2] as i32);
        // Instance 4's ball (second colour: a blue shaded from dark to light).
        if b > 140 && r < 110 && g < 150 && b - r > 80 {
            blue_ball += 1;
        }
        // The translucent plane (blue-grey over the light background).
        if (150..215).contains(&r) && (165..225).contains(&g) && b > 195 && b - r > 12 {
            plane += 1;
        }
    }
    assert!(
        blue_ball > 300,
        "ball pixels in the screenshot: {blue_ball}"
    );
    assert!(plane > 5000, "plane pixels in the screenshot: {plane}");
}

#[test]
fn tick_labels_differ_and_axes_have_units() {
    // What the energy-drift and position-error plots showed as a row of "0.0".
    for (lo, hi) in [
        (0.0, 2.5e-16),
        (-7.4e-8, 2.2e-5),
        (1e-9, 2e-9),
        (1000.0, 1000.0001),
        (0.0, 1.0),
        (-3e7, 4e7),
    ] {
        let step = (hi - lo) / 8.0;
        let labels = tick_labels(lo, hi, step);
        assert!(labels.len() >= 5, "{lo}..{hi}: {labels:?}");
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(unique.len(), labels.len(), "{lo}..{hi}: {labels:?}");
        assert!(labels.iter().all(|l| l != "0.0"), "{labels:?}");
    }
    assert_eq!(tick_label(0.25, 0.125), "0.25");
    assert_eq!(tick_label(2e-9, 1.25e-10), "2e-9");
    for (name, unit) in [
        ("ball.x", "m"),
        ("ball.vz", "m/s"),
        ("energy_change", "J"),
        ("c0.normal_force", "N"),
        ("c0.lift_off_time", "s"),
        ("constraint[0].incline_deg", "deg"),
        ("ball.mass", "kg"),
    ] {
        assert_eq!(unit_of(name), unit, "{name}");
    }
}

#[test]
fn study_plots_label_their_ticks_distinctly_and_index_them() {
    let dir = scratch("plots");
    let study = run_study(&dir, None, 300);
    let plots = study.join("plots");
    let index = std::fs::read_to_string(plots.join("index.html")).unwrap();
    let svgs: Vec<_> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".svg"))
        .collect();
    assert!(
        svgs.iter()
            .any(|f| f.starts_with("scatter_ball_x_vs_radius"))
    );
    for f in &svgs {
        assert!(index.contains(f.as_str()), "index shows {f}");
    }
    // Every histogram's x tick labels (the numbers along the bottom) differ.
    for f in svgs.iter().filter(|f| f.starts_with("hist_")) {
        let svg = std::fs::read_to_string(plots.join(f)).unwrap();
        let mut by_row: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for piece in svg.split("<text").skip(1) {
            let Some((attrs, rest)) = piece.split_once('>') else {
                continue;
            };
            let text = rest.split('<').next().unwrap_or("").trim().to_string();
            let y = attrs
                .split("y=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or("")
                .to_string();
            if text.parse::<f64>().is_ok() {
                by_row.entry(y).or_default().push(text);
            }
        }
        let (_, bottom) = by_row
            .iter()
            .max_by_key(|(_, labels)| labels.len())
            .expect("tick labels");
        let mut unique = bottom.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), bottom.len(), "{f}: {bottom:?}");
        assert!(
            svg.contains('(') && svg.contains(')'),
            "{f}: units in the axis name"
        );
    }
    let radius = std::fs::read_to_string(plots.join("hist_radius.svg")).unwrap();
    assert!(
        radius.contains("log scale"),
        "a log-uniform input on a log axis"
    );
}

#[test]
fn a_histogram_of_equal_values_says_so() {
    let dir = scratch("equal");
    std::fs::create_dir_all(dir.join("plots")).unwrap();
    let results = simbatch::cli::study::Results {
        columns: vec!["radius".into(), "status".into(), "energy_change".into()],
        rows: (0..50).map(|i| (i, vec![0.05, 0.0, 0.25])).collect(),
        ..Default::default()
    };
    simbatch::cli::output::write_results(&dir, &results, None).unwrap();
    let svg = std::fs::read_to_string(dir.join("plots/hist_energy_change.svg")).unwrap();
    assert!(svg.contains("all 50 values equal 0.25 (one bar)"), "{svg}");
    let svg = std::fs::read_to_string(dir.join("plots/hist_radius.svg")).unwrap();
    assert!(svg.contains("radius (m)"));
}
