//! Helpers every GPU kernel host shares: the workgroup size, mapped readback, bind-group
//! layout entries, and the typed error for buffers the device cannot make.

use crate::error::{Error, Result};
use crate::gpu::device::GpuDevice;

pub(crate) const WORKGROUP: usize = 64;

/// Maps the first `size` bytes of a staging buffer, waits for the GPU, hands them to `f` while
/// mapped, and unmaps.
pub(crate) fn map_read<R>(
    device: &GpuDevice,
    buffer: &wgpu::Buffer,
    size: u64,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R> {
    let slice = buffer.slice(0..size);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device
        .device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
    rx.recv()
        .map_err(|e| Error::Gpu(format!("readback lost: {e}")))?
        .map_err(|e| Error::Gpu(format!("readback failed: {e}")))?;
    let view = slice
        .get_mapped_range()
        .map_err(|e| Error::Gpu(format!("readback failed: {e}")))?;
    let out = f(&view);
    drop(view);
    buffer.unmap();
    Ok(out)
}

/// A compute-stage buffer binding of a bind group layout.
pub(crate) fn layout_entry(
    binding: u32,
    ty: wgpu::BufferBindingType,
) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// The typed error for GPU buffers of `instances` instances (`bytes` in all) that could not be
/// made: out of memory, or past a limit of the adapter.
pub(crate) fn gpu_allocation_error(
    device: &GpuDevice,
    instances: usize,
    bytes: u128,
    error: Option<wgpu::Error>,
) -> Error {
    match error {
        Some(wgpu::Error::OutOfMemory { .. }) | None => Error::OutOfMemory {
            what: format!("GPU buffers on {}", device.info.name),
            count: format!("{instances} instances"),
            bytes,
            where_: "GPU",
        },
        Some(e) => Error::Gpu(format!(
            "buffers for {instances} instances could not be made on {}: {e}",
            device.info.name
        )),
    }
}
