//! The GPU's several-contact laws (`gpu::contact_laws::general`,
//! `shaders/contact_laws_general.wgsl`, `shaders/contact_phases_general.wgsl`) against the CPU's
//! (`cpu::unilateral::{solve_modes, impact}`) on random contact spaces of the stage-2 kinds:
//! a brick touching its plane at four coplanar corners (12 rows of rank 6: redundant, so the
//! minimum-norm solves decide), two balls on one plane (two bodies), and one body touching at
//! two points beside two bilateral rows (a ball beside a rail). Random masses, inertias,
//! orientations, plane tilts, contact points, free accelerations and approach velocities that
//! rigid motions produce, modes, coefficients and both impact laws. The f64 kernel must give the
//! CPU's decisions on every case and its values to 1e-9; the f32 kernel the same on nearly
//! every case.

use nalgebra::{DMatrix, DVector, Matrix3, Rotation3, Vector3};
use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactSpace, ImpactContact, ImpactLaw, ModeContact, Tolerances,
    impact, solve_modes,
};
use simbatch::gpu::Precision;
use simbatch::gpu::contact_laws::general::{
    GeneralImpactAnswer, GeneralLawAnswer, GeneralLawCase, GeneralLawQuery, GeneralModeAnswer,
    SpaceShape, solve_general_contact_laws,
};

use crate::common::{Lcg, device};

/// `M⁻¹` (6 × 6, angular then linear) of a random box body, and its mass.
fn random_body(rng: &mut Lcg) -> (DMatrix<f64>, f64, [f64; 3], Rotation3<f64>) {
    let mass = rng.range(0.1, 10.0);
    let half = [
        rng.range(0.02, 0.5),
        rng.range(0.02, 0.5),
        rng.range(0.02, 0.5),
    ];
    let [a, b, c] = half.map(|h| h * h);
    let body = Matrix3::from_diagonal(&Vector3::new(b + c, a + c, a + b)) * (mass / 3.0);
    let r = Rotation3::from_euler_angles(
        rng.range(-0.3, 0.3),
        rng.range(-0.3, 0.3),
        rng.range(-3.0, 3.0),
    );
    let inertia = r * body * r.transpose();
    let mut m_inv = DMatrix::zeros(6, 6);
    m_inv
        .view_mut((0, 0), (3, 3))
        .copy_from(&inertia.try_inverse().unwrap());
    for k in 3..6 {
        m_inv[(k, k)] = 1.0 / mass;
    }
    (m_inv, mass, half, r)
}

/// The three rows `(x, y, z)` along the plane axes `axes` (columns) of the velocity of the
/// point at `r` (from the body's centre) of body `body` among `bodies`.
fn contact_rows(r: Vector3<f64>, axes: &Matrix3<f64>, body: usize, bodies: usize) -> DMatrix<f64> {
    let mut g = DMatrix::zeros(3, 6 * bodies);
    for k in 0..3 {
        let axis = axes.column(k).into_owned();
        let rxa = r.cross(&axis);
        for j in 0..3 {
            g[(k, 6 * body + j)] = rxa[j];
            g[(k, 6 * body + 3 + j)] = axis[j];
        }
    }
    g
}

