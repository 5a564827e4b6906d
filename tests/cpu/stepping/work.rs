//! The work a driven plate does accounts for the energy change; constraint forces between free
//! bodies do no work.

use super::*;

/// Energy bookkeeping on driven systems: balls rolling on tilting plates (random laws), pushed
/// by applied forces and torques. The plate does work on the balls, so their energy is not
/// conserved; `energy change − driven work − applied work` is the integration error, which
/// RK4's fourth order makes vanish (the same check at h and h/2 shrinks ~16×).
#[test]
fn work_done_by_a_driven_plate_accounts_for_the_energy_change() {
    use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};
    let (mut batch, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Tilting, 64, 3).expect("batch");
    simbatch::cpu::assembly::assemble_positions(&mut batch, &Default::default())
        .expect("assembles");
    simbatch::cpu::assembly::assemble_velocities(&mut batch, None).expect("velocities assemble");
    let residual = |h: f64| {
        let mut b = batch.clone();
        let e0: Vec<f64> = (0..b.len()).map(|i| b.energy(i).unwrap()).collect();
        let mut stepper = Stepper::new(rk4(h)).unwrap();
        stepper.advance(&mut b, 0.5).unwrap();
        let mut worst: f64 = 0.0;
        let mut driven: f64 = 0.0;
        let mut applied: f64 = 0.0;
        for (i, e0) in e0.iter().enumerate() {
            assert_eq!(b.status()[i], 0, "instance {i}");
            let [wd, wa] = b.work()[i];
            let change = b.energy(i).unwrap() - e0;
            worst = worst.max((change - wd - wa).abs());
            driven = driven.max(wd.abs());
            applied = applied.max(wa.abs());
        }
        (worst, driven, applied)
    };
    let (coarse, driven, applied) = residual(2e-3);
    let (fine, _, _) = residual(1e-3);
    println!(
        "|ΔE − W| {coarse:.3e} (h 2e-3), {fine:.3e} (h 1e-3); |W driven| ≤ {driven:.3}, |W applied| ≤ {applied:.3}"
    );
    assert!(
        driven > 0.01 && applied > 0.01,
        "the plate and the loads do work"
    );
    assert!(fine < 1e-6 * driven, "bookkeeping misses: {fine:e}");
    assert!(
        coarse / fine > 8.0,
        "not fourth order: {coarse:e} → {fine:e}"
    );
}

/// Without prescribed bodies the constraint forces are workless: the driven work stays at
/// rounding level and the energy change is the applied loads' work.
#[test]
fn constraint_forces_between_free_bodies_do_no_work() {
    use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch};
    let (mut batch, _, _) =
        contact_batch(ContactKind::Point, PlaneBody::Free, 32, 8).expect("batch");
    simbatch::cpu::assembly::assemble_positions(&mut batch, &Default::default())
        .expect("assembles");
    simbatch::cpu::assembly::assemble_velocities(&mut batch, None).expect("velocities assemble");
    let e0: Vec<f64> = (0..batch.len()).map(|i| batch.energy(i).unwrap()).collect();
    let mut stepper = Stepper::new(rk4(5e-4)).unwrap();
    stepper.advance(&mut batch, 0.2).unwrap();
    for (i, e0) in e0.iter().enumerate() {
        let [wd, wa] = batch.work()[i];
        let change = batch.energy(i).unwrap() - e0;
        assert!(wd.abs() < 1e-9, "instance {i}: driven work {wd:e}");
        assert!(
            (change - wa).abs() < 1e-7,
            "instance {i}: ΔE {change} vs W {wa}"
        );
    }
}
