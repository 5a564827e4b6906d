//! Time stepping against Simbody's trajectories (`tests/data/golden/trajectories.jsonl`, RKM at
//! 1e-11): every 0.05 s sample over 2 s within 1e-7 (physics.md §7), with RK4 at h = 5e-4 and
//! with RKM at accuracy 1e-10. Honours `SIMBATCH_GOLDEN_DIR`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use simbatch::golden::{Record, Report, compare_trajectories, read_jsonl, trajectory_batch};
use simbatch::prelude::*;

const TOL: f64 = 1e-7;

fn records() -> Vec<Record> {
    let dir = std::env::var_os("SIMBATCH_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden"));
    let path = dir.join("trajectories.jsonl");
    if !path.exists() && std::env::var_os("SIMBATCH_GOLDEN_DIR").is_some() {
        return Vec::new();
    }
    read_jsonl(&path).expect("trajectories.jsonl readable")
}

fn check(options: StepOptions, name: &str) {
    let records = records();
    let mut groups: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in &records {
        groups
            .entry(r.value["case"].as_str().unwrap_or("?").to_string())
            .or_default()
            .push(r);
    }
    let mut report = Report::default();
    for group in groups.values() {
        let (mut batch, handles) = trajectory_batch(group).unwrap();
        let mut stepper = Stepper::new(options).unwrap();
        compare_trajectories(group, &mut batch, &handles, &mut stepper, TOL, &mut report).unwrap();
    }
    println!("{name}:\n{report}");
    if !records.is_empty() {
        assert!(report.passed(), "{name}:\n{report}");
        assert_eq!(report.records, records.len());
    }
}

#[test]
fn rk4_follows_simbody_trajectories() {
    check(
        StepOptions {
            integrator: Integrator::Rk4 { step: 5e-4 },
            stabilization: Stabilization::None,
        },
        "RK4 h=5e-4",
    );
}

#[test]
fn rkm_follows_simbody_trajectories() {
    check(
        StepOptions {
            integrator: Integrator::RungeKuttaMerson {
                accuracy: 1e-10,
                max_step: 0.05,
            },
            stabilization: Stabilization::Projection { tolerance: 1e-11 },
        },
        "RKM accuracy 1e-10 with projection",
    );
}
