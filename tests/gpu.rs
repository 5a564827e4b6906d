//! The GPU path against the f64 CPU reference and Simbody's golden files (`physics.md` §7).
//! These run on whatever adapter wgpu finds — lavapipe (CPU Vulkan) in CI. With `CI=true` and
//! no adapter they fail; elsewhere they say so and pass.
//!
//! Tolerances, and why: f32 kernels agree with the CPU within `2e-4 · max(1, |b|)` on every
//! quantity (the contract's bound), except where rows are redundant: there λ itself is only
//! defined through a rank decision, so λ is held to `2e-3 · max(1, |b|)` while u̇ and the total
//! constraint force keep the contract's bound. f64 kernels agree within the CPU's own golden
//! bound, 1e-9. Vector quantities (forces, contact points) are compared per component relative
//! to the vector's magnitude, and the acceleration error at the solved u̇ — a residual
//! `G u̇ + k ≈ 0` — relative to the size of the terms it cancels (`golden::Report` documents
//! both).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use simbatch::golden::{self, Report, compare_evaluations};
use simbatch::gpu::layout::Layout;
use simbatch::model::Baumgarte;
use simbatch::prelude::*;

const F32_TOL: f64 = 2e-4;
const F32_REDUNDANT_LAMBDA_TOL: f64 = 2e-3;
const F64_TOL: f64 = 1e-9;

