//! Study outputs: an output directory written atomically (a hidden `.NAME.partial-PID`
//! directory renamed into place only when everything is written), per-instance CSV, time
//! series, summary statistics, plots and a manifest; and `merge`, which joins shard outputs
//! after checking that they cover the study exactly once.
//!
//! Numbers are written with Rust's shortest round-trip formatting, so reading a CSV back gives
//! the same f64 values and rewriting it gives the same bytes.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::CliError;
use super::outdir::io;
pub use super::outdir::{OutDir, is_study_output};
use super::plots;
use super::study::Results;

/// A CSV writer's error as an I/O error on `path`.
fn csv_error(path: &Path) -> impl Fn(csv::Error) -> CliError + Copy + '_ {
    move |e| CliError::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// `n` and `noun`, plural unless `n` is 1: "1 instance", "6 instances", "0 instances".
pub(crate) fn counted(n: impl Into<u128>, noun: &str) -> String {
    let n = n.into();
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// SHA-256 of a file's bytes, hex: recorded per file in the manifest, checked by `merge`.
pub fn digest(path: &Path) -> Result<String, CliError> {
    use sha2::Digest;
    let bytes = fs::read(path).map_err(io(path))?;
    Ok(format!("{:x}", sha2::Sha256::digest(&bytes)))
}

/// Rows of a table: `(global instance index, values)`.
pub type Rows = Vec<(usize, Vec<f64>)>;

/// Statistics per quantity, in column order.
pub type Summary = Vec<(String, Stats)>;

/// Rows formatted per rayon job by [`write_csv`]: enough that a job's work outweighs its
/// hand-off, few enough that the formatted text held at once stays a few megabytes a job.
const CSV_ROWS_PER_JOB: usize = 2048;

/// Writes `index,<columns>` then one line per row. The header goes through a CSV writer that
/// quotes names holding commas, quotes or line breaks (RFC 4180); the rows hold only numbers,
/// which never need quoting, and are formatted on every core, a block of rows at a time, into
/// text that is written in order — the bytes the CSV writer wrote for them, field for field
/// (`Display`, shortest round-trip), at 0.4× its time on one core: it formatted each value into
/// a `String` of its own.
pub fn write_csv(
    path: &Path,
    columns: &[String],
    rows: &[(usize, Vec<f64>)],
) -> Result<(), CliError> {
    use rayon::prelude::*;
    use std::io::Write;
    let csv_err = csv_error(path);
    if let Some((index, values)) = rows.iter().find(|(_, v)| v.len() != columns.len()) {
        // What the CSV writer refused: a record unlike the header.
        return Err(CliError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(format!(
                "instance {index}: {} values; the header has {} columns",
                values.len(),
                columns.len()
            )),
        });
    }
    let file = fs::File::create(path).map_err(io(path))?;
    let mut w = csv::Writer::from_writer(std::io::BufWriter::new(file));
    w.write_record(std::iter::once("index").chain(columns.iter().map(String::as_str)))
        .map_err(csv_err)?;
    let mut out = w.into_inner().map_err(|e| CliError::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    for block in rows.chunks(CSV_ROWS_PER_JOB * rayon::current_num_threads().max(1)) {
        let texts: Vec<Vec<u8>> = block
            .par_chunks(CSV_ROWS_PER_JOB)
            .map(|rows| {
                let mut text = Vec::with_capacity(rows.len() * (columns.len() + 1) * 12);
                for (index, values) in rows {
                    // Writing into a Vec<u8> cannot fail.
                    let _ = write!(text, "{index}");
                    for v in values {
                        let _ = write!(text, ",{v}");
                    }
                    text.push(b'\n');
                }
                text
            })
            .collect();
        for text in &texts {
            out.write_all(text).map_err(io(path))?;
        }
    }
    out.flush().map_err(io(path))
}

/// Reads a CSV written by [`write_csv`]: every field after the index must parse as a number
/// (`NaN` and `inf` included), and every row must have as many fields as the header.
pub fn read_csv(path: &Path) -> Result<(Vec<String>, Rows), CliError> {
    let file = fs::File::open(path).map_err(io(path))?;
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(std::io::BufReader::new(file));
    let header = r
        .headers()
        .map_err(|e| CliError::Merge(format!("{}: {e}", path.display())))?
        .clone();
    if header.get(0) != Some("index") {
        return Err(CliError::Merge(format!(
            "{}: the first column is not `index`",
            path.display()
        )));
    }
    let columns: Vec<String> = header.iter().skip(1).map(str::to_string).collect();
    let mut rows = Vec::new();
    for (k, record) in r.records().enumerate() {
        let bad = |why: &str| CliError::Merge(format!("{}:{}: {why}", path.display(), k + 2));
        let record = record.map_err(|e| bad(&e.to_string()))?;
        if record.len() != columns.len() + 1 {
            return Err(bad(&format!(
                "{} fields; the header has {}",
                record.len(),
                columns.len() + 1
            )));
        }
        let index = record
            .get(0)
            .and_then(|f| f.parse::<usize>().ok())
            .ok_or_else(|| bad("the index is not a non-negative integer"))?;
        let values = record
            .iter()
            .skip(1)
            .map(|f| f.parse::<f64>())
            .collect::<Result<Vec<f64>, _>>()
            .map_err(|_| bad("not a row of numbers"))?;
        rows.push((index, values));
    }
    Ok((columns, rows))
}

/// Statistics of one quantity over the instances (non-finite values counted, not used).
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Finite values.
    pub count: usize,
    /// Non-finite values (NaN: never happened, e.g. no lift-off; or a flagged instance).
    pub nonfinite: usize,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation.
    pub std: f64,
    /// min, 5 %, 25 %, 50 %, 75 %, 95 %, max (linear interpolation between order statistics).
    pub quantiles: [f64; 7],
}