/// A random shape's `G` (rows in canonical order) and `M⁻¹`, and the smallest mass.
fn random_system(rng: &mut Lcg, shape: SpaceShape) -> (DMatrix<f64>, DMatrix<f64>, f64) {
    let tilt = Rotation3::from_euler_angles(rng.range(-0.5, 0.5), rng.range(-0.5, 0.5), 0.0);
    let axes = *tilt.matrix();
    let bodies = if shape.contacts == 2 && shape.bilateral == 0 {
        2
    } else {
        1
    };
    let mut m_inv = DMatrix::zeros(6 * bodies, 6 * bodies);
    let mut g = DMatrix::zeros(shape.rows(), 6 * bodies);
    let mut lightest = f64::INFINITY;
    let mut bricks = Vec::new();
    for b in 0..bodies {
        let (mi, mass, half, r) = random_body(rng);
        m_inv.view_mut((6 * b, 6 * b), (6, 6)).copy_from(&mi);
        lightest = lightest.min(mass);
        bricks.push((half, r));
    }
    for k in 0..shape.contacts {
        let point = if shape.contacts == 4 {
            // The brick's bottom corners, rotated with it about the plane normal.
            let (half, r) = bricks[0];
            let sx = if k % 2 == 0 { 1.0 } else { -1.0 };
            let sy = if k < 2 { 1.0 } else { -1.0 };
            axes * (r * Vector3::new(sx * half[0], sy * half[1], -half[2]))
        } else {
            Vector3::new(
                rng.range(-0.5, 0.5),
                rng.range(-0.5, 0.5),
                rng.range(-0.5, -0.05),
            )
        };
        let body = if bodies == 2 { k } else { 0 };
        g.view_mut((3 * k, 0), (3, 6 * bodies))
            .copy_from(&contact_rows(point, &axes, body, bodies));
    }
    for j in 0..shape.bilateral {
        for c in 0..6 * bodies {
            g[(3 * shape.contacts + j, c)] = rng.range(-1.0, 1.0);
        }
    }
    (g, m_inv, lightest)
}

fn random_coefficients(rng: &mut Lcg) -> Coefficients {
    let mu_dynamic = match rng.next() {
        p if p < 0.1 => 0.0,
        _ => rng.range(0.05, 1.2),
    };
    let mu_static = mu_dynamic + rng.range(0.0, 0.3);
    let restitution = match rng.next() {
        p if p < 0.1 => 0.0,
        p if p < 0.2 => 1.0,
        _ => rng.next(),
    };
    Coefficients::new(restitution, mu_static, mu_dynamic).unwrap()
}

/// `n` random cases of `shape`, modes and impacts alternating.
fn random_cases(
    n: usize,
    seed: u64,
    shape: SpaceShape,
    precision: Precision,
) -> Vec<GeneralLawCase> {
    let mut rng = Lcg(seed);
    let k = shape.contacts;
    (0..n)
        .map(|case| {
            let (g, m_inv, mass) = random_system(&mut rng, shape);
            let w = &g * &m_inv * g.transpose();
            let w = (&w + w.transpose()) * 0.5;
            let coefficients = (0..k).map(|_| random_coefficients(&mut rng)).collect();
            let tolerances = match precision {
                Precision::F64 => Tolerances::f64(1e-4, 9.81, mass, 0.0, 0.0),
                Precision::F32 => Tolerances::f32(1e-4, 9.81, mass, 0.0, 0.0),
            };
            // A rigid motion of the bodies, seen by the rows (a pushed-down one, mostly).
            let motion = |rng: &mut Lcg, down: f64| {
                let mut u = DVector::from_fn(g.ncols(), |_, _| rng.range(-2.0, 2.0));
                for b in 0..g.ncols() / 6 {
                    u[6 * b + 5] -= down;
                }
                &g * u
            };
            let query = if case % 2 == 0 {
                let free = motion(&mut rng, 9.81);
                let velocity = motion(&mut rng, 0.0) * rng.range(0.0, 1.0);
                let modes = (0..k)
                    .map(|_| {
                        let angle = rng.range(-3.0, 3.0);
                        match rng.next() {
                            p if p < 0.2 => ContactMode::Open,
                            p if p < 0.6 => ContactMode::Stick,
                            _ => ContactMode::Slide {
                                direction: [angle.cos(), angle.sin()],
                            },
                        }
                    })
                    .collect();
                GeneralLawQuery::Modes {
                    free: free.iter().copied().collect(),
                    modes,
                    touching: (0..k).map(|_| rng.next() < 0.85).collect(),
                    slips: (0..k)
                        .map(|c| [velocity[3 * c], velocity[3 * c + 1]])
                        .collect(),
                }
            } else {
                let down = rng.range(0.0, 5.0);
                let velocity = motion(&mut rng, down);
                let energy = (0..shape.rows())
                    .map(|r| 0.5 * velocity[r] * velocity[r] / w[(r, r)])
                    .sum::<f64>()
                    + rng.range(0.0, 5.0);
                GeneralLawQuery::Impact {
                    velocity: velocity.iter().copied().collect(),
                    energy,
                    participates: (0..k).map(|_| rng.next() < 0.9).collect(),
                    law: if rng.next() < 0.75 {
                        ImpactLaw::Poisson
                    } else {
                        ImpactLaw::Newton
                    },
                }
            };
            GeneralLawCase {
                delassus: (0..w.nrows())
                    .flat_map(|i| (0..w.ncols()).map(move |j| (i, j)))
                    .map(|(i, j)| w[(i, j)])
                    .collect(),
                coefficients,
                tolerances,
                query,
            }
        })
        .collect()
}

