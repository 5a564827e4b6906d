//! Event-driven stepping of several unilateral contacts on the GPU (`gpu::events`' several-contact
//! kernel, stage 2 of `docs/gpu-unilateral.md`) against the CPU's event path
//! (`cpu::unilateral::run_batch_resuming`): bricks dropped on their four corners onto slopes,
//! with drawn masses, heights, velocities, spins, restitution and friction, in f64 record for
//! record; and the closed form of a brick sliding down a slope it cannot hold. (Pairs of balls
//! are in `events_pairs.rs`.)
//! On a software adapter the kernel withholds the instances whose dispatches pass lavapipe's
//! loop limit (`SOFTWARE_LOOP_BUDGET`); those are left at the call's start, and the tests
//! count them.

use simbatch::backend::UnilateralRunner;
use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactRecord, EventOptions, UnilateralContact, run_batch_resuming,
};
use simbatch::gpu::events::GpuEventStepper;
use simbatch::gpu::{GpuOptions, Precision};
use simbatch::prelude::*;

use crate::common::{Lcg, device, refuses_f64_several_contacts};

/// `n` bricks on four corners (0.8 × 0.5 × 0.2 m) above Ground's plane, each with its own draws:
/// mass, height, sideways velocity and spin, gravity tilted up to 0.35 rad (a slope), the
/// restitution and friction of its corners; then two bricks at rest on their corners on a slope
/// of tan θ = 0.2151, one held by μ_s = 0.25, one that slides (μ_s = 0.2132, μ_d = 0.19).
fn bricks(n: usize, seed: u64) -> (Batch, Vec<ConstraintId>, Vec<Vec<Coefficients>>) {
    let mut t = SystemTemplate::new();
    let brick = t.add_free_body("brick");
    let mut ids = Vec::new();
    for (x, y) in [(0.4, 0.25), (0.4, -0.25), (-0.4, 0.25), (-0.4, -0.25)] {
        let corner = PointOnPlaneContact::new(GROUND, brick).with_follower_point([x, y, -0.1]);
        ids.push(t.add_constraint(corner).unwrap());
    }
    let mut batch = Batch::new(t, n + 2).unwrap();
    let mut rng = Lcg(seed);
    let mut coefficients = Vec::with_capacity(n + 2);
    for i in 0..n {
        let mass = rng.range(0.5, 5.0);
        let inertia = [0.0125, 0.035, 0.04, 0.0, 0.0, 0.0].map(|x| x * mass);
        batch
            .set_mass_properties(brick, i, mass, [0.0; 3], inertia)
            .unwrap();
        let (tilt, heading) = (rng.range(0.0, 0.35), rng.range(-3.0, 3.0));
        let g = [
            9.81 * tilt.sin() * heading.cos(),
            9.81 * tilt.sin() * heading.sin(),
            -9.81 * tilt.cos(),
        ];
        batch.set_gravity(i, g).unwrap();
        // A small roll and pitch, so the corners land one after another.
        let (roll, pitch) = (rng.range(-0.05, 0.05), rng.range(-0.05, 0.05));
        let q = nalgebra::UnitQuaternion::from_euler_angles(roll, pitch, rng.range(-1.0, 1.0));
        let height = rng.range(0.11, 0.4);
        batch
            .set_q(brick, i, [q.w, q.i, q.j, q.k, 0.0, 0.0, height])
            .unwrap();
        let u = [
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-2.0, 2.0),
            rng.range(-0.5, 0.5),
            rng.range(-0.5, 0.5),
            rng.range(-0.5, 0.0),
        ];
        batch.set_u(brick, i, u).unwrap();
        let (mu_d, restitution) = (rng.range(0.1, 0.6), rng.range(0.0, 0.4));
        let k = Coefficients::new(restitution, mu_d + rng.range(0.0, 0.2), mu_d).unwrap();
        coefficients.push(vec![k; 4]);
    }
    for (i, mu_s) in [(n, HELD_MU), (n + 1, SLIDING_MU.0)] {
        let inertia = [0.0125, 0.035, 0.04, 0.0, 0.0, 0.0];
        batch
            .set_mass_properties(brick, i, SLOPE_MASS, [0.0; 3], inertia)
            .unwrap();
        batch.set_gravity(i, [SLOPE_G.0, 0.0, -SLOPE_G.1]).unwrap();
        batch
            .set_q(brick, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1])
            .unwrap();
        let k = Coefficients::new(0.0, mu_s, SLIDING_MU.1).unwrap();
        coefficients.push(vec![k; 4]);
    }
    (batch, ids, coefficients)
}