/// Quantile levels of [`Stats::quantiles`].
pub const LEVELS: [f64; 7] = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0];

/// Statistics of `values`.
pub fn stats(values: impl Iterator<Item = f64>) -> Stats {
    let mut finite = Vec::new();
    let mut nonfinite = 0;
    for v in values {
        if v.is_finite() {
            finite.push(v);
        } else {
            nonfinite += 1;
        }
    }
    finite.sort_by(f64::total_cmp);
    let n = finite.len();
    let mean = finite.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        finite.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let quantile = |p: f64| {
        if n == 0 {
            return f64::NAN;
        }
        let h = p * (n - 1) as f64;
        let lo = h.floor() as usize;
        let hi = (lo + 1).min(n - 1);
        finite[lo] + (h - lo as f64) * (finite[hi] - finite[lo])
    };
    Stats {
        count: n,
        nonfinite,
        mean,
        std: var.sqrt(),
        quantiles: LEVELS.map(quantile),
    }
}

/// Per-column statistics of a results table.
pub fn summary(columns: &[String], rows: &[(usize, Vec<f64>)]) -> Summary {
    columns
        .iter()
        .enumerate()
        .map(|(k, c)| (c.clone(), stats(rows.iter().map(|(_, v)| v[k]))))
        .collect()
}

fn write_summary(path: &Path, summary: &[(String, Stats)]) -> Result<(), CliError> {
    let csv_err = csv_error(path);
    let file = fs::File::create(path).map_err(io(path))?;
    let mut w = csv::Writer::from_writer(std::io::BufWriter::new(file));
    w.write_record([
        "quantity",
        "count",
        "nonfinite",
        "mean",
        "std",
        "min",
        "q05",
        "q25",
        "median",
        "q75",
        "q95",
        "max",
    ])
    .map_err(csv_err)?;
    for (name, s) in summary {
        let mut record = vec![
            name.clone(),
            s.count.to_string(),
            s.nonfinite.to_string(),
            s.mean.to_string(),
            s.std.to_string(),
        ];
        record.extend(s.quantiles.iter().map(f64::to_string));
        w.write_record(&record).map_err(csv_err)?;
    }
    w.flush().map_err(io(path))
}

/// A short table of the summary for the terminal.
pub fn summary_table(summary: &[(String, Stats)]) -> String {
    let mut out = format!(
        "{:<34} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12}\n",
        "quantity", "count", "mean", "std", "q05", "median", "q95"
    );
    for (name, s) in summary {
        out.push_str(&format!(
            "{name:<34} {:>9} {:>12.5e} {:>12.5e} {:>12.5e} {:>12.5e} {:>12.5e}\n",
            s.count, s.mean, s.std, s.quantiles[1], s.quantiles[3], s.quantiles[5]
        ));
    }
    out
}