/// The CPU's answer to a case, in the GPU's terms.
fn cpu_answer(shape: SpaceShape, c: &GeneralLawCase) -> GeneralLawAnswer {
    let r = shape.rows();
    let w = DMatrix::from_row_slice(r, r, &c.delassus);
    let contacts = (0..shape.contacts)
        .map(|k| [3 * k, 3 * k + 1, 3 * k + 2])
        .collect();
    let bilateral = (3 * shape.contacts..r).collect();
    let space = ContactSpace::new(w, contacts, bilateral).unwrap();
    match &c.query {
        GeneralLawQuery::Modes {
            free,
            modes,
            touching,
            slips,
        } => {
            let input: Vec<ModeContact> = (0..shape.contacts)
                .map(|k| ModeContact {
                    coefficients: c.coefficients[k],
                    mode: modes[k],
                    touching: touching[k],
                    slip: slips[k],
                })
                .collect();
            let s = solve_modes(
                &space,
                &DVector::from_column_slice(free),
                &input,
                &c.tolerances,
            )
            .unwrap();
            GeneralLawAnswer::Modes(GeneralModeAnswer {
                multipliers: s.multipliers.iter().copied().collect(),
                acceleration: s.acceleration.iter().copied().collect(),
                modes: s.modes,
                painleve: s.painleve,
                mode_cycle: s.mode_cycle,
            })
        }
        GeneralLawQuery::Impact {
            velocity,
            energy,
            participates,
            law,
        } => {
            let input: Vec<ImpactContact> = (0..shape.contacts)
                .map(|k| ImpactContact {
                    coefficients: c.coefficients[k],
                    participates: participates[k],
                })
                .collect();
            let o = impact(
                &space,
                &DVector::from_column_slice(velocity),
                *energy,
                &input,
                *law,
                &c.tolerances,
            )
            .unwrap();
            GeneralLawAnswer::Impact(GeneralImpactAnswer {
                impulse: o.impulse.iter().copied().collect(),
                velocity: o.velocity.iter().copied().collect(),
                energy_change: o.energy_change,
                losses: o.losses,
                closed: o.closed,
                restitution: o.restitution,
                friction: o.friction,
                jammed: o.jammed,
                energy_clamped: o.energy_clamped,
                direction_unconverged: o.direction_unconverged,
                rounds_exhausted: o.rounds_exhausted,
            })
        }
    }
}

