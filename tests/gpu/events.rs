//! Event-driven stepping of unilateral contact on the GPU (`gpu::events`, stage 1 of
//! `docs/gpu-unilateral.md`: one ball, one unilateral contact) against the CPU's event path
//! (`cpu::unilateral::run_batch_resuming`) on random balls — drawn masses, radii, heights,
//! velocities, spins, restitution and friction, under gravity tilted up to 30° (an incline) —
//! with fixed steps and under error control, in one call and cut into calls. The f32 kernel
//! against the closed forms of `unilateral.md` §9 is in `events_closed_form.rs`; studies through
//! scenario files, and `simbatch check`'s unilateral parity, in `event_studies.rs`.

use simbatch::batch::status;
use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactRecord, EventOptions, UnilateralContact, run_batch_resuming,
};
use simbatch::gpu::events::GpuEventStepper;
use simbatch::gpu::{GpuOptions, Precision};
use simbatch::prelude::*;

use crate::common::{Lcg, device};

/// `n` balls on Ground's plane z = 0, each with its own draws; the contact and coefficients.
pub(crate) fn balls(n: usize, seed: u64) -> (Batch, ConstraintId, Vec<Coefficients>) {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    let mut rng = Lcg(seed);
    let mut coefficients = Vec::with_capacity(n);
    for i in 0..n {
        let (mass, radius) = (rng.range(0.5, 2.0), rng.range(0.05, 0.2));
        let inertia = 0.4 * mass * radius * radius;
        batch
            .set_mass_properties(
                ball,
                i,
                mass,
                [0.0; 3],
                [inertia, inertia, inertia, 0.0, 0.0, 0.0],
            )
            .unwrap();
        batch.set_param(contact, "radius", i, &[radius]).unwrap();
        let (tilt, heading) = (rng.range(0.0, 0.5), rng.range(-3.0, 3.0));
        let g = [
            9.81 * tilt.sin() * heading.cos(),
            9.81 * tilt.sin() * heading.sin(),
            -9.81 * tilt.cos(),
        ];
        batch.set_gravity(i, g).unwrap();
        let height = if rng.next() < 0.3 {
            0.0
        } else {
            rng.range(0.0, 0.5)
        };
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, radius + height])
            .unwrap();
        let vz = if height == 0.0 {
            0.0
        } else {
            rng.range(-1.0, 1.0)
        };
        let u = [
            rng.range(-20.0, 20.0),
            rng.range(-20.0, 20.0),
            rng.range(-5.0, 5.0),
            rng.range(-2.0, 2.0),
            rng.range(-2.0, 2.0),
            vz,
        ];
        batch.set_u(ball, i, u).unwrap();
        let mu_dynamic = rng.range(0.0, 0.8);
        let restitution = if rng.next() < 0.2 { 0.0 } else { rng.next() };
        coefficients.push(
            Coefficients::new(restitution, mu_dynamic + rng.range(0.0, 0.3), mu_dynamic).unwrap(),
        );
    }
    (batch, contact, coefficients)
}

pub(crate) fn options() -> EventOptions {
    EventOptions {
        capture_speed: 2e-4,
        ..EventOptions::default()
    }
}

/// The CPU's runs of `batch` for `duration` with `options`, resuming from `previous`: each
/// instance's contact record and steps.
fn cpu_run(
    batch: &mut Batch,
    contact: ConstraintId,
    coefficients: &[Coefficients],
    duration: f64,
    options: &EventOptions,
    previous: &[Option<ContactRecord>],
) -> Vec<Option<(ContactRecord, usize)>> {
    let contacts = |i: usize| {
        vec![UnilateralContact {
            constraint: contact,
            coefficients: coefficients[i],
        }]
    };
    let previous: Vec<Option<Vec<ContactRecord>>> =
        previous.iter().map(|r| r.map(|r| vec![r])).collect();
    run_batch_resuming(batch, &contacts, duration, options, &previous)
        .unwrap()
        .into_iter()
        .map(|run| run.map(|r| (r.contacts[0], r.steps)))
        .collect()
}

