//! Evaluation on the CPU lane path (`Batch::evaluate`) against the per-instance reference path
//! (`Batch::evaluate_reference`): every reported column within 1e-12, the same status bits,
//! on the built-in kinds (lane kernels), custom constraints (the trait's per-lane defaults),
//! free, prescribed and driven planes, disabled constraints, redundant rows (min-norm
//! multipliers), an overflowing instance, reused outputs across templates, and bits identical
//! across thread counts and with the sequential evaluation.

use simbatch::constraints::{BodyKinematics, ParamSpec, Params, Row};
use simbatch::custom::KnifeEdge;
use simbatch::evaluation::{ConstraintEvaluation, Evaluation, Outputs};
use simbatch::prelude::*;
use simbatch::scenarios::{ContactKind, PlaneBody, contact_batch, point_to_ground_batch};

/// `a` and `b` within `tol` relative to max(1, |b|); NaN matches NaN.
fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: length");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        let same = (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * y.abs().max(1.0);
        assert!(same, "{what}[{k}]: lanes {x:e}, reference {y:e}");
    }
}

fn flat<const N: usize>(v: &[[f64; N]]) -> Vec<f64> {
    v.iter().flatten().copied().collect()
}

/// Every column of two evaluations within `tol`, statuses equal.
fn assert_same_evaluation(a: &Evaluation, b: &Evaluation, tol: f64, what: &str) {
    assert_eq!((a.len, a.nu), (b.len, b.nu), "{what}: shape");
    assert_eq!(a.status, b.status, "{what}: status");
    close(&a.udot, &b.udot, tol, &format!("{what}: udot"));
    close(
        &a.udot_unconstrained,
        &b.udot_unconstrained,
        tol,
        &format!("{what}: udot_unconstrained"),
    );
    assert_eq!(a.constraints.len(), b.constraints.len());
    for (c, (x, y)) in a.constraints.iter().zip(&b.constraints).enumerate() {
        let w = |name: &str| format!("{what}: constraint {c} {name}");
        let columns = |e: &ConstraintEvaluation| {
            [
                e.position_errors.clone(),
                e.velocity_errors.clone(),
                e.acceleration_errors.clone(),
                e.multipliers.clone(),
                flat(&e.body_forces),
                e.power.clone(),
                e.contact_point.as_deref().map(flat).unwrap_or_default(),
                e.separation.clone().unwrap_or_default(),
                e.contact_force.as_deref().map(flat).unwrap_or_default(),
            ]
        };
        let names = [
            "position_errors",
            "velocity_errors",
            "acceleration_errors",
            "multipliers",
            "body_forces",
            "power",
            "contact_point",
            "separation",
            "contact_force",
        ];
        assert_eq!(
            (x.width, x.body_count),
            (y.width, y.body_count),
            "{}",
            w("shape")
        );
        for ((p, q), name) in columns(x).iter().zip(columns(y)).zip(names) {
            close(p, &q, tol, &w(name));
        }
        assert_eq!(
            (
                x.contact_point.is_some(),
                x.separation.is_some(),
                x.contact_force.is_some()
            ),
            (
                y.contact_point.is_some(),
                y.separation.is_some(),
                y.contact_force.is_some()
            ),
            "{}",
            w("extras")
        );
    }
}

/// Instances whose u̇ differs from the reference's in some bit: the lane path rounds
/// differently (closed-form `M⁻¹`), so a lane path that silently handed every instance to the
/// reference would show none.
fn differing_instances(a: &Evaluation, b: &Evaluation) -> usize {
    (0..a.len)
        .filter(|&i| {
            let (x, y) = (a.udot_of(i).unwrap(), b.udot_of(i).unwrap());
            x.iter().zip(y).any(|(p, q)| p.to_bits() != q.to_bits())
        })
        .count()
}

fn bits(e: &Evaluation) -> Vec<u64> {
    let mut out: Vec<u64> = e.status.iter().map(|s| *s as u64).collect();
    out.extend(
        e.udot
            .iter()
            .chain(&e.udot_unconstrained)
            .map(|x| x.to_bits()),
    );
    for c in &e.constraints {
        for v in [
            &c.position_errors,
            &c.velocity_errors,
            &c.acceleration_errors,
            &c.multipliers,
            &c.power,
        ] {
            out.extend(v.iter().map(|x| x.to_bits()));
        }
        out.extend(flat(&c.body_forces).iter().map(|x| x.to_bits()));
        if let Some(p) = &c.contact_point {
            out.extend(flat(p).iter().map(|x| x.to_bits()));
        }
        if let Some(s) = &c.separation {
            out.extend(s.iter().map(|x| x.to_bits()));
        }
        if let Some(f) = &c.contact_force {
            out.extend(flat(f).iter().map(|x| x.to_bits()));
        }
    }
    out
}

