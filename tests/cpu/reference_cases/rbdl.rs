//! Section B of `reference-cases.md`: RBDL's point-to-ground contacts (pivots, sticking and
//! sliding contacts, Baumgarte terms, redundant supports).

use super::*;

const XYZ: [[f64; 3]; 3] = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

struct Rbdl {
    batch: Batch,
    body: BodyId,
    contacts: Vec<ConstraintId>,
}

#[allow(clippy::too_many_arguments)]
fn rbdl_body(
    mass: f64,
    inertia: [f64; 6],
    com: [f64; 3],
    gravity: [f64; 3],
    q: [f64; 7],
    u: [f64; 6],
    contacts: Vec<PointToGround>,
    baumgarte: Option<f64>,
) -> Rbdl {
    let mut t = SystemTemplate::new();
    let body = t.add_free_body("body");
    let _ = body;
    let ids: Vec<ConstraintId> = contacts
        .into_iter()
        .map(|c| t.add_constraint(c).unwrap())
        .collect();
    if let Some(tc) = baumgarte {
        for id in &ids {
            t.set_baumgarte(*id, Some(Baumgarte { time_constant: tc }))
                .unwrap();
        }
    }
    let mut batch = Batch::new(t, 1).unwrap();
    batch
        .set_mass_properties(body, 0, mass, com, inertia)
        .unwrap();
    batch.set_gravity(0, gravity).unwrap();
    batch.set_q(body, 0, q).unwrap();
    batch.set_u(body, 0, u).unwrap();
    Rbdl {
        batch,
        body,
        contacts: ids,
    }
}

/// RBDL's q̈ = [a_o (world), ω̇ (body frame)] from simbatch's u̇ = [b (world), a_o].
fn rbdl_qddot(udot: &[f64], r: &Matrix3<f64>) -> Vec<f64> {
    let wdot_body = r.transpose() * Vector3::new(udot[0], udot[1], udot[2]);
    vec![
        udot[3],
        udot[4],
        udot[5],
        wdot_body.x,
        wdot_body.y,
        wdot_body.z,
    ]
}

#[test]
fn p1_instantaneous_pivot() {
    let c = PointToGround::new(BodyId::new(1), [0.0, -1.0, 0.0], &XYZ).unwrap();
    let s = rbdl_body(
        1.0,
        [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, -9.81, 0.0],
        pose([1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0]),
        [0.0, 0.0, -1.0, 1.0, 0.0, 0.0],
        vec![c],
        None,
    );
    let ev = s.batch.evaluate();
    let udot = ev.udot_of(0).unwrap();
    assert_all_close("a_o", &udot[3..], &[0.0, -1.0, 0.0], 1e-12);
    assert_all_close("wdot", &udot[..3], &[0.0; 3], 1e-12);
    let ce = ev.constraint(s.contacts[0]).unwrap();
    assert_all_close(
        "lambda_rbdl",
        &ce.multipliers_of(0)
            .unwrap()
            .iter()
            .map(|l| -l)
            .collect::<Vec<_>>(),
        &[0.0, 8.81, 0.0],
        1e-12,
    );
    assert_all_close(
        "physical force",
        &ce.contact_force.as_ref().unwrap()[0],
        &[0.0, 8.81, 0.0],
        1e-12,
    );
}

#[test]
fn p2_inconsistent_moving_state() {
    let r = Matrix3::new(
        0.808307066774345,
        -0.0720659114904708,
        0.584333971461272,
        0.341746746490328,
        0.865601553329486,
        -0.365982393206091,
        -0.479425538604203,
        0.495520388354132,
        0.724300143351802,
    );
    let w = [-0.709163793375977, -1.92838628538885, -0.632919138233275];
    let c = PointToGround::new(BodyId::new(1), [0.0, -1.0, 0.0], &XYZ).unwrap();
    let s = rbdl_body(
        1.0,
        [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, -9.81, 0.0],
        pose(quat_of(&r), [0.1, 0.2, 0.3]),
        [w[0], w[1], w[2], 1.1, 1.2, 1.3],
        vec![c],
        None,
    );
    let ev = s.batch.evaluate();
    let udot = ev.udot_of(0).unwrap();
    assert_all_close(
        "a_o",
        &udot[3..],
        &[0.577622487794113, -1.75321359772555, 1.34934126213606],
        1e-9,
    );
    assert_all_close(
        "wdot_world",
        &udot[..3],
        &[2.82431003446478, -0.383465227441357, 1.08061057843656],
        1e-9,
    );
    let l: Vec<f64> = ev
        .constraint(s.contacts[0])
        .unwrap()
        .multipliers_of(0)
        .unwrap()
        .iter()
        .map(|l| -l)
        .collect();
    assert_all_close(
        "lambda_rbdl",
        &l,
        &[0.577622487794113, 8.05678640227445, 1.34934126213606],
        1e-9,
    );
}

