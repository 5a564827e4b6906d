//! The CPU lane path (four instances per SIMD value) against the scalar reference path it must
//! reproduce: the same states to 1e-12 after many steps (1e-10 after a duration with RKM, see
//! `agreement`), the same flags and reports, on built-in
//! kinds (lane kernels) on Ground, free, prescribed and driven planes, custom constraints (the
//! trait's per-lane default), two-body systems, disabled constraints, redundant rows (the
//! reference solver's min-norm multipliers), every drift control, batch sizes that are not a multiple of
//! four, and bits identical across thread counts.

use simbatch::cpu::assembly::{AssemblyOptions, assemble_positions, assemble_velocities};
use simbatch::custom::{DistanceRod, KnifeEdge};
use simbatch::prelude::*;
use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch, point_to_ground_batch};

fn options(integrator: Integrator, stabilization: Stabilization) -> StepOptions {
    StepOptions {
        integrator,
        stabilization,
    }
}

const EULER: Integrator = Integrator::SemiImplicitEuler { step: 1e-3 };
const RK4: Integrator = Integrator::Rk4 { step: 1e-3 };
/// Simbody's adaptive integrator, tight enough that the lanes reject and regrow steps.
const RKM: Integrator = Integrator::RungeKuttaMerson {
    accuracy: 1e-7,
    max_step: 2e-2,
};

/// Every stabilization the fixed-step integrators run with.
fn stabilizations() -> [Stabilization; 3] {
    [
        Stabilization::None,
        Stabilization::Baumgarte,
        Stabilization::Projection { tolerance: 1e-6 },
    ]
}

/// Runs `steps` steps on the lane path and on the reference path; returns both batches and
/// reports.
fn both(
    batch: &Batch,
    options: StepOptions,
    run: impl Fn(&mut Stepper, &mut Batch) -> StepReport,
) -> ((Batch, StepReport), (Batch, StepReport)) {
    let mut lanes = batch.clone();
    let mut reference = batch.clone();
    let mut on_lanes = Stepper::new(options).unwrap();
    let mut on_reference = Stepper::new(options).unwrap().with_cpu_lanes(false);
    let r_lanes = run(&mut on_lanes, &mut lanes);
    let r_reference = run(&mut on_reference, &mut reference);
    ((lanes, r_lanes), (reference, r_reference))
}

/// How closely the lanes reproduce the reference under `integrator` (relative to max(1, |x|)),
/// and whether the times are the same bits. The fixed-step integrators: 1e-12, times exact.
/// RKM: its step sizes come from an error estimate `|y₁ − ŷ|` that cancels (about 1e-7 of `y`
/// here), so rounding of 1e-16 in `y` moves each `h` by about 1e-9 of itself. After a number of
/// steps the times then differ by about 1e-9 (and the states by their rates times that); after
/// a duration ([`run`]) both end at the same time, where the states agree to 1e-10, with the
/// same steps, rejections and projections.
fn agreement(integrator: Integrator) -> (f64, bool) {
    match integrator {
        Integrator::RungeKuttaMerson { .. } => (1e-10, false),
        _ => (1e-12, true),
    }
}

/// Steps `batch` about `steps` steps of 1 ms: that many steps with a fixed-step integrator, the
/// same duration with RKM (see [`agreement`]).
fn run(s: &mut Stepper, batch: &mut Batch, integrator: Integrator, steps: usize) -> StepReport {
    match integrator {
        Integrator::RungeKuttaMerson { .. } => s.advance(batch, 1e-3 * steps as f64).unwrap(),
        _ => s.step(batch, steps).unwrap(),
    }
}

/// Every instance's state and time as [`agreement`] says, statuses equal.
fn assert_same_states(lanes: &Batch, reference: &Batch, integrator: Integrator, what: &str) {
    let (tol, exact_time) = agreement(integrator);
    assert_eq!(lanes.status(), reference.status(), "{what}: status");
    for i in 0..lanes.len() {
        let (a, b) = (
            lanes.instance_state(i).unwrap(),
            reference.instance_state(i).unwrap(),
        );
        if exact_time {
            assert_eq!(a.time.to_bits(), b.time.to_bits(), "{what}: time of {i}");
        } else {
            assert!(
                (a.time - b.time).abs() <= tol * b.time.abs().max(1.0),
                "{what}: time of {i}: lanes {:e}, reference {:e}",
                a.time,
                b.time
            );
        }
        for (k, (x, y)) in a.to_vec().iter().zip(b.to_vec()).enumerate() {
            assert!(
                (x - y).abs() <= tol * y.abs().max(1.0),
                "{what}: instance {i} value {k}: lanes {x:e}, reference {y:e}"
            );
        }
    }
}

