//! Conformance with Simbody's own output (`tests/data/golden/`, or the directory named by
//! `SIMBATCH_GOLDEN_DIR`): every evaluation quantity within `1e-9 · max(1, |expected|)`.

use std::path::PathBuf;

use simbatch::golden::{Record, check_records_cpu, read_dir, read_jsonl};

/// Precision contract for the CPU f64 path (`physics.md` §7).
const TOL: f64 = 1e-9;

fn golden_dir() -> PathBuf {
    std::env::var_os("SIMBATCH_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden"))
}

fn check_file(name: &str, min_records: usize) {
    let dir = golden_dir();
    let path = dir.join(name);
    let records: Vec<Record> = if path.exists() {
        read_jsonl(&path).expect("golden file readable")
    } else if std::env::var_os("SIMBATCH_GOLDEN_DIR").is_some() {
        eprintln!(
            "{} not in SIMBATCH_GOLDEN_DIR; nothing to check for it",
            path.display()
        );
        return;
    } else {
        panic!("shipped golden file {} is missing", path.display());
    };
    assert!(
        records.len() >= min_records,
        "{}: only {} records",
        path.display(),
        records.len()
    );
    let report = check_records_cpu(&records, TOL).expect("records build into batches");
    println!("{name}:\n{report}");
    assert!(report.passed(), "{name}:\n{report}");
    assert_eq!(report.records, records.len(), "every record compared");
}

#[test]
fn sphere_on_plane_matches_simbody() {
    check_file("sphere_on_plane.jsonl", 1);
}

#[test]
fn point_on_plane_matches_simbody() {
    check_file("point_on_plane.jsonl", 1);
}

#[test]
fn brick_on_corners_matches_simbody_min_norm() {
    check_file("brick_on_corners.jsonl", 1);
}

/// Every other `*.jsonl` dropped into the directory is checked too (trajectory records are
/// counted as skipped here; the time-stepping tests cover them).
#[test]
fn every_file_in_golden_dir_is_checked() {
    let records = read_dir(&golden_dir()).expect("golden dir readable");
    assert!(!records.is_empty());
    let report = check_records_cpu(&records, TOL).expect("records build into batches");
    println!("{report}");
    assert!(report.passed(), "{report}");
}
