//! Pairs of balls on the GPU's several-contact event kernel (`gpu::events`, stage 2 of
//! `docs/gpu-unilateral.md`): two free bodies, each on its own unilateral contact with Ground's
//! plane, in one kernel — record for record against the CPU's event path in f64, and against
//! the closed forms of two balls dropped side by side in f32. (The bricks on four corners are in
//! `events_general.rs`.)

use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactRecord, EventOptions, UnilateralContact, run_batch_resuming,
};
use simbatch::gpu::events::GpuEventStepper;
use simbatch::gpu::{GpuOptions, Precision};
use simbatch::prelude::*;

use crate::common::{Lcg, device, refuses_f64_several_contacts};
use crate::events_general::{cpu_run_with, gpu_run_in_calls, same_records, state_difference};

/// Two balls of drawn sizes, each on its own contact with Ground's plane (two free bodies, two
/// contacts, one kernel), dropped, thrown and spun under tilted gravity: the kernel's records
/// and states are the CPU's, as the bricks'.
#[test]
fn f64_pairs_of_balls_follow_the_cpus_event_path() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        return;
    }
    let n = 32;
    let mut t = SystemTemplate::new();
    let mut ids = Vec::new();
    let mut bodies = Vec::new();
    for name in ["a", "b"] {
        let ball = t.add_free_body(name);
        bodies.push(ball);
        let contact = SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1);
        ids.push(t.add_constraint(contact).unwrap());
    }
    let mut cpu = Batch::new(t, n).unwrap();
    let mut rng = Lcg(11);
    let mut coefficients = Vec::with_capacity(n);
    for i in 0..n {
        let (tilt, heading) = (rng.range(0.0, 0.4), rng.range(-3.0, 3.0));
        let g = [
            9.81 * tilt.sin() * heading.cos(),
            9.81 * tilt.sin() * heading.sin(),
            -9.81 * tilt.cos(),
        ];
        cpu.set_gravity(i, g).unwrap();
        let mut per = Vec::new();
        for (b, (ball, contact)) in bodies.iter().zip(&ids).enumerate() {
            let (mass, radius) = (rng.range(0.5, 2.0), rng.range(0.05, 0.2));
            let inertia = 0.4 * mass * radius * radius;
            cpu.set_mass_properties(
                *ball,
                i,
                mass,
                [0.0; 3],
                [inertia, inertia, inertia, 0.0, 0.0, 0.0],
            )
            .unwrap();
            cpu.set_param(*contact, "radius", i, &[radius]).unwrap();
            let height = if rng.next() < 0.3 {
                0.0
            } else {
                rng.range(0.0, 0.4)
            };
            let x = if b == 0 { -1.0 } else { 1.0 };
            cpu.set_q(*ball, i, [1.0, 0.0, 0.0, 0.0, x, 0.0, radius + height])
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
            cpu.set_u(*ball, i, u).unwrap();
            let mu_d = rng.range(0.0, 0.8);
            let restitution = if rng.next() < 0.2 { 0.0 } else { rng.next() };
            per.push(Coefficients::new(restitution, mu_d + rng.range(0.0, 0.3), mu_d).unwrap());
        }
        coefficients.push(per);
    }
    let mut gpu = cpu.clone();
    let stepper = GpuEventStepper::with_contacts(
        device.clone(),
        &gpu,
        &ids,
        Precision::F64,
        GpuOptions::default(),
    );
    if refuses_f64_several_contacts(&device) {
        let e = stepper.unwrap_err().to_string();
        assert!(e.contains("NVIDIA"), "{e}");
        return;
    }
    let mut stepper = stepper.unwrap();
    assert!(stepper.is_general());
    let fresh = vec![None; n];
    let started = std::time::Instant::now();
    let outcomes = stepper
        .run_contacts(&mut gpu, &coefficients, 0.5, &ball_options(), &fresh)
        .unwrap();
    eprintln!("GPU ball pairs: {:.2?}", started.elapsed());
    let cpu_runs = {
        let contacts = |i: usize| {
            ids.iter()
                .zip(&coefficients[i])
                .map(|(c, k)| UnilateralContact {
                    constraint: *c,
                    coefficients: *k,
                })
                .collect()
        };
        run_batch_resuming(&mut cpu, &contacts, 0.5, &ball_options(), &fresh).unwrap()
    };
    let (mut own, mut impacts) = (0, 0);
    for i in 0..n {
        let c = cpu_runs[i].as_ref().unwrap();
        match &outcomes[i] {
            simbatch::gpu::events::GpuEventOutcome::Ran(g) => {
                own += 1;
                impacts += c.contacts.iter().map(|r| r.impacts).sum::<u32>();
                same_records(i, &g.contacts, &c.contacts, 1e-8);
                let difference = state_difference(&gpu, &cpu, i);
                assert!(
                    difference <= 1e-8,
                    "instance {i}: states {difference:e} apart"
                );
                assert_eq!(g.steps, c.steps, "instance {i}");
                assert_eq!(g.events, c.events.len(), "instance {i}");
            }
            simbatch::gpu::events::GpuEventOutcome::Withheld => {}
            other => panic!("instance {i}: {other:?}"),
        }
    }
    eprintln!("{own} of {n} pairs the kernel's own, {impacts} impacts among them");
    assert!(4 * own >= 3 * n, "only {own} of {n} answered");
    assert!(impacts >= n as u32, "the pairs bounce ({impacts} impacts)");
}