/// Number of instances whose state differs from the reference's in any bit: the lane formulas
/// round differently (closed-form `M⁻¹`), so a lane path that silently handed everything to
/// the reference would show none. (That the lane derivative itself answers every lane is
/// checked in `cpu::lanes`' unit tests.)
fn differing_instances(lanes: &Batch, reference: &Batch) -> usize {
    (0..lanes.len())
        .filter(|&i| lanes.instance_state(i).unwrap() != reference.instance_state(i).unwrap())
        .count()
}

fn assert_same_reports(a: &StepReport, b: &StepReport, what: &str) {
    assert_eq!(
        (a.steps, a.rejected, a.projections, a.flagged),
        (b.steps, b.rejected, b.projections, b.flagged),
        "{what}: report"
    );
}

#[test]
fn lanes_reproduce_the_reference_on_every_contact_kind_and_drift_control() {
    // 203 = 50 chunks of four and a chunk with three lanes of padding.
    let n = 203;
    for kind in [
        ContactKind::RollingSphere,
        ContactKind::SlidingSphere,
        ContactKind::Point,
    ] {
        for plane in PlaneBody::ALL {
            let (random, _, _) = contact_batch(kind, plane, n, 11).unwrap();
            // Simbody's RKM refuses to project an error as large as the random states'
            // (the instance stops, flagged, on both paths): it starts from assembled ones.
            let mut assembled = random.clone();
            assemble_positions(&mut assembled, &AssemblyOptions::default()).unwrap();
            assemble_velocities(&mut assembled, None).unwrap();
            for integrator in [EULER, RK4, RKM] {
                for stabilization in stabilizations() {
                    let what = format!("{kind:?} on {plane:?}, {integrator:?}, {stabilization:?}");
                    let batch = match (integrator, stabilization) {
                        (RKM, Stabilization::Projection { .. }) => &assembled,
                        _ => &random,
                    };
                    let ((lanes, a), (reference, b)) =
                        both(batch, options(integrator, stabilization), |s, b| {
                            run(s, b, integrator, 40)
                        });
                    assert_same_reports(&a, &b, &what);
                    assert_same_states(&lanes, &reference, integrator, &what);
                    assert!(a.steps > 0, "{what}: nothing stepped");
                    // The two paths round differently (closed-form M⁻¹): they really are two.
                    // (With RKM and projection the random, inconsistent starting states that
                    // no step can project stop where they are, flagged, on both paths.)
                    let stepped = (0..n)
                        .filter(|&i| {
                            let time = |b: &Batch| b.instance_state(i).unwrap().time;
                            time(&lanes) != time(batch)
                        })
                        .count();
                    assert!(stepped > n / 2, "{what}: {stepped} instances stepped");
                    assert!(
                        differing_instances(&lanes, &reference) > stepped / 2,
                        "{what}"
                    );
                }
            }
        }
    }
}

/// `n` carts on a knife edge and a distance rod (custom constraints, the per-lane defaults),
/// with varied mass properties and inconsistent states; every fifth instance runs without the
/// knife edge. Shared with `lane_evaluation`.
pub(crate) fn knife_edge_carts(n: usize) -> Batch {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("cart");
    let knife = t
        .add_constraint(KnifeEdge::new(body, [0.0, 0.0, -0.1], [0.0, 1.0, 0.0]))
        .unwrap();
    let rod = t
        .add_constraint(DistanceRod::new(
            body,
            [0.1, 0.0, 0.0],
            [0.0, 0.0, 1.0],
            1.0,
        ))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    for i in 0..n {
        let x = i as f64 / n as f64;
        batch
            .set_mass_properties(
                body,
                i,
                1.0 + x,
                [0.0, 0.01, 0.0],
                [0.2, 0.3, 0.25, 0.01, 0.0, 0.0],
            )
            .unwrap();
        batch
            .set_q(body, i, [1.0, 0.1 * x, -0.05, 0.02, 0.3 * x, 0.2, 0.1])
            .unwrap();
        batch
            .set_u(body, i, [0.3, -0.2 * x, 0.5, 0.1, 0.4 * x, -0.3])
            .unwrap();
        batch.set_enabled(knife, i, i % 5 != 0).unwrap();
        batch.set_enabled(rod, i, true).unwrap();
    }
    batch
}

