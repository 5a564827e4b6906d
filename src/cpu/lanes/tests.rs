//! The lane derivative against the reference derivative, and what plans refuse.

use super::*;
use crate::cpu::evaluate::BaumgarteMode;
use crate::cpu::integrate::{Workspace, derivative};
use crate::evaluation::{Evaluation, OutputStores, Outputs};
use crate::scenarios::point_to_ground_batch;
use crate::scenarios::{ContactKind, PlaneBody, contact_batch};
use crate::step::{Integrator, Stabilization, StepOptions};

/// The lane derivative of the chunk of `batch` starting at instance `first` (with `mode`) answers
/// every lane and agrees with the reference derivative (with `options`) to 1e-12.
fn assert_lane_derivative_matches(
    batch: &Batch,
    plan: &LanePlan,
    first: usize,
    mode: BaumgarteMode,
    options: &StepOptions,
    what: &str,
) {
    let (mut scratch, mut work) = (Scratch::new(), Workspace::new());
    let mut dy = [splat(0.0); MAX_Y];
    let instances = std::array::from_fn(|l| first + l);
    let mut chunk = Chunk::new(batch, plan);
    chunk.load(instances);
    let (y, time) = chunk.gather_state();
    let good = chunk.derivative(&y, time, mode, &mut dy, &mut scratch);
    assert_eq!(good, ALL_LANES, "{what}, {instances:?}");
    for (l, &i) in instances.iter().enumerate() {
        let state = chunk.instance_state(&y, time, l);
        let reference = derivative(batch, i, &state, options, &mut work).unwrap();
        for (k, r) in reference.iter().enumerate() {
            let x = dy[k].extract(l);
            assert!(
                (x - r).abs() <= 1e-12 * r.abs().max(1.0),
                "{what}, {mode:?}, instance {i}, value {k}: lanes {x:e}, reference {r:e}"
            );
        }
    }
}

/// The lane derivative itself (not its fallback) answers every lane of random, deliberately
/// inconsistent states, and agrees with the reference derivative to 1e-12.
#[test]
fn lane_derivative_answers_and_matches_the_reference() {
    for kind in [
        ContactKind::RollingSphere,
        ContactKind::SlidingSphere,
        ContactKind::Point,
    ] {
        for plane in PlaneBody::ALL {
            let (batch, _, _) = contact_batch(kind, plane, 64, 5).unwrap();
            let plan = LanePlan::new(batch.template()).unwrap();
            for (mode, stabilization) in [
                (BaumgarteMode::Off, Stabilization::None),
                (BaumgarteMode::All, Stabilization::Baumgarte),
            ] {
                let options = StepOptions {
                    integrator: Integrator::Rk4 { step: 1e-3 },
                    stabilization,
                };
                // About one instance in 97 has its contact disabled: masked, not failed.
                for first in (0..64).step_by(LANES) {
                    let what = format!("{kind:?} on {plane:?}");
                    assert_lane_derivative_matches(&batch, &plan, first, mode, &options, &what);
                }
            }
        }
    }
}

