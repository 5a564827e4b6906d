//! A run cut into calls (`run_batch_resuming`: a study's record intervals, a rollout's steps,
//! an environment's control period) is the run: a call's end is a step's end, not an event
//! (`unilateral.md` §6: "Output times are hit exactly per instance"), so resuming neither
//! captures a ball at the apex of a small bounce nor takes its next impact early, nor stops a
//! sliding contact whose slip has turned. Balls bouncing to rest (the Zeno sequences of §5) run
//! once and in 200 calls: the same impacts, modes and rest times, which are §5's closed form;
//! a brick spinning on its corners runs once and in 4 calls: the same motion.

use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactRecord, EventOptions, EventRun, UnilateralContact,
    contact_multipliers, run_batch, run_batch_resuming,
};
use simbatch::prelude::*;

use super::neighbours::Ball;

const DURATION: f64 = 2.0;
const G: f64 = 9.81;

/// `n` balls (m = 1, r = 0.05) dropped from rest with their lowest points at `h_i` ∈ [0.05,
/// 0.2] onto Ground's plane, restitution `e_i` ∈ [0.3, 0.7], frictionless (a drop without spin
/// stays in the vertical line either way), every third thrown sideways at 0.5 m/s with friction
/// (it bounces, then slides, then rolls); the batch, the ball and the contacts.
fn bouncing_balls(n: usize) -> (Batch, BodyId, Vec<UnilateralContact>) {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let radius = 0.05;
    let contact = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(radius))
        .unwrap();
    let mut batch = Batch::new(t, n).unwrap();
    let inertia = 0.4 * radius * radius;
    let mut contacts = Vec::with_capacity(n);
    for i in 0..n {
        let x = (i as f64 + 0.5) / n as f64;
        batch.set_gravity(i, [0.0, 0.0, -G]).unwrap();
        batch
            .set_mass_properties(
                ball,
                i,
                1.0,
                [0.0; 3],
                [inertia, inertia, inertia, 0.0, 0.0, 0.0],
            )
            .unwrap();
        let h = 0.05 + 0.15 * x;
        batch
            .set_q(ball, i, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, radius + h])
            .unwrap();
        let thrown = i % 3 == 0;
        let vx = if thrown { 0.5 } else { 0.0 };
        batch.set_u(ball, i, [0.0, 0.0, 0.0, vx, 0.0, 0.0]).unwrap();
        let e = 0.3 + 0.4 * ((7 * i) % n) as f64 / n as f64;
        let coefficients = if thrown {
            Coefficients::new(e, 0.6, 0.4).unwrap()
        } else {
            Coefficients::with_friction(e, 0.0).unwrap()
        };
        contacts.push(UnilateralContact {
            constraint: contact,
            coefficients,
        });
    }
    (batch, ball, contacts)
}

/// §5: the time of impact `n` (1-based) of a ball dropped from rest at height `h` with
/// restitution `e`, and the number `N` of the impact that capture makes plastic, for the
/// capture speed `v_cap`.
fn zeno(h: f64, e: f64, v_cap: f64) -> (impl Fn(u32) -> f64, u32) {
    let t0 = (2.0 * h / G).sqrt();
    let v1 = (2.0 * G * h).sqrt();
    let last = ((v_cap / v1).ln() / e.ln()).ceil() as u32;
    let time = move |n: u32| t0 * (1.0 + 2.0 * e * (1.0 - e.powi(n as i32 - 1)) / (1.0 - e));
    (time, last)
}

