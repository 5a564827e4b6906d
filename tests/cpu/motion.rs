//! Motion laws of prescribed bodies (`src/motion/`): every built-in law and a user law are
//! consistent (velocity = d/dt pose, acceleration = d/dt velocity, by central differences), their
//! lane forms give the scalar laws' bits, a turn about a coordinate axis is the general turn, the
//! batch keeps a driven body's columns equal to its law, writes to them are refused, and a user
//! law with a WGSL twin runs on the GPU as on the CPU (evaluation and RK4 stepping).

use crate::common;

use std::sync::Arc;

use nalgebra::{Matrix3, Vector3};
use simbatch::constraints::{BodyKinematics, Check, ParamSpec, Params};
use simbatch::golden::Report;
use simbatch::motion::{
    MotionLaw, PolynomialMotion, RotationChain, TiltingMotion, WgslMotion, polynomial::MAX_DEGREE,
};
use simbatch::prelude::*;
use simbatch::scenarios::{Rng, random_polynomial, random_tilting};

/// A user law: a plate spinning at `spin_rate` about Ground z while tilted by `tilt` about its
/// own x axis (a wobble), heaving `heave_amplitude · cos(heave_rate · t)` along z.
#[derive(Debug)]
struct Wobble;

impl MotionLaw for Wobble {
    fn kind_name(&self) -> &'static str {
        "wobble"
    }

    fn params(&self) -> Vec<ParamSpec> {
        ["spin_rate", "tilt", "heave_amplitude", "heave_rate"]
            .into_iter()
            .map(|name| ParamSpec {
                name,
                default: vec![0.0],
                check: Check::Finite,
            })
            .collect()
    }

    fn evaluate(&self, p: &Params<'_>, t: f64) -> BodyKinematics {
        let (spin, tilt, amplitude, rate) = (p.get(0)[0], p.get(1)[0], p.get(2)[0], p.get(3)[0]);
        let mut chain = RotationChain::new();
        chain.then(&Vector3::z(), spin * t, spin, 0.0);
        chain.then(&Vector3::x(), tilt, 0.0, 0.0);
        let (s, c) = (rate * t).sin_cos();
        BodyKinematics {
            rotation: chain.rotation,
            origin: Vector3::new(0.0, 0.0, amplitude * c),
            ang_vel: chain.ang_vel,
            lin_vel: Vector3::new(0.0, 0.0, -amplitude * rate * s),
            ang_acc: chain.ang_acc,
            lin_acc: Vector3::new(0.0, 0.0, -amplitude * rate * rate * c),
        }
    }

    fn wgsl(&self) -> Option<WgslMotion> {
        Some(WgslMotion {
            file: "wobble.wgsl".into(),
            source: "fn wobble_motion(p: array<real, MOTION_PARAMS_CAP>, t: real) -> BodyKinematics {
    var chain = rotation_chain();
    chain = rotation_chain_then(chain, vec3<real>(0.0, 0.0, 1.0), p[0] * t, p[0], 0.0);
    chain = rotation_chain_then(chain, vec3<real>(1.0, 0.0, 0.0), p[1], 0.0, 0.0);
    let c = cos(p[3] * t);
    let s = sin(p[3] * t);
    let zero = vec3<real>(0.0, 0.0, 0.0);
    return BodyKinematics(chain.rotation, vec3<real>(0.0, 0.0, p[2] * c), chain.ang_vel,
        vec3<real>(0.0, 0.0, -p[2] * p[3] * s), chain.ang_acc, vec3<real>(0.0, 0.0, -p[2] * p[3] * p[3] * c));
}
"
            .into(),
            evaluate: "wobble_motion(p, t)".into(),
        })
    }
}

/// The same law without a GPU twin.
#[derive(Debug)]
struct CpuOnly;

impl MotionLaw for CpuOnly {
    fn kind_name(&self) -> &'static str {
        "cpu_only"
    }
    fn params(&self) -> Vec<ParamSpec> {
        Wobble.params()
    }
    fn evaluate(&self, p: &Params<'_>, t: f64) -> BodyKinematics {
        Wobble.evaluate(p, t)
    }
}

