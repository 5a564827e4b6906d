//! What makes an axis trustworthy: tick labels with enough digits that neighbours differ, and
//! the unit of every quantity a study reports.

/// The label of tick value `v` on an axis whose ticks are about `step` apart: enough digits
/// that neighbouring ticks differ (`0.0000012`, not `0.0`), in scientific notation when the
/// values are very small or very large.
pub fn tick_label(v: f64, step: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let step = step.abs();
    if v == 0.0 {
        return "0".into();
    }
    let magnitude = v.abs().max(step);
    if !(step.is_finite() && step > 0.0) {
        return format!("{v}");
    }
    if !(1e-3..1e6).contains(&magnitude) {
        // Mantissa digits to resolve the step at this magnitude.
        let digits = ((magnitude / step).log10().ceil().max(0.0) as usize + 1).min(15);
        let s = format!("{v:.digits$e}", digits = digits.saturating_sub(1));
        return trim_exponent(&s);
    }
    let decimals = (-(step.log10().floor()) as i64 + 1).clamp(0, 15) as usize;
    let s = format!("{v:.decimals$}");
    trim_zeros(&s)
}

/// A label for a value on a log axis (3 significant digits).
pub fn log_tick_label(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return v.to_string();
    }
    if (1e-3..1e4).contains(&v) {
        trim_zeros(&format!(
            "{:.*}",
            (2 - v.log10().floor() as i64).clamp(0, 6) as usize,
            v
        ))
    } else {
        trim_exponent(&format!("{v:.2e}"))
    }
}

/// `1.50` → `1.5`, `2.000` → `2` (only after a decimal point).
fn trim_zeros(s: &str) -> String {
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// `1.50e-7` → `1.5e-7`.
fn trim_exponent(s: &str) -> String {
    match s.split_once('e') {
        Some((m, e)) => format!("{}e{e}", trim_zeros(m)),
        None => s.to_string(),
    }
}

/// The labels of ticks `lo, lo + step, …` up to `hi` (what a test checks for distinctness).
pub fn tick_labels(lo: f64, hi: f64, step: f64) -> Vec<String> {
    let mut out = Vec::new();
    if !(step > 0.0 && step.is_finite() && hi >= lo) {
        return out;
    }
    let first = (lo / step).ceil();
    for k in 0..1000 {
        let v = (first + k as f64) * step;
        if v > hi + 1e-9 * step {
            break;
        }
        out.push(tick_label(v, step));
    }
    out
}

/// The unit of a result, input or series column, from its name (`ball.x` → `m`).
pub fn unit_of(name: &str) -> &'static str {
    let last = name.rsplit('.').next().unwrap_or(name);
    let has = |s: &str| name.contains(s);
    match last {
        "x" | "y" | "z" if has("gravity") => "m/s²",
        "x" | "y" | "z" => "m",
        "vx" | "vy" | "vz" => "m/s",
        "wx" | "wy" | "wz" => "rad/s",
        "e0" | "e1" | "e2" | "e3" => "quaternion, 1",
        "mass" => "kg",
        "radius" | "separation" | "gyration" | "solid_sphere" => "m",
        "ixx" | "iyy" | "izz" | "ixy" | "ixz" | "iyz" => "kg·m²",
        "status" => "flag bits",
        "mode" => "0 open, 1 rolling, 2 sliding",
        "impacts" => "count",
        "restitution" | "rolling" | "assembly_failed" => "1",
        "normal_force" => "N",
        "max_position_error" => "m or rad",
        "max_velocity_error" => "m/s or rad/s",
        "time" => "s",
        _ if last.ends_with("_time") => "s",
        _ if last.ends_with("_deg") => "deg",
        _ if last.ends_with("_rad") => "rad",
        _ if last.starts_with("lambda") => "N or N·m",
        _ if last.starts_with("energy") || last.ends_with("_work") || last.ends_with("_loss") => {
            "J"
        }
        _ if has("friction") || has("restitution") => "1",
        _ if has(".com.") => "m",
        _ => "as given",
    }
}

/// `name (unit)`.
pub fn with_unit(name: &str) -> String {
    format!("{name} ({})", unit_of(name))
}
