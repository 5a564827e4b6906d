//! `simbatch check`'s GPU stepping parity (`cli::check::gpu_trajectory_parity`): the stepping
//! kernel on Simbody's golden trajectories, the check a user (or a session on new hardware)
//! runs to see the kernels integrate as Simbody does.

use simbatch::cli::check::{GPU_F32_TRAJECTORY_TOL, gpu_trajectory_parity};
use simbatch::prelude::*;

use crate::common::device;

/// Every golden trajectory within the check's bounds: f32 within `GPU_F32_TRAJECTORY_TOL`, and
/// f64 (lavapipe has it) within the CPU's trajectory bound of 1e-7 — the same integrator and
/// step as the CPU's check, so f64 differs from the CPU by rounding alone.
#[test]
fn the_check_commands_trajectory_parity_passes() {
    let Some(device) = device() else { return };
    let records = simbatch::golden::trajectory_records(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden"),
    )
    .unwrap();
    let mut runs = vec![(Precision::F32, GPU_F32_TRAJECTORY_TOL)];
    if device.supports_f64 {
        runs.push((Precision::F64, 1e-7));
    }
    for (precision, tol) in runs {
        let report = gpu_trajectory_parity(&device, precision, &records, tol).unwrap();
        eprintln!("{precision:?}:\n{report}");
        assert!(report.passed(), "{precision:?}:\n{report}");
        assert_eq!(report.records, records.len());
        // The free bodies' states are compared, not only the prescribed plates'.
        assert!(report.worst["trajectory position"].count > 0);
    }
}