fn wobble_values(r: &mut Rng) -> Vec<f64> {
    vec![
        r.uniform(-3.0, 3.0),
        r.uniform(-0.3, 0.3),
        r.uniform(0.0, 0.03),
        r.uniform(1.0, 6.0),
    ]
}

/// `w` from `Ṙ Rᵀ = [w]×`.
fn unskew(m: &Matrix3<f64>) -> Vector3<f64> {
    Vector3::new(
        0.5 * (m[(2, 1)] - m[(1, 2)]),
        0.5 * (m[(0, 2)] - m[(2, 0)]),
        0.5 * (m[(1, 0)] - m[(0, 1)]),
    )
}

/// Central differences of a law's pose and velocity against its velocity and acceleration.
fn check_derivatives(law: &dyn MotionLaw, values: &[f64], t: f64) -> f64 {
    let specs = law.params();
    let mut columns = Vec::new();
    let mut widths = Vec::new();
    let mut at = 0;
    for spec in &specs {
        let w = spec.default.len();
        let mut v = values[at..at + w].to_vec();
        assert!(spec.check.accept(&mut v), "{}", spec.name);
        columns.push(v);
        widths.push(w);
        at += w;
    }
    assert_eq!(at, values.len(), "{}: parameter count", law.kind_name());
    let p = Params::new(&columns, &widths, 0);
    let h = 1e-5;
    let (a, b, k) = (
        law.evaluate(&p, t - h),
        law.evaluate(&p, t + h),
        law.evaluate(&p, t),
    );
    let w_fd = unskew(&((b.rotation - a.rotation) / (2.0 * h) * k.rotation.transpose()));
    let rel = |gap: Vector3<f64>, reference: &Vector3<f64>| gap.norm() / reference.norm().max(1.0);
    let gaps = [
        rel(w_fd - k.ang_vel, &k.ang_vel),
        rel((b.ang_vel - a.ang_vel) / (2.0 * h) - k.ang_acc, &k.ang_acc),
        rel((b.origin - a.origin) / (2.0 * h) - k.lin_vel, &k.lin_vel),
        rel((b.lin_vel - a.lin_vel) / (2.0 * h) - k.lin_acc, &k.lin_acc),
        (k.rotation * k.rotation.transpose() - Matrix3::identity()).norm(),
    ];
    gaps.into_iter().fold(0.0, f64::max)
}

#[test]
fn every_law_is_consistent_by_finite_differences() {
    for seed in 0..20 {
        let mut r = Rng::for_instance(7, seed);
        let t = r.uniform(0.0, 3.0);
        let tilting = random_tilting(&mut r);
        let cubic = random_polynomial(&mut r);
        let mut quintic = vec![t - r.uniform(-1.0, 1.0), 0.9, 0.1, -0.3, 0.2];
        for _ in 0..6 * (MAX_DEGREE + 1) {
            quintic.push(r.uniform(-0.2, 0.2));
        }
        let wobble = wobble_values(&mut r);
        for (law, values) in [
            (&TiltingMotion as &dyn MotionLaw, tilting),
            (&PolynomialMotion::new(3).unwrap(), cubic),
            (&PolynomialMotion::new(MAX_DEGREE).unwrap(), quintic),
            (&Wobble, wobble),
        ] {
            let gap = check_derivatives(law, &values, t);
            assert!(gap < 1e-7, "{} seed {seed}: {gap:e}", law.kind_name());
        }
    }
}