/// Redundant rows (a box on four coplanar corners: point-on-plane contacts, twelve rows of
/// rank six, or frictionless point-to-ground corners, four rows of rank three), one corner's
/// contact disabled in some instances: the lane derivative answers every lane through the
/// minimum-norm multipliers and agrees with the reference derivative to 1e-12 — the first four
/// lanes with the same rows (four rows reduced to rank three four lanes at once, twelve rows
/// lane by lane through the reference's solve), the next four with different rows (lane by
/// lane).
#[test]
fn lane_derivative_answers_redundant_rows_with_the_min_norm_multipliers() {
    let corners = [(0.2, 0.1), (-0.2, 0.1), (-0.2, -0.1), (0.2, -0.1)];
    for frictionless in [false, true] {
        let mut t = SystemTemplate::new();
        let body = t.add_free_body("box");
        let mut ids = Vec::new();
        for (x, y) in corners {
            let id = if frictionless {
                let c =
                    crate::constraints::PointToGround::new(body, [x, y, -0.05], &[[0.0, 0.0, 1.0]])
                        .unwrap();
                t.add_constraint(c.position_level())
            } else {
                let c = crate::constraints::PointOnPlaneContact::new(crate::model::GROUND, body)
                    .with_follower_point([x, y, -0.05]);
                t.add_constraint(c)
            };
            ids.push(id.unwrap());
        }
        let n = 8;
        let mut batch = Batch::new(t, n).unwrap();
        for i in 0..n {
            let s = i as f64;
            batch
                .set_q(body, i, [1.0, 0.01 * s, 0.0, 0.0, 0.01 * s, 0.0, 0.05])
                .unwrap();
            batch
                .set_u(body, i, [0.1, 0.0, 0.3, 0.1 * s, -0.2, 0.0])
                .unwrap();
            batch.set_gravity(i, [0.0, 0.0, -9.81]).unwrap();
            if i >= LANES && i % 2 == 1 {
                batch.set_enabled(ids[2], i, false).unwrap();
            }
        }
        let system = batch.instance_system(0).unwrap();
        assert!(
            system.solve().unwrap().rank < system.rows(),
            "redundant rows"
        );
        let plan = LanePlan::new(batch.template()).unwrap();
        let options = StepOptions {
            integrator: Integrator::Rk4 { step: 1e-3 },
            stabilization: Stabilization::None,
        };
        for first in (0..n).step_by(LANES) {
            let mode = BaumgarteMode::Off;
            let what = format!("box on four corners, frictionless: {frictionless}");
            assert_lane_derivative_matches(&batch, &plan, first, mode, &options, &what);
        }
    }
}

/// The lane evaluation itself (not its fallback) answers every lane of random states, for
/// every built-in kind (each with its lane kernel).
#[test]
fn lane_evaluation_answers_every_lane_of_the_built_in_kinds() {
    let mut batches = Vec::new();
    for kind in [
        ContactKind::RollingSphere,
        ContactKind::SlidingSphere,
        ContactKind::Point,
    ] {
        for plane in PlaneBody::ALL {
            batches.push((
                format!("{kind:?} on {plane:?}"),
                contact_batch(kind, plane, 64, 9).unwrap().0,
            ));
        }
    }
    batches.push((
        "point to ground".into(),
        point_to_ground_batch(64, 9, 3, true, true).unwrap().0,
    ));
    for (what, batch) in &batches {
        let plan = LanePlan::new(batch.template()).unwrap();
        let mut out = Evaluation::default();
        out.fill_for(
            batch.template(),
            batch.len(),
            crate::evaluation::Outputs::ALL,
        );
        let mut blocks = out.blocks(batch.len(), false);
        let block = &mut blocks[0];
        let mut buffers = evaluate::Buffers::new(batch, &plan);
        let evaluate::Buffers { chunk, scratch, y } = &mut buffers;
        for first in (0..64).step_by(LANES) {
            chunk.load(std::array::from_fn(|l| first + l));
            let answered = chunk.evaluate(scratch, y, block, first, LANES);
            assert_eq!(answered, ALL_LANES, "{what}, instances from {first}");
        }
    }
}

#[test]
fn plans_refuse_what_the_lane_path_does_not_take() {
    let (free, _, _) = contact_batch(ContactKind::Point, PlaneBody::Free, 4, 1).unwrap();
    let plan = LanePlan::new(free.template()).unwrap();
    assert_eq!((plan.free, plan.m, plan.ny()), (2, 3, 28));
    // A driven plane: its pose and velocity sit between the free q and u, as in
    // `InstanceState::to_vec`.
    let (tilting, _, _) = contact_batch(ContactKind::Point, PlaneBody::Tilting, 4, 1).unwrap();
    let plan = LanePlan::new(tilting.template()).unwrap();
    assert_eq!(
        (plan.free, plan.prescribed, plan.m, plan.ny()),
        (1, 1, 3, 28)
    );
    assert_eq!((plan.pose_at(0), plan.velocity_at(0)), (7, 20));
    assert!(plan.driven[0]);
    let state = tilting.instance_state(2).unwrap();
    let chunk = {
        let mut c = Chunk::new(&tilting, &plan);
        c.load(std::array::from_fn(|l| l.min(3)));
        c
    };
    let (y, time) = chunk.gather_state();
    assert_eq!(chunk.instance_state(&y, time, 2), state);

    // More prescribed bodies than the lane path holds.
    let mut t = SystemTemplate::new();
    let b = t.add_free_body("ball");
    for k in 0..=MAX_PRESCRIBED {
        let p = t.add_prescribed_body(format!("plate {k}"));
        t.add_constraint(crate::constraints::PointOnPlaneContact::new(p, b))
            .unwrap();
    }
    assert!(LanePlan::new(&t).is_none());
}