const Q_QUAT: [f64; 4] = [
    0.939372712847379,
    0.0916432938695913,
    0.183286587739183,
    0.274929881608774,
];
const Q_ORIGIN: [f64; 3] = [0.231047052335367, -0.365720597983117, 0.316798047876956];
const Q_POINT: [f64; 3] = [0.05, -0.1, -0.3];

fn q_case(
    com: [f64; 3],
    v_o: [f64; 3],
    normals: &[[f64; 3]],
    baumgarte: Option<f64>,
) -> (Rbdl, Matrix3<f64>) {
    let r = rotation_from_quaternion(&Q_QUAT).unwrap();
    let w = r * Vector3::new(0.3, -0.5, 0.8);
    let c = PointToGround::new(BodyId::new(1), Q_POINT, normals).unwrap();
    let s = rbdl_body(
        2.0,
        [0.1, 0.2, 0.3, 0.0, 0.0, 0.0],
        com,
        [0.0, 0.0, -9.81],
        pose(Q_QUAT, Q_ORIGIN),
        [w.x, w.y, w.z, v_o[0], v_o[1], v_o[2]],
        vec![c],
        baumgarte,
    );
    (s, r)
}

#[test]
fn q1_sticking_contact() {
    let (s, r) = q_case(
        [0.0; 3],
        [-0.115022504059899, -0.235047842949794, 0.0367060633198293],
        &XYZ,
        None,
    );
    let sys = s.batch.instance_system(0).unwrap();
    // The point sits at (0.2, −0.4, 0) and is at rest.
    let ce_pt = s.batch.evaluate();
    let ce = ce_pt.constraint(s.contacts[0]).unwrap();
    assert_all_close(
        "contact point",
        &ce.contact_point.as_ref().unwrap()[0],
        &[0.2, -0.4, 0.0],
        1e-12,
    );
    assert_all_close("verr", ce.velocity_errors_of(0).unwrap(), &[0.0; 3], 1e-12);
    assert_all_close(
        "gamma",
        sys.bias.as_slice(),
        &[0.108129829454534, -0.0875102459883495, -0.221536445825945],
        1e-9,
    );
    assert_all_close(
        "qddot",
        &rbdl_qddot(ce_pt.udot_of(0).unwrap(), &r),
        &[
            0.523416116860159,
            0.50145818880254,
            -0.325965437962739,
            -0.797566514003202,
            2.11960435640095,
            -0.434221329978178,
        ],
        1e-9,
    );
    let l: Vec<f64> = ce.multipliers_of(0).unwrap().iter().map(|l| -l).collect();
    assert_all_close(
        "lambda_rbdl",
        &l,
        &[1.04683223372032, 1.00291637760508, 18.9680691240745],
        1e-9,
    );
    let force = ce.contact_force.as_ref().unwrap()[0];
    assert_all_close(
        "body-frame force at the point",
        &body_frame_force(&r, &force),
        &[-4.20584669512874, 5.50636541038846, 17.7166627451686],
        1e-9,
    );
    // Root-frame wrench: the same force, with its moment about the Ground origin.
    let wrench = root_frame_wrench(&ce.contact_point.as_ref().unwrap()[0], &force);
    let moment = Vector3::new(0.2, -0.4, 0.0).cross(&Vector3::from(force));
    assert_all_close(
        "root wrench",
        &wrench,
        &[moment.x, moment.y, moment.z, force[0], force[1], force[2]],
        1e-12,
    );
}

const Q2_QDDOT: [f64; 6] = [
    0.0853853840222278,
    0.0946817796818292,
    -0.543898989844552,
    -6.74826931000824,
    5.41145119264501,
    -1.74198320619304,
];

#[test]
fn q2_frictionless_sliding() {
    let (s, r) = q_case(
        [0.02, 0.03, -0.01],
        [0.584977495940101, -0.535047842949794, 0.0367060633198293],
        &[[0.0, 0.0, 1.0]],
        None,
    );
    let sys = s.batch.instance_system(0).unwrap();
    assert_close("gamma", sys.bias[0], -0.221536445825945, 1e-9);
    let ev = s.batch.evaluate();
    let ce = ev.constraint(s.contacts[0]).unwrap();
    // The point slides at (0.7, −0.3, 0).
    let point_velocity = sys.velocity_errors[0];
    assert_close("normal velocity", point_velocity, 0.0, 1e-12);
    assert_all_close(
        "qddot",
        &rbdl_qddot(ev.udot_of(0).unwrap(), &r),
        &Q2_QDDOT,
        1e-9,
    );
    assert_close(
        "lambda_rbdl",
        -ce.multipliers_of(0).unwrap()[0],
        17.9044139561362,
        1e-9,
    );
}