/// The slope's gravity along and across it (tan θ = 0.2151) and the bricks' mass.
const SLOPE_G: (f64, f64) = (2.1098024333257523, 9.81);
const SLOPE_MASS: f64 = 1.7606002646375123;
/// μ_s of the brick that holds, and (μ_s, μ_d) of the one that slides.
const HELD_MU: f64 = 0.25;
const SLIDING_MU: (f64, f64) = (0.21320162725229036, 0.18996375870113058);

fn options() -> EventOptions {
    EventOptions {
        step: 2e-3,
        constraint_tolerance: 1e-4,
        ..EventOptions::default()
    }
}

/// The CPU's runs of `batch` for `duration`, resuming from `previous`: the reference.
fn cpu_run(
    batch: &mut Batch,
    ids: &[ConstraintId],
    coefficients: &[Vec<Coefficients>],
    duration: f64,
    previous: &[Option<Vec<ContactRecord>>],
) -> Vec<Option<Vec<ContactRecord>>> {
    cpu_run_with(batch, ids, coefficients, duration, &options(), previous)
}

/// [`cpu_run`] with `options`.
pub(crate) fn cpu_run_with(
    batch: &mut Batch,
    ids: &[ConstraintId],
    coefficients: &[Vec<Coefficients>],
    duration: f64,
    options: &EventOptions,
    previous: &[Option<Vec<ContactRecord>>],
) -> Vec<Option<Vec<ContactRecord>>> {
    let contacts = |i: usize| {
        ids.iter()
            .zip(&coefficients[i])
            .map(|(c, k)| UnilateralContact {
                constraint: *c,
                coefficients: *k,
            })
            .collect()
    };
    run_batch_resuming(batch, &contacts, duration, options, previous)
        .unwrap()
        .into_iter()
        .map(|run| run.map(|r| r.contacts))
        .collect()
}

/// `stepper`'s run of `gpu` for `duration` cut into `calls` calls of equal spans (as a study's
/// record intervals cut it), each resuming from the records of the call before: `each(i,
/// records)` sees every call's records of each instance the kernel ran. Returns the last
/// call's records (`None` for an instance never run) and the instances the kernel withheld in
/// some call (left at that call's start, so not comparable after it).
pub(crate) fn gpu_run_in_calls(
    stepper: &mut GpuEventStepper,
    gpu: &mut Batch,
    coefficients: &[Vec<Coefficients>],
    duration: f64,
    calls: usize,
    options: &EventOptions,
    mut each: impl FnMut(usize, &[ContactRecord]),
) -> (Vec<Option<Vec<ContactRecord>>>, Vec<bool>) {
    let n = gpu.len();
    let mut previous: Vec<Option<Vec<ContactRecord>>> = vec![None; n];
    let mut withheld = vec![false; n];
    for k in 1..=calls {
        let span = duration * k as f64 / calls as f64 - duration * (k - 1) as f64 / calls as f64;
        let outcomes = stepper
            .run_contacts(gpu, coefficients, span, options, &previous)
            .unwrap();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                simbatch::gpu::events::GpuEventOutcome::Ran(run) => {
                    each(i, &run.contacts);
                    previous[i] = Some(run.contacts);
                }
                simbatch::gpu::events::GpuEventOutcome::Withheld => withheld[i] = true,
                other => panic!("instance {i}: {other:?}"),
            }
        }
    }
    (previous, withheld)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

