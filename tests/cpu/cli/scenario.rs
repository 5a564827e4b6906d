//! Scenario files: the default scenario as documented, bad files reported with file, line,
//! column, field and what is accepted, the samplers' statistics, shard specifications.

use super::*;

#[test]
fn the_default_scenario_parses_as_documented() {
    let s = Scenario::parse("<default>", DEFAULT_SCENARIO).unwrap();
    assert_eq!(s.instances, 100_000);
    assert_eq!(s.vars.len(), 1);
    assert_eq!(s.vars[0].0, "radius");
    assert!(matches!(s.vars[0].1, Scalar::LogUniform(lo, hi) if lo == 0.02 && hi == 0.2));
    assert_eq!(s.bodies.len(), 1);
    assert_eq!(
        s.bodies[0].inertia,
        InertiaSpec::SolidSphere(Scalar::Var(0))
    );
    match &s.constraints[0] {
        ConstraintSpec::SphereOnPlane {
            rolling,
            radius,
            plane,
            ..
        } => {
            assert_eq!(*rolling, Flag::Either);
            assert_eq!(*radius, Scalar::Var(0));
            assert_eq!(*plane, None);
        }
        other => panic!("{other:?}"),
    }
    assert!(s.simulation.assemble);
    assert_eq!(s.record.interval, Some(0.05));
}

