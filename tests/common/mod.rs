//! Shared by the test suites: the GPU adapter, and the counting allocator.

pub mod allocations;

use std::path::PathBuf;
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

/// Simbody's golden files: `SIMBATCH_GOLDEN_DIR`, else the copy in `tests/data/golden`.
#[allow(dead_code)] // not every suite reads golden files
pub fn golden_dir() -> PathBuf {
    std::env::var_os("SIMBATCH_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden"))
}

/// A small deterministic generator for random test cases (Knuth's MMIX LCG, 53-bit fractions).
#[allow(dead_code)] // not every suite draws
pub struct Lcg(pub u64);

#[allow(dead_code)]
impl Lcg {
    /// A fraction in [0, 1).
    pub fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A number in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

/// Whether `device` refuses the f64 several-contact event kernel (NVIDIA hardware:
/// `gpu::events::NVIDIA_F64_SEVERAL_CONTACTS`); a test of that kernel in f64 then checks the
/// refusal instead.
#[allow(dead_code)]
pub fn refuses_f64_several_contacts(device: &GpuDevice) -> bool {
    simbatch::gpu::events::refuses_f64_several_contacts(device)
}