#[test]
fn custom_constraints_run_on_lanes_through_the_scalar_interface() {
    let batch = knife_edge_carts(37);
    for integrator in [EULER, RK4, RKM] {
        for stabilization in stabilizations() {
            let what = format!("custom, {integrator:?}, {stabilization:?}");
            let ((lanes, a), (reference, b)) =
                both(&batch, options(integrator, stabilization), |s, b| {
                    run(s, b, integrator, 25)
                });
            assert_same_reports(&a, &b, &what);
            assert_same_states(&lanes, &reference, integrator, &what);
        }
    }
}

/// A box on four coplanar no-slip corners: 12 rows, `G M⁻¹ Gᵀ` of rank 6, the lane certificate fails, and the
/// reference's minimum-norm solve answers for every stage.
/// A box on four coplanar corners: `G M⁻¹ Gᵀ` is singular, the certificate fails on every lane,
/// and the lanes take the reference solver's minimum-norm route for the multipliers alone.
#[test]
fn redundant_rows_keep_the_min_norm_multipliers_on_lanes() {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("box");
    for (x, y) in [(0.2, 0.1), (-0.2, 0.1), (-0.2, -0.1), (0.2, -0.1)] {
        t.add_constraint(PointOnPlaneContact::new(GROUND, body).with_follower_point([x, y, -0.05]))
            .unwrap();
    }
    let n = 9;
    let mut batch = Batch::new(t, n).unwrap();
    for i in 0..n {
        batch
            .set_mass_properties(body, i, 2.0, [0.0; 3], [0.01, 0.02, 0.025, 0.0, 0.0, 0.0])
            .unwrap();
        batch
            .set_q(body, i, [1.0, 0.0, 0.0, 0.0, 0.01 * i as f64, 0.0, 0.05])
            .unwrap();
        batch
            .set_u(body, i, [0.0, 0.0, 0.3, 0.1 * i as f64, -0.2, 0.0])
            .unwrap();
    }
    let system = batch.instance_system(0).unwrap();
    assert!(
        system.solve().unwrap().rank < system.rows(),
        "redundant rows"
    );
    for integrator in [EULER, RK4, RKM] {
        let what = format!("box on four corners, {integrator:?}");
        let ((lanes, a), (reference, b)) =
            both(&batch, options(integrator, Stabilization::None), |s, b| {
                run(s, b, integrator, 30)
            });
        assert_same_reports(&a, &b, &what);
        assert_same_states(&lanes, &reference, integrator, &what);
        // The lanes assemble and integrate these instances themselves (their rounding differs
        // from the reference's), handing over only the multiplier solve.
        assert!(differing_instances(&lanes, &reference) > n / 2, "{what}");
    }
}

#[test]
fn baumgarte_point_contacts_and_a_fractional_last_step_match() {
    let (batch, _, _) = point_to_ground_batch(30, 5, 3, true, true).unwrap();
    for integrator in [EULER, RK4] {
        let what = format!("point to ground, advance 10.5 steps, {integrator:?}");
        let ((lanes, a), (reference, b)) = both(
            &batch,
            options(integrator, Stabilization::Baumgarte),
            |s, b| s.advance(b, 0.0105).unwrap(),
        );
        assert_same_reports(&a, &b, &what);
        assert_eq!(a.steps, 30 * 11, "{what}: ten whole steps and a half one");
        assert_same_states(&lanes, &reference, integrator, &what);
    }
}