/// `axis_rotation` against the rotation of the quaternion `[cos(θ/2), sin(θ/2) a]` (an
/// independent formula), and `RotationChain::then_about` (a gimbal's coordinate axis, two
/// columns turned) against `then` with that axis as a vector (a 3×3 product), along random
/// chains that start from a random rotation.
#[test]
fn a_turn_about_a_coordinate_axis_is_the_general_turn() {
    use simbatch::math::{axis_rotation, rotation_from_quaternion};
    use simbatch::motion::CoordinateAxis;
    let axes = [CoordinateAxis::X, CoordinateAxis::Y, CoordinateAxis::Z];
    for seed in 0..50 {
        let mut r = Rng::for_instance(11, seed);
        let a = Vector3::new(
            r.uniform(-1.0, 1.0),
            r.uniform(-1.0, 1.0),
            r.uniform(-1.0, 1.0),
        )
        .normalize();
        let angle = r.uniform(-3.0, 3.0);
        let (s, c) = (0.5 * angle).sin_cos();
        let q = [c, s * a.x, s * a.y, s * a.z];
        let expected = rotation_from_quaternion(&q).unwrap();
        let gap = (axis_rotation(&a, angle) - expected).amax();
        assert!(gap < 1e-15, "seed {seed}: axis_rotation off by {gap:e}");

        let mut general = RotationChain::new();
        general.then(&a, angle, r.uniform(-2.0, 2.0), r.uniform(-5.0, 5.0));
        let mut about = general;
        for step in 0..6 {
            let k = (seed + step * 2) % 3;
            let (angle, rate, accel) = (
                r.uniform(-3.0, 3.0),
                r.uniform(-2.0, 2.0),
                r.uniform(-5.0, 5.0),
            );
            let mut e = Vector3::zeros();
            e[k] = 1.0;
            general.then(&e, angle, rate, accel);
            about.then_about(axes[k], angle, rate, accel);
            let gaps = [
                (general.rotation - about.rotation).amax(),
                (general.ang_vel - about.ang_vel).amax(),
                (general.ang_acc - about.ang_acc).amax(),
            ];
            assert!(
                gaps.iter().all(|g| *g < 1e-13),
                "seed {seed}, step {step} about axis {k}: rotation, w, b off by {gaps:?}"
            );
        }
    }
}

/// The built-in laws' lane forms (`MotionLaw::evaluate_lanes`, the CPU fast path) give each
/// lane the scalar law's bits for its instance at the lane's own time, lanes repeating an
/// instance included; a user law's default lane form is its scalar law lane by lane.
#[test]
fn lane_forms_of_the_laws_give_the_scalar_laws_bits() {
    use simbatch::constraints::ParamLanes;
    use simbatch::math::lanes::{LANES, lanes};
    use simbatch::model::Broadcast;
    let n = 11;
    let polynomial_values = |degree: usize| {
        move |r: &mut Rng| {
            let mut v = vec![r.uniform(-1.0, 1.0)];
            v.extend(&r.pose(1.0)[..4]);
            for _ in 0..6 * (degree + 1) {
                v.push(r.uniform(-0.8, 0.8));
            }
            v
        }
    };
    type Draw = Box<dyn Fn(&mut Rng) -> Vec<f64>>;
    let mut laws: Vec<(Box<dyn MotionLaw>, Draw)> = vec![
        (Box::new(TiltingMotion), Box::new(random_tilting)),
        (Box::new(Wobble), Box::new(wobble_values)),
    ];
    for degree in 0..=MAX_DEGREE {
        laws.push((
            Box::new(PolynomialMotion::new(degree).unwrap()),
            Box::new(polynomial_values(degree)),
        ));
    }
    for (law, draw) in &laws {
        let specs = law.params();
        let mut columns: Vec<Broadcast<f64>> = specs
            .iter()
            .map(|spec| Broadcast::shared(n, &spec.default))
            .collect();
        let mut r = Rng::for_instance(13, law.params().len());
        for i in 0..n {
            let values = draw(&mut r);
            let mut at = 0;
            for (column, spec) in columns.iter_mut().zip(&specs) {
                let w = spec.default.len();
                column
                    .set_row(i, &values[at..at + w], &|| spec.name.to_string())
                    .unwrap();
                at += w;
            }
            assert_eq!(at, values.len(), "{}", law.kind_name());
        }
        for chunk in 0..2 * n {
            // Consecutive instances, scattered ones, and one instance in every lane (as a
            // chunk's padding lanes repeat one).
            let instances: [usize; LANES] = std::array::from_fn(|l| match chunk % 3 {
                0 => (chunk + l) % n,
                1 => (chunk * 7 + 3 * l * l) % n,
                _ => chunk % n,
            });
            let times: [f64; LANES] = std::array::from_fn(|_| r.uniform(0.0, 4.0));
            let lane = law.evaluate_lanes(&ParamLanes::new(&columns, instances), lanes(times));
            for l in 0..LANES {
                let expected = law.evaluate(&Params::of(&columns, instances[l]), times[l]);
                let got = lane.lane(l);
                let bits = |k: &BodyKinematics| -> Vec<u64> {
                    k.rotation
                        .iter()
                        .chain(k.origin.iter())
                        .chain(k.ang_vel.iter())
                        .chain(k.lin_vel.iter())
                        .chain(k.ang_acc.iter())
                        .chain(k.lin_acc.iter())
                        .map(|x| x.to_bits())
                        .collect()
                };
                assert_eq!(
                    bits(&got),
                    bits(&expected),
                    "{} lane {l}, instance {}, t = {}: {got:?} against {expected:?}",
                    law.kind_name(),
                    instances[l],
                    times[l]
                );
            }
        }
    }
}