/// Bad scenarios: (what to change, into what, where in it the error must point, text in the
/// message). A `None` marker (a TOML syntax error) checks the line only.
#[test]
fn bad_scenarios_are_rejected_with_file_line_column_field_and_accepted_values() {
    let cases: &[(&str, &str, Option<&str>, &[&str])] = &[
        // A misspelt key: TOML's own error, pointing at the key.
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mas = 1.0",
            Some("mas"),
            &["body[0].mas: unknown field `mas`", "expected one of"],
        ),
        // Values of the wrong TOML type: serde's message in the scenario's words, the field's
        // path read from the text.
        (
            "step = 0.01",
            "step = \"fast\"",
            Some("\"fast\""),
            &["simulation.step: got string \"fast\"; accepted: a number"],
        ),
        (
            "instances = 240",
            "instances = 2.5",
            Some("2.5"),
            &[": instances: got floating point `2.5`; accepted: an integer"],
        ),
        (
            "events = true",
            "events = 1",
            Some("1"),
            &["record.events: got integer `1`; accepted: true or false"],
        ),
        (
            "plane = \"ground\"",
            "plane = 2",
            Some("2"),
            &["constraint[0].plane: got integer `2`; accepted: a string"],
        ),
        (
            "integrator = \"rk4\"",
            "integrator = \"rk4\"\nintegrater = \"rk4\"",
            Some("integrater"),
            &["simulation.integrater: unknown field `integrater`"],
        ),
        (
            "incline_deg = { uniform = [5.0, 40.0] }",
            "incline_deg = { uniform = [40.0, 5.0] }",
            Some("{ uniform"),
            &["constraint[0].incline_deg", "accepted: lo ≤ hi"],
        ),
        (
            "body = \"ball\"",
            "body = \"bal\"",
            Some("\"bal\""),
            &["constraint[0].body", "\"bal\" is not a body", "[\"ball\"]"],
        ),
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mass = -1.0",
            Some("-1.0"),
            &["body[0].mass", "accepted: values > 0"],
        ),
        // Unilateral coefficients whose bounded draws leave their range, given at the key.
        (
            "rolling = { choice = [true, false] }",
            "contact = \"unilateral\"\nrestitution = { uniform = [0.5, 1.5] }",
            Some("{ uniform = [0.5"),
            &[
                "constraint[0].restitution: uniform = [0.5, 1.5] can be outside [0, 1]; \
               accepted: a number in [0, 1]",
            ],
        ),
        (
            "rolling = { choice = [true, false] }",
            "contact = \"unilateral\"\nfriction = { choice = [0.5, -0.1] }",
            Some("{ choice = [0.5"),
            &["constraint[0].friction: choice = [0.5, -0.1] can be < 0; accepted: a number ≥ 0"],
        ),
        (
            "rolling = { choice = [true, false] }",
            "contact = \"unilateral\"\nrestitution = 1.5",
            Some("1.5"),
            &["constraint[0].restitution: got 1.5; accepted: a number in [0, 1]"],
        ),
        (
            "radius = \"$radius\"",
            "radius = \"$radios\"",
            Some("\"$radios\""),
            &[
                "constraint[0].radius",
                "names no [vars] entry",
                "[\"radius\"]",
            ],
        ),
        (
            "integrator = \"rk4\"",
            "integrator = \"rk5\"",
            Some("\"rk5\""),
            &["simulation.integrator", "accepted: euler, rk4, rkm"],
        ),
        (
            "instances = 240",
            "instances = 0",
            Some("0"),
            &["instances", "accepted: an integer ≥ 1"],
        ),
        (
            "incline_deg = { uniform = [5.0, 40.0] }",
            "incline_deg = 3.0\nfollower_point = [0.0, 0.0, 0.0]",
            Some("[0.0, 0.0, 0.0]"),
            &[
                "constraint[0].follower_point",
                "does not apply to sphere_on_plane",
            ],
        ),
        (
            "step = 0.01",
            "step = 0.01\naccuracy = 1e-3",
            Some("1e-3"),
            &[
                "simulation.accuracy",
                "does not apply to integrator \"rk4\"",
            ],
        ),
        (
            "interval = 0.05",
            "interval = 5.0",
            Some("5.0"),
            &["record.interval", "(0, simulation.duration = 0.2]"],
        ),
        (
            "uniform = [0.05, 0.15]",
            "uniform = [0.05, 0.15",
            None,
            &["bad.toml:"],
        ),
        (
            "rolling = { choice = [true, false] }",
            "rolling = \"maybe\"",
            Some("\"maybe\""),
            &[
                "constraint[0].rolling",
                "accepted: true, false, or {choice = [true, false]}",
            ],
        ),
        (
            "kind = \"sphere_on_plane\"",
            "kind = \"cylinder\"",
            Some("\"cylinder\""),
            &[
                "constraint[0].kind",
                "accepted: sphere_on_plane, point_on_plane, point_to_ground",
            ],
        ),
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mass = { log_uniform = [0.0, 2.0] }",
            Some("{ log_uniform"),
            &["body[0].mass", "accepted: 0 < lo ≤ hi"],
        ),
        (
            "mass = { log_uniform = [0.5, 2.0] }",
            "mass = { poisson = [1.0] }",
            Some("{ poisson"),
            &[
                "body[0].mass",
                "unknown distribution \"poisson\"",
                "log_uniform",
            ],
        ),
    ];
    for (from, to, marker, needles) in cases {
        assert!(SMALL.contains(from), "{from}");
        let text = SMALL.replacen(from, to, 1);
        let at = text.find(to).expect("replaced");
        let err = Scenario::parse("bad.toml", &text).expect_err(to);
        let message = err.to_string();
        let CliError::Scenario {
            file, line, column, ..
        } = &err
        else {
            panic!("{to}: not a located scenario error: {err:?}");
        };
        assert_eq!(file, "bad.toml");
        match marker {
            Some(m) => {
                let expected =
                    line_column(&text, at + to.find(m).expect("marker in the replacement"));
                assert_eq!((*line, *column), expected, "{to}: {message}");
            }
            None => assert!(*line >= line_column(&text, at).0, "{to}: {message}"),
        }
        assert!(
            message.starts_with(&format!("bad.toml:{line}:{column}: ")),
            "{message}"
        );
        assert!(
            !message.contains("  "),
            "a run of spaces in the message: {message:?}"
        );
        for needle in *needles {
            assert!(
                message.contains(needle),
                "{to}: {message:?} lacks {needle:?}"
            );
        }
    }
}