/// Writes results, series, summary and plots into `dir`; returns the summary and file names.
pub fn write_results(
    dir: &Path,
    results: &Results,
    body: Option<&str>,
) -> Result<(Summary, Vec<String>), CliError> {
    let mut files = vec!["results.csv".to_string(), "summary.csv".to_string()];
    write_csv(&dir.join("results.csv"), &results.columns, &results.rows)?;
    if !results.series.is_empty() {
        write_csv(
            &dir.join("series.csv"),
            &results.series_columns,
            &results.series,
        )?;
        files.push("series.csv".into());
    }
    #[cfg(feature = "parquet")]
    {
        super::parquet::write_parquet(
            &dir.join("results.parquet"),
            &results.columns,
            &results.rows,
        )?;
        files.push("results.parquet".into());
        if !results.series.is_empty() {
            super::parquet::write_parquet(
                &dir.join("series.parquet"),
                &results.series_columns,
                &results.series,
            )?;
            files.push("series.parquet".into());
        }
    }
    let summary = summary(&results.columns, &results.rows);
    write_summary(&dir.join("summary.csv"), &summary)?;
    files.extend(plots::write_plots(
        &dir.join("plots"),
        results,
        body,
        &summary,
    )?);
    Ok((summary, files))
}

/// Writes `manifest.json` (last, so a directory with a manifest is complete).
/// The SHA-256 of each data file is added under `digests`, so `merge` can tell a shard whose
/// values changed after the run.
pub fn write_manifest(dir: &Path, manifest: &Value) -> Result<(), CliError> {
    let mut manifest = manifest.clone();
    let mut digests = serde_json::Map::new();
    for name in DIGESTED {
        let p = dir.join(name);
        if p.exists() {
            digests.insert(name.to_string(), json!(digest(&p)?));
        }
    }
    manifest["digests"] = Value::Object(digests);
    let path = dir.join("manifest.json");
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| CliError::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    fs::write(&path, text).map_err(io(&path))
}

/// The data files whose digests the manifest records.
pub const DIGESTED: [&str; 2] = ["results.csv", "series.csv"];

/// Checks a shard's data files against the digests its manifest recorded.
fn check_digests(dir: &Path, manifest: &Value) -> Result<(), CliError> {
    let digests = manifest["digests"].as_object().ok_or_else(|| {
        CliError::Merge(format!(
            "{}/manifest.json records no file digests (written by an older simbatch?): \
             its values cannot be checked",
            dir.display()
        ))
    })?;
    for name in DIGESTED {
        let p = dir.join(name);
        match (digests.get(name).and_then(Value::as_str), p.exists()) {
            (Some(expected), true) => {
                if digest(&p)? != expected {
                    return Err(CliError::Merge(format!(
                        "{}: its contents changed after the run (SHA-256 differs from the \
                         manifest's)",
                        p.display()
                    )));
                }
            }
            (Some(_), false) => {
                return Err(CliError::Merge(format!("{} is missing", p.display())));
            }
            (None, true) => {
                return Err(CliError::Merge(format!(
                    "{} is not listed in the manifest",
                    p.display()
                )));
            }
            (None, false) => {}
        }
    }
    Ok(())
}