/// A fresh f32 event kernel for `batch`'s template and its one contact.
pub(crate) fn f32_stepper(
    device: std::sync::Arc<simbatch::gpu::GpuDevice>,
    batch: &Batch,
    contact: ConstraintId,
) -> GpuEventStepper {
    GpuEventStepper::new(
        device,
        batch,
        contact,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap()
}

/// A fresh f32 event kernel for `batch`'s template, run for `duration` from every instance's
/// start (no previous records): the runs, and the stepper for calls that resume.
pub(crate) fn f32_run(
    device: std::sync::Arc<simbatch::gpu::GpuDevice>,
    batch: &mut Batch,
    contact: ConstraintId,
    coefficients: &[Coefficients],
    duration: f64,
) -> (
    Vec<Option<simbatch::gpu::events::GpuEventRun>>,
    GpuEventStepper,
) {
    let mut stepper = f32_stepper(device, batch, contact);
    let fresh = vec![None; batch.len()];
    let runs = stepper
        .run(batch, coefficients, duration, &options(), &fresh)
        .unwrap();
    (runs, stepper)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

#[test]
fn f64_event_stepping_follows_the_cpus_event_path() {
    let steps = f64_follows_the_cpu(&options(), 1e-8);
    // Fixed steps: every instance takes its two calls' 750 steps of 1 ms, and the steps its
    // events' brackets close with.
    assert!(steps.iter().all(|s| *s >= 750), "{steps:?}");
}

/// Error control (`EventOptions::accuracy`) on the kernel built for it (Runge–Kutta–Merson,
/// each step accepted within the accuracy): every instance has the CPU's records, state and
/// step count under error control, and takes steps of its own length — far fewer than fixed
/// steps at the same accuracy would take. Through `backend::UnilateralRunner`, which runs such
/// calls on the GPU too: the same answers as the stepper, none on the CPU.
#[test]
fn f64_event_stepping_under_error_control_follows_the_cpus_event_path() {
    let controlled = EventOptions {
        step: 0.05,
        accuracy: Some(1e-7),
        ..options()
    };
    // Merson's step factor takes its fourth root as two square roots on the GPU (Vulkan has no
    // f64 `pow`) and as `powf` on the CPU: steps a rounding apart locate an event within a
    // bracket (`t_tol`) of each other, which moves a ball by its speed times that.
    let steps = f64_follows_the_cpu(&controlled, 1e-7);
    let (least, most) = (steps.iter().min().unwrap(), steps.iter().max().unwrap());
    let total: usize = steps.iter().sum();
    eprintln!("steps per instance under error control: {least}..{most}, {total} in all");
    // Fixed RK4 steps of 1 ms take 750 per instance; error control, steps of its own length
    // (no more than 0.05 s), which differ with each instance's motion.
    assert!(total < 256 * 750 / 2, "{total} steps");
    assert!(most > least, "{least}..{most}");
}

/// Runs random balls for two calls (the second resuming from the first's records) on the f64
/// one-contact kernel and on the CPU's event path with `options`, and asserts that every
/// instance has the CPU's status, records, step count, time, state and work (to `tol`; the
/// step count exactly on a software adapter, which rounds as the CPU does, and within one step
/// elsewhere, where a step's acceptance may turn on a rounding); then
/// runs the same calls through `backend::UnilateralRunner` on the GPU and asserts it answers
/// every instance on the GPU with the stepper's bits. Returns each instance's steps over both
/// calls.
fn f64_follows_the_cpu(options: &EventOptions, tol: f64) -> Vec<usize> {
    use simbatch::backend::UnilateralRunner;
    let Some(device) = device() else {
        return vec![750];
    };
    if !device.supports_f64 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI's lavapipe offers SHADER_F64"
        );
        return vec![750];
    }
    let n = 256;
    let (mut cpu, contact, coefficients) = balls(n, 3);
    let start = cpu.clone();
    let mut gpu = cpu.clone();
    let mut stepper = GpuEventStepper::new(
        device.clone(),
        &gpu,
        contact,
        Precision::F64,
        GpuOptions::default(),
    )
    .unwrap();
    let ball = BodyId::new(1);
    let (mut cpu_records, mut gpu_records) = (vec![None; n], vec![None; n]);
    let (mut impacts, mut rolling, mut sliding) = (0, 0, 0);
    let mut steps = vec![0; n];
    // Two calls: the second resumes from the records of the first.
    for (call, duration) in [0.35, 0.4].into_iter().enumerate() {
        let started = std::time::Instant::now();
        let runs = stepper
            .run(&mut gpu, &coefficients, duration, options, &gpu_records)
            .unwrap();
        eprintln!("GPU event call {call}: {:.2?}", started.elapsed());
        let previous: Vec<_> = cpu_records
            .iter()
            .map(|r: &Option<(ContactRecord, usize)>| r.map(|r| r.0))
            .collect();
        let cpu_runs = cpu_run(
            &mut cpu,
            contact,
            &coefficients,
            duration,
            options,
            &previous,
        );
        let mut worst = 0.0f64;
        for i in 0..n {
            let (c, g) = (cpu_runs[i], runs[i]);
            assert_eq!(
                cpu.status()[i] & !status::CONSTRAINT_VIOLATED,
                gpu.status()[i] & !status::CONSTRAINT_VIOLATED,
                "instance {i}: status"
            );
            let (Some((c, cpu_steps)), Some(run)) = (c, g) else {
                assert!(c.is_none() && g.is_none(), "instance {i}: {c:?} vs {g:?}");
                continue;
            };
            let g = run.contact;
            if device.info.device_type == wgpu::DeviceType::Cpu {
                assert_eq!(run.steps, cpu_steps, "instance {i} (call {call}): steps");
            } else {
                assert!(
                    run.steps.abs_diff(cpu_steps) <= 1,
                    "instance {i} (call {call}): steps"
                );
            }
            steps[i] += run.steps;
            assert_eq!(
                std::mem::discriminant(&c.mode),
                std::mem::discriminant(&g.mode),
                "instance {i} (call {call}): {c:?} vs {g:?}"
            );
            assert_eq!(c.impacts, g.impacts, "instance {i}: {c:?} vs {g:?}");
            assert_eq!(c.armed, g.armed, "instance {i}: {c:?} vs {g:?}");
            for (a, b, what) in [
                (g.first_impact, c.first_impact, "first impact"),
                (g.last_mode_change, c.last_mode_change, "last mode change"),
            ] {
                match (a, b) {
                    (Some(a), Some(b)) => {
                        assert!(close(a, b, tol), "instance {i}: {what} {a} vs {b}")
                    }
                    (a, b) => assert_eq!(a.is_some(), b.is_some(), "instance {i}: {what}"),
                }
            }
            let mut values = vec![
                (g.impact_loss, c.impact_loss),
                (g.friction_loss, c.friction_loss),
                (gpu.time()[i], cpu.time()[i]),
            ];
            let (qg, qc) = (gpu.q(ball).unwrap()[i], cpu.q(ball).unwrap()[i]);
            let (ug, uc) = (gpu.u(ball).unwrap()[i], cpu.u(ball).unwrap()[i]);
            values.extend(qg.iter().copied().zip(qc));
            values.extend(ug.iter().copied().zip(uc));
            values.extend(gpu.work()[i].iter().copied().zip(cpu.work()[i]));
            for (a, b) in values {
                let d = (a - b).abs() / b.abs().max(1.0);
                worst = worst.max(d);
                assert!(
                    d <= tol,
                    "instance {i} (call {call}): {a} vs {b}\n gpu {g:?}\n cpu {c:?}"
                );
            }
            impacts += g.impacts;
            match g.mode {
                ContactMode::Stick => rolling += 1,
                ContactMode::Slide { .. } => sliding += 1,
                ContactMode::Open => {}
            }
        }
        eprintln!("call {call}: worst relative difference {worst:.1e}");
        cpu_records = cpu_runs;
        gpu_records = runs.iter().map(|r| r.map(|r| r.contact)).collect();
    }
    // The draws exercise every law: impacts, rolling and sliding at the ends.
    eprintln!("{impacts} impacts, {rolling} rolling, {sliding} sliding at call ends");
    assert!(impacts > 100 && rolling > 20 && sliding > 20);

    // The backend's runner: the same calls on the GPU, the stepper's bits.
    let mut through = start;
    let mut runner = UnilateralRunner::gpu(
        device.clone(),
        &through,
        &[contact],
        Precision::F64,
        GpuOptions::default(),
    )
    .unwrap();
    let per_instance: Vec<Vec<Coefficients>> = coefficients.iter().map(|k| vec![*k]).collect();
    let mut previous: Vec<Option<Vec<ContactRecord>>> = vec![None; n];
    for duration in [0.35, 0.4] {
        let out = runner
            .run(&mut through, &per_instance, duration, options, &previous)
            .unwrap();
        assert!(runner.on_gpu(), "{:?}", runner.note());
        assert_eq!(out.handed_to_cpu(), 0);
        previous = out.records;
    }
    let last: Vec<Option<Vec<ContactRecord>>> =
        gpu_records.iter().map(|r| r.map(|r| vec![r])).collect();
    assert_eq!(previous, last);
    assert_eq!(through.q(ball).unwrap(), gpu.q(ball).unwrap());
    assert_eq!(through.u(ball).unwrap(), gpu.u(ball).unwrap());
    steps
}

