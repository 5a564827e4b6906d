//! Unilateral contacts beside bilateral rows on the GPU's several-contact event kernel: a ball
//! held rolling on Ground (a bilateral `sphere_on_plane` with rolling: three rows) beside one
//! that bounces on its unilateral contact, under gravity tilted up to 0.3 rad, against the CPU's
//! event path (`run_batch_resuming`) record for record in f64; and the rolling ball against its
//! closed form, (5/7) of gravity along the plane, whatever the other ball's impacts do.

use simbatch::cpu::unilateral::{
    Coefficients, EventOptions, UnilateralContact, run_batch_resuming,
};
use simbatch::gpu::events::{GpuEventOutcome, GpuEventStepper};
use simbatch::gpu::{GpuOptions, Precision};
use simbatch::prelude::*;

use crate::common::{Lcg, device, refuses_f64_several_contacts};
use crate::events_general::{same_records, state_difference};

/// Ball radius (both balls) and mass.
const RADIUS: f64 = 0.1;
const MASS: f64 = 1.0;

#[test]
fn f64_a_ball_rolling_beside_a_bouncing_one_follows_the_cpus_event_path_and_its_closed_form() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        return;
    }
    let n = 24;
    let mut t = SystemTemplate::new();
    let rolling = t.add_free_body("rolling");
    let bouncing = t.add_free_body("bouncing");
    t.add_constraint(SphereOnPlaneContact::new(GROUND, rolling, true).with_radius(RADIUS))
        .unwrap();
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, bouncing, true).with_radius(RADIUS))
        .unwrap();
    let mut cpu = Batch::new(t, n).unwrap();
    let mut rng = Lcg(29);
    let inertia = 0.4 * MASS * RADIUS * RADIUS;
    let mut coefficients = Vec::with_capacity(n);
    let mut tangential_gravity = Vec::with_capacity(n);
    for i in 0..n {
        let (tilt, heading) = (rng.range(0.0, 0.3), rng.range(-3.0, 3.0));
        let along = [
            9.81 * tilt.sin() * heading.cos(),
            9.81 * tilt.sin() * heading.sin(),
        ];
        cpu.set_gravity(i, [along[0], along[1], -9.81 * tilt.cos()])
            .unwrap();
        tangential_gravity.push(along);
        for ball in [rolling, bouncing] {
            cpu.set_mass_properties(
                ball,
                i,
                MASS,
                [0.0; 3],
                [inertia, inertia, inertia, 0.0, 0.0, 0.0],
            )
            .unwrap();
        }
        // Rolling: on the plane, ω = (n × v) / r plus any spin about the normal.
        let v = [rng.range(-1.0, 1.0), rng.range(-1.0, 1.0)];
        let spin = rng.range(-3.0, 3.0);
        cpu.set_q(rolling, i, [1.0, 0.0, 0.0, 0.0, -1.0, 0.0, RADIUS])
            .unwrap();
        cpu.set_u(
            rolling,
            i,
            [-v[1] / RADIUS, v[0] / RADIUS, spin, v[0], v[1], 0.0],
        )
        .unwrap();
        let height = rng.range(0.05, 0.4);
        cpu.set_q(bouncing, i, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, RADIUS + height])
            .unwrap();
        let u = [
            rng.range(-10.0, 10.0),
            rng.range(-10.0, 10.0),
            rng.range(-3.0, 3.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
        ];
        cpu.set_u(bouncing, i, u).unwrap();
        let mu_d = rng.range(0.1, 0.6);
        let k = Coefficients::new(rng.range(0.0, 0.8), mu_d + rng.range(0.0, 0.2), mu_d).unwrap();
        coefficients.push(vec![k]);
    }
    let start = cpu.clone();
    let mut gpu = cpu.clone();
    let refused = refuses_f64_several_contacts(&device);
    let stepper = GpuEventStepper::with_contacts(
        device,
        &gpu,
        &[contact],
        Precision::F64,
        GpuOptions::default(),
    );
    if refused {
        let e = stepper.unwrap_err().to_string();
        assert!(e.contains("NVIDIA"), "{e}");
        return;
    }
    let mut stepper = stepper.unwrap();
    assert!(
        stepper.is_general(),
        "bilateral rows beside the contact: the several-contact kernel"
    );
    let options = EventOptions {
        capture_speed: 2e-4,
        ..EventOptions::default()
    };
    let duration = 0.5;
    let fresh = vec![None; n];
    let outcomes = stepper
        .run_contacts(&mut gpu, &coefficients, duration, &options, &fresh)
        .unwrap();
    let contacts = |i: usize| {
        vec![UnilateralContact {
            constraint: contact,
            coefficients: coefficients[i][0],
        }]
    };
    let cpu_runs = run_batch_resuming(&mut cpu, &contacts, duration, &options, &fresh).unwrap();
    let (mut own, mut impacts) = (0, 0);
    for i in 0..n {
        let c = cpu_runs[i].as_ref().unwrap();
        let g = match &outcomes[i] {
            GpuEventOutcome::Ran(g) => g,
            GpuEventOutcome::Withheld => continue,
            other => panic!("instance {i}: {other:?}"),
        };
        own += 1;
        impacts += c.contacts[0].impacts;
        same_records(i, &g.contacts, &c.contacts, 1e-8);
        let difference = state_difference(&gpu, &cpu, i);
        assert!(
            difference <= 1e-8,
            "instance {i}: states {difference:e} apart"
        );
        assert_eq!(g.steps, c.steps, "instance {i}");
        assert_eq!(g.events, c.events.len(), "instance {i}");
        assert_eq!(gpu.status()[i], 0, "instance {i}");
        // The rolling ball: on its plane, and its centre's velocity changed by (5/7) of gravity
        // along the plane times the duration, whatever the other ball did.
        let (q, u, u0) = (
            gpu.q(rolling).unwrap()[i],
            gpu.u(rolling).unwrap()[i],
            start.u(rolling).unwrap()[i],
        );
        assert!(
            (q[6] - RADIUS).abs() <= 1e-9,
            "instance {i}: height {}",
            q[6]
        );
        for k in 0..2 {
            let expected = u0[3 + k] + 5.0 / 7.0 * tangential_gravity[i][k] * duration;
            assert!(
                (u[3 + k] - expected).abs() <= 1e-8,
                "instance {i}: v[{k}] {} vs (5/7) g t: {expected}",
                u[3 + k]
            );
        }
    }
    eprintln!("{own} of {n} instances the kernel's own, {impacts} impacts among them");
    assert!(4 * own >= 3 * n, "only {own} of {n} answered");
    assert!(
        impacts >= n as u32,
        "the free balls bounce ({impacts} impacts)"
    );
}
