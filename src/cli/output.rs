//! Study outputs: an output directory written atomically (a hidden `.NAME.partial-PID`
//! directory renamed into place only when everything is written), per-instance CSV, time
//! series, summary statistics, plots and a manifest; and `merge`, which joins shard outputs
//! after checking that they cover the study exactly once.
//!
//! Numbers are written with Rust's shortest round-trip formatting, so reading a CSV back gives
//! the same f64 values and rewriting it gives the same bytes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::CliError;
use super::plots;
use super::study::Results;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |source| CliError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// An output directory being written; renamed into place by [`OutDir::commit`], removed when
/// dropped uncommitted (an error midway leaves nothing that looks like a result).
#[derive(Debug)]
pub struct OutDir {
    target: PathBuf,
    partial: PathBuf,
    committed: bool,
}

impl OutDir {
    /// Starts writing `target`; refuses an existing one unless `force`.
    pub fn create(target: &Path, force: bool) -> Result<OutDir, CliError> {
        if target.exists() && !force {
            return Err(CliError::OutputExists(target.display().to_string()));
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "out".into());
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(parent).map_err(io(parent))?;
        let partial = parent.join(format!(".{name}.partial-{}", std::process::id()));
        if partial.exists() {
            fs::remove_dir_all(&partial).map_err(io(&partial))?;
        }
        fs::create_dir_all(partial.join("plots")).map_err(io(&partial))?;
        Ok(OutDir {
            target: target.to_path_buf(),
            partial,
            committed: false,
        })
    }

    /// Where files go until the commit.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// Moves the finished directory into place (replacing an old one when forced).
    pub fn commit(mut self) -> Result<PathBuf, CliError> {
        if self.target.exists() {
            let old = self.partial.with_extension("old");
            fs::rename(&self.target, &old).map_err(io(&self.target))?;
            fs::rename(&self.partial, &self.target).map_err(io(&self.target))?;
            fs::remove_dir_all(&old).map_err(io(&old))?;
        } else {
            fs::rename(&self.partial, &self.target).map_err(io(&self.target))?;
        }
        self.committed = true;
        Ok(self.target.clone())
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.partial);
        }
    }
}

/// Rows of a table: `(global instance index, values)`.
pub type Rows = Vec<(usize, Vec<f64>)>;

/// Statistics per quantity, in column order.
pub type Summary = Vec<(String, Stats)>;

/// Writes `index,<columns>` then one line per row.
pub fn write_csv(
    path: &Path,
    columns: &[String],
    rows: &[(usize, Vec<f64>)],
) -> Result<(), CliError> {
    let file = fs::File::create(path).map_err(io(path))?;
    let mut w = std::io::BufWriter::new(file);
    let mut text = String::from("index");
    for c in columns {
        text.push(',');
        text.push_str(c);
    }
    writeln!(w, "{text}").map_err(io(path))?;
    for (index, values) in rows {
        text.clear();
        text.push_str(&index.to_string());
        for v in values {
            text.push(',');
            text.push_str(&v.to_string());
        }
        writeln!(w, "{text}").map_err(io(path))?;
    }
    w.flush().map_err(io(path))
}

/// Reads a CSV written by [`write_csv`].
pub fn read_csv(path: &Path) -> Result<(Vec<String>, Rows), CliError> {
    let text = fs::read_to_string(path).map_err(io(path))?;
    let mut lines = text.lines();
    let header = lines
        .next()
        .ok_or_else(|| CliError::Merge(format!("{} is empty", path.display())))?;
    let columns: Vec<String> = header.split(',').skip(1).map(str::to_string).collect();
    let mut rows = Vec::new();
    for (k, line) in lines.enumerate() {
        let bad = || {
            CliError::Merge(format!(
                "{}:{}: not a row of numbers",
                path.display(),
                k + 2
            ))
        };
        let mut fields = line.split(',');
        let index = fields.next().and_then(|f| f.parse().ok()).ok_or_else(bad)?;
        let values = fields
            .map(|f| f.parse::<f64>())
            .collect::<Result<Vec<f64>, _>>()
            .map_err(|_| bad())?;
        if values.len() != columns.len() {
            return Err(bad());
        }
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
    let mut text =
        String::from("quantity,count,nonfinite,mean,std,min,q05,q25,median,q75,q95,max\n");
    for (name, s) in summary {
        text.push_str(&format!(
            "{name},{},{},{},{}",
            s.count, s.nonfinite, s.mean, s.std
        ));
        for q in s.quantiles {
            text.push_str(&format!(",{q}"));
        }
        text.push('\n');
    }
    fs::write(path, text).map_err(io(path))
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
    files.extend(plots::write_plots(&dir.join("plots"), results, body)?);
    Ok((summary, files))
}

/// Writes `manifest.json` (last, so a directory with a manifest is complete).
pub fn write_manifest(dir: &Path, manifest: &Value) -> Result<(), CliError> {
    let path = dir.join("manifest.json");
    let text = serde_json::to_string_pretty(manifest).expect("JSON values serialize");
    fs::write(&path, text).map_err(io(&path))
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
        merged.rows.extend(rows);
        let series = d.join("series.csv");
        if series.exists() {
            let (columns, rows) = read_csv(&series)?;
            merged.series_columns = columns;
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
    let (_, files) = write_results(dir.path(), &merged, body.as_deref())?;
    let mut manifest = shards[0].1.clone();
    manifest["shard"] = json!({ "index": 0, "count": 1, "start": 0, "end": instances });
    manifest["merged_from"] = json!(shards.iter().map(|(d, m)| json!({ "dir": d.display().to_string(), "shard": m["shard"].clone(), "backend": m["backend"].clone(), "timings": m["timings"].clone() })).collect::<Vec<_>>());
    manifest["files"] = json!(files);
    write_manifest(dir.path(), &manifest)?;
    dir.commit()?;
    Ok(manifest)
}