/// Joins shard outputs into `out`: every shard of one study (same scenario hash, seed,
/// instances and shard count), each index once, ranges covering `0..instances` exactly.
pub fn merge(dirs: &[PathBuf], out: &Path, force: bool) -> Result<Value, CliError> {
    if dirs.is_empty() {
        return Err(CliError::Merge("no shard directories given".into()));
    }
    let mut shards = Vec::new();
    for d in dirs {
        let path = d.join("manifest.json");
        let text = fs::read_to_string(&path).map_err(|_| {
            CliError::Merge(format!(
                "{} has no manifest.json: not a complete simbatch output",
                d.display()
            ))
        })?;
        let m: Value = serde_json::from_str(&text)
            .map_err(|e| CliError::Merge(format!("{}: {e}", path.display())))?;
        if m["complete"] != json!(true) {
            return Err(CliError::Merge(format!(
                "{} is not marked complete",
                path.display()
            )));
        }
        check_digests(d, &m)?;
        shards.push((d.clone(), m));
    }
    let key = |m: &Value| {
        (
            m["scenario"]["hash"].clone(),
            m["seed"].clone(),
            m["instances"].clone(),
            m["shard"]["count"].clone(),
        )
    };
    let first = key(&shards[0].1);
    for (d, m) in &shards {
        if key(m) != first {
            return Err(CliError::Merge(format!(
                "{} belongs to another study (scenario hash, seed, instances, shard count: {:?} vs {:?})",
                d.display(),
                key(m),
                first
            )));
        }
    }
    let count = first.3.as_u64().unwrap_or(0) as usize;
    let instances = first.2.as_u64().unwrap_or(0) as usize;
    shards.sort_by_key(|(_, m)| m["shard"]["index"].as_u64().unwrap_or(u64::MAX));
    let indices: Vec<usize> = shards
        .iter()
        .map(|(_, m)| m["shard"]["index"].as_u64().unwrap_or(u64::MAX) as usize)
        .collect();
    let expected: Vec<usize> = (0..count).collect();
    if indices != expected {
        return Err(CliError::Merge(format!(
            "shards {indices:?} given; a study of {count} shards needs each of {expected:?} exactly once"
        )));
    }
    let mut next = 0usize;
    let mut merged = Results::default();
    for (d, m) in &shards {
        let start = m["shard"]["start"].as_u64().unwrap_or(u64::MAX) as usize;
        let end = m["shard"]["end"].as_u64().unwrap_or(0) as usize;
        if start != next {
            return Err(CliError::Merge(format!(
                "{} covers {start}..{end}; expected it to start at {next}",
                d.display()
            )));
        }
        let (columns, rows) = read_csv(&d.join("results.csv"))?;
        if rows.len() != end - start || rows.iter().enumerate().any(|(k, (i, _))| *i != start + k) {
            return Err(CliError::Merge(format!(
                "{}/results.csv does not hold instances {start}..{end} in order",
                d.display()
            )));
        }
        if merged.columns.is_empty() {
            merged.columns = columns;
        } else if merged.columns != columns {
            return Err(CliError::Merge(format!(
                "{}/results.csv has other columns",
                d.display()
            )));
        }
        if let Some((i, _)) = rows.iter().find(|(_, v)| v.iter().any(|x| x.is_infinite())) {
            return Err(CliError::Merge(format!(
                "{}/results.csv: instance {i} holds an infinite value (a run writes NaN for \
                 what it could not compute, never ∞)",
                d.display()
            )));
        }
        merged.rows.extend(rows);
        let series = d.join("series.csv");
        if series.exists() {
            let (columns, rows) = read_csv(&series)?;
            if merged.series.is_empty() && merged.series_columns.is_empty() {
                merged.series_columns = columns;
            } else if merged.series_columns != columns {
                return Err(CliError::Merge(format!(
                    "{}/series.csv has other columns",
                    d.display()
                )));
            }
            // Series rows are (instance, sample) in order, within this shard's instances.
            if let Some((i, _)) = rows.iter().find(|(i, _)| *i < start || *i >= end) {
                return Err(CliError::Merge(format!(
                    "{}/series.csv holds instance {i}, outside the shard's {start}..{end}",
                    d.display()
                )));
            }
            if rows.windows(2).any(|w| w[1].0 < w[0].0) {
                return Err(CliError::Merge(format!(
                    "{}/series.csv is not ordered by instance",
                    d.display()
                )));
            }
            merged.series.extend(rows);
        }
        next = end;
    }
    if next != instances {
        return Err(CliError::Merge(format!(
            "the shards cover 0..{next} of {instances} instances"
        )));
    }
    let dir = OutDir::create(out, force)?;
    let body = shards[0].1["bodies"][0].as_str().map(str::to_string);
    // Which inputs are log-uniform (their plots use log axes), from the scenario that ran.
    if let Some(text) = shards[0].1["scenario"]["text"].as_str()
        && let Ok(sc) = super::scenario::Scenario::parse("<manifest>", text)
    {
        merged.log_inputs = super::instances::input_kinds(&sc)
            .into_iter()
            .filter(|(_, log)| *log)
            .map(|(n, _)| n)
            .collect();
    }
    let (_, files) = write_results(dir.path(), &merged, body.as_deref())?;
    let mut manifest = shards[0].1.clone();
    manifest["shard"] = json!({ "index": 0, "count": 1, "start": 0, "end": instances });
    manifest["merged_from"] = json!(shards.iter().map(|(d, m)| json!({ "dir": d.display().to_string(), "shard": m["shard"].clone(), "backend": m["backend"].clone(), "timings": m["timings"].clone() })).collect::<Vec<_>>());
    manifest["files"] = json!(files);
    write_manifest(dir.path(), &manifest)?;
    dir.commit()?;
    Ok(manifest)
}