/// One ball of mass 1 and radius 0.1 on Ground's plane, its lowest point at `height`, moving
/// at `u`, `n` copies.
pub(crate) fn one_ball(n: usize, height: f64, u: [f64; 6]) -> (Batch, ConstraintId) {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    for i in 0..n {
        batch.set_gravity(i, [0.0, 0.0, -9.81]).unwrap();
        batch
            .set_mass_properties(ball, i, 1.0, [0.0; 3], [0.004, 0.004, 0.004, 0.0, 0.0, 0.0])
            .unwrap();
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1 + height])
            .unwrap();
        batch.set_u(ball, i, u).unwrap();
    }
    (batch, contact)
}

/// What a one-contact f64 kernel run cut into calls reports, instance by instance.
struct CallsRun {
    /// The last call's contact record.
    last: Vec<ContactRecord>,
    /// Impacts summed over the calls.
    impacts: Vec<u32>,
    /// The time the mode last changed in any call.
    changed: Vec<Option<f64>>,
}

/// Runs `batch` for `duration` on the f64 one-contact kernel in `calls` calls of equal span,
/// each resuming from the previous call's records.
fn f64_run_in_calls(
    device: std::sync::Arc<simbatch::gpu::GpuDevice>,
    batch: &mut Batch,
    contact: ConstraintId,
    coefficients: &[Coefficients],
    duration: f64,
    calls: usize,
) -> CallsRun {
    let n = batch.len();
    let mut stepper = GpuEventStepper::new(
        device,
        batch,
        contact,
        Precision::F64,
        GpuOptions::default(),
    )
    .unwrap();
    let mut previous: Vec<Option<ContactRecord>> = vec![None; n];
    let (mut impacts, mut changed) = (vec![0; n], vec![None; n]);
    for k in 1..=calls {
        let span = duration * k as f64 / calls as f64 - duration * (k - 1) as f64 / calls as f64;
        let runs = stepper
            .run(batch, coefficients, span, &options(), &previous)
            .unwrap();
        for (i, run) in runs.iter().enumerate() {
            let r = run.unwrap().contact;
            impacts[i] += r.impacts;
            changed[i] = r.last_mode_change.or(changed[i]);
            previous[i] = Some(r);
        }
    }
    CallsRun {
        last: previous.into_iter().map(Option::unwrap).collect(),
        impacts,
        changed,
    }
}

