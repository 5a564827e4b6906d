//! Draws in scenarios: truncated normal and lognormal, every example scenario, refused draws
//! named once, ranges checked through `[vars]` entries or left to the dry pass, warnings on
//! standard error.

use super::*;

/// The new distributions in a scenario: drawn per instance, recorded as inputs (a lognormal on
/// a log axis), within their bounds; a truncated normal that can reach ≤ 0 is refused for a
/// field that must be positive, naming it.
#[test]
fn truncated_normal_and_lognormal_draw_in_scenarios() {
    let text = DEFAULT_SCENARIO
        .replacen(
            "mass = { log_uniform = [0.1, 10.0] }",
            "mass = { lognormal = [0.0, 0.5] }",
            1,
        )
        .replacen(
            "incline_deg = { uniform = [5.0, 30.0] }",
            "incline_deg = { truncated_normal = [15.0, 10.0, 5.0, 30.0] }",
            1,
        );
    assert!(
        text.contains("lognormal") && text.contains("truncated_normal"),
        "{text}"
    );
    let sc = Scenario::parse("d.toml", &text).unwrap();
    let kinds = simbatch::cli::instances::input_kinds(&sc);
    assert!(kinds.contains(&("ball.mass".to_string(), true)));
    assert!(kinds.contains(&("constraint[0].incline_deg".to_string(), false)));
    for i in 0..200 {
        let s = simbatch::cli::study::sample(&sc, i, None);
        let names = simbatch::cli::study::input_names(&sc);
        let get = |n: &str| s.inputs[names.iter().position(|x| x == n).unwrap()];
        assert!(get("ball.mass") > 0.0);
        assert!((5.0..=30.0).contains(&get("constraint[0].incline_deg")));
    }
    let bad = text.replacen(
        "mass = { lognormal = [0.0, 0.5] }",
        "mass = { truncated_normal = [1.0, 1.0, 0.0, 2.0] }",
        1,
    );
    let err = Scenario::parse("d.toml", &bad).unwrap_err().to_string();
    assert!(
        err.contains("body[0].mass") && err.contains("truncated_normal"),
        "{err}"
    );
}

/// A study hashes its fields' paths once (`FieldKeys`) and draws every instance with them:
/// the same draws, field for field, as sampling each instance from its paths — on the default
/// scenario (a random rolling flag, a log-uniform mass) and on every example (`[vars]`, eight
/// unilateral corners, a driven plate's law).
#[test]
fn keyed_sampling_draws_what_sampling_by_path_draws() {
    use simbatch::cli::instances::{FieldKeys, sample_keyed};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    let mut texts = vec![("default.toml".to_string(), DEFAULT_SCENARIO.to_string())];
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "toml") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            texts.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    assert!(texts.len() >= 4, "{}", texts.len());
    for (name, text) in texts {
        let sc = Scenario::parse(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let keys = FieldKeys::of(&sc);
        for i in [0, 1, 2, 7, 99, 12_345] {
            let by_path = simbatch::cli::study::sample(&sc, i, None);
            assert!(!by_path.inputs.is_empty(), "{name}");
            assert_eq!(sample_keyed(&sc, i, &keys), by_path, "{name}, instance {i}");
        }
    }
}

