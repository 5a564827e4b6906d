//! The GPU's one-contact laws (`gpu::contact_laws`, `shaders/contact_laws.wgsl`) against the
//! CPU's (`cpu::unilateral::{solve_modes, impact}`) on random contact spaces of one free body
//! touching one plane: random masses, inertias, orientations and contact points, free
//! accelerations and approach velocities, modes, coefficients and both impact laws. The f64
//! kernel must give the CPU's answers to 1e-9; the f32 kernel the same modes and flags, and the
//! values within f32's reach, on nearly every case (decisions within f32's rounding of a
//! threshold may go either way).

use nalgebra::{DMatrix, DVector, Matrix3, Rotation3, Vector3};
use simbatch::cpu::unilateral::{
    Coefficients, ContactMode, ContactSpace, ImpactContact, ImpactLaw, ModeContact, Tolerances,
    impact, solve_modes,
};
use simbatch::gpu::Precision;
use simbatch::gpu::contact_laws::{LawAnswer, LawCase, LawQuery, solve_contact_laws};

use crate::common::{Lcg, device};

/// `W = G M⁻¹ Gᵀ` of a random free body (mass 0.1–10 kg, a rotated box's inertia) touching at
/// a random point: rows along the world axes of the velocity `v + ω × r` of the point at `r`.
fn random_delassus(rng: &mut Lcg) -> ([[f64; 3]; 3], f64) {
    let mass = rng.range(0.1, 10.0);
    let half = [
        rng.range(0.02, 0.5),
        rng.range(0.02, 0.5),
        rng.range(0.02, 0.5),
    ];
    let [a, b, c] = half.map(|h| h * h);
    let body = Matrix3::from_diagonal(&Vector3::new(b + c, a + c, a + b)) * (mass / 3.0);
    let r = Rotation3::from_euler_angles(
        rng.range(-3.0, 3.0),
        rng.range(-1.5, 1.5),
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
    let point = Vector3::new(
        rng.range(-0.5, 0.5),
        rng.range(-0.5, 0.5),
        rng.range(-0.5, 0.0),
    );
    let mut g = DMatrix::zeros(3, 6);
    for k in 0..3 {
        let axis = Vector3::ith(k, 1.0);
        let rxa = point.cross(&axis);
        for j in 0..3 {
            g[(k, j)] = rxa[j];
            g[(k, 3 + j)] = axis[j];
        }
    }
    let w = &g * m_inv * g.transpose();
    let w = (&w + w.transpose()) * 0.5;
    let mut out = [[0.0; 3]; 3];
    for (i, row) in out.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = w[(i, j)];
        }
    }
    (out, mass)
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

fn random_cases(n: usize, seed: u64, precision: Precision) -> Vec<LawCase> {
    let mut rng = Lcg(seed);
    (0..n)
        .map(|k| {
            let (delassus, mass) = random_delassus(&mut rng);
            let coefficients = random_coefficients(&mut rng);
            let tolerances = match precision {
                Precision::F64 => Tolerances::f64(1e-4, 9.81, mass, 0.0, 0.0),
                Precision::F32 => Tolerances::f32(1e-4, 9.81, mass, 0.0, 0.0),
            };
            let v_roll = tolerances.v_roll;
            let query = if k % 2 == 0 {
                let angle = rng.range(-3.0, 3.0);
                let mode = match rng.next() {
                    p if p < 0.3 => ContactMode::Open,
                    p if p < 0.6 => ContactMode::Stick,
                    _ => ContactMode::Slide {
                        direction: [angle.cos(), angle.sin()],
                    },
                };
                let slip_speed = if rng.next() < 0.5 {
                    rng.range(0.0, 0.9 * v_roll)
                } else {
                    rng.range(2.0 * v_roll, 3.0)
                };
                let slip_angle = rng.range(-3.0, 3.0);
                LawQuery::Modes {
                    free: [
                        rng.range(-10.0, 10.0),
                        rng.range(-10.0, 10.0),
                        rng.range(-20.0, 5.0),
                    ],
                    mode,
                    touching: rng.next() < 0.85,
                    slip: [slip_speed * slip_angle.cos(), slip_speed * slip_angle.sin()],
                }
            } else {
                let velocity = [
                    rng.range(-3.0, 3.0),
                    rng.range(-3.0, 3.0),
                    rng.range(-5.0, 0.5),
                ];
                let energy: f64 = (0..3)
                    .map(|r| 0.5 * velocity[r] * velocity[r] / delassus[r][r])
                    .sum::<f64>()
                    + rng.range(0.0, 5.0);
                LawQuery::Impact {
                    velocity,
                    energy,
                    participates: rng.next() < 0.9,
                    law: if rng.next() < 0.75 {
                        ImpactLaw::Poisson
                    } else {
                        ImpactLaw::Newton
                    },
                }
            };
            LawCase {
                delassus,
                coefficients,
                tolerances,
                query,
            }
        })
        .collect()
}

