//! Shared parameters folded into the kernels as constants (`GpuOptions::fold_shared`, the
//! default): the folded kernels give the CPU's answers, evaluating and stepping, as the kernels
//! reading the same values from the buffer do; a folded value the batch changes, or a batch
//! holding other values, gets a kernel that follows it.

use super::*;
use simbatch::batch::FreeField;

/// Rolling balls whose every parameter is one shared row, with values that fold into no
/// simplification of their own: an off-centre COM, products of inertia, a constant applied
/// force and torque, a tilted gravity. The ball's handle.
fn shared_balls(n: usize) -> (Batch, BodyId) {
    shared_balls_with(n, [0.0052, 0.0047, 0.0061, 0.0003, -0.0002, 0.0001])
}

/// [`shared_balls`] with the inertia `inertia` about the COM.
fn shared_balls_with(n: usize, inertia: [f64; 6]) -> (Batch, BodyId) {
    let mut batch = simbatch::scenarios::rolling_balls(n).unwrap();
    let ball = batch.template().free_bodies()[0];
    for i in 0..n {
        batch
            .set_mass_properties(ball, i, 1.3, [0.011, -0.007, 0.004], inertia)
            .unwrap();
        batch.set_applied_force(ball, i, [0.4, -0.3, 0.2]).unwrap();
        batch
            .set_applied_torque(ball, i, [0.01, 0.02, -0.015])
            .unwrap();
    }
    batch
        .set_gravity_column(&vec![[0.3, -0.2, -9.7]; n])
        .unwrap();
    assert!(batch.share_uniform_columns() >= 4);
    (batch, ball)
}

/// `step` on the GPU's `evaluator` (40 steps in two calls) ends where the CPU's 40 steps end,
/// within `tol`.
fn steps_as_the_cpu(batch: &Batch, step: StepOptions, evaluator: Evaluator, tol: f64, what: &str) {
    let mut cpu = batch.clone();
    Stepper::new(step).unwrap().step(&mut cpu, 40).unwrap();
    let mut gpu = batch.clone();
    let mut stepper = Stepper::with_evaluator(step, evaluator).unwrap();
    stepper.step(&mut gpu, 20).unwrap();
    stepper.step(&mut gpu, 20).unwrap();
    let mut report = Report::default();
    compare_states(&gpu, &cpu, tol, &mut report);
    assert!(report.passed(), "{step:?}, {what}:\n{report}");
}

fn mass_column() -> Column {
    Column::Free {
        slot: 0,
        field: FreeField::Mass,
    }
}

/// The folded kernels evaluate and step as the CPU does, and as the kernels that read the
/// shared row from the buffer; the layout says which columns were folded and with what.
#[test]
fn folded_shared_parameters_give_the_cpus_answers() {
    let Some(device) = device() else { return };
    let (batch, _) = shared_balls(400);
    let unfolded = GpuOptions {
        fold_shared: Some(false),
        ..GpuOptions::default()
    };
    for (options, folds) in [(GpuOptions::default(), true), (unfolded, false)] {
        let mut e = Evaluator::on_device(device.clone(), Precision::F32, options).unwrap();
        evaluates_as_the_cpu(&mut e, &batch, &format!("evaluation, folding {folds}"));
        let layout = e.gpu_evaluator().unwrap().layout();
        let mass = layout.input(mass_column()).unwrap();
        assert!(mass.shared);
        assert_eq!(mass.folded, folds);
        let text: String = layout
            .constraint_sections
            .iter()
            .map(|s| s.text.as_str())
            .collect();
        assert_eq!(
            text.contains("= real(1.3);"),
            folds,
            "the mass as a constant"
        );
        if folds {
            // Every shared parameter column is folded, the state never is.
            for c in &layout.inputs {
                let state = matches!(
                    c.column,
                    Column::Time
                        | Column::Work
                        | Column::Free {
                            field: FreeField::Q | FreeField::U,
                            ..
                        }
                );
                assert_eq!(c.folded, c.shared && !state, "{:?}", c.column);
            }
            assert!(layout.folded_values.contains(&-0.007));
        } else {
            assert!(layout.folded_values.is_empty());
        }

        // In f64 the constants are the f64 values themselves: the CPU's answers to 1e-9.
        if f64_stepping(&device) {
            let mut e = Evaluator::on_device(device.clone(), Precision::F64, options).unwrap();
            let gpu = e.evaluate(&batch).unwrap();
            let mut report = Report::default();
            simbatch::golden::compare_evaluations(&gpu, &batch.evaluate(), 1e-9, &mut report)
                .unwrap();
            assert!(
                report.passed(),
                "f64 evaluation, folding {folds}:\n{report}"
            );
        }

        // RK4, with and without projection, 40 steps in two calls.
        for stabilization in [
            Stabilization::None,
            Stabilization::Projection { tolerance: 1e-6 },
        ] {
            let step = StepOptions {
                integrator: Integrator::Rk4 { step: 1e-3 },
                stabilization,
            };
            let evaluator = Evaluator::on_device(device.clone(), Precision::F32, options).unwrap();
            let what = format!("folding {folds}");
            steps_as_the_cpu(&batch, step, evaluator, F32_TRAJECTORY_TOL, &what);
        }
    }
}