/// A ball on a driven plate, `n` random instances at random times.
fn ball_on(law: Arc<dyn MotionLaw>, n: usize, values: impl Fn(&mut Rng) -> Vec<f64>) -> Batch {
    let mut t = SystemTemplate::new();
    let plate = t.add_driven_body_arc("plate", law);
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(SphereOnPlaneContact::new(plate, ball, true))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    for i in 0..n {
        let mut r = Rng::for_instance(31, i);
        batch.set_time(i, r.uniform(0.0, 2.0)).unwrap();
        batch.set_motion_params(plate, i, &values(&mut r)).unwrap();
        let radius = r.uniform(0.05, 0.15);
        let m = r.uniform(0.2, 2.0);
        let inertia = 0.4 * m * radius * radius;
        batch
            .set_mass_properties(
                ball,
                i,
                m,
                [0.0; 3],
                [inertia, inertia, inertia, 0.0, 0.0, 0.0],
            )
            .unwrap();
        batch.set_param(c, "radius", i, &[radius]).unwrap();
        let k = batch.motion_at(plate, i, batch.time()[i]).unwrap();
        let offset = Vector3::new(r.uniform(-0.2, 0.2), r.uniform(-0.2, 0.2), radius);
        let centre = k.origin + k.rotation * offset;
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, centre.x, centre.y, centre.z])
            .unwrap();
    }
    simbatch::cpu::assembly::assemble_velocities(&mut batch, None).unwrap();
    batch
}

/// Every parameter of a plate's tilting law and its pose, velocity and acceleration columns,
/// as bits: what two batches must agree on after the same writes.
fn law_bits(batch: &Batch, plate: BodyId) -> Vec<u64> {
    let names: Vec<&str> = TiltingMotion.params().iter().map(|s| s.name).collect();
    let mut bits = Vec::new();
    for name in names {
        bits.extend(
            batch
                .motion_param(plate, name)
                .unwrap()
                .0
                .iter()
                .map(|x| x.to_bits()),
        );
    }
    let columns = [
        batch.pose(plate).unwrap().as_flattened(),
        batch.velocity(plate).unwrap().as_flattened(),
        batch.acceleration(plate).unwrap().as_flattened(),
    ];
    bits.extend(columns.iter().flat_map(|c| c.iter().map(|x| x.to_bits())));
    bits
}