/// Asserts that the GPU's records of instance `i` are the CPU's: modes, impacts and readiness
/// exactly, times and energies to `tol`.
pub(crate) fn same_records(i: usize, gpu: &[ContactRecord], cpu: &[ContactRecord], tol: f64) {
    for (k, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        let what = format!("instance {i}, contact {k}: {g:?} vs {c:?}");
        assert_eq!(g.mode.code().0, c.mode.code().0, "{what}");
        assert_eq!(g.impacts, c.impacts, "{what}");
        assert_eq!(g.armed, c.armed, "{what}");
        for (a, b) in [
            (g.first_impact, c.first_impact),
            (g.last_mode_change, c.last_mode_change),
        ] {
            match (a, b) {
                (Some(a), Some(b)) => assert!(close(a, b, tol), "{what}"),
                (a, b) => assert_eq!(a.is_some(), b.is_some(), "{what}"),
            }
        }
        assert!(close(g.impact_loss, c.impact_loss, tol), "{what}");
        assert!(close(g.friction_loss, c.friction_loss, tol), "{what}");
    }
}

/// The largest difference between two batches' free-body states of instance `i`.
pub(crate) fn state_difference(a: &Batch, b: &Batch, i: usize) -> f64 {
    let (x, y) = (
        a.instance_state(i).unwrap().to_vec(),
        b.instance_state(i).unwrap().to_vec(),
    );
    x.iter()
        .zip(&y)
        .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()))
}

/// Random bricks dropped onto slopes, two calls (the second resuming from the first's
/// records), through `backend::UnilateralRunner`: every instance the kernel answered has the
/// CPU's records and state to 1e-7 (an event located a bracket apart moves a brick by its speed
/// times `t_tol`), the ones it withheld ran on the CPU and are the CPU's exactly. On a software
/// adapter at least a quarter of the bricks are the kernel's own (the rest pass lavapipe's loop
/// budget at an impact); on hardware all are. Then the slope's closed forms: the brick μ_s
/// holds stays where it is, the other slides at g (sin θ − μ_d cos θ) without turning, its
/// friction losses `μ_d m g cos θ` times the distance.
#[test]
fn f64_bricks_follow_the_cpus_event_path() {
    f64_bricks_follow_the_cpu(24, &options());
}

/// [`f64_bricks_follow_the_cpus_event_path`] under error control (`EventOptions::accuracy`:
/// the kernel built for it takes Merson steps, each accepted within the accuracy, at most
/// 10 ms): the CPU's records and states under error control, and the slope's closed forms.
#[test]
fn f64_bricks_under_error_control_follow_the_cpus_event_path() {
    let controlled = EventOptions {
        step: 0.01,
        accuracy: Some(1e-6),
        ..options()
    };
    f64_bricks_follow_the_cpu(6, &controlled);
}

