//! Event-driven stepping of unilateral contact on the GPU (`gpu::events`, stage 1 of
//! `docs/gpu-unilateral.md`: one ball, one unilateral contact) against the CPU's event path
//! (`cpu::unilateral::run_batch_resuming`) on random balls — drawn masses, radii, heights,
//! velocities, spins, restitution and friction, under gravity tilted up to 30° (an incline) —
//! and against the closed forms of `unilateral.md` §9 in f32: a dropped ball's impact times and
//! a launched ball's rolling speed.

use simbatch::batch::status;
use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactRecord, EventOptions, UnilateralContact, run_batch_resuming,
};
use simbatch::gpu::events::GpuEventStepper;
use simbatch::gpu::{GpuOptions, Precision};
use simbatch::prelude::*;

use crate::common::device;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
}

/// `n` balls on Ground's plane z = 0, each with its own draws; the contact and coefficients.
fn balls(n: usize, seed: u64) -> (Batch, ConstraintId, Vec<Coefficients>) {
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

fn options() -> EventOptions {
    EventOptions {
        capture_speed: 2e-4,
        ..EventOptions::default()
    }
}

/// The CPU's runs of `batch` for `duration`, resuming from `previous`.
fn cpu_run(
    batch: &mut Batch,
    contact: ConstraintId,
    coefficients: &[Coefficients],
    duration: f64,
    previous: &[Option<ContactRecord>],
) -> Vec<Option<ContactRecord>> {
    let contacts = |i: usize| {
        vec![UnilateralContact {
            constraint: contact,
            coefficients: coefficients[i],
        }]
    };
    let previous: Vec<Option<Vec<ContactRecord>>> =
        previous.iter().map(|r| r.map(|r| vec![r])).collect();
    run_batch_resuming(batch, &contacts, duration, &options(), &previous)
        .unwrap()
        .into_iter()
        .map(|run| run.map(|r| r.contacts[0]))
        .collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

#[test]
fn f64_event_stepping_follows_the_cpus_event_path() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI's lavapipe offers SHADER_F64"
        );
        return;
    }
    let n = 256;
    let (mut cpu, contact, coefficients) = balls(n, 3);
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
    // Two calls: the second resumes from the records of the first.
    for (call, duration) in [0.35, 0.4].into_iter().enumerate() {
        let started = std::time::Instant::now();
        let runs = stepper
            .run(&mut gpu, &coefficients, duration, &options(), &gpu_records)
            .unwrap();
        eprintln!("GPU event call {call}: {:.2?}", started.elapsed());
        let cpu_runs = cpu_run(&mut cpu, contact, &coefficients, duration, &cpu_records);
        let mut worst = 0.0f64;
        for i in 0..n {
            let (c, g) = (cpu_runs[i], runs[i].map(|r| r.contact));
            assert_eq!(
                cpu.status()[i] & !status::CONSTRAINT_VIOLATED,
                gpu.status()[i] & !status::CONSTRAINT_VIOLATED,
                "instance {i}: status"
            );
            let (Some(c), Some(g)) = (c, g) else {
                assert!(c.is_none() && g.is_none(), "instance {i}: {c:?} vs {g:?}");
                continue;
            };
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
                        assert!(close(a, b, 1e-8), "instance {i}: {what} {a} vs {b}")
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
                    d <= 1e-8,
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
}
