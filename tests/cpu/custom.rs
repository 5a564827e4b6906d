//! User-defined constraints through the public interface (`simbatch::custom`): a holonomic rod
//! and a nonholonomic knife edge, on the CPU and the GPU. The RBDL check of §5: a forward
//! simulation conserves energy and satisfies the constraint with small errors, and both errors
//! drop as the integrator tolerance is lowered. GPU vs CPU parity on random instances, and a
//! WGSL mistake in a user's source reported against that source's own line.

use crate::common;
use common::device;

use simbatch::constraints::{Constraint, WgslConstraint};
use simbatch::cpu::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use simbatch::custom::{DistanceRod, KnifeEdge};
use simbatch::golden::{Report, compare_evaluations};
use simbatch::prelude::*;
use simbatch::scenarios::Rng;

/// N pendulums hanging from a rod: a 1 m uniform bar whose top end hangs on a 0.3 m rod from
/// the origin, perturbed per instance, assembled onto the constraint.
fn pendulums(n: usize, seed: u64) -> Batch {
    let mut t = SystemTemplate::new();
    let bar = t.add_free_body("bar");
    let rod = t
        .add_constraint(DistanceRod::new(bar, [0.0, 0.0, 0.5], [0.0; 3], 0.3))
        .unwrap();
    let mut b = Batch::new(t, n).unwrap();
    for i in 0..n {
        let mut r = Rng::for_instance(seed, i);
        let mut u = |lo: f64, hi: f64| lo + (hi - lo) * r.unit();
        let m = u(0.5, 2.0);
        let it = m / 12.0;
        b.set_mass_properties(bar, i, m, [0.0; 3], [it, it, 0.01 * m, 0.0, 0.0, 0.0])
            .unwrap();
        b.set_param(rod, "length", i, &[u(0.2, 0.4)]).unwrap();
        b.set_q(
            bar,
            i,
            [
                1.0,
                u(-0.2, 0.2),
                u(-0.2, 0.2),
                0.0,
                u(-0.1, 0.1),
                0.0,
                -0.8,
            ],
        )
        .unwrap();
        b.set_u(
            bar,
            i,
            [
                u(-1.0, 1.0),
                u(-1.0, 1.0),
                u(-1.0, 1.0),
                u(-0.5, 0.5),
                u(-0.5, 0.5),
                0.0,
            ],
        )
        .unwrap();
    }
    assemble_positions(&mut b, &AssemblyOptions::default()).unwrap();
    assemble_velocities(&mut b, None).unwrap();
    b
}

/// N sleighs on a knife edge under a gravity along the plane, spinning and sliding forward.
fn sleighs(n: usize, seed: u64) -> Batch {
    let mut t = SystemTemplate::new();
    let sleigh = t.add_free_body("sleigh");
    t.add_constraint(KnifeEdge::new(sleigh, [0.3, 0.0, -0.1], [0.0, 1.0, 0.0]))
        .unwrap();
    let mut b = Batch::new(t, n).unwrap();
    for i in 0..n {
        let mut r = Rng::for_instance(seed, i);
        let mut u = |lo: f64, hi: f64| lo + (hi - lo) * r.unit();
        let m = u(0.5, 2.0);
        b.set_mass_properties(
            sleigh,
            i,
            m,
            [u(-0.05, 0.05), u(-0.05, 0.05), 0.0],
            [0.1 * m, 0.2 * m, 0.25 * m, 0.0, 0.0, 0.0],
        )
        .unwrap();
        b.set_gravity(i, [u(0.5, 1.5), u(-0.5, 0.5), 0.0]).unwrap();
        b.set_q(sleigh, i, [1.0, 0.0, 0.0, u(-0.5, 0.5), 0.0, 0.0, 0.1])
            .unwrap();
        b.set_u(sleigh, i, [0.0, 0.0, u(-2.0, 2.0), u(0.0, 1.0), 0.0, 0.0])
            .unwrap();
    }
    assemble_positions(&mut b, &AssemblyOptions::default()).unwrap();
    assemble_velocities(&mut b, None).unwrap();
    b
}