/// Every column of `e` as bits, in one vector (statuses first).
fn evaluation_bits(e: &Evaluation) -> Vec<u64> {
    let mut out: Vec<u64> = e.status.iter().map(|s| u64::from(*s)).collect();
    let mut add = |v: &[f64]| out.extend(v.iter().map(|x| x.to_bits()));
    add(&e.udot);
    add(&e.udot_unconstrained);
    for c in &e.constraints {
        for column in [
            &c.position_errors,
            &c.velocity_errors,
            &c.acceleration_errors,
            &c.multipliers,
            &c.power,
        ] {
            add(column);
        }
        add(&c.body_forces.concat());
        add(&c.contact_point.as_deref().unwrap_or_default().concat());
        add(c.separation.as_deref().unwrap_or_default());
        add(&c.contact_force.as_deref().unwrap_or_default().concat());
    }
    out
}

/// Knife-edge carts (a user-style constraint, `evaluate_lanes` through the trait's per-lane
/// default) on one free body and Ground, one in five with its constraint disabled.
fn knife_edge_batch(n: usize) -> Batch {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("cart");
    let knife = t
        .add_constraint(crate::custom::KnifeEdge::new(
            body,
            [0.0, 0.0, -0.1],
            [0.0, 1.0, 0.0],
        ))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    for i in 0..n {
        let x = i as f64 / n as f64;
        let inertia = [0.2, 0.3 + 0.1 * x, 0.25, 0.01, 0.0, 0.02 * x];
        batch
            .set_mass_properties(body, i, 1.0 + x, [0.0, 0.01, x], inertia)
            .unwrap();
        let q = [1.0, 0.1 * x, -0.05, 0.02, 0.3 * x, 0.2, 0.1];
        batch.set_q(body, i, q).unwrap();
        let u = [0.3, -0.2 * x, 0.5, 0.1, 0.4 * x, -0.3];
        batch.set_u(body, i, u).unwrap();
        batch.set_enabled(knife, i, i % 5 != 3).unwrap();
    }
    batch
}

/// Batches the one-constraint kernel takes, named: each built-in kind against Ground
/// (`sizes[0]` random instances each, about one in 97 disabled), point-to-ground contacts of 1–3
/// rows with Baumgarte terms (`sizes[1]`), knife-edge carts (`sizes[2]`).
fn one_constraint_batches(sizes: [usize; 3]) -> Vec<(String, Batch)> {
    let mut batches = Vec::new();
    for kind in [
        ContactKind::RollingSphere,
        ContactKind::SlidingSphere,
        ContactKind::Point,
    ] {
        let batch = contact_batch(kind, PlaneBody::Ground, sizes[0], 11)
            .unwrap()
            .0;
        batches.push((format!("{kind:?}"), batch));
    }
    for normals in 1..=3 {
        let batch = point_to_ground_batch(sizes[1], 9, normals, true, true)
            .unwrap()
            .0;
        batches.push((format!("point to ground, {normals} normals"), batch));
    }
    batches.push(("knife edge".to_string(), knife_edge_batch(sizes[2])));
    batches
}