#[test]
fn lane_evaluation_reproduces_the_reference_on_every_contact_kind() {
    // 203 = 50 chunks of four and a chunk with three lanes of padding; random, inconsistent
    // states, about one instance in 97 with its contact disabled.
    let n = 203;
    for kind in [
        ContactKind::RollingSphere,
        ContactKind::SlidingSphere,
        ContactKind::Point,
    ] {
        for plane in PlaneBody::ALL {
            let (batch, _, contact) = contact_batch(kind, plane, n, 17).unwrap();
            let what = format!("{kind:?} on {plane:?}");
            let (lanes, reference) = (batch.evaluate(), batch.evaluate_reference());
            assert_eq!(lanes.flagged(), 0, "{what}");
            assert_same_evaluation(&lanes, &reference, 1e-12, &what);
            let disabled = (0..n)
                .filter(|&i| batch.enabled(contact).unwrap()[i] == 0)
                .count();
            assert!(
                disabled > 0,
                "{what}: some instance runs without its contact"
            );
            // The two paths round differently (closed-form M⁻¹): they really are two, on
            // prescribed and driven planes too.
            assert!(differing_instances(&lanes, &reference) > n / 2, "{what}");
        }
    }
}

#[test]
fn point_to_ground_and_custom_constraints_evaluate_on_lanes() {
    let (batch, _, _) = point_to_ground_batch(45, 9, 3, true, true).unwrap();
    let (lanes, reference) = (batch.evaluate(), batch.evaluate_reference());
    assert_same_evaluation(&lanes, &reference, 1e-12, "point to ground");

    let n = 23;
    let batch = super::lanes::knife_edge_carts(n);
    let (lanes, reference) = (batch.evaluate(), batch.evaluate_reference());
    assert_same_evaluation(&lanes, &reference, 1e-12, "custom");
    assert!(differing_instances(&lanes, &reference) > n / 2);
}

/// A box on four coplanar corners: `G M⁻¹ Gᵀ` is singular, the certificate fails on every lane
/// and the lanes take the reference solver's minimum-norm multipliers.
#[test]
fn redundant_rows_evaluate_with_the_min_norm_multipliers() {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("box");
    for (x, y) in [(0.2, 0.1), (-0.2, 0.1), (-0.2, -0.1), (0.2, -0.1)] {
        t.add_constraint(PointOnPlaneContact::new(GROUND, body).with_follower_point([x, y, -0.05]))
            .unwrap();
    }
    let n = 6;
    let mut batch = Batch::new(t, n).unwrap();
    for i in 0..n {
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
    let (lanes, reference) = (batch.evaluate(), batch.evaluate_reference());
    assert_same_evaluation(&lanes, &reference, 1e-12, "box on four corners");
}

#[test]
fn an_overflowing_instance_is_flagged_alone() {
    let (mut batch, body, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Ground, 10, 3).unwrap();
    let clean = batch.evaluate();
    batch
        .set_u(body, 5, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    let (lanes, reference) = (batch.evaluate(), batch.evaluate_reference());
    assert_same_evaluation(&lanes, &reference, 1e-12, "overflowing instance");
    assert_ne!(lanes.status[5], status::OK);
    for i in (0..10).filter(|i| *i != 5) {
        assert_eq!(lanes.status[i], status::OK);
        assert_eq!(lanes.udot_of(i).unwrap(), clean.udot_of(i).unwrap());
        let c = &lanes.constraints[0];
        assert_eq!(
            c.multipliers_of(i).unwrap(),
            clean.constraints[0].multipliers_of(i).unwrap()
        );
    }
}

#[test]
fn lane_evaluation_is_bit_identical_across_threads_and_reused_outputs() {
    let (batch, _, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Free, 2999, 5).unwrap();
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| bits(&batch.evaluate()))
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(7));
    assert_eq!(one, bits(&batch.evaluate_sequential()));

    // One output reused for batches of other templates and sizes: nothing stale survives.
    let (other, _, _) = point_to_ground_batch(77, 2, 3, true, false).unwrap();
    let mut out = Evaluation::default();
    batch.evaluate_into(&mut out);
    other.evaluate_into(&mut out);
    assert_eq!(bits(&out), bits(&other.evaluate()));
    batch.evaluate_into(&mut out);
    assert_eq!(bits(&out), one);
}