/// The largest difference between two answers' values relative to the case's scale, or `None`
/// when their decisions (modes, flags) differ.
fn difference(gpu: &GeneralLawAnswer, cpu: &GeneralLawAnswer) -> Option<f64> {
    let rel = |a: &[f64], b: &[f64]| {
        let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        a.iter()
            .zip(b)
            .fold(0.0f64, |m, (x, y)| m.max((x - y).abs() / scale))
    };
    match (gpu, cpu) {
        (GeneralLawAnswer::Modes(g), GeneralLawAnswer::Modes(c)) => {
            let mut values = c.multipliers.clone();
            values.extend(&c.acceleration);
            let mut got = g.multipliers.clone();
            got.extend(&g.acceleration);
            for (a, b) in g.modes.iter().zip(&c.modes) {
                match (a, b) {
                    (ContactMode::Slide { direction: a }, ContactMode::Slide { direction: b }) => {
                        got.extend(a);
                        values.extend(b);
                    }
                    (a, b) if a == b => {}
                    _ => return None,
                }
            }
            if g.painleve != c.painleve || g.mode_cycle != c.mode_cycle {
                return None;
            }
            Some(rel(&got, &values))
        }
        (GeneralLawAnswer::Impact(g), GeneralLawAnswer::Impact(c)) => {
            // A sliding direction that did not settle within the iteration bound leaves an
            // iterate that depends on every rounding on the way, and whether it settles at the
            // bound's last step does too (one path may settle where the other stops): nothing
            // to compare. The callers count these and require them to be rare.
            if c.direction_unconverged || g.direction_unconverged {
                return Some(0.0);
            }
            if g.closed != c.closed
                || g.jammed != c.jammed
                || g.energy_clamped != c.energy_clamped
                || g.direction_unconverged != c.direction_unconverged
                || g.rounds_exhausted != c.rounds_exhausted
                || rel(&g.restitution, &c.restitution) > 1e-6
                || rel(&g.friction, &c.friction) > 1e-6
            {
                return None;
            }
            let mut values = c.impulse.clone();
            values.extend(&c.velocity);
            values.extend(&c.losses);
            values.push(c.energy_change);
            let mut got = g.impulse.clone();
            got.extend(&g.velocity);
            got.extend(&g.losses);
            got.push(g.energy_change);
            Some(rel(&got, &values))
        }
        _ => None,
    }
}

/// The shapes of stage 2: a brick on four corners, two balls, two contacts beside two
/// bilateral rows.
/// Cases withheld on a software adapter (`SOFTWARE_LOOP_BUDGET`) are the heavy tail, not the
/// rule: the comparison must rest on most of them. On hardware none is withheld.
fn assert_withheld_few(withheld: usize, cases: usize) {
    assert!(
        withheld * 3 <= cases,
        "{withheld} of {cases} cases withheld for lavapipe's loop limit"
    );
}

fn shapes() -> [SpaceShape; 3] {
    [
        SpaceShape::new(4, 0).unwrap(),
        SpaceShape::new(2, 0).unwrap(),
        SpaceShape::new(2, 2).unwrap(),
    ]
}

#[test]
fn f64_several_contact_laws_give_the_cpus_answers() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI's lavapipe offers SHADER_F64"
        );
        return;
    }
    for (s, shape) in shapes().into_iter().enumerate() {
        let cases = random_cases(600, 17 + s as u64, shape, Precision::F64);
        let started = std::time::Instant::now();
        let gpu = solve_general_contact_laws(&device, Precision::F64, shape, &cases).unwrap();
        let elapsed = started.elapsed();
        let mut worst = 0.0f64;
        let (mut impacts, mut sliding, mut clamped, mut unsettled) = (0, 0, 0, 0);
        let mut withheld = 0;
        for (k, (c, g)) in cases.iter().zip(&gpu).enumerate() {
            // Withheld on a software adapter: its loops may have been cut short (the caller
            // answers it on the CPU).
            let Some(g) = g else {
                withheld += 1;
                continue;
            };
            let cpu = cpu_answer(shape, c);
            match (&cpu, difference(g, &cpu)) {
                (_, None) => {
                    panic!(
                        "{shape:?} case {k}: decisions differ\n case {c:?}\n gpu {g:?}\n cpu {cpu:?}"
                    )
                }
                (GeneralLawAnswer::Impact(i), Some(d)) => {
                    impacts += 1;
                    clamped += usize::from(i.energy_clamped);
                    unsettled += usize::from(i.direction_unconverged);
                    worst = worst.max(d);
                }
                (GeneralLawAnswer::Modes(m), Some(d)) => {
                    sliding += m
                        .modes
                        .iter()
                        .filter(|m| matches!(m, ContactMode::Slide { .. }))
                        .count();
                    worst = worst.max(d);
                }
            }
            assert!(
                worst <= 1e-9,
                "{shape:?} case {k}: {worst}\n case {c:?}\n gpu {g:?}\n cpu {cpu:?}"
            );
        }
        eprintln!(
            "f64 laws, {shape:?}: {} cases ({impacts} impacts, {clamped} clamped, {unsettled} with a direction unsettled, {sliding} sliding contacts, {withheld} withheld) in {elapsed:.2?}, worst relative difference {worst:.1e}",
            cases.len()
        );
        assert_withheld_few(withheld, cases.len());
        // Impacts whose slip direction did not settle (frozen after 50 iterations and flagged:
        // two corners sliding along one edge split their friction indeterminately) still
        // compare, the iteration being the same; but most of the comparison must rest on
        // settled ones. Counted over the compared impacts: a software adapter withholds many of
        // the unsettled ones (its loop budget), a hardware one none (an H200 compared 101
        // unsettled of 300 four-contact impacts).
        assert!(
            (impacts - unsettled) * 2 >= impacts,
            "{unsettled} of {impacts} impacts unsettled"
        );
    }
}