/// The one-constraint kernel (`single`), with its own writer, gives the general lane path's
/// bits for each selection (u̇ and λ, u̇₀ alone, nothing but the status, body forces, the contact
/// report, every output) on each built-in kind against Ground, on point-to-ground contacts of
/// 1–3 rows with Baumgarte terms, and on a user-style constraint on one body (the trait's
/// per-lane default); chunks with disabled instances included (the masked rows), and partial
/// last chunks (N not a multiple of the lane count).
#[test]
fn the_one_constraint_kernel_gives_the_general_lane_paths_bits() {
    let batches = one_constraint_batches([203, 45, 37]);
    for (what, batch) in &batches {
        let plan = LanePlan::new(batch.template()).unwrap();
        assert!(plan.takes_single(), "{what}: the kernel takes the template");
        assert!(!plan.clone().without_single().takes_single());
        let unconstrained = Outputs {
            udot_unconstrained: true,
            ..Outputs::NONE
        };
        let forces = Outputs {
            body_forces: true,
            multipliers: true,
            ..Outputs::NONE
        };
        let contact = Outputs {
            contact: true,
            ..Outputs::NONE
        };
        let selections = [
            Outputs::DYNAMICS,
            unconstrained,
            Outputs::NONE,
            forces,
            contact,
            Outputs::ALL,
        ];
        for outputs in selections {
            let mut kernel = Evaluation::default();
            batch.evaluate_outputs_into(outputs, &mut kernel);
            let general = batch.evaluate_general_lanes(outputs);
            assert_eq!(kernel.flagged(), 0, "{what}");
            let (a, b) = (evaluation_bits(&kernel), evaluation_bits(&general));
            assert_eq!(a.len(), b.len(), "{what}, {outputs:?}");
            if let Some(k) = (0..a.len()).find(|&k| a[k] != b[k]) {
                let (x, y) = (f64::from_bits(a[k]), f64::from_bits(b[k]));
                panic!("{what}, {outputs:?}: value {k} is {x:e} in the kernel, {y:e} general");
            }
        }
    }
}

/// Stepping's one-constraint kernel (`Chunk::derivative_single`) gives the general lane path's
/// bits: states, times, work and flags after RK4 and Euler without drift control, RK4 with
/// Baumgarte terms on every constraint (RBDL mode) and RKM with projection, on the templates of
/// the evaluation test above (disabled instances and partial chunks included).
#[test]
fn stepping_with_the_one_constraint_kernel_gives_the_general_lane_paths_bits() {
    let mut batches = one_constraint_batches([23, 21, 17]);
    // States on the constraints, which RKM with projection can step (the random states above
    // break theirs on entry, which no step removes: flagged alike on both paths).
    batches.push((
        "rolling balls".to_string(),
        crate::scenarios::rolling_balls(19).unwrap(),
    ));
    batches.push((
        "sticks".to_string(),
        crate::scenarios::standing_sticks(18).unwrap(),
    ));
    let runs = [
        (Integrator::Rk4 { step: 1e-3 }, Stabilization::None),
        (
            Integrator::SemiImplicitEuler { step: 1e-3 },
            Stabilization::None,
        ),
        (Integrator::Rk4 { step: 1e-3 }, Stabilization::Baumgarte),
        (
            Integrator::RungeKuttaMerson {
                accuracy: 1e-6,
                max_step: 1e-3,
            },
            Stabilization::Projection { tolerance: 1e-6 },
        ),
    ];
    for (what, batch) in &batches {
        let plan = LanePlan::new(batch.template()).unwrap();
        assert!(plan.takes_single(), "{what}: the kernel takes the template");
        for (integrator, stabilization) in runs {
            let options = StepOptions {
                integrator,
                stabilization,
            };
            let mut stepped = Vec::new();
            for plan in [plan.clone(), plan.clone().without_single()] {
                let mut b = batch.clone();
                let mut sizes = vec![0.0; b.len()];
                let goal = crate::step::Goal::Steps(25);
                step::run_goal(&mut b, &plan, &options, goal, &mut sizes, f64::INFINITY).unwrap();
                stepped.push(b);
            }
            let mut moved = 0;
            for i in 0..batch.len() {
                let (a, b) = (stepped[0].state_of(i), stepped[1].state_of(i));
                let bits = |s: &crate::batch::InstanceState| -> Vec<u64> {
                    let mut v: Vec<f64> = vec![s.time, s.work[0], s.work[1]];
                    v.extend(s.q.iter().flatten().chain(s.u.iter().flatten()));
                    v.iter().map(|x| x.to_bits()).collect()
                };
                assert_eq!(
                    bits(&a),
                    bits(&b),
                    "{what}, {integrator:?}, {stabilization:?}, instance {i}: {a:?} / {b:?}"
                );
                assert_eq!(stepped[0].status()[i], stepped[1].status()[i], "{what}");
                if a.time > batch.state_of(i).time {
                    moved += 1;
                }
            }
            // Projection refuses the random states' errors on entry; every other run steps.
            let on_entry = matches!(stabilization, Stabilization::Projection { .. })
                && !what.starts_with("rolling")
                && !what.starts_with("sticks");
            if !on_entry {
                assert_eq!(
                    moved,
                    batch.len(),
                    "{what}, {integrator:?}: every instance steps"
                );
            }
        }
    }
}