fn device() -> Option<Arc<GpuDevice>> {
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

/// SplitMix64, for reproducible random instances.
struct Rng(u64);
impl Rng {
    fn f(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn u(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }
    fn v3(&mut self, s: f64) -> [f64; 3] {
        [self.u(-s, s), self.u(-s, s), self.u(-s, s)]
    }
    fn frame(&mut self, s: f64) -> [f64; 7] {
        let p = self.v3(s);
        [
            self.u(-1.0, 1.0),
            self.u(-1.0, 1.0),
            self.u(-1.0, 1.0),
            self.u(-1.0, 1.0),
            p[0],
            p[1],
            p[2],
        ]
    }
    fn inertia(&mut self) -> [f64; 6] {
        // Diagonal in [0.2, 0.3] keeps the triangle inequality with room for the products.
        [
            self.u(0.2, 0.3),
            self.u(0.2, 0.3),
            self.u(0.2, 0.3),
            self.u(-0.02, 0.02),
            self.u(-0.02, 0.02),
            self.u(-0.02, 0.02),
        ]
    }
}

#[derive(Clone, Copy, Debug)]
enum PlaneBody {
    Ground,
    Free,
    Prescribed,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    RollingSphere,
    SlidingSphere,
    Point,
}

/// A batch of `n` random, deliberately inconsistent instances (every term of the formulas shows).
fn random_contact_batch(
    kind: Kind,
    plane: PlaneBody,
    n: usize,
    seed: u64,
) -> (Batch, ConstraintId) {
    let mut t = SystemTemplate::new();
    let p = match plane {
        PlaneBody::Ground => GROUND,
        PlaneBody::Free => t.add_free_body("plane"),
        PlaneBody::Prescribed => t.add_prescribed_body("plane"),
    };
    let b = t.add_free_body("body");
    let c = match kind {
        Kind::RollingSphere => t.add_constraint(SphereOnPlaneContact::new(p, b, true)),
        Kind::SlidingSphere => t.add_constraint(SphereOnPlaneContact::new(p, b, false)),
        Kind::Point => t.add_constraint(PointOnPlaneContact::new(p, b)),
    }
    .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    let mut r = Rng(seed);
    for i in 0..n {
        batch.set_gravity(i, r.v3(10.0)).unwrap();
        let mut bodies = vec![b];
        if let PlaneBody::Free = plane {
            bodies.push(p);
        }
        for body in bodies {
            batch
                .set_mass_properties(body, i, r.u(0.5, 5.0), r.v3(0.1), r.inertia())
                .unwrap();
            batch.set_q(body, i, r.frame(1.0)).unwrap();
            let (w, v) = (r.v3(3.0), r.v3(2.0));
            batch
                .set_u(body, i, [w[0], w[1], w[2], v[0], v[1], v[2]])
                .unwrap();
            batch.set_applied_force(body, i, r.v3(1.0)).unwrap();
            batch.set_applied_torque(body, i, r.v3(0.3)).unwrap();
        }
        if let PlaneBody::Prescribed = plane {
            batch.set_pose(p, i, r.frame(1.0)).unwrap();
            let (w, v, bb, a) = (r.v3(2.0), r.v3(1.0), r.v3(3.0), r.v3(3.0));
            batch
                .set_velocity(p, i, [w[0], w[1], w[2], v[0], v[1], v[2]])
                .unwrap();
            batch
                .set_acceleration(p, i, [bb[0], bb[1], bb[2], a[0], a[1], a[2]])
                .unwrap();
        }
        batch.set_param(c, "plane_frame", i, &r.frame(0.3)).unwrap();
        match kind {
            Kind::Point => batch.set_param(c, "follower_point", i, &r.v3(0.3)).unwrap(),
            _ => {
                batch.set_param(c, "sphere_center", i, &r.v3(0.2)).unwrap();
                batch.set_param(c, "radius", i, &[r.u(0.05, 0.3)]).unwrap();
            }
        }
        // A few instances have the constraint disabled: their rows drop out.
        if i % 97 == 5 {
            batch.set_enabled(c, i, false).unwrap();
        }
    }
    (batch, c)
}

fn gpu_evaluation(device: &Arc<GpuDevice>, batch: &Batch, precision: Precision) -> Evaluation {
    GpuEvaluator::new(device.clone(), batch, precision, GpuOptions::default())
        .unwrap()
        .evaluate(batch)
        .unwrap()
}

fn assert_report(name: &str, report: &Report) {
    println!("{name}:\n{report}");
    assert!(report.passed(), "{name}:\n{report}");
}

#[test]
fn gpu_f32_matches_cpu_on_random_instances_for_every_kind_and_plane_body() {
    let Some(device) = device() else { return };
    for (k, kind) in [Kind::RollingSphere, Kind::SlidingSphere, Kind::Point]
        .into_iter()
        .enumerate()
    {
        for (p, plane) in [PlaneBody::Ground, PlaneBody::Free, PlaneBody::Prescribed]
            .into_iter()
            .enumerate()
        {
            let (batch, _) =
                random_contact_batch(kind, plane, 10_000, 1000 + 10 * k as u64 + p as u64);
            let cpu = batch.evaluate();
            let gpu = gpu_evaluation(&device, &batch, Precision::F32);
            let mut report = Report::default();
            compare_evaluations(&gpu, &cpu, F32_TOL, &mut report).unwrap();
            assert_report(&format!("{kind:?} on {plane:?} plane, f32"), &report);
        }
    }
}

fn point_to_ground_batch(
    n: usize,
    seed: u64,
    normals: usize,
    position_level: bool,
    baumgarte: bool,
) -> (Batch, Vec<ConstraintId>) {
    let mut t = SystemTemplate::new();
    let b = t.add_free_body("body");
    let axes = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
    let mut c = PointToGround::new(b, [0.0, 0.0, -0.1], &axes[..normals]).unwrap();
    if position_level {
        c = c.position_level();
    }
    let id = t.add_constraint(c).unwrap();
    if baumgarte {
        t.set_baumgarte(
            id,
            Some(Baumgarte {
                time_constant: 0.05,
            }),
        )
        .unwrap();
    }
    let mut batch = Batch::new(t, n).unwrap();
    let mut r = Rng(seed);
    for i in 0..n {
        batch.set_gravity(i, r.v3(10.0)).unwrap();
        batch
            .set_mass_properties(b, i, r.u(0.5, 5.0), r.v3(0.1), r.inertia())
            .unwrap();
        batch.set_q(b, i, r.frame(1.0)).unwrap();
        let (w, v) = (r.v3(3.0), r.v3(2.0));
        batch
            .set_u(b, i, [w[0], w[1], w[2], v[0], v[1], v[2]])
            .unwrap();
        let point = r.v3(0.3);
        batch.set_param(id, "point", i, &point).unwrap();
        // The ground point lies within 5 cm of the contact point, and T ≥ 0.05 s: a plausible
        // drift for Baumgarte to correct (metre-scale violations at T = 0.02 s make forces of
        // thousands of newtons, whose small world components carry the whole force's rounding).
        let q = batch.q(b).unwrap()[i];
        let rot = simbatch::math::rotation_from_quaternion(&q[..4]).unwrap();
        let x_p = nalgebra::Vector3::new(q[4], q[5], q[6]) + rot * nalgebra::Vector3::from(point);
        let off = r.v3(0.05);
        batch
            .set_param(
                id,
                "ground_point",
                i,
                &[x_p.x + off[0], x_p.y + off[1], x_p.z + off[2]],
            )
            .unwrap();
        if baumgarte {
            batch
                .set_baumgarte_time_constant(id, i, r.u(0.05, 0.5))
                .unwrap();
        }
        // A random orthonormal frame supplies the normals.
        let q = r.frame(0.0);
        let rot = simbatch::math::rotation_from_quaternion(&q[..4]).unwrap();
        let flat: Vec<f64> = (0..normals)
            .flat_map(|k| rot.column(k).iter().copied().collect::<Vec<_>>())
            .collect();
        batch.set_param(id, "normals", i, &flat).unwrap();
    }
    (batch, vec![id])
}

#[test]
fn gpu_f32_matches_cpu_on_point_to_ground_contacts() {
    let Some(device) = device() else { return };
    for (normals, position_level, baumgarte) in [
        (1, false, false),
        (2, true, true),
        (3, false, true),
        (3, true, false),
    ] {
        let (batch, _) = point_to_ground_batch(
            10_000,
            77 + normals as u64,
            normals,
            position_level,
            baumgarte,
        );
        let cpu = batch.evaluate();
        let gpu = gpu_evaluation(&device, &batch, Precision::F32);
        let mut report = Report::default();
        compare_evaluations(&gpu, &cpu, F32_TOL, &mut report).unwrap();
        assert_report(
            &format!(
                "point_to_ground normals={normals} position_level={position_level} baumgarte={baumgarte}"
            ),
            &report,
        );
    }
}

#[test]
fn gpu_jacobians_and_bias_match_cpu() {
    let Some(device) = device() else { return };
    let (batch, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Free, 2000, 5);
    let mut e = GpuEvaluator::new(
        device.clone(),
        &batch,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap();
    let (_, jac) = e.evaluate_with_jacobians(&batch).unwrap();
    let nu = batch.template().nu();
    let mut report = Report::default();
    for i in 0..batch.len() {
        let sys = batch.instance_system(i).unwrap();
        if sys.rows() == 0 {
            continue;
        }
        let g: Vec<f64> = sys.jacobian.transpose().as_slice().to_vec();
        report.check_slice(
            "G",
            &format!("instance {i}"),
            &jac.jacobian[0][i * 3 * nu..(i + 1) * 3 * nu],
            &g,
            F32_TOL,
        );
        report.check_slice(
            "k",
            &format!("instance {i}"),
            &jac.bias_acceleration[0][i * 3..(i + 1) * 3],
            sys.bias_acceleration.as_slice(),
            F32_TOL,
        );
    }
    report.records = batch.len();
    assert_report("G and k", &report);
}

fn golden_dir() -> PathBuf {
    std::env::var_os("SIMBATCH_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden"))
}

/// Simbody's golden files through the GPU: f32 within the contract's f32 bound, f64 within the
/// CPU's.
#[test]
fn gpu_matches_simbody_golden_files() {
    let Some(device) = device() else { return };
    let records = golden::read_dir(&golden_dir()).unwrap();
    let mut groups: std::collections::BTreeMap<String, Vec<&golden::Record>> = Default::default();
    for r in &records {
        groups
            .entry(golden::group_key(r).unwrap())
            .or_default()
            .push(r);
    }
    let mut precisions = vec![(Precision::F32, F32_TOL)];
    if device.supports_f64 {
        precisions.push((Precision::F64, F64_TOL));
    }
    for (precision, tol) in precisions {
        let mut report = Report::default();
        for group in groups.values() {
            match group[0].kind().unwrap() {
                "sphere_on_plane" | "point_on_plane" => {
                    let (batch, handles) = golden::contact_batch(group).unwrap();
                    let ev = gpu_evaluation(&device, &batch, precision);
                    golden::compare_contact(group, &batch, &handles, &ev, tol, &mut report)
                        .unwrap();
                }
                "brick_on_corners" => {
                    let (batch, handles) = golden::brick_batch(group).unwrap();
                    let ev = gpu_evaluation(&device, &batch, precision);
                    // Redundant rows: u̇ to the bound, λ (a rank decision) to the looser one.
                    let mut udot_report = Report::default();
                    golden::compare_brick(group, &handles, &ev, tol, &mut udot_report).unwrap();
                    let lambda_tol = if precision == Precision::F32 {
                        F32_REDUNDANT_LAMBDA_TOL
                    } else {
                        tol
                    };
                    let mut lambda_report = Report::default();
                    golden::compare_brick(group, &handles, &ev, lambda_tol, &mut lambda_report)
                        .unwrap();
                    for (q, w) in &udot_report.worst {
                        let limit = if q.contains("multipliers") {
                            lambda_tol
                        } else {
                            tol
                        };
                        assert!(
                            w.relative <= limit,
                            "{precision:?} {q}: {} at {}",
                            w.relative,
                            w.location
                        );
                    }
                    report.merge(lambda_report);
                }
                _ => {}
            }
        }
        assert_report(&format!("golden files on the GPU, {precision:?}"), &report);
    }
}

#[test]
fn gpu_f64_matches_cpu_to_the_cpu_bound() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        eprintln!("adapter has no SHADER_F64; f64 parity not run");
        return;
    }
    let (batch, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Prescribed, 3000, 9);
    let cpu = batch.evaluate();
    let gpu = gpu_evaluation(&device, &batch, Precision::F64);
    let mut report = Report::default();
    compare_evaluations(&gpu, &cpu, F64_TOL, &mut report).unwrap();
    assert_report("f64 rolling sphere on prescribed plane", &report);
}

