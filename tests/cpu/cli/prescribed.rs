//! Prescribed bodies: the tilting plate against Simbody, errors located in the file.

use super::*;

/// A scenario with a tilting plate, written from Simbody's `tilt_trajectories.jsonl` (every
/// number fixed to the record's), runs through the study pipeline and lands on Simbody's final
/// sample within the trajectory bound (1e-7): the CLI drives the plate by its law at every
/// stage. Its energy change is the plate's work.
#[test]
fn tilting_plate_scenario_follows_simbody() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden/tilt_trajectories.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let rotation_vector = |q: &[f64]| -> [f64; 3] {
        let s = (q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
        let angle = 2.0 * s.atan2(q[0]);
        if s == 0.0 {
            [0.0; 3]
        } else {
            [q[1] / s * angle, q[2] / s * angle, q[3] / s * angle]
        }
    };
    let list = |v: &serde_json::Value| -> String {
        let items: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|x| format!("{:?}", x.as_f64().unwrap()))
            .collect();
        format!("[{}]", items.join(", "))
    };
    let vec3 = |v: [f64; 3]| format!("[{:?}, {:?}, {:?}]", v[0], v[1], v[2]);
    let dir = scratch("tilting");
    for (k, line) in text.lines().take(2).enumerate() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let m = &r["plane_motion"];
        let b = &r["body"];
        let q: Vec<f64> = b["rotation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let base: Vec<f64> = m["base_rotation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let fields = [
            "axis1",
            "axis2",
            "angle_amplitude",
            "angle_rate",
            "angle_phase",
            "origin_offset",
            "origin_amplitude",
            "origin_rate",
            "origin_phase",
        ]
        .map(|f| format!("{f} = {}", list(&m[f])))
        .join(", ");
        let scenario = format!(
            r#"name = "tilt-{k}"
instances = 1
gravity = {gravity}

[[body]]
name = "plate"
prescribed = {{ kind = "tilting", {fields}, base_rotation = {base} }}

[[body]]
name = "ball"
mass = {mass:?}
com = {com}
inertia = {inertia}
position = {position}
rotation = {rotation}
velocity = {velocity}
angular_velocity = {angular}

[[constraint]]
kind = "sphere_on_plane"
plane = "plate"
body = "ball"
rolling = true
radius = {radius:?}
sphere_center = {center}

[simulation]
integrator = "rk4"
step = 5e-4
stabilization = "none"
duration = 2.0
assemble = false
"#,
            gravity = list(&r["gravity"]),
            base = vec3(rotation_vector(&base)),
            mass = b["mass"].as_f64().unwrap(),
            com = list(&b["com"]),
            inertia = list(&b["inertia_com"]),
            position = list(&b["position"]),
            rotation = vec3(rotation_vector(&q)),
            velocity = list(&b["lin_vel"]),
            angular = list(&b["ang_vel"]),
            radius = r["radius"].as_f64().unwrap(),
            center = list(&r["sphere_center"]),
        );
        let sc =
            Scenario::parse("tilt.toml", &scenario).unwrap_or_else(|e| panic!("{e}\n{scenario}"));
        assert_eq!(sc.prescribed.len(), 1);
        let out = dir.join(format!("tilt{k}"));
        run_study(&sc, None, Backend::Cpu, &out, false, true).unwrap();
        let (columns, rows) = output::read_csv(&out.join("results.csv")).unwrap();
        let col = |name: &str| {
            let at = columns
                .iter()
                .position(|c| c == name)
                .unwrap_or_else(|| panic!("{name}"));
            rows[0].1[at]
        };
        assert_eq!(col("status"), 0.0);
        let last = r["samples"].as_array().unwrap().last().unwrap().clone();
        let expect = |key: &str, i: usize| last[key][i].as_f64().unwrap();
        for (i, f) in ["x", "y", "z"].iter().enumerate() {
            let got = col(&format!("ball.{f}"));
            assert!(
                (got - expect("position", i)).abs() < 1e-7,
                "line {}: ball.{f} {got} vs {}",
                k + 1,
                expect("position", i)
            );
            let got = col(&format!("ball.v{f}"));
            assert!(
                (got - expect("lin_vel", i)).abs() < 1e-7,
                "line {}: ball.v{f}",
                k + 1
            );
            let got = col(&format!("ball.w{f}"));
            assert!(
                (got - expect("ang_vel", i)).abs() < 1e-7,
                "line {}: ball.w{f}",
                k + 1
            );
        }
        let e0 = r["samples"][0]["energy"].as_f64().unwrap();
        assert!((col("energy") - last["energy"].as_f64().unwrap()).abs() < 1e-7);
        assert!((col("energy_change") - (last["energy"].as_f64().unwrap() - e0)).abs() < 1e-7);
        assert!(col("driven_work").abs() > 1e-3, "the plate does work");
        assert!(
            col("energy_error").abs() < 1e-8,
            "energy error {}",
            col("energy_error")
        );
    }
}