/// The CPU's answer to a case, in the GPU's terms.
fn cpu_answer(c: &LawCase) -> LawAnswer {
    let w = DMatrix::from_fn(3, 3, |i, j| c.delassus[i][j]);
    let space = ContactSpace::new(w, vec![[0, 1, 2]], vec![]).unwrap();
    match c.query {
        LawQuery::Modes {
            free,
            mode,
            touching,
            slip,
        } => {
            let contact = ModeContact {
                coefficients: c.coefficients,
                mode,
                touching,
                slip,
            };
            let s = solve_modes(
                &space,
                &DVector::from_row_slice(&free),
                &[contact],
                &c.tolerances,
            )
            .unwrap();
            LawAnswer::Modes(simbatch::gpu::contact_laws::ModeAnswer {
                multipliers: [s.multipliers[0], s.multipliers[1], s.multipliers[2]],
                acceleration: [s.acceleration[0], s.acceleration[1], s.acceleration[2]],
                mode: s.modes[0],
                painleve: s.painleve[0],
                mode_cycle: s.mode_cycle,
            })
        }
        LawQuery::Impact {
            velocity,
            energy,
            participates,
            law,
        } => {
            let contact = ImpactContact {
                coefficients: c.coefficients,
                participates,
            };
            let o = impact(
                &space,
                &DVector::from_row_slice(&velocity),
                energy,
                &[contact],
                law,
                &c.tolerances,
            )
            .unwrap();
            LawAnswer::Impact(simbatch::gpu::contact_laws::ImpactAnswer {
                impulse: [o.impulse[0], o.impulse[1], o.impulse[2]],
                velocity: [o.velocity[0], o.velocity[1], o.velocity[2]],
                energy_change: o.energy_change,
                loss: o.losses[0],
                closed: o.closed[0],
                restitution: o.restitution[0],
                friction: o.friction[0],
                jammed: o.jammed[0],
                energy_clamped: o.energy_clamped,
                direction_unconverged: o.direction_unconverged,
                rounds_exhausted: o.rounds_exhausted,
            })
        }
    }
}

/// The largest difference between two answers' values relative to the case's scale, or `None`
/// when their decisions (modes, flags) differ.
fn difference(gpu: &LawAnswer, cpu: &LawAnswer) -> Option<f64> {
    let rel = |a: &[f64], b: &[f64]| {
        let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        a.iter()
            .zip(b)
            .fold(0.0f64, |m, (x, y)| m.max((x - y).abs() / scale))
    };
    match (gpu, cpu) {
        (LawAnswer::Modes(g), LawAnswer::Modes(c)) => {
            let same_mode = match (g.mode, c.mode) {
                (ContactMode::Slide { direction: a }, ContactMode::Slide { direction: b }) => {
                    rel(&a, &b) <= 1e-3
                }
                (a, b) => a == b,
            };
            if !same_mode || g.painleve != c.painleve || g.mode_cycle != c.mode_cycle {
                return None;
            }
            let mut values = c.multipliers.to_vec();
            values.extend(c.acceleration);
            let mut got = g.multipliers.to_vec();
            got.extend(g.acceleration);
            if let (ContactMode::Slide { direction: a }, ContactMode::Slide { direction: b }) =
                (g.mode, c.mode)
            {
                values.extend(b);
                got.extend(a);
            }
            Some(rel(&got, &values))
        }
        (LawAnswer::Impact(g), LawAnswer::Impact(c)) => {
            if g.closed != c.closed
                || g.jammed != c.jammed
                || g.energy_clamped != c.energy_clamped
                || g.direction_unconverged != c.direction_unconverged
                || g.rounds_exhausted != c.rounds_exhausted
                || (g.restitution - c.restitution).abs() > 1e-6
                || (g.friction - c.friction).abs() > 1e-6
            {
                return None;
            }
            let mut values = c.impulse.to_vec();
            values.extend(c.velocity);
            values.extend([c.energy_change, c.loss]);
            let mut got = g.impulse.to_vec();
            got.extend(g.velocity);
            got.extend([g.energy_change, g.loss]);
            Some(rel(&got, &values))
        }
        _ => None,
    }
}

