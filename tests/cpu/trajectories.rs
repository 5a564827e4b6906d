//! Time stepping against Simbody's trajectories (`tests/data/golden/trajectories.jsonl`, RKM at
//! 1e-11): every 0.05 s sample over 2 s within 1e-7 (physics.md §7), with RK4 at h = 5e-4 and
//! with RKM at accuracy 1e-10. Honours `SIMBATCH_GOLDEN_DIR`. The GPU runs the same check in
//! `tests/gpu/step/`.

use std::path::Path;

use simbatch::golden::{check_trajectories, trajectory_records};
use simbatch::prelude::*;

const TOL: f64 = 1e-7;

fn check(options: StepOptions, name: &str) {
    let records =
        trajectory_records(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden"))
            .expect("trajectories.jsonl readable");
    let report = check_trajectories(&records, || Stepper::new(options), TOL).unwrap();
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