/// Streaming stores (`EvaluationBlock::streaming`) write the same bits as ordinary ones, on the
/// one-constraint kernel's templates and on the general lane path's (planes that are bodies of
/// their own), for every output and for u̇ and λ alone, partial last chunks and the reference
/// path's lanes included (and so through `Batch::evaluate_stored_into` with each
/// `OutputStores`); and an evaluation streams exactly when `OutputStores` says: `Auto` when
/// its outputs pass `STREAMING_BYTES` on a CPU where streaming pays.
#[test]
fn streaming_stores_write_the_same_bits() {
    let mut batches = one_constraint_batches([203, 45, 37]);
    // Rolling balls of which two spin so fast that their dynamics overflow: the lanes flag
    // them and the reference path answers them (NaN, flagged), after the streamed chunk.
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let contact = crate::constraints::SphereOnPlaneContact::new(crate::model::GROUND, ball, true);
    t.add_constraint(contact).unwrap();
    let mut flagged = Batch::new(t, 41).unwrap();
    for i in 0..41 {
        let x = i as f64 / 41.0;
        let q = [1.0, 0.0, 0.1 * x, 0.0, x, -x, 0.5];
        flagged.set_q(ball, i, q).unwrap();
        let w = if i == 6 || i == 13 { 1e300 } else { 0.2 };
        flagged.set_u(ball, i, [w, -x, w, x, 0.3, -0.2]).unwrap();
    }
    batches.push(("rolling balls, two flagged".into(), flagged));
    for plane in [PlaneBody::Free, PlaneBody::Prescribed] {
        let batch = contact_batch(ContactKind::RollingSphere, plane, 101, 5)
            .unwrap()
            .0;
        batches.push((format!("rolling sphere on a {plane:?} plane"), batch));
    }
    for (what, batch) in &batches {
        for outputs in [Outputs::ALL, Outputs::DYNAMICS] {
            let streamed = batch.evaluate_lanes_streaming(outputs, true);
            let cached = batch.evaluate_lanes_streaming(outputs, false);
            let (a, b) = (evaluation_bits(&streamed), evaluation_bits(&cached));
            assert_eq!(a.len(), b.len(), "{what}, {outputs:?}");
            if let Some(k) = (0..a.len()).find(|&k| a[k] != b[k]) {
                panic!("{what}, {outputs:?}: value {k} differs when streamed");
            }
            let mut ordinary = Evaluation::default();
            batch.evaluate_outputs_into(outputs, &mut ordinary);
            assert_eq!(evaluation_bits(&ordinary), b, "{what}, {outputs:?}");
            for stores in [OutputStores::Cached, OutputStores::Streamed] {
                let mut stored = Evaluation::default();
                batch.evaluate_stored_into(outputs, stores, &mut stored);
                assert_eq!(
                    evaluation_bits(&stored),
                    b,
                    "{what}, {outputs:?}, {stores:?}"
                );
            }
            if what.contains("flagged") {
                assert_eq!(streamed.flagged(), 2, "{what}, {outputs:?}");
            }
        }
    }
    // A rolling sphere's every output, counted by hand: u̇ and u̇₀ (6 each), position,
    // velocity and acceleration errors and λ (3 each), power (1), both bodies' forces (6
    // each), contact point (3), separation (1) and force (3): 44 values, 352 bytes.
    let template = batches[0].1.template();
    let mut e = Evaluation::default();
    e.fill_for(template, 1000, Outputs::ALL);
    assert_eq!(e.output_bytes(), 352_000);
    let limit = crate::evaluation::STREAMING_BYTES / 352;
    let pays = crate::math::lanes::streaming_pays();
    for (n, large) in [(limit - 1, false), (limit + 1, true)] {
        e.fill_for(template, n, Outputs::ALL);
        assert_eq!(
            e.streams(OutputStores::Auto),
            large && pays,
            "{n} instances"
        );
        assert!(!e.streams(OutputStores::Cached), "{n} instances");
        assert!(e.streams(OutputStores::Streamed), "{n} instances");
    }
}