/// Prescribed bodies in scenario files are checked like everything else: located errors
/// naming the field and what is accepted.
#[test]
fn prescribed_body_errors_are_located() {
    let base = |prescribed: &str, extra: &str| {
        format!(
            "name = \"p\"\ninstances = 2\n\n[[body]]\nname = \"plate\"\nprescribed = {prescribed}\n{extra}\n\
             [[body]]\nname = \"ball\"\nmass = 1.0\ninertia = {{ solid_sphere = 0.1 }}\n\n\
             [[constraint]]\nkind = \"sphere_on_plane\"\nplane = \"plate\"\nbody = \"ball\"\nradius = 0.1\n\n\
             [simulation]\nduration = 0.1\n"
        )
    };
    for (prescribed, extra, expect) in [
        (
            "{ kind = \"wobble\" }",
            "",
            "accepted: constant, tilting, polynomial",
        ),
        (
            "{ kind = \"tilting\", axis3 = [0, 0, 1] }",
            "",
            "body[0].prescribed.axis3",
        ),
        (
            "{ kind = \"tilting\", angle_rate = [1.0] }",
            "",
            "an array of 2 scalars",
        ),
        (
            "{ kind = \"tilting\" }",
            "mass = 2.0",
            "does not apply to a prescribed body",
        ),
        (
            "{ kind = \"polynomial\", position = [[0, 1, 2, 3, 4, 5, 6], [0], [0]] }",
            "",
            "degree ≤ 5",
        ),
        (
            "{ kind = \"constant\", velocity = [1, \"$nope\", 0] }",
            "",
            "names no [vars] entry",
        ),
    ] {
        let text = base(prescribed, extra);
        let err = Scenario::parse("p.toml", &text)
            .expect_err(expect)
            .to_string();
        assert!(err.contains(expect), "{expect}: {err}");
        assert!(err.starts_with("p.toml:"), "{err}");
        assert!(
            !err.contains("  "),
            "a run of spaces in the message: {err:?}"
        );
    }
    // A prescribed body cannot be the moving body of a contact.
    let text = base("{ kind = \"tilting\" }", "")
        .replace("body = \"ball\"\nradius", "body = \"plate\"\nradius");
    let err = Scenario::parse("p.toml", &text).unwrap_err().to_string();
    assert!(err.contains("is a prescribed body"), "{err}");
    assert!(
        !err.contains("  "),
        "a run of spaces in the message: {err:?}"
    );
    // Polynomial and constant laws run.
    for prescribed in [
        "{ kind = \"polynomial\", angles = [[0.0, 0.2], [0.0, { uniform = [-0.1, 0.1] }], [0.0]] }",
        "{ kind = \"constant\", angular_velocity = [0.0, 0.0, 1.0] }",
    ] {
        let sc = Scenario::parse("p.toml", &base(prescribed, "")).unwrap();
        let dir = scratch("prescribed-kinds");
        run_study(&sc, None, Backend::Cpu, &dir.join("out"), false, true).unwrap();
        let (columns, rows) = output::read_csv(&dir.join("out/results.csv")).unwrap();
        let status = columns.iter().position(|c| c == "status").unwrap();
        assert!(rows.iter().all(|(_, v)| v[status] == 0.0), "{prescribed}");
    }
}
