//! The user's sphere against Simbody's golden files and the built-in, on the CPU and the GPU.

use super::*;

/// Spheres get the user's constraint; point contacts keep the built-in.
fn make(s: &ContactStructure<'_>) -> simbatch::Result<Arc<dyn Constraint>> {
    if s.kind == "sphere_on_plane" {
        Ok(Arc::new(MySphereOnPlane {
            bodies: [s.plane, s.body],
            rolling: s.rolling,
            assembly: false,
        }))
    } else {
        builtin_contact(s)
    }
}

/// The golden sphere records, grouped by batch structure.
fn sphere_groups(records: &[Record]) -> BTreeMap<String, Vec<&Record>> {
    let mut groups: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records {
        if r.kind().unwrap() == "sphere_on_plane" {
            groups
                .entry(golden::group_key(r).unwrap())
                .or_default()
                .push(r);
        }
    }
    groups
}

fn golden_records() -> Vec<Record> {
    let records = golden::read_dir(&golden_dir()).unwrap();
    assert!(
        records
            .iter()
            .any(|r| r.kind().ok() == Some("sphere_on_plane")),
        "no sphere_on_plane records in {}",
        golden_dir().display()
    );
    records
}

/// Simbody's numbers within the built-in's own bound (1e-9), and the built-in's evaluation to
/// rounding (1e-12), every quantity, every sphere record.
#[test]
fn custom_sphere_matches_simbody_and_the_builtin_on_the_cpu() {
    let records = golden_records();
    let mut report = Report::default();
    let mut parity = Report::default();
    let mut compared = 0;
    for group in sphere_groups(&records).values() {
        let (batch, handles) = contact_batch_with(group, &make).unwrap();
        assert_eq!(
            batch.template().constraints()[0].constraint.kind_name(),
            "my_sphere_on_plane"
        );
        let ev = batch.evaluate();
        compare_contact(group, &batch, &handles, &ev, 1e-9, &mut report).unwrap();
        let (builtin, _) = contact_batch(group).unwrap();
        compare_evaluations(&ev, &builtin.evaluate(), 1e-12, &mut parity).unwrap();
        compared += group.len();
    }
    println!("against Simbody:\n{report}\nagainst the built-in:\n{parity}");
    assert!(compared > 0);
    assert_eq!(report.records, compared);
    assert!(report.passed(), "{report}");
    assert!(parity.passed(), "{parity}");
}

/// The same on the GPU (f32): the user's WGSL, spliced into the kernel, meets the built-in's
/// f32 bound against Simbody (2e-4) and agrees with the built-in's kernel within the same
/// bound (the formulas round differently in f32; ill-conditioned instances amplify that to
/// ~4e-5 in u̇).
#[test]
fn custom_sphere_matches_simbody_and_the_builtin_on_the_gpu() {
    let Some(device) = device() else { return };
    let records = golden_records();
    let mut report = Report::default();
    let mut parity = Report::default();
    for group in sphere_groups(&records).values() {
        let (batch, handles) = contact_batch_with(group, &make).unwrap();
        let mut gpu = GpuEvaluator::new(
            device.clone(),
            &batch,
            Precision::F32,
            GpuOptions::default(),
        )
        .unwrap();
        let ev = gpu.evaluate(&batch).unwrap();
        compare_contact(group, &batch, &handles, &ev, 2e-4, &mut report).unwrap();
        let (builtin, _) = contact_batch(group).unwrap();
        let mut builtin_gpu = GpuEvaluator::new(
            device.clone(),
            &builtin,
            Precision::F32,
            GpuOptions::default(),
        )
        .unwrap();
        let reference = builtin_gpu.evaluate(&builtin).unwrap();
        compare_evaluations(&ev, &reference, 2e-4, &mut parity).unwrap();
    }
    println!("GPU f32 against Simbody:\n{report}\nagainst the built-in's kernel:\n{parity}");
    assert!(report.records > 0);
    assert!(report.passed(), "{report}");
    assert!(parity.passed(), "{parity}");
}