/// A kernel folds the values of the batch it was built for: a folded column the batch then
/// changes (shared still) is read per instance by a rebuilt kernel, and another batch of the
/// template, holding other shared values, gets a kernel folding its own; each call gives the
/// CPU's answers for the batch it is given.
#[test]
fn a_kernel_follows_the_batch_whose_folded_values_change() {
    let Some(device) = device() else { return };
    let (mut batch, ball) = shared_balls(300);
    let n = batch.len();
    let mut e =
        Evaluator::on_device(device.clone(), Precision::F32, GpuOptions::default()).unwrap();
    evaluates_as_the_cpu(&mut e, &batch, "as built");
    let folded = |e: &Evaluator, column: Column| {
        let c = *e.gpu_evaluator().unwrap().layout().input(column).unwrap();
        (c.shared, c.folded)
    };
    assert_eq!(folded(&e, Column::Gravity), (true, true));

    // Another gravity for every instance, still one shared row.
    batch
        .set_gravity_column(&vec![[0.0, 0.5, -3.7]; n])
        .unwrap();
    batch.share_uniform_columns();
    let shared = |b: &Batch, c: Column| b.column_data(c).unwrap().shared;
    assert!(shared(&batch, Column::Gravity));
    evaluates_as_the_cpu(&mut e, &batch, "gravity changed");
    assert_eq!(
        folded(&e, Column::Gravity),
        (false, false),
        "a changed column is read per instance from then on"
    );
    assert_eq!(
        folded(&e, mass_column()),
        (true, true),
        "the others stay folded"
    );

    // A batch of the same template with another mass and radius, on the same evaluator.
    let (mut other, _) = shared_balls(200);
    let contact = ConstraintId(0);
    other
        .set_param_column(contact, "radius", &vec![0.13; 200])
        .unwrap();
    for i in 0..200 {
        other
            .set_mass_properties(ball, i, 2.1, [0.0; 3], [0.01, 0.01, 0.01, 0.0, 0.0, 0.0])
            .unwrap();
    }
    other.share_uniform_columns();
    assert!(shared(&other, mass_column()) && shared(&other, Column::Param(0, 2)));
    evaluates_as_the_cpu(&mut e, &other, "another batch");
    let layout = e.gpu_evaluator().unwrap().layout();
    assert!(layout.folded_values.contains(&2.1) && layout.folded_values.contains(&0.13));
    // And back: the first batch again gives its own answers.
    evaluates_as_the_cpu(&mut e, &batch, "the first batch again");

    // Stepping: a folded mass changed between two calls.
    let step = StepOptions {
        integrator: Integrator::Rk4 { step: 1e-3 },
        stabilization: Stabilization::None,
    };
    let (start, _) = shared_balls(300);
    let change = |b: &mut Batch| {
        for i in 0..b.len() {
            b.set_mass_properties(
                ball,
                i,
                0.6,
                [0.011, -0.007, 0.004],
                [0.0052, 0.0047, 0.0061, 0.0003, -0.0002, 0.0001],
            )
            .unwrap();
        }
        b.share_uniform_columns();
    };
    let mut cpu = start.clone();
    let mut reference = Stepper::new(step).unwrap();
    reference.step(&mut cpu, 10).unwrap();
    change(&mut cpu);
    reference.step(&mut cpu, 10).unwrap();
    let mut gpu = start.clone();
    let mut stepper = Stepper::on_gpu(step, device.clone(), Precision::F32).unwrap();
    stepper.step(&mut gpu, 10).unwrap();
    change(&mut gpu);
    stepper.step(&mut gpu, 10).unwrap();
    let mut report = Report::default();
    compare_states(&gpu, &cpu, F32_TRAJECTORY_TOL, &mut report);
    assert!(report.passed(), "mass changed between calls:\n{report}");
}