/// The body of the f64 bricks' tests: `n` random bricks and the slope's two, with `options`.
fn f64_bricks_follow_the_cpu(n: usize, options: &EventOptions) {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI's lavapipe offers SHADER_F64"
        );
        return;
    }
    let (mut cpu, ids, coefficients) = bricks(n, 7);
    let mut gpu = cpu.clone();
    let mut runner = UnilateralRunner::gpu(
        device.clone(),
        &gpu,
        &ids,
        Precision::F64,
        GpuOptions::default(),
    )
    .unwrap();
    if refuses_f64_several_contacts(&device) {
        // The batch runs on the CPU's event path, and the runner says why.
        assert!(!runner.on_gpu());
        assert!(
            runner.note().unwrap().contains("NVIDIA"),
            "{:?}",
            runner.note()
        );
        return;
    }
    assert!(runner.on_gpu(), "{:?}", runner.note());
    let software = device.info.device_type == wgpu::DeviceType::Cpu;
    let (mut cpu_records, mut gpu_records) = (vec![None; n + 2], vec![None; n + 2]);
    let mut answered = vec![true; n + 2];
    // The sliding brick's friction losses over both calls (a record is one call's).
    let mut friction = 0.0;
    for (call, duration) in [0.3, 0.3].into_iter().enumerate() {
        let started = std::time::Instant::now();
        let out = runner
            .run(&mut gpu, &coefficients, duration, options, &gpu_records)
            .unwrap();
        eprintln!(
            "GPU bricks, call {call}: {:.2?}, {} of {} on the CPU",
            started.elapsed(),
            out.handed_to_cpu(),
            n + 2
        );
        cpu_records = cpu_run_with(
            &mut cpu,
            &ids,
            &coefficients,
            duration,
            options,
            &cpu_records,
        );
        for i in 0..n + 2 {
            let (g, c) = (out.records[i].as_ref(), cpu_records[i].as_ref());
            let (Some(g), Some(c)) = (g, c) else {
                panic!("instance {i} (call {call}) stopped: {g:?} vs {c:?}")
            };
            assert_eq!(gpu.status()[i], cpu.status()[i], "instance {i}");
            let difference = state_difference(&gpu, &cpu, i);
            if out.on_cpu[i] {
                answered[i] = false;
                assert_eq!(g, c, "instance {i} ran on the CPU");
                assert_eq!(difference, 0.0, "instance {i} ran on the CPU");
                continue;
            }
            same_records(i, g, c, 1e-7);
            assert!(
                difference <= 1e-7,
                "instance {i} (call {call}): states {difference:e} apart"
            );
        }
        gpu_records = out.records;
        let sliding = gpu_records[n + 1].as_ref().unwrap();
        friction += sliding.iter().map(|r| r.friction_loss).sum::<f64>();
    }
    let own = answered.iter().filter(|a| **a).count();
    eprintln!("{own} of {} bricks the kernel's own in both calls", n + 2);
    if software {
        assert!(4 * own >= n + 2, "only {own} of {} answered", n + 2);
    } else {
        assert_eq!(own, n + 2);
    }
    assert!(
        answered[n] && answered[n + 1],
        "the slope's bricks are the kernel's"
    );
    let brick = BodyId::new(1);
    let cols = gpu.free_body_columns(brick).unwrap();
    let t = 0.6;
    // Held: it has not moved, and its corners stick.
    assert!(cols.u[n].iter().all(|x| x.abs() <= 1e-9), "{:?}", cols.u[n]);
    assert!(cols.q[n][4].abs() <= 1e-9, "{:?}", cols.q[n]);
    let held = gpu_records[n].as_ref().unwrap();
    assert!(
        held.iter().all(|r| r.mode == ContactMode::Stick),
        "{held:?}"
    );
    // Sliding: a = g_x − μ_d g_z, straight down the slope.
    let a = SLOPE_G.0 - SLIDING_MU.1 * SLOPE_G.1;
    let (q, u) = (cols.q[n + 1], cols.u[n + 1]);
    assert!(close(u[3], a * t, 1e-9), "speed {} vs {}", u[3], a * t);
    assert!(
        close(q[4], 0.5 * a * t * t, 1e-9),
        "distance {} vs {}",
        q[4],
        0.5 * a * t * t
    );
    for k in [0, 1, 2, 4, 5] {
        assert!(u[k].abs() <= 1e-9, "u[{k}] = {}", u[k]);
    }
    let expected = SLIDING_MU.1 * SLOPE_MASS * SLOPE_G.1 * q[4];
    assert!(
        close(friction, expected, 1e-9),
        "friction losses {friction} vs {expected}"
    );
}

