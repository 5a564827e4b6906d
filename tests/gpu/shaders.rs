//! The kernels' own numerics on the device: f64 kernels compute sin and cos themselves
//! (`shaders/trig_f64.wgsl`) because Vulkan's sin, cos and pow take 32-bit floats only (on f64
//! values lavapipe returns 0, 1 and 0). Checked against Rust's libm on the adapter. And the
//! device's kernel cache (`gpu::cache`): what a second stepper for a template builds.

use crate::common::device;

use simbatch::gpu::{GpuDevice, Precision, shader};
use wgpu::util::DeviceExt;

/// Runs `sin_cos_real` of the f64 precision prelude on `xs`: (sin, cos) per value.
fn sin_cos_on(device: &GpuDevice, xs: &[f64]) -> Vec<(f64, f64)> {
    let source = shader::prelude(Precision::F64)
        + "@group(0) @binding(0) var<storage, read_write> data: array<f64>;\n\
           @compute @workgroup_size(64)\n\
           fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n\
               let n = arrayLength(&data) / 3u;\n\
               if id.x >= n { return; }\n\
               let sc = sin_cos_real(data[id.x]);\n\
               data[n + id.x] = sc.x;\n\
               data[2u * n + id.x] = sc.y;\n\
           }\n";
    let d = &device.device;
    let mut contents = xs.to_vec();
    contents.resize(3 * xs.len(), 0.0);
    let size = (contents.len() * 8) as u64;
    let data = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("sin_cos data"),
        contents: bytemuck::cast_slice(&contents),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    });
    let staging = d.create_buffer(&wgpu::BufferDescriptor {
        label: Some("sin_cos staging"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("sin_cos"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("sin_cos"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("sin_cos"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    let mut encoder = d.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(xs.len().div_ceil(64) as u32, 1, 1);
    }
    encoder.copy_buffer_to_buffer(&data, 0, &staging, 0, size);
    device.queue.submit([encoder.finish()]);
    staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    d.poll(wgpu::PollType::wait_indefinitely()).unwrap();
    let view = staging.slice(..).get_mapped_range().unwrap();
    let out: &[f64] = bytemuck::cast_slice(&view);
    let n = xs.len();
    (0..n).map(|k| (out[n + k], out[2 * n + k])).collect()
}

#[test]
fn f64_kernels_compute_sin_and_cos_to_libm_accuracy() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "lavapipe offers SHADER_F64"
        );
        return;
    }
    let half_pi = std::f64::consts::FRAC_PI_2;
    let mut xs = vec![
        0.0, -0.0, 1e-300, -1e-8, 0.5, 1.0, 2.0, 3.0, 100.0, -2.5e5, 1e6, 3.3e9,
    ];
    // Next to multiples of π/2, where the reduction cancels most digits.
    for k in [1.0f64, 2.0, 3.0, 4.0, 7.0, 1e3, 1e6, 2e9 / half_pi] {
        let m = (k * half_pi).round_ties_even();
        let base = k * half_pi;
        xs.extend([base, -base, base + 1e-9, base - 1e-7, m]);
    }
    // A deterministic spread over [−1e4, 1e4] (the angles and phases of motion laws).
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        xs.push(((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2e4);
    }
    let out = sin_cos_on(&device, &xs);
    // A software adapter keeps the reduction's order: libm's accuracy. A hardware driver may
    // fold the five parts of π/2 into one rounded constant (NVIDIA 580 on an H200 did: sin 100
    // off by 3.3e-15, cos by 2.0e-15, which is exactly 64 · (π/2 − fl(π/2)) = 3.9e-15 in the
    // reduced angle), leaving |x| · 3.9e-17; the bound allows 2.5 times that.
    let software = device.info.device_type == wgpu::DeviceType::Cpu;
    let mut worst = 0.0f64;
    for (x, (s, c)) in xs.iter().zip(&out) {
        let e = (s - x.sin()).abs().max((c - x.cos()).abs());
        let bound = if software {
            4e-16
        } else {
            4e-16 + 1e-16 * x.abs()
        };
        assert!(
            e <= bound,
            "x = {x:e}: sin {s:e} vs {:e}, cos {c:e} vs {:e}",
            x.sin(),
            x.cos()
        );
        worst = worst.max(e);
    }
    println!(
        "f64 sin/cos on the GPU: worst absolute difference from libm {worst:.2e} over {} values",
        xs.len()
    );
    // Out of range and non-finite: NaN, so a state built on it is flagged, never wrong.
    let bad = [4e9, -1e12, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
    for (x, (s, c)) in bad.iter().zip(sin_cos_on(&device, &bad)) {
        assert!(s.is_nan() && c.is_nan(), "x = {x}: ({s}, {c})");
    }
}

/// A device keeps the kernels it built: a second stepper for the same template (a new
/// environment, the next shard of a study) builds nothing and steps the same bits; another
/// integrator builds its own stepping kernel only; the evaluation kernel is built by the first
/// evaluation, not by a stepper that only steps.
#[test]
fn a_second_stepper_for_the_same_template_reuses_the_kernels() {
    use simbatch::prelude::*;
    if device().is_none() {
        return;
    }
    // A device of its own, so other tests' kernels do not count.
    let device = std::sync::Arc::new(GpuDevice::new().unwrap());
    let rk4 = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let mut first = simbatch::scenarios::rolling_balls(64).unwrap();
    let mut second = first.clone();
    Stepper::on_gpu(rk4, device.clone(), Precision::F32)
        .unwrap()
        .advance(&mut first, 0.01)
        .unwrap();
    let built = device.kernels.built();
    assert_eq!(
        built, 1,
        "one stepping kernel: the evaluation kernel waits for an evaluation"
    );
    Stepper::on_gpu(rk4, device.clone(), Precision::F32)
        .unwrap()
        .advance(&mut second, 0.01)
        .unwrap();
    assert_eq!(
        device.kernels.built(),
        built,
        "nothing built for the second stepper"
    );
    let ball = first.template().free_bodies()[0];
    assert_eq!(first.q(ball).unwrap(), second.q(ball).unwrap());
    assert_eq!(first.u(ball).unwrap(), second.u(ball).unwrap());
    assert!(first.time().iter().all(|t| (t - 0.01).abs() < 1e-12));
    let euler = StepOptions {
        integrator: Integrator::SemiImplicitEuler { step: 1e-3 },
        ..rk4
    };
    Stepper::on_gpu(euler, device.clone(), Precision::F32)
        .unwrap()
        .advance(&mut second, 0.01)
        .unwrap();
    assert_eq!(
        device.kernels.built(),
        built + 1,
        "Euler's stepping kernel only"
    );
    // The first evaluation builds the evaluation kernel, once for both steppers' template.
    let mut stepper = Stepper::on_gpu(rk4, device.clone(), Precision::F32).unwrap();
    stepper.step(&mut second, 1).unwrap();
    let on_gpu = stepper.evaluator_mut().evaluate(&second).unwrap();
    assert_eq!(on_gpu.flagged(), 0);
    assert_eq!(device.kernels.built(), built + 2, "the evaluation kernel");
    assert_eq!(device.kernels.len(), 3);
}

/// wgpu panics on an error raised outside any error scope unless told otherwise; the library
/// keeps it for the next readback to return (an H200 lost its device under one test and every
/// later buffer write panicked). On a device of its own, so that the shared one's other users
/// never see this error.
#[test]
fn an_uncaptured_gpu_error_is_returned_once_and_the_device_goes_on() {
    if device().is_none() {
        return;
    }
    let own = std::sync::Arc::new(GpuDevice::new().unwrap());
    assert!(own.fault().is_ok());
    let small = own.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("sixteen bytes"),
        size: 16,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    // Past its end: a validation error, and no scope to catch it.
    own.queue.write_buffer(&small, 64, &[0u8; 16]);
    let fault = own.fault().expect_err("the write past the end is reported");
    let simbatch::Error::Gpu(message) = &fault else {
        panic!("not a GPU error: {fault:?}");
    };
    assert!(message.contains("write_buffer"), "{message}");
    assert!(own.fault().is_ok(), "reported once");
    // The device still evaluates, and agrees with the shared device.
    let batch = simbatch::scenarios::rolling_balls(8).unwrap();
    let options = simbatch::gpu::GpuOptions::default();
    let mut here =
        simbatch::gpu::GpuEvaluator::new(own.clone(), &batch, Precision::F32, options).unwrap();
    let mut there =
        simbatch::gpu::GpuEvaluator::new(device().unwrap(), &batch, Precision::F32, options)
            .unwrap();
    let (a, b) = (
        here.evaluate(&batch).unwrap(),
        there.evaluate(&batch).unwrap(),
    );
    assert_eq!(a.udot, b.udot);
}
