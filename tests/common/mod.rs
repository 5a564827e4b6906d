//! Shared by the GPU test suites.

use std::sync::{Arc, OnceLock};

use simbatch::gpu::GpuDevice;

/// The adapter wgpu finds, opened once per test binary. With `CI=true` a missing adapter fails
/// the test (CI installs lavapipe); elsewhere the test says so and passes.
pub fn device() -> Option<Arc<GpuDevice>> {
    static DEVICE: OnceLock<Option<Arc<GpuDevice>>> = OnceLock::new();
    DEVICE
        .get_or_init(|| match GpuDevice::new() {
            Ok(d) => {
                eprintln!("GPU: {}", d.describe());
                Some(Arc::new(d))
            }
            Err(e) => {
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!(
                        "CI=true but no GPU adapter (install mesa-vulkan-drivers for lavapipe): {e}"
                    );
                }
                eprintln!("no GPU adapter, GPU test not run: {e}");
                None
            }
        })
        .clone()
}