/// A key left out names its table and points at the table's header (the file's start for a
/// top-level key); the second of an array of tables is counted as such.
#[test]
fn missing_keys_and_later_tables_are_named_by_their_path() {
    // (what to change, into what, where the error must point: the first occurrence of this text
    // in the changed file, text in the message).
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "duration = 0.2\n",
            "",
            "[simulation]",
            "simulation.duration: missing field `duration` (required)",
        ),
        (
            "kind = \"sphere_on_plane\"\n",
            "",
            "[[constraint]]",
            "constraint[0].kind: missing field `kind`",
        ),
        (
            "instances = 240\n",
            "",
            "name = \"small\"",
            ": instances: missing field `instances`",
        ),
        (
            "[[constraint]]",
            "[[body]]\nname = 7\n\n[[constraint]]",
            "7\n",
            "body[1].name: got integer `7`; accepted: a string",
        ),
        // A nested array's rows on lines of their own are not table headers; a sub-table of an
        // array of tables is its last entry's.
        (
            "name = \"ball\"\n",
            "com = [\n  [0.5, 2.0],\n]\nname = 7\n",
            "7\n",
            "body[0].name: got integer `7`; accepted: a string",
        ),
        (
            "[[constraint]]",
            "[body.extra]\nkey = 1\n\n[[constraint]]",
            "extra]",
            "body[0].extra: unknown field `extra`",
        ),
    ];
    for (from, to, marker, needle) in cases {
        assert!(SMALL.contains(from), "{from}");
        let text = SMALL.replacen(from, to, 1);
        let err = Scenario::parse("bad.toml", &text).expect_err(from);
        let message = err.to_string();
        let CliError::Scenario { line, column, .. } = &err else {
            panic!("{from}: not a located scenario error: {err:?}");
        };
        let at = text.find(marker).expect("marker in the text");
        assert_eq!((*line, *column), line_column(&text, at), "{message}");
        assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    }
}