/// A ball whose folded inertia is isotropic (`Layout::isotropic_inertia`) evaluates and steps
/// with the dynamics that skip `R I⁻¹ Rᵀ` and the gyroscopic term, and gives the CPU's answers
/// (which form both): with an off-centre COM (`c_G = R c` still turns with the ball), an
/// applied torque and a tilted gravity; f32 and f64 evaluation, RK4 with and without
/// projection and semi-implicit Euler in f32, RK4 in f64. The balls of `shared_balls`, whose
/// inertia has products, take the general dynamics (and a kernel that took them as isotropic
/// fails `folded_shared_parameters_give_the_cpus_answers`).
#[test]
fn an_isotropic_folded_inertia_gives_the_cpus_answers() {
    let Some(device) = device() else { return };
    let (batch, _) = shared_balls_with(400, [0.0049, 0.0049, 0.0049, 0.0, 0.0, 0.0]);
    let mut e =
        Evaluator::on_device(device.clone(), Precision::F32, GpuOptions::default()).unwrap();
    evaluates_as_the_cpu(&mut e, &batch, "isotropic inertia");
    assert!(e.gpu_evaluator().unwrap().layout().isotropic_inertia(0));
    let (general, _) = shared_balls(10);
    let mut g =
        Evaluator::on_device(device.clone(), Precision::F32, GpuOptions::default()).unwrap();
    g.evaluate(&general).unwrap();
    assert!(!g.gpu_evaluator().unwrap().layout().isotropic_inertia(0));
    if f64_stepping(&device) {
        let mut e =
            Evaluator::on_device(device.clone(), Precision::F64, GpuOptions::default()).unwrap();
        let gpu = e.evaluate(&batch).unwrap();
        let mut report = Report::default();
        simbatch::golden::compare_evaluations(&gpu, &batch.evaluate(), 1e-9, &mut report).unwrap();
        assert!(report.passed(), "f64 evaluation:\n{report}");
    }
    let (rk4, euler) = (
        Integrator::Rk4 { step: 1e-3 },
        Integrator::SemiImplicitEuler { step: 1e-3 },
    );
    let projection = Stabilization::Projection { tolerance: 1e-6 };
    let mut runs = vec![
        (Precision::F32, rk4, Stabilization::None, F32_TRAJECTORY_TOL),
        (Precision::F32, rk4, projection, F32_TRAJECTORY_TOL),
        (
            Precision::F32,
            euler,
            Stabilization::None,
            F32_TRAJECTORY_TOL,
        ),
    ];
    // The f64 stepping kernel's isotropic dynamics too, to the f64 trajectory bound.
    if f64_stepping(&device) {
        runs.push((Precision::F64, rk4, Stabilization::None, F64_TRAJECTORY_TOL));
    }
    for (precision, integrator, stabilization, tol) in runs {
        let step = StepOptions {
            integrator,
            stabilization,
        };
        let evaluator =
            Evaluator::on_device(device.clone(), precision, GpuOptions::default()).unwrap();
        let what = format!("isotropic inertia, {precision:?}");
        steps_as_the_cpu(&batch, step, evaluator, tol, &what);
    }
}