/// Worst relative energy drift and worst constraint error (position and velocity rows) over
/// `samples` × `dt` seconds.
fn drift(batch: &mut Batch, stepper: &mut Stepper, samples: usize, dt: f64) -> (f64, f64) {
    let e0: Vec<f64> = (0..batch.len()).map(|i| batch.energy(i).unwrap()).collect();
    let (mut energy, mut constraint) = (0.0f64, 0.0f64);
    for _ in 0..samples {
        let report = stepper.advance(batch, dt).unwrap();
        assert_eq!(report.flagged, 0);
        let ev = batch.evaluate();
        for (i, e) in e0.iter().enumerate() {
            energy = energy.max((batch.energy(i).unwrap() - e).abs() / e.abs().max(1.0));
        }
        for c in &ev.constraints {
            for x in c.position_errors.iter().chain(&c.velocity_errors) {
                constraint = constraint.max(x.abs());
            }
        }
    }
    (energy, constraint)
}

/// Errors at each accuracy (coarse to fine) must fall, and the finest meet the bounds.
fn check_drop(name: &str, results: &[(f64, (f64, f64))], energy_bound: f64, constraint_bound: f64) {
    for (accuracy, (e, c)) in results {
        println!("{name}: accuracy {accuracy:e}: energy drift {e:.2e}, constraint error {c:.2e}");
    }
    for w in results.windows(2) {
        let ((_, (e1, c1)), (_, (e2, c2))) = (w[0], w[1]);
        assert!(
            e2 < e1,
            "{name}: energy drift did not drop: {e1:e} → {e2:e}"
        );
        assert!(
            c2 < c1,
            "{name}: constraint error did not drop: {c1:e} → {c2:e}"
        );
    }
    let (_, (e, c)) = results.last().unwrap();
    assert!(
        *e <= energy_bound,
        "{name}: energy drift {e:e} > {energy_bound:e}"
    );
    assert!(
        *c <= constraint_bound,
        "{name}: constraint error {c:e} > {constraint_bound:e}"
    );
}

#[test]
fn custom_constraints_conserve_energy_and_hold_as_the_tolerance_drops_cpu() {
    for (name, make) in [
        ("rod", pendulums as fn(usize, u64) -> Batch),
        ("knife edge", sleighs),
    ] {
        let base = make(64, 5);
        let results: Vec<(f64, (f64, f64))> = [1e-3, 1e-5, 1e-7]
            .into_iter()
            .map(|accuracy| {
                let mut batch = base.clone();
                let mut stepper = Stepper::new(StepOptions::simbody(accuracy)).unwrap();
                (accuracy, drift(&mut batch, &mut stepper, 20, 0.05))
            })
            .collect();
        check_drop(
            &format!("{name} (CPU, RKM + projection)"),
            &results,
            1e-6,
            1e-7,
        );
    }
}

#[test]
fn custom_constraints_on_the_gpu_match_the_cpu_and_hold_as_the_tolerance_drops() {
    let Some(device) = device() else { return };
    for (name, make) in [
        ("rod", pendulums as fn(usize, u64) -> Batch),
        ("knife edge", sleighs),
    ] {
        // Evaluation parity on random (assembled) instances.
        let batch = make(2000, 9);
        let mut gpu = GpuEvaluator::new(
            device.clone(),
            &batch,
            Precision::F32,
            GpuOptions::default(),
        )
        .unwrap();
        let mut report = Report::default();
        compare_evaluations(
            &gpu.evaluate(&batch).unwrap(),
            &batch.evaluate(),
            2e-4,
            &mut report,
        )
        .unwrap();
        println!("{name} GPU f32 evaluation:\n{report}");
        assert!(report.passed(), "{name}:\n{report}");
        // Stepping: RKM with projection in f32, at two accuracies above f32's floor.
        let base = make(256, 5);
        let results: Vec<(f64, (f64, f64))> = [1e-2, 1e-4]
            .into_iter()
            .map(|accuracy| {
                let mut batch = base.clone();
                let mut stepper = Stepper::on_gpu(
                    StepOptions::simbody(accuracy),
                    device.clone(),
                    Precision::F32,
                )
                .unwrap();
                (accuracy, drift(&mut batch, &mut stepper, 10, 0.05))
            })
            .collect();
        let label = format!("{name} (GPU f32, RKM + projection)");
        if name == "rod" {
            check_drop(&label, &results, 1e-3, 1e-4);
        } else {
            // The sleighs move gently: even at 1e-2 their errors sit at the f32 floor (the
            // state's own rounding, ~1e-6), so there is no drop to see; both stay bounded.
            for (accuracy, (e, c)) in &results {
                println!(
                    "{label}: accuracy {accuracy:e}: energy drift {e:.2e}, constraint error {c:.2e}"
                );
                assert!(*e <= 1e-4 && *c <= 1e-4, "{label}: {e:e}, {c:e}");
            }
        }
    }
}