#[test]
fn f64_contact_laws_give_the_cpus_answers() {
    let Some(device) = device() else { return };
    if !device.supports_f64 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI's lavapipe offers SHADER_F64"
        );
        return;
    }
    let cases = random_cases(4000, 7, Precision::F64);
    let started = std::time::Instant::now();
    let gpu = solve_contact_laws(&device, Precision::F64, &cases).unwrap();
    eprintln!(
        "f64 contact laws: {} cases in {:.2?} (kernel build included)",
        cases.len(),
        started.elapsed()
    );
    let mut worst = 0.0f64;
    for (k, (c, g)) in cases.iter().zip(&gpu).enumerate() {
        let cpu = cpu_answer(c);
        match difference(g, &cpu) {
            Some(d) => worst = worst.max(d),
            None => panic!("case {k}: decisions differ\n case {c:?}\n gpu {g:?}\n cpu {cpu:?}"),
        }
        assert!(
            worst <= 1e-9,
            "case {k}: {worst}\n case {c:?}\n gpu {g:?}\n cpu {cpu:?}"
        );
    }
    eprintln!("f64 contact laws: worst relative difference {worst:.1e}");
}

#[test]
fn f32_contact_laws_give_the_cpus_answers_within_f32() {
    let Some(device) = device() else { return };
    let cases = random_cases(4000, 11, Precision::F32);
    let gpu = solve_contact_laws(&device, Precision::F32, &cases).unwrap();
    let (mut differ, mut far, mut worst) = (0, 0, 0.0f64);
    let mut spread = Vec::new();
    for (c, g) in cases.iter().zip(&gpu) {
        match difference(g, &cpu_answer(c)) {
            Some(d) => {
                spread.push(d);
                worst = worst.max(d);
                if d > 1e-3 {
                    far += 1;
                }
            }
            None => {
                differ += 1;
                if differ <= 3 {
                    eprintln!("differ: {g:?}\n  cpu {:?}", cpu_answer(c));
                }
            }
        }
    }
    spread.sort_by(f64::total_cmp);
    let median = spread.get(spread.len() / 2).copied().unwrap_or(0.0);
    eprintln!(
        "f32 contact laws: {differ} of {} decisions differ, {far} answers beyond 1e-3, median {median:.1e}, worst {worst:.1e}",
        cases.len()
    );
    assert!(differ * 200 <= cases.len(), "{differ} decisions differ");
    assert!(far * 100 <= cases.len(), "{far} answers beyond 1e-3");
    assert!(median <= 1e-5, "median {median}");
}

/// An invocation's answer does not depend on the cases beside it: each of 64 cases answered
/// alone gives the bits it gets in a batch. Lavapipe breaks this once the invocations of one
/// SIMD group run more than 65 535 loop iterations in all (gallivm's loop limiter, one counter
/// per shader shared by every loop, ends every loop early, silently); the one-contact laws stay
/// far below it, and this holds them there.
#[test]
fn batched_answers_are_the_answers_alone() {
    let Some(device) = device() else { return };
    let precision = if device.supports_f64 {
        Precision::F64
    } else {
        Precision::F32
    };
    let cases = random_cases(64, 23, precision);
    let batched = solve_contact_laws(&device, precision, &cases).unwrap();
    for (k, c) in cases.iter().enumerate() {
        let alone = solve_contact_laws(&device, precision, std::slice::from_ref(c)).unwrap();
        assert_eq!(alone[0], batched[k], "case {k}: {c:?}");
    }
}