#[test]
fn a_failing_instance_is_flagged_alone_and_then_left_alone() {
    let (mut batch, body, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Ground, 10, 3).unwrap();
    let clean = batch.clone();
    // Finite, but the velocity products overflow: the dynamics of instance 5 are not finite.
    batch
        .set_u(body, 5, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    for integrator in [RK4, RKM] {
        let what = format!("overflowing instance, {integrator:?}");
        let opts = options(integrator, Stabilization::None);
        let ((lanes, a), (reference, b)) = both(&batch, opts, |s, b| run(s, b, integrator, 10));
        assert_same_reports(&a, &b, &what);
        assert_same_states(&lanes, &reference, integrator, &what);
        assert_ne!(lanes.status()[5] & status::NONFINITE_STATE, 0);
        assert_eq!(
            lanes.instance_state(5).unwrap(),
            batch.instance_state(5).unwrap()
        );
        // Its neighbours in the same chunk of four are untouched by it, to the bit.
        let mut alone = clean.clone();
        run(&mut Stepper::new(opts).unwrap(), &mut alone, integrator, 10);
        for i in (0..10).filter(|i| *i != 5) {
            assert_eq!(
                lanes.instance_state(i).unwrap(),
                alone.instance_state(i).unwrap()
            );
        }
        // Halted: a second call leaves it as it is and steps the others — whose chunks are
        // then no longer runs of four consecutive instances (4, 6, 7, 8), stored lane by lane,
        // beside whole runs (0–3) stored by transposes — as the reference path does.
        let what = format!("{what}, second call");
        let ((again, a), (again_reference, b)) =
            both(&lanes, opts, |s, b| run(s, b, integrator, 3));
        assert_same_reports(&a, &b, &what);
        assert_same_states(&again, &again_reference, integrator, &what);
        if !matches!(integrator, Integrator::RungeKuttaMerson { .. }) {
            assert_eq!(a.steps, 9 * 3);
        }
        assert_eq!(
            again.instance_state(5).unwrap(),
            lanes.instance_state(5).unwrap()
        );
    }
}

#[test]
fn lanes_are_bit_identical_across_thread_counts() {
    let (batch, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 999, 21).unwrap();
    for integrator in [RK4, RKM] {
        let opts = options(integrator, Stabilization::Projection { tolerance: 1e-6 });
        let run = |threads: usize| {
            let mut b = batch.clone();
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| Stepper::new(opts).unwrap().step(&mut b, 20).unwrap());
            (0..b.len())
                .flat_map(|i| b.instance_state(i).unwrap().to_vec())
                .map(f64::to_bits)
                .collect::<Vec<u64>>()
        };
        let one = run(1);
        assert_eq!(one, run(2), "{integrator:?}");
        assert_eq!(one, run(7), "{integrator:?}");
    }
}

/// Several blocks of a parallel call (two and three threads: five blocks of 1 248 instances
/// or fewer, each cut into pieces per thread and stored piece by piece on the pool's threads),
/// one-step calls and a halted instance, whose chunk is then no run of four consecutive
/// instances: the same bits, flags and reports as one thread — on a fixed plane and on a plane
/// driven by a motion law (refreshed after each block's store), with Euler, RK4 and RKM (whose
/// step sizes carry over from call to call, so a size stored in the wrong place shows in the
/// states of the calls after; the sizes themselves are not public).
#[test]
fn parallel_blocks_and_pieces_are_bit_identical_to_one_thread() {
    for (plane, integrator) in [
        (PlaneBody::Ground, EULER),
        (PlaneBody::Ground, RK4),
        (PlaneBody::Ground, RKM),
        (PlaneBody::Tilting, RK4),
        (PlaneBody::Tilting, RKM),
    ] {
        let (mut batch, body, _) =
            contact_batch(ContactKind::RollingSphere, plane, 5_001, 8).unwrap();
        // Finite, but the velocity products overflow: halted at its first step.
        batch
            .set_u(body, 2_050, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
            .unwrap();
        let opts = options(integrator, Stabilization::None);
        let run = |threads: usize| {
            let mut b = batch.clone();
            let reports: Vec<StepReport> = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    let mut stepper = Stepper::new(opts).unwrap();
                    (0..3).map(|_| stepper.step(&mut b, 1).unwrap()).collect()
                });
            // RKM's step sizes carry over from call to call: a size stored wrong changes the
            // states of the calls after.
            let bits: Vec<u64> = (0..b.len())
                .flat_map(|i| b.instance_state(i).unwrap().to_vec())
                .map(f64::to_bits)
                .collect();
            (bits, b.status().to_vec(), reports)
        };
        let (bits, status, reports) = run(1);
        assert_ne!(status[2_050] & status::NONFINITE_STATE, 0);
        assert_eq!(
            reports[2].steps, 5_000,
            "{plane:?}, {integrator:?}: the halted instance is left"
        );
        for threads in [2, 3] {
            let (b, s, r) = run(threads);
            let what = format!("{plane:?}, {integrator:?}, {threads} threads");
            assert!(b == bits, "{what}: states");
            assert_eq!(s, status, "{what}: status");
            for (a, b) in r.iter().zip(&reports) {
                assert_same_reports(a, b, &what);
            }
        }
    }
}