#[test]
fn f32_several_contact_laws_give_the_cpus_answers_within_f32() {
    let Some(device) = device() else { return };
    for (s, shape) in shapes().into_iter().enumerate() {
        let cases = random_cases(600, 31 + s as u64, shape, Precision::F32);
        let gpu = solve_general_contact_laws(&device, Precision::F32, shape, &cases).unwrap();
        let (mut differ, mut far, mut withheld) = (0, 0, 0);
        let mut spread = Vec::new();
        for (c, g) in cases.iter().zip(&gpu) {
            let Some(g) = g else {
                withheld += 1;
                continue;
            };
            match difference(g, &cpu_answer(shape, c)) {
                Some(d) => {
                    spread.push(d);
                    if d > 1e-3 {
                        far += 1;
                    }
                }
                None => differ += 1,
            }
        }
        spread.sort_by(f64::total_cmp);
        let median = spread.get(spread.len() / 2).copied().unwrap_or(0.0);
        eprintln!(
            "f32 laws, {shape:?}: {differ} of {} decisions differ, {far} answers beyond 1e-3, median {median:.1e}, {withheld} withheld",
            cases.len()
        );
        assert_withheld_few(withheld, cases.len());
        assert!(differ * 50 <= cases.len(), "{differ} decisions differ");
        assert!(far * 50 <= cases.len(), "{far} answers beyond 1e-3");
        assert!(median <= 1e-4, "median {median}");
    }
}

#[test]
fn cases_of_another_shape_are_refused() {
    let Some(device) = device() else { return };
    let shape = SpaceShape::new(2, 0).unwrap();
    let mut cases = random_cases(2, 3, shape, Precision::F32);
    cases[1].coefficients.pop();
    let e = solve_general_contact_laws(&device, Precision::F32, shape, &cases).unwrap_err();
    assert!(e.to_string().contains("coefficients"), "{e}");
    // A shape built without `SpaceShape::new` (its fields are public) is checked too.
    let unchecked = SpaceShape {
        contacts: 0,
        bilateral: 0,
    };
    let e =
        solve_general_contact_laws(&device, Precision::F32, unchecked, &cases[..1]).unwrap_err();
    assert!(e.to_string().contains("contacts"), "{e}");
}

/// An invocation's answer must not depend on the cases beside it. On lavapipe it does once the
/// invocations of one SIMD group (8 on AVX2) run more than 65 535 loop iterations in all:
/// gallivm's loop limiter (`LP_MAX_TGSI_LOOP_ITERATIONS`, one counter per shader, shared by
/// every loop, never reset) then ends every loop early, silently.
#[test]
fn batched_answers_are_the_answers_alone() {
    let Some(device) = device() else { return };
    let precision = Precision::F64;
    let shape = SpaceShape::new(4, 0).unwrap();
    let all = random_cases(200, 17, shape, precision);
    let cases: Vec<_> = all.iter().skip(1).step_by(2).cloned().collect();
    let gpu = solve_general_contact_laws(&device, precision, shape, &cases).unwrap();
    let mut differ = 0;
    for (k, c) in cases.iter().enumerate() {
        let alone =
            solve_general_contact_laws(&device, precision, shape, std::slice::from_ref(c)).unwrap();
        if alone[0] != gpu[k] {
            differ += 1;
        }
    }
    assert_eq!(
        differ,
        0,
        "{differ} of {} answers depend on their neighbours",
        cases.len()
    );
}
