//! `plots/index.html`: every plot of a study on one page, with the summary table (units in the
//! headers), so a reader sees the inputs, the outputs and what drives them together.

use std::fmt::Write as _;
use std::path::Path;

use super::super::CliError;
use super::super::output::Summary;
use super::super::study::Results;
use super::Drawn;
use super::axes::{tick_label, unit_of};

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn number(v: f64) -> String {
    if v.is_finite() {
        tick_label(v, v.abs() * 1e-5)
    } else {
        v.to_string()
    }
}

/// Writes the index page of the plots in `dir`.
pub(super) fn write_index(
    dir: &Path,
    results: &Results,
    summary: &Summary,
    drawn: &Drawn,
) -> Result<(), CliError> {
    let mut page = String::new();
    let _ = write!(
        page,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>simbatch study plots</title><style>\
         body{{font:14px system-ui,sans-serif;margin:16px;color:#222}}\
         table{{border-collapse:collapse;font-size:12px}}\
         td,th{{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}\
         .grid{{display:flex;flex-wrap:wrap;gap:8px}} img{{border:1px solid #eee;max-width:100%}}\
         </style></head><body>\n<h1>Study plots</h1>\n<p>{}; flagged instances \
         (status ≠ 0) are red in scatter plots. Units are given with every quantity.</p>\n",
        crate::cli::output::counted(results.rows.len() as u64, "instance")
    );
    page.push_str(
        "<h2>Summary</h2>\n<table><tr><th>quantity</th><th>unit</th><th>finite</th>\
         <th>non-finite</th><th>mean</th><th>std</th><th>min</th><th>5 %</th><th>median</th>\
         <th>95 %</th><th>max</th></tr>\n",
    );
    for (name, s) in summary {
        let q = s.quantiles;
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(name),
            escape(unit_of(name)),
            s.count,
            s.nonfinite,
            number(s.mean),
            number(s.std),
            number(q[0]),
            number(q[1]),
            number(q[3]),
            number(q[5]),
            number(q[6]),
        );
    }
    page.push_str("</table>\n");
    for (title, files) in [
        ("Random inputs", &drawn.inputs),
        ("Outputs", &drawn.outputs),
        (
            "What drives each output: output against input",
            &drawn.scatter,
        ),
        ("Sampled instances over time", &drawn.series),
    ] {
        if files.is_empty() {
            continue;
        }
        let _ = writeln!(page, "<h2>{}</h2>\n<div class=\"grid\">", escape(title));
        for f in files {
            let _ = writeln!(
                page,
                "<a href=\"{0}\"><img src=\"{0}\" alt=\"{0}\" loading=\"lazy\"></a>",
                escape(f)
            );
        }
        page.push_str("</div>\n");
    }
    page.push_str("</body></html>\n");
    let path = dir.join("index.html");
    std::fs::write(&path, page).map_err(|source| CliError::Io {
        path: path.display().to_string(),
        source,
    })
}
