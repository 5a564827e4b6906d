//! SVG plots of a study (plotters): histograms of the random inputs and of the main final
//! values, scatter plots of each main output against each random input (what drives it?),
//! sample trajectories and the energy drift of the sampled instances over time, and an index
//! page (`plots/index.html`) that shows them all with the summary table.
//!
//! Every axis carries its unit and tick labels with enough digits that neighbours differ;
//! log-uniform inputs are drawn on log axes; legends sit beside the curves, never over them;
//! a histogram whose values are all equal says so.

pub mod axes;
mod index;

use std::path::Path;

use plotters::prelude::*;

use super::CliError;
use super::output::{Summary, counted};
use super::study::Results;
use axes::{log_tick_label, tick_label, unit_of, with_unit};

/// Most points a scatter plot draws (every k-th instance beyond that; the caption says so).
pub const MAX_SCATTER_POINTS: usize = 1500;

/// Tick labels per axis.
const LABELS: usize = 8;

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

/// An axis: how values map onto it (log10 for a log axis) and how ticks read.
#[derive(Clone, Copy)]
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    /// The axis over `values` (log: over their positive ones); `None` when nothing fits.
    fn over(values: impl Iterator<Item = f64> + Clone, log: bool) -> Option<Self> {
        let mapped = values.filter_map(|v| {
            let m = if log {
                (v > 0.0).then(|| v.log10())
            } else {
                Some(v)
            };
            m.filter(|m| m.is_finite())
        });
        let lo = mapped.clone().fold(f64::INFINITY, f64::min);
        let hi = mapped.fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = axis_range(lo, hi)?;
        Some(Self { log, lo, hi })
    }

    fn map(&self, v: f64) -> Option<f64> {
        let m = if self.log {
            (v > 0.0).then(|| v.log10())?
        } else {
            v
        };
        m.is_finite().then_some(m)
    }

    fn label(&self, v: f64) -> String {
        if self.log {
            log_tick_label(10f64.powf(v))
        } else {
            tick_label(v, (self.hi - self.lo) / LABELS as f64)
        }
    }

    fn describe(&self, name: &str) -> String {
        if self.log {
            format!("{} — log scale", with_unit(name))
        } else {
            with_unit(name)
        }
    }
}

