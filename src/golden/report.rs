//! Worst errors per quantity, and the report of a conformance run.

use std::collections::BTreeMap;
use std::fmt;

/// Worst error seen for one quantity.
#[derive(Debug, Clone, PartialEq)]
pub struct Worst {
    /// `|a − b| / max(1, |b|)`.
    pub relative: f64,
    /// `|a − b|`.
    pub absolute: f64,
    /// Where (`file:line`, component).
    pub location: String,
    /// Number of values compared.
    pub count: usize,
}

/// Outcome of a comparison: worst error per quantity and every failure.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Worst error per quantity.
    pub worst: BTreeMap<String, Worst>,
    /// Failures (`quantity at location: got a, expected b`), at most 50 kept.
    pub failures: Vec<String>,
    /// Number of failures (all of them).
    pub failure_count: usize,
    /// Records compared.
    pub records: usize,
    /// Records skipped, per kind (kinds this check does not cover, e.g. trajectories).
    pub skipped: BTreeMap<String, usize>,
}

impl Report {
    /// Compares one value with `|got − expected| ≤ tol · max(1, |expected|)`. A NaN fails.
    pub fn check(
        &mut self,
        quantity: &str,
        location: impl Fn() -> String,
        got: f64,
        expected: f64,
        tol: f64,
    ) {
        let absolute = (got - expected).abs();
        let relative = absolute / expected.abs().max(1.0);
        let ok = relative <= tol;
        let entry = self.worst.entry(quantity.to_string()).or_insert(Worst {
            relative: 0.0,
            absolute: 0.0,
            location: String::new(),
            count: 0,
        });
        entry.count += 1;
        if relative > entry.relative || relative.is_nan() {
            entry.relative = relative;
            entry.absolute = absolute;
            entry.location = location();
        }
        if !ok {
            self.failure_count += 1;
            if self.failures.len() < 50 {
                self.failures.push(format!(
                    "{quantity} at {}: got {got:e}, expected {expected:e} (relative error {relative:e} > {tol:e})",
                    location()
                ));
            }
        }
    }

    /// As [`check`](Self::check) with an explicit scale: `|got − expected| ≤ tol · max(1, |expected|,
    /// scale)`. For residuals that are differences of large terms (the acceleration error at the
    /// solved u̇ is `G u̇ + k ≈ 0`), rounding scales with the terms, not with the ≈ 0 result.
    pub fn check_scaled(
        &mut self,
        quantity: &str,
        location: impl Fn() -> String,
        got: f64,
        expected: f64,
        scale: f64,
        tol: f64,
    ) {
        let s = expected.abs().max(1.0).max(scale.abs());
        // Compare (got/s) with (expected/s) under the plain rule, whose scale is then ≤ 1.
        self.check(quantity, location, got / s, expected / s, tol);
    }

    /// Compares a vector component by component, each relative to the vector's magnitude:
    /// `|got_k − expected_k| ≤ tol · max(1, ‖expected‖)`. A small component of a large force
    /// carries the rounding of the whole force, so the magnitude is the honest scale.
    pub fn check_vector(
        &mut self,
        quantity: &str,
        location: &str,
        got: &[f64],
        expected: &[f64],
        tol: f64,
    ) {
        let norm = expected.iter().map(|x| x * x).sum::<f64>().sqrt();
        for (k, (g, e)) in got.iter().zip(expected).enumerate() {
            self.check_scaled(quantity, || format!("{location}[{k}]"), *g, *e, norm, tol);
        }
    }

    /// Compares two slices element by element (lengths must agree).
    pub fn check_slice(
        &mut self,
        quantity: &str,
        location: &str,
        got: &[f64],
        expected: &[f64],
        tol: f64,
    ) {
        if got.len() != expected.len() {
            self.failure_count += 1;
            self.failures.push(format!(
                "{quantity} at {location}: got {} values, expected {}",
                got.len(),
                expected.len()
            ));
            return;
        }
        for (k, (g, e)) in got.iter().zip(expected).enumerate() {
            self.check(quantity, || format!("{location}[{k}]"), *g, *e, tol);
        }
    }

    /// True when nothing failed and something was compared.
    pub fn passed(&self) -> bool {
        self.failure_count == 0 && self.records > 0
    }

    /// Adds another report's findings to this one.
    pub fn merge(&mut self, other: Report) {
        for (q, w) in other.worst {
            match self.worst.get_mut(&q) {
                Some(mine) => {
                    mine.count += w.count;
                    if w.relative > mine.relative {
                        mine.relative = w.relative;
                        mine.absolute = w.absolute;
                        mine.location = w.location;
                    }
                }
                None => {
                    self.worst.insert(q, w);
                }
            }
        }
        for f in other.failures {
            if self.failures.len() < 50 {
                self.failures.push(f);
            }
        }
        self.failure_count += other.failure_count;
        self.records += other.records;
        for (k, n) in other.skipped {
            *self.skipped.entry(k).or_default() += n;
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} records compared, {} failures",
            self.records, self.failure_count
        )?;
        for (kind, n) in &self.skipped {
            writeln!(f, "  skipped {n} records of kind {kind}")?;
        }
        writeln!(
            f,
            "  {:<40} {:>8} {:>12} {:>12}  worst at",
            "quantity", "values", "rel. error", "abs. error"
        )?;
        for (q, w) in &self.worst {
            writeln!(
                f,
                "  {q:<40} {:>8} {:>12.3e} {:>12.3e}  {}",
                w.count, w.relative, w.absolute, w.location
            )?;
        }
        for fail in &self.failures {
            writeln!(f, "  FAIL {fail}")?;
        }
        Ok(())
    }
}