#[test]
fn a_run_cut_into_calls_has_the_impacts_modes_and_rest_times_of_the_run_uncut() {
    let n = 120;
    let (batch, ball, contacts) = bouncing_balls(n);
    let contacts_of = |i: usize| vec![contacts[i]];
    let options = EventOptions {
        step: 1e-3,
        ..EventOptions::default()
    };
    let mut whole = batch.clone();
    let once: Vec<EventRun> = run_batch(&mut whole, &contacts_of, DURATION, &options)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    // The same run in 200 calls of 10 ms, each resuming from the records of the one before,
    // the records merged as a study merges them (`ContactRecord::then`).
    let mut cut = batch.clone();
    let calls = 200;
    let mut previous: Vec<Option<Vec<ContactRecord>>> = vec![None; n];
    let mut merged: Vec<Option<ContactRecord>> = vec![None; n];
    for k in 1..=calls {
        let span = DURATION * k as f64 / calls as f64 - DURATION * (k - 1) as f64 / calls as f64;
        let runs = run_batch_resuming(&mut cut, &contacts_of, span, &options, &previous).unwrap();
        for (i, run) in runs.into_iter().enumerate() {
            let record = run.unwrap().contacts[0];
            merged[i] = Some(merged[i].map_or(record, |old| old.then(record)));
            previous[i] = Some(vec![record]);
        }
    }
    let (mut impacts, mut rolling, mut at_rest) = (0, 0, 0);
    let mut worst_rest = 0.0f64;
    for i in 0..n {
        let (a, b) = (once[i].contacts[0], merged[i].unwrap());
        assert_eq!(a.impacts, b.impacts, "instance {i}: {a:?}\nvs cut {b:?}");
        assert_eq!(
            std::mem::discriminant(&a.mode),
            std::mem::discriminant(&b.mode),
            "instance {i}: {a:?}\nvs cut {b:?}"
        );
        let (ta, tb) = (a.last_mode_change.unwrap(), b.last_mode_change.unwrap());
        assert!((ta - tb).abs() < 1e-8, "instance {i}: rest at {ta} vs {tb}");
        let (qa, qb) = (whole.q(ball).unwrap()[i], cut.q(ball).unwrap()[i]);
        let (ua, ub) = (whole.u(ball).unwrap()[i], cut.u(ball).unwrap()[i]);
        for (x, y) in qa.iter().zip(&qb).chain(ua.iter().zip(&ub)) {
            assert!(
                (x - y).abs() < 1e-8,
                "instance {i}: {qa:?} {ua:?}\nvs cut {qb:?} {ub:?}"
            );
        }
        // Resting on the plane, not held above it where a call's end found it.
        assert!((qb[6] - 0.05).abs() < 1e-9, "instance {i}: z = {}", qb[6]);
        impacts += b.impacts;
        if i % 3 == 0 {
            rolling += usize::from(b.mode == ContactMode::Stick && ub[3].abs() > 0.1);
            continue;
        }
        // A drop: §5's Zeno sequence, its impacts and the time it comes to rest.
        let (z0, e) = (
            batch.q(ball).unwrap()[i][6] - 0.05,
            contacts[i].coefficients.restitution,
        );
        let tol_cap = options
            .capture_speed
            .max(2.0 * options.constraint_tolerance);
        let (time, last) = zeno(z0, e, tol_cap);
        assert_eq!(b.impacts, last, "instance {i}: h = {z0}, e = {e}");
        worst_rest = worst_rest.max((tb - time(last)).abs());
        assert!(
            (tb - time(last)).abs() < 1e-6,
            "instance {i}: rest at {tb}, §5: {}",
            time(last)
        );
        at_rest += 1;
    }
    eprintln!(
        "{impacts} impacts; {at_rest} drops at rest at §5's time (worst {worst_rest:.1e} s), \
         {rolling} thrown balls rolling"
    );
    assert_eq!(at_rest, n - n.div_ceil(3));
    assert!(rolling == n.div_ceil(3), "{rolling}");
}

/// A brick spinning on its four corners over level ground (yaw rate 6 rad/s, drifting at
/// 0.3 m/s, μ_d = 0.02): each corner's slip turns with it, a right angle in a quarter second.
/// Cut into 4 calls of 0.3 s, the run is the run uncut (states within 1e-9), its energy falls
/// at every call's end (friction only takes), its corners stay on the ground, and it still
/// spins at the end. Before, a resumed call tested a sliding corner's slip along the direction
/// it had when its mode was found, a call earlier: turned a right angle from there, a corner
/// sliding at a metre a second read as slowed to a stop — and the brick was stopped dead.
#[test]
fn a_turning_brick_slides_on_across_calls() {
    let (batch, brick, _, contacts) = super::neighbours::brick_and_ball(Ball::None);
    let options = EventOptions {
        step: 1e-3,
        ..EventOptions::default()
    };
    let duration = 1.2;
    let contacts_of = |_: usize| contacts.clone();
    let mut whole = batch.clone();
    let once = run_batch(&mut whole, &contacts_of, duration, &options).unwrap();
    let once = once[0].as_ref().unwrap();
    let mut cut = batch.clone();
    let calls = 4;
    let mut previous: Vec<Option<Vec<ContactRecord>>> = vec![None];
    let mut energy = cut.energy(0).unwrap();
    for k in 1..=calls {
        let span = duration * k as f64 / calls as f64 - duration * (k - 1) as f64 / calls as f64;
        let runs = run_batch_resuming(&mut cut, &contacts_of, span, &options, &previous).unwrap();
        let run = runs[0].as_ref().unwrap();
        let now = cut.energy(0).unwrap();
        assert!(now <= energy + 1e-12, "call {k}: energy {energy} → {now}");
        energy = now;
        assert!(
            run.contacts.iter().all(|r| r.mode != ContactMode::Open),
            "call {k}: {:?}",
            run.contacts
        );
        previous = vec![Some(run.contacts.clone())];
    }
    let (qa, qb) = (whole.q(brick).unwrap()[0], cut.q(brick).unwrap()[0]);
    let (ua, ub) = (whole.u(brick).unwrap()[0], cut.u(brick).unwrap()[0]);
    for (x, y) in qa.iter().zip(&qb).chain(ua.iter().zip(&ub)) {
        assert!((x - y).abs() < 1e-9, "{qa:?} {ua:?}\nvs cut {qb:?} {ub:?}");
    }
    assert!((qb[6] - 0.1).abs() < 1e-6, "on its corners: z = {}", qb[6]);
    // Still spinning and drifting at the end (it has not been stopped on the way).
    assert!(ub[2] > 1.0 && ub[3].hypot(ub[4]) > 0.1, "{ub:?}");
    let (a, b) = (&once.contacts, previous[0].as_ref().unwrap());
    for (a, b) in a.iter().zip(b) {
        assert_eq!(
            std::mem::discriminant(&a.mode),
            std::mem::discriminant(&b.mode)
        );
    }
}

