//! The raw TOML shapes of a scenario and the [`Parser`] that checks their values, locating
//! every error (file, line, column, field): scalars, distributions, vectors, inertia.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::{Spanned, Value};

use super::*;
use crate::cli::CliError;
use crate::cli::sample::Scalar;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    pub(super) name: Option<String>,
    pub(super) instances: Spanned<i64>,
    pub(super) seed: Option<Spanned<i64>>,
    pub(super) gravity: Option<Spanned<Value>>,
    #[serde(default)]
    pub(super) vars: BTreeMap<String, Spanned<Value>>,
    #[serde(default)]
    pub(super) body: Vec<RawBody>,
    #[serde(default)]
    pub(super) constraint: Vec<RawConstraint>,
    pub(super) simulation: Spanned<RawSimulation>,
    pub(super) record: Option<RawRecord>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBody {
    pub(super) name: Spanned<String>,
    pub(super) mass: Option<Spanned<Value>>,
    pub(super) com: Option<Spanned<Value>>,
    pub(super) inertia: Option<Spanned<Value>>,
    pub(super) prescribed: Option<Spanned<Value>>,
    pub(super) position: Option<Spanned<Value>>,
    pub(super) rotation: Option<Spanned<Value>>,
    pub(super) velocity: Option<Spanned<Value>>,
    pub(super) angular_velocity: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConstraint {
    pub(super) kind: Spanned<String>,
    pub(super) body: Spanned<String>,
    pub(super) plane: Option<Spanned<String>>,
    pub(super) rolling: Option<Spanned<Value>>,
    pub(super) radius: Option<Spanned<Value>>,
    pub(super) sphere_center: Option<Spanned<Value>>,
    pub(super) incline_deg: Option<Spanned<Value>>,
    pub(super) plane_origin: Option<Spanned<Value>>,
    pub(super) follower_point: Option<Spanned<Value>>,
    pub(super) point: Option<Spanned<Value>>,
    pub(super) normals: Option<Spanned<Value>>,
    pub(super) baumgarte_time: Option<Spanned<Value>>,
    pub(super) contact: Option<Spanned<String>>,
    pub(super) restitution: Option<Spanned<Value>>,
    pub(super) friction: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSimulation {
    pub(super) integrator: Option<Spanned<String>>,
    pub(super) step: Option<Spanned<f64>>,
    pub(super) accuracy: Option<Spanned<f64>>,
    pub(super) max_step: Option<Spanned<f64>>,
    pub(super) stabilization: Option<Spanned<String>>,
    pub(super) tolerance: Option<Spanned<f64>>,
    pub(super) duration: Spanned<f64>,
    pub(super) assemble: Option<bool>,
    pub(super) backend: Option<Spanned<String>>,
    pub(super) precision: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRecord {
    pub(super) interval: Option<Spanned<f64>>,
    pub(super) series_instances: Option<Spanned<i64>>,
    pub(super) events: Option<bool>,
}

/// Turns byte spans into `file:line:column` errors.
pub(in crate::cli) struct Located<'a> {
    pub(super) file: &'a str,
    pub(super) source: &'a str,
}

impl Located<'_> {
    pub(in crate::cli) fn at(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> CliError {
        let (line, column) = self.line_column(span);
        CliError::Scenario {
            file: self.file.to_string(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The line and column (1-based, in characters) where `span` starts.
    pub(in crate::cli) fn line_column(&self, span: Range<usize>) -> (usize, usize) {
        let before = &self.source[..span.start.min(self.source.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }
}

/// The dotted path of the key at byte `offset` of a scenario's text (`simulation.step`,
/// `body[1].mass`, `record`), read from the text itself: TOML's own errors (a value of the wrong
/// type, an unknown or missing key) carry a position but not the key's path. The last table
/// header above `offset` gives the table (an array of tables counted, `[[body]]` → `body[i]`), the
/// text before `=` on `offset`'s line the key; on a header line, the header's table. A guide for
/// messages, not a TOML parser: keys on a multi-line value's later lines name its table only.
fn key_path_at(source: &str, offset: usize) -> String {
    let offset = offset.min(source.len());
    let mut table = String::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut start = 0;
    for line in source.split_inclusive('\n') {
        let end = start + line.len();
        let text = line.trim();
        let here = offset < end || end == source.len();
        if let Some(name) = header(text, "[[", "]]") {
            let index = counts.entry(name.to_string()).or_insert(0);
            table = format!("{name}[{index}]");
            *index += 1;
        } else if let Some(name) = header(text, "[", "]") {
            // A sub-table of an array of tables' last entry: `[body.motion]` → `body[1].motion`.
            table = match name.split_once('.') {
                Some((array, rest)) if counts.get(array).is_some_and(|n| *n > 0) => {
                    format!("{array}[{}].{rest}", counts[array] - 1)
                }
                _ => name.to_string(),
            };
        } else if here
            && !text.starts_with('#')
            && let Some((key, _)) = text.split_once('=')
        {
            let key = key.trim().trim_matches('"').trim_matches('\'');
            if !key.is_empty() {
                return key_path(&table, key);
            }
        }
        if here {
            break;
        }
        start = end;
    }
    table
}

/// The table a header line names (`[simulation]`, `[[body]]` with `open` `[[`), or `None` for
/// any other line — a nested array's row on a line of its own (`  [0.0, 1.0],`) included: a
/// table's name starts with a letter, `_` or a quote and holds no comma.
fn header<'a>(line: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(open)?;
    let (name, after) = rest.split_once(close)?;
    let name = name.trim();
    let after = after.trim_start();
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '"' || c == '\'');
    (starts_well && !name.contains(',') && (after.is_empty() || after.starts_with('#')))
        .then_some(name)
}

/// `table.key`, or `key` at the top level.
fn key_path(table: &str, key: &str) -> String {
    if table.is_empty() {
        key.to_string()
    } else {
        format!("{table}.{key}")
    }
}

/// TOML's error `message` at `span` of `source`, as a scenario error's field and message: the
/// field from the text ([`key_path_at`]; a missing key's under its table), the message in the
/// scenario's words (`got string "fast"; accepted: a number` for serde's `invalid type: string
/// "fast", expected f64`), other messages as TOML gives them.
pub(super) fn toml_error(source: &str, span: Range<usize>, message: &str) -> (String, String) {
    let message = message.trim_end();
    let at = key_path_at(source, span.start);
    if message.starts_with("missing field") {
        // The span is the table that lacks the key: its header, or the whole file for the root.
        let root = span.start == 0 && (span.end == 0 || span.end >= source.trim_end().len());
        let table = if root { String::new() } else { at };
        let key = message.split('`').nth(1).unwrap_or("");
        return (
            key_path(&table, key),
            format!("missing field `{key}` (required)"),
        );
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((got, expected)) = rest.rsplit_once(", expected ")
        {
            let accepted = match expected {
                "i64" | "u64" | "i32" | "u32" | "usize" | "an integer" => "an integer",
                "f64" | "f32" | "a float" => "a number",
                "a boolean" => "true or false",
                other => other,
            };
            return (at, format!("got {got}; accepted: {accepted}"));
        }
    }
    (at, message.to_string())
}

pub(super) const SCALAR_ACCEPTED: &str = "a number, \"$var\", or one of {uniform = [lo, hi]}, \
    {normal = [mean, std]}, {truncated_normal = [mean, std, lo, hi]}, {lognormal = [mu, sigma]}, \
    {log_uniform = [lo, hi]}, {choice = [a, b, ...]}";

pub(super) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// A scalar as the scenario writes it (`uniform = [0, 1]`, `normal = [0, 1] (unbounded)`).
pub(super) fn describe(s: &Scalar) -> String {
    match s {
        Scalar::Fixed(x) => format!("{x}"),
        Scalar::Uniform(lo, hi) => format!("uniform = [{lo}, {hi}]"),
        Scalar::Normal(m, sd) => format!("normal = [{m}, {sd}] (unbounded)"),
        Scalar::TruncatedNormal(m, sd, lo, hi) => {
            format!("truncated_normal = [{m}, {sd}, {lo}, {hi}]")
        }
        Scalar::LogNormal(mu, sigma) => format!("lognormal = [{mu}, {sigma}] (unbounded)"),
        Scalar::LogUniform(lo, hi) => format!("log_uniform = [{lo}, {hi}]"),
        Scalar::Choice(c) => format!("choice = {c:?}"),
        Scalar::Var(k) => format!("[vars] entry {k}"),
    }
}

/// Checks scenario values, locating every error (shared with `prescribed.rs`).
pub(in crate::cli) struct Parser<'a> {
    pub(super) loc: &'a Located<'a>,
    pub(super) vars: &'a [String],
    /// The `[vars]` entries parsed so far, in `vars`' order, with their values' spans: a
    /// `"$var"` in a key with a range is checked against its entry's distribution.
    pub(super) defined: Vec<(Scalar, Range<usize>)>,
    /// The uses of unbounded `[vars]` entries by keys with a range, checked per instance.
    pub(super) var_ranges: Vec<VarRange>,
}

impl Parser<'_> {
    /// An error at `span` naming `field`.
    pub(in crate::cli) fn at(
        &self,
        span: Range<usize>,
        field: String,
        message: String,
    ) -> CliError {
        self.loc.at(span, field, message)
    }

    pub(super) fn scalar(&mut self, v: &Spanned<Value>, field: &str) -> Result<Scalar, CliError> {
        self.scalar_value(v.get_ref(), v.span(), field)
    }

    pub(in crate::cli) fn scalar_value(
        &mut self,
        v: &Value,
        span: Range<usize>,
        field: &str,
    ) -> Result<Scalar, CliError> {
        let bad = |msg: String| self.loc.at(span.clone(), field, msg);
        if let Some(x) = number(v) {
            if !x.is_finite() {
                return Err(bad(format!("got {x}; accepted: finite numbers")));
            }
            return Ok(Scalar::Fixed(x));
        }
        match v {
            Value::String(s) => {
                let name = s.strip_prefix('$').unwrap_or("");
                match self.vars.iter().position(|v| v == name) {
                    Some(k) => Ok(Scalar::Var(k)),
                    None => Err(bad(format!(
                        "{s:?} names no [vars] entry; accepted: {SCALAR_ACCEPTED}; vars declared: {:?}",
                        self.vars
                    ))),
                }
            }
            Value::Table(t) if t.len() == 1 => {
                let Some((kind, args)) = t.iter().next() else {
                    return Err(self.loc.at(span, field, SCALAR_ACCEPTED));
                };
                let numbers: Option<Vec<f64>> = args
                    .as_array()
                    .map(|a| a.iter().map(number).collect::<Option<Vec<f64>>>())
                    .unwrap_or(None);
                let Some(numbers) = numbers else {
                    return Err(bad(format!(
                        "{kind} takes an array of finite numbers; accepted: {SCALAR_ACCEPTED}"
                    )));
                };
                Scalar::distribution(kind, &numbers).map_err(bad)
            }
            _ => Err(bad(format!("accepted: {SCALAR_ACCEPTED}"))),
        }
    }

    /// A scalar whose every possible value is > 0: a fixed value or a distribution given at
    /// the key must be (a `normal` is unbounded, so refused); a `"$var"` is held to the same
    /// rule through its `[vars]` entry, except that an unbounded entry is left to the dry pass
    /// (another key may want its tails).
    pub(super) fn positive(&mut self, v: &Spanned<Value>, field: &str) -> Result<Scalar, CliError> {
        let s = self.scalar(v, field)?;
        let positive = |s: &Scalar| match s {
            Scalar::Fixed(x) => *x > 0.0,
            Scalar::Uniform(lo, _) => *lo > 0.0,
            Scalar::LogUniform(..) | Scalar::LogNormal(..) | Scalar::Var(_) => true,
            Scalar::TruncatedNormal(_, _, lo, _) => *lo > 0.0,
            Scalar::Normal(..) => false,
            Scalar::Choice(c) => c.iter().all(|x| *x > 0.0),
        };
        let refused = match self.var_entry(&s) {
            Some((entry, _)) => !matches!(entry, Scalar::Normal(..)) && !positive(entry),
            None => !positive(&s),
        };
        if let Some((Scalar::Normal(..), _)) = self.var_entry(&s) {
            self.defer(v, field, &s, (0.0, f64::INFINITY, true), "values > 0");
        }
        if refused {
            Err(self.out_of_range(
                v,
                field,
                &s,
                "≤ 0",
                "values > 0 (a positive number, uniform or truncated_normal with lo > 0, \
                 log_uniform, lognormal, or choice of positives)",
            ))
        } else {
            Ok(s)
        }
    }

    /// Checks that `s`, the value at `v` for `field`, cannot draw outside `[lo, hi]` when its
    /// draws are bounded (a fixed value, `uniform`, `truncated_normal`, `log_uniform`,
    /// `choice`, given at the key or through a `"$var"`); unbounded draws (`normal`,
    /// `lognormal`) are left to the dry pass, which checks every instance's value. `accepted`
    /// names the range for the message.
    pub(super) fn bounded_in(
        &mut self,
        v: &Spanned<Value>,
        field: &str,
        s: &Scalar,
        (lo, hi): (f64, f64),
        accepted: &str,
    ) -> Result<(), CliError> {
        let drawn = self.var_entry(s).map_or(s, |(entry, _)| entry);
        match drawn.support() {
            Some((a, b)) if a.is_finite() && b.is_finite() && (a < lo || b > hi) => {
                let outside = if hi == f64::INFINITY {
                    format!("< {lo}")
                } else {
                    format!("outside [{lo}, {hi}]")
                };
                Err(self.out_of_range(v, field, s, &outside, accepted))
            }
            Some((a, b)) if !(a.is_finite() && b.is_finite()) && a < b => {
                self.defer(v, field, s, (lo, hi, false), accepted);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Keeps the range of `field` (at `v`) for a per-instance check of `s`'s draws when `s`
    /// is a `"$var"`; a distribution given at the key itself is checked by the engine, whose
    /// message names the key already.
    fn defer(
        &mut self,
        v: &Spanned<Value>,
        field: &str,
        s: &Scalar,
        (lo, hi, lo_open): (f64, f64, bool),
        accepted: &str,
    ) {
        let (Scalar::Var(var), Some((_, span))) = (s, self.var_entry(s)) else {
            return;
        };
        let var_line = self.loc.line_column(span.clone()).0;
        self.var_ranges.push(VarRange {
            var: *var,
            field: field.to_string(),
            at: self.loc.line_column(v.span()),
            var_line,
            lo,
            hi,
            lo_open,
            accepted: accepted.to_string(),
        });
    }

    /// The `[vars]` entry a `"$var"` names, with its value's span; `None` for any other scalar.
    fn var_entry(&self, s: &Scalar) -> Option<&(Scalar, Range<usize>)> {
        match s {
            Scalar::Var(k) => self.defined.get(*k),
            _ => None,
        }
    }

    /// The error for `s` at `v` (for `field`) drawing `outside` what `accepted` says; a fixed
    /// value reads `got x`, a `"$var"` names its entry and the entry's line.
    fn out_of_range(
        &self,
        v: &Spanned<Value>,
        field: &str,
        s: &Scalar,
        outside: &str,
        accepted: &str,
    ) -> CliError {
        let message = match (s, self.var_entry(s)) {
            (Scalar::Fixed(x), _) => format!("got {x}; accepted: {accepted}"),
            (Scalar::Var(k), Some((entry, span))) => {
                let name = self.vars.get(*k).map_or("?", |n| n.as_str());
                let line = self.loc.line_column(span.clone()).0;
                format!(
                    "\"${name}\" draws vars.{name} = {} (line {line}), which can be {outside}; \
                     accepted: {accepted}",
                    describe(entry)
                )
            }
            _ => format!("{} can be {outside}; accepted: {accepted}", describe(s)),
        };
        self.loc.at(v.span(), field, message)
    }

    pub(super) fn vector<const K: usize>(
        &mut self,
        v: &Spanned<Value>,
        field: &str,
    ) -> Result<[Scalar; K], CliError> {
        let Some(items) = v.get_ref().as_array().filter(|a| a.len() == K) else {
            return Err(self.loc.at(
                v.span(),
                field,
                format!("accepted: an array of {K} scalars ({SCALAR_ACCEPTED})"),
            ));
        };
        let mut out = Vec::with_capacity(K);
        for (k, item) in items.iter().enumerate() {
            out.push(self.scalar_value(item, v.span(), &format!("{field}[{k}]"))?);
        }
        out.try_into().map_err(|_| {
            self.loc.at(
                v.span(),
                field,
                format!("accepted: an array of {K} scalars ({SCALAR_ACCEPTED})"),
            )
        })
    }

    pub(super) fn vec3(
        &mut self,
        v: &Spanned<Value>,
        field: &str,
    ) -> Result<[Scalar; 3], CliError> {
        self.vector::<3>(v, field)
    }

    pub(super) fn inertia(
        &mut self,
        v: &Spanned<Value>,
        field: &str,
    ) -> Result<InertiaSpec, CliError> {
        const ACCEPTED: &str = "[Ixx, Iyy, Izz, Ixy, Ixz, Iyz], {gyration = k} (isotropic m k²) or {solid_sphere = r} (2/5 m r²)";
        match v.get_ref() {
            Value::Array(_) => Ok(InertiaSpec::Full(self.vector::<6>(v, field)?)),
            Value::Table(t) if t.len() == 1 => {
                let Some((kind, arg)) = t.iter().next() else {
                    return Err(self.loc.at(v.span(), field, ACCEPTED));
                };
                let inner = Spanned::new(v.span(), arg.clone());
                let f = format!("{field}.{kind}");
                match kind.as_str() {
                    "gyration" => Ok(InertiaSpec::Gyration(self.positive(&inner, &f)?)),
                    "solid_sphere" => Ok(InertiaSpec::SolidSphere(self.positive(&inner, &f)?)),
                    other => Err(self.loc.at(
                        v.span(),
                        field,
                        format!("{other:?}; accepted: {ACCEPTED}"),
                    )),
                }
            }
            _ => Err(self
                .loc
                .at(v.span(), field, format!("accepted: {ACCEPTED}"))),
        }
    }
}