#[test]
fn every_example_scenario_parses_and_its_draws_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let scenario = Scenario::parse(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The dry pass over every instance the study draws (what `simbatch run` does first).
        simbatch::cli::study::validate(&scenario, 0..scenario.instances)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn a_refused_draw_names_the_scenarios_body_and_the_instance_once() {
    let text = include_str!("../../../examples/scenarios/tossed_bricks.toml").replace(
        "inertia = [0.0125, 0.035, 0.04, 0.0, 0.0, 0.0]",
        "inertia = [0.0125, 0.0135, 0.04, 0.0, 0.0, 0.0]",
    );
    let scenario = Scenario::parse("bricks.toml", &text).unwrap();
    let err = simbatch::cli::study::validate(&scenario, 0..scenario.instances).unwrap_err();
    let CliError::Sample {
        file,
        instance,
        message,
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(*instance, 0);
    assert_eq!(file, "bricks.toml");
    assert!(
        err.to_string()
            .starts_with("bricks.toml: instance 0: invalid body"),
        "{err}"
    );
    assert!(
        message.starts_with("invalid body \"brick\".inertia: got [0.0125, 0.0135, 0.04"),
        "{message}"
    );
    assert!(message.contains("triangle inequality"), "{message}");
    assert!(
        !message.contains("body[") && !message.contains("for instance"),
        "{message}"
    );
}

/// The library's warnings reach the command's standard error: a run with `--backend auto`
/// either took a hardware GPU (the manifest says so, and there is nothing to warn about) or
/// fell back to the CPU, and then the reason the manifest records (`auto passed over` a
/// software adapter, or no GPU at all) is also a `warning:` line on standard error; other
/// crates' log records (wgpu's) are not.
#[test]
fn the_commands_warnings_reach_standard_error() {
    let dir = scratch("warnings");
    let o = bin()
        .args([
            "run",
            "--instances",
            "8",
            "--backend",
            "auto",
            "--quiet",
            "--out",
        ])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("out").join("manifest.json")).unwrap(),
    )
    .unwrap();
    let backend = manifest["backend"].as_str().unwrap();
    match backend.split_once("; ") {
        Some((_, note)) => assert!(
            stderr.contains(&format!("warning: simbatch: {note}")),
            "manifest note {note:?} not on stderr: {stderr}"
        ),
        None => assert!(backend.starts_with("gpu"), "{backend}"),
    }
    // Every warning the logger prints is the library's own (they all say `simbatch:`).
    assert!(
        stderr
            .lines()
            .filter(|l| l.starts_with("warning:"))
            .all(|l| l.starts_with("warning: simbatch: ")),
        "other crates' records: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `"$var"` in a key with a range, its entry's bounded draws able to leave it: refused where
/// it is first used, naming the entry and its line (before, only the dry pass caught it, with
/// an instance and no file).
#[test]
fn a_var_that_can_leave_a_keys_range_is_refused_where_it_is_used() {
    for (entry, needle) in [
        ("{ uniform = [-0.1, 0.15] }", "uniform = [-0.1, 0.15]"),
        ("{ choice = [0.1, 0.0] }", "choice = [0.1, 0.0]"),
        ("-0.1", "-0.1"),
    ] {
        let text = SMALL.replace("{ uniform = [0.05, 0.15] }", entry);
        let err = Scenario::parse("var.toml", &text).expect_err(entry);
        let message = err.to_string();
        let use_site = text.find("{ solid_sphere").expect("the first use");
        let (line, column) = line_column(&text, use_site);
        assert!(
            message.starts_with(&format!(
                "var.toml:{line}:{column}: body[0].inertia.solid_sphere: \"$radius\" draws \
                 vars.radius = {needle} (line 6), which can be ≤ 0; accepted: values > 0"
            )),
            "{message}"
        );
    }
    // Through a var in a unilateral coefficient: the bounded draw is checked there too.
    let text = SMALL
        .replace(
            "radius = { uniform = [0.05, 0.15] }",
            "radius = { uniform = [0.05, 0.15] }\nbounce = { uniform = [0.5, 1.5] }",
        )
        .replace(
            "rolling = { choice = [true, false] }",
            "contact = \"unilateral\"\nrestitution = \"$bounce\"",
        );
    let message = Scenario::parse("var.toml", &text).unwrap_err().to_string();
    assert!(
        message.contains(
            "constraint[0].restitution: \"$bounce\" draws vars.bounce = uniform = [0.5, 1.5] \
             (line 7), which can be outside [0, 1]; accepted: a number in [0, 1]"
        ),
        "{message}"
    );
}

/// Unbounded draws (`normal`, `lognormal`) through a `"$var"` or in a unilateral coefficient
/// are not refused up front (another key may want a var's tails; most draws may be fine): the
/// dry pass checks every instance's value and names the first instance that breaks a range —
/// through a var by the key that uses it and its place, the var, its distribution and the
/// value drawn; at the key itself by the key and the value (a contact coefficient too: before,
/// only the run refused it, when its group came to run).
#[test]
fn unbounded_draws_are_left_to_the_dry_pass() {
    let text = SMALL
        .replace(
            "radius = { uniform = [0.05, 0.15] }",
            "radius = { normal = [0.1, 0.05] }",
        )
        .replace(
            "rolling = { choice = [true, false] }",
            "contact = \"unilateral\"\nrestitution = { normal = [0.5, 0.01] }\n\
             friction = { lognormal = [-1.0, 0.5] }",
        );
    let scenario = Scenario::parse("tails.toml", &text).expect("unbounded draws parse");
    // N(0.1, 0.05) is ≤ 0 with probability 2.3 %: some of the 240 instances draw a radius ≤ 0.
    let (negative, radius) = (0..scenario.instances)
        .find_map(|i| {
            let drawn = simbatch::cli::instances::sample(&scenario, i, None);
            let radius = drawn.constraints[0]
                .params
                .iter()
                .find(|(n, _)| *n == "radius");
            let radius = radius.expect("the radius is drawn").1[0];
            assert_eq!(drawn.vars, [radius], "instance {i}: the var's draw");
            (radius <= 0.0).then_some((i, radius))
        })
        .expect("a radius ≤ 0 among 240 draws");
    let dir = scratch("tails");
    let e = run_study(&scenario, None, Backend::Cpu, &dir.join("out"), false, true).unwrap_err();
    let message = e.to_string();
    assert!(
        matches!(e, CliError::Sample { instance, .. } if instance == negative),
        "{message}"
    );
    // The first key with a range that reads "$radius" is the inertia's (placed at its table,
    // as the parser's own errors are).
    let (line, column) = line_column(&text, text.find("{ solid_sphere").unwrap());
    assert_eq!(
        message,
        format!(
            "tails.toml: instance {negative}: body[0].inertia.solid_sphere (line {line}, column \
             {column}): \"$radius\" drew {radius} from vars.radius = normal = [0.1, 0.05] \
             (unbounded) (line 6); accepted: values > 0"
        )
    );
    // Through a var in a unilateral coefficient, held to [0, 1]; its tails are fine in a key
    // without a range (the height).
    let coefficient = SMALL
        .replace(
            "radius = { uniform = [0.05, 0.15] }",
            "radius = 0.1\nbounce = { normal = [0.5, 0.25] }\nlift = { normal = [0.0, 1.0] }",
        )
        .replace(
            "position = [0.0, 0.0, \"$radius\"]",
            "position = [\"$lift\", 0.0, \"$radius\"]",
        )
        .replace(
            "rolling = { choice = [true, false] }",
            "contact = \"unilateral\"\nrestitution = \"$bounce\"\n\
             friction = { normal = [0.3, 0.01] }",
        );
    let scenario = Scenario::parse("bounce.toml", &coefficient).expect("unbounded draws parse");
    let outside = |x: f64| !(0.0..=1.0).contains(&x);
    let (first, bounce) = (0..scenario.instances)
        .find_map(|i| {
            let drawn = simbatch::cli::instances::sample(&scenario, i, None);
            outside(drawn.vars[0]).then_some((i, drawn.vars[0]))
        })
        .expect("a restitution outside [0, 1] among 240 draws");
    let e = simbatch::cli::study::validate(&scenario, 0..scenario.instances).unwrap_err();
    let (line, column) = line_column(&coefficient, coefficient.find("\"$bounce\"").unwrap());
    assert_eq!(
        e.to_string(),
        format!(
            "bounce.toml: instance {first}: constraint[0].restitution (line {line}, column \
             {column}): \"$bounce\" drew {bounce} from vars.bounce = normal = [0.5, 0.25] \
             (unbounded) (line 7); accepted: a number in [0, 1]"
        )
    );
    // The same draws within range: the lift's tails (|z| up to 3) pass the dry pass, and the
    // friction drawn at the key is checked there too, named by the key (before, a negative
    // friction stopped the run only when its group came to run).
    let within = coefficient
        .replace("{ normal = [0.5, 0.25] }", "{ normal = [0.5, 0.01] }")
        .replace("{ normal = [0.3, 0.01] }", "{ normal = [0.3, 0.2] }");
    let scenario = Scenario::parse("bounce.toml", &within).expect("unbounded draws parse");
    assert!(scenario.var_ranges.len() == 1, "{:?}", scenario.var_ranges);
    let (first, friction) = (0..scenario.instances)
        .find_map(|i| {
            let drawn = simbatch::cli::instances::sample(&scenario, i, None);
            let [_, mu_s, mu_d] = drawn.constraints[0].unilateral.unwrap();
            assert_eq!(mu_s, mu_d, "one friction coefficient");
            (mu_s < 0.0).then_some((i, mu_s))
        })
        .expect("a friction < 0 among 240 draws of N(0.3, 0.2)");
    let e = simbatch::cli::study::validate(&scenario, 0..scenario.instances).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "bounce.toml: instance {first}: invalid constraint[0].friction: got {friction}; \
             accepted: a finite number ≥ 0"
        )
    );
    let fine = within.replace("{ normal = [0.3, 0.2] }", "{ normal = [0.3, 0.01] }");
    assert_ne!(fine, within);
    let scenario = Scenario::parse("bounce.toml", &fine).expect("unbounded draws parse");
    if let Err(e) = simbatch::cli::study::validate(&scenario, 0..scenario.instances) {
        panic!("{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every recorded input is the draw of its own stream, keyed by the field's path under the
/// seed and the instance (`sample::draw`): the paths are formatted only for random fields, and
/// this holds the keys to the names the study records (a changed key changes every study's
/// numbers). Fixed fields and `$var` references draw no stream: the ball's height is the
/// instance's radius, bit for bit.
#[test]
fn each_recorded_input_is_the_draw_of_its_named_stream() {
    let text = DEFAULT_SCENARIO.replacen(
        "gravity = [0.0, 0.0, -9.81]",
        "gravity = [{ uniform = [-0.5, 0.5] }, 0.0, -9.81]",
        1,
    );
    assert!(text.contains("uniform = [-0.5, 0.5]"), "{text}");
    let sc = Scenario::parse("keys.toml", &text).unwrap();
    let expected = [
        ("radius", "vars.radius", Scalar::LogUniform(0.02, 0.2)),
        ("gravity.x", "gravity.x", Scalar::Uniform(-0.5, 0.5)),
        ("ball.mass", "ball.mass", Scalar::LogUniform(0.1, 10.0)),
        ("ball.com.x", "ball.com.x", Scalar::Normal(0.0, 0.001)),
        ("ball.com.z", "ball.com.z", Scalar::Normal(0.0, 0.001)),
        (
            "constraint[0].rolling",
            "constraint[0].rolling",
            Scalar::Choice(vec![0.0, 1.0]),
        ),
        (
            "constraint[0].incline_deg",
            "constraint[0].incline_deg",
            Scalar::Uniform(5.0, 30.0),
        ),
    ];
    let names = simbatch::cli::study::input_names(&sc);
    for (name, _, _) in &expected {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
    for i in [0, 1, 7, 4_095, 99_999] {
        let s = simbatch::cli::study::sample(&sc, i, None);
        for (name, key, scalar) in &expected {
            let at = names.iter().position(|n| n == name).unwrap();
            let drawn = draw(scalar, sc.seed, key, i, &[]);
            assert_eq!(
                s.inputs[at].to_bits(),
                drawn.to_bits(),
                "instance {i}: {name}"
            );
        }
        assert_eq!(
            s.gravity[0].to_bits(),
            s.inputs[names.iter().position(|n| n == "gravity.x").unwrap()].to_bits()
        );
        assert_eq!(s.gravity[1..], [0.0, -9.81]);
        assert_eq!(
            s.bodies[0].q[6].to_bits(),
            s.vars[0].to_bits(),
            "instance {i}: z = $radius"
        );
    }
}