/// Every column of `e` by its `Outputs` field name, as bits (contact columns under "contact").
fn named_columns(e: &Evaluation) -> Vec<(&'static str, Vec<u64>)> {
    let b = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let mut out = vec![
        ("udot", b(&e.udot)),
        ("udot_unconstrained", b(&e.udot_unconstrained)),
    ];
    for c in &e.constraints {
        out.push(("position_errors", b(&c.position_errors)));
        out.push(("velocity_errors", b(&c.velocity_errors)));
        out.push(("acceleration_errors", b(&c.acceleration_errors)));
        out.push(("multipliers", b(&c.multipliers)));
        out.push(("body_forces", b(&flat(&c.body_forces))));
        out.push(("power", b(&c.power)));
        let mut contact = c.contact_point.as_deref().map(flat).unwrap_or_default();
        contact.extend(c.separation.clone().unwrap_or_default());
        contact.extend(c.contact_force.as_deref().map(flat).unwrap_or_default());
        out.push(("contact", b(&contact)));
    }
    out
}

/// `outputs` with the one field `name` set.
fn only(name: &str) -> Outputs {
    let mut o = Outputs::NONE;
    match name {
        "udot" => o.udot = true,
        "udot_unconstrained" => o.udot_unconstrained = true,
        "position_errors" => o.position_errors = true,
        "velocity_errors" => o.velocity_errors = true,
        "acceleration_errors" => o.acceleration_errors = true,
        "multipliers" => o.multipliers = true,
        "body_forces" => o.body_forces = true,
        "power" => o.power = true,
        "contact" => o.contact = true,
        _ => unreachable!("{name}"),
    }
    o
}

/// Whether `outputs` selects the output named `name`.
fn selects(outputs: &Outputs, name: &str) -> bool {
    match name {
        "udot" => outputs.udot,
        "udot_unconstrained" => outputs.udot_unconstrained,
        "position_errors" => outputs.position_errors,
        "velocity_errors" => outputs.velocity_errors,
        "acceleration_errors" => outputs.acceleration_errors,
        "multipliers" => outputs.multipliers,
        "body_forces" => outputs.body_forces,
        "power" => outputs.power,
        "contact" => outputs.contact,
        _ => unreachable!("{name}"),
    }
}

const OUTPUT_NAMES: [&str; 9] = [
    "udot",
    "udot_unconstrained",
    "position_errors",
    "velocity_errors",
    "acceleration_errors",
    "multipliers",
    "body_forces",
    "power",
    "contact",
];

/// An evaluation limited to some outputs fills exactly those, with the bits of the full
/// evaluation — on lanes (a prescribed plane among them), with disabled contacts and
/// a non-finite instance — and refuses to read the others.
#[test]
fn selected_outputs_are_the_full_evaluations_bits_and_the_others_are_refused() {
    let mut batches = Vec::new();
    for (kind, plane) in [
        (ContactKind::RollingSphere, PlaneBody::Ground),
        (ContactKind::SlidingSphere, PlaneBody::Free),
        (ContactKind::Point, PlaneBody::Prescribed),
    ] {
        batches.push(contact_batch(kind, plane, 37, 23).unwrap().0);
    }
    batches.push(point_to_ground_batch(21, 4, 3, true, true).unwrap().0);
    batches.push(super::lanes::knife_edge_carts(13));
    let (mut broken, body, _) =
        contact_batch(ContactKind::RollingSphere, PlaneBody::Ground, 9, 2).unwrap();
    broken
        .set_u(body, 4, [1e200, -1e200, 1e200, 0.0, 0.0, 0.0])
        .unwrap();
    batches.push(broken);

    let mut selections: Vec<Outputs> = OUTPUT_NAMES.iter().map(|n| only(n)).collect();
    selections.extend([Outputs::DYNAMICS, Outputs::NONE, Outputs::ALL]);
    for (b, batch) in batches.iter().enumerate() {
        let full = batch.evaluate();
        let full_columns = named_columns(&full);
        let mut out = Evaluation::default();
        for outputs in &selections {
            // Through the façade, into a reused result: nothing stale survives a narrower call.
            let mut evaluator = Evaluator::cpu().with_outputs(*outputs);
            assert_eq!(evaluator.outputs(), *outputs);
            evaluator.evaluate_into(batch, &mut out).unwrap();
            assert_eq!(out.outputs, *outputs);
            assert_eq!(out.status, full.status, "batch {b}: status");
            for ((name, got), (_, want)) in named_columns(&out).iter().zip(&full_columns) {
                if selects(outputs, name) {
                    assert_eq!(got, want, "batch {b} {outputs:?}: {name}");
                } else {
                    assert!(got.is_empty(), "batch {b} {outputs:?}: {name} left empty");
                }
            }
            let refused = |r: simbatch::Result<&[f64]>, name: &str| match r {
                Err(Error::OutputNotSelected { output }) => assert_eq!(output, name),
                other => panic!("{name}: expected OutputNotSelected, got {other:?}"),
            };
            if !outputs.udot {
                refused(out.udot_of(0), "udot");
            } else {
                assert_eq!(out.udot_of(0).unwrap(), full.udot_of(0).unwrap());
            }
            if !outputs.multipliers {
                refused(out.constraints[0].multipliers_of(0), "multipliers");
            }
            if !outputs.position_errors {
                refused(out.constraints[0].position_errors_of(0), "position_errors");
            }
        }
    }
}