/// The bricks in f32 (§8's f32 tolerances; the kernel's own f32 rounding): every instance the
/// kernel answers ends finite and unflagged, on or above its plane (penetration within the
/// constraint tolerance), with no energy gained beyond f32's integration error and its books
/// (E − E₀ = work − losses) closed to 1e-3 of its energy scale; the slope's bricks follow the
/// closed forms to f32's reach (the held one moves less than 1e-4 m/s, the sliding one's speed
/// within 1e-3 of g (sin θ − μ_d cos θ) t).
#[test]
fn f32_bricks_stay_on_or_above_their_planes_and_follow_the_slope() {
    let Some(device) = device() else { return };
    let n = 12;
    let (mut batch, ids, coefficients) = bricks(n, 21);
    let energy0: Vec<f64> = (0..n + 2).map(|i| batch.energy(i).unwrap()).collect();
    let mut stepper = GpuEventStepper::with_contacts(
        device.clone(),
        &batch,
        &ids,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap();
    let fresh = vec![None; n + 2];
    let duration = 0.6;
    let started = std::time::Instant::now();
    let outcomes = stepper
        .run_contacts(&mut batch, &coefficients, duration, &options(), &fresh)
        .unwrap();
    eprintln!("GPU bricks, f32: {:.2?}", started.elapsed());
    let mut own = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        let run = match outcome {
            simbatch::gpu::events::GpuEventOutcome::Ran(run) => run,
            simbatch::gpu::events::GpuEventOutcome::Withheld => continue,
            other => panic!("instance {i}: {other:?}"),
        };
        own += 1;
        assert_eq!(batch.status()[i], 0, "instance {i}: {run:?}");
        assert!(run.penetration <= 1e-4, "instance {i}: {run:?}");
        let energy = batch.energy(i).unwrap();
        assert!(energy.is_finite(), "instance {i}");
        let [driven, applied] = batch.work()[i];
        let lost: f64 = run
            .contacts
            .iter()
            .map(|r| r.impact_loss + r.friction_loss)
            .sum();
        let scale = energy0[i].abs().max(1.0);
        assert!(
            energy - energy0[i] - driven - applied <= 1e-3 * scale,
            "instance {i} gained energy: {energy} from {}",
            energy0[i]
        );
        let books = energy - energy0[i] - driven - applied + lost;
        assert!(
            books.abs() <= 1e-3 * scale,
            "instance {i}: books out by {books:e}"
        );
    }
    eprintln!("{own} of {} f32 bricks the kernel's own", n + 2);
    let brick = BodyId::new(1);
    let cols = batch.free_body_columns(brick).unwrap();
    assert!(
        matches!(outcomes[n], simbatch::gpu::events::GpuEventOutcome::Ran(_))
            && matches!(
                outcomes[n + 1],
                simbatch::gpu::events::GpuEventOutcome::Ran(_)
            ),
        "the slope's bricks are the kernel's"
    );
    assert!(cols.u[n].iter().all(|x| x.abs() <= 1e-4), "{:?}", cols.u[n]);
    let a = SLOPE_G.0 - SLIDING_MU.1 * SLOPE_G.1;
    let speed = cols.u[n + 1][3];
    assert!(
        (speed - a * duration).abs() <= 1e-3 * a * duration,
        "speed {speed} vs {}",
        a * duration
    );
}