#[test]
fn q3_baumgarte_on_a_velocity_error() {
    let v_o = [0.584977495940101, -0.535047842949794, -0.463293936680171];
    let (off, r) = q_case([0.02, 0.03, -0.01], v_o, &[[0.0, 0.0, 1.0]], None);
    let ev = off.batch.evaluate();
    assert_close(
        "verr",
        ev.constraint(off.contacts[0])
            .unwrap()
            .velocity_errors_of(0)
            .unwrap()[0],
        -0.5,
        1e-12,
    );
    assert_all_close(
        "qddot off",
        &rbdl_qddot(ev.udot_of(0).unwrap(), &r),
        &Q2_QDDOT,
        1e-9,
    );

    let (on, r) = q_case([0.02, 0.03, -0.01], v_o, &[[0.0, 0.0, 1.0]], Some(0.1));
    let sys = on.batch.instance_system(0).unwrap();
    assert_close("gamma", sys.bias[0], 9.77846355417405, 1e-9);
    let ev = on.batch.evaluate();
    assert_all_close(
        "qddot on",
        &rbdl_qddot(ev.udot_of(0).unwrap(), &r),
        &[
            0.160515832732829,
            0.16295646043724,
            9.12569622828533,
            -14.2020344264116,
            10.8039148547165,
            -3.61055045404439,
        ],
        1e-9,
    );
    let ce = ev.constraint(on.contacts[0]).unwrap();
    assert_close(
        "lambda_rbdl",
        -ce.multipliers_of(0).unwrap()[0],
        36.5740094047916,
        1e-9,
    );
    assert_close(
        "normal point acceleration",
        ce.acceleration_errors_of(0).unwrap()[0],
        10.0,
        1e-9,
    );
    // The per-instance time constant is honoured: T = 0.2 halves α, quarters β².
    let mut b = on.batch.clone();
    b.set_baumgarte_time_constant(on.contacts[0], 0, 0.2)
        .unwrap();
    let ce2 = b.evaluate();
    assert_close(
        "normal point acceleration T=0.2",
        ce2.constraint(on.contacts[0])
            .unwrap()
            .acceleration_errors_of(0)
            .unwrap()[0],
        5.0,
        1e-9,
    );
}

#[test]
fn q_position_level_rows_and_ground_point() {
    // Position-level rows measure from the per-instance ground point; Baumgarte then pulls the
    // point towards it: a = −2α ė − β² e with ė = 0 at rest.
    let r = rotation_from_quaternion(&Q_QUAT).unwrap();
    let c = PointToGround::new(BodyId::new(1), Q_POINT, &[[0.0, 0.0, 1.0]])
        .unwrap()
        .position_level();
    let mut s = rbdl_body(
        2.0,
        [0.1, 0.2, 0.3, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, 0.0, -9.81],
        pose(Q_QUAT, Q_ORIGIN),
        [0.0; 6],
        vec![c],
        Some(0.1),
    );
    s.batch
        .set_param(s.contacts[0], "ground_point", 0, &[0.0, 0.0, -0.01])
        .unwrap();
    let ev = s.batch.evaluate();
    let ce = ev.constraint(s.contacts[0]).unwrap();
    assert_close(
        "position error",
        ce.position_errors_of(0).unwrap()[0],
        0.01,
        1e-12,
    );
    assert_close(
        "normal acceleration",
        ce.acceleration_errors_of(0).unwrap()[0],
        -100.0 * 0.01,
        1e-9,
    );
    let _ = (r, s.body);
}

#[test]
fn r1_redundant_support_unique_udot_and_total_force() {
    let mut contacts = Vec::new();
    for sx in [-0.2, 0.2] {
        for sy in [-0.3, 0.3] {
            contacts.push(
                PointToGround::new(BodyId::new(1), [sx, sy, -0.1], &[[0.0, 0.0, 1.0]]).unwrap(),
            );
        }
    }
    let s = rbdl_body(
        2.0,
        [0.1, 0.2, 0.3, 0.0, 0.0, 0.0],
        [0.0; 3],
        [0.0, 0.0, -9.81],
        pose([1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.1]),
        [0.0; 6],
        contacts,
        None,
    );
    let ev = s.batch.evaluate();
    assert_all_close("udot", ev.udot_of(0).unwrap(), &[0.0; 6], 1e-12);
    let mut total = Vector3::zeros();
    let mut moment = Vector3::zeros();
    for c in &s.contacts {
        let ce = ev.constraint(*c).unwrap();
        let f = Vector3::from(ce.contact_force.as_ref().unwrap()[0]);
        total += f;
        moment += Vector3::from(ce.contact_point.as_ref().unwrap()[0]).cross(&f);
    }
    assert_all_close(
        "total force",
        total.as_slice(),
        &[0.0, 0.0, 2.0 * 9.81],
        1e-12,
    );
    // About the COM (0, 0, 0.1): the contacts balance gravity without a moment.
    let about_com = moment - Vector3::new(0.0, 0.0, 0.1).cross(&total);
    assert_all_close("moment about COM", about_com.as_slice(), &[0.0; 3], 1e-12);
    let _ = s.body;
}