/// What a call ends with is what the next starts from, and a rollout records it after every
/// step: the multipliers a run ends with (`EventRun::multipliers`, from the run's own last
/// contact space) must be `contact_multipliers`' at the state and modes it ends in, bit for
/// bit, through the balls' impacts, slides and rest (a resting ball's normal row carries m g,
/// its slip rows nothing). And the event machine's buffers pass from one machine to the next
/// on a thread (`cpu::unilateral` `pool.rs`): the same calls on a thread that has just run a
/// brick on four corners (other sizes throughout) give the same bits as on a fresh one.
#[test]
fn a_run_ends_with_the_multipliers_of_its_end_and_no_machine_inherits_another() {
    let n = 48;
    let (batch, ball, contacts) = bouncing_balls(n);
    let contacts_of = |i: usize| vec![contacts[i]];
    let options = EventOptions {
        step: 1e-3,
        ..EventOptions::default()
    };
    let calls = 120;
    let span = 0.01;
    let run_calls = |after_brick: bool| {
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        threads.install(|| {
            if after_brick {
                let (mut bricks, _, _, corners) = super::neighbours::brick_and_ball(Ball::None);
                run_batch(&mut bricks, &|_| corners.clone(), 0.05, &options).unwrap();
            }
            let mut cut = batch.clone();
            let mut previous: Vec<Option<Vec<ContactRecord>>> = vec![None; n];
            let mut ends: Vec<Vec<Option<Vec<f64>>>> = Vec::new();
            let (mut checked, mut resting) = (0, 0);
            for _ in 0..calls {
                let runs =
                    run_batch_resuming(&mut cut, &contacts_of, span, &options, &previous).unwrap();
                let mut end = Vec::new();
                for (i, run) in runs.into_iter().enumerate() {
                    let run = run.unwrap();
                    let modes: Vec<ContactMode> = run.contacts.iter().map(|r| r.mode).collect();
                    let (found, _) =
                        contact_multipliers(&cut, i, &contacts_of(i), &modes, &options).unwrap();
                    let ended = run.multipliers.clone().expect("multipliers at the end");
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&ended),
                        bits(&found),
                        "instance {i}: {ended:?} vs {found:?}"
                    );
                    checked += 1;
                    let at_rest = modes[0] == ContactMode::Stick
                        && cut.u(ball).unwrap()[i].iter().all(|v| v.abs() < 1e-9);
                    if at_rest {
                        let mut sizes: Vec<f64> = ended.iter().map(|x| x.abs()).collect();
                        sizes.sort_by(f64::total_cmp);
                        let (rest, normal) = sizes.split_at(sizes.len() - 1);
                        assert!((normal[0] - G).abs() < 1e-9, "instance {i}: {ended:?}");
                        assert!(rest.iter().all(|x| *x < 1e-9), "instance {i}: {ended:?}");
                        resting += 1;
                    }
                    end.push(run.multipliers);
                    previous[i] = Some(run.contacts);
                }
                ends.push(end);
            }
            assert_eq!(checked, n * calls);
            assert!(resting > n, "{resting} resting ends");
            let q: Vec<u64> = cut
                .q(ball)
                .unwrap()
                .iter()
                .flatten()
                .map(|x| x.to_bits())
                .collect();
            (q, ends)
        })
    };
    let fresh = run_calls(false);
    let after_brick = run_calls(true);
    assert!(
        fresh.0 == after_brick.0,
        "states differ after another template's run"
    );
    assert!(
        fresh.1 == after_brick.1,
        "multipliers differ after another template's run"
    );
}