/// A stool (the brick's mass and inertia on three feet, [`STOOL_FEET`]) spinning over level
/// ground (yaw rates 5–7 rad/s, drifting at 0.3 m/s, μ_d = 0.02) beside a ball thrown along the
/// ground 3 m away (1–3 m/s, no spin, μ = 0.1: it slides, then rolls from t* = 2 v₀ / (7 μ g) =
/// 0.29–0.87 s), cut into 4 calls of 0.3 s on the several-contact kernel, is the CPU's run
/// uncut (states within 1e-8). A resumed call tests a sliding foot's slip along its own
/// direction (the kernel's `RESUME` phase, the CPU's `Settling::Resume`), and the ball's slip →
/// stick, an event of the instance, tests it along ŝ_a, its direction at the step's start —
/// not along the direction it had when its mode was found, a right angle or more behind, which
/// stopped the stool dead.
#[test]
fn f64_a_spinning_stool_slides_on_across_calls_beside_a_rolling_ball() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        return;
    }
    let n = 6;
    let thrown = |i: usize| 1.0 + 2.0 * i as f64 / (n - 1) as f64;
    let mut t = SystemTemplate::new();
    let stool = t.add_free_body("stool");
    let mut ids = Vec::new();
    for (x, y) in STOOL_FEET {
        let foot = PointOnPlaneContact::new(GROUND, stool).with_follower_point([x, y, -0.1]);
        ids.push(t.add_constraint(foot).unwrap());
    }
    let ball = t.add_free_body("ball");
    let radius = 0.05;
    let contact = SphereOnPlaneContact::new(GROUND, ball, true).with_radius(radius);
    ids.push(t.add_constraint(contact).unwrap());
    let mut cpu = Batch::new(t, n).unwrap();
    for i in 0..n {
        let inertia = [0.0125, 0.035, 0.04, 0.0, 0.0, 0.0].map(|x| x * 2.0);
        cpu.set_gravity(i, [0.0, 0.0, -9.81]).unwrap();
        cpu.set_mass_properties(stool, i, 2.0, [0.0; 3], inertia)
            .unwrap();
        cpu.set_q(stool, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1])
            .unwrap();
        let spin = 5.0 + 2.0 * i as f64 / n as f64;
        cpu.set_u(stool, i, [0.0, 0.0, spin, 0.3, 0.1, 0.0])
            .unwrap();
        let inertia = 0.4 * radius * radius;
        cpu.set_mass_properties(
            ball,
            i,
            1.0,
            [0.0; 3],
            [inertia, inertia, inertia, 0.0, 0.0, 0.0],
        )
        .unwrap();
        cpu.set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 3.0, 0.0, radius])
            .unwrap();
        cpu.set_u(ball, i, [0.0, 0.0, 0.0, 0.0, thrown(i), 0.0])
            .unwrap();
    }
    let mut coefficients = vec![vec![Coefficients::new(0.0, 0.05, 0.02).unwrap(); 3]; n];
    for per in &mut coefficients {
        per.push(Coefficients::with_friction(0.0, 0.1).unwrap());
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
    let duration = 1.2;
    let fresh = vec![None; n];
    cpu_run(&mut cpu, &ids, &coefficients, duration, &fresh);
    let mut rolling_from = vec![None; n];
    let (records, withheld) = gpu_run_in_calls(
        &mut stepper,
        &mut gpu,
        &coefficients,
        duration,
        4,
        &options(),
        |i, records| rolling_from[i] = records[3].last_mode_change.or(rolling_from[i]),
    );
    let mut own = 0;
    for i in (0..n).filter(|i| !withheld[*i]) {
        own += 1;
        let difference = state_difference(&gpu, &cpu, i);
        assert!(
            difference <= 1e-8,
            "instance {i}: states {difference:e} apart"
        );
        let u = gpu.u(stool).unwrap()[i];
        assert!(u[2] > 1.0 && u[3].hypot(u[4]) > 0.1, "instance {i}: {u:?}");
        let records = records[i].as_ref().unwrap();
        assert!(
            records[..3]
                .iter()
                .all(|r| matches!(r.mode, ContactMode::Slide { .. })),
            "instance {i}: {records:?}"
        );
        // The ball rolls from t* on (the event is located where its slip falls to v_roll,
        // 6e-5 s before), at 5/7 v₀.
        let t_star = 2.0 * thrown(i) / (7.0 * 0.1 * 9.81);
        let from = rolling_from[i].unwrap();
        assert!(
            (from - t_star).abs() < 1e-4,
            "instance {i}: {from} vs {t_star}"
        );
        assert_eq!(records[3].mode, ContactMode::Stick, "instance {i}");
        let v = gpu.u(ball).unwrap()[i][4];
        assert!(
            (v - 5.0 / 7.0 * thrown(i)).abs() < 1e-6,
            "instance {i}: {v}"
        );
    }
    eprintln!("{own} of {n} stools the kernel's own in every call");
    assert!(2 * own >= n, "only {own} of {n} answered");
}

/// The feet of the spinning stool (`f64_a_spinning_stool_…`), 0.1 m below its centre of mass
/// and around it: three, so that with the ball's contact the kernel's cases stay within
/// lavapipe's loop budget (four corners and a ball pass it at the start's touchdown).
const STOOL_FEET: [(f64, f64); 3] = [(0.4, 0.0), (-0.2, 0.35), (-0.2, -0.35)];