/// A knife edge whose first row is given twice: one constraint between a body and Ground with
/// redundant rows, which the one-constraint kernel takes.
#[derive(Debug)]
struct DoubledKnife(KnifeEdge, Vec<RowLevel>);

impl DoubledKnife {
    fn new(knife: KnifeEdge) -> Self {
        let mut levels = knife.row_levels().to_vec();
        levels.push(levels[0]);
        Self(knife, levels)
    }
}

impl Constraint for DoubledKnife {
    fn kind_name(&self) -> &'static str {
        "doubled_knife"
    }
    fn bodies(&self) -> &[BodyId] {
        self.0.bodies()
    }
    fn params(&self) -> Vec<ParamSpec> {
        self.0.params()
    }
    fn row_levels(&self) -> &[RowLevel] {
        &self.1
    }
    fn report_slots(&self) -> &[Option<usize>] {
        self.0.report_slots()
    }
    fn evaluate(&self, params: &Params<'_>, kinematics: &[BodyKinematics], rows: &mut [Row]) {
        let n = rows.len() - 1;
        self.0.evaluate(params, kinematics, &mut rows[..n]);
        rows[n] = rows[0];
    }
}

/// One constraint with a row given twice (the one-constraint kernel's template shape): every
/// lane fails the certificate and takes the reference solver's minimum-norm multipliers, which
/// split the force evenly between the two copies.
#[test]
fn redundant_rows_of_one_constraint_evaluate_with_the_min_norm_multipliers() {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("cart");
    let knife = KnifeEdge::new(body, [0.0, 0.0, -0.1], [0.0, 1.0, 0.0]);
    let doubled = t.add_constraint(DoubledKnife::new(knife)).unwrap();
    let n = 11;
    let mut batch = Batch::new(t, n).unwrap();
    for i in 0..n {
        let x = i as f64 / n as f64;
        let inertia = [0.2, 0.3, 0.25, 0.01 * x, 0.0, 0.0];
        batch
            .set_mass_properties(body, i, 1.0 + x, [0.0, 0.01, 0.0], inertia)
            .unwrap();
        let q = [1.0, 0.1 * x, -0.05, 0.02, 0.3 * x, 0.2, 0.1];
        batch.set_q(body, i, q).unwrap();
        batch
            .set_u(body, i, [0.3, -0.2 * x, 0.5, 0.1, 0.4 * x, -0.3])
            .unwrap();
        batch.set_enabled(doubled, i, i != 4).unwrap();
    }
    let system = batch.instance_system(0).unwrap();
    let solved = system.solve().unwrap();
    assert_eq!((solved.rank, system.rows()), (2, 3), "one redundant row");
    let (lanes, reference) = (batch.evaluate(), batch.evaluate_reference());
    assert_eq!(lanes.flagged(), 0);
    assert_same_evaluation(&lanes, &reference, 1e-12, "a knife edge with a doubled row");
    // u̇ and λ alone: the one-constraint kernel's own route to the minimum-norm multipliers.
    let mut dynamics = Evaluation::default();
    batch.evaluate_outputs_into(Outputs::DYNAMICS, &mut dynamics);
    assert_eq!(dynamics.status, reference.status);
    close(&dynamics.udot, &reference.udot, 1e-12, "doubled row: udot");
    let (mu, reference_mu) = (
        &dynamics.constraints[0].multipliers,
        &reference.constraints[0].multipliers,
    );
    close(mu, reference_mu, 1e-12, "doubled row: multipliers");
    // The reported first row carries half the force the knife edge alone gives it.
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("cart");
    t.add_constraint(KnifeEdge::new(body, [0.0, 0.0, -0.1], [0.0, 1.0, 0.0]))
        .unwrap();
    let mut single = Batch::new(t, 1).unwrap();
    single
        .set_mass_properties(
            body,
            0,
            1.0,
            [0.0, 0.01, 0.0],
            [0.2, 0.3, 0.25, 0.0, 0.0, 0.0],
        )
        .unwrap();
    single
        .set_q(body, 0, [1.0, 0.0, -0.05, 0.02, 0.0, 0.2, 0.1])
        .unwrap();
    single
        .set_u(body, 0, [0.3, 0.0, 0.5, 0.1, 0.0, -0.3])
        .unwrap();
    let alone = single.evaluate().constraints[0].multipliers_of(0).unwrap()[0];
    let shared = lanes.constraints[0].multipliers_of(0).unwrap()[0];
    assert!(
        (2.0 * shared - alone).abs() <= 1e-12 * alone.abs().max(1.0),
        "{shared:e} is half of {alone:e}"
    );
    assert!(alone.abs() > 1e-3, "the row carries a force");
}