/// A batch larger than the binding limit is split into chunks; results are bit-identical to one
/// chunk (the kernel is the same per instance) and match the CPU.
#[test]
fn chunked_batches_give_the_same_results() {
    let Some(device) = device() else { return };
    let (batch, _) = random_contact_batch(Kind::Point, PlaneBody::Free, 5000, 21);
    let layout = Layout::new(batch.template()).unwrap();
    let per_instance = (layout.input_width.max(layout.output_width) * 4) as u64;
    let small = GpuOptions {
        max_binding_bytes: Some(per_instance * 700),
    };
    let mut chunked = GpuEvaluator::new(device.clone(), &batch, Precision::F32, small).unwrap();
    let a = chunked.evaluate(&batch).unwrap();
    assert_eq!(chunked.chunk_capacity(), 700);
    assert_eq!(chunked.chunk_count(), 8);
    let whole = gpu_evaluation(&device, &batch, Precision::F32);
    assert_eq!(a, whole, "chunking must not change a single bit");
    let mut report = Report::default();
    compare_evaluations(&a, &batch.evaluate(), F32_TOL, &mut report).unwrap();
    assert_report("chunked", &report);
}

/// Buffers persist: a second call uploads nothing, a changed column alone is re-sent, and the
/// results follow the change.
#[test]
fn only_changed_columns_are_uploaded() {
    let Some(device) = device() else { return };
    let (mut batch, c) = random_contact_batch(Kind::RollingSphere, PlaneBody::Ground, 1000, 3);
    let mut e = GpuEvaluator::new(
        device.clone(),
        &batch,
        Precision::F32,
        GpuOptions::default(),
    )
    .unwrap();
    e.evaluate(&batch).unwrap();
    let full = e.last_upload_bytes();
    assert!(full > 0);
    e.evaluate(&batch).unwrap();
    assert_eq!(e.last_upload_bytes(), 0);
    batch.set_param(c, "radius", 10, &[0.25]).unwrap();
    let ev = e.evaluate(&batch).unwrap();
    assert_eq!(
        e.last_upload_bytes(),
        1000 * 4,
        "only the radius column moves"
    );
    let mut report = Report::default();
    compare_evaluations(&ev, &batch.evaluate(), F32_TOL, &mut report).unwrap();
    assert_report("after a change", &report);
}