fn ball_options() -> EventOptions {
    EventOptions {
        capture_speed: 2e-4,
        ..EventOptions::default()
    }
}

/// unilateral.md §9 (a) on the several-contact kernel in f32: two balls (mass 1, radius 0.1) of
/// one instance dropped side by side, ball `a` from h = 1 with e = 0.8, ball `b` from h = 0.5
/// with e = 0.5. Impacts at t₀ (1 + 2e + … + 2e^(k−1)), t₀ = √(2h/g), each losing (1 − e²) of
/// its arrival's kinetic energy, rest at t₀ (1 + e) / (1 − e) with all of m g h lost: `b` rests
/// within the first call (0.958 s), `a` has bounced four times by its end (2.3 s) and rests in
/// the second (4.066 s), resumed from the first's records. Every instance is the kernel's own.
#[test]
fn f32_two_balls_dropped_together_bounce_at_the_closed_form_times_and_come_to_rest() {
    let Some(device) = device() else { return };
    let n = 4;
    let mut t = SystemTemplate::new();
    let (mut ids, mut balls) = (Vec::new(), Vec::new());
    for name in ["a", "b"] {
        let ball = t.add_free_body(name);
        balls.push(ball);
        let contact = SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1);
        ids.push(t.add_constraint(contact).unwrap());
    }
    let mut batch = Batch::new(t, n).unwrap();
    let (heights, restitution) = ([1.0, 0.5], [0.8, 0.5]);
    for i in 0..n {
        batch.set_gravity(i, [0.0, 0.0, -9.81]).unwrap();
        for (k, ball) in balls.iter().enumerate() {
            let inertia = [0.004, 0.004, 0.004, 0.0, 0.0, 0.0];
            batch
                .set_mass_properties(*ball, i, 1.0, [0.0; 3], inertia)
                .unwrap();
            let x = [-0.5, 0.5][k];
            batch
                .set_q(*ball, i, [1.0, 0.0, 0.0, 0.0, x, 0.0, 0.1 + heights[k]])
                .unwrap();
        }
    }
    let coefficients: Vec<Vec<Coefficients>> = (0..n)
        .map(|_| {
            restitution
                .iter()
                .map(|e| Coefficients::with_friction(*e, 0.5).unwrap())
                .collect()
        })
        .collect();
    let mut stepper =
        GpuEventStepper::with_contacts(device, &batch, &ids, Precision::F32, GpuOptions::default())
            .unwrap();
    assert!(stepper.is_general());
    let records =
        |outcomes: Vec<simbatch::gpu::events::GpuEventOutcome>| -> Vec<Vec<ContactRecord>> {
            outcomes
                .into_iter()
                .enumerate()
                .map(|(i, o)| match o {
                    simbatch::gpu::events::GpuEventOutcome::Ran(run) => run.contacts,
                    other => panic!("instance {i}: {other:?}"),
                })
                .collect()
        };
    let t0 = heights.map(|h: f64| (2.0 * h / 9.81).sqrt());
    let rest = [0, 1].map(|k| t0[k] * (1.0 + restitution[k]) / (1.0 - restitution[k]));
    let fresh = vec![None; n];
    let first = records(
        stepper
            .run_contacts(&mut batch, &coefficients, 2.3, &ball_options(), &fresh)
            .unwrap(),
    );
    for (i, r) in first.iter().enumerate() {
        let (a, b) = (&r[0], &r[1]);
        // a: four impacts by 2.3 s, losses (1 − e²) m g h e^(2k) for k = 0..3.
        assert_eq!(a.impacts, 4, "instance {i}: {a:?}");
        let at = a.first_impact.unwrap();
        assert!((at - t0[0]).abs() < 2e-5, "first impact {at} vs {}", t0[0]);
        let losses: f64 = (0..4).map(|k| 0.36 * 9.81 * 0.64f64.powi(k)).sum();
        assert!(
            (a.impact_loss - losses).abs() < 1e-3 * losses,
            "{} vs {losses}",
            a.impact_loss
        );
        assert_eq!(a.mode, ContactMode::Open, "instance {i}: {a:?}");
        // b: at rest by its closed form, all of m g h lost in its impacts.
        let at = b.first_impact.unwrap();
        assert!((at - t0[1]).abs() < 2e-5, "first impact {at} vs {}", t0[1]);
        assert_eq!(b.mode, ContactMode::Stick, "instance {i}: {b:?}");
        let at = b.last_mode_change.unwrap();
        assert!(
            (at - rest[1]).abs() < 2e-3,
            "b at rest from {at}, closed form {}",
            rest[1]
        );
        let mgh = 9.81 * heights[1];
        assert!(
            (b.impact_loss - mgh).abs() < 1e-3 * mgh,
            "{} vs {mgh}",
            b.impact_loss
        );
    }
    let previous: Vec<_> = first.into_iter().map(Some).collect();
    let second = records(
        stepper
            .run_contacts(&mut batch, &coefficients, 2.0, &ball_options(), &previous)
            .unwrap(),
    );
    for (i, r) in second.iter().enumerate() {
        let a = &r[0];
        assert_eq!(a.mode, ContactMode::Stick, "instance {i}: {a:?}");
        let at = a.last_mode_change.unwrap();
        assert!(
            (at - rest[0]).abs() < 2e-3,
            "a at rest from {at}, closed form {}",
            rest[0]
        );
        assert_eq!(r[1].mode, ContactMode::Stick, "instance {i}: {:?}", r[1]);
        for ball in &balls {
            let q = batch.q(*ball).unwrap()[i];
            let u = batch.u(*ball).unwrap()[i];
            assert!((q[6] - 0.1).abs() < 1e-4, "on the plane: {}", q[6]);
            assert!(u.iter().all(|v| v.abs() < 1e-3), "at rest: {u:?}");
        }
        assert_eq!(batch.status()[i], 0);
        assert!((batch.time()[i] - 4.3).abs() < 1e-12);
    }
}

