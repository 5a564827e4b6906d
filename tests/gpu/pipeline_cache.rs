//! The pipeline cache on disk (`gpu::pipeline_cache`): written after a device builds a
//! kernel, read by the next device, and never a cause of failure — a corrupt file, a file made
//! for another adapter, a directory that cannot be written, or the cache switched off all leave
//! the kernels' answers as they are. On lavapipe the driver keeps no compiled code in the
//! cache (its data is wgpu's header and the driver's own), so what these tests prove is the
//! plumbing; that a driver's code comes back from the file is measured on hardware (README).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use simbatch::gpu::{GpuDevice, GpuEvaluator, GpuOptions, PipelineCacheSetting, Precision};

use crate::common::device;

/// wgpu's mark at the start of its pipeline cache data.
const MAGIC: &[u8] = b"WGPUPLCH";

/// An empty directory of this test's own under the system's temporary directory.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("simbatch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The constrained u̇ of a small batch of rolling balls evaluated on `device` (builds the
/// evaluation kernel on a fresh device).
fn udot_on(device: &Arc<GpuDevice>) -> Vec<f64> {
    let batch = simbatch::scenarios::rolling_balls(8).unwrap();
    let mut evaluator = GpuEvaluator::new(
        device.clone(),
        &batch,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap();
    let evaluation = evaluator.evaluate(&batch).unwrap();
    assert_eq!(evaluation.flagged(), 0);
    device.fault().expect("no error left behind on the device");
    evaluation.udot.clone()
}

/// A device keeping its pipeline cache in `dir`.
fn device_in(dir: &Path) -> Arc<GpuDevice> {
    Arc::new(GpuDevice::with_pipeline_cache(PipelineCacheSetting::Directory(dir.into())).unwrap())
}

/// The one file a cache directory holds.
fn only_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one cache file, nothing left aside: {files:?}"
    );
    files[0].clone()
}

#[test]
fn a_device_writes_its_pipeline_cache_and_the_next_one_reads_it() {
    let Some(shared) = device() else {
        return;
    };
    if shared.info.backend != wgpu::Backend::Vulkan {
        eprintln!(
            "no application-managed pipeline cache on {:?}",
            shared.info.backend
        );
        return;
    }
    let reference = udot_on(&shared);
    let dir = scratch_dir("pipeline-cache");

    let first = device_in(&dir);
    let disk = first
        .kernels
        .disk()
        .expect("Vulkan offers a pipeline cache");
    assert_eq!(disk.loaded_bytes(), 0, "nothing there yet");
    assert_eq!(udot_on(&first), reference);
    // Written at the first build: wgpu's header and the driver's data.
    let path = only_file(&dir);
    assert_eq!(path, disk.path());
    let written = std::fs::read(&path).unwrap();
    assert!(
        written.starts_with(MAGIC),
        "{:?}",
        &written[..8.min(written.len())]
    );
    assert_eq!(disk.saved_bytes(), written.len());
    assert!(first.describe().contains(&path.display().to_string()));
    drop(first);

    // The next device (the next process, in use) reads it, and its kernels answer the same.
    let second = device_in(&dir);
    let disk = second.kernels.disk().unwrap();
    assert_eq!(disk.loaded_bytes(), written.len());
    assert_eq!(udot_on(&second), reference);
    drop(second);

    // A corrupt file is passed over and replaced by good data.
    std::fs::write(&path, b"not a pipeline cache").unwrap();
    let third = device_in(&dir);
    assert_eq!(udot_on(&third), reference);
    drop(third);
    assert!(std::fs::read(&path).unwrap().starts_with(MAGIC));

    // Data made for another adapter (the vendor in wgpu's adapter key changed) is an error
    // wgpu raises even when told to fall back: caught, started afresh, no fault on the device.
    let mut foreign = std::fs::read(&path).unwrap();
    foreign[17 + 3] ^= 0xff;
    std::fs::write(&path, &foreign).unwrap();
    let fourth = device_in(&dir);
    assert_eq!(fourth.kernels.disk().unwrap().loaded_bytes(), 0);
    assert_eq!(udot_on(&fourth), reference);
    drop(fourth);
    let rewritten = std::fs::read(&path).unwrap();
    // Magic, versions, backend and adapter key as the first device wrote them.
    assert_eq!(rewritten[..32], written[..32], "rewritten for this adapter");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_pipeline_cache_switched_off_or_unwritable_changes_nothing() {
    let Some(shared) = device() else {
        return;
    };
    let reference = udot_on(&shared);

    let off = Arc::new(GpuDevice::with_pipeline_cache(PipelineCacheSetting::Off).unwrap());
    assert!(off.kernels.disk().is_none());
    assert!(off.describe().contains("no pipeline cache"));
    assert_eq!(udot_on(&off), reference);

    // A directory that cannot be made (a file is in its place): logged, never an error.
    let dir = scratch_dir("pipeline-cache-blocked");
    std::fs::create_dir_all(&dir).unwrap();
    let blocked = dir.join("a-file");
    std::fs::write(&blocked, b"in the way").unwrap();
    let unwritable = device_in(&blocked.join("cache"));
    assert_eq!(udot_on(&unwritable), reference);
    if let Some(disk) = unwritable.kernels.disk() {
        assert_eq!(disk.saved_bytes(), 0);
    }
    drop(unwritable);
    assert_eq!(std::fs::read(&blocked).unwrap(), b"in the way");
    std::fs::remove_dir_all(&dir).unwrap();
}
