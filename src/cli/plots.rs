//! SVG plots of a study (plotters): histograms of the random inputs and of the main final
//! values, sample trajectories, and the energy drift of the sampled instances over time.

use std::path::Path;

use plotters::prelude::*;

use super::CliError;
use super::study::Results;

fn plot_error(path: &Path) -> impl Fn(String) -> CliError + '_ {
    move |message| CliError::Plot {
        path: path.display().to_string(),
        message,
    }
}

/// A file name from a quantity name.
fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A drawable axis range around `[lo, hi]` (finite values): widened when it is empty or narrower
/// than the doubles resolve there, so ticks and bins always have a positive finite width;
/// `None` when no finite range fits (values near the largest double), and the plot is skipped
/// rather than letting the axis code loop on an infinite or zero step.
pub fn axis_range(lo: f64, hi: f64) -> Option<(f64, f64)> {
    if !(lo.is_finite() && hi.is_finite()) || hi < lo {
        return None;
    }
    let scale = lo.abs().max(hi.abs());
    let (lo, hi) = if hi - lo <= 1e-9 * scale || hi == lo {
        let pad = (1e-6 * scale).max(1e-12);
        (lo - pad, hi + pad)
    } else {
        (lo, hi)
    };
    let width = hi - lo;
    if lo.is_finite() && hi.is_finite() && width.is_finite() && width > 0.0 {
        Some((lo, hi))
    } else {
        None
    }
}

/// Histogram of the finite `values` in 40 bins; `false` when there is nothing to plot.
fn histogram(path: &Path, title: &str, values: &[f64]) -> Result<bool, CliError> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return Ok(false);
    }
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let Some((lo, hi)) = axis_range(lo, hi) else {
        return Ok(false);
    };
    const BINS: usize = 40;
    let width = (hi - lo) / BINS as f64;
    let mut counts = [0u32; BINS];
    for v in &finite {
        counts[(((v - lo) / width) as usize).min(BINS - 1)] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    let err = plot_error(path);
    let root = SVGBackend::new(path, (640, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title} ({} instances)", finite.len()),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(lo..hi, 0u32..top + top / 10 + 1)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(title)
        .y_desc("instances")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(counts.iter().enumerate().map(|(k, c)| {
            let x0 = lo + k as f64 * width;
            Rectangle::new([(x0, 0), (x0 + width, *c)], BLUE.mix(0.6).filled())
        }))
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(true)
}

/// Lines `y(t)` per instance.
fn lines(
    path: &Path,
    title: &str,
    y_desc: &str,
    curves: &[(usize, Vec<(f64, f64)>)],
) -> Result<bool, CliError> {
    let points = curves
        .iter()
        .flat_map(|(_, c)| c.iter())
        .filter(|(t, y)| t.is_finite() && y.is_finite());
    let (mut t0, mut t1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for (t, y) in points {
        t0 = t0.min(*t);
        t1 = t1.max(*t);
        y0 = y0.min(*y);
        y1 = y1.max(*y);
    }
    if !(t0.is_finite() && y0.is_finite()) {
        return Ok(false);
    }
    if t1 <= t0 {
        t1 = t0 + 1.0;
    }
    let (Some((t0, t1)), Some((y0, y1))) = (axis_range(t0, t1), axis_range(y0, y1)) else {
        return Ok(false);
    };
    let err = plot_error(path);
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(t0..t1, y0..y1)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (k, (index, curve)) in curves.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        chart
            .draw_series(LineSeries::new(
                curve.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(e.to_string()))?
            .label(format!("instance {index}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    if curves.len() <= 16 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(true)
}

/// Writes the plots into `dir` (`body`: the body whose trajectory is drawn); returns the files
/// written, relative to the output directory.
pub fn write_plots(
    dir: &Path,
    results: &Results,
    body: Option<&str>,
) -> Result<Vec<String>, CliError> {
    let mut files = Vec::new();
    let column = |name: &str| results.columns.iter().position(|c| c == name);
    let status = column("status");
    let wanted: Vec<usize> = (0..results.columns.len())
        .filter(|k| {
            let c = &results.columns[*k];
            Some(*k) < status
                || ["energy_change", "max_position_error", "max_velocity_error"]
                    .contains(&c.as_str())
                || c.ends_with(".normal_force")
                || c.ends_with(".lift_off_time")
                || body.is_some_and(|b| {
                    [format!("{b}.x"), format!("{b}.y"), format!("{b}.z")].contains(c)
                })
        })
        .collect();
    for k in wanted {
        let name = &results.columns[k];
        let values: Vec<f64> = results.rows.iter().map(|(_, v)| v[k]).collect();
        let file = format!("plots/hist_{}.svg", slug(name));
        if histogram(&dir.join(format!("hist_{}.svg", slug(name))), name, &values)? {
            files.push(file);
        }
    }
    if results.series.is_empty() {
        return Ok(files);
    }
    // Per instance: distance from the first sample, and energy change since it.
    let scol = |name: &str| results.series_columns.iter().position(|c| c == name);
    let energy = scol("energy");
    let position: Option<[usize; 3]> = body.and_then(|b| {
        Some([
            scol(&format!("{b}.x"))?,
            scol(&format!("{b}.y"))?,
            scol(&format!("{b}.z"))?,
        ])
    });
    let mut travel: Vec<(usize, Vec<(f64, f64)>)> = Vec::new();
    let mut drift: Vec<(usize, Vec<(f64, f64)>)> = Vec::new();
    let mut first: &[f64] = &[];
    for (index, row) in &results.series {
        if travel.last().is_none_or(|(i, _)| i != index) {
            travel.push((*index, Vec::new()));
            drift.push((*index, Vec::new()));
            first = row;
        }
        let t = row[0];
        if let Some(p) = position {
            let d = p
                .iter()
                .map(|k| (row[*k] - first[*k]).powi(2))
                .sum::<f64>()
                .sqrt();
            if let Some(curve) = travel.last_mut() {
                curve.1.push((t, d));
            }
        }
        if let (Some(e), Some(curve)) = (energy, drift.last_mut()) {
            curve.1.push((t, row[e] - first[e]));
        }
    }
    if position.is_some()
        && lines(
            &dir.join("trajectories.svg"),
            "distance travelled from the start",
            "distance (m)",
            &travel,
        )?
    {
        files.push("plots/trajectories.svg".into());
    }
    if energy.is_some()
        && lines(
            &dir.join("energy_drift.svg"),
            "energy drift E(t) − E(0)",
            "J",
            &drift,
        )?
    {
        files.push("plots/energy_drift.svg".into());
    }
    Ok(files)
}