/// A run cut into calls is the run on the GPU too (the kernel's `RESUME` phase, the CPU's
/// `Settling::Resume`): balls bouncing to rest from drawn heights (0.05–0.2 m) with drawn
/// restitution (0.3–0.7), in 60 calls of 25 ms, have the impacts, modes and rest times of the
/// CPU's run in one call. Before, a call's end was settled as a fresh start: a ball at the apex
/// of a bounce lower than the contact tolerance was captured there, above the plane.
#[test]
fn f64_a_run_cut_into_calls_has_the_impacts_and_rest_times_of_the_run_uncut() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI's lavapipe offers SHADER_F64"
        );
        return;
    }
    let n = 48;
    let (mut cpu, contact) = one_ball(n, 0.0, [0.0; 6]);
    let ball = BodyId::new(1);
    let mut coefficients = Vec::with_capacity(n);
    for i in 0..n {
        let x = (i as f64 + 0.5) / n as f64;
        cpu.set_q(
            ball,
            i,
            [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1 + 0.05 + 0.15 * x],
        )
        .unwrap();
        let e = 0.3 + 0.4 * ((7 * i) % n) as f64 / n as f64;
        coefficients.push(Coefficients::with_friction(e, 0.3).unwrap());
    }
    let mut gpu = cpu.clone();
    // At rest by §5's t₀ (1 + e) / (1 − e) ≤ 1.15 s.
    let duration = 1.5;
    let once = cpu_run(
        &mut cpu,
        contact,
        &coefficients,
        duration,
        &options(),
        &vec![None; n],
    );
    let calls = f64_run_in_calls(device, &mut gpu, contact, &coefficients, duration, 60);
    for (i, (want, got)) in once.iter().zip(&calls.last).enumerate() {
        let want = want.unwrap().0;
        assert_eq!(want.impacts, calls.impacts[i], "instance {i}: {want:?}");
        assert_eq!(want.mode, got.mode, "instance {i}: {want:?} vs {got:?}");
        assert_eq!(want.mode, ContactMode::Stick, "instance {i}: at rest");
        let (a, b) = (want.last_mode_change.unwrap(), calls.changed[i].unwrap());
        assert!(
            (a - b).abs() < 1e-8,
            "instance {i}: at rest from {a} vs {b}"
        );
        let (zc, zg) = (cpu.q(ball).unwrap()[i][6], gpu.q(ball).unwrap()[i][6]);
        assert!(
            (zc - zg).abs() < 1e-9 && (zg - 0.1).abs() < 1e-9,
            "instance {i}: {zc} vs {zg}"
        );
    }
}