/// A user's constraint whose WGSL has a type error on its line 4.
#[derive(Debug)]
struct Broken(KnifeEdge);

impl Constraint for Broken {
    fn kind_name(&self) -> &'static str {
        "broken"
    }
    fn bodies(&self) -> &[BodyId] {
        self.0.bodies()
    }
    fn params(&self) -> Vec<simbatch::constraints::ParamSpec> {
        self.0.params()
    }
    fn row_levels(&self) -> &[simbatch::constraints::RowLevel] {
        self.0.row_levels()
    }
    fn report_slots(&self) -> &[Option<usize>] {
        self.0.report_slots()
    }
    fn evaluate(
        &self,
        params: &simbatch::constraints::Params<'_>,
        kinematics: &[simbatch::constraints::BodyKinematics],
        rows: &mut [simbatch::constraints::Row],
    ) {
        self.0.evaluate(params, kinematics, rows)
    }
    fn wgsl(&self) -> Option<WgslConstraint> {
        Some(WgslConstraint {
            file: "broken.wgsl".into(),
            source: "// A broken constraint.\n\
                     fn broken_rows(p: array<real, PARAMS_CAP>, body: BodyKinematics) -> array<Row, 3> {\n\
                     \x20   var rows: array<Row, 3>;\n\
                     \x20   let height: real = body.origin;\n\
                     \x20   rows[0].position_error = height;\n\
                     \x20   return rows;\n\
                     }\n"
                .into(),
            evaluate: "broken_rows(p, a)".into(),
            report: None,
        })
    }
}

#[test]
fn a_type_error_in_a_users_wgsl_names_its_file_and_line() {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    t.add_constraint(Broken(KnifeEdge::new(body, [0.0; 3], [0.0, 1.0, 0.0])))
        .unwrap();
    let batch = Batch::new(t, 4).unwrap();
    // The kernel is checked before any device is involved, so this needs no GPU.
    let layout = simbatch::gpu::layout::Layout::new(batch.template()).unwrap();
    let order = simbatch::gpu::layout::OutputOrder::ValueMajor;
    let err = simbatch::gpu::shader::kernel_source(Precision::F32, &layout, 64, order)
        .check()
        .unwrap_err();
    println!("{err}");
    match &err {
        Error::Wgsl { file, line, .. } => {
            assert_eq!(file, "broken.wgsl");
            assert_eq!(*line, 4);
        }
        other => panic!("expected Error::Wgsl, got {other:?}"),
    }
    assert!(err.to_string().starts_with("broken.wgsl:4:"));
    // Through the public GPU constructor the same error comes back (no panic).
    if let Some(device) = device() {
        match GpuEvaluator::new(device, &batch, Precision::F32, GpuOptions::default()) {
            Err(Error::Wgsl { file, line, .. }) => {
                assert_eq!((file.as_str(), line), ("broken.wgsl", 4))
            }
            other => panic!("expected Error::Wgsl, got {other:?}"),
        }
    }
}