/// A run cut into calls is the run on the several-contact kernel too (its `RESUME` phase, the
/// CPU's `Settling::Resume`): pairs of balls bouncing to rest from drawn heights (0.05–0.2 m)
/// with drawn restitution (0.3–0.7), in 60 calls of 25 ms, have the impacts, modes and rest
/// times of the CPU's run in one call. An instance the kernel withholds in some call (a
/// software adapter's loop budget) is left at that call's start and is not compared; most are
/// the kernel's own throughout.
#[test]
fn f64_pairs_cut_into_calls_have_the_impacts_and_rest_times_of_the_run_uncut() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        return;
    }
    let n = 24;
    let mut t = SystemTemplate::new();
    let (mut ids, mut balls) = (Vec::new(), Vec::new());
    for name in ["a", "b"] {
        let ball = t.add_free_body(name);
        balls.push(ball);
        let contact = SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1);
        ids.push(t.add_constraint(contact).unwrap());
    }
    let mut cpu = Batch::new(t, n).unwrap();
    let mut coefficients = Vec::with_capacity(n);
    for i in 0..n {
        cpu.set_gravity(i, [0.0, 0.0, -9.81]).unwrap();
        let mut per = Vec::new();
        for (k, ball) in balls.iter().enumerate() {
            let inertia = [0.004, 0.004, 0.004, 0.0, 0.0, 0.0];
            cpu.set_mass_properties(*ball, i, 1.0, [0.0; 3], inertia)
                .unwrap();
            let x = ((2 * i + k) as f64 + 0.5) / (2 * n) as f64;
            let height = 0.05 + 0.15 * x;
            let q = [1.0, 0.0, 0.0, 0.0, [-0.5, 0.5][k], 0.0, 0.1 + height];
            cpu.set_q(*ball, i, q).unwrap();
            let e = 0.3 + 0.4 * ((7 * (2 * i + k)) % (2 * n)) as f64 / (2 * n) as f64;
            per.push(Coefficients::with_friction(e, 0.3).unwrap());
        }
        coefficients.push(per);
    }
    let mut gpu = cpu.clone();
    let stepper = GpuEventStepper::with_contacts(
        device.clone(),
        &gpu,
        &ids,
        Precision::F64,
        GpuOptions::default(),
    );
    if refuses_f64_several_contacts(&device) {
        return;
    }
    let mut stepper = stepper.unwrap();
    // At rest by §5's t₀ (1 + e) / (1 − e) ≤ 1.15 s.
    let duration = 1.5;
    let fresh = vec![None; n];
    let once = cpu_run_with(
        &mut cpu,
        &ids,
        &coefficients,
        duration,
        &ball_options(),
        &fresh,
    );
    let mut impacts = vec![[0u32; 2]; n];
    let mut rest = vec![[None::<f64>; 2]; n];
    let (previous, withheld) = gpu_run_in_calls(
        &mut stepper,
        &mut gpu,
        &coefficients,
        duration,
        60,
        &ball_options(),
        |i, records| {
            for (c, r) in records.iter().enumerate() {
                impacts[i][c] += r.impacts;
                rest[i][c] = r.last_mode_change.or(rest[i][c]);
            }
        },
    );
    let mut own = 0;
    for i in (0..n).filter(|i| !withheld[*i]) {
        own += 1;
        let (want, got) = (once[i].as_ref().unwrap(), previous[i].as_ref().unwrap());
        for c in 0..2 {
            let what = format!("instance {i}, contact {c}: {:?} vs {:?}", want[c], got[c]);
            assert_eq!(want[c].impacts, impacts[i][c], "{what}");
            assert_eq!(want[c].mode, ContactMode::Stick, "{what}");
            assert_eq!(got[c].mode, ContactMode::Stick, "{what}");
            let (a, b) = (want[c].last_mode_change.unwrap(), rest[i][c].unwrap());
            assert!((a - b).abs() < 1e-8, "{what}: at rest from {a} vs {b}");
        }
        let difference = state_difference(&gpu, &cpu, i);
        assert!(
            difference <= 1e-8,
            "instance {i}: states {difference:e} apart"
        );
    }
    eprintln!("{own} of {n} pairs the kernel's own in every call");
    assert!(4 * own >= 3 * n, "only {own} of {n} answered");
}
