//! `docs/scenario-format.md`, the reference of every scenario key: its complete example runs,
//! and it names every key the reader accepts.

use super::*;

/// `docs/scenario-format.md`, the reference of every key.
const FORMAT: &str = include_str!("../../../docs/scenario-format.md");

/// The keys a scenario table accepts, read from the reader's own error for an unknown key
/// `zzz_unknown` put in at `anchor` (serde's "expected one of `a`, `b`" or the prescribed
/// laws' "accepted: a, b").
fn accepted_keys(text: &str, anchor: &str, line: &str) -> Vec<String> {
    assert!(text.contains(anchor), "{anchor}");
    let text = text.replacen(anchor, &format!("{anchor}{line}"), 1);
    let message = Scenario::parse("keys.toml", &text)
        .expect_err(anchor)
        .to_string();
    let list = if let Some((_, list)) = message.split_once("expected one of ") {
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect::<Vec<_>>()
    } else {
        let (_, list) = message.split_once("accepted: ").expect("a list of keys");
        list.split(", ").map(str::to_string).collect()
    };
    assert!(list.len() >= 3, "{message}");
    list
}

/// The reference's complete example runs, and the reference names every key the reader
/// accepts: each table's keys come from the reader itself, so a key added to the reader and
/// not to the page fails here.
#[test]
fn the_scenario_reference_names_every_key_and_its_example_runs() {
    let example = FORMAT
        .split("```toml\n")
        .nth(1)
        .and_then(|block| block.split("```").next())
        .expect("a complete example in the reference");
    let s = Scenario::parse("example.toml", example).unwrap();
    assert_eq!(
        (s.instances, s.bodies.len(), s.prescribed.len()),
        (1000, 2, 1)
    );
    assert_eq!(s.constraints.len(), 2);
    assert!(s.constraints[1].unilateral().is_some());

    // It runs (fewer instances, a shorter time): every draw passes the dry pass.
    let dir = scratch("format-example");
    let small = example
        .replace("instances = 1000", "instances = 24")
        .replace("duration = 1.0", "duration = 0.05");
    let (_, _, o) = run_scenario(&dir, "example.toml", &small);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let unknown = "zzz_unknown = 1\n";
    let mut keys = Vec::new();
    keys.extend(accepted_keys(example, "seed = 7\n", unknown));
    keys.extend(accepted_keys(example, "name = \"particle\"\n", unknown));
    keys.extend(accepted_keys(
        example,
        "kind = \"point_on_plane\"\n",
        unknown,
    ));
    keys.extend(accepted_keys(example, "integrator = \"rk4\"\n", unknown));
    keys.extend(accepted_keys(example, "interval = 0.05\n", unknown));
    for kind in ["constant", "tilting", "polynomial"] {
        let text = example.replace(
            "prescribed = { kind = \"tilting\", angle_amplitude = [0.1, 0.0], angle_rate = [2.0, 0.0] }",
            &format!("prescribed = {{ kind = \"{kind}\" }}"),
        );
        keys.extend(accepted_keys(
            &text,
            &format!("kind = \"{kind}\""),
            ", zzz_unknown = 1",
        ));
    }
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !FORMAT.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/scenario-format.md does not name {missing:?}"
    );
    for distribution in simbatch::sample::DISTRIBUTIONS {
        assert!(
            FORMAT.contains(&format!("{{ {distribution} = [")),
            "docs/scenario-format.md does not show {distribution}"
        );
    }
}