/// The AVX-512 copies (`math::lanes::avx512`: the one-constraint evaluation kernel and the
/// built-in kinds' lane methods) give the x86-64-v3 copies' bits: every output of the kernel's
/// templates and of the general lane path's (planes on bodies, where the kinds' copies run from
/// the general kernel), and the states after RK4 and Euler steps. Where the CPU has no AVX-512
/// both runs take the x86-64-v3 copies, and the test says so.
#[test]
fn avx512_copies_give_the_same_bits() {
    use crate::math::lanes::avx512;
    let mut batches = one_constraint_batches([203, 45, 37]);
    for kind in [ContactKind::RollingSphere, ContactKind::Point] {
        for plane in [PlaneBody::Free, PlaneBody::Tilting] {
            let batch = contact_batch(kind, plane, 41, 3).unwrap().0;
            batches.push((format!("{kind:?} on a {plane:?} plane"), batch));
        }
    }
    batches.push((
        "rolling balls".into(),
        crate::scenarios::rolling_balls(19).unwrap(),
    ));
    let run = |allowed: bool| {
        avx512::set_allowed(allowed);
        let wide = avx512::enabled();
        let mut results = Vec::new();
        for (_, batch) in &batches {
            let mut bits = Vec::new();
            for outputs in [Outputs::ALL, Outputs::DYNAMICS] {
                let mut e = Evaluation::default();
                batch.evaluate_outputs_into(outputs, &mut e);
                bits.extend(evaluation_bits(&e));
            }
            for integrator in [
                Integrator::Rk4 { step: 1e-3 },
                Integrator::SemiImplicitEuler { step: 1e-3 },
            ] {
                let mut b = batch.clone();
                let options = StepOptions {
                    integrator,
                    stabilization: Stabilization::None,
                };
                let plan = LanePlan::new(b.template()).unwrap();
                let mut sizes = vec![0.0; b.len()];
                let goal = crate::step::Goal::Steps(10);
                step::run_goal(&mut b, &plan, &options, goal, &mut sizes, f64::INFINITY).unwrap();
                for i in 0..b.len() {
                    let s = b.state_of(i);
                    let values = [s.time, s.work[0], s.work[1]].into_iter();
                    let values = values.chain(s.q.iter().flatten().copied());
                    bits.extend(
                        values
                            .chain(s.u.iter().flatten().copied())
                            .map(f64::to_bits),
                    );
                }
                bits.extend(b.status().iter().map(|s| u64::from(*s)));
            }
            results.push(bits);
        }
        (wide, results)
    };
    let (narrow, x86_64_v3) = run(false);
    let (wide, widest) = run(true);
    avx512::set_allowed(std::env::var_os("SIMBATCH_NO_AVX512").is_none());
    assert!(!narrow, "the copies can be turned off");
    if !wide {
        eprintln!("no AVX-512 on this CPU: both runs took the x86-64-v3 copies");
    }
    for ((what, _), (a, b)) in batches.iter().zip(x86_64_v3.iter().zip(&widest)) {
        assert_eq!(a.len(), b.len(), "{what}");
        if let Some(k) = (0..a.len()).find(|&k| a[k] != b[k]) {
            panic!("{what}: value {k} differs between the copies");
        }
    }
}