/// Histogram of the finite `values` in 40 bins; `false` when there is nothing to plot.
fn histogram(path: &Path, name: &str, values: &[f64], log: bool) -> Result<bool, CliError> {
    let finite: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .collect();
    let Some(axis) = Axis::over(finite.iter().copied(), log) else {
        return Ok(false);
    };
    let first = finite[0];
    let all_equal = finite.iter().all(|v| *v == first);
    const BINS: usize = 40;
    let width = (axis.hi - axis.lo) / BINS as f64;
    let mut counts = [0u32; BINS];
    for v in &finite {
        if let Some(m) = axis.map(*v) {
            counts[(((m - axis.lo) / width) as usize).min(BINS - 1)] += 1;
        }
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    let err = plot_error(path);
    let root = SVGBackend::new(path, (680, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let caption = if all_equal {
        // One bar: say why, rather than leave a reader to guess at an empty-looking plot.
        format!(
            "{name}: all {} values equal {} (one bar)",
            finite.len(),
            tick_label(first, first.abs() * 1e-6)
        )
    } else {
        format!("{name} ({})", counted(finite.len() as u64, "instance"))
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 17))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(axis.lo..axis.hi, 0u32..top + top / 10 + 1)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_labels(LABELS)
        .x_label_formatter(&|v| axis.label(*v))
        .x_desc(axis.describe(name))
        .y_desc("instances (count)")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(counts.iter().enumerate().map(|(k, c)| {
            let x0 = axis.lo + k as f64 * width;
            Rectangle::new([(x0, 0), (x0 + width, *c)], BLUE.mix(0.6).filled())
        }))
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(true)
}

/// Lines `y(t)` per instance (`y_desc`: the y axis's name and unit), the legend beside the
/// plot.
fn lines(
    path: &Path,
    title: &str,
    y_desc: &str,
    curves: &[(usize, Vec<(f64, f64)>)],
) -> Result<bool, CliError> {
    let points = curves.iter().flat_map(|(_, c)| c.iter());
    let Some(x) = Axis::over(points.clone().map(|p| p.0), false) else {
        return Ok(false);
    };
    let Some(y) = Axis::over(points.map(|p| p.1), false) else {
        return Ok(false);
    };
    let err = plot_error(path);
    let root = SVGBackend::new(path, (860, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (plot, legend) = root.split_horizontally(700);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 17))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(84)
        .build_cartesian_2d(x.lo..x.hi, y.lo..y.hi)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_labels(LABELS)
        .y_labels(LABELS)
        .x_label_formatter(&|v| x.label(*v))
        .y_label_formatter(&|v| y.label(*v))
        .x_desc("time (s)")
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    const SHOWN: usize = 20;
    for (k, (index, curve)) in curves.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        chart
            .draw_series(LineSeries::new(
                curve
                    .iter()
                    .copied()
                    .filter(|(t, v)| t.is_finite() && v.is_finite()),
                color.stroke_width(2),
            ))
            .map_err(|e| err(e.to_string()))?;
        if k < SHOWN {
            let yk = 40 + 18 * k as i32;
            legend
                .draw(&PathElement::new(
                    vec![(8, yk), (30, yk)],
                    color.stroke_width(2),
                ))
                .map_err(|e| err(e.to_string()))?;
            legend
                .draw(&Text::new(
                    format!("instance {index}"),
                    (36, yk - 7),
                    ("sans-serif", 13),
                ))
                .map_err(|e| err(e.to_string()))?;
        }
    }
    if curves.len() > SHOWN {
        legend
            .draw(&Text::new(
                format!("… and {} more", curves.len() - SHOWN),
                (8, 40 + 18 * SHOWN as i32),
                ("sans-serif", 13),
            ))
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(true)
}

/// Output `y` against input `x`, one dot per instance (at most [`MAX_SCATTER_POINTS`]; flagged
/// instances red).
#[allow(clippy::too_many_arguments)]
fn scatter(
    path: &Path,
    x_name: &str,
    xs: &[f64],
    log_x: bool,
    y_name: &str,
    ys: &[f64],
    flagged: &[bool],
) -> Result<bool, CliError> {
    let stride = xs.len().div_ceil(MAX_SCATTER_POINTS).max(1);
    let chosen: Vec<usize> = (0..xs.len()).step_by(stride).collect();
    let Some(x) = Axis::over(chosen.iter().map(|&i| xs[i]), log_x) else {
        return Ok(false);
    };
    let Some(y) = Axis::over(chosen.iter().map(|&i| ys[i]), false) else {
        return Ok(false);
    };
    let err = plot_error(path);
    let root = SVGBackend::new(path, (560, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let shown = if stride > 1 {
        format!("{} of {} instances", chosen.len(), xs.len())
    } else {
        counted(xs.len() as u64, "instance")
    };
    let any_flagged = chosen.iter().any(|&i| flagged[i]);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{y_name} vs {x_name} ({shown}{})",
                if any_flagged { "; red: flagged" } else { "" }
            ),
            ("sans-serif", 14),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(84)
        .build_cartesian_2d(x.lo..x.hi, y.lo..y.hi)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(LABELS)
        .x_label_formatter(&|v| x.label(*v))
        .y_label_formatter(&|v| y.label(*v))
        .x_desc(x.describe(x_name))
        .y_desc(with_unit(y_name))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(chosen.iter().filter_map(|&i| {
            let (px, py) = (x.map(xs[i])?, y.map(ys[i])?);
            let colour = if flagged[i] {
                RED.mix(0.8)
            } else {
                BLUE.mix(0.45)
            };
            Some(Circle::new((px, py), 2, colour.filled()))
        }))
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(true)
}

/// The plots of one study, by section, for the index page.
#[derive(Debug, Default)]
pub(super) struct Drawn {
    inputs: Vec<String>,
    outputs: Vec<String>,
    scatter: Vec<String>,
    series: Vec<String>,
}

/// Writes the plots and `index.html` into `dir` (`body`: the body whose trajectory is drawn);
/// returns the files written, relative to the output directory.
pub fn write_plots(
    dir: &Path,
    results: &Results,
    body: Option<&str>,
    summary: &Summary,
) -> Result<Vec<String>, CliError> {
    let mut drawn = Drawn::default();
    let column = |name: &str| results.columns.iter().position(|c| c == name);
    let status = column("status");
    let inputs: Vec<usize> = (0..status.unwrap_or(0)).collect();
    let outputs: Vec<usize> = (status.map_or(0, |s| s + 1)..results.columns.len())
        .filter(|k| {
            let c = &results.columns[*k];
            ["energy_change", "max_position_error", "max_velocity_error"].contains(&c.as_str())
                || c.ends_with(".normal_force")
                || c.ends_with(".lift_off_time")
                || c.ends_with(".impacts")
                || c.ends_with(".impact_loss")
                || c.ends_with(".first_impact_time")
                || body.is_some_and(|b| {
                    [format!("{b}.x"), format!("{b}.y"), format!("{b}.z")].contains(c)
                })
        })
        .collect();
    let values = |k: usize| -> Vec<f64> { results.rows.iter().map(|(_, v)| v[k]).collect() };
    let is_log = |k: usize| results.log_inputs.contains(&results.columns[k]);
    for (list, ks) in [(&mut drawn.inputs, &inputs), (&mut drawn.outputs, &outputs)] {
        for &k in ks {
            let name = &results.columns[k];
            let file = format!("hist_{}.svg", slug(name));
            if histogram(&dir.join(&file), name, &values(k), is_log(k))? {
                list.push(file);
            }
        }
    }
    let flagged: Vec<bool> = match status {
        Some(s) => results.rows.iter().map(|(_, v)| v[s] != 0.0).collect(),
        None => vec![false; results.rows.len()],
    };
    for &o in &outputs {
        let ys = values(o);
        for &i in &inputs {
            let file = format!(
                "scatter_{}_vs_{}.svg",
                slug(&results.columns[o]),
                slug(&results.columns[i])
            );
            if scatter(
                &dir.join(&file),
                &results.columns[i],
                &values(i),
                is_log(i),
                &results.columns[o],
                &ys,
                &flagged,
            )? {
                drawn.scatter.push(file);
            }
        }
    }
    if !results.series.is_empty() {
        series_plots(dir, results, body, &mut drawn)?;
    }
    index::write_index(dir, results, summary, &drawn)?;
    let mut files: Vec<String> = [&drawn.inputs, &drawn.outputs, &drawn.scatter, &drawn.series]
        .into_iter()
        .flatten()
        .map(|f| format!("plots/{f}"))
        .collect();
    files.push("plots/index.html".into());
    Ok(files)
}

/// Per sampled instance: distance from the first sample, and energy change since it.
fn series_plots(
    dir: &Path,
    results: &Results,
    body: Option<&str>,
    drawn: &mut Drawn,
) -> Result<(), CliError> {
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
            "distance from the start (m)",
            &travel,
        )?
    {
        drawn.series.push("trajectories.svg".into());
    }
    if energy.is_some()
        && lines(
            &dir.join("energy_drift.svg"),
            "energy drift E(t) − E(0)",
            "E(t) − E(0) (J)",
            &drift,
        )?
    {
        drawn.series.push("energy_drift.svg".into());
    }
    Ok(())
}

/// The unit shown for `name` (for the index page's table).
pub fn unit(name: &str) -> &'static str {
    unit_of(name)
}