/// Mean within 5 standard errors, and the distribution's own shape: 200 000 draws each.
#[test]
fn distributions_have_their_statistics() {
    let n = 200_000;
    let draws =
        |s: &Scalar, path: &str| -> Vec<f64> { (0..n).map(|i| draw(s, 9, path, i, &[])).collect() };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var = |v: &[f64]| {
        let m = mean(v);
        v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
    };
    let within = |got: f64, expected: f64, se: f64, what: &str| {
        assert!(
            (got - expected).abs() <= 5.0 * se,
            "{what}: {got} vs {expected} (5σ = {})",
            5.0 * se
        );
    };
    // Uniform [2, 5): mean 3.5, variance 9/12, all inside.
    let u = draws(&Scalar::Uniform(2.0, 5.0), "u");
    assert!(u.iter().all(|x| (2.0..5.0).contains(x)));
    within(mean(&u), 3.5, (0.75f64 / n as f64).sqrt(), "uniform mean");
    within(
        var(&u),
        0.75,
        0.75 * (0.8f64 / n as f64).sqrt(),
        "uniform variance",
    ); // Var(s²) = (μ4 − σ⁴)/n, μ4 = 9/5 σ⁴
    // Normal (1, 0.5): mean, std, 68.27 % within 1σ.
    let g = draws(&Scalar::Normal(1.0, 0.5), "g");
    within(mean(&g), 1.0, 0.5 / (n as f64).sqrt(), "normal mean");
    within(
        var(&g),
        0.25,
        0.25 * (2.0f64 / n as f64).sqrt(),
        "normal variance",
    );
    let inside = g.iter().filter(|x| (*x - 1.0).abs() < 0.5).count() as f64 / n as f64;
    let p = 0.682_689_492;
    within(
        inside,
        p,
        (p * (1.0 - p) / n as f64).sqrt(),
        "normal 1σ mass",
    );
    // Log-uniform [0.1, 10]: ln x uniform on [ln 0.1, ln 10].
    let l: Vec<f64> = draws(&Scalar::LogUniform(0.1, 10.0), "l")
        .iter()
        .map(|x| x.ln())
        .collect();
    let w = 10f64.ln() - 0.1f64.ln();
    within(
        mean(&l),
        0.0,
        (w * w / 12.0 / n as f64).sqrt(),
        "log-uniform mean of ln",
    );
    within(
        var(&l),
        w * w / 12.0,
        w * w / 12.0 * (0.8f64 / n as f64).sqrt(),
        "log-uniform variance of ln",
    );
    // Truncated normal (1, 2) on [0, 3]: inside, with the closed-form mean and variance
    // (α = −0.5, β = 1: mean = μ + σ (φ(α) − φ(β)) / Z, Z = Φ(β) − Φ(α)).
    use simbatch::sample::truncated::{phi, phi_inverse};
    let pdf = |x: f64| (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let (alpha, beta) = (-0.5f64, 1.0f64);
    let z = phi(beta) - phi(alpha);
    let tm = 1.0 + 2.0 * (pdf(alpha) - pdf(beta)) / z;
    let tv = 4.0
        * (1.0 + (alpha * pdf(alpha) - beta * pdf(beta)) / z
            - ((pdf(alpha) - pdf(beta)) / z).powi(2));
    let t = draws(&Scalar::TruncatedNormal(1.0, 2.0, 0.0, 3.0), "t");
    assert!(t.iter().all(|x| (0.0..=3.0).contains(x)));
    within(
        mean(&t),
        tm,
        (tv / n as f64).sqrt(),
        "truncated normal mean",
    );
    within(
        var(&t),
        tv,
        tv * (2.0f64 / n as f64).sqrt(),
        "truncated normal variance",
    );
    // Far in a tail (the interval's probability underflows): inside, near its lower end.
    let far = draws(&Scalar::TruncatedNormal(0.0, 1.0, 40.0, 41.0), "far");
    assert!(far.iter().all(|x| (40.0..=41.0).contains(x)));
    within(
        mean(&far),
        40.0 + 1.0 / 40.0,
        0.05,
        "deep-tail truncated normal mean",
    );
    // The inverse distribution function inverts: Φ(Φ⁻¹(p)) = p across the range.
    for p in [1e-300, 1e-20, 1e-5, 0.02, 0.3, 0.5, 0.9, 0.999_999] {
        assert!(((phi(phi_inverse(p)) - p) / p).abs() < 1e-12, "p = {p}");
    }
    // Lognormal (mu 0.5, sigma 0.4): ln x is normal (0.5, 0.4).
    let ln: Vec<f64> = draws(&Scalar::LogNormal(0.5, 0.4), "ln")
        .iter()
        .map(|x| x.ln())
        .collect();
    within(
        mean(&ln),
        0.5,
        0.4 / (n as f64).sqrt(),
        "lognormal mean of ln",
    );
    within(
        var(&ln),
        0.16,
        0.16 * (2.0f64 / n as f64).sqrt(),
        "lognormal variance of ln",
    );
    // Choice of 3: each a third.
    let c = draws(&Scalar::Choice(vec![1.0, 2.0, 7.0]), "c");
    for v in [1.0, 2.0, 7.0] {
        let f = c.iter().filter(|x| **x == v).count() as f64 / n as f64;
        within(
            f,
            1.0 / 3.0,
            (2.0 / 9.0 / n as f64).sqrt(),
            "choice frequency",
        );
    }
    // Fields are independent streams: the correlation of two uniform fields is ~0 (se 1/√n).
    let a = draws(&Scalar::Uniform(0.0, 1.0), "body[0].mass");
    let b = draws(&Scalar::Uniform(0.0, 1.0), "body[0].com.x");
    let cov = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - 0.5) * (y - 0.5))
        .sum::<f64>()
        / n as f64;
    within(
        cov / (1.0 / 12.0),
        0.0,
        1.0 / (n as f64).sqrt(),
        "correlation between fields",
    );
    // Counter-based: a draw depends on (seed, field, index) only.
    let s = Scalar::Normal(0.0, 1.0);
    assert_eq!(
        draw(&s, 3, "x", 123_456, &[]),
        draw(&s, 3, "x", 123_456, &[])
    );
    assert_ne!(
        draw(&s, 3, "x", 123_456, &[]),
        draw(&s, 4, "x", 123_456, &[])
    );
    assert_ne!(
        draw(&s, 3, "x", 123_456, &[]),
        draw(&s, 3, "y", 123_456, &[])
    );
}

