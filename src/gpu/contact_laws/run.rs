//! Running a laws kernel over cases the host gives: one invocation per case, its values in one
//! input buffer and its answer in one output buffer, in chunks within the adapter's limits. The
//! one-contact and the several-contact laws share it.

use crate::error::{Error, Result};
use crate::gpu::Precision;
use crate::gpu::buffers::{
    Staging, gpu_allocation_error, layout_entry, read_back_into, write_reals,
};
use crate::gpu::device::GpuDevice;
use crate::gpu::shader::KernelSource;

/// Runs entry point `kernel.0` of `source`, built for workgroups of `kernel.1` invocations
/// (bindings: 0 the cases, 1 the answers, 2 a `vec4<u32>` whose `x` is the case count), over
/// `count` cases of `lens.0` values each, case `k`'s from `case_values(k)`, and returns `lens.1`
/// answer values per case, in case order. F64 needs `SHADER_F64`.
pub(super) fn run_cases(
    device: &GpuDevice,
    precision: Precision,
    source: &KernelSource,
    (entry, workgroup): (&'static str, u32),
    (case_len, answer_len): (usize, usize),
    count: usize,
    mut case_values: impl FnMut(usize) -> Vec<f64>,
) -> Result<Vec<f64>> {
    if precision == Precision::F64 && !device.supports_f64 {
        return Err(Error::InvalidOption {
            option: "precision",
            value: "f64".into(),
            accepted: format!("f32 on {} (no SHADER_F64)", device.info.name),
        });
    }
    if count == 0 {
        return Ok(Vec::new());
    }
    let d = &device.device;
    let bytes = precision.bytes() as u64;
    let by_binding = device.limits.max_storage_buffer_binding_size / (case_len as u64 * bytes);
    let by_dispatch = device.limits.max_compute_workgroups_per_dimension as u64 * workgroup as u64;
    let chunk = by_binding.min(by_dispatch).clamp(1, count as u64) as usize;

    let layout = device.kernels.layout(
        d,
        "simbatch contact laws",
        &[
            layout_entry(0, wgpu::BufferBindingType::Storage { read_only: true }),
            layout_entry(1, wgpu::BufferBindingType::Storage { read_only: false }),
            layout_entry(2, wgpu::BufferBindingType::Uniform),
        ],
    );
    source.check()?;
    let pipeline = device
        .kernels
        .pipeline(d, &layout, "simbatch contact laws", &source.text, entry)
        .map_err(|e| Error::Gpu(format!("the contact laws' kernel: {e}")))?;

    let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let make = |label, size: u64, usage| {
        d.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(16),
            usage,
            mapped_at_creation: false,
        })
    };
    let input = make(
        "simbatch law cases",
        chunk as u64 * case_len as u64 * bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    );
    let output_size = chunk as u64 * answer_len as u64 * bytes;
    let output = make(
        "simbatch law answers",
        output_size,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    );
    let staging = Staging::new(d, "simbatch law staging", output_size);
    let uniform = make(
        "simbatch law launch",
        16,
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    );
    if let Some(e) = pollster::block_on(oom.pop()) {
        return Err(gpu_allocation_error(
            device,
            chunk,
            (output_size * 2 + chunk as u64 * case_len as u64 * bytes) as u128,
            Some(e),
        ));
    }
    let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("simbatch contact laws"),
        layout: &layout.bind_group,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: input.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: output.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: uniform.as_entire_binding(),
            },
        ],
    });

    let mut answers = Vec::with_capacity(count * answer_len);
    let mut values: Vec<f64> = Vec::new();
    for first in (0..count).step_by(chunk) {
        let part = chunk.min(count - first);
        write_reals(
            device,
            precision,
            &input,
            0,
            part * case_len,
            (first..first + part).flat_map(&mut case_values),
        )?;
        device.queue.write_buffer(
            &uniform,
            0,
            bytemuck::cast_slice(&[part as u32, 0u32, 0u32, 0u32]),
        );
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("simbatch contact laws"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("simbatch contact laws"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(part.div_ceil(workgroup as usize) as u32, 1, 1);
        }
        device.queue.submit([encoder.finish()]);
        let size = part as u64 * answer_len as u64 * bytes;
        read_back_into(
            device,
            &staging,
            &[(&output, 0, size)],
            &mut values,
            |view, out| match precision {
                Precision::F32 => out.extend(
                    view.chunks_exact(4)
                        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64),
                ),
                Precision::F64 => {
                    out.extend(view.chunks_exact(8).map(|b| {
                        f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                    }))
                }
            },
        )?;
        answers.extend_from_slice(&values);
    }
    Ok(answers)
}