#[test]
fn non_finite_instance_is_flagged_and_isolated_on_the_gpu() {
    let Some(device) = device() else { return };
    let (mut batch, _) = random_contact_batch(Kind::RollingSphere, PlaneBody::Ground, 200, 4);
    let ball = BodyId(1);
    batch
        .set_u(ball, 17, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    let cpu = batch.evaluate();
    let gpu = gpu_evaluation(&device, &batch, Precision::F32);
    assert_ne!(gpu.status[17], status::OK);
    assert!(gpu.udot_of(17).iter().all(|x| x.is_nan()));
    assert_eq!(gpu.flagged(), 1);
    let mut report = Report::default();
    compare_evaluations(&gpu, &cpu, F32_TOL, &mut report).unwrap_or(());
    for i in (0..200).filter(|i| *i != 17) {
        assert_eq!(gpu.status[i], status::OK);
    }
}

#[test]
fn evaluator_backends_and_env_override() {
    assert_eq!("CPU".parse::<Backend>().unwrap(), Backend::Cpu);
    assert!(matches!(
        "tpu".parse::<Backend>(),
        Err(Error::BadChoice {
            what: "backend",
            ..
        })
    ));
    let (batch, _) = random_contact_batch(Kind::SlidingSphere, PlaneBody::Ground, 100, 8);
    let mut cpu = Evaluator::new(Backend::Cpu).unwrap();
    assert_eq!(cpu.evaluate(&batch).unwrap(), batch.evaluate());
    if device().is_some() {
        let mut gpu = Evaluator::new(Backend::Gpu).unwrap();
        assert_eq!(gpu.backend(), Backend::Gpu);
        let mut report = Report::default();
        compare_evaluations(
            &gpu.evaluate(&batch).unwrap(),
            &batch.evaluate(),
            F32_TOL,
            &mut report,
        )
        .unwrap();
        assert_report("Evaluator(Gpu)", &report);
        let auto = Evaluator::new(Backend::Auto).unwrap();
        assert_eq!(auto.backend(), Backend::Gpu);
    }
}