/// The one-contact kernel's resumed slip (its `RESUME` phase) and ŝ_a: balls thrown across a
/// slope (gravity tilted 0.3 rad, thrown sideways at 1–2 m/s without spin, μ = 0.1) slide
/// with a slip that turns down the slope as it slows; in 20 calls of 50 ms on the kernel they
/// are the CPU's run in one call (states within 1e-9, the same mode and the time it last
/// changed).
#[test]
fn f64_balls_sliding_across_a_slope_slide_on_across_calls() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        return;
    }
    let n = 8;
    let (mut cpu, contact) = one_ball(n, 0.0, [0.0; 6]);
    let ball = BodyId::new(1);
    let tilt: f64 = 0.3;
    for i in 0..n {
        cpu.set_gravity(i, [9.81 * tilt.sin(), 0.0, -9.81 * tilt.cos()])
            .unwrap();
        let speed = 1.0 + i as f64 / n as f64;
        cpu.set_u(ball, i, [0.0, 0.0, 0.0, 0.0, speed, 0.0])
            .unwrap();
    }
    let coefficients = vec![Coefficients::with_friction(0.0, 0.1).unwrap(); n];
    let mut gpu = cpu.clone();
    let duration = 1.0;
    let once = cpu_run(
        &mut cpu,
        contact,
        &coefficients,
        duration,
        &options(),
        &vec![None; n],
    );
    let calls = f64_run_in_calls(device, &mut gpu, contact, &coefficients, duration, 20);
    for (i, (want, got)) in once.iter().zip(&calls.last).enumerate() {
        let want = want.unwrap().0;
        assert_eq!(
            want.mode.code().0,
            got.mode.code().0,
            "instance {i}: {want:?} vs {got:?}"
        );
        match (want.last_mode_change, calls.changed[i]) {
            (Some(a), Some(b)) => assert!((a - b).abs() < 1e-8, "instance {i}: {a} vs {b}"),
            (a, b) => assert_eq!(a.is_some(), b.is_some(), "instance {i}: {a:?} vs {b:?}"),
        }
        let difference = crate::events_general::state_difference(&gpu, &cpu, i);
        assert!(
            difference < 1e-9,
            "instance {i}: states {difference:e} apart"
        );
        // The slip has turned: the ball runs down the slope (+x) as well as across it.
        let u = gpu.u(ball).unwrap()[i];
        assert!(u[3] > 0.5 && u[4] > 0.1, "instance {i}: {u:?}");
    }
}