#[test]
fn laws_set_for_many_instances_at_once_match_one_instance_at_a_time() {
    // Past the batch's parallel threshold (256), on pools of one and three threads.
    let n = 700;
    let start = ball_on(Arc::new(TiltingMotion), n, random_tilting);
    let plate = start.template().prescribed_bodies()[0];
    let width = random_tilting(&mut Rng::for_instance(5, 0)).len();
    let apply: Vec<bool> = (0..n).map(|i| i % 3 != 1).collect();
    let mut rows = Vec::with_capacity(n * width);
    for (i, &selected) in apply.iter().enumerate() {
        if selected {
            rows.extend(random_tilting(&mut Rng::for_instance(77, i)));
        } else {
            // Rows not selected are not read: not even checked.
            rows.extend(std::iter::repeat_n(f64::NAN, width));
        }
    }
    for mask in [Some(&apply[..]), None] {
        let mut rows = rows.clone();
        if mask.is_none() {
            for i in (1..n).step_by(3) {
                let row = random_tilting(&mut Rng::for_instance(78, i));
                rows[i * width..(i + 1) * width].copy_from_slice(&row);
            }
        }
        let mut one = start.clone();
        for i in (0..n).filter(|&i| mask.is_none_or(|m| m[i])) {
            one.set_motion_params(plate, i, &rows[i * width..(i + 1) * width])
                .unwrap();
        }
        assert_ne!(law_bits(&one, plate), law_bits(&start, plate));
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut all = start.clone();
            pool.install(|| all.set_motion_params_rows(plate, &rows, mask))
                .unwrap();
            assert!(
                law_bits(&all, plate) == law_bits(&one, plate),
                "{threads} threads, mask {}",
                mask.is_some()
            );
        }
    }

    // An invalid row anywhere refuses the call, names the lowest such instance and writes
    // nothing; so do wrong lengths.
    let mut bad = rows.clone();
    for i in [650, 401] {
        bad[i * width..i * width + 3].copy_from_slice(&[0.0; 3]); // axis1 = 0
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let mut all = start.clone();
    let err = pool
        .install(|| all.set_motion_params_rows(plate, &bad, Some(&apply)))
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("axis1") && text.contains("401"), "{text}");
    assert!(law_bits(&all, plate) == law_bits(&start, plate));
    let err = all
        .set_motion_params_rows(plate, &rows[width..], Some(&apply))
        .unwrap_err();
    assert!(matches!(err, Error::ColumnLength { .. }), "{err}");
    let err = all
        .set_motion_params_rows(plate, &rows, Some(&apply[1..]))
        .unwrap_err();
    assert!(
        matches!(err, Error::ColumnLength { expected: 700, .. }),
        "{err}"
    );
    assert!(law_bits(&all, plate) == law_bits(&start, plate));

    // Rows that normalise to what a shared column holds leave it shared, as one instance at a
    // time does: every instance given the default law with its axes and base rotation scaled.
    let mut t = SystemTemplate::new();
    let plate = t.add_driven_body("plate", TiltingMotion);
    t.add_free_body("ball");
    let fresh = Batch::new(t, n).unwrap();
    let mut scaled: Vec<f64> = Vec::new();
    for spec in TiltingMotion.params() {
        let factor = match spec.name {
            "axis1" => 2.0,
            "axis2" => 4.0,
            "base_rotation" => 0.5,
            _ => 1.0,
        };
        scaled.extend(spec.default.iter().map(|x| x * factor));
    }
    let rows: Vec<f64> = scaled.iter().copied().cycle().take(n * width).collect();
    let mut one = fresh.clone();
    for i in 0..n {
        one.set_motion_params(plate, i, &scaled).unwrap();
    }
    let mut all = fresh.clone();
    pool.install(|| all.set_motion_params_rows(plate, &rows, None))
        .unwrap();
    assert!(law_bits(&all, plate) == law_bits(&fresh, plate));
    assert!(law_bits(&one, plate) == law_bits(&fresh, plate));
    assert_eq!(all.bytes(), fresh.bytes());
    assert_eq!(one.bytes(), fresh.bytes());
}