#[test]
fn shard_specs_come_from_the_flag_or_the_scheduler() {
    let none = |_: &str| None;
    assert_eq!(shard_spec(Some("2/5"), &none).unwrap(), Some((2, 5)));
    assert_eq!(shard_spec(None, &none).unwrap(), None);
    for bad in ["5/5", "1", "a/3", "0/0"] {
        let e = shard_spec(Some(bad), &none).unwrap_err().to_string();
        assert!(e.contains("accepted"), "{bad}: {e}");
    }
    let slurm = |k: &str| match k {
        "SLURM_ARRAY_TASK_ID" => Some("4".to_string()),
        "SLURM_ARRAY_TASK_COUNT" => Some("4".to_string()),
        "SLURM_ARRAY_TASK_MIN" => Some("1".to_string()),
        _ => None,
    };
    assert_eq!(shard_spec(None, &slurm).unwrap(), Some((3, 4)));
    let k8s = |k: &str| match k {
        "JOB_COMPLETION_INDEX" => Some("0".to_string()),
        "SIMBATCH_SHARDS" => Some("8".to_string()),
        _ => None,
    };
    assert_eq!(shard_spec(None, &k8s).unwrap(), Some((0, 8)));
    let k8s_no_count = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "0".to_string());
    assert!(
        shard_spec(None, &k8s_no_count)
            .unwrap_err()
            .to_string()
            .contains("SIMBATCH_SHARDS")
    );
    // Ranges tile the study.
    for n in [1, 3, 7] {
        let mut next = 0;
        for i in 0..n {
            let r = shard_range(1001, Some((i, n)));
            assert_eq!(r.start, next);
            next = r.end;
        }
        assert_eq!(next, 1001);
    }
}

/// A projection tolerance beside another stabilization has no effect: the run goes on (such
/// files are accepted) and says so on standard error, naming the file, line and key.
#[test]
fn a_tolerance_without_projection_is_run_with_a_warning() {
    let dir = scratch("tolerance-warning");
    let text = SMALL
        .replacen(
            "stabilization = \"projection\"",
            "stabilization = \"none\"",
            1,
        )
        .replacen("instances = 240", "instances = 4", 1);
    let (file, _, o) = run_scenario(&dir, "none.toml", &text);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let (line, column) = line_column(&text, text.find("1e-9").unwrap());
    let expected = format!(
        "warning: simbatch: {}:{line}:{column}: simulation.tolerance: ignored: stabilization \
         \"none\" does not project",
        file.display()
    );
    assert!(stderr.contains(&expected), "{expected:?} not in {stderr}");
    assert_eq!(
        stderr.matches("simulation.tolerance").count(),
        1,
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Baumgarte terms act only on constraints that set `baumgarte_time`, and a time constant only
/// under `stabilization = "baumgarte"`: one without the other runs (such files are accepted)
/// and says so on standard error, naming the file, line and key; both together, or neither,
/// say nothing.
#[test]
fn baumgarte_without_a_time_constant_or_a_time_constant_without_it_is_said() {
    let text = |stabilization: &str, time: &str| {
        format!(
            r#"instances = 2
[[body]]
name = "box"
mass = 1.0
inertia = {{ gyration = 0.2 }}
position = [0.0, 0.0, 0.5]
velocity = [0.3, 0.0, 0.0]
[[constraint]]
kind = "point_to_ground"
body = "box"
point = [0.0, 0.0, -0.5]
{time}
[simulation]
integrator = "rk4"
step = 1e-3
stabilization = "{stabilization}"
duration = 0.01
backend = "cpu"
"#
        )
    };
    let timed = "baumgarte_time = 0.05";
    for (name, stabilization, time, key, needle) in [
        (
            "untimed",
            "baumgarte",
            "",
            "simulation.stabilization",
            "\"baumgarte\"\n",
        ),
        (
            "unused",
            "projection",
            timed,
            "constraint[0].baumgarte_time",
            "0.05",
        ),
        ("both", "baumgarte", timed, "", ""),
        ("neither", "projection", "", "", ""),
    ] {
        let text = text(stabilization, time);
        let dir = scratch(&format!("baumgarte-{name}"));
        let (file, _, o) = run_scenario(&dir, &format!("{name}.toml"), &text);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {stderr}");
        if key.is_empty() {
            assert!(!stderr.contains("baumgarte"), "{name}: {stderr}");
        } else {
            let (line, column) = line_column(&text, text.find(needle).unwrap());
            let expected = format!(
                "warning: simbatch: {}:{line}:{column}: {key}: ",
                file.display()
            );
            assert!(stderr.contains(&expected), "{expected:?} not in {stderr}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
