//! Bad input gets a typed error naming the field, the instance and the accepted range — never a
//! panic, never a silently stored bad value. One file per part: mass properties, geometry and
//! numbers (`values`); handles, templates, API edges and sizes (`api`); random inputs and shared
//! columns (`robustness`).

use simbatch::prelude::*;

fn sphere_batch(n: usize) -> (Batch, BodyId, ConstraintId) {
    let mut t = SystemTemplate::new();
    let ball = t.add_free_body("ball");
    let c = t
        .add_constraint(SphereOnPlaneContact::new(GROUND, ball, true).with_radius(0.1))
        .unwrap();
    (Batch::new(t, n).unwrap(), ball, c)
}

fn expect_invalid(result: Result<()>, field: &str, instance: usize, accepted_contains: &str) {
    match result {
        Err(Error::InvalidValue {
            field: f,
            instance: i,
            accepted,
            ..
        }) => {
            assert_eq!(f, field);
            assert_eq!(i, instance);
            assert!(
                accepted.contains(accepted_contains),
                "accepted = {accepted:?}"
            );
        }
        other => panic!("expected InvalidValue for {field}, got {other:?}"),
    }
}

mod api;
mod robustness;
mod values;