#[test]
fn driven_columns_follow_the_law_and_refuse_writes() {
    let mut batch = ball_on(Arc::new(TiltingMotion), 8, random_tilting);
    let plate = batch.template().prescribed_bodies()[0];
    for i in 0..batch.len() {
        let k = batch.motion_at(plate, i, batch.time()[i]).unwrap();
        let (pose, velocity, acceleration) = simbatch::motion::motion_columns(&k);
        assert_eq!(batch.pose(plate).unwrap()[i], pose);
        assert_eq!(batch.velocity(plate).unwrap()[i], velocity);
        assert_eq!(batch.acceleration(plate).unwrap()[i], acceleration);
    }
    // Moving the clock moves the plate.
    batch.set_time(3, 1.234).unwrap();
    let k = batch.motion_at(plate, 3, 1.234).unwrap();
    assert_eq!(
        batch.pose(plate).unwrap()[3],
        simbatch::motion::motion_columns(&k).0
    );
    // Stepping leaves the columns at the law at the new time.
    let mut stepper = Stepper::new(StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    })
    .unwrap();
    stepper.advance(&mut batch, 0.05).unwrap();
    for i in 0..batch.len() {
        let k = batch.motion_at(plate, i, batch.time()[i]).unwrap();
        assert_eq!(
            batch.velocity(plate).unwrap()[i],
            simbatch::motion::motion_columns(&k).1
        );
    }
    let err = batch
        .set_pose(plate, 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        .unwrap_err();
    assert!(matches!(err, Error::DrivenBody { .. }), "{err}");
    assert!(err.to_string().contains("tilting"), "{err}");
    let err = batch
        .set_motion_param(plate, "axis1", 0, &[0.0; 3])
        .unwrap_err();
    assert!(
        err.to_string().contains("axis1") && err.to_string().contains("not zero"),
        "{err}"
    );
    let err = batch
        .set_motion_param(plate, "axis3", 0, &[1.0; 3])
        .unwrap_err();
    assert!(
        err.to_string().contains("angle_rate"),
        "names what exists: {err}"
    );
    let err = batch.set_motion_params(plate, 0, &[0.0; 5]).unwrap_err();
    assert!(
        matches!(err, Error::ColumnLength { expected: 28, .. }),
        "{err}"
    );
    // A constant-law body has no parameters.
    let (b, _, _) = simbatch::scenarios::contact_batch(
        simbatch::scenarios::ContactKind::Point,
        simbatch::scenarios::PlaneBody::Prescribed,
        2,
        1,
    )
    .unwrap();
    let table = b.template().prescribed_bodies()[0];
    assert!(
        b.motion_param(table, "axis1")
            .unwrap_err()
            .to_string()
            .contains("constant")
    );
    let err = b.motion_at(table, 0, 0.0).unwrap_err().to_string();
    assert!(err.contains("constant law"), "{err}");
}

#[test]
fn a_user_law_runs_on_the_gpu_as_on_the_cpu() {
    let Some(device) = common::device() else {
        return;
    };
    let batch = ball_on(Arc::new(Wobble), 2000, wobble_values);
    // Evaluation at each instance's time.
    let mut gpu = GpuEvaluator::new(
        device.clone(),
        &batch,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap();
    let mut report = Report::default();
    simbatch::golden::compare_evaluations(
        &gpu.evaluate(&batch).unwrap(),
        &batch.evaluate(),
        2e-4,
        &mut report,
    )
    .unwrap();
    println!("wobble evaluation, f32:\n{report}");
    assert!(report.passed(), "{report}");
    // RK4 stepping, the law at every stage in the kernel.
    let options = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let mut cpu = batch.clone();
    Stepper::new(options).unwrap().step(&mut cpu, 50).unwrap();
    let mut on_gpu = batch.clone();
    Stepper::on_gpu(options, device.clone(), Precision::F32)
        .unwrap()
        .step(&mut on_gpu, 50)
        .unwrap();
    let ball = batch.template().free_bodies()[0];
    let mut worst: f64 = 0.0;
    for i in 0..batch.len() {
        assert_eq!(on_gpu.status()[i], 0);
        for (a, b) in on_gpu.q(ball).unwrap()[i]
            .iter()
            .zip(&cpu.q(ball).unwrap()[i])
        {
            worst = worst.max((a - b).abs());
        }
        for (a, b) in on_gpu.u(ball).unwrap()[i]
            .iter()
            .zip(&cpu.u(ball).unwrap()[i])
        {
            worst = worst.max((a - b).abs() / b.abs().max(1.0));
        }
        for (a, b) in on_gpu.work()[i].iter().zip(&cpu.work()[i]) {
            worst = worst.max((a - b).abs() / b.abs().max(1.0));
        }
        assert!((on_gpu.time()[i] - cpu.time()[i]).abs() < 1e-12);
    }
    println!("wobble RK4, 50 steps, GPU f32 vs CPU f64: {worst:.3e}");
    assert!(worst < 1e-4, "{worst:e}");
    // A law without WGSL cannot run there, and says so.
    let cpu_only = ball_on(Arc::new(CpuOnly), 4, wobble_values);
    let err = match GpuEvaluator::new(device, &cpu_only, Precision::F32, GpuOptions::default()) {
        Ok(_) => panic!("a law without WGSL built a GPU kernel"),
        Err(e) => e,
    };
    assert!(
        err.to_string().contains("cpu_only") && err.to_string().contains("plate"),
        "{err}"
    );
}
